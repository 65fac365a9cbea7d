"""Triton kernels vs the pure-torch reference: bit-exact parity on Hypothesis-generated batches.

Without CUDA the kernels run under the Triton CPU interpreter (tests/reference_gpu/conftest.py
switches it on before the kernels are imported).  Sizes are tiny (V 3..12, B <= 4, L <= 4) to
keep the interpreter cheap; rows come from specsim.testing.strategies (zeros, ties, near one-hot,
generic rows; draft rows equal, disjoint or independent), so failures shrink to readable rows.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_gpu import api

pytest.importorskip("triton")

RELATIONS = ("independent", "equal", "disjoint")
DTYPES = (torch.float32, torch.float64, torch.bfloat16)
LENGTHS = st.lists(st.integers(0, 4), min_size=1, max_size=4)


@settings(max_examples=15)
@given(data=st.data(), V=st.integers(3, 12), lens=LENGTHS, relation=st.sampled_from(RELATIONS),
       onehot=st.booleans(), mode=st.sampled_from(["token", "block", "greedy"]),
       noise_kind=st.sampled_from(["exponential", "uniform"]), dtype=st.sampled_from(DTYPES),
       noise_seed=st.integers(0, 2 ** 32 - 1))
def test_chain_kernel_matches_reference_bit_exactly(kit, data, V, lens, relation, onehot, mode, noise_kind, dtype,
                                                    noise_seed):
    ids, cu, q, p = data.draw(kit.chain_batches(V, lens, relation, onehot, dtype))
    noise = api.draw_chain_noise(lens, V, seeds=[noise_seed + b for b in range(len(lens))],
                                 kind=noise_kind, device=kit.device)
    args = dict(target_probs=p, draft_probs=q, noise=noise, mode=mode)
    a = api.verify_chain(ids, cu, **args, backend="torch", atol=0.05)
    b = api.verify_chain(ids, cu, **args, backend="triton", atol=0.05)
    assert kit.same(a, b), (a, b)


@settings(max_examples=4)
@given(data=st.data(), mode=st.sampled_from(["token", "block"]))
def test_parity_at_boundary_noise(kit, data, mode):
    """Injected boundary values: u, eta in {0, 1 - 2^-53} and exact Exp(1) ties (E = 1)."""
    lens = [3, 1, 0, 2]
    ids, cu, q, p = data.draw(kit.chain_batches(5, lens))
    N, B = sum(lens), len(lens)
    for fill in (0.0, 1 - 2 ** -53):
        u = torch.full((N,), fill, dtype=torch.float64, device=kit.device)
        noise = api.ChainNoise(u, u.clone(), torch.ones(B, 5, dtype=torch.float64, device=kit.device))
        a = api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode=mode, backend="torch")
        b = api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode=mode, backend="triton")
        assert kit.same(a, b)


@settings(max_examples=12)
@given(data=st.data(), V=st.integers(3, 8), n_trees=st.integers(1, 3),
       noise_kind=st.sampled_from(["exponential", "uniform"]), noise_seed=st.integers(0, 2 ** 32 - 1))
def test_tree_kernel_matches_reference_bit_exactly(kit, data, V, n_trees, noise_kind, noise_seed):
    shapes = [data.draw(kit.parent_lists()) for _ in range(n_trees)]
    tok, par, cu, p, q = data.draw(kit.tree_batches(V, shapes))
    noise = api.draw_tree_noise([len(s) for s in shapes], V, seeds=[noise_seed + b for b in range(n_trees)],
                                kind=noise_kind, device=kit.device)
    a = api.verify_tree(tok, par, cu, target_probs=p, draft_probs=q, noise=noise, backend="torch")
    b = api.verify_tree(tok, par, cu, target_probs=p, draft_probs=q, noise=noise, backend="triton")
    assert kit.same(a, b), (a, b)


@settings(max_examples=10)
@given(data=st.data(), V=st.integers(3, 8), L=st.integers(1, 4),
       noise_kind=st.sampled_from(["exponential", "uniform"]), noise_seed=st.integers(0, 2 ** 32 - 1))
def test_tree_rrs_on_a_chain_is_token_verification(kit, data, V, L, noise_kind, noise_seed):
    """A tree with one child per node is a chain: RRS and the token rule agree draw for draw."""
    dev = kit.device
    ids, cu, q, p = data.draw(kit.chain_batches(V, [L]))
    chain_noise = api.draw_chain_noise([L], V, seeds=[noise_seed], kind=noise_kind, device=dev)
    tok = torch.cat([torch.tensor([-1], dtype=torch.int32, device=dev), ids])
    par = torch.arange(-1, L, dtype=torch.int32, device=dev)
    qt = torch.cat([q, torch.zeros(1, V, dtype=q.dtype, device=dev)])
    u = torch.cat([torch.zeros(1, dtype=torch.float64, device=dev), chain_noise.uniforms])
    tree_noise = api.TreeNoise(u, chain_noise.residual, noise_kind)
    c = api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=chain_noise, mode="token", backend="triton")
    t = api.verify_tree(tok, par, torch.tensor([L + 1], dtype=torch.int32, device=dev), target_probs=p,
                        draft_probs=qt, noise=tree_noise, backend="triton")
    assert torch.equal(c.num_accepted, t.num_accepted)
    assert torch.equal(c.output_token_ids, t.output_token_ids)
