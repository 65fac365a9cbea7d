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

import numpy as np

import specsim as s
from specsim.drafts import iid_paths, swor_tree, fixed_shape
from specsim.multidraft import multidraft_acceptance
from specsim.verifiers import verifiers_for
from specsim.sequoia_dp import sequoia_tree

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
