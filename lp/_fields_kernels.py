"""A certificate's divergence fields by chunks of the row (numba; see :mod:`specsim._jit`).

:func:`lp.certificates._out_fields_compiled` on a row with out > 0 and p > 0 everywhere: the
one-pass fields of :func:`specsim.verifiers._clip_kernels.out_pass` (flags, the sums of |out - p|
and |p - q|), max out/p and the KL pair of :func:`specsim._kl_kernels.kl_sums`, formed over
chunks of a few thousand entries so that a chunk's ratios and logs stay in the core's L2 cache
between the pass that writes them, numpy's vectorised log and log1p of them (numpy's logs are the
reference bits) and the products summed.  Every chunk boundary is a boundary of numpy's pairwise
summation blocks (:func:`specsim._kl_kernels.pairwise_blocks`): the block sums of all chunks,
combined by :func:`specsim._kl_kernels.pairwise_total`, are the whole-row ``.sum()`` bit for bit.

The caller's loop is ``for j in range(nc + 1)``: step j sums chunk j - 1 and passes over chunk j,
and the caller takes the logs of chunk j between two steps (only the log a chunk needs: log1p
where some 0.5 < out/p < 2, log where some other ratio lies).  A chunk whose ratios lie on one
side but for a few (at most 1/32 of them) packs those few (:data:`PACK_LOG1P`,
:data:`PACK_LOG`) and numpy takes their log alone: one log of the row instead of two where
nearly every ratio is far from 1 (consultant_standin on an LLM-like row).  numpy's logs are
elementwise, the same bits wherever an entry lies in the array.

A row with p > 0 everywhere and zeros in out (typical, topk_accept: out = 0 off a kept set, so
KL(p||out) = inf) goes by :func:`miss_pass` instead: one pass by the same chunks for the flags,
max out/p, the TV sums and the support note's p mass, writing only the k entries with out > 0
(often a few hundred) packed, for numpy's own KL sum over those.  First call in a fresh install:
~5 s of compilation for both (cached on disk afterwards).
"""
from __future__ import annotations

import numpy as np
from numba import uint64

from specsim import _kl_kernels as KL
from specsim._jit import njit

#: step codes: the chunk has a ratio near 1 (take log1p), one far from 1 (take log), or the row is
#: not dense or has a non-finite entry (the caller takes the whole-row path); the chunk's few near
#: (far) ratios are packed in buf[5][:k], k = code >> 5: take log1p (log) of those alone
NEAR, FAR, ABORT, PACK_LOG1P, PACK_LOG = 1, 2, 4, 8, 16
#: the int64 slots at the head of ``acc[4]``: max out/p (its IEEE bits), betweenness broken,
#: out != q, the number of packed ratios of the chunk
_MAX, _NB, _NE, _NPACK = 0, 1, 2, 3


@njit
def chunk_plan(n, target):
    """The plan of a row of n entries in chunks of at most ``target`` entries (one block at least):
    [L, nc, block lengths (L), first block of each chunk (nc + 1), first entry of each chunk (nc + 1)]."""
    lens = KL.pairwise_blocks(n)
    L = lens.size
    cuts = np.empty(L + 1, np.int64)
    offs = np.empty(L + 1, np.int64)
    nc, s, size = 0, 0, 0
    for b in range(L):
        if b == 0 or size + lens[b] > target:   # a new chunk starts at block b
            cuts[nc] = b
            offs[nc] = s
            nc += 1
            size = 0
        size += lens[b]
        s += lens[b]
    cuts[nc] = L
    offs[nc] = n
    plan = np.empty(2 + L + 2 * (nc + 1), np.int64)
    plan[0], plan[1] = L, nc
    plan[2:2 + L] = lens
    plan[2 + L:3 + L + nc] = cuts[:nc + 1]
    plan[3 + L + nc:] = offs[:nc + 1]
    return plan


@njit
def block_sums(t, u, lens, b0, b1, st, su):
    """st[b], su[b] = numpy's pairwise_sum of block b of two contiguous rows, for the blocks
    b0 <= b < b1 laid out from t[0], u[0] on (:func:`specsim._kl_kernels.leaf_sum`'s order: eight
    accumulators, combined ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)), then the rest in order)."""
    s = 0
    for b in range(b0, b1):
        n = lens[b]
        st[b], su[b] = KL.leaf_sum_at(t, s, n), KL.leaf_sum_at(u, s, n)
        s += n


