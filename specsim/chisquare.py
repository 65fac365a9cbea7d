"""The completion chi-square: one goodness-of-fit test with a stated false-alarm rate and power.

A sampled iteration emits a string s = x^{1:tau} y; completing it with exact target samples to
length L+1 gives z ~ C, the completed law, and a lossless implementation has C = P, the target's
joint law of its first L+1 tokens (docs/theory.md §2).  The test compares the counts of n
completed strings with n P(z) by Pearson's statistic

    X^2 = sum_cells (N_cell - n P_cell)^2 / (n P_cell),

cells of small expected count pooled (below), and rejects when its chi-square p-value is below
the level: the false-alarm rate is the level (up to the chi-square approximation).

Power.  Under a completed law C != P the statistic is approximately non-central chi-square with
df degrees of freedom and non-centrality n chi2(C || P), chi2(C || P) = sum_z (C(z) - P(z))^2 / P(z)
(Cohen's w^2).  The test at level a rejects with probability ``power`` once that non-centrality
reaches lambda*(df, a, power) (:func:`detection_threshold`).  By Cauchy-Schwarz
chi2(C || P) >= 4 TV(C, P)^2, and pooling loses at most the pooled target mass in TV, so every
completed law with TV(C, P) >= sqrt(lambda* / (4 n)) + pooled mass is detected with at least that
power (:func:`detectable_tv`).  An observation in a cell of target probability 0 is a certain
failure (p-value 0).  For a known alternative C the power at sample size n is predicted on the
table the test will actually use at that n (:func:`predicted_power`): pooling merges cells and
can remove most of the non-centrality when n P is small, so the unpooled n chi2(C || P) would
overstate it.

Used by :func:`specsim.montecarlo.estimate` and :func:`specsim.testing.check_sampler` (whose power
planning lives in :mod:`specsim.testing.stats`).  numpy and scipy only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from ._sampling import draw_rows
from ._validate import check_int, check_real, check_rng

__all__ = ["SubTest", "MIN_EXPECTED", "goodness_of_fit", "pool_small_cells", "detection_threshold",
           "chi_square_power", "detectable_tv", "complete_with_target"]

#: Smallest expected count of a cell of the chi-square test; smaller cells are pooled.
MIN_EXPECTED = 5.0


def _check_unit(value, name: str) -> float:
    """A probability strictly between 0 and 1 (a level or a power)."""
    return check_real(value, name, 0.0, 1.0, lo_open=True, hi_open=True)


def _check_min_expected(value) -> float:
    """The pooling threshold: finite and > 0 (NaN would pool nothing and pass anything)."""
    return check_real(value, "min_expected", 0.0, np.inf, lo_open=True, hi_open=True)


@dataclass(frozen=True)
class SubTest:
    """One chi-square goodness-of-fit test and what it can detect.

    ``statistic`` X^2 on ``df`` degrees of freedom with chi-square ``p_value`` (0 when
    ``impossible`` > 0 observations fell on cells of probability 0); ``level`` the false-alarm
    rate it is compared with; ``pooled_mass`` the probability of the cells pooled to keep
    expected counts >= :data:`MIN_EXPECTED`; ``detectable_tv`` the TV distance (of the tested law
    from the hypothesised one) detected with the stated power at this sample size;
    ``rejected`` = ``impossible > 0 or p_value < level``; ``support`` the number of cells of
    positive probability.  When ``support`` is 1 (a deterministic law, e.g. a greedy target) the
    test is exact: it rejects on any observation off that one cell (``df`` = 0, no chi-square),
    and ``detectable_tv`` = 1 - (1 - power)^(1/n) is the off-cell mass seen with probability
    ``power``.

    >>> from specsim.chisquare import goodness_of_fit
    >>> t = goodness_of_fit([30, 70], [0.5, 0.5], level=0.01)
    >>> t.df, round(t.statistic, 6), t.rejected
    (1, 16.0, True)
    """

    name: str
    statistic: float
    df: int
    p_value: float
    level: float
    pooled_mass: float
    detectable_tv: float
    impossible: int = 0
    support: int = 0

    @property
    def rejected(self) -> bool:
        return self.impossible > 0 or self.p_value < self.level

    @property
    def deterministic(self) -> bool:
        """The hypothesised law puts probability 1 on one cell: the test is "no observation off it"."""
        return self.support == 1


def pool_small_cells(counts, probs, n: int, min_expected: float = MIN_EXPECTED):
    """Pool the cells of smallest expected count n p until every group expects >= ``min_expected``.

    Rule: sort the cells by expected count; every cell below ``min_expected`` joins one pooled
    group, which takes further cells in increasing order until its own expected count reaches
    ``min_expected`` (the whole table when it never does).  Only cells of positive probability
    may be passed.

    Parameters: ``counts`` and ``probs`` (1-D, same length, ``probs`` > 0), ``n`` the sample size,
    ``min_expected``.

    Returns: ``(observed, expected, pooled_mass)``: grouped counts, grouped expected counts (the
    pooled group first, when there is one) and the probability of the pooled cells (0 when
    nothing was merged).

    >>> from specsim.chisquare import pool_small_cells
    >>> obs, exp, mass = pool_small_cells([1, 3, 4, 45, 47], [0.01, 0.02, 0.04, 0.43, 0.5], 100)
    >>> obs.tolist(), [round(e, 6) for e in exp.tolist()], round(mass, 6)
    ([8.0, 45.0, 47.0], [7.0, 43.0, 50.0], 0.07)
    """
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    check_int(n, "n", 0)
    min_expected = _check_min_expected(min_expected)
    expected = probs * n
    order = np.argsort(expected, kind="stable")
    e, c, p = expected[order], counts[order], probs[order]
    k = int(np.searchsorted(e, min_expected))  # cells below the threshold
    if k:
        k = min(max(k, int(np.searchsorted(np.cumsum(e), min_expected)) + 1), e.size)
    if k <= 1:
        return c, e, 0.0
    return (np.concatenate(([c[:k].sum()], c[k:])), np.concatenate(([e[:k].sum()], e[k:])),
            float(p[:k].sum()))


def detection_threshold(df: int, level: float, power: float = 0.99) -> float:
    """lambda*: the non-centrality at which the level-``level`` chi-square test on ``df`` degrees
    of freedom rejects with probability ``power``.

    Solves P(chi2'_df(lambda) > chi2_{df, 1 - level}) = power for lambda (non-central
    chi-square, Brent's method).

    Parameters: ``df`` (>= 1), ``level`` and ``power`` in (0, 1).

    Returns: lambda* as a ``float``.

    >>> from specsim.chisquare import detection_threshold
    >>> round(detection_threshold(1, 0.05, 0.8), 3)
    7.849
    """
    check_int(df, "df", 1)
    crit = stats.chi2.isf(_check_unit(level, "level"), df)
    _check_unit(power, "power")
    return float(optimize.brentq(lambda lam: stats.ncx2.sf(crit, df, lam) - power, 1e-9, 1e7, xtol=1e-9))


def chi_square_power(df: int, level: float, noncentrality: float) -> float:
    """Power of the level-``level`` chi-square test on ``df`` degrees of freedom at non-centrality
    lambda: P(chi2'_df(lambda) > chi2_{df, 1 - level}).

    For n samples from a law C tested against P, lambda = n chi2(C || P) = n w^2 (Cohen's w).

    Parameters: ``df`` (>= 1), ``level`` in (0, 1), ``noncentrality`` (>= 0).

    Returns: the rejection probability, a ``float``.

    >>> from specsim.chisquare import chi_square_power
    >>> round(chi_square_power(1, 0.05, 7.849), 3), round(chi_square_power(3, 0.05, 0.0), 3)
    (0.8, 0.05)
    """
    check_int(df, "df", 1)
    if not noncentrality >= 0:
        raise ValueError(f"noncentrality must be >= 0, got {noncentrality!r}")
    return float(stats.ncx2.sf(stats.chi2.isf(_check_unit(level, "level"), df), df, noncentrality))


def detectable_tv(df: int, level: float, n: int, power: float = 0.99, pooled_mass: float = 0.0) -> float:
    """The TV distance detected with probability ``power``: sqrt(lambda*(df, level, power) / (4 n))
    + ``pooled_mass``, capped at 1 (module docstring: chi2(C || P) >= 4 TV^2).

    Parameters: ``df`` (>= 1), ``level``, ``n`` the sample size, ``power``, ``pooled_mass``.

    Returns: a ``float`` in (0, 1].

    >>> from specsim.chisquare import detectable_tv
    >>> round(detectable_tv(26, 1e-3, 20000), 4)
    0.0285
    """
    check_int(n, "n", 1)
    return min(1.0, float(np.sqrt(detection_threshold(df, level, power) / (4 * n))) + pooled_mass)


def goodness_of_fit(counts, probs, level: float, power: float = 0.99, min_expected: float = MIN_EXPECTED,
                    name: str = "goodness of fit") -> SubTest:
    """Pearson chi-square test of observed ``counts`` against cell probabilities ``probs``.

    X^2 = sum_groups (N_g - n P_g)^2 / (n P_g) over the positive-probability cells after
    :func:`pool_small_cells`, n = sum(counts), df = #groups - 1, p-value P(chi2_df > X^2);
    observations on cells with probability 0 make the p-value 0.  ``detectable_tv`` is
    :func:`detectable_tv` at this df, level, n and power.

    Parameters: ``counts`` (non-negative, one per cell), ``probs`` (the hypothesised law, same
    length), ``level`` (false-alarm rate), ``power``, ``min_expected``, ``name``.

    Returns: a :class:`SubTest`.

    >>> from specsim.chisquare import goodness_of_fit
    >>> t = goodness_of_fit([52, 48, 0], [0.5, 0.5, 0.0], level=1e-3)
    >>> t.df, round(t.p_value, 4), t.rejected
    (1, 0.6892, False)
    >>> goodness_of_fit([50, 49, 1], [0.5, 0.5, 0.0], level=1e-3).rejected
    True
    """
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    if counts.shape != probs.shape or counts.ndim != 1:
        raise ValueError(f"counts and probs must be 1-D of one length, got shapes {counts.shape} and {probs.shape}")
    _check_unit(level, "level")
    _check_unit(power, "power")
    _check_min_expected(min_expected)
    if not (np.all(np.isfinite(counts)) and np.all(counts >= 0)):
        raise ValueError("counts must be finite and >= 0")
    if not (np.all(np.isfinite(probs)) and np.all(probs >= 0)):
        raise ValueError("probs must be finite and >= 0")
    n = int(round(counts.sum()))
    pos = probs > 0
    support = int(pos.sum())
    impossible = int(round(counts[~pos].sum()))
    obs, exp, pooled = pool_small_cells(counts[pos], probs[pos], n, min_expected)
    df = exp.size - 1
    if df < 1 or n < 1:
        # one positive cell: n draws all land on it unless the law puts mass e off it, seen with
        # probability 1 - (1 - e)^n (exact); otherwise everything was pooled and nothing is detected
        tv = 1.0 - (1.0 - power) ** (1.0 / n) if support == 1 and n >= 1 else 1.0
        return SubTest(name, 0.0, 0, 0.0 if impossible else 1.0, level, pooled, tv, impossible, support)
    stat = float(((obs - exp) ** 2 / exp).sum())
    p_value = 0.0 if impossible else float(stats.chi2.sf(stat, df))
    return SubTest(name, stat, df, p_value, level, pooled, detectable_tv(df, level, n, power, pooled), impossible,
                   support)


def complete_with_target(z: np.ndarray, lengths: np.ndarray, tables, rng: np.random.Generator) -> np.ndarray:
    """Complete emitted strings with exact target samples: z_k ~ p(.|z^{1:k}) for k >= lengths.

    Row i of ``z`` holds an emitted string in its first ``lengths[i]`` entries (the rest is
    ignored); positions lengths[i] .. m-1 are filled left to right by the shared inverse-CDF draw
    (:func:`specsim._sampling.draw_rows`) from the target rows, so each completed row is a draw
    from C, the completed law.

    Parameters: ``z`` int [n, m] (m = L+1), ``lengths`` int [n] in 1..m, ``tables`` the target's
    ``Model.table(m - 1)``, ``rng`` a ``numpy.random.Generator``.

    Returns: ``(completed, codes)``: int64 [n, m] strings and their base-V codes [n]
    (first token most significant).

    >>> import numpy as np
    >>> from specsim.models import markov
    >>> from specsim.chisquare import complete_with_target
    >>> tabs = markov([0.5, 0.5], [[0.0, 1.0], [1.0, 0.0]]).table(2)
    >>> z, codes = complete_with_target(np.array([[0, 0, 0], [1, 1, 0]]), np.array([1, 2]), tabs,
    ...                                 np.random.default_rng(0))
    >>> z.tolist(), codes.tolist()
    ([[0, 1, 0], [1, 1, 0]], [2, 6])
    """
    check_rng(rng)
    z = np.array(z, dtype=np.int64)
    lengths = np.asarray(lengths)
    n, m = z.shape
    V = tables[0].shape[1]
    code = np.zeros(n, dtype=np.int64)
    for k in range(m):
        fill = lengths <= k
        if fill.any():
            z[fill, k] = draw_rows(tables[k][code[fill]], rng)
        code = code * V + z[:, k]
    return z, code
