"""khisti_selection_law: the race quadrature (docs/theory.md §6.5) against independent references.

References: the law of the rule's own selection weights enumerated over every ordered k-tuple of
draws (small supports), exact rationals (tiny rows, extreme ones included), and the O(n) / O(n^2)
sums that rho_w(y) = k q(y) w(y) E[1 / (w(y) + S)] reduces to at k = 2, 3 (moderate and full
vocabulary sizes).
"""
import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim.models import iid
from specsim.testing.strategies import distribution_pairs
from specsim.verifiers.two_step import _importance_weights, KHISTI_QUADRATURE_BOUND, khisti_selection_law

TINY = 5e-324  # the smallest subnormal


def _enumerated_law(p, q, k):
    """sum over ordered k-tuples x of Q(x) times the rule's selection weight of each position."""
    support = np.flatnonzero(q > 0)
    tuples = np.array(list(itertools.product(support, repeat=k)))
    weights = _importance_weights(p, q, tuples)
    mass = np.prod(q[tuples], axis=1)
    return np.bincount(tuples.ravel(), weights=(mass[:, None] * weights).ravel(), minlength=p.size)


def _rational_law(p, q, k):
    pe, qe = [Fraction(float(x)) for x in p], [Fraction(float(x)) for x in q]
    rho = [Fraction(0)] * len(q)
    for xs in itertools.product([t for t in range(len(q)) if qe[t] > 0], repeat=k):
        mass = np.prod([qe[x] for x in xs], dtype=object)
        ratios = [pe[x] / qe[x] for x in xs]
        total = sum(ratios)
        for x, r in zip(xs, ratios):
            rho[x] += mass * (r / total if total > 0 else Fraction(1, k))
    return rho


def _rows(p, q):
    return iid(p)(()), iid(q)(())  # the renormalised float64 rows the function uses


@settings(max_examples=60, deadline=None)
@given(pq=distribution_pairs(V=st.integers(2, 6)), k=st.integers(2, 4))
def test_matches_the_enumerated_tuples(pq, k):
    p, q = _rows(*pq)
    got = khisti_selection_law(p, q, k)
    assert np.abs(got - _enumerated_law(p, q, k)).max() <= 1e-13


# (name, target row, draft row): peaked rows, subnormal entries, weights 2^+-1400 apart, p = 0 on supp q
EXTREME = [("q-peaked-1e-15", [0.3, 0.3, 0.4], [1 - 1e-15, 0.25e-15, 0.75e-15]),
           ("q-max-is-one", [0.3, 0.3, 0.4], [1 - 2.0 ** -52, 2.0 ** -53, 2.0 ** -53]),
           ("p-peaked-1e-15", [0.25e-15, 0.75e-15, 1 - 1e-15], [0.2, 0.5, 0.3]),
           ("q-subnormal", [0.3, 0.3, 0.4], [TINY, 0.5, 0.5]),
           ("p-subnormal", [TINY, 0.5, 0.5], [0.2, 0.5, 0.3]),
           ("weights-far-apart", [TINY, 0.5, 0.5], [0.5, TINY, 0.5]),
           ("zero-target-mass", [0.0, 0.0, 1.0], [0.45, 0.45, 0.1]),
           ("zero-target-peaked", [0.0, 1e-15, 1 - 1e-15], [1 - 1e-15, 0.5e-15, 0.5e-15]),
           ("zero-draft-mass", [0.2, 0.3, 0.5], [0.0, 0.4, 0.6])]


@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("name, p, q", EXTREME, ids=[c[0] for c in EXTREME])
def test_matches_rationals_at_extreme_rows(name, p, q, k):
    p, q = _rows(p, q)
    got = khisti_selection_law(p, q, k)
    assert np.isfinite(got).all() and (got >= 0).all()
    assert max(abs(Fraction(float(g)) - r) for g, r in zip(got, _rational_law(p, q, k))) <= 1e-15


def test_zero_weights_share_uniformly():
    # p = 0 on tokens 0, 1: rho(y) = q(y) q0^(k-1) there (all k draws weightless, one picked uniformly)
    p, q = _rows([0.0, 0.0, 0.6, 0.4], [0.3, 0.2, 0.1, 0.4])
    for k in (2, 3, 4):
        rho = khisti_selection_law(p, q, k)
        assert rho[:2] == pytest.approx(q[:2] * 0.5 ** (k - 1), abs=1e-16)
        assert rho.sum() == pytest.approx(1.0, abs=1e-15)


def test_one_draw_is_the_draft_row():
    p, q = _rows([0.5, 0.0, 0.5], [0.2, 0.3, 0.5])
    assert np.array_equal(khisti_selection_law(p, q, 1), q)


def _wide_rows(rng, n, spread):
    # log-normal rows: importance weights p/q spanning ~e^(+-4 spread), a tenth of p set to 0
    p, q = np.exp(spread * rng.standard_normal(n)), np.exp(spread * rng.standard_normal(n))
    p[rng.random(n) < 0.1] = 0.0
    return p / p.sum(), q / q.sum()


def test_two_draws_closed_form_at_full_vocabulary():
    """k = 2: rho(y) = 2 q(y) sum_x q(x) w(y) / (w(y) + w(x)) for w(y) > 0, an O(V) sum per token."""
    rng = np.random.default_rng(3)
    V = 49_152
    p, q = _wide_rows(rng, V, 6.0)
    rho = khisti_selection_law(p, q, 2)
    assert rho.sum() == pytest.approx(1.0, abs=1e-13) and (rho >= 0).all()
    w = p / q
    for y in rng.choice(np.flatnonzero(w > 0), 40, replace=False):
        exact = 2 * q[y] * np.sum(q * w[y] / (w[y] + w))
        assert abs(rho[y] - exact) <= 1e-13 * 2 * q[y]


def test_three_draws_double_sum():
    """k = 3: rho(y) = 3 q(y) sum_{x1, x2} q(x1) q(x2) w(y) / (w(y) + w(x1) + w(x2)), O(n^2) per token."""
    rng = np.random.default_rng(4)
    p, q = _wide_rows(rng, 300, 8.0)
    rho = khisti_selection_law(p, q, 3)
    w = p / q
    pair_w, pair_q = w[:, None] + w[None, :], q[:, None] * q[None, :]
    for y in np.flatnonzero(w > 0):
        exact = 3 * q[y] * np.sum(pair_q * w[y] / (w[y] + pair_w))
        assert abs(rho[y] - exact) <= 1e-13 * 3 * q[y]


def test_quadrature_bound_is_below_double_precision():
    assert 0 < KHISTI_QUADRATURE_BOUND < 1e-18
