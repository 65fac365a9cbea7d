"""Pure-torch reference of the verification kernels: same inputs, same noise, same bits.

Semantics (docs/theory.md §3, 4, 6.1, 11), for request b with draft x_1..x_L, target rows p_0..p_L
(p_L = bonus row), draft rows q_0..q_{L-1} (``None``: one-hot q_k = delta_{x_{k+1}}, docs/theory.md §3.2):

* ``token``:  accept x_k iff ``u_k * q_{k-1}(x_k) < p_{k-1}(x_k)`` (strict, docs/theory.md §11.3);
  tau = number of leading accepts; Y ~ (p_tau - q_tau)_+ (tau < L) or p_L.
* ``block``:  w_0 = 1, w_k = min(1, w_{k-1} p(x_k) / q(x_k)); Z_i = sum_v (w_i p_i - q_i)_+,
  D_i = sum_v (q_i - w_i p_i)_+; h_i = min(1, Z_i / D_i) (1 if D_i = 0), h_L = w_L;
  tau = max{i : eta_i < h_i} (0 if none); Y ~ (w_tau p_tau - q_tau)_+ or p_L
  (Sun et al., "Block Verification Accelerates Speculative Decoding", arXiv 2403.10444).
* ``greedy``: accept iff x_k = argmax p_{k-1} (lowest id on ties); Y = argmax p_tau.
* tree (SpecInfer RRS, arXiv 2305.09781): at node u with children c_1..c_k (node order),
  R_j = (p_u - C_j q_u)_+ with C_0 = 0, C_{j+1} = C_j + m_j, m_0 = 1, m_j = sum_v R_j(v); accept
  c_j iff ``(U_{c_j} * q_u(x)) * m_j < R_j(x)``.  This is the recursion R <- norm((R - q)_+) in
  closed form: ((p - C q)_+ - m q)_+ = (p - (C + m) q)_+.

Residual draws from an unnormalised row R >= 0 with request noise (docs/theory.md §11.4):
``exponential``: argmax_v R(v) / E_v (E a row of Exp(1), ties to the lowest id);
``uniform``: inverse CDF with one uniform U on fixed-point masses.  If R has no mass the draw
falls back to the target row p of the same position, so a token with p = 0 is never emitted.

Reductions (Z_i, D_i, m_j, inverse-CDF prefix sums) are done in 2^-60 fixed point on int64, which is
associative, so the reference and the Triton kernel agree bit for bit whatever their reduction
order; entries below 2^-60 are dropped from these sums (an absolute error <= V 2^-60).
Elementwise arithmetic is float64 in a fixed order (the kernels run with FMA contraction off).

Randomness is an input (docs/theory.md §11.2): with u = 0 every draft with p > 0 is accepted.

>>> import torch
>>> from reference_gpu.reference import chain_reference
>>> p = torch.tensor([[0.5, 0.5], [0.0, 1.0]], dtype=torch.float64)   # one request, L = 1
>>> q = torch.tensor([[0.9, 0.1]], dtype=torch.float64)
>>> u, eta, E = torch.zeros(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64), torch.ones(1, 2, dtype=torch.float64)
>>> out, tau = chain_reference(torch.tensor([0]), torch.tensor([1]), q, p, u, eta, E, "token")
>>> out.tolist(), tau.tolist()    # x_1 = 0 accepted, then the bonus token from p_1
([[0, 1]], [1])
"""
from __future__ import annotations

import torch

__all__ = ["FIXED_SCALE", "fixed_point", "fixed_sum", "sample_row", "chain_reference",
           "tree_reference", "block_stop_probs", "MODES", "NOISE_KINDS"]

#: Fixed-point scale for order-independent reductions.
FIXED_SCALE = 2.0 ** 60
#: Chain verification rules: Leviathan et al.'s token rule, Sun et al.'s block rule, greedy match.
MODES = ("token", "block", "greedy")
#: Residual noise: an Exp(1) row per request (exponential race) or one uniform (inverse CDF).
NOISE_KINDS = ("exponential", "uniform")


