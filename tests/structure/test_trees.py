"""Optimal draft trees: the deterministic formula against the engine, the oracle and the
exhaustive search against brute force, OPT-Tree's rule against a transcription of its code,
Sequoia's DP where its model is exact, and heuristics never reported optimal."""
import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specsim.drafts import TreeProcess
from specsim.exact import expected_accepted
from specsim.models import iid, random_model
from specsim.structure import (CostModel, FixedTree, build_tree, deterministic_value, opt_tree, optimal_budget,
                               optimal_tree, ranked_tree, search_shapes, search_space, sequoia_shape, speed_of_light,
                               throughput)
from specsim.testing.strategies import model_pairs
from specsim.verifiers import TREE_VERIFIERS, deterministic_children


def _closed_trees(V, L, n):
    """Every prefix-closed set of n drafted paths over V tokens, depth <= L (brute force)."""
    nodes = [x for d in range(1, L + 1) for x in itertools.product(range(V), repeat=d)]
    for combo in itertools.combinations(nodes, n):
        s = set(combo)
        if all(len(x) == 1 or x[:-1] in s for x in combo):
            yield combo


@given(pair=model_pairs(V=3, depth=st.integers(1, 2)), n=st.integers(1, 4), pick=st.integers(0, 10 ** 6))
def test_deterministic_formula_matches_the_engine(pair, n, pick):
    # E[tau] of sample-and-match on a fixed tree = sum over drafted nodes of P_p(path)
    target, draft_model = pair
    trees = list(_closed_trees(3, 2, n))
    paths = trees[pick % len(trees)]
    tree = build_tree(target, draft_model, paths)
    engine = expected_accepted(deterministic_children, target, draft_model, 2, FixedTree(tree))
    assert deterministic_value(target, paths) == pytest.approx(engine, abs=1e-12)


@given(pair=model_pairs(V=3, depth=st.integers(1, 2)), n=st.integers(1, 5))
def test_oracle_is_the_brute_force_optimum_and_heuristics_are_not_called_optimal(pair, n):
    target, draft_model = pair
    brute = max(deterministic_value(target, t) for t in _closed_trees(3, 2, n))
    best = optimal_tree(target, draft_model, n, L=2)
    assert best.status == "exact optimum" and best.regret == 0.0
    assert best.expected_accepted == pytest.approx(brute, abs=1e-12)
    # the engine agrees on the oracle's own tree
    tree = build_tree(target, draft_model, best.paths)
    assert expected_accepted(deterministic_children, target, draft_model, 2, FixedTree(tree)) == pytest.approx(
        best.expected_accepted, abs=1e-12)
    for method in ("eagle2", "opt_tree"):
        h = optimal_tree(target, draft_model, n, L=2, method=method)
        assert h.status == "heuristic"
        assert h.optimum == pytest.approx(brute, abs=1e-12)
        assert h.expected_accepted <= brute + 1e-12
        assert h.regret == pytest.approx(brute - h.expected_accepted, abs=1e-12)


def test_a_deliberately_worse_tree_is_never_reported_optimal():
    # a drafter that ranks the target's tokens backwards: EAGLE-2's tree is strictly worse and
    # says so; the oracle's value beats every other tree of the same size
    target = iid([0.6, 0.3, 0.1])
    backwards = iid([0.1, 0.3, 0.6])
    best = optimal_tree(target, backwards, 3, L=2)
    worse = optimal_tree(target, backwards, 3, L=2, method="eagle2")
    assert worse.expected_accepted < best.expected_accepted - 0.1
    assert worse.status == "heuristic" and worse.regret > 0.1
    assert best.paths == ((0,), (0, 0), (1,))            # 0.6 + 0.36 + 0.3
    assert best.expected_accepted == pytest.approx(1.26, abs=1e-12)
    values = sorted(deterministic_value(target, t) for t in _closed_trees(3, 2, 3))
    assert values[-1] == pytest.approx(best.expected_accepted) and values[-2] < values[-1]


def _opt_tree_transcription(q, n, threshold, max_depth, L):
    """Jikai0Wang/OPT-Tree opt_classic/tree.py ``Tree.update`` in numpy: weights of the top-n of
    each layer, E = sum of the top-n weights of the layers before the newest, stop when the gain
    is <= threshold or depth reaches max_depth; returns the drafted paths."""
    def topk(row, k):
        o = np.lexsort((np.arange(row.size), -row))[:k]
        return [(float(row[t]), int(t)) for t in o if row[t] > 0]

    layers = [[(w, (t,)) for w, t in topk(q(()), n)]]
    weight = 0.0
    while True:
        cand = [(w * wc, x + (t,)) for w, x in layers[-1] for wc, t in topk(q(x), n)]
        cand.sort(key=lambda c: (-c[0], c[1]))
        layers.append(cand[:n])
        depth = len(layers)
        pool = sorted((c for lay in layers[:depth - 1] for c in lay), key=lambda c: (-c[0], len(c[1]), c[1]))[:n]
        total = sum(w for w, _ in pool)
        if total - weight > threshold and depth < max_depth and depth - 1 < L:
            weight = total
        else:
            return [x for _, x in pool]


@given(seed=st.integers(0, 10 ** 6), n=st.integers(1, 8), threshold=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
       max_depth=st.integers(2, 5))
def test_opt_tree_matches_a_transcription_of_its_code(seed, n, threshold, max_depth):
    draft_model = random_model(3, seed, 0.5)
    nodes, depth = opt_tree(draft_model, n, threshold, max_depth, L=4)
    got = {x for x, _ in nodes}
    want = set(_opt_tree_transcription(draft_model, n, threshold, max_depth, 4))
    assert got == want
    assert depth <= max_depth - 1 and all(len(x) <= depth for x in got)


