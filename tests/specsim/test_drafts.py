"""Draft processes: exact enumeration (total mass 1, the stated tree laws), sampling, parsing.

Model pairs come from ``specsim.testing.strategies.model_pairs`` (prefix-dependent rows, zeros,
ties, one-hot and disjoint draft rows), so a failure shrinks to readable rows.  Bad input is in
test_argument_validation.py.
"""
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, strategies as st

from specsim.drafts import (DraftTree, chain, delayed_expansion, draft_laws, fixed_shape, iid_paths,
                            parse_drafting, swor_tree, topk_tree)
from specsim.models import iid, markov
from specsim.testing.stats import goodness_of_fit
from specsim.testing.strategies import distributions, model_pairs
from specsim.verifiers.multipath import tree_paths

PROCESSES = [iid_paths(2), iid_paths(3), swor_tree(2), swor_tree(3), fixed_shape((2, 2)),
             fixed_shape((2, 2), replacement=False), topk_tree((2, 2)), delayed_expansion(1, 2),
             delayed_expansion(1, 2, replacement=False), parse_drafting("binary:2"),
             parse_drafting("greedy:2")]


def _Q(model, path):
    """Q(path) = prod_k q(x_{k+1} | x^{1:k}), from the model's rows directly."""
    return math.prod(model(path[:i])[t] for i, t in enumerate(path))


def _key(tree):
    return tree.tokens, tree.parent, tree.draws


def _top(row, n):
    """The n most likely tokens with q > 0, ties to the lowest id."""
    order = np.argsort(-row, kind="stable")
    return tuple(int(t) for t in order[:n] if row[t] > 0)


@given(pair=model_pairs(), proc=st.sampled_from(PROCESSES))
def test_enumeration_is_a_distribution_over_valid_trees(pair, proc):
    target, draft_model = pair
    L = 2 if pair.V == 3 or len(proc.widths) < 2 else 1
    items = list(proc.enumerate(target, draft_model, L))
    assert abs(sum(Q for Q, _ in items) - 1) < 1e-12
    assert len({_key(t) for _, t in items}) == len(items)  # no tree enumerated twice
    for Q, t in items[:50]:
        assert Q > 0
        DraftTree(t.tokens, t.parent, t.p, t.q, t.draws)  # the public constructor's checks pass
        for u in range(t.num_nodes):
            np.testing.assert_array_equal(t.p[u], target(t.path(u)))
            if t.children[u]:
                np.testing.assert_array_equal(t.q[u], draft_model(t.path(u)))
        assert t.max_depth == L


@given(pair=model_pairs(V=3, depth=st.integers(1, 2)), K=st.sampled_from([2, 3]))
def test_iid_paths_law_is_the_product_of_path_probabilities(pair, K):
    target, draft_model = pair
    L = 2 if K == 2 else 1
    law = {}
    for Q, t in iid_paths(K).enumerate(target, draft_model, L):
        law[tuple(tuple(t.tokens[v] for v in nodes) for nodes in tree_paths(t))] = Q
    # every ordered K-tuple of supported paths appears once, with probability prod Q(path_i)
    n_paths = len(chain().arrays(target, draft_model, L)[1])
    assert len(law) == n_paths ** K
    for paths, Q in law.items():
        assert Q == pytest.approx(math.prod(_Q(draft_model, x) for x in paths), rel=1e-12)


@given(q=distributions(V=st.integers(3, 4)), K=st.sampled_from([2, 3]))
def test_swor_tree_is_successive_sampling(q, K):
    items = list(swor_tree(K).enumerate(iid(q), iid(q), 1))
    support = int(np.count_nonzero(q))
    k = min(K, support)
    assert len(items) == math.perm(support, k)  # every ordered k-tuple of distinct supported tokens
    for Q, t in items:
        xs = t.draws[0]
        assert len(set(xs)) == len(xs) == k and all(q[x] > 0 for x in xs)
        used = np.cumsum([0.0] + [q[x] for x in xs[:-1]])
        assert Q == pytest.approx(math.prod(q[x] / (1 - u) for x, u in zip(xs, used)), rel=1e-9)


@given(pair=model_pairs(V=3))
def test_with_replacement_merges_equal_tokens_and_expands_each_draw(pair):
    # a root drawing (a, a) makes one node for a, which then draws 2 * widths[1] times
    for _, t in fixed_shape((2, 2)).enumerate(*pair, 2):
        for u in t.children[0]:
            assert len(t.draws[u]) == 2 * t.draws[0].count(t.tokens[u])


@given(pair=model_pairs(V=4, depth=st.just(1)))
def test_topk_tree_takes_the_most_likely_tokens(pair):
    (Q, t), = list(topk_tree((2, 1)).enumerate(*pair, 3))
    assert Q == 1.0
    for u in range(t.num_nodes):
        if t.depth[u] < 3:
            assert t.draws[u] == _top(t.q[u], 2 if t.depth[u] == 0 else 1)


