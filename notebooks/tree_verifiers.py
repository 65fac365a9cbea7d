# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tree and multi-draft verifiers
#
# A *draft process* grows a draft tree from the draft model; a *tree verifier* maps the tree to
# the exact law of what it emits (an accepted root-to-node path plus one token).  The exact engine
# certifies any verifier against any process, and the tree LP (docs/theory.md §5.2) says how far each one
# is from the best lossless verifier for the same drafts.  Set `SPECSIM_QUICK=1` for small sizes.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import specsim as s
from specsim.drafts import iid_paths, swor_tree, fixed_shape
from specsim.multidraft import multidraft_acceptance
from specsim.verifiers import verifiers_for
from specsim.sequoia_dp import sequoia_tree, tree_value

QUICK = bool(os.environ.get("SPECSIM_QUICK"))
V, L = 3, (2 if QUICK else 3)
target = s.random_model(V, seed=0, name="target")   # a fresh Dirichlet row for every prefix
draft = s.random_model(V, seed=1, name="draft")

# %% [markdown]
# ## Draft processes and draft trees
# `iid_paths(K)` draws K independent paths and merges them into a trie; `swor_tree(K)` draws K
# distinct first tokens without replacement (Sequoia).  `enumerate` lists every tree with its
# probability; the probabilities sum to one.

# %%
for proc in (iid_paths(2), swor_tree(2), fixed_shape((2, 2), replacement=False)):
    trees = list(proc.enumerate(target, draft, 2))
    total = sum(pr for pr, _ in trees)
    print(f"{proc.name:>12}: {len(trees):4d} trees, total probability {total:.12f}")
    assert abs(total - 1) < 1e-12

# the tree with the most distinct nodes (two paths that split at the root)
prob, tree = max(iid_paths(2).enumerate(target, draft, 2), key=lambda t: (t[1].num_nodes, t[0]))
print(f"P(tree) = {prob:.4f}")
print("one tree:", "tokens", tree.tokens, "parents", tree.parent, "draws", tree.draws)
print("paths:", [tree.path(i) for i in range(tree.num_nodes)])

# %% [markdown]
# ## One tree, one exact outcome law
# With probability `prob` the verifier keeps the path to node `accepted` and emits one token from
# `next_dist`.  SpecInfer runs recursive rejection sampling over each node's children.

# %%
from specsim.verifiers import specinfer  # noqa: E402

outs = specinfer(tree)
for o in outs:
    print(f"P = {o.prob:.4f}  keep path {tree.path(o.accepted)}  then draw from {np.round(o.next_dist, 4)}")
assert abs(sum(o.prob for o in outs) - 1) < 1e-12

# %% [markdown]
# ## Certify every applicable verifier
# `verifiers_for(process)` lists the verifiers that are valid for that process (negative controls
# included: `gbv_capped` uses a capped key and is lossy).  `check_lossless` enumerates every tree
# and applies the completion criterion of docs/theory.md §2.

# %%
from lp.verification import verification_lp  # noqa: E402

for proc in (iid_paths(2), swor_tree(2)):
    bound = verification_lp(target, draft, L, drafting=proc)
    print(f"\n{proc.name}, L = {L}: tree LP bound E[tau] <= {bound.value:.6f} ({bound.n_drafts} distinct trees)")
    for v in verifiers_for(proc):
        c = s.check_lossless(v, target, draft, L, drafting=proc)
        flag = "lossless" if c.lossless else f"LOSSY (max error {c.max_abs_error:.1e})"
        print(f"  {v.name:>24}: E[tau] = {c.expected_accepted:.6f}  {flag}")
        assert c.lossless == v.lossless, v.name                 # negative controls are flagged
        if c.lossless:
            assert c.expected_accepted <= bound.value + 1e-7    # nobody lossless beats the LP

