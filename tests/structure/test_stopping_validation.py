"""Bad input of the stopping module: each a clear ValueError / TypeError naming the argument."""
from __future__ import annotations

import pytest

from specsim.models import iid, random_model
from specsim.structure import CostModel, check_policy_lossless, optimal_stopping, policy_value
from specsim.structure.policies import (CallablePolicy, ConfidenceThreshold, EntropyStop, FixedLength,
                                        HeuristicSchedule, SpecDecPP, drop_on_target)
from specsim.structure.stopping import MAX_PREFIXES, policy_drafting
from specsim.verifiers import token

T, D, COST = random_model(3, 0), random_model(3, 1), CostModel(draft=0.1)


@pytest.mark.parametrize("make,exc,match", [
    (lambda: ConfidenceThreshold(1.2), ValueError, "threshold must lie in"),
    (lambda: ConfidenceThreshold(-0.1), ValueError, "threshold must lie in"),
    (lambda: ConfidenceThreshold(float("nan")), ValueError, "threshold"),
    (lambda: ConfidenceThreshold("0.4"), TypeError, "threshold"),
    (lambda: ConfidenceThreshold(0.4, rule="bottom"), ValueError, "rule must be"),
    (lambda: SpecDecPP(1.5), ValueError, "threshold must lie in"),
    (lambda: drop_on_target(2.0), ValueError, "threshold must lie in"),
    (lambda: EntropyStop(-1.0), ValueError, "threshold"),
    (lambda: FixedLength(-1), ValueError, "L must be >= 0"),
    (lambda: FixedLength(2.0), TypeError, "L must be an integer"),
    (lambda: HeuristicSchedule(start=0), ValueError, "start"),
    (lambda: HeuristicSchedule(iterations=10 ** 6), ValueError, "iterations"),
    (lambda: CallablePolicy("not callable"), TypeError, "fn must be callable"),
    (lambda: CallablePolicy(lambda s: True, uses_target="yes"), TypeError, "uses_target"),
])
def test_bad_policy_parameters(make, exc, match):
    with pytest.raises(exc, match=match):
        make()


@pytest.mark.parametrize("answer", [1, 0.0, "stop", None, [True]])
def test_a_policy_must_answer_stop_or_continue(answer):
    bad = CallablePolicy(lambda s: answer, "bad_policy")
    with pytest.raises(TypeError, match="policy 'bad_policy' returned .* must return True \\(stop\\) or False"):
        policy_value(bad, token, T, D, 2, COST)
    with pytest.raises(TypeError, match="bad_policy"):
        check_policy_lossless(token, T, D, 2, bad)


def test_target_rows_only_where_declared():
    undeclared = CallablePolicy(lambda s: s.survival() < 0.5, "sneaky")
    with pytest.raises(ValueError, match="uses_target=True"):
        policy_value(undeclared, token, T, D, 2, COST)
    peeking = CallablePolicy(lambda s: s.p is not None, "peek")
    assert policy_value(peeking, token, T, D, 2, COST).length_law[2] == pytest.approx(1.0)  # p is None: never stops
    declared = CallablePolicy(lambda s: s.depth > 0 and s.survival() < 0.5, "declared", uses_target=True)
    cert = check_policy_lossless(token, T, D, 2, declared)
    assert cert.lossless and cert.uses_target and "declared uses_target" in str(cert)


def test_horizon_too_large_names_the_size():
    big_t, big_d = random_model(50, 0), random_model(50, 1)
    n = sum(50 ** k for k in range(5))
    assert n > MAX_PREFIXES
    with pytest.raises(ValueError, match=f"horizon L=4 over V=50 gives {n} draft prefixes.*{MAX_PREFIXES}"):
        optimal_stopping(token, big_t, big_d, 4, COST)
    with pytest.raises(ValueError, match="draft prefixes"):
        check_policy_lossless(token, big_t, big_d, 4, FixedLength(1))


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(cost=0.1), TypeError, "cost must be a specsim.structure.CostModel"),
    (dict(method="newton"), ValueError, "method must be"),
    (dict(min_length=5), ValueError, "min_length must be <= 3"),
    (dict(L=0), ValueError, "L must be >= 1"),
    (dict(tol=0.0), ValueError, "tol"),
])
def test_bad_optimal_stopping_arguments(kwargs, exc, match):
    args = dict(verifier=token, target=T, draft_model=D, L=3, cost=COST)
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        optimal_stopping(**args)


def test_bad_policy_objects():
    with pytest.raises(TypeError, match="policy must be"):
        policy_value("fixed", token, T, D, 2, COST)
    with pytest.raises(TypeError, match="HeuristicSchedule carries its length"):
        policy_drafting(HeuristicSchedule())
    with pytest.raises(TypeError, match="optimum must be"):
        policy_value(1, token, T, D, 2, COST, optimum=1.2)
    with pytest.raises(TypeError, match="target must be a specsim.models.Model"):
        policy_value(1, token, "p", D, 2, COST)
    with pytest.raises(ValueError, match="V=2 but draft_model has V=3"):
        policy_value(1, token, iid([0.5, 0.5]), D, 2, COST)


def test_stored_chain_helpers_accept_float32_rows_and_refuse_bad_ones():
    import numpy as np

    from specsim.structure.stopping import chain_values, stopped_length

    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(4), size=4)
    q = rng.dirichlet(np.ones(4), size=3)
    draft = (int(np.argmax(q[0])), int(np.argmax(q[1])), int(np.argmax(q[2])))
    T64, A64 = chain_values(token, draft, p, q)
    T32, A32 = chain_values(token, draft, p.astype(np.float32), q.astype(np.float32))
    assert np.allclose(T32, T64, atol=1e-6) and np.allclose(A32, A64, atol=1e-6)
    assert stopped_length(SpecDecPP(0.5), draft, p.astype(np.float32), q) == stopped_length(SpecDecPP(0.5), draft, p, q)
    with pytest.raises(ValueError, match="sum"):
        chain_values(token, draft, p * 1.1, q)
    with pytest.raises(TypeError, match="draft\\[0\\]"):
        stopped_length(FixedLength(1), (0.5, 1, 2), p, q)
