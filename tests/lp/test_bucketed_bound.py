"""The i.i.d. multi-draft bound without a full sort (lp.coupling._iid_bound_bucketed, issue 27).

References, independent of the bucketing:

- exact integer arithmetic: every float is an integer multiple of 2^-1074, so the rows, their
  prefix sums in exact p/q order (sorted by ``Fraction`` keys) and the objective
  p(H) + 1 - q(H)^K at EVERY prefix are exact rationals (rows normalised by their exact sums);
- the old sort-based path ``_sorted_prefix_bound``, kept as the reference at V = 151,936;
- without replacement, the exact Q_sub of a uniform draft, C(|H|, K) / C(V, K);
- for the compiled path (lp/_bound_kernels.py), the numpy path under ``_jit.disabled()``.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lp import coupling
from lp.coupling import _check_K, _iid_bound_bucketed, _sorted_prefix_bound, auto_step, multidraft_bound
from specsim import _jit
from specsim._validate import as_pair

TOL = 1e-13


def _ints(row) -> list[int]:
    """The row as integers over its common denominator (a power of two: the largest one)."""
    ratios = [float(x).as_integer_ratio() for x in row]
    scale = max(d for _, d in ratios)
    return [n * (scale // d) for n, d in ratios]


def _exact_iid_alpha(p, q, K: int) -> Fraction:
    """min over every prefix of the exact p/q order of p(H) + 1 - q(H)^K, rows normalised exactly."""
    a, b = _ints(p), _ints(q)
    A, B = sum(a), sum(b)
    order = sorted(range(len(a)), key=lambda v: Fraction(a[v], b[v]) if b[v] else math.inf)
    best, pa, qb = Fraction(1), 0, 0
    for v in order:
        pa, qb = pa + a[v], qb + b[v]
        best = min(best, Fraction(pa, A) + 1 - Fraction(qb, B) ** K)
    return best


def _exact_prefix_min(a: list[int], b: list[int], order, K: int) -> Fraction:
    """min over the prefixes of ``order`` of p(H) + 1 - q(H)^K for the integer rows a, b (p = a/A,
    q = b/B), in Python integers: obj A B^K = pa B^K + A B^K - A qb^K (fast on 150,000 tokens)."""
    A, B = sum(a), sum(b)
    BK = B ** K
    best, pa, qb = A * BK, 0, 0
    for v in order:
        pa, qb = pa + a[v], qb + b[v]
        best = min(best, pa * BK + A * BK - A * qb ** K)
    return Fraction(best, A * BK)


def _exact_objective(p, q, K: int, H) -> Fraction:
    a, b = _ints(p), _ints(q)
    return Fraction(sum(a[v] for v in H), sum(a)) + 1 - Fraction(sum(b[v] for v in H), sum(b)) ** K


def _rows(kind: str, V: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "random":
        return rng.dirichlet(np.full(V, 0.3)), rng.dirichlet(np.full(V, 0.3))
    if kind == "llm":                                           # peaked target, correlated draft
        z = 3 * rng.standard_normal(V)
        p, q = np.exp(z - z.max()), np.exp(0.8 * z + rng.standard_normal(V) - z.max())
        return p / p.sum(), q / q.sum()
    if kind == "tied":                                          # most tokens share p/q = 1
        q = rng.dirichlet(np.ones(V))
        p = q.copy()
        k = V // 5
        p[:k] = rng.dirichlet(np.ones(k)) * q[:k].sum()
        return p, q
    if kind == "one-hot":
        p = np.zeros(V)
        p[int(rng.integers(V))] = 1.0
        return p, rng.dirichlet(np.ones(V))
    if kind == "one-hot draft":
        q = np.zeros(V)
        q[int(rng.integers(V))] = 1.0
        return rng.dirichlet(np.ones(V)), q
    if kind == "subnormal":
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        p[: V // 3] = 5e-324 * rng.integers(1, 9, V // 3)
        q[V // 3: 2 * V // 3] = 5e-324 * rng.integers(1, 9, 2 * V // 3 - V // 3)
        return p / p.sum(), q / q.sum()
    if kind == "near-one-hot":                                  # 1 - max q = 2^-40
        q = rng.dirichlet(np.ones(V)) * 2.0 ** -40
        q[0] = 1.0 - 2.0 ** -40
        p = rng.dirichlet(np.full(V, 0.5))
        return p, q
    raise ValueError(kind)


KINDS = ("random", "llm", "tied", "one-hot", "one-hot draft", "subnormal", "near-one-hot")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("K", [1, 2, 3, 8])
def test_bucketed_against_exact_integers_small_V(kind, K):
    for seed in range(3):
        p, q = as_pair(*_rows(kind, 24, seed))
        b = _iid_bound_bucketed(p, q, K)
        exact = _exact_iid_alpha(p, q, K)
        assert abs(b.value - float(exact)) <= TOL, (kind, K, seed)
        assert abs(float(_exact_objective(p, q, K, b.H)) - float(exact)) <= TOL   # H attains it


@pytest.mark.parametrize("kind", KINDS)
def test_bucketed_against_exact_integers_with_pruning(kind):
    """V = 1500: most buckets are pruned, the optimum lies inside an opened one or on an edge."""
    p, q = as_pair(*_rows(kind, 1500, 7))
    for K in (2, 8):
        exact = float(_exact_iid_alpha(p, q, K))
        assert abs(_iid_bound_bucketed(p, q, K).value - exact) <= TOL, (kind, K)


@pytest.mark.parametrize("kind", ["random", "llm", "tied", "subnormal", "near-one-hot"])
def test_bucket_lower_bounds_hold_at_every_prefix(kind):
    """coupling._bucket_lower_bounds (which buckets are opened, in both paths) against the exact
    objective of every prefix of the exact p/q order, each prefix charged to the bucket of its
    last token.  Negative control: the same bound with each bucket's LARGEST ratio in place of
    its smallest is violated somewhere (the bound is not vacuous)."""
    p, q = as_pair(*_rows(kind, 1500, 11))
    a, b = _ints(p), _ints(q)
    A, B = sum(a), sum(b)
    order = sorted((v for v in range(len(a)) if b[v]), key=lambda v: Fraction(a[v], b[v]))
    nb = coupling._N_BUCKETS + 1
    for K in (1, 2, 3, 8):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            ids = coupling._ratio_bucket_ids(p / q, K)
        Pb, Qb = np.bincount(ids, p, nb), np.bincount(ids, q, nb)
        P_edge = coupling._blocked_cumsum0(Pb[:-1])
        lam_edge = coupling._blocked_cumsum0(Qb[::-1])[::-1][:nb]
        obj_edge = P_edge + coupling._iid_miss(lam_edge, K)
        lower = coupling._bucket_lower_bounds(obj_edge, P_edge, lam_edge, Qb, K)
        r_high = ((np.arange(1, nb, dtype=np.int64) + coupling._bucket_floor(K))
                  << (52 - coupling._MANT_BITS)).view(np.float64)
        too_high = (P_edge[:-1] + r_high * Qb[:-1]) + coupling._iid_miss(lam_edge[1:], K)
        pa = qb = 0
        violated = False
        for v in order:
            pa, qb = pa + a[v], qb + b[v]
            if ids[v] == coupling._N_BUCKETS:
                continue
            obj = float(Fraction(pa, A) + 1 - Fraction(qb, B) ** K)
            assert obj >= lower[ids[v]] - TOL, (kind, K, v)
            violated |= obj < min(obj_edge[ids[v]], too_high[ids[v]]) - 1e-9
        assert violated, (kind, K)


def _tie_row(V: int, ties: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``ties`` tokens at p = q = 0.6 / ties (not a dyadic number, so every addition rounds; ratio
    exactly 1 before and after renormalisation), the other tokens random (mass 0.4 each)."""
    rng = np.random.default_rng(seed)
    p, q = np.full(V, 0.6 / ties), np.full(V, 0.6 / ties)
    p[ties:], q[ties:] = 0.4 * rng.dirichlet(np.ones(V - ties)), 0.4 * rng.dirichlet(np.ones(V - ties))
    perm = rng.permutation(V)
    return p[perm], q[perm]


