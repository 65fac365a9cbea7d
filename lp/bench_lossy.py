"""Benchmark: frontier and certificates at real vocabulary sizes.

    python -m lp.bench_lossy [--repeat N]

For V = 49,152 and 151,936 (softmax of Gaussian logits, scale 3, draft = target logits plus
noise) it times :func:`lp.lossy.frontier` in the three divergences and :func:`lp.lossy.certify`
for every rule of ``LOSSY_RULES`` (target: <= 50 ms per call at both sizes), and prints each time
with its ratio to one ``np.sort`` of a V-vector measured in the same run (the baseline).  Then it times :func:`lp.lossy.frontier_cvxpy` (Clarabel) at
V = 1,000 against the closed form.  Times are medians (and minima) over ``--repeat`` calls
after one warm-up call; on a shared machine compare the ``x sort`` ratios.
"""
from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from specsim.verifiers.lossy import (cactus, consultant_standin, ensemble, fuzzy, lenience, margin_standin,
                                     mentored, topk_accept, typical)

from .lossy import certify, frontier, frontier_cvxpy


def _pair(V: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    z = 3.0 * rng.standard_normal(V)
    zq = z + 1.0 * rng.standard_normal(V)
    p = np.exp(z - z.max())
    q = np.exp(zq - zq.max())
    return p / p.sum(), q / q.sum()


def _times(fn, repeat: int) -> tuple[float, float]:
    """(median, min) wall time of ``repeat`` calls after one warm-up call."""
    fn()
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts)), float(np.min(ts))


def _median_time(fn, repeat: int) -> float:
    return _times(fn, repeat)[0]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"numpy {np.__version__}; median of {args.repeat}")
    for V in (49_152, 151_936):
        p, q = _pair(V)
        base = _median_time(lambda: np.sort(p), args.repeat)
        print(f"\nV = {V}: baseline np.sort = {base * 1e3:.2f} ms")
        cases = [(f"frontier tv  eps=0.05", lambda: frontier(p, q, 0.05, "tv")),
                 (f"frontier kl  eps=0.05", lambda: frontier(p, q, 0.05, "kl")),
                 (f"frontier kl_reverse eps=0.05", lambda: frontier(p, q, 0.05, "kl_reverse"))]
        for name, rule in [("typical", typical()), ("lenience 0.8", lenience(0.8)),
                           ("mentored 0.6", mentored(0.6)), ("cactus 0.05", cactus(0.05)),
                           ("topk_accept 10", topk_accept(10)), ("fuzzy 0.3 js_released", fuzzy(0.3)),
                           ("ensemble 0.6 geometric", ensemble(0.6, "geometric")),
                           ("margin_standin 0.5", margin_standin(0.5)),
                           ("consultant_standin 1e-4", consultant_standin(1e-4))]:
            cases.append((f"certify {name}", lambda r=rule: certify(r, p, q)))
        for name, fn in cases:
            t, t_min = _times(fn, args.repeat)
            print(f"  {name:32s} {t * 1e3:8.2f} ms   {t / base:7.1f} x sort   (min {t_min * 1e3:7.2f} ms)")
    V = 1000
    p, q = _pair(V, 1)
    for kind in ("tv", "kl", "kl_reverse"):
        t_fast = _median_time(lambda: frontier(p, q, 0.05, kind), args.repeat)
        t0 = time.perf_counter()
        ref = frontier_cvxpy(p, q, 0.05, kind)
        t_cvx = time.perf_counter() - t0
        gap = abs(ref.beta - frontier(p, q, 0.05, kind).beta)
        print(f"V = {V} {kind:10s}: cvxpy ({ref.solver}) {t_cvx * 1e3:8.1f} ms, closed form {t_fast * 1e3:6.2f} ms "
              f"({t_cvx / t_fast:6.0f} x), |beta difference| = {gap:.1e}")


if __name__ == "__main__":
    main()
