"""GBV = block verification on the selected path's law (docs/theory.md §6.7), checked exactly."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import specsim as s
from specsim.drafts import iid_paths
from specsim.testing.strategies import model_pairs
from specsim.verifiers import gbv
from specsim.verifiers.multipath import gbv_path_model


@settings(max_examples=10)
@given(pair=model_pairs(), L=st.integers(1, 2), K=st.integers(1, 3))
def test_gbv_tree_law_equals_block_on_selected_path_model(pair, L, K):
    t, d = pair
    tree_law = s.output_law(gbv, t, d, L, iid_paths(K))
    path_law = s.output_law(s.block, t, gbv_path_model(d, K, target=t), L)
    for m in tree_law.emitted:
        assert np.allclose(tree_law.emitted[m], path_law.emitted[m], atol=1e-13)


@settings(max_examples=10)
@given(pair=model_pairs(V=4), K=st.integers(2, 3))
def test_path_model_rows_are_distributions_and_k1_is_the_draft(pair, K):
    t, d = pair
    assert np.allclose(gbv_path_model(d, 1, target=t)((1, 2)), d((1, 2)), atol=1e-14)
    m = gbv_path_model(d, K, target=t)
    for prefix in [(), (0,), (2, 3)]:
        assert m(prefix).sum() == pytest.approx(1.0) and m(prefix).min() >= 0
    # larger problems stay cheap on the chain engine and the result is certified lossless
    assert s.check_lossless(s.block, t, m, 3).lossless
