"""Compiled i.i.d. multi-draft bound without a full sort (numba; see :mod:`specsim._jit`).

The same algorithm as the numpy path of :func:`lp.coupling._iid_bound_bucketed` (docs/theory.md
§6.6, "without a full sort"), in three passes over the row instead of ~15 numpy calls:

0. the input is the checked rows and their sums (:func:`specsim._validate.pair_sums`): p and q
   are divided out where the passes read them (no normalised copy of the rows is written);
1. p/q and its bucket (the IEEE pattern shifted right, clamped below at bucket 0; r > K, inf
   and nan dropped); then, in a pass of its own, per-bucket token counts and sums of p and q
   (of the rows as given, divided by their sums at the end):
   plain sums over at most 71 tokens, each added into the bucket's sum compensated by TwoSum
   (Knuth): a bucket of 150,000 tied tokens is summed to ~70 ulp of its sum at worst, where the
   numpy path needs sub-bins;
2. on the 4,097 buckets: edge objectives, the lower bound inside each bucket (from its smallest
   ratio, see :func:`lp.coupling._bucket_lower_bounds`), the buckets to open (log1p and expm1
   only where a cheap estimate of the objective comes within 1e-12 of the threshold);
3. a pass over the bucket ids (int16: 4,097 buckets; blocks of 64 with none in the opened range
   skipped) copies the opened buckets' tokens, with their p and q, straight to their slots
   grouped by bucket (offsets from the counts; read later in ratio order, the full rows would
   cost a cache miss per token); each bucket is sorted by p/q (skipped when its ratios are all
   equal; one counting pass on the next 8 bits of the ratio, then insertion sort; heapsort for
   near-ties) and evaluated at the ends of its runs of equal ratio, with p(H) and
   lam = q(V minus H) from the edge sums plus compensated sums inside the bucket;
4. H is the tokens with bucket < the best edge, the tokens of the best run's bucket through that
   run relabelled -1: sized from the bucket counts, filled in one more pass over the bucket ids.

p/q is formed by ``np.divide`` (numpy semantics: q = 0 gives inf or nan, dropped like r > K);
no fastmath.  The first call compiles the kernels, ~3 s on a shared 2-core machine, unless
numba's on-disk cache (``__pycache__``) already holds them.  Where the time goes at V = 151,936
(LLM-like row, K = 2, a shared 2-core AMD EPYC, one argsort of p/q ~1.7 ms): pass 1 with the
tables' reset ~70 us, the per-bucket sums ~155 us (a scatter into the bucket table per token),
the edges and buckets to open ~20 us, the gather and sort ~45 us, H ~65 us (a 1.1 MB result).
"""
from __future__ import annotations

import math

import numpy as np

from specsim._jit import njit

_CHUNK = 256                         # p/q goes through a small buffer to read its bit pattern
_INSERTION = 48                      # runs up to this size are sorted by insertion
_SCREEN_K = 1024                     # objectives are screened by a cheap estimate for K up to this
_SCREEN_MARGIN = 1e-12               # ... with this margin (> the estimate's error, <= 1.2e-13)
_FLUSH = 64.0                        # tokens a bucket sums plainly before its compensated sum takes them
_GROUP = 8                           # ... tested once per this many tokens
_SCAN = 64                           # the gather of the opened buckets' tokens skips blocks of this many


@njit
def _miss(lam, K):
    """1 - (1 - lam)^K = -expm1(K log1p(-lam)), lam clamped to 1 (as lp.coupling._iid_miss)."""
    if lam >= 1.0:
        return 1.0
    return -math.expm1(K * math.log1p(-lam))


