"""Draft processes: exact enumeration (total mass 1, correct tree laws), sampling, parsing."""
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import chisquare

from specsim.drafts import (DraftTree, TreeProcess, chain, delayed_expansion, draft_laws, fixed_shape,
                            iid_paths, parse_drafting, swor_tree, topk_tree)
from specsim.models import from_function, iid, random_model
from specsim.verifiers.tree import tree_paths

PROCESSES = [iid_paths(2), iid_paths(3), swor_tree(2), swor_tree(3), fixed_shape((2, 2)),
             fixed_shape((2, 2), replacement=False), topk_tree((2, 2)), delayed_expansion(1, 2),
             delayed_expansion(1, 2, replacement=False), parse_drafting("binary:2")]


def _Q(model, path):
    pr = 1.0
    for i, t in enumerate(path):
        pr *= model(path[:i])[t]
    return pr


def _key(tree):
    return tree.tokens, tree.parent, tree.draws


@settings(max_examples=15)
@given(V=st.sampled_from([3, 4]), seed=st.integers(0, 10_000), conc=st.sampled_from([0.3, 1.0]),
       proc=st.sampled_from(PROCESSES))
def test_enumeration_is_a_distribution_over_valid_trees(V, seed, conc, proc):
    target, draft = random_model(V, seed), random_model(V, seed + 1, conc)
    L = 2 if V == 3 or len(proc.widths) < 2 else 1
    items = list(proc.enumerate(target, draft, L))
    assert abs(sum(p for p, _ in items) - 1) < 1e-12
    assert len({_key(t) for _, t in items}) == len(items)  # no tree enumerated twice
    for prob, t in items[:50]:
        assert prob > 0
        # re-validating the tree through the public constructor must succeed
        DraftTree(t.tokens, t.parent, t.p, t.q, t.draws)
        for u in range(t.num_nodes):
            np.testing.assert_array_equal(t.p[u], target(t.path(u)))
            if t.children[u]:
                np.testing.assert_array_equal(t.q[u], draft(t.path(u)))
        assert t.max_depth == L


@settings(max_examples=10)
@given(seed=st.integers(0, 10_000), K=st.sampled_from([2, 3]))
def test_iid_paths_law_is_the_product_of_path_probabilities(seed, K):
    target, draft = random_model(3, seed), random_model(3, seed + 7, 0.5)
    L = 2 if K == 2 else 1
    law = {}
    for prob, t in iid_paths(K).enumerate(target, draft, L):
        paths = tuple(tuple(t.tokens[v] for v in nodes) for nodes in tree_paths(t))
        law[paths] = prob
    # every ordered K-tuple of supported paths appears once, with probability prod Q(path_i)
    assert len(law) == 3 ** (L * K)
    for paths, prob in law.items():
        assert prob == pytest.approx(np.prod([_Q(draft, x) for x in paths]), rel=1e-12)


def test_swor_tree_is_successive_sampling():
    q = np.array([0.5, 0.3, 0.2])
    items = list(swor_tree(2).enumerate(iid([0.2, 0.3, 0.5]), iid(q), 1))
    assert len(items) == 6
    for prob, t in items:
        a, b = t.draws[0]
        assert a != b
        assert prob == pytest.approx(q[a] * q[b] / (1 - q[a]), rel=1e-12)
    # support smaller than the width: only supported tokens, all of them
    items = list(swor_tree(3).enumerate(iid([0.2, 0.3, 0.5]), iid([0.6, 0.4, 0.0]), 1))
    assert {tuple(sorted(t.draws[0])) for _, t in items} == {(0, 1)}


def test_with_replacement_merges_equal_tokens_and_expands_each_draw():
    # root draws (a, a): the merged node carries 2 * widths[1] draws
    items = list(fixed_shape((2, 2)).enumerate(iid([0.2, 0.3, 0.5]), iid([0.1, 0.6, 0.3]), 2))
    for _, t in items:
        for u in t.children[0]:
            assert len(t.draws[u]) == 2 * t.draws[0].count(t.tokens[u])