def fixed_point(x: torch.Tensor) -> torch.Tensor:
    """floor(x 2^60) as int64 for x >= 0 (truncation toward zero; x < 2^-60 becomes 0).

    >>> import torch
    >>> from reference_gpu.reference import fixed_point
    >>> fixed_point(torch.tensor([0.5, 2.0 ** -61], dtype=torch.float64)).tolist()
    [576460752303423488, 0]
    """
    return (x * FIXED_SCALE).to(torch.int64)


def fixed_sum(x: torch.Tensor) -> torch.Tensor:
    """sum_v floor(x_v 2^60) / 2^60 over the last axis, as float64: integer addition is
    associative, so any reduction order (a kernel's tiles) gives the same bits.

    >>> import torch
    >>> from reference_gpu.reference import fixed_sum
    >>> fixed_sum(torch.tensor([[0.25, 0.5], [0.1, 0.2]], dtype=torch.float64)).tolist()
    [0.75, 0.30000000000000004]
    """
    return fixed_point(x).sum(-1).to(torch.float64) / FIXED_SCALE


def sample_row(R: torch.Tensor, P: torch.Tensor, noise: torch.Tensor, kind: str) -> torch.Tensor:
    """Draw one token per row from the unnormalised rows R [n, V] (fallback P) with given noise.

    Both samplers draw v with probability R(v) / sum(R) (docs/theory.md §11.4):
    exponential: argmax_v R(v)/E_v (ties to the lowest id), noise E [n, V] of Exp(1) entries;
    uniform: the first v whose fixed-point prefix sum exceeds U * mass (else the last v with
    positive mass), noise U [n] in [0, 1).  Rows of R without mass use P instead, so a token
    with P = 0 is never drawn.

    Parameters: ``R``, ``P`` (float64 [n, V], entries >= 0), ``noise``, ``kind`` (one of
    :data:`NOISE_KINDS`).

    Returns: int64 [n] token ids.

    >>> import torch
    >>> from reference_gpu.reference import sample_row
    >>> R = torch.tensor([[0.0, 0.3, 0.1], [0.0, 0.0, 0.0]], dtype=torch.float64)
    >>> P = torch.tensor([[0.2, 0.3, 0.5], [0.2, 0.3, 0.5]], dtype=torch.float64)
    >>> sample_row(R, P, torch.tensor([0.9, 0.1], dtype=torch.float64), "uniform").tolist()  # row 2: R has no mass
    [2, 0]
    >>> sample_row(R, P, torch.ones(2, 3, dtype=torch.float64), "exponential").tolist()
    [1, 2]
    """
    if kind == "exponential":
        E = noise.to(torch.float64)
        kR = torch.where(R > 0, R / E, torch.zeros((), dtype=torch.float64))
        kP = torch.where(P > 0, P / E, torch.zeros((), dtype=torch.float64))
        bestR = kR.max(dim=-1)
        use = bestR.values > 0
        return torch.where(use, kR.argmax(dim=-1), kP.argmax(dim=-1))
    Ri, Pi = fixed_point(R), fixed_point(P)
    use = Ri.sum(-1) > 0
    X = torch.where(use[:, None], Ri, Pi)
    mass = X.sum(-1).to(torch.float64)
    thr = noise.to(torch.float64) * mass
    above = X.cumsum(-1).to(torch.float64) > thr[:, None]
    V = X.shape[-1]
    idx = torch.arange(V, device=X.device)
    first = torch.where(above, idx, V).min(dim=-1).values
    last = torch.where(X > 0, idx, -1).max(dim=-1).values
    return torch.where(first < V, first, last)


def _ratio_weight(w, px, qx):
    # w_k = min(1, w_{k-1} p / q); q = 0 (contract violation): 1 if p > 0 and w > 0, else 0
    one = torch.ones((), dtype=torch.float64, device=w.device)
    safe_q = torch.where(qx > 0, qx, one)
    r = torch.minimum(one, (w * px) / safe_q)
    return torch.where(qx > 0, r, ((px > 0) & (w > 0)).to(torch.float64))


