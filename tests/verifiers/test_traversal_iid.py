"""Traversal on i.i.d. draws with the repeats kept (docs/theory.md §6.3.1): ``traversal_repeats``
(the trie, every draw an attempt) and ``traversal_paths`` (every draw its own subtree), both with
the draft row held at q.  Certified lossless by their per-tree laws, their node-state laws equal
to the per-tree laws, RRS at depth 1, block verification on a chain; the row update of draws
without replacement on i.i.d. draws, and repeats skipped, are lossy (negative controls)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from specsim import check_lossless, output_law, tree_verifier
from specsim.drafts import (DraftTree, chain, delayed_expansion, fixed_shape, greedy_drafts, iid_paths, swor_tree,
                            topk_tree)
from specsim.models import random_model
from specsim.testing.strategies import model_pairs
from specsim.testing.selftest.mutants import TREE_MUTANTS
from specsim.verifiers.chain import block
from specsim.verifiers import specinfer, traversal_paths, traversal_repeats, verifiers_for

VARIANTS = (traversal_repeats, traversal_paths)
#: Every i.i.d. process they apply to, small enough for the per-tree law at V = 3, L = 2.
IID = (iid_paths(2), iid_paths(3), delayed_expansion(1, 2), delayed_expansion(0, 3), fixed_shape((2, 2)),
       fixed_shape((3, 1)))
#: The per-tree laws alone (no node-state path): the reference the certificates rest on.
PER_TREE = {v.name: tree_verifier(v.name, needs=v.needs)(v.law) for v in VARIANTS}
#: Negative controls (specsim.testing.selftest.mutants): masking the rejected token (the
#: without-replacement row update) on i.i.d. draws, and the trie with q held but repeats skipped.
PATHS_MASKED = TREE_MUTANTS["traversal_iid_masked"].verifier
REPEATS_SKIPPED = TREE_MUTANTS["traversal_iid_repeats_skipped"].verifier


def _max_gap(a, b) -> float:
    return max(float(np.abs(a.emitted[m] - b.emitted[m]).max()) for m in a.emitted)


@pytest.mark.parametrize("verifier", VARIANTS, ids=lambda v: v.name)
@pytest.mark.parametrize("process", IID, ids=lambda p: p.name)
@settings(max_examples=3, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=model_pairs(V=3, depth=2))
def test_lossless_on_every_iid_process_by_the_per_tree_law(verifier, process, pair):
    cert = check_lossless(PER_TREE[verifier.name], pair.target, pair.draft_model, 2, process)
    assert cert.lossless, str(cert)


@pytest.mark.parametrize("verifier", VARIANTS, ids=lambda v: v.name)
@pytest.mark.parametrize("process,V,L", [(iid_paths(2), 3, 3), (iid_paths(2), 4, 3), (delayed_expansion(1, 2), 4, 3)],
                         ids=str)
def test_lossless_at_depth_3_and_v4_and_the_node_state_law_agrees(verifier, process, V, L):
    """Rows depending on the whole prefix (random_model); certified by the per-tree law."""
    t, d = random_model(V, 3), random_model(V, 4)
    cert = check_lossless(PER_TREE[verifier.name], t, d, L, process)
    assert cert.lossless, str(cert)
    ref = output_law(PER_TREE[verifier.name], t, d, L, process)
    assert _max_gap(output_law(verifier, t, d, L, process), ref) <= 1e-13


@pytest.mark.parametrize("verifier", VARIANTS, ids=lambda v: v.name)
@pytest.mark.parametrize("process", (*IID, chain()), ids=lambda p: p.name)
@settings(max_examples=2, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(pair=model_pairs(V=3, depth=2))
def test_node_state_law_equals_the_per_tree_law(verifier, process, pair):
    fast = output_law(verifier, pair.target, pair.draft_model, 2, process)
    ref = output_law(PER_TREE[verifier.name], pair.target, pair.draft_model, 2, process)
    assert _max_gap(fast, ref) <= 1e-13


@pytest.mark.parametrize("verifier", VARIANTS, ids=lambda v: v.name)
@pytest.mark.parametrize("K", [2, 3])
def test_depth_one_is_recursive_rejection_sampling(verifier, K):
    """At L = 1 both are SpecInfer's RRS over the root's draws, repeats included (§6.1)."""
    t, d = random_model(3, 7), random_model(3, 8)
    assert _max_gap(output_law(PER_TREE[verifier.name], t, d, 1, iid_paths(K)),
                    output_law(specinfer, t, d, 1, iid_paths(K))) <= 1e-15


@pytest.mark.parametrize("verifier", VARIANTS, ids=lambda v: v.name)
def test_first_token_acceptance_does_not_depend_on_the_depth(verifier):
    """§6.3.1: an attempt entered with weight w accepts with mean probability w whatever lies below
    it, so P(tau >= 1) at depth 2 and 3 is RRS's acceptance at depth 1 (node-state law, which
    equals the per-tree law above)."""
    t, d = random_model(3, 5), random_model(3, 6)
    for process in (iid_paths(2), iid_paths(3), fixed_shape((2, 2))):
        rrs = output_law(specinfer, t, d, 1, process).accepted_at_least[1]
        for L in (2, 3):
            at_least = output_law(verifier, t, d, L, process).accepted_at_least[1]
            assert at_least == pytest.approx(rrs, abs=1e-13)


@pytest.mark.parametrize("verifier", VARIANTS, ids=lambda v: v.name)
def test_on_a_chain_it_is_block_verification(verifier):
    t, d = random_model(3, 0), random_model(3, 1)
    assert _max_gap(output_law(PER_TREE[verifier.name], t, d, 3, chain()), output_law(block, t, d, 3)) <= 1e-15


@pytest.mark.parametrize("control", [PATHS_MASKED, REPEATS_SKIPPED], ids=lambda v: v.name)
def test_negative_controls_are_flagged_at_v3_depth_1(control):
    """The smallest counterexamples recorded in docs/theory.md §6.3.1: V = 3, L = 1, K = 2,
    random_model(3, 0) / random_model(3, 1), worst string (1, 0).  At V = 2 both pass."""
    t, d = random_model(3, 0), random_model(3, 1)
    cert = check_lossless(control, t, d, 1, iid_paths(2))
    assert not cert.lossless and cert.max_abs_error > 0.05 and cert.worst_sequence == (1, 0), str(cert)
    assert check_lossless(control, random_model(2, 0), random_model(2, 1), 1, iid_paths(2)).lossless


def test_the_repeats_are_what_the_merged_trie_loses():
    """Keeping the repeats as attempts beats the merged variant, which never tries a token twice;
    each is at most SpecInfer's RRS at depth 1 and both are lossless."""
    from specsim.verifiers import traversal

    t, d = random_model(3, 0), random_model(3, 1)
    for L in (1, 2):
        merged = check_lossless(traversal, t, d, L, iid_paths(2))
        repeats = check_lossless(PER_TREE["traversal_repeats"], t, d, L, iid_paths(2))
        assert merged.lossless and repeats.lossless
        assert repeats.expected_accepted > merged.expected_accepted + 0.05


def test_registered_for_iid_processes_only():
    for process in (chain(), iid_paths(2), delayed_expansion(2, 3), fixed_shape((2, 2))):
        assert all(v in verifiers_for(process) for v in VARIANTS)
    for process in (swor_tree(2), greedy_drafts(2), topk_tree((2,)), fixed_shape((2, 2), replacement=False)):
        assert not any(v in verifiers_for(process) for v in VARIANTS)


def test_paths_rejects_draws_that_do_not_split_among_the_copies():
    """A node reached by two draws owns draws in two equal shares; three draws do not split."""
    p = np.full((3, 3), 1 / 3)
    tree = DraftTree(tokens=(-1, 0, 1), parent=(-1, 0, 1), p=p, q=p.copy(), draws=((0, 0), (1,), ()))
    with pytest.raises(ValueError, match="node 1 is reached by 2 draws but has 1 draws"):
        traversal_paths(tree)
    assert sum(o.prob for o in traversal_repeats(tree)) == pytest.approx(1.0)
