"""Lossy single-token verification rules, lifted to chains (docs/theory.md §8).

A single-token rule is an acceptance probability a(x) for the drafted token x plus a residual
kernel R_x (the law of the emitted token after rejecting x).  Its one-token output law and
acceptance are

    out(y) = q(y) a(y) + sum_x q(x) (1 - a(x)) R_x(y),      beta = sum_x q(x) a(x).

:func:`single_token_chain` lifts any such rule to a chain verifier exactly as token-level
speculative sampling is lifted: position i is accepted with a_i(x_i) computed from rows
``p[i], q[i]``; on the first rejection the verifier emits from R at that row and stops; if every
position is accepted it emits the bonus token from ``p[L]``.  The exact engine
(:mod:`specsim.exact`) therefore handles chains of every rule here.  Each rule also carries its
closed-form ``out(p, q)`` and ``beta(p, q)`` (O(V), Cactus O(V log V)); the tests compare them with
the lift at L = 1.  Divergences come from :mod:`specsim.divergences`; the clip-family solver
behind :func:`mentored` lives in :mod:`specsim.verifiers._clip_family`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._sampling import draw_token
from .._validate import as_pair, check_int, check_real, normalize
from .. import _jit
from .. import divergences as _divergences
from ..divergences import _JIT_MIN, _kl_rows, tv
from ._clip_family import ClipFamily, log_ratios
from .base import Verifier, chain_verifier
from .chain import _outcomes

__all__ = ["SingleTokenRule", "LossyVerifier", "single_token_chain", "typical", "lenience",
           "topk_accept", "fuzzy", "cactus", "mentored", "ensemble", "margin_standin",
           "consultant_standin", "cascade", "LOSSY_RULES"]


def _scratch(n: int, name: str) -> np.ndarray | None:
    """A reused row for a temporary of a long row (a fresh ~1 MB one page-faults), else None."""
    return _jit.work_block(name, 1, n)[0] if n >= _JIT_MIN else None


def _entropy(p: np.ndarray, eps: float = 0.0) -> float:
    if p.min() <= 0:
        p = p[p > 0]
    t = np.add(p, eps, out=_scratch(p.size, "entropy"))
    np.log(t, out=t)
    t *= p
    return float(-t.sum())


def _pos_part(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    return normalize(np.maximum(v, 0.0), fallback)


def _masked_mix(p, q, t: float, strict: bool) -> tuple[np.ndarray, tuple[float, float]]:
    """(where(keep, q, 0), (q[keep].sum(), q[~keep].sum())) with keep = p > t (``strict``) or
    p >= t, in one compiled pass (the same sums; used only when specsim._jit is enabled)."""
    from ._clip_kernels import masked_mix
    out = np.empty(p.size)                        # the law: a row of its own (a block would stay alive)
    kept, rest = _jit.work_block("masked mix", 2, p.size)
    nk, nr = masked_mix(np.ascontiguousarray(p), np.ascontiguousarray(q), float(t), strict, out, kept, rest)
    return out, (kept[:nk].sum(), rest[:nr].sum())


def _onehot(V: int, t: int) -> np.ndarray:
    r = np.zeros(V)
    r[t] = 1.0
    return r


# --------------------------------------------------------------------------- the generic lift
Decision = Callable[[np.ndarray, np.ndarray, int], "tuple[float, np.ndarray]"]


@dataclass(frozen=True, eq=False)
class SingleTokenRule:
    """A single-token rule: ``decide(p_row, q_row, x) -> (a(x), R_x)`` plus its closed forms.

    out(y) = q(y) a(y) + sum_x q(x) (1 - a(x)) R_x(y) and beta = sum_x q(x) a(x) (module
    docstring); ``closed_out`` and ``closed_beta`` give them without the O(V^2) sum over x
    (docs/theory.md §8), :meth:`lifted_out` by that sum.

    Parameters: ``name``; ``decide`` (trusts its inputs: rows are validated once at the chain
    boundary); ``closed_out(p, q)``; ``closed_beta(p, q)``; ``params`` (the rule's parameters);
    ``label`` (says when the rule is a stand-in or an assumption rather than a published algorithm).

    >>> rule = lenience(0.8).rule
    >>> a, R = rule([0.25, 0.75], [0.5, 0.5], 0)
    >>> float(a), R.tolist()
    (0.625, [0.0, 1.0])
    """

    name: str
    decide: Decision = field(repr=False)
    closed_out: Callable[[np.ndarray, np.ndarray], np.ndarray] = field(repr=False)
    closed_beta: Callable[[np.ndarray, np.ndarray], float] = field(repr=False)
    params: dict = field(default_factory=dict)
    label: str = ""
    #: optional ``closed_pair(p, q) -> (out, beta)`` for rules whose two closed forms share work
    #: (Cactus's caps, FSD's divergence): :meth:`out_beta` uses it, certificates call that
    closed_pair: Callable[[np.ndarray, np.ndarray], "tuple[np.ndarray, float]"] | None = field(default=None,
                                                                                             repr=False)

    def __call__(self, p_row, q_row, x: int) -> tuple[float, np.ndarray]:
        p, q = as_pair(p_row, q_row)
        return self.decide(p, q, int(x))

    def out(self, p, q) -> np.ndarray:
        """Closed-form one-token output law out(p, q) (``ValueError`` on a bad pair)."""
        p, q = as_pair(p, q)
        return self.closed_out(p, q)

    def beta(self, p, q) -> float:
        """Closed-form acceptance beta(p, q) = sum_x q(x) a(x) (``ValueError`` on a bad pair)."""
        p, q = as_pair(p, q)
        return float(self.closed_beta(p, q))

    def out_beta(self, p, q) -> tuple[np.ndarray, float]:
        """``(out(p, q), beta(p, q))`` for validated float64 rows (trusted), sharing the work of
        the two closed forms where the rule gives ``closed_pair``."""
        if self.closed_pair is not None:
            out, beta = self.closed_pair(p, q)
            return out, float(beta)
        return self.closed_out(p, q), float(self.closed_beta(p, q))

    def lifted_out(self, p, q) -> np.ndarray:
        """out(y) = sum_x q(x) [a(x) 1{y = x} + (1 - a(x)) R_x(y)] by the O(V^2) sum over x."""
        p, q = as_pair(p, q)
        res = np.zeros(p.size)
        for x in np.flatnonzero(q > 0):
            a, R = self.decide(p, q, int(x))
            res += q[x] * (1.0 - a) * R
            res[x] += q[x] * a
        return res


@dataclass(frozen=True, kw_only=True, repr=False, eq=False)
class LossyVerifier(Verifier):
    """A chain :class:`~specsim.verifiers.base.Verifier` lifted from a :class:`SingleTokenRule`
    by :func:`single_token_chain`; :meth:`out` and :meth:`beta` are the rule's closed forms.

    Fields: those of ``Verifier`` and ``rule``.

    >>> v = lenience(0.8)
    >>> v.kind, v.lossless, round(v.beta([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05]), 6)
    ('chain', False, 0.45)
    """

    rule: SingleTokenRule

    def out(self, p, q) -> np.ndarray:
        """The rule's closed-form one-token output law out(p, q)."""
        return self.rule.out(p, q)

    def beta(self, p, q) -> float:
        """The rule's closed-form one-token acceptance beta(p, q)."""
        return self.rule.beta(p, q)


def single_token_chain(rule: SingleTokenRule, lossless: bool = False, doc: str | None = None) -> LossyVerifier:
    """Lift a single-token rule to a chain verifier (exact law and sampler).

    With (a_i, R_i) = rule(p[i-1], q[i-1], x_i):  P(tau = i-1) = (prod_{k<i} a_k)(1 - a_i), emitting
    from R_i;  P(tau = L) = prod_k a_k, emitting the bonus token from p[L].  This is token-level
    speculative sampling (Leviathan et al., arXiv 2211.17192) with the rule's test and residual.

    Parameters: ``rule``; ``lossless`` (the claim, ``False`` by default); ``doc`` (default: the
    docstring of ``rule.decide``).

    Returns: a :class:`LossyVerifier` named ``rule.name``; ``TypeError`` if ``rule`` is not a
    :class:`SingleTokenRule`.

    >>> import numpy as np
    >>> v = single_token_chain(lenience(0.8).rule)
    >>> p, q = np.array([[0.25, 0.75], [0.5, 0.5]]), np.array([[0.5, 0.5]])
    >>> [(round(o.prob, 4), o.accepted, o.next_dist.tolist()) for o in v((0,), p, q)]
    [(0.375, 0, [0.0, 1.0]), (0.625, 1, [0.5, 0.5])]
    """
    if not isinstance(rule, SingleTokenRule):
        raise TypeError(f"rule must be a SingleTokenRule, got {type(rule).__name__}")

    def sample(draft, p, q, rng):
        for i, t in enumerate(draft):
            a, R = rule.decide(p[i], q[i], t)
            if not rng.random() < a:
                return i, draw_token(R, rng)
        return len(draft), draw_token(p[-1], rng)

    @chain_verifier(rule.name, lossless=lossless, sampler=sample, cls=LossyVerifier, rule=rule,
                    doc=doc if doc is not None else rule.decide.__doc__)
    def law(draft, p, q):
        L = len(draft)
        steps = [rule.decide(p[i], q[i], t) for i, t in enumerate(draft)]
        a = np.array([min(1.0, max(0.0, s[0])) for s in steps])
        reach = np.concatenate(([1.0], np.cumprod(a)))
        probs = [reach[i] * (1.0 - a[i]) for i in range(L)] + [reach[L]]
        return _outcomes(probs, [s[1] for s in steps] + [p[L]])

    return law


# --------------------------------------------------------------------------- 8.1 typical acceptance
def typical(epsilon: float = 0.09, delta: float = 0.3, residual: str = "argmax",
            entropy_eps: float = 1e-5) -> LossyVerifier:
    """Typical acceptance (Medusa, arXiv 2401.10774; vLLM's TypicalAcceptanceSampler).

    a(x) = 1[p(x) > tau(p)],  tau(p) = min(epsilon, delta exp(-H(p))),  H(p) = -sum p log(p + entropy_eps)
    (the implementations' 1e-5 guard; pass 0 for the exact entropy).  Residual (independent of x):
    ``"argmax"`` = point mass on argmax p (vLLM), ``"truncated"`` = norm(p 1[p >= tau]) (Medusa).
    out = q 1[p > tau] + q({p <= tau}) R;  beta = q({p > tau}).  Not "between" p and q in general.

    Parameters: ``epsilon`` in (0, 1], ``delta`` > 0, ``residual`` (``"argmax"`` or
    ``"truncated"``), ``entropy_eps`` in [0, 1].

    Returns: a :class:`LossyVerifier`.

    >>> v = typical()
    >>> v.out([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05]).round(6).tolist()
    [0.0, 0.25, 0.15, 0.6]
    """
    epsilon = check_real(epsilon, "epsilon", 0.0, 1.0, lo_open=True)
    delta = check_real(delta, "delta", 0.0, np.inf, lo_open=True, hi_open=True)
    entropy_eps = check_real(entropy_eps, "entropy_eps", 0.0, 1.0)
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

    def pair(p, q):
        if not _jit.enabled():
            return out(p, q), beta(p, q)
        t = tau(p)                                # one entropy pass for both closed forms
        mix, (kept, rest) = _masked_mix(p, q, t, True)
        if residual == "argmax":                  # + rest * onehot: x + 0.0 = x off the argmax
            mix[int(np.argmax(p))] += rest
        else:
            mix += rest * res(p, t)
        return mix, kept

    params = dict(epsilon=epsilon, delta=delta, residual=residual, entropy_eps=entropy_eps)
    return single_token_chain(SingleTokenRule("typical", decide, out, beta, params, closed_pair=pair),
                              doc=typical.__doc__)


# --------------------------------------------------------------------------- 8.2 lenience
def lenience(l: float) -> LossyVerifier:  # noqa: E741 (the paper's name)
    """Lenient speculative sampling (Leviathan et al., arXiv 2211.17192, appendix).

    a(x) = min(1, p(x) / (l q(x))), l in (0, 1];  residual norm((p - q)_+) (unchanged from SpS).
    out = min(q, p/l) + (1 - beta) norm((p - q)_+),  beta = sum min(q, p/l);  D_inf(out || p) <= -log l.
    Between p and q, hence on the TV frontier; l = 1 is speculative sampling.

    Parameters: ``l`` in (0, 1].

    Returns: a :class:`LossyVerifier`.

    >>> round(lenience(0.8).beta([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05]), 6)
    0.45
    """
    l = check_real(l, "l", 0.0, 1.0, lo_open=True)  # noqa: E741

    def decide(p, q, x):
        return min(1.0, p[x] / (l * q[x])) if q[x] > 0 else float(p[x] > 0), _pos_part(p - q, p)

    def beta(p, q):
        return np.minimum(q, p / l).sum()

    def out(p, q):
        acc = np.minimum(q, p / l)
        # 1 - beta as the rejected mass sum (q - p/l)_+: exactly 0 when nothing is ever rejected, where
        # 1 - sum(acc) leaves ~1e-16 and a finite KL(p || out) for an infinite one
        return acc + np.maximum(q - p / l, 0.0).sum() * _pos_part(p - q, p)

    def pair(p, q):
        if not _jit.enabled():
            return out(p, q), beta(p, q)
        from ._clip_kernels import lenience_pair   # out's operations, two passes, no term rows
        res = np.empty(p.size)
        return res, lenience_pair(np.ascontiguousarray(p), np.ascontiguousarray(q), l, res)

    return single_token_chain(SingleTokenRule("lenience", decide, out, beta, dict(l=l), closed_pair=pair),
                              doc=lenience.__doc__)


# --------------------------------------------------------------------------- 8.3 top-k acceptance
def _top_set(p: np.ndarray, k: int) -> np.ndarray:
    if k >= p.size:
        return np.ones(p.size, dtype=bool)
    buf = _jit.work_block("top set", 1, p.size)[0]     # partition a scratch copy, not a fresh one
    buf[:] = p
    buf.partition(p.size - k)
    return p >= buf[p.size - k]


def topk_accept(k: int) -> LossyVerifier:
    """Top-k acceptance (the Cactus paper's baseline, MANGA-UOFA/Cactus ``topk.py``).

    S = {v : p_v >= k-th largest p} (ties enlarge S); a = 1_S; released residual
    norm((1_S - q)_+), proportional to (1 - q) on S.  beta = q(S),
    out(y) = 1[y in S] (q_y + q(S^c) (1 - q_y) / (|S| - q(S))).

    Parameters: ``k`` an integer >= 1.

    Returns: a :class:`LossyVerifier`.

    >>> topk_accept(2).out([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05]).round(6).tolist()
    [0.0, 0.0, 0.527778, 0.472222]
    """
    k = check_int(k, "k", 1)

    def decide(p, q, x):
        S = _top_set(p, k)
        return float(S[x]), _pos_part(S - q, p)

    def beta(p, q):
        return q.sum(where=_top_set(p, k))

    def pair(p, q):
        S = _top_set(p, k)
        q_in = q.sum(where=S)
        q_out = q.sum(where=~S)  # q(S^c) summed directly: 1 - q(S) can round below 0 when S^c is empty
        den = S.sum() - 1.0 + q_out
        if den <= 0:  # S = {v} with q_v = 1: never rejected
            return q.copy(), q_in
        res = np.subtract(1.0, q)                # q + q(S^c) (1 - q) / |S| - q(S), in one fresh row
        res *= q_out / den
        res += q
        res[~S] = 0.0
        return res, q_in

    def out(p, q):
        return pair(p, q)[0]

    rule = SingleTokenRule("topk_accept", decide, out, beta, dict(k=k), closed_pair=pair)
    return single_token_chain(rule, doc=topk_accept.__doc__)


# --------------------------------------------------------------------------- 8.4 FSD
def _mid(p, q):
    """m = (p + q) / 2 of validated rows (so a valid row too), in a reused work row on long rows
    (a fresh one page-faults); the caller must not keep it."""
    m = np.add(p, q, out=_scratch(p.size, "fsd mid"))
    m /= 2
    return m


def _js(p, q):  # p, q: validated rows (the rule's inputs), so m is one too
    m = _mid(p, q)
    return 0.5 * _kl_rows(p, m) + 0.5 * _kl_rows(q, m)


def _js_released(p, q):
    """KL(m||p)/2 + KL(m||q)/2 = sum_v m_v log(m_v^2 / (p_v q_v)) / 2 with
    m^2 / (p q) = 1 + t, t = (p - q)^2 / (4 p q) = ((p - q)/p) ((p - q)/q) / 4 >= 0: one log1p a
    token (not two logs), and no cancellation between the two KL sums (t is formed from ratios,
    so it neither underflows nor loses the tokens where p ~ q).  inf where one support holds a
    token the other lacks.  The compiled passes (specsim._jit) do numpy's operations in order and
    sum in numpy's pairwise order: the same bits."""
    if _jit.enabled() and p.size >= _JIT_MIN:
        from ._clip_kernels import js_released_terms, mid_log_sum
        t = _scratch(p.size, "fsd mid")
        if js_released_terms(p, q, t):          # p, q > 0 everywhere (else the masks below)
            np.log1p(t, out=t)
            d = 0.5 * mid_log_sum(p, q, t)
            if d < np.inf:                      # else a t overflowed: repaired below
                return d
    pos_p, pos_q = p > 0, q > 0
    if not np.array_equal(pos_p, pos_q):
        return np.inf
    if not pos_p.all():                         # common zeros: terms 0 there
        p, q = p[pos_p], q[pos_p]
    d = p - q
    with np.errstate(over="ignore"):
        t = d / p
        t *= d / q
    t *= 0.25
    np.log1p(t, out=t)
    big = t == np.inf
    if big.any():
        # (p - q)^2 / (4 p q) beyond the float range (a subnormal p or q against a normal one):
        # log1p(t) = log t to double precision there, taken factor by factor
        a, b, e = p[big], q[big], np.abs(d[big])
        t[big] = (np.log(e) - np.log(a)) + (np.log(e) - np.log(b)) - np.log(4.0)
    m = p + q
    m *= 0.5
    t *= m
    return 0.5 * t.sum()


#: FSD's divergences beyond :data:`specsim.divergences.DIVERGENCES` (which give D(q, p)).
_FSD_EXTRA = {"js": _js, "js_released": _js_released}
_FSD_KINDS = ("kl", "kl_reverse", "tv", *_FSD_EXTRA)


def fuzzy(T: float, divergence: str = "js_released") -> LossyVerifier:
    """Fuzzy speculative decoding (Holsman, Huang, Dhingra, arXiv 2502.20704; maxholsman/fsd).

    d = Div(q, p); if d <= T accept whatever was drafted, else emit a fresh sample of the full p:
    a(x) = 1[d <= T], R = p;  out = q if d <= T else p;  beta = 1[d <= T].

    Parameters: ``T`` >= 0; ``divergence``: ``"kl"`` = KL(q||p) (then KL(out||p) <= T exactly),
    ``"kl_reverse"`` = KL(p||q), ``"tv"`` (then TV(out, p) <= T), ``"js"`` (Jensen-Shannon) and
    ``"js_released"`` (the released default, KL(m||p)/2 + KL(m||q)/2 with m = (p + q)/2, which is
    *not* JS).

    Returns: a :class:`LossyVerifier`.

    >>> v = fuzzy(0.5, "kl")
    >>> v.out([0.5, 0.5], [0.6, 0.4]).tolist(), v.beta([0.5, 0.5], [0.6, 0.4])
    ([0.6, 0.4], 1.0)
    """
    kind = divergence
    T = check_real(T, "T", 0.0, np.inf, hi_open=False)
    if kind not in _FSD_KINDS:
        raise ValueError(f"divergence must be one of {sorted(_FSD_KINDS)}, got {kind!r}")
    extra = _FSD_EXTRA.get(kind)

    def div(p, q):
        return extra(p, q) if extra is not None else _divergences.divergence(q, p, kind)

    def decide(p, q, x):
        return float(div(p, q) <= T), p

    def pair(p, q):
        ok = div(p, q) <= T
        return (q.copy() if ok else p.copy()), float(ok)

    def out(p, q):
        return pair(p, q)[0]

    def beta(p, q):
        return float(div(p, q) <= T)

    return single_token_chain(SingleTokenRule("fuzzy", decide, out, beta, dict(T=T, divergence=kind),
                                              closed_pair=pair), doc=fuzzy.__doc__)


# --------------------------------------------------------------------------- 8.5 Cactus
def _cactus_h(p: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray]:
    """h_n = clip(p_n + sqrt(2 delta p_n (1 - p_n)), 0, 1) and c_n = (1 - h_n)/(1 - p_n) for every n."""
    rest = np.subtract(1.0, p)
    h = np.multiply(p, 2.0 * delta)       # in place, in the order of clip(p + sqrt(2 delta p (1 - p)), 0, 1)
    h *= rest
    np.sqrt(h, out=h)
    h += p
    np.clip(h, 0.0, 1.0, out=h)
    c = np.subtract(1.0, h)
    with np.errstate(divide="ignore", invalid="ignore"):
        c /= rest
    one = p >= 1.0                        # a one-hot target: h = 1, c = 0 there
    if one.any():
        h[one], c[one] = 1.0, 0.0
    return h, c


def cactus(delta: float) -> LossyVerifier:
    """Cactus (Hao & Mou, arXiv 2604.04987; MANGA-UOFA/Cactus, whose code calls the verifier q).

    For drafted n: h_n = clip(p_n + sqrt(2 delta p_n (1 - p_n)), 0, 1), h_v = p_v (1 - h_n)/(1 - p_n)
    (v != n);  a(n) = min(1, h_n / q_n);  R_n = norm((h^(n) - q)_+).
    out(y) = min(q_y, h^(y)_y) + sum_n q_n (1 - a(n)) R_n(y);  beta = sum_n min(q_n, h^(n)_n).
    delta is a per-token second-order proxy, NOT a bound on KL(out || p) (docs/theory.md §9.3):
    certify out exactly with :func:`lp.certificates.certify`.  The closed form here is
    O(V log V): one sort of the breakpoints q_v/p_v (shared with
    :class:`~specsim.verifiers._clip_family.ClipFamily`, so a certificate sorts once).

    Parameters: ``delta`` >= 0 (finite; 0 is speculative sampling).

    Returns: a :class:`LossyVerifier`.

    >>> v = cactus(0.05)
    >>> v.out([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05]).round(6).tolist()
    [0.11892, 0.25, 0.215114, 0.415965]
    """
    delta = check_real(delta, "delta", 0.0, np.inf, hi_open=True)

    def decide(p, q, x):
        h, c = _cactus_h(p[x:x + 1], delta)
        hrow = p * c[0]
        hrow[x] = h[0]
        return (min(1.0, h[0] / q[x]) if q[x] > 0 else float(h[0] > 0)), _pos_part(hrow - q, p)

    def beta(p, q):
        return np.minimum(q, _cactus_h(p, delta)[0]).sum()

    def pair(p, q):
        fast = _jit.enabled()
        if fast:  # the caps, acc and the rejected ids in one compiled pass (same arithmetic)
            from ._clip_kernels import cactus_caps, cactus_out
            pc, qc = np.ascontiguousarray(p), np.ascontiguousarray(q)   # one compiled signature
            acc, c = _jit.work_block("cactus caps", 2, p.size)        # fresh rows page-fault
            act = _jit.work_block("cactus ids", 1, p.size, np.int64)[0]
            k = cactus_caps(pc, qc, 2.0 * delta, acc, act, c)
            act, ca = act[:k], c[:k]
            beta_value = acc.sum()
            rho_act = q[act] - acc[act]
        else:
            h, c = _cactus_h(p, delta)
            acc = np.minimum(q, h)
            beta_value = acc.sum()  # = beta(p, q), from the same caps
            rho = q - acc  # rejection mass of drafted n
            # Only drafted n with rho_n > 0 are ever rejected (often a handful at LLM vocabularies).
            act = np.flatnonzero(rho > 0)
            ca, rho_act = c[act], rho[act]
        # Z_n = sum_{v != n} (c_n p_v - q_v)_+ by the ratio order r_v = q_v / p_v (p_v > 0) of
        # ClipFamily: with j_n = #{r < c_n}, sum_v (c_n p_v - q_v)_+ = c_n P_j - Q_j.
        fam = ClipFamily.of(p, q)
        ra = rho_act
        j = fam.ranks(ca, "left")
        own = np.maximum(ca * p[act] - q[act], 0.0)
        Z = ca * fam.Pc[j] - fam.Qc[j] - own
        w = ra / np.maximum(Z, ra)  # Z_n = sum (q - h^(n))_+ >= rho_n; guards rounding
        # G(y) = sum_n w_n (c_n p_y - q_y)_+ = p_y sum_{c_n > r_y} w_n c_n - q_y sum_{c_n > r_y} w_n.
        # c_n > r_y iff j_n > i for y at ratio rank i (ties in r never split: no c_n lies between
        # equal r), i.e. iff r_y <= r_(j_n - 1): both sums are suffix sums over the few distinct
        # j_n >= 1, read in token order by counting the thresholds r_(j - 1) below r_y (no
        # scatter, no second sort; p_v = 0 has r_v = inf and gets G_v = 0).
        if fast:                                # (bins, first, suf_c, suf below; compiled)
            from ._clip_kernels import cactus_suffix_sums
            bins, first, suf_c, suf = cactus_suffix_sums(np.ascontiguousarray(j, dtype=np.int64), w * ca, w)
        else:
            bins, inv = np.unique(j, return_inverse=True)
            Wc, W = np.bincount(inv, weights=w * ca), np.bincount(inv, weights=w)
            first = int(np.searchsorted(bins, 1))   # j = 0: no token lies below c_n
            suf_c = np.append(np.cumsum(Wc[first:][::-1])[::-1], 0.0)
            suf = np.append(np.cumsum(W[first:][::-1])[::-1], 0.0)
        thr, r_tok = fam.ratios_at(bins[first:] - 1), fam.r_tokens
        if fast:
            return cactus_out(pc, qc, r_tok, np.ascontiguousarray(thr), suf_c, suf, acc, act, w * own,
                              np.empty(p.size)), beta_value
        if thr.size <= 16:
            s = np.zeros(p.size, dtype=np.intp)
            for t in thr:
                s += r_tok > t
        else:
            s = np.searchsorted(thr, r_tok, side="left")
        G = np.multiply(p, np.take(suf_c, s))
        G -= np.multiply(q, np.take(suf, s))
        np.maximum(G, 0.0, out=G)
        G[act] -= w * own  # the sum runs over n != y
        np.maximum(G, 0.0, out=G)
        G += acc
        return G, beta_value

    def out(p, q):
        return pair(p, q)[0]

    rule = SingleTokenRule("cactus", decide, out, beta, dict(delta=delta), closed_pair=pair)
    return single_token_chain(rule, doc=cactus.__doc__)


# --------------------------------------------------------------------------- 8.6 mentored
def mentored(alpha: float) -> LossyVerifier:
    """Mentored decoding (V. Tran-Thien, "An optimal lossy variant of speculative decoding", HF blog).

    a(x) = min(1, p(x) / (alpha q(x))), alpha in (0, 1];  residual norm((p/beta - q)_+) where
    beta >= 1 solves sum_v clip(q_v, p_v/beta, p_v/alpha) = 1 (b = 1/beta of docs/theory.md §9.2).
    Then out = clip(q, p/beta, p/alpha) and acceptance = sum min(q, p/alpha): the frontier point
    with a = 1/alpha, b = 1/beta, optimal for TV and for every f-divergence at its own budget.
    alpha = 1 is speculative sampling.  Ties are decided in floats: x can be rejected only where
    the float ratio q_x / p_x exceeds the float 1 / alpha, so where q_x = p_x / alpha up to that
    rounding x is accepted outright (the rationals of the float rows may leave ~1e-17 rejection
    mass there; the certificates describe the rule as executed).

    Parameters: ``alpha`` in (0, 1].

    Returns: a :class:`LossyVerifier`.

    >>> v = mentored(0.6)
    >>> v.out([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05]).round(6).tolist()
    [0.083333, 0.25, 0.208333, 0.458333]
    """
    alpha = check_real(alpha, "alpha", 0.0, 1.0, lo_open=True)
    a = 1.0 / alpha

    def decide(p, q, x):
        b = ClipFamily.of(p, q).b(a)
        return (min(1.0, p[x] * a / q[x]) if q[x] > 0 else float(p[x] > 0)), _pos_part(b * p - q, p)

    def out(p, q):
        return ClipFamily.of(p, q).pi(a)

    def beta(p, q):
        return np.minimum(q, a * p).sum()

    def pair(p, q):  # both from the family a certificate shares: no O(V) temporaries for beta
        fam = ClipFamily.of(p, q)
        return fam.pi(a), fam.accepted(a)

    rule = SingleTokenRule("mentored", decide, out, beta, dict(alpha=alpha), closed_pair=pair)
    return single_token_chain(rule, doc=mentored.__doc__)


# --------------------------------------------------------------------------- 8.7 static ensemble
def ensemble(w: float, kind: str = "linear") -> LossyVerifier:
    """Static ensemble / DIVERSED (Wang, Kasa et al., arXiv 2604.07622; Speculative Ensemble).

    Speculative sampling against nu: a(x) = min(1, nu(x)/q(x)), residual norm((nu - q)_+), so
    out = nu and beta = sum min(q, nu).  ``"linear"``: nu = w p + (1 - w) q, beta = 1 - w TV(p, q),
    TV(nu, p) = (1 - w) TV(p, q) (on the TV frontier); ``"geometric"`` (DIVERSED's logit mixing):
    nu ∝ q^(1-w) p^w, falling back to nu = p if p and q have disjoint supports (nu = 0).

    Parameters: ``w`` the **target** weight in [0, 1]; ``kind`` ``"linear"`` or ``"geometric"``.

    Returns: a :class:`LossyVerifier`.

    >>> round(ensemble(0.75).beta([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05]), 6)   # 1 - 0.75 TV
    0.55
    """
    w = check_real(w, "w", 0.0, 1.0)
    if kind not in ("linear", "geometric"):
        raise ValueError(f"kind must be 'linear' or 'geometric', got {kind!r}")

    def with_beta(p, q, n, beta):
        """n, and with ``beta`` also sum min(q, n) (its temporary in a reused row)."""
        return (n, np.minimum(q, n, out=_scratch(p.size, "ensemble beta")).sum()) if beta else n

    def nu(p, q, beta=False):
        """nu, and with ``beta`` also sum min(q, nu) (the geometric kind sums it in its last pass)."""
        if kind == "linear" or w in (0.0, 1.0):
            return with_beta(p, q, w * p + (1.0 - w) * q if kind == "linear" else (q if w == 0.0 else p).copy(),
                             beta)
        lr = log_ratios(p, q)
        if lr is None:                             # disjoint parts of the supports
            both = (p > 0) & (q > 0)
            g = np.zeros(p.size)
            g[both] = p[both] * np.exp((1.0 - w) * np.log(q[both] / p[both]))
            return with_beta(p, q, normalize(g, p), beta)
        # p^w q^(1-w) = p (q/p)^(1-w): one exp over the log-ratios a certificate shares
        g = np.multiply(lr, 1.0 - w)
        np.exp(g, out=g)
        fast = _jit.enabled() and p.size >= _JIT_MIN
        if fast:                                   # the products and their sum in one pass (numpy's order)
            from ._clip_kernels import mul_sum
            s = mul_sum(g, p)
        else:
            g *= p
            s = g.sum()
        if s <= 0.0:
            return with_beta(p, q, p, beta)
        if fast and beta:                          # the normalisation and sum min(q, nu) in one pass
            from ._clip_kernels import div_min_sum
            return g, div_min_sum(g, s, q)
        g /= s                                     # normalize(g, p), in place
        return with_beta(p, q, g, beta)

    def decide(p, q, x):
        n = nu(p, q)
        return (min(1.0, n[x] / q[x]) if q[x] > 0 else float(n[x] > 0)), _pos_part(n - q, n)

    def beta(p, q):
        return np.minimum(q, nu(p, q)).sum()

    def pair(p, q):  # nu once for both closed forms (the geometric one costs transcendental passes)
        return nu(p, q, beta=True)

    return single_token_chain(SingleTokenRule("ensemble", decide, nu, beta, dict(w=w, kind=kind), closed_pair=pair),
                              doc=ensemble.__doc__)


# --------------------------------------------------------------------------- 8.10 speculative cascades
def cascade(alpha: float) -> LossyVerifier:
    """Speculative cascades with the "OPT" deferral rule (Narasimhan et al., "Faster Cascades via
    Speculative Decoding", arXiv 2405.19261).  docs/theory.md §8.10 states this rule from memory:
    re-check it against the paper before attributing numbers to it.

    r = 1[max q < max p - alpha TV(p, q)] (defer to the target when the draft is not confident
    enough); speculative sampling against pi = (1 - r) q + r p: a(x) = min(1, pi(x)/q(x)), residual
    norm((pi - q)_+).  out = pi (q when r = 0, p when r = 1); beta = 1 if r = 0, else 1 - TV(p, q);
    KL(out || p) = (1 - r) KL(q || p), which the deferral does not bound.

    Parameters: ``alpha`` >= 0.

    Returns: a :class:`LossyVerifier`.

    >>> v = cascade(0.5)
    >>> v.out([0.7, 0.2, 0.1], [0.4, 0.35, 0.25]).round(12).tolist(), round(v.beta([0.7, 0.2, 0.1], [0.4, 0.35, 0.25]), 6)
    ([0.7, 0.2, 0.1], 0.7)
    """
    alpha = check_real(alpha, "alpha", 0.0, np.inf)

    def defer(p, q) -> bool:
        return bool(q.max() < p.max() - alpha * tv(p, q))

    def decide(p, q, x):
        if not defer(p, q):
            return 1.0, q.copy()  # pi = q: every drafted token is kept, the residual is never used
        return (min(1.0, p[x] / q[x]) if q[x] > 0 else float(p[x] > 0)), _pos_part(p - q, p)

    def out(p, q):
        return (p if defer(p, q) else q).copy()

    def beta(p, q):
        return float(np.minimum(p, q).sum()) if defer(p, q) else 1.0

    rule = SingleTokenRule("cascade", decide, out, beta, dict(alpha=alpha),
                           label="details from memory (docs/theory.md §8.10)")
    return single_token_chain(rule, doc=cascade.__doc__)


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
    relax iff p_(2)/p_(1) >= theta; then a = 1[x in T2] (target top-2, ties to the lowest id) and a
    rejection emits a sample of p:  out = q 1_T2 + q(T2^c) p,  beta = q(T2);  otherwise speculative
    sampling (out = p, beta = sum min(p, q)).

    Parameters: ``theta`` in (0, 1].

    Returns: a :class:`LossyVerifier` (``rule.label`` says it is a stand-in).

    >>> margin_standin(0.8).out([0.4, 0.35, 0.15, 0.1], [0.2, 0.6, 0.1, 0.1]).round(6).tolist()
    [0.28, 0.67, 0.03, 0.02]
    """
    theta = check_real(theta, "theta", 0.0, 1.0, lo_open=True)

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

    rule = SingleTokenRule("margin_standin", decide, out, beta, dict(theta=theta),
                           "stand-in: MARS's released test uses raw logits (docs/theory.md §8.8)")
    return single_token_chain(rule, doc=margin_standin.__doc__)


def consultant_standin(tau: float) -> LossyVerifier:
    """ASSUMPTION standing in for Consultant Decoding (its exact rule is not public; docs/theory.md §8.9).

    a(x) = 1[p(x) >= tau], a rejection emits a sample of p:
    out = q 1[p >= tau] + q({p < tau}) p,  beta = q({p >= tau}).

    Parameters: ``tau`` in [0, 1].

    Returns: a :class:`LossyVerifier` (``rule.label`` says it is an assumption).

    >>> consultant_standin(0.1).out([0.05, 0.15, 0.25, 0.55], [0.55, 0.25, 0.15, 0.05]).round(6).tolist()
    [0.0275, 0.3325, 0.2875, 0.3525]
    """
    tau = check_real(tau, "tau", 0.0, 1.0)

    def decide(p, q, x):
        return float(p[x] >= tau), p

    def out(p, q):
        keep = p >= tau
        return np.where(keep, q, 0.0) + q[~keep].sum() * p

    def beta(p, q):
        return q[p >= tau].sum()

    def pair(p, q):
        if not _jit.enabled():
            return out(p, q), beta(p, q)
        from ._clip_kernels import add_scaled
        res, kept = _masked_mix(p, q, tau, False)
        return add_scaled(res, np.ascontiguousarray(p), kept[1]), kept[0]

    rule = SingleTokenRule("consultant_standin", decide, out, beta, dict(tau=tau),
                           "assumption: Consultant Decoding's exact rule is not public (docs/theory.md §8.9)",
                           closed_pair=pair)
    return single_token_chain(rule, doc=consultant_standin.__doc__)


#: Factories by name (CLI / report), in table order.
LOSSY_RULES: dict[str, Callable[..., LossyVerifier]] = {
    f.__name__: f for f in (typical, lenience, topk_accept, fuzzy, cactus, mentored, ensemble,
                            cascade, margin_standin, consultant_standin)}
