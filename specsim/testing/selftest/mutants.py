"""Mutation suites: realistic faulty verifiers, chain and tree, each in one record with where it is
flagged, and lossless controls.

A losslessness checker is only trustworthy if it flags every mutant and passes every control.
Every entry of the four tables is a :class:`Mutant`: the verifier, the draft process and depth
``L`` at which the exact engine flags it (``check_lossless(m.verifier, target, draft_model,
m.L, m.drafting).lossless`` is False on generic prefix-dependent V = 3 pairs), the fault it
reproduces, and its family (``"chain"`` or ``"tree"``, the verifier's kind).

* :data:`CHAIN_MUTANTS` -- chain verifiers written as separate law functions, each reproducing a bug
  seen (or easy to make) in real speculative-decoding implementations; :data:`CHAIN_CONTROLS` --
  the package's lossless chain rules and independent re-implementations of them.  Some faults only
  show with V >= 3, with rows that change along the draft, or (the block-verification faults,
  which coincide with block verification = token-level at L = 1) from L = 2 on.
* :data:`TREE_MUTANTS` -- tree verifiers that reuse the real node rules of the
  :mod:`specsim.verifiers` family modules through their private switches, so each differs from the
  correct verifier in exactly one place; :data:`TREE_CONTROLS` -- the correct verifiers on the
  same processes.
* :data:`POLICY_MUTANTS` -- not verifiers: drafting rules that change the output law although the
  verifier is applied as written (certified by :func:`specsim.structure.check_policy_lossless`).

Design note: chain and tree mutants share this one record rather than a flag on production
functions; how a mutant is built (a separate law function for chains, a private switch of the
shared node rule for trees, so as not to copy the rule) is the builder's business, not the
record's.

>>> from specsim import check_lossless, random_model
>>> target, draft_model = random_model(3, 21, 0.7), random_model(3, 1021, 0.7)
>>> m = CHAIN_MUTANTS["reused_uniform"]
>>> m.family, check_lossless(m.verifier, target, draft_model, 3).lossless
('chain', False)
>>> check_lossless(CHAIN_CONTROLS["block_forward"].verifier, target, draft_model, 3).lossless
True
>>> m = TREE_MUTANTS["specinfer_stale_residual"]
>>> m.family, check_lossless(m.verifier, random_model(3, 0), random_model(3, 1), m.L, m.drafting).lossless
('tree', False)
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from ..._validate import normalize
from ...drafts import chain, iid_paths, parse_drafting, swor_tree, topk_tree
from ...verifiers import kseq, multipath, nodewise, traversals, two_step
from ...verifiers.base import Outcome, Verifier, chain_verifier, tree_verifier
from ...verifiers.chain import _outcomes, _residual, _stop_law, block, block_weights, hsd_capped, onehot, token

__all__ = ["Mutant", "CHAIN_MUTANTS", "CHAIN_CONTROLS", "TREE_MUTANTS", "TREE_CONTROLS", "POLICY_MUTANTS"]


@dataclass(frozen=True)
class Mutant:
    """A faulty verifier (or, in a controls table, a correct one) and where it is tested:
    ``drafting`` (a draft process) and depth ``L`` at which the exact engine flags a mutant,
    ``fault`` (what is wrong; ``""`` for a control).  Whether it is a mutant or a control is the
    verifier's own claim, ``verifier.lossless``.

    >>> m = TREE_MUTANTS["sequoia_unmasked"]
    >>> m.family, m.verifier.lossless, m.drafting.name, m.L, sorted(m.verifier.needs)
    ('tree', False, 'binary(2)', 2, ['swor'])
    >>> m = CHAIN_MUTANTS["block_token_residual"]
    >>> m.family, m.drafting.name, m.L
    ('chain', 'chain', 2)
    """

    name: str
    verifier: Verifier
    drafting: object
    L: int
    fault: str

    @property
    def family(self) -> str:
        """``"chain"`` or ``"tree"``: the verifier's kind (one source, so the two cannot disagree)."""
        return self.verifier.kind


# ----------------------------------------------------------------------------- chain mutants

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


def _chain(v: Verifier, L: int = 1) -> Mutant:
    # L: the smallest depth at which the fault shows (the block faults coincide with block = token
    # verification at L = 1)
    return Mutant(v.name, v, chain(), L, v.doc.strip().splitlines()[0] if not v.lossless else "")


#: Faulty chain verifiers a losslessness checker must flag (name -> :class:`Mutant`).
CHAIN_MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    *(_chain(v) for v in (residual_from_target, residual_next_row, inverted_residual, inverted_ratio,
                          bonus_wrong_row, accept_wrong_row, reused_uniform, wrong_draft_temperature,
                          onehot_no_removal)),
    *(_chain(v, 2) for v in (block_first_failure, block_token_residual, block_uncapped_weights)))}

#: Lossless chain verifiers (the package's and independent re-implementations) a checker must pass.
CHAIN_CONTROLS: dict[str, Mutant] = {m.name: m for m in (_chain(v, 2) for v in (
    token, block, onehot, hsd_capped,
    chain_verifier("token_logspace")(_token_logspace), chain_verifier("block_forward")(_block_forward)))}


# ----------------------------------------------------------------------------- tree mutants

def _mutant(name, law, drafting, L, fault, needs):
    # ``needs``: the correct verifier's, so ``assert_lossless`` searches the processes it claims
    return Mutant(name, tree_verifier(name, needs=needs, lossless=False, doc=fault)(law), drafting, L, fault)