@pytest.mark.parametrize("K", [8])
def test_bucketed_150000_ties_against_exact_integers(K):
    """V = 151,936 with 150,000 tied tokens: sequential sums over the tied block drift by ~1e-13;
    the reference is exact at EVERY prefix of one exact order (the tied block in any order)."""
    V, ties = 151_936, 150_000
    raw_p, raw_q = _tie_row(V, ties, K)
    p, q = as_pair(raw_p, raw_q)
    a, b = _ints(p), _ints(q)
    is_tied = raw_p == raw_q
    tied = np.flatnonzero(is_tied).tolist()
    r0 = Fraction(a[tied[0]], b[tied[0]])
    assert len(tied) == ties and all(Fraction(a[v], b[v]) == r0 for v in tied)
    untied = sorted(np.flatnonzero(~is_tied).tolist(), key=lambda v: Fraction(a[v], b[v]))
    cut = sum(1 for v in untied if Fraction(a[v], b[v]) < r0)    # below the tied ratio, the block, above
    order = untied[:cut] + tied + untied[cut:]
    exact = _exact_prefix_min(a, b, order, K)
    got = multidraft_bound(p, q, K)
    assert abs(got.value - float(exact)) <= TOL
    assert abs(float(_exact_objective(p, q, K, got.H)) - float(exact)) <= TOL


