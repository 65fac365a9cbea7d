"""The completion chi-square (specsim.testing.stats): statistic, pooling, p-value, power, completion.

Every expected value is recomputed independently (scipy.stats.chisquare, the non-central
chi-square, brute-force enumeration), never copied from a run.
"""
import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from specsim._sampling import draw_rows
from specsim.models import markov
from specsim.testing.stats import (MIN_EXPECTED, chi_square_distance, chi_square_power, complete_with_target,
                                   detectable_tv, detection_threshold, goodness_of_fit, largest_residuals,
                                   pool_small_cells, position_marginals, predicted_power, samples_for_power)
from specsim.testing.strategies import distribution_pairs, distributions, model_pairs


@settings(max_examples=25)
@given(distributions(st.integers(3, 6), allow_zeros=False), st.integers(200, 5000), st.data())
def test_statistic_and_p_value_equal_scipy_on_unpooled_tables(probs, n, data):
    counts = np.array(data.draw(st.lists(st.integers(0, n), min_size=probs.size, max_size=probs.size)))
    assume(counts.sum() > 0 and (probs * counts.sum() >= MIN_EXPECTED).all())  # no pooling: see below
    t = goodness_of_fit(counts, probs, level=0.01)
    ref = stats.chisquare(counts, probs * counts.sum())
    assert t.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert t.p_value == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-300)
    assert t.df == probs.size - 1 and t.pooled_mass == 0.0 and t.impossible == 0


@settings(max_examples=40)
@given(distributions(st.integers(3, 8)), st.integers(5, 400))
def test_pooled_groups_expect_at_least_min_expected(probs, n):
    pos = probs > 0
    obs, exp, mass = pool_small_cells(np.arange(pos.sum()), probs[pos], n)
    assert exp.sum() == pytest.approx(n * probs.sum())
    assert obs.sum() == np.arange(pos.sum()).sum()
    if exp.size > 1:
        assert (exp >= MIN_EXPECTED - 1e-9).all()
    small = probs[pos] * n < MIN_EXPECTED
    assert mass >= probs[pos][small].sum() - 1e-12  # every small cell is in the pooled group


def test_impossible_observation_is_a_certain_rejection():
    t = goodness_of_fit([500, 499, 1], [0.5, 0.5, 0.0], level=1e-9)
    assert t.impossible == 1 and t.p_value == 0.0 and t.rejected
    ok = goodness_of_fit([500, 500, 0], [0.5, 0.5, 0.0], level=1e-9)
    assert ok.impossible == 0 and not ok.rejected and ok.df == 1


@pytest.mark.parametrize("df,level,power", [(1, 0.05, 0.8), (8, 1e-3, 0.99), (80, 1e-4, 0.9)])
def test_detection_threshold_solves_the_noncentral_power_equation(df, level, power):
    lam = detection_threshold(df, level, power)
    crit = stats.chi2.isf(level, df)
    assert stats.ncx2.sf(crit, df, lam) == pytest.approx(power, abs=1e-7)
    assert chi_square_power(df, level, lam) == pytest.approx(power, abs=1e-7)
    assert chi_square_power(df, level, 0.0) == pytest.approx(level, rel=1e-9)  # no effect: the false-alarm rate


def test_detectable_tv_is_the_cauchy_schwarz_bound_plus_pooled_mass():
    lam = detection_threshold(26, 1e-3, 0.99)
    assert detectable_tv(26, 1e-3, 20000, 0.99) == pytest.approx(np.sqrt(lam / 80000))
    assert detectable_tv(26, 1e-3, 20000, 0.99, pooled_mass=0.01) == pytest.approx(np.sqrt(lam / 80000) + 0.01)
    assert detectable_tv(26, 1e-3, 3, 0.99) == 1.0


@settings(max_examples=40)
@given(distribution_pairs(st.integers(3, 6)))
def test_chi_square_distance_bounds_tv(pq):
    p, q = pq
    assume(not (q[p == 0] > 0).any())  # mass off the support is detected outright, not through the distance
    assert chi_square_distance(q, p) >= 4 * (0.5 * np.abs(q - p).sum()) ** 2 - 1e-12


