"""Optimal stopping of drafting (docs/theory.md §14.3): brute force over every stopping rule,
Leviathan's fixed-length optimum under i.i.d. acceptance, the exact engine as a second evaluator
of every policy, SpecDec++'s threshold theorem for token-level SD and the finding for block
verification, and the transformers schedule's Markov chain."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim.exact import output_law
from specsim.models import Model, iid, random_model
from specsim.structure import CostModel, leviathan_speedup
from specsim.structure.policies import (CallablePolicy, ConfidenceThreshold, EntropyStop, FixedLength,
                                        HeuristicSchedule, SpecDecPP)
from specsim.structure.stopping import (_decode, _prefixes, brute_force_stopping, optimal_stopping, policy_drafting,
                                        policy_value)
from specsim.testing.strategies import model_pairs
from specsim.verifiers import block, token, traversal
from specsim.verifiers.chain import block_weights

COSTS = [CostModel(draft=0.1), CostModel(draft=0.3, target=[1.0, 1.05, 1.1, 1.2], overhead=0.02),
         CostModel(draft=0.0, target=lambda n: 1.0 + 0.25 * (n - 1))]


@settings(max_examples=8)
@given(model_pairs(V=3, depth=st.integers(1, 2)), st.sampled_from(COSTS), st.sampled_from([token, block]))
def test_optimal_stopping_equals_brute_force_over_all_rules_V3_L2(pair, cost, verifier):
    """Every deterministic rule on the 1 + 3 internal prefixes (16 rules), against Dinkelbach and bisection."""
    brute = brute_force_stopping(verifier, pair.target, pair.draft_model, 2, cost)
    dink = optimal_stopping(verifier, pair.target, pair.draft_model, 2, cost)
    bis = optimal_stopping(verifier, pair.target, pair.draft_model, 2, cost, method="bisection")
    assert dink.value == pytest.approx(brute, abs=1e-12)
    assert bis.value == pytest.approx(brute, abs=1e-10)


@pytest.mark.parametrize("seed", [0, 7])
@pytest.mark.parametrize("verifier", [token, block])
def test_optimal_stopping_equals_brute_force_V2_L3(seed, verifier):
    """V = 2, L = 3: 1 + 2 + 4 internal prefixes, 128 rules; also with drafting forced (min_length = 1)."""
    t, d = random_model(2, seed, 0.5), random_model(2, 100 + seed, 0.5)
    for cost in COSTS[:2]:
        for m in (0, 1):
            brute = brute_force_stopping(verifier, t, d, 3, cost, min_length=m)
            opt = optimal_stopping(verifier, t, d, 3, cost, min_length=m)
            assert opt.value == pytest.approx(brute, abs=1e-12)
            assert opt.length_law[:m].sum() == 0


def test_the_optimum_beats_every_fixed_length_and_its_rule_replays():
    t, d, cost = random_model(3, 3, 0.7), random_model(3, 1003, 0.7), CostModel(draft=0.1)
    opt = optimal_stopping(token, t, d, 3, cost)
    fixed = [policy_value(L, token, t, d, 3, cost, optimum=opt) for L in (1, 2, 3)]
    assert all(f.regret >= -1e-12 for f in fixed)
    replay = policy_value(opt.policy, token, t, d, 3, cost, optimum=opt)
    assert replay.value == pytest.approx(opt.value, abs=1e-13) and abs(replay.regret) < 1e-12


@pytest.mark.parametrize("alpha", [0.55, 0.8, 0.93])
@pytest.mark.parametrize("c", [0.02, 0.1, 0.3])
def test_leviathan_fixed_length_optimum_is_recovered_under_iid_acceptance(alpha, c):
    """q = (1/2, 1/2, 0), p = (a/2, a/2, 1 - a): every drafted token is accepted with probability a
    whatever its value, so no adaptive rule can beat the best fixed length, and the optimum is
    Leviathan et al.'s closed form maximised over gamma = 0..L."""
    L = 6
    target, draft_model = iid([alpha / 2, alpha / 2, 1 - alpha]), iid([0.5, 0.5, 0.0])
    opt = optimal_stopping(token, target, draft_model, L, CostModel(draft=c))
    closed = [leviathan_speedup(alpha, g, c) for g in range(L + 1)]
    assert opt.speedup == pytest.approx(max(closed), rel=1e-12)
    assert opt.length_law[int(np.argmax(closed))] == pytest.approx(1.0)


POLICIES = [FixedLength(2), ConfidenceThreshold(0.4), ConfidenceThreshold(0.6, rule="top"), SpecDecPP(0.5),
            EntropyStop(0.9), CallablePolicy(lambda s: s.depth >= 1 and s.prefix[-1] == 0, "stop_on_0"),
            HeuristicSchedule(iterations=1, start=2)]


