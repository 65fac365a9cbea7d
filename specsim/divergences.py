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
from scipy.special import rel_entr

__all__ = ["DIVERGENCES", "kl", "tv", "divergence"]

#: The divergence kinds accepted everywhere, with the formula each names for ``D(a, b)``.
DIVERGENCES = {"tv": "TV(a, b)", "kl": "KL(a || b)", "kl_reverse": "KL(b || a)"}


def kl(a, b) -> float:
    """KL(a || b) = sum_v a_v log(a_v / b_v) in nats; +inf if a_v > 0 = b_v somewhere (0 log 0 = 0).

    Two nonnegative vectors of one shape take a vectorised path (one log over the support of a;
    ``scipy.special.rel_entr`` costs ~15x more at V ~ 1e5); anything else goes through
    ``rel_entr``, whose conventions both paths share.

    >>> round(kl([0.5, 0.5], [0.9, 0.1]), 6)
    0.510826
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim == 1 and a.shape == b.shape and a.size:
        amin, bmin = a.min(), b.min()
        if amin >= 0.0 and bmin >= 0.0:
            if amin == 0.0:
                pos = a > 0.0
                a, b = a[pos], b[pos]
                if a.size == 0:
                    return 0.0
                bmin = b.min()
            if bmin <= 0.0:
                return np.inf
            with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
                lr = np.divide(a, b)
                np.log(lr, out=lr)
                val = np.dot(a, lr)
                if not np.isfinite(val):  # a / b over- or underflowed (subnormal entries)
                    bad = ~np.isfinite(lr)
                    lr[bad] = np.log(a[bad]) - np.log(b[bad])
                    val = np.dot(a, lr)
            return float(max(val, 0.0))
    return float(max(rel_entr(a, b).sum(), 0.0))


def tv(a, b) -> float:
    """TV(a, b) = (1/2) sum_v |a_v - b_v|.

    >>> tv([0.5, 0.5, 0.0], [0.25, 0.25, 0.5])
    0.5
    """
    d = np.subtract(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return float(0.5 * np.abs(d, out=d).sum())


def check_kind(kind: str) -> str:
    """``kind`` if it is one of :data:`DIVERGENCES`, else ``ValueError`` listing them."""
    if kind not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {sorted(DIVERGENCES)}, got {kind!r}")
    return kind


def divergence(a, b, kind: str) -> float:
    """D(a, b) for ``kind`` in :data:`DIVERGENCES` (nats for the KL kinds; may be inf).

    >>> round(divergence([0.9, 0.1], [0.5, 0.5], "kl_reverse"), 6)
    0.510826
    """
    check_kind(kind)
    return tv(a, b) if kind == "tv" else kl(a, b) if kind == "kl" else kl(b, a)
