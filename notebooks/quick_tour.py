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
# # Quick tour of `specsim`
#
# Models, the verifier protocol, exact certificates and Monte Carlo.  Notation and the output
# format (accepted draft tokens, then one more token) are those of docs/theory.md §1.  Set
# `SPECSIM_QUICK=1` for the small sizes CI uses.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import specsim as s
from specsim.montecarlo import estimate

QUICK = bool(os.environ.get("SPECSIM_QUICK"))
V, L = 3, (2 if QUICK else 4)

# %% [markdown]
# ## Models: a prefix maps to a next-token law
# `random_model` draws an independent Dirichlet row for every prefix, so rows differ along the
# draft (identical rows hide whole classes of bugs).

# %%
target = s.random_model(V, seed=0, name="target")
draft = s.random_model(V, seed=1, name="draft")
print(target(()), target((0,)), draft((0,)))

# %% [markdown]
# ## One draft, one exact outcome law
# `block(draft, p, q)` (block verification, docs/theory.md §4) returns every (probability,
# accepted count, law of the next token), its own randomness integrated out.

# %%
x = (0, 2)
p = np.array([target(x[:i]) for i in range(len(x) + 1)])
q = np.array([draft(x[:i]) for i in range(len(x))])
for o in s.block(x, p, q):
    print(f"P = {o.prob:.4f}  keep {o.accepted} tokens, then draw from {np.round(o.next_dist, 4)}")

# %% [markdown]
# ## Certificates: exact losslessness and block efficiency
# `check_lossless` completes every emitted string with target samples and compares the result with
# the target's law of every z in V^(L+1) (docs/theory.md §2); the released hierarchical rule fails.

# %%
for v in (s.token, s.block, s.hsd_released):
    print(s.check_lossless(v, target, draft, L))

# %% [markdown]
# ## Monte Carlo agrees with the exact engine

# %%
mc = estimate(s.block, target, draft, L, n=2000 if QUICK else 20000, rng=0)
exact = s.expected_accepted(s.block, target, draft, L)
print(f"MC E[tau] = {mc.expected_accepted:.4f} +- {mc.expected_accepted_se:.4f}; exact {exact:.4f}")
assert abs(mc.expected_accepted - exact) < 6 * mc.expected_accepted_se

# %% [markdown]
# ## Block efficiency against the draft length
# Tokens emitted per target call, E[tau] + 1, exactly, for L = 1..6 (1..3 quick): token-level speculative
# sampling, block verification (never worse, docs/theory.md §4) and the released hierarchical rule,
# whose extra tokens come from being lossy.  Monte Carlo estimates of block verification sit on
# its exact curve (bars: +-2 standard errors).

# %%
lengths = np.arange(1, 4 if QUICK else 7)
rows = {v.name: [s.expected_accepted(v, target, draft, l) + 1 for l in lengths]
        for v in (s.token, s.block, s.hsd_released)}
mc_runs = [estimate(s.block, target, draft, int(l), n=1000 if QUICK else 10000, rng=1) for l in lengths]
assert all(b >= t - 1e-12 for t, b in zip(rows["token"], rows["block"]))

fig, ax = plt.subplots(figsize=(5.5, 3.8))
styles = {"token": ("k", "-", "o"), "block": ("0.35", "--", "s"), "hsd_released": ("0.6", ":", "^")}
for name, ys in rows.items():
    color, ls, marker = styles[name]
    label = name + (" (lossy: not a valid speed-up)" if name == "hsd_released" else "")
    ax.plot(lengths, ys, color=color, ls=ls, marker=marker, label=label)
ax.errorbar(lengths, [m.expected_accepted + 1 for m in mc_runs], yerr=[2 * m.expected_accepted_se for m in mc_runs],
            fmt="x", color="k", ms=7, capsize=3, label="block, Monte Carlo (+-2 se)")
ax.set_xticks(lengths)
ax.set_xlabel("draft length L (tokens)")
ax.set_ylabel("block efficiency E[tau] + 1\n(tokens per target call)")
ax.set_title(f"Exact block efficiency, random V = {V} pair")
ax.grid(alpha=0.3)
ax.legend(fontsize=8, frameon=False)
plt.show()
