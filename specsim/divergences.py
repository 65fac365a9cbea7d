"""Divergences between probability vectors, one spelling each (docs/theory.md §1).

``D(a, b)`` always reads "from a to b" with the first argument weighting the log ratio:

- ``"tv"``: TV(a, b) = (1/2) sum_v |a_v - b_v|;
- ``"kl"``: KL(a || b) = sum_v a_v log(a_v / b_v) (nats; +inf if a_v > 0 = b_v somewhere);
- ``"kl_reverse"``: KL(b || a).

>>> import numpy as np
>>> from specsim.divergences import divergence
>>> a, b = np.array([0.5, 0.5, 0.0]), np.array([0.25, 0.25, 0.5])
>>> round(divergence(a, b, "tv"), 6), round(divergence(a, b, "kl"), 6), divergence(a, b, "kl_reverse")
(0.5, 0.693147, inf)
"""
from __future__ import annotations

import numpy as np

from specsim import _jit

__all__ = ["DIVERGENCES", "kl", "kl_pair", "tv", "divergence"]

#: The divergence kinds accepted everywhere, with the formula each names for ``D(a, b)``.
DIVERGENCES = {"tv": "TV(a, b)", "kl": "KL(a || b)", "kl_reverse": "KL(b || a)"}


def _measures(a, b) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` as float64 vectors of one shape with finite entries >= 0 (sums not
    required: solver output and sub-vectors come here too); ``ValueError`` naming the argument."""
    out = []
    for v, name in ((a, "a"), (b, "b")):
        try:
            x = np.asarray(v, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"divergence: {name} must be a vector of probabilities, got {v!r}") from None
        if x.ndim != 1:
            raise ValueError(f"divergence: {name} must be a 1-D vector, got shape {x.shape}")
        if not np.isfinite(x).all() or (x < 0).any():
            bad = int(np.flatnonzero(~np.isfinite(x) | (x < 0))[0])
            raise ValueError(f"divergence: {name} has entry {float(x[bad])!r} at token {bad}; expected finite and >= 0")
        out.append(x)
    if out[0].shape != out[1].shape:
        raise ValueError(f"divergence: a and b must have the same length, got {out[0].size} and {out[1].size}")
    return out[0], out[1]


def _dot(x: np.ndarray, y: np.ndarray) -> float:
    """sum_v x_v y_v by numpy's pairwise sum (no BLAS threads; see :func:`kl`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.multiply(x, y).sum())


def _log_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(a / b) (b > 0), with log1p((a - b) / b) where the ratio is near 1: log(a / b) carries the
    rounding of a / b (~1e-16 absolute), which is the whole of a divergence of order 1e-16 between
    nearly equal rows (a radius test found p within a certified radius by that noise)."""
    lr = np.divide(a, b)
    near = (lr > 0.5) & (lr < 2.0)
    np.log(lr, out=lr)
    if near.any():
        # both forms over the whole row, then one select: gathering and scattering the near
        # entries (often most of the row) cost 4x more than the extra log1p
        d = np.subtract(a, b)
        d /= b
        np.log1p(d, out=d)
        return np.where(near, d, lr)
    return lr


#: Rows at least this long take the compiled KL pass when numba is there (specsim._jit); shorter
#: rows never import it.
_JIT_MIN = 4096


def _kl_log_sums(x, y, work, k, near, dense, both, far=True):
    """The compiled tail of a KL sum (:func:`kl` on long rows, lp.certificates' KL pair).  ``work`` =
    (logs, lr, d, terms, terms_yx) rows, lr[:k] = x / y and d[:k] = (x - y) / y over the k entries
    with x > 0 (y > 0 there): numpy's vectorised log and log1p of those rows, one compiled pass
    for the products (:func:`specsim._kl_kernels.kl_terms`), numpy's sums of them (on a dense row
    the pass sums them itself in numpy's order, :func:`specsim._kl_kernels.kl_sums`).
    Returns (KL(x||y), -sum y log(x/y) if ``both`` else 0), clipped at 0, or None when a sum is not
    finite (over- or underflowing ratios: the numpy path repairs those).  ``dense``: x > 0
    everywhere (no compaction); ``far`` False: every ratio is near 1, so only log1p is taken."""
    from specsim import _kl_kernels as K

    logs, lr, d, terms, terms_yx = work
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        logs = np.log(lr[:k], out=logs[:k]) if far or not near else logs[:k]   # else never read
        log1ps = np.log1p(d[:k], out=d[:k]) if near else logs
        if dense:                               # the products summed where they are formed
            xy, yx = K.kl_sums(x, y, lr, logs, log1ps, near, both)
            yx = -yx if both else 0.0
        else:
            K.kl_terms(x, y, lr, logs, log1ps, near, both, terms, terms_yx)
            xy = float(terms[:k].sum())
            yx = -float(terms_yx[:k].sum()) if both else 0.0
    return _kl_clip_pair(xy, yx)


def _kl_clip_pair(xy, yx):
    """(xy, yx) clipped at 0, or None when one is not finite (the numpy path repairs those)."""
    if not (np.isfinite(xy) and np.isfinite(yx)):
        return None
    return max(xy, 0.0), max(yx, 0.0)


def _kl_compiled(a: np.ndarray, b: np.ndarray) -> float | None:
    """:func:`kl` of validated rows by the compiled passes (the same value bit for bit), or None
    where the numpy path must decide (over- or underflowing ratios)."""
    from specsim import _kl_kernels as K

    n = a.size
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    work = _jit.work_block("kl", 5, n)
    k, near, nonpos = K.ratio_rows(a, b, work[1], work[2])
    if k == 0:
        return 0.0
    if nonpos:
        return np.inf
    res = _kl_log_sums(a, b, work, k, near, k == n, False)
    return None if res is None else res[0]


def kl(a, b) -> float:
    """KL(a || b) = sum_v a_v log(a_v / b_v) in nats; +inf if a_v > 0 = b_v somewhere (0 log 0 = 0).

    One log over the support of a, vectorised (``scipy.special.rel_entr`` costs ~15x more at
    V ~ 1e5), with rel_entr's conventions.  The sum of a_v log(a_v / b_v) is numpy's pairwise
    sum, not ``np.dot``: a multi-threaded BLAS dot of 150,000 terms took 28 ms instead of 0.03 ms
    on a loaded 2-core machine (its threads wait for cores).

    Parameters: ``a``, ``b`` vectors of one length with finite entries >= 0 (``ValueError``
    naming the argument otherwise; NaN never comes out).

    Returns: a ``float`` >= 0, possibly ``inf``.

    >>> round(kl([0.5, 0.5], [0.9, 0.1]), 6)
    0.510826
    """
    return _kl_rows(*_measures(a, b))


def _kl_rows(a: np.ndarray, b: np.ndarray) -> float:
    """:func:`kl` of rows already checked (float64 vectors of one shape, finite entries >= 0), for
    callers that built them from validated rows."""
    if a.size >= _JIT_MIN and _jit.enabled():
        val = _kl_compiled(a, b)
        if val is not None:
            return val
    if a.size == 0:
        return 0.0
    if a.min() == 0.0:
        pos = a > 0.0
        a, b = a[pos], b[pos]
        if a.size == 0:
            return 0.0
    if b.min() <= 0.0:
        return np.inf
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        lr = _log_ratio(a, b)
        val = _dot(a, lr)
        if not np.isfinite(val):  # a / b over- or underflowed (subnormal entries)
            bad = ~np.isfinite(lr)
            lr[bad] = np.log(a[bad]) - np.log(b[bad])
            val = _dot(a, lr)
    return float(max(val, 0.0))


def kl_pair(a, b) -> tuple[float, float]:
    """(KL(a || b), KL(b || a)) with one log pass where a and b have the same support.

    Both directions use log(a_v / b_v) on the common support, so a certificate that needs both
    pays for one vectorised log instead of two; where the supports differ at least one direction
    is infinite and each is computed by :func:`kl` (same conventions).

    Parameters: as :func:`kl`.  Returns: a pair of ``float`` >= 0, possibly ``inf``.

    >>> [round(x, 6) for x in kl_pair([0.5, 0.5], [0.9, 0.1])], round(kl([0.9, 0.1], [0.5, 0.5]), 6)
    ([0.510826, 0.368064], 0.368064)
    """
    a, b = _measures(a, b)
    sa, sb = a > 0.0, b > 0.0
    if not np.array_equal(sa, sb):
        return kl(a, b), kl(b, a)
    if not sa.all():
        a, b = a[sa], b[sa]
    if a.size == 0:
        return 0.0, 0.0
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        lr = _log_ratio(a, b)
        ab, ba = _dot(a, lr), -_dot(b, lr)
        if not (np.isfinite(ab) and np.isfinite(ba)):     # a / b over- or underflowed (subnormals)
            bad = ~np.isfinite(lr)
            lr[bad] = np.log(a[bad]) - np.log(b[bad])
            ab, ba = _dot(a, lr), -_dot(b, lr)
    return float(max(ab, 0.0)), float(max(ba, 0.0))


def tv(a, b) -> float:
    """TV(a, b) = (1/2) sum_v |a_v - b_v|.

    Parameters: as :func:`kl`.  Returns: a ``float`` in [0, 1] for distributions.

    >>> tv([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    0.5
    """
    d = np.subtract(*_measures(a, b))
    return float(0.5 * np.abs(d, out=d).sum())


def validate_kind(kind: str) -> str:
    """``kind`` if it is one of :data:`DIVERGENCES`, else ``ValueError`` listing them."""
    if not isinstance(kind, str) or kind not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {sorted(DIVERGENCES)}, got {kind!r}")
    return kind


def divergence(a, b, kind: str) -> float:
    """D(a, b) for ``kind`` in :data:`DIVERGENCES` (nats for the KL kinds; may be inf).

    Parameters: ``a``, ``b`` as for :func:`kl`; ``kind`` one of :data:`DIVERGENCES`.

    Returns: a ``float``; ``ValueError`` for an unknown kind or a NaN, negative or mismatched input.

    >>> round(divergence([0.9, 0.1], [0.5, 0.5], "kl_reverse"), 6)
    0.510826
    """
    validate_kind(kind)
    return tv(a, b) if kind == "tv" else kl(a, b) if kind == "kl" else kl(b, a)
