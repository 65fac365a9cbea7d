"""Compiled block-verification process law (numba; see :mod:`specsim._jit`).

The numpy level-by-level law (:func:`specsim.verifiers.chain._block_process_law`) makes ~20 numpy
calls a level; at V = 4 each costs more than its arithmetic, so a repeat certificate was ~6x its
final pass.  This kernel walks the same recursion over one stacked table: the same elementwise
operations in the same order, with sums taken left to right (the numpy row sums add columns left
to right for V <= 8 too; totals and V > 8 rows may differ from numpy's pairwise sums by ulps).
"""
from __future__ import annotations

import numpy as np

from specsim._jit import njit


@njit
def block_process_law(P, Qt, start, L, V, emitted):
    """Block verification's output law on the chain process from stacked tables.

    ``P`` [sum_{i<=L} V^i, V] holds the target's levels 0..L, ``Qt`` the draft's levels 0..L-1,
    level i at rows ``start[i]:start[i + 1]`` (``start[i]`` = sum_{k<i} V^k, i = 0..L+1).
    ``emitted`` holds emitted[m] for m = 1..L+1 one after the other (V^m entries from offset
    ``start[m] - 1``, the layout of the engine's law buffer); the law is added into it in place.
    Returns (depth_mass, n): P(tau = i) and the number of drafts with positive probability.
    """
    last = emitted[start[L + 1] - 1:]
    n_all, n_in = start[L + 1], start[L]
    w = np.empty(n_all)            # w(s) for every prefix of length 0..L
    Qs = np.empty(n_all)           # draft probability of s
    h = np.empty(n_in)             # stop probability h_i(s), levels 0..L-1
    Z = np.empty(n_in)             # excess mass Z_i(s)
    w[0] = 1.0
    Qs[0] = 1.0
    for i in range(L):
        a, b = start[i], start[i + 1]
        for k in range(V ** i):
            s, ws = a + k, w[a + k]
            zs = 0.0
            deficit = 0.0
            for t in range(V):
                p, q = P[s, t], Qt[s, t]
                diff = ws * p - q
                # selects, not branches: the sign of diff is a coin flip on random rows, and the
                # mispredictions cost a third of the kernel (adding 0.0 leaves the sums' bits)
                zs += diff if diff > 0.0 else 0.0
                deficit += -diff if diff < 0.0 else 0.0
                # w(s t) = min(1, w(s) p/q), 0 where w or the ratio is 0; q = 0 < p: ratio inf
                if q > 0.0:
                    r = p / q
                elif p > 0.0:
                    r = np.inf
                else:
                    r = 0.0
                c = b + k * V + t
                w[c] = min(1.0, ws * r) if (ws > 0.0 and r > 0.0) else 0.0
                Qs[c] = Qs[s] * q
            Z[s] = zs
            h[s] = min(1.0, zs / deficit) if deficit > 0.0 else 1.0
    h[0] = 1.0                     # an empty draft has no level
    depth_mass = np.zeros(L + 1)
    G = np.empty(n_in)             # G_i(s): draft mass through s that has not stopped above level i (Qs at L)
    a = start[L]
    tot = 0.0
    n_pos = 0
    for k in range(V ** L):
        s = a + k
        stop = w[s] * Qs[s]
        tot += stop
        if Qs[s] > 0.0:
            n_pos += 1
        for y in range(V):
            last[k * V + y] += stop * P[s, y]
    depth_mass[L] = tot
    for i in range(L - 1, -1, -1):
        a, b = start[i], start[i + 1]
        off = b - 1                                                 # emitted[i + 1]
        tot = 0.0
        G_next, h_next = (Qs, w) if i + 1 == L else (G, h)  # at level L: G = Q and h = w
        for k in range(V ** i):
            s = a + k
            g = 0.0
            for t in range(V):
                c = b + k * V + t
                g += G_next[c] * (1.0 - h_next[c])
            G[s] = g
            stop = h[s] * g
            tot += stop
            ws = w[s]
            if Z[s] > 0.0:
                scale = stop / Z[s]
                for y in range(V):
                    e = ws * P[s, y] - Qt[s, y]
                    emitted[off + k * V + y] += scale * e if e > 0.0 else 0.0
            elif stop != 0.0:
                for y in range(V):
                    emitted[off + k * V + y] += stop * P[s, y]
        depth_mass[i] = tot
    return depth_mass, n_pos
