"""The grouped clip family (compiled, no full sort) against the sorted one (numpy, the reference):
the same ranks and ratio order wherever a query lands, prefix sums equal to rounding (m ulps),
the same refusal of overflowing ratios, and buckets sorted only where queries land."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("numba")

from lp.certificates import certify  # noqa: E402
from specsim import _jit  # noqa: E402
from specsim.testing.strategies import distribution_pairs  # noqa: E402
from specsim.verifiers._clip_family import ClipFamily, SortedClipFamily, _GroupedClipFamily  # noqa: E402
from specsim.verifiers.lossy import cactus, mentored  # noqa: E402
from tests.lp.frontier_checks import budget_rounding  # noqa: E402
from tests.lp.test_certify_jit import ROW_KINDS, _assert_same, _row  # noqa: E402


def _queries(fam: ClipFamily, rng) -> np.ndarray:
    """Every ratio, its float neighbours, 0, inf and random points across the range."""
    r = fam.r
    xs = [r, np.nextafter(r, 0.0), np.nextafter(r, np.inf), [0.0, 1.0, np.inf, 5e-324]]
    if r.size:
        hi = max(float(r[-1]), 1.0)
        xs.append(rng.random(20) * hi)
    return np.concatenate([np.asarray(x, dtype=np.float64) for x in xs])


def _poisoned_family(p, q) -> _GroupedClipFamily:
    """A grouped family whose work block starts as NaN: a sum read where the family never wrote
    one (its bucket starts are filled only when a query reaches them) comes out NaN, not a stale
    value from an earlier family."""
    m = int(np.count_nonzero(p > 0))
    w = _jit.work_block("clip W", 12, m + 1)
    w[:] = np.nan
    del w
    return _GroupedClipFamily(p, q)


def _assert_agrees(p, q, seed=0):
    ref = SortedClipFamily(p, q)
    fam = _poisoned_family(p, q)
    assert (fam.m, fam.n0, fam.q0, fam.a_max) == (ref.r.size, ref.n0, ref.q0, ref.a_max)
    tol = budget_rounding(p, 0.0)
    M = {k: ref.mid(k) for k in ("tv", "kl", "kl_reverse")} if ref.n0 == 0 else {"tv": ref.mid("tv")}
    Mg = {k: fam.mid(k) for k in M}
    scale = {k: float(np.abs(np.diff(v)).sum()) + 1.0 for k, v in M.items()}
    for a in (1.0, 1.5, max(ref.a_max, 1.0), 2.0 * max(ref.a_max, 1.0)):    # the clipped law, one pass
        for b in (0.0, 0.5, 1.0):
            np.testing.assert_array_equal(fam.pi(a, b), ref.pi(a, b))
    for x in _queries(ref, np.random.default_rng(seed)):
        for side in ("left", "right"):
            j = fam.rank(x, side)
            assert j == ref.rank(x, side), (x, side)
            for a, b in ((fam.Pc, ref.Pc), (fam.Qc, ref.Qc), (fam.Psuf, ref.Psuf), (fam.Qsuf, ref.Qsuf)):
                assert abs(a[j] - b[j]) <= tol, (x, side, j, a[j], b[j])
            for k in M:
                assert abs(Mg[k][j] - M[k][j]) <= tol * scale[k], (k, j)
            if j < fam.m:                       # the ratio order itself (ties in any order)
                assert fam.ratios_at(np.array([j]))[0] == ref.r[j]


@pytest.mark.parametrize("kind", ROW_KINDS)
@pytest.mark.parametrize("V", [3, 7, 300])
def test_ranks_order_and_sums_match_the_sorted_family(kind, V):
    try:
        SortedClipFamily(*_row(kind, V, 5))
    except ValueError:
        return                                  # overflowing ratios: tested below
    _assert_agrees(*_row(kind, V, 5), seed=V)


@settings(max_examples=40, deadline=None)
@given(distribution_pairs(st.integers(2, 40)))
def test_ranks_order_and_sums_match_on_random_pairs(pq):
    _assert_agrees(*pq)


def test_overflowing_ratio_is_refused_with_the_same_message():
    p = np.array([0.5, 0.5, 5e-324, 5e-324, 0.0])    # q/p = 0.2 / 5e-324 overflows at tokens 2 and 3
    q = np.full(5, 0.2)
    msgs = []
    for cls in (SortedClipFamily, _GroupedClipFamily):
        with pytest.raises(ValueError, match="q/p overflows at token 3") as err:
            cls(p, q)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


def test_ratios_spanning_more_than_the_bucket_range():
    """Ratios from 1e-300 to 1e300: the lowest bucket takes everything 2^128 below the top; ranks
    and sums still agree (the low bucket is sorted when a query lands in it)."""
    rng = np.random.default_rng(1)
    V = 200
    p = rng.random(V) * 10.0 ** rng.integers(-300, 0, V).astype(float)
    q = rng.random(V) * 10.0 ** rng.integers(-300, 0, V).astype(float)
    p[0] = q[1] = 1.0
    p, q = p / p.sum(), q / q.sum()
    _assert_agrees(p, q, seed=2)
    _assert_same(mentored(0.6), p, q, "wide")
    _assert_same(cactus(0.05), p, q, "wide")


def test_all_ratios_zero_on_the_target_support():
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.0, 0.0, 1.0])
    _assert_agrees(p, q)
    for rule in (mentored(0.6), cactus(0.05)):
        _assert_same(rule, p, q, "zeros")


def test_a_certificate_sorts_only_the_buckets_it_lands_in():
    """The point of the grouped family: at V = 151,936 a certificate sorts a small part of the row
    (negative control: a family whose every bucket is sorted has sorted m tokens)."""
    p, q = _row("llm", 151_936, 3)
    fam = _GroupedClipFamily(p, q)              # what clip_family gives with numba on
    with fam.shared():
        out, _ = mentored(0.6).rule.out_beta(p, q)
    from lp.frontier import _frontier_beta
    from specsim.divergences import kl_pair
    k1, k2 = kl_pair(out, p)
    _frontier_beta(p, q, k1, "kl", fam)
    _frontier_beta(p, q, k2, "kl_reverse", fam)
    start, done = fam._S[2][:2]
    sizes = np.diff(start)
    sorted_tokens = int(sizes[done[:-1].astype(bool) & (sizes > 1)].sum())
    assert 0 < sorted_tokens < fam.m // 20, (sorted_tokens, fam.m)
    for k in range(sizes.size):                 # negative control: force every bucket
        fam.ratios_at(np.array([start[k]])) if sizes[k] else None
    assert np.array_equal(fam.r, np.sort(fam.r)) and np.array_equal(fam.r, SortedClipFamily(p, q).r)


def test_grouped_clip_level_meets_the_budget_to_rounding():
    """An independent reference: at V = 151,936 the clip level's law pi(a) has KL(p || pi), summed
    exactly (math.fsum of numpy's logs), equal to the budget to within 2e-15 absolute."""
    import math

    from specsim.verifiers.lossy import lenience
    p, q = _row("llm", 151_936, 3)
    with _jit.disabled():
        eps = certify(lenience(0.8), p, q).kl_p_out
    fam = _poisoned_family(p, q)
    a = fam.clip_level("kl_reverse", eps)
    pi = fam.pi(a, fam.b(a))
    d = math.fsum(p * np.log(p / pi))
    assert abs(d - eps) <= 2e-15, (d, eps)


def test_work_block_is_reused_only_when_no_family_holds_it():
    """Two live families never share a work block (the first stays correct after the second is
    built); once a family is gone its block is reused (the reuse really happens)."""
    pa, qa = _row("llm", 500, 1)
    pb, qb = _row("random", 500, 2)
    fa = _GroupedClipFamily(pa, qa)
    fb = _GroupedClipFamily(pb, qb)
    assert not np.shares_memory(fa._W, fb._W)
    ref = SortedClipFamily(pa, qa)
    for x in ref.r[::7]:
        assert fa.rank(x, "right") == ref.rank(x, "right")
        assert fa.ratios_at(np.array([fa.rank(x, "right") - 1]))[0] == x
    del fa
    where = fb._W.__array_interface__["data"][0]     # an address: holding the array would pin it
    del fb
    fc = _GroupedClipFamily(pa, qa)
    assert fc._W.__array_interface__["data"][0] == where


@pytest.mark.parametrize("kind", ROW_KINDS)
@pytest.mark.parametrize("V", [3, 300, 5000])
def test_q_divergence_is_one_sum_before_and_after_the_buckets(kind, V):
    """D(q, p) comes from a pass of its own on a fresh family and from the set-up pass once the
    buckets exist: the same bits either way (a certificate's value must not depend on which query
    came first), and the sorted family's value to rounding."""
    p, q = _row(kind, V, 7)
    try:
        ref = SortedClipFamily(p, q)
    except ValueError:
        return
    if ref.n0 or ref.q0:
        return                                  # D(q, p) = inf one way: callers never ask
    built = _GroupedClipFamily(p, q)
    built.rank(1.0, "left")                     # builds the buckets, whose pass sums D(q, p)
    assert built._qdiv is not None
    pos = p > 0
    with np.errstate(divide="ignore"):
        logr = np.log(q[pos] / p[pos])
    for d, w in (("kl", q[pos]), ("kl_reverse", p[pos])):
        early = _GroupedClipFamily(p, q).q_divergence(d)
        assert built.q_divergence(d) == early
        scale = float(np.abs(w * np.where(np.isfinite(logr), logr, 0.0)).sum())
        assert abs(early - ref.q_divergence(d)) <= 1e-13 * scale + 1e-300, (d, early, ref.q_divergence(d))


@pytest.mark.parametrize("kind", ROW_KINDS)
def test_bucket_sums_decide_a_clip_step_as_its_evaluation_does(kind):
    """clip_level settles a step from the bucket sums where they suffice (no sort of b's bucket):
    wherever that gives an answer it must be the evaluation's own (the clip level then comes out
    bit for bit as with every step evaluated), at budgets from 1e-16 (where a b one ulp off moves D
    by as much as the budget: near-one-hot rows) to D's values at the very points asked."""
    from specsim.verifiers import _clip_kernels as K

    told = 0
    for V, seed in ((300, 1), (5000, 2)):
        try:
            fam = _GroupedClipFamily(*_row(kind, V, seed))
        except ValueError:
            continue                            # overflowing ratios
        fam.build()
        W, BB, BI, par, TK, I, pc, qc = fam._S
        hi_a = max(fam.a_max, 1.0)
        edges = [k for k in range(2, int(par[1])) if K._below_bucket(par, k) >= 1.0]
        edges = edges[::max(1, len(edges) // 60)]
        inner = np.concatenate([1.0 + 10.0 ** -np.arange(1.0, 14.0), np.geomspace(1.0, hi_a, 40)])
        points = [(K._below_bucket(par, k), k) for k in edges] + [(float(a), -1) for a in inner]
        for code in ((0, 1, 2) if fam.n0 == 0 else (0, 1)):
            exact = []
            for a, k in points:
                if k >= 0:
                    K._fill_start(W, BB, BI, k)
                    hi = int(BI[0, k])
                else:
                    hi = int(K.rank(W, BB, BI, par, TK, I, pc, qc, a, True))
                exact.append((a, hi, K._divergence_at(W, BB, BI, par, TK, I, pc, qc, code, a, hi, fam.q0)))
            finite = [d for _, _, d in exact if np.isfinite(d)]
            budgets = [1e-16, 1e-12, 1e-6] + finite[::7]
            for eps in budgets:
                for a, hi, d in exact:
                    got = K._decided(W, BB, BI, par, code, a, hi, fam.q0, eps)
                    if got >= 0:
                        told += 1
                        assert (got == 1) == (d <= eps), (V, code, eps, a, d)
    if kind in ("random", "llm"):
        assert told > 0                         # the shortcut is exercised, not always declined
