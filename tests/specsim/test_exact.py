"""The exact engine: output law bookkeeping, contexts, draft-tree validation, certificate fields."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import specsim as s
from specsim.drafts import DraftTree
from specsim.exact import completed_law
from specsim.testing.strategies import adversarial_pairs, model_pairs


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


# ----------------------------------------------------------------------------- block's level-wise law
def _per_draft(verifier):
    """The verifier with its process_law removed: the engine's per-draft batch path, the reference."""
    import dataclasses
    return dataclasses.replace(verifier, process_law=None)


def _assert_level_law_matches_per_draft(t, d, L, context=()):
    """Block verification's prefix-shared law (process_law) against the per-draft batch law: the
    same terms summed in another order, so the law and every certificate field agree to 1e-15
    (the verdict, the draft count and any impossible string exactly)."""
    new, ref = s.output_law(s.block, t, d, L, context=context), s.output_law(_per_draft(s.block), t, d, L,
                                                                              context=context)
    assert new.n_drafts == ref.n_drafts
    for m in ref.emitted:
        assert np.abs(new.emitted[m] - ref.emitted[m]).max() <= 2e-15, m
    a, b = s.check_lossless(s.block, t, d, L, context=context), s.check_lossless(_per_draft(s.block), t, d, L,
                                                                                context=context)
    assert (a.lossless, a.n_drafts, a.impossible_string) == (b.lossless, b.n_drafts, b.impossible_string)
    for f in ("max_abs_error", "tv", "expected_accepted", "block_efficiency", "impossible_mass"):
        assert abs(getattr(a, f) - getattr(b, f)) <= 1e-15, f
    # C on all of V^{L+1} (the worst sequence of a lossless certificate is the argmax of rounding noise)
    shifted = t.shifted(context)
    assert np.abs(completed_law(new, shifted)[0] - completed_law(ref, shifted)[0]).max() <= 1e-15
    assert np.abs(a.accepted_at_least - b.accepted_at_least).max() <= 1e-15
    return a


@pytest.mark.parametrize("V,L,concentration,stream", [(3, 4, 0.1, "generator"), (4, 6, 1.0, "counter"),
                                                       (16, 3, 1.0, "counter"), (5, 3, 20.0, "generator")])
def test_block_level_law_matches_the_per_draft_law(V, L, concentration, stream):
    """Peaked (0.1: near one-hot), flat (20) and generic rows, up to V^L = 4096 drafts."""
    t = s.random_model(V, 5, concentration, stream=stream)
    d = s.random_model(V, 6, concentration, stream=stream)
    assert _assert_level_law_matches_per_draft(t, d, L).lossless
    _assert_level_law_matches_per_draft(t, d, 2, context=(1, 0))


def test_block_level_law_matches_the_per_draft_law_at_extreme_rows():
    """Rows with subnormal, zero, tied and one-hot entries, q = p and drafts of probability 0."""
    tiny = 5e-324
    rows = [np.array([1.0, 0.0, 0.0]), np.array([1 - 2 * tiny, tiny, tiny]), np.full(3, 1 / 3),
            np.array([0.5, 0.5, 0.0]), np.array([0.0, 1 - 1e-15, 1e-15])]

    def table(shift):
        return s.Model(lambda prefix: rows[(sum(prefix) * 7 + len(prefix) + shift) % len(rows)], 3, f"rows{shift}")
    for shift in range(3):
        _assert_level_law_matches_per_draft(table(0), table(shift), 3)
    _assert_level_law_matches_per_draft(table(1), table(1), 3)  # q = p: every draft accepted


@settings(max_examples=40, deadline=None)
@given(pair=st.one_of(model_pairs(), adversarial_pairs()), L=st.integers(1, 3))
def test_block_level_law_matches_the_per_draft_law_on_drawn_pairs(pair, L):
    _assert_level_law_matches_per_draft(pair.target, pair.draft_model, L)
    _assert_level_law_matches_per_draft(pair.target, pair.draft_model, 1, context=(2,))


def test_block_level_law_is_used_on_chains_only():
    """The engine takes the level-wise law on the chain process; elsewhere it returns None."""
    from specsim.drafts import iid_paths
    from specsim.verifiers.chain import _block_process_law
    t, d = _pair(3, 4)
    emitted, mass = {m: np.zeros(3 ** m) for m in (1, 2)}, np.zeros(2)
    assert _block_process_law(iid_paths(2), t, d, 1, emitted, mass) is None and not mass.any()
    assert _block_process_law(s.chain(), t, d, 1, emitted, mass) == 3 and mass.sum() == pytest.approx(1.0, abs=1e-15)
