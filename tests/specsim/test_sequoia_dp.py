"""Sequoia's tree DP: public anchors (docs/theory.md §12, R12) and brute force over all trees.

Bad input is in test_argument_validation.py.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from specsim.sequoia_dp import brute_force_tree, sequoia_tree, shape_widths, tree_value

A = [0.6, 0.2, 0.1]
R12 = {  # docs/theory.md §12, R12
    None: [1, 1.6, 1.96, 2.176, 2.376, 2.5056, 2.6256, 2.7456, 2.8456, 2.92336],
    2: [1, 1.6, 1.8, 1.9],
    3: [1, 1.6, 1.96, 2.16, 2.28, 2.4, 2.5, 2.56],
}


@pytest.mark.parametrize("layers", [None, 2, 3])
def test_r12_anchors(layers):
    for m, want in enumerate(R12[layers], start=1):
        best = sequoia_tree(A, m, layers)
        assert best.value == pytest.approx(want, abs=1e-12)
        assert tree_value(best.shape, A) == pytest.approx(best.value, abs=1e-12)
        assert sum(map(sum, shape_widths(best.shape))) + 1 == m
        assert layers is None or best.depth <= layers


@settings(max_examples=25)
@given(raw=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3), m=st.integers(1, 7),
       layers=st.one_of(st.none(), st.integers(1, 4)))
def test_dp_equals_brute_force(raw, m, layers):
    a = np.sort(np.array(raw))[::-1]
    a = a / max(1.0, a.sum())
    width = len(a)
    # a tree with m nodes needs enough room: sum_{d < layers} width^d >= m
    room = m if layers is None else sum(width ** d for d in range(layers))
    if room < m:
        with pytest.raises(ValueError):
            sequoia_tree(a, m, layers)
        return
    dp, bf = sequoia_tree(a, m, layers), brute_force_tree(a, m, layers)
    assert dp.value == pytest.approx(bf.value, abs=1e-12)
    assert tree_value(dp.shape, a) == pytest.approx(dp.value, abs=1e-12)


def test_chain_saturates():
    # one child per node: F*(m) = sum_{k<m} a^k -> 1 / (1 - a)
    assert sequoia_tree([0.5], 30).value == pytest.approx(2.0, abs=1e-8)
