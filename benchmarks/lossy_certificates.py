"""Lossy certificates: the frontier and ``certify`` at real vocabulary sizes against one sort.

Subject: the acceptance-vs-divergence frontier (docs/theory.md §9) in TV, KL(pi||p) and KL(p||pi)
at budget 0.05, and the exact certificate ``certify(rule, p, q)`` of every lossy rule (docs/theory.md
§8), at V = 49,152 and 151,936 (``--quick``: 4,096); target <= 50 ms per call.  Baseline: one
``np.sort`` of the V-vector p, measured in the same run.  Then the cvxpy exponential-cone frontier
(Clarabel) at V = 1,000 (``--quick``: 100) against the closed form (the baseline there), with
|beta difference| as the check.  The pair: target logits 3 N(0, 1), draft logits target + N(0, 1).

    python benchmarks/lossy_certificates.py [--quick] [--json out.json] [--repeats N]
"""
from __future__ import annotations

import numpy as np

from lp.certificates import certify
from lp.frontier import frontier, frontier_cvxpy
from specsim.verifiers.lossy import (cactus, consultant_standin, ensemble, fuzzy, lenience, margin_standin,
                                     mentored, topk_accept, typical)

from _harness import Run, llm_like_pair  # this folder (Python puts the script's folder on sys.path)

DIVERGENCES = ("tv", "kl", "kl_reverse")
RULES = (("typical", typical()), ("lenience 0.8", lenience(0.8)), ("mentored 0.6", mentored(0.6)),
         ("cactus 0.05", cactus(0.05)), ("topk_accept 10", topk_accept(10)),
         ("fuzzy 0.3 js_released", fuzzy(0.3)), ("ensemble 0.6 geometric", ensemble(0.6, "geometric")),
         ("margin_standin 0.5", margin_standin(0.5)), ("consultant_standin 1e-4", consultant_standin(1e-4)))


def main(argv=None) -> dict:
    run = Run(__file__, __doc__, argv, repeats=5, quick_repeats=2)
    run.banner()
    for V in (4096,) if run.quick else (49_152, 151_936):
        run.section(f"V = {V:,}: frontier and certify vs one np.sort")
        p, q = llm_like_pair(V, draft_weight=1.0)
        case = f"V={V}"
        base, _ = run.time(case, "np.sort(p) (baseline)", lambda: np.sort(p), params={"V": V})
        for kind in DIVERGENCES:
            run.time(case, f"frontier {kind}, eps=0.05", lambda kind=kind: frontier(p, q, 0.05, kind),
                     baseline=base, params={"V": V, "divergence": kind, "budget": 0.05},
                     metrics=lambda t, f: {"beta": f.beta, "under_50ms": t.median_s <= 0.05})
        for name, rule in RULES:
            run.time(case, f"certify {name}", lambda rule=rule: certify(rule, p, q), baseline=base,
                     params={"V": V, "rule": name},
                     metrics=lambda t, c: {"beta": c.beta, "under_50ms": t.median_s <= 0.05})

    V = 100 if run.quick else 1000
    run.section(f"V = {V:,}: cvxpy exponential-cone frontier vs the closed form")
    p, q = llm_like_pair(V, seed=1, draft_weight=1.0)
    frontier_cvxpy(*llm_like_pair(5), 0.05, "kl")  # loads cvxpy's machinery outside the timings
    for kind in DIVERGENCES:
        case = f"V={V}, {kind}, eps=0.05"
        params = {"V": V, "divergence": kind, "budget": 0.05}
        closed, fast = run.time(case, "closed form (baseline)", lambda kind=kind: frontier(p, q, 0.05, kind),
                                params=params)
        run.time(case, "frontier_cvxpy", lambda kind=kind: frontier_cvxpy(p, q, 0.05, kind), baseline=closed,
                 repeats=1, warmup=0, params=params,
                 metrics=lambda t, ref: {"solver": ref.solver, "abs_beta_diff": abs(ref.beta - fast.beta)})
    return run.finish()


if __name__ == "__main__":
    main()