@njit
def _objective_unless_above(P, lam, K, thr):
    """P + _miss(lam, K), or inf where it surely exceeds ``thr``: P > thr, or (K <= _SCREEN_K) the
    estimate P + 1 - (1 - lam)^K by repeated squaring, off by < (K + 2 log2 K + 4) 2^-53
    <= 1.2e-13, exceeds thr + _SCREEN_MARGIN.  Saves log1p and expm1 where they cannot matter."""
    if P > thr:
        return np.inf
    if K <= _SCREEN_K:
        x = max(1.0 - lam, 0.0)
        pw = 1.0
        k = K
        while k > 0:
            if k & 1:
                pw *= x
            x *= x
            k >>= 1
        if P + (1.0 - pw) > thr + _SCREEN_MARGIN:
            return np.inf
    return P + _miss(lam, K)


@njit
def _sort_bucket(rt, tok, pt, qt, a, e, sub_shift):
    """Sort rt[a:e] ascending, permuting tok, pt, qt alike.  Inside a bucket b > 0 the ratios share
    their top bits: one counting pass on the next 8 bits (``sub_shift``; -1 for bucket 0) leaves
    only the inversions inside those 256 sub-buckets, which insertion sort removes; heapsort where
    a sub-bucket is large (near-ties) or for bucket 0.  (Written as plain loops: numba's argsort,
    fancy indexing and slice-tuple assignments would triple the compile time.)"""
    m = e - a
    if m > _INSERTION and sub_shift >= 0:
        bits = rt.view(np.int64)
        count = np.zeros(257, np.int64)
        for j in range(a, e):
            count[((bits[j] >> sub_shift) & 255) + 1] += 1
        largest = 0
        for k in range(257):
            largest = max(largest, count[k])
        if largest <= _INSERTION:
            for k in range(256):
                count[k + 1] += count[k]
            r2, p2, q2, t2 = np.empty(m), np.empty(m), np.empty(m), np.empty(m, np.int64)
            for j in range(a, e):
                k = (bits[j] >> sub_shift) & 255
                d = count[k]
                r2[d] = rt[j]
                p2[d] = pt[j]
                q2[d] = qt[j]
                t2[d] = tok[j]
                count[k] = d + 1
            for d in range(m):
                rt[a + d] = r2[d]
                pt[a + d] = p2[d]
                qt[a + d] = q2[d]
                tok[a + d] = t2[d]
            m = 0                                  # nearly sorted: insertion sort below
    if m > _INSERTION:
        _heapsort(rt, tok, pt, qt, a, e)
        return
    for j in range(a + 1, e):                      # insertion sort: no allocation
        x, v, xp, xq = rt[j], tok[j], pt[j], qt[j]
        i = j - 1
        while i >= a and rt[i] > x:
            rt[i + 1] = rt[i]
            tok[i + 1] = tok[i]
            pt[i + 1] = pt[i]
            qt[i + 1] = qt[i]
            i -= 1
        rt[i + 1] = x
        tok[i + 1] = v
        pt[i + 1] = xp
        qt[i + 1] = xq


@njit
def _swap(rt, tok, pt, qt, i, j):
    rt[i], rt[j] = rt[j], rt[i]
    tok[i], tok[j] = tok[j], tok[i]
    pt[i], pt[j] = pt[j], pt[i]
    qt[i], qt[j] = qt[j], qt[i]


