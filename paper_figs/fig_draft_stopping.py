"""When to stop drafting, and speculative cascades (exact; docs/theory.md §14).

Left: speedup (tokens per unit cost, in plain-decoding steps) of the optimal stopping rule and of
the drafting policies against the cost c of a draft pass, on a context-dependent toy pair with
token-level speculative sampling and horizon L = 4 (target call flat).  Right: the cost-quality
frontier of speculative cascades over the contexts of a toy pair: mean acceptance against mean
KL(pi || p) for the deferral rules (the paper's OPT, Diff, Chow, token confidence), the package's
lossy rules (lenience, mentored) and the exact frontier (lp.frontier per context, allocated across
contexts by a Lagrange sweep: the best any per-context rule can do at equal mean acceptance).
"""
from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np

from specsim.models import random_model
from specsim.structure import CostModel
from specsim.structure.cascades import CASCADE_RULES, cascade_point
from specsim.structure.policies import ConfidenceThreshold, EntropyStop, FixedLength, HeuristicSchedule, SpecDecPP
from specsim.structure.stopping import optimal_stopping, policy_value
from specsim.verifiers import token
from specsim.verifiers.lossy import lenience, mentored

from ._common import FigureResult, command, main_one

NAME = "fig_draft_stopping"

#: The toy pair of the left panel and the context pair of the right panel.
STOP_PAIR = (3, 0.7, 2, 1002)       # V, concentration, target seed, draft seed
CASCADE_V, CASCADE_SEEDS = 4, (3, 1003)


def policy_curves(costs, L: int = 4):
    """{name: speedups over ``costs``} for the optimal rule and the policies (exact)."""
    V, conc, st, sd = STOP_PAIR
    t, d = random_model(V, st, conc), random_model(V, sd, conc)
    policies = {"fixed L=1": FixedLength(1), "fixed L=2": FixedLength(2), "fixed L=4": FixedLength(4),
                "confidence 0.4 (transformers)": ConfidenceThreshold(0.4),
                "SpecDec++ 0.5 (oracle head)": SpecDecPP(0.5), "entropy 1.0": EntropyStop(1.0),
                "heuristic schedule": HeuristicSchedule()}
    out = {"optimal stopping": []} | {k: [] for k in policies}
    for c in costs:
        cost = CostModel(draft=float(c))
        opt = optimal_stopping(token, t, d, L, cost)
        out["optimal stopping"].append(opt.speedup)
        for k, pol in policies.items():
            out[k].append(policy_value(pol, token, t, d, L, cost, optimum=opt).speedup)
    return {k: np.array(v) for k, v in out.items()}


def _contexts():
    t, d = random_model(CASCADE_V, CASCADE_SEEDS[0], 0.5), random_model(CASCADE_V, CASCADE_SEEDS[1], 0.5)
    ctxs = [()] + [(x,) for x in range(CASCADE_V)]
    return [(t(c), d(c)) for c in ctxs]


def cascade_curves(n: int = 25):
    """Mean (acceptance, KL(pi || p)) over the contexts for each rule family, and the exact frontier."""
    rows = _contexts()
    fams = {"OPT (paper)": ("opt", np.concatenate([[0.0], np.geomspace(0.05, 20, n)])),
            "Diff": ("diff", np.linspace(0.0, 0.6, n)), "Chow": ("chow", np.linspace(0.0, 1.0, n)),
            "token confidence": ("token_confidence", np.linspace(0.0, 0.9, n))}
    out = {}
    for label, (name, params) in fams.items():
        pts = [[cascade_point(CASCADE_RULES[name](a), p, q) for p, q in rows] for a in params]
        out[label] = (np.array([np.mean([x.acceptance for x in r]) for r in pts]),
                      np.array([np.mean([x.kl for x in r]) for r in pts]))
    for label, make in (("lenience", lenience), ("mentored", mentored)):
        params = np.linspace(0.05, 1.0, n)
        pts = [[make(a) for _ in (0,)][0] for a in params]
        acc = np.array([np.mean([v.beta(p, q) for p, q in rows]) for v in pts])
        div = np.array([np.mean([cascade_point(v, p, q).kl for p, q in rows]) for v in pts])
        out[label] = (acc, div)
    out["exact frontier"] = frontier_allocation(rows, n_budget=4 * n)
    return out