def test_complete_with_target_follows_deterministic_rows_exactly():
    # transitions 0 -> 1 -> 2 -> 0: the completion of any prefix is forced
    T = np.eye(3)[[1, 2, 0]]
    tabs = markov([0.0, 0.0, 1.0], T).table(3)
    z = np.array([[2, 0, 0, 0], [1, 1, 0, 0], [0, 2, 1, 2]])
    out, codes = complete_with_target(z, np.array([1, 2, 4]), tabs, np.random.default_rng(0))
    assert out.tolist() == [[2, 0, 1, 2], [1, 1, 2, 0], [0, 2, 1, 2]]
    assert codes.tolist() == [sum(t * 3 ** (3 - j) for j, t in enumerate(row)) for row in out.tolist()]


@settings(max_examples=5)
@given(model_pairs(V=3, depth=1, seeded=False))
def test_completing_the_empty_block_samples_the_joint_law(pair):
    """Strings of length 1 drawn from p(.|()) and completed: counts fit target.joint(3) at level 1e-4."""
    t = pair.target
    rng = np.random.default_rng(1)
    n = 6000
    P = t.joint(3)
    z = np.zeros((n, 3), dtype=np.int64)
    z[:, 0] = draw_rows(np.tile(t(()), (n, 1)), rng)
    _, codes = complete_with_target(z, np.ones(n, dtype=int), t.table(2), rng)
    brute = np.array([t(())[a] * t((a,))[b] * t((a, b))[c] for a, b, c in itertools.product(range(3), repeat=3)])
    assert np.allclose(P, brute, atol=1e-15)
    assert not goodness_of_fit(np.bincount(codes, minlength=27), P, level=1e-4).rejected


def test_samples_for_power_is_the_noncentral_threshold_when_nothing_is_pooled():
    c, p = np.array([0.6, 0.4]), np.array([0.5, 0.5])
    lam = detection_threshold(1, 0.01, 0.9)
    assert samples_for_power([(c, p)], 0.01, 0.9) == np.ceil(lam / chi_square_distance(c, p))
    assert samples_for_power([(p, p)], 0.01, 0.9) == np.inf


def test_predicted_power_accounts_for_pooling_and_holds_in_simulation():
    """A sparse table (many cells of small P): at the unpooled prediction n0 = lambda* / chi2 the
    test is nearly powerless because pooling merges the cells where C differs; at the pooled
    prediction it rejects at the stated rate.  Checked by simulating the test itself (400
    multinomial tables each; the bounds are > 5 binomial standard deviations from the truth)."""
    p = np.array([0.3, 0.3] + [0.4 / 40] * 40)
    c = np.array([0.3, 0.3] + [0.8 / 40, 0.0] * 20)  # the small cells: half doubled, half emptied
    level, power = 0.01, 0.9
    n0 = int(np.ceil(detection_threshold(41, level, power) / chi_square_distance(c, p)))
    n = int(samples_for_power([(c, p)], level, power))
    assert n > n0
    rng = np.random.default_rng(0)

    def rejection_rate(m):
        return np.mean([goodness_of_fit(rng.multinomial(m, c), p, level).rejected for _ in range(400)])

    assert rejection_rate(n) >= power - 0.08
    assert predicted_power(c, p, n0, level) < 0.5 and rejection_rate(n0) < 0.5


