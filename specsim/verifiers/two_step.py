"""Khisti et al.'s two-step multi-draft verification (arXiv 2410.18234; docs/theory.md §6.5).

Step 1 selects one of the k i.i.d. draws, step 2 verifies it against p by single-draft
speculative sampling.  Two selections: self-normalised importance weights (:data:`khisti`,
whose token law :func:`khisti_selection_law` is a quadrature of its Laplace form) and an
optimal selection (:data:`khisti_optimal`, built by :func:`khisti_optimal_selection`).  Both are
node-wise tree verifiers (the engine is :func:`specsim.verifiers.nodewise._nodewise`).
The rule's ``faults=`` switch (:data:`TWO_STEP_FAULTS`) exists only for
:mod:`specsim.testing.selftest.mutants`.
"""
from __future__ import annotations

import functools
import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .._validate import as_pair, check_int, normalize
from .base import tree_verifier, validate_faults
from .nodewise import _accept_prob, _nodewise

__all__ = ["khisti", "khisti_optimal", "khisti_selection_law", "khisti_optimal_selection", "OptimalSelection",
           "KHISTI_QUADRATURE_BOUND"]

# --------------------------------------------------------------------------- Khisti et al.
# khisti_selection_law's quadrature (docs/theory.md §6.5): trapezoid rule in u = log(t w) with step
# _RACE_STEP (13/64, exact in binary, so node offsets m h are exact).  Below u = _RACE_LO a draw
# has survived to double precision (e^u < 2^-54: exp(-e^u) rounds to 1 and the kernel
# e^u exp(-e^u) is e^u); above _RACE_HI it has fired (exp(-e^u) < 2e-24, the kernel < 1e-22) and
# those nodes are dropped.  Log-weights are E ln 2 + log(m), E an integer and m in [1, 2): with
# ln 2 split in a 32-bit head (E ln2_hi exact) and a tail, offsets between weights that are
# 2^+-1000 apart keep double precision instead of 1e-13.
_RACE_STEP = 13 / 64
_RACE_LO, _RACE_HI = -38.0, 4.0
_LN2_HI, _LN2_LO = float.fromhex("0x1.62e42feep-1"), 1.9082149292705877e-10
#: Bound on the discretisation error of khisti_selection_law per unit of k q(y) (docs/theory.md §6.5):
#: 2 / (sin(d) (e^{2 pi (pi/2 - d) / h} - 1)) at h = 13/64, d = h / (2 pi).
KHISTI_QUADRATURE_BOUND = 2.0 / (math.sin(_RACE_STEP / (2 * math.pi))
                                 * math.expm1(2 * math.pi * (math.pi / 2 - _RACE_STEP / (2 * math.pi)) / _RACE_STEP))
_RACE_CHUNK = 4096  # weight classes per block of the banded arrays


def _race_win(E, logm, Q, q0, k):
    """P(a draw of weight w_c wins the race against k - 1 i.i.d. draws) for every weight class c.

    Classes ascending in w_c = m_c 2^E_c (``E`` integers, ``logm`` = log m_c, m_c in [1, 2)), ``Q``
    their draft masses, ``q0`` the draft mass of weight 0.  win_c = integral K(v + log w_c)
    Phi(v)^(k-1) dv with K(u) = exp(u - e^u) and Phi(v) = q0 + sum_c Q_c exp(-e^(v + log w_c)), on
    the grid v_m = m h + _RACE_LO - log w_max shared by all classes.  Class c is in its band for
    nodes m1_c <= m < m1_c + B; before it exp(-e^u) = 1 and K(u) = e^u, so those nodes sum to
    e^u A_m with A the geometric running sum of Phi^(k-1)."""
    h = _RACE_STEP
    B = int(math.ceil((_RACE_HI - _RACE_LO) / h)) + 1
    dE = E[-1] - E                                            # log w_max - log w_c = d_hi + d_lo
    d_hi, d_lo = dE * _LN2_HI, dE * _LN2_LO + (logm[-1] - logm)
    m1 = np.maximum(np.ceil((d_hi + d_lo) / h), 0).astype(np.int64)   # first band node of each class
    u0 = _RACE_LO + ((m1 * h - d_hi) - d_lo)                  # u at node m1_c, in [_RACE_LO, _RACE_LO + h)
    M = int(m1.max()) + B
    steps = np.arange(B)
    grow = np.exp(steps * h)
    chunks = [slice(s, s + _RACE_CHUNK) for s in range(0, E.size, _RACE_CHUNK)]
    alive, bands = np.zeros(M), []
    for c in chunks:
        e = np.exp(u0[c])[:, None] * grow                      # e^u along each class's band
        survive = np.exp(-e)
        nodes = m1[c, None] + steps
        alive += np.bincount(nodes.ravel(), weights=(Q[c, None] * survive).ravel(), minlength=M)
        bands.append((nodes, e * survive))
    entering = np.bincount(m1, weights=Q, minlength=M + 1)
    later = np.cumsum(entering[::-1])[::-1]                   # later[m] = mass whose band starts at m or after
    F = (q0 + later[1:M + 1] + alive) ** (k - 1)              # Phi_m^(k-1)
    A = np.empty(M + 1)
    A[0] = (q0 + Q.sum()) ** (k - 1) / math.expm1(h)          # nodes m < 0: Phi = q0 + sum Q exactly
    decay = math.exp(-h)
    for m in range(M):                                         # A_m = sum_{m' < m} e^{(m' - m) h} F_m'
        A[m + 1] = decay * (A[m] + F[m])
    win = np.exp(u0) * A[m1]
    for c, (nodes, kernel) in zip(chunks, bands):
        win[c] += (kernel * F[nodes]).sum(axis=1)
    return h * win


