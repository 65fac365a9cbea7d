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
# # Bounds: how much can any verifier accept?
#
# Three optimisation problems bound every lossless verifier (docs/theory.md §3, 5, 6.6):
#
# 1. one draft, one token: the **maximal coupling**, P(accept) <= sum_v min(p_v, q_v);
# 2. K drafts, one token: the **multi-draft optimal transport**, alpha* = min_H [p(H) + 1 - Q_sub(H)];
# 3. whole drafts or trees: the **information-agnostic LP** over every lossless verifier.
#
# Each has a closed form or a fast exact rule *and* a cvxpy program; here they are checked against
# each other.  Set `SPECSIM_QUICK=1` for small sizes.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import specsim as s
from lp.coupling import (maximal_coupling, multidraft_bound, multidraft_bound_bruteforce,
                         multidraft_lp, union_bound)
from lp.tables import gap_table, specinfer_acceptance, spectr_acceptance
from lp.verification import verification_lp

QUICK = bool(os.environ.get("SPECSIM_QUICK"))
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. Maximal coupling = speculative sampling
# The closed-form plan (what token-level speculative sampling does) and the transport LP agree.

# %%
p, q = rng.dirichlet(np.ones(5)), rng.dirichlet(np.ones(5))
closed, lp_sol = maximal_coupling(p, q), maximal_coupling(p, q, method="lp")
print(f"sum min(p, q) = {closed.value:.12f}; LP optimum = {lp_sol.value:.12f} ({lp_sol.method})")
assert abs(closed.value - lp_sol.value) < 1e-8
assert np.allclose(closed.plan.sum(1), q) and np.allclose(closed.plan.sum(0), p)

# %% [markdown]
# ## 2. Multi-draft acceptance: the sorted-prefix rule
# The dual has an optimum at a token set H; for i.i.d. drafts it is a prefix of the tokens sorted
# by p/q (Algorithm 6.6), so alpha* costs one sort.  Check it against all 2^V subsets and the flow LP.

# %%
for trial in range(3 if QUICK else 10):
    V = int(rng.integers(3, 6))
    K = int(rng.integers(2, V))                  # K < V: otherwise w/o replacement drafts everything
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    for rep in (True, False):
        fast = multidraft_bound(p, q, K, replacement=rep).value
        brute = multidraft_bound_bruteforce(p, q, K, replacement=rep).value
        flow = multidraft_lp(p, q, K, replacement=rep).value
        assert abs(fast - brute) < 1e-12 and abs(fast - flow) < 1e-7, (trial, rep)
    print(f"V={V} K={K}: alpha*_iid = {multidraft_bound(p, q, K).value:.6f}, "
          f"alpha*_wor = {multidraft_bound(p, q, K, replacement=False).value:.6f}  (prefix = brute force = LP)")

# %% [markdown]
# Anchors from docs/theory.md §12.  Sequoia's example: p = (1, 0), q = (1/2, 1/2), K = 2 gives 3/4 with
# replacement and 1 without.  The per-token "union bound" sum_y min(p_y, 1 - (1 - q_y)^K) is *not*
# the optimum: p = (0, 1/2, 1/2), q = (0.8, 0.1, 0.1), K = 2 gives 0.36 vs 0.38.

# %%
print(multidraft_bound([1, 0], [0.5, 0.5], 2).value, multidraft_bound([1, 0], [0.5, 0.5], 2, replacement=False).value)
assert abs(multidraft_bound([1, 0], [0.5, 0.5], 2).value - 0.75) < 1e-12
assert abs(multidraft_bound([1, 0], [0.5, 0.5], 2, replacement=False).value - 1.0) < 1e-12
opt, ub = multidraft_bound([0, .5, .5], [.8, .1, .1], 2), union_bound([0, .5, .5], [.8, .1, .1], 2)
print(f"optimum {opt.value:.4f} (H = {opt.H.tolist()}), union bound {ub:.4f}")
assert abs(opt.value - 0.36) < 1e-12 and abs(ub - 0.38) < 1e-12

# %% [markdown]
# ## Gap table: practical multi-draft verifiers vs the optimum

# %%
p, q = s.random_model(8, seed=0)(()), s.random_model(8, seed=1)(())
table = gap_table(p, q, K_values=(2, 4))
print(table)
assert all(r.acceptance <= r.optimum + 1e-9 for r in table.rows)

# %% [markdown]
# The same pair over K = 1..8 drafts: the two optima, the verifiers with closed forms, and the
# per-token union bound, which is not attainable (it lies above the i.i.d. optimum wherever they differ).

