"""Maximal coupling and multi-draft OT (lp.coupling, lp._race): primal LP, sorted-prefix dual, brute
force, the without-replacement quadrature against exact enumeration and against the plain recursion."""
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lp._race as race
from lp.coupling import (_prefix_order, _wor_miss_k2, draft_set_law, maximal_coupling, multidraft_bound,
                         multidraft_bound_bruteforce, multidraft_lp, union_bound)
from lp._race import wor_subset_quadrature
from lp.tables import specinfer_acceptance, spectr_acceptance
from specsim.testing.strategies import distribution_pairs, distributions


@st.composite
def pairs(draw, V=st.integers(3, 6)):
    """(p, q) from the package's pair strategy, with up to V - 2 entries of each forced to 0."""
    p, q = (r.copy() for r in draw(distribution_pairs(V)))
    for r in (p, q):
        r[draw(st.lists(st.integers(0, r.size - 1), max_size=r.size - 2, unique=True))] = 0.0
        if r.sum() == 0:
            r[0] = 1.0
    return p / p.sum(), q / q.sum()


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


def test_lp_methods_name_the_solver_used():
    assert maximal_coupling([0.5, 0.5], [0.9, 0.1], method="lp").method == "HIGHS"
    assert maximal_coupling([0.5, 0.5], [0.9, 0.1], method="lp", solver="CLARABEL").method == "CLARABEL"
    assert multidraft_lp([1, 0], [0.5, 0.5], 2, solver=("CLARABEL",)).solver == "CLARABEL"


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
@given(pairs(st.integers(3, 7)), st.integers(3, 4))
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


@settings(max_examples=6, deadline=None)
@given(pairs(st.integers(4, 5)), st.integers(2, 3), st.booleans())
def test_optimal_verifier_from_flow_is_lossless(pq, K, rep):
    p, q = pq
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


# --------------------------------------------------------------------------- the without-replacement quadrature
def _sorted_prefixes(p, q):
    order = _prefix_order(p, q)
    qs = q[order]
    Qc = np.concatenate(([0.0], np.cumsum(qs)))
    lam = np.concatenate((np.cumsum(qs[::-1])[::-1], [0.0]))
    return order, qs, Qc, lam


def _exact_subset_probabilities(q, order, ks, K):
    """Q_sub(H_k) = P(all K draws without replacement lie in the first k tokens of ``order``), by the set law."""
    sets, probs = draft_set_law(q, K, replacement=False)
    return np.array([sum(pr for S, pr in zip(sets, probs) if set(S) <= set(order[:k].tolist())) for k in ks])


@settings(max_examples=15, deadline=None)
@given(st.integers(5, 7).flatmap(lambda V: st.tuples(distributions(V, allow_zeros=False), st.permutations(range(V)))),
       st.integers(3, 4))
def test_quadrature_against_exact_subset_probabilities(q_order, K):
    """Q_sub(H_k) on every prefix of any token order: quadrature vs the exact set law (K = 3, 4)."""
    q, order = q_order
    order = np.asarray(order)
    qs = q[order]
    Qc = np.concatenate(([0.0], np.cumsum(qs)))
    lam = np.concatenate((np.cumsum(qs[::-1])[::-1], [0.0]))
    ks = np.arange(1, q.size)
    got = wor_subset_quadrature(qs, Qc, lam, K, ks, 0.25)
    np.testing.assert_allclose(got, _exact_subset_probabilities(q, order, ks, K), rtol=0, atol=1e-10)


def test_quadrature_k2_against_closed_form(llm_like_pair):
    """V = 400: the quadrature at K = 2 against the cancellation-free closed form on every prefix."""
    _, q = llm_like_pair(400, seed=2)
    Qc = np.concatenate(([0.0], np.cumsum(q)))
    lam = np.concatenate((np.cumsum(q[::-1])[::-1], [0.0]))
    ks = np.flatnonzero(lam[:-1] > 1e-3)[1:]
    got = wor_subset_quadrature(q, Qc, lam, 2, ks, 0.25)
    assert np.max(np.abs(got - (1.0 - _wor_miss_k2(q, Qc, lam)[ks]))) < 1e-10


