"""Compiled passes of the multi-draft bound without replacement (numba; see :mod:`specsim._jit`).

:func:`lp.coupling.multidraft_bound` without replacement spent most of its time at V ~ 1.5e5 in
chains of full-row numpy calls and in Python-level loops over grid rows.  The kernels here:

- :func:`wor_bucket_pass`, :func:`wor_edge_bounds`: the bucketing of p/q with the per-bucket
  sums, and the bucket-edge bounds, of :func:`lp.coupling._wor_buckets`;
- :func:`split_head`, :func:`segment_sums`: the block (tokens before the live buckets) and the
  segment of :func:`lp.coupling._wor_bound_head`, and the prefix sums along the sorted segment;
- :func:`chord_block_sums`, :func:`chord_bounds`: the block's sums and the per-prefix bounds of
  :func:`lp.coupling._chord_screen`;
- :func:`power_moments`, :func:`race_prefix_weights`: the block's moments and the race
  recursion (:mod:`lp._race`), over a cluster of candidate prefixes with the quadrature's
  weights folded in (:func:`lp._race.wor_subset_quadrature`); :func:`low_probabilities`, the
  law's P(N <= K - 1) on the quadrature's grid rows.

What the passes cost is mostly how the compiler can lay them out: a division per token in a loop
that also tests for zero or scatters into tables runs at scalar division speed, so the divisions
go in loops of their own (:func:`_ratios`; zero denominators replaced by a select, so the loop
has no branch and is vectorised), and sums that numpy's would reassociate are kept in lanes or
per-position partial sums (:func:`power_moments`).  The numpy code they replace is the
reference in the tests (tests/lp/test_race_kernels.py) and the path without numba.  Sums run in
the same short runs as the numpy path (or compensated), so results agree with it to rounding,
not bit for bit.  Every kernel takes float64 / int64 arrays (int16 bucket ids) and Python floats
/ ints / bools, so each compiles once: ~5 s in all on the first call of a process without an
on-disk cache (idle 2-core machine, validation's kernel included), ~0.3 s with one.
"""
from __future__ import annotations

import numpy as np

from specsim._jit import njit

#: :func:`wor_bucket_pass` sums runs of this many consecutive tokens apart, then adds the runs.
RUN = 4096


#: :func:`wor_bucket_pass` divides this many tokens at a time in a loop of its own (no zero
#: test per token: the compiler vectorises it), then buckets them.
DIV_BLOCK = 1024


@njit
def _ratios(p, q, qtot, r, w):
    """r = p/q (inf where q = 0 < p, nan where p = q = 0) and w = q / (qtot - q) for a block of
    tokens.  The denominators are made nonzero by a select, so that the loop has no division-by-zero
    branch and is vectorised (two divisions per token were most of the bucket pass's time)."""
    for i in range(p.size):
        pv, qv = p[i], q[i]
        x = pv / (qv if qv != 0.0 else 1.0)
        r[i] = x if qv != 0.0 else (np.inf if pv > 0.0 else np.nan)
        d = qtot - qv
        w[i] = qv / (d if d != 0.0 else 1.0)                     # (d = 0: the largest mass alone, unused)


