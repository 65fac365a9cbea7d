"""Compiled passes of the clip family and of a lossy certificate (numba; see :mod:`specsim._jit`).

Two kinds of kernels live here.

- The grouped clip family (:class:`~specsim.verifiers._clip_family._GroupedClipFamily`): the ratios
  q/p are bucketed by the top bits of their IEEE pattern, each bucket's tokens kept as a list; sums
  are exact at bucket starts and a query (a rank, a b level, a clip-level bisection) sorts only the
  buckets it lands in.  Its sums are the sorted family's in another order: equal to rounding.
- :func:`lp.certificates.certify`'s divergence fields and some rules' closed forms, chains of
  ~10 numpy calls over the row made in one or two passes with the same floating-point operations
  in the same order, so that their results are the numpy path's bit for bit:

  - totals are left to numpy: a kernel writes the terms (packed in token order where numpy sums a
    masked subset) and the caller sums them with ``.sum()``, numpy's pairwise summation of the
    same terms in the same order;
  - logarithms of whole rows are left to numpy (its vectorised log is ~6x the speed of a scalar
    libm call in a loop); only the bisection of :func:`clip_level` takes scalar logs (``math.log``).

The numpy code stays the reference and the path without numba.  First call in a fresh process:
a few seconds of compilation for the kernels here (cached on disk afterwards: the next process
pays ~0.4 s, most of it ``import numba``).
"""
from __future__ import annotations

import math

import numpy as np
from numba.core import types
from numba.extending import intrinsic

from specsim import _kl_kernels as KL
from specsim._jit import njit


#: Low bits of a ratio's IEEE pattern dropped by the bucket id: 2^8 buckets per binade (a bucket spans
#: a relative width of at most 2^-8), so that a bisection touches a few short buckets.
_SHIFT = 44
#: Most buckets (the lowest one takes every ratio 2^(2^(15-8)) = 2^128 times below the top and less).
_MAX_BUCKETS = 1 << 15
#: The top bits of 1.0's pattern: 1.0 is a bucket edge (its low bits are 0), so a bucket k >= 2
#: lies wholly below 1 iff base + k <= _ONE_BITS.
_ONE_BITS = 0x3FF0000000000000 >> _SHIFT

# The grouped clip family's state (specsim.verifiers._clip_family._GroupedClipFamily): eight arrays
# passed explicitly, in this order (a tuple of arrays costs ~0.25 us per call between kernels):
#  W (12, m + 1) float64, in grouped order (bucket order = ratio order, sorted inside a bucket once a
#    query lands in it): 0 r = q/p, 1 p, 2 q, 3 log r (0 where r = 0); 4 Pc, 5 Qc (sums of p, q
#    before the position), 6 Psuf, 7 Qsuf (from the position on), 8 G = r Pc - Qc (W[8, m]
#    unused), 9-11 M: running sums of the frontier's middle terms per kind ((p - q)_+, q log r,
#    -p log r).  Rows 0-3 are gathered when a bucket is sorted; rows 4-11 are valid inside sorted
#    buckets, at their starts and at the end (a start is filled from BB when a query reaches it;
#    G only inside sorted buckets).  Only the sorted buckets' tokens are ever moved: grouping
#    every token by value costs a random write per token and entry, which dominates on a cold cache;
#  BB (8, B + 1) float64: 0 BP, 1 BQ (p, q of the buckets before k), 2 BPs, 3 BQs (of the buckets
#    from k on), 4-6 BM (the middle terms of the buckets before k), 7 G at each bucket's lower edge;
#  BI (3, B + 1) int64: 0 first position of each bucket, 1 bucket sorted and filled, 2 the bucket's
#    last token (-1: none), the head of its list in I[0];
#  par int64: (base, B, m, n0);
#  TK (2, V) float64: 0 r = q/p in token order (inf where p = 0), 1 its log (numpy's);
#  I (2, V) int64: 0 (int32 view) each token's predecessor in its bucket (-1: none), 1 token ids in
#    grouped order (int32 view; a bucket's are written when it is sorted);
#  p, q: the rows.
_R, _P, _Q, _LOG, _PC, _QC, _PSUF, _QSUF, _G, _M = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9
#: tokens per block of the D(q, p) sums (partial sums per block, then the blocks in order)
_QD_BLOCK = 256


@intrinsic
def _float_bits(typingctx, x):
    """The IEEE pattern of a float64 as an int64 (a register bitcast: no store and reload)."""
    if x != types.float64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.int64))
    return types.int64(types.float64), codegen


@intrinsic
def _bits_float(typingctx, x):
    """The float64 whose IEEE pattern is the int64 x (a register bitcast, _float_bits' inverse)."""
    if x != types.int64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


@njit
def ratio_range(p, q, r_in):
    """r_in = q / p (numpy's divide, bit for bit) and the least and largest pattern of the ratios
    as int64 in one vectorised pass (patterns order as the values for ratios >= 0; a NaN pattern
    lies beyond inf or below 0 by its sign, so the caller's range tests catch it): the family's
    construction in one pass instead of numpy's divide, min and max."""
    lo = np.int64(0x7FFFFFFFFFFFFFFF)
    hi = -lo - 1
    for i in range(p.size):
        v = q[i] / p[i]
        r_in[i] = v
        b = _float_bits(v)
        lo = min(lo, b)
        hi = max(hi, b)
    return lo, hi


