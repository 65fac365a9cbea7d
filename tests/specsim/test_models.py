import numpy as np
import pytest

from specsim import models as m


def test_row_validation_names_prefix_and_problem():
    bad = m.from_function(lambda s: [0.5, 0.5, 0.5] if s == (1,) else [0.2, 0.3, 0.5], 3, "toy")
    assert bad(()).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"toy at prefix \(1,\).*sum"):
        bad((1,))
    neg = m.from_function(lambda s: [-0.1, 0.6, 0.5], 3)
    with pytest.raises(ValueError, match="negative"):
        neg(())
    nan = m.from_function(lambda s: [np.nan, 0.5, 0.5], 3)
    with pytest.raises(ValueError, match="non-finite"):
        nan(())
    with pytest.raises(ValueError, match="shape"):
        m.from_function(lambda s: [0.5, 0.5], 3)(())
    with pytest.raises(ValueError, match="outside"):
        m.iid([0.5, 0.5])((2,))
    with pytest.raises(ValueError, match="V must be >= 2"):
        m.Model(lambda s: [1.0], 1)


def test_constructors_validate_arguments():
    with pytest.raises(ValueError, match="sum"):
        m.iid([0.5, 0.6])
    with pytest.raises(ValueError, match="transition"):
        m.markov([0.5, 0.5], [[1.0, 0.0]])
    with pytest.raises(ValueError, match="concentration"):
        m.random_model(3, 0, concentration=0.0)
    with pytest.raises(ValueError, match="temperature"):
        m.temperature(m.iid([0.5, 0.5]), -1)
    with pytest.raises(ValueError, match="weight"):
        m.mix(m.iid([0.5, 0.5]), m.iid([0.5, 0.5]), 1.5)
    with pytest.raises(ValueError, match="V=2 and V=3"):
        m.mix(m.iid([0.5, 0.5]), m.iid([0.2, 0.3, 0.5]), 0.5)
    with pytest.raises(ValueError, match="k must be"):
        m.top_k(m.iid([0.5, 0.5]), 0)


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
    assert np.allclose(m.shifted if False else base.shifted((1,))((2,)), base((1, 2)))