@njit
def wor_bucket_pass(p, q, lo, shift, top, n_buckets, star, qtot, with_max, r, ids):
    """One pass of :func:`lp.coupling._wor_buckets` step 2: r = p/q and its bucket per token
    (written into ``r`` and ``ids``), and per bucket 0..n_buckets (the last: dropped tokens)
    the sums of p, q, w_a = q_a / (qtot - q_a) (0 at ``star``) and the largest q (if ``with_max``,
    else 0).

    The bucket of r <= ``top`` is max((bits(r) >> shift) - lo, 0) (``lo``:
    :func:`lp.coupling._bucket_floor` of ``top``); r > top, inf and nan go to ``n_buckets``.  Returns
    (a [4, n_buckets + 1] array (P, Q, W, max q), the sum of q without ``star``, the number of
    tokens with q != 0).  The divisions go :data:`DIV_BLOCK` tokens at a time (:func:`_ratios`).
    The tokens go in runs of :data:`RUN` ids, each summed into a table of its own (small enough to
    stay in cache; a bucket's four entries in one cache line) that is then added into the totals: a
    bucket of 150,000 tied tokens is summed in runs of 4,096 terms, as the numpy path's sub-bins.
    ``star`` is left out of the q sums until the end: the sum without it is then the bucket totals'
    sum (compensated), free of the cancellation q(V) - q_star.
    """
    nb = n_buckets + 1
    part = np.zeros(4 * nb)
    tot = np.zeros(4 * nb)
    wbuf = np.empty(DIV_BLOCK)
    n = p.size
    nnz = 0
    for a in range(0, n, RUN):
        b_min, b_max = nb, 0
        for c in range(a, min(a + RUN, n), DIV_BLOCK):
            e = min(c + DIV_BLOCK, n)
            ps, qs, rs, ids_s = p[c:e], q[c:e], r[c:e], ids[c:e]
            _ratios(ps, qs, qtot, rs, wbuf)
            rb = rs.view(np.int64)
            for i in range(e - c):
                pv, qv, rv = ps[i], qs[i], rs[i]
                nnz += qv != 0.0
                b = max((rb[i] >> shift) - lo, 0)
                b = b if rv <= top else n_buckets                # (selects: no branch on the data)
                ids_s[i] = b
                b_min = min(b_min, b)
                b_max = max(b_max, b)
                k = 4 * b
                part[k] += pv
                if c + i != star:
                    part[k + 1] += qv
                    part[k + 2] += wbuf[i]
                if with_max:
                    part[k + 3] = max(part[k + 3], qv)
        for i in range(4 * b_min, 4 * b_max + 4):
            tot[i] = max(tot[i], part[i]) if i & 3 == 3 else tot[i] + part[i]
            part[i] = 0.0
    out = np.empty((4, nb))
    s, c = 0.0, 0.0                                              # q without star, two-sums
    for b in range(nb):
        for k in range(4):
            out[k, b] = tot[4 * b + k]
        x = out[1, b]
        t = s + x
        bb = t - s
        c += (s - (t - bb)) + (x - bb)
        s = t
    if 0 <= star < n:
        out[1, ids[star]] += q[star]
    return out, s + c, nnz


#: :func:`power_moments` takes the tokens this many at a time (a chunk), adding each power into
#: a row of this many partial sums (one per position in the chunk).
MOMENT_CHUNK = 128


@njit
def power_moments(q, tau, R):
    """sum_v (q_v / tau)^r for r = 0..R (entry 0 is left 0), as :func:`lp._race.small_token_state`.

    Tokens go :data:`MOMENT_CHUNK` at a time with bases q_v * (1 / tau) (within an ulp of
    q_v / tau).  A chunk adds its powers r = 1..r_c, r_c the last with (max base)^r > 1e-22 (each
    dropped term is <= 1e-22: relative 1e-22 len(q) on sums >= 1, as the numpy path's drop), each
    power into a row of per-position partial sums: element-wise loops, which the compiler
    vectorises (a running scalar sum per power would not be, without reassociation).  The rows are
    summed pairwise into the totals every 16 chunks (runs of <= 16 terms, then one per 2,048
    tokens).  A chunk of equal masses (flat or tied drafts) adds m p^r once per power instead.
    """
    CW = MOMENT_CHUNK
    M = np.zeros(R + 1)
    A = np.zeros((R + 1, CW))
    base = np.zeros(CW)
    pw = np.zeros(CW)
    n = q.size
    inv = 1.0 / tau
    chunks = 0
    for a in range(0, n, CW):
        e = min(a + CW, n)
        m = e - a
        qs = q[a:e]
        top, low = 0.0, np.inf
        for i in range(m):
            x = qs[i] * inv
            base[i] = x
            pw[i] = x
            top = max(top, x)
            low = min(low, x)
        for i in range(m, CW):                                   # (the last chunk: zero-padded)
            base[i] = 0.0
            pw[i] = 0.0
        rc, t = 0, top
        while rc < R and t > 1e-22:
            rc += 1
            t *= top
        if low == top:                                           # tied: m equal terms
            x = top
            for r in range(1, rc + 1):
                A[r, 0] += m * x
                x *= top
        else:
            for r in range(1, rc + 1):
                Ar = A[r]
                for i in range(CW):
                    Ar[i] += pw[i]
                    pw[i] *= base[i]
        chunks += 1
        if chunks == 16 or e == n:
            for r in range(1, R + 1):
                Ar = A[r]
                w = CW
                while w > 1:                                     # pairwise over the positions
                    w //= 2
                    for i in range(w):
                        Ar[i] += Ar[i + w]
                M[r] += Ar[0]
                for i in range(CW):
                    Ar[i] = 0.0
            chunks = 0
    return M