# %%
Ks = np.arange(1, 6 if QUICK else 9)
acc = {
    "optimum, i.i.d. drafts": [multidraft_bound(p, q, K).value for K in Ks],
    "optimum, without replacement": [multidraft_bound(p, q, K, replacement=False).value for K in Ks],
    "SpecTr (K-SEQ)": [spectr_acceptance(p, q, K) for K in Ks],
    "SpecInfer (RRS)": [specinfer_acceptance(p, q, K) for K in Ks],
    "union bound (not attainable)": [union_bound(p, q, K) for K in Ks],
}
for name in ("SpecTr (K-SEQ)", "SpecInfer (RRS)"):
    assert all(a <= b + 1e-12 for a, b in zip(acc[name], acc["optimum, i.i.d. drafts"])), name
fig, ax = plt.subplots(figsize=(6, 4))
for (name, ys), (color, ls, marker) in zip(acc.items(), (("k", "-", "o"), ("k", "--", "D"), ("0.45", "-.", "^"),
                                                          ("0.45", ":", "v"), ("0.7", "-", "x"))):
    ax.plot(Ks, ys, color=color, ls=ls, marker=marker, ms=5, label=name)
ax.set_xticks(Ks)
ax.set_xlabel("number of drafts K")
ax.set_ylabel("acceptance P(some draft accepted)")
ax.set_title(f"Multi-draft acceptance vs the optimum (random pair, V = {p.size})")
ax.grid(alpha=0.3)
ax.legend(fontsize=8, frameon=False)
plt.show()

# %% [markdown]
# ## 3. The information-agnostic LP over whole drafts
# On one path the LP optimum equals block verification (Sun et al., arXiv 2403.10444; Thomas & Pal,
# arXiv 2602.16961).  docs/theory.md §12 anchor: on p = (1/3, 2/3), q = (2/3, 1/3), L = 2, E[tau] = 11/9.

# %%
toy_p, toy_q = s.iid([1 / 3, 2 / 3], "p"), s.iid([2 / 3, 1 / 3], "q")
sol = verification_lp(toy_p, toy_q, L=2)
print(f"LP = {sol.value:.12f}, 11/9 = {11 / 9:.12f}, block = {s.expected_accepted(s.block, toy_p, toy_q, 2):.12f}")
assert abs(sol.value - 11 / 9) < 1e-7
assert s.check_lossless(sol.verifier, toy_p, toy_q, 2, atol=1e-6).lossless   # the LP's optimal verifier

# %% [markdown]
# On a context-dependent random pair, block verification still attains the LP, while the released
# hierarchical rule (a negative control) "beats" it, which only a lossy rule can do.

# %%
target, draft = s.random_model(3, seed=2), s.random_model(3, seed=3)
lengths = (1, 2, 3) if QUICK else (1, 2, 3, 4)
eff = {"LP bound (any lossless verifier)": [], "block": [], "token": [], "hsd_released (lossy)": []}
for L in lengths:
    bound = verification_lp(target, draft, L).value
    bv = s.expected_accepted(s.block, target, draft, L)
    hsd = s.check_lossless(s.hsd_released, target, draft, L)
    print(f"L={L}: LP {bound:.6f}  block {bv:.6f}  hsd_released {hsd.expected_accepted:.6f} (lossless: {hsd.lossless})")
    assert abs(bound - bv) < 1e-7
    for name, value in zip(eff, (bound, bv, s.expected_accepted(s.token, target, draft, L), hsd.expected_accepted)):
        eff[name].append(value + 1)

# %% [markdown]
# Each verifier's block efficiency (tokens per target call, E[tau] + 1) minus the LP bound, against the
# draft length: block verification sits on the bound (0), token-level verification below it, and the
# lossy rule above it, which no lossless verifier can do.

# %%
fig, ax = plt.subplots(figsize=(6, 4))
lp_eff = np.array(eff["LP bound (any lossless verifier)"])
ax.axhline(0.0, color="k", lw=2.5, label="LP bound (any lossless verifier)")
for (name, ys), (color, ls, marker) in zip(list(eff.items())[1:], (("0.3", "--", "s"), ("0.3", ":", "v"),
                                                                   ("0.6", "-.", "^"))):
    ax.plot(lengths, np.array(ys) - lp_eff, color=color, ls=ls, marker=marker, ms=6, label=name)
ax.set_xticks(lengths)
ax.set_xlabel("draft length L (tokens)")
ax.set_ylabel("block efficiency minus the LP bound\n(tokens per target call)")
ax.set_title("Verifiers against the LP bound (random V = 3 pair)")
ax.grid(alpha=0.3)
ax.legend(fontsize=8, frameon=False)
plt.show()
