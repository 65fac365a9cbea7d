"""Compiled passes of a KL divergence over long rows (numba; see :mod:`specsim._jit`).

:func:`specsim.divergences.kl` and :func:`lp.certificates.certify` sum x log(x / y) over the
entries with x > 0, the log being log1p((x - y) / y) where the ratio is near 1.  numpy makes that
a chain of ~8 passes with fresh temporaries; here one pass packs the ratios (:func:`ratio_rows`),
numpy takes the logs of the packed rows (its vectorised log is ~6x a scalar libm call), one pass
forms the products (:func:`kl_terms`) and numpy sums them: the same terms in the same order as
the numpy path, so the same value bit for bit.  On rows with x > 0 everywhere :func:`kl_sums`
forms the products inside numpy's own summation order (:func:`leaf_sum`, :func:`pairwise_split`)
instead of writing them out for numpy to read back: the same bits, two row passes fewer.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from specsim._jit import njit


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
def kl_terms(x, y, lr, logs, log1ps, near, both, terms, terms_yx):
    """The terms of divergences.kl_pair's sums over the k entries with x > 0, in order:
    terms = x log(x / y) and (with ``both``) terms_yx = y log(x / y), the log being log1p((x - y) / y)
    where 0.5 < x / y < 2 (when ``near``) and log(x / y) elsewhere.  ``lr`` = x / y, ``logs`` =
    log(lr), ``log1ps`` = log1p(d) over those entries, packed (from :func:`ratio_rows` or
    :func:`specsim.verifiers._clip_kernels.out_pass`; a row with x > 0 everywhere goes to
    :func:`kl_sums` instead).  Returns k; the caller sums the rows with numpy."""
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


#: numpy's pairwise summation (``np.add.reduce`` of a contiguous float64 row): blocks of at most
#: PW_BLOCK terms summed by :func:`leaf_sum` (8 accumulators), a longer range split at
#: :func:`pairwise_split` and the halves added.  A kernel that forms a block's terms into a small
#: buffer and sums it with leaf_sum, block after block (:func:`pairwise_blocks`), then combines
#: the block sums as numpy does (:func:`pairwise_total`), gets ``terms.sum()`` bit for bit without
#: writing the row out (tested against numpy on every length up to 4,100 and longer ones).  No
#: recursion: numba's disk cache crashes on recursive kernels.
PW_BLOCK = 128


@intrinsic
def _lanes8(typingctx, t, s, m):
    """(r_0, ..., r_7), r_l = t[s + l] + t[s + 8 + l] + ... + t[s + 8 (m - 1) + l] added in that
    order: numpy's eight accumulators of a pairwise-summation block (m >= 1), held in one
    <8 x double> vector (lane-wise IEEE additions, no reassociation: LLVM does not vectorise the
    eight scalar chains itself)."""
    if not (isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C" and t.dtype == types.float64):
        return None                             # contiguous float64 rows only
    sig = types.UniTuple(types.float64, 8)(t, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        tv, s, m = args
        ary = context.make_array(signature.args[0])(context, builder, tv)
        vptr = ir.VectorType(ir.DoubleType(), 8).as_pointer()
        base = builder.gep(ary.data, [s])
        acc = cgutils.alloca_once_value(builder, builder.load(builder.bitcast(base, vptr), align=8))
        one = ir.Constant(m.type, 1)
        with cgutils.for_range_slice(builder, one, m, one, inc=True) as (k, _):
            ptr = builder.bitcast(builder.gep(base, [builder.mul(k, ir.Constant(k.type, 8))]), vptr)
            builder.store(builder.fadd(builder.load(acc), builder.load(ptr, align=8)), acc)
        res = builder.load(acc)
        lanes = [builder.extract_element(res, ir.Constant(ir.IntType(32), l)) for l in range(8)]
        return context.make_tuple(builder, signature.return_type, lanes)
    return sig, codegen


@njit
def leaf_sum_at(t, s, n):
    """numpy's pairwise_sum of t[s:s + n], n <= PW_BLOCK (t a contiguous float64 row): 8
    accumulators (one 8-wide vector, :func:`_lanes8`), then the rest in order."""
    if n < 8:
        x = 0.0
        for i in range(s, s + n):
            x += t[i]
        return x
    r0, r1, r2, r3, r4, r5, r6, r7 = _lanes8(t, s, n // 8)
    x = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(s + n - n % 8, s + n):
        x += t[i]
    return x


@njit
def leaf_sum(buf, n):
    """numpy's pairwise_sum of buf[:n], n <= PW_BLOCK (:func:`leaf_sum_at` from 0)."""
    return leaf_sum_at(buf, 0, n)


