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
                                   detectable_tv, detection_threshold, goodness_of_fit, pool_small_cells,
                                   predicted_power, samples_for_power)
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