@njit
def grouped_ratios(p, q, r_in):
    """r_in = q / p in token order (inf where p = 0).  Returns (m = #{p > 0}, n0 = #{r = 0 < p},
    the least positive ratio (inf if none), the largest ratio, the last token whose ratio
    overflows to inf while p > 0 (-1 if none))."""
    m = 0
    n0 = 0
    rmin = np.inf
    rmax = 0.0
    bad = -1
    for i in range(p.size):
        a = p[i]
        if a > 0.0:
            v = q[i] / a
            m += 1
            if v == 0.0:
                n0 += 1
                v = 0.0                         # -0.0 -> +0.0
            elif v < rmin:
                rmin = v
            if v > rmax:
                rmax = v
            if v == np.inf:
                bad = i
        else:
            v = np.inf
        r_in[i] = v
    return m, n0, rmin, rmax, bad


@njit
def grouped_setup(W, BI, par, r_in, lr, nxt64, p, q, D):
    """Bucket every token with p > 0 (0: r = 0; 1 + the top bits of r's pattern above ``base``,
    clamped at 1) in one pass over the row that also sums p, q, q log r and -p log r per bucket
    and threads each bucket's tokens into a list; lay the buckets out (positions) and fill W at
    the end of the order (a bucket's start is filled from BB when a query needs it:
    :func:`_fill_start`).  ``W``, ``TK`` and ``I`` are allocated by the caller, once each (fresh
    O(V) arrays per call page-fault); r_in, lr, nxt64 are the rows TK[0], TK[1], I[0], passed one
    by one so that they compile as contiguous rows (the blocks' 2-D views are not: ~13% of the
    pass).  D += (KL(q||p), KL(p||q)) as :func:`q_divergences` sums them, bit for bit.  Returns BB
    (BI is filled in place)."""
    base, B, m = par[0], par[1], par[2]
    n = p.size
    bits = r_in.view(np.int64)
    # each bucket's tokens as a list threaded through nxt (its head ends in BI[2]): the pass writes
    # nxt in token order; a counting-sort scatter instead writes ids at random into a row that is
    # out of cache after other work, as slow as the pass itself.  _sort_bucket walks the list.
    nxt = nxt64.view(np.int32)
    # one 64-byte line per bucket: sums of p, q, q log r, -p log r, the count and the list's head
    # (as floats): a token touches one line, not six arrays.  No per-token (p - q)_+ or least
    # ratio: both follow from the bucket's sums and edges (below), ~0.1 ms of the pass cold.
    A = np.zeros(B * 8)
    for k in range(B):
        A[8 * k + 5] = -1.0
    for s0 in range(0, n, _QD_BLOCK):           # blocks: D(q, p) summed as q_divergences does
        d1 = 0.0
        d2 = 0.0
        for i in range(s0, min(s0 + _QD_BLOCK, n)):
            pi = p[i]
            if pi > 0.0:
                v = r_in[i]
                qi = q[i]
                if v == 0.0:
                    k = 0                       # r = 0: no log terms (q log r = 0; KL(p||.) = inf via n0)
                else:
                    k = (bits[i] >> _SHIFT) - base
                    k = (k if k > 0 else 0) + 1
                j = 8 * k
                if v != 0.0:
                    lg = lr[i]
                    t1 = qi * lg
                    t2 = -(pi * lg)
                    A[j + 2] += t1
                    A[j + 3] += t2
                    d1 += t1
                    d2 += t2
                nxt[i] = np.int32(A[j + 5])
                A[j + 5] = i
                A[j + 4] += 1.0
                A[j] += pi
                A[j + 1] += qi
        D[0] += d1
        D[1] += d2
    # 1.0 is a bucket edge (_edge), so a bucket lies wholly below 1 or not at all, except the
    # clamped bucket 1 when the range is cut (its tokens are walked)
    BB = np.zeros((8, B + 1))
    for k in range(B):
        j = 8 * k
        BI[0, k + 1] = BI[0, k] + np.int64(A[j + 4])
        BI[2, k] = np.int64(A[j + 5])
        BB[0, k + 1] = BB[0, k] + A[j]
        BB[1, k + 1] = BB[1, k] + A[j + 1]
        if k == 0 or base + k <= _ONE_BITS:     # every ratio < 1: (p - q)_+ = p - q
            tv = A[j] - A[j + 1]
        elif k == 1:                            # the clamped bucket reaches 1
            tv = 0.0
            t = BI[2, 1]
            while t >= 0:
                d = p[t] - q[t]
                tv += d if d > 0.0 else 0.0
                t = nxt[t]
        else:
            tv = 0.0
        BB[4, k + 1] = BB[4, k] + tv
        BB[5, k + 1] = BB[5, k] + A[j + 2]
        BB[6, k + 1] = BB[6, k] + A[j + 3]
    for k in range(B - 1, -1, -1):              # from the top, as the suffix sums of the sorted path
        BB[2, k] = BB[2, k + 1] + A[8 * k]
        BB[3, k] = BB[3, k + 1] + A[8 * k + 1]
    # G at bucket k's lower edge e: sum_i p_i (e - r_i)_+ = e P - Q over the buckets below (all
    # their ratios are < e), a lower bound of G inside the bucket and an upper bound below it,
    # which is all _g_search needs (G is nondecreasing in the ratio)
    for k in range(B):
        BB[7, k] = _edge(par, k) * BB[0, k] - BB[1, k]
    BB[7, B] = np.inf
    _fill_start(W, BB, BI, B)
    return BB


