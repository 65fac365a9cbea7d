"""Traversal verification: the engine's node-state path against the per-tree law, and the
variant for i.i.d. children (repeats merged) certified lossless (docs/theory.md §6.3.1)."""
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from specsim import check_lossless, output_law, tree_verifier
from specsim.drafts import (chain, delayed_expansion, fixed_shape, greedy_drafts, iid_paths, parse_drafting,
                            swor_tree, topk_tree)
from specsim.models import random_model
from specsim.testing.strategies import model_pairs
from specsim.verifiers import traversal, verifiers_for

#: Every process traversal applies to, small enough for the per-tree law at V = 3, L = 2.
PROCESSES = (chain(), swor_tree(2), swor_tree(3), parse_drafting("binary:2"), fixed_shape((2, 2), replacement=False),
             delayed_expansion(1, 2, replacement=False), iid_paths(2), iid_paths(3), delayed_expansion(1, 2),
             delayed_expansion(0, 3), fixed_shape((2, 2)), fixed_shape((3, 1)))
IID = [p for p in PROCESSES if p.name.startswith(("iid", "delayed")) and "swor" not in p.name]

PER_TREE = tree_verifier("traversal", needs=traversal.needs)(traversal.law)  # no fast path: the reference
BATCH_ONLY = dataclasses.replace(traversal, process_law=None)  # the engine groups trees by shape for it


def _max_gap(a, b) -> float:
    return max(float(np.abs(a.emitted[m] - b.emitted[m]).max()) for m in a.emitted)


@pytest.mark.parametrize("process", PROCESSES, ids=lambda p: p.name)
@settings(max_examples=4, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=model_pairs(V=3, depth=2))
def test_node_state_path_equals_the_per_tree_law(process, pair):
    ref = output_law(PER_TREE, pair.target, pair.draft_model, 2, process)
    fast = output_law(traversal, pair.target, pair.draft_model, 2, process)
    assert _max_gap(fast, ref) <= 1e-13
    assert abs(fast.expected_accepted - ref.expected_accepted) <= 1e-13
    assert _max_gap(output_law(BATCH_ONLY, pair.target, pair.draft_model, 2, process), ref) <= 1e-13


@pytest.mark.parametrize("process,V,L", [(swor_tree(2), 4, 3), (iid_paths(2), 3, 3), (delayed_expansion(1, 2), 4, 3),
                                         (parse_drafting("binary:2"), 4, 2)], ids=str)
def test_node_state_path_at_v4_and_depth_3(process, V, L):
    """Rows depending on the whole prefix (random_model), V = 4 or L = 3."""
    t, d = random_model(V, 3), random_model(V, 4)
    assert _max_gap(output_law(traversal, t, d, L, process), output_law(PER_TREE, t, d, L, process)) <= 1e-13


@pytest.mark.parametrize("process", IID, ids=lambda p: p.name)
@settings(max_examples=6, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=model_pairs(V=3, depth=2))
def test_lossless_on_iid_children_with_repeats_merged(process, pair):
    """Certified by the per-tree law, so the certificate does not rest on the node-state path."""
    assert check_lossless(PER_TREE, pair.target, pair.draft_model, 2, process).lossless


@pytest.mark.parametrize("process,V", [(iid_paths(2), 3), (iid_paths(3), 3), (delayed_expansion(1, 2), 3),
                                       (fixed_shape((2, 2)), 3), (iid_paths(2), 4)], ids=str)
def test_lossless_at_depth_3_on_iid_processes(process, V):
    for seed in range(3):
        cert = check_lossless(traversal, random_model(V, 2 * seed), random_model(V, 2 * seed + 1), 3, process)
        assert cert.lossless, cert


@pytest.mark.parametrize("process", [swor_tree(2), iid_paths(2), iid_paths(3), fixed_shape((2, 2))], ids=lambda p: p.name)
def test_first_token_acceptance_does_not_depend_on_the_depth(process):
    """§6.3.1: a subtree entered with weight w accepts with mean probability w whatever lies
    below it, so P(tau >= 1) at depth 2 or 3 is the depth-1 value (SWOR-RRS on the root's
    distinct draws), here from the per-tree law."""
    t, d = random_model(3, 5), random_model(3, 6)
    at_one = output_law(PER_TREE, t, d, 1, process).accepted_at_least[1]
    for L in (2, 3):
        assert output_law(PER_TREE, t, d, L, process).accepted_at_least[1] == pytest.approx(at_one, abs=1e-13)


def test_depth_3_binary_tree_at_v4():
    """Issue 14's out-of-reach case (3.6e7 trees) through the node-state path: certified lossless."""
    cert = check_lossless(traversal, random_model(4, 0), random_model(4, 1), 3, parse_drafting("binary:3"))
    assert cert.lossless, cert
    assert cert.n_drafts < 10_000  # node states with their draw options, not trees


def test_registered_for_iid_processes_only_where_children_are_drawn_from_q():
    for process in (iid_paths(2), delayed_expansion(2, 3), fixed_shape((2, 2)), swor_tree(2)):
        assert traversal in verifiers_for(process)
    for process in (greedy_drafts(2), topk_tree((2,))):
        assert traversal not in verifiers_for(process)
