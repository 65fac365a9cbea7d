"""Verifiers in the exact-outcome protocol (see :mod:`specsim.verifiers.base`).

Chain rules live in :mod:`.chain`, tree and multi-draft rules in :mod:`.tree`, lossy rules in
:mod:`.lossy`.
"""
from .base import Outcome, Verifier, chain_verifier, check_outcomes, tree_verifier
from .chain import CHAIN_VERIFIERS, block, greedy, hsd_capped, hsd_released, onehot, token
from .tree import (TREE_VERIFIERS, deterministic_children, gbv, khisti, multidraft_acceptance, sequoia,
                   specinfer, specinfer_first_path, spectr, traversal, verifiers_for)

__all__ = ["Outcome", "Verifier", "chain_verifier", "tree_verifier", "check_outcomes",
           "token", "onehot", "block", "greedy", "hsd_released", "hsd_capped", "CHAIN_VERIFIERS",
           "specinfer", "specinfer_first_path", "sequoia", "traversal", "deterministic_children",
           "spectr", "khisti", "gbv", "TREE_VERIFIERS", "verifiers_for", "multidraft_acceptance"]
