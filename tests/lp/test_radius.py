"""Deterministic acceptance rules and their acceptance radii (lp.radius, docs/theory.md §10.2): closed
forms vs cvxpy, falsification by Hypothesis inside the radius, negative controls just outside it."""
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from lp.radius import (acceptance_radius, acceptance_radius_numeric, additive_greedy, entropy_rule, margin_radius,
                       multiplicative_greedy, strict_greedy, top_m)
from specsim.divergences import divergence
from specsim._validate import as_distribution
from specsim.testing.strategies import distributions

KINDS = ("kl", "kl_reverse", "tv")
B = [0.5, 0.3, 0.15, 0.05]


def div(p, b, kind):
    """Certificates are stated as Div(p, b): KL(p||b), KL(b||p), TV."""
    return divergence(p, b, kind)


# docs/theory.md §12 "Acceptance certificates": KL(p||b) / KL(b||p) / TV
ANCHORS = [(strict_greedy(), B, (0.025732, 0.025267, 0.1)),
           (additive_greedy(0.05), B, (0.040076, 0.039319, 0.125)),
           (multiplicative_greedy(0.5), B, (0.136724, 0.141695, 0.233333)),
           (top_m(2), B, (0.107894, 0.100077, 0.183333)),
           (strict_greedy(), [0.4, 0.35, 0.15, 0.1], (0.001670, 0.001668, 0.025))]


@pytest.mark.parametrize("rule, b, want", ANCHORS, ids=lambda a: getattr(a, "kind", None))
def test_anchors(rule, b, want):
    for kind, w in zip(KINDS, want):
        assert abs(acceptance_radius(rule, b, 0, kind) - w) < 1e-5, (rule, kind)


def test_margin_anchors():
    assert abs(margin_radius(0.2, "kl") - 0.020411) < 1e-6
    assert abs(margin_radius(0.2, "kl_reverse") - 0.020136) < 1e-6
    assert abs(margin_radius(0.5, "kl") - 0.143841) < 1e-6
    assert abs(margin_radius(0.5, "kl_reverse") - 0.130812) < 1e-6


@pytest.mark.parametrize("rule, p, x, accepted", [
    (strict_greedy(), [0.5, 0.3, 0.2], 0, True), (strict_greedy(), [0.4, 0.4, 0.2], 0, False),
    (additive_greedy(0.1), [0.35, 0.4, 0.25], 0, True), (additive_greedy(0.1), [0.3, 0.4, 0.3], 0, False),
    (multiplicative_greedy(0.5), [0.25, 0.45, 0.3], 0, True), (multiplicative_greedy(0.5), [0.2, 0.4, 0.4], 0, False),
    (top_m(2), [0.3, 0.5, 0.2], 0, True), (top_m(2), [0.2, 0.5, 0.3], 0, False),
    (entropy_rule(), [0.1, 0.45, 0.45], 0, True), (entropy_rule(), [0.05, 0.5, 0.45], 0, False),
])
def test_rules_accept_and_reject_with_ties_rejected(rule, p, x, accepted):
    assert rule.accepts(p, x) is accepted


@st.composite
def references(draw, V=st.integers(3, 5)):
    """Reference rows b with every entry >= 1e-3 (the cvxpy programs need a little mass everywhere)."""
    b = np.maximum(draw(distributions(V)), 1e-3)
    return b / b.sum()


rules = st.one_of(st.just(strict_greedy()), st.floats(0.0, 0.3).map(additive_greedy),
                  st.floats(0.2, 1.0).map(multiplicative_greedy), st.integers(1, 2).map(top_m))


