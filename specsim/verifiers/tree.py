"""Tree and multi-draft verifiers (docs/theory.md §3.2, 6): a draft tree in, its exact outcome law out.

Every verifier here is a :class:`~specsim.verifiers.base.Verifier` of kind ``"tree"``:
``verifier(tree) -> list[Outcome]`` with ``accepted`` a node id (0 = root).  Most are
*node-wise*: at each reached node a token-level multi-draft rule runs over the node's draws
(``tree.draws[node]``, in drafting order, repeats kept) against the node's target row; on
acceptance it descends into the accepted child's whole subtree, on rejection it emits a residual
and stops, and at a leaf it emits the bonus from the leaf's own row.  :func:`_nodewise` turns a
node rule into the exact law; the rules differ only in what they do at one node.

Each verifier's ``needs`` names the children laws it relies on (see
:func:`specsim.drafts.draft_laws`); :func:`verifiers_for` lists every verifier that applies.
The private keyword switches of the node rules exist for :mod:`specsim.testing.tree_mutants`.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._deprecation import renamed_keyword
from .._sampling import draw_token
from .._validate import as_pair, check_int, check_model_pair, check_real, normalize
from ..drafts import DraftTree, iid_paths, swor_tree
from ..models import Model, iid
from .base import Outcome, Verifier, meets_needs, tree_verifier
from .chain import CHAIN_VERIFIERS, block

__all__ = ["specinfer", "specinfer_first_path", "sequoia", "traversal", "traversal_repeats", "traversal_paths",
           "TRAVERSAL_VARIANTS", "deterministic_children",
           "spectr", "khisti", "khisti_self_normalised", "khisti_optimal", "khisti_optimal_selection",
           "OptimalSelection", "KHISTI_QUADRATURE_BOUND", "gbv", "gbv_capped", "greedy_multidraft", "TREE_VERIFIERS", "verifiers_for",
           "multidraft_acceptance", "kseq_rho", "khisti_selection_law", "tree_paths", "gbv_path_model",
           "gbv_path_arrays", "tree_shape"]

# A node rule: (tree, node) -> ({child token: probability of descending}, stop probability, stop row)
NodeRule = Callable[[DraftTree, int], tuple[dict, float, np.ndarray]]


# --------------------------------------------------------------------------- node-wise engine
def _nodewise(tree: DraftTree, rule: NodeRule, bonus_from_parent: bool = False) -> list[Outcome]:
    """Exact law of a node-wise scheme: reach(child) = reach(node) * rule's descend probability."""
    out: list[Outcome] = []
    stack = [(0, 1.0)]
    while stack:
        u, reach = stack.pop()
        kids = tree.children[u]
        if not kids:
            row = tree.p[tree.parent[u]] if bonus_from_parent and u > 0 else tree.p[u]
            out.append(Outcome(reach, u, row))
            continue
        by_token = {tree.tokens[c]: c for c in kids}
        descend, stop, row = rule(tree, u)
        if stop > 0:
            out.append(Outcome(reach * stop, u, row))
        for t, pr in descend.items():
            if pr > 0:
                stack.append((by_token[t], reach * pr))
    return out


def _distinct(tree: DraftTree, u: int, who: str) -> tuple[int, ...]:
    d = tree.draws[u]
    if len(set(d)) != len(d):
        raise ValueError(f"{who} needs distinct children (drafted without replacement); node {u} "
                         f"has repeated draws {d}")
    return d


def _accept_prob(r: float, q: float) -> float:
    # P(U q < r) for U ~ U[0,1): min(1, r/q); q = 0 (contract violation) accepts iff r > 0
    if q <= 0:
        return 1.0 if r > 0 else 0.0
    return 1.0 if r >= q else r / q  # r / q itself overflows when q is subnormal


def _rrs(p, q, draws, *, without_replacement=False, update_residual=True, mask_rejected=True):
    """Recursive rejection sampling over ``draws`` (with or without replacement)."""
    R, D = p, q.copy()
    descend: dict[int, float] = defaultdict(float)
    reach = 1.0
    for x in draws:
        a = _accept_prob(R[x], D[x])
        descend[x] += reach * a
        reach *= 1.0 - a
        if reach <= 0.0:
            break
        if update_residual:
            R = normalize(np.maximum(R - D, 0.0), R)
        if without_replacement and mask_rejected:
            D[x] = 0.0
            s = D.sum()
            if s <= 0.0:  # every supported token drafted and rejected: stop the loop, emit R
                break
            D = D / s
    return descend, reach, R


# --------------------------------------------------------------------------- SpecInfer
def _specinfer_rule(tree, u, **kw):
    return _rrs(tree.p[u], tree.q[u], tree.draws[u], **kw)


def _specinfer_law(tree):
    """SpecInfer recursive rejection sampling (Miao et al., "SpecInfer", arXiv 2305.09781), node-wise.

    At node u with draws x_1..x_k (i.i.d. from q = q(.|u), in drafting order, repeats kept):
    R_0 = p(.|u); draw j is accepted with min(1, R_{j-1}(x_j) / q(x_j)), else
    R_j = norm((R_{j-1} - q)_+); after acceptance verification continues in the accepted child's
    whole subtree; after k rejections emit Y ~ R_k; a leaf emits its bonus p(.|leaf).
    Needs i.i.d. children (``iid_paths``, ``fixed_shape(..., replacement=True)``).

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers import specinfer
    >>> check_lossless(specinfer, random_model(3, 0), random_model(3, 1), 2, iid_paths(2)).lossless
    True
    >>> from specsim.verifiers.tree import multidraft_acceptance
    >>> round(multidraft_acceptance("specinfer", [1/3, 2/3], [2/3, 1/3], 2), 6)   # K = 2 drafts
    0.777778
    """
    return _nodewise(tree, _specinfer_rule)


def _first_path_rule(tree, u):
    draws = tree.draws[u] if tree.depth[u] == 0 else tree.draws[u][:1]
    return _rrs(tree.p[u], tree.q[u], draws)


def _specinfer_first_path_law(tree):
    """SpecInfer RRS at the root, then token-level verification along the first-drafted path.

    Precisely: at the root, RRS over all draws as in :data:`specinfer`; at every deeper node only
    the first draw ``draws[node][0]`` is tested (min(1, p/q), residual norm((p - q)_+)), i.e.
    once a root child is accepted verification follows one path and ignores siblings.  For K
    i.i.d. paths this is "continue along the accepted path": the accepted draw is the first path
    with that token (an earlier equal token was rejected and has R = 0), and that path's next
    token is the first draw at the child.  Lossless whenever root draws are i.i.d. and every
    first draw is distributed as q; never better than :data:`specinfer` on the same tree law.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.verifiers.tree import multidraft_acceptance
    >>> round(multidraft_acceptance("specinfer_first_path", [1/3, 2/3], [2/3, 1/3], 2), 6)   # K = 2 drafts
    0.777778
    """
    return _nodewise(tree, _first_path_rule)


# --------------------------------------------------------------------------- Sequoia (SWOR)
def _sequoia_rule(tree, u, **kw):
    return _rrs(tree.p[u], tree.q[u], _distinct(tree, u, "sequoia"), without_replacement=True, **kw)


