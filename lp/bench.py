"""Benchmark: ``python -m lp.bench``.

1. ``multidraft_bound`` at a real vocabulary size (V = 151,936, Qwen2) for K = 2, 3, 4, 8, with and
   without replacement, against one ``np.argsort`` of a float64 vector of that size measured in
   the same run (targets: within 3x with replacement, within 20x without).
2. The flow LP ``multidraft_lp`` (K = 2) at growing V until a solve exceeds ~10 s (the largest V
   under 30 s), and its time ratio to ``multidraft_bound`` on the same instance.
3. The information-agnostic LP (``verification_lp``) at V = 2, L = 6 and V = 3, L = 4.

Times are the median of repeats (wall clock); ratios are against baselines from the same run.
The pair is LLM-like: target logits 3 N(0, 1), draft logits 0.8 x target + N(0, 1).
"""
from __future__ import annotations

import os
import platform
import sys
import time

import numpy as np

from .coupling import multidraft_bound, multidraft_lp
from .verification import verification_lp


def _median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def llm_like_pair(V: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) with softmax(3 z) and softmax(0.8 * 3 z + e), z, e ~ N(0, 1) i.i.d."""
    rng = np.random.default_rng(seed)
    logits = 3.0 * rng.standard_normal(V)
    p = np.exp(logits - logits.max())
    q = np.exp(0.8 * logits + rng.standard_normal(V))
    return p / p.sum(), q / q.sum()


def main(V: int = 151_936, repeats: int = 5) -> None:
    print(f"lp.bench on {platform.platform()}, Python {platform.python_version()}, "
          f"numpy {np.__version__}, {os.cpu_count()} CPUs; command: python -m lp.bench")
    p, q = llm_like_pair(V)
    x = np.random.default_rng(1).random(V)
    base = _median_time(lambda: np.argsort(x), 2 * repeats + 1)
    print(f"\n[1] multidraft_bound at V = {V:,}; baseline np.argsort(float64[{V}]) = {1e3 * base:.2f} ms")
    print(f"{'K':>3} {'drafts':<10}{'alpha*':>12}{'ms':>10}{'x argsort':>11}{'target':>8}")
    for K in (2, 3, 4, 8):
        for rep in (True, False):
            val = multidraft_bound(p, q, K, rep).value
            t = _median_time(lambda: multidraft_bound(p, q, K, rep), repeats if K == 2 or rep else 3)
            print(f"{K:>3} {'iid' if rep else 'w/o repl':<10}{val:>12.8f}{1e3 * t:>10.2f}{t / base:>11.1f}"
                  f"{'3x' if rep else '20x':>8}")

    print("\n[2] flow LP (multidraft_lp, K = 2, HiGHS) vs multidraft_bound on the same instance")
    print(f"{'V':>5}{'LP s':>10}{'bound ms':>10}{'LP / bound':>12}{'|diff|':>10}")
    for Vs in (25, 50, 100, 150, 200, 300, 400):
        ps, qs = llm_like_pair(Vs, seed=Vs)
        t = time.perf_counter()
        lp = multidraft_lp(ps, qs, 2)
        t_lp = time.perf_counter() - t
        t_b = _median_time(lambda: multidraft_bound(ps, qs, 2), repeats)
        diff = abs(lp.value - multidraft_bound(ps, qs, 2).value)
        print(f"{Vs:>5}{t_lp:>10.2f}{1e3 * t_b:>10.3f}{t_lp / t_b:>12.0f}{diff:>10.1e}")
        if t_lp > 10.0:
            break

    print("\n[3] information-agnostic verification LP (chains, random_model pairs)")
    from specsim import random_model
    for Vv, L in ((2, 6), (3, 4)):
        target, draft = random_model(Vv, 1), random_model(Vv, 2)
        t = time.perf_counter()
        sol = verification_lp(target, draft, L)
        total = time.perf_counter() - t
        print(f"V = {Vv}, L = {L}: {sol.n_variables} variables, {sol.n_constraints} equalities, "
              f"solve {sol.seconds:.3f} s ({sol.solver}), build + solve {total:.3f} s, E[tau]* = {sol.value:.6f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 151_936)
