"""Lossy single-token rules: closed forms vs the generic chain lift, the exact engine, consequences."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from specsim import check_lossless, output_law, random_model, token
from specsim.testing.strategies import distributions, model_pairs
from specsim.divergences import kl, tv
from specsim.verifiers._clip_family import ClipFamily, SortedClipFamily
from specsim.verifiers.lossy import (LOSSY_RULES, cactus, cascade, consultant_standin, ensemble, fuzzy,
                                     lenience, margin_standin, mentored, single_token_chain, topk_accept,
                                     typical)

E1_P = np.array([0.05, 0.15, 0.25, 0.55])
E1_Q = np.array([0.55, 0.25, 0.15, 0.05])


def all_rules():
    return [typical(), typical(0.2, 0.5, residual="truncated"), lenience(0.7), topk_accept(2),
            fuzzy(0.3, "kl"), fuzzy(0.3, "kl_reverse"), fuzzy(0.2, "tv"), fuzzy(0.1, "js"),
            fuzzy(0.1, "js_released"), cactus(0.05), cactus(0.3), mentored(0.6), ensemble(0.75),
            ensemble(0.4, "geometric"), margin_standin(0.5), consultant_standin(0.15), cascade(0.3),
            cascade(0.0)]


def pairs(vmin=3, vmax=6):
    """(p, q) over V in vmin..vmax tokens: rows with zeros, ties and near-one-hot rows (``distributions``)."""
    return st.integers(vmin, vmax).flatmap(lambda V: st.tuples(distributions(V), distributions(V)))


def lifted(v, p, q):
    """out and beta from the chain verifier's exact law at L = 1: sum_x q(x) * outcomes."""
    V = p.size
    out, beta = np.zeros(V), 0.0
    prow = np.stack([p, np.full(V, 1.0 / V)])
    for x in np.flatnonzero(q > 0):
        for o in v((int(x),), prow, q[None, :]):
            if o.accepted == 1:
                out[x] += q[x] * o.prob
                beta += q[x] * o.prob
            else:
                out += q[x] * o.prob * o.next_dist
    return out, beta


@settings(max_examples=25)
@given(pairs())
def test_closed_forms_match_generic_lift(pq):
    p, q = pq
    for v in all_rules():
        out, beta = lifted(v, p, q)
        np.testing.assert_allclose(v.out(p, q), out, atol=1e-12, err_msg=v.name)
        assert abs(v.beta(p, q) - beta) < 1e-12, v.name
        assert abs(out.sum() - 1) < 1e-12


@settings(max_examples=10)
@given(model_pairs(V=3))
def test_engine_first_token_law_is_closed_form(pair):
    """Chains through the exact engine on prefix-dependent models: first emitted token ~ out(p_0, q_0)."""
    T, D = pair
    for v in (cactus(0.1), typical(), mentored(0.5), margin_standin(0.3)):
        law = output_law(v, T, D, L=2)
        V = 3
        first = law.emitted[1] + law.emitted[2].reshape(V, V).sum(1) + law.emitted[3].reshape(V, V * V).sum(1)
        np.testing.assert_allclose(first, v.out(T(()), D(())), atol=1e-12, err_msg=v.name)


@pytest.mark.parametrize("v", [lenience(1.0), cactus(0.0), mentored(1.0), ensemble(1.0),
                               ensemble(1.0, "geometric")], ids=lambda v: f"{v.name}{v.rule.params}")
def test_lossless_limits_equal_token_and_pass(v):
    """Positive controls: the rules' SpS limits are lossless and have token's outcome lists."""
    T, D = random_model(3, 7), random_model(3, 8)
    cert = check_lossless(v, T, D, L=2)
    assert cert.lossless, str(cert)
    ref = check_lossless(token, T, D, L=2)
    assert abs(cert.expected_accepted - ref.expected_accepted) < 1e-12


@pytest.mark.parametrize("v", all_rules(), ids=lambda v: f"{v.name}{v.rule.params}")
def test_lossy_rules_are_flagged(v):
    """Negative controls: the exact engine flags every lossy rule on some prefix-dependent pair."""
    flagged = any(not check_lossless(v, random_model(3, s, concentration=c), random_model(3, s + 50, concentration=c),
                                     L=2).lossless for s in range(3) for c in (0.3, 5.0))
    assert flagged
    assert v.lossless is False