def _sequoia_law(tree):
    """Sequoia's without-replacement recursive rejection sampling (Chen et al., arXiv 2402.12374;
    Jeon et al., arXiv 2402.14160), node-wise.

    At node u with distinct children x_1..x_k drawn by successive sampling from q(.|u):
    R = p(.|u), D = q(.|u); child j is accepted with min(1, R(x_j)/D(x_j)); on rejection
    R <- norm((R - D)_+), D(x_j) <- 0, D <- norm(D).  If D has no mass left (every supported
    token drafted and rejected) the loop stops and Y ~ R (Sequoia's code instead continues with a
    uniform D over untried tokens; our processes never draft beyond supp q, so the choice only
    decides what happens after the last child).  ``ValueError`` on repeated draws.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.verifiers.tree import multidraft_acceptance
    >>> round(multidraft_acceptance("sequoia", [1/3, 2/3], [2/3, 1/3], 2, replacement=False), 6)
    1.0
    """
    return _nodewise(tree, _sequoia_rule)


# --------------------------------------------------------------------------- deterministic children
def _deterministic_rule(tree, u, *, mask_children=True):
    p = tree.p[u]
    kids = tuple(dict.fromkeys(tree.draws[u]))
    descend = {x: float(p[x]) for x in kids}
    stop = max(0.0, 1.0 - sum(descend.values()))
    r = p.copy()
    if mask_children:
        r[list(kids)] = 0.0
    return descend, stop, normalize(r, p)


def _deterministic_law(tree):
    """Deterministic-children verification (EAGLE's evaluate_posterior; docs/theory.md §3.2), node-wise.

    At node u with distinct children c_1..c_k: one coin U, accept c_j for the first j with
    U < sum_{m<=j} p(c_m|u) and descend; otherwise Y ~ p(.|u) with every c_m zeroed,
    renormalised.  The test ignores q, so it is lossless for any drafter (top-k trees, n-grams);
    for a stochastic drafter it gives up acceptance.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import expected_accepted, random_model
    >>> from specsim.drafts import topk_tree
    >>> from specsim.verifiers import deterministic_children
    >>> target, draft_model = random_model(3, 0), random_model(3, 1)
    >>> round(expected_accepted(deterministic_children, target, draft_model, 2, topk_tree((2, 2))), 6)
    0.569416
    """
    return _nodewise(tree, _deterministic_rule)


# --------------------------------------------------------------------------- SpecTr K-SEQ
def _kseq_parts(p, q, k, rho):
    m = np.minimum(q, p / rho)
    beta = float(m.sum())
    c = sum((1.0 - beta) ** j for j in range(k))  # geometric sum, not (1 - (1-beta)^k)/beta
    return m, beta, c, p - m * c


@functools.lru_cache(maxsize=65536)
def _kseq_rho_cached(pb: bytes, qb: bytes, k: int, tol: float) -> float:
    p, q = np.frombuffer(pb), np.frombuffer(qb)
    ok = lambda rho: _kseq_parts(p, q, k, rho)[3].min() >= -tol  # noqa: E731
    if k == 1 or ok(1.0):
        return 1.0
    grid = np.linspace(1.0, float(k), 65)
    # rho = k is feasible in exact arithmetic (p - min(q, p/k) c >= p (1 - c/k) >= 0); if rounding
    # hides it at tol = 0, k is returned
    hi_i = next((i for i, r in enumerate(grid) if ok(r)), len(grid) - 1)
    lo, hi = grid[hi_i - 1], grid[hi_i]
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return float(hi)


def kseq_rho(p, q, k: int, tol: float = 1e-13) -> float:
    """SpecTr's rho*: the smallest rho in [1, k] with a valid K-SEQ residual (docs/theory.md §6.4).

    beta(rho) = sum min(q, p/rho), c = sum_{j<k} (1 - beta)^j; valid iff
    p_y - min(q_y, p_y/rho) c >= 0 for every y.  Feasibility is not monotone in rho: a grid scan
    finds the first feasible bracket, then bisection; the feasible end is returned.

    Parameters: ``p`` target and ``q`` draft rows over the same V >= 2 tokens (the input
    contract of docs/design.md); ``k`` >= 1 drafts; ``tol`` (slack allowed on the residual's
    sign, a real in [0, 1e-3]).

    Returns: rho* as a ``float`` (cached per (p, q, k)).

    >>> kseq_rho([1.0, 0.0], [0.5, 0.5], 2)   # every rho in [1, 2] is valid here
    1.0
    >>> round(kseq_rho([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2), 6)
    1.456776
    """
    p, q = as_pair(p, q)
    check_int(k, "k", 1)
    return _kseq_rho_cached(p.tobytes(), q.tobytes(), k, check_real(tol, "tol", 0.0, 1e-3))


def _spectr_rule(tree, u, *, rho=None):
    p, q, draws = tree.p[u], tree.q[u], tree.draws[u]
    k = len(draws)
    rho = _kseq_rho_cached(p.tobytes(), q.tobytes(), k, 1e-13) if rho is None else rho
    m, beta, c, num = _kseq_parts(p, q, k, rho)
    descend: dict[int, float] = defaultdict(float)
    reach = 1.0
    for x in draws:
        a = _accept_prob(p[x] / rho, q[x])
        descend[x] += reach * a
        reach *= 1.0 - a
    return descend, reach, normalize(np.maximum(num, 0.0), p)


def _spectr_law(tree):
    """SpecTr k-sequential selection, K-SEQ (Sun et al., "SpecTr", arXiv 2310.15141), node-wise.

    At node u with k i.i.d. draws x_1..x_k from q: rho = rho*(p, q, k) (:func:`kseq_rho`);
    accept the first x_i passing U_i rho q(x_i) < p(x_i); if none passes, Y ~ r with
    r(y) = [p_y - min(q_y, p_y/rho) c(beta)] / (1 - beta)^k.  Drafts through the accepted token
    stay i.i.d., so K-SEQ runs again over the survivors (the accepted child's draws).
    Acceptance per node 1 - (1 - beta(rho))^k.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.verifiers.tree import multidraft_acceptance
    >>> round(multidraft_acceptance("spectr", [1/3, 2/3], [2/3, 1/3], 2), 6)   # K = 2 drafts
    0.81142
    """
    return _nodewise(tree, _spectr_rule)


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