def test_ranked_tree_is_prefix_closed_under_ties():
    nodes = ranked_tree(iid([0.5, 0.5]), 6, L=3)
    paths = [x for x, _ in nodes]
    assert all(len(x) == 1 or x[:-1] in paths[:i] for i, x in enumerate(paths))
    assert [w for _, w in nodes] == sorted((w for _, w in nodes), reverse=True)


# ------------------------------------------------------------------------------ sampled trees
def _per_tree(v):
    # the engine's reference path (per-tree laws), independent of the node-wise / process-law
    # fast paths the search goes through
    return dataclasses.replace(v, node_rule=None, batch_law=None, process_law=None, path_model=None)


@pytest.mark.parametrize("name", ["specinfer", "sequoia", "traversal", "traversal_repeats", "traversal_paths",
                                  "gbv", "khisti_optimal", "spectr"])
def test_exhaustive_search_is_the_brute_force_optimum(name):
    verifier = TREE_VERIFIERS[name]
    target, draft_model = random_model(3, 11), random_model(3, 12)
    best = search_shapes(verifier, target, draft_model, budget=3, L=2)
    assert best.status == "exact optimum over the searched shapes"
    # brute force: every width vector of depth <= 2 with widths <= 3, every mode, filtered here
    values = {}
    for widths in itertools.chain(itertools.product(range(1, 4), repeat=1), itertools.product(range(1, 4), repeat=2)):
        nodes = widths[0] + (widths[0] * widths[1] if len(widths) == 2 else 0)
        for mode in ("iid", "swor"):
            proc = TreeProcess(widths, mode)
            if nodes <= 3 and verifier.applies_to(proc):
                values[proc.name] = expected_accepted(_per_tree(verifier), target, draft_model, len(widths), proc)
    top = max(values.values())
    assert best.expected_accepted == pytest.approx(top, abs=1e-11)
    # a strictly worse shape is never the one returned
    worst = min(values, key=values.get)
    if values[worst] < top - 1e-9:
        assert best.drafting.name != worst


def test_search_with_a_cost_maximises_tokens_per_cost():
    target, draft_model = random_model(3, 2), random_model(3, 3)
    cost = CostModel(draft=0.05, target=lambda n: 1.0 + 0.3 * (n - 1))
    best = search_shapes(TREE_VERIFIERS["specinfer"], target, draft_model, 3, 2, cost=cost)
    rates = [throughput(TREE_VERIFIERS["specinfer"], target, draft_model, len(p.widths), p, cost).rate
             for p in search_space(3, 2, TREE_VERIFIERS["specinfer"])]
    assert best.throughput.rate == pytest.approx(max(rates), rel=1e-12)


@given(seed=st.integers(0, 10 ** 6), budget=st.integers(1, 4))
def test_sequoia_dp_is_exact_when_acceptance_is_position_independent(seed, budget):
    # i.i.d. rows: every node's j-th draw is accepted with the same a_j, the DP's model holds,
    # and its predicted value is the exact E[tau] of its tree (when a is already non-increasing)
    rng = np.random.default_rng(seed)
    target, draft_model = iid(rng.dirichlet(np.ones(3))), iid(rng.dirichlet(np.ones(3)))
    from specsim.structure.trees import _rank_acceptance
    a = _rank_acceptance(TREE_VERIFIERS["sequoia"], target, draft_model, 3)
    d = sequoia_shape(target, draft_model, budget, 2, "sequoia", width=3)
    assert d.status.startswith("DP optimum")
    if np.all(np.diff(a) <= 1e-15):
        assert d.expected_accepted == pytest.approx(d.predicted, abs=1e-10)


def test_speed_of_light_leading_term_on_uniform_rows():
    # uniform on V: mu = ln V, mu2 = (ln V)^2, so (mu + mu2) ln P / mu^2 = log_V P + ln P
    for V, P in [(2, 8), (3, 27), (4, 5)]:
        assert speed_of_light(iid(np.full(V, 1 / V)), P, 2) == pytest.approx(math.log(P, V) + math.log(P), rel=1e-12)


def test_optimal_budget_is_the_argmax_of_its_designs():
    target, draft_model = random_model(4, 0), random_model(4, 1)
    cost = CostModel(draft=0.02, target=lambda n: 1.0 + 0.05 * (n - 1))
    choice = optimal_budget(target, draft_model, cost, budgets=(1, 2, 4, 8), L=4)
    speeds = [d.throughput.speedup for d in choice.designs]
    assert choice.speedup == max(speeds) and choice.best == (1, 2, 4, 8)[int(np.argmax(speeds))]
    # the design's throughput is the engine's on the same fixed tree
    d = choice.designs[2]
    tree = build_tree(target, draft_model, d.paths)
    t = throughput(deterministic_children, target, draft_model, 4, FixedTree(tree), cost)
    assert t.speedup == pytest.approx(d.throughput.speedup, rel=1e-12)


def test_sequoia_dp_fixed_case_is_exercised():
    target, draft_model = iid([0.5, 0.3, 0.2]), iid([0.45, 0.35, 0.2])
    from specsim.structure.trees import _rank_acceptance
    a = _rank_acceptance(TREE_VERIFIERS["sequoia"], target, draft_model, 3)
    assert np.all(np.diff(a) < 0)
    for budget in (2, 3, 4):
        d = sequoia_shape(target, draft_model, budget, 2, "sequoia", width=3)
        assert d.expected_accepted == pytest.approx(d.predicted, abs=1e-10)
