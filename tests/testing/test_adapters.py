"""Adapters: a torch batch sampler and transformers' speculative sampling, checked by check_sampler.

transformers (5.x: ``transformers.generation.utils._speculative_sampling``) is a real client: the
default path must pass; its static-ensemble option (``assistant_ensemble_weight``, DIVERSE) relaxes
the target on purpose and must be flagged.  Skipped when torch / transformers are missing.
"""
import inspect

import numpy as np
import pytest

from specsim.models import random_model
from specsim.testing import check_sampler, torch_batch_sampler
from specsim.testing.adapters import find_transformers_speculative_sampling


def _torch_token(bad=False):
    torch = pytest.importorskip("torch")

    def fn(draft_ids, draft_probs, target_probs, generator):
        """Dense-layout token-level speculative sampling in torch (float64)."""
        B, L = draft_ids.shape
        idx = torch.arange(B)
        ratio = torch.stack([target_probs[idx, i, draft_ids[:, i]] / draft_probs[idx, i, draft_ids[:, i]]
                             for i in range(L)], 1)
        u = torch.rand(B, L, generator=generator, dtype=ratio.dtype)
        fail = u >= ratio
        tau = torch.where(fail.any(1), fail.int().argmax(1), torch.full((B,), L))
        rows = target_probs[idx, tau].clone()
        rej = tau < L
        if not bad:
            res = (target_probs[idx, tau] - draft_probs[idx, tau.clamp(max=L - 1)]).clamp(min=0)
            rows[rej] = res[rej] / res[rej].sum(1, keepdim=True)
        tok = torch.multinomial(rows, 1, generator=generator)[:, 0]
        return tau, tok

    return fn


def test_torch_batch_sampler_adapter():
    t, d = random_model(4, 7, 0.5), random_model(4, 8, 0.5)
    assert check_sampler(torch_batch_sampler(_torch_token(), dtype="float64"), t, d, 3, n=20000).passed
    res = check_sampler(torch_batch_sampler(_torch_token(bad=True), dtype="float64"), t, d, 3, n=5000)
    assert not res.passed


@pytest.fixture(scope="module")
def hf():
    pytest.importorskip("torch")
    fn = find_transformers_speculative_sampling()
    if fn is None:
        pytest.skip("transformers with _speculative_sampling not installed")
    return fn


def test_transformers_signature_is_what_the_adapter_calls(hf):
    params = inspect.signature(hf).parameters
    for name in ("candidate_input_ids", "candidate_logits", "candidate_length", "new_logits"):
        assert name in params


def test_older_signature_gets_is_done_candidate_false(hf, monkeypatch):
    """transformers 4.x to 5.17: ``_speculative_sampling(..., new_logits, is_done_candidate)`` with
    the last argument required (seen on an H200 machine with 5.17); the finder binds it to False so
    the adapters' keyword calls work on every version."""
    from transformers.generation import utils

    from specsim.testing import transformers_sampler
    current, calls = hf, []

    def older(candidate_input_ids, candidate_logits, candidate_length, new_logits, is_done_candidate):
        calls.append(is_done_candidate)
        return current(candidate_input_ids=candidate_input_ids, candidate_logits=candidate_logits,
                       candidate_length=candidate_length, new_logits=new_logits)

    monkeypatch.setattr(utils, "_speculative_sampling", older)
    assert check_sampler(transformers_sampler(), random_model(3, 4, 0.5), random_model(3, 5, 0.5), 2, n=3000).passed
    assert calls and set(calls) == {False}


@pytest.mark.parametrize("V,L,seeds,n", [(3, 1, (10, 11), 6000), (3, 2, (0, 1), 20000), (4, 3, (2, 3), 12000)])
def test_transformers_speculative_sampling_is_lossless(hf, V, L, seeds, n):
    from specsim.testing import transformers_sampler
    t, d = random_model(V, seeds[0], 0.5), random_model(V, seeds[1], 0.5)
    res = check_sampler(transformers_sampler(), t, d, L, n=n)
    assert res.passed, str(res)
    assert res.detectable_tv < 0.1  # the check had power against 10% deviations


def test_transformers_static_ensemble_is_lossy_as_documented(hf):
    from specsim.testing import transformers_sampler
    if "assistant_ensemble_weight" not in inspect.signature(hf).parameters:
        pytest.skip("this transformers version has no static-ensemble option")
    t, d = random_model(3, 0, 0.5), random_model(3, 1, 0.5)
    res = check_sampler(transformers_sampler(assistant_ensemble_weight=0.5), t, d, 2, n=2000)
    assert not res.passed  # relaxed target v = w p + (1 - w) q: biased by design (DIVERSE, arXiv 2604.07622)


def test_transformers_boundary_convention_at_u_zero(hf, monkeypatch):
    # transformers up to 5.24 tests r <= p/q with r = torch.rand_like in [0, 1): at r = 0 a drafted
    # token with target probability 0 is accepted (docs/theory.md §11.3: never mix [0,1) with <=), a
    # bias of 2^-24 per float32 draw, far below any statistical test; 5.25 tests r < p/q.  Injected
    # here directly: the probe must see the convention of the installed version.
    torch = pytest.importorskip("torch")
    import transformers
    from packaging.version import Version

    from specsim.testing import transformers_sampler
    monkeypatch.setattr(torch, "rand_like", lambda x, *a, **k: torch.zeros_like(x))
    p = np.array([[0.0, 0.5, 0.5], [0.2, 0.3, 0.5]])
    q = np.array([[0.5, 0.25, 0.25]])
    accepted, _ = transformers_sampler()((0,), p, q, np.random.default_rng(0))
    strict = Version(transformers.__version__).release >= (5, 25)
    assert accepted == (0 if strict else 1)  # <=: p(x) = 0 yet accepted at r = 0
