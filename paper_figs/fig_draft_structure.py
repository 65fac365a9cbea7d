"""Which tree to draft (exact; docs/theory.md §13).

Left: regret in accepted tokens per step of the draft-ranked deterministic trees (EAGLE-2's top-n
draft paths, OPT-Tree's depth rule) against the oracle tree (top-n target paths, the exact optimum
for sample-and-match verification) as the node budget n grows, averaged over toy pairs with an
independent drafter and with a strong drafter (q = 0.8 p + 0.2 r).  Right: speedup (tokens per unit
cost, target call = 1) of the best tree of each verifier at a node budget against the cost of a
draft pass: the exhaustive per-depth shape search for each sampled-tree verifier, re-run at every
cost, and the oracle and EAGLE-2 deterministic trees.
"""
from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np

from specsim.models import mix, random_model
from specsim.structure import SAMPLED_VERIFIERS, CostModel, optimal_tree
from specsim.verifiers import TREE_VERIFIERS

from ._common import FigureResult, command, main_one

NAME = "fig_draft_structure"

#: Left panel: vocabulary, Dirichlet concentration, seeds (target seed s, drafter seed s + 1000).
REGRET_V, REGRET_CONC, REGRET_SEEDS = 4, 0.5, (0, 1, 2, 3, 4, 5, 6, 7)
#: Right panel: the pair random_model(V, seed_t, conc) / random_model(V, seed_d, conc).
COST_PAIR = (3, 0.5, 2, 1002)      # V, concentration, target seed, draft seed


def _drafters(seed: int):
    t = random_model(REGRET_V, seed, REGRET_CONC)
    other = random_model(REGRET_V, seed + 1000, REGRET_CONC)
    return t, {"independent drafter": other, "strong drafter (0.8 p + 0.2 r)": mix(t, other, 0.2)}


def regret_curves(budgets, seeds=REGRET_SEEDS, L: int = 8, threshold: float = 0.5):
    """{(drafter, method): mean regret over ``seeds`` at each budget} for EAGLE-2 and OPT-Tree (exact)."""
    out: dict = {}
    for s in seeds:
        t, drafters = _drafters(s)
        for label, d in drafters.items():
            for method in ("eagle2", "opt_tree"):
                r = [optimal_tree(t, d, n, L=L, method=method, threshold=threshold).regret for n in budgets]
                out.setdefault((label, method), []).append(r)
    return {k: np.mean(v, axis=0) for k, v in out.items()}


def throughput_curves(costs, budget: int = 6, L: int = 3, verifiers=SAMPLED_VERIFIERS):
    """{name: speedup of the best tree at each draft-pass cost}: each sampled verifier's searched
    optimum (max tokens per cost), the oracle and EAGLE-2 deterministic trees (exact)."""
    V, conc, st, sd = COST_PAIR
    t, d = random_model(V, st, conc), random_model(V, sd, conc)
    out = {name: [] for name in ("oracle (deterministic)", "EAGLE-2 (deterministic)", *verifiers)}
    for c in costs:
        cost = CostModel(draft=float(c))
        out["oracle (deterministic)"].append(optimal_tree(t, d, budget, L=L, cost=cost).throughput.speedup)
        out["EAGLE-2 (deterministic)"].append(
            optimal_tree(t, d, budget, L=L, method="eagle2", cost=cost).throughput.speedup)
        for name in verifiers:
            out[name].append(optimal_tree(t, d, budget, TREE_VERIFIERS[name], "sampled", L=L,
                                          cost=cost).throughput.speedup)
    return {k: np.array(v) for k, v in out.items()}


def make(quick: bool = False) -> FigureResult:
    budgets = [1, 2, 4, 8] if quick else [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    seeds = REGRET_SEEDS[:2] if quick else REGRET_SEEDS
    costs = np.linspace(0.0, 0.5, 4 if quick else 11)
    budget, L = (4, 2) if quick else (6, 3)
    regret = regret_curves(budgets, seeds)
    speed = throughput_curves(costs, budget, L)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.6))
    # drafter: black or grey; method: hollow circles on a solid line or small squares on a dashed one
    colors = {"independent drafter": "k", "strong drafter (0.8 p + 0.2 r)": "0.55"}
    for (drafter, method), r in regret.items():
        eagle = method == "eagle2"
        ax.plot(budgets, r, color=colors[drafter], marker="o" if eagle else "s", ms=8 if eagle else 4,
                mfc="none" if eagle else colors[drafter], ls="-" if eagle else "--",
                label=f"{'EAGLE-2' if method == 'eagle2' else 'OPT-Tree (threshold 0.5)'}, {drafter}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.set_xlabel("node budget n (drafted nodes)")
    ax.set_ylabel("regret vs oracle tree (accepted tokens / step)")
    ax.set_title(f"Draft-ranked trees vs the oracle (V = {REGRET_V}, mean of {len(seeds)} pairs)", fontsize=10)
    ax.legend(fontsize=7.5, frameon=False)
    ax.grid(alpha=0.3)
    styles = {"oracle (deterministic)": dict(color="k", lw=2.4), "EAGLE-2 (deterministic)": dict(color="k", lw=1.4,
                                                                                               ls="--")}
    markers = iter("o s ^ v D x + *".split())
    for name, v in speed.items():
        style = styles[name] if name in styles else dict(lw=1.1, marker=next(markers), ms=4)
        bx.plot(costs, v, label=name, **style)
    bx.axhline(1.0, color="grey", lw=0.8, ls=":")
    bx.set_xlabel("cost of a draft pass c (target call = 1, flat)")
    bx.set_ylabel("speedup E[tokens] / E[cost] of the best tree")
    bx.set_title(f"Best tree per verifier, budget {budget}, depth <= {L} (V = {COST_PAIR[0]})", fontsize=10)
    bx.legend(fontsize=7, frameon=False, ncol=2)
    bx.grid(alpha=0.3)
    fig.tight_layout()
    V, conc, st, sd = COST_PAIR
    caption = (f"Left: mean regret (oracle E[tau] - E[tau], accepted tokens per step) of EAGLE-2's top-n draft-path "
               f"tree and of OPT-Tree's depth rule (threshold 0.5, max_depth 10) against the top-n target-path "
               f"tree, the exact optimum for sample-and-match verification (deterministic_children), depth <= 8, "
               f"over random_model({REGRET_V}, s, {REGRET_CONC}) targets, s in {list(seeds)}, with drafter "
               f"r = random_model({REGRET_V}, s + 1000, {REGRET_CONC}) (independent) or 0.8 p + 0.2 r (strong). "
               f"Right: exact speedup of the best tree of each verifier at budget {budget} and depth <= {L} against "
               f"the cost c of a draft pass (flat target call, no overhead), random_model({V}, {st}, {conc}) / "
               f"random_model({V}, {sd}, {conc}); sampled-tree verifiers use the exhaustive per-depth shape "
               f"search (i.i.d. and without-replacement widths) maximising tokens per cost at each c; the "
               f"deterministic oracle reads target rows and bounds any deterministic tree. "
               f"Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