def _khisti_rule(tree, u, *, against_q=False):
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

    >>> from specsim.verifiers.tree import multidraft_acceptance
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

        def inside(x):
            a, b = np.array(self.pieces[x]).T
            mid = 0.5 * (lo + hi)
            return ((mid[:, None] >= a) & (mid[:, None] < b)).any(axis=1)

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
        pieces[j] = tuple(zip(a[taken].tolist(), b[taken].tolist()))
        keep_a, keep_b = np.r_[fa, np.maximum(x1, fa)], np.r_[np.minimum(fb, x0), fb]
        keep = keep_b > keep_a
        o = np.argsort(keep_a[keep], kind="stable")
        fa, fb = keep_a[keep][o], keep_b[keep][o]
    pieces[order[-1]] = tuple(zip(fa.tolist(), fb.tolist()))
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

    >>> from specsim.verifiers.tree import multidraft_acceptance
    >>> round(multidraft_acceptance("khisti_optimal", [1/3, 2/3], [2/3, 1/3], 2), 6)   # 8/9 = alpha*
    0.888889
    """
    return _nodewise(tree, _khisti_optimal_rule)

# --------------------------------------------------------------------------- greedy draft law (Hu et al.)
def _greedy_multidraft_rule(tree, u):
    p, q, draws = tree.p[u], tree.q[u], tree.draws[u]
    hub, x = draws[:-1], draws[-1]
    rest = q.copy()
    rest[list(hub)] = 0.0
    if rest.any():
        rest = normalize(rest, q)
        a = _accept_prob(p[x], rest[x])
    else:  # the hub ends in q = 0 tokens and holds all of q: no last draw (drafts._greedy_hub)
        hub, a = draws, 0.0
    R = normalize(np.maximum(p - rest, 0.0), p)
    descend: dict[int, float] = defaultdict(float)
    descend[x] += a
    for g in hub:
        descend[g] += (1.0 - a) * R[g]
    row = R.copy()
    row[list(hub)] = 0.0
    return descend, (1.0 - a) * max(0.0, 1.0 - float(R[list(hub)].sum())), normalize(row, p)


def _greedy_multidraft_law(tree):
    """Verification for Hu et al.'s greedy draft law ("Towards Optimal Multi-draft Speculative
    Decoding", arXiv 2502.18779; SpecHub, arXiv 2411.05289, at K = 2), node-wise.

    At a node whose draws are the K - 1 most likely tokens G of q followed by one token x drawn
    from q' = q restricted to V minus G: speculative sampling of x against p with q'
    (accept with min(1, p(x)/q'(x)), else Y ~ norm((p - q')_+)); a residual sample landing in G
    is a drafted child, so verification descends into it; otherwise Y is emitted.  Token law
    q' a + (1 - beta) residual = p, so lossless; acceptance
    p(G) + sum_{x not in G} min(p_x, q_x / (1 - q(G))), the optimum for this draft law.  Needs
    ``greedy_drafts(K)`` (a single draw per node is ordinary speculative sampling).  SpecHub's
    code also force-accepts when p(hub) > 1 - 1e-3 (biased); that shortcut is not reproduced.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import expected_accepted, iid
    >>> from specsim.drafts import greedy_drafts
    >>> from specsim.verifiers.tree import greedy_multidraft
    >>> round(expected_accepted(greedy_multidraft, iid([1/3, 2/3]), iid([2/3, 1/3]), 1, greedy_drafts(2)), 6)
    1.0
    """
    return _nodewise(tree, _greedy_multidraft_rule)


# --------------------------------------------------------------------------- traversal
#: The traversal variants (docs/theory.md §6.3-6.3.1): what a node's draws are and how its draft row Ms is
#: updated.  "merged": the trie, children in order of first appearance, Ms masked on rejection (SWOR-RRS
#: at depth 1); "repeats": the trie, every draw in order an attempt (a repeat tries its child again as a
#: bare leaf), Ms = q(.|node) throughout (RRS); "paths": every draw its own subtree, Ms = q(.|node).
TRAVERSAL_VARIANTS = ("merged", "repeats", "paths")


def _traversal_law(tree, *, variant="merged", parent_update="odds", recompute=True, mask=None, skip_repeats=False):
    """Traversal verification (Weng et al., arXiv 2505.12398), docs/theory.md §6.3 reconstruction.

    Node u carries Mb_u = p(.|u), Ms_u = q(.|u) and a weight w (w_root = 1); a child c is entered
    with w_c = min(1, w_u Mb_u(x_c)/Ms_u(x_c)) from its parent's current state.  Leaves are tried
    first (post-order, children in order of first appearance in the draws): a tried node is
    accepted with probability w (emit path(node), Y ~ Mb); else at its parent b,
    R = (w_b Mb_b - Ms_b)_+, S = sum R, Mb_b = R/S, Ms_b(x) <- 0 renormalised, and
    w_b = S/(S + 1 - w_b) (1 if the denominator is 0); the root is tried last and emits
    Y ~ Mb_root.  On a chain this is block verification; at depth 1 it is Sequoia's SWOR-RRS.
    Lossless when each node's children are drawn without replacement, or i.i.d. with repeats
    merged into one child (docs/theory.md §6.3.1: a subtree entered with weight w accepts with
    probability w on average).  :data:`traversal_repeats` and :data:`traversal_paths` are the
    variants for i.i.d. draws that keep the repeats.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import parse_drafting
    >>> from specsim.verifiers import traversal
    >>> cert = check_lossless(traversal, random_model(3, 0), random_model(3, 1), 2, parse_drafting("binary:2"))
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 1.157828)
    """
    # private switches for specsim.testing / the tests: parent_update="mass" and recompute=False are
    # lossy mutants of the parent update; mask / skip_repeats override the variant's row update
    if variant not in TRAVERSAL_VARIANTS:
        raise ValueError(f"variant must be one of {TRAVERSAL_VARIANTS}, got {variant!r}")
    mask = variant == "merged" if mask is None else mask
    n, draws = tree.num_nodes, tree.draws
    child = [{tree.tokens[c]: c for c in kids} for kids in tree.children]
    width = [len(draws[u]) for u in range(n)]  # draws per copy of a node ("paths")
    for u in range(1, n):
        m = draws[tree.parent[u]].count(tree.tokens[u])
        if variant == "paths" and width[u] % m:
            raise ValueError(f"traversal_paths: node {u} is reached by {m} draws but has {width[u]} draws, "
                             f"which do not split evenly among them")
        width[u] //= m if variant == "paths" else 1
    stale = np.ones(n)  # the weights before any rejection (recompute=False)
    for c in range(1, n):
        b, x = tree.parent[c], tree.tokens[c]
        stale[c] = _traversal_child_weight(stale[b:b + 1], tree.p[b, x:x + 1], tree.q[b, x:x + 1])[0]
    out: list[Outcome] = []
    reach = [1.0]

    def visit(u, w, lo, hi):
        """Try the subtree of node u (its draws lo..hi-1), entered with weight w."""
        wb, Mb, Ms = np.array([w]), tree.p[u][None], tree.q[u][None]
        for i in range(lo, hi):
            if reach[0] <= 0:
                return
            x = draws[u][i]
            c = child[u][x]
            repeat = x in draws[u][lo:i]
            if repeat and (variant == "merged" or skip_repeats):
                continue  # merged: one child per token; skip_repeats: the lossy mutant
            wc = float(_traversal_child_weight(wb, Mb[:, x], Ms[:, x])[0]) if recompute else stale[c]
            if variant == "paths":
                j = draws[u][:i].count(x)  # copy j of c owns draws j*width .. (j+1)*width - 1 of c
                visit(c, wc, j * width[c], (j + 1) * width[c])
            elif not repeat:
                visit(c, wc, 0, len(draws[c]))
            else:  # "repeats": the child again, as a bare leaf (its subtree was rejected)
                out.append(Outcome(reach[0] * wc, c, tree.p[c]))
                reach[0] *= 1.0 - wc
            wb, Mb, Ms = _traversal_reject(wb, Mb, Ms, np.array([x]), u == 0, mask=mask, parent_update=parent_update)
        if reach[0] <= 0:
            return
        out.append(Outcome(reach[0] * float(wb[0]), u, normalize(Mb[0], tree.p[u])))
        reach[0] *= 1.0 - float(wb[0])

    visit(0, 1.0, 0, len(draws[0]))
    return [o for o in out if o.prob > 0]


def _traversal_repeats_law(tree):
    """Traversal verification on i.i.d. draws with the repeats kept (docs/theory.md §6.3.1).

    The reconstruction of :data:`traversal` on the merged trie, with two changes that make every
    draw an attempt: a node's draft row stays Ms = q(.|node) (no masking: every draw is
    distributed as q whatever was rejected before it), and the draws are taken in drafting
    order; a repeat of a token whose child subtree was rejected tries that child again as a bare
    leaf (accepted with its entry weight, emitting p(.|child)), and every draw, repeats
    included, updates the node's state R = (w Mb - q)_+, Mb = R/S, w = S/sum (q - w Mb)_+.  At
    depth 1 this is SpecInfer's recursive rejection sampling; on a chain it is block
    verification.  Lossless on every process whose nodes draw i.i.d. from q(.|node).

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers import traversal_repeats
    >>> cert = check_lossless(traversal_repeats, random_model(3, 0), random_model(3, 1), 2, iid_paths(2))
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 0.593639)
    """
    return _traversal_law(tree, variant="repeats")


def _traversal_paths_law(tree):
    """Traversal verification on the tree of draws: every i.i.d. draw its own subtree
    (docs/theory.md §6.3.1).

    The merged trie is unfolded: copy j of a node reached by m draws owns its draws
    j w..(j+1) w - 1 (w = draws per copy), so ``iid_paths(K)`` becomes K separate paths sharing
    the root, and duplicate siblings are tried as separate attempts, each with its own
    subtree.  Traversal runs on that tree with Ms = q(.|node) at every node (the next sibling
    is distributed as q whatever was rejected before it); outcomes name the trie node of the
    accepted prefix.  At depth 1 it is SpecInfer's recursive rejection sampling.  Lossless on
    every process whose nodes draw i.i.d. from q(.|node).

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers import traversal_paths
    >>> cert = check_lossless(traversal_paths, random_model(3, 0), random_model(3, 1), 2, iid_paths(2))
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 0.591378)
    """
    return _traversal_law(tree, variant="paths")


# --------------------------------------------------------------------------- GBV
def tree_paths(tree: DraftTree) -> list[tuple[int, ...]]:
    """The K ordered paths of a K-path trie, read off the draws: path i takes token
    draws[root][i], and a node's j-th draw continues the j-th path through it (docs/theory.md §6.7).

    Parameters: ``tree`` a :class:`~specsim.drafts.DraftTree` from ``iid_paths(K)``.

    Returns: a list of K tuples of node ids (root excluded); ``ValueError`` if the tree is not K
    full paths merged into a trie.

    >>> from specsim.drafts import iid_paths
    >>> from specsim.models import random_model
    >>> _, tree = next(iter(iid_paths(2).enumerate(random_model(3, 0), random_model(3, 1), 2)))
    >>> tree.draws[0], tree_paths(tree)      # both paths drafted token 0, then token 0
    ((0, 0), [(1, 2), (1, 2)])
    """
    K = len(tree.draws[0])
    L = tree.max_depth
    paths = []
    for i in range(K):
        node, idx, nodes = 0, i, []
        for _ in range(L):
            d = tree.draws[node]
            if idx >= len(d):
                raise ValueError("tree is not K full i.i.d. paths merged into a trie (draw counts)")
            t = d[idx]
            idx = d[:idx].count(t)
            node = next(c for c in tree.children[node] if tree.tokens[c] == t)
            nodes.append(node)
        if tree.children[node]:
            raise ValueError("tree is not K full i.i.d. paths merged into a trie (paths of unequal length)")
        paths.append(tuple(nodes))
    for u in range(1, tree.num_nodes):
        if tree.children[u] and len(tree.draws[u]) != tree.draws[tree.parent[u]].count(tree.tokens[u]):
            raise ValueError(f"tree is not K full paths merged into a trie: node {u} has "
                             f"{len(tree.draws[u])} draws but {tree.draws[tree.parent[u]].count(tree.tokens[u])} paths")
    return paths


def _gbv_key(p, q, capped):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # subnormal q: key inf
        s = np.where(q > 0, p / np.where(q > 0, q, 1.0), np.inf)
    return np.minimum(s, 1.0) if capped else s


def _power_gap(hi, gap, K):
    """hi^K - (hi - gap)^K in the stable form hi^K (-expm1(K log1p(-gap/hi)))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(hi > 0, hi ** K * -np.expm1(K * np.log1p(-np.minimum(gap / np.where(hi > 0, hi, 1.0), 1.0))),
                        0.0)