@njit
def moment_esym(moments, xt, K, a1, e):
    """The rest of :func:`lp._race.small_token_state` after the moments, per row i (x = ``xt[i]``):
    the power sums p_m = sum_r a_{m,r} x^r M_r (a_{1,r} = ``a1[r]`` = 1/r!, a_{m+1} = a_m * a_1
    truncated at R = len(a1) - 1) and Newton's identities into ``e[1:K]`` (clipped at 0; ``e[0]``
    is left as is), the numpy path's sums in the same order."""
    R = a1.size - 1
    g = xt.size
    xp = np.empty((g, R + 1))
    for i in range(g):
        for r in range(R + 1):
            xp[i, r] = xt[i] ** r
    psum = np.empty((K, g))
    a = a1.copy()
    c = np.empty(R + 1)
    for m in range(1, K):
        for r in range(R + 1):
            c[r] = a[r] * moments[r]
        for i in range(g):
            s = 0.0
            for r in range(R + 1):
                s += xp[i, r] * c[r]
            psum[m, i] = s
        b = np.zeros(R + 1)                                      # a * a1, truncated
        for r in range(R + 1):
            for j in range(r + 1):
                b[r] += a[j] * a1[r - j]
        a = b
    for j in range(1, K):
        for i in range(g):
            acc = 0.0
            sign = 1.0
            for l in range(1, j + 1):
                acc += sign * e[j - l, i] * psum[l, i]
                sign = -sign
            e[j, i] = max(acc / j, 0.0)


@njit
def _low_probability(e, n, m, K):
    """P(N <= K - 1) of one :class:`lp._race.RaceState` entry, as its ``low_probability``."""
    low = 0.0
    if m > 700.0:
        for j in range(K):
            if n <= K - 1 - j and e[j] > 0.0:
                low += np.exp(np.log(e[j]) - m)
        return low
    scale = np.exp(-m)
    for j in range(K):
        if n <= K - 1 - j:
            low += e[j] * scale
    return low


@njit
def low_probabilities(e, n, m, K, out):
    """:func:`_low_probability` of every row (``e`` [K, g], ``n``, ``m`` [g]) into ``out``: the
    numpy ``RaceState.low_probability`` in one call, not ~4 K array operations on a few dozen rows."""
    for i in range(out.size):
        out[i] = _low_probability(e[:, i], n[i], m[i], K)


#: Below this q_v t, o_v = expm1(q_v t) is a Taylor polynomial (:func:`_expm1`).
TAYLOR_X = 0.0625


@njit
def _expm1(x):
    """expm1(x) for x >= 0: the Taylor series (nested, positive terms) up to 2^-4, where the
    first omitted term is < 5e-18 relative; the library call above (q_v t is mostly far smaller)."""
    if x > TAYLOR_X:
        return np.expm1(x)
    return _expm1_taylor(x)


@njit
def _expm1_taylor(x):
    """The polynomial of :func:`_expm1` (0 <= x <= TAYLOR_X), without the branch."""
    s = 1.0 + x * (1.0 / 10.0)
    s = 1.0 + x * (1.0 / 9.0) * s
    s = 1.0 + x * (1.0 / 8.0) * s
    s = 1.0 + x * (1.0 / 7.0) * s
    s = 1.0 + x * (1.0 / 6.0) * s
    s = 1.0 + x * (1.0 / 5.0) * s
    s = 1.0 + x * (1.0 / 4.0) * s
    s = 1.0 + x * (1.0 / 3.0) * s
    s = 1.0 + x * 0.5 * s
    return x * s