@pytest.mark.parametrize("policy", POLICIES[:-1], ids=lambda p: p.name)
@pytest.mark.parametrize("verifier", [token, block])
def test_policy_tokens_equal_the_exact_engine_over_the_policy_process(policy, verifier):
    """E[T] of policy_value (forward pass over prefixes) = block efficiency of the exact engine's
    output law over the policy's draft process (a different enumeration and accumulation)."""
    t, d = random_model(3, 11, 0.7), random_model(3, 1011, 0.7)
    v = policy_value(policy, verifier, t, d, 3, CostModel(draft=0.1))
    law = output_law(verifier, t, d, 3, drafting=policy_drafting(policy))
    assert v.tokens == pytest.approx(law.block_efficiency, abs=1e-12)
    assert v.length_law.sum() == pytest.approx(1.0)


def test_traversal_on_chains_has_block_verification_optimum():
    t, d, cost = random_model(3, 5, 0.7), random_model(3, 1005, 0.7), CostModel(draft=0.1)
    assert optimal_stopping(traversal, t, d, 3, cost).value == pytest.approx(
        optimal_stopping(block, t, d, 3, cost).value, abs=1e-12)


def test_schedule_one_iteration_is_its_start_length_and_all_accept_drives_it_to_the_horizon():
    t, d, cost = random_model(3, 2, 0.7), random_model(3, 1002, 0.7), CostModel(draft=0.1)
    for s in (1, 2, 3):
        one = policy_value(HeuristicSchedule(start=s, iterations=1), token, t, d, 3, cost)
        assert one.value == pytest.approx(policy_value(FixedLength(s), token, t, d, 3, cost).value, abs=1e-13)
    same = iid([0.2, 0.3, 0.5])                          # q = p: every draft accepted, s climbs to L
    stat = policy_value(HeuristicSchedule(), token, same, same, 3, cost)
    assert stat.length_law[3] == pytest.approx(1.0) and stat.tokens == pytest.approx(4.0)


def test_schedule_stationary_law_is_invariant():
    sched = HeuristicSchedule()
    a = np.array([0.7, 0.45, 0.2, 0.1])
    pi = sched.weights(a)
    assert np.allclose(pi @ sched.transition(a), pi, atol=1e-13) and pi.sum() == pytest.approx(1.0)
    # a long horizon converges to the stationary law
    assert np.allclose(HeuristicSchedule(iterations=20000, start=4).weights(a), pi, atol=1e-3)