# %% [markdown]
# ## Distance to the tree LP against the tree width
# K = 1, 2, 3 drafts per step, as K i.i.d. paths (left) or K distinct first tokens (right), at
# L = 2 (3 in the full run): how far each lossless verifier's exact E[tau] falls below the tree LP
# bound for the same draft process (0 = optimal among lossless verifiers; nothing lossless goes below 0).
# At K = 1 both processes draft one path and every verifier is a chain verifier.

# %%
widths = (1, 2, 3)
panels = {"K i.i.d. paths (with replacement)":
          (iid_paths, ("specinfer", "spectr", "khisti_optimal", "traversal_repeats", "gbv")),
          "K distinct first tokens (without replacement)":
          (swor_tree, ("sequoia", "traversal", "deterministic_children"))}
styles = [("k", "--", "s"), ("0.45", "-.", "^"), ("0.3", ":", "v"), ("0.6", "--", "D"), ("0.45", "-", "x")]
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for ax, (title, (make_process, names)) in zip(axes, panels.items()):
    lp_bound = np.array([verification_lp(target, draft, L, drafting=make_process(K)).value for K in widths])
    by_name = {}
    for K in widths:
        applicable = {v.name: v for v in verifiers_for(make_process(K))}
        for name in names:
            by_name.setdefault(name, []).append(
                s.expected_accepted(applicable[name], target, draft, L, drafting=make_process(K)))
    ax.axhline(0.0, color="k", lw=2.5, label="tree LP bound")
    for (name, ys), (color, ls, marker) in zip(by_name.items(), styles):
        shortfall = lp_bound - np.array(ys)
        assert np.all(shortfall >= -1e-7), name
        ax.plot(widths, shortfall, color=color, ls=ls, marker=marker, ms=6, label=name)
    ax.set_xticks(widths)
    ax.set_xlabel("number of drafts K (tree width)")
    ax.set_ylabel("LP bound minus E[tau]\n(accepted tokens per step)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False)
fig.suptitle(f"Tree verifiers against the tree LP, random V = {V} pair, L = {L}")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Published anchors (docs/theory.md §12)
# Sequoia's appendix: p = (1, 0), q = (1/2, 1/2), two drafts.  With replacement SpecInfer accepts
# 3/4; without replacement (Sequoia) both tokens are drafted and acceptance is 1.

# %%
a_specinfer = multidraft_acceptance("specinfer", [1, 0], [0.5, 0.5], 2)
a_sequoia = multidraft_acceptance("sequoia", [1, 0], [0.5, 0.5], 2, replacement=False)
print(a_specinfer, a_sequoia)
assert abs(a_specinfer - 0.75) < 1e-12 and abs(a_sequoia - 1.0) < 1e-12

# %% [markdown]
# ## Choosing a tree shape: Sequoia's dynamic program
# With per-rank acceptance probabilities a = (0.6, 0.2, 0.1), the best m-node tree's expected
# tokens per step (docs/theory.md §12, R12: 1, 1.6, 1.96, 2.176, ...).

# %%
a = (0.6, 0.2, 0.1)
best = [sequoia_tree(a, m) for m in range(1, 5 if QUICK else 9)]
print([round(t.value, 6) for t in best])
print("m = 4 shape:", best[3].shape)
assert abs(best[3].value - 2.176) < 1e-12

def chain(m):                                       # m nodes in one path: ((((),),),) for m = 4
    return () if m == 1 else (chain(m - 1),)


sizes = np.arange(1, 11)
fig, ax = plt.subplots(figsize=(5.5, 3.6))
ax.plot(sizes, [sequoia_tree(a, int(m)).value for m in sizes], "k-o", ms=7, label="best m-node tree (Sequoia DP)")
ax.plot(sizes, [tree_value(chain(int(m)), a) for m in sizes], "--s", color="0.5", label="a chain of m nodes")
ax.set_xticks(sizes)
ax.set_xlabel("tree size m (nodes, root included)")
ax.set_ylabel("expected tokens per step")
ax.set_title("Sequoia's tree DP, per-rank acceptance a = (0.6, 0.2, 0.1)")
ax.grid(alpha=0.3)
ax.legend(fontsize=8, frameon=False)
plt.show()
