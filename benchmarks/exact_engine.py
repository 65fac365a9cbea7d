"""Exact engine: ``check_lossless(block, ...)`` against the textbook loops, in the same run.

Subject: the exact certificate of block verification (docs/theory.md §2, §4) on two
``random_model`` pairs, V = 4, L = 6 and V = 8, L = 4 (``--quick``: V = 3, L = 3).  Baseline:
:func:`straightforward_max_error`, the completion criterion of docs/theory.md §2 written as plain
Python loops over drafts and completed sequences.  Both read the same cached model rows (one
warm-up call tabulates them).  Metrics: completed sequences z in V^(L+1) per second and whether
the two max |C(z) - P(z)| agree to 1e-12.

    python benchmarks/exact_engine.py [--quick] [--json out.json] [--repeats N]
"""
from __future__ import annotations

import itertools

import numpy as np

from specsim.exact import check_lossless
from specsim.models import random_model
from specsim.verifiers.chain import block

from _harness import Run  # this folder (Python puts the script's folder on sys.path)


def straightforward_max_error(verifier, target, draft_model, L: int) -> float:
    """max_z |C(z) - P(z)| over z in V^(L+1) by the textbook loops of docs/theory.md §2 (no vectorisation).

    O(x) = sum over drafts x of Q(x) P(verifier emits x_{1:k} y), then
    C(z) = sum_k O(z_{1:k}) prod_{j >= k} p(z_{j+1} | z_{1:j}) and P(z) = prod_j p(z_{j+1} | z_{1:j}).
    """
    V = target.V
    emitted: dict[tuple, float] = {}
    for x in itertools.product(range(V), repeat=L):
        qx = 1.0
        for i in range(L):
            qx *= draft_model(x[:i])[x[i]]
        if qx == 0:
            continue
        p = np.array([target(x[:i]) for i in range(L + 1)])
        q = np.array([draft_model(x[:i]) for i in range(L)])
        for o in verifier.law(x, p, q):
            for y in range(V):
                if o.next_dist[y] > 0:
                    s = x[: o.accepted] + (y,)
                    emitted[s] = emitted.get(s, 0.0) + qx * o.prob * o.next_dist[y]
    worst = 0.0
    for z in itertools.product(range(V), repeat=L + 1):
        completed = 0.0
        for k in range(1, L + 2):
            tail = 1.0
            for j in range(k, L + 1):
                tail *= target(z[:j])[z[j]]
            completed += emitted.get(z[:k], 0.0) * tail
        pz = 1.0
        for j in range(L + 1):
            pz *= target(z[:j])[z[j]]
        worst = max(worst, abs(completed - pz))
    return worst


def main(argv=None) -> dict:
    run = Run(__file__, __doc__, argv, repeats=5, quick_repeats=2)
    run.banner()
    for V, L in [(3, 3)] if run.quick else [(4, 6), (8, 4)]:
        target, draft_model = random_model(V, 0), random_model(V, 1)
        n = V ** (L + 1)
        case = f"block, V={V}, L={L}"
        params = {"V": V, "L": L, "completed_sequences": n}
        check_lossless(block, target, draft_model, L)  # tabulates the model rows both read
        base, base_err = run.time(case, "textbook loops (baseline)",
                                  lambda: straightforward_max_error(block, target, draft_model, L),
                                  repeats=1, warmup=0, params=params,
                                  metrics=lambda t, err: {"seq_per_s": n / t.median_s})
        run.time(case, "check_lossless", lambda: check_lossless(block, target, draft_model, L),
                 baseline=base, params=params,
                 metrics=lambda t, cert: {"seq_per_s": n / t.median_s,
                                          "agree": abs(cert.max_abs_error - base_err) < 1e-12})
    return run.finish()


if __name__ == "__main__":
    main()
