"""Chain verifiers: public anchors, closed forms, exact certificates, negative controls, bad input."""
import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats

import specsim as s
from specsim.exact import completed_law
from specsim.testing.mutants import CHAIN_MUTANTS, LOSSLESS_CONTROLS
from specsim.verifiers.chain import CHAIN_VERIFIERS, block_weights

TOY_P, TOY_Q = s.iid([1 / 3, 2 / 3]), s.iid([2 / 3, 1 / 3])
BV_ROW = [F(2, 3), F(11, 9), F(5, 3), F(166, 81), F(64, 27), F(1933, 729)]  # docs/theory.md §12, R2/R3
ALPHA = F(2, 3)


@pytest.mark.parametrize("L", range(1, 7))
def test_toy_anchors_token_and_block(L):
    tv_formula = ALPHA * (1 - ALPHA ** L) / (1 - ALPHA)
    ct = s.check_lossless(s.token, TOY_P, TOY_Q, L)
    cb = s.check_lossless(s.block, TOY_P, TOY_Q, L)
    assert ct.lossless and cb.lossless
    assert ct.max_abs_error < 1e-15 and cb.max_abs_error < 1e-15
    assert ct.expected_accepted == pytest.approx(float(tv_formula), abs=1e-12)
    assert cb.expected_accepted == pytest.approx(float(BV_ROW[L - 1]), abs=1e-12)


def test_block_toy_table():
    # docs/theory.md §4, toy example: (draft, w1, w2, h1, h2)
    rows = {(0, 0): (F(1, 2), F(1, 4), 0, F(1, 4)), (0, 1): (F(1, 2), 1, 0, 1),
            (1, 0): (1, F(1, 2), 1, F(1, 2)), (1, 1): (1, 1, 1, 1)}
    p = np.array([[1 / 3, 2 / 3]] * 3)
    q = np.array([[2 / 3, 1 / 3]] * 2)
    for x, (w1, w2, h1, h2) in rows.items():
        w, h, res = block_weights(x, p, q)
        assert np.allclose([w[1], w[2], h[1], h[2]], [float(w1), float(w2), float(h1), float(h2)], atol=1e-15)
    # draft "ba" stops at tau = 1 with the residual delta_b
    assert np.allclose(block_weights((1, 0), p, q)[2][1], [0.0, 1.0])


def _first_two(law, target):
    C, P = completed_law(law, target)
    return C.reshape(4, 2).sum(axis=1), P.reshape(4, 2).sum(axis=1)


def test_hsd_released_anchor_R4():
    law = s.output_law(s.hsd_released, TOY_P, TOY_Q, 2)
    C2, P2 = _first_two(law, TOY_P)
    assert np.allclose(C2, [1 / 9, 2 / 9, 1 / 3, 1 / 3], atol=1e-14)
    assert np.allclose(P2, [1 / 9, 2 / 9, 2 / 9, 4 / 9], atol=1e-14)
    assert np.allclose(C2.reshape(2, 2).sum(1), [1 / 3, 2 / 3], atol=1e-14)  # first token is exact
    cert = s.check_lossless(s.hsd_released, TOY_P, TOY_Q, 2)
    assert not cert.lossless and cert.max_abs_error > 0.05
    assert cert.expected_accepted > float(BV_ROW[1])  # above the LP optimum 11/9


def _pair(V, seed, conc):
    return s.random_model(V, seed, concentration=conc), s.random_model(V, seed + 1000, concentration=conc)


def _degenerate_pair(V, seed):
    """Prefix-dependent rows mixing Dirichlet rows with p == q rows, zeros and disjoint supports."""
    t, d = _pair(V, seed, 0.5)

    def target(prefix):
        kind = (sum(prefix) + len(prefix) + seed) % 4
        if kind == 0:
            return d(prefix)  # p == q
        if kind == 1:
            r = t(prefix).copy(); r[len(prefix) % V] = 0.0; return r / r.sum()
        if kind == 2:
            r = np.zeros(V); r[(len(prefix) + 1) % V] = 1.0; return r  # one-hot
        return t(prefix)

    def draft(prefix):
        r = d(prefix).copy()
        if (sum(prefix) + seed) % 3 == 0:
            r[(len(prefix) + 1) % V] = 0.0  # disjoint-ish supports with one-hot target rows
        return r / r.sum()

    return s.from_function(target, V, "degenerate-target"), s.from_function(draft, V, "degenerate-draft")


LOSSLESS = [s.token, s.block, s.onehot, s.hsd_capped]


@settings(max_examples=20)
@given(V=st.integers(3, 4), L=st.integers(1, 3), seed=st.integers(0, 10_000),
       conc=st.sampled_from([0.1, 0.5, 1.0, 5.0]), degenerate=st.booleans())
