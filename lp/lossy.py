"""Lossy verification: exact certificates, the acceptance-vs-divergence frontier, acceptance radii.

Frontier (docs/theory.md §9).  A verifier with output law pi accepts at most sum_v min(q_v, pi_v)
(maximal coupling), and speculative sampling against pi attains it, so

    beta*(eps) = max_{pi in simplex} sum_v min(q_v, pi_v)   s.t.   D(pi, p) <= eps.

TV has the closed form min(1, 1 - TV(p, q) + eps); for KL(pi||p) and KL(p||pi) the optimum is the
ratio clip pi* = clip(q, b p, a p), b <= 1 <= a (Algorithm 9.2), found here by a bisection on a
whose every step is O(log V) after one O(V log V) sort.  :func:`frontier_cvxpy` solves the same
convex program with an exponential-cone solver as an independent check.

Certificates (docs/theory.md §10).  :func:`certify` gives a single-token rule's exact output law and its
divergences from p, each with its direction, and the frontier gap at the rule's own divergence;
:func:`certify_sequence` gives the exact law of the first n emitted tokens over several iterations
(by the exact engine) and the per-token upper bounds; :func:`acceptance_radius` gives, for the
deterministic relaxed rules, the smallest divergence at which a token can be rejected.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from specsim._validate import as_distribution, check_int
from specsim.drafts import chain
from specsim.exact import output_law
from specsim.models import Model
from specsim.verifiers.base import Verifier
from specsim.verifiers.lossy import (LOSSY_RULES, AcceptanceRule, ClipFamily, LossyVerifier,
                                     SingleTokenRule, kl, single_token_chain, tv)

__all__ = ["DIVERGENCES", "divergence", "FrontierPoint", "FrontierCurve", "frontier", "frontier_cvxpy",
           "frontier_curve_cvxpy", "frontier_curve", "LossyCertificate", "certify", "SequenceCertificate",
           "certify_sequence", "acceptance_radius", "RadiusCheck", "acceptance_radius_numeric",
           "margin_radius", "lossy_report", "E1_P", "E1_Q"]

#: Frontier divergences: D(pi, p) with pi the output law and p the target.
DIVERGENCES = {"tv": "TV(pi, p)", "kl": "KL(pi || p)", "kl_reverse": "KL(p || pi)"}

#: docs/theory.md §12's example E1 (the default pair of the report).
E1_P = np.array([0.05, 0.15, 0.25, 0.55])
E1_Q = np.array([0.55, 0.25, 0.15, 0.05])


def _pair(p, q):
    p = as_distribution(p, "p (target)")
    q = as_distribution(q, "q (draft)")
    if p.shape != q.shape:
        raise ValueError(f"p has {p.size} tokens but q has {q.size}")
    return p, q


def _kind(divergence: str) -> str:
    if divergence not in DIVERGENCES:
        raise ValueError(f"divergence must be one of {sorted(DIVERGENCES)}, got {divergence!r}")
    return divergence


def _budget(budget) -> float:
    try:
        e = float(budget)
    except (TypeError, ValueError):
        raise ValueError(f"budget must be a number, got {budget!r}") from None
    if np.isnan(e) or e < 0:
        raise ValueError(f"budget must be >= 0, got {budget!r}")
    return e


def divergence(pi, p, kind: str) -> float:
    """D(pi, p): ``"tv"`` = TV(pi, p), ``"kl"`` = KL(pi || p), ``"kl_reverse"`` = KL(p || pi) (nats, may be inf)."""
    _kind(kind)
    return tv(pi, p) if kind == "tv" else kl(pi, p) if kind == "kl" else kl(p, pi)


# --------------------------------------------------------------------------- frontier
@dataclass(frozen=True)
class FrontierPoint:
    """beta*(budget) with its optimal output law pi* (SpS against pi* attains beta*).

    KL directions: pi* = clip(q, b p, a p); the optimal verifier accepts with min(1, a p/q) and
    resamples norm((b p - q)_+).  TV: pi* = (1 - t) p + t q with t = ``mix`` (a and b are NaN).
    KL(p||pi) when q has mass where p = 0 and the budget exceeds D at a = max q/p: pi* also puts
    t q_v (t = ``mix``) on those tokens (KL(p||pi) does not charge for them).
    ``achieved`` = D(pi*, p) <= budget.
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


