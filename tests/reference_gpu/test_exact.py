"""Exact-law checks of the Triton kernels against specsim's outcome laws (no statistics).

* Token rule: on dyadic rows every acceptance ratio and residual mass is a short binary fraction,
  so integrating the kernel over a grid of uniforms (8 per position, 16 residual uniforms, inverse
  CDF) reproduces specsim's ``token.law`` joint law of (tau, Y) exactly (==).
* Block verification: the kernel's stop decision is probed at and around every threshold h_i
  (exactly at h: reject; nextafter below: accept; 0; 1 - 2^-53), and on every pass/fail pattern
  it returns the largest passing index, which with independent eta gives P(tau = i) =
  h_i prod_{j>i}(1 - h_j) = ``block.law``; the residual law is integrated on a 2^12 grid of
  inverse-CDF uniforms (error <= one grid cell per CDF point).
* Greedy: no noise, so the kernel's (tau, Y) is compared with specsim's ``greedy`` point mass.
* Tree RRS: a root with two i.i.d. children, grid over both coins and the residual uniform,
  against ``specinfer.law``.
Random rows come from specsim.testing.strategies.chain_inputs (prefix-dependent model pairs, the
draft drawn from the support of q).  conftest.py switches the Triton interpreter on without CUDA.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings

from reference_gpu import api
from reference_gpu.reference import block_stop_probs
from specsim.drafts import DraftTree
from specsim.testing.strategies import chain_inputs, model_pairs
from specsim.verifiers.chain import block, block_weights, token

pytest.importorskip("triton")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
F64 = torch.float64

# Dyadic, prefix-dependent rows (V = 4, L = 2, draft x = (0, 0)).  Acceptance ratios
# a_1 = (1/8)/(1/2) = 1/4 and a_2 = (1/4)/(1/2) = 1/2; residual masses sum (p_k - q_k)_+ = 1/2.
P_DY = np.array([[1, 4, 2, 1], [2, 3, 3, 0], [1, 1, 2, 4]]) / 8
Q_DY = np.array([[4, 1, 1, 2], [4, 1, 1, 2]]) / 8
X_DY = (0, 0)


def run_chain(draft, p, q, u, eta, res, mode, kind="uniform", backend="triton"):
    """Run the kernel on n copies of one request with per-copy noise; returns (tau, Y) numpy."""
    n, L = u.shape
    V = p.shape[1]
    ids = torch.tensor(list(draft) * n, dtype=torch.int32, device=DEVICE)
    cu = torch.arange(1, n + 1, dtype=torch.int32, device=DEVICE) * L
    pt = torch.tensor(np.tile(p, (n, 1)), dtype=F64, device=DEVICE)
    qt = torch.tensor(np.tile(q, (n, 1)), dtype=F64, device=DEVICE)
    noise = api.ChainNoise(torch.tensor(u.ravel(), dtype=F64, device=DEVICE),
                           torch.tensor(eta.ravel(), dtype=F64, device=DEVICE),
                           torch.tensor(res, dtype=F64, device=DEVICE), kind)
    r = api.verify_chain(ids, cu, target_probs=pt, draft_probs=qt, noise=noise, mode=mode, backend=backend)
    tau = r.num_accepted.cpu().numpy()
    y = r.output_token_ids.cpu().numpy()[np.arange(n), tau]
    return tau, y


def law_table(outcomes, V, L):
    t = np.zeros((L + 1, V))
    for o in outcomes:
        t[o.accepted] += o.prob * o.next_dist
    return t


def test_token_kernel_grid_law_equals_specsim_exactly():
    gu, gr = 4, 8   # ratios 1/4, 1/2 and every CDF point (in units of the mass) are multiples of 1/8
    grid = list(itertools.product(range(gu), range(gu), range(gr)))
    u = np.array([[a / gu, b / gu] for a, b, _ in grid])
    res = np.array([c / gr for *_, c in grid])
    tau, y = run_chain(X_DY, P_DY, Q_DY, u, np.zeros_like(u), res, "token")
    got = np.zeros((3, 4))
    np.add.at(got, (tau, y), 1.0 / len(grid))
    want = law_table(token.law(X_DY, P_DY, Q_DY), 4, 2)
    assert np.array_equal(got, want), (got, want)


def test_token_negative_control_the_grid_detects_a_wrong_residual():
    """The same grid with the residual uniform reused from the acceptance uniform (a known bug,
    docs/theory.md §11.4) gives a different law: the check has power."""
    gu = 4
    grid = list(itertools.product(range(gu), range(gu)))
    u = np.array([[a / gu, b / gu] for a, b in grid])
    tau, y = run_chain(X_DY, P_DY, Q_DY, u, np.zeros_like(u), u[:, 0].copy(), "token")
    got = np.zeros((3, 4))
    np.add.at(got, (tau, y), 1.0 / len(grid))
    assert not np.array_equal(got, law_table(token.law(X_DY, P_DY, Q_DY), 4, 2))


def test_token_decisions_at_the_boundary():
    # a_1 = 1/4 exactly representable: u = a rejects (strict), nextafter below accepts
    a = 0.25
    below = np.nextafter(a, 0.0)
    for u1, acc in [(a, False), (below, True), (0.0, True), (1 - 2 ** -53, False)]:
        u = np.array([[u1, 0.0]])
        tau, _ = run_chain(X_DY, P_DY, Q_DY, u, np.zeros_like(u), np.zeros(1), "token")
        assert (tau[0] >= 1) == acc, (u1, tau)


@settings(max_examples=4)
@given(chain_inputs(V=4, L=3))
def test_block_stop_decision_is_the_exact_threshold_rule(args):
    x, p, q = args
    L = len(x)
    _, h_exact, _ = block_weights(x, p, q)
    _, h_ref = block_stop_probs(x, p, q)
    h_ref = h_ref.numpy()
    assert np.allclose(h_ref, h_exact, rtol=0, atol=1e-12)
    # every pattern of probe values per position
    probes = []
    for i in range(1, L + 1):
        h = h_ref[i]
        probes.append(sorted({0.0, 1 - 2 ** -53, h if h < 1 else 0.0, float(np.nextafter(h, 0)) if h > 0 else 0.0,
                              min(h * (1 + 1e-9), 1 - 2 ** -53), h * (1 - 1e-9)}))
        probes[-1] = [e for e in probes[-1] if 0 <= e < 1]   # h may exceed 1 by an ulp (harmless)
    etas = np.array(list(itertools.product(*probes)))
    tau, _ = run_chain(x, p, q, np.zeros_like(etas), etas, np.zeros(len(etas)), "block")
    passing = etas < h_ref[1:][None, :]          # strict convention, docs/theory.md §11.3
    want = np.where(passing.any(1), L - np.argmax(passing[:, ::-1], axis=1), 0)
    assert np.array_equal(tau, want)
    # the same rule with the exact h from specsim away from the ulp-level boundary
    far = np.abs(etas - h_exact[1:][None, :]).min(1) > 1e-12
    passing_x = etas < h_exact[1:][None, :]
    want_x = np.where(passing_x.any(1), L - np.argmax(passing_x[:, ::-1], axis=1), 0)
    assert np.array_equal(tau[far], want_x[far])
    # the law implied by the rule with independent eta is specsim's block law
    law = {o.accepted: o.prob for o in block.law(x, p, q)}
    for i in range(L + 1):
        implied = (h_exact[i] if i > 0 else 1.0) * np.prod([1 - h_exact[j] for j in range(i + 1, L + 1)])
        assert abs(implied - law.get(i, 0.0)) < 1e-12


def _grid_example():
    # h_1 is 1 - 2^-53 in specsim's float sums and 1 in the kernel's (and the torch reference's)
    # 2^-60 fixed-point sums: eta = 1 - 2^-53 cannot force a failure there (campaign seed 1320824161)
    p = np.array([[0, 1, 0, 0, 0], np.array([83, 76, 41, 50, 42]) / 292, np.array([53, 23, 78, 8, 42]) / 204])
    q = np.array([[0, 1 / 12, 5 / 12, 1 / 12, 5 / 12], [0.4, 1 / 15, 0, 1 / 3, 0.2]])
    return (1, 0), p, q


@settings(max_examples=3)
@given(chain_inputs(V=5, L=2, pairs=model_pairs(V=5, relations=("independent",))))
@example(_grid_example())
def test_block_residual_law_on_a_uniform_grid(args):
    x, p, q = args
    V, L = p.shape[1], len(x)
    w, h, rows = block_weights(x, p, q)
    n = 2 ** 12
    grid = (np.arange(n) + 0.5) / n
    for tau_target in range(L + 1):
        # force tau: pass at tau_target (eta = 0 if h > 0), fail elsewhere above it
        if tau_target > 0 and h[tau_target] <= 0:
            continue
        if any(h[j] >= 1 - 1e-6 for j in range(tau_target + 1, L + 1)):  # may be 1 in fixed point: no eta fails it
            continue
        eta = np.array([[0.0 if i + 1 == tau_target else 1 - 2 ** -53 for i in range(L)]] * n)
        # the reference integrates the fine grid; the kernel must agree on a coarse subgrid
        tau, y = run_chain(x, p, q, np.zeros_like(eta), eta, grid, "block", backend="torch")
        sub = slice(None, None, n // 16)
        tau_k, y_k = run_chain(x, p, q, np.zeros_like(eta[sub]), eta[sub], grid[sub], "block")
        assert np.array_equal(tau_k, tau[sub]) and np.array_equal(y_k, y[sub])
        assert (tau == tau_target).all()
        want = rows[tau_target] if tau_target < L else p[L]
        got = np.bincount(y, minlength=V) / n
        assert np.abs(np.cumsum(got) - np.cumsum(want)).max() <= 1.0 / n + 1e-12, (got, want)
        assert (p[tau_target][y] > 0).all()


def test_tree_rrs_grid_law_equals_specinfer_law():
    """Root with two i.i.d. children (tokens 0, 3), both leaves; grid over the two coins and the
    residual uniform.  a_1 = (1/8)/(1/2) = 1/4; R_1 = (0, 2, 1, 0)/3 so a_2 = R_1(3)/q(3) = 0 and
    the root emits from R_2 = norm((R_1 - q)_+) = (0, 2/3, 1/3, 0) with probability 3/4."""
    from specsim.verifiers import specinfer
    V = 4
    p0 = np.array([1, 4, 2, 1]) / 8
    q0 = np.array([4, 2, 1, 1]) / 8
    pc = np.array([[2, 3, 3, 0], [1, 1, 2, 4]]) / 8
    tree = DraftTree((-1, 0, 3), (-1, 0, 0), np.vstack([p0, pc]), np.vstack([q0, np.zeros((2, V))]))
    g, gr = 4, 16
    grid = list(itertools.product(range(g), range(g), range(gr)))
    n = len(grid)
    tok = torch.tensor([-1, 0, 3] * n, dtype=torch.int32, device=DEVICE)
    par = torch.tensor([-1, 0, 0] * n, dtype=torch.int32, device=DEVICE)
    cu = torch.arange(1, n + 1, dtype=torch.int32, device=DEVICE) * 3
    pt = torch.tensor(np.tile(tree.p, (n, 1)), dtype=F64, device=DEVICE)
    qt = torch.tensor(np.tile(tree.q, (n, 1)), dtype=F64, device=DEVICE)
    u = torch.tensor([[0.0, a / g, b / g] for a, b, _ in grid], dtype=F64, device=DEVICE).ravel()
    res = torch.tensor([c / gr for *_, c in grid], dtype=F64, device=DEVICE)
    r = api.verify_tree(tok, par, cu, target_probs=pt, draft_probs=qt, noise=api.TreeNoise(u, res, "uniform"),
                        backend="triton")
    node = r.accepted_node.cpu().numpy()
    y = r.output_token_ids.cpu().numpy()[np.arange(n), r.num_accepted.cpu().numpy()]
    got = np.zeros((3, V))
    np.add.at(got, (node, y), 1.0 / n)
    want = np.zeros((3, V))
    for o in specinfer.law(tree):
        want[o.accepted] += o.prob * o.next_dist
    # R_2 has mass 15/64, not a power of two: the grid CDF is within one cell (1/16) of the law
    assert np.allclose(got.sum(1), want.sum(1), atol=1e-15)
    assert np.abs(np.cumsum(got, 1) - np.cumsum(want, 1)).max() <= 1 / gr + 1e-12
    assert np.array_equal(got[1:], want[1:])   # descents: coins on dyadic grids are exact


@settings(max_examples=6)
@given(chain_inputs(V=4, L=3))
def test_greedy_kernel_is_specsim_greedy_law(args):
    """Greedy mode uses no noise: its (tau, Y) is specsim's greedy law, a point mass (the lowest
    id among tied maxima), on the drawn draft and on the all-argmax draft (every token kept)."""
    from specsim.verifiers import greedy

    x, p, q = args
    L = len(x)
    for draft in (tuple(int(t) for t in x), tuple(int(np.argmax(p[k])) for k in range(L))):
        zeros = np.zeros((1, L))
        tau, y = run_chain(draft, p, q, zeros, zeros, np.zeros(1), "greedy")
        want = law_table(greedy.law(draft, p, q), p.shape[1], L)
        got = np.zeros_like(want)
        got[tau[0], y[0]] = 1.0
        assert np.array_equal(got, want), (draft, tau, y)