def test_lossless_verifiers_certified(V, L, seed, conc, degenerate):
    t, d = _degenerate_pair(V, seed) if degenerate else _pair(V, seed, conc)
    certs = {v.name: s.check_lossless(v, t, d, L) for v in LOSSLESS}
    for name, c in certs.items():
        assert c.lossless, str(c)
    # theorems: token <= block (BV is optimal), hsd_capped == block
    assert certs["token"].expected_accepted <= certs["block"].expected_accepted + 1e-12
    assert certs["hsd_capped"].expected_accepted == pytest.approx(certs["block"].expected_accepted, abs=1e-12)


def _brute_tails(t, d, L):
    """P(tau >= i) for token and block by direct enumeration of prefixes (independent of the engine)."""
    V = t.V
    token_tail, block_tail = [], []
    for i in range(1, L + 1):
        tok = blk = 0.0
        for x in itertools.product(range(V), repeat=i):
            P = [1.0]; Q = [1.0]; mins = 1.0
            for k in range(i):
                pk, qk = t(x[:k])[x[k]], d(x[:k])[x[k]]
                P.append(P[-1] * pk); Q.append(Q[-1] * qk); mins *= min(pk, qk)
            tok += mins
            blk += min(Q[j] * P[i] / P[j] if P[j] > 0 else 0.0 for j in range(i + 1)) if P[i] > 0 else 0.0
        token_tail.append(tok); block_tail.append(blk)
    return np.array(token_tail), np.array(block_tail)


@pytest.mark.parametrize("V,L,seed", [(3, 3, 1), (4, 2, 2), (3, 4, 3)])
def test_closed_form_tails_equal_enumeration(V, L, seed):
    t, d = _pair(V, seed, 0.7)
    tok, blk = _brute_tails(t, d, L)
    assert np.allclose(s.check_lossless(s.token, t, d, L).accepted_at_least[1:], tok, atol=1e-13)
    assert np.allclose(s.check_lossless(s.block, t, d, L).accepted_at_least[1:], blk, atol=1e-13)


@settings(max_examples=15)
@given(V=st.integers(3, 4), L=st.integers(2, 3), seed=st.integers(0, 10_000))
def test_hsd_released_flagged_and_above_block(V, L, seed):
    t, d = _pair(V, seed, 0.5)
    rel = s.check_lossless(s.hsd_released, t, d, L)
    blk = s.check_lossless(s.block, t, d, L)
    assert rel.expected_accepted >= blk.expected_accepted - 1e-12
    if rel.expected_accepted > blk.expected_accepted + 1e-9:  # extra acceptance is exactly its bias
        assert not rel.lossless


def test_hsd_released_flagged_on_fixed_context_dependent_pair():
    t, d = _pair(3, 11, 0.5)
    c = s.check_lossless(s.hsd_released, t, d, 3)
    assert not c.lossless and len(c.worst_sequence) == 4
    assert abs(c.completed - c.target) == pytest.approx(c.max_abs_error)


@settings(max_examples=25)
@given(seed=st.integers(0, 10_000), L=st.integers(1, 4))
def test_hsd_capped_equals_block_outcome_by_outcome(seed, L):
    V = 4
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(V, 0.6), size=L + 1)
    q = rng.dirichlet(np.full(V, 0.6), size=L)
    draft = tuple(int(rng.choice(V, p=row)) for row in q)
    def table(outcomes):  # row k = P(tau = k) * next_dist (outcomes of probability ~0 may be omitted)
        t = np.zeros((L + 1, V))
        for o in outcomes:
            t[o.accepted] += o.prob * o.next_dist
        return t
    assert np.allclose(table(s.hsd_capped(draft, p, q)), table(s.block(draft, p, q)), atol=1e-12)


def test_greedy_lossless_only_for_onehot_targets():
    t, d = _pair(3, 5, 1.0)
    assert not s.check_lossless(s.greedy, t, d, 2).lossless
    t0 = s.temperature(t, 0)
    c = s.check_lossless(s.greedy, t0, d, 2)
    assert c.lossless
    # with one-hot targets every verifier agrees with greedy on E[tau]
    assert c.expected_accepted == pytest.approx(s.expected_accepted(s.token, t0, d, 2), abs=1e-12)


def test_onehot_equals_token_for_deterministic_drafts_and_costs_acceptance_otherwise():
    t, d = _pair(3, 6, 1.0)
    d0 = s.temperature(d, 0)
    assert s.expected_accepted(s.onehot, t, d0, 3) == pytest.approx(s.expected_accepted(s.token, t, d0, 3), abs=1e-12)
    assert s.expected_accepted(s.onehot, t, d, 3) <= s.expected_accepted(s.token, t, d, 3) + 1e-12


