"""The acceptance-vs-divergence frontier (lp.frontier): anchors, the cvxpy program, a plain O(V)
reference, shape of the curve, hard numerics (zeros, 1e-300 entries, overflowing ratios)."""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from lp.frontier import E1_P, E1_Q, frontier, frontier_curve, frontier_curve_cvxpy, frontier_cvxpy
from specsim.divergences import DIVERGENCES, kl
from specsim.testing.strategies import distribution_pairs

KINDS = tuple(DIVERGENCES)

# docs/theory.md §12, "Lossy frontier on E1"
E1_EPS = [0, 0.02, 0.05, 0.1, 0.2, 0.5, 1]
E1_TABLE = {"tv": [0.4, 0.42, 0.45, 0.5, 0.6, 0.9, 1],
            "kl": [0.4, 0.483654, 0.535138, 0.584955, 0.650633, 0.786975, 0.941944],
            "kl_reverse": [0.4, 0.487302, 0.543162, 0.601404, 0.686226, 0.848665, 0.970832]}


@st.composite
def pairs(draw, V=st.integers(3, 7), tiny=(0.0, 1e-9), floor=0.0):
    """(p, q) from the package's pair strategy; entries in (0, floor) raised to floor, and
    optionally one target entry set to a value in ``tiny`` (an exact zero or a near-zero)."""
    p, q = draw(distribution_pairs(V))
    if floor:
        p, q = (np.where((r > 0) & (r < floor), floor, r) for r in (p, q))
    if draw(st.booleans()):
        p = p.copy()
        p[draw(st.integers(0, p.size - 1))] = draw(st.sampled_from(tiny))
    if p.sum() == 0:
        p = np.full(p.size, 1.0)
    return p / p.sum(), q / q.sum()


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


def test_zero_and_infinite_budget():
    for kind in KINDS:
        assert frontier(E1_P, E1_Q, 0.0, kind).beta == pytest.approx(np.minimum(E1_P, E1_Q).sum(), abs=1e-12)
        assert frontier(E1_P, E1_Q, np.inf, kind).beta == 1.0


@settings(max_examples=8)
@given(pairs(tiny=(0.0, 1e-3), floor=1e-4), st.floats(0.001, 0.8))
def test_frontier_matches_cvxpy(pq, eps):
    """Independent check.  Exact zeros are allowed; near-zero entries (< 1e-4) are raised here because
    the exponential-cone solvers then return infeasible points (seen: p_v = 1e-13, KL 1.14 at budget 0.75)."""
    p, q = pq
    for kind in KINDS:
        fast, ref = frontier(p, q, eps, kind), frontier_cvxpy(p, q, eps, kind, solver="CLARABEL")
        assert abs(fast.beta - ref.beta) < 1e-5, (kind, fast.beta, ref.beta)
        assert abs(fast.pi.sum() - 1) < 1e-12 and fast.achieved <= eps + 1e-10


def test_cvxpy_curve_reuses_one_parametrised_program():
    """frontier_curve_cvxpy (one program, eps a cp.Parameter) matches the closed form on E1."""
    budgets = [0.02, 0.05, 0.2]
    for div in ("tv", "kl_reverse"):
        pts = frontier_curve_cvxpy(E1_P, E1_Q, budgets, div)
        closed = frontier_curve(E1_P, E1_Q, budgets, div).beta
        assert np.allclose([pt.beta for pt in pts], closed, atol=1e-5)
        assert all(pt.solver == "CLARABEL" for pt in pts)


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


def test_kl_reverse_uses_off_support_mass():
    """KL(p||pi) does not charge for pi where p = 0: once max q/p < 1 is reached, pi* moves mass there."""
    p = np.array([0.30666263, 0.0, 0.69333737])
    q = np.array([0.22863604, 0.17712253, 0.59424143])
    q /= q.sum()
    for eps in (0.02, 0.0737):
        fast, ref = frontier(p, q, eps, "kl_reverse"), frontier_cvxpy(p, q, eps, "kl_reverse")
        assert fast.mix is not None and fast.pi[1] > 0
        assert abs(fast.beta - ref.beta) < 1e-5


def test_large_vocabulary_clip_solution(llm_like_pair):
    p, q = llm_like_pair(20_000, seed=3)
    for kind in ("kl", "kl_reverse"):
        pt = frontier(p, q, 0.05, kind)
        assert abs(pt.pi.sum() - 1) < 1e-12 and abs(pt.achieved - 0.05) < 1e-9
        np.testing.assert_allclose(pt.pi, np.clip(q, pt.b * p, pt.a * p), atol=0)
        # KKT ratio condition (docs/theory.md §9.2): 1/lambda = f'(a) - f'(b) > 0
        assert pt.b <= 1 <= pt.a


# --------------------------------------------------------------------------- fast paths vs a slow reference
def _slow_kl(a, b):
    pos = a > 0
    if np.any(b[pos] <= 0):
        return np.inf
    return float(np.sum(a[pos] * np.log(a[pos] / b[pos])))


