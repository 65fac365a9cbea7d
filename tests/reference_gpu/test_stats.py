"""Statistical tier: the verification kernels through the public testing path,
``check_sampler(torch_batch_sampler(...))`` on ``reference_gpu.api.verify_chain_dense``.

check_sampler draws n drafts from the draft model, runs the kernel on them with per-request noise
(``draw_chain_noise``), completes every emitted block with target samples and applies the
completion chi-square of specsim.testing.stats to the completed strings (joint law on V^{L+1}
and each position's marginal) against the target's joint law.

* Backend: the pure-torch reference on CPU (the Triton kernel equals it bit for bit, see
  test_kernels.py; under the CPU interpreter it runs ~1000x slower), and the Triton kernel too
  when CUDA is present.
* False-alarm rate: ALPHA = 1e-3 per call (Bonferroni over its L + 2 sub-tests), so the lossless
  calls below false-alarm with probability at most (number of calls) x 1e-3 (union bound); the
  seeds are fixed, so a run is reproducible.
* Power: every passing call also asserts ``detectable_tv <= MAX_DETECTABLE_TV``: a kernel whose
  completed law is at TV >= 0.06 from the target would have been flagged with probability >= 0.99
  (non-central chi-square).
* Negative control: greedy mode on stochastic targets is lossy; its exact completed law (specsim's
  ``greedy`` verifier, the same rule) gives the n at which the call has power 0.99, and the call
  with that many samples must fail.
"""
from __future__ import annotations

import pytest
import torch

from specsim.models import random_model, temperature
from specsim.testing import check_sampler, torch_batch_sampler
from specsim.testing.sampler import completed_and_target_laws, samples_to_detect
from specsim.verifiers import greedy

ALPHA = 1e-3
POWER = 0.99
N = 20_000
MAX_DETECTABLE_TV = 0.06
BACKENDS = ["torch"] + (["triton"] if torch.cuda.is_available() else [])
PAIRS = {  # (V, L, target seed, draft seed, concentration): prefix-dependent rows, peaked when c < 1
    "V4-L3": (4, 3, 10, 11, 0.6),
    "V3-L3-peaked": (3, 3, 20, 21, 0.3),
}


def _models(V, L, ts, ds, c):
    return random_model(V, ts, c), random_model(V, ds, c), L


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pair", list(PAIRS))
@pytest.mark.parametrize("mode", ["token", "block"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_lossless_modes_pass_with_stated_power(kit, mode, pair, backend, dtype):
    target, draft_model, L = _models(*PAIRS[pair])
    sampler = torch_batch_sampler(kit.dense_sampler(mode, backend), dtype=dtype, device=kit.device)
    res = check_sampler(sampler, target, draft_model, L, n=N, alpha=ALPHA, power=POWER, seed=1)
    assert res.passed, str(res)
    assert res.detectable_tv <= MAX_DETECTABLE_TV, str(res)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["token", "block"])
def test_deterministic_draft_without_draft_probs_passes(kit, mode, backend):
    """draft_probs=None is the one-hot rule: lossless when the draft model really is greedy."""
    target, draft_model, L = _models(*PAIRS["V4-L3"])
    sampler = torch_batch_sampler(kit.dense_sampler(mode, backend, onehot_draft=True), dtype="float64",
                                  device=kit.device)
    res = check_sampler(sampler, target, temperature(draft_model, 0), L, n=N, alpha=ALPHA, power=POWER, seed=2)
    assert res.passed and res.detectable_tv <= MAX_DETECTABLE_TV, str(res)


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_control_greedy_mode_is_flagged_at_its_predicted_sample_size(kit, backend):
    target, draft_model, L = _models(*PAIRS["V4-L3"])
    C, P = completed_and_target_laws(greedy, target, draft_model, L)
    needed = samples_to_detect(C, P, target.V, L, ALPHA, POWER)
    assert needed <= N  # the call below has power >= 0.99 against greedy's completed law
    sampler = torch_batch_sampler(kit.dense_sampler("greedy", backend), dtype="float64", device=kit.device)
    res = check_sampler(sampler, target, draft_model, L, n=int(needed), alpha=ALPHA, power=POWER, seed=3)
    assert not res.passed, str(res)


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_control_bonus_from_the_wrong_row_is_flagged_at_its_predicted_sample_size(kit, backend):
    """The token kernel fed p_{L-1} as its bonus row (an off-by-one in the caller's layout) has
    exactly the law of specsim's ``bonus_wrong_row`` mutant (TV ~ 0.06 here): n from that law."""
    from specsim.testing.selftest.mutants import CHAIN_MUTANTS
    target, draft_model, L = _models(*PAIRS["V4-L3"])
    C, P = completed_and_target_laws(CHAIN_MUTANTS["bonus_wrong_row"].verifier, target, draft_model, L)
    needed = samples_to_detect(C, P, target.V, L, ALPHA, POWER)
    assert needed <= N
    kernel = kit.dense_sampler("token", backend)

    def shifted_bonus(draft_ids, draft_probs, target_probs, generator):
        wrong = target_probs.clone()
        wrong[:, -1] = target_probs[:, -2]
        return kernel(draft_ids, draft_probs, wrong, generator)

    res = check_sampler(torch_batch_sampler(shifted_bonus, dtype="float64", device=kit.device), target,
                        draft_model, L, n=int(needed), alpha=ALPHA, power=POWER, seed=4)
    assert not res.passed, str(res)