class _ClipDivergence:
    """D(pi(a), p) for the clip family in O(log V) per a, by prefix sums in ratio order."""

    def __init__(self, fam: ClipFamily, kind: str):
        self.fam, self.kind = fam, kind
        self.n0 = fam.n0  # tokens with q = 0 < p: the first n0 in ratio order
        # M_j = sum of the middle terms over the first j tokens in ratio order, built in place
        self.M = M = np.empty(fam.r.size + 1)
        M[0] = 0.0
        mid = M[1:]
        if kind == "tv":
            np.subtract(fam.ps, fam.qs, out=mid)
            np.maximum(mid, 0.0, out=mid)  # (p - q)_+
        elif kind == "kl":
            np.multiply(fam.qs, fam.logr, out=mid)  # q log r (q = 0 where r = 0)
        else:
            np.multiply(fam.ps, fam.logr, out=mid)
            np.negative(mid, out=mid)  # -p log r
        np.cumsum(mid, out=mid)

    def __call__(self, a: float, mass: float = 1.0) -> float:
        f = self.fam
        b = f.b(a, mass)
        lo, hi = f.segments(a, b)
        low, high = f.Pc[lo], f.Psuf[hi]
        mid = self.M[hi] - self.M[lo]
        if self.kind == "kl":
            return (b * np.log(b) * low if b > 0 else 0.0) + mid + a * np.log(a) * high
        if self.kind == "kl_reverse":
            if b <= 0 and (self.n0 > 0 or low > 0):
                return np.inf
            return (-np.log(b) * low if low > 0 else 0.0) + mid - np.log(a) * high
        return (1.0 - b) * low + mid


def _frontier_clip(p, q, eps, kind, fam=None, dfun=None) -> FrontierPoint:
    d_q = divergence(q, p, kind)
    if d_q <= eps:
        pos = p > 0
        ratios = q[pos] / p[pos]
        a = np.inf if np.any(q[~pos] > 0) else float(ratios.max())
        return FrontierPoint(kind, eps, 1.0, q.copy(), a, float(ratios.min()), d_q)
    fam = fam or ClipFamily(p, q)
    D = dfun or _ClipDivergence(fam, kind)
    lo, hi = 1.0, max(fam.a_max, 1.0)
    if eps == 0.0:
        hi = 1.0
    elif D(hi) <= eps:
        lo = hi
    else:
        lo, hi = _bisect(lambda a: D(a) <= eps, lo, hi)
    a, b, mix = lo, fam.b(lo), None
    pi = fam.pi(a, b)
    q0 = float(q[p <= 0].sum()) if kind == "kl_reverse" and a >= fam.a_max else 0.0
    if q0 > 0:
        # KL(p||pi) leaves pi free where p = 0: once the a-clip is exhausted, the optimum moves a
        # share t of q's off-support mass there, pi = clip(q, b p, a_max p) + t q 1[p = 0] (KKT, nu <= 1).
        t, _ = _bisect(lambda t: D(a, 1.0 - t * q0) <= eps, 0.0, 1.0)
        b = fam.b(a, 1.0 - t * q0)
        pi = fam.pi(a, b) + np.where(p <= 0, t * q, 0.0)
        mix = t
    return FrontierPoint(kind, eps, float(np.minimum(q, pi).sum()), pi, float(a), float(b),
                         divergence(pi, p, kind), mix)


