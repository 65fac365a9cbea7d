"""The completion chi-square: one goodness-of-fit test with a stated false-alarm rate and power.

A sampled iteration emits a string s = x^{1:tau} y; completing it with exact target samples to
length L+1 gives z ~ C, the completed law, and a lossless implementation has C = P, the target's
joint law of its first L+1 tokens (docs/theory.md §2).  The test compares the counts of n
completed strings with n P(z) by Pearson's statistic

    X^2 = sum_cells (N_cell - n P_cell)^2 / (n P_cell),

cells of small expected count pooled (below), and rejects when its p-value is below the level.
The p-value is the chi-square one, except when that falls below the level: there the chi-square
tail is too light (cells expecting about 5 counts have Poisson tails far heavier than the
chi-square's at levels of 1e-3 and below: uncalibrated, the joint sub-test of ``check_step`` on its
default instance at n = 3000 rejected 4.5e-4 (95 % interval 4.1e-4..5.0e-4) of 10^6 exact-null
tables at its level 3.33e-4: ``python scripts/false_alarm_check_step.py tail 0 1000000 3000``),
so the p-value is recomputed on the exact null law of the grouped counts, Multinomial(n, P):
a type-class bound and a Monte Carlo p-value, each exactly valid at every n (:func:`goodness_of_fit`).
The false-alarm rate is therefore at most the level, with no approximation.

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
from scipy import optimize, special, stats

from ._sampling import draw_rows
from ._validate import check_int, check_real, check_rng

__all__ = ["SubTest", "MIN_EXPECTED", "goodness_of_fit", "pool_small_cells", "detection_threshold",
           "chi_square_power", "detectable_tv", "complete_with_target"]

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
    ``calibrated_p`` the p-value of X^2 on its exact null law (computed only when the chi-square
    ``p_value`` is below ``level``, where the chi-square tail is unreliable; see
    :func:`goodness_of_fit`), None otherwise; ``decision_p`` the one the decision uses;
    ``rejected`` = ``impossible > 0 or decision_p < level``; ``support`` the number of cells of
    positive probability; ``inconclusive`` when nothing was rejected and the data are too few for
    any departure to be detected with the stated power (``detectable_tv`` >= 1, e.g. every cell
    pooled into one group: no test was made).  When ``support`` is 1 (a deterministic law, e.g. a greedy target) the
    test is exact: it rejects on any observation off that one cell (``df`` = 0, no chi-square),
    and ``detectable_tv`` = 1 - (1 - power)^(1/n) is the off-cell mass seen with probability
    ``power``.

    >>> from specsim.testing.stats import goodness_of_fit
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
    calibrated_p: float | None = None

    @property
    def decision_p(self) -> float:
        """The p-value the decision uses: ``calibrated_p`` when it was computed, else ``p_value``."""
        return self.p_value if self.calibrated_p is None else self.calibrated_p

    @property
    def rejected(self) -> bool:
        return self.impossible > 0 or self.decision_p < self.level

    @property
    def inconclusive(self) -> bool:
        """Not rejected, and no completed law whatever is detected with probability ``power`` at
        this n (``detectable_tv`` >= 1): a pass would promise nothing, more data are needed."""
        return not self.rejected and self.detectable_tv >= 1.0

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

    >>> from specsim.testing.stats import pool_small_cells
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

    >>> from specsim.testing.stats import detection_threshold
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

    >>> from specsim.testing.stats import chi_square_power
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

    >>> from specsim.testing.stats import detectable_tv
    >>> round(detectable_tv(26, 1e-3, 20000), 4)
    0.0285
    """
    check_int(n, "n", 1)
    return min(1.0, float(np.sqrt(detection_threshold(df, level, power) / (4 * n))) + pooled_mass)


