"""Compiled scaling of long probability rows (numba; see :mod:`specsim._jit`).

:func:`specsim._validate.as_distribution`, :func:`~specsim._validate.as_rows` and
:func:`~specsim._validate.as_pair` check each row's numpy ``sum`` (:func:`specsim._validate._row_sum`)
and return ``row / sum + 0.0``; here that copy is one pass (:func:`scale_rows`) instead of numpy's
divide and add, bit for bit the same, and it checks the signs as it reads (the ``min`` the numpy
path takes).

Signature fixed (float64 C-contiguous 2-D arrays; a 1-D row goes in as a (1, V) view) so the
kernel compiles once: ~0.5 s on the first call of a process without numba's on-disk cache.
"""
from __future__ import annotations

from specsim._jit import njit


@njit
def scale_rows(a, sums, out):
    """out[i] = a[i] / sums[i] + 0.0 row by row (the + 0.0 turns -0.0 into +0.0, as numpy's
    ``out += 0.0``); True iff no entry of ``a`` is < 0 (the sign check of rows whose sums were
    checked, :func:`specsim._validate._row_sum`).  ``out`` may be ``a``; the caller makes sure
    every ``sums[i]`` is > 0."""
    ok = True
    for r in range(a.shape[0]):
        s = sums[r]
        good = True
        for i in range(a.shape[1]):
            x = a[r, i]
            good &= x >= 0.0                     # (no branch: the loop vectorises)
            out[r, i] = x / s + 0.0
        ok &= good
    return ok