def _bisect(feasible, lo: float, hi: float) -> tuple[float, float]:
    """Largest x in [lo, hi] with feasible(x) (monotone: feasible at lo), to ~1 ulp; returns (lo, hi).

    Steps are geometric (mid = sqrt(lo hi)) while hi > 4 lo > 0: a target entry p_v ~ 1e-300 under a
    draft mass puts a_max = max q/p near 1e300, and 200 arithmetic halvings would never leave a = 1.
    """
    if feasible(hi):
        return hi, hi
    for _ in range(400):
        mid = lo * np.sqrt(hi / lo) if 0.0 < 4.0 * lo < hi else 0.5 * (lo + hi)
        if feasible(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo <= 4e-16 * max(hi, 1e-300):
            break
    return lo, hi


def _frontier_tv(p, q, eps) -> FrontierPoint:
    T = tv(p, q)
    t = 1.0 if eps >= T else eps / T
    pi = (1.0 - t) * p + t * q
    return FrontierPoint("tv", eps, float(min(1.0, 1.0 - T + eps)), pi, np.nan, np.nan, tv(pi, p), t)


def frontier(p, q, budget: float, divergence: str = "tv") -> FrontierPoint:
    """beta*(eps) = max_pi sum min(q, pi) s.t. D(pi, p) <= eps (docs/theory.md §9; F1 = maximal coupling).

    ``"tv"``: beta* = min(1, 1 - TV(p, q) + eps) (closed form, any pi between p and q at TV eps).
    ``"kl"`` (KL(pi||p)) and ``"kl_reverse"`` (KL(p||pi)): Algorithm 9.2, pi* = clip(q, b(a) p, a p)
    with D(pi*, p) = eps solved by bisection on a; O(V log V).  ``budget = inf`` gives beta* = 1.

    Parameters: target ``p``, draft ``q``, ``budget`` eps >= 0, ``divergence``.
    >>> frontier([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05], 0.05, "kl").beta   # 0.535138
    """
    p, q = _pair(p, q)
    kind = _kind(divergence)
    eps = _budget(budget)
    if kind == "tv":
        return _frontier_tv(p, q, eps)
    return _frontier_shared(p, q, eps, kind, None)


divergence_ = divergence  # the module-level function, for use where a parameter shadows it


def _frontier_shared(p, q, eps, kind, fam) -> FrontierPoint:
    """KL frontier with a precomputed :class:`ClipFamily` (certificates need two directions)."""
    if eps == np.inf:
        return FrontierPoint(kind, eps, 1.0, q.copy(), np.inf, 0.0, divergence(q, p, kind))
    return _frontier_clip(p, q, eps, kind, fam)


def frontier_curve(p, q, budgets, divergence: str = "tv") -> FrontierCurve:
    """beta*(eps) for every eps in ``budgets`` (one sort shared by all budgets)."""
    p, q = _pair(p, q)
    kind = _kind(divergence)
    eps = np.array([_budget(e) for e in np.atleast_1d(budgets)], dtype=np.float64)
    if kind == "tv":
        pts = [_frontier_tv(p, q, e) for e in eps]
    else:
        fam = ClipFamily(p, q)
        D = _ClipDivergence(fam, kind)
        pts = [_frontier_shared(p, q, e, kind, fam) if e == np.inf else _frontier_clip(p, q, e, kind, fam, D)
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
    import cvxpy as cp

    prob, pi, eps = program
    eps.value = budget
    status = []
    for name in ([solver] if isinstance(solver, str) else list(solver)):
        try:
            prob.solve(solver=name)
        except cp.error.SolverError as err:
            status.append(f"{name}: {err}")
            continue
        if prob.status in ("optimal", "optimal_inaccurate"):
            break
        status.append(f"{name}: {prob.status}")
    else:
        raise ValueError("cvxpy could not solve the frontier program: " + "; ".join(status))
    x = np.clip(np.asarray(pi.value, dtype=np.float64), 0.0, None)
    x /= x.sum()
    pos = p > 0
    ratio = x[pos] / p[pos]
    return FrontierPoint(kind, budget, float(prob.value), x, float(ratio.max()), float(ratio.min()),
                         divergence_(x, p, kind), solver=name)


def frontier_cvxpy(p, q, budget: float, divergence: str = "tv", solver=("CLARABEL", "SCS")) -> FrontierPoint:
    """The frontier's convex program solved by cvxpy (independent check of :func:`frontier`).

    maximise sum(minimum(q, pi)) s.t. sum(pi) = 1, pi >= 0 and ``0.5*norm1(pi - p) <= eps`` (TV, an
    LP), ``sum(rel_entr(pi, p)) <= eps`` (KL(pi||p), pi = 0 where p = 0) or ``sum(rel_entr(p, pi))
    <= eps`` (KL(p||pi)); exponential cones.  ``solver``: a cvxpy solver name or a sequence tried in
    order until one succeeds (default Clarabel, then SCS); the one used is in ``FrontierPoint.solver``.
    ``a``/``b`` are reported as max/min of pi/p over p > 0.  For several budgets use
    :func:`frontier_curve_cvxpy`, which builds the program once and re-solves it.
    """
    p, q = _pair(p, q)
    kind = _kind(divergence)
    return _solve_frontier(_frontier_program(p, q, kind), p, kind, _budget(budget), solver)


def frontier_curve_cvxpy(p, q, budgets, divergence: str = "tv", solver=("CLARABEL", "SCS")) -> list[FrontierPoint]:
    """:func:`frontier_cvxpy` at every budget: one program with eps a ``cp.Parameter``, re-solved."""
    p, q = _pair(p, q)
    kind = _kind(divergence)
    program = _frontier_program(p, q, kind)
    return [_solve_frontier(program, p, kind, _budget(e), solver) for e in np.atleast_1d(budgets)]


# --------------------------------------------------------------------------- single-token certificate
def _rule_of(rule) -> SingleTokenRule:
    if isinstance(rule, LossyVerifier) and rule.rule is not None:
        return rule.rule
    if isinstance(rule, SingleTokenRule):
        return rule
    raise ValueError(f"rule must be a lossy verifier from specsim.verifiers.lossy or a SingleTokenRule, "
                     f"got {rule!r}")


@dataclass(frozen=True)
class LossyCertificate:
    """Exact one-token certificate of a lossy rule at (p, q) (docs/theory.md §10.1).

    ``out`` is the exact output law; ``kl_out_p`` = KL(out||p), ``kl_p_out`` = KL(p||out) (inf when
    supports differ, explained in ``infinite``), ``tv`` = TV(out, p), ``max_ratio`` = max out/p and
    ``dinf`` = D_inf(out||p) = log max_ratio, ``between`` = min(p, q) <= out <= max(p, q).
    ``frontier_*`` = beta* at the rule's own divergence in that direction; ``gap_*`` = beta* - beta
    (>= 0 up to rounding: no rule beats the frontier).
    """

    rule: str
    params: dict
    out: np.ndarray = field(repr=False)
    beta: float
    kl_out_p: float
    kl_p_out: float
    tv: float
    max_ratio: float
    dinf: float
    between: bool
    frontier_tv: float
    frontier_kl: float
    frontier_kl_reverse: float
    infinite: str = ""
    label: str = ""

    @property
    def gap_tv(self) -> float:
        return self.frontier_tv - self.beta

    @property
    def gap_kl(self) -> float:
        return self.frontier_kl - self.beta

    @property
    def gap_kl_reverse(self) -> float:
        return self.frontier_kl_reverse - self.beta

    def __str__(self) -> str:
        par = ", ".join(f"{k}={v}" for k, v in self.params.items())
        lines = [f"{self.rule}({par})" + (f"  [{self.label}]" if self.label else ""),
                 f"  out = {np.array2string(self.out, precision=6, max_line_width=200)}",
                 f"  beta = {self.beta:.6f}   between p and q: {self.between}",
                 f"  KL(out||p) = {self.kl_out_p:.6f}   frontier at that KL: {self.frontier_kl:.6f}"
                 f"  (gap {self.gap_kl:+.6f})",
                 f"  KL(p||out) = {self.kl_p_out:.6f}   frontier at that KL: {self.frontier_kl_reverse:.6f}"
                 f"  (gap {self.gap_kl_reverse:+.6f})",
                 f"  TV(out,p)  = {self.tv:.6f}   frontier at that TV: {self.frontier_tv:.6f}"
                 f"  (gap {self.gap_tv:+.6f})",
                 f"  max out/p  = {self.max_ratio:.6f}   D_inf(out||p) = {self.dinf:.6f}"]
        if self.infinite:
            lines.append(f"  note: {self.infinite}")
        return "\n".join(lines)


def _support_note(out, p) -> str:
    notes = []
    off = (out > 0) & (p <= 0)
    if off.any():
        notes.append(f"KL(out||p) = inf: out puts mass {out[off].sum():.3g} where p = 0 "
                     f"(e.g. token {int(np.flatnonzero(off)[0])})")
    miss = (p > 0) & (out <= 0)
    if miss.any():
        notes.append(f"KL(p||out) = inf: out = 0 on tokens with p mass {p[miss].sum():.3g} "
                     f"(e.g. token {int(np.flatnonzero(miss)[0])})")
    return "; ".join(notes)


def certify(rule, p, q, atol: float = 1e-12) -> LossyCertificate:
    """Exact distributional certificate of a single-token lossy rule (docs/theory.md §10.1).

    out = the rule's closed-form law; beta = sum_x q(x) a(x); KL(out||p), KL(p||out), TV(out, p),
    D_inf(out||p) = log max out/p, betweenness (tolerance ``atol``) and beta*(D) - beta for each
    divergence D, from :func:`frontier`.  Never read a rule parameter (Cactus delta, FSD T) as the
    output KL: this is the exact value.  Cost: one sort of q/p (a :class:`ClipFamily` shared by
    the rule's closed form and both KL frontiers) plus O(V) passes; ~25 ms at V = 151,936.

    >>> print(certify(cactus(0.05), E1_P, E1_Q))   # KL(out||p) = 0.082227 > delta
    """
    r = _rule_of(rule)
    p, q = _pair(p, q)
    fam = ClipFamily(p, q)  # one ratio sort for the rule (mentored, Cactus) and both KL frontiers
    with fam.shared():
        out = r.closed_out(p, q)
    beta = float(r.closed_beta(p, q))
    k1, k2, t = kl(out, p), kl(p, out), tv(out, p)
    if fam.r.size == p.size:  # p > 0 everywhere
        mr = float((out / p).max())
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(p > 0, out / np.where(p > 0, p, 1.0), np.where(out > 0, np.inf, 0.0))
        mr = float(ratio.max())
    edge = np.minimum(p, q)
    edge -= atol
    between = bool(np.all(out >= edge))
    if between:
        np.maximum(p, q, out=edge)
        edge += atol
        between = bool(np.all(out <= edge))
    return LossyCertificate(r.name, dict(r.params), out, beta, k1, k2, t, mr,
                            float(np.log(mr)) if mr > 0 else -np.inf, between,
                            _frontier_tv(p, q, t).beta, _frontier_shared(p, q, k1, "kl", fam).beta,
                            _frontier_shared(p, q, k2, "kl_reverse", fam).beta, _support_note(out, p), r.label)


# --------------------------------------------------------------------------- sequence certificate
@dataclass(frozen=True)
class SequenceCertificate:
    """Exact law of the first n emitted tokens (several iterations) of a chain of a lossy rule.

    ``kl_out_p`` = KL(Out_{1:n} || P_{1:n}), ``kl_p_out`` = KL(P_{1:n} || Out_{1:n}), ``tv`` =
    TV(Out_{1:n}, P_{1:n}), all exact.  ``*_bound`` are the per-token UPPER BOUNDS of docs/theory.md §10.1:
    sum_{t=1}^n max_{|c| = t-1} D(out_c, p_c) over the rows c a token at position t can be verified
    with (the token's law given its prefix is a mixture of out_c and p_c; convexity).
    ``one_iteration_tv`` is the engine's TV between the completed one-iteration law and P_{1:L+1}.
    """

    rule: str
    V: int
    L: int
    n: int
    kl_out_p: float
    kl_p_out: float
    tv: float
    kl_out_p_bound: float
    kl_p_out_bound: float
    tv_bound: float
    block_efficiency: float
    one_iteration_tv: float
    stream: np.ndarray = field(repr=False)
    target: np.ndarray = field(repr=False)


def _strings_law(verifier, target, draft, L, n) -> np.ndarray:
    """Law over V^n of the first n tokens of the stream: F(c, m) = sum_k O_c(z^{1:k}) F(c z^{1:k}, m-k)."""
    V = target.V
    laws: dict[tuple, object] = {}
    memo: dict[tuple, np.ndarray] = {}

    def law_at(ctx):
        if ctx not in laws:
            laws[ctx] = output_law(verifier, target, draft, L, chain(), context=ctx)
        return laws[ctx]

    def F(ctx, m):
        key = (ctx, m)
        if key in memo:
            return memo[key]
        O = law_at(ctx)
        res = np.zeros(V ** m)
        for k in range(1, L + 2):
            Ok = O.emitted[k]
            if k >= m:
                res += Ok.reshape(V ** m, V ** (k - m)).sum(axis=1)
                continue
            block = V ** (m - k)
            for s in np.flatnonzero(Ok > 0):
                toks, code = [], int(s)
                for _ in range(k):
                    code, t = divmod(code, V)
                    toks.append(t)
                res[s * block:(s + 1) * block] += Ok[s] * F(ctx + tuple(reversed(toks)), m - k)
        memo[key] = res
        return res

    return F((), n), laws[()]


def certify_sequence(rule, target: Model, draft: Model, L: int, n: int | None = None) -> SequenceCertificate:
    """Exact sequence-level certificate of a lossy chain verifier (docs/theory.md §10.1).

    Out_{1:n}(z) = sum over ways to cut z into iterations of prod O_c(segment), where O_c is the exact
    one-iteration law at context c from :func:`specsim.exact.output_law` (chain drafting); P_{1:n}
    is the target's law.  Reports KL both ways and TV exactly, plus the per-token sum upper bounds.
    Cost: sum_{j<n} V^j engine calls of V^L drafts each (V <= 4, n <= 4 is instant).

    Parameters: ``rule`` (lossy verifier / SingleTokenRule, or any chain Verifier for the exact part),
    ``target``/``draft`` models, draft length ``L``, number of tokens ``n`` (default L + 1).
    >>> certify_sequence(cactus(0.05), random_model(3, 0), random_model(3, 1), L=2).kl_out_p
    """
    from specsim.exact import check_lossless

    L = check_int(L, "L", 1)
    n = L + 1 if n is None else check_int(n, "n", 1)
    if not isinstance(target, Model) or not isinstance(draft, Model) or target.V != draft.V:
        raise ValueError("target and draft must be specsim Models with the same V")
    if isinstance(rule, SingleTokenRule):
        verifier = single_token_chain(rule)
    elif isinstance(rule, Verifier) and rule.kind == "chain":
        verifier = rule
    else:
        raise ValueError(f"rule must be a chain Verifier or a SingleTokenRule, got {rule!r}")
    V = target.V
    stream, root = _strings_law(verifier, target, draft, L, n)
    ptab = target.table(n - 1)
    P = ptab[0][0].copy()
    for m in range(1, n):
        P = (P[:, None] * ptab[m]).ravel()
    bounds = np.zeros(3)
    single = _rule_of(verifier) if isinstance(verifier, LossyVerifier) else None
    if single is not None:
        dtab = draft.table(n - 1)
        for m in range(n):
            worst = np.zeros(3)
            for pr, qr in zip(ptab[m], dtab[m]):
                o = single.closed_out(pr, qr)
                worst = np.maximum(worst, [kl(o, pr), kl(pr, o), tv(o, pr)])
            bounds += worst
    else:
        bounds[:] = np.nan
    cert = check_lossless(verifier, target, draft, L)
    return SequenceCertificate(verifier.name, V, L, n, kl(stream, P), kl(P, stream), tv(stream, P),
                               float(bounds[0]), float(bounds[1]), float(bounds[2]),
                               root.block_efficiency, cert.tv, stream, P)


# --------------------------------------------------------------------------- acceptance certificates
def _xlogy(x, y):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0) / y), 0.0)


