"""Draft structure: what is drafted, when drafting stops, and what an iteration costs.

The rest of ``specsim`` certifies a verifier on given drafts; this subpackage asks which drafts
to make.  :mod:`specsim.structure.cost` holds the cost model every throughput figure here is
measured in, :mod:`.renewal` the exact renewal-reward throughput of a verifier on a process,
and :mod:`.trees` the optimal draft trees under a node budget per verifier (docs/theory.md §13).
:mod:`.measure` (torch, transformers) times a real model into a cost table; :mod:`.design` is the
``specsim tree-design`` command.
"""
from .cost import CostModel, leviathan_speedup
from .renewal import LengthChoice, Throughput, expected_cost, optimal_length, paths_cost, throughput, tree_cost
from .trees import (MAX_SHAPES, MAX_TREES, SAMPLED_VERIFIERS, STATUS, BudgetChoice, FixedTree, ShapeProcess, TreeDesign,
                    build_tree, deterministic_value, opt_tree, optimal_budget, optimal_tree, ranked_tree,
                    search_shapes, search_space, sequoia_shape, speed_of_light)

__all__ = ["CostModel", "leviathan_speedup", "Throughput", "throughput", "tree_cost", "paths_cost", "expected_cost",
           "optimal_length", "LengthChoice", "TreeDesign", "FixedTree", "ShapeProcess", "deterministic_value",
           "ranked_tree", "opt_tree", "build_tree", "optimal_tree", "search_space", "search_shapes",
           "sequoia_shape", "optimal_budget", "BudgetChoice", "speed_of_light", "SAMPLED_VERIFIERS",
           "MAX_SHAPES", "MAX_TREES", "STATUS"]