@settings(max_examples=8, deadline=None)
@given(references(), rules)
def test_closed_form_matches_cvxpy_and_just_outside_is_rejected(b, rule):
    """The closed form equals the numerical minimum over the rejection set (cvxpy), and the optimal
    rejecting p found there is still rejected once pushed 0.1% further from b (negative control)."""
    x = int(np.argmax(b))
    for kind in KINDS:
        R = acceptance_radius(rule, b, x, kind)
        num = acceptance_radius_numeric(rule, b, x, kind)
        assert abs(R - num.value) < 1e-5, (rule, kind, R, num.value)
        if R <= 0:
            assert not rule.accepts(b, x)
            continue
        if R < 1e-6:        # cvxpy's rejecting p is accurate to ~1e-8: a 0.1% push of a radius
            continue        # below that (a tie with a tiny eps) need not leave the acceptance set
        p = np.clip(1.001 * num.p_reject - 0.001 * b, 0, None)
        p /= p.sum()
        assert not rule.accepts(p, x), (rule, kind)
        assert div(p, b, kind) < R * 1.01 + 1e-6


def _toward(b, z, target, kind):
    """p_t = (1 - t) b + t z with Div(p_t, b) = target (Div increases along the segment)."""
    lo, hi = 0.0, 1.0
    if div(z, b, kind) <= target:
        return z
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if div((1 - mid) * b + mid * z, b, kind) <= target else (lo, mid)
    return (1 - lo) * b + lo * z


@settings(max_examples=30, deadline=None)
@given(references(st.integers(3, 6)).flatmap(lambda b: st.tuples(
           st.just(b), st.lists(distributions(b.size), min_size=1, max_size=8),
           st.lists(st.lists(st.floats(-1.5, 1.5), min_size=b.size, max_size=b.size), max_size=20))),
       st.one_of(rules, st.just(entropy_rule()), st.just(entropy_rule(0.3, 0.5))),
       st.sampled_from(KINDS), st.floats(0.05, 0.999))
# campaign seed 1267661840: b uniform (a tie up to rounding): KL(b||p) at the closest rejecting p
# was summed as sum b log(b / p), whose cancellation left 7.4e-17 where the radius is ~1e-32
@example((np.full(3, 1 / 3), [np.full(3, 1 / 3)], []), additive_greedy(6.269730584636314e-111), "kl_reverse", 0.5)
@example((np.full(3, 1 / 3), [np.full(3, 1 / 3)], []), additive_greedy(1e-12), "kl_reverse", 0.5)
def test_no_rejection_inside_the_radius(drawn, rule, kind, u):
    """Falsification: every p with Div(p, b) < D*(b, x) must accept x (argmax b): p moved from b
    toward each competitor's one-hot row, toward drawn rows and the uniform row (to u D*), and b
    tilted by drawn log-perturbations (kept when inside the radius)."""
    b, directions, tilts = drawn
    x = int(np.argmax(b))
    R = acceptance_radius(rule, b, x, kind)
    # below ~1e-14 the statement is not testable in floats: between rows normalised in float,
    # sum(p) - 1 ~ 1e-16 enters KL at first order (campaign seeds 1267661840, 314513129: R ~ 1e-25
    # on a uniform b, where any computed Div(p, b) is that rounding)
    if not np.isfinite(R) or R <= 1e-14:
        return
    V = b.size
    candidates = [np.eye(V)[y] for y in range(V) if y != x] + directions + [np.full(V, 1.0 / V)]
    for z in candidates:
        p = _toward(b, z, u * R, kind)
        assert div(p, b, kind) < R
        assert rule.accepts(p, x), (rule, kind, p, R)
    for tilt in tilts:
        p = b * np.exp(np.asarray(tilt))
        p /= p.sum()
        if div(p, b, kind) < R:
            assert rule.accepts(p, x)


@settings(max_examples=30)
@given(references(st.integers(3, 8)), st.integers(1, 3))
def test_margin_bounds_hold(b, m):
    top = np.sort(b)[::-1]
    x = int(np.argmax(b))
    gap = top[0] - top[1]
    for kind in KINDS:
        assert margin_radius(gap, kind) <= acceptance_radius(strict_greedy(), b, x, kind) + 1e-12
        if m < b.size:
            assert margin_radius(gap, kind, m) <= acceptance_radius(top_m(m), b, x, kind) + 1e-12


