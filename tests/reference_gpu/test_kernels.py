"""Triton kernels vs the pure-torch reference: bit-exact parity on Hypothesis-generated batches.

Without CUDA the kernels run under the Triton CPU interpreter: this module sets
``TRITON_INTERPRET=1`` before ``reference_gpu.kernels`` (and so ``triton.jit``) is imported.
Sizes are tiny (V 3..12, B <= 4, L <= 4) to keep the interpreter cheap.
"""
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

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
ROW_KINDS = ("dirichlet", "zeros", "onehot", "near_onehot", "ties", "uniform")


def make_row(rng: np.random.Generator, V: int, kind: str) -> np.ndarray:
    """A probability row of a given shape class (prefix dependence comes from the fresh rng draw)."""
    if kind == "dirichlet":
        r = rng.dirichlet(np.full(V, 0.7))
    elif kind == "zeros":
        r = rng.dirichlet(np.ones(V)) * (rng.random(V) < 0.6)
        if r.sum() == 0:
            r[rng.integers(V)] = 1.0
    elif kind == "onehot":
        r = np.zeros(V)
        r[rng.integers(V)] = 1.0
    elif kind == "near_onehot":
        r = np.full(V, 1e-7)
        r[rng.integers(V)] = 1.0
    elif kind == "ties":
        r = np.zeros(V)
        r[rng.choice(V, 2, replace=False)] = 0.5
    else:
        r = np.ones(V)
    return r / r.sum()


def chain_batch(rng, V, lens, kinds, relation, onehot_draft, dtype=torch.float32):
    """Ragged batch: rows per position of a chosen kind; q related to p by ``relation``
    ("independent", "equal", "disjoint"); drafts sampled from q (or arbitrary for one-hot)."""
    B, N = len(lens), sum(lens)
    P, Q, ids = [], [], []
    for b, L in enumerate(lens):
        for k in range(L + 1):
            P.append(make_row(rng, V, kinds[(b + k) % len(kinds)]))
            if k < L:
                if relation == "equal":
                    q = P[-1].copy()
                elif relation == "disjoint":
                    q = (P[-1] == 0) * rng.random(V)
                    q = q / q.sum() if q.sum() > 0 else make_row(rng, V, "dirichlet")
                else:
                    q = make_row(rng, V, kinds[(b + k + 1) % len(kinds)])
                Q.append(q)
                ids.append(int(rng.integers(V)) if onehot_draft else int(rng.choice(V, p=q)))
    p = torch.tensor(np.array(P), dtype=dtype, device=DEVICE).reshape(N + B, V)
    q = None if onehot_draft else torch.tensor(np.array(Q), dtype=dtype, device=DEVICE).reshape(N, V)
    ids_t = torch.tensor(ids, dtype=torch.int32, device=DEVICE)
    cu = torch.tensor(np.cumsum(lens), dtype=torch.int32, device=DEVICE)
    return ids_t, cu, q, p


def same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(vars(a).values(), vars(b).values()))


@settings(max_examples=15)
@given(seed=st.integers(0, 2 ** 32 - 1), V=st.integers(3, 12),
       lens=st.lists(st.integers(0, 4), min_size=1, max_size=4),
       kinds=st.lists(st.sampled_from(ROW_KINDS), min_size=1, max_size=3),
       relation=st.sampled_from(["independent", "equal", "disjoint"]),
       onehot=st.booleans(), mode=st.sampled_from(["token", "block", "greedy"]),
       noise_kind=st.sampled_from(["exponential", "uniform"]),
       dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]))
def test_chain_kernel_matches_reference_bit_exactly(seed, V, lens, kinds, relation, onehot, mode,
                                                    noise_kind, dtype):
    rng = np.random.default_rng(seed)
    ids, cu, q, p = chain_batch(rng, V, lens, kinds, relation, onehot, dtype)
    noise = api.draw_chain_noise(lens, V, seeds=[seed + b for b in range(len(lens))],
                                 kind=noise_kind, device=DEVICE)
    args = (ids, cu, q, p, noise, mode)
    a = api.verify_chain(*args, backend="torch", atol=0.05)
    b = api.verify_chain(*args, backend="triton", atol=0.05)
    assert same(a, b), (a, b)


