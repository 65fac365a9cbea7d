"""Faulty tree verifiers for mutation testing: each reproduces one plausible porting bug.

Every :class:`TreeMutant` pairs a wrong verifier with the draft process and depth on which the
exact engine flags it (``check_lossless(m.verifier, target, draft, m.L, m.drafting).lossless``
is False on generic prefix-dependent V >= 3 models), and :data:`CONTROLS` pairs the correct
verifiers with the same processes (they must pass).  A test suite that cannot tell the two
lists apart cannot see the bug class.  The mutants reuse the real node rules of
:mod:`specsim.verifiers` family modules through their private switches, so they differ from the correct
verifier in exactly one place.

>>> from specsim import check_lossless, random_model
>>> m = MUTANTS["specinfer_stale_residual"]
>>> check_lossless(m.verifier, random_model(3, 0), random_model(3, 1), m.L, m.drafting).lossless
False
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from ...drafts import iid_paths, parse_drafting, swor_tree, topk_tree
from ...verifiers import kseq, multipath, nodewise, traversals, two_step
from ...verifiers.base import Verifier, tree_verifier

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
            lambda t: nodewise._nodewise(t, partial(nodewise._specinfer_rule, update_residual=False)), iid_paths(2), 1,
            "SpecInfer RRS without the residual update between siblings: every sibling tested against p",
            nodewise.specinfer.needs),
    _mutant("specinfer_bonus_from_parent",
            lambda t: nodewise._nodewise(t, nodewise._specinfer_rule, bonus_from_parent=True), iid_paths(2), 2,
            "bonus token at a fully accepted leaf drawn from the parent's row instead of the leaf's",
            nodewise.specinfer.needs),
    _mutant("sequoia_unmasked",
            lambda t: nodewise._nodewise(t, partial(nodewise._sequoia_rule, mask_rejected=False)), _BINARY2, 2,
            "SWOR-RRS that does not remove the rejected sibling from D (tests later children against q)",
            nodewise.sequoia.needs),
    _mutant("traversal_mass_update",
            partial(traversals._traversal_law, parent_update="mass"), _BINARY2, 2,
            "traversal with parent weight w_b <- S (residual mass) instead of S / (S + 1 - w_b)",
            traversals.traversal.needs),
    _mutant("traversal_stale_weights",
            partial(traversals._traversal_law, recompute=False), _BINARY2, 2,
            "traversal that does not recompute the weights below the parent after a rejection",
            traversals.traversal.needs),
    _mutant("traversal_iid_masked",
            partial(traversals._traversal_law, variant="paths", mask=True), iid_paths(2), 1,
            "traversal on i.i.d. draws (each its own subtree) masking the rejected token, the "
            "without-replacement row update, although the next draw is from q again",
            traversals.traversal_paths.needs),
    _mutant("traversal_iid_repeats_skipped",
            partial(traversals._traversal_law, variant="repeats", skip_repeats=True), iid_paths(2), 1,
            "traversal on the i.i.d. trie with the draft row kept at q but repeated draws skipped "
            "(no attempt, no row update)",
            traversals.traversal_repeats.needs),
    _mutant("gbv_select_by_q",
            lambda t: multipath._gbv_law(t, select_by_q=True), iid_paths(2), 2,
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
            lambda t: nodewise._nodewise(t, partial(two_step._khisti_rule, against_q=True)), iid_paths(2), 1,
            "two-step verifier that tests the selected token against q instead of the selection law",
            two_step.khisti.needs),
    _mutant("deterministic_unmasked",
            lambda t: nodewise._nodewise(t, partial(nodewise._deterministic_rule, mask_children=False)), topk_tree((2,)), 1,
            "deterministic children with the rejection sample from p without zeroing the children",
            nodewise.deterministic_children.needs),
    _mutant("specinfer_on_topk",
            nodewise.specinfer.law, topk_tree((2, 2)), 2,
            "correct RRS applied to a deterministic top-k tree: q is not the law the children came from",
            {"any"}),  # its fault is claiming every process
)}

#: The correct verifiers on the same processes: all must pass.
CONTROLS: dict[str, TreeMutant] = {m.name: m for m in (
    TreeMutant("specinfer", nodewise.specinfer, iid_paths(2), 2, ""),
    TreeMutant("sequoia", nodewise.sequoia, swor_tree(2), 2, ""),
    TreeMutant("traversal", traversals.traversal, _BINARY2, 2, ""),
    TreeMutant("traversal_paths", traversals.traversal_paths, iid_paths(2), 2, ""),
    TreeMutant("traversal_repeats", traversals.traversal_repeats, iid_paths(2), 2, ""),
    TreeMutant("gbv", multipath.gbv, iid_paths(2), 2, ""),
    TreeMutant("spectr", kseq.spectr, iid_paths(2), 2, ""),
    TreeMutant("khisti", two_step.khisti, iid_paths(2), 2, ""),
    TreeMutant("deterministic_children", nodewise.deterministic_children, topk_tree((2, 2)), 2, ""),
)}
