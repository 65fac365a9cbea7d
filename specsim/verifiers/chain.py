"""Chain verifiers: one draft path of L tokens, rows indexed by prefix length (docs/theory.md §1-4, 7).

Each rule is written once, vectorised over a batch of N drafts (``batch_law``: drafts [N, L],
p [N, L+1, V], q [N, L, V] -> P(tau = k) [N, L+1] and the emitted token's law [N, L+1, V]); the
per-draft exact law (``law``, the protocol) is that function at N = 1.  ``sampler`` runs the
algorithm itself with explicit uniforms (strict ``u < a`` convention, docs/theory.md §11.3), so
sampling and exact law are independent implementations that tests compare.
"""
from __future__ import annotations

import numpy as np

from .. import _jit
from .._law_buffer import flat_law, law_bounds
from .._sampling import draw_token
from .._validate import normalize
from ..drafts import Chain
from ..models import _level_starts
from .base import Outcome, chain_verifier, law_from_batch

__all__ = ["token", "onehot", "block", "greedy", "hsd_released", "hsd_capped", "CHAIN_VERIFIERS",
           "block_weights", "law_from_batch"]


# --------------------------------------------------------------------------- shared helpers
def _drafted(rows: np.ndarray, drafts: np.ndarray) -> np.ndarray:
    """rows[n, i, drafts[n, i]] for i < L (one fancy index: take_along_axis built its index arrays
    in Python, a tenth of the block sampler's time on one draft)."""
    N, L = drafts.shape
    return rows[np.arange(N)[:, None], np.arange(L), drafts]


