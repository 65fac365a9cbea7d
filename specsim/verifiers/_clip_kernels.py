"""Compiled passes of the clip family and of a lossy certificate (numba; see :mod:`specsim._jit`).

:class:`~specsim.verifiers._clip_family.ClipFamily`'s set-up and :func:`lp.certificates.certify`'s
divergence fields are chains of ~10 numpy calls over the row, each reading and writing all of it;
at V = 151,936 the chain costs several sorts.  These kernels make the same computations in one or
two passes each, with the same floating-point operations in the same order, so that the results
are the numpy path's bit for bit wherever that is possible:

- running sums are sequential, as ``np.cumsum`` is;
- totals are left to numpy: a kernel writes the terms (packed in token order where numpy sums a
  masked subset) and the caller sums them with ``.sum()``, numpy's pairwise summation of the
  same terms in the same order;
- logarithms of whole rows are left to numpy (its vectorised log is ~6x the speed of a scalar
  libm call in a loop); only the bisection of :func:`clip_level` takes scalar logs (``math.log``,
  which may differ from numpy's by an ulp, so clip levels agree to ~1e-16 relative, not exactly).

The numpy code stays the reference and the path without numba.  First call in a fresh process:
~3.5 s of compilation for the kernels here (cached on disk afterwards: the next process pays
~0.4 s, most of it ``import numba``).
"""
from __future__ import annotations

import math

import numpy as np

from specsim._jit import njit


@njit
def ratio_keys(p, q, r_in, key, b, pack):
    """r_in = q / p in token order (inf where p = 0); with ``pack``, ``key`` = the bit pattern of
    r + 0.0 with its low ``b`` bits replaced by the token id (:func:`_argsort_nonneg`'s keys).
    Returns m = #{p > 0}."""
    n = p.size
    kf = key.view(np.float64)
    hi_bits = ~((np.int64(1) << b) - 1)
    m = 0
    for i in range(n):
        a = p[i]
        if a > 0.0:
            v = q[i] / a
            m += 1
        else:
            v = np.inf
        r_in[i] = v
        if pack:
            kf[i] = v + 0.0                     # -0.0 -> +0.0, as the numpy keys
            key[i] = (key[i] & hi_bits) | i
    return m


@njit
def gather(key, m, mask, p, q, ps, qs, r):
    """order = key & mask (in place, first m), ps = p[order], qs = q[order], r = qs / ps (as numpy
    divides: inf or NaN where ps = 0).  Returns whether r is nondecreasing."""
    ok = True
    for i in range(m):
        k = key[i] & mask
        key[i] = k
        a, c = p[k], q[k]
        ps[i] = a
        qs[i] = c
        if a > 0.0:
            v = c / a
        else:
            v = np.inf if c > 0.0 else np.nan
        r[i] = v
        if i > 0 and v < r[i - 1]:
            ok = False
    return ok


@njit
def repair_order(r, ps, qs, order, budget):
    """Stable insertion sort of r, carrying ps, qs and order along, for rows that :func:`gather`
    found out of order (ratios tied above the packed keys' id bits: a few short runs).  Linear in
    m plus the number of inversions; gives up (returns False) once more than ``budget`` entries
    have been moved, leaving the arrays a permutation in which equal ratios keep their relative
    order, so the caller's stable argsort still yields the order of the numpy path."""
    moved = 0
    for i in range(1, r.size):
        v = r[i]
        if not v < r[i - 1]:
            continue
        a, c, o = ps[i], qs[i], order[i]
        j = i
        while j > 0 and v < r[j - 1]:
            r[j], ps[j], qs[j], order[j] = r[j - 1], ps[j - 1], qs[j - 1], order[j - 1]
            j -= 1
        r[j], ps[j], qs[j], order[j] = v, a, c, o
        moved += i - j
        if moved > budget:
            return False
    return True