#: race_prefix_weights recomputes e^{-lam t} (and e^{-lam t - mass}) with exp after this many
#: tokens (in between the first is multiplied by 1 + o_v = e^{q_v t}: <= ~2 ulp each, so <= ~64
#: ulp of drift), sooner after a token counted as arrived or once the tokens since the last
#: refresh sum to q t > DRIFT_X on some row (e^{-lam t} may have underflowed to 0 there).
REFRESH = 32
DRIFT_X = 100.0


@njit
def _start(t, K, e0, n0, m0, e, n, m):
    """Copy the start state into the running one."""
    for j in range(K):
        for i in range(t.size):
            e[j, i] = e0[j, i]
    for i in range(t.size):
        n[i], m[i] = n0[i], m0[i]


@njit
def race_prefix_weights(qtok, lam_tok, t, K, sure_at, e0, n0, m0, cols, total, e_end, n_end, m_end):
    """:func:`lp._race.race_states` followed by ``low_probability`` and the quadrature's weights
    (:func:`lp._race.wor_subset_quadrature`) on the live rows for the prefixes ``cols`` of one
    cluster, without [rows, tokens] or [rows, prefixes] tables and without an exp per (row, prefix).

    Row i (time ``t[i]``, ascending) starts from ``e0[:, i]``, ``n0[i]``, ``m0[i]``; the tokens
    ``qtok`` go through the recursion and the state after all of them goes into
    ``e_end[:, i]``, ``n_end[i]``, ``m_end[i]``.  For the c-th prefix length k = cols[c]
    (ascending), with lam = ``lam_tok[k]`` (q outside the prefix; ``lam_tok`` has len(qtok) + 1
    entries), writes into ``total[c]`` the sum over the rows of lt e^{-lt} clip(1 - P(N <= K - 1)),
    lt = min(lam t, 800).  With E = e^{-lt} and F = e^{-lt - mass}, lt e^{-lt} (1 - P) is
    lt max(E - F sum_{j <= K - 1 - n} e_j, 0).  Along the tokens E is multiplied by
    e^{q_v t} = 1 + o_v (lam falls by q_v) while F stays put (the mass rises by q_v t): both are
    recomputed with exp only at a refresh (``REFRESH``, ``DRIFT_X``; lam t falls by at most
    DRIFT_X in between, so an E that underflowed at a refresh (lt > 745) stays below e^{-645}).
    Rows with mass > 700 (F underflows) take :func:`_low_probability`'s logarithms.

    Joining a token: e_j += o e_{j-1} (j descending), o = expm1(q t), mass += q t and
    E *= 1 + o = e^{q t}.  Rows with q t <= TAYLOR_X (a prefix of them: t ascends) go through
    branch-free loops over the rows, which the compiler vectorises; the others one by one (library
    expm1; q t > ``sure_at``: arrived, n += 1, and E, F refreshed).  The per-token and per-prefix
    steps are written inline: as calls (array arguments) they cost a fifth of the loop.
    """
    g, w, nc = t.size, qtok.size, cols.size
    e, n, m = e_end, n_end, m_end
    _start(t, K, e0, n0, m0, e, n, m)
    E, F, o, acc = np.empty(g), np.empty(g), np.empty(g), np.empty(g)
    t_max = t[g - 1] if g else 0.0
    refresh, since, drift = True, 0, 0.0
    c = 0
    for v in range(w + 1):
        if refresh or since >= REFRESH or drift > DRIFT_X:
            lam = lam_tok[v]
            for i in range(g):
                lt = min(lam * t[i], 800.0)
                E[i] = np.exp(-lt)
                F[i] = np.exp(-(lt + m[i]))
            refresh, since, drift = False, 0, 0.0
        if c < nc and cols[c] == v:
            lam = lam_tok[v]
            for i in range(g):                                   # sum_{j <= K - 1 - n} e_j
                acc[i] = 0.0
            for j in range(K):
                lim = K - 1 - j
                for i in range(g):
                    acc[i] += e[j, i] if n[i] <= lim else 0.0
            big = False
            for i in range(g):
                big |= m[i] > 700.0
                acc[i] = min(lam * t[i], 800.0) * max(E[i] - F[i] * acc[i], 0.0)
            if big:
                for i in range(g):
                    if m[i] > 700.0:
                        low = _low_probability(e[:, i], n[i], m[i], K)
                        acc[i] = min(lam * t[i], 800.0) * E[i] * min(max(1.0 - low, 0.0), 1.0)
            s0, s1 = 0.0, 0.0
            for i in range(0, g - 1, 2):
                s0 += acc[i]
                s1 += acc[i + 1]
            if g & 1:
                s0 += acc[g - 1]
            s = s0 + s1
            while c < nc and cols[c] == v:
                total[c] = s
                c += 1
        if v == w:
            break
        qv = qtok[v]                                             # join token v
        lo, hi = 0, g                                            # rows [0, lo): q t <= TAYLOR_X
        if g == 0 or qv * t[g - 1] <= TAYLOR_X:
            lo = g
        else:
            while lo < hi:
                mid = (lo + hi) // 2
                if qv * t[mid] <= TAYLOR_X:
                    lo = mid + 1
                else:
                    hi = mid
        for i in range(lo):
            x = qv * t[i]
            m[i] += x
            o[i] = _expm1_taylor(x)
        for j in range(K - 1, 0, -1):
            for i in range(lo):
                e[j, i] += o[i] * e[j - 1, i]
        for i in range(lo):
            E[i] *= 1.0 + o[i]
        refresh = False
        for i in range(lo, g):
            x = qv * t[i]
            if x > sure_at:                                      # inf included
                n[i] += 1.0
                refresh = True
            else:
                m[i] += x
                oi = _expm1(x)
                for j in range(K - 1, 0, -1):
                    e[j, i] += oi * e[j - 1, i]
                E[i] *= 1.0 + oi
        drift += qtok[v] * t_max
        since += 1


