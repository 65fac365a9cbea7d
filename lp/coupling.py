"""Maximal coupling and optimal multi-draft acceptance (docs/theory.md §3 and 6.6).

Single draft: the best acceptance of any lossless token-level verifier is the maximal-coupling
value sum_v min(p_v, q_v) = 1 - TV(p, q).  K drafts: the optimum is the optimal-transport value::

    alpha* = max_f sum f   s.t.  f(S, y) >= 0 (y in S),  sum_{y in S} f(S, y) <= Q(S),
                                 sum_{S contains y} f(S, y) <= p(y)
           = min_{H subset of V} [ p(H) + 1 - Q_sub(H) ],   Q_sub(H) = P(set of drafts subset of H),

with Q(S) = P(set of drafts = S).  The primal is solved with cvxpy (``multidraft_lp``), the dual
exactly along sorted prefixes (``multidraft_bound``) and by brute force over all 2^V subsets
(``multidraft_bound_bruteforce``).

References: Leviathan, Kalman, Matias, arXiv 2211.17192; Sun et al., "SpecTr", arXiv 2310.15141;
Hu et al., "Towards Optimal Multi-draft Speculative Decoding", arXiv 2502.18779; Khisti et al.,
arXiv 2410.18234.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from specsim import _jit
from specsim._validate import _scale, as_distribution, as_pair, check_bool, check_int, check_real, pair_sums

from ._race import wor_subset_quadrature
from ._solvers import LP_SOLVERS, check_solvers, solve

__all__ = ["Coupling", "maximal_coupling", "draft_set_law", "MultidraftSolution", "multidraft_lp",
           "MultidraftBound", "multidraft_bound", "multidraft_bound_bruteforce", "union_bound",
           "solve_lp", "STEP_RANGE", "auto_step"]


def solve_lp(problem, solver: str | Sequence[str] | None = None) -> str:
    """Solve a cvxpy linear program through the solver ladder of :func:`lp._solvers.solve`.

    ``solver`` names one cvxpy solver or a sequence tried in order (default HiGHS, then Clarabel);
    each runs through its ladder of tolerances (tight first).  Only status ``optimal`` counts.

    Parameters: ``problem`` (``cvxpy.Problem``), ``solver``.

    Returns: the name of the solver used (``str``); ``lp._solvers.SolveError`` (a ``RuntimeError``)
    listing every attempt if none reaches ``optimal``; ``TypeError``/``ValueError`` for a
    ``solver`` that is not an installed cvxpy solver name or a sequence of them.

    >>> import cvxpy as cp
    >>> x = cp.Variable(nonneg=True)
    >>> solve_lp(cp.Problem(cp.Minimize(x), [x >= 0.25]), "CLARABEL"), round(float(x.value), 6)
    ('CLARABEL', 0.25)
    """
    return solve(problem, check_solvers(LP_SOLVERS if solver is None else solver))


# --------------------------------------------------------------------------- maximal coupling
@dataclass(frozen=True)
class Coupling:
    """An optimal coupling of the draft law q (rows) and the target p (columns).

    ``value`` = P(X = Y) = sum_v min(p_v, q_v); ``plan[x, y]`` has row sums q and column sums p;
    ``tv`` = 1 - value; ``method`` is ``"closed"`` or the LP solver's name.
    """

    value: float
    plan: np.ndarray = field(repr=False)
    tv: float
    method: str


def maximal_coupling(p, q, method: str = "closed", solver: str | None = None) -> Coupling:
    """Maximal coupling: max_{pi in Pi(q, p)} sum_v pi(v, v) = sum_v min(p_v, q_v) = 1 - TV(p, q).

    Closed form (the plan of speculative sampling, Leviathan et al., arXiv 2211.17192):
    pi = diag(min(p, q)) + (q - p)_+ (p - q)_+^T / TV.  ``method="lp"`` solves the transport LP
    with cvxpy instead (HiGHS, Clarabel fallback; ``solver`` names one explicitly).

    Parameters: ``p`` target, ``q`` draft (probability vectors over the same V >= 2 tokens, the input contract of docs/design.md),
    ``method`` (``"closed"`` or ``"lp"``), ``solver`` (for ``"lp"``: a cvxpy solver name or sequence).

    Returns: :class:`Coupling` (``value``, ``plan`` with row sums q and column sums p).

    >>> c = maximal_coupling([1/3, 2/3], [2/3, 1/3])
    >>> round(c.value, 6), c.plan.round(6).tolist()
    (0.666667, [[0.333333, 0.333333], [0.0, 0.333333]])
    """
    p, q = as_pair(p, q)
    if method == "closed":
        m = np.minimum(p, q)
        value = float(m.sum())
        tv = float(0.5 * np.abs(p - q).sum())
        plan = np.diag(m)
        if tv > 0:
            plan = plan + np.outer(np.maximum(q - p, 0.0), np.maximum(p - q, 0.0)) / tv
        return Coupling(value, plan, tv, "closed")
    if method != "lp":
        raise ValueError(f"method must be 'closed' or 'lp', got {method!r}")
    solvers = check_solvers(LP_SOLVERS if solver is None else solver)
    import cvxpy as cp

    V = p.size
    pi = cp.Variable((V, V), nonneg=True)
    prob = cp.Problem(cp.Maximize(cp.trace(pi)), [cp.sum(pi, axis=1) == q, cp.sum(pi, axis=0) == p])
    used = solve(prob, solvers)
    plan = np.clip(np.asarray(pi.value, dtype=np.float64), 0.0, None)
    value = float(np.trace(plan))
    return Coupling(value, plan, 1.0 - value, used)


# --------------------------------------------------------------------------- draft-set law
def _check_K(q: np.ndarray, K, replacement: bool, support: bool = True) -> int:
    """Validate K; return the number of draws that land in distinct tokens' worth of the law
    (``support=False``: K itself, without the pass over q that counts its support)."""
    K = check_int(K, "K", 1)
    if not replacement:
        if K > q.size:
            raise ValueError(f"K={K} drafts without replacement need K <= V={q.size}")
        return min(K, int(np.count_nonzero(q))) if support else K  # the support runs out: the set is supp q
    return K


def _iid_set_prob(qS: np.ndarray, K: int) -> float:
    """P(the set of K i.i.d. draws = S) = K! [x^K] prod_{s in S} (e^{q_s x} - 1), by a positive-term
    product of truncated series: the inclusion-exclusion sum over subsets cancels to nothing when
    one mass is subnormal next to others of order 1."""
    poly = np.zeros(K + 1)
    poly[0] = 1.0
    coeff = np.array([1.0 / math.factorial(n) for n in range(K + 1)])   # x^n / n!
    for qv in qS:
        term = coeff * qv ** np.arange(K + 1)
        term[0] = 0.0                                                   # each token drawn at least once
        poly = np.convolve(poly, term)[:K + 1]
    return float(math.factorial(K) * poly[K])


def draft_set_law(q, K: int, replacement: bool = True) -> tuple[tuple[tuple[int, ...], ...], np.ndarray]:
    """Exact law Q(S) = P(set of the K drafts = S) over the sets S it can produce.

    With replacement (i.i.d.): Q(S) = sum over counts n_s >= 1 with sum_s n_s = K of the multinomial
    K! prod_{s in S} q_s^{n_s} / n_s!, for |S| <= K (positive terms only).
    Without replacement (successive sampling): |S| = min(K, |supp q|) and
    Q(S) = sum over orderings (s_1..s_K) of S of prod_j q(s_j) / r_j, with r_j the draft mass of
    the tokens not yet drawn, summed directly (never 1 - q(s_1) - ... - q(s_{j-1}), which is 0 or
    noise once a mass is within rounding of 1; docs/theory.md §6.6).  When K exceeds |supp q|
    the draws stop once the support is exhausted, so S = supp q.  Cost C(V, K) sets, so for
    small V only.

    Parameters: ``q`` draft distribution (the input contract of docs/design.md: float16..float64
    rows or lists, validated and renormalised by ``specsim._validate``), ``K`` >= 1 drafts (an
    integer), ``replacement`` (a bool: i.i.d. if True).

    Returns: ``(sets, probs)``: a tuple of sorted token-id tuples and their probabilities.

    >>> sets, probs = draft_set_law([0.5, 0.5], 2)
    >>> sets, probs.tolist()
    (((0,), (1,), (0, 1)), [0.25, 0.25, 0.5])
    >>> sets, probs = draft_set_law([0.5, 1e-300, 0.5 - 1e-300], 3, replacement=False)
    >>> sets, probs.tolist()
    (((0, 1, 2),), [1.0])
    """
    q = as_distribution(q, "q (draft)")
    replacement = check_bool(replacement, "replacement")
    k_eff = _check_K(q, K, replacement)
    supp = [int(v) for v in np.flatnonzero(q > 0)]
    sets, probs = [], []
    if replacement:
        for size in range(1, min(K, len(supp)) + 1):
            for S in itertools.combinations(supp, size):
                sets.append(S)
                probs.append(_iid_set_prob(q[list(S)], K))
    else:
        for S in itertools.combinations(supp, k_eff):
            total = 0.0
            for order in itertools.permutations(S):
                term, left = 1.0, set(supp)
                for s in order:
                    term *= q[s] / math.fsum(q[v] for v in left)     # the mass not yet drawn
                    left.discard(s)
                total += term
            sets.append(S)
            probs.append(total)
    probs = np.asarray(probs)
    return tuple(sets), probs / probs.sum()


# --------------------------------------------------------------------------- OT primal
@dataclass(frozen=True)
class MultidraftSolution:
    """Optimal multi-draft coupling from the flow LP.

    ``value`` = alpha*; ``sets[i]`` has probability ``set_prob[i]``; ``flow`` is sparse
    ``[len(sets), V]`` with ``flow[i, y]`` = f(S_i, y) (zero unless y in S_i); ``residual`` is
    r = norm(p - sum_S f(S, .)), the law emitted on rejection.  The optimal verifier, given the
    draft set S_i, outputs y in S_i with probability f(S_i, y) / Q(S_i), else y ~ r
    (:meth:`output_given_set`); it is lossless because sum_S f(S, y) + (1 - alpha*) r(y) = p(y).
    """

    value: float
    K: int
    replacement: bool
    sets: tuple[tuple[int, ...], ...] = field(repr=False)
    set_prob: np.ndarray = field(repr=False)
    flow: sp.csr_matrix = field(repr=False)
    residual: np.ndarray = field(repr=False)
    solver: str = ""

    def output_given_set(self, i: int) -> np.ndarray:
        """Law of the emitted token given draft set ``sets[i]``: f(S, .)/Q(S) + (1 - accept) r.

        ``i`` is an index 0..len(sets)-1 (``ValueError`` otherwise; negative indices are refused).
        """
        i = check_int(i, "i (draft-set index)", 0)
        if i >= len(self.sets):
            raise ValueError(f"i (draft-set index) must be < {len(self.sets)} (the number of draft sets), got {i}")
        acc = np.asarray(self.flow[i].todense()).ravel() / self.set_prob[i]
        return acc + max(0.0, 1.0 - acc.sum()) * self.residual


def multidraft_lp(p, q, K: int, replacement: bool = True, solver: str | None = None) -> MultidraftSolution:
    """Optimal multi-draft acceptance by the flow-form OT primal (docs/theory.md §6.6).

    max sum_{S, y in S} f(S, y)  s.t.  f >= 0,  sum_{y in S} f(S, y) <= Q(S),  sum_{S ni y} f(S, y) <= p(y),
    with Q(S) from :func:`draft_set_law` (i.i.d. drafts or successive sampling without replacement).
    Solved by cvxpy with HiGHS (Clarabel fallback, or the named ``solver``); sparse constraints.
    Size ~ K * C(V, K) variables: V ~ 100 at K = 2.  Hu et al., arXiv 2502.18779; SpecTr, arXiv 2310.15141.

    Parameters: ``p`` target, ``q`` draft (the input contract of docs/design.md), ``K`` drafts, ``replacement`` (a bool: i.i.d. if True),
    ``solver`` (a cvxpy solver name or sequence; default HiGHS, then Clarabel).

    Returns: :class:`MultidraftSolution` (``value`` = alpha*, the flow and the optimal verifier).

    >>> round(multidraft_lp([1, 0], [0.5, 0.5], 2).value, 6)   # Sequoia, App. F (docs/theory.md §12)
    0.75
    """
    import cvxpy as cp

    p, q = as_pair(p, q)
    solvers = check_solvers(LP_SOLVERS if solver is None else solver)
    sets, Q = draft_set_law(q, K, replacement)
    V = p.size
    rows = np.concatenate([np.full(len(S), i) for i, S in enumerate(sets)])
    toks = np.concatenate([np.asarray(S) for S in sets])
    n = rows.size
    A_set = sp.csr_matrix((np.ones(n), (rows, np.arange(n))), shape=(len(sets), n))
    A_tok = sp.csr_matrix((np.ones(n), (toks, np.arange(n))), shape=(V, n))
    f = cp.Variable(n, nonneg=True)
    prob = cp.Problem(cp.Maximize(cp.sum(f)), [A_set @ f <= Q, A_tok @ f <= p])
    used = solve(prob, solvers)
    fv = np.clip(np.asarray(f.value, dtype=np.float64), 0.0, None)
    # clip rounding so the flow stays feasible for both marginals
    flow = sp.csr_matrix((fv, (rows, toks)), shape=(len(sets), V))
    for scale_axis, cap in ((1, Q), (0, p)):
        tot = np.asarray(flow.sum(axis=scale_axis)).ravel()
        factor = np.where(tot > cap, cap / np.where(tot > 0, tot, 1.0), 1.0)
        flow = sp.csr_matrix(sp.diags(factor) @ flow) if scale_axis == 1 else sp.csr_matrix(flow @ sp.diags(factor))
    value = float(flow.sum())
    left = np.maximum(p - np.asarray(flow.sum(axis=0)).ravel(), 0.0)
    residual = left / left.sum() if left.sum() > 0 else p.copy()
    return MultidraftSolution(value, int(K), bool(replacement), sets, Q, flow, residual, used)


# --------------------------------------------------------------------------- exact dual bound
@dataclass(frozen=True)
class MultidraftBound:
    """alpha* = p(H) + 1 - Q_sub(H) at the optimal token set ``H`` (sorted int64 token ids).

    ``method``: ``"prefix"`` (sorted-prefix rule), ``"bruteforce"``; ``q_subset`` = Q_sub(H).
    """

    value: float
    H: np.ndarray = field(repr=False)
    K: int
    replacement: bool
    p_H: float
    q_subset: float
    method: str


def _prefix_order(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Tokens sorted by ascending p/q (q = 0 last: such tokens only cost p(H)).

    p/q is +inf where q = 0 < p and NaN where p = q = 0; argsort puts NaN after +inf, and tokens
    with p = q = 0 change neither p(H) nor q(H), so their place does not matter.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.argsort(p / q)


def _cumsum0(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """[0, x_0, x_0 + x_1, ...] without an intermediate array (into ``out`` of length len(x) + 1 if given)."""
    out = np.empty(x.size + 1) if out is None else out
    out[0] = 0.0
    np.cumsum(x, out=out[1:])
    return out


def _wor_miss_k2(qs: np.ndarray, Qc: np.ndarray, lam: np.ndarray, work: np.ndarray | None = None) -> np.ndarray:
    """1 - Q_sub(H_k) for two draws without replacement, in positive terms (docs/theory.md §6.6).

    1 - Q_sub(H) = lam(H) (1 + sum_{a in H} q_a / rest_a): the first draw leaves H, or it is a in H
    and the second leaves H; lam(H) = q(V minus H) = ``lam[k]`` and rest_a = sum_{b != a} q_b = (mass
    before a) + (mass after a) in prefix order, both summed directly.  The algebraically equal
    sum_{a in H} q_a (q(H) - q_a) / (1 - q_a) loses ~1e-16 / (1 - q_max).  The largest mass is kept
    apart: its rest may be subnormal, and its term q_a (lam(H) / rest_a) has lam(H) <= rest_a.
    ``work``: two rows of length >= len(Qc) to compute in (the result is the second).
    """
    n = qs.size
    if work is None:
        work = np.empty((2, n + 1))
    rest = np.add(Qc[:-1], lam[1:], out=work[0, :n])
    star = int(np.argmax(qs))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.divide(qs, rest, out=work[1, 1:n + 1])      # <= V for every token but the largest
    ratio[~(rest > 0)] = 0.0
    ratio[star] = 0.0
    miss = _cumsum0(ratio, work[1, :n + 1])                     # in place: shifts ratio by one
    miss += 1.0
    miss *= lam
    if rest[star] > 0:
        miss[star + 1:] += qs[star] * (lam[star + 1:] / rest[star])
    return np.minimum(miss, 1.0, out=miss)


def _iid_miss(lam: np.ndarray, K: int) -> np.ndarray:
    """1 - (1 - lam)^K = -expm1(K log1p(-lam)): accurate when lam (the mass outside H) is small."""
    with np.errstate(divide="ignore"):                          # lam = 1: log1p(-1) = -inf, exactly right
        return -np.expm1(K * np.log1p(-np.minimum(lam, 1.0)))


#: Allowed log-t steps of the race quadrature: at 0.25 (the default up to K = 5, :func:`auto_step`)
#: the trapezoid error exp(-pi^2/step) is ~1e-17; below 0.01 nothing is gained and the grid grows without bound.
STEP_RANGE = (0.01, 1.0)

#: The cheap lower bound on Q_sub is evaluated on this many prefixes either side of the most
#: optimistic one (any prefix's lower bound gives a valid cut-off; a far one only prunes less).
_BOUND_WINDOW = 2048


def multidraft_bound(p, q, K: int, replacement: bool = True, step: float | None = None) -> MultidraftBound:
    """Exact optimal multi-draft acceptance by the dual over sorted prefixes (docs/theory.md §6.6).

    alpha* = min_{H subset of V} [p(H) + 1 - Q_sub(H)], minimised over the V + 1 prefixes of the
    tokens sorted by ascending p/q (Algorithm 6.6 AlphaIID with replacement; the sorted-prefix
    theorem of docs/theory.md §6.6 without, also checked against brute force over all 2^V subsets
    at V <= 8, K <= 5; Hu et al., arXiv 2502.18779).  The objective is evaluated as
    p(H) + (1 - Q_sub(H)) with the second term a sum of positive terms built from lam(H) =
    q(V minus H) (a reverse cumulative sum, accurate when small), never as 1 minus a probability
    near 1:

    - with replacement, 1 - q(H)^K = -expm1(K log1p(-lam(H)));
    - without replacement (successive sampling), K = 2: lam(H) (1 + sum_{a in H} q_a / sum_{b != a} q_b);
    - K >= 3: the exponential-race integral of :mod:`lp._race` on a log-t grid (trapezoid rule,
      step ``step``, error ~exp(-pi^2/step)), each factor written with the remaining mass.

    Accuracy against exact rational arithmetic (tests/lp/test_exact_rationals.py) on rows with
    1 - max q down to 2^-52 and subnormal entries: <= 1e-15.  The quadrature matches exact
    enumeration of Q_sub to 1e-10 on every prefix in the tests (measured <= 1e-14 at V <= 8); at
    V = 3000 step 0.25 agrees with step 0.05 to ~1e-14 (step 0.35 is off by up to 2e-9); for
    uniform q at V = 151,936 it matches C(|H|, K)/C(V, K) to 2e-12 at step 0.25 and K = 8, to
    <= 1e-13 at the default step :func:`auto_step` (K = 3..15).  For K >= 3 only prefixes whose
    cheap lower bound can beat the best cheap upper bound are integrated, and the common part of
    their prefixes is summarised once per grid point (see :func:`lp._race.wor_subset_quadrature`).
    Without replacement no full sort is made either (K >= 2, V >= 4096: :func:`_wor_bound_head`,
    docs/theory.md §6.6): only the tokens of the buckets that can hold the optimum are sorted and
    summed.  With numba (the ``fast`` extra, :mod:`specsim._jit`) the full-row passes (bucketing
    and bucket sums, the block/segment split, the block's sums and moments), the chord screen
    and the race recursion are compiled (:mod:`lp._race_kernels`; ~5 s of compilation on the
    first call of a process without an on-disk cache, well under 1 s with one).  At V = 151,936,
    CPU time against an AVX-512 argsort of the row (``python benchmarks/issue27.py --only 1``,
    eight runs on a shared 2-core machine, load average 1-3.5): K = 2 0.49-0.68x, K = 3..8
    0.93-1.11x with a uniform draft and 1.11-1.63x with an LLM-like one (K = 4 the slowest,
    1.39-1.63x: 2,431 prefixes integrated); the numpy path 1.18-1.35x, 2.2-2.7x and 3.3-5.1x.

    With replacement no full sort is made (:func:`_iid_bound_bucketed`, docs/theory.md §6.6
    "without a full sort"): tokens with p/q > K are dropped, the rest bucketed by the bits of p/q,
    and only the few buckets that can hold the optimum are sorted, within 1e-13 of exact integer
    arithmetic on random, tied, one-hot, subnormal and near-one-hot rows
    (tests/lp/test_bucketed_bound.py).  The rows are checked but not copied
    (:func:`specsim._validate.pair_sums`: numpy's sum of each row; compiled, the signs are checked
    by the bound's first pass, which reads every entry): the compiled passes divide by the sums as
    they read (tests/lp/test_bound_from_raw_rows.py).  At V = 151,936 on an LLM-like row, against
    one AVX-512 argsort of p/q (``python benchmarks/issue27.py --only 1``, CPU time, shared 2-core
    machine, load average ~1.2): compiled (numba installed) 0.20-0.24x from validated rows,
    0.24-0.27x for this call with its input check (K = 2 the slowest); the numpy path 0.58-0.69x
    and 0.69-0.81x.

    Parameters: ``p`` target, ``q`` draft (probability rows under the input contract of
    docs/design.md), ``K`` >= 1 drafts (an integer), ``replacement`` (a bool: i.i.d. drafts if
    True, else successive sampling; needs K <= V, and if K > |supp q| the draws stop when the
    support is exhausted, so the set is supp q), ``step`` the quadrature's log-t step, a real
    number in :data:`STEP_RANGE` or ``None`` for :func:`auto_step` (used for K >= 3 without
    replacement).  Target mass where q = 0
    is never drafted and so never accepted: the bound counts it as lost (those tokens sort last
    and only enter H if nothing is gained by excluding them).

    Returns: :class:`MultidraftBound` (``value`` = alpha* and the optimal token set ``H``).

    >>> b = multidraft_bound([1, 0], [0.5, 0.5], 2)
    >>> b.value, b.H.tolist(), multidraft_bound([1, 0], [0.5, 0.5], 2, replacement=False).value
    (0.75, [1], 1.0)
    >>> q = [1 - 1e-15, 4e-16, 6e-16]          # 1 - q_max = 1e-15: the optimum 0.7 at H = {0, 1}
    >>> b = multidraft_bound([0.05, 0.05, 0.9], q, 2, replacement=False)
    >>> round(b.value, 12), b.H.tolist()
    (0.7, [0, 1])
    """
    given = p, q
    signs = replacement is not True or not _jit.enabled()
    if replacement is True:         # the checked rows and their sums: the bound's first pass normalises
        # (and, compiled, checks the signs: it reads every entry; a negative one is named first)
        p, q, *scales = pair_sums(p, q, signs=signs)
    else:                           # rows in a reused work block (fresh ones page-fault): none is kept
        p, q = as_pair(p, q, scratch="bound rows")
        scales = None
    try:
        replacement = check_bool(replacement, "replacement")
        k_eff = _check_K(q, K, replacement, support=replacement)
        step = None if step is None else check_real(step, "step", *STEP_RANGE)
    except (TypeError, ValueError):
        if not signs:
            pair_sums(*given)
        raise
    if replacement:
        bound = _iid_bound_bucketed(p, q, k_eff, scales)
        if bound is None:
            pair_sums(*given)
            raise AssertionError("multidraft_bound: a negative entry passed the input check")
        return bound
    if k_eff >= 2:                   # declined where K >= |supp q| (counted in the bucket pass)
        bound = _wor_bound_head(p, q, k_eff, k_eff, auto_step(k_eff) if step is None else step)
        if bound is not None:
            return bound
    k_eff = _check_K(q, K, replacement)
    return _sorted_prefix_bound(p, q, int(K), k_eff, replacement, auto_step(k_eff) if step is None else step)


def _sorted_prefix_bound(p: np.ndarray, q: np.ndarray, K: int, k_eff: int, replacement: bool,
                         step: float, order: np.ndarray | None = None,
                         valid: np.ndarray | None = None) -> MultidraftBound:
    """:func:`multidraft_bound` on validated rows along the prefixes of ``order`` (``k_eff`` from
    :func:`_check_K`).

    ``order`` defaults to one full sort of p/q: then this is the reference the bucketed paths are
    tested against (tests/lp/test_bucketed_bound.py).  Without replacement the order may come from
    :func:`_wor_bucketed_order`: every prefix of it is a token set (its objective is at least
    alpha*) and it holds every sorted prefix that can be optimal; ``valid`` marks the prefixes the
    K >= 3 quadrature has to consider (None: all).
    """
    if order is None:
        order = _prefix_order(p, q)
    n = p.size
    # the O(V) rows in one block: each fresh 1.2 MB array would be a new mapping that page-faults
    work = np.empty((8, n + 1))
    ps, qs = np.take(p, order, out=work[0, :n]), np.take(q, order, out=work[1, :n])
    Pc, Qc = _cumsum0(ps, work[2]), _cumsum0(qs, work[3])
    lam = work[4]                                                # q(V minus H_k), accurate when small
    np.cumsum(qs[::-1], out=lam[n - 1::-1])
    lam[n] = 0.0
    # miss[k] = 1 - Q_sub(H_k), always as a sum of positive terms; the objective is Pc + miss
    if replacement or k_eff == 1:
        miss = _iid_miss(lam, k_eff)
    elif k_eff == int(np.count_nonzero(qs)):
        miss = (lam > 0.0).astype(np.float64)                  # the set is all of supp q
    else:
        miss2 = _wor_miss_k2(qs, Qc, lam, work[5:7])
        if k_eff == 2:
            miss = miss2
        else:
            miss = _wor_miss_race(Pc, qs, Qc, lam, miss2, k_eff, step, valid)
    obj = np.add(Pc, miss, out=work[7])
    k = int(np.argmin(obj))
    mask = np.zeros(p.size, dtype=bool)
    mask[order[:k]] = True
    H = np.flatnonzero(mask)                                     # sorted ids in O(V)
    return MultidraftBound(min(float(obj[k]), 1.0), H, int(K), replacement,
                           float(Pc[k]), 1.0 - float(miss[k]), "prefix")


def auto_step(K: int) -> float:
    """The default log-t step of the race quadrature for K draws without replacement.

    The trapezoid rule's error grows with K: the integrand rises like t^K at small t, so it is
    sharper in log t.  For a uniform draft at V = 151,936 (where C(|H|, K)/C(V, K) gives the exact
    Q_sub) step 0.25 leaves 1.2e-13 at K = 6, 1.7e-12 at K = 8, 1.9e-11 at K = 10 and 5e-10 at
    K = 15; step 0.2 leaves <= 1e-13 up to K = 15 and step 0.16 <= 5e-15.  Hence 0.25 up to
    K = 5, 0.2 up to K = 12, then 0.16.

    >>> auto_step(3), auto_step(8), auto_step(14)
    (0.25, 0.2, 0.16)
    """
    return 0.25 if K <= 5 else 0.2 if K <= 12 else 0.16


#: Bucketed i.i.d. bound: p/q is bucketed by its sign-free IEEE pattern shifted right by
#: 52 - _MANT_BITS (2^_MANT_BITS buckets per octave, monotone in the ratio for non-negative
#: floats); _N_BUCKETS buckets end at the bucket of K (64 octaves), smaller ratios share bucket 0.
_MANT_BITS = 6
_N_BUCKETS = 4096
#: np.bincount adds sequentially; each bucket's sum is spread over this many sub-bins (by token
#: id) and the sub-bins are added pairwise, so a bucket of 150,000 tied tokens is summed in runs
#: of ~4,700 terms.
_SUB_BINS = 32
#: Prefix sums over at most this many terms are sequential; longer ones go block by block.
_BLOCK = 64
#: A bucket of the i.i.d. bound is opened if its lower bound is within this of the best edge
#: objective: the edge objectives carry rounding of ~1e-15, and opening a few more costs little.
_OPEN_SLACK = 1e-14


def _blocked_cumsum0(x: np.ndarray) -> np.ndarray:
    """[0, x_0, x_0 + x_1, ...] with the error of ~(_BLOCK + len(x)/_BLOCK) additions, not len(x).

    Prefix sums inside blocks of :data:`_BLOCK` terms, plus the running total of the block sums
    (each block summed pairwise by ``np.sum``).  For non-negative x each entry is accurate
    relative to itself.

    >>> _blocked_cumsum0(np.array([1.0, 2.0, 3.0])).tolist()
    [0.0, 1.0, 3.0, 6.0]
    """
    n = x.size
    if n <= _BLOCK:
        return _cumsum0(x)
    blocks = np.concatenate((x, np.zeros(-n % _BLOCK))).reshape(-1, _BLOCK)
    inner = np.cumsum(blocks, axis=1)
    offset = _cumsum0(blocks.sum(axis=1))[:-1]
    out = np.empty(n + 1)
    out[0] = 0.0
    out[1:] = (inner + offset[:, None]).ravel()[:n]
    return out


@functools.lru_cache(maxsize=4)
def _sub_bin_pattern(V: int) -> np.ndarray:
    """Sub-bin of each token id, (0, 1, .., _SUB_BINS - 1, 0, 1, ..): built once per V."""
    pattern = np.arange(V, dtype=np.int64) & (_SUB_BINS - 1)
    pattern.flags.writeable = False
    return pattern


def _bucket_floor(top: float) -> int:
    """The shifted bit pattern that is bucket 0 when the last bucket holds ``top``."""
    return (int(np.float64(top).view(np.int64)) >> (52 - _MANT_BITS)) - (_N_BUCKETS - 1)


def _ratio_bucket_ids(r: np.ndarray, top: float, out: np.ndarray | None = None) -> np.ndarray:
    """Bucket of each ratio r = p/q: its sign-free IEEE pattern shifted right by 52 - _MANT_BITS
    (monotone in r), _N_BUCKETS buckets ending at the bucket of ``top`` (smaller ratios share
    bucket 0); r > top, inf and nan go to bucket _N_BUCKETS (dropped).  ``out``: int64 row."""
    shift = 52 - _MANT_BITS
    lo = _bucket_floor(top)
    ids = np.right_shift(r.view(np.int64), shift, out=out)   # (every step in place: at V ~ 1e5 a
    ids -= lo                                                # fresh array's page faults cost as
    np.maximum(ids, 0, out=ids)                              # much as the arithmetic)
    ids[~(r <= top)] = _N_BUCKETS
    return ids


def _bucket_sums(ids: np.ndarray, out: np.ndarray | None = None):
    """A function w -> per-bucket sums of w (length _N_BUCKETS + 1), each bucket summed over
    :data:`_SUB_BINS` sub-bins (by token id) added pairwise.  ``out``: int64 row for the sub-bins."""
    nb = _N_BUCKETS + 1
    sub = np.multiply(ids, _SUB_BINS, out=out)
    sub += _sub_bin_pattern(ids.size)

    def sums(w: np.ndarray) -> np.ndarray:
        return np.bincount(sub, w, nb * _SUB_BINS).reshape(nb, _SUB_BINS).sum(axis=1)
    return sums


def _iid_bound_bucketed(p: np.ndarray, q: np.ndarray, K: int,
                        scales: tuple[float, float] | None = None) -> MultidraftBound | None:
    """alpha* = min_k [Pc_k + 1 - Qc_k^K] over the prefixes in p/q order, without a full sort.

    The result of Algorithm 6.6 AlphaIID (docs/theory.md §6.6, "Without a full sort"):

    1. A token with p/q > K (or q = 0 < p) never belongs to an optimal H: adding it raises p(H) by
       p_v > K q_v >= (Q + q_v)^K - Q^K.  It is "dropped" (kept only in lam = q(V minus H)).
    2. The other tokens are bucketed by the top bits of the IEEE pattern of r = p/q (monotone in r,
       so every bucket edge is a prefix of the sorted order); two weighted bincounts give p and q
       per bucket, prefix sums give the objective at every edge (an upper bound on alpha*).  A
       prefix strictly inside bucket b holds q-mass x of it with p-mass >= r_low x (r_low: the
       bucket's smallest ratio), so its objective is >= P(edge b) + r_low x + miss(lam(edge b + 1)
       + Q_b - x), which is concave in x: a lower bound is its smaller value at x = 0 and x = Q_b.
       Only buckets whose lower bound reaches the best edge are opened.
    3. Inside the opened buckets the tokens are sorted and grouped into runs of equal r; a run is
       all in or all out (the objective is concave in the tied mass), so only run ends are
       evaluated.

    Sums are compensated against the length of the row: sub-binned bincounts and
    :func:`_blocked_cumsum0`; lam is summed from the top (accurate when small) and the miss
    1 - (1 - lam)^K is -expm1(K log1p(-lam)).

    With numba (specsim._jit) the same steps run compiled (:mod:`lp._bound_kernels`): one pass
    for the ratios and bucket ids, one for the per-bucket sums (plain over <= 71 tokens, then
    TwoSum-compensated, instead of sub-binned), one over the bucket ids to gather the opened
    buckets' tokens, one more for H.  Its first call in a fresh environment
    compiles for ~3 s (later processes load numba's cache).  The numpy steps below are the path
    without numba and the tests' reference.

    ``p``, ``q``: normalised rows (:func:`specsim._validate.as_pair`), or with ``scales`` =
    (s_p, s_q) checked rows and their sums (:func:`specsim._validate.pair_sums`), whose p / s_p
    and q / s_q the compiled passes form as they read them (no normalised copy) and the numpy
    path makes first.  ``None`` if the compiled pass meets an entry < 0 (rows checked with
    ``signs=False``).
    """
    if _jit.enabled():                                           # the same steps in compiled passes
        from . import _bound_kernels
        s_p, s_q = (1.0, 1.0) if scales is None else scales      # (x / 1.0 + 0.0 = x on as_pair's rows)
        if not (s_p > 0.0 and s_q > 0.0):                        # (a zero sum: only with atol = 1)
            p, q, s_p, s_q = _scale(p, s_p)[0], _scale(q, s_q)[0], 1.0, 1.0
        ids = _jit.work_block("iid_bound ids", 1, p.size, np.int16)[0]      # scratch, per thread
        tables = _jit.work_block("iid_bound tables", 2, 4 * (_N_BUCKETS + 1))
        value, p_H, lam_H, H = _bound_kernels.iid_bound(                  # (value -1: an entry < 0)
            _kernel_row(p), _kernel_row(q), float(s_p), float(s_q), int(K), _bucket_floor(K), _N_BUCKETS,
            52 - _MANT_BITS, _OPEN_SLACK, ids, tables[0], tables[1])
        del ids, tables
        if value < 0.0:
            return None
    else:
        if scales is not None:
            p, q = _scale(p, scales[0])[0], _scale(q, scales[1])[0]
        value, p_H, lam_H, H = _iid_bound_numpy(p, q, K)
    return MultidraftBound(min(value, 1.0), H, K, True, p_H, 1.0 - float(_iid_miss(np.array([lam_H]), K)[0]),
                           "prefix")


def _kernel_row(a: np.ndarray) -> np.ndarray:
    """``a`` as the compiled kernels take it: C-contiguous, writeable float64 (a read-only array
    is another numba signature, compiled again); copied only when it is not."""
    if a.dtype == np.float64 and a.flags.c_contiguous and a.flags.writeable:
        return a
    return np.array(a, dtype=np.float64, order="C")


def _bucket_lower_bounds(obj_edge: np.ndarray, P_edge: np.ndarray, lam_edge: np.ndarray, Qb: np.ndarray,
                         K: int) -> np.ndarray:
    """Lower bound on the objective of every prefix inside bucket b = 0.._N_BUCKETS - 1.

    Such a prefix holds q-mass x in [0, Qb] of the bucket with p-mass >= r_low x (r_low: the
    bucket's smallest ratio, 0 for bucket 0), so its objective is >= P_edge + r_low x +
    miss(lam_edge[b + 1] + Qb - x), concave in x: >= its value at x = 0 (edge b's objective) or
    at x = Qb.  (The compiled kernel computes the same per bucket.)"""
    r_low = ((np.arange(_N_BUCKETS, dtype=np.int64) + _bucket_floor(K)) << (52 - _MANT_BITS)).view(np.float64)
    r_low[0] = 0.0                                               # bucket 0 holds every smaller ratio
    return np.minimum(obj_edge[:-1], (P_edge[:-1] + r_low * Qb[:-1]) + _iid_miss(lam_edge[1:], K))


def _iid_bound_numpy(p: np.ndarray, q: np.ndarray, K: int) -> tuple[float, float, float, np.ndarray]:
    """:func:`_iid_bound_bucketed` in numpy calls (the path without numba, and the reference of
    the compiled one): (value, p(H), lam(H), H)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = p / q                                                # inf: q = 0 < p; nan: p = q = 0
    ids = _ratio_bucket_ids(r, K)                                # dropped: r > K, inf, nan
    nb = _N_BUCKETS + 1
    sums = _bucket_sums(ids)
    Pb, Qb = sums(p), sums(q)
    del sums
    P_edge = _blocked_cumsum0(Pb[:-1])                           # p of buckets < b, b = 0.._N_BUCKETS
    lam_edge = _blocked_cumsum0(Qb[::-1])[::-1][:nb]             # q of buckets >= b, dropped included
    obj_edge = P_edge + _iid_miss(lam_edge, K)
    lower = _bucket_lower_bounds(obj_edge, P_edge, lam_edge, Qb, K)
    opened = (lower <= obj_edge.min() + _OPEN_SLACK) & (Qb[:-1] > 0)   # q = 0 only for p = 0: all in at the edge
    ke = int(np.argmin(obj_edge))
    best = (float(obj_edge[ke]), float(P_edge[ke]), float(lam_edge[ke]))
    H = None
    if opened.any():
        table = np.zeros(nb, dtype=bool)
        table[:-1] = opened
        tok = np.flatnonzero(table[ids])
        rt = r[tok]
        o = np.argsort(rt)
        tok, rt = tok[o], rt[o]
        starts = np.flatnonzero(np.concatenate(([True], rt[1:] != rt[:-1])))    # runs of equal r
        p_run, q_run = np.add.reduceat(p[tok], starts), np.add.reduceat(q[tok], starts)
        bucket = ids[tok[starts]]
        C = _blocked_cumsum0(p_run)                             # p of the opened runs before run i
        G = _blocked_cumsum0(q_run[::-1])[::-1]                 # q of the opened runs from run i on
        first = np.searchsorted(bucket, bucket, side="left")    # first run of the same bucket
        after = np.searchsorted(bucket, bucket, side="right")   # first run of a later bucket
        # within-bucket parts by differences of the global sums: C[first] <= P_edge[bucket] and
        # G[after] <= lam_edge[bucket + 1], so the rounding stays relative to the value
        P_run = P_edge[bucket] + (C[1:] - C[first])
        lam_run = lam_edge[bucket + 1] + (G[1:] - G[after])
        obj_run = P_run + _iid_miss(lam_run, K)
        kr = int(np.argmin(obj_run))
        if obj_run[kr] < best[0]:
            best = (float(obj_run[kr]), float(P_run[kr]), float(lam_run[kr]))
            H = np.flatnonzero(r <= rt[starts[kr]])              # the prefix through that run
    if H is None:
        H = np.flatnonzero(ids < ke)
    return (*best, H)


#: Rows shorter than this are sorted outright without replacement (tests lower it to exercise the
#: bucketed order on rows small enough for exact references).
_WOR_BUCKET_MIN_V = 4096


class _WorBuckets(NamedTuple):
    """Bucket-level view of a row for K >= 2 draws without replacement (:func:`_wor_buckets`)."""

    r: np.ndarray            # p/q per token
    ids: np.ndarray          # bucket of p/q per token (_N_BUCKETS: dropped); int16 when compiled
    P_e: np.ndarray          # p of buckets < b, b = 0.._N_BUCKETS (the prefix at edge b)
    Q_e: np.ndarray          # q of buckets < b
    W_e: np.ndarray          # sum of q_a / (q(V) - q_a) over buckets < b, the largest mass apart
    lam_e: np.ndarray        # q of buckets >= b, dropped tokens included
    live: np.ndarray         # buckets [0, _N_BUCKETS) that can hold an optimal prefix
    live_edge: np.ndarray    # edges [0, _N_BUCKETS] that can be optimal
    qtot: float
    star: int                # the largest draft mass, and q(V) minus it summed directly
    rest_star: float
    work: np.ndarray         # [7, V] float rows; rows 2.. are free for the caller


def _wor_buckets(p: np.ndarray, q: np.ndarray, K: int) -> _WorBuckets | None:
    """Steps 1-2 of the bucketed order (docs/theory.md §6.6, "without a full sort"), shared by
    :func:`_wor_bucketed_order` and :func:`_wor_bound_head`.

    1. Drop: adding v to H raises Q_sub by at most P(v among the first K draws) <= q_v sum_{j<K} 1/R_j,
       R_j = q(V) - j max q (the mass left after j draws, at least).  A token with p/q above
       c = that sum (or q = 0 < p) only raises the objective and is never in an optimal H.
    2. Bucket the rest by the top bits of p/q (monotone, so bucket edges are sorted prefixes).
       Sub-binned weighted bincounts (with numba: one compiled pass,
       :func:`lp._race_kernels.wor_bucket_pass`) give p, q and sum q_a / (q(V) - q_a) per bucket
       (the largest mass apart, as in :func:`_wor_miss_k2`), hence at every edge the exact K = 2 miss and, for
       K >= 3, the bounds of :func:`_wor_miss_race`: optimistic 1 - Q_2 (1 - lam)^(K-2) and
       pessimistic with m_j <= j max_H q.  Inside bucket b, p(H) >= p(edge b) and the miss is at
       least that of edge b + 1: a bucket whose lower bound exceeds the best edge's upper bound
       (plus 1e-9 for the rounding of the bucket sums) is not live; nor is an edge whose own lower
       bound does.

    None when c is not finite (the K - 1 largest masses hold everything), when q has at most K
    nonzero entries (the draws take all of supp q) or V < :data:`_WOR_BUCKET_MIN_V`, where a sort
    costs little.
    """
    V = p.size
    if V < _WOR_BUCKET_MIN_V:
        return None
    qtot, star = float(q.sum()), int(np.argmax(q))
    qstar = float(q[star])
    room = (qtot - np.arange(K) * qstar) * (1.0 - 1e-12)         # R_j, rounded down
    if room[-1] <= 0.0:
        return None
    c = float(np.sum(1.0 / room)) * (1.0 + 1e-9)
    N = _N_BUCKETS
    # the O(V) rows in one block of >= 4 MB (huge pages): fresh 1.2 MB arrays each page-fault
    work = np.empty((7, V))
    r, ids = work[0], work[1].view(np.int64)
    if _jit.enabled():                                           # the pass and the edge bounds below, compiled
        from . import _race_kernels
        ids = work[1].view(np.int16)[:V]                         # (a quarter of the traffic of int64 ids)
        (Pb, Qb, Wb, qmax_b), rest_star, nnz = _race_kernels.wor_bucket_pass(
            p, q, _bucket_floor(c), 52 - _MANT_BITS, c, N, star, qtot, K > 2, r, ids)
        if nnz <= K:
            return None
        P_e, Q_e, W_e, lam_e, live, live_edge = _race_kernels.wor_edge_bounds(
            Pb, Qb, Wb, qmax_b, K, V, int(ids[star]), qstar, rest_star)
        return _WorBuckets(r, ids, P_e, Q_e, W_e, lam_e, live, live_edge, qtot, star, rest_star, work)
    if np.count_nonzero(q) <= K:
        return None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        np.divide(p, q, out=r)                                   # inf: q = 0 < p; nan: p = q = 0
    _ratio_bucket_ids(r, c, out=ids)
    sums = _bucket_sums(ids, out=work[2].view(np.int64))
    Pb, Qb = sums(p), sums(q)
    rest_star = float(q[:star].sum() + q[star + 1:].sum())
    t = np.subtract(qtot, q, out=work[3])
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(q, t, out=t)                                   # q_a / rest_a, q_a <= q(V) / 2
    t[star] = 0.0
    Wb = sums(t)
    del sums
    P_e, Q_e, W_e = _blocked_cumsum0(Pb[:N]), _blocked_cumsum0(Qb[:N]), _blocked_cumsum0(Wb[:N])
    lam_e = _blocked_cumsum0(Qb[::-1])[::-1][:N + 1]             # q of buckets >= b, dropped included
    miss2 = lam_e * (1.0 + W_e)
    sb = int(ids[star])
    if sb < N and rest_star > 0:
        miss2[sb + 1:] += qstar * (lam_e[sb + 1:] / rest_star)
    np.minimum(miss2, 1.0, out=miss2)
    if K == 2:
        upper = opt = miss2                                      # exact at the edges
    else:
        opt = miss2 + (1.0 - miss2) * _iid_miss(lam_e, K - 2)
        qmax_b = np.zeros(N + 1)
        np.maximum.at(qmax_b, ids, q)
        qmax_e = np.maximum.accumulate(np.concatenate(([0.0], qmax_b[:N])))   # max q over buckets < b
        slack = (V + K + 2) * np.finfo(np.float64).eps
        low_q = 1.0 - miss2
        for j in range(2, K):
            left = np.maximum(Q_e - j * qmax_e - slack, 0.0)
            with np.errstate(invalid="ignore"):
                low_q *= np.where(left > 0, left / (lam_e + left), 0.0)
        low_q[lam_e <= 0.0] = 1.0
        upper = 1.0 - low_q
    cap = float(np.min(P_e + upper)) + 1e-9
    live = (P_e[:-1] + opt[1:] <= cap) & (Qb[:N] > 0)            # q = 0 only for dropped tokens
    live_edge = P_e + opt <= cap
    return _WorBuckets(r, ids, P_e, Q_e, W_e, lam_e, live, live_edge, qtot, star, rest_star, work)


def _wor_bucketed_order(p: np.ndarray, q: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray | None]:
    """A token order for K >= 2 draws without replacement whose prefixes hold every sorted prefix
    that can be optimal, without a full sort; and the mask of those prefixes (docs/theory.md §6.6).

    The buckets of :func:`_wor_buckets`; tokens are grouped by bucket (a linear radix sort of
    16-bit ids) and only runs of live buckets are sorted by p/q.  The objective is then summed
    along this order exactly as along a full sort.  The previous default path, kept as a reference
    for :func:`_wor_bound_head` in the tests.  Returns ``(order, valid)``; ``(full argsort, None)``
    where :func:`_wor_buckets` declines.
    """
    b = _wor_buckets(p, q, K)
    if b is None:
        return _prefix_order(p, q), None
    N = _N_BUCKETS
    order = np.argsort(b.ids.astype(np.int16), kind="stable")   # radix sort: grouped by bucket
    starts = _cumsum0(np.bincount(b.ids, minlength=N + 1)).astype(np.int64)
    valid = np.zeros(p.size + 1, dtype=bool)
    valid[starts[:N + 1]] = True                                 # every edge
    edges = np.flatnonzero(np.diff(np.concatenate(([False], b.live, [False])).astype(np.int8)))
    for b0, b1 in zip(edges[::2], edges[1::2]):                  # runs of live buckets [b0, b1)
        a, e = int(starts[b0]), int(starts[b1])
        seg = order[a:e]
        order[a:e] = seg[np.argsort(b.r[seg])]
        valid[a:e + 1] = True
    return order, valid


def _stable_argsort(x: np.ndarray) -> np.ndarray:
    """``np.argsort(x, kind="stable")``: the (vectorised) default sort, and the stable one only
    where it finds a tie (~6x faster on ~1e4 distinct ratios)."""
    o = np.argsort(x)
    xs = x[o]
    if np.any(xs[1:] == xs[:-1]):
        o = np.argsort(x, kind="stable")
    return o


def _wor_bound_head(p: np.ndarray, q: np.ndarray, K: int, k_eff: int, step: float) -> MultidraftBound | None:
    """:func:`multidraft_bound` without replacement (2 <= k_eff; None if k_eff >= |supp q|) from the live buckets
    alone: no permutation or prefix sum of the whole row (docs/theory.md §6.6, "without a full sort").

    The buckets of :func:`_wor_buckets`; the live buckets and edges span a range [b_lo, b_hi) of
    buckets, and only its tokens (the "segment") are sorted by p/q.  Every prefix considered is
    H_j = {buckets < b_lo} + the first j segment tokens: p(H_j), q(H_j), lam and the K = 2 sum
    start from the compensated bucket sums at edge b_lo (lam from the sums at b_hi) and run along
    the segment.  For K >= 3 the screens and the quadrature see the tokens before the segment as an
    unordered block (:func:`_wor_miss_race`).  None where :func:`_wor_buckets` declines.
    """
    b = _wor_buckets(p, q, k_eff)
    if b is None:
        return None
    marks = np.flatnonzero(np.concatenate((b.live, [False])) | b.live_edge)
    b_lo = int(marks[0])
    b_hi = max(int(marks[-1]), int(np.flatnonzero(b.live)[-1]) + 1 if b.live.any() else 0)
    ids = b.ids
    fast = _jit.enabled()
    if fast:                                                     # block and segment in one pass
        from . import _race_kernels
        seg = np.empty(p.size, dtype=np.int64)
        nb, m, block_max = _race_kernels.split_head(ids, q, b_lo, b_hi, b.work[2], seg)
        seg = seg[:m]
    else:
        before = ids < b_lo                                      # the block (H's part below b_lo)
        seg = np.flatnonzero((ids < b_hi) & ~before)
        m, nb = seg.size, int(np.count_nonzero(before))
        np.compress(before, q, out=b.work[2, :nb])
        block_max = float(b.work[2, :nb].max()) if nb else 0.0
    seg = seg[_stable_argsort(b.r[seg])]
    joined = b.work[2, :nb + m]                                  # the block, then the segment
    if fast:                                                     # the sums below in one kernel
        qs = joined[nb:]
        Pc, Qc, lam, miss2 = _race_kernels.segment_sums(seg, p, q, float(b.P_e[b_lo]), float(b.Q_e[b_lo]),
                                                        float(b.W_e[b_lo]), float(b.lam_e[b_hi]), b.qtot, b.star,
                                                        bool(ids[b.star] < b_lo), b.rest_star, qs)
    else:
        Pc, Qc, lam, miss2, qs = _segment_sums(p, q, b, seg, b_lo, b_hi, joined[nb:])
    if k_eff == 2:
        miss = miss2
    else:
        miss = _wor_miss_race(Pc, qs, Qc, lam, miss2, k_eff, step, joined=joined, V=p.size, work=b.work[3:],
                              block_max=block_max)
    obj = Pc + miss
    k = int(np.argmin(obj))
    if fast:
        before = ids < b_lo
    before[seg[:k]] = True
    return MultidraftBound(min(float(obj[k]), 1.0), np.flatnonzero(before), int(K), False,
                           float(Pc[k]), 1.0 - float(miss[k]), "prefix")


def _segment_sums(p, q, b, seg, b_lo, b_hi, qs):
    """p(H_j), q(H_j), lam_j and the K = 2 miss along the sorted segment of :func:`_wor_bound_head`
    (numpy; :func:`lp._race_kernels.segment_sums` with numba).  Returns (Pc, Qc, lam, miss2, qs)."""
    m = seg.size
    ids = b.ids
    ps, qs = p[seg], np.take(q, seg, out=qs)
    Pc = _cumsum0(ps)
    Pc += b.P_e[b_lo]
    Qc = _cumsum0(qs)
    Qc += b.Q_e[b_lo]
    lam = np.zeros(m + 1)                                        # q(V minus H_j), from the top
    if m:
        np.cumsum(qs[::-1], out=lam[m - 1::-1])
    lam += b.lam_e[b_hi]
    with np.errstate(divide="ignore", invalid="ignore"):
        ts = qs / (b.qtot - qs)
    star_at = -1 if ids[b.star] < b_lo else int(np.flatnonzero(seg == b.star)[0]) if ids[b.star] < b_hi else m
    if 0 <= star_at < m:
        ts[star_at] = 0.0
    miss2 = _cumsum0(ts)
    miss2 += 1.0 + b.W_e[b_lo]
    miss2 *= lam
    if star_at < m and b.rest_star > 0:                          # the largest mass is in H_j for j > star_at
        miss2[star_at + 1:] += q[b.star] * (lam[star_at + 1:] / b.rest_star)
    np.minimum(miss2, 1.0, out=miss2)
    return Pc, Qc, lam, miss2, qs


def _chord_screen(Pc, qs, Qc, lam, miss2, K: int, at, optimistic, best_upper, block=None, V=None, scratch=None,
                  block_max=None):
    """Sharper screen for K >= 3 draws without replacement (docs/theory.md §6.6), on the prefixes ``at``.

    Q_K(H) = E[1{first two draws in H} prod_{j=2}^{K-1} g(m_j)], g(x) = (Q - x)/(T - x), Q = q(H),
    T = q(V), m_j the mass of the first j draws; g is concave and decreasing (g'(0) = -lam/T^2).
    With n = K - 2, M = min(2 max_H q, Q) >= m_2 and E2 = E[1{first two in H} m_2]:

    - above: m_j >= m_2 and g <= l, its tangent at 0 (l >= 0 on [0, M]), so the product is at
      most l(m_2)^n, convex, hence below its chord over [0, M]:
      Q_K <= Q_2 l(0)^n - (l(0)^n - l(M)^n) E2 / M;
    - below: m_j <= m_2 + (j - 2) max_H q, and g(x + i max_H q) >= a_i - s_i x on [0, M] (its
      chord; >= 0 where (n - 1) max_H q + M <= Q, elsewhere no bound is taken), and
      prod_i (a_i - s_i x) >= prod_i a_i - x sum_i s_i prod_{k != i} a_k for factors in [0, 1]:
      Q_K >= Q_2 prod_i a_i - E2 sum_i s_i prod_{k != i} a_k.

    E2 = (Q A_2 + S_2 A_1 - 2 A_3) / T with the prefix sums A_i = sum_{a in H} q_a^i / (T - q_a)
    and S_2 = sum_{a in H} q_a^2: the bounds are exact to first order in m_2, where the general
    screen takes m_2 = 2 max_H q.  Only when max q <= T/4; the margin covers sums of up to V
    terms.  ``block`` (None: empty): the draft masses of tokens before every prefix (in Qc, not
    in qs), ``V`` the row's length, ``scratch`` an optional row of >= len(block), ``block_max``
    its largest entry (None: computed).  Returns the sharper
    (optimistic, best_upper).
    """
    block = np.zeros(0) if block is None else block
    if block_max is None:
        block_max = float(block.max()) if block.size else 0.0
    n_tok = qs.size + block.size if V is None else V
    T_all = float(Qc[-1] + lam[-1])
    q_top = max(float(qs.max()) if qs.size else 0.0, block_max)
    if qs.size == 0 or q_top > 0.25 * T_all:
        return optimistic, best_upper
    margin = 4.0 * (n_tok + 10) * np.finfo(np.float64).eps
    if _jit.enabled():                                           # the same bounds in one pass
        from . import _race_kernels
        if block.size:
            b1, b2, b3, b0 = _race_kernels.chord_block_sums(block, T_all)
        else:
            b1 = b2 = b3 = b0 = 0.0
        upper_obj = np.empty(at.size)
        lower_best = _race_kernels.chord_bounds(Pc, qs, Qc, lam, miss2, K, at.astype(np.int64), b1, b2, b3, b0,
                                                block_max, upper_obj)
        upper_obj -= margin
        return np.maximum(optimistic, upper_obj), min(best_upper, lower_best + margin)
    # sums (and the running max) over the tokens before each prefix in ``at``: one reduceat per
    # quantity between consecutive prefixes, then running totals over those few segments
    bounds = np.concatenate(([0], at[(at > 0) & (at < qs.size)]))
    pick = np.searchsorted(bounds, at)                           # at = qs.size: past the last bound

    def before(x, x0, ufunc=np.add):                             # x0: the block's total
        seg = ufunc.reduceat(x, bounds)
        seg[0] = ufunc(seg[0], x0)
        return np.concatenate(([x0], ufunc.accumulate(seg)))[pick]

    rest = Qc[:-1] + lam[1:]                                     # T - q_a, summed directly
    u = qs / rest
    uq = u * qs
    ub = np.subtract(T_all, block, out=None if scratch is None else scratch[:block.size])   # masses <= T / 4
    np.divide(block, ub, out=ub)
    b1, b2 = ub.sum(), np.einsum("i,i", ub, block)               # (einsum: no threads)
    ub *= block
    b3, b0 = np.einsum("i,i", ub, block), np.einsum("i,i", block, block)
    A1, A2, A3, S2 = before(u, b1), before(uq, b2), before(uq * qs, b3), before(qs * qs, b0)
    Q, L = Qc[at], lam[at]
    T = Q + L
    E2 = np.maximum(Q * A2 + S2 * A1 - 2.0 * A3, 0.0) / T
    qm = before(qs, block_max, np.maximum)
    M = np.minimum(2.0 * qm, Q)
    Q2 = 1.0 - miss2[at]
    n = K - 2
    with np.errstate(divide="ignore", invalid="ignore"):
        def g(x):
            return np.where(x < Q, (Q - x) / (T - x), 0.0)

        l0, lM = Q / T, Q / T - (L / (T * T)) * M
        slope = np.where(M > 0, (l0 ** n - np.maximum(lM, 0.0) ** n) / M, 0.0)
        upper_qk = Q2 * l0 ** n - slope * E2
        a = [g(i * qm) for i in range(n)]
        s = [np.where(M > 0, (a[i] - g(i * qm + M)) / M, 0.0) for i in range(n)]
        prod_a = np.prod(a, axis=0)
        lin = sum(s[i] * np.prod([a[k] for k in range(n) if k != i], axis=0) for i in range(n))
        lower_qk = Q2 * prod_a - E2 * lin
        lower_qk[(n - 1) * qm + M > Q] = 0.0                     # a chord would go negative: none
    lower_qk[L <= 0.0] = 1.0                                     # H holds supp q
    optimistic = np.maximum(optimistic, Pc[at] + (1.0 - upper_qk) - margin)
    best_upper = min(best_upper, float(np.min(Pc[at] + (1.0 - lower_qk))) + margin)
    return optimistic, best_upper


def _wor_miss_race(Pc, qs, Qc, lam, miss2, K: int, step: float, valid: np.ndarray | None = None,
                   joined: np.ndarray | None = None, V: int | None = None,
                   work: np.ndarray | None = None, block_max: float | None = None) -> np.ndarray:
    """1 - Q_sub(H_k) for K >= 3 draws without replacement on the prefixes that can be optimal.

    Q_K = E[prod_{j<K} (q(H) - m_j) / (q(V) - m_j)], m_j = mass of the first j draws (all in H):
    m_j >= 0 gives Q_K <= Q_2 q(H)^{K-2} (an optimistic objective), m_j <= j max_H q a lower bound
    (a pessimistic one).  Any prefix's pessimistic objective caps the optimum; it is evaluated only
    near the most optimistic prefix, and only prefixes whose optimistic objective can reach that
    cap are integrated (:func:`lp._race.wor_subset_quadrature`).  Factors are written with the
    remaining mass, (q(H) - m) / (lam + q(H) - m), never 1 - m.  ``valid`` (None: all) restricts
    the integrated prefixes to those that can be optimal (:func:`_wor_bucketed_order`); the others
    keep the placeholder 1, an objective no smaller than alpha*; with ``valid`` the sharper
    :func:`_chord_screen` is added (its sums cost O(V) passes plus O(K) per screened prefix, so the
    full-sort path, the reference in the tests, keeps the general screen alone).  A block
    (:func:`_wor_bound_head`): the draft masses of the tokens before every prefix, in any order
    (their mass is in Qc; ``qs`` then holds only the tokens along the prefixes), ``V`` the row's
    length; the chord screen is added then too.  Passed as ``joined``: the block followed by ``qs``
    in one array; ``work``: optional [4, >= len(joined)] scratch rows; ``block_max``: the block's
    largest mass (None: computed).
    """
    nb = 0 if joined is None else joined.size - qs.size
    block = None if joined is None else joined[:nb]
    done = lam <= 0.0                                            # H holds supp q: Q_sub = 1
    at = np.arange(Pc.size) if valid is None else np.flatnonzero(valid)   # the prefixes considered
    pick = slice(None) if valid is None else at                  # (every prefix: views, no gathers)
    m2 = miss2[pick]
    optimistic = Pc[pick] + m2 + (1.0 - m2) * _iid_miss(lam[pick], K - 2)  # 1 - Q_2 (1 - lam)^(K-2)
    k0 = int(at[np.argmin(optimistic)])
    lo, hi = max(k0 - _BOUND_WINDOW, 0), min(k0 + _BOUND_WINDOW + 1, Qc.size)
    if block_max is None:
        block_max = float(block.max()) if nb else 0.0
    head = max(float(qs[:lo].max()) if lo > 0 else 0.0, block_max)
    if _jit.enabled():                                           # the same products, one loop
        from . import _race_kernels
        best_upper = _race_kernels.window_upper(Pc, qs, Qc, lam, miss2, K, lo, hi, head, nb)
    else:
        qmax = np.maximum.accumulate(np.concatenate(([head], qs[lo:hi - 1])))   # max q on H_k
        # |fl(Qc[k]) - Qc[k]| <= k eps (k-term cumulative sum): shrink q(H) - m by that much, so the
        # pessimistic objective stays a true upper bound
        slack = (np.arange(lo, hi) + nb + K + 2) * np.finfo(np.float64).eps
        lower = 1.0 - miss2[lo:hi]
        for j in range(2, K):
            room = np.maximum(Qc[lo:hi] - j * qmax - slack, 0.0)   # q(H) - m_j, at least
            with np.errstate(invalid="ignore"):
                lower *= np.where(room > 0, room / (lam[lo:hi] + room), 0.0)
        lower[done[lo:hi]] = 1.0
        best_upper = float(np.min(Pc[lo:hi] + 1.0 - lower))
    if valid is not None or block is not None:   # few prefixes (the full sort keeps the old screen)
        optimistic, best_upper = _chord_screen(Pc, qs, Qc, lam, miss2, K, at, optimistic, best_upper, block, V,
                                               None if work is None else work[0], block_max)
    cand = at[(optimistic <= best_upper + 1e-12) & ~done[pick] & (Qc[pick] > 0)]
    miss = (~done).astype(np.float64)                            # 0 where H holds supp q
    if cand.size and nb:                                         # the block leads, in any order
        lam_all = np.empty(nb + lam.size)
        lam_all[nb:] = lam
        miss[cand] = 1.0 - wor_subset_quadrature(joined, None, lam_all, K, cand + nb, step,
                                                 None if work is None else work[1:], float(Qc[-1]))
    elif cand.size:
        miss[cand] = 1.0 - wor_subset_quadrature(qs, Qc, lam, K, cand, step)
    # any other prefix has objective >= optimistic > best_upper + 1e-12 >= the objective of the
    # prefix attaining best_upper (itself a candidate), so it cannot win
    return miss


def _subset_miss_exact(q: np.ndarray, K: int, replacement: bool, H_mask: np.ndarray,
                       sets, set_prob) -> float:
    """1 - Q_sub(H) in positive terms: 1 - (1 - q(V minus H))^K, or the set law outside H."""
    if replacement:
        return float(_iid_miss(np.array([math.fsum(q[~H_mask])]), K)[0])
    return math.fsum(pr for S, pr in zip(sets, set_prob) if not all(H_mask[s] for s in S))


def multidraft_bound_bruteforce(p, q, K: int, replacement: bool = True) -> MultidraftBound:
    """alpha* = min over all 2^V subsets H of [p(H) + 1 - Q_sub(H)], with Q_sub exact.

    Q_sub(H) = q(H)^K with replacement; without replacement the sum of the exact set law
    :func:`draft_set_law` over sets inside H.  For testing the prefix rule; V <= 16.

    Parameters: as :func:`multidraft_bound`.

    Returns: :class:`MultidraftBound` with ``method="bruteforce"``.

    >>> b = multidraft_bound_bruteforce([0, .5, .5], [.8, .1, .1], 2)
    >>> round(b.value, 12), b.H.tolist()
    (0.36, [0])
    """
    p, q = as_pair(p, q)
    replacement = check_bool(replacement, "replacement")
    _check_K(q, K, replacement)
    V = p.size
    if V > 16:
        raise ValueError(f"brute force over 2^V subsets needs V <= 16, got V={V}")
    sets, set_prob = (None, None) if replacement else draft_set_law(q, K, False)
    best = None
    for bits in range(2 ** V):
        mask = np.array([(bits >> v) & 1 for v in range(V)], dtype=bool)
        miss = _subset_miss_exact(q, K, replacement, mask, sets, set_prob)
        val = float(p[mask].sum()) + miss
        if best is None or val < best[0] - 1e-15:
            best = (val, np.flatnonzero(mask), float(p[mask].sum()), 1.0 - miss)
    return MultidraftBound(best[0], best[1], int(K), bool(replacement), best[2], best[3], "bruteforce")


def union_bound(p, q, K: int) -> float:
    """sum_y min(p_y, 1 - (1 - q_y)^K): the per-token formula for K i.i.d. drafts.

    An upper bound on the optimum (union bound), equal to it for V = 2 or K = 1, strictly larger
    in general (docs/theory.md §6.6 caution; p = (0, 1/2, 1/2), q = (0.8, 0.1, 0.1), K = 2: 0.38 vs 0.36).

    Parameters: ``p`` target, ``q`` draft (the input contract of docs/design.md), ``K`` >= 1 i.i.d. drafts.

    Returns: the bound (``float``).

    >>> round(union_bound([0, .5, .5], [.8, .1, .1], 2), 12)
    0.38
    """
    p, q = as_pair(p, q)
    K = check_int(K, "K", 1)
    with np.errstate(divide="ignore"):                           # q_v = 1: log1p(-1) = -inf, exactly right
        return float(np.minimum(p, -np.expm1(K * np.log1p(-np.minimum(q, 1.0)))).sum())