@njit
def prefix_sums(ps, qs, r, Pc, Qc, Psuf, Qsuf, G):
    """Pc, Qc (running sums with a leading 0), Psuf, Qsuf (suffix sums, Psuf[m] = 0) and
    G_j = r_j Pc_j - Qc_j, all sequential as np.cumsum; returns n0 = #{r <= 0}."""
    m = ps.size
    P = 0.0
    Q = 0.0
    Ps = 0.0
    Qs = 0.0
    n0 = 0
    Pc[0] = 0.0
    Qc[0] = 0.0
    Psuf[m] = 0.0
    Qsuf[m] = 0.0
    for i in range(m):                          # four independent running sums, one loop
        G[i] = r[i] * P - Q
        P += ps[i]
        Q += qs[i]
        Pc[i + 1] = P
        Qc[i + 1] = Q
        if r[i] <= 0.0:
            n0 += 1
        k = m - 1 - i
        Ps += ps[k]
        Qs += qs[k]
        Psuf[k] = Ps
        Qsuf[k] = Qs
    return n0


@njit
def mid_cumsum(kind, ps, qs, logr, M):
    """M = (0, running sum of the middle terms): (p - q)_+ (kind 0, TV), q log r (1, KL(pi||p)),
    -p log r (2, KL(p||pi)), in ratio order."""
    M[0] = 0.0
    s = 0.0
    for i in range(ps.size):
        if kind == 0:
            t = ps[i] - qs[i]
            t = max(t, 0.0)
        elif kind == 1:
            t = qs[i] * logr[i]
        else:
            t = -(ps[i] * logr[i])
        s += t
        M[i + 1] = s
    return M


@njit
def _b_level(a, mass, r, ps, qs, Pc, Qc, Psuf, Qsuf, G, q0):
    """ClipFamily.b(a, mass)."""
    m = r.size
    hi = np.searchsorted(r, a, side="right")
    excess = q0
    if hi < m:
        excess += max(Qsuf[hi] - a * Psuf[hi], qs[m - 1] - a * ps[m - 1], 0.0)
    c = (mass - 1.0) + excess
    if c <= 0.0:
        return min(1.0, r[0]) if m > 0 else 1.0
    j = min(np.searchsorted(G, c, side="left"), hi)
    if j == 0:
        return min(1.0, r[0])
    return min(max((c + Qc[j]) / Pc[j], 0.0), 1.0, a)


@njit
def _divergence(kind, a, r, ps, qs, Pc, Qc, Psuf, Qsuf, G, q0, M, n0):
    """_ClipDivergence(fam, kind)(a) at mass 1."""
    b = _b_level(a, 1.0, r, ps, qs, Pc, Qc, Psuf, Qsuf, G, q0)
    lo = np.searchsorted(r, b, side="left")
    hi = np.searchsorted(r, a, side="right")
    low, high = Pc[lo], Psuf[hi]
    mid = M[hi] - M[lo]
    if kind == 1:
        first = b * math.log(b) * low if b > 0.0 else 0.0
        return first + mid + a * math.log(a) * high
    if kind == 2:
        if b <= 0.0 and (n0 > 0 or low > 0.0):
            return np.inf
        first = -math.log(b) * low if low > 0.0 else 0.0
        return first + mid - math.log(a) * high
    return (1.0 - b) * low + mid


@njit
def clip_level(kind, eps, a_max, r, ps, qs, Pc, Qc, Psuf, Qsuf, G, q0, M, n0):
    """lp.frontier._clip_level: the largest a >= 1 with D(pi(a), p) <= eps, by the same bisection."""
    hi = max(a_max, 1.0)
    if eps == 0.0:
        return 1.0
    if _divergence(kind, hi, r, ps, qs, Pc, Qc, Psuf, Qsuf, G, q0, M, n0) <= eps:
        return hi
    lo = 1.0
    for _ in range(400):
        mid = lo * math.sqrt(hi / lo) if 0.0 < 4.0 * lo < hi else 0.5 * (lo + hi)
        if _divergence(kind, mid, r, ps, qs, Pc, Qc, Psuf, Qsuf, G, q0, M, n0) <= eps:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 4e-16 * max(hi, 1e-300):
            break
    return lo


