"""Properties of the verification API: inputs untouched, valid outputs, reproducible per-request
noise independent of the batch, dense <-> ragged round trip, input validation, and (on a GPU
only) parity at real vocabulary sizes.  Sets TRITON_INTERPRET=1 without CUDA (see the kernels
test module)."""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"
pytest.importorskip("triton")

from hypothesis import given, settings, strategies as st  # noqa: E402

from reference_gpu import api  # noqa: E402
from test_reference_gpu_kernels import DEVICE, ROW_KINDS, chain_batch, same  # noqa: E402


@settings(max_examples=10)
@given(seed=st.integers(0, 2 ** 32 - 1), V=st.integers(3, 10),
       lens=st.lists(st.integers(0, 4), min_size=1, max_size=4),
       kinds=st.lists(st.sampled_from(ROW_KINDS), min_size=1, max_size=3),
       onehot=st.booleans(), mode=st.sampled_from(["token", "block", "greedy"]),
       backend=st.sampled_from(["torch", "triton"]))
def test_inputs_untouched_and_outputs_well_formed(seed, V, lens, kinds, onehot, mode, backend):
    rng = np.random.default_rng(seed)
    ids, cu, q, p = chain_batch(rng, V, lens, kinds, "independent", onehot)
    noise = api.draw_chain_noise(lens, V, seeds=[seed + b for b in range(len(lens))], device=DEVICE)
    before = [t.clone() for t in (ids, cu, p, noise.uniforms, noise.etas, noise.residual)]
    qb = None if q is None else q.clone()
    r = api.verify_chain(ids, cu, q, p, noise, mode, backend=backend)
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


@pytest.mark.parametrize("mode", ["token", "block"])
def test_seeded_noise_is_keyed_per_request(mode):
    """Request with seed s gives the same output alone, first or last in a batch."""
    rng = np.random.default_rng(0)
    V, lens = 6, [3, 2, 4]
    ids, cu, q, p = chain_batch(rng, V, lens, ["dirichlet"], "independent", False)
    full = api.verify_chain(ids, cu, q, p, api.draw_chain_noise(lens, V, seeds=[10, 11, 12], device=DEVICE), mode)
    # request 2 alone, and requests (2, 0) reordered
    s2, s0 = slice(5, 9), slice(0, 3)
    p2, p0 = p[5 + 2:9 + 3], p[0:4]
    alone = api.verify_chain(ids[s2], torch.tensor([4], dtype=torch.int32, device=DEVICE), q[s2], p2,
                             api.draw_chain_noise([4], V, seeds=[12], device=DEVICE), mode)
    swapped = api.verify_chain(torch.cat([ids[s2], ids[s0]]), torch.tensor([4, 7], dtype=torch.int32, device=DEVICE),
                               torch.cat([q[s2], q[s0]]), torch.cat([p2, p0]),
                               api.draw_chain_noise([4, 3], V, seeds=[12, 10], device=DEVICE), mode)
    assert torch.equal(alone.output_token_ids[0], full.output_token_ids[2])
    assert torch.equal(swapped.output_token_ids[0], full.output_token_ids[2])
    assert torch.equal(swapped.output_token_ids[1, :4], full.output_token_ids[0, :4])
    again = api.verify_chain(ids, cu, q, p, api.draw_chain_noise(lens, V, seeds=[10, 11, 12], device=DEVICE), mode)
    assert same(again, full)


def test_generator_draws_reproducible():
    a = api.draw_chain_noise([2, 3], 5, generator=torch.Generator().manual_seed(3))
    b = api.draw_chain_noise([2, 3], 5, generator=torch.Generator().manual_seed(3))
    assert all(torch.equal(x, y) for x, y in zip((a.uniforms, a.residual), (b.uniforms, b.residual)))


@settings(max_examples=10)
@given(seed=st.integers(0, 2 ** 32 - 1), lens=st.lists(st.integers(0, 4), min_size=1, max_size=4),
       onehot=st.booleans())
def test_dense_ragged_round_trip_and_dense_adapter(seed, lens, onehot):
    rng = np.random.default_rng(seed)
    V = 5
    ids, cu, q, p = chain_batch(rng, V, lens, ["dirichlet"], "independent", onehot)
    rb = api.RaggedBatch(ids, cu, q, p)
    back = api.dense_to_ragged(api.ragged_to_dense(rb))
    assert torch.equal(back.draft_token_ids, ids) and torch.equal(back.cu_num_draft_tokens, cu)
    assert torch.equal(back.target_probs, p) and (q is None or torch.equal(back.draft_probs, q))
    d = api.ragged_to_dense(rb)
    noise = api.draw_chain_noise(lens, V, seeds=list(range(len(lens))), device=DEVICE)
    a = api.verify_chain(ids, cu, q, p, noise, "block", backend="torch")
    b = api.verify_chain_dense(d.draft_token_ids, d.draft_probs, d.target_probs, noise,
                               num_draft_tokens=d.num_draft_tokens, mode="block", backend="torch")
    assert torch.equal(a.num_accepted, b.num_accepted)
    assert torch.equal(a.output_token_ids, b.output_token_ids[:, :a.output_token_ids.shape[1]])


