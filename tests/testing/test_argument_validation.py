"""Bad input to specsim.testing's public functions: the exception type and the argument it names.

One table per module, rows ``(id, call, exception, message pattern)``, all run by one
parametrised test (ids ``module/case``), so a new case is one line.
"""
import numpy as np
import pytest
from hypothesis import find

from specsim.models import iid, random_model
from specsim.drafts import iid_paths
from specsim.testing import (BatchSampler, LossyVerifierError, SamplerError, assert_lossless, certify_case,
                             check_sampler, check_sampler_exact, completed_and_target_laws, from_verifier)
from specsim.testing.stats import (chi_square_power, complete_with_target, detectable_tv, detection_threshold,
                                   goodness_of_fit, pool_small_cells, samples_for_power)
from specsim.testing.strategies import (available_draft_processes, distribution_pairs, distributions,
                                        draft_processes, model_pairs)
from specsim.verifiers import block, token
from specsim.verifiers.base import Outcome, chain_verifier


T3, D3, D4 = random_model(3, 0), random_model(3, 1), random_model(4, 1)
SAMPLE = from_verifier(token)


def _exact_token(draft, p, q, u):
    return 0, int(np.argmax(p[0]))


def _always_zero(draft, p, q, rng):
    return 0, 0


def _reject_all(drafts, p, q, rng):
    return np.zeros(len(drafts), dtype=int), np.zeros(len(drafts), dtype=int)


# ---------------------------------------------------------------------------- specsim.testing.sampler
SAMPLER = [
    ("check_sampler-alpha-0", lambda: check_sampler(SAMPLE, T3, D3, 2, alpha=0), ValueError, r"alpha must lie in \(0, 1\)"),
    ("check_sampler-alpha-1", lambda: check_sampler(SAMPLE, T3, D3, 2, alpha=1.0), ValueError, "alpha must lie"),
    ("check_sampler-alpha-nan", lambda: check_sampler(SAMPLE, T3, D3, 2, alpha=np.nan), ValueError, "alpha must lie"),
    ("check_sampler-alpha-str", lambda: check_sampler(SAMPLE, T3, D3, 2, alpha="0.01"), TypeError,
     "alpha must be a real number"),
    ("check_sampler-power", lambda: check_sampler(SAMPLE, T3, D3, 2, power=1.0), ValueError, r"power must lie in \(0, 1\)"),
    ("check_sampler-power-nan", lambda: check_sampler(SAMPLE, T3, D3, 2, power=np.nan), ValueError, "power must lie"),
    # issue 12: min_expected = NaN pooled nothing and passed a sampler that always emits token 0
    ("check_sampler-min_expected-nan", lambda: check_sampler(_always_zero, T3, D3, 1, min_expected=np.nan),
     ValueError, r"min_expected must lie in \(0, inf\)"),
    ("check_sampler-min_expected-0", lambda: check_sampler(SAMPLE, T3, D3, 1, min_expected=0), ValueError,
     "min_expected must lie"),
    ("check_sampler-n-float", lambda: check_sampler(SAMPLE, T3, D3, 1, n=100.0), TypeError, "n must be an integer"),
    ("check_sampler-seed", lambda: check_sampler(SAMPLE, T3, D3, 1, seed=-1), ValueError, "seed must be >= 0"),
    ("check_sampler-sample_fn", lambda: check_sampler(None, T3, D3, 1), TypeError,
     "sample_fn must be callable or a BatchSampler, got NoneType"),
    ("check_sampler-name", lambda: check_sampler(SAMPLE, T3, D3, 1, name=3), TypeError, "name must be a str"),
    # issue 12: chunk = -1 failed a correct sampler on uninitialised memory
    ("BatchSampler-chunk-negative", lambda: BatchSampler(_reject_all, chunk=-1), ValueError, "chunk must be >= 1"),
    ("BatchSampler-chunk-float", lambda: BatchSampler(_reject_all, chunk=2.5), TypeError, "chunk must be an integer"),
    ("BatchSampler-fn", lambda: BatchSampler("fn"), TypeError, "fn must be callable"),
    # issue 12: tol = 0 never finished the bisection
    ("check_sampler_exact-tol-0", lambda: check_sampler_exact(_exact_token, T3, D3, 1, tol=0), ValueError,
     r"tol must lie in \[2.22045e-16"),
    ("check_sampler_exact-tol-nan", lambda: check_sampler_exact(_exact_token, T3, D3, 1, tol=np.nan), ValueError,
     "tol must lie"),
    ("check_sampler_exact-atol-nan", lambda: check_sampler_exact(_exact_token, T3, D3, 1, atol=np.nan), ValueError,
     r"atol must lie in \[0, 1\]"),
    ("check_sampler_exact-atol-negative", lambda: check_sampler_exact(_exact_token, T3, D3, 1, atol=-1.0),
     ValueError, "atol must lie"),
    ("check_sampler_exact-float-token", lambda: check_sampler_exact(lambda d, p, q, u: (0, 1.0), T3, D3, 1),
     ValueError, r"returned \(0, 1.0\), not \(accepted, token\)"),
    ("check_sampler-L0", lambda: check_sampler(SAMPLE, T3, D3, 0), ValueError, "L must be >= 1"),
    ("check_sampler-L-float", lambda: check_sampler(SAMPLE, T3, D3, 1.5), TypeError, "L must be an integer"),
    ("check_sampler-n0", lambda: check_sampler(SAMPLE, T3, D3, 1, n=0), ValueError, "n must be >= 1"),
    ("check_sampler-V-mismatch", lambda: check_sampler(SAMPLE, T3, D4, 1), ValueError,
     "target has V=3 but draft_model has V=4"),
    ("check_sampler-target-not-a-model", lambda: check_sampler(SAMPLE, [0.5, 0.5], D3, 1), TypeError,
     "target must be a specsim.models.Model, got list"),
    ("check_sampler-draft-not-a-model", lambda: check_sampler(SAMPLE, T3, np.full(3, 1 / 3), 1), TypeError,
     "draft_model must be a specsim.models.Model, got ndarray"),
    ("check_sampler-too-many-cells", lambda: check_sampler(SAMPLE, iid(np.full(20, 0.05)), iid(np.full(20, 0.05)), 4),
     ValueError, "too many for the joint test"),
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
     r"level must lie in \(0, 1\), got 0"),
    ("goodness_of_fit-power", lambda: goodness_of_fit([1, 2], [0.5, 0.5], level=0.1, power=1), ValueError,
     "power must lie in"),
    ("goodness_of_fit-min_expected-nan", lambda: goodness_of_fit([1, 2], [0.5, 0.5], 0.1, min_expected=np.nan),
     ValueError, "min_expected must lie"),
    ("goodness_of_fit-negative-count", lambda: goodness_of_fit([-1, 2], [0.5, 0.5], 0.1), ValueError,
     "counts must be finite and >= 0"),
    ("goodness_of_fit-nan-prob", lambda: goodness_of_fit([1, 2], [np.nan, 0.5], 0.1), ValueError,
     "probs must be finite and >= 0"),
    ("pool_small_cells-min_expected", lambda: pool_small_cells([1, 2], [0.5, 0.5], 3, min_expected=-1), ValueError,
     "min_expected must lie"),
    ("samples_for_power-max_n", lambda: samples_for_power([([0.6, 0.4], [0.5, 0.5])], 0.01, max_n=0), ValueError,
     "max_n must be >= 1"),
    ("complete_with_target-rng-None", lambda: complete_with_target(np.zeros((1, 2), int), np.ones(1, int),
                                                                   T3.table(1), None), TypeError,
     "rng must be a numpy.random.Generator"),
    ("detection_threshold-df0", lambda: detection_threshold(0, 0.01), ValueError, "df must be >= 1"),
    ("detection_threshold-level", lambda: detection_threshold(2, 1.5), ValueError, "level must lie in"),
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
    # issue 12: atol = NaN or negative gave false verdicts
    ("assert_lossless-atol-nan", lambda: assert_lossless(block, atol=np.nan, max_examples=2), ValueError,
     r"atol must lie in \[0, 1\]"),
    ("assert_lossless-atol-negative", lambda: assert_lossless(block, atol=-1e-9, max_examples=2), ValueError,
     "atol must lie"),
    ("assert_lossless-max_examples", lambda: assert_lossless(block, max_examples=0), ValueError,
     "max_examples must be >= 1"),
    ("assert_lossless-shrink", lambda: assert_lossless(block, max_examples=2, shrink="no"), TypeError,
     "shrink must be True or False"),
    ("certify_case-case", lambda: certify_case(block, (T3, D3, 1)), TypeError, "case must be a"),
]


