"""lp against exact arithmetic at extreme rows (issue 12): peaked rows with 1 - max q in
{1e-6, 1e-12, 1e-15, 2^-52} and rows with subnormal entries, on small V.

The references are written here and share nothing with the code's arithmetic: each float64 entry
is read as the exact rational it is (``fractions.Fraction``), the row is normalised by its exact
sum, draft-set laws come from enumerating every ordered draw sequence, alpha* from brute force over
all 2^V token sets, and the KL frontier from a bisection carried out in 60-digit decimal
arithmetic (``decimal``; logarithms are not rational).  Target: absolute error <= 1e-12
(measured: <= 5e-16 for the multi-draft bounds and set laws, <= 7.2e-15 for the KL frontiers).
"""
import itertools
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from lp.coupling import draft_set_law, multidraft_bound, multidraft_bound_bruteforce
from lp.frontier import frontier, frontier_curve

TOL = 1e-12


def _peaked(gap: float, V: int, top: int) -> list[float]:
    """A row with q_top = 1 - gap and the rest of the mass spread unevenly over V - 1 tokens."""
    weights = np.arange(1.0, V)
    rest = (gap * weights / weights.sum()).tolist()
    return rest[:top] + [1.0 - gap] + rest[top:]


#: draft rows: peaked (first or last token) at each gap, and rows with subnormal entries
DRAFTS = {f"peak {gap:g} at {top}": _peaked(gap, V, top)
          for gap in (1e-6, 1e-12, 1e-15, 2.0 ** -52) for V, top in ((4, 0), (5, 4))}
DRAFTS |= {
    "subnormal between halves": [0.5, 1e-300, 0.5 - 1e-300],
    "one ulp below 1": [1 - 2.0 ** -52, 2.0 ** -53, 2.0 ** -53],
    "smallest subnormal": [5e-324, 0.5, 0.5],
    "subnormal tail": [0.4, 0.3, 0.3, 5e-324, 5e-324],
    "peak and subnormal": [1 - 2.0 ** -52, 2.0 ** -54, 2.0 ** -54, 5e-324, 2.0 ** -53],
}
#: target rows (the first V entries, renormalised)
TARGETS = {"skewed": [0.05, 0.15, 0.3, 0.4, 0.1], "peaked at 0": [0.96, 0.01, 0.01, 0.01, 0.01],
           "peaked at the end": [0.01, 0.01, 0.01, 0.01, 0.96], "flat": [0.2] * 5,
           "peaked 1e-12": [1 - 1e-12, 4e-13, 3e-13, 2e-13, 1e-13]}


def _target(name: str, V: int) -> np.ndarray:
    p = np.array(TARGETS[name][:V])
    return p / p.sum()


def _exact(row) -> list[Fraction]:
    """The float64 entries as exact rationals, normalised by their exact sum."""
    fr = [Fraction(float(x)) for x in row]
    total = sum(fr)
    return [x / total for x in fr]


def _exact_set_law(q, K: int, replacement: bool) -> dict[tuple[int, ...], Fraction]:
    """P(set of the K drafts = S) by enumerating every ordered draw sequence."""
    q = _exact(q)
    law: dict[tuple[int, ...], Fraction] = {}
    if replacement:
        for seq in itertools.product(range(len(q)), repeat=K):
            pr = Fraction(1)
            for s in seq:
                pr *= q[s]
            if pr:
                S = tuple(sorted(set(seq)))
                law[S] = law.get(S, Fraction(0)) + pr
        return law

    def draw(seq, pr, left):
        if len(seq) == K or not left:      # the support is exhausted: the set is supp q
            S = tuple(sorted(seq))
            law[S] = law.get(S, Fraction(0)) + pr
            return
        mass = sum(q[v] for v in left)
        for v in left:
            draw(seq + [v], pr * q[v] / mass, [u for u in left if u != v])

    draw([], Fraction(1), [v for v in range(len(q)) if q[v] > 0])
    return law


def _exact_alpha(p, q, K: int, replacement: bool) -> Fraction:
    """alpha* = min over all 2^V token sets H of p(H) + 1 - P(every draft in H)."""
    pe, law = _exact(p), _exact_set_law(q, K, replacement)
    best = None
    for r in range(len(pe) + 1):
        for H in itertools.combinations(range(len(pe)), r):
            inside = sum((pr for S, pr in law.items() if set(S) <= set(H)), Fraction(0))
            value = sum((pe[v] for v in H), Fraction(0)) + 1 - inside
            best = value if best is None or value < best else best
    return best


MULTIDRAFT_CASES = [(d, t, K, rep) for d in DRAFTS for t in TARGETS for K in (2, 3, 4) for rep in (True, False)
                    if rep or K < len(DRAFTS[d])]