@njit
def _fill_start(W, BB, BI, k):
    """W's running sums at bucket k's start (k = B: the end of the order), from the bucket sums."""
    s = BI[0, k]
    W[_PC, s] = BB[0, k]
    W[_QC, s] = BB[1, k]
    W[_PSUF, s] = BB[2, k]
    W[_QSUF, s] = BB[3, k]
    W[_M, s] = BB[4, k]
    W[_M + 1, s] = BB[5, k]
    W[_M + 2, s] = BB[6, k]


@njit
def _fill_mid(W, BI, k, kind):
    """M of ``kind`` inside sorted bucket k, from its start."""
    s, e = BI[0, k], BI[0, k + 1]
    row = _M + kind
    t = W[row, s]
    for i in range(s, e - 1):
        if kind == 0:
            d = W[_P, i] - W[_Q, i]
            t += d if d > 0.0 else 0.0
        elif kind == 1:
            t += W[_Q, i] * W[_LOG, i]
        else:
            t += -(W[_P, i] * W[_LOG, i])
        W[row, i + 1] = t


@njit
def _sort_bucket(W, BB, BI, par, TK, I, p, q, k):
    """Gather bucket k's tokens (ratio, p, q, log ratio), sort them by ratio and fill the running
    sums from the bucket's start (suffix sums from the next bucket's start)."""
    _fill_start(W, BB, BI, k)
    _fill_start(W, BB, BI, k + 1)
    s, e = BI[0, k], BI[0, k + 1]
    n = e - s
    ids = I[1].view(np.int32)
    nxt = I[0].view(np.int32)
    t = BI[2, k]
    for i in range(e - 1, s - 1, -1):            # the list runs from the last token down
        ids[i] = t
        t = nxt[t]
    ordered = True
    for i in range(s, e):
        t = ids[i]
        W[_R, i] = TK[0, t]
        W[_P, i] = p[t]
        W[_Q, i] = q[t]
        W[_LOG, i] = TK[1, t] if TK[0, t] > 0.0 else 0.0
        if i > s and W[_R, i] < W[_R, i - 1]:
            ordered = False
    if not ordered:                             # ties in any order: sums are order-free to rounding
        o = np.argsort(W[_R, s:e].copy())       # plain loops below: fancy indexing of a strided
        tmp = np.empty(n)                       # block compiles several times slower
        for row in range(_LOG + 1):
            for i in range(n):
                tmp[i] = W[row, s + o[i]]
            for i in range(n):
                W[row, s + i] = tmp[i]
        for i in range(n):
            tmp[i] = ids[s + o[i]]
        for i in range(n):
            ids[s + i] = np.int32(tmp[i])
    P = W[_PC, s]
    Q = W[_QC, s]
    for i in range(s, e):
        W[_G, i] = W[_R, i] * P - Q
        P += W[_P, i]
        Q += W[_Q, i]
        if i + 1 < e:
            W[_PC, i + 1] = P
            W[_QC, i + 1] = Q
    P = W[_PSUF, e]
    Q = W[_QSUF, e]
    for i in range(e - 1, s, -1):
        P += W[_P, i]
        Q += W[_Q, i]
        W[_PSUF, i] = P
        W[_QSUF, i] = Q
    _fill_mid(W, BI, k, 0)
    _fill_mid(W, BI, k, 1)
    _fill_mid(W, BI, k, 2)
    BI[1, k] = 1


@njit
def _bucket(par, x):
    """The bucket of ratio x >= 0 (B: above every bucket)."""
    if x == 0.0:
        return 0
    k = (_float_bits(x) >> _SHIFT) - par[0]
    k = (k if k > 0 else 0) + 1
    return k if k < par[1] else par[1]


@njit
def _search(W, row, s, e, x, right):
    """s + #{i in [s, e): W[row, i] < x} (<= x when ``right``), W[row, s:e] nondecreasing."""
    lo, hi = s, e
    while lo < hi:
        mid = (lo + hi) >> 1
        v = W[row, mid]
        if v < x or (right and v == x):
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit
def rank(W, BB, BI, par, TK, I, p, q, x, right):
    """#{r < x} (``right`` False) or #{r <= x} in ratio order; sorts the bucket of x if needed."""
    k = _bucket(par, x)
    if k >= par[1]:
        return par[2]
    if not BI[1, k]:
        _sort_bucket(W, BB, BI, par, TK, I, p, q, k)
    return _search(W, _R, BI[0, k], BI[0, k + 1], x, right)