def _binkl(a: float, b: float) -> float:
    return float(_xlogy(a, b) + _xlogy(1.0 - a, 1.0 - b))


def _pairwise(rule: AcceptanceRule, bx: float, by: float, kind: str) -> float:
    """Radius against the single competitor y (the largest other b) for greedy/additive/multiplicative."""
    r = max(1.0 - bx - by, 0.0)
    if rule.kind == "additive":
        eps = rule.eps
        if bx - by + eps <= 0:
            return 0.0
        if kind == "tv":
            return (bx - by + eps) / 2.0
        if kind == "kl":
            if by <= 0:
                return np.inf
            t = (eps * r + np.sqrt((eps * r) ** 2 + 4 * by * bx * (1 - eps) * (1 + eps))) / (2 * by * (1 - eps))
            return float(max(-np.log(t ** (-eps) * (bx / t + by * t + r)), 0.0))
        # KL(b||p): p_y = t, p_x = t - eps, others b_v / mu with mu = r / (1 + eps - 2t)
        if r <= 0:
            t, mu_term = (1 + eps) / 2, 0.0
        else:
            from scipy.optimize import brentq

            def g(t):  # stationarity b_x/p_x + b_y/p_y = 2 mu, decreasing in t
                return bx / (t - eps) + by / t - 2 * r / (1 + eps - 2 * t)
            span = (1 + eps) / 2 - eps
            lo_t, hi_t = eps + 1e-13 * span, (1 + eps) / 2 - 1e-13 * span
            t = lo_t if g(lo_t) <= 0 else brentq(g, lo_t, hi_t, xtol=1e-16, rtol=1e-15, maxiter=500)
            mu_term = float(_xlogy(r, 1 + eps - 2 * t))  # r log mu
        return float(max(_xlogy(bx, t - eps) + _xlogy(by, t) + mu_term, 0.0))
    lam = 1.0 if rule.kind == "greedy" else rule.lam
    if bx <= lam * by:
        return 0.0
    if kind == "tv":
        return (bx - lam * by) / (1 + lam)
    if kind == "kl":
        if by <= 0:
            return np.inf
        s = (bx / (lam * by)) ** (1 / (1 + lam))
        return float(max(-np.log(bx / s + by * s ** lam + r), 0.0))
    s = bx + by
    return float(max(_xlogy(bx, lam * s / (1 + lam)) + _xlogy(by, s / (1 + lam)), 0.0))