@pytest.mark.parametrize("kind", ["llm", "random", "one-hot", "subnormal", "near-one-hot"])
def test_bucketed_equals_sorted_reference_at_V_151936(kind):
    p, q = as_pair(*_rows(kind, 151_936, 3))
    for K in (1, 2, 8):
        new = _iid_bound_bucketed(p, q, K)
        old = _sorted_prefix_bound(p, q, K, K, True, 0.25)
        assert abs(new.value - old.value) <= TOL, (kind, K)
        assert abs(new.p_H - old.p_H) <= TOL and abs(new.q_subset - old.q_subset) <= TOL


def test_dropped_tokens_and_zero_draft_mass():
    """Tokens with p/q > K or q = 0 never enter H; tokens with p = q = 0 do not matter."""
    p = np.array([0.0, 0.1, 0.2, 0.7, 0.0])
    q = np.array([0.3, 0.3, 0.4, 0.0, 0.0])
    for K in (1, 2, 3):
        b = multidraft_bound(p, q, K)
        assert 3 not in b.H.tolist()
        assert abs(b.value - float(_exact_iid_alpha(p, q, K))) <= TOL


# --------------------------------------------------------------------------- the compiled path
# lp/_bound_kernels.py (numba, specsim._jit) against the numpy path it replaces (with
# _jit.disabled(): the reference) and against exact integers.  Where ties make the optimal H
# ambiguous (equal objectives to rounding) the two paths may return different sets: then each set
# must attain the exact optimum to TOL, which the comparison below checks instead of equality.
needs_numba = pytest.mark.skipif(not _jit.enabled(), reason="compiled path off (numba missing or SPECSIM_JIT=0)")


def _compare_compiled(p, q, K, exact=None, label=""):
    """The compiled bound against the numpy one (and ``exact``, a Fraction, when given)."""
    fast = _iid_bound_bucketed(p, q, K)
    with _jit.disabled():
        ref = _iid_bound_bucketed(p, q, K)
    assert abs(fast.value - ref.value) <= TOL, label
    assert fast.H.dtype == ref.H.dtype and np.all(np.diff(fast.H) > 0), label
    if np.array_equal(fast.H, ref.H):
        assert abs(fast.p_H - ref.p_H) <= TOL and abs(fast.q_subset - ref.q_subset) <= TOL, label
    else:                                                       # tied objectives: both must be optimal
        target = float(exact) if exact is not None else ref.value
        assert abs(float(_exact_objective(p, q, K, fast.H.tolist())) - target) <= TOL, label
    if exact is not None:
        assert abs(fast.value - float(exact)) <= TOL, label
        assert abs(float(_exact_objective(p, q, K, fast.H.tolist())) - float(exact)) <= TOL, label
    return fast