def test_bound_step_convergence_large_vocabulary(llm_like_pair):
    p, q = llm_like_pair(3000, seed=3)
    for K in (3, 5):
        a = multidraft_bound(p, q, K, False).value
        b = multidraft_bound(p, q, K, False, step=0.1).value
        assert abs(a - b) < 1e-10
        assert a >= multidraft_bound(p, q, K).value - 1e-12


def test_race_state_union_is_the_product_of_polynomials():
    """e_j of a union of disjoint sets is the truncated product: two singletons {a}, {b} give
    e_1 = o_a + o_b and e_2 = o_a o_b."""
    t = np.array([[0.5], [2.0]])
    K = 3
    one = [race.race_states(np.array([qv]), t, K, race.SURE, race.RaceState.empty(K, 2), np.array([1])).column(0)
           for qv in (0.3, 0.6)]
    both = one[0].union(one[1])
    o = np.expm1(np.array([0.3, 0.6])[None, :] * t)
    np.testing.assert_allclose(both.esym[1], o.sum(axis=1), rtol=1e-14)
    np.testing.assert_allclose(both.esym[2], o.prod(axis=1), rtol=1e-14)
    # P(N <= K - 1) = 1 for two tokens and K = 3
    np.testing.assert_allclose(both.low_probability(), 1.0, rtol=1e-14)


def _low_probability_reference(state):
    """P(N <= K - 1) by the logarithms on every entry (the previous RaceState.low_probability)."""
    e, n, m = state
    low = np.zeros(n.shape)
    with np.errstate(divide="ignore"):
        for j in range(e.shape[0]):
            low += np.where(n <= e.shape[0] - 1 - j, np.exp(np.log(e[j]) - m), 0.0)
    return low


@pytest.mark.parametrize("K", [2, 3, 8])
def test_low_probability_linear_terms_equal_the_log_form(K):
    """e_j e^-m where m <= 700 and the logarithms beyond: masses from 1e-6 to ~4e4 on the grid,
    tokens arrived (q t > SURE) on some rows, subnormal and zero e_j."""
    rng = np.random.default_rng(K)
    qs = np.concatenate((rng.dirichlet(np.full(400, 0.2)), [5e-324, 0.0]))
    t = np.exp(np.arange(-12.0, 10.5, 0.25))[:, None]
    state = race.race_states(qs, t, K, race.SURE, race.RaceState.empty(K, t.shape[0]),
                             np.arange(0, qs.size + 1, 7))
    assert (state.mass > 700).any() and (state.mass <= 700).any() and (state.arrived > 0).any()
    want = _low_probability_reference(state)
    got = state.low_probability()
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-300)


def _reference_quadrature(qs, lam, K, ks, step=0.25):
    """Q_sub(H_k) written plainly (an oracle): the positive e_j recursion over every token up to
    the largest prefix on the full log-t grid, O(G max(ks) K), no blocks, moments or pruning."""
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


#: (exact top masses, cluster gap): the default, and settings that force the moment path, the
#: block joins between clusters and the large-t fallback on tiny instances.
FAST_PATH_SETTINGS = ((256, 2048), (0, 0), (1, 0), (2, 1), (0, 2048))


@contextmanager
def race_settings(top=None, gap=None):
    """Set lp._race's EXACT_TOP and CLUSTER_GAP inside the block (restored afterwards)."""
    saved = race.EXACT_TOP, race.CLUSTER_GAP
    race.EXACT_TOP = saved[0] if top is None else top
    race.CLUSTER_GAP = saved[1] if gap is None else gap
    try:
        yield
    finally:
        race.EXACT_TOP, race.CLUSTER_GAP = saved