def goodness_of_fit(counts, probs, level: float, power: float = 0.99, min_expected: float = MIN_EXPECTED,
                    name: str = "goodness of fit", rng: np.random.Generator | None = None) -> SubTest:
    """Pearson chi-square test of observed ``counts`` against cell probabilities ``probs``.

    X^2 = sum_groups (N_g - n P_g)^2 / (n P_g) over the positive-probability cells after
    :func:`pool_small_cells`, n = sum(counts), df = #groups - 1, p-value P(chi2_df > X^2);
    observations on cells with probability 0 make the p-value 0.  ``detectable_tv`` is
    :func:`detectable_tv` at this df, level, n and power.

    Calibration.  When the chi-square p-value is below ``level`` the decision uses
    ``calibrated_p``, a p-value on the exact null law of the grouped counts, Multinomial(n, P):
    min(B_t / s, p_mc / (1 - s)) with s = :data:`TYPE_BOUND_SHARE` (weighted Bonferroni, so
    P(calibrated_p < level) <= level exactly), where B_t = C(n + k - 1, k - 1) exp(-n D(N/n || P))
    bounds P(D >= observed D) over the k groups (method of types) and p_mc = (1 + h) / (B + 1)
    counts the h of B null draws of X^2 at or above the observed one (B + 1 =
    :data:`MC_EXCEEDANCES` / (level (1 - s)), at most :data:`MC_MAX_DRAWS`; drawn from ``rng``,
    the caller's generator, default ``numpy.random.default_rng(0)``).  A rejection therefore
    needs both p-values below the level, and the chi-square power statements are upper bounds
    (the calibrated test gives up a little power where the chi-square tail was too light).

    Parameters: ``counts`` (non-negative, one per cell), ``probs`` (the hypothesised law, same
    length), ``level`` (false-alarm rate), ``power``, ``min_expected``, ``name``, ``rng`` (a
    ``numpy.random.Generator`` for the calibration draws, or None).

    Returns: a :class:`SubTest`.

    >>> from specsim.testing.stats import goodness_of_fit
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
    if rng is not None:
        check_rng(rng)
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
    calibrated = None
    if not impossible and p_value < level:  # the chi-square tail is too light here: use the exact null law
        calibrated = _calibrated_p_value(obs, exp / n, n, stat, level, rng)
    return SubTest(name, stat, df, p_value, level, pooled, detectable_tv(df, level, n, power, pooled), impossible,
                   support, calibrated)


#: Exceedances a Monte Carlo p-value may count and still reject: the simulation has
#: MC_EXCEEDANCES / level draws, enough to reject at a true p-value of level / 3 with probability
#: above 0.99 (Poisson(3.3) <= 9).
MC_EXCEEDANCES = 10

#: Most null draws of one Monte Carlo p-value (levels below MC_EXCEEDANCES / MC_MAX_DRAWS get fewer
#: allowed exceedances; below 1 / MC_MAX_DRAWS only the type bound can reject).
MC_MAX_DRAWS = 2_000_000

#: Share of the level spent on the type-class bound (the rest goes to the simulation).
TYPE_BOUND_SHARE = 0.01


def _log_type_bound(obs, probs, n: int) -> float:
    """log of a bound on P(D(N/n || p) >= D(obs/n || p)) for N ~ Multinomial(n, p) over k cells:
    #types x exp(-n D) <= C(n + k - 1, k - 1) exp(-n D) (method of types; exact inequality)."""
    k = probs.size
    f = obs / n
    pos = f > 0
    kl = float((f[pos] * np.log(f[pos] / probs[pos])).sum())
    log_types = float(special.gammaln(n + k) - special.gammaln(k) - special.gammaln(n + 1))
    return log_types - n * kl


def _calibrated_p_value(obs, probs, n: int, stat: float, level: float, rng) -> float:
    """A p-value of Pearson's statistic computed on its exact null law, for a chi-square p-value
    below ``level``.

    At levels of 1e-3 and below the chi-square law understates the upper tail of X^2 when cells
    expect few counts (a cell expecting 5 reaches 15 with probability 2.3e-4, adding 20 to X^2;
    the chi-square tail of 20 on one df is 7.7e-6), so the test would reject a lossless implementation
    more often than its level.  The null law is known exactly (grouped counts are
    Multinomial(n, p)), so the p-value is combined (weighted Bonferroni, valid at every level) from
    two exact ones: the type-class bound at weight TYPE_BOUND_SHARE (free; decides large
    departures) and the Monte Carlo p-value (1 + #{X^2_b >= X^2}) / (B + 1) over B null draws
    (exactly valid for any B), B + 1 = ceil(MC_EXCEEDANCES / level') at level' = the rest of the
    level; the simulation stops once the count of exceedances rules out rejection (then h / b,
    Besag and Clifford's sequential estimate, is returned).
    """
    share = TYPE_BOUND_SHARE
    bound = float(np.exp(min(0.0, _log_type_bound(obs, probs, n))))
    if bound / share < level:
        return bound / share
    mc_level = level * (1 - share)
    total = int(min(MC_MAX_DRAWS, np.ceil(MC_EXCEEDANCES / mc_level))) - 1
    allowed = int(np.floor(mc_level * (total + 1)))  # exceedances compatible with rejection, plus one
    rng = np.random.default_rng(0) if rng is None else rng
    exp = probs * n
    threshold = stat * (1 - 1e-12) - 1e-9  # ties and rounding count as exceedances (conservative)
    hits, done = 0, 0
    while done < total:
        b = min(_MC_CHUNK, total - done)
        sims = rng.multinomial(n, probs, size=b)
        hits += int(((((sims - exp) ** 2) / exp).sum(axis=1) >= threshold).sum())
        done += b
        if hits >= allowed:  # 1 + hits > mc_level (total + 1): no rejection possible
            return min(1.0, max(hits / done, (1 + hits) / (total + 1)) / (1 - share))
    return min(1.0, (1 + hits) / (total + 1) / (1 - share))


_MC_CHUNK = 20000


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
    >>> from specsim.testing.stats import complete_with_target
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
