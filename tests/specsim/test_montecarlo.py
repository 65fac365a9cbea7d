"""Monte Carlo engine against the exact one.

Each comparison uses a 5.3-sigma band (two-sided false-alarm rate 1e-7 per check under the normal
approximation); the completion chi-square rejects at p < 1e-6.  For hsd_released on this pair the
completed-law TV is ~0.05, far above what 20k samples detect with power > 0.999.
"""
import numpy as np
import pytest

import specsim as s
from specsim.montecarlo import estimate


@pytest.mark.parametrize("verifier", [s.token, s.block, s.hsd_capped])
def test_estimate_agrees_with_exact(verifier):
    t, d = s.random_model(3, 1, concentration=0.7), s.random_model(3, 2, concentration=0.7)
    e = estimate(verifier, t, d, 2, n=8000, rng=np.random.default_rng(5))
    exact = s.expected_accepted(verifier, t, d, 2)
    assert abs(e.expected_accepted - exact) < 5.3 * e.expected_accepted_se
    assert e.completion_pvalue > 1e-6
    assert e.block_efficiency == pytest.approx(e.expected_accepted + 1)


def test_completion_test_catches_hsd_released():
    t, d = s.random_model(3, 1, concentration=0.7), s.random_model(3, 2, concentration=0.7)
    assert s.check_lossless(s.hsd_released, t, d, 2).tv > 0.02
    e = estimate(s.hsd_released, t, d, 2, n=20000, rng=np.random.default_rng(6))
    assert e.completion_pvalue < 1e-6


@pytest.mark.parametrize("name,spec", [("specinfer", "iid:2"), ("sequoia", "swor:2"), ("traversal", "swor:2")])
def test_estimate_on_tree_processes_agrees_with_exact(name, spec):
    from specsim.drafts import parse_drafting
    from specsim.verifiers import TREE_VERIFIERS
    v = TREE_VERIFIERS[name]
    t, d = s.random_model(3, 4, concentration=0.7), s.random_model(3, 5, concentration=0.7)
    drafting = parse_drafting(spec)
    e = estimate(v, t, d, 2, n=4000, drafting=drafting, rng=np.random.default_rng(7))
    exact = s.expected_accepted(v, t, d, 2, drafting)
    assert abs(e.expected_accepted - exact) < 5.3 * e.expected_accepted_se
    assert e.completion_pvalue > 1e-6


def test_completion_test_is_the_shared_goodness_of_fit():
    """The completion fields read one SubTest from specsim.chisquare (the class testing re-exports)."""
    from specsim.chisquare import SubTest
    from specsim.testing import stats
    assert stats.SubTest is SubTest and stats.goodness_of_fit is s.montecarlo.goodness_of_fit
    t, d = s.random_model(3, 1, concentration=0.7), s.random_model(3, 2, concentration=0.7)
    e = estimate(s.token, t, d, 2, n=3000, rng=3)
    assert isinstance(e.completion, SubTest) and e.completion.level == 1e-3
    assert (e.completion_chi2, e.completion_dof, e.completion_pvalue) == (
        e.completion.statistic, e.completion.df, e.completion.p_value)
    assert estimate(s.token, t, d, 2, n=50, rng=3, complete=False).completion is None