@functools.lru_cache(maxsize=65536)
def _khisti_rho_cached(pb: bytes, qb: bytes, k: int) -> np.ndarray:
    p, q = np.frombuffer(pb), np.frombuffer(qb)
    rho = np.zeros(q.size)
    live = q > 0
    if k == 1:
        rho[live] = q[live]
    else:
        weighted, zero = live & (p > 0), live & (p <= 0)
        q0 = float(q[zero].sum())
        rho[zero] = q[zero] * q0 ** (k - 1)                   # every draw has weight 0: uniform choice
        if weighted.any():
            (mp, ep), (mq, eq) = np.frexp(p[weighted]), np.frexp(q[weighted])
            m, E = mp / mq, (ep - eq).astype(np.int64)         # p/q = m 2^E without overflow, m in (1/2, 2)
            low = m < 1
            m, E = np.where(low, 2 * m, m), E - low            # m in [1, 2): (E, m) sorts as p/q does
            order = np.argsort(E * math.log(2) + np.log(m), kind="stable")
            E, m = E[order], m[order]
            first = np.r_[True, (E[1:] != E[:-1]) | (m[1:] != m[:-1])]   # equal weights: one class
            which = np.empty(order.size, dtype=np.int64)
            which[order] = np.cumsum(first) - 1
            win = _race_win(E[first], np.log(m[first]), np.bincount(which, weights=q[weighted]), q0, k)
            rho[weighted] = k * q[weighted] * win[which]
    rho.setflags(write=False)
    return rho