def _slow_bisect(ok, lo, hi):
    """Largest x in [lo, hi] with ok(x) (ok(lo) assumed); geometric steps while hi > 4 lo > 0."""
    while True:
        mid = lo * np.sqrt(hi / lo) if 0 < 4 * lo < hi else 0.5 * (lo + hi)
        if not lo < mid < hi:
            return lo
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)


def reference_frontier(p, q, eps, kind):
    """Algorithm 9.2 written plainly: b(a) by bisection on sum clip(q, b p, a p) = mass and D by a
    direct sum, O(V) per evaluation, no sorting and no prefix sums; beyond a_max (KL(p||pi) only)
    a share t of q's mass off supp(p) is moved there (the ``mix`` of FrontierPoint)."""
    D = (lambda pi: _slow_kl(pi, p)) if kind == "kl" else (lambda pi: _slow_kl(p, pi))
    if D(q) <= eps:
        return 1.0
    pos = p > 0
    q0 = q[~pos].sum()

    def pi_of(a, t=0.0):
        b = _slow_bisect(lambda b: np.clip(q, b * p, a * p).sum() <= 1.0 - t * q0, 0.0, 1.0)
        return np.clip(q, b * p, a * p) + np.where(pos, 0.0, t * q)

    a_max = max(float((q[pos] / p[pos]).max()), 1.0)
    a, t = a_max, 0.0
    if D(pi_of(a_max)) > eps:
        a = _slow_bisect(lambda a: D(pi_of(a)) <= eps, 1.0, a_max)
    elif kind == "kl_reverse" and q0 > 0:
        t = _slow_bisect(lambda t: D(pi_of(a, t)) <= eps, 0.0, 1.0)
    return float(np.minimum(q, pi_of(a, t)).sum())


@settings(max_examples=15, deadline=None)
@given(pairs(V=st.integers(3, 30), tiny=(0.0, 1e-9, 1e-300)), st.sampled_from([1e-3, 0.02, 0.2, 1.0, 3.0]))
# campaign seed 2104433357: p = 1e-300 where q = 0, below the float resolution of the mass: b came
# out 0, pi = 0 there and KL(p || pi) = inf was reported as the achieved divergence
@example((np.array([1e-300] + [0.0] * 7 + [1.0]), np.array([0.0] * 8 + [1.0])), 1e-3)
def test_frontier_fast_path_equals_slow_reference(pq, eps):
    """The sorted-breakpoint frontier (one sort, O(log V) per bisection step) equals the plain O(V)
    bisection to 1e-10, including exact zeros and entries down to 1e-300 (where max q/p ~ 1e300)."""
    p, q = pq
    for kind in ("kl", "kl_reverse"):
        fast = frontier(p, q, eps, kind)
        assert abs(fast.beta - reference_frontier(p, q, eps, kind)) < 1e-10, kind
        assert fast.achieved <= eps + 1e-12


def test_frontier_huge_ratio_range():
    """p_v = 1e-300 under draft mass gives a_max ~ 1e298: the bisection on a must still leave a = 1
    (arithmetic halving from [1, 1e298] cannot; the optimum here has a ~ 5, not the a = 1 of SpS)."""
    p = np.array([1.38063137e-001, 3.48525320e-003, 7.13556522e-001, 1.44895088e-001, 1.01413518e-300])
    q = np.array([0.2088955, 0.70586404, 0.0, 0.07730637, 0.00793408])
    p, q = p / p.sum(), q / q.sum()
    for kind in ("kl", "kl_reverse"):
        pt = frontier(p, q, 0.0341, kind)
        assert pt.a > 2 and pt.beta > np.minimum(p, q).sum() + 0.05
        assert abs(pt.beta - reference_frontier(p, q, 0.0341, kind)) < 1e-10


@settings(max_examples=40)
@given(st.integers(1, 40).flatmap(lambda V: st.tuples(
    st.lists(st.sampled_from([0.0, 1e-310, 1e-3, 0.1, 1.0, 7.0]), min_size=V, max_size=V),
    st.lists(st.sampled_from([0.0, 1e-310, 1e-3, 0.1, 1.0, 7.0]), min_size=V, max_size=V))))
def test_kl_fast_path_equals_rel_entr(ab):
    """specsim.divergences.kl (the frontier's KL, with a vectorised fast path) equals scipy's rel_entr
    sum, including zeros on either side and subnormal entries where a / b overflows."""
    from scipy.special import rel_entr

    a, b = (np.array(x) / max(sum(x), 1e-300) for x in ab)
    want = max(float(rel_entr(a, b).sum()), 0.0)
    got = kl(a, b)
    assert got == want or abs(got - want) <= 1e-12 * max(1.0, want), (a, b, got, want)


def test_kl_conventions():
    assert kl([0.5, 0.5], [1.0, 0.0]) == np.inf and kl([1.0, 0.0], [0.5, 0.5]) == pytest.approx(np.log(2))
    with pytest.raises(ValueError, match="entry -0.5 at token 0"):   # not a distribution: refused, not inf
        kl([-0.5, 1.5], [0.5, 0.5])
