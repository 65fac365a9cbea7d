"""Chain verifiers: one draft path of L tokens, rows indexed by prefix length (THEORY.md 1-4, 7).

Each verifier is a :class:`~specsim.verifiers.base.Verifier` whose ``law`` returns the exact
outcome list and whose ``sampler`` runs the algorithm with explicit uniforms (strict ``u < a``
convention, THEORY.md 11.3).  Outcomes of probability 0 are omitted.
"""
from __future__ import annotations

import numpy as np

from .._validate import normalize
from .base import Outcome, Verifier

__all__ = ["token", "onehot", "block", "greedy", "hsd_released", "hsd_capped", "CHAIN_VERIFIERS",
           "block_weights"]


def _ratio(p: float, q: float) -> float:
    # q = 0 for a drafted token is a contract violation; accept iff p > 0 (THEORY.md 3)
    return np.inf if q <= 0 else p / q


def _residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return normalize(np.maximum(p - q, 0.0), p)


def _draw(dist: np.ndarray, rng: np.random.Generator) -> int:
    # inverse CDF with a fresh uniform; clip guards rounding past the last positive entry
    c = np.cumsum(dist)
    i = int(np.searchsorted(c, rng.random() * c[-1], side="right"))
    return min(i, int(np.flatnonzero(dist > 0)[-1]))


def _outcomes(probs, rows) -> list[Outcome]:
    return [Outcome(float(pr), k, d) for k, (pr, d) in enumerate(zip(probs, rows)) if pr > 0]


# --------------------------------------------------------------------------- token level
def _token_accepts(draft, p, q) -> np.ndarray:
    return np.array([min(1.0, _ratio(p[i, t], q[i, t])) for i, t in enumerate(draft)])


def _token_law(draft, p, q):
    """Token-level speculative sampling (Leviathan et al., arXiv 2211.17192; Chen et al., arXiv 2302.01318).

    a_k = min(1, p_{k-1}(x_k) / q_{k-1}(x_k));  P(tau = i) = (prod_{k<=i} a_k)(1 - a_{i+1}) with
    residual norm((p_i - q_i)_+);  P(tau = L) = prod_k a_k with bonus row p_L.
    """
    a = _token_accepts(draft, p, q)
    L = len(draft)
    reach = np.concatenate(([1.0], np.cumprod(a)))
    probs = [reach[i] * (1 - a[i]) for i in range(L)] + [reach[L]]
    rows = [_residual(p[i], q[i]) for i in range(L)] + [p[L]]
    return _outcomes(probs, rows)


def _token_sample(draft, p, q, rng):
    for i, t in enumerate(draft):
        if not rng.random() * q[i, t] < p[i, t]:
            return i, _draw(_residual(p[i], q[i]), rng)
    return len(draft), _draw(p[-1], rng)


token = Verifier("token", _token_law, "chain", _token_sample, True, _token_law.__doc__.strip())


# --------------------------------------------------------------------------- sample and match
def _without(p: np.ndarray, t: int) -> np.ndarray:
    r = p.copy()
    r[t] = 0.0
    return normalize(r, p)


def _onehot_law(draft, p, q):
    """Sample-and-match for deterministic drafts (EAGLE's evaluate_posterior, THEORY.md 3.2).

    Accept x_k with probability p_{k-1}(x_k); on rejection emit from p_{k-1} with x_k removed and
    renormalised.  Lossless for any drafter because the test ignores q.
    """
    a = np.array([p[i, t] for i, t in enumerate(draft)])
    L = len(draft)
    reach = np.concatenate(([1.0], np.cumprod(a)))
    probs = [reach[i] * (1 - a[i]) for i in range(L)] + [reach[L]]
    rows = [_without(p[i], t) for i, t in enumerate(draft)] + [p[L]]
    return _outcomes(probs, rows)


def _onehot_sample(draft, p, q, rng):
    for i, t in enumerate(draft):
        y = _draw(p[i], rng)
        if y != t:
            return i, y
    return len(draft), _draw(p[-1], rng)


onehot = Verifier("onehot", _onehot_law, "chain", _onehot_sample, True, _onehot_law.__doc__.strip())


# --------------------------------------------------------------------------- block verification
def block_weights(draft, p, q):
    """Block verification's weights w_0..w_L, stop probabilities h_1..h_L and residual rows.

    w_0 = 1, w_i = min(1, w_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i));  Z_i = sum_v (w_i p_i - q_i)_+;
    h_i = Z_i / (Z_i + 1 - w_i) for i < L (1 when the denominator is 0), h_L = w_L;
    residual_i = norm((w_i p_i - q_i)_+) (Sun et al., arXiv 2403.10444, Alg. 2).
    Returns ``(w, h, residuals)`` with ``h[0]`` unused (set to 1).
    """
    L = len(draft)
    w = np.empty(L + 1)
    w[0] = 1.0
    for i, t in enumerate(draft):
        w[i + 1] = min(1.0, w[i] * _ratio(p[i, t], q[i, t])) if w[i] > 0 and p[i, t] > 0 else 0.0
    excess = np.maximum(w[:L, None] * p[:L] - q, 0.0)
    Z = excess.sum(axis=1)
    h = np.ones(L + 1)
    for i in range(1, L):
        den = Z[i] + 1.0 - w[i]
        h[i] = Z[i] / den if den > 0 else 1.0
    h[L] = w[L]
    residuals = [normalize(excess[i], p[i]) for i in range(L)]
    return w, h, residuals


