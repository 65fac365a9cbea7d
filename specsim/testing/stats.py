"""Power planning and failure reports for the completion chi-square of :mod:`specsim.chisquare`.

The test itself (:func:`goodness_of_fit`, :class:`SubTest`, pooling, detection thresholds and the
completion with target samples) lives in the core module :mod:`specsim.chisquare`, which
:mod:`specsim.montecarlo` uses too; it is re-exported here.  This module adds what the
sampler checks need on top: chi-square distances and predicted power for a known alternative,
sample sizes for a stated power, per-position marginals and the largest residuals of a failed
test.  numpy and scipy only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import as_distribution, check_int
from ..chisquare import (MIN_EXPECTED, SubTest, _check_min_expected, _check_unit, chi_square_power,
                         complete_with_target, detectable_tv, detection_threshold, goodness_of_fit,
                         pool_small_cells)

__all__ = ["SubTest", "MIN_EXPECTED", "goodness_of_fit", "pool_small_cells", "detection_threshold",
           "chi_square_power", "detectable_tv", "chi_square_distance", "predicted_power",
           "samples_for_power", "complete_with_target", "StringCount", "largest_residuals",
           "position_marginals", "multinomial_dispersion"]


def chi_square_distance(c, p) -> float:
    """chi2(c || p) = sum_{v : p_v > 0} (c_v - p_v)^2 / p_v (Pearson's divergence; Cohen's w^2).

    Mass of ``c`` on cells with p_v = 0 is not counted (it is detected outright, see
    :func:`goodness_of_fit`).

    Parameters: ``c``, ``p`` arrays of one shape.

    Returns: a ``float`` >= 0.

    >>> from specsim.testing.stats import chi_square_distance
    >>> round(chi_square_distance([0.6, 0.4], [0.5, 0.5]), 6)
    0.04
    """
    c = np.asarray(c, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    pos = p > 0
    return float(((c[pos] - p[pos]) ** 2 / p[pos]).sum())


def predicted_power(c, p, n: int, level: float, min_expected: float = MIN_EXPECTED) -> float:
    """Approximate probability that :func:`goodness_of_fit` at ``level`` rejects n draws from the
    law ``c`` when it tests them against ``p``.

    The cells with p > 0 are pooled as the test pools them at this n (:func:`pool_small_cells`
    on n p); with df = #groups - 1 and lambda = n chi2(c_pooled || p_pooled) the chi-square part
    rejects with probability ``chi_square_power(df, level, lambda)``; mass m of ``c`` on cells
    with p = 0 is observed with probability 1 - (1 - m)^n.  The larger of the two is returned
    (each alone makes the test reject, so it is a lower bound up to the approximation).

    Parameters: ``c`` (true law), ``p`` (hypothesised law), same 1-D shape; ``n`` (>= 1);
    ``level``; ``min_expected``.

    Returns: the power, a ``float`` in [0, 1].

    >>> from specsim.testing.stats import predicted_power
    >>> round(predicted_power([0.6, 0.4], [0.5, 0.5], 200, 0.01), 3)  # lambda = 200 * 0.04 = 8
    0.6
    >>> round(predicted_power([0.6, 0.4, 0.0], [0.5, 0.25, 0.25], 2, 0.01), 3)  # pooled into one cell
    0.0
    """
    c = np.asarray(c, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    check_int(n, "n", 1)
    _check_unit(level, "level")
    _check_min_expected(min_expected)
    pos = p > 0
    off_support = float(c[~pos].sum())
    hit = 1.0 - (1.0 - min(off_support, 1.0)) ** n
    mass, expected, _ = pool_small_cells(c[pos], p[pos], n, min_expected)
    if expected.size < 2:
        return hit
    probs = expected / n
    lam = n * float(((mass - probs) ** 2 / probs).sum())
    return max(hit, chi_square_power(expected.size - 1, level, lam))


def samples_for_power(pairs, level: float, power: float = 0.99, min_expected: float = MIN_EXPECTED,
                      max_n: int = 10 ** 12) -> float:
    """Smallest n at which at least one of several tests (one ``(c, p)`` pair each, as in
    :func:`predicted_power`) rejects with probability >= ``power``.

    A call that rejects when any of its tests rejects has at least the power of its best test,
    so the search uses max over the pairs of :func:`predicted_power`: doubling from n = 1, then
    bisection (pooling makes the power only roughly monotone in n; the n returned has the power).

    Parameters: ``pairs`` (iterable of ``(c, p)``), ``level`` (of each test), ``power``,
    ``min_expected``, ``max_n`` (search limit).

    Returns: n as a ``float``; ``inf`` when no n <= ``max_n`` reaches the power (e.g. c = p).

    >>> from specsim.testing.stats import samples_for_power
    >>> samples_for_power([([0.6, 0.4], [0.5, 0.5])], 0.01, 0.9)  # lambda*(1, 0.01, 0.9) / 0.04 = 371.9
    372.0
    """
    pairs = [(np.asarray(c, dtype=np.float64), np.asarray(p, dtype=np.float64)) for c, p in pairs]
    _check_unit(level, "level")
    _check_unit(power, "power")
    _check_min_expected(min_expected)
    check_int(max_n, "max_n", 1)

    def enough(n: int) -> bool:
        return max(predicted_power(c, p, n, level, min_expected) for c, p in pairs) >= power

    hi = 1
    while not enough(hi):
        hi *= 2
        if hi > max_n:
            return np.inf
    lo = hi // 2  # not enough at lo (or lo = 0)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if enough(mid) else (mid, hi)
    return float(hi)


def position_marginals(joint: np.ndarray, V: int, L: int) -> list[np.ndarray]:
    """The law of each position of a law over strings: m_k(v) = sum_{z : z_k = v} J(z), k = 1..L+1.

    Parameters: ``joint`` flat over V^{L+1} (base-V codes, first token most significant), ``V``,
    ``L``.

    Returns: a list of L+1 float64 arrays of length V.

    >>> import numpy as np
    >>> from specsim.testing.stats import position_marginals
    >>> [np.round(m, 6).tolist() for m in position_marginals(np.array([0.1, 0.2, 0.3, 0.4]), V=2, L=1)]
    [[0.3, 0.7], [0.4, 0.6]]
    """
    check_int(V, "V", 1)
    check_int(L, "L", 0)
    joint = np.asarray(joint, dtype=np.float64)
    if joint.shape != (V ** (L + 1),):
        raise ValueError(f"joint must be flat of length V**(L+1) = {V ** (L + 1)}, got shape {joint.shape}")
    J = joint.reshape((V,) * (L + 1))
    return [J.sum(axis=tuple(a for a in range(L + 1) if a != k)) for k in range(L + 1)]


@dataclass(frozen=True)
class StringCount:
    """One string of a residual report: ``observed`` count against ``expected`` = n P(z), and the
    standardised residual (observed - expected) / sqrt(expected) (``inf`` when P(z) = 0).

    >>> from specsim.testing.stats import StringCount
    >>> print(StringCount((0, 2), 31, 20.0, 2.46))
    (0, 2): observed 31, expected 20.0 (z = +2.46)
    """

    string: tuple[int, ...]
    observed: int
    expected: float
    residual: float

    def __str__(self) -> str:
        return f"{self.string}: observed {self.observed}, expected {self.expected:.1f} (z = {self.residual:+.2f})"


def largest_residuals(counts, probs, V: int, length: int, k: int = 3):
    """The strings whose counts are furthest above and below expectation, by standardised residual
    r(z) = (N_z - n P(z)) / sqrt(n P(z)), n = sum(counts); a string observed with P(z) = 0 has
    r = +inf and comes first.  Pearson's statistic is sum_z r(z)^2 before pooling, so these are
    the cells that drive a rejection.

    Parameters: ``counts`` (one per string of V^``length``, base-V codes, first token most
    significant), ``probs`` (the hypothesised law, same length), ``V``, ``length``, ``k`` (>= 0,
    strings listed each way).

    Returns: ``(over, under)``, two tuples of at most ``k`` :class:`StringCount` each: the largest
    positive residuals in decreasing order, then the most negative in increasing order (strings
    with residual 0 are never listed).

    >>> import numpy as np
    >>> from specsim.testing.stats import largest_residuals
    >>> over, under = largest_residuals([40, 10, 49, 1], [0.25, 0.25, 0.5, 0.0], V=2, length=2, k=1)
    >>> print(over[0]); print(under[0])
    (1, 1): observed 1, expected 0.0 (z = +inf)
    (0, 1): observed 10, expected 25.0 (z = -3.00)
    """
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    check_int(V, "V", 1)
    check_int(length, "length", 1)
    check_int(k, "k", 0)
    if counts.shape != probs.shape or counts.shape != (V ** length,):
        raise ValueError(f"counts and probs must both be flat of length V**length = {V ** length}, "
                         f"got shapes {counts.shape} and {probs.shape}")
    expected = counts.sum() * probs
    pos = probs > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(pos, (counts - expected) / np.sqrt(np.where(pos, expected, 1.0)),
                     np.where(counts > 0, np.inf, 0.0))

    def item(code):
        s = tuple(int(d) for d in np.unravel_index(int(code), (V,) * length))
        return StringCount(s, int(round(counts[code])), float(expected[code]), float(r[code]))

    order = np.argsort(-r, kind="stable")
    over = tuple(item(c) for c in order[:k] if r[c] > 0)
    under = tuple(item(c) for c in order[::-1][:k] if r[c] < 0)
    return over, under


def multinomial_dispersion(tables, probs) -> tuple[float, float]:
    """How far S count tables spread about their mean, against S independent Multinomial(n, p).

    Each table N (n draws over the cells) gives D = sum_z (N_z - n p_z)^2 / (n (1 - s_2)),
    s_k = sum_z p_z^k.  For n i.i.d. draws X_i of law p, Q = n (1 - s_2) D = |sum_i (e_{X_i} - p)|^2
    has E Q = n (1 - s_2), so E D = 1 exactly, and (the n diagonal terms |e_X - p|^2 = 1 - 2 p_X
    + s_2, independent of the n (n - 1) cross terms, which are uncorrelated)

        Var Q = 4 n (s_3 - s_2^2) + 2 n (n - 1) (s_2 - 2 s_3 + s_2^2).

    Draws that are dependent within a table raise E D (k copies of each draw: E D about k), as
    do draws of a law c != p (E D = 1 + (n - 1) |c - p|^2 / (1 - s_2) + O(|c - p|)), so
    (mean D - 1) / sd is a check that the tables are what a multinomial test assumes.

    Parameters: ``tables`` (S x cells non-negative integer counts, every row summing to one
    n >= 1); ``probs`` (the law p over the cells, not a point mass).

    Returns: ``(mean D over the tables, its standard deviation under the null, sqrt(Var Q / S) /
    (n (1 - s_2)))``.

    >>> import numpy as np
    >>> from specsim.testing.stats import multinomial_dispersion
    >>> p = np.array([0.5, 0.3, 0.2])
    >>> d, sd = multinomial_dispersion(np.random.default_rng(0).multinomial(50, p, size=400), p)
    >>> abs(d - 1) < 4 * sd
    True
    >>> d, sd = multinomial_dispersion(2 * np.random.default_rng(0).multinomial(25, p, size=400), p)
    >>> (d - 1) / sd > 10  # every draw counted twice
    True
    """
    p = as_distribution(probs, "probs")
    N = np.asarray(tables)
    if N.ndim != 2 or N.shape[1] != p.size or N.shape[0] < 1:
        raise ValueError(f"tables must be S x {p.size} counts (one row per table), got shape {N.shape}")
    if not np.issubdtype(N.dtype, np.integer):
        if not (np.issubdtype(N.dtype, np.floating) and np.all(np.isfinite(N)) and np.all(N == np.round(N))):
            raise TypeError("tables must hold integer counts")
    if np.any(N < 0):
        raise ValueError("tables must hold counts >= 0")
    sizes = N.sum(axis=1)
    n = int(sizes[0])
    if n < 1 or np.any(sizes != n):
        raise ValueError(f"every table must hold the same number n >= 1 of draws, got totals "
                         f"{sorted(set(sizes.tolist()))[:4]}")
    s2, s3 = float((p ** 2).sum()), float((p ** 3).sum())
    if s2 >= 1.0:
        raise ValueError("probs is a point mass: every table is n on one cell, D is undefined")
    scale = n * (1.0 - s2)
    D = ((N - n * p) ** 2).sum(axis=1) / scale
    var_q = 4 * n * (s3 - s2 ** 2) + 2 * n * (n - 1) * (s2 - 2 * s3 + s2 ** 2)
    return float(D.mean()), float(np.sqrt(max(var_q, 0.0) / N.shape[0]) / scale)
