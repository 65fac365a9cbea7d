"""Compiled passes of a KL divergence over long rows (numba; see :mod:`specsim._jit`).

:func:`specsim.divergences.kl` and :func:`lp.certificates.certify` sum x log(x / y) over the
entries with x > 0, the log being log1p((x - y) / y) where the ratio is near 1.  numpy makes that
a chain of ~8 passes with fresh temporaries; here one pass packs the ratios (:func:`ratio_rows`),
numpy takes the logs of the packed rows (its vectorised log is ~6x a scalar libm call), one pass
forms the products (:func:`kl_terms`) and numpy sums them: the same terms in the same order as
the numpy path, so the same value bit for bit.
"""
from __future__ import annotations

from specsim._jit import njit


@njit
def ratio_rows(x, y, lr, d):
    """Over the k entries with x > 0, in order: lr = x / y and d = (x - y) / y (the two arguments of
    divergences._log_ratio).  Returns (k, any entry with 0.5 < x / y < 2, whether y <= 0 on one of
    them).  A row with x > 0 everywhere takes a branch-free loop (it vectorises)."""
    n = x.size
    k = 0
    for i in range(n):
        k += x[i] > 0.0
    near = False
    nonpos = False
    if k == n:
        for i in range(n):
            a, b = x[i], y[i]
            bad = not (b > 0.0)
            nonpos |= bad
            den = 1.0 if bad else b
            v = a / den
            lr[i] = v
            d[i] = (a - b) / den
            near |= (v > 0.5) & (v < 2.0)
        return k, near, nonpos
    k = 0
    for i in range(n):
        a = x[i]
        if a > 0.0:
            b = y[i]
            if b > 0.0:
                v = a / b
                lr[k] = v
                d[k] = (a - b) / b
                if 0.5 < v < 2.0:
                    near = True
            else:                               # the direction is infinite; terms unused
                nonpos = True
                lr[k] = 0.0
                d[k] = 0.0
            k += 1
    return k, near, nonpos


@njit
def kl_terms(x, y, lr, logs, log1ps, near, both, terms, terms_yx, dense):
    """The terms of divergences.kl_pair's sums over the k entries with x > 0, in order:
    terms = x log(x / y) and (with ``both``) terms_yx = y log(x / y), the log being log1p((x - y) / y)
    where 0.5 < x / y < 2 (when ``near``) and log(x / y) elsewhere.  ``lr`` = x / y, ``logs`` =
    log(lr), ``log1ps`` = log1p(d) over those entries (from :func:`ratio_rows` or
    :func:`specsim.verifiers._clip_kernels.out_pass`;
    ``dense``: x > 0 everywhere, no compaction).  Returns k; the caller sums the rows with numpy."""
    if dense:
        k = x.size
        for i in range(k):                      # branch-free (it vectorises)
            v = lr[i]
            t = log1ps[i] if (near & (v > 0.5) & (v < 2.0)) else logs[i]
            terms[i] = x[i] * t
            if both:
                terms_yx[i] = y[i] * t
        return k
    k = 0
    for i in range(x.size):
        a = x[i]
        if a > 0.0:
            v = lr[k]
            t = log1ps[k] if (near and 0.5 < v < 2.0) else logs[k]
            terms[k] = a * t
            if both:
                terms_yx[k] = y[i] * t
            k += 1
    return k
