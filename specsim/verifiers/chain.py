"""Chain verifiers: one draft path of L tokens, rows indexed by prefix length (docs/theory.md §1-4, 7).

Each rule is written once, vectorised over a batch of N drafts (``batch_law``: drafts [N, L],
p [N, L+1, V], q [N, L, V] -> P(tau = k) [N, L+1] and the emitted token's law [N, L+1, V]); the
per-draft exact law (``law``, the protocol) is that function at N = 1.  ``sampler`` runs the
algorithm itself with explicit uniforms (strict ``u < a`` convention, docs/theory.md §11.3), so
sampling and exact law are independent implementations that tests compare.
"""
from __future__ import annotations

import numpy as np

from .._validate import normalize
from .base import Outcome, Verifier

__all__ = ["token", "onehot", "block", "greedy", "hsd_released", "hsd_capped", "CHAIN_VERIFIERS",
           "block_weights", "law_from_batch"]


# --------------------------------------------------------------------------- shared helpers
def _drafted(rows: np.ndarray, drafts: np.ndarray) -> np.ndarray:
    """rows[n, i, drafts[n, i]] for i < L."""
    return np.take_along_axis(rows[:, : drafts.shape[1]], drafts[..., None], axis=2)[..., 0]


def _ratio(pd: np.ndarray, qd: np.ndarray) -> np.ndarray:
    """p/q for drafted tokens; q = 0 is a contract violation: +inf if p > 0, else 0 (docs/theory.md §3)."""
    safe = np.where(qd > 0, qd, 1.0)
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


def law_from_batch(batch, draft, p, q) -> list[Outcome]:
    """The protocol's outcome list for one draft from a batched law (outcomes of probability 0 dropped)."""
    probs, dists = batch(np.asarray(draft, dtype=np.int64)[None], p[None], q[None])
    return [Outcome(float(pr), k, d) for k, (pr, d) in enumerate(zip(probs[0], dists[0])) if pr > 0]


def _verifier(name: str, batch, sampler, lossless: bool) -> Verifier:
    return Verifier(name, lambda draft, p, q: law_from_batch(batch, draft, p, q), "chain", sampler, lossless,
                    (batch.__doc__ or "").strip(), batch)


