"""Lossy single-token verification rules, lifted to chains (docs/theory.md §8).

A single-token rule is an acceptance probability a(x) for the drafted token x plus a residual
kernel R_x (the law of the emitted token after rejecting x).  Its one-token output law and
acceptance are

    out(y) = q(y) a(y) + sum_x q(x) (1 - a(x)) R_x(y),      beta = sum_x q(x) a(x).

:func:`single_token_chain` lifts any such rule to a chain :class:`Verifier` exactly as token-level
speculative sampling is lifted: position i is accepted with a_i(x_i) computed from rows
``p[i], q[i]``; on the first rejection the verifier emits from R at that row and stops; if every
position is accepted it emits the bonus token from ``p[L]``.  The exact engine
(:mod:`specsim.exact`) therefore handles chains of every rule here.  Each rule also carries its
closed-form ``out(p, q)`` and ``beta(p, q)`` (O(V), Cactus O(V log V)); the tests compare them with
the lift at L = 1.

The module also defines the deterministic relaxed acceptance rules of docs/theory.md §10.2
(:class:`AcceptanceRule`: strict greedy, additive, multiplicative, top-m, entropy threshold), whose
acceptance certificates live in :mod:`lp.lossy`, and :class:`ClipFamily`, the sorted-breakpoint
solver for b(a) in sum_v clip(q_v, b p_v, a p_v) = 1 shared by :func:`mentored` and the frontier.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy.special import rel_entr

from .._validate import as_distribution, as_pair, check_int, normalize
from .base import Verifier
from .chain import _draw, _outcomes

__all__ = ["SingleTokenRule", "LossyVerifier", "single_token_chain", "typical", "lenience",
           "topk_accept", "fuzzy", "cactus", "mentored", "ensemble", "margin_standin",
           "consultant_standin", "cascade", "LOSSY_RULES", "ClipFamily", "kl", "tv", "AcceptanceRule",
           "strict_greedy", "additive_greedy", "multiplicative_greedy", "top_m", "entropy_rule"]


# --------------------------------------------------------------------------- divergences
def kl(a: np.ndarray, b: np.ndarray) -> float:
    """KL(a || b) = sum_v a_v log(a_v / b_v) in nats; +inf if a_v > 0 = b_v somewhere (0 log 0 = 0).

    Two nonnegative vectors of one shape take a vectorised path (one log over the support of a;
    ``scipy.special.rel_entr`` costs ~15x more at V ~ 1e5); anything else (negative or NaN
    entries, broadcasting) goes through ``rel_entr``, whose conventions both paths share.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim == 1 and a.shape == b.shape and a.size:
        amin, bmin = a.min(), b.min()
        if amin >= 0.0 and bmin >= 0.0:
            if amin == 0.0:
                pos = a > 0.0
                a, b = a[pos], b[pos]
                if a.size == 0:
                    return 0.0
                bmin = b.min()
            if bmin <= 0.0:
                return np.inf
            with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
                lr = np.divide(a, b)
                np.log(lr, out=lr)
                val = np.dot(a, lr)
                if not np.isfinite(val):  # a / b over- or underflowed (subnormal entries)
                    bad = ~np.isfinite(lr)
                    lr[bad] = np.log(a[bad]) - np.log(b[bad])
                    val = np.dot(a, lr)
            return float(max(val, 0.0))
    return float(max(rel_entr(a, b).sum(), 0.0))


