"""Bad input to specsim.testing's public functions: the exception type and the argument it names.

One table per module, rows ``(id, call, exception, message pattern)``, all run by one
parametrised test (ids ``module/case``), so a new case is one line.
"""
import numpy as np
import pytest
from hypothesis import find

from specsim.models import iid, random_model
from specsim.drafts import iid_paths
from specsim.testing import (BatchSampler, LossyVerifierError, SamplerError, assert_lossless, check_sampler,
                             check_sampler_exact, from_verifier)
from specsim.testing.assertions import certify_case
from specsim.testing.sampler import completed_and_target_laws
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


# ---------------------------------------------------------------------------- issue 26: fuzz findings
from specsim.testing import check_step, step_from_verifier
from specsim.testing.selftest.mutation import mutation_table  # noqa: E402
from specsim.testing.properties import check_engine_properties, reference_verify  # noqa: E402
from specsim.verifiers import sequoia, tree_verifier  # noqa: E402

_ROOT = tree_verifier("root_only")(lambda tree: [Outcome(1.0, 0, tree.p[0])])
_BLOCK_STEP = step_from_verifier(block, L=2)

CORE_FUZZ = [
    # step_from_verifier accepted a tree verifier and failed at the first step
    ("step_from_verifier-tree-verifier", lambda: step_from_verifier(sequoia, L=2), TypeError,
     r"step_from_verifier runs a chain verifier.*'sequoia' is a tree verifier"),
    ("step_from_verifier-decorated-tree-law", lambda: step_from_verifier(_ROOT, L=1), TypeError,
     "'root_only' is a tree verifier"),
    ("step_from_verifier-plain-f(tree)", lambda: step_from_verifier(lambda tree: [], L=1), TypeError,
     "tree_verifier"),
    ("step_from_verifier-not-callable", lambda: step_from_verifier("block", L=1), TypeError,
     "verifier must be a Verifier or a callable law, got str"),
    # seeds reached numpy unchecked ("expected non-negative integer", "SeedSequence expects int or sequence")
    ("check_step-seed-negative", lambda: check_step(_BLOCK_STEP, n=10, seed=-1), ValueError, "seed must be >= 0, got -1"),
    ("check_step-seed-float", lambda: check_step(_BLOCK_STEP, n=10, seed=1.5), TypeError,
     "seed must be an integer seed >= 0, got 1.5"),
    ("check_step-seed-bool", lambda: check_step(_BLOCK_STEP, n=10, seed=True), TypeError, "seed must be an integer"),
    ("check_engine_properties-seed-negative", lambda: check_engine_properties(reference_verify, trials=2, seed=-1),
     ValueError, "seed must be >= 0"),
    ("check_engine_properties-seed-float", lambda: check_engine_properties(reference_verify, trials=2, seed=1.5),
     TypeError, "seed must be an integer"),
    ("mutation_table-seed-negative", lambda: mutation_table({}, seed=-1), ValueError, "seed must be >= 0"),
    ("mutation_table-seed-string", lambda: mutation_table({}, seed="0"), TypeError, "seed must be an integer"),
    ("check_sampler-seed-float", lambda: check_sampler(SAMPLE, T3, D3, 1, n=10, seed=1.5), TypeError,
     "seed must be an integer"),
    ("check_sampler-seed-bool", lambda: check_sampler(SAMPLE, T3, D3, 1, n=10, seed=False), TypeError,
     "seed must be an integer"),
]


