"""Maximal coupling, multi-draft OT (primal LP, sorted-prefix dual, brute force) and gap tables."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from lp.coupling import (_wor_subset_k2, _wor_subset_quadrature, draft_set_law, maximal_coupling,
                         multidraft_bound, multidraft_bound_bruteforce, multidraft_lp, union_bound)
from lp.tables import (bounds_report, gap_table, model_gap_table, spectr_acceptance, spectr_rho,
                       specinfer_acceptance)
from specsim import iid, random_model


@st.composite
def pairs(draw, vmin=3, vmax=6):
    """(p, q) on V in vmin..vmax, Dirichlet rows with zeros forced in some entries."""
    V = draw(st.integers(vmin, vmax))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(2):
        v = rng.dirichlet(np.full(V, draw(st.sampled_from([0.3, 1.0, 3.0]))))
        zeros = draw(st.lists(st.integers(0, V - 1), max_size=V - 2, unique=True))
        v[zeros] = 0.0
        if v.sum() == 0:
            v[0] = 1.0
        out.append(v / v.sum())
    return out[0], out[1]


# --------------------------------------------------------------------------- maximal coupling
@given(pairs())
def test_maximal_coupling_lp_equals_closed_form(pq):
    p, q = pq
    closed = maximal_coupling(p, q)
    lp = maximal_coupling(p, q, method="lp")
    assert abs(closed.value - np.minimum(p, q).sum()) < 1e-15
    assert abs(closed.value - lp.value) < 1e-8
    for c in (closed, lp):
        assert np.all(c.plan >= 0)
        np.testing.assert_allclose(c.plan.sum(axis=1), q, atol=1e-8)   # rows: draft
        np.testing.assert_allclose(c.plan.sum(axis=0), p, atol=1e-8)   # columns: target
        assert abs(np.trace(c.plan) - c.value) < 1e-8


def test_maximal_coupling_toy_anchor():
    c = maximal_coupling([1 / 3, 2 / 3], [2 / 3, 1 / 3])
    assert abs(c.value - 2 / 3) < 1e-15 and abs(c.tv - 1 / 3) < 1e-15


# --------------------------------------------------------------------------- anchors (docs/theory.md §12)
def test_sequoia_appendix_f_anchor():
    p, q = [1.0, 0.0], [0.5, 0.5]
    for fn in (multidraft_bound, multidraft_bound_bruteforce, multidraft_lp):
        assert abs(fn(p, q, 2).value - 0.75) < 1e-9
        assert abs(fn(p, q, 2, replacement=False).value - 1.0) < 1e-9
    assert multidraft_bound(p, q, 2).H.tolist() == [1]
    assert abs(specinfer_acceptance(p, q, 2) - 0.75) < 1e-12
    assert abs(spectr_acceptance(p, q, 2) - 0.75) < 1e-12


def test_union_bound_counterexample():
    p, q = [0.0, 0.5, 0.5], [0.8, 0.1, 0.1]
    b = multidraft_bound(p, q, 2)
    assert abs(b.value - 0.36) < 1e-12 and b.H.tolist() == [0]
    assert abs(multidraft_lp(p, q, 2).value - 0.36) < 1e-8
    # negative control: the per-token formula is not the optimum
    assert abs(union_bound(p, q, 2) - 0.38) < 1e-12
    assert union_bound(p, q, 2) > b.value + 0.01


# --------------------------------------------------------------------------- prefix rule = LP = brute force
@settings(max_examples=25)
@given(pairs(), st.integers(1, 3), st.booleans())
def test_bound_equals_lp_and_bruteforce(pq, K, replacement):
    p, q = pq
    bound = multidraft_bound(p, q, K, replacement)
    brute = multidraft_bound_bruteforce(p, q, K, replacement)
    lp = multidraft_lp(p, q, K, replacement)
    assert abs(bound.value - brute.value) < 1e-8
    assert abs(bound.value - lp.value) < 1e-8
    # the reported H attains the value
    assert abs(p[bound.H].sum() + 1 - bound.q_subset - bound.value) < 1e-12


@settings(max_examples=20)
@given(pairs(3, 7), st.integers(3, 4))
def test_prefix_rule_without_replacement_k34(pq, K):
    """Without replacement the prefix rule is verified (not proven): K = 3, 4 go through the quadrature."""
    p, q = pq
    K = min(K, p.size)
    assert abs(multidraft_bound(p, q, K, False).value - multidraft_bound_bruteforce(p, q, K, False).value) < 1e-9


@given(pairs(), st.integers(1, 4))
def test_order_relations(pq, K):
    p, q = pq
    iid_opt = multidraft_bound(p, q, K).value
    assert union_bound(p, q, K) >= iid_opt - 1e-12          # union bound is an upper bound
    if K == 1:
        assert abs(union_bound(p, q, 1) - iid_opt) < 1e-12
        assert abs(iid_opt - maximal_coupling(p, q).value) < 1e-12
    if K <= p.size:
        assert multidraft_bound(p, q, K, False).value >= iid_opt - 1e-10   # without >= with replacement
    for acc in (specinfer_acceptance(p, q, K), spectr_acceptance(p, q, K), maximal_coupling(p, q).value):
        assert acc <= iid_opt + 1e-10                        # no i.i.d. verifier beats the optimum


def test_quadrature_against_exact_subset_probabilities():
    """Q_sub(H_k) on every prefix: quadrature vs the exact set law (K = 3, 4) and vs the K = 2 closed form."""
    rng = np.random.default_rng(7)
    for V, K in ((6, 3), (7, 4), (5, 3)):
        q = rng.dirichlet(np.full(V, 0.5))
        sets, probs = draft_set_law(q, K, replacement=False)
        order = rng.permutation(V)
        qs = q[order]
        Qc = np.concatenate(([0.0], np.cumsum(qs)))
        lam = np.concatenate((np.cumsum(qs[::-1])[::-1], [0.0]))
        ks = np.arange(1, V)
        got = _wor_subset_quadrature(qs, Qc, lam, K, ks, 0.25)
        for k, g in zip(ks, got):
            H = set(order[:k].tolist())
            exact = sum(pr for S, pr in zip(sets, probs) if set(S) <= H)
            assert abs(g - exact) < 1e-10, (V, K, k)
    # larger V: quadrature (K = 2) against the exact closed form on all prefixes
    q = rng.dirichlet(np.full(400, 0.2))
    Qc = np.concatenate(([0.0], np.cumsum(q)))
    lam = np.concatenate((np.cumsum(q[::-1])[::-1], [0.0]))
    ks = np.flatnonzero(lam[:-1] > 1e-3)[1:]
    got = _wor_subset_quadrature(q, Qc, lam, 2, ks, 0.25)
    assert np.max(np.abs(got - _wor_subset_k2(q, Qc)[ks])) < 1e-10


def test_bound_step_convergence_large_vocabulary():
    rng = np.random.default_rng(3)
    V = 3000
    logits = 3 * rng.standard_normal(V)
    p = np.exp(logits) / np.exp(logits).sum()
    q = np.exp(0.8 * logits + rng.standard_normal(V))
    q /= q.sum()
    for K in (3, 5):
        a = multidraft_bound(p, q, K, False).value
        b = multidraft_bound(p, q, K, False, step=0.1).value
        assert abs(a - b) < 1e-10
        assert a >= multidraft_bound(p, q, K).value - 1e-12


def test_support_edge_cases():
    # K larger than |supp q| without replacement: the draws exhaust the support
    p, q = np.array([0.2, 0.3, 0.5]), np.array([0.5, 0.5, 0.0])
    sets, probs = draft_set_law(q, 3, replacement=False)
    assert sets == ((0, 1),) and probs.tolist() == [1.0]
    for rep in (True, False):
        b = multidraft_bound(p, q, 3, rep)
        assert abs(b.value - multidraft_lp(p, q, 3, rep).value) < 1e-8
        assert abs(b.value - multidraft_bound_bruteforce(p, q, 3, rep).value) < 1e-12
        assert b.value <= 1 - 0.5 + 1e-12           # target mass where q = 0 is never accepted
    assert abs(multidraft_bound(p, q, 3, False).value - 0.5) < 1e-12


def test_optimal_verifier_from_flow_is_lossless():
    rng = np.random.default_rng(11)
    for V, K, rep in ((4, 2, True), (5, 3, False), (4, 3, True)):
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        sol = multidraft_lp(p, q, K, rep)
        out = sum(pr * sol.output_given_set(i) for i, pr in enumerate(sol.set_prob))
        np.testing.assert_allclose(out, p, atol=1e-9)
        hit = sum(pr * sol.output_given_set(i)[list(S)].sum() for i, (S, pr) in enumerate(zip(sol.sets, sol.set_prob)))
        assert hit >= sol.value - 1e-9
        assert abs(sol.value - multidraft_bound(p, q, K, rep).value) < 1e-8


def test_draft_set_law_sums_and_iid_formula():
    q = np.array([0.5, 0.3, 0.2])
    sets, probs = draft_set_law(q, 2)
    law = dict(zip(sets, probs))
    assert abs(law[(0,)] - 0.25) < 1e-15 and abs(law[(0, 1)] - 2 * 0.5 * 0.3) < 1e-15
    sets, probs = draft_set_law(q, 2, replacement=False)
    law = dict(zip(sets, probs))
    assert abs(law[(0, 1)] - (0.5 * 0.3 / 0.5 + 0.3 * 0.5 / 0.7)) < 1e-15


# --------------------------------------------------------------------------- tables
def test_gap_table_rows_and_text():
    t = gap_table([0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], K_values=(1, 2, 4, 5))
    assert all(r.gap_percent >= -1e-7 for r in t.rows)
    assert any(r.name == "optimum" and not r.replacement and r.K == 4 for r in t.rows)
    assert not any(not r.replacement and r.K == 5 for r in t.rows)      # K > V: no w/o-replacement row
    text = str(t)
    assert "gap %" in text and "SpecTr K-SEQ" in text
    assert "SpecInfer RRS" in model_gap_table(random_model(4, 0), random_model(4, 1), (2,)).__str__()
    assert "optimum" in bounds_report(V=5, seed=2) and "optimum" in bounds_report([0.5, 0.5], [0.9, 0.1], K=2)


def test_spectr_rho_is_smallest_valid():
    rng = np.random.default_rng(5)
    for _ in range(20):
        p, q = rng.dirichlet(np.ones(4)), rng.dirichlet(np.ones(4))
        for K in (2, 3):
            rho = spectr_rho(p, q, K)
            assert 1.0 <= rho <= K
            m = np.minimum(q, p / rho)
            c = sum((1 - m.sum()) ** j for j in range(K))
            assert np.all(p - m * c >= -1e-9)


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("call", [
    lambda: maximal_coupling([0.5, 0.6], [0.5, 0.5]),
    lambda: maximal_coupling([0.5, 0.5], [-0.1, 1.1]),
    lambda: maximal_coupling([np.nan, 1.0], [0.5, 0.5]),
    lambda: maximal_coupling([0.5, 0.5], [0.2, 0.3, 0.5]),
    lambda: maximal_coupling([1.0], [1.0]),
    lambda: maximal_coupling([0.5, 0.5], [0.5, 0.5], method="simplex"),
    lambda: multidraft_bound([0.5, 0.5], [0.5, 0.5], 0),
    lambda: multidraft_bound([0.5, 0.5], [0.5, 0.5], 1.5),
    lambda: multidraft_bound([0.5, 0.5], [0.5, 0.5], 3, replacement=False),
    lambda: multidraft_bound([[0.5, 0.5]], [[0.5, 0.5]], 2),
    lambda: multidraft_lp([0.5, 0.5], [0.5, 0.5], 0),
    lambda: multidraft_lp([0.5, 0.5], [0.5, 0.5], 3, replacement=False),
    lambda: multidraft_bound_bruteforce(np.full(17, 1 / 17), np.full(17, 1 / 17), 2),
    lambda: draft_set_law([0.5, 0.4], 2),
    lambda: union_bound([0.5, 0.5], [0.5, 0.5], 0),
    lambda: specinfer_acceptance([0.5, 0.5], [0.5, 0.5], 0),
    lambda: spectr_acceptance([0.5, 0.5], [1.0, 0.5], 2),
    lambda: gap_table([0.5, 0.5], [0.5, 0.5], K_values=(0,)),
    lambda: model_gap_table([0.5, 0.5], iid([0.5, 0.5])),
    lambda: model_gap_table(iid([0.5, 0.5]), iid([0.2, 0.3, 0.5])),
    lambda: bounds_report(p=[0.5, 0.5]),
    lambda: bounds_report(seed=-1),
    lambda: multidraft_bound(np.random.default_rng(0).dirichlet(np.ones(40)),
                             np.random.default_rng(1).dirichlet(np.ones(40)), 30, replacement=False),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


# --------------------------------------------------------------------------- fast without-replacement quadrature
def _reference_quadrature(qs, lam, K, ks, step=0.25):
    """The pre-optimisation implementation of Q_sub(H_k) (kept as an oracle): the positive e_j
    recursion over every token up to the largest prefix on the full log-t grid, O(G max(ks) K)."""
    import math
    kmax = int(ks.max())
    q = qs[:kmax]
    t_lo = (1e-16 * math.factorial(K)) ** (1.0 / K)
    t_hi = 40.0 / float(lam[ks].min())
    t = np.exp(np.arange(np.log(t_lo), np.log(t_hi) + step, step))[:, None]
    qt = q[None, :] * t
    sure = qt > 36.0
    o = np.where(sure, 0.0, np.expm1(np.minimum(qt, 36.0)))
    n_sure = np.concatenate([np.zeros((t.size, 1), dtype=np.int64), np.cumsum(sure, axis=1)], axis=1)[:, ks]
    mass = np.concatenate([np.zeros((t.size, 1)), np.cumsum(np.where(sure, 0.0, qt), axis=1)], axis=1)[:, ks]
    e = np.ones((t.size, kmax + 1))
    low = np.zeros((t.size, ks.size))
    for j in range(K):
        with np.errstate(divide="ignore"):
            low += np.where(n_sure <= K - 1 - j, np.exp(np.log(e[:, ks]) - mass), 0.0)
        if j < K - 1:
            work = o * e[:, :kmax]
            e[:, 0] = 0.0
            np.cumsum(work, axis=1, out=e[:, 1:])
    lt = lam[ks][None, :] * t
    return np.clip((step * lt * np.exp(-lt) * np.clip(1.0 - low, 0.0, 1.0)).sum(axis=0), 0.0, 1.0)


def _sorted_prefixes(p, q):
    from lp.coupling import _prefix_order
    order = _prefix_order(p, q)
    qs = q[order]
    Qc = np.concatenate(([0.0], np.cumsum(qs)))
    lam = np.concatenate((np.cumsum(qs[::-1])[::-1], [0.0]))
    return order, qs, Qc, lam


#: (exact top masses, cluster gap): the default, and settings that force the moment path, the
#: block joins between clusters and the large-t fallback on tiny instances.
FAST_PATH_SETTINGS = ((256, 2048), (0, 0), (1, 0), (2, 1), (0, 2048))


@settings(max_examples=20, deadline=None)
@given(pairs(5, 8), st.integers(3, 5))
def test_fast_quadrature_matches_exact_enumeration(pq, K):
    """Q_sub(H_k) on every prefix vs the exact set law, and the bound vs brute force, to 1e-10."""
    import lp.coupling as C
    p, q = pq
    if K >= np.count_nonzero(q):
        K = max(np.count_nonzero(q) - 1, 1)
    if K < 3:
        return
    order, qs, Qc, lam = _sorted_prefixes(p, q)
    ks = np.flatnonzero((lam[:-1] > 0) & (Qc[:-1] > 0))
    sets, probs = draft_set_law(q, K, replacement=False)
    exact = np.array([sum(pr for S, pr in zip(sets, probs) if set(S) <= set(order[:k].tolist())) for k in ks])
    saved = C._EXACT_TOP, C._CLUSTER_GAP
    try:
        for top, gap in FAST_PATH_SETTINGS:
            C._EXACT_TOP, C._CLUSTER_GAP = top, gap
            assert np.max(np.abs(_wor_subset_quadrature(qs, Qc, lam, K, ks, 0.25) - exact)) < 1e-10
            sub = ks[::2]                                        # scattered candidates
            assert np.max(np.abs(_wor_subset_quadrature(qs, Qc, lam, K, sub, 0.25) - exact[::2])) < 1e-10
            assert abs(multidraft_bound(p, q, K, False).value
                       - multidraft_bound_bruteforce(p, q, K, False).value) < 1e-10
    finally:
        C._EXACT_TOP, C._CLUSTER_GAP = saved


def test_fast_quadrature_matches_previous_implementation():
    """V = 3000 LLM-like pair, K = 4, 8: every prefix and the bound vs the O(G V K) oracle, to 1e-10."""
    import lp.coupling as C
    from lp.bench import llm_like_pair
    p, q = llm_like_pair(3000, seed=4)
    order, qs, Qc, lam = _sorted_prefixes(p, q)
    ks = np.flatnonzero((lam > 0) & (Qc > 0))
    Pc = np.concatenate(([0.0], np.cumsum(p[order])))
    for K in (4, 8):
        ref = _reference_quadrature(qs, lam, K, ks)
        Qsub = (lam <= 0).astype(float)                          # 1 once H holds all of supp q
        Qsub[ks] = ref                                           # (0 while q(H) = 0)
        assert abs(multidraft_bound(p, q, K, False).value - np.min(Pc + 1.0 - Qsub)) < 1e-10
        saved = C._CLUSTER_GAP
        try:
            for gap in (2048, 64):                               # one cluster; many clusters
                C._CLUSTER_GAP = gap
                assert np.max(np.abs(_wor_subset_quadrature(qs, Qc, lam, K, ks, 0.25) - ref)) < 1e-10
                sub = ks[::97]
                assert np.max(np.abs(_wor_subset_quadrature(qs, Qc, lam, K, sub, 0.25) - ref[::97])) < 1e-10
        finally:
            C._CLUSTER_GAP = saved