@settings(max_examples=20, deadline=None)
@given(pairs(st.integers(5, 8)), st.integers(3, 5))
def test_fast_quadrature_matches_exact_enumeration(pq, K):
    """Q_sub(H_k) on every prefix vs the exact set law, and the bound vs brute force, to 1e-10, under
    every fast-path setting."""
    p, q = pq
    if K >= np.count_nonzero(q):
        K = max(np.count_nonzero(q) - 1, 1)
    if K < 3:
        return
    order, qs, Qc, lam = _sorted_prefixes(p, q)
    ks = np.flatnonzero((lam[:-1] > 0) & (Qc[:-1] > 0))
    exact = _exact_subset_probabilities(q, order, ks, K)
    for top, gap in FAST_PATH_SETTINGS:
        with race_settings(top, gap):
            assert np.max(np.abs(wor_subset_quadrature(qs, Qc, lam, K, ks, 0.25) - exact)) < 1e-10
            sub = ks[::2]                                    # scattered candidates
            assert np.max(np.abs(wor_subset_quadrature(qs, Qc, lam, K, sub, 0.25) - exact[::2])) < 1e-10
            assert abs(multidraft_bound(p, q, K, False).value
                       - multidraft_bound_bruteforce(p, q, K, False).value) < 1e-10


def test_fast_quadrature_matches_the_plain_recursion(llm_like_pair):
    """V = 3000 LLM-like pair, K = 4, 8: every prefix and the bound vs the O(G V K) oracle, to 1e-10."""
    p, q = llm_like_pair(3000, seed=4)
    order, qs, Qc, lam = _sorted_prefixes(p, q)
    ks = np.flatnonzero((lam > 0) & (Qc > 0))
    Pc = np.concatenate(([0.0], np.cumsum(p[order])))
    for K in (4, 8):
        ref = _reference_quadrature(qs, lam, K, ks)
        Qsub = (lam <= 0).astype(float)                          # 1 once H holds all of supp q
        Qsub[ks] = ref                                           # (0 while q(H) = 0)
        assert abs(multidraft_bound(p, q, K, False).value - np.min(Pc + 1.0 - Qsub)) < 1e-10
        for gap in (2048, 64):                                   # one cluster; many clusters
            with race_settings(gap=gap):
                assert np.max(np.abs(wor_subset_quadrature(qs, Qc, lam, K, ks, 0.25) - ref)) < 1e-10
                sub = ks[::97]
                assert np.max(np.abs(wor_subset_quadrature(qs, Qc, lam, K, sub, 0.25) - ref[::97])) < 1e-10


@settings(max_examples=40, deadline=None)
@given(distribution_pairs(st.integers(4, 9)), st.integers(3, 5))
def test_chord_screen_brackets_the_exact_objective(pq, K):
    """The tangent and chord bounds on Q_K hold at EVERY sorted prefix against the exact set law
    (positive terms, math.fsum); rows with max q > 1/4 are left to the general screen."""
    if K <= pq[0].size:
        _check_chord_screen(*pq, K)