@njit
def ranks(W, BB, BI, par, TK, I, p, q, xs, right):
    out = np.empty(xs.size, np.int64)
    for i in range(xs.size):
        out[i] = rank(W, BB, BI, par, TK, I, p, q, xs[i], right)
    return out


@njit
def sort_bucket_at(W, BB, BI, par, TK, I, p, q, j):
    """Sort the bucket holding position j (0 <= j < m)."""
    k = np.searchsorted(BI[0], j, side="right") - 1
    if not BI[1, k]:
        _sort_bucket(W, BB, BI, par, TK, I, p, q, k)


@njit
def ratios_at(W, BB, BI, par, TK, I, p, q, js):
    """r at positions js (each 0 <= j < m), sorting their buckets."""
    out = np.empty(js.size)
    for i in range(js.size):
        sort_bucket_at(W, BB, BI, par, TK, I, p, q, js[i])
        out[i] = W[_R, js[i]]
    return out


@njit
def _g_bucket(BB, par, c):
    """The least bucket k with G >= c at its lower edge (BB[7]; B if none): the b search's
    bucket step, the answer lying in bucket k - 1 or at its end."""
    lo, hi = 0, par[1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if BB[7, mid] < c:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit
def _g_search(W, BB, BI, par, TK, I, p, q, c):
    """The least j with G_j >= c (m if none), as np.searchsorted(G, c) over the sorted order."""
    lo = _g_bucket(BB, par, c)
    if lo == 0:
        return 0
    k = lo - 1                                  # the answer lies in bucket k or at its end
    if not BI[1, k]:
        _sort_bucket(W, BB, BI, par, TK, I, p, q, k)
    return _search(W, _G, BI[0, k], BI[0, k + 1], c, False)


@njit
def b_level(W, BB, BI, par, TK, I, p, q, a, mass, q0):
    """SortedClipFamily.b(a, mass) on the grouped state (the same formula; the buckets of the least and
    the largest ratio are sorted at set-up)."""
    return _b_at(W, BB, BI, par, TK, I, p, q, a, rank(W, BB, BI, par, TK, I, p, q, a, True), mass, q0)


@njit
def _excess(W, par, a, hi, q0):
    """The draft mass the a-clip removes, sum_v (q_v - a p_v)_+ + q0, from its own terms
    (SortedClipFamily.b), with hi = #{r <= a}."""
    m = par[2]
    excess = q0
    if hi < m:
        excess += max(W[_QSUF, hi] - a * W[_PSUF, hi], W[_Q, m - 1] - a * W[_P, m - 1], 0.0)
    return excess


@njit
def _b_at(W, BB, BI, par, TK, I, p, q, a, hi, mass, q0):
    """b_level with hi = #{r <= a} given."""
    m = par[2]
    c = (mass - 1.0) + _excess(W, par, a, hi, q0)
    if c <= 0.0:
        return min(1.0, W[_R, 0]) if m > 0 else 1.0
    j = _g_search(W, BB, BI, par, TK, I, p, q, c)
    j = j if j < hi else hi
    if j == 0:
        return min(1.0, W[_R, 0])
    return min(max((c + W[_QC, j]) / W[_PC, j], 0.0), 1.0, a)


@njit
def divergence(W, BB, BI, par, TK, I, p, q, kind, a, q0):
    """ClipFamily.divergence(kind, a) at mass 1 on the grouped state."""
    return _divergence_at(W, BB, BI, par, TK, I, p, q, kind, a, rank(W, BB, BI, par, TK, I, p, q, a, True), q0)


@njit
def _divergence_at(W, BB, BI, par, TK, I, p, q, kind, a, hi, q0):
    """divergence with hi = #{r <= a} given."""
    b = _b_at(W, BB, BI, par, TK, I, p, q, a, hi, 1.0, q0)
    lo = rank(W, BB, BI, par, TK, I, p, q, b, False)
    low, high = W[_PC, lo], W[_PSUF, hi]
    mid = W[_M + kind, hi] - W[_M + kind, lo]
    if kind == 1:
        first = b * math.log(b) * low if b > 0.0 else 0.0
        return first + mid + a * math.log(a) * high
    if kind == 2:
        if b <= 0.0 and (par[3] > 0 or low > 0.0):
            return np.inf
        first = -math.log(b) * low if low > 0.0 else 0.0
        return first + mid - math.log(a) * high
    return (1.0 - b) * low + mid


@njit
def _below_bucket(par, k):
    """The largest double below bucket k's ratios (k >= 2): every ratio of buckets < k is <= it,
    every ratio of bucket k is above it, so #{r <= it} is bucket k's start (no sort)."""
    return np.nextafter(_edge(par, k), 0.0)


@njit
def _edge(par, k):
    """Bucket k's lower edge (k >= 2; 0 below): its ratios' pattern with the low bits cleared."""
    return _bits_float(np.int64((par[0] + k - 1) << _SHIFT)) if k >= 2 else 0.0


@njit
def _decided(W, BB, BI, par, kind, a, hi, q0, eps):
    """Whether D(pi(a), p) <= eps, told from bucket sums when they suffice: 1 yes, 0 no, -1 not
    told (the caller evaluates D, which sorts b's bucket).  hi = #{r <= a}, W valid there.

    b(a) = H^-1(c) for H(x) = sum_v p_v (x - r_v)_+ (nondecreasing, slope P(r < x)), and the b
    search's bucket step finds kb with H(e_kb) < c <= H(e_kb+1) (BB[7] = H at the edges): b lies
    in (e_kb, e_kb+1], tighter by the slope's bounds P(r < e_kb), P(r < e_kb+1).  Over that range
    D's b term, P(r < b) and the middle sum (one sign inside a bucket below 1) are bracketed;
    an answer is given only with a margin far above D's rounding, so it is the one the
    evaluation of D would give.  Used where queries would otherwise sort a b bucket per step."""
    B = par[1]
    c = _excess(W, par, a, hi, q0)              # mass 1
    if c <= 0.0:
        return -1
    kb = _g_bucket(BB, par, c) - 1
    # bucket kb must lie below 1 (so b <= 1 <= a and its terms have one sign) and below a
    if kb < 2 or kb + 1 >= B or BI[0, kb + 1] > hi or par[0] + kb > _ONE_BITS:
        return -1
    e0, e1 = _edge(par, kb), _edge(par, kb + 1)
    P0, P1 = BB[0, kb], BB[0, kb + 1]
    g = c - BB[7, kb]
    bl = max(e0, e0 + g / P1) if P1 > 0.0 else e0
    bu = min(e1, e0 + g / P0) if P0 > 0.0 else e1
    if not (0.0 < bl <= bu):
        return -1
    Mh = W[_M + kind, hi]
    M0, M1 = BB[4 + kind, kb], BB[4 + kind, kb + 1]
    mlo, mhi = Mh - max(M0, M1), Mh - min(M0, M1)
    high = W[_PSUF, hi]
    if kind == 1:                               # b log b P(r < b), x log x <= 0 on (0, 1]
        gl, gu = bl * math.log(bl), bu * math.log(bu)
        gmin = -1.0 / math.e if bl < 1.0 / math.e < bu else min(gl, gu)
        t_lo, t_hi = gmin * P1, max(gl, gu) * P0
        t3 = a * math.log(a) * high
    elif kind == 2:                             # -log b P(r < b) >= 0
        t_lo, t_hi = -math.log(bu) * P0, -math.log(bl) * P1
        t3 = -math.log(a) * high
    else:                                       # (1 - b) P(r < b) >= 0
        t_lo, t_hi = (1.0 - bu) * P0, (1.0 - bl) * P1
        t3 = 0.0
    # D's rounding: its terms' and that of b itself (the evaluation's b may sit ulps outside [bl, bu];
    # dD/db is at most P (1 + |log b|) in every kind, with b <= 1 and P(r < b) <= P1)
    slack = 1e-12 * (abs(t_lo) + abs(t_hi) + abs(Mh) + abs(M0) + abs(M1) + abs(t3)) \
        + 1e-13 * P1 * (1.0 - math.log(bl))
    if t_hi + mhi + t3 + slack <= eps:
        return 1
    if t_lo + mlo + t3 - slack > eps:
        return 0
    return -1


@njit
def _feasible(W, BB, BI, par, TK, I, p, q, kind, a, hi, q0, eps):
    """D(pi(a), p) <= eps with hi = #{r <= a}: from the bucket sums when they tell, else evaluated."""
    d = _decided(W, BB, BI, par, kind, a, hi, q0, eps)
    if d >= 0:
        return d == 1
    return _divergence_at(W, BB, BI, par, TK, I, p, q, kind, a, hi, q0) <= eps


@njit
def clip_level(W, BB, BI, par, TK, I, p, q, kind, eps, a_max, q0):
    """ClipFamily.clip_level: the largest a >= 1 with D(pi(a), p) <= eps.  First a search over
    the bucket edges (D there needs no sort of the bucket a lands in), then lp.frontier's bisection
    inside the bucket found, so only one bucket of a is sorted; b's bucket is sorted only where
    the bucket sums cannot tell the step (:func:`_decided`)."""
    hi = max(a_max, 1.0)
    if eps == 0.0:
        return 1.0
    if divergence(W, BB, BI, par, TK, I, p, q, kind, hi, q0) <= eps:
        return hi
    lo = 1.0
    B = par[1]
    first, last = 2, B - 1                      # the least bucket k >= 2 whose edge is >= 1
    while first <= last:
        mid_k = (first + last) >> 1
        if _below_bucket(par, mid_k) >= 1.0:
            last = mid_k - 1
        else:
            first = mid_k + 1
    low_k, high_k = first, B - 1                # largest k in [first, B - 1] with D feasible
    while low_k <= high_k:
        mid_k = (low_k + high_k) >> 1
        a = _below_bucket(par, mid_k)
        _fill_start(W, BB, BI, mid_k)
        if _feasible(W, BB, BI, par, TK, I, p, q, kind, a, BI[0, mid_k], q0, eps):
            lo = a
            low_k = mid_k + 1
        else:
            hi = a
            high_k = mid_k - 1
    for _ in range(400):
        mid = lo * math.sqrt(hi / lo) if 0.0 < 4.0 * lo < hi else 0.5 * (lo + hi)
        if _feasible(W, BB, BI, par, TK, I, p, q, kind, mid, rank(W, BB, BI, par, TK, I, p, q, mid, True),
                     q0, eps):
            lo = mid
        else:
            hi = mid
        if hi - lo <= 4e-16 * max(hi, 1e-300):
            break
    return lo


@njit
def q_divergences(p, q, r, lr, D):
    """D += (KL(q||p), KL(p||q)) = (sum q log r, sum -(p log r)) over the tokens with p > 0 and
    r > 0 (r, lr = the ratios and their logs, TK's rows one by one: contiguous), in blocks of
    _QD_BLOCK tokens: the same sums, in the same order, as grouped_setup's."""
    n = p.size
    for s0 in range(0, n, _QD_BLOCK):
        d1 = 0.0
        d2 = 0.0
        for i in range(s0, min(s0 + _QD_BLOCK, n)):
            if p[i] > 0.0 and r[i] != 0.0:
                lg = lr[i]
                d1 += q[i] * lg
                d2 += -(p[i] * lg)
        D[0] += d1
        D[1] += d2


@njit
def clip_law(p, q, a, b, out):
    """out = clip(q, b p, a p) = min(max(q, b p), a p) (b <= a): SortedClipFamily.pi's operations in one pass."""
    for i in range(p.size):
        v = max(p[i] * b, q[i])
        out[i] = min(v, p[i] * a)
    return out


@njit
def out_pass(out, p, q, atol, lr, d):
    """One pass over a certificate's (out, p, q): lr = out / p and d = (out - p) / p where p > 0
    (:func:`specsim._kl_kernels.ratio_rows` of (out, p) when every entry of both is > 0), the sums
    of |out - p| and |p - q| (numpy's ``.sum()`` of those rows bit for bit, formed block by block
    in its pairwise order) and the flags.  Returns (bad, same_support, off, miss, max_ratio,
    between, equal_q, dense, near, far, sum |out - p|, sum |p - q|): ``bad`` = out has a negative or
    non-finite entry; ``off`` = out > 0 = p somewhere, ``miss`` = p > 0 = out somewhere; max_ratio
    = max out/p (inf where out > 0 = p, 0 where both are 0; -1: take lr.max()); between = min(p, q) - atol <= out <=
    max(p, q) + atol; equal_q = (out == q); dense = out > 0 and p > 0 everywhere; near = some
    0.5 < out/p < 2, far = some other out/p with out, p > 0."""
    n = out.size
    lens = KL.pairwise_blocks(n)
    s1 = np.empty(lens.size)
    s2 = np.empty(lens.size)
    b1 = np.empty(KL.PW_BLOCK)
    b2 = np.empty(KL.PW_BLOCK)
    bad = off = miss = near = far = nb = ne = False
    npos = 0
    s = 0
    for k in range(lens.size):
        m = lens[k]
        # views of the block (out[s + i] with s unknown to be >= 0 keeps the loop from vectorising)
        os, ps, qs, ls, ds = out[s:s + m], p[s:s + m], q[s:s + m], lr[s:s + m], d[s:s + m]
        for i in range(m):                      # branch-free (selects, no early exits): it vectorises
            o, a, c = os[i], ps[i], qs[i]
            pa = a > 0.0
            po = o > 0.0
            den = a if pa else 1.0
            ratio = o / den
            ls[i] = ratio
            ds[i] = (o - a) / den
            bad |= not ((o >= 0.0) & (o < np.inf))
            off |= po & (not pa)
            miss |= pa & (not po)
            npos += pa
            close = (ratio > 0.5) & (ratio < 2.0)
            near |= pa & po & close
            far |= pa & po & (not close)
            nb |= (o < min(a, c) - atol) | (o > max(a, c) + atol)
            ne |= o != c
            b1[i] = abs(o - a)
            b2[i] = abs(a - c)
        s1[k] = KL.leaf_sum(b1, m)
        s2[k] = KL.leaf_sum(b2, m)
        s += m
    dense = not (off or miss) and npos == n
    if off:
        mr = np.inf
    elif dense:
        mr = -1.0                               # the caller takes lr.max() (numpy's vectorised max)
    else:
        mr = 0.0                                # out = 0 where p = 0 (no off): ratio 0 there
        for i in range(n):
            if p[i] > 0.0 and lr[i] > mr:
                mr = lr[i]
    return (bad, not (off or miss), off, miss, mr, not nb, not ne, dense, near, far,
            KL.pairwise_total(n, s1), KL.pairwise_total(n, s2))


@njit
def cactus_caps(p, q, two_delta, acc, act, c):
    """Cactus's caps h_n = clip(p_n + sqrt(2 delta p_n (1 - p_n)), 0, 1) (h = 1 where p_n >= 1),
    acc = min(q, h), and the ids n with q_n - acc_n > 0 in ``act`` (in order; returns their number
    k), with c_n = (1 - h_n)/(1 - p_n) (0 where p_n >= 1) for them in c[:k]: lossy._cactus_h and the
    start of Cactus's closed pair.  The caps are formed block by block in a branch-free loop (it
    vectorises, sqrt included), which also tells whether the block has a rejected id; only those
    blocks are read again for the ids (few: often none), and h is never written out."""
    n = p.size
    k = 0
    for s in range(0, n, _CAPS_BLOCK):
        e = min(s + _CAPS_BLOCK, n)
        ps, qs, accs = p[s:e], q[s:e], acc[s:e]
        rej = False
        for i in range(e - s):
            hi = _cactus_cap(ps[i], two_delta)
            b = qs[i]
            ai = b if b <= hi else hi
            accs[i] = ai
            rej |= b - ai > 0.0
        if rej:
            for i in range(s, e):
                if q[i] - acc[i] > 0.0:
                    a = p[i]
                    act[k] = i
                    c[k] = 0.0 if a >= 1.0 else (1.0 - _cactus_cap(a, two_delta)) / (1.0 - a)
                    k += 1
    return k


#: tokens per block of cactus_caps (a block's acc is still in cache when its ids are read)
_CAPS_BLOCK = 512


@njit
def _cactus_cap(a, two_delta):
    """h = clip(a + sqrt(2 delta a (1 - a)), 0, 1), 1 where a >= 1: numpy's operations in order."""
    hi = a * two_delta
    hi *= 1.0 - a
    hi = math.sqrt(hi)
    hi += a
    hi = hi if hi >= 0.0 else 0.0
    hi = hi if hi <= 1.0 else 1.0
    return 1.0 if a >= 1.0 else hi


@njit
def cactus_suffix_sums(j, wc, w):
    """lossy.cactus's few per-threshold sums: the distinct ranks ``bins`` of j (ascending), the
    first with bins >= 1, and suf_c, suf = the suffix sums over bins[first:] of wc and w (the
    members of a bin added in input order, as np.bincount; the suffixes from the end, as a
    reversed cumsum; a trailing 0), numpy's arithmetic in its order for a handful of entries
    without a dozen small numpy calls."""
    bins = np.unique(j)
    nb = bins.size
    Wc = np.zeros(nb)
    W = np.zeros(nb)
    for i in range(j.size):
        b = np.searchsorted(bins, j[i])
        Wc[b] += wc[i]
        W[b] += w[i]
    first = np.searchsorted(bins, 1)
    m = nb - first
    suf_c = np.zeros(m + 1)
    suf = np.zeros(m + 1)
    sc = 0.0
    s = 0.0
    for i in range(m - 1, -1, -1):
        sc += Wc[first + i]
        s += W[first + i]
        suf_c[i] = sc
        suf[i] = s
    return bins, first, suf_c, suf


@njit
def _below(thr, x):
    """#{thr < x} for thr nondecreasing: a count for a few thresholds, else a binary search."""
    nt = thr.size
    if nt <= 8:
        s = 0
        for t in range(nt):
            s += thr[t] < x
        return s
    lo, hi = 0, nt
    while lo < hi:
        mid = (lo + hi) >> 1
        if thr[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit
def cactus_out(p, q, r_tok, thr, suf_c, suf, acc, act, w_own, G):
    """Cactus's output law G = (p sum_{c_n > r} w_n c_n - q sum_{c_n > r} w_n)_+ (minus the own
    term w_n own_n on the rejected ids ``act``, then clipped at 0 again) + acc, token by token, with
    s = #{thr < r_y} (thr nondecreasing) as lossy.cactus's pair computes it: one pass, then the
    few rejected ids again with their own term."""
    nt = thr.size
    if nt <= 2:                                 # the usual case: selects, no gather (it vectorises)
        t0 = thr[0] if nt > 0 else np.inf
        t1 = thr[1] if nt > 1 else np.inf
        c0, c1, c2 = suf_c[0], suf_c[min(1, nt)], suf_c[nt]
        w0, w1, w2 = suf[0], suf[min(1, nt)], suf[nt]
        for i in range(p.size):
            x = r_tok[i]
            a = c2 if t1 < x else (c1 if t0 < x else c0)        # suf_c[s], s = #{thr < x}
            b = w2 if t1 < x else (w1 if t0 < x else w0)
            g = p[i] * a - q[i] * b
            G[i] = (g if g >= 0.0 else 0.0) + acc[i]
    else:
        for i in range(p.size):
            s = _below(thr, r_tok[i])
            g = p[i] * suf_c[s] - q[i] * suf[s]
            G[i] = (g if g >= 0.0 else 0.0) + acc[i]
    for k in range(act.size):                   # the sum runs over n != y
        i = act[k]
        s = _below(thr, r_tok[i])
        g = p[i] * suf_c[s] - q[i] * suf[s]
        g = (g if g >= 0.0 else 0.0) - w_own[k]
        G[i] = (g if g >= 0.0 else 0.0) + acc[i]
    return G


@njit
def _lenience_terms(a, b, l):
    """acc = min(q, p / l), rej = (q - p / l)_+, pos = (p - q)_+ of one token (numpy's arithmetic)."""
    x = a / l
    t = b - x
    u = a - b
    return (b if b <= x else x), (t if t >= 0.0 else 0.0), (u if u >= 0.0 else 0.0)


@njit
def lenience_pair(p, q, l, res):
    """Lenience's closed pair: res = (pos / pos.sum()) rej.sum() + acc (p rej.sum() + acc when
    pos.sum() = 0), returns acc.sum(), with acc, rej, pos of :func:`_lenience_terms`: the sums in
    numpy's pairwise order from a first pass, the law from a second, the same operations in the
    same order as the numpy chain on written-out rows, without the rows."""
    n = p.size
    lens = KL.pairwise_blocks(n)
    sa = np.empty(lens.size)
    sr = np.empty(lens.size)
    sp = np.empty(lens.size)
    ba = np.empty(KL.PW_BLOCK)
    br = np.empty(KL.PW_BLOCK)
    bp = np.empty(KL.PW_BLOCK)
    s = 0
    for k in range(lens.size):
        m = lens[k]
        ps, qs = p[s:s + m], q[s:s + m]
        for i in range(m):
            ba[i], br[i], bp[i] = _lenience_terms(ps[i], qs[i], l)
        sa[k] = KL.leaf_sum(ba, m)
        sr[k] = KL.leaf_sum(br, m)
        sp[k] = KL.leaf_sum(bp, m)
        s += m
    total_pos = KL.pairwise_total(n, sp)
    rejected = KL.pairwise_total(n, sr)
    for i in range(n):
        acc, _, pos = _lenience_terms(p[i], q[i], l)
        v = pos / total_pos if total_pos > 0.0 else p[i]
        res[i] = v * rejected + acc
    return KL.pairwise_total(n, sa)


@njit
def mul_sum(g, p):
    """g *= p, returning g.sum() (numpy's pairwise order, bit for bit) from the same pass."""
    n = g.size
    lens = KL.pairwise_blocks(n)
    sums = np.empty(lens.size)
    s = 0
    for k in range(lens.size):
        m = lens[k]
        gs, ps = g[s:s + m], p[s:s + m]
        for i in range(m):
            gs[i] *= ps[i]
        sums[k] = KL.leaf_sum_at(g, s, m)
        s += m
    return KL.pairwise_total(n, sums)


@njit
def div_min_sum(g, t, q):
    """g /= t, returning np.minimum(q, g).sum() (numpy's pairwise order, bit for bit) from the same pass."""
    n = g.size
    lens = KL.pairwise_blocks(n)
    sums = np.empty(lens.size)
    buf = np.empty(KL.PW_BLOCK)
    s = 0
    for k in range(lens.size):
        m = lens[k]
        gs, qs = g[s:s + m], q[s:s + m]
        for i in range(m):
            v = gs[i] / t
            gs[i] = v
            b = qs[i]
            buf[i] = b if b <= v else v
        sums[k] = KL.leaf_sum(buf, m)
        s += m
    return KL.pairwise_total(n, sums)


@njit
def js_released_terms(p, q, t):
    """t = ((p - q)/p) ((p - q)/q) / 4, numpy's operations in lossy._js_released's order; returns
    whether p, q > 0 everywhere (else t is not meaningful)."""
    ok = True
    for i in range(p.size):                     # branch-free: it vectorises
        a, b = p[i], q[i]
        ok &= (a > 0.0) & (b > 0.0)
        d = a - b
        v = d / a
        v *= d / b
        t[i] = v * 0.25
    return ok


@njit
def mid_log_sum(p, q, t):
    """sum_v ((p_v + q_v) / 2) t_v in numpy's pairwise order (bit for bit ``(t * m).sum()``)."""
    n = p.size
    lens = KL.pairwise_blocks(n)
    sums = np.empty(lens.size)
    buf = np.empty(KL.PW_BLOCK)
    s = 0
    for k in range(lens.size):
        ln = lens[k]
        ps, qs, ts = p[s:s + ln], q[s:s + ln], t[s:s + ln]
        for i in range(ln):
            buf[i] = ts[i] * ((ps[i] + qs[i]) * 0.5)
        sums[k] = KL.leaf_sum(buf, ln)
        s += ln
    return KL.pairwise_total(n, sums)


@njit
def add_scaled(res, p, c):
    """res += p * c in one pass: numpy's ``res += np.multiply(p, c)`` (two roundings, no fused
    multiply-add), without the product's row."""
    for i in range(p.size):
        t = p[i] * c
        res[i] += t
    return res


@njit
def masked_mix(p, q, t, strict, out, kept, rest):
    """out = q where keep else 0, with keep = p > t (``strict``) or p >= t; q on keep and on the rest
    packed in token order into ``kept`` and ``rest`` (the caller sums them, as numpy's
    ``q[keep].sum()``).  Returns (#keep, #rest)."""
    nk = 0
    nr = 0
    for i in range(p.size):
        b = q[i]
        keep = p[i] > t if strict else p[i] >= t
        if keep:
            out[i] = b
            kept[nk] = b
            nk += 1
        else:
            out[i] = 0.0
            rest[nr] = b
            nr += 1
    return nk, nr
