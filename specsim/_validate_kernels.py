"""Compiled input validation for long probability rows (numba; see :mod:`specsim._jit`).

:func:`specsim._validate.as_distribution` and :func:`~specsim._validate.as_rows` check each entry
(finite, >= 0), sum the row and write ``row / sum + 0.0`` into a fresh array: five numpy passes
over the row.  Here the check and the scaled copy are one pass (:func:`scale_rows`); the sum stays
numpy's pairwise ``sum`` so the rows come out bit-identical to the numpy path.  Which entry is bad
is not reported: on a bad row the numpy code runs and raises its own message.

Signature fixed (float64 C-contiguous 2-D arrays; a 1-D row goes in as a (1, V) view) so the
kernel compiles once: ~0.5 s on the first call of a process without numba's on-disk cache.
"""
from __future__ import annotations

import numpy as np

from specsim._jit import njit


@njit
def scale_rows(a, sums, out):
    """out[i] = a[i] / sums[i] + 0.0 row by row (the + 0.0 turns -0.0 into +0.0, as numpy's
    ``out += 0.0``); True iff every entry of ``a`` is finite and >= 0.  ``out`` may be ``a``.
    The caller makes sure every ``sums[i]`` is finite and > 0."""
    ok = True
    inf = np.inf
    for r in range(a.shape[0]):
        s = sums[r]
        good = True
        for i in range(a.shape[1]):
            x = a[r, i]
            good &= (x >= 0.0) & (x < inf)       # NaN fails both (no branch: the loop vectorises)
            out[r, i] = x / s + 0.0
        ok &= good
    return ok