@pytest.mark.parametrize("b", [B, [0.7, 0.1, 0.1, 0.05, 0.05], [0.35, 0.3, 0.2, 0.15]])
def test_entropy_lower_bound_below_search(b):
    """The entropy rule's certificate is a lower bound: no rejecting point found below it."""
    rule = entropy_rule()
    for kind in KINDS:
        lower = acceptance_radius(rule, b, 0, kind)
        found = acceptance_radius_numeric(rule, b, 0, kind, restarts=8)
        assert found.p_reject is not None and not rule.accepts(found.p_reject, 0)
        assert lower <= found.value + 1e-7


def test_rejected_at_reference_gives_zero():
    b = [0.3, 0.5, 0.2]
    for rule in (strict_greedy(), multiplicative_greedy(0.9), top_m(1)):
        for kind in KINDS:
            assert acceptance_radius(rule, b, 0, kind) == 0.0
    assert acceptance_radius(top_m(3), b, 0, "kl") == np.inf  # only 2 competitors: never rejected


def test_numeric_radius_is_infinite_when_no_target_rejects():
    """KL(p||b) forces p = 0 where b = 0: with b = (1, 0, 0) no p with finite KL rejects token 0."""
    check = acceptance_radius_numeric(strict_greedy(), [1.0, 0.0, 0.0], 0, "kl")
    assert check.value == np.inf and check.p_reject is None
    assert acceptance_radius(strict_greedy(), [1.0, 0.0, 0.0], 0, "kl") == np.inf


def test_additive_kl_radius_against_60_digits_near_ties():
    """The additive rule's KL(p||b) radius against its closed form at 60 digits (mpmath), on the
    triple (b_x, b_y, 1 - b_x - b_y): within 1e-14 relative from radii of 0.1 down to ~1e-29 (a
    tie with eps = 1e-14, where the plain form -log(t^-eps Z) rounds to 0 and so would say that b
    rejects x, though b accepts it)."""
    import mpmath

    def exact(bx, by, eps):
        with mpmath.workdps(60):
            bx_, by_, e = mpmath.mpf(bx), mpmath.mpf(by), mpmath.mpf(eps)
            r = 1 - bx_ - by_
            t = (e * r + mpmath.sqrt((e * r) ** 2 + 4 * by_ * bx_ * (1 - e) * (1 + e))) / (2 * by_ * (1 - e))
            return float(-mpmath.log(t ** (-e) * (bx_ / t + by_ * t + r)))

    rng = np.random.default_rng(5)
    cases = [(1 / 3, 1 / 3, 1e-14), (0.25, 0.25, 1e-8), (0.4, 0.4 * (1 - 1e-12), 1e-14)]
    for _ in range(300):
        bx, by = sorted(rng.dirichlet(np.ones(4)))[-1:-3:-1]
        if rng.random() < 0.3:
            bx = by = 0.5 * rng.random()
        cases.append((float(bx), float(by), float(rng.choice([0.0, 1e-14, 1e-8, 1e-3, 0.1, 0.3]))))
    for bx, by, eps in cases:
        b = as_distribution([bx, by, 1 - bx - by])         # the row the radius is taken of
        top = max(b[1], b[2])                               # y: the largest competitor
        R = acceptance_radius(additive_greedy(eps), b, 0, "kl")
        if b[0] - top + eps <= 0:                           # b rejects x
            assert R == 0.0
            continue
        ref = exact(b[0], top, eps)
        assert abs(R - ref) <= 1e-14 * ref, (bx, by, eps, R, ref)
    b = np.full(3, 1 / 3)
    assert additive_greedy(1e-14).accepts(b, 0) and acceptance_radius(additive_greedy(1e-14), b, 0, "kl") > 0