@njit
def window_upper(Pc, qs, Qc, lam, miss2, K, lo, hi, head, nb):
    """The general screen's cap in :func:`lp.coupling._wor_miss_race`: min over the prefixes
    k in [lo, hi) of Pc[k] + 1 - (1 - miss2[k]) prod_{j=2}^{K-1} room_j / (lam[k] + room_j),
    room_j = max(Qc[k] - j qmax_k - slack_k, 0) (a factor 0 where room_j = 0), qmax_k the largest
    of ``head`` and qs[lo:k], slack_k = (k + nb + K + 2) eps, the product 1 where lam[k] <= 0:
    the numpy path's operations in its order, in one loop instead of ~4 K array operations."""
    eps = np.finfo(np.float64).eps
    best = np.inf
    qm = head
    for k in range(lo, hi):
        if k > lo:
            qm = max(qm, qs[k - 1])
        slack = (k + nb + K + 2) * eps
        low = 1.0 - miss2[k]
        for j in range(2, K):
            room = max(Qc[k] - j * qm - slack, 0.0)
            low *= room / (lam[k] + room) if room > 0 else 0.0
        if lam[k] <= 0.0:
            low = 1.0
        best = min(best, Pc[k] + 1.0 - low)
    return best


@njit
def chord_block_sums(q, T):
    """(sum u_a, sum u_a q_a, sum u_a q_a^2, sum q_a^2), u_a = q_a / (T - q_a), over the block
    ``q`` (the block's terms of :func:`lp.coupling._chord_screen`'s prefix sums) in one pass.

    The divisions go :data:`DIV_BLOCK` tokens at a time in a loop of their own (vectorised, as in
    :func:`_ratios`); four scalar lanes per sum, added into the totals after each block (runs of
    <= 256 terms).
    """
    tot = np.zeros(4)
    ubuf = np.empty(DIV_BLOCK)
    n = q.size
    for c in range(0, n, DIV_BLOCK):
        e = min(c + DIV_BLOCK, n)
        qs = q[c:e]
        m = e - c
        for i in range(m):
            d = T - qs[i]
            ubuf[i] = qs[i] / (d if d != 0.0 else 1.0)           # (d = 0 only past the screen's q <= T/4)
        a0 = a1 = a2 = a3 = 0.0                                  # sum u
        b0 = b1 = b2 = b3 = 0.0                                  # sum u q
        c0 = c1 = c2 = c3 = 0.0                                  # sum u q^2
        d0 = d1 = d2 = d3 = 0.0                                  # sum q^2
        m4 = m - m % 4
        for i in range(0, m4, 4):
            x0, x1, x2, x3 = qs[i], qs[i + 1], qs[i + 2], qs[i + 3]
            u0, u1, u2, u3 = ubuf[i], ubuf[i + 1], ubuf[i + 2], ubuf[i + 3]
            a0 += u0
            a1 += u1
            a2 += u2
            a3 += u3
            v0, v1, v2, v3 = u0 * x0, u1 * x1, u2 * x2, u3 * x3
            b0 += v0
            b1 += v1
            b2 += v2
            b3 += v3
            c0 += v0 * x0
            c1 += v1 * x1
            c2 += v2 * x2
            c3 += v3 * x3
            d0 += x0 * x0
            d1 += x1 * x1
            d2 += x2 * x2
            d3 += x3 * x3
        for i in range(m4, m):
            x, u = qs[i], ubuf[i]
            a0 += u
            b0 += u * x
            c0 += u * x * x
            d0 += x * x
        tot[0] += (a0 + a1) + (a2 + a3)
        tot[1] += (b0 + b1) + (b2 + b3)
        tot[2] += (c0 + c1) + (c2 + c3)
        tot[3] += (d0 + d1) + (d2 + d3)
    return tot[0], tot[1], tot[2], tot[3]