def _stop_law(h: np.ndarray) -> np.ndarray:
    """P(tau = i) = h_i prod_{j>i} (1 - h_j), with h_0 = 1: the largest passing index."""
    L = h.size - 1
    probs = np.empty(L + 1)
    tail = 1.0
    for i in range(L, -1, -1):
        probs[i] = tail * (h[i] if i > 0 else 1.0)
        tail *= 1.0 - h[i] if i > 0 else 1.0
    return probs


def _block_law(draft, p, q):
    """Block verification (Sun, Mendlovic, Leviathan et al., arXiv 2403.10444, ICLR 2025).

    With weights w_i, stop probabilities h_i and residuals from :func:`block_weights`:
    P(tau = L) = w_L; P(tau = i) = h_i prod_{j>i}(1 - h_j) for 1 <= i < L;
    P(tau = 0) = prod_j (1 - h_j).  Emit norm((w_tau p_tau - q_tau)_+) if tau < L, else p_L.
    Optimal among lossless verifiers with this output format (equal to the LP of THEORY.md 5).
    """
    w, h, res = block_weights(draft, p, q)
    return _outcomes(_stop_law(h), res + [p[len(draft)]])


def _block_sample(draft, p, q, rng):
    w, h, res = block_weights(draft, p, q)
    L = len(draft)
    eta = rng.random(L)
    passing = np.flatnonzero(eta < h[1:])
    tau = int(passing[-1]) + 1 if passing.size else 0
    return tau, _draw(p[L] if tau == L else res[tau], rng)


block = Verifier("block", _block_law, "chain", _block_sample, True, _block_law.__doc__.strip())


# --------------------------------------------------------------------------- greedy (T = 0)
def _onehot_row(V: int, t: int) -> np.ndarray:
    r = np.zeros(V)
    r[t] = 1.0
    return r


def _greedy_law(draft, p, q):
    """Greedy verification: accept x_k iff x_k = argmax p_{k-1} (ties to the lowest id); at the first
    mismatch emit argmax p_{k-1}; if all match emit argmax p_L.

    Lossless only when every target row is one-hot (temperature 0); on stochastic targets it is a
    deterministic, lossy rule and serves as a negative control.
    """
    V = p.shape[1]
    for i, t in enumerate(draft):
        best = int(np.argmax(p[i]))
        if t != best:
            return [Outcome(1.0, i, _onehot_row(V, best))]
    return [Outcome(1.0, len(draft), _onehot_row(V, int(np.argmax(p[-1]))))]


greedy = Verifier("greedy", _greedy_law, "chain", None, False, _greedy_law.__doc__.strip())


# --------------------------------------------------------------------------- hierarchical (HSD)
def _hsd_law(draft, p, q, capped: bool):
    L = len(draft)
    P = np.concatenate(([1.0], np.cumprod([p[i, t] for i, t in enumerate(draft)])))
    Q = np.concatenate(([1.0], np.cumprod([q[i, t] for i, t in enumerate(draft)])))
    r = P / Q
    M = np.maximum.accumulate(np.maximum(r, 1.0))  # M_k = max(1, r_1..r_k)
    s = np.ones(L)
    rows = []
    for k in range(L):
        d = (P[k] / M[k]) * p[k] - Q[k] * q[k]
        pos, neg = np.maximum(d, 0.0).sum(), np.maximum(-d, 0.0).sum()
        if k > 0:
            s[k] = pos / max(pos, neg) if max(pos, neg) > 0 else 1.0
        rows.append(normalize(np.maximum(d, 0.0), p[k]))
    accept_all = min(1.0, r[L] / M[L - 1]) if capped else min(1.0, r[L])
    h = np.concatenate(([1.0], s[1:], [accept_all]))
    return _outcomes(_stop_law(h), rows + [p[L]])


def _hsd_released_law(draft, p, q):
    """Hierarchical speculative decoding as released (Zhou et al., arXiv 2601.05724; public code).

    Joint prefix ratios r_k = P_k / Q_k, M_k = max(1, r_1..r_k), d_k = (P_k / M_k) p_k - Q_k q_k,
    s_k = sum d_k^+ / max(sum d_k^+, sum d_k^-).  Accept the whole draft with min(1, r_L)
    (**uncapped**); otherwise tau = the largest k < L without a step-back (probability 1 - s_k),
    emitting norm(d_tau^+).  LOSSY: a documented negative control (THEORY.md 7).
    """
    return _hsd_law(draft, p, q, capped=False)


def _hsd_capped_law(draft, p, q):
    """Hierarchical speculative decoding with the capped final ratio min(1, r_L / M_{L-1}).

    The paper's Eq. 19 form (arXiv 2601.05724); algebraically equal to block verification, which
    the tests check outcome by outcome.
    """
    return _hsd_law(draft, p, q, capped=True)


hsd_released = Verifier("hsd_released", _hsd_released_law, "chain", None, False,
                        _hsd_released_law.__doc__.strip())
hsd_capped = Verifier("hsd_capped", _hsd_capped_law, "chain", None, True, _hsd_capped_law.__doc__.strip())

#: The chain verifiers, by name, in the order tables list them.
CHAIN_VERIFIERS = {v.name: v for v in (token, onehot, block, hsd_capped, hsd_released, greedy)}
