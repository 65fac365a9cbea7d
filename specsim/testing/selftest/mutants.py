"""A mutation suite for chain verifiers: realistic faulty variants and lossless controls.

Each mutant is a chain :class:`~specsim.verifiers.base.Verifier` whose exact law reproduces a bug
seen (or easy to make) in real speculative-decoding implementations.  A losslessness checker is
only trustworthy if it flags every entry of :data:`CHAIN_MUTANTS` and passes every entry of
:data:`LOSSLESS_CONTROLS` (independent re-implementations of lossless rules).  Some faults only
show with V >= 3 or with rows that change along the draft; the docstrings say what exposes them.

>>> from specsim import check_lossless, random_model
>>> target, draft_model = random_model(3, 21, 0.7), random_model(3, 1021, 0.7)
>>> check_lossless(CHAIN_MUTANTS["reused_uniform"], target, draft_model, 3).lossless
False
>>> check_lossless(LOSSLESS_CONTROLS["block_forward"], target, draft_model, 3).lossless
True
"""
from __future__ import annotations

import numpy as np

from ..._validate import normalize
from ...verifiers.base import Outcome, chain_verifier
from ...verifiers.chain import _outcomes, _residual, _stop_law, block, block_weights, hsd_capped, onehot, token

__all__ = ["CHAIN_MUTANTS", "LOSSLESS_CONTROLS"]


def _token_like(draft, p, q, accept, residual, bonus=None):
    """Law of 'accept x_i with accept(i), else emit residual(i)'; bonus row defaults to p[L]."""
    L = len(draft)
    a = np.array([accept(i, t) for i, t in enumerate(draft)])
    reach = np.concatenate(([1.0], np.cumprod(a)))
    probs = [reach[i] * (1 - a[i]) for i in range(L)] + [reach[L]]
    rows = [residual(i) for i in range(L)] + [p[L] if bonus is None else bonus]
    return _outcomes(probs, rows)


def _ratio(p, q):
    return min(1.0, p / q) if q > 0 else 1.0


@chain_verifier("residual_from_target", lossless=False)
def residual_from_target(draft, p, q):
    """On rejection resample from p_i itself instead of norm((p_i - q_i)_+)."""
    return _token_like(draft, p, q, lambda i, t: _ratio(p[i, t], q[i, t]), lambda i: p[i])


@chain_verifier("residual_next_row", lossless=False)
def residual_next_row(draft, p, q):
    """Residual built from the next position's row p_{i+1} (off-by-one row)."""
    return _token_like(draft, p, q, lambda i, t: _ratio(p[i, t], q[i, t]),
                       lambda i: _residual(p[i + 1], q[i]))


@chain_verifier("inverted_residual", lossless=False)
def inverted_residual(draft, p, q):
    """Residual norm((q_i - p_i)_+): draft and target swapped in the residual."""
    return _token_like(draft, p, q, lambda i, t: _ratio(p[i, t], q[i, t]),
                       lambda i: normalize(np.maximum(q[i] - p[i], 0.0), p[i]))


@chain_verifier("inverted_ratio", lossless=False)
def inverted_ratio(draft, p, q):
    """Accept with min(1, q/p) instead of min(1, p/q)."""
    return _token_like(draft, p, q, lambda i, t: min(1.0, q[i, t] / p[i, t]) if p[i, t] > 0 else 0.0,
                       lambda i: _residual(p[i], q[i]))


@chain_verifier("bonus_wrong_row", lossless=False)
def bonus_wrong_row(draft, p, q):
    """Bonus token drawn from p_{L-1} (the last verifying row) instead of p_L."""
    return _token_like(draft, p, q, lambda i, t: _ratio(p[i, t], q[i, t]),
                       lambda i: _residual(p[i], q[i]), bonus=p[len(draft) - 1])


@chain_verifier("accept_wrong_row", lossless=False)
def accept_wrong_row(draft, p, q):
    """Acceptance ratio uses p_{i+1}(x_i): target rows shifted by one position."""
    return _token_like(draft, p, q, lambda i, t: _ratio(p[i + 1, t], q[i, t]),
                       lambda i: _residual(p[i + 1], q[i]))


def _reused_uniform_residual(R: np.ndarray, a: float) -> np.ndarray:
    """Law of inverse_cdf(R, u) when u ~ U[a, 1): the rejecting uniform reused for the residual."""
    if a >= 1.0:
        return R
    c = np.concatenate(([0.0], np.cumsum(R)))
    lo, hi = np.maximum(c[:-1], a), np.minimum(c[1:], 1.0)
    return normalize(np.maximum(hi - lo, 0.0), R)


@chain_verifier("reused_uniform", lossless=False)
def reused_uniform(draft, p, q):
    """The uniform that rejected x_i is reused to sample the residual by inverse CDF, so the
    residual is drawn only from its upper CDF segment."""
    acc = lambda i, t: _ratio(p[i, t], q[i, t])
    return _token_like(draft, p, q, acc,
                       lambda i: _reused_uniform_residual(_residual(p[i], q[i]), acc(i, draft[i])))


