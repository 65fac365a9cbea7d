"""GBV = block verification on the selected path's law (docs/theory.md §6.7), checked exactly."""
import numpy as np
import pytest

import specsim as s
from specsim.drafts import iid_paths
from specsim.verifiers.tree import gbv, gbv_path_model


@pytest.mark.parametrize("V,L,K,seed", [(3, 2, 2, 0), (3, 3, 2, 1), (4, 2, 3, 2), (3, 2, 1, 3)])
def test_gbv_tree_law_equals_block_on_selected_path_model(V, L, K, seed):
    t, d = s.random_model(V, seed, 0.7), s.random_model(V, seed + 9, 0.7)
    tree_law = s.output_law(gbv, t, d, L, iid_paths(K))
    path_law = s.output_law(s.block, t, gbv_path_model(d, K, target=t), L)
    for m in tree_law.emitted:
        assert np.allclose(tree_law.emitted[m], path_law.emitted[m], atol=1e-13)


def test_path_model_rows_are_distributions_and_k1_is_the_draft():
    t, d = s.random_model(4, 5, 0.5), s.random_model(4, 6, 0.5)
    assert np.allclose(gbv_path_model(d, 1, target=t)((1, 2)), d((1, 2)), atol=1e-14)
    m = gbv_path_model(d, 3, target=t)
    for prefix in [(), (0,), (2, 3)]:
        assert m(prefix).sum() == pytest.approx(1.0)
    # larger problems stay cheap on the chain engine and the result is certified lossless
    assert s.check_lossless(s.block, t, m, 3).lossless


def test_path_model_needs_the_target():
    with pytest.raises(ValueError, match="target"):
        gbv_path_model(s.random_model(3, 0), 2)