def test_e1_anchors():
    """docs/theory.md §12, rules on E1 (and the margin stand-in pair)."""
    c = cactus(0.05)
    np.testing.assert_allclose(c.out(E1_P, E1_Q), [0.118920, 0.25, 0.215114, 0.415965], atol=1e-6)
    assert abs(c.beta(E1_P, E1_Q) - 0.568920) < 1e-6
    assert abs(kl(c.out(E1_P, E1_Q), E1_P) - 0.082227) < 1e-6
    le = lenience(0.8)
    np.testing.assert_allclose(le.out(E1_P, E1_Q), [0.0625, 0.1875, 0.241667, 0.508333], atol=1e-6)
    assert abs(le.beta(E1_P, E1_Q) - 0.45) < 1e-12
    assert abs(kl(le.out(E1_P, E1_Q), E1_P) - 0.007546) < 1e-6
    ty = typical()
    np.testing.assert_allclose(ty.out(E1_P, E1_Q), [0, 0.25, 0.15, 0.6], atol=1e-12)
    assert abs(ty.beta(E1_P, E1_Q) - 0.45) < 1e-12
    assert abs(kl(ty.out(E1_P, E1_Q), E1_P) - 0.103289) < 1e-6
    en = ensemble(0.75)  # draft weight 0.25
    assert abs(en.beta(E1_P, E1_Q) - 0.55) < 1e-12
    assert abs(kl(en.out(E1_P, E1_Q), E1_P) - 0.112926) < 1e-6
    pm, qm = np.array([0.4, 0.35, 0.15, 0.1]), np.array([0.2, 0.6, 0.1, 0.1])
    ms = margin_standin(0.8)
    np.testing.assert_allclose(ms.out(pm, qm), [0.28, 0.67, 0.03, 0.02], atol=1e-12)
    assert abs(ms.beta(pm, qm) - 0.8) < 1e-12
    assert abs(kl(ms.out(pm, qm), pm) - 0.254720) < 1e-6


@settings(max_examples=25)
@given(pairs(), st.floats(0.05, 1.0), st.floats(0.0, 1.5))
def test_exact_consequences(pq, l, T):
    """docs/theory.md §10.1's only exact consequences of parameters, and the ensemble's TV identity."""
    p, q = pq
    out = lenience(l).out(p, q)
    pos = p > 0
    assert np.all(out[~pos] == 0) and np.max(out[pos] / p[pos]) <= 1 / l + 1e-9
    assert kl(fuzzy(T, "kl").out(p, q), p) <= T + 1e-12
    assert tv(fuzzy(T / 2, "tv").out(p, q), p) <= T / 2 + 1e-12
    w = min(l, 1.0)
    assert abs(tv(ensemble(w).out(p, q), p) - (1 - w) * tv(p, q)) < 1e-12


def test_registry_complete():
    assert set(LOSSY_RULES) == {"typical", "lenience", "topk_accept", "fuzzy", "cactus", "mentored",
                                "ensemble", "cascade", "margin_standin", "consultant_standin"}
    assert "stand-in" in margin_standin(0.8).rule.label and "assumption" in consultant_standin(0.1).rule.label


def test_clip_family_sharing_is_scoped_to_the_same_arrays():
    """ClipFamily.of reuses a family only inside ``shared()`` and only for the very same arrays."""
    p, q = E1_P.copy(), E1_Q.copy()
    fam = SortedClipFamily(p, q)
    assert ClipFamily.of(p, q) is not fam
    with fam.shared():
        assert ClipFamily.of(p, q) is fam
        assert ClipFamily.of(p.copy(), q) is not fam and ClipFamily.of(q, p) is not fam
        np.testing.assert_allclose(mentored(0.6).rule.closed_out(p, q), fam.pi(1 / 0.6), atol=0)
    assert ClipFamily.of(p, q) is not fam


V_MANY = 60


@settings(max_examples=10)
@given(p=distributions(V_MANY, allow_zeros=False, near_onehot=False),
       noise=st.lists(st.floats(-2.0, 2.0), min_size=V_MANY, max_size=V_MANY),
       tied=st.booleans(), zeros=st.lists(st.integers(0, V_MANY - 1), max_size=2),
       delta=st.sampled_from([0.0, 1e-3, 0.01, 0.05]))
def test_cactus_closed_form_many_rejected_tokens(p, noise, tied, zeros, delta):
    """Cactus's O(V log V) form (bincounts over the shared ratio order) against the O(V^2) sum over
    drafted tokens at V = 60: draft = target times exp(noise), so several drafted tokens are
    rejectable (q_n > h_n) and ratios q/p lie between the c_n; plus tied ratios and exact zeros."""
    q = p * np.exp(noise)
    if tied:
        q[:10] = 1.5 * p[:10]
    p, q = p.copy(), q.copy()
    p[zeros[:1]] = 0.0
    q[zeros[1:]] = 0.0
    p, q = p / p.sum(), q / q.sum()
    v = cactus(delta)
    out, ref = v.out(p, q), v.rule.lifted_out(p, q)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13)
    assert abs(out.sum() - 1) < 1e-12


