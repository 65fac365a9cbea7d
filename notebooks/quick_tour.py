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