def _stop_prob(w, p, q):
    """Block stop probability h = min(1, Z / D), Z = sum_v (w p - q)_+, D = sum_v (q - w p)_+
    (where D = 0: 1 if w > 0, else 0), for w [n] and rows p, q [n, V].

    D equals the paper's Z + 1 - w when the rows sum to 1, but (Z + 1) - w cancels when w is
    close to 1 and Z is tiny (docs/theory.md §4.1); summing the deficit directly does not.
    With rows that sum to 1, D = 0 forces w >= 1 (h = 0/0, taken as 1), and w = 0 gives Z = 0 < D
    (h = 0); the w > 0 test only matters for an all-zero q row (a one-hot draft of an
    out-of-range id under ``validate=False``), which must not make a rejected token pass."""
    diff = w[:, None] * p - q
    Z = fixed_sum(torch.clamp_min(diff, 0.0))
    D = fixed_sum(torch.clamp_min(-diff, 0.0))
    return torch.where(D > 0, torch.clamp_max(Z / torch.where(D > 0, D, 1.0), 1.0),
                       (w > 0).to(Z.dtype))


def _segments(cu: torch.Tensor):
    cu = cu.to(torch.int64)
    start = torch.cat([cu.new_zeros(1), cu[:-1]])
    return start, cu - start