@pytest.mark.parametrize("call,exc,pattern", [pytest.param(c, e, m, id=i) for i, c, e, m in CORE_FUZZ])
def test_core_fuzz_findings(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------------------- specsim.testing.engines / adapters
# Issue 26: the engine-layout adapters checked neither their arguments (dtype='foo' an AttributeError
# and device='foo' a RuntimeError at the first call, pad_drafts='no' and a None engine accepted) nor
# the batch (a short seeds array an IndexError; float draft ids, p with spare rows and rows summing
# to 2 accepted).  torch is needed to make an adapter, so these run only where it is installed.
def _layout_cases():
    import torch

    from specsim.testing import torch_batch_sampler, transformers_sampler
    from specsim.testing.adapters import find_transformers_speculative_sampling
    from specsim.testing.engines import (EngineAdapter, flashinfer_chain_sampler, sglang_tree_sampler,
                                         transformers_chain_sampler, vllm_mrv2_rejection_sampler,
                                         vllm_rejection_sampler)
    from specsim.testing.properties import reference_verify

    def accept_none(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
                    target_logits, bonus_token_ids, sampling_metadata):  # vLLM v1's signature: rejects x_1, emits 0
        out = torch.full((len(num_draft_tokens), max_spec_len + 1), -1, dtype=torch.int32)
        out[:, 0] = 0
        return out

    def engine(*args, **kw):
        raise AssertionError("the engine must not be reached")

    vllm = vllm_rejection_sampler(accept_none)
    dense = EngineAdapter(reference_verify, "reference")
    sglang = sglang_tree_sampler(engine)  # takes injected uniforms
    d, p, q, s = np.array([[1, 2], [0, -1]]), np.full((2, 3, 3), 1 / 3), np.full((2, 2, 3), 1 / 3), np.array([4, 5])
    nan_row = q.copy()
    nan_row[0, 1, 2] = np.nan
    cases = [
        # construction
        ("vllm-engine-None", lambda: vllm_rejection_sampler(None), TypeError,
         "rejection_sample must be callable, got NoneType"),
        ("vllm-dtype-foo", lambda: vllm_rejection_sampler(engine, dtype="foo"), ValueError,
         "dtype: 'foo' is not a torch dtype name"),
        ("vllm-dtype-int32", lambda: vllm_rejection_sampler(engine, dtype="int32"), ValueError,
         "dtype must be a floating-point dtype"),
        ("vllm-dtype-number", lambda: vllm_rejection_sampler(engine, dtype=32), TypeError,
         "dtype must be a torch floating dtype or its name, got int"),
        ("vllm-device-foo", lambda: vllm_rejection_sampler(engine, device="foo"), ValueError,
         "device: 'foo' is not a torch device"),
        ("vllm-device-list", lambda: vllm_rejection_sampler(engine, device=["cpu"]), TypeError,
         "device must be a str, an int or a torch.device, got list"),
        ("vllm-pad_drafts-str", lambda: vllm_rejection_sampler(engine, pad_drafts="no"), TypeError,
         "pad_drafts must be True or False, got 'no'"),
        ("vllm-uniform_helper", lambda: vllm_rejection_sampler(engine, uniform_helper=1), TypeError,
         "uniform_helper must be a str or None, got int"),
        ("vllm-name", lambda: vllm_rejection_sampler(engine, name=1), TypeError, "name must be a str or None"),
        ("mrv2-engine-None", lambda: vllm_mrv2_rejection_sampler(None), TypeError, "rejection_sample must be callable"),
        ("mrv2-block_verification", lambda: vllm_mrv2_rejection_sampler(engine, block_verification=1), TypeError,
         "block_verification must be True or False"),
        ("mrv2-pad_drafts", lambda: vllm_mrv2_rejection_sampler(engine, pad_drafts="True"), TypeError,
         "pad_drafts must be True or False"),
        ("mrv2-dtype", lambda: vllm_mrv2_rejection_sampler(engine, dtype="foo"), ValueError, "dtype: 'foo'"),
        ("flashinfer-engine-None", lambda: flashinfer_chain_sampler(None), TypeError,
         "chain_speculative_sampling must be callable"),
        ("flashinfer-per_request", lambda: flashinfer_chain_sampler(engine, per_request="no"), TypeError,
         "per_request must be True or False"),
        ("flashinfer-device", lambda: flashinfer_chain_sampler(engine, device="gpu0"), ValueError,
         "device: 'gpu0' is not a torch device"),
        ("sglang-engine-None", lambda: sglang_tree_sampler(None), TypeError,
         "tree_speculative_sampling_target_only must be callable"),
        ("sglang-dtype", lambda: sglang_tree_sampler(engine, dtype=torch.int64), ValueError,
         r"dtype must be a floating-point dtype \(probabilities / logits\), got torch.int64"),
        ("transformers-engine-None", lambda: transformers_chain_sampler(None), TypeError,
         "speculative_sampling must be callable"),
        ("transformers-dtype", lambda: transformers_chain_sampler(engine, dtype="foo"), ValueError, "dtype: 'foo'"),
        ("EngineAdapter-fn-None", lambda: EngineAdapter(None, "x"), TypeError, "fn must be callable, got NoneType"),
        ("EngineAdapter-name", lambda: EngineAdapter(engine, None), TypeError, "name must be a str, got NoneType"),
        ("EngineAdapter-takes_uniforms", lambda: EngineAdapter(engine, "x", takes_uniforms="yes"), TypeError,
         "takes_uniforms must be True or False"),
        ("torch_batch_sampler-fn", lambda: torch_batch_sampler(None), TypeError, "fn must be callable"),
        ("torch_batch_sampler-dtype", lambda: torch_batch_sampler(engine, dtype="foo"), ValueError, "dtype: 'foo'"),
        ("torch_batch_sampler-device", lambda: torch_batch_sampler(engine, device="foo"), ValueError,
         "device: 'foo' is not a torch device"),
        ("torch_batch_sampler-name", lambda: torch_batch_sampler(engine, name=2), TypeError, "name must be a str"),
        # the batch of one call (the vLLM adapter and the dense EngineAdapter share the check)
        ("call-seeds-short", lambda: vllm(d, p, q, s[:1]), ValueError,
         "seeds must hold one seed per request, B = 2, got 1"),
        ("call-seeds-float", lambda: vllm(d, p, q, s.astype(float)), TypeError,
         "seeds must be an integer array, got dtype float64"),
        ("call-seeds-negative", lambda: dense(d, p, q, np.array([4, -1])), ValueError,
         "seeds must be >= 0, got -1 at request 1"),
        ("call-drafts-float", lambda: vllm(d.astype(float), p, q, s), TypeError,
         "drafts must be an integer array, got dtype float64"),
        ("call-drafts-bool", lambda: dense(d > 0, p, q, s), TypeError,
         "drafts must be an integer array, got dtype bool"),
        ("call-drafts-1d", lambda: dense(d[0], p[0], q[0], s[:1]), ValueError,
         r"drafts must have 2 dimensions, got shape \(2,\)"),
        ("call-draft-id-V", lambda: vllm(np.array([[1, 3], [0, -1]]), p, q, s), ValueError,
         r"drafts\[0, 1\] = 3 is outside 0..2"),
        ("call-draft-id--2", lambda: vllm(np.array([[1, -2], [0, -1]]), p, q, s), ValueError, r"drafts\[0, 1\] = -2"),
        ("call-draft-after-placeholder", lambda: dense(np.array([[-1, 2], [0, -1]]), p, q, s), ValueError,
         r"drafts\[0\] = \[-1, 2\]: id 2 after a -1 placeholder"),
        ("call-p-spare-rows", lambda: vllm(d, np.full((2, 4, 3), 1 / 3), q, s), ValueError,
         r"p must have shape \(B, L \+ 1, V\) = \(2, 3, V\)"),
        ("call-q-shape", lambda: vllm(d, p, q[:, :1], s), ValueError, r"q must have shape \(B, L, V\) = \(2, 2, 3\)"),
        ("call-V1", lambda: dense(np.zeros((1, 1), int), np.ones((1, 2, 1)), np.ones((1, 1, 1)), s[:1]), ValueError,
         "with V >= 2"),
        ("call-row-sums-to-2", lambda: vllm(d, 2 * p, q, s), ValueError,
         r"p\[0, 0\]: entries sum to 2.0, more than 1 \(tolerance 1e-08\)"),
        ("call-row-negative", lambda: dense(d, p, q - np.eye(3)[0] / 2, s), ValueError,
         r"q\[0, 0\]: negative entry -0.16"),
        ("call-row-inf", lambda: vllm(d, np.where(p > 0, np.inf, p), q, s), ValueError,
         r"p\[0, 0\]: non-finite entry inf"),
        ("call-row-partial-nan", lambda: vllm(d, p, nan_row, s), ValueError,
         r"q\[0, 1\]: NaN at token 2 in a row that is not all NaN"),
        ("call-rows-strings", lambda: vllm(d, np.full((2, 3, 3), "a"), q, s), TypeError, "p: expected real numbers"),
        ("call-uniforms-shape", lambda: sglang(d, p, q, s, uniforms=np.zeros((2, 3))), ValueError,
         r"uniforms must have shape \(B, L\) = \(2, 2\), got \(2, 3\)"),
        ("call-uniforms-1", lambda: sglang(d, p, q, s, uniforms=np.ones((2, 2))), ValueError,
         r"uniforms must lie in \[0, 1\), got 1.0"),
        ("call-uniforms-not-injectable", lambda: dense(d, p, q, s, uniforms=np.zeros((2, 2))), TypeError,
         "uniforms cannot be injected"),
    ]
    if find_transformers_speculative_sampling() is not None:
        cases += [("transformers_sampler-dtype", lambda: transformers_sampler(dtype="foo"), ValueError, "dtype: 'foo'"),
                  ("transformers_sampler-weight", lambda: transformers_sampler(assistant_ensemble_weight="0.5"),
                   TypeError, "assistant_ensemble_weight must be a real number")]
    return cases


try:
    import torch as _torch  # noqa: F401
    LAYOUTS = _layout_cases()
except ImportError:
    LAYOUTS = []


@pytest.mark.skipif(not LAYOUTS, reason="torch is not installed")
@pytest.mark.parametrize("call,exc,pattern", [pytest.param(c, e, m, id=f"layouts/{i}") for i, c, e, m in LAYOUTS])
def test_layout_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


def test_valid_seeds_and_chain_verifiers_still_run():
    # negative controls: numpy integer and large seeds are seeds; a chain verifier (decorated or a plain law)
    # still makes a step; the same seed gives the same run
    assert check_step(_BLOCK_STEP, n=50, seed=np.int64(3)).n == 50
    a, b = (check_step(_BLOCK_STEP, n=50, seed=2 ** 40) for _ in range(2))
    assert a.subtests[0].statistic == b.subtests[0].statistic
    assert check_engine_properties(reference_verify, trials=4, seed=np.uint32(5)).passed
    assert mutation_table({}, seed=np.int32(1)) == []
    step = step_from_verifier(lambda d, p, q: [Outcome(1.0, 0, p[0])], L=1)
    assert len(step((0,), lambda ctxs: [[0.5, 0.5, 0.0]] * len(ctxs), lambda ctxs: [[0.5, 0.5, 0.0]] * len(ctxs),
                    np.random.default_rng(0))) == 1


def test_layout_batch_check_keeps_low_precision_and_degenerate_rows():
    """Positive controls of the batch check: float32 and bfloat16 rows off 1 by their own rounding
    pass (the float64 tolerance would refuse them), and so do the degenerate rows
    check_engine_properties sends on purpose (all NaN, all zero, mass removed)."""
    torch = pytest.importorskip("torch")
    from specsim.testing.engines import validate_batch

    V = 7
    w = np.random.default_rng(0).random((1, 3, V))
    rows = (w / w.sum(-1, keepdims=True)).astype(np.float32)
    assert np.abs(rows.astype(np.float64).sum(-1) - 1).max() > 1e-8  # off by more than the float64 tolerance
    drafts, seeds = np.array([[1, 2]]), np.array([0])
    assert validate_batch(drafts, rows, rows[:, :2], seeds)[1].dtype == np.float64
    bf = torch.as_tensor(rows).to(torch.bfloat16)
    assert float((bf.double().sum(-1) - 1).abs().max()) > 1e-8
    validate_batch(drafts, bf, bf[:, :2], seeds)
    with pytest.raises(ValueError, match="more than 1"):  # but a bfloat16 row summing to 1.1 is refused
        validate_batch(drafts, bf * 1.1, bf[:, :2], seeds)
    degenerate = rows.astype(np.float64)
    degenerate[0, 0] = np.nan
    degenerate[0, 1] = 0.0
    degenerate[0, 2, 3] = 0.0
    validate_batch(drafts, degenerate, degenerate[:, :2], seeds)


def test_dense_engine_adapter_output_is_checked():
    """A dense function returning floats or the wrong length is malformed output (EngineOutputError, a
    SamplerError), never silently cast."""
    pytest.importorskip("torch")
    from specsim.testing.engines import EngineAdapter, EngineOutputError

    d, p, q, s = np.array([[1, 2]]), np.full((1, 3, 3), 1 / 3), np.full((1, 2, 3), 1 / 3), np.array([0])
    floats = EngineAdapter(lambda drafts, p, q, seeds: (np.zeros(1), np.zeros(1)), "floats")
    with pytest.raises(EngineOutputError, match=r"floats returned accepted float64\[1\]; expected integers \[1\]"):
        floats(d, p, q, s)
    short = EngineAdapter(lambda drafts, p, q, seeds: (np.zeros(2, int), np.zeros(2, int)), "short")
    with pytest.raises(SamplerError, match=r"short returned accepted int64\[2\]"):
        short(d, p, q, s)
    one = EngineAdapter(lambda drafts, p, q, seeds: np.zeros(1, int), "one")
    with pytest.raises(EngineOutputError, match="the engine's output could not be read"):
        one(d, p, q, s)


def test_check_engine_properties_refuses_an_empty_property_list():
    # issue 26: properties=[] reported PASS for an engine that emits token 0 everywhere
    from specsim.testing.properties import check_engine_properties, reference_verify

    def zeros(drafts, draft_probs, target_probs, seeds):
        return np.zeros(len(drafts), dtype=np.int64), np.zeros(len(drafts), dtype=np.int64)

    for empty in ([], ()):
        with pytest.raises(ValueError, match="properties"):
            check_engine_properties(zeros, properties=empty)
    with pytest.raises(TypeError, match="properties"):
        check_engine_properties(zeros, properties="placeholder")
    # negative control: a named property still runs, and the reference engine passes it
    assert check_engine_properties(reference_verify, trials=8, properties=["bonus_row"]).passed