def _top_m_radius(b: np.ndarray, x: int, m: int, kind: str) -> float:
    others = np.delete(b, x)
    if others.size < m:
        return np.inf
    S = np.sort(others)[-m:]  # the m largest other b, ascending
    bx = b[x]
    if S[0] >= bx:
        return 0.0
    best = np.inf
    for k in range(1, m + 1):
        A = np.concatenate(([bx], S[:k]))
        nxt = S[k] if k < m else np.inf
        if kind == "tv":
            c = A.sum() / (k + 1)  # water level: b_x - c = sum (c - S_i) over the raised S_i
            if S[k - 1] <= c <= nxt:
                best = min(best, bx - c)
        elif kind == "kl":
            gm = float(np.exp(np.mean(np.log(A)))) if np.all(A > 0) else 0.0
            if nxt >= gm:
                best = min(best, -np.log(1.0 - A.sum() + A.size * gm))
        else:
            am = A.mean()
            if nxt >= am:
                best = min(best, float(_xlogy(A, am).sum()))
    return float(max(best, 0.0))


def acceptance_radius(rule: AcceptanceRule, b, x: int, divergence: str = "kl") -> float:
    """D*(b, x) = inf { Div(p, b) : ``rule`` rejects x under target p } (docs/theory.md §10.2).

    Certificate: Div(p_true, b) < D* implies x is accepted.  ``divergence``: ``"kl"`` = KL(p||b)
    (I-projection), ``"kl_reverse"`` = KL(b||p) (M-projection), ``"tv"``.  Closed forms of docs/theory.md
    §10.2 for strict greedy, additive, multiplicative and top-m (both KL directions and TV; top-m
    KL(b||p) ties the bottom of the competitor set at its arithmetic mean, our derivation).  Only
    the largest competitor y = argmax_{v != x} b_v matters for the pairwise rules (swapping labels
    y, y' never increases the divergence).  For the entropy rule the value is a LOWER BOUND:
    max(D over {p_x <= eps}, multiplicative radius with lam = delta), since e^{-H} <= max p.
    Context: A. Sharma, "When Is a Draft Accepted?", arXiv 2606.30265 (abstract only; these closed
    forms are ours and were matched to cvxpy).

    >>> acceptance_radius(strict_greedy(), [0.5, 0.3, 0.15, 0.05], 0, "kl")   # 0.025732
    """
    if not isinstance(rule, AcceptanceRule):
        raise ValueError(f"rule must be an AcceptanceRule, got {rule!r}")
    b = as_distribution(b, "b (reference distribution)")
    x = int(x)
    if not 0 <= x < b.size:
        raise ValueError(f"token x={x} outside 0..{b.size - 1}")
    kind = _kind(divergence)
    if rule.kind == "top_m":
        return _top_m_radius(b, x, rule.m, kind)
    others = np.delete(b, x)
    by = float(others.max())
    if rule.kind == "entropy":
        bx = float(b[x])
        term = 0.0
        if bx > rule.eps:
            term = (_binkl(rule.eps, bx) if kind == "kl" else _binkl(bx, rule.eps) if kind == "kl_reverse"
                    else bx - rule.eps)
        return float(max(term, _pairwise(AcceptanceRule("multiplicative", lam=rule.delta), bx, by, kind)))
    return _pairwise(rule, float(b[x]), by, kind)