@needs_numba
def test_compiled_path_is_taken_and_switched_off(monkeypatch):
    import sys

    p, q = as_pair(*_rows("llm", 64, 0))
    calls = []
    real = coupling._iid_bound_numpy
    monkeypatch.setattr(coupling, "_iid_bound_numpy", lambda *a: calls.append(1) or real(*a))
    _iid_bound_bucketed(p, q, 2)
    assert not calls and "lp._bound_kernels" in sys.modules
    with _jit.disabled():
        _iid_bound_bucketed(p, q, 2)
    assert calls == [1]


@needs_numba
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("V", [3, 5, 24])
def test_compiled_against_numpy_and_exact_small_V(kind, V):
    for K in range(1, 9):
        for seed in range(2):
            p, q = as_pair(*_rows(kind, V, 100 * V + seed))
            _compare_compiled(p, q, K, _exact_iid_alpha(p, q, K), (kind, V, K, seed))


@needs_numba
@pytest.mark.parametrize("kind", KINDS)
def test_compiled_against_numpy_and_exact_with_pruning(kind):
    p, q = as_pair(*_rows(kind, 1500, 11))
    for K in (1, 2, 3, 5, 8):
        _compare_compiled(p, q, K, _exact_iid_alpha(p, q, K), (kind, K))


@needs_numba
def test_compiled_dropped_and_empty_tokens():
    """p/q > K, q = 0 < p and p = q = 0 entries, and ratios exactly K (kept: r <= K)."""
    p = np.array([0.0, 0.1, 0.2, 0.3, 0.0, 0.15, 0.25])
    q = np.array([0.3, 0.05, 0.1, 0.0, 0.0, 0.4, 0.15])
    p, q = as_pair(p / p.sum(), q / q.sum())
    for K in range(1, 9):
        b = _compare_compiled(p, q, K, _exact_iid_alpha(p, q, K), K)
        assert 3 not in b.H.tolist()


@needs_numba
@given(st.integers(3, 40), st.integers(1, 8), st.integers(0, 2 ** 32 - 1), st.sampled_from([1, 2, 3, 5]))
def test_compiled_against_exact_random_tied_rows(V, K, seed, levels):
    """Ratios drawn from a few levels (many exact ties, some zero entries on either side)."""
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 4, V).astype(float)
    ratio = rng.choice([1.0, 0.5, 2.0, 0.0, 16.0][:levels], V)     # 16 > K: dropped
    p = q * ratio + (q == 0) * rng.integers(0, 2, V)
    if p.sum() == 0 or q.sum() == 0:
        return
    p, q = as_pair(p / p.sum(), q / q.sum())
    _compare_compiled(p, q, K, _exact_iid_alpha(p, q, K), (V, K, seed))


@needs_numba
@pytest.mark.parametrize("kind", ["llm", "tied", "one-hot draft", "subnormal", "near-one-hot"])
def test_compiled_against_numpy_at_V_151936(kind):
    p, q = as_pair(*_rows(kind, 151_936, 5))
    for K in (1, 2, 3, 4, 8):
        _compare_compiled(p, q, K, label=(kind, K))


@needs_numba
def test_compiled_150000_ties_against_exact_integers():
    """The tie row of test_bucketed_150000_ties_against_exact_integers at K = 2 (per-bucket plain
    sums of <= 71 tokens added into a TwoSum-compensated sum, instead of sub-bins; without that
    flush this test fails), with exact integers at every prefix."""
    K = 2
    p, q = as_pair(*_tie_row(151_936, 150_000, 4))
    a, b = _ints(p), _ints(q)
    order = sorted(range(len(a)), key=lambda v: Fraction(a[v], b[v]))
    _compare_compiled(p, q, K, _exact_prefix_min(a, b, order, K))


