"""Exponential-race quadrature for Q_sub(H) with K draws without replacement (docs/theory.md §6.6).

Successive sampling is the arrival order of independent clocks E_v ~ Exp(q_v).  The first K draws
all lie in a token set H iff the K-th arrival in H precedes the first arrival outside H, whose rate
is lam = q(V minus H):

    Q_sub(H) = int_0^inf lam e^{-lam t} P(N_H(t) >= K) dt,     N_H(t) = #{v in H: E_v <= t}.

N_H(t) is Poisson-binomial: P(N_H(t) = j) = e^{-q(H) t} e_j(o), o_v = e^{q_v t} - 1, with e_j the
elementary symmetric polynomial.  :class:`RaceState` holds that law (truncated at j < K) on a grid
of times; :func:`wor_subset_quadrature` evaluates the integral on the sorted prefixes H_k used by
:func:`lp.coupling.multidraft_bound`.

With numba (:mod:`specsim._jit`) the recursion over tokens (with the quadrature's weights folded
in) and the block's power moments run as compiled loops (:mod:`lp._race_kernels`); the numpy code
here is the reference they are tested against and the path without numba.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from specsim import _jit

__all__ = ["RaceState", "race_states", "small_token_state", "block_state", "wor_subset_quadrature",
           "SURE", "EXACT_TOP", "NEGLIGIBLE", "CLUSTER_GAP", "CHUNK"]

#: q_v t above which a token counts as arrived (1 - P(arrived) = e^{-36} < 2.4e-16).
SURE = 36.0
#: The largest draft masses of a block of tokens are multiplied in exactly; the rest via moments.
EXACT_TOP = 256
#: A grid row whose P(N_H(t) <= K - 1) is provably below this counts as 0 (weights sum to ~1).
NEGLIGIBLE = 1e-18
#: Candidate prefixes further apart than this many tokens are evaluated as separate clusters.
CLUSTER_GAP = 2048
#: The grid rows go through the prefix recursion and the weights in passes of about this many
#: (row, token) entries: temporaries of <= 64 kB are reused by the allocator, where each fresh
#: ~1 MB array is a new mapping that page-faults (about half the quadrature's time at V = 151,936).
CHUNK = 8192


class RaceState(NamedTuple):
    """Law of N(t) = #{v in B: E_v <= t} for a token set B, on a grid of times t, truncated at K.

    N = ``arrived`` + N' with P(N' = j) = exp(-``mass``) ``esym[j]`` for j = 0..K-1, where
    ``esym[j]`` = e_j(o), o_v = e^{q_v t} - 1, over the tokens of B with q_v t <= the "sure" level,
    ``arrived`` counts the other tokens (arrived to double precision; keeps o finite), and ``mass``
    sums q_v t over the former.  Trailing axes are the grid rows (and, from :func:`race_states`, one
    column per prefix); ``esym`` has K leading rows.

    >>> s = RaceState.empty(K=3, rows=2)
    >>> s.esym.shape, s.low_probability().tolist()
    ((3, 2), [1.0, 1.0])
    """

    esym: np.ndarray
    arrived: np.ndarray
    mass: np.ndarray

    @classmethod
    def empty(cls, K: int, rows: int) -> "RaceState":
        """The empty token set: N = 0 on every row (e_0 = 1, e_j = 0 for j > 0)."""
        e = np.zeros((K, rows))
        e[0] = 1.0
        return cls(e, np.zeros(rows), np.zeros(rows))

    def low_probability(self) -> np.ndarray:
        """P(N <= K - 1) = sum_{j <= K - 1 - arrived} exp(log e_j - mass), per grid entry.

        Where mass <= 700, e^-mass is a normal number and every e_j e^-mass = P(N' = j) <= 1, so
        the terms are e_j times one exponential; larger masses go through the logarithms."""
        e, n, m = self
        K = e.shape[0]
        if e.ndim == 2 and _jit.enabled():                       # compiled: the same sums, row by row
            from . import _race_kernels
            c = np.ascontiguousarray
            low = np.empty(n.shape)
            _race_kernels.low_probabilities(c(e, dtype=np.float64), c(n, dtype=np.float64),
                                            c(m, dtype=np.float64), int(K), low)
            return low
        with np.errstate(under="ignore"):
            scale = np.exp(-m)
        low = np.zeros(n.shape)
        for j in range(K):
            term = np.multiply(e[j], scale)
            term[n > K - 1 - j] = 0.0
            low += term
        big = m > 700.0
        if big.any():
            eb, nb, mb = e[:, big], n[big], m[big]
            exact = np.zeros(nb.shape)
            with np.errstate(divide="ignore"):
                for j in range(K):
                    exact += np.where(nb <= K - 1 - j, np.exp(np.log(eb[j]) - mb), 0.0)
            low[big] = exact
        return low

    def rows(self, index) -> "RaceState":
        """The state on the grid rows ``index`` (integer or boolean index)."""
        return RaceState(self.esym[:, index], self.arrived[index], self.mass[index])

    def column(self, j: int) -> "RaceState":
        """The state after prefix column ``j`` of a :func:`race_states` result."""
        return RaceState(self.esym[..., j], self.arrived[..., j], self.mass[..., j])

    def assign(self, index, other: "RaceState") -> None:
        """Write ``other`` into the grid rows ``index`` in place."""
        self.esym[..., index] = other.esym
        self.arrived[..., index] = other.arrived
        self.mass[..., index] = other.mass

    def mark_negligible(self, index) -> None:
        """Set P(N <= K - 1) = 0 on the grid rows ``index`` (K tokens counted as arrived)."""
        self.esym[..., index] = 0.0
        self.arrived[..., index] = self.esym.shape[0]
        self.mass[..., index] = 0.0

    def union(self, other: "RaceState") -> "RaceState":
        """State of the union of two disjoint token sets: e(A u B) = e(A) * e(B) truncated at K."""
        ea, eb = self.esym, other.esym
        e = np.zeros_like(ea)
        for j in range(ea.shape[0]):
            for i in range(j + 1):
                e[j] += ea[i] * eb[j - i]
        return RaceState(e, self.arrived + other.arrived, self.mass + other.mass)


def race_states(qtok: np.ndarray, t: np.ndarray, K: int, sure_at: float, start: RaceState,
                cols: np.ndarray) -> RaceState:
    """:class:`RaceState` of ``start`` joined with each prefix of ``qtok`` listed in ``cols``.

    ``t`` is the grid as a column [g, 1]; ``start`` has rows [g]; the result has one column per
    prefix length in ``cols`` (0..len(qtok)).  Positive recursion e_j <- e_j + o_v e_{j-1} as
    cumulative sums along the tokens: O(g len(qtok) K), no cancellation.  Tokens with
    q_v t > ``sure_at`` are counted in ``arrived`` instead.

    Parameters: ``qtok`` draft masses in order, ``t`` [g, 1], ``K``, ``sure_at``, ``start``,
    ``cols`` (prefix lengths, ascending).

    Returns: :class:`RaceState` with trailing axes [g, len(cols)].

    >>> s = race_states(np.array([0.5, 0.5]), np.array([[1.0]]), 3, SURE, RaceState.empty(3, 1), np.array([2]))
    >>> round(float(s.column(0).esym[2, 0]), 6), round(float(np.expm1(0.5) ** 2), 6)   # e_2 = o_0 o_1
    (0.420839, 0.420839)
    """
    e0, n0, m0 = start
    g, n = t.shape[0], qtok.size
    if cols.size == n + 1 and (cols.size == 0 or (cols[0] == 0 and cols[-1] == n)):
        cols = slice(None)                                       # every prefix: views, no copies
    with np.errstate(over="ignore"):                              # inf: arrived, like any q_v t > sure_at
        qt = qtok[None, :] * t
    sure = qt > sure_at
    acc = np.empty((g, n + 1))
    acc[:, 0] = 0.0
    if sure.any():
        qt[sure] = 0.0
        np.cumsum(sure, axis=1, out=acc[:, 1:])
        n_out = n0[:, None] + acc[:, cols]
    else:
        n_out = np.repeat(n0[:, None], n + 1, axis=1)[:, cols]
    o = np.expm1(qt)
    np.cumsum(qt, axis=1, out=acc[:, 1:])
    m_out = m0[:, None] + acc[:, cols]
    cur = np.empty((g, n + 1))
    cur[:] = e0[0][:, None]
    e_out = np.empty((K,) + m_out.shape)
    e_out[0] = cur[:, cols]
    for j in range(1, K):
        np.multiply(o, cur[:, :n], out=qt)                       # o_v e_{j-1}(tokens before v)
        np.cumsum(qt, axis=1, out=cur[:, 1:])
        cur[:, 1:] += e0[j][:, None]
        cur[:, 0] = e0[j]
        e_out[j] = cur[:, cols]
    return RaceState(e_out, n_out, m_out)


def small_token_state(q: np.ndarray, t: np.ndarray, K: int, x_max: float,
                      work: np.ndarray | None = None, tau: float | None = None) -> RaceState:
    """:class:`RaceState` of the tokens ``q`` at the rows ``t`` [g], all with q_v t <= x_max.

    Power sums p_m(t) = sum_v (e^{q_v t} - 1)^m = sum_{r >= m} a_{m,r} t^r M_r, M_r = sum_v q_v^r,
    a_{m,r} the (positive) Taylor coefficients of (e^x - 1)^m; then Newton's identities
    e_j = (1/j) sum_{i<=j} (-1)^{i-1} e_{j-i} p_i.  O(len(q) R + g R K).  Truncation at r = R, with
    x = max q t over these rows (<= x_max): a_{m,r} <= m^r / r! and (q_v t/x)^r <= (q_v t/x)^m give a
    relative error per token <= x^{-m} sum_{r>R} (m x)^r/r! <= 2 m^{R+1} x^{R+1-m}/(R+1)! (m x <= 2),
    made < 1e-17 for every m < K: small x (early rows, flat drafts) needs few moments.  Terms (q_v / max q)^r
    below 1e-22 are dropped (relative 1e-22 len(q)) once they are a quarter of the terms.  Newton's identities cancel (error ~ eps
    h_j(o) / e_j(o) relative), but every o_v is at most e^{x_max} - 1: against the recursion the
    error in P(N = j) = e^{-m} e_j measured <= 5e-15 (K = 3..15, 1..3000 tokens, Dirichlet
    0.1..10 masses, q_v t up to x_max).

    Parameters: ``q`` draft masses, ``t`` [g], ``K``, ``x_max`` (>= max q t), ``work`` (optional
    [2, >= len(q)] scratch rows), ``tau`` (max q where the caller has it; None: computed).

    Returns: :class:`RaceState` with rows [g].
    """
    g = t.size
    e = np.zeros((K, g))
    e[0] = 1.0
    if q.size == 0 or K == 1:
        return RaceState(e, np.zeros(g), np.zeros(g))
    tau = float(q.max()) if tau is None else tau
    x = min(x_max, tau * float(t.max()))                         # the largest q_v t on these rows
    R = K
    ms = (K - 1,) if x <= 1.0 else range(1, K)                   # x <= 1: m^(R+1) x^-m grows with m
    while max(2.0 * m ** (R + 1) * x ** (R + 1 - m) for m in ms) > 1e-17 * math.factorial(R + 1):
        R += 1
    moments = _power_moments(q, tau, R, work)                    # sum_v (q_v / tau)^r >= 1
    a1 = np.array([0.0] + [1.0 / math.factorial(r) for r in range(1, R + 1)])
    if _jit.enabled():                                           # the same sums, compiled
        from . import _race_kernels
        _race_kernels.moment_esym(moments, tau * t, K, a1, e)
        return RaceState(e, np.zeros(g), float(q.sum()) * t)
    x_powers = (tau * t)[:, None] ** np.arange(R + 1)[None, :]   # [g, R + 1]
    a = a1.copy()
    psum = np.empty((K, g))
    for m in range(1, K):
        psum[m] = x_powers @ (a * moments)
        a = np.convolve(a, a1)[:R + 1]
    for j in range(1, K):
        acc = np.zeros(g)
        for i in range(1, j + 1):
            acc += (-1.0) ** (i - 1) * e[j - i] * psum[i]
        e[j] = np.maximum(acc / j, 0.0)
    return RaceState(e, np.zeros(g), float(q.sum()) * t)


def _power_moments(q: np.ndarray, tau: float, R: int, work: np.ndarray | None) -> np.ndarray:
    """sum_v (q_v / tau)^r, r = 0..R (entry 0 unused), terms (q_v / tau)^r below 1e-22 dropped
    (relative 1e-22 len(q) <= 2e-16); compiled when :func:`specsim._jit.enabled`."""
    if _jit.enabled():
        from . import _race_kernels
        return _race_kernels.power_moments(q, tau, R)
    moments = np.zeros(R + 1)
    if work is None:
        work = np.empty((2, q.size))
    base = np.divide(q, tau, out=work[0, :q.size])
    power = work[1, :q.size]
    power[:] = base
    for r in range(1, R + 1):
        moments[r] = power.sum()
        if r < R:
            power *= base
            if r & (r - 1) == 0:                                  # r = 1, 2, 4, ...: drop dead terms
                keep = power > 1e-22                              # once a quarter of them are,
                if np.count_nonzero(keep) < 0.75 * keep.size:     # when that saves more than the copies
                    base, power = base[keep], power[keep]
    return moments


def _join(qtok: np.ndarray, t: np.ndarray, K: int, sure_at: float, start: RaceState) -> RaceState:
    """``start`` (rows [g]) joined with all the tokens ``qtok`` at the rows ``t`` [g]."""
    if _jit.enabled():
        from . import _race_kernels
        g = t.size
        end = RaceState(np.empty((K, g)), np.empty(g), np.empty(g))
        c = np.ascontiguousarray
        _race_kernels.race_prefix_weights(c(qtok, dtype=np.float64), np.zeros(qtok.size + 1), c(t, dtype=np.float64),
                                          int(K), float(sure_at), c(start.esym), c(start.arrived), c(start.mass),
                                          np.zeros(0, dtype=np.int64), np.zeros(0), *end)   # no prefixes: no weights
        return end
    return race_states(qtok, t[:, None], K, sure_at, start, np.array([qtok.size])).column(0)


def block_state(q: np.ndarray, t: np.ndarray, K: int, sure_at: float, prior: RaceState,
                work: np.ndarray | None = None) -> RaceState:
    """:class:`RaceState` of ``prior`` joined with the tokens ``q`` (order irrelevant) at the rows ``t`` [g].

    The :data:`EXACT_TOP` largest masses go through the recursion (:func:`race_states`); the rest,
    on rows where all of them have q_v t <= x_max, through moments (:func:`small_token_state`).
    On the other rows (large t): if P(N <= K - 1) of the joined set is already below
    :data:`NEGLIGIBLE` on the last moment row, it is below it on all of them (it falls with t) and
    they are marked negligible; otherwise they are done by the recursion as well.

    Parameters: ``q`` draft masses, ``t`` [g] ascending, ``K``, ``sure_at``, ``prior`` (rows [g]),
    ``work`` (optional [3, >= len(q)] scratch rows).

    Returns: :class:`RaceState` with rows [g].
    """
    g = t.size
    n_small = max(q.size - EXACT_TOP, 0)
    part = q
    if 0 < n_small < q.size:                                     # one copy, split in place
        part = np.empty(q.size) if work is None else work[0, :q.size]
        part[:] = q
        part.partition(n_small)
    small, exact = part[:n_small], part[n_small:]
    x_max = min(1.0, 2.0 / max(K - 1, 1))
    tau = float(small.max()) if small.size else 0.0
    fast = t * tau <= x_max                                      # a prefix of the rows (t ascends)
    out = RaceState(np.empty((K, g)), np.zeros(g), np.zeros(g))
    if fast.any():
        state = prior.rows(fast).union(small_token_state(small, t[fast], K, x_max,
                                                         None if work is None else work[1:3], tau))
        out.assign(fast, _join(exact, t[fast], K, sure_at, state))
    slow = ~fast
    if slow.any():
        last = np.flatnonzero(fast)[-1:]
        if last.size and out.rows(last).low_probability()[0] < NEGLIGIBLE:
            out.mark_negligible(slow)
        else:
            state = _join(small, t[slow], K, sure_at, prior.rows(slow))
            out.assign(slow, _join(exact, t[slow], K, sure_at, state))
    return out


def wor_subset_quadrature(qs: np.ndarray, Qc: np.ndarray, lam: np.ndarray, K: int,
                          ks: np.ndarray, step: float, work: np.ndarray | None = None,
                          q_all: float | None = None) -> np.ndarray:
    """Q_sub(H_k) for K draws without replacement at the prefixes ``ks`` (all with lam_k > 0).

    Q_sub(H) = int_0^inf lam e^{-lam t} P(N_H(t) >= K) dt (module docstring), with H_k the first k
    tokens of ``qs`` (draft masses in prefix order), ``Qc`` their cumulative sums (leading 0; not
    read, may be None) and ``lam[k]`` = q(V minus H_k) (read at ``ks``; with numba at every
    prefix between the first and the last of a cluster).  The t integral is
    the trapezoid rule in log t with step ``step`` (error ~ exp(-pi^2/step)).

    Cost.  The candidate prefixes are grouped into clusters (gaps <= :data:`CLUSTER_GAP`).  The
    tokens before a cluster are joined to the running law in one block per grid row
    (:func:`block_state`: largest masses exactly, the rest from the moments sum_v q_v^r), and
    only the tokens inside a cluster go through the prefix recursion.  Since N_H >= N_B for
    B subset of H, a row with P(N_B(t) <= K - 1) < :data:`NEGLIGIBLE` at the start of a cluster
    has P(N_H(t) >= K) = 1 for all later candidates and is dropped.  Total
    O(V R + G (#clusters EXACT_TOP + cluster widths) K), R ~ 30 moments, instead of O(G max(ks) K).
    With numba the weights are summed inside the recursion (:func:`lp._race_kernels.race_prefix_weights`:
    e^{-lam t} carried along the tokens), so no [rows, prefixes] table is formed.

    Parameters: ``qs``, ``Qc``, ``lam`` as above, ``K`` draws, ``ks`` prefix lengths, ``step``,
    ``work`` (optional [3, >= len(qs)] scratch rows for the blocks: fresh ~1 MB arrays page-fault),
    ``q_all`` (the sum of ``qs`` where the caller has it; it sets the small-t cut-off. None: summed).

    Returns: ``ndarray`` of Q_sub(H_k), one per entry of ``ks``.

    >>> import numpy as np
    >>> qs = np.array([0.4, 0.3, 0.2, 0.1])
    >>> Qc, lam = np.concatenate(([0.0], np.cumsum(qs))), np.array([1.0, 0.6, 0.3, 0.1, 0.0])
    >>> round(float(wor_subset_quadrature(qs, Qc, lam, 3, np.array([3]), 0.25)[0]), 10)
    0.5511904762
    >>> from lp.coupling import draft_set_law          # exact: P(set of 3 draws = {0, 1, 2})
    >>> round(float(dict(zip(*draft_set_law(qs, 3, replacement=False)))[(0, 1, 2)]), 10)
    0.5511904762
    """
    kmax = int(ks.max())
    sure_at = min(SURE, 690.0 / max(K - 1, 1) - np.log(kmax + 1.0))
    if sure_at < SURE:
        raise ValueError(f"K={K} without replacement is too large for the quadrature at V={qs.size} "
                         "(needs K - 1 <= 690 / (36 + log V))")
    # The race only sees the products q_v t and lam t: rates scaled by a power of two (exact) keep the
    # grid's times representable when some lam is tiny (40 / 5e-324 overflows).
    lam_min = float(lam[ks].min())
    scale = 2.0 ** max(0, -600 - math.frexp(lam_min)[1])        # lam_min * scale >= 2^-601
    # below t_lo the integrand is negligible: P(N >= K) <= (q(H) t)^K / K! <= 1e-16, or its integral
    # lam q(H)^K t^(K+1) / (K+1)! <= 1e-17 (the larger cut-off; both in unscaled rates)
    lam_max = float(lam[ks].max())
    q_all = float(qs.sum()) if q_all is None else q_all
    if scale > 1.0:
        qs, lam = qs * scale, lam * scale
    log_lo = max(math.log(1e-16 * math.factorial(K)) / K - math.log(q_all),      # (in logs: lam_max
                 (math.log(1e-17 * math.factorial(K + 1)) - math.log(lam_max)     # may be subnormal)
                  - K * math.log(q_all)) / (K + 1)) - math.log(scale)
    t_hi = 40.0 / (lam_min * scale)                             # lam t e^{-lam t} < 2e-16 above it
    t = np.exp(np.arange(log_lo, np.log(t_hi) + step, step))                      # [G]
    G = t.size
    order = np.argsort(ks, kind="stable")
    sorted_ks = ks[order]
    cuts = np.flatnonzero(np.diff(sorted_ks) > CLUSTER_GAP) + 1
    clusters = np.split(sorted_ks, cuts) if cuts.size else [sorted_ks]   # (np.split alone: ~20 us)
    state = RaceState.empty(K, G)
    fast = _jit.enabled()
    live = np.arange(G)                                          # rows not yet negligible
    low = None if fast else np.zeros((G, ks.size))               # P(N_H(t) <= K - 1), sorted ks
    total = np.zeros(ks.size)                                    # the sums of the weights, sorted ks
    done, pos = 0, 0
    for cl in clusters:
        a, b = int(cl[0]), int(cl[-1])
        if live.size:
            start = block_state(qs[done:a], t[live], K, sure_at, state.rows(live), work)
            keep = start.low_probability() >= NEGLIGIBLE
            live, start = live[keep], start.rows(keep)
        if fast:                                                 # compiled, the weights folded in
            from . import _race_kernels
            end = RaceState(np.empty((K, live.size)), np.empty(live.size), np.empty(live.size))
            _race_kernels.race_prefix_weights(qs[a:b], lam[a:b + 1], t[live], K, sure_at, start.esym, start.arrived,
                                              start.mass, (cl - a).astype(np.int64), total[pos:pos + cl.size], *end)
            if live.size < G:                                    # the other rows: P(N <= K - 1) = 0
                other = np.ones(G, dtype=bool)
                other[live] = False
                with np.errstate(over="ignore"):                 # inf: lt = 800, as below
                    lt = np.minimum(np.multiply.outer(t[other], lam[cl]), 800.0)
                total[pos:pos + cl.size] += np.einsum("ij,ij->j", lt, np.exp(-lt))
            state.assign(live, end)
            done, pos = b, pos + cl.size
            continue
        chunk = max(1, CHUNK // (b - a + cl.size))               # rows per pass (independent)
        for i in range(0, live.size, chunk):
            rows = live[i:i + chunk]
            prefixes = race_states(qs[a:b], t[rows, None], K, sure_at, start.rows(slice(i, i + chunk)), cl - a)
            low[rows, pos:pos + cl.size] = prefixes.low_probability()
            state.assign(rows, prefixes.column(-1))
        done, pos = b, pos + cl.size
    lam_k = lam[sorted_ks]
    chunk = max(1, CHUNK // ks.size)
    for i in range(0, 0 if fast else G, chunk):
        with np.errstate(over="ignore"):                         # lam t e^{-lam t} = 0 to double precision
            lt = np.minimum(lam_k * t[i:i + chunk, None], 800.0)  # beyond lam t = 800
        weight = lt * np.exp(-lt)                                # lam t e^{-lam t} d(log t) / step
        weight *= np.clip(1.0 - low[i:i + chunk], 0.0, 1.0)
        total += weight.sum(axis=0)
    result = np.empty(ks.size)
    result[order] = np.clip(step * total, 0.0, 1.0)
    return result
