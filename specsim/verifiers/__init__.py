"""Verifiers in the exact-outcome protocol (see :mod:`specsim.verifiers.base`).

Chain rules live in :mod:`.chain`, tree and multi-draft rules in :mod:`.tree`, lossy rules in
:mod:`.lossy`.  Every verifier is built by :func:`chain_verifier` or :func:`tree_verifier` and
says in ``needs`` which draft processes it is valid for; :func:`verifiers_for` reads it.

>>> from specsim.drafts import swor_tree
>>> [v.name for v in verifiers_for(swor_tree(2))]
['sequoia', 'traversal', 'deterministic_children']
"""
from .base import (NEED_TAGS, Outcome, Verifier, as_verifier, chain_verifier, check_outcomes, meets_needs,
                   tree_verifier)
from .chain import CHAIN_VERIFIERS, block, greedy, hsd_capped, hsd_released, onehot, token
from .tree import (TREE_VERIFIERS, deterministic_children, gbv, gbv_capped, greedy_multidraft, khisti,
                   khisti_optimal, khisti_self_normalised,
                   multidraft_acceptance, sequoia, specinfer, specinfer_first_path, spectr, traversal,
                   traversal_paths, traversal_repeats, verifiers_for)

__all__ = ["Outcome", "Verifier", "chain_verifier", "tree_verifier", "check_outcomes", "as_verifier",
           "NEED_TAGS", "meets_needs",
           "token", "onehot", "block", "greedy", "hsd_released", "hsd_capped", "CHAIN_VERIFIERS",
           "specinfer", "specinfer_first_path", "sequoia", "traversal", "traversal_repeats", "traversal_paths",
           "deterministic_children", "spectr", "khisti", "khisti_optimal", "khisti_self_normalised", "gbv", "gbv_capped", "greedy_multidraft", "TREE_VERIFIERS", "verifiers_for",
           "multidraft_acceptance"]