@njit
def _chord_lower(Q, L, qm, E2, M, Q2, n, a, s):
    """Q_K >= Q_2 prod_i a_i - E2 sum_i s_i prod_{j != i} a_j at one prefix (:func:`chord_bounds`)."""
    if L <= 0.0:
        return 1.0
    if (n - 1) * qm + M > Q:
        return 0.0                                               # a chord would go negative: none
    T = Q + L
    for i in range(n):
        x = i * qm
        a[i] = (Q - x) / (T - x) if x < Q else 0.0
        x = x + M
        gM = (Q - x) / (T - x) if x < Q else 0.0
        s[i] = (a[i] - gM) / M if M > 0 else 0.0
    prod_a = 1.0
    for i in range(n):
        prod_a *= a[i]
    lin = 0.0
    for i in range(n):
        pr = s[i]
        for j in range(n):
            if j != i:
                pr *= a[j]
        lin += pr
    return Q2 * prod_a - E2 * lin


@njit
def chord_bounds(Pc, qs, Qc, lam, miss2, K, at, b1, b2, b3, b0, bmax, upper_obj):
    """The per-prefix bounds of :func:`lp.coupling._chord_screen` along the prefixes.

    The running sums over the tokens before prefix k (u_a = q_a / (T - q_a) with T - q_a summed
    directly as Qc[a] + lam[a + 1]): A1 = sum u, A2 = sum u q, A3 = sum u q^2, S2 = sum q^2 and
    the largest q start from the block's (``b1``, ``b2``, ``b3``, ``b0``, ``bmax``).  For each k
    in ``at`` (ascending) writes Pc[k] + 1 - (the upper bound on Q_K) into ``upper_obj`` and
    returns min over ``at`` of Pc[k] + 1 - (the lower bound), the same formulas as the numpy screen.
    The lower bound (~3 (K - 2) divisions) is taken only where it can lower that minimum: its
    objective is at least the prefix's upper-bound objective, so prefixes whose upper-bound
    objective exceeds the running minimum by more than rounding (1e-12) are skipped, first
    seeding the minimum at the prefix with the smallest upper-bound objective: the same minimum.
    """
    n = K - 2
    nc = at.size
    A1, A2, A3, S2, qm = b1, b2, b3, b0, bmax
    a = np.empty(n)
    s = np.empty(n)
    E2s, Ms, QMs = np.empty(nc), np.empty(nc), np.empty(nc)
    c = 0
    for k in range(qs.size + 1):
        while c < nc and at[c] == k:
            Q, L = Qc[k], lam[k]
            T = Q + L
            E2 = max(Q * A2 + S2 * A1 - 2.0 * A3, 0.0) / T
            M = min(2.0 * qm, Q)
            Q2 = 1.0 - miss2[k]
            l0 = Q / T
            lM = Q / T - (L / (T * T)) * M
            l0n, lMn, lMp = 1.0, 1.0, max(lM, 0.0)
            for _ in range(n):                                   # (** n would be a library pow)
                l0n *= l0
                lMn *= lMp
            slope = (l0n - lMn) / M if M > 0 else 0.0
            upper_obj[c] = Pc[k] + (1.0 - (Q2 * l0n - slope * E2))
            E2s[c], Ms[c], QMs[c] = E2, M, qm
            c += 1
        if k == qs.size:
            break
        x = qs[k]
        u = x / (Qc[k] + lam[k + 1])
        A1 += u
        A2 += u * x
        A3 += u * x * x
        S2 += x * x
        qm = max(qm, x)
    best = np.inf
    if nc == 0:
        return best
    first = np.argmin(upper_obj[:nc])
    for r in range(nc + 1):
        c = first if r == 0 else r - 1
        if (r > 0 and c == first) or upper_obj[c] > best + 1e-12:
            continue
        k = at[c]
        lower = _chord_lower(Qc[k], lam[k], QMs[c], E2s[c], Ms[c], 1.0 - miss2[k], n, a, s)
        best = min(best, Pc[k] + (1.0 - lower))
    return best