def _importance_weights(p, q, T):
    """Self-normalised importance weights p(x_j)/q(x_j) over the draws (uniform if all are 0).

    The ratios are formed as mantissa ratios times powers of two and scaled by the largest
    power before the sum, so a subnormal q (p/q overflowing to inf) gives the exact weights."""
    mp, ep = np.frexp(p[T])
    mq, eq = np.frexp(q[T])
    live = mp > 0
    e = np.where(live, ep - eq, np.iinfo(np.int64).min // 2)
    W = np.ldexp(mp / mq, e - e.max(axis=-1, keepdims=True))
    s = W.sum(axis=-1, keepdims=True)
    return np.where(s > 0, W / np.where(s > 0, s, 1.0), 1.0 / T.shape[-1])


def khisti_selection_law(p, q, k: int) -> np.ndarray:
    """rho_w(y) = k q(y) w(y) E[1 / (w(y) + S)]: law of the token selected from k i.i.d. draws
    x_1..x_k ~ q by self-normalised importance weights w_j = w(x_j) / sum_i w(x_i), w = p/q
    (Khisti et al., arXiv 2410.18234, step 1), S the sum of k - 1 i.i.d. weights w(X), X ~ q.
    Tokens with p = 0 weigh 0; when every draw weighs 0 one is chosen uniformly, so
    rho_w(y) = q(y) q0^(k-1) there, q0 the draft mass of p = 0 (docs/theory.md §6.5).

    With 1/a = integral_0^inf e^(-t a) dt, w E[1/(w + S)] = integral_0^inf w e^(-t w) phi(t)^(k-1) dt,
    phi(t) = sum_x q(x) e^(-t w(x)) (p = 0 tokens contribute q(x) at every t).  After t = e^v the
    integrand is analytic and bounded in the strip |Im v| < pi/2, so the trapezoid rule in v is
    exponentially accurate: it is computed on a grid shared by every y (step 13/64, O(|supp q|) work
    per node band, one sort), with discretisation error at most
    :data:`KHISTI_QUADRATURE_BOUND` (1.3e-19) times k q(y) and truncation below 1e-16 relative.
    The result is a quadrature to that bound, not exact; measured within 4e-16 of exact rational
    enumeration on extreme rows and 1e-15 of the k-tuple enumeration on small supports.  Any
    V and k (V = 49152, k <= 4: a fraction of a second per row).

    Parameters: ``p``, ``q`` rows over the same V >= 2 tokens; ``k`` >= 1 draws.

    Returns: rho_w as a float64 array [V] (a fresh copy).

    >>> khisti_selection_law([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2).round(6).tolist()
    [0.298128, 0.338571, 0.3633]
    """
    p, q = as_pair(p, q)
    check_int(k, "k", 1)
    return _khisti_rho_cached(p.tobytes(), q.tobytes(), k).copy()


#: The faults the two-step rule can be built with (mutants only).
TWO_STEP_FAULTS = {"against_q": "the selected token tested against q instead of the selection law"}


def _khisti_rule(tree, u, *, faults=()):
    against_q = "against_q" in validate_faults(faults, TWO_STEP_FAULTS, "two-step rule")
    p, q, draws = tree.p[u], tree.q[u], tree.draws[u]
    rho = q if against_q else _khisti_rho_cached(p.tobytes(), q.tobytes(), len(draws))
    w = _importance_weights(p, q, np.array(draws))
    descend: dict[int, float] = defaultdict(float)
    for x, wx in zip(draws, w):
        descend[x] += wx * _accept_prob(p[x], rho[x])
    stop = max(0.0, 1.0 - sum(descend.values()))
    return descend, stop, normalize(np.maximum(p - rho, 0.0), p)


def _khisti_law(tree):
    """Canonical two-step multi-draft verification (Khisti et al., arXiv 2410.18234), node-wise.

    Step 1 (selection): from the k i.i.d. draws pick Y = x_j with probability
    w_j = (p(x_j)/q(x_j)) / sum_i p(x_i)/q(x_i) (uniform when every ratio is 0); this induces
    the token law rho_w (:func:`khisti_selection_law`, a quadrature of its Laplace form).
    Step 2: single-draft speculative sampling of Y against p: accept with min(1, p(Y)/rho_w(Y)),
    else Y' ~ norm((p - rho_w)_+).  Acceptance sum min(p, rho_w).  The self-normalised
    importance weights are our concrete choice within the paper's class; the paper's optimised
    weights (an LP for K = 2) are not reproduced here.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.multidraft import multidraft_acceptance
    >>> round(multidraft_acceptance("khisti", [1/3, 2/3], [2/3, 1/3], 2), 6)   # K = 2 drafts
    0.8
    """
    return _nodewise(tree, _khisti_rule)


# --------------------------------------------------------------------------- Khisti et al., optimal weights
@dataclass(frozen=True, eq=False)
class OptimalSelection:
    """An optimal selection of Khisti et al.'s two-step scheme at one node (docs/theory.md §6.5).

    The tokens of supp q with equal p/q form a class c, which owns a set of positions O_c in
    [0, 1) (``pieces``); the O_c tile [0, 1) and |O_c| = q(c).  A draw takes a uniform position
    in its class's set and the draw with the earliest position is selected, so
    rho_f(y) = q(y)/q(c) * integral over O_c of k (1 - s)^(k-1) ds.

    Fields: ``rho`` (the selection law rho_f [V], read-only), ``acceptance``
    (sum_y min(p_y, rho_f(y)) = alpha*), ``k`` (draws), ``pieces`` (token -> its class's tuple of
    (a, b) intervals).  :meth:`select` gives f(S, .) for a drawn multiset S.
    """

    rho: np.ndarray
    acceptance: float
    k: int
    pieces: dict

    def select(self, draws) -> dict:
        """f(S, y) = m_y / q_y * integral_{O_y} prod_x (1 - F_x(s))^(m_x - [x = y]) ds for the k draws
        S (m_x copies of x, F_x the law of a draw's position): the probability that y is selected.

        Parameters: ``draws`` (k token ids, repeats kept).

        Returns: ``dict`` token -> probability (sums to 1).

        >>> sel = khisti_optimal_selection([0.2, 0.3, 0.5], [0.5, 0.3, 0.2], 2)
        >>> {y: round(f, 6) for y, f in sel.select([0, 1]).items()}
        {0: 0.0, 1: 1.0}
        """
        draws = [int(x) for x in draws]
        if len(draws) != self.k or any(x not in self.pieces for x in draws):
            raise ValueError(f"draws must be {self.k} tokens of supp q, got {draws}")
        counts = {x: draws.count(x) for x in dict.fromkeys(draws)}
        if len(counts) == 1:
            return {draws[0]: 1.0}
        cuts = np.unique([e for x in counts for piece in self.pieces[x] for e in piece])
        lo, hi = cuts[:-1], cuts[1:]
        nodes, gauss = np.polynomial.legendre.leggauss(self.k)   # exact: the integrand has degree k - 1
        s = 0.5 * (hi - lo)[:, None] * nodes + 0.5 * (hi + lo)[:, None]

        def cdf(x):
            a, b = np.array(self.pieces[x]).T
            if not (b - a).sum() > 0:  # q(x) below the float spacing at its place: a point at a
                return (s >= a[0]).astype(float)
            return np.clip(s[..., None] - a, 0.0, b - a).sum(axis=-1) / (b - a).sum()

        def inside(x):  # the cuts hold every end of x's pieces: a cell is inside one or outside all
            a, b = np.array(self.pieces[x]).T
            return ((lo[:, None] >= a) & (hi[:, None] <= b)).any(axis=1)

        def below(x, t):  # P(a draw of x lies strictly below the position t)
            a, b = np.array(self.pieces[x]).T
            if not (b - a).sum() > 0:
                return float(t > a[0])
            return float(np.clip(t - a, 0.0, b - a).sum() / (b - a).sum())

        survive = {x: 1.0 - cdf(x) for x in counts}
        out = {}
        for y, m in counts.items():
            width = sum(b - a for a, b in self.pieces[y])
            if width > 0:
                share = inside(y) * (hi - lo) / width
                term = np.prod([survive[x] ** (c - (x == y)) for x, c in counts.items()], axis=0)
                out[y] = m * float(share @ (0.5 * term @ gauss))
            else:  # q(y) below the float spacing at its place: a point, selected when it comes first
                at = self.pieces[y][0][0]
                out[y] = m * float(np.prod([(1.0 - below(x, at)) ** (c - (x == y)) for x, c in counts.items()]))
        # positions are absolute floats: a token of tiny q(y) inside [0, 1) has relative resolution
        # ~1e-16 / q(y), which shows here only as a deviation of the sum from 1
        total = sum(out.values())
        return {y: f / total for y, f in out.items()}


def _phi_mass(a, b, k):
    # integral_a^b k (1 - s)^(k-1) ds, without cancellation near s = 0 where (1 - s)^k ~ 1
    with np.errstate(divide="ignore", invalid="ignore"):  # b = 1: log1p(-1) = -inf, expm1(-inf) = -1
        return np.where(b > a, np.exp(k * np.log1p(-a)) * -np.expm1(k * (np.log1p(-b) - np.log1p(-a))), 0.0)


def _optimal_targets(p, q, k, order):
    """rho* in the descending-ratio order ``order`` of supp q: R = P - D, with D the running maximum
    of gap = P - phi(Q) up to its argmax and the running maximum from the right after it
    (docs/theory.md §6.5).  Returns rho* and the tight prefixes (R = phi(Q)), as indices into order."""
    tail_p = np.r_[np.cumsum(p[order][::-1])[::-1], 0.0]   # p and q after each prefix, accurate when small
    tail_q = np.r_[np.cumsum(q[order][::-1])[::-1], 0.0]
    raw = tail_q ** k - tail_p                               # P - phi(Q) = (1 - Q)^k - (1 - P)
    raw[-1] = 0.0
    gap = np.maximum(raw, 0.0)
    top = int(np.argmax(gap))
    D = np.r_[np.maximum.accumulate(gap[:top + 1]), np.maximum.accumulate(gap[top:][::-1])[::-1][1:]]
    rho = np.maximum(p[order] - np.diff(D), 0.0)
    tight = np.flatnonzero(raw == D)                         # R = P - D = phi(Q) there
    return rho, np.unique(np.r_[0, tight, order.size])


def _place_block(mass_q, target, start, end, k):
    """Position sets in [start, end) for one block of classes (masses ``mass_q``, targets ``target``):
    in ascending target/mass, each class takes the stretch s .. s + q of the free positions (in free
    measure) whose phi-mass is its target; the last takes what is left (docs/theory.md §6.5)."""
    fa, fb = np.array([start]), np.array([end])
    pieces = [()] * len(mass_q)
    order = np.argsort(target / mass_q, kind="stable")
    for j in order[:-1]:
        qy = mass_q[j]
        cum = np.r_[0.0, np.cumsum(fb - fa)]
        mass = np.r_[0.0, np.cumsum(_phi_mass(fa, fb, k))]

        def piece(t):
            return np.clip(np.searchsorted(cum, t, side="right") - 1, 0, fa.size - 1)

        def position(t):
            i = piece(t)
            return np.minimum(fa[i] + (t - cum[i]), fb[i])

        def before(t):                                       # phi-mass of the first t of the free measure
            i = piece(t)
            return mass[i] + _phi_mass(fa[i], np.minimum(fa[i] + (t - cum[i]), fb[i]), k)

        top = max(cum[-1] - qy, 0.0)
        cand = np.unique(np.clip(np.r_[0.0, cum, cum - qy, top], 0.0, top))
        stretch = before(cand + qy) - before(cand)            # nonincreasing in s
        n_above = int(np.searchsorted(-stretch, -target[j], side="right"))
        if n_above == 0:
            s = 0.0
        elif n_above == cand.size:
            s = top
        else:                                                # one piece under each end: bisect to rounding
            lo, hi = cand[n_above - 1], cand[n_above]
            for _ in range(100):
                mid = 0.5 * (lo + hi)
                if mid in (lo, hi):
                    break
                lo, hi = (mid, hi) if (before(mid + qy) - before(mid)) > target[j] else (lo, mid)
            s = lo
        x0, x1 = position(s), position(s + qy)
        a, b = np.maximum(fa, x0), np.minimum(fb, x1)
        taken = b > a
        # q below the float spacing at s leaves no stretch: the class is the point at s
        pieces[j] = tuple(zip(a[taken].tolist(), b[taken].tolist())) or ((float(x0), float(x0)),)
        keep_a, keep_b = np.r_[fa, np.maximum(x1, fa)], np.r_[np.minimum(fb, x0), fb]
        keep = keep_b > keep_a
        o = np.argsort(keep_a[keep], kind="stable")
        fa, fb = keep_a[keep][o], keep_b[keep][o]
    pieces[order[-1]] = tuple(zip(fa.tolist(), fb.tolist())) or ((float(end), float(end)),)
    return pieces


@functools.lru_cache(maxsize=4096)
def _khisti_optimal_cached(pb: bytes, qb: bytes, k: int) -> OptimalSelection:
    p, q = np.frombuffer(pb), np.frombuffer(qb)
    support = np.flatnonzero(q > 0)
    if k == 1:  # one draw: the only selection is the draw itself, rho = q
        rho = q.copy()
        rho.setflags(write=False)
        ends = np.minimum(np.cumsum(q[support]), 1.0)
        ends[-1] = 1.0
        pieces = {int(y): ((float(a), float(b)),) for y, a, b in zip(support, np.r_[0.0, ends[:-1]], ends)}
        return OptimalSelection(rho, float(np.minimum(p, q).sum()), 1, pieces)
    with np.errstate(over="ignore"):                          # inf for subnormal q: sorts first, as it should
        ratio = p[support] / q[support]
    ratios, cls = np.unique(-ratio, return_inverse=True)     # classes of equal p/q, descending p/q
    cp, cq = np.bincount(cls, weights=p[support]), np.bincount(cls, weights=q[support])
    order = np.arange(ratios.size)
    target, tight = _optimal_targets(cp, cq, k, order)
    starts = np.minimum(np.r_[0.0, np.cumsum(cq)], 1.0)
    starts[-1] = 1.0
    class_pieces = []
    for a, b in zip(tight[:-1], tight[1:]):
        class_pieces += _place_block(cq[a:b], target[a:b], starts[a], starts[b], k)
    pieces = {int(y): class_pieces[c] for y, c in zip(support, cls)}   # a class's tokens share its positions
    class_rho = np.array([_phi_mass(*np.array(pcs).T, k).sum() for pcs in class_pieces])
    rho = np.zeros(p.size)
    rho[support] = class_rho[cls] * (q[support] / cq[cls])
    rho.setflags(write=False)
    return OptimalSelection(rho, float(np.minimum(p, rho).sum()), k, pieces)


def khisti_optimal_selection(p, q, k: int) -> OptimalSelection:
    """A selection that makes Khisti et al.'s two-step scheme optimal (arXiv 2410.18234), at any support.

    Step 1 selects a drafted token y from the multiset S of k i.i.d. draws with probability
    f(S, y), inducing rho_f(y) = sum_S Q(S) f(S, y); step 2 is single-draft speculative sampling
    of y against p, acceptance sum_y min(p_y, rho_f(y)).  Its maximum is the optimal k-draft
    acceptance alpha* = min_H [p(H) + 1 - q(H)^k] (docs/theory.md §6.5-6.6).  Construction
    (docs/theory.md §6.5): sort supp q by descending p/q; with P, Q the cumulative masses and
    phi(s) = 1 - (1 - s)^k, the target rho* has cumulative R = P - D, D the running maximum of
    P - phi(Q) up to its argmax and from the right after it, so rho* <= p before and >= p after
    and sum min(p, rho*) = alpha*.  It is realised by positions: token y owns a set O_y of
    [0, 1) of measure q(y), a draw takes a uniform position in its token's set, the earliest draw
    is selected (:meth:`OptimalSelection.select`); the sets are found block by block between the
    prefixes where R = phi(Q).  ``rho`` is computed from the sets, so the scheme is lossless
    exactly and optimal up to the bisection's rounding (<= 1e-14 from alpha* measured on SmolLM2
    rows; about 1 s for a V = 49152 row whose p/q are all distinct).

    Parameters: ``p``, ``q`` rows over the same V >= 2 tokens; ``k`` >= 1 draws.

    Returns: :class:`OptimalSelection` (cached per (p, q, k); ``rho`` is read-only).

    >>> sel = khisti_optimal_selection([1/3, 2/3], [2/3, 1/3], 2)
    >>> round(sel.acceptance, 6), sel.rho.round(6).tolist()
    (0.888889, [0.444444, 0.555556])
    """
    p, q = as_pair(p, q)
    check_int(k, "k", 1)
    return _khisti_optimal_cached(p.tobytes(), q.tobytes(), k)


def _khisti_optimal_rule(tree, u):
    p, q, draws = tree.p[u], tree.q[u], tree.draws[u]
    sel = _khisti_optimal_cached(p.tobytes(), q.tobytes(), len(draws))
    descend = {x: fx * _accept_prob(p[x], sel.rho[x]) for x, fx in sel.select(draws).items()}
    stop = max(0.0, 1.0 - sum(descend.values()))
    return descend, stop, normalize(np.maximum(p - sel.rho, 0.0), p)


def _khisti_optimal_law(tree):
    """Khisti et al.'s two-step scheme with an optimal selection (arXiv 2410.18234), node-wise.

    At node u with k i.i.d. draws of multiset S: select y in S with probability f(S, y) from
    :func:`khisti_optimal_selection`, accept it with min(1, p(y)/rho_f(y)), else emit
    Y ~ norm((p - rho_f)_+); after acceptance verification continues in y's subtree, whose draws
    are again i.i.d.  Lossless for any f (the token law is rho_f a + (p - rho_f)_+ = p); with this
    selection the acceptance per node is the k-draft optimum alpha* (docs/theory.md §6.5).
    Needs i.i.d. children; any support.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.multidraft import multidraft_acceptance
    >>> round(multidraft_acceptance("khisti_optimal", [1/3, 2/3], [2/3, 1/3], 2), 6)   # 8/9 = alpha*
    0.888889
    """
    return _nodewise(tree, _khisti_optimal_rule)


khisti = tree_verifier("khisti", needs={"iid"}, node_rule=_khisti_rule)(_khisti_law)
khisti_optimal = tree_verifier("khisti_optimal", needs={"iid"}, node_rule=_khisti_optimal_rule)(_khisti_optimal_law)