def _wide_bucket_row(seed):
    """Ratio 0 (300 tokens), 0.5 (q mass 0.48375), 2000 tokens in one bucket [1, 1.015) (q mass
    0.002), 300 near-ties at 1.05, the rest at ~1.54: at K = 2 the optimum lies inside the wide
    bucket (2 Q crosses its ratios), 1.2e-6 below every edge."""
    rng = np.random.default_rng(seed)
    q_parts = [rng.dirichlet(np.ones(n)) * m for n, m in ((300, 0.02), (400, 0.48375), (2000, 0.002),
                                                          (300, 0.01), (400, 0.48425))]
    ratios = [2.0 ** -80 * rng.random(300), np.full(400, 0.5), 1.0 + 0.015 * rng.random(2000),
              1.05 * (1 + 2.0 ** -40 * rng.integers(0, 2 ** 10, 300))]
    q = np.concatenate(q_parts)
    p_head = np.concatenate([r * qp for r, qp in zip(ratios, q_parts)])
    p = np.concatenate((p_head, q_parts[-1] * (1 - p_head.sum()) / q_parts[-1].sum()))
    perm = rng.permutation(q.size)
    return as_pair(p[perm], q[perm])


@needs_numba
def test_compiled_optimum_inside_a_wide_bucket():
    p, q = _wide_bucket_row(1)
    exact = _exact_iid_alpha(p, q, 2)
    b = _compare_compiled(p, q, 2, exact)
    assert 700 < b.H.size < 2700                                # inside the wide bucket


