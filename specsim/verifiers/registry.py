"""The registry of tree verifiers, and :func:`verifiers_for`: which verifiers apply to a draft process.

Each family lives in its own module (:mod:`.nodewise`, :mod:`.kseq`, :mod:`.two_step`,
:mod:`.greedy_draft`, :mod:`.traversals`, :mod:`.multipath`); this module lists them in table
order.  Every verifier says in ``needs`` which children laws it relies on (see
:func:`specsim.drafts.draft_laws`).
"""
from __future__ import annotations

from .base import Verifier
from .chain import CHAIN_VERIFIERS
from .greedy_draft import greedy_multidraft
from .kseq import spectr
from .multipath import gbv, gbv_capped
from .nodewise import deterministic_children, sequoia, specinfer, specinfer_first_path
from .traversals import traversal, traversal_paths, traversal_repeats
from .two_step import khisti, khisti_optimal

__all__ = ["TREE_VERIFIERS", "verifiers_for"]

#: The tree verifiers, by name, in the order tables list them; each carries its ``needs``.
TREE_VERIFIERS: dict[str, Verifier] = {v.name: v for v in (
    specinfer, specinfer_first_path, sequoia, traversal, traversal_repeats, traversal_paths, deterministic_children,
    spectr, khisti, khisti_optimal, gbv, gbv_capped, greedy_multidraft)}


def verifiers_for(drafting) -> list[Verifier]:
    """Every registered verifier v with ``v.applies_to(drafting)``: "any" in v.needs or
    v.needs ∩ draft_laws(drafting) ≠ ∅ (chain verifiers need ``{"chain"}``, a single path from q).

    Negative controls are included; check ``Verifier.lossless``.

    Parameters: ``drafting`` a draft process (:mod:`specsim.drafts`).

    Returns: a list of :class:`~specsim.verifiers.base.Verifier`, chain verifiers first, each
    registry in table order.

    >>> from specsim.drafts import iid_paths, swor_tree
    >>> [v.name for v in verifiers_for(iid_paths(2))][:2]
    ['specinfer', 'specinfer_first_path']
    >>> [v.name for v in verifiers_for(swor_tree(2))]
    ['sequoia', 'traversal', 'deterministic_children']
    """
    return [v for v in (*CHAIN_VERIFIERS.values(), *TREE_VERIFIERS.values()) if v.applies_to(drafting)]
