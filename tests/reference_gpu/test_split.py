"""Split-vocabulary chain path (``splits`` = S > 1) vs one program per request vs the reference.

The split path cuts each row into S chunks of whole tiles; with BLOCK_V = 16 and V ~ 17..60 a row
has 2..4 tiles, so S in {2, 3, 5} gives several chunks, uneven last chunks and (V < S x tile)
empty ones.  Every comparison is bit for bit.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_gpu import api

pytest.importorskip("triton")
from reference_gpu.kernels import auto_splits, launch_chain  # noqa: E402

BV = 16
DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
RELATIONS = ("independent", "equal", "disjoint")


def _launch(ids, cu, q, p, noise, mode, splits, block_v=BV):
    """launch_chain on prepared tensors -> (out, tau)."""
    B, dev = cu.numel(), p.device
    lens = torch.diff(cu.to(torch.int64), prepend=cu.new_zeros(1, dtype=torch.int64))
    out = torch.full((B, int(lens.max()) + 1), -1, dtype=torch.int32, device=dev)
    tau = torch.empty(B, dtype=torch.int32, device=dev)
    dummy = torch.zeros(1, dtype=torch.float64, device=dev)
    u = noise.uniforms if noise.uniforms.numel() else dummy
    e = noise.etas if noise.etas.numel() else dummy
    launch_chain(ids, cu, q, p, u, e, noise.residual, out, tau, mode, noise.kind, block_v=block_v, splits=splits)
    return out, tau


@settings(max_examples=24)
@given(data=st.data(), V=st.integers(17, 60), lens=st.lists(st.integers(0, 3), min_size=1, max_size=3),
       relation=st.sampled_from(RELATIONS), onehot=st.booleans(), mode=st.sampled_from(["token", "block", "greedy"]),
       noise_kind=st.sampled_from(["exponential", "uniform"]), dtype=st.sampled_from(DTYPES),
       S=st.sampled_from([2, 3, 5]), scale=st.sampled_from([0.0, 0.3, 1.0]), seed=st.integers(0, 2 ** 32 - 1))
def test_split_matches_unsplit_and_reference(kit, data, V, lens, relation, onehot, mode, noise_kind, dtype, S,
                                             scale, seed):
    ids, cu, q, p = data.draw(kit.chain_batches(V, lens, relation, onehot, dtype))
    noise = api.draw_chain_noise(lens, V, seeds=[seed + b for b in range(len(lens))], kind=noise_kind,
                                 device=kit.device)
    # scale < 1 shrinks the coins so long accepted prefixes (and the bonus row) are exercised too
    noise = api.ChainNoise(noise.uniforms * scale, noise.etas * scale, noise.residual, noise.kind)
    # no validation: float16 rounding may zero q at a drafted id; all three paths take the same bits
    ref = api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode=mode, backend="torch",
                           validate=False)
    one = _launch(ids, cu, q, p, noise, mode, 1)
    split = _launch(ids, cu, q, p, noise, mode, S)
    for a, b in zip(one, split):
        assert torch.equal(a, b), (one, split)
    assert torch.equal(split[0], ref.output_token_ids) and torch.equal(split[1], ref.num_accepted), (split, ref)


def _tie_rows(V, pos, dev):
    """Rows with equal maxima at the ids in ``pos`` (the rest a small equal floor)."""
    p = torch.full((1, V), 1.0, dtype=torch.float64)
    p[0, pos] = 10.0
    return (p / p.sum()).to(dev)


@pytest.mark.parametrize("S", [2, 3, 5])
@pytest.mark.parametrize("pos", [[15, 16], [16, 32], [20, 40], [47, 5]])
def test_ties_across_chunks_go_to_the_lowest_id(kit, S, pos):
    """Greedy bonus token and the exponential race with E = 1 are argmaxes: the lowest tied id
    must win whichever chunk holds it (chunk edges at multiples of 16 here)."""
    dev, V = kit.device, 50
    p = _tie_rows(V, pos, dev)
    ids, cu = torch.zeros(0, dtype=torch.int32, device=dev), torch.tensor([0], dtype=torch.int32, device=dev)
    race = api.ChainNoise(torch.zeros(0, dtype=torch.float64, device=dev), torch.zeros(0, dtype=torch.float64,
                          device=dev), torch.ones(1, V, dtype=torch.float64, device=dev), "exponential")
    for mode in ("greedy", "token"):
        out, tau = _launch(ids, cu, None, p, race, mode, S)
        assert out.tolist() == [[min(pos)]] and tau.tolist() == [0]


@pytest.mark.parametrize("S", [2, 3, 5])
def test_zero_residual_and_inverse_cdf_edges(kit, S):
    """A rejected draft with q = p leaves no residual mass: the draw falls back to p.  p has mass
    only at ids 3, 17, 40 (three chunks); U = 0 picks the first, U = 0.5 the middle, U just below
    1 the last.  The raw launcher rejects an out-of-range id, which makes the rejection certain."""
    dev, V = kit.device, 50
    row = torch.zeros(V, dtype=torch.float64)
    row[[3, 17, 40]] = torch.tensor([0.25, 0.5, 0.25], dtype=torch.float64)
    p = torch.stack([row, row]).to(dev)
    q = row[None].clone().to(dev)
    ids, cu = torch.tensor([-1], dtype=torch.int32, device=dev), torch.tensor([1], dtype=torch.int32, device=dev)
    coin = torch.zeros(1, dtype=torch.float64, device=dev)
    for U, want in ((0.0, 3), (0.5, 17), (1 - 2 ** -53, 40)):
        noise = api.ChainNoise(coin, coin.clone(), torch.tensor([U], dtype=torch.float64, device=dev), "uniform")
        out, tau = _launch(ids, cu, q, p, noise, "token", S)
        assert tau.tolist() == [0] and out.tolist() == [[want, -1]], (U, out)


def test_automatic_split_matches_one_program(kit, monkeypatch):
    """splits=None on one request with V = 2048 splits it (1024-wide tiles, 2 chunks) once the
    minimum split row length is lowered (the interpreter is too slow at the real threshold)."""
    from reference_gpu import kernels
    assert auto_splits(1, 2048, 1024) == 1 and auto_splits(1, kernels._MIN_SPLIT_V, 1024) > 1
    monkeypatch.setattr(kernels, "_MIN_SPLIT_V", 0)
    assert auto_splits(1, 2048, 1024) == 2
    dev, V = kit.device, 2048
    g = torch.Generator().manual_seed(5)
    p = torch.rand(3, V, generator=g, dtype=torch.float64) ** 8
    q = torch.rand(2, V, generator=g, dtype=torch.float64) ** 8
    p, q = (p / p.sum(1, keepdim=True)).to(dev), (q / q.sum(1, keepdim=True)).to(dev)
    ids, cu = torch.tensor([7, 1500], dtype=torch.int32, device=dev), torch.tensor([2], dtype=torch.int32, device=dev)
    for kind in ("exponential", "uniform"):
        noise = api.draw_chain_noise([2], V, seeds=[3], kind=kind, device=dev)
        a = _launch(ids, cu, q, p, noise, "block", None, block_v=None)
        b = _launch(ids, cu, q, p, noise, "block", 1, block_v=None)
        assert all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_splits_raise(kit, bad):
    dev = kit.device
    p = torch.tensor([[0.5, 0.5]], dtype=torch.float64, device=dev)
    ids, cu = torch.zeros(0, dtype=torch.int32, device=dev), torch.tensor([0], dtype=torch.int32, device=dev)
    noise = api.draw_chain_noise([0], 2, seeds=[1], device=dev)
    for backend in ("torch", "triton"):
        with pytest.raises(ValueError, match="splits must be None"):
            api.verify_chain(ids, cu, target_probs=p, draft_probs=None, noise=noise, backend=backend, splits=bad)
    with pytest.raises(ValueError, match="splits must be None"):
        _launch(ids, cu, None, p, noise, "token", bad)


@settings(max_examples=4)
@given(data=st.data(), S=st.sampled_from([2, 3, 5]))
def test_out_of_range_ids_split(kit, data, S):
    """Raw launches with ids -1 and V (as test_props' out-of-range test): rejected, never emitted,
    on every path."""
    dev, V, lens = kit.device, 37, [2, 2]
    ids, cu, q, p = data.draw(kit.chain_batches(V, lens, onehot_draft=True))
    bad = torch.tensor([-1, 0, V, 1], dtype=torch.int32, device=dev)
    zeros = torch.zeros(4, dtype=torch.float64, device=dev)
    for mode in ("token", "block", "greedy"):
        for kind, r in (("exponential", torch.ones(2, V, dtype=torch.float64, device=dev)),
                        ("uniform", torch.tensor([0.0, 0.999], dtype=torch.float64, device=dev))):
            noise = api.ChainNoise(zeros, zeros, r, kind)
            ref = api.verify_chain(bad, cu, target_probs=p, draft_probs=None, noise=noise, mode=mode,
                                   backend="torch", validate=False)
            one, split = _launch(bad, cu, None, p, noise, mode, 1), _launch(bad, cu, None, p, noise, mode, S)
            assert split[1].tolist() == [0, 0] and ((split[0][:, 0] >= 0) & (split[0][:, 0] < V)).all()
            for x, y, z in zip(one, split, (ref.output_token_ids, ref.num_accepted)):
                assert torch.equal(x, y) and torch.equal(y, z)