@njit
def out_pass(out, p, q, atol, tv_out, tv_pq, lr, d):
    """One pass over a certificate's (out, p, q): tv_out = |out - p|, tv_pq = |p - q| (terms of the
    two TV sums), lr = out / p and d = (out - p) / p where p > 0 (:func:`ratio_rows` of (out, p)
    when every entry of both is > 0), and the flags.  Returns (bad, same_support, off, miss,
    max_ratio (-1: take lr.max()), between, equal_q, dense, near): ``bad`` = out has a negative or non-finite entry;
    ``off`` = out > 0 = p somewhere, ``miss`` = p > 0 = out somewhere; max_ratio = max out/p (inf
    where out > 0 = p, 0 where both are 0); between = min(p, q) - atol <= out <= max(p, q) + atol;
    equal_q = (out == q); dense = out > 0 and p > 0 everywhere; near = some 0.5 < out/p < 2."""
    # branch-free (selects, no early exits) so that the loop vectorises; the max ratio is
    # taken afterwards from lr, which holds out/p where p > 0 and out where p = 0
    bad = False
    off = False
    miss = False
    between = True
    eq = True
    near = False
    npos = 0
    for i in range(out.size):
        o, a, c = out[i], p[i], q[i]
        pa = a > 0.0
        po = o > 0.0
        den = a if pa else 1.0
        ratio = o / den
        lr[i] = ratio
        d[i] = (o - a) / den
        bad |= not ((o >= 0.0) & (o < np.inf))
        off |= po & (not pa)
        miss |= pa & (not po)
        npos += pa
        near |= pa & po & (ratio > 0.5) & (ratio < 2.0)
        tv_out[i] = abs(o - a)
        tv_pq[i] = abs(a - c)
        between &= (o >= min(a, c) - atol) & (o <= max(a, c) + atol)
        eq &= o == c
    dense = not (off or miss) and npos == out.size
    if off:
        mr = np.inf
    elif dense:
        mr = -1.0                               # the caller takes lr.max() (numpy's vectorised max)
    else:
        mr = 0.0                                # out = 0 where p = 0 (no off): ratio 0 there
        for i in range(out.size):
            if p[i] > 0.0 and lr[i] > mr:
                mr = lr[i]
    return bad, not (off or miss), off, miss, mr, between, eq, dense, near


@njit
def ratio_rows(x, y, lr, d):
    """Over the k entries with x > 0, in order: lr = x / y and d = (x - y) / y (the two arguments of
    divergences._log_ratio).  Returns (k, any entry with 0.5 < x / y < 2, whether y <= 0 on one of
    them).  A row with x > 0 everywhere takes a branch-free loop (it vectorises)."""
    n = x.size
    k = 0
    for i in range(n):
        k += x[i] > 0.0
    near = False
    nonpos = False
    if k == n:
        for i in range(n):
            a, b = x[i], y[i]
            bad = not (b > 0.0)
            nonpos |= bad
            den = 1.0 if bad else b
            v = a / den
            lr[i] = v
            d[i] = (a - b) / den
            near |= (v > 0.5) & (v < 2.0)
        return k, near, nonpos
    k = 0
    for i in range(n):
        a = x[i]
        if a > 0.0:
            b = y[i]
            if b > 0.0:
                v = a / b
                lr[k] = v
                d[k] = (a - b) / b
                if 0.5 < v < 2.0:
                    near = True
            else:                               # the direction is infinite; terms unused
                nonpos = True
                lr[k] = 0.0
                d[k] = 0.0
            k += 1
    return k, near, nonpos