def chain_reference(draft_token_ids, cu_num_draft_tokens, draft_probs, target_probs, uniforms,
                    etas, noise, mode: str = "token", noise_kind: str = "exponential"):
    """Ragged batch chain verification; returns ``(output int32 [B, max_L+1], tau int32 [B])``.

    Layout (docs/theory.md §11.1): request b owns draft entries [start_b, cu[b]) with start_b = cu[b-1]
    (0 for b = 0) and the L_b + 1 target rows [start_b + b, cu[b] + b] (last = bonus row), so
    ``target_probs`` is [N + B, V].  ``uniforms``/``etas`` are float64 [N]; ``noise`` is the
    request noise ([B, V] exponential or [B] uniform).  Inputs are trusted (see ``api``).
    The rules (``mode`` in :data:`MODES`) are in the module docstring.

    Parameters: ``draft_token_ids`` int [N], ``cu_num_draft_tokens`` int [B],
    ``draft_probs`` [N, V] or ``None`` (one-hot drafts), ``target_probs`` [N + B, V],
    ``uniforms``, ``etas``, ``noise``, ``mode``, ``noise_kind`` (one of :data:`NOISE_KINDS`).

    Returns: ``(output, tau)``: int32 [B, max_L + 1], request b's row holding its tau_b accepted
    drafts and one emitted token, -1 after; int32 [B] tau_b.

    >>> import torch
    >>> from reference_gpu.reference import chain_reference
    >>> p = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25] * 4, [0.4, 0.3, 0.2, 0.1],   # request 0: L = 2
    ...                   [0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 0.5, 0.5]], dtype=torch.float64)  # request 1: L = 1
    >>> q = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.25] * 4], dtype=torch.float64)
    >>> ids, cu = torch.tensor([0, 3, 2]), torch.tensor([2, 3])
    >>> u, eta = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64), torch.zeros(3, dtype=torch.float64)
    >>> E = torch.ones(2, 4, dtype=torch.float64)      # Exp(1) noise fixed at 1: argmax of the row
    >>> for mode in ("token", "block", "greedy"):
    ...     out, tau = chain_reference(ids, cu, q, p, u, eta, E, mode)
    ...     print(mode, out.tolist(), tau.tolist())
    token [[0, 3, 0], [0, -1, -1]] [2, 0]
    block [[0, 3, 0], [2, 2, -1]] [2, 1]
    greedy [[3, -1, -1], [0, -1, -1]] [0, 0]

    Request 1 under the token rule: u q(2) = 0.225 >= p(2) = 0.1 rejects, and the residual
    (p - q)_+ = (0.45, 0, 0, 0) emits 0; under the block rule eta_1 = 0 < h_1 = w_1 = 0.4 accepts
    and the bonus row emits 2.
    """
    dev = target_probs.device
    B = cu_num_draft_tokens.numel()
    V = target_probs.shape[-1]
    start, lens = _segments(cu_num_draft_tokens)
    Lmax = int(lens.max()) if B else 0
    f64 = torch.float64
    k = torch.arange(Lmax, device=dev)
    inside = k[None, :] < lens[:, None]                                  # [B, Lmax]
    flat = (start[:, None] + k[None, :]).clamp(max=max(draft_token_ids.numel() - 1, 0))
    trow = start[:, None] + torch.arange(B, device=dev)[:, None] + k[None, :]   # verifying rows
    P = target_probs.to(f64)
    x = torch.where(inside, draft_token_ids.to(torch.int64)[flat] if draft_token_ids.numel() else
                    torch.full_like(flat, -1), torch.full_like(flat, -1))
    valid = inside & (x >= 0) & (x < V)
    xs = torch.where(valid, x, 0)
    trow_c = trow.clamp(max=P.shape[0] - 1)
    px = torch.where(valid, P[trow_c, xs], torch.zeros((), dtype=f64, device=dev))
    if draft_probs is not None:
        Q = draft_probs.to(f64)
        qx = torch.where(valid, Q[flat, xs], torch.zeros((), dtype=f64, device=dev))
    else:
        Q = None
        qx = torch.ones_like(px)
    u = uniforms.to(f64)[flat] if uniforms is not None and uniforms.numel() else torch.zeros_like(px)

    w_tau = torch.ones(B, dtype=f64, device=dev)
    if mode == "token":
        acc = valid & (u * qx < px)
        tau = torch.cumprod(acc.to(torch.int64), dim=1).sum(1) if Lmax else lens * 0
    elif mode == "greedy":
        am = P[trow_c].argmax(dim=-1)
        acc = valid & (x == am)
        tau = torch.cumprod(acc.to(torch.int64), dim=1).sum(1) if Lmax else lens * 0
    elif mode == "block":
        eta = etas.to(f64)[flat] if Lmax else None
        w = torch.ones(B, dtype=f64, device=dev)
        tau = torch.zeros(B, dtype=torch.int64, device=dev)
        for i in range(1, Lmax + 1):
            live = inside[:, i - 1]
            w = torch.where(live, _ratio_weight(w, px[:, i - 1], qx[:, i - 1]), w)
            h = w.clone()
            mid = live & (i < lens)
            if bool(mid.any()):
                rows = trow_c[:, min(i, Lmax - 1)]
                qi = _q_rows(Q, flat[:, min(i, Lmax - 1)], x[:, min(i, Lmax - 1)], V, f64, dev)
                h = torch.where(mid, _stop_prob(w, P[rows], qi), h)
            passed = live & (eta[:, i - 1] < h)
            tau = torch.where(passed, i, tau)
            w_tau = torch.where(passed, w, w_tau)
    else:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")

    bonus = tau == lens
    rrow = start + torch.arange(B, device=dev) + tau
    Prow = P[rrow]
    if mode == "greedy":
        Y = Prow.argmax(dim=-1)
    else:
        tq = torch.clamp(tau, max=max(Lmax - 1, 0))
        xnext = torch.where(bonus, -1, x.gather(1, tq[:, None])[:, 0] if Lmax else -torch.ones_like(tau))
        qrow = _q_rows(Q, (start + tau).clamp(max=max(draft_token_ids.numel() - 1, 0)), xnext, V, f64, dev)
        qrow = torch.where(bonus[:, None], 0.0, qrow)
        w_r = torch.where(bonus, 1.0, w_tau)
        R = torch.clamp_min(w_r[:, None] * Prow - qrow, 0.0)
        Y = sample_row(R, Prow, noise, noise_kind)

    out = torch.full((B, Lmax + 1), -1, dtype=torch.int32, device=dev)
    if Lmax:
        keep = k[None, :] < tau[:, None]
        out[:, :Lmax] = torch.where(keep, x, -1).to(torch.int32)
    out.scatter_(1, tau[:, None], Y[:, None].to(torch.int32))
    return out, tau.to(torch.int32)


