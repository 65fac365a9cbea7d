"""Models: cached, validated rows; tables indexed by base-V codes; the joint law P(z) = Model.joint(n).

Bad input lives in tests/specsim/test_argument_validation.py.
"""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim import models as m
from specsim.testing.strategies import model_pairs


def test_rows_are_validated_once_and_cached_read_only():
    calls = []

    def fn(s):
        calls.append(s)
        return [0.2, 0.3, 0.5]

    model = m.from_function(fn, 3, "toy")
    a, b = model((1, 2)), model((1, 2))
    assert a is b and calls == [(1, 2)] and not a.flags.writeable


def test_random_model_is_deterministic_and_context_dependent():
    a, b = m.random_model(4, 7), m.random_model(4, 7)
    assert np.array_equal(a((1, 2)), b((1, 2)))
    assert not np.allclose(a((1, 2)), a((2, 1)))
    assert not np.allclose(a(()), m.random_model(4, 8)(()))
    d1 = m.random_model(4, 7, depth=1)
    assert np.array_equal(d1((0, 3)), d1((2, 3)))
    assert not np.allclose(d1((0, 3)), d1((0, 2)))
    d0 = m.random_model(4, 7, depth=0)
    assert np.array_equal(d0(()), d0((1, 1, 1)))


def test_markov_and_table_indexing():
    T = np.array([[0.1, 0.9, 0.0], [0.3, 0.3, 0.4], [0.5, 0.25, 0.25]])
    mk = m.markov([0.2, 0.3, 0.5], T)
    assert np.array_equal(mk((0, 2)), T[2])
    tab = mk.table(2)
    assert tab[2].shape == (9, 3)
    for prefix in [(0, 1), (2, 0), (1, 2)]:
        assert np.array_equal(tab[2][m.prefix_index(prefix, 3)], mk(prefix))
    assert not tab[1].flags.writeable


@settings(max_examples=20)
@given(model_pairs(V=st.integers(3, 4)), st.integers(1, 3))
def test_joint_is_the_product_of_the_rows_along_every_string(pair, n):
    """P(z) = prod_k p(z_k | z^{1:k-1}), checked string by string against the rows themselves."""
    t = pair.target
    P = t.joint(n)
    assert P.shape == (t.V ** n,) and not P.flags.writeable
    for z in itertools.product(range(t.V), repeat=n):
        want = np.prod([t(z[:k])[z[k]] for k in range(n)])
        assert P[m.prefix_index(z, t.V)] == pytest.approx(want, rel=1e-12, abs=1e-300)
    assert P.sum() == pytest.approx(1.0, abs=1e-12)


def test_joint_is_cached_and_marginalises_to_shorter_joints():
    t = m.random_model(3, 5)
    assert t.joint(3) is t.joint(3)
    J = t.joint(3).reshape(3, 3, 3)
    assert np.allclose(J.sum(axis=2).ravel(), t.joint(2), atol=1e-15)
    assert np.array_equal(t.joint(1), t(()))


def test_transforms():
    base = m.iid([0.1, 0.2, 0.3, 0.4])
    assert np.allclose(m.temperature(base, 1.0)(()), base(()))
    hot = m.temperature(base, 0.5)(())
    assert np.allclose(hot, np.array([1, 4, 9, 16]) / 30)
    ties = m.temperature(m.iid([0.4, 0.4, 0.2]), 0)(())
    assert ties.tolist() == [1.0, 0.0, 0.0]
    assert np.allclose(m.mix(base, m.iid([1, 0, 0, 0.0]), 0.5)(()), [0.55, 0.1, 0.15, 0.2])
    assert np.allclose(m.top_k(base, 2)(()), [0, 0, 3 / 7, 4 / 7])
    assert np.allclose(m.top_p(base, 0.65)(()), [0, 0, 3 / 7, 4 / 7])
    assert np.allclose(m.top_p(base, 0.75)(()), [0, 2 / 9, 3 / 9, 4 / 9])
    assert np.allclose(base.shifted((1,))((2,)), base((1, 2)))
