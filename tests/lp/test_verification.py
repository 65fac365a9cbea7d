"""The information-agnostic verification LP (lp.verification): equals block verification on chains,
certifies lossy rules, yields a verifier the exact engine certifies, and works for tree draft processes."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lp.coupling import multidraft_bound
from lp.verification import tree_key, verification_lp
from specsim import DraftTree, Model, Outcome, block, check_lossless, chain, expected_accepted, hsd_released, iid, random_model
from specsim.drafts import fixed_shape, iid_paths, swor_tree
from specsim.testing.strategies import model_pairs
from specsim.verifiers.base import tree_verifier
from specsim.verifiers import verifiers_for

TOY_P, TOY_Q = [1 / 3, 2 / 3], [2 / 3, 1 / 3]
#: docs/theory.md §12, R2/R3: block verification (= LP optimum) on the toy for L = 1..4.
TOY_BV = [Fraction(2, 3), Fraction(11, 9), Fraction(5, 3), Fraction(166, 81)]


# --------------------------------------------------------------------------- chains: LP = BV
@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_toy_anchor_equals_block_verification(L):
    sol = verification_lp(iid(TOY_P), iid(TOY_Q), L)
    assert abs(sol.value - float(TOY_BV[L - 1])) < 1e-9
    assert abs(sol.block_efficiency - float(TOY_BV[L - 1]) - 1) < 1e-9
    assert abs(expected_accepted(block, iid(TOY_P), iid(TOY_Q), L) - sol.value) < 1e-9


@settings(max_examples=8, deadline=None)
@given(st.sampled_from([(2, 1), (2, 2), (2, 3), (2, 4), (3, 1), (3, 2), (3, 3)]).flatmap(
    lambda VL: st.tuples(st.just(VL[1]), model_pairs(V=VL[0]))))
def test_chain_lp_equals_block_verification(drawn):
    L, (target, draft_model) = drawn
    sol = verification_lp(target, draft_model, L)
    assert abs(sol.value - expected_accepted(block, target, draft_model, L)) < 1e-7


def test_chain_lp_with_trees_of_tiny_probability():
    """Hypothesis seed 3788207275: draft rows (0.999999, 1e-6) make chains of probability ~1e-24;
    with pi scaled by Pr(D) in the columns HiGHS returned no solution and Clarabel an inaccurate one
    (E[tau] 1.236 against block's 2.3144).  The LP is now in the joint mass Pr(D) pi."""
    tail = {(0, 0): (0.0, 1.0), (0, 1): (0.999, 0.001), (1, 0): (0.999, 0.001), (1, 1): (0.999999, 1e-6)}

    def draft(prefix):
        if len(prefix) < 2:
            return np.array([0.0, 1.0]) if prefix == (0,) else np.full(2, 0.5)
        return np.array(tail[tuple(prefix[-2:])])

    target, draft_model = Model(lambda prefix: np.full(2, 0.5), 2), Model(draft, 2)
    sol = verification_lp(target, draft_model, 4)
    assert abs(sol.value - expected_accepted(block, target, draft_model, 4)) < 1e-9
    cert = check_lossless(sol.verifier, target, draft_model, 4)
    assert cert.lossless and abs(cert.expected_accepted - sol.value) < 1e-9


def test_chain_lp_with_coefficients_below_highs_default_drop_threshold():
    """Hypothesis seed 3688520293: rows depending on the last token with entries 5e-7 give
    continuation probabilities below 1e-9, which HiGHS drops by default (small_matrix_value),
    and it then declared the LP infeasible; it now keeps entries down to 1e-12."""
    third = np.full(3, 1 / 3)
    p_after = {0: np.array([0.999, 5e-4, 5e-4]), 1: third, 2: np.array([0.999999, 5e-7, 5e-7])}
    q_after = {0: np.array([5e-7, 0.999999, 5e-7]), 1: third, 2: third}
    target = Model(lambda prefix: p_after[prefix[-1]] if prefix else third, 3)
    draft_model = Model(lambda prefix: q_after[prefix[-1]] if prefix else third, 3)
    sol = verification_lp(target, draft_model, 3)
    assert sol.solver == "HIGHS" and abs(sol.value - expected_accepted(block, target, draft_model, 3)) < 1e-9


def test_chain_lp_v3_l4_and_context():
    target, draft = random_model(3, 21), random_model(3, 22)
    sol = verification_lp(target, draft, 4)
    assert abs(sol.value - expected_accepted(block, target, draft, 4)) < 1e-7
    cert = check_lossless(sol.verifier, target, draft, 4)
    assert cert.lossless and abs(cert.expected_accepted - sol.value) < 1e-9
    at = verification_lp(target, draft, 2, context=(2, 0))
    assert abs(at.value - expected_accepted(block, target, draft, 2, context=(2, 0))) < 1e-7
    assert check_lossless(at.verifier, target, draft, 2, context=(2, 0)).lossless


# --------------------------------------------------------------------------- certificates
def test_hsd_released_beats_the_lp_so_it_is_lossy():
    cases = [(iid(TOY_P), iid(TOY_Q), 2), (random_model(3, 5), random_model(3, 6), 3)]
    for target, draft, L in cases:
        lp = verification_lp(target, draft, L).value
        hsd = expected_accepted(hsd_released, target, draft, L)
        assert hsd > lp + 1e-6                                   # no lossless rule exceeds the LP
        assert not check_lossless(hsd_released, target, draft, L).lossless
        assert expected_accepted(block, target, draft, L) <= lp + 1e-9   # lossless control


@pytest.mark.parametrize("V,L", [(3, 2), (3, 3), (2, 4)])
def test_lp_verifier_passes_exact_check_and_mutant_fails(V, L):
    # concentrations >= 0.5: with near-zero rows HiGHS's ~1e-8 feasibility slack can exceed atol 1e-9
    target, draft = random_model(V, 40 + L), random_model(V, 50 + L, 0.5)
    sol = verification_lp(target, draft, L)
    cert = check_lossless(sol.verifier, target, draft, L)
    assert cert.lossless and abs(cert.expected_accepted - sol.value) < 1e-9

    def mutant(tree):
        outs = sol.verifier(tree)
        o = max(outs, key=lambda o: o.prob)                      # emit a fixed token instead
        bad = np.zeros(V)
        bad[0] = 1.0
        return [x if x is not o else Outcome(o.prob, o.accepted, bad) for x in outs]

    assert not check_lossless(tree_verifier("mutant", lossless=False)(mutant), target, draft, L).lossless


# --------------------------------------------------------------------------- trees
@pytest.mark.parametrize("V,K", [(3, 2), (3, 3), (4, 2)])
def test_tree_lp_at_depth_one_is_the_multidraft_optimum(V, K):
    target, draft = random_model(V, 7 * V + K), random_model(V, 3 * V + K, 0.5)
    sol = verification_lp(target, draft, 1, drafting=iid_paths(K))
    assert abs(sol.value - multidraft_bound(target(()), draft(()), K).value) < 1e-8
    assert sol.n_drafts < V ** K                                 # orderings merged
    assert check_lossless(sol.verifier, target, draft, 1, drafting=iid_paths(K)).lossless


def test_tree_lp_two_paths_beats_one_and_is_lossless():
    target, draft = random_model(3, 8), random_model(3, 9)
    two = verification_lp(target, draft, 2, drafting=iid_paths(2))
    one = verification_lp(target, draft, 2)
    assert two.value >= one.value - 1e-9                         # a verifier may ignore the second path
    cert = check_lossless(two.verifier, target, draft, 2, drafting=iid_paths(2))
    assert cert.lossless and abs(cert.expected_accepted - two.value) < 1e-9


@pytest.mark.parametrize("process", [iid_paths(2), swor_tree(2), fixed_shape((2, 1), replacement=False)],
                         ids=lambda p: p.name)
def test_every_lossless_tree_verifier_is_at_most_the_tree_lp(process):
    """The tree LP bounds every lossless verifier on the same draft process; lossy ones may exceed it."""
    target, draft = random_model(3, 31, 0.7), random_model(3, 32, 0.7)
    bound = verification_lp(target, draft, 2, drafting=process).value
    checked = 0
    for v in verifiers_for(process):
        cert = check_lossless(v, target, draft, 2, drafting=process)
        if cert.lossless:
            assert cert.expected_accepted <= bound + 1e-7, (v.name, cert.expected_accepted, bound)
            checked += 1
    assert checked >= 3


def test_tree_key_ignores_node_numbering():
    p, q = np.full((3, 3), 1 / 3), np.full((3, 3), 1 / 3)
    a = DraftTree((-1, 0, 1), (-1, 0, 0), p, q)
    b = DraftTree((-1, 1, 0), (-1, 0, 0), p, q)
    assert tree_key(a) == tree_key(b)