def _q_rows(Q, rows, x, V, f64, dev):
    """Draft rows at ``rows`` ([B, V] float64), or the one-hot rows delta_x when Q is None."""
    if Q is not None:
        if Q.shape[0] == 0:  # no drafts in the batch: every request takes its bonus row
            return torch.zeros((rows.numel(), V), dtype=f64, device=dev)
        return Q[rows]
    return (torch.arange(V, device=dev)[None, :] == x[:, None]).to(f64)


def block_stop_probs(draft, p, q):
    """(w [L+1], h [L+1]) of block verification for one draft, exactly as the kernel computes them.

    w_0 = 1, w_i = min(1, w_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i)); h_i = min(1, Z_i / D_i) with
    Z_i = sum_v (w_i p_i - q_i)_+ and D_i = sum_v (q_i - w_i p_i)_+ for i < L (1 when D_i = 0),
    h_L = w_L (docs/theory.md §4.1; Sun et al., arXiv 2403.10444); the block rule keeps
    x^{1:tau}, tau = max{i : eta_i < h_i}.  D_i is the paper's Z_i + 1 - w_i summed directly,
    which does not cancel when w_i is close to 1 (the form specsim uses too); both sums are
    taken in 2^-60 fixed point, as in the kernel.

    Parameters: ``draft`` (L token ids), ``p`` ([L+1, V]), ``q`` ([L, V] or ``None`` for
    one-hot draft rows).

    Returns: ``(w, h)`` float64 tensors [L+1]; ``h[0]`` is unused (1).

    >>> import torch
    >>> from reference_gpu.reference import block_stop_probs
    >>> p = torch.tensor([[1/3, 2/3]] * 3, dtype=torch.float64)    # docs/theory.md §12, R2/R3 toy
    >>> q = torch.tensor([[2/3, 1/3]] * 2, dtype=torch.float64)
    >>> w, h = block_stop_probs([0, 1], p, q)
    >>> w.tolist(), h.tolist()
    ([1.0, 0.5, 1.0], [1.0, 0.0, 1.0])
    """
    f64 = torch.float64
    p = torch.as_tensor(p).to(f64)
    L, V = len(draft), p.shape[-1]
    Q = None if q is None else torch.as_tensor(q).to(f64)
    w = torch.ones(L + 1, dtype=f64)
    h = torch.ones(L + 1, dtype=f64)
    for i in range(1, L + 1):
        x = int(draft[i - 1])
        valid = 0 <= x < V
        px = p[i - 1, x] if valid else torch.tensor(0.0, dtype=f64)
        qx = (Q[i - 1, x] if valid else torch.tensor(0.0, dtype=f64)) if Q is not None else torch.tensor(1.0, dtype=f64)
        w[i] = _ratio_weight(w[i - 1], px, qx)
        if i < L:
            qi = Q[i] if Q is not None else (torch.arange(V) == int(draft[i])).to(f64)
            h[i] = _stop_prob(w[i:i + 1], p[i:i + 1], qi[None])[0]
        else:
            h[i] = w[i]
    return w, h