def _gbv_step(p, q, t, A, Qv, K, capped=False, mismatch=False):
    """Skewed rows qt(.|v) [N, V] at nodes v of N selected paths (rows p, q [N, V], next tokens
    t [N], A [N], Q(v) [N]) and (A, Q) of the children v.t (docs/theory.md §6.7)."""
    N, V = p.shape
    ar = np.arange(N)
    ids = np.broadcast_to(np.arange(V), (N, V))
    key = _gbv_key(p, q, capped)
    order = np.lexsort((ids, key) if mismatch else (-ids, key), axis=-1)
    qs = np.take_along_axis(q, order, axis=1)
    Fc = np.cumsum(qs, axis=1)
    row = np.empty((N, V))
    np.put_along_axis(row, order, _power_gap(A[:, None] + Qv[:, None] * Fc, Qv[:, None] * qs, K), axis=1)
    with np.errstate(invalid="ignore"):  # Q(v) = 0: a path of draft probability 0, dropped by callers
        row /= _power_gap(A + Qv, Qv, K)[:, None]
    pos = np.argmax(order == np.asarray(t)[:, None], axis=1)
    return row, A + Qv * (Fc[ar, pos] - qs[ar, pos]), Qv * q[ar, t]


@renamed_keyword("draft", "draft_model")
def gbv_path_model(draft_model: Model, K: int, capped: bool = False, target: Model | None = None) -> Model:
    """The law of the path GBV selects from K i.i.d. draft paths, as a draft model (docs/theory.md §6.7).

    qt(t|v) = [(A_v + Q(v) F_v(t))^K - (A_v + Q(v) F_v(t-))^K] / [(A_v + Q(v))^K - A_v^K] along the
    prefix v.  GBV on ``iid_paths(K)`` is block verification on a single path drawn from this model,
    so ``check_lossless(block, target, gbv_path_model(draft_model, K, target=target), L)`` gives
    GBV's exact law through the vectorised chain engine (tests compare it with the tree enumeration).

    Parameters: ``draft_model`` (``draft=`` is a deprecated spelling); ``K`` >= 1 paths;
    ``capped`` (key min(1, p/q)); ``target`` (required: the token order uses p/q).

    Returns: a :class:`~specsim.models.Model` over the same vocabulary (K = 1 gives the draft rows).

    >>> from specsim.models import random_model
    >>> target, draft_model = random_model(3, 0), random_model(3, 1)
    >>> gbv_path_model(draft_model, 2, target=target)(()).round(6).tolist()
    [0.277891, 0.089216, 0.632893]
    """
    if target is None:
        raise ValueError("gbv_path_model needs the target model (the selection order uses p/q)")
    check_model_pair(target, draft_model, 1)  # no draft length here: only the models are checked
    check_int(K, "K", 1)

    def row(prefix):
        A, Qv = np.zeros(1), np.ones(1)
        for i, t in enumerate(prefix):
            _, A, Qv = _gbv_step(target(prefix[:i])[None], draft_model(prefix[:i])[None], [t], A, Qv, K, capped)
            if Qv[0] <= 0:  # unreachable prefix (a token of draft probability 0): any valid row
                return draft_model(prefix)
        return _gbv_step(target(prefix)[None], draft_model(prefix)[None], [0], A, Qv, K, capped)[0][0]

    return Model(row, draft_model.V, f"gbv_path({draft_model.name}, K={K})")


