"""Compiled final pass of the exact certificate (numba; see :mod:`specsim._jit`).

:func:`specsim.exact.check_lossless` needs the completed law C (:func:`specsim.exact.completed_law`)
only through |C - P|: its maximum, argmax and sum.  The numpy pass makes ~3 calls a level and
three more over V^{L+1}, each writing a new array; :func:`completed_error` walks the same
recursion once, with the same elementwise operations (bit-identical A and |C - P|).  The argmax
and the (pairwise) sum stay numpy's, over the error array it writes.

First call in a fresh environment: ~0.4 s of compilation (cached on disk afterwards).
"""
from __future__ import annotations

from specsim._jit import njit


@njit
def completed_error(law, P, joint, start, L, V, err):
    """The completed law's error |C(z) - P(z)| over z in V^{L+1}, into ``err``.

    ``law`` holds the output law O_m for m = 1..L+1 one after the other (offset ``start[m] - 1``),
    ``P`` the target's stacked table (levels 0..L, level i from row ``start[i]``), ``joint`` its
    law over V^{L+1}.  A_1 = O_1 and A_{m+1}(s t) = A_m(s) p(t|s) + O_{m+1}(s t) replace O_m in
    ``law`` for m = 2..L (the caller's scratch copy: fewer bytes touched than a second buffer);
    O_{L+1} stays and C = A_{L+1} goes straight into ``err`` as |C - P|.
    """
    for m in range(1, L):
        a, b, r = start[m] - 1, start[m + 1] - 1, start[m]  # A_m, O_{m+1} and the rows of level m
        for k in range(V ** m):
            x = law[a + k]
            for t in range(V):
                law[b + k * V + t] = x * P[r + k, t] + law[b + k * V + t]
    a, b, r = start[L] - 1, start[L + 1] - 1, start[L]
    for k in range(V ** L):
        x = law[a + k]
        for t in range(V):
            z = k * V + t
            err[z] = abs(x * P[r + k, t] + law[b + z] - joint[z])
