"""The exact engine: output law bookkeeping, contexts, draft-tree validation, certificate fields."""
import numpy as np
import pytest

import specsim as s
from specsim.drafts import DraftTree


def _pair(V=3, seed=0):
    return s.random_model(V, seed, concentration=0.6), s.random_model(V, seed + 1, concentration=0.6)


def test_output_law_is_a_distribution_and_matches_depth_mass():
    t, d = _pair(4, 3)
    law = s.output_law(s.block, t, d, 3)
    total = sum(law.emitted[m].sum() for m in law.emitted)
    assert total == pytest.approx(1.0, abs=1e-13)
    for m in law.emitted:  # mass of strings of length m = P(tau = m - 1)
        assert law.emitted[m].sum() == pytest.approx(law.accepted_at_least[m - 1] - (law.accepted_at_least[m] if m <= 3 else 0), abs=1e-13)
    assert law.n_drafts == 4 ** 3
    assert law.prob((0,)) == pytest.approx(law.emitted[1][0])


def test_certificate_fields_and_str():
    t, d = _pair()
    c = s.check_lossless(s.hsd_released, t, d, 3)
    assert not c.lossless and "LOSSY" in str(c) and str(c.worst_sequence) in str(c)
    assert c.tv >= c.max_abs_error / 2 > 0
    assert c.block_efficiency == pytest.approx(c.expected_accepted + 1)
    ok = s.check_lossless(s.block, t, d, 3)
    assert ok.lossless and "LOSSLESS" in str(ok) and ok.atol == 1e-9


def test_context_shifts_both_models():
    t, d = _pair(3, 9)
    at_ctx = s.expected_accepted(s.block, t, d, 2, context=(2, 1))
    shifted = s.expected_accepted(s.block, t.shifted((2, 1)), d.shifted((2, 1)), 2)
    assert at_ctx == pytest.approx(shifted, abs=1e-15)
    assert at_ctx != pytest.approx(s.expected_accepted(s.block, t, d, 2), abs=1e-6)
    assert not s.check_lossless(s.hsd_released, t, d, 2, context=(0,)).lossless


def test_tolerance_is_a_parameter():
    t, d = _pair()
    c = s.check_lossless(s.hsd_released, t, d, 2)
    assert s.check_lossless(s.hsd_released, t, d, 2, atol=c.max_abs_error * 2).lossless


def test_draft_tree_validation():
    p = np.full((3, 3), 1 / 3)
    q = np.full((3, 3), 1 / 3)
    tree = DraftTree((-1, 0, 2), (-1, 0, 0), p, q)
    assert tree.children[0] == (1, 2) and tree.depth == (0, 1, 1) and not tree.is_chain
    assert tree.path(2) == (2,) and tree.path_index == (0, 0, 2)
    with pytest.raises(ValueError, match="parents must precede"):
        DraftTree((-1, 0, 1), (-1, 2, 0), p, q)
    with pytest.raises(ValueError, match="root"):
        DraftTree((0, 0, 1), (-1, 0, 0), p, q)
    q0 = q.copy(); q0[0] = [0.5, 0.5, 0.0]
    with pytest.raises(ValueError, match="q = 0"):
        DraftTree((-1, 0, 2), (-1, 0, 0), p, q0)
    with pytest.raises(ValueError, match="repeats token"):
        DraftTree((-1, 1, 1), (-1, 0, 0), p, q)
    with pytest.raises(ValueError, match="shape"):
        DraftTree((-1, 0, 2), (-1, 0, 0), p[:2], q)
    with pytest.raises(ValueError, match="chain verifier needs a chain"):
        tree.chain_arrays()
    chain = DraftTree.from_chain((1, 2), p, q[:2])
    assert chain.is_chain and chain.chain_arrays()[0] == (1, 2)


def test_chain_process_enumerates_probability_one_and_skips_impossible_drafts():
    t = s.iid([0.2, 0.3, 0.5])
    d = s.from_function(lambda pre: [0.5, 0.5, 0.0] if len(pre) == 0 else [0.2, 0.3, 0.5], 3)
    items = list(s.chain().enumerate(t, d, 2))
    assert len(items) == 6 and sum(pr for pr, _ in items) == pytest.approx(1.0)
    assert all(tree.tokens[1] != 2 for _, tree in items)


@pytest.mark.parametrize("name", ["token", "onehot", "block", "hsd_capped", "hsd_released", "greedy"])
def test_vectorised_chain_path_equals_per_draft_path(name):
    """The engine's batched path (batch_law over all drafts) and its per-tree path agree exactly."""
    from specsim.verifiers.chain import CHAIN_VERIFIERS
    v = CHAIN_VERIFIERS[name]
    per_draft = s.chain_verifier(v.name, lossless=v.lossless)(v.law)
    t, d = _pair(3, 17)
    a, b = s.output_law(v, t, d, 3), s.output_law(per_draft, t, d, 3)
    for m in a.emitted:
        assert np.allclose(a.emitted[m], b.emitted[m], atol=1e-15)
    assert a.n_drafts == b.n_drafts


def test_batched_law_validated():
    bad = s.chain_verifier("bad", batched=True)(
        lambda drafts, p, q: (np.full((len(drafts), drafts.shape[1] + 1), 0.5), p))
    with pytest.raises(ValueError, match="not a distribution over outcomes"):
        s.check_lossless(bad, *_pair(), 2)


def _nodewise_cases():
    from specsim.drafts import delayed_expansion, fixed_shape, greedy_drafts, iid_paths, swor_tree, topk_tree
    from specsim.verifiers import TREE_VERIFIERS
    procs = [iid_paths(2), swor_tree(2), fixed_shape((2, 2)), fixed_shape((2, 2), replacement=False),
             topk_tree((2, 2)), delayed_expansion(1, 2), greedy_drafts(2), greedy_drafts(3)]
    for name, v in TREE_VERIFIERS.items():
        if v.node_rule is None:
            continue
        for proc in procs:
            if v.applies_to(proc):
                yield pytest.param(v, proc, id=f"{name}-{proc.name}")


@pytest.mark.parametrize("verifier,process", list(_nodewise_cases()))
def test_nodewise_path_equals_per_tree_path(verifier, process):
    """Summing node by node (node_rule) gives exactly the per-tree enumeration's law."""
    per_tree = s.tree_verifier(verifier.name, needs=verifier.needs, lossless=verifier.lossless)(verifier.law)
    t, d = _pair(3, 23)
    a, b = s.output_law(verifier, t, d, 2, process), s.output_law(per_tree, t, d, 2, process)
    for m in a.emitted:
        assert np.allclose(a.emitted[m], b.emitted[m], atol=1e-14)
    assert s.check_lossless(verifier, t, d, 2, process).lossless


def test_nodewise_path_certifies_depth3_binary_trees_quickly():
    from specsim.drafts import parse_drafting
    from specsim.verifiers import sequoia
    t, d = _pair(4, 29)
    c = s.check_lossless(sequoia, t, d, 3, parse_drafting("binary:3"))
    assert c.lossless and 0 < c.expected_accepted <= 3
    assert c.n_drafts < 5000  # node-level evaluations, not the ~10^7 trees of the process


def test_completed_law_sums_to_one_and_its_target_is_the_joint_law():
    t, d = _pair(3, 5)
    C, P = s.exact.completed_law(s.output_law(s.hsd_released, t, d, 2, context=(1,)), t.shifted((1,)))
    assert C.sum() == pytest.approx(1.0, abs=1e-13)
    assert np.array_equal(P, t.shifted((1,)).joint(3))
