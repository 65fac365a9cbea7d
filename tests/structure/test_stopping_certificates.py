"""Policy-aware losslessness certificates (docs/theory.md §14.1-14.2): every stopping-time policy
is certified lossless on context-dependent pairs; the grammar-truncation design and SpecDec++
applied one token late are flagged LOSSY with their worst string (negative controls)."""
from __future__ import annotations

import numpy as np
import pytest
from fractions import Fraction
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim.exact import completed_law, output_law
from specsim.models import iid, random_model
from specsim.structure import check_policy_lossless
from specsim.structure.policies import (CallablePolicy, ConfidenceThreshold, EntropyStop, FixedLength, SpecDecPP,
                                        grammar_truncation)
from specsim.structure.stopping import policy_drafting
from specsim.testing.selftest.mutants import POLICY_MUTANTS
from specsim.testing.strategies import model_pairs
from specsim.verifiers import block, token, traversal

STOPPING_POLICIES = [
    FixedLength(1), FixedLength(3), ConfidenceThreshold(0.4), ConfidenceThreshold(0.75, rule="top"),
    SpecDecPP(0.5), SpecDecPP(0.9), EntropyStop(0.8),
    CallablePolicy(lambda s: s.depth >= 1 and s.prefix[-1] == 2, "stop_after_token_2"),
    CallablePolicy(lambda s: s.depth >= 1 and s.p[s.depth, s.prefix[-1]] < 0.3, "target_row_oracle", uses_target=True),
]


@settings(max_examples=6)
@given(model_pairs(V=3, depth=st.integers(1, 2)), st.sampled_from(STOPPING_POLICIES),
       st.sampled_from([token, block]))
def test_every_stopping_time_policy_is_certified_lossless(pair, policy, verifier):
    cert = check_policy_lossless(verifier, pair.target, pair.draft_model, 3, policy)
    assert cert.lossless, str(cert)
    assert cert.kind == "stopping time" and cert.uses_target == policy.uses_target


@pytest.mark.parametrize("policy", STOPPING_POLICIES, ids=lambda p: p.name)
def test_stopping_policies_lossless_on_random_model_pairs(policy):
    for seed in (3, 4):
        t, d = random_model(3, seed, 0.5), random_model(3, 500 + seed, 0.5)
        for verifier in (token, block, traversal):
            assert check_policy_lossless(verifier, t, d, 3, policy).lossless


def test_grammar_truncation_negative_control_exact():
    """p = (.5, .5, 0), q = (.6, .1, .3), token 2 dropped, L = 1: emits (0.65, 0.35, 0), TV 0.15.
    Derivation in rationals: drafting 2 (3/10) emits p; drafting 0 (6/10) keeps it with 5/6 and
    otherwise emits from norm((p - q)_+) = token 1; drafting 1 (1/10) is always kept."""
    F = Fraction
    first = [F(3, 10) * F(1, 2) + F(6, 10) * F(5, 6),
             F(3, 10) * F(1, 2) + F(6, 10) * F(1, 6) + F(1, 10), F(0)]
    assert first == [F(13, 20), F(7, 20), F(0)]
    tv = sum(abs(a - b) for a, b in zip(first, [F(1, 2), F(1, 2), F(0)])) / 2
    assert tv == F(3, 20)
    target, draft_model = iid([0.5, 0.5, 0.0]), iid([0.6, 0.1, 0.3])
    cert = check_policy_lossless(token, target, draft_model, 1, POLICY_MUTANTS["grammar_truncation"])
    assert not cert.lossless and cert.kind == "value-dependent dropping"
    assert cert.tv == pytest.approx(float(tv), abs=1e-15)
    C, _ = completed_law(output_law(token, target, draft_model, 1, drafting=policy_drafting(grammar_truncation()),
                                      check_needs=False),
                         target)
    assert np.allclose(C.reshape(3, 3).sum(axis=1), [float(x) for x in first], atol=1e-15)
    assert cert.worst_sequence[0] == 0 and "LOSSY" in str(cert)


@pytest.mark.parametrize("name", sorted(POLICY_MUTANTS))
@pytest.mark.parametrize("verifier", [token, block])
def test_policy_mutants_are_flagged_on_context_dependent_pairs(name, verifier):
    mutant = POLICY_MUTANTS[name]
    t, d = random_model(3, 1, 0.7), random_model(3, 1001, 0.7)
    cert = check_policy_lossless(verifier, t, d, 2, mutant)
    assert not cert.lossless and cert.tv > 1e-3
    assert cert.uses_target == mutant.uses_target
    assert ("reads target rows" in str(cert)) == mutant.uses_target


def test_same_rule_as_a_stopping_time_stays_lossless():
    """The contrast: stopping *after* the forbidden token (it is drafted and verified) is a stopping
    time, so the same toy pair is certified lossless; only dropping it by value is lossy."""
    target, draft_model = iid([0.5, 0.5, 0.0]), iid([0.6, 0.1, 0.3])
    after = CallablePolicy(lambda s: s.depth >= 1 and s.prefix[-1] == 2, "stop_after_2")
    assert check_policy_lossless(token, target, draft_model, 2, after).lossless


def test_policy_process_probabilities_sum_to_one_and_sample():
    t, d = random_model(3, 2, 0.7), random_model(3, 1002, 0.7)
    for rule in (SpecDecPP(0.5), POLICY_MUTANTS["drop_on_target"]):
        proc = policy_drafting(rule)
        items = list(proc.enumerate(t, d, 3))
        assert sum(w for w, _ in items) == pytest.approx(1.0, abs=1e-12)
        tree = proc.sample(t, d, 3, np.random.default_rng(0))
        assert tree.is_chain and tree.max_depth <= 3