@njit
def pairwise_split(n):
    """Where numpy splits a range of n > PW_BLOCK terms: half, rounded down to a multiple of 8."""
    n2 = n // 2
    return n2 - n2 % 8


@njit
def pairwise_blocks(n):
    """The lengths of numpy's summation blocks of a row of n terms, in row order."""
    lens = np.empty(n // 32 + 2, np.int64)      # blocks of a split range hold >= 64 terms
    stack = np.empty(64, np.int64)
    stack[0] = n
    top, k = 1, 0
    while top:
        top -= 1
        m = stack[top]
        if m <= PW_BLOCK:
            lens[k] = m
            k += 1
        else:                                   # the left half is taken first
            n2 = pairwise_split(m)
            stack[top] = m - n2
            stack[top + 1] = n2
            top += 2
    return lens[:k]


@njit
def pairwise_totals(n, sums, rows):
    """numpy's totals of ``rows`` rows of n terms each from their blocks' sums (``sums[r]`` in row
    order, a 2-D array), in one walk of the summation tree: each split range is the sum of its
    halves, left + right."""
    size = np.empty(64, np.int64)
    phase = np.empty(64, np.int64)
    vals = np.empty((64, rows))
    size[0], phase[0] = n, 0
    top, nv, k = 1, 0, 0
    while top:
        m = size[top - 1]
        if m <= PW_BLOCK:
            for r in range(rows):
                vals[nv, r] = sums[r, k]
            nv += 1
            k += 1
            top -= 1
        elif phase[top - 1] < 2:
            half = pairwise_split(m)
            size[top] = half if phase[top - 1] == 0 else m - half
            phase[top - 1] += 1
            phase[top] = 0
            top += 1
        else:
            nv -= 1
            for r in range(rows):
                vals[nv - 1, r] = vals[nv - 1, r] + vals[nv, r]
            top -= 1
    out = np.empty(rows)
    for r in range(rows):
        out[r] = 0.0 + vals[0, r]
    return out


@njit
def pairwise_total(n, sums):
    """numpy's total of a row of n terms from its blocks' sums (in row order; :func:`pairwise_totals`)."""
    return pairwise_totals(n, sums.reshape((1, sums.size)), 1)[0]


@njit
def row_sum(a):
    """``a.sum()`` of a contiguous float64 row, bit for bit (what the tests check the scheme by)."""
    lens = pairwise_blocks(a.size)
    sums = np.empty(lens.size)
    s = 0
    for k in range(lens.size):
        sums[k] = leaf_sum_at(a, s, lens[k])
        s += lens[k]
    return pairwise_total(a.size, sums)


@njit
def kl_sums(x, y, lr, logs, log1ps, near, both):
    """(sum x log(x / y), sum y log(x / y)) on a row with x > 0 everywhere, the logs chosen as in
    :func:`kl_terms`: each sum numpy's ``.sum()`` of the written-out terms, bit for bit."""
    lens = pairwise_blocks(x.size)
    s1 = np.empty(lens.size)
    s2 = np.empty(lens.size)
    b1 = np.empty(PW_BLOCK)
    b2 = np.empty(PW_BLOCK)
    s = 0
    for k in range(lens.size):
        m = lens[k]
        # views of the block: indexing x[s + i] (s unknown to be >= 0) keeps the loop from vectorising
        xs, ys, vs, lg, l1 = x[s:s + m], y[s:s + m], lr[s:s + m], logs[s:s + m], log1ps[s:s + m]
        for i in range(m):                      # the terms of the block (branch-free)
            v = vs[i]
            t = l1[i] if (near & (v > 0.5) & (v < 2.0)) else lg[i]
            b1[i] = xs[i] * t
            b2[i] = ys[i] * t                   # unused unless ``both``
        s1[k] = leaf_sum(b1, m)
        s2[k] = leaf_sum(b2, m)
        s += m
    return pairwise_total(x.size, s1), pairwise_total(x.size, s2)