# ---------------------------------------------------------------- SpecDec++ and the block finding
def _prefix_stats(verifier, t, d, L, opt):
    """(depth, P(>= 1 token-level rejection), 1 - block weight, one-step gain, stopped) per prefix."""
    pre = _prefixes(verifier, t, d, L, ())
    V = t.V
    out = []
    for k in range(1, L):
        for code in np.flatnonzero(pre.Q[k] > 0):
            x = _decode(int(code), k, V)
            codes = [int(code) // V ** (k - i) for i in range(k + 1)]
            p = np.array([pre.ptab[i][codes[i]] for i in range(k + 1)])
            q = np.array([pre.qtab[i][codes[i]] for i in range(k)])
            surv = np.prod([min(1.0, p[j, x[j]] / q[j, x[j]]) for j in range(k)])
            w = block_weights(x, p, q)[0][k]
            gain = float(pre.qtab[k][code] @ pre.T[k + 1][code * V:(code + 1) * V]) - pre.T[k][code]
            out.append((k, 1.0 - surv, w, gain, bool(opt.stop[k][code])))
    return out


@settings(max_examples=10)
@given(model_pairs(V=3, depth=st.integers(1, 2)), st.sampled_from([0.05, 0.2]))
def test_specdecpp_threshold_is_sufficient_for_token_level_sd(pair, c):
    """With a flat target call and draft pass c, extending x^{1:k} by m tokens adds at most
    m (1 - P(>=1 rejection)) tokens at cost m c, so at lambda* every prefix with
    P(>= 1 rejection) > 1 - lambda* c is a stopping point of the optimal rule (docs/theory.md §14.4)."""
    opt = optimal_stopping(token, pair.target, pair.draft_model, 3, CostModel(draft=c))
    h = 1.0 - opt.value * c
    assert all(stop for _, prej, _, _, stop in _prefix_stats(token, pair.target, pair.draft_model, 3, opt) if prej > h + 1e-9)


def test_reported_rule_is_the_rule_of_lambda_star_at_unreached_prefixes():
    """Hypothesis seed 11661820: Dinkelbach's best rule was induced at the lambda before the last
    step and kept drafting at (1, 0), a prefix it never reaches, where one more token adds
    0.2157 tokens for cost 0.2 < 1 / lambda* (lambda* = 10 / 9).  The rule reported is now the
    one of lambda*, with the same value."""
    third = np.full(3, 1 / 3)

    def after_last_token(root, after_one):            # rows depend on the last token only
        return lambda prefix: root if not prefix else (after_one if prefix[-1] == 1 else third)

    t = Model(after_last_token(third, np.array([3, 10, 4]) / 17), 3)
    d = Model(after_last_token(np.array([0.0, 1.0, 0.0]), np.array([3, 2, 6]) / 11), 3)
    opt = optimal_stopping(token, t, d, 3, CostModel(draft=0.2))
    assert opt.value == pytest.approx(10 / 9, abs=1e-12)
    assert opt.stop[2][1 * 3 + 0]
    h = 1.0 - opt.value * 0.2
    assert all(stop for _, prej, _, _, stop in _prefix_stats(token, t, d, 3, opt) if prej > h + 1e-9)


@pytest.mark.parametrize("verifier,stat", [(token, "survival"), (block, "weight")])
def test_iid_pairs_optimal_rule_is_a_threshold_per_depth(verifier, stat):
    """Context-free rows: token SD's optimal rule is a threshold in P(no rejection) at each depth,
    block verification's a threshold in its weight w_k."""
    rng = np.random.default_rng(1)
    for _ in range(6):
        p, q = rng.dirichlet(0.7 * np.ones(3)), rng.dirichlet(0.7 * np.ones(3))
        t, d = iid(p), iid(q)
        opt = optimal_stopping(verifier, t, d, 4, CostModel(draft=0.1))
        rows = _prefix_stats(verifier, t, d, 4, opt)
        for k in (1, 2, 3):
            s = [(1 - r[1]) if stat == "survival" else r[2] for r in rows if r[0] == k]
            stop = [r[4] for r in rows if r[0] == k]
            stopped, going = [x for x, b in zip(s, stop) if b], [x for x, b in zip(s, stop) if not b]
            if stopped and going:
                assert max(stopped) <= min(going) + 1e-12


def test_block_verification_needs_its_own_statistic():
    """The finding of docs/theory.md §14.4 on one instance: under block verification the optimal rule
    keeps drafting at a prefix where SpecDec++'s sufficient condition says stop (P(>= 1
    token-level rejection) > 1 - lambda* c), because block verification can still accept tokens
    token-level SD would reject; the one-step gain is bounded by block's weight w_k instead."""
    t, d, c = random_model(3, 0, 0.7), random_model(3, 1000, 0.7), 0.2
    opt = optimal_stopping(block, t, d, 4, CostModel(draft=c))
    rows = _prefix_stats(block, t, d, 4, opt)
    h = 1.0 - opt.value * c
    assert any(prej > h + 1e-9 and not stop for _, prej, _, _, stop in rows)
    assert all(gain <= w + 1e-9 for _, _, w, gain, _ in rows)
    assert any(gain > (1 - prej) + 1e-6 for _, prej, _, gain, _ in rows)


@settings(max_examples=10)
@given(model_pairs(V=3, depth=st.integers(1, 2)))
def test_block_one_step_gain_is_bounded_by_its_weight(pair):
    opt = optimal_stopping(block, pair.target, pair.draft_model, 3, CostModel(draft=0.1))
    assert all(gain <= w + 1e-9 for _, _, w, gain, _ in _prefix_stats(block, pair.target, pair.draft_model, 3, opt))


def test_schedule_with_two_closed_classes_settles_where_it_starts():
    """a_1 = 0 (length 1 never grows) and a_3 = a_4 = 1 (lengths 3, 4 never shrink): two closed
    classes; the long run is the class the start state reaches."""
    a = np.array([0.0, 0.5, 1.0, 1.0])
    assert HeuristicSchedule(start=4).weights(a)[3] == pytest.approx(1.0)
    assert HeuristicSchedule(start=1).weights(a)[0] == pytest.approx(1.0)


def test_policy_process_sampler_matches_its_enumeration():
    """Monte Carlo of PolicyDrafting.sample against the enumerated law: 4000 draws, chi-square
    goodness of fit at false-alarm rate 0.001 (the sampler and the enumeration are separate code)."""
    from scipy import stats

    t, d = random_model(3, 8, 0.7), random_model(3, 1008, 0.7)
    proc = policy_drafting(SpecDecPP(0.5))
    law = {tree.tokens: w for w, tree in proc.enumerate(t, d, 3)}
    rng = np.random.default_rng(0)
    counts = {k: 0 for k in law}
    n = 4000
    for _ in range(n):
        counts[proc.sample(t, d, 3, rng).tokens] += 1
    keys = [k for k in law if law[k] * n >= 5]
    obs = np.array([counts[k] for k in keys] + [n - sum(counts[k] for k in keys)])
    exp = np.array([law[k] * n for k in keys] + [n - sum(law[k] * n for k in keys)])
    keep = exp > 0
    assert stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue > 1e-3
