"""Exact-engine benchmark: ``python -m specsim.bench``.

Times ``check_lossless(block, ...)`` at V=4, L=6 and V=8, L=4 against a straightforward pure-Python
enumerator written here as the baseline (loop over drafts, dictionary of emitted strings, loop over
every completed sequence z in V^{L+1}), measured in the same run on the same models.  Reports
completed sequences per second (V^{L+1} / time) and the speed-up.  Not a test: timings depend on
the machine; the ratio is what to compare.
"""
from __future__ import annotations

import itertools
import platform
import time

import numpy as np

from .exact import check_lossless
from .models import random_model
from .verifiers.chain import block


def straightforward_max_error(verifier, target, draft, L: int) -> float:
    """max_z |C(z) - P(z)| by the textbook loops of docs/theory.md §2.1 (Algorithm 2.1) (no vectorisation)."""
    V = target.V
    O: dict[tuple, float] = {}
    for x in itertools.product(range(V), repeat=L):
        Qx = 1.0
        for i in range(L):
            Qx *= draft(x[:i])[x[i]]
        if Qx == 0:
            continue
        p = np.array([target(x[:i]) for i in range(L + 1)])
        q = np.array([draft(x[:i]) for i in range(L)])
        for o in verifier.law(x, p, q):
            for y in range(V):
                if o.next_dist[y] > 0:
                    s = x[: o.accepted] + (y,)
                    O[s] = O.get(s, 0.0) + Qx * o.prob * o.next_dist[y]
    worst = 0.0
    for z in itertools.product(range(V), repeat=L + 1):
        C = 0.0
        for k in range(1, L + 2):
            tail = 1.0
            for j in range(k, L + 1):
                tail *= target(z[:j])[z[j]]
            C += O.get(z[:k], 0.0) * tail
        P = 1.0
        for j in range(L + 1):
            P *= target(z[:j])[z[j]]
        worst = max(worst, abs(C - P))
    return worst


def _time(fn, repeat: int = 3) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    print(f"specsim exact-engine benchmark on {platform.machine()} / {platform.processor() or 'cpu'}, "
          f"python {platform.python_version()}; best of 3 after warm-up (model rows cached by both)")
    print(f"{'case':<12}{'engine (s)':>12}{'seq/s':>14}{'baseline (s)':>14}{'seq/s':>14}{'speed-up':>10}{'agree':>8}")
    for V, L in [(4, 6), (8, 4)]:
        t, d = random_model(V, 0), random_model(V, 1)
        cert = check_lossless(block, t, d, L)  # warm-up: tabulates model rows once
        straightforward_max_error(block, t, d, L)
        te = _time(lambda: check_lossless(block, t, d, L))
        tb = _time(lambda: straightforward_max_error(block, t, d, L), repeat=1)
        base_err = straightforward_max_error(block, t, d, L)
        n = V ** (L + 1)
        agree = abs(base_err - cert.max_abs_error) < 1e-12
        print(f"V={V}, L={L:<5}{te:>12.3f}{n / te:>14.0f}{tb:>14.3f}{n / tb:>14.0f}{tb / te:>9.1f}x{str(agree):>8}")


if __name__ == "__main__":
    main()