def frontier_allocation(rows, n_budget: int = 100):
    """The best mean acceptance at each mean KL budget when each context may use its own budget:
    per context beta_c*(eps) from lp.frontier, then for each multiplier mu every context takes
    argmax_eps beta_c*(eps) - mu eps (the concave hull), summed; returns (acceptance, KL) arrays."""
    from lp.frontier import frontier_curve
    from specsim.divergences import kl

    curves = []
    for p, q in rows:
        top = kl(q, p)
        eps = np.concatenate([[0.0], np.geomspace(max(top, 1e-12) * 1e-4, top, n_budget)])
        curves.append((eps, frontier_curve(p, q, eps, "kl").beta))
    acc, div = [], []
    for mu in np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 200)]):
        picks = [int(np.argmax(b - mu * e)) for e, b in curves]
        acc.append(np.mean([b[i] for (e, b), i in zip(curves, picks)]))
        div.append(np.mean([e[i] for (e, b), i in zip(curves, picks)]))
    order = np.argsort(div)
    return np.array(acc)[order], np.array(div)[order]


def make(quick: bool = False) -> FigureResult:
    costs = np.linspace(0.0, 0.5, 6 if quick else 21)
    curves = policy_curves(costs)
    casc = cascade_curves(8 if quick else 25)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.3))
    # fixed lengths dashed, adaptive policies solid or dash-dot; each with its own marker (greyscale)
    others = iter(zip("osD^vxP*+h", ["--", "--", "--", "-", "-.", "-", "-."] + ["-"] * 3,
                      ["0.25", "0.5", "0.7", "0.25", "0.4", "0.55", "0.7"] + ["0.4"] * 3))
    for k, v in curves.items():
        if k == "optimal stopping":
            ax.plot(costs, v, label=k, color="k", lw=2.4)
        else:
            marker, ls, color = next(others)
            ax.plot(costs, v, label=k, lw=1.2, ls=ls, color=color, marker=marker, ms=4)
    ax.set_xlabel("cost of a draft pass c (target call = 1)")
    ax.set_ylabel("speedup E[tokens] / E[cost]")
    ax.set_title("When to stop drafting (token SD, L = 4, V = 3)", fontsize=10)
    ax.legend(fontsize=7.5, frameon=False)
    ax.grid(alpha=0.3)
    marks = {"OPT (paper)": "o", "Diff": "s", "Chow": "^", "token confidence": "v", "lenience": "x",
             "mentored": "+"}
    for k, (acc, div) in casc.items():
        if k == "exact frontier":
            bx.plot(div, acc, "k-", lw=2.2, label=k + " (lp.frontier)")
        else:
            bx.plot(div, acc, marker=marks[k], ms=4.5, lw=0.8, alpha=0.85, label=k)
    bx.set_xlabel("mean KL(pi || p) over contexts (nats)")
    bx.set_ylabel("mean acceptance per drafted token")
    bx.set_title(f"Speculative cascades vs the exact frontier (V = {CASCADE_V}, 5 contexts)", fontsize=10)
    bx.legend(fontsize=7.5, frameon=False, loc="lower right")
    bx.grid(alpha=0.3)
    fig.tight_layout()
    caption = (f"Left: exact speedup of the optimal stopping rule (Dinkelbach over all stopping rules of the "
               f"draft prefix) and of drafting policies against the draft-pass cost c, token-level speculative "
               f"sampling, horizon L = 4, random_model(3, 2, 0.7) / random_model(3, 1002, 0.7); the transformers "
               f"schedule is its stationary length chain capped at L. Right: mean acceptance vs mean KL(pi||p) "
               f"over the root and depth-1 contexts of random_model(4, 3, 0.5) / random_model(4, 1003, 0.5) for "
               f"speculative-cascade deferral rules (Narasimhan et al., arXiv 2405.19261; formulas from memory), "
               f"lenience and mentored decoding, and the exact frontier (lp.frontier per context, Lagrange "
               f"allocation across contexts). Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