@njit
def split_head(ids, q, b_lo, b_hi, block, seg):
    """The block and the segment of :func:`lp.coupling._wor_bound_head` in one pass: the draft
    masses of the tokens in buckets < ``b_lo`` into ``block`` (token order, as ``np.compress``) and
    the ids of the tokens in buckets [b_lo, b_hi) into ``seg`` (ascending).  Returns their counts
    and the block's largest mass (0 if empty).  Branch-free: every token is written at the next
    free place of both outputs, which advance only when it belongs there (the place written is
    at most the token's index, so ``block`` and ``seg`` of len(ids) suffice)."""
    nb = 0
    m = 0
    top = 0.0
    for v in range(ids.size):
        b = ids[v]
        x = q[v]
        block[nb] = x
        inb = b < b_lo
        nb += inb
        top = max(top, x if inb else 0.0)
        seg[m] = v
        m += (b >= b_lo) & (b < b_hi)
    return nb, m, top


@njit
def segment_sums(seg, p, q, P0, Q0, W0, lam_hi, qtot, star, star_in_block, rest_star, qs):
    """The prefix sums of :func:`lp.coupling._wor_bound_head` along the sorted segment ``seg`` in
    one pass each way (the numpy path's cumulative sums, sequential as theirs): p(H_j), q(H_j),
    lam_j = q(V minus H_j) (from the top) and the K = 2 miss lam_j (1 + W0 + sum_{a < j} w_a)
    (+ q_star lam_j / ``rest_star`` once the largest mass ``star`` is in H_j), capped at 1.  The
    segment's draft masses go into ``qs``.  Returns (Pc, Qc, lam, miss2), each of len(seg) + 1.
    """
    m = seg.size
    Pc, Qc, lam, miss2 = np.empty(m + 1), np.empty(m + 1), np.empty(m + 1), np.empty(m + 1)
    sp, sq, sw = 0.0, 0.0, 0.0
    star_at = -1 if star_in_block else m
    Pc[0], Qc[0], miss2[0] = P0, Q0, 1.0 + W0
    for j in range(m):
        v = seg[j]
        x = q[v]
        qs[j] = x
        sp += p[v]
        sq += x
        Pc[j + 1] = sp + P0
        Qc[j + 1] = sq + Q0
        if v == star:
            star_at = j
        else:
            d = qtot - x
            sw += x / d if d != 0.0 else (np.inf if x > 0.0 else np.nan)
        miss2[j + 1] = sw + (1.0 + W0)
    lam[m] = lam_hi
    s = 0.0
    for j in range(m - 1, -1, -1):
        s += qs[j]
        lam[j] = s + lam_hi
    for j in range(m + 1):
        x = miss2[j] * lam[j]
        if j > star_at and star_at < m and rest_star > 0:
            x += q[star] * (lam[j] / rest_star)
        miss2[j] = min(x, 1.0)
    return Pc, Qc, lam, miss2