@pytest.mark.parametrize("K", [3, 4, 5])
@pytest.mark.parametrize("seed", range(12))
def test_chord_screen_brackets_the_exact_objective_on_spread_drafts(seed, K):
    """Drafts with max q <= 1/4, where the sharper bounds apply (V = 9, including ties)."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.full(9, 6.0))
    if q.max() > 0.25:
        q = np.full(9, 1.0 / 9)
    p = rng.dirichlet(np.full(9, 0.5))
    if seed % 3 == 0:
        p[:4] = q[:4] * p[4:].sum() / q[4:].sum()          # tied ratios
        p /= p.sum()
    from specsim._validate import as_pair
    _check_chord_screen(*as_pair(p, q), K, must_apply=True)


def _check_chord_screen(p, q, K, must_apply=False):
    import math
    from lp.coupling import _chord_screen, _cumsum0, _subset_miss_exact

    order = _prefix_order(p, q)
    ps, qs = p[order], q[order]
    Pc, Qc = _cumsum0(ps), _cumsum0(qs)
    lam = np.concatenate((np.cumsum(qs[::-1])[::-1], [0.0]))
    miss2 = _wor_miss_k2(qs, Qc, lam)
    sets, probs = draft_set_law(q, K, replacement=False)
    if len(sets[0]) < K:                                   # |supp q| < K: the set is supp q
        return
    for k in range(p.size + 1):
        mask = np.zeros(p.size, dtype=bool)
        mask[order[:k]] = True
        exact = math.fsum(p[mask]) + _subset_miss_exact(q, K, False, mask, sets, probs)
        at = np.array([k])
        opt, upper = _chord_screen(Pc, qs, Qc, lam, miss2, K, at, np.array([-np.inf]), np.inf)
        if qs.max() > 0.25 * Qc[-1]:
            assert opt[0] == -np.inf and upper == np.inf and not must_apply    # not applied
            continue
        assert opt[0] <= exact + 1e-13 and exact <= upper + 1e-13, (k, opt[0], exact, upper)


@pytest.mark.parametrize("K", [3, 4, 8, 15])
def test_moment_state_matches_the_recursion(K):
    """small_token_state (moments, as many as the largest q_v t on the rows needs) against the
    positive recursion: P(N = j) = e^{-mass} e_j to 1e-13 on rows from q t ~ 1e-6 up to x_max, for
    flat and spread masses (the recursion itself drifts by ~4e-14 over 3000 equal masses).
    Negative control (K <= 8): told a 100x smaller x_max, it keeps too few moments and misses."""
    rng = np.random.default_rng(K)
    x_max = min(1.0, 2.0 / (K - 1))
    for q in (np.full(3000, 1.0 / 3000), rng.dirichlet(np.full(3000, 0.1)), rng.dirichlet(np.full(300, 10.0))):
        tau = float(q.max())
        t = np.exp(np.linspace(np.log(1e-6), np.log(x_max), 40)) / tau
        for rows in (t[:5], t[:25], t):                          # small x needs fewer moments
            ref = race.race_states(q, rows[:, None], K, race.SURE, race.RaceState.empty(K, rows.size),
                                   np.array([q.size])).column(0)
            p_ref = ref.esym * np.exp(-ref.mass)
            got = race.small_token_state(q, rows, K, x_max)
            np.testing.assert_array_equal(got.arrived, ref.arrived)
            assert np.max(np.abs(got.esym * np.exp(-got.mass) - p_ref)) <= 1e-13, (K, rows.size)
    q = rng.dirichlet(np.full(50, 0.1))                          # few masses: P(N = j) not tiny at x_max
    t = np.exp(np.linspace(np.log(1e-6), np.log(x_max), 40)) / float(q.max())
    ref = race.race_states(q, t[:, None], K, race.SURE, race.RaceState.empty(K, t.size), np.array([q.size])).column(0)
    for shrink, ok in ((1.0, True), (100.0, K > 8)):           # (R >= K moments at least: enough at K = 15)
        got = race.small_token_state(q, t, K, x_max / shrink)
        assert (np.max(np.abs(got.esym * np.exp(-got.mass) - ref.esym * np.exp(-ref.mass))) <= 1e-13) == ok, K


def test_quadrature_row_chunks_do_not_change_the_result(llm_like_pair, monkeypatch):
    """The grid rows in passes of any size (one row, the default, all at once): the same Q_sub to
    rounding, with one cluster and with many."""
    _, q = llm_like_pair(3000, seed=5)
    order, qs, Qc, lam = _sorted_prefixes(q, q)
    ks = np.flatnonzero((lam > 0) & (Qc > 0))[100::7]
    for K in (3, 6):
        for gap in (2048, 64):
            with race_settings(gap=gap):
                got = []
                for chunk in (1, race.CHUNK, 10 ** 9):
                    monkeypatch.setattr(race, "CHUNK", chunk)
                    got.append(wor_subset_quadrature(qs, Qc, lam, K, ks, 0.2))
                assert np.max(np.abs(got[0] - got[2])) <= 1e-15 and np.max(np.abs(got[1] - got[2])) <= 1e-15
