"""khisti_optimal: Khisti et al.'s two-step scheme with LP-optimal weights (docs/theory.md §6.5)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lp.coupling import multidraft_bound
from specsim import check_lossless
from specsim.drafts import fixed_shape, iid_paths, swor_tree
from specsim.testing.strategies import distribution_pairs, model_pairs
from specsim.verifiers.tree import (KHISTI_OPTIMAL_MAX_VARIABLES, khisti, khisti_optimal, khisti_optimal_selection,
                                    khisti_self_normalised, multidraft_acceptance, verifiers_for)


@settings(max_examples=6, deadline=None)
@given(pair=model_pairs(V=3, depth=st.integers(1, 2)),
       process=st.sampled_from([iid_paths(2), iid_paths(3), fixed_shape((2, 2))]))
def test_lossless_on_iid_processes(pair, process):
    L = 2 if process.widths != (3,) else 1
    cert = check_lossless(khisti_optimal, *pair, L, process)
    assert cert.lossless, cert


@settings(max_examples=25, deadline=None)
@given(pq=distribution_pairs(V=st.integers(2, 5)), K=st.integers(1, 3))
def test_acceptance_equals_the_multidraft_bound(pq, K):
    p, q = pq
    alpha = multidraft_acceptance("khisti_optimal", p, q, K)
    assert alpha == pytest.approx(multidraft_bound(p, q, K).value, abs=1e-8)
    assert khisti_optimal_selection(p, q, K).acceptance == pytest.approx(alpha, abs=1e-12)
    # the self-normalised weights are one feasible choice: never above the optimum
    assert multidraft_acceptance("khisti", p, q, K) <= alpha + 1e-9


def test_k2_closed_form_and_gap_to_self_normalised():
    # p = (0, 1/2, 1/2), q = (0.8, 0.1, 0.1): min_S p(S) + 1 - q(S)^2 at S = {0} is 0 + 1 - 0.64
    p, q = [0.0, 0.5, 0.5], [0.8, 0.1, 0.1]
    assert multidraft_acceptance("khisti_optimal", p, q, 2) == pytest.approx(0.36, abs=1e-9)
    rng = np.random.default_rng(7)
    gaps = []
    for _ in range(40):
        p, q = rng.dirichlet(np.ones(4) * 0.5), rng.dirichlet(np.ones(4) * 0.5)
        gaps.append(multidraft_acceptance("khisti_optimal", p, q, 2) - multidraft_acceptance("khisti", p, q, 2))
    assert min(gaps) > -1e-9 and max(gaps) > 0.01   # the old rule is lossless but not optimal


def test_names_and_registry():
    assert khisti_self_normalised is khisti
    assert khisti_optimal in verifiers_for(iid_paths(2))
    assert khisti_optimal not in verifiers_for(swor_tree(2))


def test_support_too_large_names_the_limit():
    V = 700
    p = np.full(V, 1.0 / V)
    with pytest.raises(ValueError, match="KHISTI_OPTIMAL_MAX_VARIABLES"):
        khisti_optimal_selection(p, p, 2)
    assert KHISTI_OPTIMAL_MAX_VARIABLES > 0
