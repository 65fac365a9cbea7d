"""Verifiers in the exact-outcome protocol (see :mod:`specsim.verifiers.base`)."""
from .base import Outcome, Verifier, chain_verifier, tree_verifier, check_outcomes
from .chain import token, onehot, block, greedy, hsd_released, hsd_capped, CHAIN_VERIFIERS

__all__ = ["Outcome", "Verifier", "chain_verifier", "tree_verifier", "check_outcomes",
           "token", "onehot", "block", "greedy", "hsd_released", "hsd_capped", "CHAIN_VERIFIERS"]