def test_cascade_defers_only_when_the_draft_is_less_confident():
    """out = p when max q < max p - alpha TV (then beta = 1 - TV), else out = q (beta = 1)."""
    p, q = np.array([0.7, 0.2, 0.1]), np.array([0.4, 0.35, 0.25])   # TV = 0.3
    assert np.allclose(cascade(0.5).rule.out(p, q), p) and cascade(0.5).rule.beta(p, q) == pytest.approx(0.7)
    assert np.allclose(cascade(1.1).rule.out(p, q), q) and cascade(1.1).rule.beta(p, q) == 1.0  # 0.4 >= 0.7 - 0.33


def test_fuzzy_kl_reverse_reads_kl_p_q_and_has_one_spelling():
    p, q = np.array([0.7, 0.2, 0.1]), np.array([0.4, 0.35, 0.25])
    for T in (0.1, 0.195, 1.0):   # KL(p || q) = 0.188..., KL(q || p) = 0.201...: the readings differ at 0.195
        assert fuzzy(T, "kl_reverse").beta(p, q) == float(kl(p, q) <= T)
    assert (fuzzy(0.195, "kl_reverse").beta(p, q), fuzzy(0.195, "kl").beta(p, q)) == (1.0, 0.0)
    with pytest.raises(ValueError, match="divergence must be one of"):
        fuzzy(0.3, "kl_reversed")   # the pre-release spelling is gone


def test_topk_output_law_nonnegative_when_ties_cover_the_vocabulary():
    # p one-hot, q on the other tokens: ties put every token in S, so q(S^c) = 0 exactly; the
    # old 1 - q(S) form rounded to -1.1e-16 and gave -3.7e-17 on the target's token
    from fractions import Fraction
    p = np.zeros(7)
    p[6] = 1.0
    q = np.r_[np.full(6, 1 / 6), 0.0]
    out = topk_accept(2).out(p, q)
    assert (out >= 0).all()
    exact = [Fraction(1, 6)] * 6 + [Fraction(0)]  # S = everything: never rejected, out = q
    assert max(abs(Fraction(float(o)) - e) for o, e in zip(out, exact)) < 1e-15


def _js_released_exact(p, q) -> float:
    """KL(m||p)/2 + KL(m||q)/2 at 60 digits (mpmath) from the float rows' exact values."""
    import mpmath

    with mpmath.workdps(60):
        tot = mpmath.mpf(0)
        for a, b in zip(p.tolist(), q.tolist()):
            a, b = mpmath.mpf(a), mpmath.mpf(b)
            if a == 0 and b == 0:
                continue
            m = (a + b) / 2
            tot += m * mpmath.log(m / a) + m * mpmath.log(m / b)
        return float(tot / 2)


def test_fsd_released_divergence_is_exact_in_one_log_a_token():
    """lossy._js_released = KL(m||p)/2 + KL(m||q)/2 through log1p of (p - q)^2 / (4 p q): equal
    to a 60-digit reference to 1e-14 relative on random, near-equal (p ~ q, where the two KL sums
    cancel: the old two-sum form misses by far more there) and common-zero rows; inf where one
    support has a token the other lacks; the compiled passes give the numpy path's bits."""
    from specsim import _jit
    from specsim.divergences import _kl_rows
    from specsim.verifiers.lossy import _js_released

    rng = np.random.default_rng(3)
    old_worse = 0
    for V in (3, 7, 40):
        for kind in ("random", "near", "zeros"):
            p = rng.dirichlet(np.ones(V))
            q = p * (1 + 1e-7 * rng.standard_normal(V)) if kind == "near" else rng.dirichlet(np.ones(V))
            if kind == "zeros":
                p[0] = q[0] = 0.0
            p, q = p / p.sum(), q / q.sum()
            ref = _js_released_exact(p, q)
            got = _js_released(p, q)
            assert abs(got - ref) <= 1e-14 * ref + 1e-300, (V, kind, got, ref)
            m = (p + q) / 2
            old = 0.5 * _kl_rows(m, p) + 0.5 * _kl_rows(m, q)
            old_worse += abs(old - ref) > 10 * abs(got - ref)
    assert old_worse >= 2                       # the near-equal rows: the form matters
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.4, 0.3, 0.3])
    assert _js_released(p, q) == np.inf and _js_released(q, p) == np.inf
    for V in (3, 5000):                         # (p - q)^2 / (4 p q) overflows: finite, and exact
        p = np.full(V, 1.0 / V)
        q = p.copy()
        q[0], q[1] = 5e-324, q[1] + q[0] - 5e-324
        ref = _js_released_exact(p, q) if V == 3 else None
        got = _js_released(p, q)
        assert np.isfinite(got)
        if ref is not None:
            assert abs(got - ref) <= 1e-14 * ref, (got, ref)
        with _jit.disabled():
            assert _js_released(p, q) == got
    for V in (5000, 151_936):
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        with _jit.disabled():
            ref = _js_released(p, q)
        assert _js_released(p, q) == ref