@pytest.mark.parametrize("mode", ["token", "block"])
def test_parity_at_boundary_noise(mode):
    """Injected boundary values: u, eta in {0, 1 - 2^-53} and exact Exp(1) ties (E = 1)."""
    rng = np.random.default_rng(5)
    lens = [3, 1, 0, 2]
    ids, cu, q, p = chain_batch(rng, 5, lens, ["dirichlet", "zeros"], "independent", False)
    N, B = sum(lens), len(lens)
    for fill in (0.0, 1 - 2 ** -53):
        u = torch.full((N,), fill, dtype=torch.float64, device=DEVICE)
        noise = api.ChainNoise(u, u.clone(), torch.ones(B, 5, dtype=torch.float64, device=DEVICE))
        a = api.verify_chain(ids, cu, q, p, noise, mode, backend="torch")
        b = api.verify_chain(ids, cu, q, p, noise, mode, backend="triton")
        assert same(a, b)


def tree_batch(rng, V, shapes, dtype=torch.float32):
    """Ragged batch of trees given as parent lists; rows Dirichlet or with zeros; children drawn from q."""
    toks, pars, P, Q = [], [], [], []
    for par in shapes:
        base = len(toks)
        for c, pa in enumerate(par):
            P.append(make_row(rng, V, "zeros" if rng.random() < 0.3 else "dirichlet"))
            Q.append(make_row(rng, V, "dirichlet"))
            pars.append(pa)
            toks.append(-1 if c == 0 else int(rng.choice(V, p=Q[base + pa])))
    t = lambda x, d: torch.tensor(np.array(x), dtype=d, device=DEVICE)
    cu = np.cumsum([len(s) for s in shapes])
    return t(toks, torch.int32), t(pars, torch.int32), t(cu, torch.int32), t(P, dtype), t(Q, dtype)


@st.composite
def parent_lists(draw):
    n = draw(st.integers(1, 6))
    return [-1] + [draw(st.integers(0, c - 1)) for c in range(1, n)]


@settings(max_examples=12)
@given(seed=st.integers(0, 2 ** 32 - 1), V=st.integers(3, 8),
       shapes=st.lists(parent_lists(), min_size=1, max_size=3),
       noise_kind=st.sampled_from(["exponential", "uniform"]))
def test_tree_kernel_matches_reference_bit_exactly(seed, V, shapes, noise_kind):
    rng = np.random.default_rng(seed)
    tok, par, cu, p, q = tree_batch(rng, V, shapes)
    noise = api.draw_tree_noise([len(s) for s in shapes], V, seeds=list(range(seed % 1000, seed % 1000 + len(shapes))),
                                kind=noise_kind, device=DEVICE)
    a = api.verify_tree(tok, par, cu, p, q, noise, backend="torch")
    b = api.verify_tree(tok, par, cu, p, q, noise, backend="triton")
    assert same(a, b), (a, b)


@settings(max_examples=10)
@given(seed=st.integers(0, 2 ** 32 - 1), V=st.integers(3, 8), L=st.integers(1, 4),
       noise_kind=st.sampled_from(["exponential", "uniform"]))
def test_tree_rrs_on_a_chain_is_token_verification(seed, V, L, noise_kind):
    """A tree with one child per node is a chain: RRS and the token rule agree draw for draw."""
    rng = np.random.default_rng(seed)
    ids, cu, q, p = chain_batch(rng, V, [L], ["dirichlet", "zeros"], "independent", False)
    chain_noise = api.draw_chain_noise([L], V, seeds=[seed], kind=noise_kind, device=DEVICE)
    tok = torch.cat([torch.tensor([-1], dtype=torch.int32, device=DEVICE), ids])
    par = torch.arange(-1, L, dtype=torch.int32, device=DEVICE)
    qt = torch.cat([q, torch.zeros(1, V, dtype=q.dtype, device=DEVICE)])
    u = torch.cat([torch.zeros(1, dtype=torch.float64, device=DEVICE), chain_noise.uniforms])
    tree_noise = api.TreeNoise(u, chain_noise.residual, noise_kind)
    c = api.verify_chain(ids, cu, q, p, chain_noise, "token", backend="triton")
    t = api.verify_tree(tok, par, torch.tensor([L + 1], dtype=torch.int32, device=DEVICE), p, qt,
                        tree_noise, backend="triton")
    assert torch.equal(c.num_accepted, t.num_accepted)
    assert torch.equal(c.output_token_ids, t.output_token_ids)