TABLES = {"sampler": SAMPLER, "stats": STATS, "strategies": STRATEGIES, "assertions": ASSERTIONS}


@pytest.mark.parametrize("call,exc,pattern", [pytest.param(call, exc, pattern, id=f"{module}/{name}")
                                              for module, table in TABLES.items()
                                              for name, call, exc, pattern in table])
def test_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------------------- user code that raises
def _raises_on_token_1(draft, p, q, rng):
    if draft[0] == 1:
        raise IndexError("boom")
    return 0, 0


def _batch_raises(drafts, p, q, rng):
    raise KeyError("kv cache")


USER_CODE = [
    ("check_sampler", lambda: check_sampler(_raises_on_token_1, T3, D3, 1, n=200),
     r"_raises_on_token_1 raised IndexError: boom on draft \(1,\) with rows\n    p0 = "),
    ("BatchSampler", lambda: check_sampler(BatchSampler(_batch_raises, chunk=64), T3, D3, 1, n=100),
     r"batch sampler raised KeyError: 'kv cache' on draft chunk 0\.\.63 \(first draft"),
    ("tree-sampler", lambda: check_sampler(lambda tree, rng: 1 / 0, T3, D3, 1, n=10, drafting=iid_paths(2)),
     r"raised ZeroDivisionError: division by zero on draft tree tokens="),
    ("check_sampler_exact", lambda: check_sampler_exact(lambda d, p, q, u: [][1], T3, D3, 1),
     r"raised IndexError: list index out of range on draft \(\d,\) at uniforms \["),
]


@pytest.mark.parametrize("call,pattern", [pytest.param(c, m, id=i) for i, c, m in USER_CODE])
def test_exception_in_user_code_is_a_sampler_error_naming_the_draft_not_a_verdict(call, pattern):
    with pytest.raises(SamplerError, match=pattern) as info:
        call()
    assert info.value.__cause__ is not None


def test_assert_lossless_reports_one_failure_when_a_verifier_both_raises_and_is_lossy():
    # two distinct failures (a crash on drafts starting with 0, a lossy law elsewhere) used to come back as
    # a Hypothesis ExceptionGroup
    @chain_verifier("two_faults")
    def two_faults(draft, p, q):
        if draft[0] == 0:
            raise RuntimeError("token 0 crashes")
        return [Outcome(1.0, len(draft), p[len(draft)])]

    with pytest.raises(LossyVerifierError) as info:
        assert_lossless(two_faults, max_examples=60, derandomize=True)
    assert info.value.case is not None
