"""The acceptance-vs-divergence frontier, single-token and sequence certificates, findings."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lp.lossy import (E1_P, E1_Q, certify, certify_sequence, frontier, frontier_curve, frontier_cvxpy,
                      lossy_report)
from specsim import random_model, token
from specsim.verifiers.lossy import (cactus, consultant_standin, ensemble, fuzzy, kl, lenience, margin_standin,
                                     mentored, topk_accept, tv, typical)

KINDS = ("tv", "kl", "kl_reverse")

# THEORY.md 12, "Lossy frontier on E1"
E1_EPS = [0, 0.02, 0.05, 0.1, 0.2, 0.5, 1]
E1_TABLE = {"tv": [0.4, 0.42, 0.45, 0.5, 0.6, 0.9, 1],
            "kl": [0.4, 0.483654, 0.535138, 0.584955, 0.650633, 0.786975, 0.941944],
            "kl_reverse": [0.4, 0.487302, 0.543162, 0.601404, 0.686226, 0.848665, 0.970832]}


@st.composite
def pairs(draw, vmin=3, vmax=7, tiny=(0.0, 1e-9), floor=0.0):
    V = draw(st.integers(vmin, vmax))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    conc = draw(st.sampled_from([0.1, 0.5, 1.0, 3.0]))
    p, q = rng.dirichlet(np.full(V, conc)), rng.dirichlet(np.full(V, conc))
    p, q = np.maximum(p, floor), np.maximum(q, floor)
    p, q = p / p.sum(), q / q.sum()
    if draw(st.booleans()):  # skewed: a near-zero or an exact zero in the target
        p[rng.integers(V)] = draw(st.sampled_from(tiny))
        p /= p.sum()
    return p, q


@pytest.mark.parametrize("kind", KINDS)
def test_e1_table(kind):
    for eps, want in zip(E1_EPS, E1_TABLE[kind]):
        pt = frontier(E1_P, E1_Q, eps, kind)
        assert abs(pt.beta - want) < 1e-5, (eps, pt.beta, want)
        assert pt.achieved <= eps + 1e-12
    curve = frontier_curve(E1_P, E1_Q, E1_EPS, kind)
    np.testing.assert_allclose(curve.beta, E1_TABLE[kind], atol=1e-5)


def test_e1_clip_parameters():
    pt = frontier(E1_P, E1_Q, 0.05, "kl")
    assert abs(pt.a - 1.702753) < 1e-5 and abs(pt.b - 0.831078) < 1e-5
    np.testing.assert_allclose(pt.pi, [0.085138, 0.25, 0.207769, 0.457093], atol=1e-6)
    np.testing.assert_allclose(pt.pi, np.clip(E1_Q, pt.b * E1_P, pt.a * E1_P), atol=1e-15)
    pr = frontier(E1_P, E1_Q, 0.05, "kl_reverse")
    assert abs(pr.a - 1.863247) < 1e-5 and abs(pr.b - 0.821047) < 1e-5


@settings(max_examples=8)
@given(pairs(tiny=(0.0, 1e-3), floor=1e-4), st.floats(0.001, 0.8))
def test_frontier_matches_cvxpy(pq, eps):
    """Independent check.  Exact zeros are allowed; near-zero entries (< 1e-4) are left out here because
    the exponential-cone solvers then return infeasible points (seen: p_v = 1e-13, KL 1.14 at budget 0.75)."""
    p, q = pq
    for kind in KINDS:
        fast, ref = frontier(p, q, eps, kind), frontier_cvxpy(p, q, eps, kind, solver="CLARABEL")
        assert abs(fast.beta - ref.beta) < 1e-5, (kind, fast.beta, ref.beta)
        assert abs(fast.pi.sum() - 1) < 1e-12 and fast.achieved <= eps + 1e-10


@settings(max_examples=20)
@given(pairs())
def test_frontier_monotone_concave(pq):
    p, q = pq
    grid = np.linspace(0, 1.5, 16)
    for kind in KINDS:
        b = frontier_curve(p, q, grid, kind).beta
        assert np.all(np.diff(b) >= -1e-12)
        assert np.all(b[1:-1] >= 0.5 * (b[:-2] + b[2:]) - 1e-9)  # value of a concave program
        assert abs(b[0] - np.minimum(p, q).sum()) < 1e-12


def rules():
    return [typical(), lenience(0.7), topk_accept(2), fuzzy(0.4, "kl"), fuzzy(0.3, "js_released"),
            cactus(0.01), cactus(0.1), mentored(0.6), ensemble(0.6), ensemble(0.6, "geometric"),
            margin_standin(0.6), consultant_standin(0.1)]


@settings(max_examples=25)
@given(pairs())
def test_every_rule_at_or_below_frontier(pq):
    p, q = pq
    for v in rules():
        c = certify(v, p, q)
        assert min(c.gap_tv, c.gap_kl, c.gap_kl_reverse) >= -1e-9, (v.name, c)


@settings(max_examples=20)
@given(pairs(), st.floats(0.05, 1.0))
def test_mentored_is_on_the_frontier(pq, alpha):
    p, q = pq
    c = certify(mentored(alpha), p, q)
    assert abs(c.gap_kl) < 1e-8 and abs(c.gap_tv) < 1e-9
    if np.isfinite(c.kl_p_out):
        assert abs(c.gap_kl_reverse) < 1e-8


@settings(max_examples=25)
@given(pairs(), st.floats(0.0, 0.5), st.floats(0.1, 1.0))
def test_between_rules(pq, delta, w):
    """Lenience, the static linear ensemble and Cactus are between p and q, hence on the TV frontier."""
    p, q = pq
    for v in (lenience(w), ensemble(w), cactus(delta)):
        c = certify(v, p, q)
        assert c.between, v.name
        assert abs(c.gap_tv) < 1e-9


def test_typical_not_between_on_e1():
    c = certify(typical(), E1_P, E1_Q)
    assert not c.between
    assert c.kl_p_out == np.inf and "KL(p||out) = inf" in c.infinite


def test_cactus_delta_is_not_a_kl_bound():
    """THEORY.md 9.3: E1 with delta = 0.05 and a share of random instances."""
    c = certify(cactus(0.05), E1_P, E1_Q)
    assert abs(c.kl_out_p - 0.082227) < 1e-6 and c.kl_out_p > 0.05
    assert abs(c.kl_p_out - 0.071251) < 1e-6
    assert abs(c.frontier_kl - 0.569970) < 1e-6
    rng = np.random.default_rng(0)
    over, n = 0, 400
    for i in range(n):
        V = rng.integers(2, 8)
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        delta = [0.01, 0.05, 0.1, 0.3][i % 4]
        over += kl(cactus(delta).out(p, q), p) > delta
    assert over / n > 0.25  # THEORY reports 61% on this family; any positive share refutes the bound


def test_lenience_certificate_e1():
    c = certify(lenience(0.8), E1_P, E1_Q)
    assert abs(c.max_ratio - 1.25) < 1e-12 and abs(c.dinf - np.log(1.25)) < 1e-12
    assert c.kl_out_p <= c.dinf


@pytest.mark.parametrize("seed", [0, 1])
def test_sequence_certificate(seed):
    T, D = random_model(3, seed), random_model(3, seed + 10, concentration=0.5)
    ref = certify_sequence(token, T, D, L=2)
    np.testing.assert_allclose(ref.stream, ref.target, atol=1e-12)  # lossless: stream = target law
    assert ref.tv < 1e-12 and ref.kl_out_p < 1e-12
    for v in (cactus(0.1), lenience(0.6), typical(0.2, 0.5), mentored(0.5)):
        c = certify_sequence(v, T, D, L=2)
        assert abs(c.stream.sum() - 1) < 1e-12
        assert 0 < c.tv <= c.tv_bound + 1e-12
        assert c.kl_out_p <= c.kl_out_p_bound + 1e-12
        assert c.kl_p_out <= c.kl_p_out_bound + 1e-12
    assert certify_sequence(lenience(1.0), T, D, L=2).tv < 1e-12


def test_sequence_certificate_three_iterations():
    """n = 4 tokens with L = 1: the stream spans at least two iterations."""
    T, D = random_model(3, 4), random_model(3, 5)
    c = certify_sequence(cactus(0.2), T, D, L=1, n=4)
    assert c.stream.size == 81 and abs(c.stream.sum() - 1) < 1e-12
    assert c.kl_out_p <= c.kl_out_p_bound + 1e-12 and c.tv <= c.tv_bound + 1e-12


def test_large_vocabulary_clip_solution():
    rng = np.random.default_rng(3)
    z = 3 * rng.standard_normal(20_000)
    p = np.exp(z - z.max())
    p /= p.sum()
    zq = z + rng.standard_normal(z.size)
    q = np.exp(zq - zq.max())
    q /= q.sum()
    for kind in ("kl", "kl_reverse"):
        pt = frontier(p, q, 0.05, kind)
        assert abs(pt.pi.sum() - 1) < 1e-12 and abs(pt.achieved - 0.05) < 1e-9
        np.testing.assert_allclose(pt.pi, np.clip(q, pt.b * p, pt.a * p), atol=0)
        # KKT ratio condition (THEORY 9.2): 1/lambda = f'(a) - f'(b) > 0
        assert pt.b <= 1 <= pt.a


def test_bad_inputs():
    with pytest.raises(ValueError, match="divergence"):
        frontier(E1_P, E1_Q, 0.1, "hellinger")
    with pytest.raises(ValueError, match="budget"):
        frontier(E1_P, E1_Q, -0.1, "kl")
    with pytest.raises(ValueError, match="q"):
        frontier(E1_P, [0.5, 0.5, 0.5, -0.5], 0.1)
    with pytest.raises(ValueError):
        certify("cactus", E1_P, E1_Q)
    with pytest.raises(ValueError, match="unknown rule"):
        lossy_report("nope")


def test_report():
    s = lossy_report("cactus", budget=0.3, delta=0.05)
    assert "0.082227" in s and "<- budget" in s and "KL(p||pi)" in s
    assert "typical" in lossy_report()
    assert tv(E1_P, E1_Q) == pytest.approx(0.6)


def test_kl_reverse_uses_off_support_mass():
    """KL(p||pi) does not charge for pi where p = 0: once max q/p < 1 is reached, pi* moves mass there."""
    p = np.array([0.30666263, 0.0, 0.69333737])
    q = np.array([0.22863604, 0.17712253, 0.59424143])
    q /= q.sum()
    for eps in (0.02, 0.0737):
        fast, ref = frontier(p, q, eps, "kl_reverse"), frontier_cvxpy(p, q, eps, "kl_reverse")
        assert fast.mix is not None and fast.pi[1] > 0
        assert abs(fast.beta - ref.beta) < 1e-5