def _draw(dist: np.ndarray, rng: np.random.Generator) -> int:
    """Inverse CDF with a fresh uniform, never returning a zero-probability token."""
    c = np.cumsum(dist)
    i = int(np.searchsorted(c, rng.random() * c[-1], side="right"))
    return min(i, int(np.flatnonzero(dist > 0)[-1]))


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
    residual norm((p_i - q_i)_+);  P(tau = L) = prod_k a_k with bonus row p_L.
    """
    L = drafts.shape[1]
    a = np.minimum(1.0, _ratio(_drafted(p, drafts), _drafted(q, drafts)))
    res = _normalize_rows(np.maximum(p[:, :L] - q, 0.0), p[:, :L])
    return _chain_stop(a), np.concatenate([res, p[:, L:]], axis=1)


def _token_sample(draft, p, q, rng):
    for i, t in enumerate(draft):
        if not rng.random() * q[i, t] < p[i, t]:
            return i, _draw(_residual(p[i], q[i]), rng)
    return len(draft), _draw(p[-1], rng)


token = _verifier("token", _token_batch, _token_sample, True)


# --------------------------------------------------------------------------- sample and match
def _onehot_batch(drafts, p, q):
    """Sample-and-match for deterministic drafts (EAGLE's evaluate_posterior; docs/theory.md §3.2).

    Accept x_k with probability p_{k-1}(x_k); on rejection emit from p_{k-1} with x_k removed and
    renormalised.  Lossless for any drafter because the test ignores q.
    """
    L = drafts.shape[1]
    a = _drafted(p, drafts)
    removed = p[:, :L].copy()
    np.put_along_axis(removed, drafts[..., None], 0.0, axis=2)
    return _chain_stop(a), np.concatenate([_normalize_rows(removed, p[:, :L]), p[:, L:]], axis=1)


def _onehot_sample(draft, p, q, rng):
    for i, t in enumerate(draft):
        y = _draw(p[i], rng)
        if y != t:
            return i, y
    return len(draft), _draw(p[-1], rng)


onehot = _verifier("onehot", _onehot_batch, _onehot_sample, True)


# --------------------------------------------------------------------------- block verification
def _block_parts(drafts, p, q):
    """Weights w [N, L+1], stop probabilities h [N, L+1] (h_0 unused) and residuals [N, L, V]."""
    N, L = drafts.shape
    r = _ratio(_drafted(p, drafts), _drafted(q, drafts))
    w = np.ones((N, L + 1))
    for i in range(L):
        with np.errstate(invalid="ignore"):  # 0 * inf: a zero weight stays zero
            w[:, i + 1] = np.where((w[:, i] > 0) & (r[:, i] > 0), np.minimum(1.0, w[:, i] * r[:, i]), 0.0)
    diff = w[:, :L, None] * p[:, :L] - q
    excess = np.maximum(diff, 0.0)
    Z = excess.sum(axis=2)
    # Z + 1 - w = sum (q - w p)_+ exactly; summing the deficit directly avoids the cancellation
    # of 1 - w when w rounds to 1 and Z is tiny.
    deficit = np.maximum(-diff[:, 1:], 0.0).sum(axis=2)
    h = np.ones((N, L + 1))
    h[:, 1:L] = np.where(deficit > 0, np.minimum(1.0, Z[:, 1:] / np.where(deficit > 0, deficit, 1.0)), 1.0)
    h[:, L] = w[:, L]
    return w, h, _normalize_rows(excess, p[:, :L])


def block_weights(draft, p, q):
    """Block verification's w_0..w_L, stop probabilities h (h_0 unused, = 1) and residual rows.

    w_0 = 1, w_i = min(1, w_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i));  Z_i = sum_v (w_i p_i - q_i)_+;
    h_i = Z_i / (Z_i + 1 - w_i) = Z_i / sum_v (q_i - w_i p_i)_+ for i < L (1 when the denominator
    is 0; the second form is the one computed, as it is free of cancellation), h_L = w_L;
    residual_i = norm((w_i p_i - q_i)_+) (Sun et al., arXiv 2403.10444).
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
    """
    L = drafts.shape[1]
    w, h, res = _block_parts(drafts, p, q)
    return _stop_law_batch(h), np.concatenate([res, p[:, L:]], axis=1)


def _block_sample(draft, p, q, rng):
    w, h, res = block_weights(draft, p, q)
    L = len(draft)
    passing = np.flatnonzero(rng.random(L) < h[1:])  # eta_i < h_i; keep the largest passing index
    tau = int(passing[-1]) + 1 if passing.size else 0
    return tau, _draw(p[L] if tau == L else res[tau], rng)


block = _verifier("block", _block_batch, _block_sample, True)


# --------------------------------------------------------------------------- greedy (T = 0)
def _greedy_batch(drafts, p, q):
    """Greedy verification: accept x_k iff x_k = argmax p_{k-1} (ties to the lowest id); at the first
    mismatch emit argmax p_{k-1}; if all match emit argmax p_L.

    Lossless only when every target row is one-hot (temperature 0); on stochastic targets it is a
    deterministic, lossy rule and serves as a negative control.
    """
    N, L = drafts.shape
    best = np.argmax(p, axis=2)
    a = (drafts == best[:, :L]).astype(np.float64)
    dists = np.zeros_like(p)
    np.put_along_axis(dists, best[..., None], 1.0, axis=2)
    return _chain_stop(a), dists


greedy = _verifier("greedy", _greedy_batch, None, False)


# --------------------------------------------------------------------------- hierarchical (HSD)
def _hsd_batch(drafts, p, q, capped: bool):
    N, L = drafts.shape
    ones = np.ones((N, 1))
    P = np.concatenate([ones, np.cumprod(_drafted(p, drafts), axis=1)], axis=1)
    Q = np.concatenate([ones, np.cumprod(_drafted(q, drafts), axis=1)], axis=1)
    r = P / Q
    M = np.maximum.accumulate(np.maximum(r, 1.0), axis=1)  # M_k = max(1, r_1..r_k)
    d = (P[:, :L] / M[:, :L])[..., None] * p[:, :L] - Q[:, :L, None] * q
    pos, neg = np.maximum(d, 0.0).sum(axis=2), np.maximum(-d, 0.0).sum(axis=2)
    big = np.maximum(pos, neg)
    h = np.ones((N, L + 1))
    h[:, 1:L] = np.where(big[:, 1:] > 0, pos[:, 1:] / np.where(big[:, 1:] > 0, big[:, 1:], 1.0), 1.0)
    h[:, L] = np.minimum(1.0, r[:, L] / M[:, L - 1]) if capped else np.minimum(1.0, r[:, L])
    res = _normalize_rows(np.maximum(d, 0.0), p[:, :L])
    return _stop_law_batch(h), np.concatenate([res, p[:, L:]], axis=1)


def _hsd_released_batch(drafts, p, q):
    """Hierarchical speculative decoding as released (Zhou et al., "Overcoming Joint Intractability
    with Lossless Hierarchical Speculative Decoding", arXiv 2601.05724; public code).

    Joint prefix ratios r_k = P_k / Q_k, M_k = max(1, r_1..r_k), d_k = (P_k / M_k) p_k - Q_k q_k,
    s_k = sum d_k^+ / max(sum d_k^+, sum d_k^-).  Accept the whole draft with min(1, r_L)
    (**uncapped**); otherwise tau = the largest k < L without a step-back (probability 1 - s_k),
    emitting norm(d_tau^+).  LOSSY: a documented negative control (docs/theory.md §7).
    """
    return _hsd_batch(drafts, p, q, capped=False)


def _hsd_capped_batch(drafts, p, q):
    """Hierarchical speculative decoding with the capped final ratio min(1, r_L / M_{L-1}) (the
    paper's Eq. 19, arXiv 2601.05724).  Algebraically block verification; tests compare them."""
    return _hsd_batch(drafts, p, q, capped=True)


hsd_released = _verifier("hsd_released", _hsd_released_batch, None, False)
hsd_capped = _verifier("hsd_capped", _hsd_capped_batch, None, True)

#: The chain verifiers, by name, in the order tables list them.
CHAIN_VERIFIERS = {v.name: v for v in (token, onehot, block, hsd_capped, hsd_released, greedy)}
