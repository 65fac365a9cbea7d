"""Draft structure: what is drafted, when drafting stops, and what an iteration costs.

The rest of ``specsim`` certifies a verifier on given drafts; this subpackage asks which drafts
to make.  :mod:`specsim.structure.cost` holds the cost model every throughput figure here is
measured in (docs/theory.md, "Draft structure").  :mod:`specsim.structure.policies` (drafting
policies), :mod:`specsim.structure.stopping` (exact policy values, the optimal stopping rule,
policy-aware certificates) and :mod:`specsim.structure.cascades` (speculative cascades) answer
when to stop drafting and which rules stay lossless (docs/theory.md §14).
"""
from .cost import CostModel, leviathan_speedup
from .policies import (ConfidenceThreshold, DraftState, DroppingDesign, EntropyStop, FixedLength, HeuristicSchedule,
                       Policy, CallablePolicy, SpecDecPP, drop_on_target, grammar_truncation)
from .stopping import (OptimalStopping, PolicyCertificate, PolicyValue, check_policy_lossless, compare_policies,
                       optimal_stopping, policy_drafting, policy_value)

__all__ = ["CostModel", "leviathan_speedup",
           "Policy", "DraftState", "FixedLength", "ConfidenceThreshold", "SpecDecPP", "EntropyStop", "CallablePolicy",
           "HeuristicSchedule", "DroppingDesign", "grammar_truncation", "drop_on_target",
           "OptimalStopping", "PolicyValue", "PolicyCertificate", "optimal_stopping", "policy_value",
           "compare_policies", "policy_drafting", "check_policy_lossless"]