def margin_radius(margin: float, divergence: str = "kl", m: int = 1) -> float:
    """Margin-only lower bound on the strict-greedy (m = 1) or top-m radius, Delta = b_(1) - b_(2).

    Worst case b_(1) + b_(2) = 1 (docs/theory.md §10.2): KL(p||b) >= -1/2 log(1 - Delta^2);
    KL(b||p) >= 1/2 [(1+Delta) log(1+Delta) + (1-Delta) log(1-Delta)]; TV >= Delta/2.
    Top-m: TV >= m Delta/(m+1) and, by Pinsker, both KLs >= 2 (m Delta/(m+1))^2.
    >>> margin_radius(0.2, "kl")   # 0.020411
    """
    d = float(margin)
    if not 0 <= d <= 1:
        raise ValueError(f"margin must lie in [0, 1], got {margin!r}")
    kind = _kind(divergence)
    m = check_int(m, "m", 1)
    if m > 1:
        t = m * d / (m + 1)
        return t if kind == "tv" else 2 * t * t
    if kind == "tv":
        return d / 2
    if kind == "kl":
        return float(-0.5 * np.log1p(-d * d)) if d < 1 else np.inf
    return 0.5 * float(_xlogy(1 + d, 1.0) + _xlogy(1 - d, 1.0))