def test_topk_and_delayed_shapes():
    draft = random_model(4, 3)
    target = random_model(4, 4)
    (prob, t), = list(topk_tree((2, 1)).enumerate(target, draft, 3))
    assert prob == 1.0
    assert set(t.draws[0]) == set(np.argsort(-draft(()))[:2].tolist())
    assert [len(t.draws[u]) for u in range(t.num_nodes) if t.depth[u] < 3] == [2, 1, 1, 1, 1]
    for _, t in delayed_expansion(1, 2).enumerate(target, draft, 3):
        assert len(t.draws[0]) == 1 and len(t.draws[1]) == 2
        assert all(len(t.draws[u]) == t.draws[t.parent[u]].count(t.tokens[u])
                   for u in range(2, t.num_nodes) if t.children[u])


def test_degenerate_rows_never_draft_unsupported_tokens():
    draft = from_function(lambda s: [0.0, 1.0, 0.0] if len(s) % 2 else [0.5, 0.0, 0.5], 3)
    target = random_model(3, 5)
    for proc in (iid_paths(2), swor_tree(3), fixed_shape((2, 2), replacement=False)):
        items = list(proc.enumerate(target, draft, 2))
        assert abs(sum(p for p, _ in items) - 1) < 1e-12
        for _, t in items:
            assert all(t.q[t.parent[u], t.tokens[u]] > 0 for u in range(1, t.num_nodes))


@pytest.mark.parametrize("proc", [iid_paths(2), swor_tree(2), fixed_shape((2, 1), replacement=False)])
def test_sampling_matches_enumeration(proc):
    """Chi-square goodness of fit of sampled trees, N = 6000, false-alarm rate 1e-4 per process
    (seeded, so the outcome is reproducible); a wrong draw law with TV >= 0.05 over <= 12 trees
    is rejected with power > 0.99."""
    target, draft = random_model(3, 11), random_model(3, 12)
    items = list(proc.enumerate(target, draft, 2 if proc.widths == (2, 1) else 1))
    probs = {_key(t): p for p, t in items}
    rng = np.random.default_rng(0)
    L = items[0][1].max_depth
    counts = Counter(_key(proc.sample(target, draft, L, rng)) for _ in range(6000))
    assert set(counts) <= set(probs)
    keys = list(probs)
    obs = np.array([counts[k] for k in keys])
    exp = np.array([probs[k] for k in keys]) * obs.sum()
    assert chisquare(obs, exp).pvalue > 1e-4


def test_parse_drafting_and_laws():
    assert parse_drafting("chain") == chain()
    assert parse_drafting("iid:3").name == "iid_paths(3)"
    assert parse_drafting("swor:2").laws == {"swor"}
    assert parse_drafting("binary:3").widths == (2, 2, 2)
    assert parse_drafting("fixed:2,1:swor").mode == "swor"
    assert parse_drafting("topk:3,2").laws == {"deterministic"}
    assert parse_drafting("delayed:1,2").widths == (1, 2)
    assert draft_laws(chain()) >= {"iid", "swor", "paths", "chain"}
    assert draft_laws(iid_paths(2)) == {"iid", "paths"}
    assert draft_laws(fixed_shape((2, 2))) == {"iid"}
    for bad in ["", "iid", "iid:x", "swor:2:3", "binary:0", "tree:2", "fixed:2:wor", "delayed:1", 3]:
        with pytest.raises(ValueError):
            parse_drafting(bad)


def test_bad_arguments_raise():
    for bad in [(), (0,), (2, -1), (1.5,), (True,)]:
        with pytest.raises(ValueError):
            TreeProcess(bad)
    with pytest.raises(ValueError):
        TreeProcess((2,), mode="uniform")
    with pytest.raises(ValueError):
        iid_paths(0)
    with pytest.raises(ValueError):
        list(iid_paths(2).enumerate(random_model(3, 0), random_model(3, 1), 0))
    with pytest.raises(ValueError):
        list(iid_paths(2).enumerate(random_model(3, 0), random_model(4, 1), 1))
