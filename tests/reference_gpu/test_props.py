"""Properties of the verification API: inputs untouched, valid outputs, reproducible per-request
noise independent of the batch, dense <-> ragged round trip, out-of-range ids at the raw kernel,
and (on a GPU only) parity at real vocabulary sizes.  Bad input: test_argument_validation.py.
The Triton interpreter is switched on by conftest.py when there is no CUDA device."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_gpu import api

pytest.importorskip("triton")

LENGTHS = st.lists(st.integers(0, 4), min_size=1, max_size=4)


@settings(max_examples=10)
@given(data=st.data(), V=st.integers(3, 10), lens=LENGTHS, onehot=st.booleans(),
       mode=st.sampled_from(["token", "block", "greedy"]), backend=st.sampled_from(["torch", "triton"]),
       noise_seed=st.integers(0, 2 ** 32 - 1))
def test_inputs_untouched_and_outputs_well_formed(kit, data, V, lens, onehot, mode, backend, noise_seed):
    ids, cu, q, p = data.draw(kit.chain_batches(V, lens, onehot_draft=onehot))
    noise = api.draw_chain_noise(lens, V, seeds=[noise_seed + b for b in range(len(lens))], device=kit.device)
    before = [t.clone() for t in (ids, cu, p, noise.uniforms, noise.etas, noise.residual)]
    qb = None if q is None else q.clone()
    r = api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode=mode, backend=backend)
    for a, b in zip(before, (ids, cu, p, noise.uniforms, noise.etas, noise.residual)):
        assert torch.equal(a, b)
    assert q is None or torch.equal(qb, q)
    out, tau = r.output_token_ids.cpu(), r.num_accepted.cpu()
    assert out.dtype == torch.int32 and out.shape == (len(lens), max(lens) + 1)
    start = np.concatenate([[0], np.cumsum(lens)[:-1]])
    for b, L in enumerate(lens):
        t = int(tau[b])
        assert 0 <= t <= L
        assert (out[b, t + 1:] == -1).all()
        assert out[b, :t].tolist() == ids[start[b]:start[b] + t].cpu().tolist()
        y = int(out[b, t])
        assert 0 <= y < V
        assert float(p[start[b] + b + t, y]) > 0, "emitted a token with target probability 0"


@settings(max_examples=3)
@given(data=st.data(), mode=st.sampled_from(["token", "block"]))
def test_seeded_noise_is_keyed_per_request(kit, data, mode):
    """Request with seed s gives the same output alone, first or last in a batch."""
    DEVICE, same = kit.device, kit.same
    V, lens = 6, [3, 2, 4]
    ids, cu, q, p = data.draw(kit.chain_batches(V, lens))
    full = api.verify_chain(ids, cu, target_probs=p, draft_probs=q,
                            noise=api.draw_chain_noise(lens, V, seeds=[10, 11, 12], device=DEVICE), mode=mode)
    # request 2 alone, and requests (2, 0) reordered
    s2, s0 = slice(5, 9), slice(0, 3)
    p2, p0 = p[5 + 2:9 + 3], p[0:4]
    alone = api.verify_chain(ids[s2], torch.tensor([4], dtype=torch.int32, device=DEVICE), target_probs=p2,
                             draft_probs=q[s2], noise=api.draw_chain_noise([4], V, seeds=[12], device=DEVICE),
                             mode=mode)
    swapped = api.verify_chain(torch.cat([ids[s2], ids[s0]]), torch.tensor([4, 7], dtype=torch.int32, device=DEVICE),
                               target_probs=torch.cat([p2, p0]), draft_probs=torch.cat([q[s2], q[s0]]),
                               noise=api.draw_chain_noise([4, 3], V, seeds=[12, 10], device=DEVICE), mode=mode)
    assert torch.equal(alone.output_token_ids[0], full.output_token_ids[2])
    assert torch.equal(swapped.output_token_ids[0], full.output_token_ids[2])
    assert torch.equal(swapped.output_token_ids[1, :4], full.output_token_ids[0, :4])
    again = api.verify_chain(ids, cu, target_probs=p, draft_probs=q,
                             noise=api.draw_chain_noise(lens, V, seeds=[10, 11, 12], device=DEVICE), mode=mode)
    assert same(again, full)


def test_generator_draws_reproducible():
    a = api.draw_chain_noise([2, 3], 5, generator=torch.Generator().manual_seed(3))
    b = api.draw_chain_noise([2, 3], 5, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip((a.uniforms, a.residual), (b.uniforms, b.residual)))


@settings(max_examples=10)
@given(data=st.data(), lens=LENGTHS, onehot=st.booleans(), noise_seed=st.integers(0, 2 ** 32 - 1))
def test_dense_ragged_round_trip_and_dense_adapter(kit, data, lens, onehot, noise_seed):
    V = 5
    ids, cu, q, p = data.draw(kit.chain_batches(V, lens, onehot_draft=onehot))
    rb = api.RaggedBatch(ids, cu, q, p)
    back = api.dense_to_ragged(api.ragged_to_dense(rb))
    assert torch.equal(back.draft_token_ids, ids) and torch.equal(back.cu_num_draft_tokens, cu)
    assert torch.equal(back.target_probs, p) and (q is None or torch.equal(back.draft_probs, q))
    d = api.ragged_to_dense(rb)
    noise = api.draw_chain_noise(lens, V, seeds=[noise_seed + b for b in range(len(lens))], device=kit.device)
    a = api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode="block", backend="torch")
    b = api.verify_chain_dense(d.draft_token_ids, target_probs=d.target_probs, draft_probs=d.draft_probs, noise=noise,
                               num_draft_tokens=d.num_draft_tokens, mode="block", backend="torch")
    assert torch.equal(a.num_accepted, b.num_accepted)
    assert torch.equal(a.output_token_ids, b.output_token_ids[:, :a.output_token_ids.shape[1]])


@settings(max_examples=3)
@given(data=st.data())
def test_raw_kernel_never_accepts_or_emits_out_of_range_ids(kit, data):
    """validate=False: ids -1 and V reach the kernel; they are rejected and never emitted.  Two
    out-of-range ids in a row give the block rule an all-zero one-hot row at level 1 (D = 0): it
    once took h_1 = 1 there and accepted x_1 = V."""
    DEVICE = kit.device
    V, lens = 5, [2, 2]
    ids, cu, q, p = data.draw(kit.chain_batches(V, lens, onehot_draft=True))
    zeros = torch.zeros(4, dtype=torch.float64, device=DEVICE)
    for bad in ([-1, 0, V, 1], [-1, V, V, -1]):
        bad = torch.tensor(bad, dtype=torch.int32, device=DEVICE)
        for mode in ("token", "block", "greedy"):
            noise = api.ChainNoise(zeros, zeros, torch.ones(2, V, dtype=torch.float64, device=DEVICE))
            for backend, splits in (("torch", None), ("triton", 1), ("triton", 2)):
                r = api.verify_chain(bad, cu, target_probs=p, draft_probs=None, noise=noise, mode=mode,
                                     backend=backend, validate=False, splits=splits)
                assert r.num_accepted.tolist() == [0, 0], (bad.tolist(), mode, backend, splits)
                assert ((r.output_token_ids[:, 0] >= 0) & (r.output_token_ids[:, 0] < V)).all()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("V", [32000, 262144])
@pytest.mark.parametrize("mode", ["token", "block", "greedy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("splits", [None, 1])   # automatic (a split at B = 8) and one program per request
def test_gpu_parity_at_real_vocabulary(kit, V, mode, dtype, splits):
    g = torch.Generator(device="cuda").manual_seed(V)
    lens = [4, 0, 8, 3, 8, 1, 6, 2]
    B, N = len(lens), sum(lens)
    p = torch.softmax(torch.randn(N + B, V, device="cuda", generator=g) * 3, -1).to(dtype)
    q = torch.softmax(torch.randn(N, V, device="cuda", generator=g) * 3, -1).to(dtype)
    ids = torch.multinomial(q.float(), 1, generator=g)[:, 0].to(torch.int32)
    cu = torch.tensor(np.cumsum(lens), dtype=torch.int32, device="cuda")
    for kind in ("exponential", "uniform"):
        noise = api.draw_chain_noise(lens, V, seeds=list(range(B)), kind=kind, device="cuda")
        a = api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode=mode, backend="torch",
                             atol=0.05)
        b = api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode=mode, backend="triton",
                             atol=0.05, splits=splits)
        assert kit.same(a, b)