def tv(a: np.ndarray, b: np.ndarray) -> float:
    """TV(a, b) = (1/2) sum_v |a_v - b_v|."""
    d = np.subtract(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    return float(0.5 * np.abs(d, out=d).sum())


def _entropy(p: np.ndarray, eps: float = 0.0) -> float:
    if p.min() <= 0:
        p = p[p > 0]
    t = p + eps
    np.log(t, out=t)
    t *= p
    return float(-t.sum())


_pair = as_pair


def _pos_part(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    return normalize(np.maximum(v, 0.0), fallback)


def _onehot(V: int, t: int) -> np.ndarray:
    r = np.zeros(V)
    r[t] = 1.0
    return r


# --------------------------------------------------------------------------- the generic lift
Decision = Callable[[np.ndarray, np.ndarray, int], "tuple[float, np.ndarray]"]


@dataclass(frozen=True, eq=False)
class SingleTokenRule:
    """A single-token rule: ``rule(p_row, q_row, x) -> (a(x), R_x)`` plus its closed forms.

    ``decide`` trusts its inputs (rows are validated once at the chain boundary).  ``closed_out``
    and ``closed_beta`` give out(p, q) and beta(p, q) from docs/theory.md §8 without the O(V^2) sum over x;
    :meth:`out` and :meth:`beta` validate and call them.  ``params`` records the parameters and
    ``label`` says when the rule is a stand-in or an assumption rather than a published algorithm.
    """

    name: str
    decide: Decision = field(repr=False)
    closed_out: Callable[[np.ndarray, np.ndarray], np.ndarray] = field(repr=False)
    closed_beta: Callable[[np.ndarray, np.ndarray], float] = field(repr=False)
    params: dict = field(default_factory=dict)
    label: str = ""

    def __call__(self, p_row, q_row, x: int) -> tuple[float, np.ndarray]:
        return self.decide(p_row, q_row, x)

    def out(self, p, q) -> np.ndarray:
        """Closed-form one-token output law out(p, q)."""
        p, q = _pair(p, q)
        return self.closed_out(p, q)

    def beta(self, p, q) -> float:
        """Closed-form acceptance beta(p, q) = sum_x q(x) a(x)."""
        p, q = _pair(p, q)
        return float(self.closed_beta(p, q))

    def lifted_out(self, p, q) -> np.ndarray:
        """out(y) = sum_x q(x) [a(x) 1{y = x} + (1 - a(x)) R_x(y)] by the O(V^2) sum over x."""
        p, q = _pair(p, q)
        res = np.zeros(p.size)
        for x in np.flatnonzero(q > 0):
            a, R = self.decide(p, q, int(x))
            res += q[x] * (1.0 - a) * R
            res[x] += q[x] * a
        return res


@dataclass(frozen=True, repr=False, eq=False)
class LossyVerifier(Verifier):
    """A chain :class:`Verifier` built from a :class:`SingleTokenRule` (``rule``)."""

    rule: SingleTokenRule | None = None

    def out(self, p, q) -> np.ndarray:
        """The rule's closed-form one-token output law."""
        return self.rule.out(p, q)

    def beta(self, p, q) -> float:
        """The rule's closed-form one-token acceptance."""
        return self.rule.beta(p, q)


def single_token_chain(rule: SingleTokenRule, lossless: bool = False) -> LossyVerifier:
    """Lift a single-token rule to a chain verifier (exact law and sampler).

    With (a_i, R_i) = rule(p[i-1], q[i-1], x_i):  P(tau = i-1) = (prod_{k<i} a_k)(1 - a_i), emitting
    from R_i;  P(tau = L) = prod_k a_k, emitting the bonus token from p[L].  This is token-level
    speculative sampling (Leviathan et al., arXiv 2211.17192) with the rule's test and residual.

    >>> v = single_token_chain(lenience(0.8).rule)
    >>> v((0, 1), p, q)            # p [3, V], q [2, V]
    """
    if not isinstance(rule, SingleTokenRule):
        raise ValueError(f"rule must be a SingleTokenRule, got {type(rule).__name__}")

    def law(draft, p, q):
        L = len(draft)
        steps = [rule.decide(p[i], q[i], t) for i, t in enumerate(draft)]
        a = np.array([min(1.0, max(0.0, s[0])) for s in steps])
        reach = np.concatenate(([1.0], np.cumprod(a)))
        probs = [reach[i] * (1.0 - a[i]) for i in range(L)] + [reach[L]]
        return _outcomes(probs, [s[1] for s in steps] + [p[L]])

    def sample(draft, p, q, rng):
        for i, t in enumerate(draft):
            a, R = rule.decide(p[i], q[i], t)
            if not rng.random() < a:
                return i, _draw(R, rng)
        return len(draft), _draw(p[-1], rng)

    doc = (rule.decide.__doc__ or "").strip()
    return LossyVerifier(name=rule.name, law=law, kind="chain", sampler=sample, lossless=lossless,
                         doc=doc, rule=rule)


def _param(name: str, value, lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {value!r}") from None
    bad = (not np.isfinite(v) and not (hi == np.inf and v == np.inf)) or v < lo or v > hi \
        or (lo_open and v == lo) or (hi_open and v == hi)
    if bad:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise ValueError(f"{name} must lie in {lb}{lo:g}, {hi:g}{rb}, got {value!r}")
    return v


def _make(name, decide, out, beta, params, label="") -> LossyVerifier:
    return single_token_chain(SingleTokenRule(name, decide, out, beta, params, label))


# --------------------------------------------------------------------------- 8.1 typical acceptance
def typical(epsilon: float = 0.09, delta: float = 0.3, residual: str = "argmax",
            entropy_eps: float = 1e-5) -> LossyVerifier:
    """Typical acceptance (Medusa, arXiv 2401.10774; vLLM's TypicalAcceptanceSampler).

    a(x) = 1[p(x) > tau(p)],  tau(p) = min(epsilon, delta exp(-H(p))),  H(p) = -sum p log(p + entropy_eps)
    (the implementations' 1e-5 guard; pass 0 for the exact entropy).  Residual (independent of x):
    ``"argmax"`` = point mass on argmax p (vLLM), ``"truncated"`` = norm(p 1[p >= tau]) (Medusa).
    out = q 1[p > tau] + q({p <= tau}) R;  beta = q({p > tau}).  Not "between" p and q in general.

    Parameters: epsilon in (0, 1], delta > 0, residual, entropy_eps >= 0.
    >>> typical().out([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05])   # (0, .25, .15, .6)
    """
    epsilon = _param("epsilon", epsilon, 0.0, 1.0, lo_open=True)
    delta = _param("delta", delta, 0.0, np.inf, lo_open=True, hi_open=True)
    entropy_eps = _param("entropy_eps", entropy_eps, 0.0, 1.0)
    if residual not in ("argmax", "truncated"):
        raise ValueError(f"residual must be 'argmax' or 'truncated', got {residual!r}")

    def tau(p):
        return min(epsilon, delta * np.exp(-_entropy(p, entropy_eps)))

    def res(p, t):
        top = _onehot(p.size, int(np.argmax(p)))
        return top if residual == "argmax" else normalize(np.where(p >= t, p, 0.0), top)

    def decide(p, q, x):
        t = tau(p)
        return float(p[x] > t), res(p, t)

    def out(p, q):
        t = tau(p)
        keep = p > t
        return np.where(keep, q, 0.0) + q[~keep].sum() * res(p, t)

    def beta(p, q):
        return q[p > tau(p)].sum()

    return _make("typical", decide, out, beta,
                 dict(epsilon=epsilon, delta=delta, residual=residual, entropy_eps=entropy_eps))


# --------------------------------------------------------------------------- 8.2 lenience
def lenience(l: float) -> LossyVerifier:  # noqa: E741 (the paper's name)
    """Lenient speculative sampling (Leviathan et al., arXiv 2211.17192, appendix).

    a(x) = min(1, p(x) / (l q(x))), l in (0, 1];  residual norm((p - q)_+) (unchanged from SpS).
    out = min(q, p/l) + (1 - beta) norm((p - q)_+),  beta = sum min(q, p/l);  D_inf(out || p) <= -log l.
    Between p and q, hence on the TV frontier; l = 1 is speculative sampling.
    >>> lenience(0.8).beta([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05])   # 0.45
    """
    l = _param("l", l, 0.0, 1.0, lo_open=True)  # noqa: E741

    def decide(p, q, x):
        return min(1.0, p[x] / (l * q[x])) if q[x] > 0 else float(p[x] > 0), _pos_part(p - q, p)

    def beta(p, q):
        return np.minimum(q, p / l).sum()

    def out(p, q):
        acc = np.minimum(q, p / l)
        return acc + max(0.0, 1.0 - acc.sum()) * _pos_part(p - q, p)  # beta may round to 1 + 1e-16

    return _make("lenience", decide, out, beta, dict(l=l))


# --------------------------------------------------------------------------- 8.3 top-k acceptance
def _top_set(p: np.ndarray, k: int) -> np.ndarray:
    kth = np.partition(p, p.size - k)[p.size - k] if k < p.size else -np.inf
    return p >= kth


def topk_accept(k: int) -> LossyVerifier:
    """Top-k acceptance (the Cactus paper's baseline, MANGA-UOFA/Cactus ``topk.py``).

    S = {v : p_v >= k-th largest p} (ties enlarge S); a = 1_S; released residual
    norm((1_S - q)_+), proportional to (1 - q) on S.  beta = q(S),
    out(y) = 1[y in S] (q_y + q(S^c) (1 - q_y) / (|S| - q(S))).
    >>> topk_accept(2).out(p, q)
    """
    k = check_int(k, "k", 1)

    def decide(p, q, x):
        S = _top_set(p, k)
        return float(S[x]), _pos_part(S - q, p)

    def beta(p, q):
        return q[_top_set(p, k)].sum()

    def out(p, q):
        S = _top_set(p, k)
        qS = q[S].sum()
        den = S.sum() - qS
        if den <= 0:  # S = {v} with q_v = 1: never rejected
            return q.copy()
        return np.where(S, q + (1.0 - qS) * (1.0 - q) / den, 0.0)

    return _make("topk_accept", decide, out, beta, dict(k=k))


# --------------------------------------------------------------------------- 8.4 FSD
_FSD = {
    "kl": ("KL(q||p)", lambda p, q: kl(q, p)),
    "kl_reversed": ("KL(p||q)", lambda p, q: kl(p, q)),
    "tv": ("TV(p,q)", tv),
    "js": ("JS(p,q) = KL(p||m)/2 + KL(q||m)/2", lambda p, q: 0.5 * kl(p, (p + q) / 2) + 0.5 * kl(q, (p + q) / 2)),
    "js_released": ("released 'js_div' = KL(m||p)/2 + KL(m||q)/2 (not JS)",
                    lambda p, q: 0.5 * kl((p + q) / 2, p) + 0.5 * kl((p + q) / 2, q)),
}


def fuzzy(T: float, divergence: str = "js_released") -> LossyVerifier:
    """Fuzzy speculative decoding (Holsman, Huang, Dhingra, arXiv 2502.20704; maxholsman/fsd).

    d = Div(p, q); if d <= T accept whatever was drafted, else emit a fresh sample of the full p:
    a(x) = 1[d <= T], R = p;  out = q if d <= T else p;  beta = 1[d <= T].
    ``divergence``: ``"kl"`` = KL(q||p) (then KL(out||p) <= T exactly), ``"kl_reversed"`` = KL(p||q),
    ``"tv"`` (then TV(out, p) <= T), ``"js"`` (standard Jensen-Shannon) and ``"js_released"``
    (the released default, KL(m||p)/2 + KL(m||q)/2 with m = (p + q)/2, which is *not* JS).
    >>> fuzzy(0.5, "kl").out(p, q)
    """
    T = _param("T", T, 0.0, np.inf, hi_open=False)
    if divergence not in _FSD:
        raise ValueError(f"divergence must be one of {sorted(_FSD)}, got {divergence!r}")
    div = _FSD[divergence][1]

    def decide(p, q, x):
        return float(div(p, q) <= T), p

    def out(p, q):
        return q.copy() if div(p, q) <= T else p.copy()

    def beta(p, q):
        return float(div(p, q) <= T)

    return _make("fuzzy", decide, out, beta, dict(T=T, divergence=divergence))


# --------------------------------------------------------------------------- 8.5 Cactus
def _cactus_h(p: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """h_n = clip(p_n + sqrt(2 delta p_n (1 - p_n)), 0, 1) and c_n = (1 - h_n)/(1 - p_n) for every n."""
    h = np.clip(p + np.sqrt(2.0 * delta * p * (1.0 - p)), 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(p < 1.0, (1.0 - h) / (1.0 - p), 0.0)
    h = np.where(p >= 1.0, 1.0, h)
    return h, c


def cactus(delta: float) -> LossyVerifier:
    """Cactus (Hao & Mou, arXiv 2604.04987; MANGA-UOFA/Cactus, whose code calls the verifier q).

    For drafted n: h_n = clip(p_n + sqrt(2 delta p_n (1 - p_n)), 0, 1), h_v = p_v (1 - h_n)/(1 - p_n)
    (v != n);  a(n) = min(1, h_n / q_n);  R_n = norm((h^(n) - q)_+).
    out(y) = min(q_y, h^(y)_y) + sum_n q_n (1 - a(n)) R_n(y);  beta = sum_n min(q_n, h^(n)_n).
    delta >= 0 (delta = 0 is speculative sampling).  delta is a per-token second-order proxy, NOT a
    bound on KL(out || p) (docs/theory.md §9.3): certify out exactly with :func:`lp.lossy.certify`.
    The closed form here is O(V log V): one sort of the breakpoints q_v/p_v (shared with
    :class:`ClipFamily`, so a certificate sorts once).
    """
    delta = _param("delta", delta, 0.0, np.inf, hi_open=True)

    def decide(p, q, x):
        h, c = _cactus_h(p[x:x + 1], delta)
        hrow = p * c[0]
        hrow[x] = h[0]
        return (min(1.0, h[0] / q[x]) if q[x] > 0 else float(h[0] > 0)), _pos_part(hrow - q, p)

    def beta(p, q):
        return np.minimum(q, _cactus_h(p, delta)[0]).sum()

    def out(p, q):
        h, c = _cactus_h(p, delta)
        acc = np.minimum(q, h)
        rho = q - acc  # rejection mass of drafted n
        # Only drafted n with rho_n > 0 are ever rejected (often a handful at LLM vocabularies).
        # Z_n = sum_{v != n} (c_n p_v - q_v)_+ by the ratio order r_v = q_v / p_v (p_v > 0) of
        # ClipFamily: with j_n = #{r < c_n}, sum_v (c_n p_v - q_v)_+ = c_n P_j - Q_j.
        act = np.flatnonzero(rho > 0)
        fam = ClipFamily.of(p, q)
        ca, ra = c[act], rho[act]
        j = np.searchsorted(fam.r, ca, side="left")
        own = np.maximum(ca * p[act] - q[act], 0.0)
        Z = ca * fam.Pc[j] - fam.Qc[j] - own
        w = ra / np.maximum(Z, ra)  # Z_n = sum (q - h^(n))_+ >= rho_n; guards rounding
        # G(y) = sum_n w_n (c_n p_y - q_y)_+ = p_y sum_{c_n > r_y} w_n c_n - q_y sum_{c_n > r_y} w_n.
        # c_n > r_y iff j_n > i for y at ratio rank i (ties in r never split: no c_n lies between
        # equal r), so both sums are suffix sums of bincounts over j: no second sort.
        m = fam.r.size
        Wc = np.cumsum(np.bincount(j, weights=w * ca, minlength=m + 1)[::-1])[::-1]
        W = np.cumsum(np.bincount(j, weights=w, minlength=m + 1)[::-1])[::-1]
        G = np.zeros(p.size)
        G[fam.idx] = np.maximum(fam.ps * Wc[1:] - fam.qs * W[1:], 0.0)  # p_v = 0: G_v = 0
        G[act] -= w * own  # the sum runs over n != y
        np.maximum(G, 0.0, out=G)
        G += acc
        return G

    return _make("cactus", decide, out, beta, dict(delta=delta))


# --------------------------------------------------------------------------- clip family (9.2)
def _cumsum0(x: np.ndarray) -> np.ndarray:
    """(0, x_0, x_0 + x_1, ...): the running sum with a leading zero, in one array."""
    res = np.empty(x.size + 1)
    res[0] = 0.0
    np.cumsum(x, out=res[1:])
    return res


_SHARED_FAMILY: ContextVar = ContextVar("specsim_clip_family", default=None)


class ClipFamily:
    """pi(a) = clip(q, b(a) p, a p) with b(a) solving sum_v clip(q_v, b p_v, a p_v) = 1 (docs/theory.md §9.2).

    Sorting the breakpoints r_v = q_v / p_v once (p_v > 0) makes b(a) an O(log V) search: with
    prefix sums P_j, Q_j of p and q in ratio order, sum clip = b P_lo + (Q_hi - Q_lo) + a (1 - P_hi)
    where lo = #{r < b}, hi = #{r <= a}.  Tokens with p_v = 0 get pi_v = 0.  The sort is the
    only O(V log V) step of a certificate: ``with fam.shared():`` lets rule closed forms that need
    it (mentored, Cactus) reuse ``fam`` through :meth:`of` instead of sorting again.

    >>> fam = ClipFamily(p, q); b = fam.b(1.7); pi = fam.pi(1.7)
    """

    def __init__(self, p: np.ndarray, q: np.ndarray):
        self.p, self.q = p, q
        pos = p > 0
        m = int(np.count_nonzero(pos))
        if m == p.size:
            with np.errstate(over="ignore"):  # reported below as a ValueError
                r = q / p
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(pos, q / np.where(pos, p, 1.0), np.inf)
        order = np.argsort(r)[:m]  # p = 0 sorts last and is dropped
        self.idx = order
        # Every O(V) step writes into as few fresh arrays as possible: at V ~ 1e5 a new array's
        # first touch (page faults) costs as much as the arithmetic.  q/p is elementwise, so
        # qs/ps equals r[order] bit for bit.
        self.ps, self.qs = np.take(p, order), np.take(q, order)
        with np.errstate(over="ignore"):
            self.r = np.divide(self.qs, self.ps)
        if m and not np.isfinite(self.r[-1]):  # p_v subnormal under draft mass: q/p overflows
            v = int(order[-1])
            raise ValueError(f"q/p overflows at token {v} (p = {p[v]!r}, q = {q[v]!r}): the likelihood "
                             "ratio is not representable; set such p entries to 0 or floor them")
        self.Pc, self.Qc = _cumsum0(self.ps), _cumsum0(self.qs)
        self.Ptot = self.Pc[-1]
        #: suffix sums of p in ratio order (a * p-mass above a must not come from 1 - prefix)
        self.Psuf = _cumsum0(self.ps[::-1])[::-1]
        # G_j = r_j P_j - Q_j is nondecreasing in j: sum clip at b = r_j, minus its a-part
        self.G = np.multiply(self.r, self.Pc[:-1])
        self.G -= self.Qc[:-1]
        self.a_max = float(self.r[-1]) if self.r.size else 1.0
        #: tokens with q = 0 < p: the first n0 in ratio order (r = 0)
        self.n0 = int(np.searchsorted(self.r, 0.0, "right"))
        self._logr = None

    @property
    def logr(self) -> np.ndarray:
        """log r in ratio order, 0 (not -inf) on the first n0 tokens (r = 0); computed once."""
        if self._logr is None:
            with np.errstate(divide="ignore"):
                self._logr = np.log(self.r)
            self._logr[:self.n0] = 0.0
        return self._logr

    @classmethod
    def of(cls, p: np.ndarray, q: np.ndarray) -> "ClipFamily":
        """The family of (p, q): the one :meth:`shared` is scoping when it was built from these very
        arrays (identity, not equality), else a new one.  Lets a certificate sort q/p once for the
        rule's closed form (mentored, Cactus) and both KL frontiers."""
        fam = _SHARED_FAMILY.get()
        if fam is not None and fam.p is p and fam.q is q:
            return fam
        return cls(p, q)

    @contextmanager
    def shared(self):
        """``with fam.shared():`` makes :meth:`of` return ``fam`` for its own (p, q) in this block."""
        token = _SHARED_FAMILY.set(self)
        try:
            yield self
        finally:
            _SHARED_FAMILY.reset(token)

    def segments(self, a: float, b: float) -> tuple[int, int]:
        """(lo, hi) = (#{r < b}, #{r <= a}) in ratio order."""
        return int(np.searchsorted(self.r, b, "left")), int(np.searchsorted(self.r, a, "right"))

    def b(self, a: float, mass: float = 1.0) -> float:
        """The lower clip level b(a) in [0, 1] for a >= 1: sum_v clip(q_v, b p_v, a p_v) = ``mass``."""
        hi = int(np.searchsorted(self.r, a, "right"))
        c = mass - self.Qc[hi] - a * self.Psuf[hi]
        if c <= 0.0:  # sum min(q, a p) = 1: pi = q, any b <= min r works
            return float(min(1.0, self.r[0])) if self.r.size else 1.0
        j = min(int(np.searchsorted(self.G, c, "left")), hi)
        if j == 0:
            return float(min(1.0, self.r[0]))
        return float(min(max((c + self.Qc[j]) / self.Pc[j], 0.0), 1.0, a))

    def pi(self, a: float, b: float | None = None) -> np.ndarray:
        """pi(a) = clip(q, b p, a p) (pi_v = 0 where p_v = 0)."""
        b = self.b(a) if b is None else b
        res = np.multiply(self.p, b)  # clip(q, b p, a p) = min(max(q, b p), a p) as b <= a
        np.maximum(res, self.q, out=res)
        return np.minimum(res, np.multiply(self.p, a, out=np.empty_like(res)), out=res)


# --------------------------------------------------------------------------- 8.6 mentored
def mentored(alpha: float) -> LossyVerifier:
    """Mentored decoding (V. Tran-Thien, "An optimal lossy variant of speculative decoding", HF blog).

    a(x) = min(1, p(x) / (alpha q(x))), alpha in (0, 1];  residual norm((p/beta - q)_+) where beta >= 1 is
    determined by sum_v clip(q_v, p_v/beta, p_v/alpha) = 1 (b = 1/beta of docs/theory.md §9.2 (Algorithm 9.2)).
    Then out = clip(q, p/beta, p/alpha) and acceptance = sum min(q, p/alpha): the frontier point
    with a = 1/alpha, b = 1/beta, optimal for TV and for every f-divergence at its own budget.
    alpha = 1 is speculative sampling.
    >>> mentored(0.6).out(p, q)
    """
    alpha = _param("alpha", alpha, 0.0, 1.0, lo_open=True)
    a = 1.0 / alpha

    def decide(p, q, x):
        b = ClipFamily.of(p, q).b(a)
        return (min(1.0, p[x] * a / q[x]) if q[x] > 0 else float(p[x] > 0)), _pos_part(b * p - q, p)

    def out(p, q):
        return ClipFamily.of(p, q).pi(a)

    def beta(p, q):
        return np.minimum(q, a * p).sum()

    return _make("mentored", decide, out, beta, dict(alpha=alpha))


# --------------------------------------------------------------------------- 8.7 static ensemble
def ensemble(w: float, kind: str = "linear") -> LossyVerifier:
    """Static ensemble / DIVERSED (Wang, Kasa et al., arXiv 2604.07622; Speculative Ensemble).

    Speculative sampling against nu: a(x) = min(1, nu(x)/q(x)), residual norm((nu - q)_+), so out = nu
    and beta = sum min(q, nu).  ``w`` is the **target** weight in [0, 1]:
    ``"linear"``: nu = w p + (1 - w) q, beta = 1 - w TV(p, q), TV(nu, p) = (1 - w) TV(p, q) (on the TV frontier);
    ``"geometric"`` (DIVERSED's logit mixing): nu ∝ q^(1-w) p^w; if p and q have disjoint supports
    (nu = 0) the rule falls back to nu = p.
    >>> ensemble(0.75).beta(p, q)      # 1 - 0.75 TV
    """
    w = _param("w", w, 0.0, 1.0)
    if kind not in ("linear", "geometric"):
        raise ValueError(f"kind must be 'linear' or 'geometric', got {kind!r}")

    def nu(p, q):
        if kind == "linear":
            return w * p + (1.0 - w) * q
        if w in (0.0, 1.0):
            return (q if w == 0.0 else p).copy()
        both = (p > 0) & (q > 0)
        if both.all():  # the same arithmetic, without the masks
            g = np.log(p)
            g *= w
            lq = np.log(q)
            lq *= 1.0 - w
            g += lq
            return normalize(np.exp(g, out=g), p)
        g = np.zeros(p.size)
        g[both] = np.exp(w * np.log(p[both]) + (1.0 - w) * np.log(q[both]))
        return normalize(g, p)

    def decide(p, q, x):
        n = nu(p, q)
        return (min(1.0, n[x] / q[x]) if q[x] > 0 else float(n[x] > 0)), _pos_part(n - q, n)

    def beta(p, q):
        return np.minimum(q, nu(p, q)).sum()

    return _make("ensemble", decide, lambda p, q: nu(p, q), beta, dict(w=w, kind=kind))


# --------------------------------------------------------------------------- 8.10 speculative cascades
def cascade(alpha: float) -> LossyVerifier:
    """Speculative cascades with the "OPT" deferral rule (Narasimhan et al., "Faster Cascades via
    Speculative Decoding", arXiv 2405.19261).  docs/theory.md §8.10 states this rule from memory: re-check it
    against the paper before attributing numbers to it.

    r = 1[max q < max p - alpha TV(p, q)] (defer to the target when the draft is not confident
    enough); speculative sampling against pi = (1 - r) q + r p: a(x) = min(1, pi(x)/q(x)), residual
    norm((pi - q)_+).  out = pi (q when r = 0, p when r = 1); beta = 1 if r = 0, else 1 - TV(p, q);
    KL(out || p) = (1 - r) KL(q || p), which the deferral does not bound.
    >>> cascade(0.5).out(p, q)
    """
    alpha = _param("alpha", alpha, 0.0, np.inf)

    def defer(p, q) -> bool:
        return bool(q.max() < p.max() - alpha * 0.5 * np.abs(p - q).sum())

    def decide(p, q, x):
        if not defer(p, q):
            return 1.0, q.copy()  # pi = q: every drafted token is kept, the residual is never used
        return (min(1.0, p[x] / q[x]) if q[x] > 0 else float(p[x] > 0)), _pos_part(p - q, p)

    def out(p, q):
        return (p if defer(p, q) else q).copy()

    def beta(p, q):
        return float(np.minimum(p, q).sum()) if defer(p, q) else 1.0

    return _make("cascade", decide, out, beta, dict(alpha=alpha), label="details from memory (docs/theory.md §8.10)")


# --------------------------------------------------------------------------- 8.8 / 8.9 stand-ins
def _top2(p: np.ndarray) -> np.ndarray:
    """The two largest entries of p, ties to the lowest id (= np.argsort(-p, kind="stable")[:2]), O(V)."""
    i = int(np.argmax(p))
    if p.size < 2:
        return np.array([i])
    rest = p.copy()
    rest[i] = -np.inf
    return np.array([i, int(np.argmax(rest))])


def margin_standin(theta: float) -> LossyVerifier:
    """STAND-IN for margin-aware verification (MARS, arXiv 2601.15498): not the released rule.

    The released test z_(2)/z_(1) > theta uses raw logits and is not a function of p.  Stand-in:
    relax iff p_(2)/p_(1) >= theta (theta in (0, 1]); then a = 1[x in T2] (target top-2, ties to the
    lowest id) and a rejection emits a sample of p:  out = q 1_T2 + q(T2^c) p,  beta = q(T2);
    otherwise speculative sampling (out = p, beta = sum min(p, q)).
    >>> margin_standin(0.8).out([0.4, 0.35, 0.15, 0.1], [0.2, 0.6, 0.1, 0.1])   # (.28, .67, .03, .02)
    """
    theta = _param("theta", theta, 0.0, 1.0, lo_open=True)

    def relaxed(p):
        t = _top2(p)
        return p[t[1]] >= theta * p[t[0]], t

    def decide(p, q, x):
        rel, t = relaxed(p)
        if rel:
            return float(x in t), p
        return (min(1.0, p[x] / q[x]) if q[x] > 0 else float(p[x] > 0)), _pos_part(p - q, p)

    def out(p, q):
        rel, t = relaxed(p)
        if not rel:
            return p.copy()
        T = np.zeros(p.size, bool)
        T[t] = True
        return np.where(T, q, 0.0) + q[~T].sum() * p

    def beta(p, q):
        rel, t = relaxed(p)
        return q[t].sum() if rel else np.minimum(p, q).sum()

    return _make("margin_standin", decide, out, beta, dict(theta=theta),
                 "stand-in: MARS's released test uses raw logits (docs/theory.md §8.8)")


def consultant_standin(tau: float) -> LossyVerifier:
    """ASSUMPTION standing in for Consultant Decoding (its exact rule is not public; docs/theory.md §8.9).

    a(x) = 1[p(x) >= tau] (tau in [0, 1]), a rejection emits a sample of p:
    out = q 1[p >= tau] + q({p < tau}) p,  beta = q({p >= tau}).
    >>> consultant_standin(0.1).out(p, q)
    """
    tau = _param("tau", tau, 0.0, 1.0)

    def decide(p, q, x):
        return float(p[x] >= tau), p

    def out(p, q):
        keep = p >= tau
        return np.where(keep, q, 0.0) + q[~keep].sum() * p

    def beta(p, q):
        return q[p >= tau].sum()

    return _make("consultant_standin", decide, out, beta, dict(tau=tau),
                 "assumption: Consultant Decoding's exact rule is not public (docs/theory.md §8.9)")


#: Factories by name (CLI / report), in table order.
LOSSY_RULES: dict[str, Callable[..., LossyVerifier]] = {
    f.__name__: f for f in (typical, lenience, topk_accept, fuzzy, cactus, mentored, ensemble,
                            cascade, margin_standin, consultant_standin)}


# --------------------------------------------------------------------------- deterministic rules (10.2)
@dataclass(frozen=True)
class AcceptanceRule:
    """A deterministic relaxed acceptance test "accept x iff p_x clears a threshold" (docs/theory.md §10.2).

    kinds: ``greedy`` (p_x >= max p), ``additive`` (p_x >= max p - eps), ``multiplicative``
    (p_x >= lam max p), ``top_m`` (fewer than m tokens y != x with p_y >= p_x), ``entropy``
    (p_x > min(eps, delta exp(-H(p))), exact entropy).  :meth:`accepts` applies it;
    :func:`lp.lossy.acceptance_radius` certifies it.  Boundary ties count as rejection for
    greedy/additive/multiplicative/top-m when another token reaches the threshold (the closed
    rejection set), which is the convention certificates use.
    """

    kind: str
    eps: float = 0.0
    lam: float = 1.0
    m: int = 1
    delta: float = 0.0

    def threshold(self, p: np.ndarray, x: int) -> float:
        """p_x must *exceed* this value to be accepted (top-m: the m-th largest p_y, y != x)."""
        others = np.delete(p, x)
        if self.kind == "greedy":
            return float(others.max())
        if self.kind == "additive":
            return float(others.max() - self.eps)
        if self.kind == "multiplicative":
            return float(self.lam * others.max())
        if self.kind == "top_m":
            return float(np.sort(others)[-self.m]) if self.m <= others.size else -np.inf
        return min(self.eps, self.delta * np.exp(-_entropy(p)))  # entropy

    def accepts(self, p, x: int) -> bool:
        """Whether the rule keeps token ``x`` under target row ``p``."""
        p = as_distribution(p, "p")
        if not 0 <= int(x) < p.size:
            raise ValueError(f"token x={x} outside 0..{p.size - 1}")
        return bool(p[int(x)] > self.threshold(p, int(x)))


def strict_greedy() -> AcceptanceRule:
    """Accept x iff p_x > p_y for every y != x (argmax, ties rejected)."""
    return AcceptanceRule("greedy")


def additive_greedy(eps: float) -> AcceptanceRule:
    """Accept x iff p_x > max_{y != x} p_y - eps, eps in [0, 1)."""
    return AcceptanceRule("additive", eps=_param("eps", eps, 0.0, 1.0, hi_open=True))


def multiplicative_greedy(lam: float) -> AcceptanceRule:
    """Accept x iff p_x > lam max_{y != x} p_y, lam in (0, 1]."""
    return AcceptanceRule("multiplicative", lam=_param("lam", lam, 0.0, 1.0, lo_open=True))


def top_m(m: int) -> AcceptanceRule:
    """Accept x iff fewer than m tokens y != x have p_y >= p_x (x among the target's top m)."""
    return AcceptanceRule("top_m", m=check_int(m, "m", 1))


def entropy_rule(epsilon: float = 0.09, delta: float = 0.3) -> AcceptanceRule:
    """Medusa's typical test as a deterministic rule: accept x iff p_x > min(epsilon, delta e^{-H(p)})."""
    return AcceptanceRule("entropy", eps=_param("epsilon", epsilon, 0.0, 1.0, lo_open=True),
                          delta=_param("delta", delta, 0.0, 1.0, lo_open=True))
