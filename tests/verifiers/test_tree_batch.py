"""Tree verifiers' fast exact paths (shape-group batch laws, node rules, path models) against the
per-tree law, which stays the reference (docs/theory.md §2.1)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from specsim import output_law, tree_verifier
from specsim.drafts import (DraftTree, chain, delayed_expansion, fixed_shape, greedy_drafts, iid_paths,
                            parse_drafting, swor_tree)
from specsim.models import random_model
from specsim.testing.strategies import model_pairs
from specsim.verifiers import TREE_VERIFIERS

#: Every tree verifier without a node rule at the start of issue 14: each has a batch law now.
BATCHED = ("traversal", "gbv", "gbv_capped", "specinfer_first_path")
PROCESSES = (chain(), iid_paths(2), swor_tree(2), swor_tree(3), fixed_shape((2, 2)),
             fixed_shape((2, 2), replacement=False), delayed_expansion(1, 2), greedy_drafts(2),
             parse_drafting("binary:2"))
CASES = [pytest.param(name, proc, id=f"{name}-{proc.name}") for name in BATCHED for proc in PROCESSES
         if TREE_VERIFIERS[name].applies_to(proc)]


def _per_tree(v):
    return tree_verifier(v.name, needs=v.needs, lossless=v.lossless)(v.law)


def _max_gap(a, b) -> float:
    return max(float(np.abs(a.emitted[m] - b.emitted[m]).max()) for m in a.emitted)


@pytest.mark.parametrize("name,process", CASES)
@settings(max_examples=4, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=model_pairs(V=3, depth=2))
def test_fast_paths_equal_the_per_tree_law(name, process, pair):
    """Batch law alone, and the engine's default (fastest) path, give the per-tree law to 1e-13."""
    v = TREE_VERIFIERS[name]
    batch_only = dataclasses.replace(v, node_rule=None, path_model=None, process_law=None)
    ref = output_law(_per_tree(v), pair.target, pair.draft_model, 2, process)
    assert _max_gap(output_law(batch_only, pair.target, pair.draft_model, 2, process), ref) <= 1e-13
    fast = output_law(v, pair.target, pair.draft_model, 2, process)
    assert _max_gap(fast, ref) <= 1e-13
    assert abs(fast.expected_accepted - ref.expected_accepted) <= 1e-13


@pytest.mark.parametrize("name,process,V,L", [("traversal", swor_tree(2), 4, 3), ("gbv", iid_paths(3), 3, 2),
                                              ("gbv_capped", iid_paths(3), 3, 2),
                                              ("specinfer_first_path", iid_paths(2), 4, 3)])
def test_larger_cases(name, process, V, L):
    """V = 4 or K = 3, rows depending on the whole prefix: batch law and fastest path, to 1e-13."""
    v = TREE_VERIFIERS[name]
    t, d = random_model(V, 3), random_model(V, 4)
    ref = output_law(_per_tree(v), t, d, L, process)
    assert _max_gap(output_law(dataclasses.replace(v, node_rule=None, path_model=None, process_law=None), t, d, L, process), ref) <= 1e-13
    assert _max_gap(output_law(v, t, d, L, process), ref) <= 1e-13


def test_tree_shape_groups_draw_patterns_not_tokens():
    trees = [tree for _, tree in iid_paths(2).enumerate(random_model(3, 0), random_model(3, 1), 1)]
    shapes = {tree.shape for tree in trees}
    assert len(shapes) == 2                       # (a, a) and (a, b): 3 + 6 trees
    assert sum(tree.shape[1][0] == (1, 1) for tree in trees) == 3


def _law(tree):
    return TREE_VERIFIERS["traversal"].law(tree)


def test_batch_law_not_summing_to_one_names_verifier_and_tree():
    bad = tree_verifier("half", needs={"swor"},
                        batch_law=lambda tree, tokens, p, q: (np.full(tokens.shape, 0.5), p))(_law)
    with pytest.raises(ValueError, match=r"verifier half: batch_law is not a distribution.*draft tree tokens"):
        output_law(bad, random_model(3, 0), random_model(3, 1), 1, swor_tree(2))


def test_batch_law_of_the_wrong_size_names_verifier_and_tree():
    bad = tree_verifier("short", needs={"swor"},
                        batch_law=lambda tree, tokens, p, q: (np.ones((len(tokens), 1)), p[:, :1]))(_law)
    with pytest.raises(ValueError, match=r"verifier short: batch_law returned arrays of shapes.*draft tree tokens"):
        output_law(bad, random_model(3, 0), random_model(3, 1), 1, swor_tree(2))


class _MixedSizes:
    """A process whose two trees share a shape but not a row width (a malformed user process)."""

    name = "mixed"
    laws = frozenset({"swor"})

    def enumerate(self, target, draft_model, L):
        for V in (3, 4):
            row = np.full(V, 1.0 / V)
            yield 0.5, DraftTree((-1, 0), (-1, 0), np.stack([row, row]), np.stack([row, 0 * row]), None, False)

    def sample(self, target, draft_model, L, rng):
        raise NotImplementedError


def test_shape_group_with_arrays_of_different_sizes_names_verifier_and_tree():
    with pytest.raises(ValueError, match=r"verifier traversal: draft tree tokens \(-1, 0\).*shape group"):
        output_law(TREE_VERIFIERS["traversal"], random_model(3, 0), random_model(3, 1), 1, _MixedSizes())
