"""Triton verification kernels: one program per request, vocabulary in tiles of BLOCK_V.

The semantics are those of :mod:`reference_gpu.reference` (read its docstring first), and the two
agree bit for bit given the same inputs and noise: elementwise float64 arithmetic in a fixed
order with FMA contraction disabled (``enable_fp_fusion=False``), reductions in 2^-60 fixed
point on int64 (associative), argmax ties to the lowest id.  Inputs may be float32, float16 or
bfloat16; every value is widened to float64 on load (so accumulation is at least fp32).

Raw launchers trust their inputs (no validation, no allocation of noise); use
:mod:`reference_gpu.api` for validated calls.  Ids < 0 or >= V are never accepted (their target
mass is read as 0) and emitted tokens always lie in [0, V).

Without a CUDA device the kernels run under the Triton interpreter, which must be switched on
(``TRITON_INTERPRET=1``) before this module is first imported: ``triton.jit`` reads it when the
kernels are defined.

>>> import torch
>>> from reference_gpu.kernels import launch_chain
>>> from reference_gpu.reference import chain_reference
>>> device = "cuda" if torch.cuda.is_available() else "cpu"
>>> f64 = dict(dtype=torch.float64, device=device)
>>> p = torch.tensor([[0.5, 0.5], [0.0, 1.0]], **f64)                 # one request, L = 1
>>> q, u, eta, E = torch.tensor([[0.9, 0.1]], **f64), torch.zeros(1, **f64), torch.zeros(1, **f64), torch.ones(1, 2, **f64)
>>> ids, cu = torch.tensor([0], dtype=torch.int32, device=device), torch.tensor([1], dtype=torch.int32, device=device)
>>> out, tau = torch.full((1, 2), -1, dtype=torch.int32, device=device), torch.empty(1, dtype=torch.int32, device=device)
>>> launch_chain(ids, cu, q, p, u, eta, E, out, tau, "token", "exponential")
>>> out.tolist(), tau.tolist(), torch.equal(out, chain_reference(ids, cu, q, p, u, eta, E, "token")[0])
([[0, 1]], [1], True)
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .reference import check_splits

__all__ = ["chain_verify_kernel", "tree_verify_kernel", "launch_chain", "launch_tree",
           "MODE_IDS", "NOISE_IDS", "default_block_v",
           "auto_splits", "chain_plan", "chain_rows_split_kernel", "chain_draw_split_kernel",
           "chain_combine_split_kernel"]

#: ``mode`` and ``noise_kind`` names (:data:`reference_gpu.reference.MODES`, ``NOISE_KINDS``) ->
#: the compile-time constants MODE and NOISE of the kernels.
MODE_IDS = {"token": 0, "block": 1, "greedy": 2}
NOISE_IDS = {"exponential": 0, "uniform": 1}
_SCALE = 1152921504606846976.0          # 2^60, as reference.FIXED_SCALE
_INV_SCALE = 8.673617379884035e-19      # 2^-60 (exact)


def default_block_v(V: int) -> int:
    """Tile width BLOCK_V: the next power of two >= V, clipped to [16, 4096] (one program
    walks its rows in ceil(V / BLOCK_V) tiles).

    >>> from reference_gpu.kernels import default_block_v
    >>> default_block_v(5), default_block_v(1000), default_block_v(151936)
    (16, 1024, 4096)
    """
    return max(16, min(4096, triton.next_power_of_2(V)))


@triton.jit
def _argmax_part(p_ptr, V, n_tiles_v, BLOCK_V: tl.constexpr):
    """(max, argmax) of p over [0, V) (lowest id on ties; (-1, 0) when n_tiles_v = 0)."""
    best = tl.full((), -1.0, tl.float64)
    idx = tl.full((), 0, tl.int32)
    for s in range(0, n_tiles_v, BLOCK_V):
        offs = s + tl.arange(0, BLOCK_V)
        x = tl.load(p_ptr + offs, mask=offs < V, other=-1.0).to(tl.float64)
        mx = tl.max(x, 0)
        am = (tl.argmax(x, 0) + s).to(tl.int32)
        upd = mx > best
        idx = tl.where(upd, am, idx)
        best = tl.where(upd, mx, best)
    return best, idx


@triton.jit
def _row_argmax(p_ptr, V, n_tiles_v, BLOCK_V: tl.constexpr):
    """argmax_v p(v) over one row (lowest id on ties)."""
    best, idx = _argmax_part(p_ptr, V, n_tiles_v, BLOCK_V)
    return idx


@triton.jit
def _rows_tile(p_ptr, q_ptr, q_ok, x_excl, offs, V, HAS_Q: tl.constexpr):
    """(p, q) on one tile as float64 (q one-hot at x_excl when HAS_Q is False; q = 0 when the
    int flag q_ok is 0)."""
    m = offs < V
    qb = (offs * 0 + q_ok) != 0      # q_ok is an int scalar; widened to a block first
    p = tl.load(p_ptr + offs, mask=m, other=0.0).to(tl.float64)
    if HAS_Q:
        q = tl.load(q_ptr + offs, mask=m & qb, other=0.0).to(tl.float64)
    else:
        q = tl.where((offs == x_excl) & qb, 1.0, 0.0).to(tl.float64)
    return p, q


@triton.jit
def _excess_tile(p_ptr, q_ptr, q_ok, x_excl, w, C, offs, V, HAS_Q: tl.constexpr):
    """(R, p) on one tile with R = (w p - C q)_+ (rows as in :func:`_rows_tile`)."""
    p, q = _rows_tile(p_ptr, q_ptr, q_ok, x_excl, offs, V, HAS_Q)
    R = tl.maximum(w * p - C * q, 0.0)
    return R, p


@triton.jit
def _mass(p_ptr, q_ptr, q_ok, x_excl, w, C, V, n_tiles_v, HAS_Q: tl.constexpr, BLOCK_V: tl.constexpr):
    """sum_v floor((w p - C q)_+ 2^60) as int64 (0 when n_tiles_v = 0)."""
    acc = tl.zeros((), tl.int64)
    for s in range(0, n_tiles_v, BLOCK_V):
        offs = s + tl.arange(0, BLOCK_V)
        R, p = _excess_tile(p_ptr, q_ptr, q_ok, x_excl, w, C, offs, V, HAS_Q)
        acc += tl.sum((R * 1152921504606846976.0).to(tl.int64), 0)
    return acc


@triton.jit
def _deficit(p_ptr, q_ptr, q_ok, x_excl, w, V, n_tiles_v, HAS_Q: tl.constexpr, BLOCK_V: tl.constexpr):
    """sum_v floor((q - w p)_+ 2^60) as int64 (0 when n_tiles_v = 0): the denominator of the
    block stop probability, summed directly (docs/theory.md §4.1)."""
    acc = tl.zeros((), tl.int64)
    for s in range(0, n_tiles_v, BLOCK_V):
        offs = s + tl.arange(0, BLOCK_V)
        p, q = _rows_tile(p_ptr, q_ptr, q_ok, x_excl, offs, V, HAS_Q)
        D = tl.maximum(-(w * p - q), 0.0)   # the negated difference, as the torch reference
        acc += tl.sum((D * 1152921504606846976.0).to(tl.int64), 0)
    return acc


@triton.jit
def _race_part(p_ptr, q_ptr, q_ok, x_excl, w, C, noise_ptr, V,
               HAS_Q: tl.constexpr, BLOCK_V: tl.constexpr):
    """Exponential race on [0, V): (max R/E, its id, max p/E, its id), masked entries -1."""
    bR = tl.full((), -1.0, tl.float64)
    iR = tl.full((), 0, tl.int32)
    bP = tl.full((), -1.0, tl.float64)
    iP = tl.full((), 0, tl.int32)
    for s in range(0, V, BLOCK_V):
        offs = s + tl.arange(0, BLOCK_V)
        m = offs < V
        R, p = _excess_tile(p_ptr, q_ptr, q_ok, x_excl, w, C, offs, V, HAS_Q)
        E = tl.load(noise_ptr + offs, mask=m, other=1.0).to(tl.float64)
        kR = tl.where(m, tl.where(R > 0, R / E, 0.0), -1.0)
        kP = tl.where(m, tl.where(p > 0, p / E, 0.0), -1.0)
        mR = tl.max(kR, 0)
        aR = (tl.argmax(kR, 0) + s).to(tl.int32)
        mP = tl.max(kP, 0)
        aP = (tl.argmax(kP, 0) + s).to(tl.int32)
        uR = mR > bR
        iR = tl.where(uR, aR, iR)
        bR = tl.where(uR, mR, bR)
        uP = mP > bP
        iP = tl.where(uP, aP, iP)
        bP = tl.where(uP, mP, bP)
    return bR, iR, bP, iP


@triton.jit
def _cdf_part(p_ptr, q_ptr, q_ok, x_excl, w, C, useR, thr, carry, V,
              HAS_Q: tl.constexpr, BLOCK_V: tl.constexpr):
    """Inverse-CDF search on [0, V) given the fixed-point mass before it (carry): the first id
    whose prefix sum exceeds thr (V if none) and the last id with positive mass (-1 if none)."""
    first = tl.full((), 0, tl.int32) + V
    last = tl.full((), -1, tl.int32)
    for s in range(0, V, BLOCK_V):
        offs = s + tl.arange(0, BLOCK_V)
        m = offs < V
        R, p = _excess_tile(p_ptr, q_ptr, q_ok, x_excl, w, C, offs, V, HAS_Q)
        X = tl.where(useR, (R * 1152921504606846976.0).to(tl.int64),
                     (p * 1152921504606846976.0).to(tl.int64))
        X = tl.where(m, X, 0)
        cs = tl.cumsum(X, 0) + carry
        hit = m & (cs.to(tl.float64) > thr)
        first = tl.minimum(first, tl.min(tl.where(hit, offs, V), 0))
        last = tl.maximum(last, tl.max(tl.where(X > 0, offs, -1), 0))
        carry += tl.sum(X, 0)
    return first, last


@triton.jit
def _draw(p_ptr, q_ptr, q_ok, x_excl, w, C, noise_ptr, u_res, V,
          HAS_Q: tl.constexpr, NOISE: tl.constexpr, BLOCK_V: tl.constexpr):
    """One token from R = (w p - C q)_+ (fallback p when R has no mass), docs/theory.md §11.4."""
    if NOISE == 0:  # exponential race: argmax R/E over both rows in one pass
        bR, iR, bP, iP = _race_part(p_ptr, q_ptr, q_ok, x_excl, w, C, noise_ptr, V, HAS_Q, BLOCK_V)
        tok = tl.where(bR > 0, iR, iP)
    else:  # inverse CDF on fixed-point masses
        massR = _mass(p_ptr, q_ptr, q_ok, x_excl, w, C, V, V, HAS_Q, BLOCK_V)
        massP = _mass(p_ptr, q_ptr, q_ok, x_excl, 1.0, 0.0, V, V, HAS_Q, BLOCK_V)
        useR = massR > 0
        mass = tl.where(useR, massR, massP)
        thr = u_res * mass.to(tl.float64)
        first, last = _cdf_part(p_ptr, q_ptr, q_ok, x_excl, w, C, useR, thr, tl.zeros((), tl.int64), V,
                                HAS_Q, BLOCK_V)
        tok = tl.where(first < V, first, last).to(tl.int32)
    return tok


@triton.jit
def _draft_probs(ids_ptr, p_ptr, q_ptr, start, tbase, k, V, HAS_Q: tl.constexpr):
    """(x, valid, p(x), q(x)) of draft position k (q(x) = 1 for one-hot drafts; 0 if x is invalid)."""
    x = tl.load(ids_ptr + start + k)
    valid = (x >= 0) & (x < V)
    xs = tl.where(valid, x, 0).to(tl.int64)
    px = tl.load(p_ptr + (tbase + k) * V + xs).to(tl.float64)
    px = tl.where(valid, px, 0.0)
    if HAS_Q:
        qx = tl.load(q_ptr + (start + k) * V + xs).to(tl.float64)
        qx = tl.where(valid, qx, 0.0)
    else:
        qx = tl.full((), 1.0, tl.float64)
    return x, valid, px, qx


@triton.jit
def _block_weight(w, px, qx):
    """w_k = min(1, w_{k-1} p(x) / q(x)); q(x) = 0: 1 if p(x) > 0 and w > 0, else 0."""
    safe_q = tl.where(qx > 0, qx, 1.0)
    r = tl.minimum((w * px) / safe_q, 1.0)
    return tl.where(qx > 0, r, tl.where((px > 0) & (w > 0), 1.0, 0.0))


@triton.jit
def _block_sums(p_ptr, q_ptr, q_ok, x_excl, w, V, n_tiles_v, HAS_Q: tl.constexpr, BLOCK_V: tl.constexpr):
    """(Z, D) of the block rule on [0, V) in fixed point: Z = sum (w p - q)_+, D = sum (q - w p)_+
    (both 0 when n_tiles_v = 0)."""
    Z = _mass(p_ptr, q_ptr, q_ok, x_excl, w, 1.0, V, n_tiles_v, HAS_Q, BLOCK_V)
    D = _deficit(p_ptr, q_ptr, q_ok, x_excl, w, V, n_tiles_v, HAS_Q, BLOCK_V)
    return Z, D


@triton.jit
def _block_h(Zi, Di, mid, w):
    """h_i = min(1, Z_i / D_i) from fixed-point sums (D_i = 0: 1 if w_i > 0, else 0, see
    reference._stop_prob); h_L = w_L."""
    Z = Zi.to(tl.float64) * 8.673617379884035e-19
    D = Di.to(tl.float64) * 8.673617379884035e-19
    hm = tl.where(D > 0, tl.minimum(Z / tl.where(D > 0, D, 1.0), 1.0), tl.where(w > 0, 1.0, 0.0))
    return tl.where(mid, hm, w)


@triton.jit
def _pick(vals, idxs):
    """(max, lowest id reaching it) over chunk partials; (max, 0) when no chunk beat -1."""
    m = tl.max(vals, 0)
    first = tl.min(tl.where(vals == m, idxs, 2147483647), 0)
    return m, tl.where(m > -1.0, first, 0)


@triton.jit
def _chain_decide(ids_ptr, p_ptr, q_ptr, u_ptr, eta_ptr, rf_ptr, ri_ptr, b, start, L, tbase, V, S, K,
                  MODE: tl.constexpr, HAS_Q: tl.constexpr, SPLIT: tl.constexpr, SB: tl.constexpr,
                  BLOCK_V: tl.constexpr):
    """(tau, w_tau) of request b under the chain rule MODE (0 token: accept iff u q(x) < p(x);
    1 block: w_i, h_i = min(1, Z_i / D_i), tau = max{i : eta_i < h_i}; 2 greedy match).

    The per-step row quantities (greedy: argmax_v p_k(v); block: Z_i, D_i) are computed here over
    the whole row (SPLIT False, rf/ri/S/K/SB unused) or combined from the per-chunk partials of
    :func:`chain_rows_split_kernel` (SPLIT True, BLOCK_V unused); the rest is scalar work."""
    if SPLIT:
        cs = tl.arange(0, SB)
        cm = cs < S
        slot = (b.to(tl.int64) * S + cs) * K
    tau = tl.zeros((), tl.int64)
    go = tl.full((), 1, tl.int1)
    w = tl.full((), 1.0, tl.float64)
    w_tau = tl.full((), 1.0, tl.float64)
    for k in range(0, L):
        x, valid, px, qx = _draft_probs(ids_ptr, p_ptr, q_ptr, start, tbase, k, V, HAS_Q)
        if MODE == 0:
            u = tl.load(u_ptr + start + k)
            go = go & valid & (u * qx < px)
            tau += go.to(tl.int64)
        elif MODE == 2:
            if SPLIT:
                best, am = _pick(tl.load(rf_ptr + slot + k, mask=cm, other=-1.0),
                                 tl.load(ri_ptr + slot + k, mask=cm, other=0))
            else:
                nt = tl.where(go, V, 0)         # rows after the first mismatch are not read
                am = _row_argmax(p_ptr + (tbase + k) * V, V, nt, BLOCK_V)
            go = go & valid & (x == am)
            tau += go.to(tl.int64)
        else:
            w = _block_weight(w, px, qx)
            i = k + 1
            mid = i < L
            if SPLIT:
                Zi = tl.sum(tl.load(ri_ptr + 2 * slot + 2 * k, mask=cm, other=0), 0)
                Di = tl.sum(tl.load(ri_ptr + 2 * slot + 2 * k + 1, mask=cm, other=0), 0)
            else:
                nt = tl.where(mid, V, 0)        # h_L = w_L needs no row
                x1 = tl.load(ids_ptr + start + i, mask=mid, other=-1)
                Zi, Di = _block_sums(p_ptr + (tbase + i) * V, q_ptr + (start + i) * V, mid.to(tl.int32), x1, w,
                                     V, nt, HAS_Q, BLOCK_V)
            h = _block_h(Zi, Di, mid, w)
            eta = tl.load(eta_ptr + start + k)
            passed = eta < h
            tau = tl.where(passed, i.to(tl.int64), tau)
            w_tau = tl.where(passed, w, w_tau)
    return tau, w_tau


@triton.jit
def _residual_args(ids_ptr, start, L, tau, w_tau):
    """(next draft id or -1, weight, C) of the residual row (w_tau p_tau - q_tau)_+ or p_L."""
    bonus = tau == L
    xn = tl.load(ids_ptr + start + tau, mask=tau < L, other=-1)
    return xn, tl.where(bonus, 1.0, w_tau), tl.where(bonus, 0.0, 1.0)


@triton.jit
def _write_out(ids_ptr, out_ptr, tau_ptr, b, start, tau, y, out_stride):
    """out[b, :tau] = the accepted drafts, out[b, tau] = y, tau[b] = tau."""
    obase = out_ptr + b.to(tl.int64) * out_stride
    for k in range(0, tau):
        tl.store(obase + k, tl.load(ids_ptr + start + k))
    tl.store(obase + tau, y.to(tl.int32))
    tl.store(tau_ptr + b, tau.to(tl.int32))


@triton.jit
def chain_verify_kernel(ids_ptr, cu_ptr, q_ptr, p_ptr, u_ptr, eta_ptr, noise_ptr,
                        out_ptr, tau_ptr, V, out_stride,
                        MODE: tl.constexpr, HAS_Q: tl.constexpr, NOISE: tl.constexpr,
                        BLOCK_V: tl.constexpr):
    """Chain verification of request b = ``program_id`` in the ragged layout (target rows
    [N+B, V], request b's first at cu[b-1] + b): tau by the rule MODE (:func:`_chain_decide`, row
    quantities computed in this program), then one token from the residual (w_tau p_tau - q_tau)_+
    or the bonus row p_L (:mod:`reference_gpu.reference`).  Writes ``out[b, :tau+1]`` and
    ``tau[b]``.  Launched by :func:`launch_chain` (example in the module docstring)."""
    b = tl.program_id(0)
    end = tl.load(cu_ptr + b).to(tl.int64)
    start = tl.load(cu_ptr + b - 1, mask=b > 0, other=0).to(tl.int64)
    L = end - start
    tbase = start + b                          # first target row of request b
    # no split scratch here: rf/ri, S, K, SB are placeholders the SPLIT=False branch never reads
    tau, w_tau = _chain_decide(ids_ptr, p_ptr, q_ptr, u_ptr, eta_ptr, p_ptr, ids_ptr, b, start, L, tbase,
                               V, 1, 1, MODE, HAS_Q, False, 1, BLOCK_V)
    row = tbase + tau
    if MODE == 2:
        y = _row_argmax(p_ptr + row * V, V, V, BLOCK_V)
    else:
        xn, wr, Cq = _residual_args(ids_ptr, start, L, tau, w_tau)
        if NOISE == 0:
            y = _draw(p_ptr + row * V, q_ptr + (start + tau) * V, (tau < L).to(tl.int32), xn, wr, Cq,
                      noise_ptr + b.to(tl.int64) * V, 0.0, V, HAS_Q, NOISE, BLOCK_V)
        else:
            ur = tl.load(noise_ptr + b)
            y = _draw(p_ptr + row * V, q_ptr + (start + tau) * V, (tau < L).to(tl.int32), xn, wr, Cq,
                      noise_ptr, ur, V, HAS_Q, NOISE, BLOCK_V)
    _write_out(ids_ptr, out_ptr, tau_ptr, b, start, tau, y, out_stride)


@triton.jit
def tree_verify_kernel(tok_ptr, par_ptr, cu_ptr, p_ptr, q_ptr, u_ptr, noise_ptr,
                       out_ptr, node_ptr, depth_ptr, V, out_stride,
                       NOISE: tl.constexpr, BLOCK_V: tl.constexpr):
    """SpecInfer recursive rejection sampling (closed-form residual R_j = (p - C_j q)_+) for the
    tree of request ``program_id``; nodes [start_b, cu[b]) with local parent indices.

    At the current node child c_j (node order) is accepted iff (U_{c_j} q(x)) m_j < R_j(x),
    m_j = sum_v R_j(v) in fixed point; on acceptance the walk descends, otherwise C grows by
    m_j; the emitted token comes from R (or the leaf's bonus row p).  Writes the path and the
    token to ``out[b]``, the node and its depth.  Launched by :func:`launch_tree`."""
    b = tl.program_id(0)
    end = tl.load(cu_ptr + b).to(tl.int64)
    start = tl.load(cu_ptr + b - 1, mask=b > 0, other=0).to(tl.int64)
    n = end - start
    obase = out_ptr + b.to(tl.int64) * out_stride
    cur = tl.zeros((), tl.int64)
    active = tl.full((), 1, tl.int1)
    depth = tl.zeros((), tl.int64)
    Cfin = tl.full((), 0.0, tl.float64)
    for step in range(0, n):
        prow = p_ptr + (start + cur) * V
        qrow = q_ptr + (start + cur) * V
        C = tl.full((), 0.0, tl.float64)
        m = tl.full((), 1.0, tl.float64)
        chosen = tl.full((), -1, tl.int64)
        j = tl.zeros((), tl.int64)
        nscan = tl.where(active, n, 0)
        for c in range(1, nscan):
            par = tl.load(par_ptr + start + c).to(tl.int64)
            kid = (par == cur) & (chosen < 0)
            need = kid & (j > 0)
            Mi = _mass(prow, qrow, 1, -1, 1.0, C, V, tl.where(need, V, 0), True, BLOCK_V)
            m = tl.where(need, Mi.to(tl.float64) * 8.673617379884035e-19, m)
            x = tl.load(tok_ptr + start + c)
            valid = (x >= 0) & (x < V)
            xs = tl.where(valid, x, 0).to(tl.int64)
            px = tl.load(prow + xs).to(tl.float64)
            qx = tl.load(qrow + xs).to(tl.float64)
            r = tl.maximum(px - C * qx, 0.0)
            u = tl.load(u_ptr + start + c)
            acc = kid & valid & ((u * qx) * m < r)
            chosen = tl.where(acc, c, chosen)
            C = tl.where(kid & (~acc), C + m, C)
            j += kid.to(tl.int64)
        down = active & (chosen >= 0)
        tl.store(obase + depth, tl.load(tok_ptr + start + chosen, mask=down, other=-1), mask=down)
        Cfin = tl.where(active & (chosen < 0), C, Cfin)
        cur = tl.where(down, chosen, cur)
        depth += down.to(tl.int64)
        active = down
    prow = p_ptr + (start + cur) * V
    qrow = q_ptr + (start + cur) * V
    if NOISE == 0:
        y = _draw(prow, qrow, (Cfin > 0).to(tl.int32), -1, 1.0, Cfin, noise_ptr + b.to(tl.int64) * V, 0.0, V,
                  True, NOISE, BLOCK_V)
    else:
        ur = tl.load(noise_ptr + b)
        y = _draw(prow, qrow, (Cfin > 0).to(tl.int32), -1, 1.0, Cfin, noise_ptr, ur, V, True, NOISE, BLOCK_V)
    tl.store(obase + depth, y.to(tl.int32))
    tl.store(node_ptr + b, cur.to(tl.int32))
    tl.store(depth_ptr + b, depth.to(tl.int32))


# ---------------------------------------------------------------------------------------------
# Split-vocabulary chain path: request b's vocabulary is cut into S chunks of CW = k BLOCK_V
# ids, chunk c handled by program (b, c).  Chunks write partials (fixed-point sums, per-chunk
# (max, argmax), inverse-CDF chunk totals / hits) to scratch [B, S, K]; a grid-(B,) kernel combines
# them.  Integer sums are associative, and "max, then the lowest id reaching it" over chunks in
# id order is the same argmax as one left-to-right walk, so the result is bit-identical to
# chain_verify_kernel.


@triton.jit
def chain_rows_split_kernel(ids_ptr, cu_ptr, q_ptr, p_ptr, rf_ptr, ri_ptr, V, CW, S, K,
                            MODE: tl.constexpr, HAS_Q: tl.constexpr, BLOCK_V: tl.constexpr):
    """Program (b, c), chunk c = [c CW, (c+1) CW) of request b's rows: greedy (MODE 2) writes
    (max, argmax) of target rows 0..L to rf/ri[b, c, k]; block (MODE 1) writes the fixed-point
    Z_i, D_i (i = 1..L-1) to ri[b, c, 2(i-1)], ri[b, c, 2(i-1)+1] (ri is int64 there)."""
    b = tl.program_id(0)
    c = tl.program_id(1)
    end = tl.load(cu_ptr + b).to(tl.int64)
    start = tl.load(cu_ptr + b - 1, mask=b > 0, other=0).to(tl.int64)
    L = end - start
    tbase = start + b
    c0 = c * CW
    n = tl.minimum(tl.maximum(V - c0, 0), CW)        # ids in this chunk (0 past the end)
    slot = (b.to(tl.int64) * S + c) * K
    if MODE == 2:
        for k in range(0, L + 1):
            best, idx = _argmax_part(p_ptr + (tbase + k) * V + c0, n, n, BLOCK_V)
            tl.store(rf_ptr + slot + k, best)
            tl.store(ri_ptr + slot + k, idx + c0)
    else:
        w = tl.full((), 1.0, tl.float64)
        for k in range(0, L - 1):
            x, valid, px, qx = _draft_probs(ids_ptr, p_ptr, q_ptr, start, tbase, k, V, HAS_Q)
            w = _block_weight(w, px, qx)
            i = k + 1
            x1 = tl.load(ids_ptr + start + i)
            prow = p_ptr + (tbase + i) * V + c0
            qrow = q_ptr + (start + i) * V + c0
            Zi, Di = _block_sums(prow, qrow, 1, x1 - c0, w, n, n, HAS_Q, BLOCK_V)
            tl.store(ri_ptr + 2 * slot + 2 * k, Zi)
            tl.store(ri_ptr + 2 * slot + 2 * k + 1, Di)


@triton.jit
def chain_draw_split_kernel(ids_ptr, cu_ptr, q_ptr, p_ptr, u_ptr, eta_ptr, noise_ptr, rf_ptr, ri_ptr,
                            df_ptr, di_ptr, V, CW, S, K,
                            MODE: tl.constexpr, HAS_Q: tl.constexpr, NOISE: tl.constexpr,
                            PHASE: tl.constexpr, SB: tl.constexpr, BLOCK_V: tl.constexpr):
    """Program (b, c): tau from the row partials, then chunk c of the residual draw.
    Exponential: (max R/E, id, max p/E, id) to df/di[b, c, 0:2].  Uniform, PHASE 0: the chunk's
    fixed-point masses of R and p to di[b, c, 0:2] (int64); PHASE 1: the global masses and the
    mass before the chunk from those totals, then the in-chunk search: (first hit or V, last id
    with mass or -1) to di[b, c, 2:4]."""
    b = tl.program_id(0)
    c = tl.program_id(1)
    end = tl.load(cu_ptr + b).to(tl.int64)
    start = tl.load(cu_ptr + b - 1, mask=b > 0, other=0).to(tl.int64)
    L = end - start
    tbase = start + b
    c0 = c * CW
    n = tl.minimum(tl.maximum(V - c0, 0), CW)
    tau, w_tau = _chain_decide(ids_ptr, p_ptr, q_ptr, u_ptr, eta_ptr, rf_ptr, ri_ptr, b, start, L, tbase,
                               V, S, K, MODE, HAS_Q, True, SB, BLOCK_V)
    xn, wr, Cq = _residual_args(ids_ptr, start, L, tau, w_tau)
    prow = p_ptr + (tbase + tau) * V + c0
    qrow = q_ptr + (start + tau) * V + c0
    q_ok = (tau < L).to(tl.int32)
    slot = (b.to(tl.int64) * S + c) * 4
    if NOISE == 0:
        bR, iR, bP, iP = _race_part(prow, qrow, q_ok, xn - c0, wr, Cq, noise_ptr + b.to(tl.int64) * V + c0, n,
                                    HAS_Q, BLOCK_V)
        tl.store(df_ptr + slot, bR)
        tl.store(df_ptr + slot + 1, bP)
        tl.store(di_ptr + slot, (iR + c0).to(tl.int64))
        tl.store(di_ptr + slot + 1, (iP + c0).to(tl.int64))
    elif PHASE == 0:
        tl.store(di_ptr + slot, _mass(prow, qrow, q_ok, xn - c0, wr, Cq, n, n, HAS_Q, BLOCK_V))
        tl.store(di_ptr + slot + 1, _mass(prow, qrow, q_ok, xn - c0, 1.0, 0.0, n, n, HAS_Q, BLOCK_V))
    else:
        cs = tl.arange(0, SB)
        cm = cs < S
        sl = (b.to(tl.int64) * S + cs) * 4
        sR = tl.load(di_ptr + sl, mask=cm, other=0)
        sP = tl.load(di_ptr + sl + 1, mask=cm, other=0)
        massR = tl.sum(sR, 0)
        useR = massR > 0
        mass = tl.where(useR, massR, tl.sum(sP, 0))
        thr = tl.load(noise_ptr + b) * mass.to(tl.float64)
        carry = tl.sum(tl.where(cs < c, tl.where(useR, sR, sP), 0), 0)
        first, last = _cdf_part(prow, qrow, q_ok, xn - c0, wr, Cq, useR, thr, carry, n, HAS_Q, BLOCK_V)
        tl.store(di_ptr + slot + 2, tl.where(first < n, first + c0, V).to(tl.int64))
        tl.store(di_ptr + slot + 3, tl.where(last >= 0, last + c0, -1).to(tl.int64))


@triton.jit
def chain_combine_split_kernel(ids_ptr, cu_ptr, q_ptr, p_ptr, u_ptr, eta_ptr, rf_ptr, ri_ptr, df_ptr, di_ptr,
                               out_ptr, tau_ptr, V, S, K, out_stride,
                               MODE: tl.constexpr, HAS_Q: tl.constexpr, NOISE: tl.constexpr,
                               SB: tl.constexpr):
    """Program b: tau, then the token from the chunk partials; writes out[b] and tau[b] as
    chain_verify_kernel does."""
    b = tl.program_id(0)
    end = tl.load(cu_ptr + b).to(tl.int64)
    start = tl.load(cu_ptr + b - 1, mask=b > 0, other=0).to(tl.int64)
    L = end - start
    tbase = start + b
    tau, w_tau = _chain_decide(ids_ptr, p_ptr, q_ptr, u_ptr, eta_ptr, rf_ptr, ri_ptr, b, start, L, tbase,
                               V, S, K, MODE, HAS_Q, True, SB, 1)       # BLOCK_V: unused when split
    cs = tl.arange(0, SB)
    cm = cs < S
    if MODE == 2:
        slot = (b.to(tl.int64) * S + cs) * K + tau
        best, y = _pick(tl.load(rf_ptr + slot, mask=cm, other=-1.0), tl.load(ri_ptr + slot, mask=cm, other=0))
    else:
        slot = (b.to(tl.int64) * S + cs) * 4
        if NOISE == 0:
            bR, iR = _pick(tl.load(df_ptr + slot, mask=cm, other=-1.0), tl.load(di_ptr + slot, mask=cm, other=0))
            bP, iP = _pick(tl.load(df_ptr + slot + 1, mask=cm, other=-1.0),
                           tl.load(di_ptr + slot + 1, mask=cm, other=0))
            y = tl.where(bR > 0, iR, iP)
        else:
            first = tl.min(tl.load(di_ptr + slot + 2, mask=cm, other=V), 0)
            last = tl.max(tl.load(di_ptr + slot + 3, mask=cm, other=-1), 0)
            y = tl.where(first < V, first, last)
    _write_out(ids_ptr, out_ptr, tau_ptr, b, start, tau, y, out_stride)


#: Programs per SM the automatic split aims at, and the SM count assumed off CUDA (an H200).
_PROGRAMS_PER_SM = 3
_DEFAULT_SMS = 132
#: Rows shorter than this are not split.  On an H200 (benchmarks/results/kernels.json) a split
#: call was 2-36% slower than one program per request at V = 32,768 (the call is host-bound: its
#: extra launches cost more than the kernel time they save) and 1.6-3.6x faster at V = 131,072.
_MIN_SPLIT_V = 65536


def auto_splits(B: int, V: int, block_v: int, sms: int = _DEFAULT_SMS) -> int:
    """Vocabulary chunks per request: 1 when B alone gives >= 2 programs per SM, the row is one
    tile or shorter than ``_MIN_SPLIT_V``, else enough chunks (of >= one tile) for about
    ``_PROGRAMS_PER_SM`` programs per SM.

    >>> from reference_gpu.kernels import auto_splits
    >>> [auto_splits(B, V, 1024) for B, V in ((1, 131072), (128, 131072), (512, 131072), (1, 32768))]
    [128, 4, 1, 1]
    """
    n_tiles = triton.cdiv(V, block_v)
    if B >= 2 * sms or n_tiles < 2 or V < _MIN_SPLIT_V:
        return 1
    return min(n_tiles, triton.cdiv(_PROGRAMS_PER_SM * sms, B))


def chain_plan(B: int, V: int, device, block_v=None, splits=None):
    """(S, BLOCK_V) that :func:`launch_chain` uses: ``splits`` if given, else :func:`auto_splits`
    on the device's SM count with tiles of at most 1024 (unless ``block_v`` is given); the tile
    is :func:`default_block_v` whenever S = 1.  Automatic chunks are never empty.

    >>> from reference_gpu.kernels import chain_plan
    >>> chain_plan(1, 131072, "cpu"), chain_plan(1, 32768, "cpu"), chain_plan(2, 50, "cpu", 16, 3)
    ((128, 1024), (1, 4096), (3, 16))
    """
    device = torch.device(device)
    if splits is not None:
        return splits, block_v or default_block_v(V)
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else _DEFAULT_SMS
    bv = block_v or min(default_block_v(V), 1024)
    S = auto_splits(B, V, bv, sms)
    if S == 1:
        return 1, block_v or default_block_v(V)
    return triton.cdiv(V, triton.cdiv(triton.cdiv(V, bv), S) * bv), bv    # no empty chunks


def launch_chain(ids, cu, q, p, u, eta, noise, out, tau, mode, noise_kind, block_v=None, splits=None):
    """Launch chain verification on prepared, contiguous tensors (no checks): one program per
    request (:func:`chain_verify_kernel`, ``splits`` = 1) or the split-vocabulary path
    (``splits`` = S > 1: grid (B, S) kernels over chunks of the vocabulary, then a grid (B,)
    combine; bit-identical results).

    Parameters: ``ids``, ``cu`` int32 [N], [B]; ``q`` [N, V] or ``None`` (one-hot drafts);
    ``p`` [N + B, V]; ``u``, ``eta`` float64 [N] (a 1-element dummy when N = 0); ``noise``
    ([B, V] Exp(1) or [B] uniforms); ``out`` int32 [B, max_L + 1] filled with -1 and ``tau``
    int32 [B], written in place; ``mode``; ``noise_kind``; ``block_v`` (default
    :func:`default_block_v`, at most 1024 on an automatic split); ``splits`` (``None``:
    :func:`auto_splits`; an int >= 1: that many chunks, empty ones allowed).

    Returns: ``None`` (results are in ``out`` and ``tau``).

    >>> import torch
    >>> from reference_gpu.kernels import launch_chain
    >>> device = "cuda" if torch.cuda.is_available() else "cpu"
    >>> f64 = dict(dtype=torch.float64, device=device)
    >>> p = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25] * 4, [0.4, 0.3, 0.2, 0.1],
    ...                   [0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 0.5, 0.5]], **f64)
    >>> q = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.25] * 4], **f64)
    >>> ids = torch.tensor([0, 3, 2], dtype=torch.int32, device=device)
    >>> cu = torch.tensor([2, 3], dtype=torch.int32, device=device)
    >>> u, eta, E = torch.tensor([0.1, 0.5, 0.9], **f64), torch.zeros(3, **f64), torch.ones(2, 4, **f64)
    >>> for S in (1, 2):
    ...     out = torch.full((2, 3), -1, dtype=torch.int32, device=device)
    ...     tau = torch.empty(2, dtype=torch.int32, device=device)
    ...     launch_chain(ids, cu, q, p, u, eta, E, out, tau, "block", "exponential", block_v=2, splits=S)
    ...     print(out.tolist(), tau.tolist())    # as reference_gpu.reference.chain_reference
    [[0, 3, 0], [2, 2, -1]] [2, 1]
    [[0, 3, 0], [2, 2, -1]] [2, 1]
    """
    B, V = cu.numel(), p.shape[-1]
    if B == 0:
        return
    check_splits(splits)
    q_arg = q if q is not None else p
    MODE, HAS_Q, NOISE = MODE_IDS[mode], q is not None, NOISE_IDS[noise_kind]
    S, bv = chain_plan(B, V, p.device, block_v, splits)
    if S == 1:
        chain_verify_kernel[(B,)](ids, cu, q_arg, p, u, eta, noise, out, tau, V, out.stride(0),
                                  MODE=MODE, HAS_Q=HAS_Q, NOISE=NOISE, BLOCK_V=bv, enable_fp_fusion=False)
        return
    n_tiles = triton.cdiv(V, bv)
    cw = triton.cdiv(n_tiles, S) * bv            # chunk width: whole tiles
    K = out.shape[1]                             # max_L + 1 target rows per request
    SB = triton.next_power_of_2(S)
    dev = p.device
    # scratch: greedy (max, argmax) of rows 0..L / block (Z_i, D_i) pairs; residual draw partials
    rf = torch.empty((B, S, K) if MODE == 2 else (1,), dtype=torch.float64, device=dev)
    ri = torch.empty((B, S, K * (2 if MODE == 1 else 1)) if MODE != 0 else (1,), dtype=torch.int64, device=dev)
    df = torch.empty((B, S, 4), dtype=torch.float64, device=dev)
    di = torch.empty((B, S, 4), dtype=torch.int64, device=dev)
    flags = dict(MODE=MODE, HAS_Q=HAS_Q, enable_fp_fusion=False)
    if MODE != 0:
        chain_rows_split_kernel[(B, S)](ids, cu, q_arg, p, rf, ri, V, cw, S, K, BLOCK_V=bv, **flags)
    if MODE != 2:
        for phase in ((0, 1) if NOISE == 1 else (1,)):
            chain_draw_split_kernel[(B, S)](ids, cu, q_arg, p, u, eta, noise, rf, ri, df, di, V, cw, S, K,
                                            NOISE=NOISE, PHASE=phase, SB=SB, BLOCK_V=bv, **flags)
    chain_combine_split_kernel[(B,)](ids, cu, q_arg, p, u, eta, rf, ri, df, di, out, tau, V, S, K, out.stride(0),
                                     NOISE=NOISE, SB=SB, **flags)


def launch_tree(tokens, parent, cu, p, q, u, noise, out, node, depth, noise_kind, block_v=None):
    """Launch :func:`tree_verify_kernel` on prepared, contiguous tensors (no checks), one
    program per tree.

    Parameters: ``tokens``, ``parent`` int32 [M], ``cu`` int32 [B], ``p``, ``q`` [M, V],
    ``u`` float64 [M], ``noise`` ([B, V] or [B]); ``out`` int32 [B, max_depth + 1] filled with
    -1, ``node`` and ``depth`` int32 [B], written in place; ``noise_kind``; ``block_v``.

    Returns: ``None`` (results are in ``out``, ``node`` and ``depth``).

    >>> import torch
    >>> from reference_gpu.kernels import launch_tree
    >>> device = "cuda" if torch.cuda.is_available() else "cpu"
    >>> i32, f64 = dict(dtype=torch.int32, device=device), dict(dtype=torch.float64, device=device)
    >>> tokens, parent = torch.tensor([-1, 1, 2, 0], **i32), torch.tensor([-1, 0, 0, 1], **i32)   # root -> 1 -> 0, root -> 2
    >>> p = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [1/3] * 3, [0.1, 0.1, 0.8]], **f64)
    >>> q = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25], [0.0] * 3, [0.0] * 3], **f64)
    >>> U = torch.tensor([0.0, 0.9, 0.5, 0.0], **f64)
    >>> out, node, depth = torch.full((1, 3), -1, **i32), torch.empty(1, **i32), torch.empty(1, **i32)
    >>> launch_tree(tokens, parent, torch.tensor([4], **i32), p, q, U, torch.ones(1, 3, **f64), out, node, depth, "exponential")
    >>> out.tolist(), node.tolist(), depth.tolist()    # as reference_gpu.reference.tree_reference
    ([[2, 0, -1]], [2], [1])
    """
    B, V = cu.numel(), p.shape[-1]
    if B == 0:
        return
    tree_verify_kernel[(B,)](tokens, parent, cu, p, q, u, noise, out, node, depth, V, out.stride(0),
                             NOISE=NOISE_IDS[noise_kind], BLOCK_V=block_v or default_block_v(V),
                             enable_fp_fusion=False)