@given(pair=model_pairs(V=3))
def test_delayed_expansion_branches_at_depth_d(pair):
    for _, t in delayed_expansion(1, 2).enumerate(*pair, 3):
        assert len(t.draws[0]) == 1 and len(t.draws[1]) == 2
        assert all(len(t.draws[u]) == t.draws[t.parent[u]].count(t.tokens[u])
                   for u in range(2, t.num_nodes) if t.children[u])


@given(pair=model_pairs(V=3, relations=("zeros", "onehot", "disjoint")))
def test_degenerate_draft_rows_never_draft_unsupported_tokens(pair):
    """Only tokens with q > 0 are drafted, except in a greedy hub: it is the top widths[d] - 1 of
    q with ties and q = 0 tokens to the lowest id (docs/theory.md §6.6), so it may hold q = 0
    tokens, and then the last draw is void exactly when q has no mass outside the hub."""
    for proc in (iid_paths(2), swor_tree(3), fixed_shape((2, 2), replacement=False), parse_drafting("greedy:3")):
        items = list(proc.enumerate(*pair, 2))
        assert abs(sum(Q for Q, _ in items) - 1) < 1e-12, proc.name
        widths = proc.widths_for(2)
        for _, t in items:
            for u in range(t.num_nodes):
                if not t.draws[u]:
                    continue
                hub = ()
                if proc.mode == "greedy":
                    w = widths[t.depth[u]]
                    hub = tuple(int(v) for v in np.argsort(-t.q[u], kind="stable")[:w - 1])  # zeros too
                    assert t.draws[u][:len(hub)] == hub, proc.name
                    void = t.q[u][[v for v in range(t.q[u].size) if v not in hub]].sum() == 0
                    assert len(t.draws[u]) == len(hub) + (not void), proc.name
                assert all(t.q[u][x] > 0 for x in t.draws[u][len(hub):]), proc.name


# Prefix-dependent rows over V = 3, written out so a failure names them.
SAMPLING_TARGET = markov([0.2, 0.3, 0.5], [[0.5, 0.25, 0.25], [0.1, 0.6, 0.3], [0.3, 0.3, 0.4]])
SAMPLING_DRAFT = markov([0.4, 0.4, 0.2], [[0.6, 0.2, 0.2], [0.2, 0.3, 0.5], [0.25, 0.5, 0.25]])


@pytest.mark.parametrize("proc, L", [
    pytest.param(iid_paths(2), 1, id="iid_paths-K2-L1"),
    pytest.param(swor_tree(2), 1, id="swor_tree-K2-L1"),
    pytest.param(fixed_shape((2, 1), replacement=False), 2, id="swor-widths21-L2"),
    pytest.param(parse_drafting("greedy:2"), 2, id="greedy_drafts-K2-L2"),
])
def test_sampling_matches_enumeration(proc, L):
    """Pearson chi-square of 6000 sampled trees against the enumerated law at false-alarm rate
    1e-4 (seeded, so reproducible); with 99% power it detects a sampler whose tree law is at
    total variation >= detectable_tv (asserted below 0.1) from the enumeration."""
    law = {_key(t): Q for Q, t in proc.enumerate(SAMPLING_TARGET, SAMPLING_DRAFT, L)}
    rng = np.random.default_rng(0)
    counts = Counter(_key(proc.sample(SAMPLING_TARGET, SAMPLING_DRAFT, L, rng)) for _ in range(6000))
    assert set(counts) <= set(law)
    keys = list(law)
    test = goodness_of_fit([counts[k] for k in keys], [law[k] for k in keys], level=1e-4)
    assert not test.rejected, test
    assert test.detectable_tv < 0.1


def test_parse_drafting_builds_the_named_processes():
    assert parse_drafting("chain") == chain()
    assert parse_drafting(" IID:3 ").name == "iid_paths(3)"
    assert parse_drafting("swor:2") == swor_tree(2)
    assert parse_drafting("greedy:3").mode == "greedy"
    assert parse_drafting("binary:3").widths == (2, 2, 2)
    assert parse_drafting("fixed:2,1:swor") == fixed_shape((2, 1), replacement=False)
    assert parse_drafting("topk:3,2") == topk_tree((3, 2))
    assert parse_drafting("delayed:1,2") == delayed_expansion(1, 2)


def test_draft_laws():
    assert draft_laws(chain()) == {"iid", "swor", "paths", "chain"}
    assert draft_laws(iid_paths(2)) == {"iid", "paths"}
    assert draft_laws(fixed_shape((2, 2))) == {"iid"}
    assert draft_laws(swor_tree(2)) == {"swor"}
    assert draft_laws(topk_tree((3, 2))) == {"deterministic"}
    assert draft_laws(parse_drafting("greedy:2")) == {"greedy"}
    assert draft_laws(fixed_shape((1, 1))) == draft_laws(chain())  # one draw per node is a chain
    assert draft_laws(object()) == frozenset()  # a process that states no law guarantees none
