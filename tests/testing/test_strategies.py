"""The public Hypothesis strategies of specsim.testing: valid, degenerate where asked, shrinkable."""
import itertools

import numpy as np
from hypothesis import find, given, settings
from hypothesis import strategies as st

from specsim.models import random_model
from specsim.testing.strategies import (RELATIONS, adversarial_pairs, available_draft_processes, chain_inputs,
                                        distribution_pairs, distributions, draft_processes, model_pairs)


@settings(max_examples=40)
@given(st.integers(2, 6).flatmap(lambda V: st.tuples(st.just(V), distributions(V))))
def test_distributions_are_probability_vectors(vr):
    V, row = vr
    assert row.shape == (V,) and row.dtype == np.float64
    assert np.all(row >= 0) and abs(row.sum() - 1) < 1e-12


@settings(max_examples=40)
@given(distributions(4, allow_zeros=False, ties=False, near_onehot=False))
def test_distribution_options_are_respected(row):
    assert np.all(row > 0)
    assert len(set(row.tolist())) == 4


def test_distributions_reach_degenerate_rows():
    # zeros, ties and near one-hot rows are all reachable (each search succeeds)
    find(distributions(3), lambda r: np.count_nonzero(r) == 1)
    find(distributions(3), lambda r: np.count_nonzero(r == 0) == 1)
    find(distributions(3), lambda r: 0.99 < r.max() < 1)


def test_shrinks_to_small_simple_pairs():
    pair = find(model_pairs(), lambda pr: True)
    assert pair.V == 3 and (pair.seed is not None or pair.depth == 1)
    drawn = find(model_pairs(seeded=False), lambda pr: True)
    assert drawn.V == 3 and drawn.depth == 1
    for row in (drawn.target(()), drawn.draft_model(()), find(distributions(4, near_onehot=False), lambda r: r.max() > 0.5)):
        assert _simple(row), row


def _simple(row, max_den=24):
    """Rows with small integer weights: row * k integral for some k <= max_den."""
    return any(np.allclose(row * k, np.round(row * k), atol=1e-9) for k in range(1, max_den + 1))


def _rows_along(model, V, depth, L=3):
    return {s: model(s) for k in range(L + 1) for s in itertools.product(range(V), repeat=k)}


@settings(max_examples=25)
@given(model_pairs(seeded=False))
def test_model_pairs_are_markov_of_the_given_depth(pair):
    assert pair.V >= 3
    t, d, D = pair.target, pair.draft_model, pair.depth
    for s, row in _rows_along(t, pair.V, D).items():
        if len(s) > D:  # longer prefixes use their last `depth` tokens
            assert np.array_equal(row, t(s[len(s) - D:]))
            assert np.array_equal(d(s), d(s[len(s) - D:]))


@settings(max_examples=25)
@given(adversarial_pairs())
def test_adversarial_relations_hold(pair):
    for ctx, rel in pair.relations.items():
        p, q = pair.target(ctx), pair.draft_model(ctx)
        assert rel in RELATIONS[1:]
        if rel == "equal":
            assert np.array_equal(p, q)
        elif rel == "disjoint":
            assert (p.min() > 0 and np.count_nonzero(q) == 1) or np.all(p[q > 0] == 0)
        elif rel == "onehot":
            assert np.count_nonzero(q) == 1
        elif rel == "zeros":
            assert q[int(np.argmax(p))] == 0 or np.allclose(q, 1 / pair.V)
        elif rel == "skewed":  # the draft's most likely token is the target's least likely
            assert int(np.argmax(q)) == int(np.argsort(-p, kind="stable")[-1])


def test_prefix_dependence_is_common():
    # most drawn pairs change their target row along a draft (identical rows hide wrong-row bugs)
    hits = []

    @settings(max_examples=30, derandomize=True)
    @given(model_pairs())
    def run(pair):
        hits.append(not np.array_equal(pair.target(()), pair.target((0,))))

    run()
    assert sum(hits) >= len(hits) // 2


def test_draft_processes_discovery_and_needs():
    procs = available_draft_processes("any")
    assert procs[0].name == "chain"
    assert [p.name for p in available_draft_processes("chain")] == ["chain"]
    from specsim import drafts
    for p in available_draft_processes("any", needs={"swor"}):
        assert "swor" in drafts.draft_laws(p)
    assert {p.name for p in available_draft_processes("tree")} >= {"iid_paths(2)", "swor_tree(2)"}
    assert find(draft_processes("any"), lambda p: True).name == "chain"


@settings(max_examples=30)
@given(st.sampled_from(RELATIONS).flatmap(lambda rel: st.tuples(st.just(rel), distribution_pairs(relations=(rel,)))))
def test_distribution_pairs_follow_their_relation(rel_pq):
    rel, (p, q) = rel_pq
    assert p.shape == q.shape and abs(p.sum() - 1) < 1e-12 and abs(q.sum() - 1) < 1e-12
    if rel == "equal":
        assert np.array_equal(p, q)
    elif rel == "onehot":
        assert np.count_nonzero(q) == 1
    elif rel == "zeros":
        assert q[int(np.argmax(p))] == 0 or np.allclose(q, 1 / p.size)


@settings(max_examples=30)
@given(chain_inputs(L=st.integers(1, 3)))
def test_chain_inputs_are_valid_chain_verifier_arguments(args):
    from specsim.verifiers.base import validate_chain_inputs
    draft, p, q = args
    L = len(draft)
    assert p.shape == (L + 1, q.shape[1]) and q.shape == (L, p.shape[1])
    validate_chain_inputs(draft, p, q)  # rows are distributions, every drafted token has q > 0


def test_chain_inputs_read_the_rows_along_the_draft():
    from specsim.testing.strategies import ModelPair
    pair = ModelPair(random_model(3, 4), random_model(3, 5), 3, None, seed=(4, 5))
    draft, p, q = find(chain_inputs(L=2, pairs=st.just(pair)), lambda a: True)
    for k in range(3):
        assert np.array_equal(p[k], pair.target(draft[:k]))
        if k < 2:
            assert np.array_equal(q[k], pair.draft_model(draft[:k]))