@chain_verifier("wrong_draft_temperature", lossless=False)
def wrong_draft_temperature(draft, p, q):
    """Acceptance and residual use the draft law at temperature 2, not the law the drafts were
    sampled from (q processed differently from sampling)."""
    qq = np.sqrt(q)
    qq /= qq.sum(axis=1, keepdims=True)
    return _token_like(draft, p, qq, lambda i, t: _ratio(p[i, t], qq[i, t]), lambda i: _residual(p[i], qq[i]))


@chain_verifier("onehot_no_removal", lossless=False)
def onehot_no_removal(draft, p, q):
    """Sample-and-match that resamples from p_i without removing the rejected x_i."""
    return _token_like(draft, p, q, lambda i, t: p[i, t], lambda i: p[i])


@chain_verifier("block_first_failure", lossless=False)
def block_first_failure(draft, p, q):
    """Block verification stopping at the first failing index instead of keeping the largest
    passing index."""
    w, h, res = block_weights(draft, p, q)
    L = len(draft)
    probs = np.zeros(L + 1)
    reach = 1.0
    for i in range(1, L + 1):
        probs[i - 1] += reach * (1 - h[i])
        reach *= h[i]
    probs[L] += reach
    return _outcomes(probs, res + [p[L]])


@chain_verifier("block_token_residual", lossless=False)
def block_token_residual(draft, p, q):
    """Block verification emitting the token-level residual norm((p - q)_+) instead of norm((w_tau
    p_tau - q_tau)_+)."""
    w, h, _ = block_weights(draft, p, q)
    L = len(draft)
    return _outcomes(_stop_law(h), [_residual(p[i], q[i]) for i in range(L)] + [p[L]])


@chain_verifier("block_uncapped_weights", lossless=False)
def block_uncapped_weights(draft, p, q):
    """Block verification with uncapped weights w_i = r_i (joint ratio without the running-max
    normalisation), h_L = min(1, r_L)."""
    L = len(draft)
    r = np.concatenate(([1.0], np.cumprod([p[i, t] / q[i, t] for i, t in enumerate(draft)])))
    h = np.ones(L + 1)
    res = []
    for i in range(L):
        ex = np.maximum(r[i] * p[i] - q[i], 0.0) if i > 0 else np.maximum(p[i] - q[i], 0.0)
        Z = ex.sum()
        if i > 0:
            den = Z + 1.0 - min(1.0, r[i])
            h[i] = min(1.0, Z / den) if den > 0 else 1.0
        res.append(normalize(ex, p[i]))
    h[L] = min(1.0, r[L])
    return _outcomes(_stop_law(h), res + [p[L]])


def _token_logspace(draft, p, q):
    """Token-level speculative sampling with ratios from log-probabilities (a re-implementation)."""
    with np.errstate(divide="ignore"):
        lp, lq = np.log(p), np.log(q)
    return _token_like(draft, p, q, lambda i, t: float(np.exp(min(0.0, lp[i, t] - lq[i, t]))),
                       lambda i: normalize(np.maximum(p[i] - q[i], 0.0), p[i]))


def _block_forward(draft, p, q):
    """Block verification by a forward pass over 'largest passing index' (a re-implementation)."""
    w, h, res = block_weights(draft, p, q)
    L = len(draft)
    # P(tau >= i) = sum_{j >= i} P(tau = j); P(tau = j) = h_j * P(no pass above j)
    no_pass_above = np.ones(L + 2)
    for j in range(L, 0, -1):
        no_pass_above[j] = no_pass_above[j + 1] * (1 - h[j])
    probs = [no_pass_above[1]] + [h[j] * no_pass_above[j + 1] for j in range(1, L + 1)]
    return [Outcome(float(pr), k, d) for k, (pr, d) in enumerate(zip(probs, res + [p[L]])) if pr > 0]


#: Faulty chain verifiers a losslessness checker must flag (name -> Verifier).
CHAIN_MUTANTS = {v.name: v for v in (
    residual_from_target, residual_next_row, inverted_residual, inverted_ratio, bonus_wrong_row,
    accept_wrong_row, reused_uniform, wrong_draft_temperature, onehot_no_removal, block_first_failure,
    block_token_residual, block_uncapped_weights)}

#: Lossless chain verifiers (the package's and independent re-implementations) a checker must pass.
LOSSLESS_CONTROLS = {v.name: v for v in (
    token, block, onehot, hsd_capped,
    chain_verifier("token_logspace")(_token_logspace), chain_verifier("block_forward")(_block_forward))}

#: Drafting rules that change the output law although every verifier above is applied as written
#: (docs/theory.md §14.2): a drawn token dropped because of its value (grammar truncation), and
#: SpecDec++'s oracle applied one token late (the token that crosses the threshold is dropped
#: after its target row was read).  Certify with specsim.structure.check_policy_lossless.
from ...structure.policies import drop_on_target, grammar_truncation  # noqa: E402

POLICY_MUTANTS = {d.name.split(":")[0]: d for d in (grammar_truncation(), drop_on_target(0.5))}
__all__ += ["POLICY_MUTANTS"]
