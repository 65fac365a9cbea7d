"""LP bounds: the optimal multi-draft acceptance and the LPs, each against a baseline of the same run.

1. ``multidraft_bound`` (docs/theory.md §6.6) at a real vocabulary size (V = 151,936, Qwen2;
   ``--quick``: 4,096) for K = 2, 3, 4, 8, with and without replacement.  Baseline: one
   ``np.argsort`` of a float64 vector of that size (targets: within 3x with replacement, within
   20x without).
2. The flow LP ``multidraft_lp`` (K = 2, HiGHS) at growing V until a solve exceeds ~10 s.
   Baseline: ``multidraft_bound`` on the same instance; metric: |LP - bound|.
3. The information-agnostic LP ``verification_lp`` (docs/theory.md §5.1) at V = 2, L = 6 and
   V = 3, L = 4.  Baseline: the exact certificate of block verification, whose E[tau] the chain LP
   must equal; metrics: LP size, solver, |LP - block|.

The pair is LLM-like: target logits 3 N(0, 1), draft logits 0.8 x target + N(0, 1).

    python benchmarks/lp_bounds.py [--quick] [--json out.json] [--repeats N]
"""
from __future__ import annotations

import numpy as np

from lp.coupling import multidraft_bound, multidraft_lp
from lp.verification import verification_lp
from specsim.exact import check_lossless
from specsim.models import random_model
from specsim.verifiers.chain import block

from _harness import Run, llm_like_pair  # this folder (Python puts the script's folder on sys.path)


def main(argv=None) -> dict:
    run = Run(__file__, __doc__, argv, repeats=5, quick_repeats=2)
    run.banner()
    V = 4096 if run.quick else 151_936
    p, q = llm_like_pair(V)
    x = np.random.default_rng(1).random(V)

    run.section(f"[1] multidraft_bound at V = {V:,}")
    sort = {"V": V}
    base, _ = run.time(f"V={V}", "np.argsort float64 (baseline)", lambda: np.argsort(x),
                       repeats=2 * run.repeats + 1, params=sort)
    for K in (2, 3, 4, 8):
        for replacement in (True, False):
            slow = not replacement and K > 2 and not run.quick
            run.time(f"V={V}, K={K}", "iid" if replacement else "without replacement",
                     lambda: multidraft_bound(p, q, K, replacement), baseline=base,
                     repeats=min(3, run.repeats) if slow else None,
                     params={"V": V, "K": K, "replacement": replacement},
                     metrics=lambda t, b, rep=replacement: {"alpha": b.value, "target": "3x" if rep else "20x"})

    run.section("[2] flow LP (multidraft_lp, K = 2, HiGHS) vs multidraft_bound on the same instance")
    multidraft_lp(*llm_like_pair(5), 2)  # loads cvxpy's and HiGHS's machinery outside the timings
    for Vs in (25, 50) if run.quick else (25, 50, 100, 150, 200, 300, 400):
        ps, qs = llm_like_pair(Vs, seed=Vs)
        params = {"V": Vs, "K": 2}
        bound, b = run.time(f"V={Vs}", "multidraft_bound (baseline)", lambda: multidraft_bound(ps, qs, 2),
                            params=params, metrics=lambda t, b: {"alpha": b.value})
        row, lp = run.time(f"V={Vs}", "multidraft_lp", lambda: multidraft_lp(ps, qs, 2), baseline=bound,
                           repeats=1, warmup=0, params=params,
                           metrics=lambda t, lp: {"alpha": lp.value, "abs_diff": abs(lp.value - b.value)})
        if row["median_s"] > 10.0:
            break

    run.section("[3] information-agnostic verification LP (chains) vs block verification's certificate")
    for Vv, L in ((2, 3),) if run.quick else ((2, 6), (3, 4)):
        target, draft_model = random_model(Vv, 1), random_model(Vv, 2)
        params = {"V": Vv, "L": L}
        cert_row, cert = run.time(f"V={Vv}, L={L}", "check_lossless(block) (baseline)",
                                  lambda: check_lossless(block, target, draft_model, L), params=params,
                                  metrics=lambda t, c: {"E_tau": c.expected_accepted})
        run.time(f"V={Vv}, L={L}", "verification_lp (build + solve)",
                 lambda: verification_lp(target, draft_model, L), baseline=cert_row, repeats=1, warmup=0,
                 params=params,
                 metrics=lambda t, sol: {"E_tau": sol.value, "abs_diff": abs(sol.value - cert.expected_accepted),
                                         "variables": sol.n_variables, "equalities": sol.n_constraints,
                                         "solve_s": sol.seconds, "solver": sol.solver})
    return run.finish()


if __name__ == "__main__":
    main()