@dataclass(frozen=True)
class RadiusCheck:
    """Numerical radius: ``value`` = min Div(p, b) over the rejection set, attained at ``p_reject``."""

    value: float
    p_reject: np.ndarray = field(repr=False)
    method: str = ""


def _cvx_piece(b, x, rows, kind, solver, lin=None):
    """min Div(p, b) s.t. p in simplex and rows: list of (y, x, lam, eps) meaning lam p_y - p_x >= eps."""
    import cvxpy as cp

    V = b.size
    p = cp.Variable(V, nonneg=True)
    cons = [cp.sum(p) == 1]
    for y, lam, eps in rows:
        cons.append(lam * p[y] - p[x] >= eps)
    pos = np.flatnonzero(b > 0)
    if kind == "kl":
        if pos.size < V:
            cons.append(p[np.flatnonzero(b <= 0)] == 0)
        obj = cp.sum(cp.rel_entr(p[pos], b[pos]))
    elif kind == "kl_reverse":
        obj = cp.sum(cp.rel_entr(b[pos], p[pos]))
    else:
        obj = 0.5 * cp.norm1(p - b)
    prob = cp.Problem(cp.Minimize(obj), cons)
    try:
        prob.solve(solver=solver)
    except cp.error.SolverError:
        return np.inf, None
    if prob.status not in ("optimal", "optimal_inaccurate"):
        return np.inf, None
    return float(prob.value), np.clip(np.asarray(p.value, dtype=np.float64), 0.0, None)