def _ratio(pd: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """p/q for drafted tokens; q = 0 is a contract violation: +inf if p > 0, else 0 (docs/theory.md §3)."""
    safe = np.where(qd > 0, qd, 1.0)
    with np.errstate(over="ignore"):  # subnormal q: the ratio overflows to inf, and min(1, inf) = 1
        return np.where(qd > 0, pd / safe, np.where(pd > 0, np.inf, 0.0))


def _normalize_rows(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """v / sum(v) along the last axis; ``fallback`` where the mass is 0 (reached with probability 0)."""
    s = v.sum(axis=-1, keepdims=True)
    return np.where(s > 0, v / np.where(s > 0, s, 1.0), fallback)


def _chain_stop(a: np.ndarray) -> np.ndarray:
    """Token-style stopping: P(tau = i) = prod_{k<=i} a_k (1 - a_{i+1}), P(tau = L) = prod a."""
    N, L = a.shape
    reach = np.concatenate([np.ones((N, 1)), np.cumprod(a, axis=1)], axis=1)
    probs = reach.copy()
    probs[:, :L] *= 1.0 - a
    return probs


def _stop_law_batch(h: np.ndarray) -> np.ndarray:
    """Largest passing index: P(tau = i) = h_i prod_{j>i}(1 - h_j), h_0 = 1; h is [N, L+1]."""
    N, L1 = h.shape
    after = np.ones((N, L1))
    for i in range(L1 - 2, -1, -1):
        after[:, i] = after[:, i + 1] * (1.0 - h[:, i + 1])
    hh = h.copy()
    hh[:, 0] = 1.0
    return hh * after


def _residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return normalize(np.maximum(p - q, 0.0), p)


def _outcomes(probs, rows) -> list[Outcome]:
    return [Outcome(float(pr), k, d) for k, (pr, d) in enumerate(zip(probs, rows)) if pr > 0]


def _stop_law(h: np.ndarray) -> np.ndarray:
    return _stop_law_batch(np.asarray(h, dtype=np.float64)[None])[0]


# --------------------------------------------------------------------------- token level
def _token_batch(drafts, p, q):
    """Token-level speculative sampling (Leviathan et al., arXiv 2211.17192; Chen et al., arXiv 2302.01318).

    a_k = min(1, p_{k-1}(x_k) / q_{k-1}(x_k));  P(tau = i) = (prod_{k<=i} a_k)(1 - a_{i+1}) with
    residual norm((p_i - q_i)_+);  P(tau = L) = prod_k a_k with bonus row p_L.  On i.i.d. rows
    E[tau] = sum_{i=1}^{L} alpha^i with alpha = sum_v min(p_v, q_v).

    Returns: ``(P(tau = k) [N, L+1], law of the emitted token given tau = k [N, L+1, V])``; the
    verifier's per-draft ``law`` is this at N = 1.

    >>> from specsim import check_lossless, iid
    >>> from specsim.verifiers import token
    >>> cert = check_lossless(token, iid([1/3, 2/3]), iid([2/3, 1/3]), L=2)   # §12 toy pair
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 1.111111)
    """
    L = drafts.shape[1]
    a = np.minimum(1.0, _ratio(_drafted(p, drafts), _drafted(q, drafts)))
    res = _normalize_rows(np.maximum(p[:, :L] - q, 0.0), p[:, :L])
    return _chain_stop(a), np.concatenate([res, p[:, L:]], axis=1)


def _token_sample(draft, p, q, rng):
    for i, t in enumerate(draft):
        if not rng.random() * q[i, t] < p[i, t]:
            return i, draw_token(_residual(p[i], q[i]), rng)
    return len(draft), draw_token(p[-1], rng)


token = chain_verifier("token", batched=True, sampler=_token_sample)(_token_batch)


# --------------------------------------------------------------------------- sample and match
def _onehot_batch(drafts, p, q):
    """Sample-and-match for deterministic drafts (EAGLE's evaluate_posterior; docs/theory.md §3.2).

    Accept x_k with probability p_{k-1}(x_k); on rejection emit from p_{k-1} with x_k removed and
    renormalised.  Lossless for any drafter because the test ignores q.

    Returns: ``(P(tau = k) [N, L+1], law of the emitted token given tau = k [N, L+1, V])``; the
    verifier's per-draft ``law`` is this at N = 1.

    >>> from specsim import check_lossless, iid
    >>> from specsim.verifiers import onehot
    >>> cert = check_lossless(onehot, iid([1/3, 2/3]), iid([2/3, 1/3]), L=2)   # §12 toy pair
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 0.641975)
    """
    L = drafts.shape[1]
    a = _drafted(p, drafts)
    removed = p[:, :L].copy()
    np.put_along_axis(removed, drafts[..., None], 0.0, axis=2)
    return _chain_stop(a), np.concatenate([_normalize_rows(removed, p[:, :L]), p[:, L:]], axis=1)


def _onehot_sample(draft, p, q, rng):
    for i, t in enumerate(draft):
        y = draw_token(p[i], rng)
        if y != t:
            return i, y
    return len(draft), draw_token(p[-1], rng)


onehot = chain_verifier("onehot", batched=True, sampler=_onehot_sample)(_onehot_batch)


# --------------------------------------------------------------------------- block verification
def _next_weight(w: np.ndarray, r: np.ndarray) -> np.ndarray:
    """w_{i+1} = min(1, w_i r_i), kept 0 where w_i or r_i is 0 (0 * inf stays 0)."""
    with np.errstate(invalid="ignore"):
        return np.where((w > 0) & (r > 0), np.minimum(1.0, w * r), 0.0)


def _row_sums(x: np.ndarray) -> np.ndarray:
    """Sums over the last axis for the level-wise law: ndarray.sum reduces a short contiguous
    axis one row at a time (35x slower than adding the columns at V = 4, 16384 rows; einsum is
    4x faster at V = 16).  The rounding may differ from sum's by an ulp."""
    if x.shape[-1] > 8:
        return np.einsum("...v->...", x)
    s = x[..., 0].copy()
    for j in range(1, x.shape[-1]):
        s += x[..., j]
    return s


def _block_level(w: np.ndarray, p: np.ndarray, q: np.ndarray, row_sums=None):
    """One level of block verification for rows p, q [..., V] and weights w [...]: the excess
    (w p - q)_+ [..., V], the stop probability h = Z / sum (q - w p)_+ (1 when that deficit is
    0) and Z, the excess's sum (``row_sums``, default ``ndarray.sum`` over the last axis).
    Z + 1 - w equals the deficit exactly; summing the deficit directly avoids the cancellation
    of 1 - w when w rounds to 1 and Z is tiny."""
    diff = w[..., None] * p - q
    excess = np.maximum(diff, 0.0)
    row_sums = row_sums or (lambda x: x.sum(axis=-1))
    Z = row_sums(excess)
    deficit = row_sums(np.maximum(-diff, 0.0))
    return excess, np.where(deficit > 0, np.minimum(1.0, Z / np.where(deficit > 0, deficit, 1.0)), 1.0), Z


def _block_parts(drafts, p, q):
    """Weights w [N, L+1], stop probabilities h [N, L+1] (h_0 unused) and residuals [N, L, V]."""
    N, L = drafts.shape
    r = _ratio(_drafted(p, drafts), _drafted(q, drafts))
    w = np.ones((N, L + 1))
    for i in range(L):
        w[:, i + 1] = _next_weight(w[:, i], r[:, i])
    excess, h, _ = _block_level(w[:, :L], p[:, :L], q)
    h[:, :1] = 1.0  # h_0 is unused (an empty draft has no level: h is w_0 alone)
    h = np.concatenate([h, w[:, L:]], axis=1)
    return w, h, _normalize_rows(excess, p[:, :L])


#: Levels of block verification's process law are stacked while their rows total at most this.
_STACK_ROWS = 4096
#: Tables of at most this many rows go through the compiled law (specsim._jit) when numba is
#: there.  Its gain is the numpy law's per-call overhead, which larger tables amortise, while the
#: stacked copy it reads (Model.stacked_table, cached) doubles the tables' memory.
_JIT_ROWS = 1 << 20


def _stacked(arrays):
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _block_process_law(drafting, target, draft_model, L: int, emitted, depth_mass) -> int | None:
    """Block verification's output law on the chain process, level by level over prefixes (the
    engine's fast path; the per-draft ``batch_law`` is its reference).

    w, h and the residual of a prefix s depend on s alone, so they are computed once per prefix
    (arrays [V^i] and [V^i, V] per level i) instead of once per draft through s.  The stop law
    P(tau = i | x) = h_i prod_{j>i} (1 - h_j) is summed backwards over the drafts through s:
    G_L(s) = Q(s), G_i(s) = sum_t G_{i+1}(s t) (1 - h_{i+1}(s t)), so the mass stopping at s is
    h_i(s) G_i(s) (h_0 = 1, h_L = w_L) and O(s y) = h_i(s) G_i(s) d_i(s)(y).  The same terms as
    the per-draft sum, associated differently (agreement to rounding, ~1e-16).

    Returns: the number of drafts with Q > 0 (as the per-draft path counts them), or None off
    the chain process."""
    if not isinstance(drafting, Chain):
        return None
    V = target.V
    if _jit.enabled() and (V ** (L + 1) - 1) // (V - 1) <= _JIT_ROWS:
        from ._chain_kernels import block_process_law
        flat = flat_law(emitted)  # the engine's law is one buffer: the kernel adds into it in place
        bounds = law_bounds(V, L)
        into = np.zeros(bounds[-1][1]) if flat is None else flat
        mass, n = block_process_law(target.stacked_table(L), draft_model.stacked_table(L - 1), _level_starts(V, L),
                                    L, V, into)
        depth_mass += mass
        if flat is None:  # a caller's own arrays
            for m, (a, b) in enumerate(bounds, 1):
                emitted[m] += into[a:b]
        return int(n)
    ptab, qtab = target.table(L), draft_model.table(L - 1)
    # The row-wise steps run once per group of levels stacked, not once per level: the same
    # elementwise and row operations, so the same bits, in fewer numpy calls (at V = 4 the
    # per-call overhead of ~50 calls a level dominated).  Only levels totalling <= _STACK_ROWS
    # rows are grouped: stacking the large ones costs copies and saves nothing.
    sizes = [V ** i for i in range(L)]
    n_small = max(1, sum(1 for i in range(L) if sum(sizes[:i + 1]) <= _STACK_ROWS))
    w, Q, groups = np.ones(1), np.ones(1), []
    for g in [range(n_small)] + [range(i, i + 1) for i in range(n_small, L)]:
        P, Qd = _stacked(ptab[g.start:g.stop]), _stacked(qtab[g.start:g.stop])
        R, ws, at = _ratio(P, Qd), [], np.cumsum([0] + sizes[g.start:g.stop])
        for i in g:
            ws.append(w)
            w = _next_weight(np.repeat(w, V), R[at[i - g.start]:at[i - g.start + 1]].ravel())  # s t at s V + t
            Q = (Q[:, None] * qtab[i]).ravel()
        excess, h, Z = _block_level(_stacked(ws), P, Qd, _row_sums)
        if g.start == 0:
            h[0] = 1.0  # h_0 = 1: an empty draft has no level
        groups.append((g, at, P, excess, h, Z))
    G, h_next = Q, w
    stop = w * G
    depth_mass[L] += stop.sum()
    emitted[L + 1] += (stop[:, None] * ptab[L]).ravel()
    for g, at, P, excess, h, Z in reversed(groups):
        Gs = []
        for i in reversed(g):
            G = _row_sums((G * (1.0 - h_next)).reshape(-1, V))
            Gs.append(G)
            h_next = h[at[i - g.start]:at[i - g.start + 1]]
        stop = h * _stacked(Gs[::-1])
        # stop x the residual norm((w p - q)_+), or x p_i where the excess is 0 (_normalize_rows'
        # fallback), without materialising the normalised rows
        out = (np.where(Z > 0, stop, 0.0) / np.where(Z > 0, Z, 1.0))[:, None] * excess
        empty = np.flatnonzero((Z <= 0) & (stop != 0))
        if empty.size:
            out[empty] += stop[empty, None] * P[empty]
        for i, a, b in zip(g, at[:-1], at[1:]):
            depth_mass[i] += stop[a:b].sum()
            emitted[i + 1] += out[a:b].ravel()
    return int(np.count_nonzero(Q > 0))


def block_weights(draft, p, q):
    """Block verification's w_0..w_L, stop probabilities h (h_0 unused, = 1) and residual rows.

    w_0 = 1, w_i = min(1, w_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i));  Z_i = sum_v (w_i p_i - q_i)_+;
    h_i = Z_i / (Z_i + 1 - w_i) = Z_i / sum_v (q_i - w_i p_i)_+ for i < L (1 when the denominator
    is 0; the second form is the one computed, as it is free of cancellation), h_L = w_L;
    residual_i = norm((w_i p_i - q_i)_+) (Sun et al., arXiv 2403.10444).

    Parameters: ``draft``, ``p`` [L+1, V], ``q`` [L, V] in the chain protocol (trusted: not validated).

    Returns: ``(w [L+1], h [L+1], residuals)``, the residuals a list of L rows [V].

    >>> import numpy as np
    >>> p, q = np.array([[1/3, 2/3]] * 3), np.array([[2/3, 1/3]] * 2)   # docs/theory.md §4 toy table
    >>> w, h, res = block_weights((0, 0), p, q)
    >>> w.round(6).tolist(), h.round(6).tolist(), res[0].round(6).tolist()
    ([1.0, 0.5, 0.25], [1.0, 0.0, 0.25], [0.0, 1.0])
    """
    w, h, res = _block_parts(np.asarray(draft, dtype=np.int64)[None], p[None], q[None])
    return w[0], h[0], list(res[0])


def _block_batch(drafts, p, q):
    """Block verification (Sun, Mendlovic, Leviathan et al., "Block Verification Accelerates
    Speculative Decoding", arXiv 2403.10444, ICLR 2025).

    With w, h and residuals from :func:`block_weights`: P(tau = L) = w_L;
    P(tau = i) = h_i prod_{j>i}(1 - h_j) for 1 <= i < L; P(tau = 0) = prod_j (1 - h_j).
    Emit norm((w_tau p_tau - q_tau)_+) if tau < L, else p_L.  Optimal among lossless verifiers
    with this output format (it equals the LP optimum of docs/theory.md §5).

    Returns: ``(P(tau = k) [N, L+1], law of the emitted token given tau = k [N, L+1, V])``; the
    verifier's per-draft ``law`` is this at N = 1.

    >>> from specsim import check_lossless, iid
    >>> from specsim.verifiers import block
    >>> cert = check_lossless(block, iid([1/3, 2/3]), iid([2/3, 1/3]), L=2)   # §12 toy pair
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 1.222222)
    """
    L = drafts.shape[1]
    w, h, res = _block_parts(drafts, p, q)
    return _stop_law_batch(h), np.concatenate([res, p[:, L:]], axis=1)


def _block_sample(draft, p, q, rng):
    w, h, res = block_weights(draft, p, q)
    L = len(draft)
    passing = np.flatnonzero(rng.random(L) < h[1:])  # eta_i < h_i; keep the largest passing index
    tau = int(passing[-1]) + 1 if passing.size else 0
    return tau, draw_token(p[L] if tau == L else res[tau], rng)


block = chain_verifier("block", batched=True, sampler=_block_sample, process_law=_block_process_law)(_block_batch)


# --------------------------------------------------------------------------- greedy (T = 0)
def _greedy_batch(drafts, p, q):
    """Greedy verification: accept x_k iff x_k = argmax p_{k-1} (ties to the lowest id); at the first
    mismatch emit argmax p_{k-1}; if all match emit argmax p_L.

    Lossless only when every target row is one-hot (temperature 0); on stochastic targets it is a
    deterministic, lossy rule and serves as a negative control.

    Returns: ``(P(tau = k) [N, L+1], law of the emitted token given tau = k [N, L+1, V])``; the
    verifier's per-draft ``law`` is this at N = 1.

    >>> from specsim import check_lossless, iid
    >>> from specsim.verifiers import greedy
    >>> cert = check_lossless(greedy, iid([1/3, 2/3]), iid([2/3, 1/3]), L=2)   # §12 toy pair
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (False, 0.444444)
    """
    N, L = drafts.shape
    best = np.argmax(p, axis=2)
    a = (drafts == best[:, :L]).astype(np.float64)
    dists = np.zeros_like(p)
    np.put_along_axis(dists, best[..., None], 1.0, axis=2)
    return _chain_stop(a), dists


greedy = chain_verifier("greedy", batched=True, lossless=False)(_greedy_batch)


# --------------------------------------------------------------------------- hierarchical (HSD)
def _hsd_batch(drafts, p, q, capped: bool):
    # The joint ratios r_k = P_k / Q_k over- and underflow when q is subnormal, so they are kept
    # as logarithms; d_k is used divided by Q_k > 0 (h_k and the residual are scale-free):
    # d_k / Q_k = (r_k / M_k) p_k - q_k.
    N, L = drafts.shape
    zeros = np.zeros((N, 1))
    with np.errstate(divide="ignore"):  # log 0 = -inf: a drafted token the target refuses
        log_r = np.concatenate([zeros, np.cumsum(np.log(_drafted(p, drafts)) - np.log(_drafted(q, drafts)),
                                                 axis=1)], axis=1)
    log_M = np.maximum.accumulate(np.maximum(log_r, 0.0), axis=1)  # M_k = max(1, r_1..r_k)
    d = np.exp(log_r[:, :L] - log_M[:, :L])[..., None] * p[:, :L] - q
    pos, neg = np.maximum(d, 0.0).sum(axis=2), np.maximum(-d, 0.0).sum(axis=2)
    big = np.maximum(pos, neg)
    h = np.ones((N, L + 1))
    h[:, 1:L] = np.where(big[:, 1:] > 0, pos[:, 1:] / np.where(big[:, 1:] > 0, big[:, 1:], 1.0), 1.0)
    h[:, L] = np.exp(np.minimum(0.0, log_r[:, L] - (log_M[:, L - 1] if capped else 0.0)))
    res = _normalize_rows(np.maximum(d, 0.0), p[:, :L])
    return _stop_law_batch(h), np.concatenate([res, p[:, L:]], axis=1)


def _hsd_released_batch(drafts, p, q):
    """Hierarchical speculative decoding as released (Zhou et al., "Overcoming Joint Intractability
    with Lossless Hierarchical Speculative Decoding", arXiv 2601.05724; public code).

    Joint prefix ratios r_k = P_k / Q_k, M_k = max(1, r_1..r_k), d_k = (P_k / M_k) p_k - Q_k q_k,
    s_k = sum d_k^+ / max(sum d_k^+, sum d_k^-).  Accept the whole draft with min(1, r_L)
    (**uncapped**); otherwise tau = the largest k < L without a step-back (probability 1 - s_k),
    emitting norm(d_tau^+).  LOSSY: a documented negative control (docs/theory.md §7).

    Returns: ``(P(tau = k) [N, L+1], law of the emitted token given tau = k [N, L+1, V])``; the
    verifier's per-draft ``law`` is this at N = 1.

    >>> from specsim import check_lossless, iid
    >>> from specsim.verifiers import hsd_released
    >>> cert = check_lossless(hsd_released, iid([1/3, 2/3]), iid([2/3, 1/3]), L=2)   # §12 toy pair
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (False, 1.333333)
    """
    return _hsd_batch(drafts, p, q, capped=False)


def _hsd_capped_batch(drafts, p, q):
    """Hierarchical speculative decoding with the capped final ratio min(1, r_L / M_{L-1}) (the
    paper's Eq. 19, arXiv 2601.05724).  Algebraically block verification; tests compare them.

    Returns: ``(P(tau = k) [N, L+1], law of the emitted token given tau = k [N, L+1, V])``; the
    verifier's per-draft ``law`` is this at N = 1.

    >>> from specsim import check_lossless, iid
    >>> from specsim.verifiers import hsd_capped
    >>> cert = check_lossless(hsd_capped, iid([1/3, 2/3]), iid([2/3, 1/3]), L=2)   # §12 toy pair
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 1.222222)
    """
    return _hsd_batch(drafts, p, q, capped=True)


hsd_released = chain_verifier("hsd_released", batched=True, lossless=False)(_hsd_released_batch)
hsd_capped = chain_verifier("hsd_capped", batched=True)(_hsd_capped_batch)

#: The chain verifiers, by name, in the order tables list them.
CHAIN_VERIFIERS = {v.name: v for v in (token, onehot, block, hsd_capped, hsd_released, greedy)}
