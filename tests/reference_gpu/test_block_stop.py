"""Block stop probabilities of the reference and the kernel against exact rational arithmetic.

h_i = Z_i / D_i with Z_i = sum_v (w_i p_i - q_i)_+ and D_i = sum_v (q_i - w_i p_i)_+ (docs/theory.md
§4.1).  The paper's denominator Z_i + 1 - w_i is the same number when the rows sum to 1, but in
float64 Z_i + 1 drops every bit of Z_i below 2^-53, which is all of it when w_i is close to 1 and
Z_i is tiny.  The references here are ``fractions.Fraction`` computations on the float64 inputs
(every float64 is a rational), which share none of the code's rounding.

* Dyadic rows (1 - w_1 = 2^-a, Z_1 = 2^-56, rows summing to 1 exactly): every product, difference
  and fixed-point entry is exact, so h_1 must be the rational Z/D to the last bit of the final
  division; the kernel's stop decision flips exactly at that h_1 (bit parity with the reference).
* Peaked random rows (1 - max p in {1e-6, 1e-12, 1e-15, 2^-52}): h stays in [0, 1] and within
  the rounding bound derived below of the rational Z/D computed from the kernel's own w.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_gpu import api
from reference_gpu.reference import block_stop_probs

pytest.importorskip("triton")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
F64 = torch.float64


def exact_stop(w: float, p_row, q_row) -> Fraction:
    """Z / D in rational arithmetic (1 when D = 0), from the float64 values as given."""
    fw = Fraction(w)
    diff = [fw * Fraction(float(a)) - Fraction(float(b)) for a, b in zip(p_row, q_row)]
    Z = sum((d for d in diff if d > 0), Fraction(0))
    D = sum((-d for d in diff if d < 0), Fraction(0))
    return min(Fraction(1), Z / D) if D > 0 else Fraction(1)


def representable(values) -> bool:
    return all(Fraction(float(v)) == v for v in values)


def dyadic_rows(a: int):
    """V = 4, L = 2, draft (0, 0): w_1 = 1 - 2^-a exactly, row 1 with Z_1 = 2^-56 and
    D_1 = 2^-a + 2^-56; every row sums to 1 exactly."""
    e = Fraction(1, 2 ** a)
    tiny = Fraction(1, 2 ** 56)
    p0 = [Fraction(1, 2) - e / 2, Fraction(1, 4) + e / 2, Fraction(1, 8), Fraction(1, 8)]
    q0 = [Fraction(1, 2), Fraction(1, 4), Fraction(1, 8), Fraction(1, 8)]
    p1 = [Fraction(1, 2), Fraction(1, 4), Fraction(1, 8), Fraction(1, 8)]
    w = 1 - e
    q1 = [w / 2 + e, w / 4, w / 8 + tiny, w / 8 - tiny]
    p2 = [Fraction(1, 4)] * 4
    rows = (p0, q0, p1, q1, p2)
    assert all(sum(r) == 1 for r in rows) and all(representable(r) for r in rows)
    p = np.array([p0, p1, p2], dtype=np.float64)
    q = np.array([q0, q1], dtype=np.float64)
    return p, q, tiny / (e + tiny)


def kernel_tau(p, q, draft, etas):
    """tau of the Triton kernel on one request per row of ``etas`` (token-acceptance uniforms 0)."""
    n, L = etas.shape
    ids = torch.tensor(list(draft) * n, dtype=torch.int32, device=DEVICE)
    cu = torch.arange(1, n + 1, dtype=torch.int32, device=DEVICE) * L
    pt = torch.tensor(np.tile(p, (n, 1)), dtype=F64, device=DEVICE)
    qt = torch.tensor(np.tile(q, (n, 1)), dtype=F64, device=DEVICE)
    noise = api.ChainNoise(torch.zeros(n * L, dtype=F64, device=DEVICE),
                           torch.tensor(etas.ravel(), dtype=F64, device=DEVICE),
                           torch.zeros(n, dtype=F64, device=DEVICE), "uniform")
    return api.verify_chain(ids, cu, target_probs=pt, draft_probs=qt, noise=noise, mode="block", backend="triton").num_accepted.cpu().numpy()


@pytest.mark.parametrize("a", [20, 40, 45, 52])
def test_stop_probability_is_exact_on_dyadic_rows_with_w_near_one(a):
    p, q, h_exact = dyadic_rows(a)
    w, h = block_stop_probs((0, 0), p, q)
    assert Fraction(float(w[1])) == 1 - Fraction(1, 2 ** a)
    assert abs(Fraction(float(h[1])) - h_exact) <= h_exact * Fraction(1, 2 ** 53)   # the final division only
    # the kernel's decision eta_1 < h_1 flips exactly at the reference's h_1 (eta_2 = 1 - 2^-53 never passes
    # h_2 = w_2 < 1, so tau is 1 or 0)
    h1 = float(h[1])
    etas = np.array([[np.nextafter(h1, 0.0), 1 - 2 ** -53], [h1, 1 - 2 ** -53]])
    assert kernel_tau(p, q, (0, 0), etas).tolist() == [1, 0]


#: Bound on |Z - Z*| and |D - D*|: each entry w p_v - q_v is off by at most 2^-53 (|w p_v| + |w p_v - q_v|)
#: <= 2^-52 (p_v + q_v) (one rounded product, one rounded difference), summed over v at most 2^-51 (rows sum
#: to 1 within 1e-15 here), plus V 2^-60 from the fixed-point truncation.
def rounding_bound(V: int) -> float:
    return 2.0 ** -51 + V * 2.0 ** -60


def peaked_row(gap: float, weights) -> np.ndarray:
    """1 - gap on token 0, the rest of the mass spread by ``weights``; float64, sum 1 to rounding."""
    w = np.asarray(weights, dtype=np.float64)
    return np.concatenate(([1.0 - gap], gap * w / w.sum()))


GAPS = [1e-6, 1e-12, 1e-15, 2.0 ** -52]
WEIGHTS = st.lists(st.floats(0.01, 1.0), min_size=2, max_size=2)


@settings(max_examples=40, deadline=None)
@given(gap=st.sampled_from(GAPS), scale=st.floats(0.25, 4.0), wp=WEIGHTS, wq=WEIGHTS, w0=WEIGHTS)
def test_stop_probability_on_peaked_rows_is_a_probability_within_the_rounding_bound(gap, scale, wp, wq, w0):
    # row 0 draws token 0 with p/q just below 1, so w_1 is within a few gaps of 1
    p0, q0 = peaked_row(gap * scale, w0), peaked_row(gap, w0)
    p = np.stack([p0, peaked_row(gap * scale, wp), np.full(3, 1 / 3)])
    q = np.stack([q0, peaked_row(gap, wq)])
    w, h = block_stop_probs((0, 0), p, q)
    h1 = float(h[1])
    assert 0.0 <= h1 <= 1.0
    fw = Fraction(float(w[1]))
    D_exact = sum(max(Fraction(float(b)) - fw * Fraction(float(a)), Fraction(0)) for a, b in zip(p[1], q[1]))
    eps = rounding_bound(3)
    if D_exact > 4 * eps:   # otherwise no float64 kernel can resolve h_1 and only h in [0, 1] is claimed
        h_exact = exact_stop(float(w[1]), p[1], q[1])
        assert abs(Fraction(h1) - h_exact) <= (1 + h_exact) * Fraction(eps) / (D_exact - Fraction(eps))
