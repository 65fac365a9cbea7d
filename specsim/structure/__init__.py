"""Draft structure: what is drafted, when drafting stops, and what an iteration costs.

The rest of ``specsim`` certifies a verifier on given drafts; this subpackage asks which drafts
to make.  :mod:`specsim.structure.cost` holds the cost model every throughput figure here is
measured in (docs/theory.md §13-§14).  Which drafts to make: :mod:`.renewal` is the exact
renewal-reward throughput of a verifier on a draft process and :mod:`.trees` the optimal draft
trees under a node budget per verifier (§13); :mod:`.measure` (torch, transformers) times a real
model into a cost table.  When to stop: :mod:`.policies` (drafting policies), :mod:`.stopping`
(exact policy values, the optimal stopping rule, policy-aware certificates) and :mod:`.cascades`
(speculative cascades) answer when to stop drafting and which rules stay lossless (§14).
"""
from .cost import CostModel, leviathan_speedup
from .policies import (ConfidenceThreshold, DraftState, DroppingDesign, EntropyStop, FixedLength, HeuristicSchedule,
                       Policy, CallablePolicy, SpecDecPP, drop_on_target, grammar_truncation)
from .renewal import LengthChoice, Throughput, expected_cost, optimal_length, paths_cost, throughput, tree_cost
from .stopping import (OptimalStopping, PolicyCertificate, PolicyValue, check_policy_lossless, compare_policies,
                       optimal_stopping, policy_drafting, policy_value)
from .trees import (MAX_SHAPES, MAX_TREES, SAMPLED_VERIFIERS, STATUS, BudgetChoice, FixedTree, ShapeProcess, TreeDesign,
                    build_tree, deterministic_value, opt_tree, optimal_budget, optimal_tree, ranked_tree,
                    search_shapes, search_space, sequoia_shape, speed_of_light)

__all__ = ["CostModel", "leviathan_speedup",
           "Throughput", "throughput", "tree_cost", "paths_cost", "expected_cost", "optimal_length", "LengthChoice",
           "TreeDesign", "FixedTree", "ShapeProcess", "deterministic_value", "ranked_tree", "opt_tree", "build_tree",
           "optimal_tree", "search_space", "search_shapes", "sequoia_shape", "optimal_budget", "BudgetChoice",
           "speed_of_light", "SAMPLED_VERIFIERS", "MAX_SHAPES", "MAX_TREES", "STATUS",
           "Policy", "DraftState", "FixedLength", "ConfidenceThreshold", "SpecDecPP", "EntropyStop", "CallablePolicy",
           "HeuristicSchedule", "DroppingDesign", "grammar_truncation", "drop_on_target",
           "OptimalStopping", "PolicyValue", "PolicyCertificate", "optimal_stopping", "policy_value",
           "compare_policies", "policy_drafting", "check_policy_lossless"]
