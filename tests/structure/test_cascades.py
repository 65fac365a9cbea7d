"""Speculative cascades (docs/theory.md §14.5): closed-form laws against the rules' O(V^2)
lifted sums, the sequence-level law from the exact engine, and no cascade beyond the exact
acceptance-vs-divergence frontier of lp.frontier."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim.divergences import tv
from specsim.models import random_model
from specsim.structure import CostModel
from specsim.structure.cascades import (CASCADE_RULES, _deferral, cascade_point, cascade_report, chow, diff, opt,
                                        token_confidence)
from specsim.testing.strategies import distribution_pairs
from specsim.verifiers.lossy import cascade

PARAMS = {"opt": [0.0, 0.5, 2.0], "diff": [0.0, 0.1, 0.4], "chow": [0.0, 0.3, 0.8], "token_confidence": [0.0, 0.2, 0.5]}
RULES = [(name, a) for name, alphas in PARAMS.items() for a in alphas]


@settings(max_examples=25)
@given(distribution_pairs(V=st.integers(3, 5)), st.sampled_from(RULES))
def test_closed_form_law_equals_the_lifted_sum(pair, rule):
    p, q = pair
    v = CASCADE_RULES[rule[0]](rule[1])
    assert np.allclose(v.out(p, q), v.rule.lifted_out(p, q), atol=1e-12)
    assert v.beta(p, q) == pytest.approx(float(sum(q[x] * v.rule(p, q, x)[0] for x in np.flatnonzero(q > 0))), abs=1e-12)


@settings(max_examples=20)
@given(distribution_pairs(V=st.integers(3, 5)), st.sampled_from([0.0, 0.3, 1.0, 3.0]))
def test_opt_is_the_package_cascade_rule(pair, alpha):
    p, q = pair
    mine = _deferral("opt_again", lambda a, b: bool(b.max() < a.max() - alpha * tv(a, b)), {}, "")
    assert np.allclose(mine.out(p, q), cascade(alpha).out(p, q)) and mine.beta(p, q) == cascade(alpha).beta(p, q)


def test_extreme_parameters():
    p, q = np.array([0.6, 0.3, 0.1]), np.array([0.2, 0.3, 0.5])
    assert np.allclose(token_confidence(0.0).out(p, q), q) and token_confidence(0.0).beta(p, q) == 1.0
    assert np.allclose(token_confidence(0.9).out(p, q), p)
    assert token_confidence(0.9).beta(p, q) == pytest.approx(1 - tv(p, q))
    assert np.allclose(chow(1.0).out(p, q), q) and np.allclose(chow(0.0).out(p, q), p)
    assert np.allclose(diff(0.0).out(p, q), p)       # max q = 0.5 < max p = 0.6: defer
    assert np.allclose(opt(10.0).out(p, q), q)       # a large alpha prices the rejection: keep q


@pytest.mark.parametrize("name,alpha", RULES)
def test_sequence_law_at_L1_is_the_one_token_law(name, alpha):
    """For L = 1, C(z1 z2) = pi(z1) p(z2 | z1): the completed law's TV and KL to P are the root row's."""
    t, d = random_model(3, 4, 0.7), random_model(3, 1004, 0.7)
    v = CASCADE_RULES[name](alpha)
    rep = cascade_report(v, t, d, 1, CostModel(draft=0.05))
    pt = cascade_point(v, t(()), d(()))
    assert rep.tv == pytest.approx(pt.tv, abs=1e-12)
    assert rep.kl == pytest.approx(pt.kl, abs=1e-10)
    assert rep.tokens == pytest.approx(1 + pt.acceptance, abs=1e-12)
    assert rep.cost_per_token == pytest.approx(1.05 / rep.tokens)


@settings(max_examples=15)
@given(distribution_pairs(V=st.integers(3, 5), allow_zeros=False), st.sampled_from(RULES))
def test_no_cascade_beats_the_exact_frontier(pair, rule):
    """lp.frontier: the largest acceptance at divergence budget eps; at a cascade's own KL and TV
    it must reach at least the cascade's acceptance (TV in closed form: min(1, 1 - TV(p, q) + eps))."""
    frontier = pytest.importorskip("lp.frontier")
    p, q = pair
    pt = cascade_point(CASCADE_RULES[rule[0]](rule[1]), p, q)
    assert min(1.0, 1.0 - tv(p, q) + pt.tv) >= pt.acceptance - 1e-12
    if np.isfinite(pt.kl):
        assert frontier.frontier(p, q, pt.kl, "kl").beta >= pt.acceptance - 1e-7


def test_cascades_trade_divergence_for_acceptance_on_a_context_dependent_pair():
    """Sweeping Chow's alpha from 0 (always defer: lossless, speculative sampling) to 1 (never defer:
    the draft's law) raises tokens per call and the divergence monotonically at L = 2."""
    t, d = random_model(3, 6, 0.5), random_model(3, 1006, 0.5)
    reps = [cascade_report(chow(a), t, d, 2, CostModel(draft=0.05)) for a in (0.0, 0.3, 0.6, 1.0)]
    assert reps[0].tv < 1e-12
    assert all(b.tokens >= a.tokens - 1e-12 and b.tv >= a.tv - 1e-12 for a, b in zip(reps, reps[1:]))
    assert reps[-1].tokens == pytest.approx(3.0)


@pytest.mark.parametrize("make,exc,match", [
    (lambda: chow(1.5), ValueError, "alpha must lie in"),
    (lambda: diff(-0.1), ValueError, "alpha must lie in"),
    (lambda: opt(float("nan")), ValueError, "alpha"),
    (lambda: token_confidence(2.0), ValueError, "theta must lie in"),
    (lambda: token_confidence("0.3"), TypeError, "theta"),
    (lambda: cascade_point("chow", [0.5, 0.5], [0.5, 0.5]), TypeError, "rule must be"),
    (lambda: cascade_point(chow(0.3), [0.5, 0.6], [0.5, 0.5]), ValueError, "sum"),
    (lambda: cascade_report(chow(0.3), random_model(3, 0), random_model(3, 1), 2, 0.05), TypeError, "cost must be"),
])
def test_bad_input(make, exc, match):
    with pytest.raises(exc, match=match):
        make()