@pytest.mark.parametrize("name", sorted(CHAIN_MUTANTS))
def test_mutants_flagged(name):
    t, d = _pair(3, 21, 0.7)
    c = s.check_lossless(CHAIN_MUTANTS[name], t, d, 3)
    assert not c.lossless, name
    assert c.max_abs_error > 1e-6


@pytest.mark.parametrize("name", sorted(LOSSLESS_CONTROLS))
def test_lossless_controls_pass(name):
    for V, seed in [(3, 21), (4, 22)]:
        t, d = _degenerate_pair(V, seed)
        assert s.check_lossless(LOSSLESS_CONTROLS[name], t, d, 3).lossless


@pytest.mark.parametrize("name", ["token", "onehot", "block"])
def test_sampler_matches_exact_law(name):
    """Chi-square of 20k samples of (tau, token) against the exact law for one draft.

    False-alarm rate 1e-6 per verifier; with 20k samples the test has power > 0.99 against any
    cell-probability shift of total variation >= 0.02 on these ~10-15 cells (non-central chi-square).
    """
    v = CHAIN_VERIFIERS[name]
    rng = np.random.default_rng(123)
    V, L = 4, 3
    p = rng.dirichlet(np.full(V, 0.8), size=L + 1)
    q = rng.dirichlet(np.full(V, 0.8), size=L)
    draft = (int(np.argmax(q[0])), int(np.argmax(q[1])), 1)
    law = v(draft, p, q)
    exact = np.zeros((L + 1, V))
    for o in law:
        exact[o.accepted] += o.prob * o.next_dist
    n = 20_000
    counts = np.zeros((L + 1, V))
    for _ in range(n):
        k, y = v.sample(draft, p, q, rng=rng)
        counts[k, y] += 1
    keep = exact.ravel() > 0
    assert counts.ravel()[~keep].sum() == 0  # never emits an impossible (tau, token)
    chi2 = (((counts.ravel() - n * exact.ravel()) ** 2)[keep] / (n * exact.ravel()[keep])).sum()
    assert stats.chi2.sf(chi2, keep.sum() - 1) > 1e-6


def test_bad_inputs():
    p = np.full((3, 3), 1 / 3)
    q = np.full((2, 3), 1 / 3)
    with pytest.raises(ValueError, match="at least one"):
        s.token((), p[:1], q[:0])
    with pytest.raises(ValueError, match="shape"):
        s.block((0, 1), p[:2], q)
    with pytest.raises(ValueError, match="q"):
        s.block((0, 1), p, q[:1])
    bad = p.copy(); bad[1, 0] = 0.9
    with pytest.raises(ValueError, match=r"p\[1\].*sum"):
        s.token((0, 1), bad, q)
    q0 = q.copy(); q0[1] = [0.5, 0.0, 0.5]
    with pytest.raises(ValueError, match="q = 0"):
        s.token((0, 1), p, q0)
    with pytest.raises(ValueError, match="outside"):
        s.token((0, 3), p, q)
    with pytest.raises(ValueError, match="L must be >= 1"):
        s.check_lossless(s.token, TOY_P, TOY_Q, 0)
    with pytest.raises(ValueError, match="V=2 but draft_model has V=3"):
        s.check_lossless(s.token, TOY_P, s.iid([0.2, 0.3, 0.5]), 2)


def test_verifier_whose_outcomes_do_not_sum_to_one_is_rejected():
    leaky = s.chain_verifier("leaky")(lambda draft, p, q: [s.Outcome(0.9, 0, p[0])])
    with pytest.raises(ValueError, match="sum to 0.9"):
        s.check_lossless(leaky, TOY_P, TOY_Q, 2)
    beyond = s.chain_verifier("beyond")(lambda draft, p, q: [s.Outcome(1.0, len(draft) + 1, p[0])])
    with pytest.raises(ValueError, match="outside"):
        s.check_lossless(beyond, TOY_P, TOY_Q, 2)
    plain = lambda draft, p, q: [s.Outcome(1.0, 0, p[0])]  # plain callables work: always reject, emit p_0
    assert s.check_lossless(plain, TOY_P, TOY_Q, 2).lossless


def test_block_stop_probabilities_stable_when_weight_rounds_to_one():
    """Regression: with peaked rows, h_i = Z_i / (Z_i + 1 - w_i) lost ~1e-6 to cancellation and
    produced a negative P(tau = 2); the deficit form keeps every h in [0, 1]."""
    t, d = s.random_model(2, 354, 0.1), s.random_model(2, 355, 0.1)
    x = (0, 1, 0, 1)
    p = np.array([t(x[:i]) for i in range(5)])
    q = np.array([d(x[:i]) for i in range(4)])
    w, h, _ = block_weights(x, p, q)
    assert np.all((0 <= h) & (h <= 1))
    assert all(o.prob >= 0 for o in s.block(x, p, q))
    assert s.check_lossless(s.block, t, d, 4).lossless