@njit
def wor_edge_bounds(Pb, Qb, Wb, qmax_b, K, V, sb, qstar, rest_star):
    """The bucket-edge part of :func:`lp.coupling._wor_buckets` from the bucket sums of
    :func:`wor_bucket_pass`, the same formulas in one loop per quantity (compensated prefix sums).

    Returns (P_e, Q_e, W_e, lam_e, live, live_edge): p, q and w of the buckets < b and q of the
    buckets >= b at every edge b = 0..N (N = len(Pb) - 1), the live buckets and the live edges.
    ``sb`` is the bucket of the largest mass ``qstar`` and ``rest_star`` q(V) without it.
    """
    N = Pb.size - 1
    P_e, Q_e, W_e, lam_e = np.zeros(N + 1), np.zeros(N + 1), np.zeros(N + 1), np.zeros(N + 1)
    s, c = np.zeros(3), np.zeros(3)
    for b in range(N):
        for k in range(3):
            x = Pb[b] if k == 0 else (Qb[b] if k == 1 else Wb[b])
            a = s[k]
            t = a + x
            bb = t - a
            c[k] += (a - (t - bb)) + (x - bb)
            s[k] = t
        P_e[b + 1], Q_e[b + 1], W_e[b + 1] = s[0] + c[0], s[1] + c[1], s[2] + c[2]
    a, ca = 0.0, 0.0
    for b in range(N, -1, -1):                                   # q of buckets >= b, dropped included
        x = Qb[b]
        t = a + x
        bb = t - a
        ca += (a - (t - bb)) + (x - bb)
        a = t
        lam_e[b] = a + ca
    miss2 = np.empty(N + 1)
    opt = np.empty(N + 1)
    upper = np.empty(N + 1)
    eps = np.finfo(np.float64).eps
    slack = (V + K + 2) * eps
    qm = 0.0                                                     # max q over buckets < b
    for b in range(N + 1):
        m2 = lam_e[b] * (1.0 + W_e[b])
        if sb < N and rest_star > 0 and b > sb:
            m2 += qstar * (lam_e[b] / rest_star)
        m2 = min(m2, 1.0)
        miss2[b] = m2
        if K == 2:
            opt[b] = m2
            upper[b] = m2
        else:
            lam = min(lam_e[b], 1.0)
            opt[b] = m2 + (1.0 - m2) * (-np.expm1((K - 2) * np.log1p(-lam)))
            low_q = 1.0 - m2
            for j in range(2, K):
                left = max(Q_e[b] - j * qm - slack, 0.0)
                low_q *= left / (lam_e[b] + left) if left > 0 else 0.0
            if lam_e[b] <= 0.0:
                low_q = 1.0
            upper[b] = 1.0 - low_q
            if b < N:
                qm = max(qm, qmax_b[b])
    cap = np.inf
    for b in range(N + 1):
        cap = min(cap, P_e[b] + upper[b])
    cap += 1e-9
    live = np.empty(N, dtype=np.bool_)
    live_edge = np.empty(N + 1, dtype=np.bool_)
    for b in range(N + 1):
        live_edge[b] = P_e[b] + opt[b] <= cap
        if b < N:
            live[b] = (P_e[b] + opt[b + 1] <= cap) and Qb[b] > 0
    return P_e, Q_e, W_e, lam_e, live, live_edge