@needs_numba
@pytest.mark.parametrize("case", ["small", "wide bucket", "near-ties", "bucket 0"])
def test_compiled_bucket_sort_paths(case):
    """The kernel's in-bucket sort (insertion, 8-bit counting pass, heapsort fallback) orders the
    ratios and carries token ids, p and q along."""
    from lp import _bound_kernels

    rng = np.random.default_rng(len(case))
    n = {"small": 40, "wide bucket": 3000, "near-ties": 500, "bucket 0": 500}[case]
    if case == "near-ties":                                     # one 8-bit sub-bucket: heapsort
        r = 1.25 * (1 + 2.0 ** -40 * rng.integers(0, 2 ** 10, n))
    elif case == "bucket 0":                                    # many octaves: no counting pass
        r = 2.0 ** -rng.uniform(60, 200, n)
    else:
        r = 1.25 * (1 + rng.random(n) / 80)                   # in [1 + 16/64, 1 + 17/64): one bucket
    r[: n // 10] = r[n // 10: 2 * (n // 10)]                    # some exact ties
    qv = rng.random(n)
    pv = r * qv
    tok = rng.permutation(10 * n)[:n].astype(np.int64)
    rt, pt, qt, tk = r.copy(), pv.copy(), qv.copy(), tok.copy()
    sub_shift = -1 if case == "bucket 0" else 52 - coupling._MANT_BITS - 8
    _bound_kernels._sort_bucket(rt, tk, pt, qt, 0, n, sub_shift)
    assert np.array_equal(rt, np.sort(r))
    back = {t: i for i, t in enumerate(tok.tolist())}
    idx = np.array([back[t] for t in tk.tolist()])
    assert np.array_equal(rt, r[idx]) and np.array_equal(pt, pv[idx]) and np.array_equal(qt, qv[idx])


@needs_numba
def test_compiled_optimum_inside_a_bucket_and_negative_control(monkeypatch):
    """Ratios 0.5 (q mass 0.5), then 1.0 and 1.01 (one bucket, q = 0.001 each), then 1.5: at K = 2
    the optimum takes the 1.0 token alone (1e-6 below either edge), so the bucket must be opened.
    Negative control: with no bucket ever opened the bound stops at an edge, and the comparison
    with exact integers must notice."""
    q = np.concatenate((np.full(10, 0.05), [0.001, 0.001], np.full(10, 0.0498)))
    p = np.concatenate((np.full(10, 0.025), [0.001, 0.00101], np.full(10, (1 - 0.25 - 0.00201) / 10)))
    p, q = as_pair(p / p.sum(), q / q.sum())
    exact = _exact_iid_alpha(p, q, 2)
    assert _compare_compiled(p, q, 2, exact).H.tolist() == list(range(11))
    monkeypatch.setattr(coupling, "_OPEN_SLACK", -1.0)
    with pytest.raises(AssertionError):
        _compare_compiled(p, q, 2, exact)


@pytest.mark.parametrize("K", [3, 8])
def test_without_replacement_uniform_draft_default_step(K):
    """Uniform q: Q_sub(H) = C(|H|, K) / C(V, K); the optimum is over prefixes of ascending p."""
    V = 20_000
    p, _ = _rows("llm", V, 1)
    q = np.full(V, 1.0 / V)
    ps = np.sort(p)
    Pc = np.concatenate(([0.0], np.cumsum(ps)))
    h = np.arange(V + 1, dtype=np.float64)
    qsub = np.ones(V + 1)
    for j in range(K):
        qsub *= np.maximum(h - j, 0.0) / (V - j)
    exact = float(np.min(Pc + 1.0 - qsub))
    assert abs(multidraft_bound(p, q, K, replacement=False).value - exact) <= 1e-12
    assert auto_step(K) <= 0.25


def test_check_K_matches_validated_path():
    p, q = as_pair([0.2, 0.3, 0.5], [0.5, 0.25, 0.25])
    assert _check_K(q, 2, True) == 2
    assert abs(multidraft_bound(p, q, 2).value - _sorted_prefix_bound(p, q, 2, 2, True, 0.25).value) <= TOL


# --------------------------------------------------------------------------- without replacement
WOR_KINDS = KINDS + ("uniform",)


def _wor_rows(kind: str, V: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if kind == "uniform":
        return _rows("llm", V, seed)[0], np.full(V, 1.0 / V)
    return _rows(kind, V, seed)


@pytest.fixture
def bucket_small_rows(monkeypatch):
    """Send rows of any length through the bucketed order (by default only V >= 4096 are)."""
    import lp.coupling

    monkeypatch.setattr(lp.coupling, "_WOR_BUCKET_MIN_V", 2)


@pytest.mark.parametrize("kind", WOR_KINDS)
@pytest.mark.parametrize("K", [2, 3, 4])
def test_wor_bucketed_against_bruteforce_small_V(kind, K, bucket_small_rows):
    """V = 9: the exact set law over all 2^V subsets (positive terms, math.fsum)."""
    from lp.coupling import _subset_miss_exact, draft_set_law, multidraft_bound_bruteforce

    for seed in range(3):
        p, q = as_pair(*_wor_rows(kind, 9, seed))
        got = multidraft_bound(p, q, K, replacement=False)
        exact = multidraft_bound_bruteforce(p, q, K, replacement=False)
        assert abs(got.value - exact.value) <= 1e-12, (kind, K, seed)
        sets, probs = draft_set_law(q, K, False)
        mask = np.zeros(p.size, dtype=bool)
        mask[got.H] = True
        attained = math.fsum(p[mask]) + _subset_miss_exact(q, K, False, mask, sets, probs)
        assert abs(attained - exact.value) <= 1e-12, (kind, K, seed)         # H attains it


@pytest.mark.parametrize("kind", WOR_KINDS)
def test_wor_bucketed_equals_full_sort_with_pruning(kind, bucket_small_rows):
    """V = 1500: most buckets pruned; the same optimum as the full sort, for K = 2 (exact bucket
    edges) and K >= 3 (bounds at the edges)."""
    p, q = as_pair(*_wor_rows(kind, 1500, 7))
    for K in (2, 3, 8):
        new = multidraft_bound(p, q, K, replacement=False)
        old = _sorted_prefix_bound(p, q, K, K, False, auto_step(K))
        assert abs(new.value - old.value) <= 1e-12, (kind, K)
        assert abs(new.p_H - old.p_H) <= 1e-12 and abs(new.q_subset - old.q_subset) <= 1e-12, (kind, K)


@pytest.mark.parametrize("kind, Ks", [("llm", (2, 3, 8)), ("uniform", (2, 3, 8)), ("tied", (2, 3, 8)),
                                      ("subnormal", (2, 3, 8)), ("near-one-hot", (2,))])
def test_wor_bucketed_equals_full_sort_at_V_151936(kind, Ks):
    """(Near-one-hot rows at K >= 3 fall back to the full sort: 1 - 2 max q < 0; their quadrature
    takes seconds at this V.)"""
    from lp.coupling import _wor_bucketed_order

    p, q = as_pair(*_wor_rows(kind, 151_936, 3))
    for K in Ks:
        order, valid = _wor_bucketed_order(p, q, K)
        assert np.array_equal(np.sort(order), np.arange(p.size))               # a permutation
        new = multidraft_bound(p, q, K, replacement=False)
        old = _sorted_prefix_bound(p, q, K, K, False, auto_step(K))
        assert abs(new.value - old.value) <= 1e-12, (kind, K)


def test_wor_bucketed_order_drops_only_tokens_that_cannot_help(bucket_small_rows):
    """A token with p/q far above sum_j 1 / R_j sits after every valid prefix; one just below stays."""
    from lp.coupling import _wor_bucketed_order

    V, K = 40, 3
    q = np.full(V, 1.0 / V)
    p = np.full(V, 0.5 / (V - 2))
    p[0], p[1] = 0.3, 0.2                              # p/q = 12 and 8 > c ~ 3.0: both dropped
    p, q = as_pair(p, q)
    order, valid = _wor_bucketed_order(p, q, K)
    last = int(np.flatnonzero(valid).max())
    assert set(order[last:].tolist()) == {0, 1}
    b = multidraft_bound(p, q, K, replacement=False)
    assert 0 not in b.H.tolist() and 1 not in b.H.tolist()
    assert abs(b.value - _sorted_prefix_bound(p, q, K, K, False, auto_step(K)).value) <= 1e-12


# --------------------------------------------------------------------------- head-only path (issue 27)
def _old_bucketed(p, q, K):
    """The previous default path: the whole row permuted into the bucketed order, then summed."""
    from lp.coupling import _wor_bucketed_order

    order, valid = _wor_bucketed_order(p, q, K)
    return _sorted_prefix_bound(p, q, K, K, False, auto_step(K), order, valid)


def _check_head_path(p, q, K, tol=1e-12):
    """multidraft_bound (the head-only path where it applies) against the old bucketed path and
    the full sort: value, p(H), Q_sub(H), and p(H) re-summed from the returned H."""
    new = multidraft_bound(p, q, K, replacement=False)
    for ref in (_old_bucketed(p, q, K), _sorted_prefix_bound(p, q, K, K, False, auto_step(K))):
        assert abs(new.value - ref.value) <= tol, (K, new.value, ref.value)
        assert abs(new.p_H - ref.p_H) <= tol and abs(new.q_subset - ref.q_subset) <= tol, K
    assert abs(math.fsum(p[new.H]) - new.p_H) <= tol
    return new


@pytest.mark.parametrize("kind", WOR_KINDS)
def test_head_path_against_old_paths_small_V(kind, bucket_small_rows):
    """V = 1500, K = 2..8: the head-only path against the old bucketed order and the full sort."""
    from lp.coupling import _wor_bound_head

    for seed in (7, 8):
        p, q = as_pair(*_wor_rows(kind, 1500, seed))
        for K in range(2, 9):
            _check_head_path(p, q, K)
            if _check_K(q, K, False) < int(np.count_nonzero(q)):
                head = _wor_bound_head(p, q, K, K, auto_step(K))
                if kind != "near-one-hot" or K == 2:             # (K >= 3: the K - 1 largest hold it all)
                    assert head is not None, (kind, K)


def test_head_path_peaked_draft_small_V(bucket_small_rows):
    """max q = 0.2 (near one-hot, yet c finite up to K = 4): the head-only path on the bucketed rows."""
    from lp.coupling import _wor_bound_head

    rng = np.random.default_rng(5)
    for V in (60, 1500):
        q = rng.dirichlet(np.ones(V)) * 0.8
        q[3] += 0.2
        p = rng.dirichlet(np.full(V, 0.5))
        p, q = as_pair(p, q)
        for K in (2, 3, 4):
            assert _wor_bound_head(p, q, K, K, auto_step(K)) is not None
            _check_head_path(p, q, K)


@pytest.mark.parametrize("kind", WOR_KINDS)
@pytest.mark.parametrize("K", [3, 4])
def test_head_path_against_exact_set_law_small_V(kind, K, bucket_small_rows):
    """V = 9, head path only: the value is the brute-force optimum over all 2^V subsets (exact set
    law, fsum) and the returned H attains it."""
    from lp.coupling import _subset_miss_exact, _wor_bound_head, draft_set_law, multidraft_bound_bruteforce

    for seed in range(4):
        p, q = as_pair(*_wor_rows(kind, 9, seed))
        if _check_K(q, K, False) >= int(np.count_nonzero(q)):
            continue
        got = _wor_bound_head(p, q, K, K, auto_step(K))
        if got is None:
            continue
        exact = multidraft_bound_bruteforce(p, q, K, replacement=False)
        assert abs(got.value - exact.value) <= 1e-12, (kind, K, seed)
        sets, probs = draft_set_law(q, K, False)
        mask = np.zeros(p.size, dtype=bool)
        mask[got.H] = True
        assert abs(math.fsum(p[mask]) + _subset_miss_exact(q, K, False, mask, sets, probs) - exact.value) <= 1e-12


def test_head_path_comparison_can_fail(bucket_small_rows, monkeypatch):
    """Negative control: with the live buckets cut to the first one, the check above fails."""
    import lp.coupling

    real = lp.coupling._wor_buckets

    def cut(p, q, K):
        b = real(p, q, K)
        live = np.zeros_like(b.live)
        first = int(np.flatnonzero(b.live)[0])
        live[first] = True
        edges = np.zeros_like(b.live_edge)
        edges[first] = True
        return b._replace(live=live, live_edge=edges)

    p, q = as_pair(*_wor_rows("llm", 1500, 7))
    monkeypatch.setattr(lp.coupling, "_wor_buckets", cut)
    with pytest.raises(AssertionError):
        for K in (2, 3):
            _check_head_path(p, q, K)


@pytest.mark.parametrize("kind", ["llm", "uniform", "tied", "subnormal", "random"])
def test_head_path_against_old_bucketed_at_V_151936(kind):
    """V = 151,936, K = 2..8: the head-only path against the old bucketed order (the full sort is
    compared in test_wor_bucketed_equals_full_sort_at_V_151936)."""
    p, q = as_pair(*_wor_rows(kind, 151_936, 3))
    for K in range(2, 9):
        new, old = multidraft_bound(p, q, K, replacement=False), _old_bucketed(p, q, K)
        assert abs(new.value - old.value) <= 1e-12, (kind, K)
        assert abs(new.p_H - old.p_H) <= 1e-12 and abs(new.q_subset - old.q_subset) <= 1e-12, (kind, K)


@pytest.mark.parametrize("K", [2, 3, 4, 8])
def test_head_path_uniform_draft_exact_at_V_151936(K):
    """Uniform q at V = 151,936: Q_sub(H) = C(|H|, K) / C(V, K) exactly (products of ratios of
    integers, each rounded once); the default path within 1e-12 of the optimum over prefixes."""
    V = 151_936
    p, _ = _rows("llm", V, 1)
    q = np.full(V, 1.0 / V)
    h = np.arange(V + 1, dtype=np.float64)
    qsub = np.ones(V + 1)
    for j in range(K):
        qsub *= np.maximum(h - j, 0.0) / (V - j)
    Pc = np.concatenate(([0.0], np.cumsum(np.sort(p))))
    exact = float(np.min(Pc + 1.0 - qsub))
    assert abs(multidraft_bound(p, q, K, replacement=False).value - exact) <= 1e-12