def acceptance_radius_numeric(rule: AcceptanceRule, b, x: int, divergence: str = "kl",
                              solver: str = "CLARABEL", restarts: int = 20, seed: int = 0) -> RadiusCheck:
    """Independent numerical D*(b, x) for tests (small V).

    Greedy/additive/multiplicative/top-m: the rejection set is a finite union of polyhedra
    ({lam p_y - p_x >= eps} per competitor y; per m-subset for top-m), so D* is the minimum of convex
    programs solved by cvxpy (``solver``).  Entropy (non-convex): SLSQP from ``restarts`` random
    starts over the rejection set, giving an achievable value (an upper bound on D*).
    """
    b = as_distribution(b, "b (reference distribution)")
    x = int(x)
    kind = _kind(divergence)
    others = [v for v in range(b.size) if v != x]
    if rule.kind == "entropy":
        return _entropy_numeric(rule, b, x, kind, restarts, seed)
    if rule.kind == "top_m":
        pieces = [[(y, 1.0, 0.0) for y in S] for S in itertools.combinations(others, rule.m)]
    else:
        lam = rule.lam if rule.kind == "multiplicative" else 1.0
        eps = rule.eps if rule.kind == "additive" else 0.0
        pieces = [[(y, lam, eps)] for y in others]
    best, arg = np.inf, None
    for rows in pieces:
        val, p = _cvx_piece(b, x, rows, kind, solver)
        if val < best:
            best, arg = val, p
    return RadiusCheck(max(best, 0.0), arg / arg.sum() if arg is not None else None, f"cvxpy {solver}")


def _entropy_numeric(rule, b, x, kind, restarts, seed) -> RadiusCheck:
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    V = b.size

    def to_p(z):
        e = np.exp(z - z.max())
        return e / e.sum()

    def obj(z):
        p = to_p(z)
        return divergence(p, b, kind) if kind == "tv" else (kl(p, b) if kind == "kl" else kl(b, p))

    def slack(z):  # rejected iff both >= 0
        p = to_p(z)
        pos = p > 0
        H = -np.sum(p[pos] * np.log(p[pos]))
        return np.array([rule.eps - p[x], rule.delta * np.exp(-H) - p[x]])

    best, arg = np.inf, None
    for i in range(restarts):
        z0 = np.log(np.clip(b, 1e-12, None)) + rng.normal(0, 1.0 + i * 0.2, V)
        z0[x] -= rng.uniform(0, 6)
        res = minimize(obj, z0, method="SLSQP", constraints=[{"type": "ineq", "fun": slack}],
                       options=dict(maxiter=500, ftol=1e-12))
        p = to_p(res.x)
        if not rule.accepts(p, x) and np.all(slack(res.x) >= -1e-12):
            v = obj(res.x)
            if v < best:
                best, arg = v, p
    return RadiusCheck(best, arg, "SLSQP multistart (upper bound on D*)")


# --------------------------------------------------------------------------- report
def lossy_report(rule_name: str = "typical", budget: float | None = None, p=None, q=None, **params) -> str:
    """Certificate table of one rule at (p, q) (default E1 of docs/theory.md §12) and a frontier sweep.

    The sweep lists beta*_TV, beta*_KL(pi||p), beta*_KL(p||pi) at eps in {0, .02, .05, .1, .2, .5, 1}
    plus ``budget`` if given.  ``params`` go to the rule's factory (e.g. ``delta=0.05`` for cactus).
    >>> print(lossy_report("cactus", delta=0.05))
    """
    if rule_name not in LOSSY_RULES:
        raise ValueError(f"unknown rule {rule_name!r}; choose from {sorted(LOSSY_RULES)}")
    p = E1_P if p is None else p
    q = E1_Q if q is None else q
    p, q = _pair(p, q)
    cert = certify(LOSSY_RULES[rule_name](**params), p, q)
    budgets = [0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
    if budget is not None:
        budgets = sorted(set(budgets) | {_budget(budget)})
    curves = {k: frontier_curve(p, q, budgets, k) for k in DIVERGENCES}
    lines = [f"p = {np.array2string(p, precision=6)}   q = {np.array2string(q, precision=6)}",
             f"TV(p,q) = {tv(p, q):.6f}   KL(q||p) = {kl(q, p):.6f}   KL(p||q) = {kl(p, q):.6f}", "",
             str(cert), "", "frontier beta*(eps)",
             f"  {'eps':>8}  {'TV':>9}  {'KL(pi||p)':>10}  {'KL(p||pi)':>10}"]
    for i, e in enumerate(budgets):
        mark = "  <- budget" if budget is not None and e == float(budget) else ""
        lines.append(f"  {e:8.4g}  {curves['tv'].beta[i]:9.6f}  {curves['kl'].beta[i]:10.6f}  "
                     f"{curves['kl_reverse'].beta[i]:10.6f}{mark}")
    return "\n".join(lines)