def _gbv_law(tree, *, capped=False, mismatch=False, select_by_q=False):
    """Greedy multi-path block verification (Thomas & Pal, arXiv 2602.16961; docs/theory.md §6.7).

    From K i.i.d. paths merged into a trie, select x* = the lexicographic maximum under the token
    order of key s_v(t) = p(t|v)/q(t|v) (ties: lower token id ranks higher) by walking to the
    highest-ranked child L times.  Along x*, with Q(v) = prod q on v's path, F_v(t) = q-mass of
    tokens ranked at or below t, A_root = 0, A_{v.t} = A_v + Q(v) F_v(t-):
        qt(t|v) = [(A_v + Q(v) F_v(t))^K - (A_v + Q(v) F_v(t-))^K] / [(A_v + Q(v))^K - A_v^K]
    (the law of the selected path), then block verification on x* with qt in place of q.
    Stable form (A+Q)^K (-expm1(K log1p(-Q/(A+Q)))) in float64.  ``capped`` uses the key
    min(1, p/q) (ties galore); ``mismatch`` orders ties the other way in qt than in selection —
    the hazard of docs/theory.md §6.7 (lossy); ``select_by_q`` (mutant) selects by q, not by
    the key.  Needs K i.i.d. full paths (``iid_paths``).

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.verifiers.tree import multidraft_acceptance
    >>> round(multidraft_acceptance("gbv", [1/3, 2/3], [2/3, 1/3], 2), 6)   # 8/9, the optimum of §6.6
    0.888889
    """
    tree_paths(tree)  # validates the K-path structure
    K = len(tree.draws[0])
    V = tree.V
    node, path = 0, [0]
    while tree.children[node]:
        s = tree.q[node] if select_by_q else _gbv_key(tree.p[node], tree.q[node], capped)
        node = max(tree.children[node], key=lambda c: (s[tree.tokens[c]], -tree.tokens[c]))
        path.append(node)
    L = len(path) - 1
    qt = np.empty((L, V))
    A, Qv = np.zeros(1), np.ones(1)
    for i in range(L):
        v, t = path[i], tree.tokens[path[i + 1]]
        row, A, Qv = _gbv_step(tree.p[v][None], tree.q[v][None], [t], A, Qv, K, capped, mismatch)
        qt[i] = row[0]
    draft = tuple(tree.tokens[c] for c in path[1:])
    P = np.stack([tree.p[c] for c in path])
    return [Outcome(o.prob, path[o.accepted], o.next_dist) for o in block.law(draft, P, qt)]


def _gbv_plain(tree):
    return _gbv_law(tree)


def _gbv_capped(tree):
    """GBV with the capped key min(1, p/q) and ties ordered differently in selection and in the
    skewed law (the reference-code hazard of docs/theory.md §6.7): LOSSY negative control
    whenever two drafted tokens tie at key 1.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers.tree import gbv_capped
    >>> check_lossless(gbv_capped, random_model(3, 0), random_model(3, 1), 2, iid_paths(2)).lossless
    False
    """
    return _gbv_law(tree, capped=True, mismatch=True)


# --------------------------------------------------------------------------- laws over trees of one shape
def tree_shape(tree: DraftTree) -> tuple:
    """What fixes a tree verifier's decision sequence: the parents and, at every node, the child
    node of each draw in drafting order (repeats kept), but not the tokens or rows.

    Trees with equal shapes differ only in their tokens and rows, so a ``batch_law`` can treat a
    group of them with arrays [N, nodes, V]; the exact engine groups the enumerated trees by this
    key (docs/theory.md §2.1).

    Parameters: ``tree`` a :class:`~specsim.drafts.DraftTree`.

    Returns: ``(parent, draw_nodes)``, two tuples (``draw_nodes[u]`` node ids of u's draws).

    >>> from specsim.drafts import iid_paths
    >>> from specsim.models import random_model
    >>> trees = [t for _, t in iid_paths(2).enumerate(random_model(3, 0), random_model(3, 1), 1)]
    >>> [t.draws[0] for t in trees[:4]], [tree_shape(t)[1][0] for t in trees[:4]]
    ([(0, 0), (0, 1), (0, 2), (1, 0)], [(1, 1), (1, 2), (1, 2), (1, 2)])
    """
    nodes = []
    for u, kids in enumerate(tree.children):
        by_token = {tree.tokens[c]: c for c in kids}
        nodes.append(tuple(by_token[t] for t in tree.draws[u]))
    return tree.parent, tuple(nodes)


def _accept_probs(r, q):
    """Vectorised :func:`_accept_prob`: P(U q < r) = min(1, r/q); q = 0 accepts iff r > 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q > 0, np.minimum(1.0, r / np.where(q > 0, q, 1.0)), (r > 0).astype(float))


def _normalize_rows(v, fallback):
    """Row-wise :func:`specsim._validate.normalize`: v / sum(v), ``fallback`` where sum(v) <= 0."""
    s = v.sum(axis=-1, keepdims=True)
    return np.where(s > 0, v / np.where(s > 0, s, 1.0), fallback)


def _first_path_batch(tree, tokens, p, q):
    """:data:`specinfer_first_path` over N trees of one shape: RRS over every root draw, then over
    the first draw at deeper nodes, each node's reach carried down (same rule as the per-tree law)."""
    N, n, V = p.shape
    ar = np.arange(N)
    draw_nodes = tree_shape(tree)[1]
    reach = np.zeros((N, n))
    reach[:, 0] = 1.0
    probs, dists = np.zeros((N, n)), p.copy()  # a leaf emits its own row
    for u in range(n):  # parents precede children
        if not tree.children[u]:
            probs[:, u] = reach[:, u]
            continue
        R, D = p[:, u], q[:, u]
        left = np.ones(N)
        for c in (draw_nodes[u] if u == 0 else draw_nodes[u][:1]):
            x = tokens[:, c]
            a = _accept_probs(R[ar, x], D[ar, x])
            reach[:, c] += reach[:, u] * left * a
            left = left * (1.0 - a)
            R = _normalize_rows(np.maximum(R - D, 0.0), R)
        probs[:, u] = reach[:, u] * left
        dists[:, u] = R
    return probs, dists


