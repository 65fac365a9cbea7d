"""The acceptance-vs-divergence frontier of lossy verification (docs/theory.md §9).

A verifier with output law pi accepts at most sum_v min(q_v, pi_v) (maximal coupling), and
speculative sampling against pi attains it, so the best acceptance at divergence budget eps is

    beta*(eps) = max_{pi in simplex} sum_v min(q_v, pi_v)   s.t.   D(pi, p) <= eps.

TV has the closed form min(1, 1 - TV(p, q) + eps); for KL(pi||p) and KL(p||pi) the optimum is the
ratio clip pi* = clip(q, b p, a p), b <= 1 <= a (Algorithm 9.2), found here by a bisection on a
whose every step is O(log V) after one O(V log V) sort (:class:`ClipFamily`).
:func:`frontier_cvxpy` solves the same convex program with an exponential-cone solver as an
independent check.  Divergence kinds are those of :data:`specsim.divergences.DIVERGENCES`, read as
D(pi, p): ``"tv"`` = TV(pi, p), ``"kl"`` = KL(pi || p), ``"kl_reverse"`` = KL(p || pi).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from specsim._validate import as_pair, check_real
from specsim.divergences import validate_kind, divergence, tv
from specsim.verifiers._clip_family import ClipFamily, bisect, clip_family

from ._solvers import CONIC_SOLVERS, check_solvers, solve

__all__ = ["FrontierPoint", "FrontierCurve", "frontier", "frontier_curve", "frontier_cvxpy",
           "frontier_curve_cvxpy", "E1_P", "E1_Q"]

#: docs/theory.md §12's example E1, target p (with :data:`E1_Q` the default pair of ``specsim lossy``).
E1_P = np.array([0.05, 0.15, 0.25, 0.55])
#: docs/theory.md §12's example E1, draft q.
E1_Q = np.array([0.55, 0.25, 0.15, 0.05])


def _budget(budget, name: str = "budget") -> float:
    """A divergence budget: a real number eps >= 0 (inf allowed: no constraint)."""
    return check_real(budget, name, 0.0, np.inf)


def _budgets(budgets, name: str = "budgets") -> np.ndarray:
    """One budget or a non-empty 1-D sequence of budgets, as a float64 array."""
    if isinstance(budgets, (str, bytes)):
        raise TypeError(f"{name} must be a number or a sequence of numbers, got {budgets!r}")
    items = [budgets] if np.ndim(budgets) == 0 else list(budgets)
    if not items:
        raise ValueError(f"{name}: give at least one budget")
    return np.array([_budget(e, f"{name}[{i}]") for i, e in enumerate(items)], dtype=np.float64)


@dataclass(frozen=True)
class FrontierPoint:
    """beta*(budget) with its optimal output law pi* (speculative sampling against pi* attains beta*).

    KL directions: pi* = clip(q, b p, a p); the optimal verifier accepts with min(1, a p/q) and
    resamples norm((b p - q)_+).  TV: pi* = (1 - t) p + t q with t = ``mix`` (a and b are NaN).
    KL(p||pi) when q has mass where p = 0 and the budget exceeds D at a = max q/p: pi* also puts
    t q_v (t = ``mix``) on those tokens (KL(p||pi) does not charge for them).
    ``achieved`` = D(pi*, p) <= budget; ``solver`` is ``"closed form"`` or the cvxpy solver used.
    """

    divergence: str
    budget: float
    beta: float
    pi: np.ndarray = field(repr=False)
    a: float
    b: float
    achieved: float
    mix: float | None = None
    solver: str = "closed form"


@dataclass(frozen=True)
class FrontierCurve:
    """beta*(eps) over a grid of budgets (for plots); ``a``, ``b`` per budget (NaN for TV)."""

    divergence: str
    budgets: np.ndarray
    beta: np.ndarray
    a: np.ndarray
    b: np.ndarray


def _frontier_tv(p, q, eps) -> FrontierPoint:
    T = tv(p, q)
    t = 1.0 if eps >= T else eps / T
    pi = (1.0 - t) * p + t * q
    return FrontierPoint("tv", eps, float(min(1.0, 1.0 - T + eps)), pi, np.nan, np.nan, tv(pi, p), t)


def _frontier_beta(p, q, eps: float, kind: str, fam: ClipFamily, tv_pq: float | None = None) -> float:
    """beta*(eps) alone, as :func:`_frontier_point` would give it, in O(log V) after ``fam``'s sort.

    For certificates, which need only the number: D(q, p) is summed from ``fam``'s log-ratios
    (no log pass of its own; the prefix sums of :meth:`ClipFamily.mid` are built only when the
    clip level has to be found), and beta* = sum_v min(q_v, pi_v)
    = Q(r <= a) + a p(r > a) from ``fam``'s prefix sums (pi = clip(q, b p, a p) with b <= a, so
    min(q, pi) = min(q, a p); tokens with p = 0 get pi = 0).  Where that shortcut could differ
    from the direct sums (D(q, p) within 1e-9 of eps, ratios that underflow, the KL(p||pi) mixing
    case) it returns :func:`_frontier_point`'s value.  ``tv_pq``: TV(p, q) when the caller has it
    (in a KL direction it only orders the work: by Pinsker, D(q, p) >= 2 TV(p, q)^2 in either
    direction, so a budget below that needs the clip level, and ``fam`` is built for it before
    D(q, p) is asked for; the built family sums D(q, p) on the way, with the same bits).
    """
    if kind == "tv":
        return float(min(1.0, 1.0 - (tv(p, q) if tv_pq is None else tv_pq) + eps))
    if eps == np.inf:
        return 1.0
    if fam.n0 > 0 or fam.q0 > 0:                   # D(q, p) = inf one way; pi may mix (KL(p||pi))
        return _frontier_clip(p, q, eps, kind, fam).beta
    if tv_pq is not None and eps < 2.0 * tv_pq * tv_pq * (1.0 - 1e-9):
        fam.build()
    # D(q, p) = sum q log r (KL(q||p)) or -sum p log r (KL(p||q)) over the family (p, q > 0)
    d_q = max(fam.q_divergence(kind), 0.0)
    if abs(d_q - eps) <= 1e-9 * max(1.0, eps):
        # the budget is D(q, p) up to rounding (a rule that emits q): decide with the direct sum
        # exactly as _frontier_clip does, and only run it when q does not fit the budget
        if divergence(q, p, kind) <= eps:
            return 1.0
        return _frontier_clip(p, q, eps, kind, fam).beta
    if d_q <= eps:
        return 1.0
    a = fam.clip_level(kind, eps)
    return fam.accepted(a)


def _frontier_clip(p, q, eps, kind, fam=None) -> FrontierPoint:
    """Algorithm 9.2 for a finite budget in a KL direction (``fam``: a :class:`ClipFamily` to reuse)."""
    d_q = divergence(q, p, kind)
    if d_q <= eps:
        pos = p > 0
        ratios = q[pos] / p[pos]
        a = np.inf if np.any(q[~pos] > 0) else float(ratios.max())
        return FrontierPoint(kind, eps, 1.0, q.copy(), a, float(ratios.min()), d_q)
    fam = fam or clip_family(p, q)
    a = fam.clip_level(kind, eps)
    b, mix = fam.b(a), None
    pi = fam.pi(a, b)
    q0 = float(q[p <= 0].sum()) if kind == "kl_reverse" and a >= fam.a_max else 0.0
    if q0 > 0:
        # KL(p||pi) leaves pi free where p = 0: once the a-clip is exhausted, the optimum moves a
        # share t of q's off-support mass there, pi = clip(q, b p, a_max p) + t q 1[p = 0] (KKT, nu <= 1).
        t, _ = bisect(lambda t: fam.divergence(kind, a, 1.0 - t * q0) <= eps, 0.0, 1.0)
        b = fam.b(a, 1.0 - t * q0)
        pi = fam.pi(a, b) + np.where(p <= 0, t * q, 0.0)
        mix = t
    if kind == "kl_reverse":
        lost = (pi <= 0) & (p > 0)
        if lost.any() and 1.0 + float(p[lost].sum()) == 1.0:
            # target mass below the float resolution of 1 where q = 0: the exact optimum puts
            # pi ~ b p there with b > 0, a mass the float sums drop (b came out 0), and pi = 0 would
            # make KL(p || pi) infinite; pi = p there changes no float sum and leaves those terms 0
            pi = np.where(lost, p, pi)
    return FrontierPoint(kind, eps, float(np.minimum(q, pi).sum()), pi, float(a), float(b),
                         divergence(pi, p, kind), mix)


def _frontier_point(p, q, eps: float, kind: str, fam: ClipFamily | None = None) -> FrontierPoint:
    """beta*(eps) for validated (p, q), budget and kind; ``fam`` = a :class:`ClipFamily` of (p, q)
    to reuse (certificates evaluate both KL directions on one sort)."""
    if kind == "tv":
        return _frontier_tv(p, q, eps)
    if eps == np.inf:
        return FrontierPoint(kind, eps, 1.0, q.copy(), np.inf, 0.0, divergence(q, p, kind))
    return _frontier_clip(p, q, eps, kind, fam)


def frontier(p, q, budget: float, divergence: str = "tv") -> FrontierPoint:
    """beta*(eps) = max_pi sum_v min(q_v, pi_v) s.t. D(pi, p) <= eps (docs/theory.md §9).

    ``"tv"``: beta* = min(1, 1 - TV(p, q) + eps) (closed form, pi* = (1 - t) p + t q at TV eps).
    ``"kl"`` (KL(pi||p)) and ``"kl_reverse"`` (KL(p||pi)): Algorithm 9.2, pi* = clip(q, b(a) p, a p)
    with D(pi*, p) = eps solved by bisection on a; O(V log V).  eps = 0 gives the maximal
    coupling sum min(p, q); ``budget = inf`` gives beta* = 1.

    Parameters: ``p`` target and ``q`` draft (probability vectors over the same V >= 2 tokens,
    the input contract of docs/design.md), ``budget`` a real number eps >= 0 (inf allowed), ``divergence`` one of ``"tv"``, ``"kl"``, ``"kl_reverse"``.

    Returns: :class:`FrontierPoint` (``beta``, the optimal law ``pi``, clip levels ``a``, ``b``).

    >>> pt = frontier([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05], 0.05, "kl")
    >>> round(pt.beta, 6), round(pt.a, 6), round(pt.b, 6)
    (0.535138, 1.702753, 0.831078)
    """
    p, q = as_pair(p, q)
    return _frontier_point(p, q, _budget(budget), validate_kind(divergence))


def frontier_curve(p, q, budgets, divergence: str = "tv") -> FrontierCurve:
    """beta*(eps) of :func:`frontier` for every eps in ``budgets``, sharing one sort of q/p.

    Parameters: ``p`` target, ``q`` draft (the input contract of docs/design.md), ``budgets`` (a number or a non-empty
    sequence of numbers >= 0),
    ``divergence`` (``"tv"``, ``"kl"``, ``"kl_reverse"``).

    Returns: :class:`FrontierCurve` (``beta``, ``a``, ``b`` per budget).

    >>> curve = frontier_curve([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05], [0, 0.1, 1], "tv")
    >>> curve.beta.round(6).tolist()
    [0.4, 0.5, 1.0]
    """
    p, q = as_pair(p, q)
    kind = validate_kind(divergence)
    eps = _budgets(budgets)
    if kind == "tv":
        pts = [_frontier_tv(p, q, e) for e in eps]
    else:
        fam = clip_family(p, q)
        pts = [_frontier_point(p, q, e, kind, fam) if e == np.inf else _frontier_clip(p, q, e, kind, fam)
               for e in eps]
    return FrontierCurve(kind, eps, np.array([t.beta for t in pts]), np.array([t.a for t in pts]),
                         np.array([t.b for t in pts]))


def _frontier_program(p: np.ndarray, q: np.ndarray, kind: str):
    """The frontier's convex program, built once with the budget as a ``cp.Parameter``."""
    import cvxpy as cp

    pos = p > 0
    pi = cp.Variable(p.size, nonneg=True)
    eps = cp.Parameter(nonneg=True)
    cons = [cp.sum(pi) == 1]
    if kind == "tv":
        cons.append(0.5 * cp.norm1(pi - p) <= eps)
    else:
        ip = np.flatnonzero(pos)
        if kind == "kl":
            if (~pos).any():
                cons.append(pi[np.flatnonzero(~pos)] == 0)
            cons.append(cp.sum(cp.rel_entr(pi[ip], p[ip])) <= eps)
        else:
            cons.append(cp.sum(cp.rel_entr(p[ip], pi[ip])) <= eps)
    return cp.Problem(cp.Maximize(cp.sum(cp.minimum(q, pi))), cons), pi, eps