def test_raw_kernel_never_accepts_or_emits_out_of_range_ids():
    """validate=False: ids -1 and V reach the kernel; they are rejected and never emitted."""
    rng = np.random.default_rng(1)
    V, lens = 5, [2, 2]
    ids, cu, q, p = chain_batch(rng, V, lens, ["dirichlet"], "independent", True)
    bad = torch.tensor([-1, 0, V, 1], dtype=torch.int32, device=DEVICE)
    zeros = torch.zeros(4, dtype=torch.float64, device=DEVICE)
    for mode in ("token", "block", "greedy"):
        noise = api.ChainNoise(zeros, zeros, torch.ones(2, V, dtype=torch.float64, device=DEVICE))
        for backend in ("torch", "triton"):
            r = api.verify_chain(bad, cu, None, p, noise, mode, backend=backend, validate=False)
            assert r.num_accepted.tolist() == [0, 0]
            assert ((r.output_token_ids[:, 0] >= 0) & (r.output_token_ids[:, 0] < V)).all()


def _valid_args():
    rng = np.random.default_rng(2)
    lens = [2, 1]
    ids, cu, q, p = chain_batch(rng, 4, lens, ["dirichlet"], "independent", False)
    return dict(draft_token_ids=ids, cu_num_draft_tokens=cu, draft_probs=q, target_probs=p,
                noise=api.draw_chain_noise(lens, 4, seeds=[0, 1], device=DEVICE))


def _bad_cases():
    def f(**change):
        return change
    a = _valid_args()
    ids, p, q, n = a["draft_token_ids"], a["target_probs"], a["draft_probs"], a["noise"]
    nan_p = p.clone()
    nan_p[1, 0] = float("nan")
    unnorm = p.clone() * 1.5
    neg_id, big_id = ids.clone(), ids.clone()
    neg_id[0], big_id[1] = -1, 4
    qzero = q.clone()
    qzero[0] = 0.0
    qzero[0, (int(ids[0]) + 1) % 4] = 1.0
    return {
        "negative id": (f(draft_token_ids=neg_id), "outside 0..3"),
        "id >= V": (f(draft_token_ids=big_id), "outside 0..3"),
        "NaN target": (f(target_probs=nan_p), "NaN"),
        "unnormalised": (f(target_probs=unnorm), "sums to"),
        "target shape": (f(target_probs=p[:-1]), "shape"),
        "draft shape": (f(draft_probs=q[:, :3]), "shape"),
        "int probs": (f(target_probs=p.to(torch.int32)), "float"),
        "lengths": (f(cu_num_draft_tokens=torch.tensor([2, 4], dtype=torch.int32)), "cu_num_draft_tokens ends"),
        "decreasing cu": (f(cu_num_draft_tokens=torch.tensor([3, 3, 2], dtype=torch.int32)), "non-decreasing"),
        "q(x) = 0": (f(draft_probs=qzero), "draft probability 0"),
        "float32 uniforms": (f(noise=api.ChainNoise(n.uniforms.float(), n.etas, n.residual)), "float64"),
        "uniform = 1": (f(noise=api.ChainNoise(torch.ones_like(n.uniforms), n.etas, n.residual)), "[0, 1)"),
        "noise shape": (f(noise=api.ChainNoise(n.uniforms, n.etas, n.residual[:1])), "shape"),
        "negative exp noise": (f(noise=api.ChainNoise(n.uniforms, n.etas, -n.residual)), ">= 0"),
        "mode": (f(mode="typical"), "mode must be"),
    }


@pytest.mark.parametrize("case", list(_bad_cases()))
def test_bad_input_raises_value_error(case, monkeypatch):
    from reference_gpu import kernels, reference
    change, msg = _bad_cases()[case]

    def boom(*a, **k):
        raise AssertionError("a kernel ran before validation")
    monkeypatch.setattr(kernels, "launch_chain", boom)
    monkeypatch.setattr(reference, "chain_reference", boom)
    args = {**_valid_args(), **change}
    with pytest.raises(ValueError, match=msg.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        api.verify_chain(**args)


def test_tree_bad_input_raises():
    p = torch.full((3, 4), 0.25, dtype=torch.float64)
    noise = api.draw_tree_noise([3], 4, seeds=[0])
    cu = torch.tensor([3], dtype=torch.int32)
    with pytest.raises(ValueError, match="parents must precede"):
        api.verify_tree(torch.tensor([-1, 0, 1]), torch.tensor([-1, 2, 0]), cu, p, p, noise)
    with pytest.raises(ValueError, match="root"):
        api.verify_tree(torch.tensor([0, 0, 1]), torch.tensor([-1, 0, 0]), cu, p, p, noise)
    with pytest.raises(ValueError, match="outside"):
        api.verify_tree(torch.tensor([-1, 0, 7]), torch.tensor([-1, 0, 0]), cu, p, p, noise)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("V", [32000, 262144])
@pytest.mark.parametrize("mode", ["token", "block", "greedy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gpu_parity_at_real_vocabulary(V, mode, dtype):
    g = torch.Generator(device="cuda").manual_seed(V)
    lens = [4, 0, 8, 3, 8, 1, 6, 2]
    B, N = len(lens), sum(lens)
    p = torch.softmax(torch.randn(N + B, V, device="cuda", generator=g) * 3, -1).to(dtype)
    q = torch.softmax(torch.randn(N, V, device="cuda", generator=g) * 3, -1).to(dtype)
    ids = torch.multinomial(q.float(), 1, generator=g)[:, 0].to(torch.int32)
    cu = torch.tensor(np.cumsum(lens), dtype=torch.int32, device="cuda")
    for kind in ("exponential", "uniform"):
        noise = api.draw_chain_noise(lens, V, seeds=list(range(B)), kind=kind, device="cuda")
        a = api.verify_chain(ids, cu, q, p, noise, mode, backend="torch", atol=0.05)
        b = api.verify_chain(ids, cu, q, p, noise, mode, backend="triton", atol=0.05)
        assert same(a, b)
