"""The compiled block-verification process law (specsim/verifiers/_chain_kernels.py) against the
numpy law it shortcuts (``_jit.disabled()``): the same emitted law (elementwise work in the same
order; totals summed in another order, so to ~1e-16), the same draft count and certificates, on
random, tied, one-hot, subnormal and near-one-hot rows, with drafts of probability 0."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import specsim as s
from specsim import _jit
from specsim.drafts import chain
from specsim.testing.strategies import adversarial_pairs, model_pairs
from specsim.verifiers import chain as chain_module
from tests.specsim.test_exact_level_stacking import _extreme_model

pytestmark = pytest.mark.skipif(not _jit.enabled(), reason="numba not installed (the fast extra)")


def _laws(t, d, L):
    V = t.V
    out = []
    for off in (False, True):
        e, m = {k: np.zeros(V ** k) for k in range(1, L + 2)}, np.zeros(L + 1)
        if off:
            with _jit.disabled():
                n = chain_module._block_process_law(chain(), t, d, L, e, m)
        else:
            n = chain_module._block_process_law(chain(), t, d, L, e, m)
        out.append((e, m, n))
    return out


def _assert_agree(t, d, L):
    (e, m, n), (e0, m0, n0) = _laws(t, d, L)
    assert n == n0
    np.testing.assert_allclose(m, m0, rtol=0, atol=1e-15)
    for k in e0:
        np.testing.assert_allclose(e[k], e0[k], rtol=1e-14, atol=1e-300, err_msg=f"length {k}")
        assert np.array_equal(e[k] > 0, e0[k] > 0), k       # the same support: no mass invented or lost
    c = s.check_lossless(s.block, t, d, L)
    with _jit.disabled():
        c0 = s.check_lossless(s.block, t, d, L)
    assert c.lossless == c0.lossless and c.impossible_mass == c0.impossible_mass
    if c0.max_abs_error > 1e-14:                              # else the worst string is a rounding tie
        assert c.worst_sequence == c0.worst_sequence
    assert abs(c.max_abs_error - c0.max_abs_error) <= 1e-15
    assert abs(c.block_efficiency - c0.block_efficiency) <= 1e-14


@pytest.mark.parametrize("V,L,concentration", [(2, 1, 1.0), (2, 9, 0.3), (3, 5, 0.1), (4, 6, 1.0),
                                               (5, 4, 0.05), (16, 3, 1.0), (17, 2, 0.2)])
def test_compiled_law_matches_the_numpy_law(V, L, concentration):
    t = s.random_model(V, 21 + V, concentration, stream="counter")
    d = s.random_model(V, 22 + V, concentration, stream="counter")
    _assert_agree(t, d, L)


@pytest.mark.parametrize("V", [3, 4])
def test_compiled_law_at_extreme_rows(V):
    for shift in range(4):
        _assert_agree(_extreme_model(0, V), _extreme_model(shift, V), 4)
    _assert_agree(_extreme_model(1, V), _extreme_model(1, V), 4)      # q = p: every draft accepted


def test_compiled_law_on_iid_tables_and_above_the_size_limit(monkeypatch):
    """Broadcast (i.i.d.) tables are stacked like any other; above _JIT_ROWS the numpy law runs."""
    _assert_agree(s.iid([0.2, 0.3, 0.5]), s.iid([0.5, 0.5, 0.0]), 3)
    monkeypatch.setattr(chain_module, "_JIT_ROWS", 1)
    t, d = s.random_model(3, 1), s.random_model(3, 2)
    (e, m, _), (e0, m0, _) = _laws(t, d, 3)
    assert np.array_equal(m, m0) and all(np.array_equal(e[k], e0[k]) for k in e)


def test_a_lossy_mutant_is_still_caught():
    """Negative control: the kernel computes block verification's law, so hsd_released (lossy)
    still fails on the same pair while block passes."""
    t, d = s.random_model(3, 0), s.random_model(3, 1)
    assert s.check_lossless(s.block, t, d, 3).lossless
    assert not s.check_lossless(s.hsd_released, t, d, 3).lossless


@settings(max_examples=40, deadline=None)
@given(pair=st.one_of(model_pairs(), adversarial_pairs()), L=st.integers(1, 4))
def test_compiled_law_on_drawn_pairs(pair, L):
    _assert_agree(pair.target, pair.draft_model, L)
