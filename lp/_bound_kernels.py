"""Compiled i.i.d. multi-draft bound without a full sort (numba; see :mod:`specsim._jit`).

The same algorithm as the numpy path of :func:`lp.coupling._iid_bound_bucketed` (docs/theory.md
§6.6, "without a full sort"), in two passes over the row instead of ~15 numpy calls:

1. p/q, its bucket (the IEEE pattern shifted right, clamped below at bucket 0; r > K, inf and
   nan dropped) and per-bucket sums of p and q, each bucket compensated by TwoSum (Knuth): a
   bucket of 150,000 tied tokens is summed to ~1 ulp, where the numpy path needs sub-bins;
2. on the 4,097 buckets: edge objectives, the lower bound inside each bucket, the buckets to open;
3. a second pass over the (int16) bucket ids gathers the opened buckets' tokens grouped by bucket;
   each bucket is sorted by p/q (skipped when all its ratios are equal) and evaluated at the ends
   of its runs of equal ratio, with p(H) and lam = q(V minus H) from the edge sums plus
   compensated sums inside the bucket;
4. H is the tokens with bucket < the best edge, the tokens of the best run's bucket through that
   run relabelled -1: one ``np.flatnonzero`` outside.

Division by zero never happens (q = 0 tokens are dropped before dividing); no fastmath.  The
first call in a process compiles (~1-2 s) unless numba's on-disk cache (``__pycache__``) holds it.
"""
from __future__ import annotations

import math

import numpy as np

from specsim._jit import njit

_CHUNK = 256                         # p/q goes through a small buffer to read its bit pattern


@njit
def _miss(lam, K):
    """1 - (1 - lam)^K = -expm1(K log1p(-lam)), lam clamped to 1 (as lp.coupling._iid_miss)."""
    if lam >= 1.0:
        return 1.0
    return -math.expm1(K * math.log1p(-lam))


@njit
def iid_bound(p, q, K, lo, n_buckets, shift, slack):
    """(value, p(H), lam(H), ids, edge) of alpha* = min_H [p(H) + 1 - q(H)^K] for validated
    float64 rows: H = the tokens with ids < edge (``ids``: int16 per token).

    ``lo``: the bit pattern of K shifted right by ``shift``, minus ``n_buckets - 1`` (bucket 0);
    ``slack``: a bucket is opened if its lower bound is within it of the best edge objective.
    """
    V = p.size
    nb = n_buckets + 1
    ids = np.empty(V, np.int16)
    acc = np.zeros(4 * nb)             # per bucket: sum of p, its correction, sum of q, its correction
    count = np.zeros(nb, np.int64)
    top = float(K)
    rbuf = np.empty(_CHUNK)
    bits = rbuf.view(np.int64)
    for s in range(0, V, _CHUNK):
        e = min(s + _CHUNK, V)
        np.divide(p[s:e], q[s:e], rbuf[:e - s])          # numpy semantics: inf, nan, no exception
        for j in range(e - s):                           # (vectorised: no branch)
            b = max((bits[j] >> shift) - lo, 0)
            ids[s + j] = b if rbuf[j] <= top else n_buckets
        for i in range(s, e):
            b = ids[i]
            count[b] += 1
            # TwoSum (Knuth): each addition's rounding error goes into the bucket's correction
            k = 4 * b
            x, s0 = p[i], acc[k]
            t = s0 + x
            z = t - s0
            acc[k + 1] += (s0 - (t - z)) + (x - z)
            acc[k] = t
            x, s0 = q[i], acc[k + 2]
            t = s0 + x
            z = t - s0
            acc[k + 3] += (s0 - (t - z)) + (x - z)
            acc[k + 2] = t
    Pb = acc[0::4] + acc[1::4]
    Qb = acc[2::4] + acc[3::4]
    # edges b = 0..n_buckets: p of the buckets < b (dropped excluded), q of the buckets >= b
    P_edge = np.empty(nb)
    lam_edge = np.empty(nb + 1)
    s = 0.0
    c = 0.0
    for b in range(nb):
        P_edge[b] = s + c
        if b < n_buckets:
            t = s + Pb[b]
            z = t - s
            c += (s - (t - z)) + (Pb[b] - z)
            s = t
    s = 0.0
    c = 0.0
    lam_edge[nb] = 0.0
    for b in range(nb - 1, -1, -1):
        t = s + Qb[b]
        z = t - s
        c += (s - (t - z)) + (Qb[b] - z)
        s = t
        lam_edge[b] = s + c
    ke = 0
    best = 2.0
    for b in range(nb):
        o = P_edge[b] + _miss(lam_edge[b], K)
        if o < best:
            best, ke = o, b
    best_P, best_lam = P_edge[ke], lam_edge[ke]
    # buckets to open (q = 0 only where p = 0: such a bucket is all in at its edge)
    opened = np.zeros(nb, np.bool_)
    start = np.zeros(nb + 1, np.int64)
    n_open = 0
    for b in range(n_buckets):
        start[b] = n_open
        if Qb[b] > 0.0 and P_edge[b] + _miss(lam_edge[b + 1], K) <= best + slack:
            opened[b] = True
            n_open += count[b]
    start[n_buckets] = n_open
    start[nb] = n_open
    run_bucket = -1
    run_thr = 0.0
    if n_open > 0:
        # branch-free: the other buckets write to a spare slot at the end and do not advance
        tok = np.empty(n_open + 1, np.int64)
        fill = np.full(nb, n_open)
        step = np.zeros(nb, np.int64)
        for b in range(n_buckets):
            if opened[b]:
                fill[b] = start[b]
                step[b] = 1
        for i in range(V):
            b = ids[i]
            k = fill[b]
            tok[k] = i
            fill[b] = k + step[b]
        rt = np.empty(n_open)
        for j in range(n_open):
            rt[j] = p[tok[j]] / q[tok[j]]
        lam_tail = np.empty(n_open + 1)
        for b in range(n_buckets):
            if not opened[b]:
                continue
            a, e = start[b], start[b + 1]
            tied = True
            for j in range(a + 1, e):
                if rt[j] != rt[a]:
                    tied = False
                    break
            if not tied:
                o = np.argsort(rt[a:e], kind="mergesort")
                tok[a:e] = tok[a:e][o]
                rt[a:e] = rt[a:e][o]
            # q of the bucket's tokens after j, compensated, from the top
            s = 0.0
            c = 0.0
            lam_tail[e] = 0.0
            for j in range(e - 1, a - 1, -1):
                lam_tail[j + 1] = s + c
                x = q[tok[j]]
                t = s + x
                z = t - s
                c += (s - (t - z)) + (x - z)
                s = t
            s = 0.0
            c = 0.0
            for j in range(a, e):
                x = p[tok[j]]
                t = s + x
                z = t - s
                c += (s - (t - z)) + (x - z)
                s = t
                if j + 1 < e and rt[j + 1] == rt[j]:
                    continue                    # a run of equal ratio is all in or all out
                P_run = P_edge[b] + (s + c)
                lam_run = lam_edge[b + 1] + lam_tail[j + 1]
                o = P_run + _miss(lam_run, K)
                if o < best:
                    best, best_P, best_lam = o, P_run, lam_run
                    run_bucket, run_thr = b, rt[j]
    if run_bucket >= 0:               # the run's bucket through the run counts as below it
        for j in range(start[run_bucket], start[run_bucket + 1]):
            if rt[j] <= run_thr:
                ids[tok[j]] = -1
        ke = run_bucket
    return best, best_P, best_lam, ids, ke
