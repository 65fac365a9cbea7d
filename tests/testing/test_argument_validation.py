"""Bad input to specsim.testing's public functions: the exception type and the argument it names.

One table per module, rows ``(id, call, exception, message pattern)``, all run by one
parametrised test (ids ``module/case``), so a new case is one line.
"""
import numpy as np
import pytest
from hypothesis import find

from specsim.models import iid, random_model
from specsim.testing import (assert_lossless, check_sampler, check_sampler_exact, completed_and_target_laws,
                             from_verifier)
from specsim.testing.stats import chi_square_power, detectable_tv, detection_threshold, goodness_of_fit
from specsim.testing.strategies import (available_draft_processes, distribution_pairs, distributions,
                                        draft_processes, model_pairs)
from specsim.verifiers import block, token


T3, D3, D4 = random_model(3, 0), random_model(3, 1), random_model(4, 1)
SAMPLE = from_verifier(token)


def _exact_token(draft, p, q, u):
    return 0, int(np.argmax(p[0]))


# ---------------------------------------------------------------------------- specsim.testing.sampler
SAMPLER = [
    ("check_sampler-alpha-0", lambda: check_sampler(SAMPLE, T3, D3, 2, alpha=0), ValueError, r"alpha must be in \(0, 1\)"),
    ("check_sampler-alpha-1", lambda: check_sampler(SAMPLE, T3, D3, 2, alpha=1.0), ValueError, "alpha must be"),
    ("check_sampler-power", lambda: check_sampler(SAMPLE, T3, D3, 2, power=1.0), ValueError, r"power must be in \(0, 1\)"),
    ("check_sampler-L0", lambda: check_sampler(SAMPLE, T3, D3, 0), ValueError, "L must be >= 1"),
    ("check_sampler-L-float", lambda: check_sampler(SAMPLE, T3, D3, 1.5), ValueError, "L must be an integer"),
    ("check_sampler-n0", lambda: check_sampler(SAMPLE, T3, D3, 1, n=0), ValueError, "n must be >= 1"),
    ("check_sampler-V-mismatch", lambda: check_sampler(SAMPLE, T3, D4, 1), ValueError,
     "target has V=3 but draft_model has V=4"),
    ("check_sampler-target-not-a-model", lambda: check_sampler(SAMPLE, [0.5, 0.5], D3, 1), TypeError,
     "target must be a specsim.models.Model, got list"),
    ("check_sampler-draft-not-a-model", lambda: check_sampler(SAMPLE, T3, np.full(3, 1 / 3), 1), TypeError,
     "draft_model must be a specsim.models.Model, got ndarray"),
    ("check_sampler-too-many-cells", lambda: check_sampler(SAMPLE, iid(np.full(20, 0.05)), iid(np.full(20, 0.05)), 4),
     ValueError, "too many for the joint test"),
    ("check_sampler-draft-and-draft_model", lambda: check_sampler(SAMPLE, T3, draft=D3, draft_model=D3, L=1),
     TypeError, r"got both 'draft' \(deprecated\) and 'draft_model'"),
    ("check_sampler_exact-L0", lambda: check_sampler_exact(_exact_token, T3, D3, 0), ValueError, "L must be >= 1"),
    ("check_sampler_exact-n_uniforms", lambda: check_sampler_exact(_exact_token, T3, D3, 1, n_uniforms=0),
     ValueError, "n_uniforms must be >= 1"),
    ("check_sampler_exact-grid", lambda: check_sampler_exact(_exact_token, T3, D3, 1, grid=0), ValueError,
     "grid must be >= 1"),
    ("check_sampler_exact-V-mismatch", lambda: check_sampler_exact(_exact_token, T3, D4, 1), ValueError,
     "draft_model has V=4"),
    ("check_sampler_exact-bad-output", lambda: check_sampler_exact(lambda d, p, q, u: (5, 0), T3, D3, 1), ValueError,
     r"returned \(accepted, token\) = \(5, 0\)"),
    ("completed_and_target_laws-V-mismatch", lambda: completed_and_target_laws(block, T3, D4, 1), ValueError,
     "draft_model has V=4"),
]



# ---------------------------------------------------------------------------- specsim.testing.stats
STATS = [
    ("goodness_of_fit-lengths", lambda: goodness_of_fit([1, 2], [0.5, 0.25, 0.25], level=0.01), ValueError,
     "counts and probs must be 1-D of one length"),
    ("goodness_of_fit-2d", lambda: goodness_of_fit(np.ones((2, 2)), np.full((2, 2), 0.25), level=0.01), ValueError,
     "1-D"),
    ("goodness_of_fit-level", lambda: goodness_of_fit([1, 2], [0.5, 0.5], level=0), ValueError,
     r"level must be in \(0, 1\), got 0"),
    ("goodness_of_fit-power", lambda: goodness_of_fit([1, 2], [0.5, 0.5], level=0.1, power=1), ValueError,
     "power must be in"),
    ("detection_threshold-df0", lambda: detection_threshold(0, 0.01), ValueError, "df must be >= 1"),
    ("detection_threshold-level", lambda: detection_threshold(2, 1.5), ValueError, "level must be in"),
    ("chi_square_power-negative", lambda: chi_square_power(2, 0.01, -1.0), ValueError, "noncentrality must be >= 0"),
    ("detectable_tv-n0", lambda: detectable_tv(2, 0.01, 0), ValueError, "n must be >= 1"),
]



# ---------------------------------------------------------------------------- specsim.testing.strategies
def _first(strategy):
    return lambda: find(strategy, lambda x: True)


STRATEGIES = [
    ("distributions-V1", _first(distributions(1)), ValueError, "distributions need V >= 2, got 1"),
    ("model_pairs-V1", _first(model_pairs(V=1)), ValueError, "model_pairs need V >= 2, got 1"),
    ("distribution_pairs-V1", _first(distribution_pairs(1)), ValueError, "distribution_pairs need V >= 2, got 1"),
    ("available_draft_processes-kind", lambda: available_draft_processes("forest"), ValueError,
     "kind must be 'chain', 'tree' or 'any', got 'forest'"),
    ("draft_processes-none-applies", lambda: draft_processes("tree", needs={"greedy"}), ValueError,
     "no available draft process of kind 'tree'"),
]



# ---------------------------------------------------------------------------- specsim.testing.assertions
ASSERTIONS = [
    ("assert_lossless-V1", lambda: assert_lossless(block, V=1, max_examples=2), ValueError, "V >= 2"),
    ("assert_lossless-not-a-verifier", lambda: assert_lossless(3, max_examples=2), TypeError,
     "verifier must be a Verifier or a callable law, got int"),
]


TABLES = {"sampler": SAMPLER, "stats": STATS, "strategies": STRATEGIES, "assertions": ASSERTIONS}


@pytest.mark.parametrize("call,exc,pattern", [pytest.param(call, exc, pattern, id=f"{module}/{name}")
                                              for module, table in TABLES.items()
                                              for name, call, exc, pattern in table])
def test_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()
