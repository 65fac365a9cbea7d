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
# # Which draft tree to build, for which verifier, at which cost
#
# EAGLE-2 and OPT-Tree grow a tree by ranking nodes by the *draft* model's path probability;
# Sequoia picks a shape by a dynamic programme under a position-independent acceptance model.
# This notebook computes, exactly, the best tree under a node budget for each verifier, how far
# the draft-ranked trees are from the best deterministic tree, and what each choice gives in
# tokens per unit cost as a draft pass gets more expensive.  The arguments are in
# docs/theory.md §13; the same tables come from `specsim tree-design`.  Set `SPECSIM_QUICK=1`
# for the small sizes CI uses.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

from specsim.models import random_model
from specsim.structure import CostModel, optimal_tree, search_shapes, sequoia_shape, speed_of_light
from specsim.structure.design import format_tree_design, tree_design
from specsim.verifiers import sequoia

QUICK = bool(os.environ.get("SPECSIM_QUICK"))
budget, L = (4, 2) if QUICK else (6, 3)
target, draft_model = random_model(3, 2, 0.5), random_model(3, 1002, 0.5)

# %% [markdown]
# ## The best tree per verifier, and the heuristics' regret
# For sample-and-match verification of a fixed tree, E[tau] is the sum of the target path
# probabilities of the drafted nodes, so the top-n target paths are the exact optimum (the
# oracle; it reads target rows, so no drafter builds it).  For sampled trees every per-depth
# width vector within the budget is evaluated by the exact engine and the best tokens per unit
# cost is kept.  This is `specsim tree-design` on the pair above.

# %%
report = tree_design(target, draft_model, budget, L, CostModel(draft=0.05))
print(format_tree_design(report))

# %% [markdown]
# ## Regret against the budget
# EAGLE-2 drafts the top-n *draft* paths; OPT-Tree drafts the same ranking but stops growing
# depth when the expected gain of a layer falls below a threshold.  Their regret against the
# oracle, in accepted tokens per step, averaged over toy pairs (the left panel of the figure
# `fig_draft_structure`):

# %%
from paper_figs.fig_draft_structure import REGRET_SEEDS, regret_curves, throughput_curves  # noqa: E402

budgets = [1, 2, 4, 8] if QUICK else [1, 2, 4, 8, 16, 32]
regret = regret_curves(budgets, REGRET_SEEDS[:2] if QUICK else REGRET_SEEDS)
fig, ax = plt.subplots(figsize=(6.5, 4.2))
drafters = list(dict.fromkeys(drafter for drafter, _ in regret))
for (drafter, method), r in regret.items():
    first = drafters.index(drafter) == 0
    ax.plot(budgets, r, color="k" if first else "0.5", ls="-" if first else "--",
            marker="o" if method == "eagle2" else "s", mfc="none" if method == "eagle2" else None,
            ms=8 if method == "eagle2" else 4, label=f"{method}, {drafter}")
ax.set_xscale("log", base=2)
ax.set_xticks(budgets, [str(b) for b in budgets])
ax.set_xlabel("node budget n (drafted nodes)")
ax.set_ylabel("regret vs the oracle tree\n(accepted tokens / step)")
ax.set_title("Draft-ranked trees against the oracle tree", fontsize=10)
ax.grid(alpha=0.3)
ax.legend(fontsize=7, frameon=False)
plt.show()

# %% [markdown]
# ## Throughput against the cost ratio, per verifier
# At each cost c of a draft pass (target call = 1, flat) the shape search is re-run, so each
# point is that verifier's best tree at that c (the right panel of `fig_draft_structure`).

# %%
costs = np.linspace(0.0, 0.5, 4 if QUICK else 11)
speed = throughput_curves(costs, budget, L)
fig, ax = plt.subplots(figsize=(7, 4.4))
styles = iter([(ls, m, c) for m, ls, c in zip("osD^vxP*+h", ["--", "-.", ":"] * 4, ["0.2", "0.45", "0.6", "0.35"] * 3)])
for name, v in speed.items():
    if name.startswith("oracle"):
        ax.plot(costs, v, "k-", lw=2.6, label=name)
    else:
        ls, marker, color = next(styles)
        ax.plot(costs, v, ls=ls, marker=marker, color=color, ms=5, lw=1.0, label=name)
ax.axhline(1.0, color="grey", lw=0.8, ls=":")
ax.set_xlabel("cost of a draft pass c (target call = 1, flat)")
ax.set_ylabel("speedup E[tokens] / E[cost]\nof the best tree")
ax.set_title(f"Best tree per verifier, budget {budget} nodes, depth <= {L}", fontsize=10)
ax.grid(alpha=0.3)
ax.legend(fontsize=7, frameon=False, ncol=2)
plt.show()

# %% [markdown]
# ## Sequoia's DP against the searched optimum, and the Speed-of-Light leading term
# Sequoia's DP returns per-node shapes that the per-depth search does not contain, so the gap
# can have either sign on prefix-dependent rows (§13).  The Speed-of-Light expression of
# arXiv 2512.11718 is its leading term only (the O(1) constant is not stated), shown as an order
# of magnitude next to the oracle's tokens per step.

# %%
dp = sequoia_shape(target, draft_model, budget, L, sequoia)
searched = search_shapes(sequoia, target, draft_model, budget, L)
print(f"Sequoia DP {dp.drafting.name}: exact E[tau] {dp.expected_accepted:.4f} (its model predicts "
      f"{dp.predicted:.4f}); searched optimum {searched.drafting.name}: {searched.expected_accepted:.4f}")
oracle = optimal_tree(target, draft_model, budget, L=L)
print(f"oracle tree, {budget} nodes: E[tau] + 1 = {oracle.tokens_per_step:.4f}; Speed-of-Light leading term at "
      f"P = {budget + 1}: {speed_of_light(target, budget + 1, L):.4f}")