@njit
def _heapsort(rt, tok, pt, qt, a, e):
    """rt[a:e] ascending by heapsort (O(m log m), in place), permuting tok, pt, qt alike."""
    m = e - a
    for start in range(m // 2 - 1, -1, -1):
        _sift_down(rt, tok, pt, qt, a, start, m)
    for end in range(m - 1, 0, -1):
        _swap(rt, tok, pt, qt, a, a + end)
        _sift_down(rt, tok, pt, qt, a, 0, end)


@njit
def _sift_down(rt, tok, pt, qt, a, root, n):
    while 2 * root + 1 < n:
        child = 2 * root + 1
        if child + 1 < n and rt[a + child] < rt[a + child + 1]:
            child += 1
        if rt[a + root] >= rt[a + child]:
            return
        _swap(rt, tok, pt, qt, a + root, a + child)
        root = child


@njit
def _two_sum_into(acc, k, x):
    """acc[k] + acc[k + 1] += x with acc[k + 1] collecting the rounding error (TwoSum, Knuth)."""
    s0 = acc[k]
    t = s0 + x
    z = t - s0
    acc[k + 1] += (s0 - (t - z)) + (x - z)
    acc[k] = t


@njit
def iid_bound(p_in, q_in, s_p, s_q, K, lo, n_buckets, shift, slack, ids, part, acc):
    """(value, p(H), lam(H), H) of alpha* = min_H [p(H) + 1 - q(H)^K] for the rows
    p = p_in / s_p + 0.0 and q = q_in / s_q + 0.0 (checked float64 rows and their numpy sums
    > 0, :func:`specsim._validate.pair_sums`: the rows :func:`~specsim._validate.as_pair`
    returns), H the token ids, ascending; value -1 if an entry of p_in or q_in is < 0 (the
    caller may leave that check to this pass: ``pair_sums(..., signs=False)``).

    The entries of p and q are formed where they are read (the ratios and the opened buckets'
    tokens: bit for bit as_pair's); a bucket's sums are those of p_in and q_in divided by s_p
    and s_q (as accurate as summing its p and q entries), so no normalised copy is written.

    ``lo``: the bit pattern of K shifted right by ``shift``, minus ``n_buckets - 1`` (bucket 0);
    ``slack``: a bucket is opened if its lower bound is within it of the best edge objective;
    scratch, overwritten: ``ids`` (int16, V), ``part`` and ``acc`` (float64, 4 (n_buckets + 1)).
    """
    V = p_in.size
    nb = n_buckets + 1
    # scratch from the caller (reused between calls: fresh rows of this size page-fault):
    # ids (int16, V): each token's bucket; part (4 nb): per bucket, plain sums of p and q over
    # its last tokens, their count, the count of the tokens summed before them; acc (4 nb): per
    # bucket, sum of p, its correction, sum of q, its correction
    part[:] = 0.0
    acc[:] = 0.0
    top = float(K)
    rbuf = np.empty(_CHUNK)
    pbuf = np.empty(_CHUNK)
    qbuf = np.empty(_CHUNK)
    bits = rbuf.view(np.int64)
    negative = False
    for s in range(0, V, _CHUNK):
        e = min(s + _CHUNK, V)
        # (loops over slices from 0: indexing p[s + j] keeps numba's negative-index test in the
        # loop and stops it vectorising, ~2x slower here)
        pi, qi, ic = p_in[s:e], q_in[s:e], ids[s:e]
        for j in range(e - s):                           # p and q, as as_pair divides
            x = pi[j]
            y = qi[j]
            negative |= (x < 0.0) | (y < 0.0)
            pbuf[j] = x / s_p + 0.0
            qbuf[j] = y / s_q + 0.0
        np.divide(pbuf[:e - s], qbuf[:e - s], rbuf[:e - s])     # numpy semantics: inf, nan, no exception
        for j in range(e - s):                           # (vectorised: no branch)
            b = max((bits[j] >> shift) - lo, 0)
            ic[j] = b if rbuf[j] <= top else n_buckets
    if negative:                                         # (rows checked without their signs)
        return -1.0, 0.0, 0.0, np.empty(0, np.int64)
    # per-bucket sums: plain over at most _FLUSH + _GROUP - 1 tokens (error <= 71 eps of the
    # partial), then into the bucket's compensated sum.  The flush is tested once per _GROUP
    # tokens: a test per token, or TwoSum per token, costs ~1.2x more; so does this loop inside
    # the chunks above.
    Vg = V - V % _GROUP
    for g in range(0, Vg, _GROUP):
        full = False
        for i in range(g, g + _GROUP):
            k = 4 * np.int64(ids[i])
            part[k] += p_in[i]
            part[k + 1] += q_in[i]
            n = part[k + 2] + 1.0
            part[k + 2] = n
            full |= n >= _FLUSH
        if full:
            for i in range(g, g + _GROUP):
                k = 4 * np.int64(ids[i])
                if part[k + 2] >= _FLUSH:
                    _two_sum_into(acc, k, part[k])
                    _two_sum_into(acc, k + 2, part[k + 1])
                    part[k + 3] += part[k + 2]           # the bucket's tokens so far
                    part[k] = 0.0
                    part[k + 1] = 0.0
                    part[k + 2] = 0.0
    for i in range(Vg, V):
        k = 4 * np.int64(ids[i])
        part[k] += p_in[i]
        part[k + 1] += q_in[i]
        part[k + 2] += 1.0
    Pb = np.empty(nb)
    Qb = np.empty(nb)
    for b in range(nb):
        _two_sum_into(acc, 4 * b, part[4 * b])
        _two_sum_into(acc, 4 * b + 2, part[4 * b + 1])
        Pb[b] = (acc[4 * b] + acc[4 * b + 1]) / s_p
        Qb[b] = (acc[4 * b + 2] + acc[4 * b + 3]) / s_q
    # edges b = 0..n_buckets: p of the buckets < b (dropped excluded), q of the buckets >= b
    P_edge = np.empty(nb)
    lam_edge = np.empty(nb + 1)
    s = 0.0
    c = 0.0
    for b in range(nb):
        P_edge[b] = s + c
        if b < n_buckets and Pb[b] != 0.0:           # (adding 0 leaves s and c as they are)
            t = s + Pb[b]
            z = t - s
            c += (s - (t - z)) + (Pb[b] - z)
            s = t
    s = 0.0
    c = 0.0
    lam_edge[nb] = 0.0
    for b in range(nb - 1, -1, -1):
        if Qb[b] != 0.0:
            t = s + Qb[b]
            z = t - s
            c += (s - (t - z)) + (Qb[b] - z)
            s = t
        lam_edge[b] = s + c
    ke = 0
    best = 2.0
    for b in range(nb):
        # skipped, as they cannot be strictly better: an edge after an empty bucket (the same sums
        # as the edge before it) and an edge whose p alone reaches the best (the miss is >= 0)
        if (b > 0 and Pb[b - 1] == 0.0 and Qb[b - 1] == 0.0) or P_edge[b] >= best:
            continue
        o = _objective_unless_above(P_edge[b], lam_edge[b], K, best)
        if o < best:
            best, ke = o, b
    best_P, best_lam = P_edge[ke], lam_edge[ke]
    # buckets to open (q = 0 only where p = 0: such a bucket is all in at its edge)
    opened = np.zeros(nb, np.uint8)
    olist = np.empty(n_buckets, np.int64)
    n_olist = 0
    low = np.empty(1, np.int64)                 # the smallest ratio of a bucket, from its bit pattern
    low_r = low.view(np.float64)
    thr = best + slack
    for b in range(n_buckets):
        if Qb[b] == 0.0:
            continue
        # inside bucket b, H holds q-mass x in [0, Qb] of it with p-mass >= r_low x: the objective
        # is >= P_edge + r_low x + miss(lam_edge[b + 1] + Qb - x), concave in x, so >= its value at
        # x = 0 (about edge b's objective) or at x = Qb
        low[0] = (b + lo) << shift
        r_low = low_r[0] if b > 0 else 0.0
        if (_objective_unless_above(P_edge[b], lam_edge[b], K, thr) <= thr
                or _objective_unless_above(P_edge[b] + r_low * Qb[b], lam_edge[b + 1], K, thr) <= thr):
            opened[b] = 1
            olist[n_olist] = b
            n_olist += 1
    any_open = n_olist > 0
    run_bucket = -1
    run_thr = 0.0
    start = np.zeros(nb + 1, np.int64)          # opened bucket b: tok[start[b]:start[b + 1]]
    if any_open:
        # the opened buckets' tokens grouped by bucket (offsets from the bucket counts), their p
        # and q copied out once: later passes read them in ratio order, which would be a cache
        # miss per token on the full rows
        for b in range(n_buckets):
            start[b + 1] = start[b] + (np.int64(part[4 * b + 2] + part[4 * b + 3]) if opened[b] else 0)
        start[nb] = start[n_buckets]
        n_open = start[nb]
        fill = start[:nb].copy()
        tok = np.empty(n_open, np.int64)
        pt = np.empty(n_open)
        qt = np.empty(n_open)
        # opened buckets lie in olist[0]..olist[-1]: a block of _SCAN ids is looked at token by
        # token only if one of them falls in that range (a vectorised test)
        b_lo = olist[0]
        width = olist[n_olist - 1] - b_lo
        for s in range(0, V, _SCAN):
            e = min(s + _SCAN, V)
            hit = False
            blk = ids[s:e]                              # (a slice: see the first pass)
            for j in range(e - s):
                d = np.int64(blk[j]) - b_lo
                hit |= (d >= 0) & (d <= width)
            if not hit:
                continue
            for i in range(s, e):
                b = ids[i]
                if opened[b]:
                    k = fill[b]
                    tok[k], pt[k], qt[k] = i, p_in[i] / s_p + 0.0, q_in[i] / s_q + 0.0
                    fill[b] = k + 1
        rt = np.empty(n_open)
        for j in range(n_open):
            rt[j] = pt[j] / qt[j]                 # q > 0 in every kept bucket
        lam_tail = np.empty(n_open + 1)
        for ob in range(n_olist):
            b = olist[ob]
            a, e = start[b], start[b + 1]
            if a == e:
                continue
            tied = True
            for j in range(a + 1, e):
                if rt[j] != rt[a]:
                    tied = False
                    break
            if not tied:
                _sort_bucket(rt, tok, pt, qt, a, e, shift - 8 if b > 0 else -1)
            # q of the bucket's tokens after j, compensated, from the top
            s = 0.0
            c = 0.0
            lam_tail[e] = 0.0
            for j in range(e - 1, a - 1, -1):
                lam_tail[j + 1] = s + c
                x = qt[j]
                t = s + x
                z = t - s
                c += (s - (t - z)) + (x - z)
                s = t
            s = 0.0
            c = 0.0
            for j in range(a, e):
                x = pt[j]
                t = s + x
                z = t - s
                c += (s - (t - z)) + (x - z)
                s = t
                if j + 1 < e and rt[j + 1] == rt[j]:
                    continue                    # a run of equal ratio is all in or all out
                P_run = P_edge[b] + (s + c)
                lam_run = lam_edge[b + 1] + lam_tail[j + 1]
                o = _objective_unless_above(P_run, lam_run, K, best)
                if o < best:
                    best, best_P, best_lam = o, P_run, lam_run
                    run_bucket, run_thr = b, rt[j]
    n_H = 0                           # |H| from the bucket counts
    if run_bucket >= 0:               # the run's bucket through the run counts as below it
        for j in range(start[run_bucket], start[run_bucket + 1]):
            if rt[j] <= run_thr:
                ids[tok[j]] = -1
                n_H += 1
        ke = run_bucket
    for b in range(ke):
        n_H += np.int64(part[4 * b + 2] + part[4 * b + 3])
    # H: the tokens with ids < ke, ascending, appended branch-free (sized by the counts, as the
    # gather above is: they count the same ids)
    H = np.empty(n_H + 1, np.int64)
    n = 0
    for i in range(V):
        H[n] = i
        n += ids[i] < ke
    if n != n_H:
        raise RuntimeError("iid_bound: bucket counts disagree with the bucket ids")
    return best, best_P, best_lam, H[:n_H]