def _solve_frontier(program, p, kind, budget, solver) -> FrontierPoint:
    prob, pi, eps = program
    eps.value = budget
    used = solve(prob, solver, accept=("optimal", "optimal_inaccurate"))
    x = np.clip(np.asarray(pi.value, dtype=np.float64), 0.0, None)
    x /= x.sum()
    pos = p > 0
    ratio = x[pos] / p[pos]
    return FrontierPoint(kind, budget, float(prob.value), x, float(ratio.max()), float(ratio.min()),
                         divergence(x, p, kind), solver=used)


def frontier_cvxpy(p, q, budget: float, divergence: str = "tv",
                   solver: str | Sequence[str] = CONIC_SOLVERS) -> FrontierPoint:
    """The frontier's convex program solved by cvxpy (an independent check of :func:`frontier`).

    maximise sum(minimum(q, pi)) s.t. sum(pi) = 1, pi >= 0 and ``0.5*norm1(pi - p) <= eps`` (TV, an
    LP), ``sum(rel_entr(pi, p)) <= eps`` (KL(pi||p), pi = 0 where p = 0) or ``sum(rel_entr(p, pi))
    <= eps`` (KL(p||pi)); exponential cones.  ``a``/``b`` are reported as max/min of pi/p over p > 0.
    For several budgets use :func:`frontier_curve_cvxpy`, which builds the program once.

    Parameters: ``p`` target, ``q`` draft (the input contract of docs/design.md), ``budget`` eps >= 0, ``divergence``, ``solver`` (a cvxpy
    solver name or a sequence tried in order by :func:`lp._solvers.solve`; default Clarabel, then SCS).

    Returns: :class:`FrontierPoint` with ``solver`` = the solver that succeeded.

    >>> pt = frontier_cvxpy([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05], 0.05, "kl")
    >>> round(pt.beta, 5), pt.solver
    (0.53514, 'CLARABEL')
    """
    p, q = as_pair(p, q)
    kind = validate_kind(divergence)
    budget = _budget(budget)
    solvers = check_solvers(solver)
    return _solve_frontier(_frontier_program(p, q, kind), p, kind, budget, solvers)


def frontier_curve_cvxpy(p, q, budgets, divergence: str = "tv",
                         solver: str | Sequence[str] = CONIC_SOLVERS) -> list[FrontierPoint]:
    """:func:`frontier_cvxpy` at every budget: one program with eps a ``cp.Parameter``, re-solved.

    Parameters: as :func:`frontier_cvxpy`, with ``budgets`` a number or a sequence of numbers >= 0.

    Returns: ``list`` of :class:`FrontierPoint`, one per budget.

    >>> pts = frontier_curve_cvxpy([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05], [0.02, 0.2], "tv")
    >>> [round(pt.beta, 5) for pt in pts]
    [0.42, 0.6]
    """
    p, q = as_pair(p, q)
    kind = validate_kind(divergence)
    eps = _budgets(budgets)
    solvers = check_solvers(solver)
    program = _frontier_program(p, q, kind)
    return [_solve_frontier(program, p, kind, float(e), solvers) for e in eps]
