"""Faulty tree verifiers for mutation testing: each reproduces one plausible porting bug.

Every :class:`TreeMutant` pairs a wrong verifier with the draft process and depth on which the
exact engine flags it (``check_lossless(m.verifier, target, draft, m.L, m.drafting).lossless``
is False on generic prefix-dependent V >= 3 models), and :data:`CONTROLS` pairs the correct
verifiers with the same processes (they must pass).  A test suite that cannot tell the two
lists apart cannot see the bug class.  The mutants reuse the real node rules of
:mod:`specsim.verifiers.tree` through their private switches, so they differ from the correct
verifier in exactly one place.

>>> from specsim import check_lossless, random_model
>>> m = MUTANTS["specinfer_stale_residual"]
>>> check_lossless(m.verifier, random_model(3, 0), random_model(3, 1), m.L, m.drafting).lossless
False
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ..drafts import iid_paths, parse_drafting, swor_tree, topk_tree
from ..verifiers import tree as T
from ..verifiers.base import Verifier, tree_verifier

__all__ = ["TreeMutant", "MUTANTS", "CONTROLS"]


@dataclass(frozen=True)
class TreeMutant:
    """A faulty (or, in :data:`CONTROLS`, correct) tree verifier and where to test it: ``drafting``
    and depth ``L``, with ``bug`` describing the fault.

    >>> m = MUTANTS["sequoia_unmasked"]
    >>> m.verifier.lossless, m.drafting.name, m.L, sorted(m.verifier.needs)
    (False, 'binary(2)', 2, ['swor'])
    """

    name: str
    verifier: Verifier
    drafting: object
    L: int
    bug: str


def _mutant(name, law, drafting, L, bug, needs):
    # ``needs``: the correct verifier's, so ``assert_lossless`` searches the processes it claims
    return TreeMutant(name, tree_verifier(name, needs=needs, lossless=False, doc=bug)(law), drafting, L, bug)


_BINARY2 = parse_drafting("binary:2")

#: name -> faulty verifier with the process where it is flagged.
MUTANTS: dict[str, TreeMutant] = {m.name: m for m in (
    _mutant("specinfer_stale_residual",
            lambda t: T._nodewise(t, partial(T._specinfer_rule, update_residual=False)), iid_paths(2), 1,
            "SpecInfer RRS without the residual update between siblings: every sibling tested against p",
            T.specinfer.needs),
    _mutant("specinfer_bonus_from_parent",
            lambda t: T._nodewise(t, T._specinfer_rule, bonus_from_parent=True), iid_paths(2), 2,
            "bonus token at a fully accepted leaf drawn from the parent's row instead of the leaf's",
            T.specinfer.needs),
    _mutant("sequoia_unmasked",
            lambda t: T._nodewise(t, partial(T._sequoia_rule, mask_rejected=False)), _BINARY2, 2,
            "SWOR-RRS that does not remove the rejected sibling from D (tests later children against q)",
            T.sequoia.needs),
    _mutant("traversal_mass_update",
            partial(T._traversal_law, parent_update="mass"), _BINARY2, 2,
            "traversal with parent weight w_b <- S (residual mass) instead of S / (S + 1 - w_b)",
            T.traversal.needs),
    _mutant("traversal_stale_weights",
            partial(T._traversal_law, recompute=False), _BINARY2, 2,
            "traversal that does not recompute the weights below the parent after a rejection",
            T.traversal.needs),
    _mutant("traversal_iid_masked",
            partial(T._traversal_law, variant="paths", mask=True), iid_paths(2), 1,
            "traversal on i.i.d. draws (each its own subtree) masking the rejected token, the "
            "without-replacement row update, although the next draw is from q again",
            T.traversal_paths.needs),
    _mutant("traversal_iid_repeats_skipped",
            partial(T._traversal_law, variant="repeats", skip_repeats=True), iid_paths(2), 1,
            "traversal on the i.i.d. trie with the draft row kept at q but repeated draws skipped "
            "(no attempt, no row update)",
            T.traversal_repeats.needs),
    _mutant("gbv_select_by_q",
            lambda t: T._gbv_law(t, select_by_q=True), iid_paths(2), 2,
            "GBV selecting the path by draft probability while the skewed law assumes the p/q order",
            T.gbv.needs),
    _mutant("gbv_tie_mismatch_capped",
            lambda t: T._gbv_law(t, capped=True, mismatch=True), iid_paths(2), 2,
            "GBV with the capped key and ties broken differently in selection and in the skewed law",
            T.gbv.needs),
    _mutant("spectr_rho_one",
            lambda t: T._nodewise(t, partial(T._spectr_rule, rho=1.0)), iid_paths(2), 1,
            "K-SEQ with rho = 1 regardless of validity (negative residual clipped)",
            T.spectr.needs),
    _mutant("khisti_against_q",
            lambda t: T._nodewise(t, partial(T._khisti_rule, against_q=True)), iid_paths(2), 1,
            "two-step verifier that tests the selected token against q instead of the selection law",
            T.khisti.needs),
    _mutant("deterministic_unmasked",
            lambda t: T._nodewise(t, partial(T._deterministic_rule, mask_children=False)), topk_tree((2,)), 1,
            "deterministic children with the rejection sample from p without zeroing the children",
            T.deterministic_children.needs),
    _mutant("specinfer_on_topk",
            T.specinfer.law, topk_tree((2, 2)), 2,
            "correct RRS applied to a deterministic top-k tree: q is not the law the children came from",
            {"any"}),  # its fault is claiming every process
)}

#: The correct verifiers on the same processes: all must pass.
CONTROLS: dict[str, TreeMutant] = {m.name: m for m in (
    TreeMutant("specinfer", T.specinfer, iid_paths(2), 2, ""),
    TreeMutant("sequoia", T.sequoia, swor_tree(2), 2, ""),
    TreeMutant("traversal", T.traversal, _BINARY2, 2, ""),
    TreeMutant("traversal_paths", T.traversal_paths, iid_paths(2), 2, ""),
    TreeMutant("traversal_repeats", T.traversal_repeats, iid_paths(2), 2, ""),
    TreeMutant("gbv", T.gbv, iid_paths(2), 2, ""),
    TreeMutant("spectr", T.spectr, iid_paths(2), 2, ""),
    TreeMutant("khisti", T.khisti, iid_paths(2), 2, ""),
    TreeMutant("deterministic_children", T.deterministic_children, topk_tree((2, 2)), 2, ""),
)}