@settings(max_examples=30)
@given(distributions(st.integers(2, 3)), st.integers(1, 2), st.integers(0, 4), st.data())
def test_largest_residuals_are_the_extreme_standardised_residuals(row, length, k, data):
    """Against a direct loop over the strings: the k largest (observed - n P) / sqrt(n P), strings
    with P = 0 and a count first (residual +inf), then the k most negative."""
    V = row.size
    probs = np.array([np.prod([row[t] for t in z]) for z in itertools.product(range(V), repeat=length)])
    counts = np.array(data.draw(st.lists(st.integers(0, 50), min_size=probs.size, max_size=probs.size)))
    assume(counts.sum() > 0)
    over, under = largest_residuals(counts, probs, V, length, k)
    n = counts.sum()
    ref = {}
    for code, z in enumerate(itertools.product(range(V), repeat=length)):
        e = n * probs[code]
        ref[z] = np.inf if (e == 0 and counts[code] > 0) else (0.0 if e == 0 else (counts[code] - e) / np.sqrt(e))
    pos = sorted((r for r in ref.values() if r > 0), reverse=True)[:k]
    neg = sorted(r for r in ref.values() if r < 0)[:k]
    assert [s.residual for s in over] == pytest.approx(pos) and [s.residual for s in under] == pytest.approx(neg)
    for s in over + under:
        code = int(np.ravel_multi_index(s.string, (V,) * length))
        assert s.observed == counts[code] and s.expected == pytest.approx(n * probs[code])
        assert s.residual == pytest.approx(ref[s.string])


def test_position_marginals_sum_the_other_positions():
    rng = np.random.default_rng(3)
    J = rng.dirichlet(np.ones(27))
    margs = position_marginals(J, V=3, L=2)
    for k in range(3):
        direct = [sum(J[a * 9 + b * 3 + c] for a, b, c in itertools.product(range(3), repeat=3) if (a, b, c)[k] == v)
                  for v in range(3)]
        assert margs[k] == pytest.approx(direct, abs=1e-15)
    with pytest.raises(ValueError, match="V\\*\\*\\(L\\+1\\)"):
        position_marginals(J, V=3, L=3)


def test_a_deterministic_law_is_tested_exactly_off_its_one_cell():
    """One cell of probability 1 (a greedy target): no chi-square (df = 0); the test rejects on any
    observation elsewhere, so a law with mass e off the cell is caught with probability
    1 - (1 - e)^n, which equals the power exactly at e = detectable_tv."""
    n, power = 300, 0.99
    t = goodness_of_fit([0, n, 0], [0.0, 1.0, 0.0], level=1e-3, power=power)
    assert t.deterministic and t.df == 0 and not t.rejected
    assert 1 - (1 - t.detectable_tv) ** n == pytest.approx(power)
    bad = goodness_of_fit([1, n - 1, 0], [0.0, 1.0, 0.0], level=1e-3, power=power)
    assert bad.rejected and bad.impossible == 1
    # negative control: a two-cell law is not deterministic and keeps the chi-square bound
    two = goodness_of_fit([150, 150], [0.5, 0.5], level=1e-3, power=power)
    assert not two.deterministic and two.detectable_tv == pytest.approx(detectable_tv(1, 1e-3, n, power))


def test_false_alarm_rate_is_at_most_the_level_where_the_chi_square_tail_is_too_light():
    # issue 26: a cell expecting 5 counts has a far heavier upper tail than chi-square(1) at small
    # levels.  Two cells (0.05, 0.95), n = 100: the null law of the counts is Binomial(100, 0.05), so
    # the false-alarm rate of the test is sum_N P(N) [rejected at N], computed exactly here.
    n, probs, level = 100, np.array([0.05, 0.95]), 1e-3
    pmf = stats.binom.pmf(np.arange(n + 1), n, probs[0])
    stat = np.array([(((np.array([k, n - k]) - n * probs) ** 2) / (n * probs)).sum() for k in range(n + 1)])
    chi2_rate = pmf[stats.chi2.sf(stat, 1) < level].sum()
    assert chi2_rate > 1.4 * level  # the uncalibrated rule: 1.46e-3 at level 1e-3
    rng = np.random.default_rng(0)
    rejected = np.array([goodness_of_fit([k, n - k], probs, level, rng=rng).rejected for k in range(n + 1)])
    assert pmf[rejected].sum() <= level
    # negative control: the calibrated test still rejects the counts of a shifted law (0.15, 0.85)
    assert goodness_of_fit([15, 85], probs, level, rng=rng).rejected
    assert goodness_of_fit([25, 75], probs, level, rng=rng).calibrated_p < level / 100