_BINARY2 = parse_drafting("binary:2")

#: Faulty tree verifiers a losslessness checker must flag (name -> :class:`Mutant`).
TREE_MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    _mutant("specinfer_stale_residual",
            lambda t: nodewise._nodewise(t, partial(nodewise._specinfer_rule, faults="stale_residual")), iid_paths(2), 1,
            "SpecInfer RRS without the residual update between siblings: every sibling tested against p",
            nodewise.specinfer.needs),
    _mutant("specinfer_bonus_from_parent",
            lambda t: nodewise._nodewise(t, nodewise._specinfer_rule, faults="bonus_from_parent"), iid_paths(2), 2,
            "bonus token at a fully accepted leaf drawn from the parent's row instead of the leaf's",
            nodewise.specinfer.needs),
    _mutant("sequoia_unmasked",
            lambda t: nodewise._nodewise(t, partial(nodewise._sequoia_rule, faults="unmasked_rejected")), _BINARY2, 2,
            "SWOR-RRS that does not remove the rejected sibling from D (tests later children against q)",
            nodewise.sequoia.needs),
    _mutant("traversal_mass_update",
            partial(traversals._traversal_law, faults="mass_update"), _BINARY2, 2,
            "traversal with parent weight w_b <- S (residual mass) instead of S / (S + 1 - w_b)",
            traversals.traversal.needs),
    _mutant("traversal_stale_weights",
            partial(traversals._traversal_law, faults="stale_weights"), _BINARY2, 2,
            "traversal that does not recompute the weights below the parent after a rejection",
            traversals.traversal.needs),
    _mutant("traversal_iid_masked",
            partial(traversals._traversal_law, variant="paths", faults="masked_rows"), iid_paths(2), 1,
            "traversal on i.i.d. draws (each its own subtree) masking the rejected token, the "
            "without-replacement row update, although the next draw is from q again",
            traversals.traversal_paths.needs),
    _mutant("traversal_iid_repeats_skipped",
            partial(traversals._traversal_law, variant="repeats", faults="skipped_repeats"), iid_paths(2), 1,
            "traversal on the i.i.d. trie with the draft row kept at q but repeated draws skipped "
            "(no attempt, no row update)",
            traversals.traversal_repeats.needs),
    _mutant("gbv_select_by_q",
            lambda t: multipath._gbv_law(t, faults="select_by_q"), iid_paths(2), 2,
            "GBV selecting the path by draft probability while the skewed law assumes the p/q order",
            multipath.gbv.needs),
    _mutant("gbv_tie_mismatch_capped",
            lambda t: multipath._gbv_law(t, capped=True, mismatch=True), iid_paths(2), 2,
            "GBV with the capped key and ties broken differently in selection and in the skewed law",
            multipath.gbv.needs),
    _mutant("spectr_rho_one",
            lambda t: nodewise._nodewise(t, partial(kseq._spectr_rule, rho=1.0)), iid_paths(2), 1,
            "K-SEQ with rho = 1 regardless of validity (negative residual clipped)",
            kseq.spectr.needs),
    _mutant("khisti_against_q",
            lambda t: nodewise._nodewise(t, partial(two_step._khisti_rule, faults="against_q")), iid_paths(2), 1,
            "two-step verifier that tests the selected token against q instead of the selection law",
            two_step.khisti.needs),
    _mutant("deterministic_unmasked",
            lambda t: nodewise._nodewise(t, partial(nodewise._deterministic_rule, faults="unmasked_children")), topk_tree((2,)), 1,
            "deterministic children with the rejection sample from p without zeroing the children",
            nodewise.deterministic_children.needs),
    _mutant("specinfer_on_topk",
            nodewise.specinfer.law, topk_tree((2, 2)), 2,
            "correct RRS applied to a deterministic top-k tree: q is not the law the children came from",
            {"any"}),  # its fault is claiming every process
)}

#: The correct tree verifiers on the same processes: all must pass.
TREE_CONTROLS: dict[str, Mutant] = {m.name: m for m in (
    Mutant("specinfer", nodewise.specinfer, iid_paths(2), 2, ""),
    Mutant("sequoia", nodewise.sequoia, swor_tree(2), 2, ""),
    Mutant("traversal", traversals.traversal, _BINARY2, 2, ""),
    Mutant("traversal_paths", traversals.traversal_paths, iid_paths(2), 2, ""),
    Mutant("traversal_repeats", traversals.traversal_repeats, iid_paths(2), 2, ""),
    Mutant("gbv", multipath.gbv, iid_paths(2), 2, ""),
    Mutant("spectr", kseq.spectr, iid_paths(2), 2, ""),
    Mutant("khisti", two_step.khisti, iid_paths(2), 2, ""),
    Mutant("deterministic_children", nodewise.deterministic_children, topk_tree((2, 2)), 2, ""),
)}


# ----------------------------------------------------------------------------- drafting rules

#: Drafting rules that change the output law although every verifier above is applied as written
#: (docs/theory.md §14.2): a drawn token dropped because of its value (grammar truncation), and
#: SpecDec++'s oracle applied one token late (the token that crosses the threshold is dropped
#: after its target row was read).  Certify with specsim.structure.check_policy_lossless.
from ...structure.policies import drop_on_target, grammar_truncation  # noqa: E402

POLICY_MUTANTS = {d.name.split(":")[0]: d for d in (grammar_truncation(), drop_on_target(0.5))}