@pytest.mark.parametrize("draft, target, K, replacement", MULTIDRAFT_CASES)
def test_multidraft_bound_against_exact_rationals(draft, target, K, replacement):
    q = DRAFTS[draft]
    p = _target(target, len(q))
    exact = float(_exact_alpha(p, q, K, replacement))
    assert abs(multidraft_bound(p, q, K, replacement).value - exact) <= TOL
    assert abs(multidraft_bound_bruteforce(p, q, K, replacement).value - exact) <= TOL


@pytest.mark.parametrize("draft, K, replacement",
                         [(d, K, rep) for d in DRAFTS for K in (2, 3, 4) for rep in (True, False)
                          if rep or K <= len(DRAFTS[d])])
def test_draft_set_law_against_exact_rationals(draft, K, replacement):
    q = DRAFTS[draft]
    exact = _exact_set_law(q, K, replacement)
    sets, probs = draft_set_law(q, K, replacement)
    got = dict(zip(sets, probs.tolist()))
    assert np.all(np.isfinite(probs))
    for S in set(got) | set(exact):
        assert abs(got.get(S, 0.0) - float(exact.get(S, 0))) <= TOL, S


# --------------------------------------------------------------------------- the lossy frontier
BUDGETS = (0.0, 1e-3, 0.05, 0.5)


@pytest.mark.parametrize("draft, target", [(d, t) for d in DRAFTS for t in TARGETS])
def test_tv_frontier_against_exact_rationals(draft, target):
    """beta*(eps) = min(1, 1 - TV(p, q) + eps) (docs/theory.md §9.1), with TV in rationals."""
    q = DRAFTS[draft]
    p = _target(target, len(q))
    pe, qe = _exact(p), _exact(q)
    tv = sum(abs(a - b) for a, b in zip(pe, qe)) / 2
    curve = frontier_curve(p, q, BUDGETS, "tv")
    for eps, beta in zip(BUDGETS, curve.beta):
        assert abs(beta - float(min(Fraction(1), 1 - tv + Fraction(eps)))) <= TOL


def _decimal_row(row) -> list[Decimal]:
    d = [Decimal(float(x)) for x in row]           # exact conversion of the binary value
    total = sum(d)
    return [x / total for x in d]


def _clip(p, q, a) -> list[Decimal]:
    """pi(a) = clip(q, b p, a p) with b solving sum_{p > 0} clip(q_v, b p_v, a p_v) = 1: the sum is
    piecewise linear and nondecreasing in b, with breakpoints at the ratios q_v / p_v."""
    idx = [v for v in range(len(p)) if p[v] > 0]

    def total(b):
        return sum(min(max(q[v], b * p[v]), a * p[v]) for v in idx)

    b = Decimal(1)
    if total(Decimal(0)) >= 1:
        b = Decimal(0)
    else:
        knots = sorted({q[v] / p[v] for v in idx if q[v] / p[v] < 1} | {Decimal(0), Decimal(1)})
        for lo, hi in zip(knots, knots[1:]):
            if total(hi) >= 1:
                b = lo + (1 - total(lo)) * (hi - lo) / (total(hi) - total(lo))
                break
    return [min(max(q[v], b * p[v]), a * p[v]) if p[v] > 0 else Decimal(0) for v in range(len(p))]


def _kl(x, y) -> Decimal:
    return sum((a * (a / b).ln() for a, b in zip(x, y) if a > 0), Decimal(0))


def _decimal_frontier(p, q, eps: float, kind: str) -> Decimal:
    """beta*(eps) = sum min(q, pi(a*)), a* the largest a >= 1 with D(pi(a), p) <= eps (Algorithm 9.2
    of docs/theory.md §9.2), by 120 bisection steps in 60-digit arithmetic."""
    with localcontext() as ctx:
        ctx.prec = 60
        p, q, eps = _decimal_row(p), _decimal_row(q), Decimal(eps)

        def div(pi):
            return _kl(pi, p) if kind == "kl" else _kl(p, pi)

        if div(q) <= eps:
            return Decimal(1)
        lo, hi = Decimal(1), max(q[v] / p[v] for v in range(len(p)) if p[v] > 0)
        for _ in range(120):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if div(_clip(p, q, mid)) <= eps else (lo, mid)
        return sum(min(a, b) for a, b in zip(q, _clip(p, q, lo)))


@pytest.mark.parametrize("kind", ["kl", "kl_reverse"])
@pytest.mark.parametrize("draft, target", [(d, t) for d in DRAFTS for t in TARGETS])
def test_clip_frontier_against_high_precision(draft, target, kind):
    """The clip-family frontier of KL(pi||p) and KL(p||pi) at each budget (p > 0 everywhere here)."""
    q = DRAFTS[draft]
    p = _target(target, len(q))
    for eps in BUDGETS[1:]:                          # eps = 0 is the maximal coupling, covered by TV
        assert abs(frontier(p, q, eps, kind).beta - float(_decimal_frontier(p, q, eps, kind))) <= TOL, eps