def tree_reference(tokens, parent, cu_num_nodes, target_probs, draft_probs, uniforms, noise,
                   noise_kind: str = "exponential"):
    """SpecInfer recursive rejection sampling over a ragged batch of flattened draft trees.

    Request b owns nodes [start_b, cu[b]) (node 0 of each tree is the root, token -1, parent -1;
    parents precede children; ``parent`` holds local indices).  ``target_probs``/``draft_probs``
    are [M, V] with p(.|path) and q(.|path) at every node; ``uniforms`` float64 [M] holds the coin
    of each node (used when it is tested as a child).  The rule is SpecInfer's recursive
    rejection sampling in the closed form of the module docstring (docs/theory.md §6.1).
    Per-request loop; vectorised over V.  Inputs are trusted (see ``api.verify_tree``).

    Parameters: ``tokens``, ``parent`` int [M], ``cu_num_nodes`` int [B], ``target_probs``,
    ``draft_probs`` [M, V], ``uniforms`` float64 [M], ``noise`` ([B, V] or [B]), ``noise_kind``.

    Returns: ``(output, node, depth)``: int32 [B, max_nodes] (the accepted path's tokens then the
    emitted token, -1 after), the accepted node (local id, 0 = root) and its depth, int32 [B].

    >>> import torch
    >>> from reference_gpu.reference import tree_reference
    >>> tokens, parent = torch.tensor([-1, 1, 2, 0]), torch.tensor([-1, 0, 0, 1])   # root -> 1 -> 0, root -> 2
    >>> p = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [1/3] * 3, [0.1, 0.1, 0.8]], dtype=torch.float64)
    >>> q = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25], [0.0] * 3, [0.0] * 3], dtype=torch.float64)
    >>> U = torch.tensor([0.0, 0.9, 0.5, 0.0], dtype=torch.float64)
    >>> out, node, depth = tree_reference(tokens, parent, torch.tensor([4]), p, q, U, torch.ones(1, 3, dtype=torch.float64))
    >>> out.tolist(), node.tolist(), depth.tolist()
    ([[2, 0, -1, -1]], [2], [1])

    Child 1 is rejected (0.9 q(1) = 0.54 >= p(1) = 0.3); child 2 is then tested against
    R_1 = (p - q)_+ = (0.1, 0, 0.2) of mass m_1 = 0.3 and accepted (0.5 q(2) m_1 = 0.045 < 0.2);
    node 2 is a leaf, so its bonus row emits 0.
    """
    dev = target_probs.device
    f64 = torch.float64
    P, Q = target_probs.to(f64), draft_probs.to(f64)
    U = uniforms.to(f64)
    V = P.shape[-1]
    start, lens = _segments(cu_num_nodes)
    B = lens.numel()
    tok = tokens.to(torch.int64).tolist()
    par = parent.to(torch.int64).tolist()
    rows_out, nodes, depths, R_rows, P_rows = [], [], [], [], []
    for b in range(B):
        s, n = int(start[b]), int(lens[b])
        cur, path, C = 0, [], 0.0
        while True:
            p, q = P[s + cur], Q[s + cur]
            C, m, chosen = torch.tensor(0.0, dtype=f64), torch.tensor(1.0, dtype=f64), -1
            j = 0
            for c in range(1, n):
                if par[s + c] != cur:
                    continue
                if j > 0:
                    m = fixed_sum(torch.clamp_min(p - C * q, 0.0))
                j += 1
                x = tok[s + c]
                if 0 <= x < V:
                    r = torch.clamp_min(p[x] - C * q[x], 0.0)
                    if bool((U[s + c] * q[x]) * m < r):
                        chosen = c
                        break
                C = C + m
            if chosen < 0:
                break
            cur = chosen
            path.append(tok[s + cur])
        R = torch.where(C > 0, torch.clamp_min(p - C * q, 0.0), p)
        R_rows.append(R)
        P_rows.append(p)
        rows_out.append(path)
        nodes.append(cur)
        depths.append(len(path))
    Dmax = int(max((int(n) for n in lens), default=1))
    out = torch.full((B, Dmax), -1, dtype=torch.int32, device=dev)
    if B:
        Y = sample_row(torch.stack(R_rows), torch.stack(P_rows), noise, noise_kind)
        for b in range(B):
            path = rows_out[b]
            if path:
                out[b, :len(path)] = torch.tensor(path, dtype=torch.int32)
            out[b, len(path)] = int(Y[b])
    return (out, torch.tensor(nodes, dtype=torch.int32, device=dev),
            torch.tensor(depths, dtype=torch.int32, device=dev))


def check_splits(splits):
    """``splits`` as given (``None`` = automatic); anything but ``None`` or an int >= 1 raises
    ``ValueError``.  Here rather than in ``api`` so that ``kernels`` can use it without importing
    ``api`` (which imports ``kernels``).

    >>> from reference_gpu.api import check_splits
    >>> check_splits(None), check_splits(4)
    (None, 4)
    >>> check_splits(0)
    Traceback (most recent call last):
    ...
    ValueError: splits must be None (automatic) or an int >= 1, got 0
    """
    if splits is not None and (isinstance(splits, bool) or not isinstance(splits, int) or splits < 1):
        raise ValueError(f"splits must be None (automatic) or an int >= 1, got {splits!r}")
    return splits
