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
# # When to stop drafting, which policies stay lossless, and speculative cascades
#
# Engines do not draft a fixed number of tokens: transformers stops when the assistant's confidence
# in its token falls below a threshold and grows or shrinks the draft length between iterations;
# llama.cpp stops below `p_min`; SpecDec++ stops when the probability that some drafted token is
# rejected crosses a threshold.  This notebook computes, exactly, how far each rule is from the
# optimal stopping rule, certifies which rules keep the target law, and draws the cost-quality
# frontier of speculative cascades.  The arguments are in docs/theory.md §14.  Set
# `SPECSIM_QUICK=1` for the small sizes CI uses.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from specsim.models import iid, random_model
from specsim.structure import (CostModel, ConfidenceThreshold, EntropyStop, FixedLength, HeuristicSchedule,
                               SpecDecPP, check_policy_lossless, compare_policies, grammar_truncation)
from specsim.structure.cascades import CASCADE_RULES, cascade_report
from specsim.structure.stopping import format_table
from specsim.verifiers import block, token

QUICK = bool(os.environ.get("SPECSIM_QUICK"))
L = 3 if QUICK else 4
#: (line style, marker, grey) for the curves after the first: readable in greyscale
STYLES = [(ls, m, c) for m, ls, c in zip("osD^vxP*+", ["--", "-.", ":", "-"] * 3, ["0.2", "0.45", "0.6"] * 3)]
target, draft_model = random_model(3, 2, 0.7), random_model(3, 1002, 0.7)

# %% [markdown]
# ## Every policy against the optimal stopping rule
# The optimal rule maximises E[tokens] / E[cost] over all rules that decide from the drafted
# prefix (backward induction at a price lambda, Dinkelbach's iteration on lambda; §14.3).  Regret
# is 1 - value / lambda*.  Rows marked * read target rows (an oracle acceptance head).

# %%
policies = [FixedLength(l) for l in range(1, L + 1)] + [
    ConfidenceThreshold(0.4), ConfidenceThreshold(0.75, rule="top"), SpecDecPP(0.5), EntropyStop(1.0),
    HeuristicSchedule()]
cost = CostModel(draft=0.05)
for verifier in (token, block):
    opt, rows = compare_policies(policies, verifier, target, draft_model, L, cost)
    print(f"{verifier.name} verification, draft pass 0.05, flat target call, L = {L}")
    print(format_table(opt, rows), "\n")

# %% [markdown]
# ## Which policies stay lossless
# Each policy becomes a draft process (chains of random length) and the one exact engine
# certifies the verifier on it.  Stopping rules are stopping times of the draft's filtration and
# pass; the grammar-truncation design drops a drawn token because of its value and fails, with
# TV 0.15 on the pair p = (.5, .5, 0), q = (.6, .1, .3) (§14.2).

# %%
for pol in policies[:-1]:
    print(f"{pol.name:<22}", "LOSSLESS" if check_policy_lossless(token, target, draft_model, L, pol).lossless else "LOSSY")
print(check_policy_lossless(token, iid([0.5, 0.5, 0.0]), iid([0.6, 0.1, 0.3]), 1, grammar_truncation()))

# %% [markdown]
# ## Policy value against the cost of a draft pass
# The same policies over a range of draft costs (the figure `fig_draft_stopping`, left panel).

# %%
from paper_figs.fig_draft_stopping import cascade_curves, policy_curves  # noqa: E402

costs = np.linspace(0.0, 0.5, 6 if QUICK else 11)
curves = policy_curves(costs, L=L)
fig, ax = plt.subplots(figsize=(6.5, 4.2))
others = iter(STYLES)
for name, v in curves.items():
    if name == "optimal stopping":
        ax.plot(costs, v, "k-", lw=2.6, label=name)
    else:
        ls, marker, color = next(others)
        ax.plot(costs, v, ls=ls, marker=marker, color=color, ms=5, lw=1.1, label=name)
ax.set_xlabel("cost of a draft pass c (target call = 1)")
ax.set_ylabel("speedup E[tokens] / E[cost]")
ax.set_title(f"Stopping policies against the optimal rule (token SD, L = {L})", fontsize=10)
ax.grid(alpha=0.3)
ax.legend(fontsize=7, frameon=False)
plt.show()

# %% [markdown]
# ## Speculative cascades
# A deferral rule picks, per context, the law pi the verifier samples against: the draft's q or
# the target's p (§14.5).  Exact sequence-level divergence (TV and KL of the completed law over
# V^{L+1}) and the cost per emitted token under the cost model above:

# %%
for name, alpha in (("opt", 0.5), ("diff", 0.2), ("chow", 0.4), ("token_confidence", 0.3)):
    r = cascade_report(CASCADE_RULES[name](alpha), target, draft_model, 2, cost)
    print(f"{r.name:<26} tokens/call {r.tokens:.4f}  cost/token {r.cost_per_token:.4f}  TV {r.tv:.4f}  KL {r.kl:.4f}")

# %%
casc = cascade_curves(8 if QUICK else 20)
fig, ax = plt.subplots(figsize=(6.5, 4.2))
others = iter(STYLES)
for name, (acc, div) in casc.items():
    if name == "exact frontier":
        ax.plot(div, acc, "k-", lw=2.4, label=name)
    else:
        ls, marker, color = next(others)
        ax.plot(div, acc, ls=ls, marker=marker, color=color, ms=4, lw=0.9, label=name)
ax.set_xlabel("mean KL(pi || p) over contexts (nats)")
ax.set_ylabel("mean acceptance per drafted token")
ax.set_title("Speculative cascades against the exact cost-quality frontier", fontsize=10)
ax.grid(alpha=0.3)
ax.legend(fontsize=7, frameon=False)
plt.show()

# %% [markdown]
# ## On SmolLM2
# `python scripts/stopping_smollm2.py` runs the same policies on the stored SmolLM2 chains
# (16 per context and drafter) with prompt-clustered intervals; the optimal rule needs rows off
# the drafted path, so it is bounded from above by a hindsight rule there (§14.6).
