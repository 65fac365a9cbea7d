"""Deterministic relaxed acceptance rules and their acceptance radii (docs/theory.md §10.2).

A deterministic rule accepts the drafted token x iff the target probability p_x clears a threshold
set by the rest of p (strict greedy, additive or multiplicative slack, top-m, Medusa's entropy
threshold).  Its acceptance radius at a reference distribution b is

    D*(b, x) = inf { Div(p, b) : the rule rejects x under target p },

so Div(p_true, b) < D* certifies that x is accepted whatever the true target is.
:func:`acceptance_radius` gives D* in closed form, :func:`margin_radius` margin-only lower bounds,
and :func:`acceptance_radius_numeric` an independent numerical value (cvxpy / SLSQP).  Divergence
kinds are those of :data:`specsim.divergences.DIVERGENCES`, read as Div(p, b): ``"kl"`` = KL(p||b)
(I-projection), ``"kl_reverse"`` = KL(b||p) (M-projection), ``"tv"`` = TV(p, b).
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.special import entr

from specsim._validate import as_distribution, check_int, check_real, check_seed
from specsim.divergences import validate_kind, divergence

from ._solvers import check_solvers, solve

__all__ = ["AcceptanceRule", "RULE_KINDS", "strict_greedy", "additive_greedy", "multiplicative_greedy", "top_m",
           "entropy_rule", "acceptance_radius", "margin_radius", "RadiusCheck", "acceptance_radius_numeric"]


@dataclass(frozen=True)
class AcceptanceRule:
    """A deterministic relaxed acceptance test: accept x iff p_x > threshold(p, x) (docs/theory.md §10.2).

    ``kind``: ``"greedy"`` (threshold max_{y != x} p_y), ``"additive"`` (max_{y != x} p_y - eps),
    ``"multiplicative"`` (lam max_{y != x} p_y), ``"top_m"`` (the m-th largest p_y, y != x: fewer
    than m tokens y != x with p_y >= p_x), ``"entropy"`` (min(eps, delta exp(-H(p))), exact entropy
    H).  Ties at the threshold are rejected (the closed rejection set, the convention the radii
    use).  Build rules with :func:`strict_greedy`, :func:`additive_greedy`,
    :func:`multiplicative_greedy`, :func:`top_m`, :func:`entropy_rule`; :func:`acceptance_radius`
    certifies them.

    >>> rule = additive_greedy(0.1)
    >>> rule.accepts([0.35, 0.4, 0.25], 0), rule.accepts([0.25, 0.4, 0.35], 0)
    (True, False)
    """

    kind: str
    eps: float = 0.0
    lam: float = 1.0
    m: int = 1
    delta: float = 0.0

    def __post_init__(self):
        """Check the fields a direct construction gives (the factories pass checked values)."""
        if self.kind not in RULE_KINDS:
            raise ValueError(f"kind must be one of {RULE_KINDS}, got {self.kind!r}")
        ranges = {"additive": (("eps", 0.0, 1.0, False, True),),
                  "multiplicative": (("lam", 0.0, 1.0, True, False),),
                  "entropy": (("eps", 0.0, 1.0, True, False), ("delta", 0.0, 1.0, True, False))}
        for name, lo, hi, lo_open, hi_open in ranges.get(self.kind, ()):
            check_real(getattr(self, name), name, lo, hi, lo_open, hi_open)
        if self.kind == "top_m":
            check_int(self.m, "m", 1)

    def threshold(self, p: np.ndarray, x: int) -> float:
        """The value p_x must *exceed* for x to be accepted under target row ``p`` (validated by the caller)."""
        others = np.delete(p, x)
        if self.kind == "greedy":
            return float(others.max())
        if self.kind == "additive":
            return float(others.max() - self.eps)
        if self.kind == "multiplicative":
            return float(self.lam * others.max())
        if self.kind == "top_m":
            return float(np.sort(others)[-self.m]) if self.m <= others.size else -np.inf
        return min(self.eps, self.delta * np.exp(-float(entr(p).sum())))  # entropy

    def accepts(self, p, x: int) -> bool:
        """Whether the rule keeps token ``x`` (an id in 0..V-1) under target row ``p``: p_x > threshold."""
        p = as_distribution(p, "p")
        x = _token(x, p.size)
        return bool(p[x] > self.threshold(p, x))


#: The kinds of :class:`AcceptanceRule`.
RULE_KINDS = ("greedy", "additive", "multiplicative", "top_m", "entropy")


def _token(x, V: int) -> int:
    x = check_int(x, "x (token id)", 0)
    if x >= V:
        raise ValueError(f"token x={x} outside 0..{V - 1}")
    return x


def strict_greedy() -> AcceptanceRule:
    """Strict greedy: accept x iff p_x > p_y for every y != x (the argmax; ties rejected).

    Returns: :class:`AcceptanceRule` of kind ``"greedy"``.

    >>> strict_greedy().accepts([0.5, 0.3, 0.2], 0), strict_greedy().accepts([0.4, 0.4, 0.2], 0)
    (True, False)
    """
    return AcceptanceRule("greedy")


def additive_greedy(eps: float) -> AcceptanceRule:
    """Additive slack: accept x iff p_x > max_{y != x} p_y - eps.

    Parameters: ``eps`` in [0, 1).

    Returns: :class:`AcceptanceRule` of kind ``"additive"``.

    >>> additive_greedy(0.05).accepts([0.38, 0.42, 0.2], 0)
    True
    """
    return AcceptanceRule("additive", eps=check_real(eps, "eps", 0.0, 1.0, hi_open=True))


def multiplicative_greedy(lam: float) -> AcceptanceRule:
    """Multiplicative slack: accept x iff p_x > lam max_{y != x} p_y.

    Parameters: ``lam`` in (0, 1].

    Returns: :class:`AcceptanceRule` of kind ``"multiplicative"``.

    >>> multiplicative_greedy(0.5).accepts([0.25, 0.45, 0.3], 0)
    True
    """
    return AcceptanceRule("multiplicative", lam=check_real(lam, "lam", 0.0, 1.0, lo_open=True))


def top_m(m: int) -> AcceptanceRule:
    """Top-m: accept x iff fewer than m tokens y != x have p_y >= p_x (x among the target's top m).

    Parameters: ``m`` >= 1 (m = 1 is strict greedy).

    Returns: :class:`AcceptanceRule` of kind ``"top_m"``.

    >>> top_m(2).accepts([0.3, 0.5, 0.2], 0), top_m(2).accepts([0.2, 0.5, 0.3], 0)
    (True, False)
    """
    return AcceptanceRule("top_m", m=check_int(m, "m", 1))


def entropy_rule(epsilon: float = 0.09, delta: float = 0.3) -> AcceptanceRule:
    """Medusa's typical test as a deterministic rule: accept x iff p_x > min(epsilon, delta e^{-H(p)}).

    H(p) = -sum_v p_v log p_v (nats).  Cai et al., "Medusa", arXiv 2401.10774.

    Parameters: ``epsilon`` in (0, 1], ``delta`` in (0, 1].

    Returns: :class:`AcceptanceRule` of kind ``"entropy"``.

    >>> entropy_rule().accepts([0.1, 0.45, 0.45], 0), entropy_rule().accepts([0.05, 0.5, 0.45], 0)
    (True, False)
    """
    return AcceptanceRule("entropy", eps=check_real(epsilon, "epsilon", 0.0, 1.0, lo_open=True),
                          delta=check_real(delta, "delta", 0.0, 1.0, lo_open=True))


def _xlogy(x, y):
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0) / y), 0.0)


def _kl_near(b, d) -> float:
    """KL(b || b + d) for a move d that sums to 0, as sum_i b_i g(d_i / b_i), g(u) = u - log1p(u) >= 0:
    the first-order terms, which cancel exactly, are never formed, so a radius near 0 is not left
    at the ~1e-16 rounding of sum b_i log(b_i / p_i) (KL(b||p) = sum b g(d/b) - sum d)."""
    total = 0.0
    for bi, di in zip(b, d):
        if bi > 0:
            u = di / bi
            total += bi * (u - np.log1p(u)) if u > -1 else np.inf
    return float(total)


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
            # p = (b_x / (t Z), b_y t / Z, b_v / Z), t the positive root of
            # b_y (1 - eps) t^2 - eps r t - b_x (1 + eps) = 0, and D = eps log t - log Z.  Taken in
            # tau = t - 1 and Z - 1 = tau (b_y t - b_x) / t with log1p: near a tie with a small eps,
            # D ~ eps^2 and -log(Z t^-eps) would round it to 0 (a radius of 0 says b rejects x)
            a2 = by * (1 - eps)
            b1 = 2 * a2 - eps * r
            c0 = (by - bx) - eps * (bx + by + r)
            disc = b1 * b1 - 4 * a2 * c0
            if b1 > 0 and disc >= 0:
                tau = -2 * c0 / (b1 + np.sqrt(disc))       # the root near 0, without cancellation
                t = 1 + tau
                return float(max(eps * np.log1p(tau) - np.log1p(tau * ((by - bx) + by * tau) / t), 0.0))
            t = (eps * r + np.sqrt((eps * r) ** 2 + 4 * by * bx * (1 - eps) * (1 + eps))) / (2 * by * (1 - eps))
            return float(max(-np.log(t ** (-eps) * (bx / t + by * t + r)), 0.0))
        # KL(b||p): p_y = t, p_x = t - eps, others b_v / mu with mu = r / (1 + eps - 2t)
        if r <= 0:
            t = (1 + eps) / 2
        else:
            from scipy.optimize import brentq

            def g(t):  # stationarity b_x/p_x + b_y/p_y = 2 mu, decreasing in t
                return bx / (t - eps) + by / t - 2 * r / (1 + eps - 2 * t)
            span = (1 + eps) / 2 - eps
            lo_t, hi_t = eps + 1e-13 * span, (1 + eps) / 2 - 1e-13 * span
            t = lo_t if g(lo_t) <= 0 else brentq(g, lo_t, hi_t, xtol=1e-16, rtol=1e-15, maxiter=500)
        dx, dy = (t - eps) - bx, t - by   # the others move by -(dx + dy) in total, in proportion to b
        return _kl_near((bx, by, r), (dx, dy, -(dx + dy)))
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
    dx = lam * s / (1 + lam) - bx
    return _kl_near((bx, by), (dx, -dx))


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


def _rule(rule) -> AcceptanceRule:
    if not isinstance(rule, AcceptanceRule):
        raise TypeError(f"rule must be an AcceptanceRule (strict_greedy(), top_m(2), ...), got {rule!r}")
    return rule


def acceptance_radius(rule: AcceptanceRule, b, x: int, divergence: str = "kl") -> float:
    """D*(b, x) = inf { Div(p, b) : ``rule`` rejects x under target p } (docs/theory.md §10.2).

    Certificate: Div(p_true, b) < D* implies x is accepted.  Closed forms of docs/theory.md §10.2
    for strict greedy, additive, multiplicative and top-m in both KL directions and TV (top-m
    KL(b||p) ties the bottom of the competitor set at its arithmetic mean, derived here).  Only
    the largest competitor y = argmax_{v != x} b_v matters for the pairwise rules (swapping labels
    y, y' never increases the divergence).  For the entropy rule the value is a LOWER BOUND:
    max(D over {p_x <= eps}, multiplicative radius with lam = delta), since e^{-H} <= max p.
    Context: A. Sharma, "When Is a Draft Accepted?", arXiv 2606.30265 (abstract only; these closed
    forms are ours and were matched to cvxpy).

    Parameters: ``rule`` (:class:`AcceptanceRule`), ``b`` reference distribution (the input contract of docs/design.md),
    ``x`` token id (an integer in 0..V-1),
    ``divergence`` Div(p, b): ``"kl"`` = KL(p||b), ``"kl_reverse"`` = KL(b||p), ``"tv"``.

    Returns: D* as a ``float`` (0 when b itself rejects x, inf when no target can reject it).

    >>> round(acceptance_radius(strict_greedy(), [0.5, 0.3, 0.15, 0.05], 0, "kl"), 6)
    0.025732
    >>> acceptance_radius(strict_greedy(), [0.5, 0.3, 0.15, 0.05], 0, "tv")
    0.1
    """
    rule = _rule(rule)
    b = as_distribution(b, "b (reference distribution)")
    x = _token(x, b.size)
    kind = validate_kind(divergence)
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

    Parameters: ``margin`` Delta in [0, 1] (gap between the two largest entries of b),
    ``divergence`` (``"kl"``, ``"kl_reverse"``, ``"tv"``), ``m`` >= 1.

    Returns: the lower bound as a ``float``.

    >>> round(margin_radius(0.2, "kl"), 6), round(margin_radius(0.2, "kl_reverse"), 6), margin_radius(0.2, "tv")
    (0.020411, 0.020136, 0.1)
    """
    d = check_real(margin, "margin", 0.0, 1.0)
    kind = validate_kind(divergence)
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
    """Numerical radius: ``value`` = min Div(p, b) over the rejection set, attained at ``p_reject``
    (None when no rejecting target was found); ``method`` names the solver."""

    value: float
    p_reject: np.ndarray | None = field(repr=False)
    method: str = ""


def _rejection_piece(b, x, rows, kind, solver) -> tuple[float, np.ndarray | None, str]:
    """min Div(p, b) over p in the simplex with lam p_y - p_x >= eps for every (y, lam, eps) in ``rows``
    (inf when that polyhedron is empty); also the minimiser and the solver used."""
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
    used = solve(prob, solver, accept=("optimal", "optimal_inaccurate", "infeasible"))
    if prob.status == "infeasible":
        return np.inf, None, used
    return float(prob.value), np.clip(np.asarray(p.value, dtype=np.float64), 0.0, None), used


def acceptance_radius_numeric(rule: AcceptanceRule, b, x: int, divergence: str = "kl",
                              solver: str | Sequence[str] = "CLARABEL", restarts: int = 20,
                              seed: int = 0) -> RadiusCheck:
    """An independent numerical D*(b, x) = min Div(p, b) over the targets p that reject x (small V).

    Greedy/additive/multiplicative/top-m: the rejection set is a finite union of polyhedra
    ({lam p_y - p_x >= eps} per competitor y; per m-subset for top-m), so D* is the minimum of convex
    programs solved by cvxpy through :func:`lp._solvers.solve`.  Entropy (non-convex): SLSQP from
    ``restarts`` random starts over the rejection set, giving an achievable value (an upper bound
    on D*).

    Parameters: ``rule``, ``b``, ``x``, ``divergence`` as in :func:`acceptance_radius`; ``solver``
    (cvxpy solver name or sequence), ``restarts`` and ``seed`` (entropy rule's multistart).

    Returns: :class:`RadiusCheck` (value, a rejecting target attaining it, method).

    >>> check = acceptance_radius_numeric(strict_greedy(), [0.5, 0.3, 0.15, 0.05], 0, "tv")
    >>> round(check.value, 5), check.p_reject.round(3).tolist(), check.method
    (0.1, [0.4, 0.4, 0.15, 0.05], 'cvxpy CLARABEL')
    """
    rule = _rule(rule)
    b = as_distribution(b, "b (reference distribution)")
    x = _token(x, b.size)
    kind = validate_kind(divergence)
    solver = check_solvers(solver)
    restarts, seed = check_int(restarts, "restarts", 1), check_seed(seed)
    others = [v for v in range(b.size) if v != x]
    if rule.kind == "entropy":
        return _entropy_numeric(rule, b, x, kind, restarts, seed)
    if rule.kind == "top_m":
        pieces = [[(y, 1.0, 0.0) for y in S] for S in itertools.combinations(others, rule.m)]
    else:
        lam = rule.lam if rule.kind == "multiplicative" else 1.0
        eps = rule.eps if rule.kind == "additive" else 0.0
        pieces = [[(y, lam, eps)] for y in others]
    best, arg, used = np.inf, None, solver[0]
    for rows in pieces:
        val, p, used = _rejection_piece(b, x, rows, kind, solver)
        if val < best:
            best, arg = val, p
    return RadiusCheck(max(best, 0.0), arg / arg.sum() if arg is not None else None, f"cvxpy {used}")


def _entropy_numeric(rule, b, x, kind, restarts, seed) -> RadiusCheck:
    from scipy.optimize import minimize

    rng = np.random.default_rng(seed)
    V = b.size

    def to_p(z):
        e = np.exp(z - z.max())
        return e / e.sum()

    def obj(z):
        return divergence(to_p(z), b, kind)

    def slack(z):  # rejected iff both >= 0
        p = to_p(z)
        return np.array([rule.eps - p[x], rule.delta * np.exp(-float(entr(p).sum())) - p[x]])

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