@njit
def fields_step(out, p, q, atol, plan, j, buf, acc):
    """Step j of the chunked fields (``plan`` from :func:`chunk_plan`, ``acc`` (5, >= max(L, 4)),
    ``buf`` (8, chunk width + 8) rows: lr, d, logs, two term rows, packed ratios, their ids, flags).

    First the KL terms of chunk j - 1 (lr, log1p(d) where near, log(lr) where far, the packed logs
    in place of those they stand for) summed per block into acc[2], acc[3]; then the pass over
    chunk j: lr = out / p, d = (out - p) / p, the sums of |out - p| and |p - q| per block into
    acc[0], acc[1], the flags and the max in acc[4] (int64 slots), the few ratios packed.
    Returns the codes of chunk j's logs (NEAR, FAR, PACK_*, k << 5), or ABORT."""
    L, nc = plan[0], plan[1]
    lens = plan[2:2 + L]
    cuts = plan[2 + L:3 + L + nc]
    offs = plan[3 + L + nc:4 + L + 2 * nc]
    st = acc[4].view(np.int64)
    lr, d, logs, t1, t2, pk = buf[0], buf[1], buf[2], buf[3], buf[4], buf[5]
    idx = buf[6].view(np.int64)
    flag = buf[7].view(np.uint8)
    if j > 0:                                   # kl_sums's terms and block sums, chunk j - 1
        s, e = offs[j - 1], offs[j]
        xs, ys = out[s:e], p[s:e]
        for i in range(e - s):
            v, l1, lg = lr[i], d[i], logs[i]   # both loaded: a select, not a branch (it vectorises)
            t = l1 if ((v > 0.5) & (v < 2.0)) else lg
            t1[i] = xs[i] * t
            t2[i] = ys[i] * t
        for k in range(st[_NPACK]):             # the packed minority's terms replace those
            i = idx[k]
            t1[i] = xs[i] * pk[k]
            t2[i] = ys[i] * pk[k]
        block_sums(t1, t2, lens, cuts[j - 1], cuts[j], acc[2], acc[3])
    if j == nc:
        return 0
    if j == 0:
        st[_MAX] = 0
        st[_NB] = 0
        st[_NE] = 0
        st[_NPACK] = 0
    lv = lr.view(np.int64)                      # positive doubles order as their bit patterns
    nd = bad = nb = ne = False
    ncl = 0
    mx = st[_MAX]
    s, e = offs[j], offs[j + 1]
    os, ps, qs = out[s:e], p[s:e], q[s:e]
    for i in range(e - s):                      # out_pass's operations with p > 0 (branch-free)
        o, a, c = os[i], ps[i], qs[i]
        nd |= (o <= 0.0) | (a <= 0.0)
        bad |= not (o < np.inf)
        ratio = o / a                           # inf or NaN where p = 0: the row is aborted then
        lr[i] = ratio
        d[i] = (o - a) / a
        close = (ratio > 0.5) & (ratio < 2.0)
        flag[i] = close
        ncl += close
        nb |= (o < min(a, c) - atol) | (o > max(a, c) + atol)
        ne |= o != c
        t1[i] = abs(o - a)
        t2[i] = abs(a - c)
    for i in range(e - s):
        mx = max(mx, lv[i])
    if nd or bad:
        return ABORT
    block_sums(t1, t2, lens, cuts[j], cuts[j + 1], acc[0], acc[1])
    st[_MAX] = mx
    st[_NB] |= nb
    st[_NE] |= ne
    m = e - s
    code = NEAR * (ncl > 0) + FAR * (ncl < m)
    st[_NPACK] = 0
    lim = m // 32
    if (0 < ncl <= lim) or (0 < m - ncl <= lim):
        # a few ratios on one side: pack them (their d or lr) for numpy's log of those alone
        want = ncl <= lim                       # the side packed: near (log1p) or far (log)
        for i in range(m, m + 8):               # pad the last word with the other side
            flag[i] = not want
        skip = uint64(0) if want else uint64(0x0101010101010101)
        words = flag[:(m + 7) // 8 * 8].view(np.uint64)
        src = d if want else lr
        k = 0
        for w in range(words.size):             # 8 flags a word: words of the other side skipped
            if words[w] != skip:
                for i in range(8 * w, 8 * w + 8):   # branch-free: a ratio written, kept if packed
                    idx[k] = i
                    pk[k] = src[i]
                    k += flag[i] == want
        st[_NPACK] = k
        code = (FAR | PACK_LOG1P) if want else (NEAR | PACK_LOG)
        code |= k << 5
    return code


@njit
def fields_total(n, acc):
    """(max out/p, between, out == q, sum |out - p|, sum |p - q|, sum out log(out/p),
    sum p log(out/p)) of the chunked steps: each sum numpy's ``.sum()`` of its row, bit for bit
    (:func:`specsim._kl_kernels.pairwise_totals` of acc[0:4]'s block sums, the four in one walk)."""
    st = acc[4].view(np.int64)
    mr = acc[4, _MAX]                           # the float whose bits are st[_MAX]
    t = KL.pairwise_totals(n, acc, 4)
    return mr, st[_NB] == 0, st[_NE] == 0, t[0], t[1], t[2], t[3]


@njit
def miss_pass(out, p, q, atol, plan, xs, ys, idx):
    """The fields of a row with p > 0 everywhere and out >= 0 with zeros (KL(p||out) = inf), by
    chunks of ``plan`` (:func:`chunk_plan`), no row written but the packed ones: max out/p, the
    flags, numpy's ``.sum()`` of |out - p| and of |p - q| (blocks of n entries), and over the k
    entries with out > 0, packed in order as numpy packs them for KL(out||p): xs = out, ys = p,
    and their tokens idx.  Then numpy's ``p[out <= 0].sum()`` (blocks of the n - k entries with out = 0: a block
    with no such token inside is summed in place, another gathered first) and the first of them.
    Returns (ok, max out/p, betweenness broken, out != q, k, first token with out = 0,
    sum |out - p|, sum |p - q|, p mass where out = 0); ok False (the caller takes the whole-row
    path): an entry of out negative or not finite, p <= 0 somewhere, or no zero in out."""
    n = out.size
    L, nc = plan[0], plan[1]
    lens = plan[2:2 + L]
    cuts = plan[2 + L:3 + L + nc]
    offs = plan[3 + L + nc:4 + L + 2 * nc]
    width = 0
    for j in range(nc):
        width = max(width, offs[j + 1] - offs[j])
    ts = np.empty((2, L))                       # the blocks' sums of |out - p|, |p - q|
    t1, t2, rr = np.empty(width), np.empty(width), np.empty(width)
    rv = rr.view(np.int64)                      # positive doubles order as their bit patterns
    flag = np.empty(width + 8, np.uint8)
    nd = bad = nb = ne = False
    mx = 0
    k = 0
    first = -1
    for j in range(nc):
        s, e = offs[j], offs[j + 1]
        os, ps, qs = out[s:e], p[s:e], q[s:e]
        m = e - s
        npos = 0
        for i in range(m):                      # out_pass's operations (branch-free)
            o, a, c = os[i], ps[i], qs[i]
            nd |= (o < 0.0) | (a <= 0.0)
            bad |= not (o < np.inf)
            rr[i] = o / a
            nb |= (o < min(a, c) - atol) | (o > max(a, c) + atol)
            ne |= o != c
            t1[i] = abs(o - a)
            t2[i] = abs(a - c)
            pos = o > 0.0
            flag[i] = pos
            npos += pos
        if nd or bad:
            return (False, 0.0, False, False, k, -1, 0.0, 0.0, 0.0)
        for i in range(m):
            mx = max(mx, rv[i])
        block_sums(t1, t2, lens, cuts[j], cuts[j + 1], ts[0], ts[1])
        if first < 0 and npos < m:
            for i in range(m):
                if flag[i] == 0:
                    first = s + i
                    break
        if npos:                                # pack them: 8 flags a word, zero words skipped
            for i in range(m, m + 8):
                flag[i] = 0
            words = flag[:(m + 7) // 8 * 8].view(np.uint64)
            for w in range(words.size):
                if words[w] != 0:
                    for i in range(8 * w, 8 * w + 8):
                        if flag[i]:
                            xs[k] = os[i]
                            ys[k] = ps[i]
                            idx[k] = s + i
                            k += 1
    if k == n:
        return (False, 0.0, False, False, k, -1, 0.0, 0.0, 0.0)
    mlens = KL.pairwise_blocks(n - k)
    sm = np.empty(mlens.size)
    stage = np.empty(KL.PW_BLOCK)
    i = jj = 0                                  # the next token, the next packed one (>= i)
    for b in range(mlens.size):
        w = mlens[b]
        if (idx[jj] if jj < k else n) >= i + w:  # no out > 0 inside: the block lies in p
            sm[b] = KL.leaf_sum_at(p, i, w)
            i += w
        else:
            c = 0
            while c < w:
                if jj < k and idx[jj] == i:
                    jj += 1
                else:
                    stage[c] = p[i]
                    c += 1
                i += 1
            sm[b] = KL.leaf_sum(stage, w)
    mr = rr[:1].copy()
    mr.view(np.int64)[0] = mx
    t = KL.pairwise_totals(n, ts, 2)
    return True, mr[0], nb, ne, k, first, t[0], t[1], KL.pairwise_total(n - k, sm)