def _traversal_child_weight(wb, mb, ms):
    """w_c = min(1, w_b Mb_b(x_c) / Ms_b(x_c)) for arrays [N] (docs/theory.md §6.3); 1 when
    Ms_b(x_c) = 0 < w_b Mb_b(x_c), 0 when w_b Mb_b(x_c) = 0 (as the per-tree law)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # subnormal Ms: ratio inf, min 1
        ratio = np.minimum(1.0, wb * mb / np.where(ms > 0, ms, 1.0))
    return np.where((wb > 0) & (mb > 0) & (ms > 0), ratio, np.where((wb > 0) & (mb > 0), 1.0, 0.0))


def _traversal_reject(wb, Mb, Ms, x, root, mask=True, parent_update="odds"):
    """Node b's state after its child of token x is rejected, for rows [N, V] (docs/theory.md §6.3):
    R = (w_b Mb_b - Ms_b)_+, Mb_b <- R / S (kept when S = 0), Ms_b(x) <- 0 renormalised (``mask``;
    i.i.d. draws keep Ms_b = q, §6.3.1), and w_b <- S / sum (Ms_b - w_b Mb_b)_+ (1 when that
    deficit is 0); the root keeps w = 1.  ``parent_update="mass"`` (w_b <- S) is a lossy mutant.

    Returns: ``(w_b, Mb_b, Ms_b)``, new arrays."""
    ar = np.arange(len(x))
    R = np.maximum(wb[:, None] * Mb - Ms, 0.0)
    S = R.sum(axis=1)
    # S + 1 - w_b = sum (Ms_b - w_b Mb_b)_+; the direct sum avoids cancellation when w_b ~ 1
    deficit = np.maximum(Ms - wb[:, None] * Mb, 0.0).sum(axis=1)
    Mb = np.where(S[:, None] > 0, R / np.where(S > 0, S, 1.0)[:, None], Mb)
    if mask:
        Ms = Ms.copy()
        Ms[ar, x] = 0.0
        Ms = _normalize_rows(Ms, Ms)
    if not root:
        if parent_update == "mass":
            wb = np.minimum(1.0, S)
        else:
            wb = np.where(deficit > 0, np.minimum(1.0, S / np.where(deficit > 0, deficit, 1.0)), 1.0)
    return wb, Mb, Ms


_TRAVERSAL_NEEDS = frozenset({"swor", "iid"})
_TRAVERSAL_IID_NEEDS = frozenset({"iid"})  # Ms = q(.|node) needs every draw distributed as q


def _traversal_process_law(drafting, target: Model, draft_model: Model, L: int, emitted, depth_mass, *,
                           variant: str = "merged") -> int | None:
    """Traversal verification's law summed over node states instead of whole trees
    (docs/theory.md §6.3.1), for processes whose nodes draw their children independently from
    q(.|node), without replacement or i.i.d. (``variant`` as in :data:`TRAVERSAL_VARIANTS`);
    ``None`` on other processes (the engine then groups trees by shape).

    A node is entered in the state (prefix, number of draws that reached it, entry weight w) with
    a weight W.  For each option of its draws (probability px), the draws are attempted in turn
    ("merged": the distinct children x_1..x_k in order of first appearance); attempt j enters its
    child with weight W px prod_{i<j} (1 - w_i) and entry weight w_j = min(1, w Mb(x_j)/Ms(x_j))
    from the node's state after the earlier attempts were rejected ("repeats": a repeated token
    is a bare leaf instead, emitting p(.|prefix x_j) with that weight times w_j; "paths": every
    draw enters its own copy, reached by one draw); the node itself then emits Mb with weight
    W px prod_i (1 - w_i) w', w' its final weight (1 at the root); a leaf at depth L emits
    p(.|prefix) with weight W w.  The factor 1 - w_i is the mean rejection probability of
    attempt i's whole subtree, whatever it holds (§6.3.1), and sibling subtrees are independent
    given the node's draws: the sum equals the per-tree law.
    """
    needs = _TRAVERSAL_NEEDS if variant == "merged" else _TRAVERSAL_IID_NEEDS
    if not (hasattr(drafting, "node_options") and meets_needs(drafting, needs)):
        return None
    V = target.V
    ptab, qtab = target.table(L), draft_model.table(L - 1)
    level: dict[tuple[int, int, float], float] = {(0, 1, 1.0): 1.0}
    evaluations = 0
    for d in range(L + 1):
        nxt: dict[tuple[int, int, float], float] = {}
        out = emitted[d + 1].reshape(-1, V)
        for (code, mult, w), weight in level.items():
            options = drafting.node_options(qtab[d][code], mult, d, L) if d < L else []
            if not options or not options[0][0]:
                out[code] += weight * w * ptab[d][code]
                depth_mass[d] += weight * w
                continue
            # attempts: "merged" the distinct tokens with their multiplicities (orders of the repeats summed),
            # else the draws themselves, in order; grouped by length for the arrays below
            groups: dict[int, dict[tuple, float]] = {}
            for xs, px in options:
                if variant == "merged":
                    kids = tuple(dict.fromkeys(xs))
                    key = (kids, tuple(xs.count(x) for x in kids))
                else:
                    key = (xs, tuple(xs.count(x) if variant == "repeats" else 1 for x in xs))
                by_len = groups.setdefault(len(key[0]), {})
                by_len[key] = by_len.get(key, 0.0) + px
            for k, merged in groups.items():
                evaluations += len(merged)
                X = np.array([key[0] for key in merged], dtype=np.int64)
                mults = [key[1] for key in merged]
                px = np.fromiter(merged.values(), float, len(merged))
                N = len(px)
                ar = np.arange(N)
                Mb, Ms = np.tile(ptab[d][code], (N, 1)), np.tile(qtab[d][code], (N, 1))
                wv, reach = np.full(N, w), weight * px
                bare = emitted[d + 2].reshape(-1, V)  # a repeat's bare leaf, at depth d + 1
                for j in range(k):
                    x = X[:, j]
                    wc = _traversal_child_weight(wv, Mb[ar, x], Ms[ar, x])
                    repeat = (X[:, :j] == x[:, None]).any(axis=1) if variant == "repeats" else np.zeros(N, bool)
                    for i in range(N):
                        if reach[i] > 0 and wc[i] > 0:
                            child = code * V + int(x[i])
                            if repeat[i]:  # the child again, as a bare leaf
                                bare[child] += reach[i] * wc[i] * ptab[d + 1][child]
                                depth_mass[d + 1] += reach[i] * wc[i]
                            else:
                                state = (child, mults[i][j], float(wc[i]))
                                nxt[state] = nxt.get(state, 0.0) + float(reach[i])
                    reach = reach * (1.0 - wc)
                    wv, Mb, Ms = _traversal_reject(wv, Mb, Ms, x, d == 0, mask=variant == "merged")
                stop = reach * wv
                out[code] += stop @ Mb
                depth_mass[d] += float(stop.sum())
        level = nxt
    return evaluations


def _traversal_batch(tree, tokens, p, q):
    """:data:`traversal` over N trees of one shape: the order in which leaves are tried and parents
    updated depends only on the shape, so the per-tree loop runs once on arrays [N, ...]."""
    N, n, V = p.shape
    ar = np.arange(N)
    draw_nodes = [tuple(dict.fromkeys(nodes)) for nodes in tree_shape(tree)[1]]  # first-appearance order
    Mb, Ms = p.copy(), q.copy()
    alive = [True] * n
    w = np.ones((N, n))
    below = [[c for c in range(b + 1, n) if _is_below(tree, c, b)] for b in range(n)]

    def reweight(c):
        b, x = tree.parent[c], tokens[:, c]
        w[:, c] = _traversal_child_weight(w[:, b], Mb[ar, b, x], Ms[ar, b, x])

    for c in range(1, n):
        reweight(c)
    probs, dists = np.zeros((N, n)), np.zeros((N, n, V))
    reach = np.ones(N)
    while True:
        a = 0
        while True:
            nxt = next((c for c in draw_nodes[a] if alive[c]), None)
            if nxt is None:
                break
            a = nxt
        if a == 0:
            probs[:, 0] = reach
            dists[:, 0] = _normalize_rows(Mb[:, 0], p[:, 0])
            return probs, dists
        probs[:, a] = reach * w[:, a]
        dists[:, a] = _normalize_rows(Mb[:, a], p[:, a])
        reach = reach * (1.0 - w[:, a])
        alive[a] = False
        b = tree.parent[a]
        w[:, b], Mb[:, b], Ms[:, b] = _traversal_reject(w[:, b], Mb[:, b], Ms[:, b], tokens[:, a], b == 0)
        for c in below[b]:
            if alive[c]:
                reweight(c)


def _is_below(tree, c, b):
    """Whether node c lies in the subtree of node b (c != b)."""
    while c > b:
        c = tree.parent[c]
    return c == b


def _gbv_batch_law(tree, tokens, p, q, *, capped=False, mismatch=False):
    """GBV over N trees of one shape: each tree's selected path walked with arrays (the path
    depends on the rows, the shape fixes the candidates), then block verification's batched law
    on the N selected paths with the skewed rows."""
    tree_paths(tree)  # the K-path structure is a property of the shape
    N, n, V = p.shape
    ar = np.arange(N)
    K = len(tree.draws[0])
    width = max(len(k) for k in tree.children)
    kids = np.full((n, width), -1)
    for u, ks in enumerate(tree.children):
        kids[u, :len(ks)] = ks
    L = tree.max_depth
    path = np.zeros((N, L + 1), dtype=np.int64)
    qt = np.empty((N, L, V))
    A, Qv = np.zeros(N), np.ones(N)
    for i in range(L):
        v = path[:, i]
        cand = kids[v]                                          # [N, width], -1 = no child
        tok = np.where(cand >= 0, tokens[ar[:, None], np.maximum(cand, 0)], V)
        key = np.take_along_axis(np.pad(_gbv_key(p[ar, v], q[ar, v], capped), ((0, 0), (0, 1)),
                                        constant_values=-np.inf), tok, axis=1)
        first = np.lexsort((tok, -key), axis=-1)[:, 0]          # highest key, then lowest token
        path[:, i + 1] = cand[ar, first]
        qt[:, i], A, Qv = _gbv_step(p[ar, v], q[ar, v], tok[ar, first], A, Qv, K, capped, mismatch)
    drafts = tokens[ar[:, None], path[:, 1:]]
    probs_k, dists_k = block.batch_law(drafts, p[ar[:, None], path], qt)
    probs, dists = np.zeros((N, n)), np.zeros((N, n, V))
    probs[ar[:, None], path] = probs_k
    dists[ar[:, None], path] = dists_k
    return probs, dists


def _gbv_capped_batch(tree, tokens, p, q):
    return _gbv_batch_law(tree, tokens, p, q, capped=True, mismatch=True)


def _k_paths(drafting) -> int | None:
    """K when ``drafting`` is K i.i.d. full paths merged into a trie (the chain is K = 1), else None."""
    from ..drafts import Chain, TreeProcess

    if isinstance(drafting, Chain):
        return 1
    if isinstance(drafting, TreeProcess) and drafting.mode == "iid" and all(k == 1 for k in drafting.widths[1:]):
        return drafting.widths[0]
    return None


def gbv_path_arrays(target: Model, draft_model: Model, L: int, K: int, capped: bool = False,
                    mismatch: bool = False):
    """Every path GBV can select from K i.i.d. draft paths, with its probability and the rows block
    verification uses on it (docs/theory.md §6.7), for all V^L paths at once.

    Q(x) = prod_i qt(x_i | x^{1:i}) with the skewed rows of the selection order (key p/q, or
    min(1, p/q) if ``capped``; ties to the lower id); the verification rows are the same qt, or,
    with ``mismatch``, the rows computed with ties ordered the other way (``gbv_capped``'s hazard).
    GBV's law on ``iid_paths(K)`` is block verification's on these weighted paths.

    Parameters: ``target``, ``draft_model`` (models over the same V), ``L`` >= 1, ``K`` >= 1,
    ``capped``, ``mismatch``.

    Returns: ``(drafts int [N, L], Q [N], p [N, L+1, V], qt [N, L, V])`` over the N paths with
    Q > 0 (the arrays of :meth:`specsim.drafts.Chain.arrays`).

    >>> from specsim.models import random_model
    >>> drafts, Q, p, qt = gbv_path_arrays(random_model(3, 0), random_model(3, 1), 2, K=2)
    >>> drafts.shape, round(float(Q.sum()), 12), qt.shape
    ((9, 2), 1.0, (9, 2, 3))
    """
    L = check_model_pair(target, draft_model, L)
    check_int(K, "K", 1)
    V = target.V
    ptab, qtab = target.table(L), draft_model.table(L - 1)
    codes = np.arange(V ** L)
    digits = np.stack([(codes // V ** (L - 1 - i)) % V for i in range(L)], axis=1)
    prefix = [codes // V ** (L - i) for i in range(L + 1)]
    Q = np.ones(codes.size)
    qt = np.empty((codes.size, L, V))
    A, Qv = np.zeros(codes.size), np.ones(codes.size)
    A_ver = A
    for i in range(L):
        P_i, Q_i, t = ptab[i][prefix[i]], qtab[i][prefix[i]], digits[:, i]
        sel, A_next, Qv_next = _gbv_step(P_i, Q_i, t, A, Qv, K, capped)
        with np.errstate(invalid="ignore"):
            Q = Q * sel[np.arange(codes.size), t]
        if mismatch:
            qt[:, i], A_ver, _ = _gbv_step(P_i, Q_i, t, A_ver, Qv, K, capped, True)
        else:
            qt[:, i] = sel
        A, Qv = A_next, Qv_next
    keep = Q > 0
    prows = np.stack([ptab[i][prefix[i][keep]] for i in range(L + 1)], axis=1)
    return digits[keep], Q[keep], prows, qt[keep]


def _gbv_path_model(target, draft_model, L, drafting, *, capped=False, mismatch=False):
    K = _k_paths(drafting)
    if K is None:
        return None
    return block, gbv_path_arrays(target, draft_model, L, K, capped, mismatch)


def _gbv_capped_path_model(target, draft_model, L, drafting):
    return _gbv_path_model(target, draft_model, L, drafting, capped=True, mismatch=True)


# --------------------------------------------------------------------------- samplers
def _rrs_sample(tree, rng, without_replacement):
    u = 0
    while True:
        if not tree.children[u]:
            return u, draw_token(tree.p[u], rng)
        R, D = tree.p[u], tree.q[u].copy()
        by_token = {tree.tokens[c]: c for c in tree.children[u]}
        draws = _distinct(tree, u, "sequoia") if without_replacement else tree.draws[u]
        for x in draws:
            if rng.random() * D[x] < R[x]:
                u = by_token[x]
                break
            R = normalize(np.maximum(R - D, 0.0), R)
            if without_replacement:
                D[x] = 0.0
                if D.sum() <= 0:
                    return u, draw_token(R, rng)
                D = D / D.sum()
        else:
            return u, draw_token(R, rng)


def _deterministic_sample(tree, rng):
    u = 0
    while tree.children[u]:
        p = tree.p[u]
        kids = tuple(dict.fromkeys(tree.draws[u]))
        coin, cum = rng.random(), 0.0
        nxt = None
        for x in kids:
            cum += p[x]
            if coin < cum:
                nxt = next(c for c in tree.children[u] if tree.tokens[c] == x)
                break
        if nxt is None:
            r = p.copy()
            r[list(kids)] = 0.0
            return u, draw_token(normalize(r, p), rng)
        u = nxt
    return u, draw_token(tree.p[u], rng)


def _specinfer_sample(tree, rng):
    return _rrs_sample(tree, rng, without_replacement=False)


def _sequoia_sample(tree, rng):
    return _rrs_sample(tree, rng, without_replacement=True)


# --------------------------------------------------------------------------- registry
specinfer = tree_verifier("specinfer", needs={"iid"}, sampler=_specinfer_sample,
                          node_rule=_specinfer_rule)(_specinfer_law)
specinfer_first_path = tree_verifier("specinfer_first_path", needs={"iid"}, node_rule=_first_path_rule,
                                     batch_law=_first_path_batch)(_specinfer_first_path_law)
sequoia = tree_verifier("sequoia", needs={"swor"}, sampler=_sequoia_sample,
                        node_rule=_sequoia_rule)(_sequoia_law)
traversal = tree_verifier("traversal", needs=_TRAVERSAL_NEEDS, batch_law=_traversal_batch,
                          process_law=_traversal_process_law)(_traversal_law)
traversal_repeats = tree_verifier("traversal_repeats", needs=_TRAVERSAL_IID_NEEDS, process_law=functools.partial(
    _traversal_process_law, variant="repeats"))(_traversal_repeats_law)
traversal_paths = tree_verifier("traversal_paths", needs=_TRAVERSAL_IID_NEEDS, process_law=functools.partial(
    _traversal_process_law, variant="paths"))(_traversal_paths_law)
deterministic_children = tree_verifier("deterministic_children", needs={"any"}, sampler=_deterministic_sample,
                                       node_rule=_deterministic_rule)(_deterministic_law)
spectr = tree_verifier("spectr", needs={"iid"}, node_rule=_spectr_rule)(_spectr_law)
khisti = tree_verifier("khisti", needs={"iid"}, node_rule=_khisti_rule)(_khisti_law)
#: Today's ``khisti`` under a name that says what it is: self-normalised p/q weights.
khisti_self_normalised = khisti
khisti_optimal = tree_verifier("khisti_optimal", needs={"iid"}, node_rule=_khisti_optimal_rule)(_khisti_optimal_law)
gbv = tree_verifier("gbv", needs={"paths"}, doc=_gbv_law.__doc__, batch_law=_gbv_batch_law,
                   path_model=_gbv_path_model)(_gbv_plain)
gbv_capped = tree_verifier("gbv_capped", needs={"paths"}, lossless=False, batch_law=_gbv_capped_batch,
                          path_model=_gbv_capped_path_model)(_gbv_capped)
greedy_multidraft = tree_verifier("greedy_multidraft", needs={"greedy"},
                                  node_rule=_greedy_multidraft_rule)(_greedy_multidraft_law)

#: The tree verifiers, by name, in the order tables list them; each carries its ``needs``.
TREE_VERIFIERS: dict[str, Verifier] = {v.name: v for v in (
    specinfer, specinfer_first_path, sequoia, traversal, traversal_repeats, traversal_paths, deterministic_children,
    spectr, khisti, khisti_optimal, gbv, gbv_capped, greedy_multidraft)}


def verifiers_for(drafting) -> list[Verifier]:
    """Every registered verifier v with ``v.applies_to(drafting)``: "any" in v.needs or
    v.needs ∩ draft_laws(drafting) ≠ ∅ (chain verifiers need ``{"chain"}``, a single path from q).

    Negative controls are included; check ``Verifier.lossless``.

    Parameters: ``drafting`` a draft process (:mod:`specsim.drafts`).

    Returns: a list of :class:`~specsim.verifiers.base.Verifier`, chain verifiers first, each
    registry in table order.

    >>> from specsim.drafts import iid_paths, swor_tree
    >>> [v.name for v in verifiers_for(iid_paths(2))][:2]
    ['specinfer', 'specinfer_first_path']
    >>> [v.name for v in verifiers_for(swor_tree(2))]
    ['sequoia', 'traversal', 'deterministic_children']
    """
    return [v for v in (*CHAIN_VERIFIERS.values(), *TREE_VERIFIERS.values()) if v.applies_to(drafting)]


def multidraft_acceptance(verifier_name: str, p, q, K: int, replacement: bool = True) -> float:
    """Token-level acceptance of K drafts at one position: P(tau = 1) for L = 1, exactly.

    alpha = sum_D Pr(D) sum_{outcomes accepting a child} prob, computed by the exact engine with
    context-independent rows p, q and ``iid_paths(K)`` (``replacement=True``) or ``swor_tree(K)``.
    Comparable with the multi-draft optimum (docs/theory.md §6.6).

    Parameters: ``verifier_name`` a key of :data:`TREE_VERIFIERS`; ``p``, ``q`` rows over the
    same V >= 2 tokens; ``K`` >= 1 drafts; ``replacement``.

    Returns: alpha as a ``float``; ``ValueError`` for an unknown name or a verifier that does not
    apply to that draft law (e.g. ``sequoia`` with replacement).

    >>> multidraft_acceptance("specinfer", [1, 0], [0.5, 0.5], 2)
    0.75
    """
    from ..exact import expected_accepted  # exact imports this package: resolve at call time

    if verifier_name not in TREE_VERIFIERS:
        raise ValueError(f"unknown tree verifier {verifier_name!r}; choose from {sorted(TREE_VERIFIERS)}")
    p, q = as_pair(p, q)
    check_int(K, "K", 1)
    verifier = TREE_VERIFIERS[verifier_name]
    drafting = iid_paths(K) if replacement else swor_tree(K)
    if not verifier.applies_to(drafting):
        raise ValueError(f"{verifier_name} needs drafts {sorted(verifier.needs)}, not "
                         f"{'with' if replacement else 'without'} replacement")
    return expected_accepted(verifier, iid(p, "p"), iid(q, "q"), 1, drafting)