@njit
def kl_terms(x, y, lr, logs, log1ps, near, both, terms, terms_yx, dense):
    """The terms of divergences.kl_pair's sums over the k entries with x > 0, in order:
    terms = x log(x / y) and (with ``both``) terms_yx = y log(x / y), the log being log1p((x - y) / y)
    where 0.5 < x / y < 2 (when ``near``) and log(x / y) elsewhere.  ``lr`` = x / y, ``logs`` =
    log(lr), ``log1ps`` = log1p(d) over those entries (from :func:`ratio_rows` or :func:`out_pass`;
    ``dense``: x > 0 everywhere, no compaction).  Returns k; the caller sums the rows with numpy."""
    if dense:
        k = x.size
        for i in range(k):                      # branch-free (it vectorises)
            v = lr[i]
            t = log1ps[i] if (near & (v > 0.5) & (v < 2.0)) else logs[i]
            terms[i] = x[i] * t
            if both:
                terms_yx[i] = y[i] * t
        return k
    k = 0
    for i in range(x.size):
        a = x[i]
        if a > 0.0:
            v = lr[k]
            t = log1ps[k] if (near and 0.5 < v < 2.0) else logs[k]
            terms[k] = a * t
            if both:
                terms_yx[k] = y[i] * t
            k += 1
    return k


@njit
def cactus_caps(p, q, two_delta, h, c, acc, act):
    """Cactus's caps h_n = clip(p_n + sqrt(2 delta p_n (1 - p_n)), 0, 1), c_n = (1 - h_n)/(1 - p_n)
    (h = 1, c = 0 where p_n >= 1), acc = min(q, h), and the ids n with q_n - acc_n > 0 in ``act``
    (in order; returns their number k), with c_n for them in c[:k]: lossy._cactus_h and the start
    of Cactus's closed pair."""
    for i in range(p.size):                     # branch-free: selects only, so it vectorises
        a = p[i]
        hi = a * two_delta
        hi *= 1.0 - a
        hi = math.sqrt(hi)
        hi += a
        hi = hi if hi >= 0.0 else 0.0
        hi = hi if hi <= 1.0 else 1.0
        hi = 1.0 if a >= 1.0 else hi
        h[i] = hi
        b = q[i]
        acc[i] = b if b <= hi else hi
    k = 0
    for i in range(p.size):                     # c only where a drafted token can be rejected
        if q[i] - acc[i] > 0.0:
            act[k] = i
            a = p[i]
            c[k] = 0.0 if a >= 1.0 else (1.0 - h[i]) / (1.0 - a)
            k += 1
    return k


@njit
def cactus_out(p, q, r_tok, thr, suf_c, suf, acc, act, w_own, G):
    """Cactus's output law G = (p sum_{c_n > r} w_n c_n - q sum_{c_n > r} w_n)_+ (minus the own
    term w_n own_n on the rejected ids ``act``, then clipped at 0 again) + acc, token by token, with
    s = #{thr < r_y} (thr nondecreasing) as lossy.cactus's pair computes it."""
    nt = thr.size
    for i in range(p.size):
        x = r_tok[i]
        if nt <= 8:
            s = 0
            for t in range(nt):
                s += thr[t] < x
        else:                                   # binary search: #{thr < x}
            lo, hi = 0, nt
            while lo < hi:
                mid = (lo + hi) >> 1
                if thr[mid] < x:
                    lo = mid + 1
                else:
                    hi = mid
            s = lo
        g = p[i] * suf_c[s] - q[i] * suf[s]
        G[i] = g if g >= 0.0 else 0.0
    for k in range(act.size):
        i = act[k]
        g = G[i] - w_own[k]
        G[i] = g if g >= 0.0 else 0.0
    for i in range(p.size):
        G[i] += acc[i]
    return G


@njit
def lenience_terms(p, q, l, acc, rej, pos):
    """Lenience's closed pair in one pass, numpy's arithmetic: acc = min(q, p / l), rej =
    (q - p / l)_+ (the rejected mass, summed by the caller), pos = (p - q)_+ (the residual)."""
    for i in range(p.size):
        a = p[i] / l
        b = q[i]
        acc[i] = b if b <= a else a
        t = b - a
        rej[i] = t if t >= 0.0 else 0.0
        u = p[i] - b
        pos[i] = u if u >= 0.0 else 0.0


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
