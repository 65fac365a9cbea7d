"""Verifiers in the exact-outcome protocol (see :mod:`specsim.verifiers.base`).

Chain rules live in :mod:`.chain`, lossy rules in :mod:`.lossy`, tree and multi-draft rules one
module per family: :mod:`.nodewise` (SpecInfer, Sequoia, deterministic children, and the
node-wise engine the next three reuse), :mod:`.kseq` (SpecTr), :mod:`.two_step` (Khisti et al.),
:mod:`.greedy_draft` (Hu et al.'s greedy draft law), :mod:`.traversals` (traversal
verification) and :mod:`.multipath` (GBV); :mod:`.registry` lists them.  Every verifier is built
by :func:`chain_verifier` or :func:`tree_verifier` and says in ``needs`` which draft processes it
is valid for; :func:`verifiers_for` reads it.

>>> from specsim.drafts import swor_tree
>>> [v.name for v in verifiers_for(swor_tree(2))]
['sequoia', 'traversal', 'deterministic_children']
"""
from .base import (NEED_TAGS, Outcome, Verifier, as_verifier, chain_verifier, validate_outcomes, meets_needs,
                   tree_verifier)
from .chain import CHAIN_VERIFIERS, block, greedy, hsd_capped, hsd_released, onehot, token
from .greedy_draft import greedy_multidraft
from .kseq import spectr
from .multipath import gbv, gbv_capped
from .nodewise import deterministic_children, sequoia, specinfer, specinfer_first_path
from .registry import TREE_VERIFIERS, verifiers_for
from .traversals import traversal, traversal_paths, traversal_repeats
from .two_step import khisti, khisti_optimal

__all__ = ["Outcome", "Verifier", "chain_verifier", "tree_verifier", "validate_outcomes", "as_verifier",
           "NEED_TAGS", "meets_needs",
           "token", "onehot", "block", "greedy", "hsd_released", "hsd_capped", "CHAIN_VERIFIERS",
           "specinfer", "specinfer_first_path", "sequoia", "traversal", "traversal_repeats", "traversal_paths",
           "deterministic_children", "spectr", "khisti", "khisti_optimal", "gbv", "gbv_capped", "greedy_multidraft",
           "TREE_VERIFIERS", "verifiers_for"]
