"""Throughput by renewal-reward: Leviathan's closed form, expected tree cost, optimal length."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specsim.drafts import iid_paths, swor_tree
from specsim.models import iid, random_model
from specsim.structure import CostModel, expected_cost, leviathan_speedup, optimal_length, throughput
from specsim.verifiers import block, specinfer, token


def _iid_pair(V, seed):
    rng = np.random.default_rng(seed)
    return iid(rng.dirichlet(np.ones(V))), iid(rng.dirichlet(np.ones(V)))


@given(V=st.integers(3, 4), seed=st.integers(0, 10 ** 6), L=st.integers(1, 4),
       c=st.sampled_from([0.0, 0.05, 0.2, 0.7]))
def test_leviathan_closed_form(V, seed, L, c):
    # i.i.d. rows: every drafted token is accepted with alpha = sum min(p, q), independently of
    # the past, so the exact engine must reproduce (1 - a^(L+1)) / ((1 - a)(L c + 1))
    target, draft_model = _iid_pair(V, seed)
    alpha = float(np.minimum(target(()), draft_model(())).sum())
    t = throughput(token, target, draft_model, L, cost=CostModel(draft=c))
    assert t.exact
    assert t.speedup == pytest.approx(leviathan_speedup(alpha, L, c), rel=1e-12, abs=1e-12)
    assert t.rate == pytest.approx(t.tokens / t.cost, rel=1e-15)


@given(V=st.integers(3, 4), seed=st.integers(0, 10 ** 6), c=st.sampled_from([0.02, 0.1, 0.3]))
def test_optimal_length_is_leviathans_gamma(V, seed, c):
    target, draft_model = _iid_pair(V, seed)
    alpha = float(np.minimum(target(()), draft_model(())).sum())
    closed = [leviathan_speedup(alpha, g, c) for g in range(1, 7)]
    choice = optimal_length(token, target, draft_model, CostModel(draft=c), max_length=6)
    assert choice.exact
    assert closed[choice.best - 1] == pytest.approx(max(closed), rel=1e-12)
    assert choice.speedup == pytest.approx(max(closed), rel=1e-12)


def test_leviathan_hand_value_in_rationals():
    # a = 3/5, gamma = 3, c = 1/10: (1 - (3/5)^4) / ((2/5)(13/10)) = 544/325
    a, g, c = Fraction(3, 5), 3, Fraction(1, 10)
    exact = (1 - a ** (g + 1)) / ((1 - a) * (g * c + 1))
    assert exact == Fraction(544, 325)
    t = throughput(token, iid([0.5, 0.5]), iid([0.9, 0.1]), g, cost=CostModel(draft=0.1))
    assert t.speedup == pytest.approx(float(exact), rel=1e-13)


@given(q=st.lists(st.integers(1, 9), min_size=3, max_size=4))
def test_expected_cost_counts_merged_iid_draws(q):
    # two i.i.d. root draws merge with probability sum q^2: E[|D|] = 1 + 2 - sum q^2 at L = 1,
    # with a target call costing n (the number of query tokens) and no draft cost
    total = sum(q)
    qf = [Fraction(x, total) for x in q]
    expect = 3 - sum(x * x for x in qf)
    draft_model = iid(np.array(q, float) / total)
    got = expected_cost(iid(np.full(len(q), 1 / len(q))), draft_model, 1, iid_paths(2),
                        CostModel(target=[1.0, 2.0, 3.0]))
    assert got == pytest.approx(float(expect), rel=1e-13)


def test_tree_throughput_is_tokens_over_cost_on_a_context_dependent_pair():
    target, draft_model = random_model(3, 4), random_model(3, 5)
    cost = CostModel(draft=0.05, target=lambda n: 1.0 + 0.1 * (n - 1), overhead=0.02)
    t = throughput(specinfer, target, draft_model, 2, iid_paths(3), cost)
    # E[cost] by hand from the enumeration: 2 draft passes over the depth-0 and depth-1 nodes
    manual = 0.0
    for Q, tree in iid_paths(3).enumerate(target, draft_model, 2):
        d1 = sum(1 for u in range(tree.num_nodes) if tree.depth[u] == 1)
        manual += Q * (0.02 + 0.05 + 0.05 + 1.0 + 0.1 * (tree.num_nodes - 1))
        assert d1 >= 1
    assert t.cost == pytest.approx(manual, rel=1e-12)
    assert t.speedup == pytest.approx(t.tokens / t.cost, rel=1e-14)


def test_throughput_refuses_a_verifier_that_does_not_apply():
    target, draft_model = random_model(3, 0), random_model(3, 1)
    with pytest.raises(ValueError, match="does not apply"):
        throughput(specinfer, target, draft_model, 2, swor_tree(2))
    with pytest.raises(ValueError, match="chain verifier"):
        throughput(block, target, draft_model, 2, iid_paths(2))
    with pytest.raises(TypeError, match="cost"):
        throughput(token, target, draft_model, 2, cost=0.5)
