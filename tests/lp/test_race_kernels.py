"""The compiled passes of the bound without replacement (lp/_race_kernels.py) against the numpy
paths they shortcut (``_jit.disabled()``, the reference), and against exact values: brute force
over all subsets at V = 9, and the uniform draft's Q_sub = C(|H|, K) / C(V, K) at V = 151,936.

Rows: random, LLM-like, tied, one-hot target, one-hot draft, subnormal, near-one-hot, uniform
draft (the generator of test_bucketed_bound.py); small rows go through the bucketed path with
``_WOR_BUCKET_MIN_V`` lowered.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lp.coupling
from lp import _race
from lp.coupling import _check_K, _wor_buckets, multidraft_bound, multidraft_bound_bruteforce
from specsim import _jit
from specsim._validate import as_pair
from tests.lp.test_bucketed_bound import WOR_KINDS, _wor_rows

pytestmark = pytest.mark.skipif(not _jit.enabled(), reason="compiled kernels off (numba missing or SPECSIM_JIT=0)")


@pytest.fixture
def bucket_small_rows(monkeypatch):
    monkeypatch.setattr(lp.coupling, "_WOR_BUCKET_MIN_V", 2)


def _both(f, *args):
    """f(*args) on the compiled path, then on the numpy reference."""
    fast = f(*args)
    with _jit.disabled():
        ref = f(*args)
    return fast, ref


def _close(a, b, rel=1e-13, atol=1e-300):
    """Equal within ``rel`` relative (``atol`` absolute: subnormal results have fewer digits)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    same_nan = np.isnan(a) == np.isnan(b)
    with np.errstate(invalid="ignore"):                          # inf - inf: equal infinities pass
        ok = np.isnan(a) | (a == b) | (np.abs(a - b) <= rel * np.maximum(np.abs(a), np.abs(b)) + atol)
    return bool(np.all(same_nan & ok))


@pytest.mark.parametrize("kind", WOR_KINDS)
@pytest.mark.parametrize("V", [9, 1500])
def test_bucket_pass_against_numpy(kind, V, bucket_small_rows):
    """r, bucket ids, live buckets and edges equal; bucket-edge sums (p, q, the K = 2 weights, lam)
    and the mass without the largest entry within 1e-13 relative."""
    for seed in (0, 1):
        p, q = as_pair(*_wor_rows(kind, V, seed))
        for K in (2, 3, 8):
            if _check_K(q, K, False) >= int(np.count_nonzero(q)):
                continue
            fast, ref = _both(_wor_buckets, p, q, K)
            assert (fast is None) == (ref is None), (kind, K)
            if fast is None:
                continue
            assert np.array_equal(fast.ids, ref.ids) and _close(fast.r, ref.r, 0.0), (kind, K)
            assert np.array_equal(fast.live, ref.live) and np.array_equal(fast.live_edge, ref.live_edge)
            for name in ("P_e", "Q_e", "W_e", "lam_e"):
                assert _close(getattr(fast, name), getattr(ref, name)), (kind, K, name)
            assert _close(fast.rest_star, ref.rest_star) and fast.star == ref.star


@pytest.mark.parametrize("kind", WOR_KINDS)
def test_bound_against_numpy_and_bruteforce_V9(kind, bucket_small_rows):
    """V = 9, K = 2..4: the compiled path's value equals the numpy path's and the brute-force
    optimum over all 2^V subsets (exact set law) to 1e-12."""
    for seed in range(3):
        p, q = as_pair(*_wor_rows(kind, 9, seed))
        for K in (2, 3, 4):
            fast, ref = _both(multidraft_bound, p, q, K, False)
            exact = multidraft_bound_bruteforce(p, q, K, replacement=False)
            assert abs(fast.value - ref.value) <= 1e-12 and abs(fast.value - exact.value) <= 1e-12, (kind, K, seed)


@pytest.mark.parametrize("kind", WOR_KINDS)
def test_bound_against_numpy_V1500(kind, bucket_small_rows):
    """V = 1500 (most buckets pruned), K = 2, 3, 4, 8: value, p(H), Q_sub(H) within 1e-12, p(H)
    re-summed from the returned H (ascending ids), and H itself where both paths stop at the same
    prefix (its size; both sort the segment the same way)."""
    p, q = as_pair(*_wor_rows(kind, 1500, 5))
    for K in (2, 3, 4, 8):
        fast, ref = _both(multidraft_bound, p, q, K, False)
        assert abs(fast.value - ref.value) <= 1e-12, (kind, K)
        assert abs(fast.p_H - ref.p_H) <= 1e-12 and abs(fast.q_subset - ref.q_subset) <= 1e-12, (kind, K)
        assert abs(math.fsum(p[fast.H]) - fast.p_H) <= 1e-12 and np.all(np.diff(fast.H) > 0)
        assert fast.H.size != ref.H.size or np.array_equal(fast.H, ref.H), (kind, K)


@pytest.mark.parametrize("K", [3, 8])
def test_uniform_draft_exact_at_V_151936(K):
    """A uniform draft at V = 151,936 (LLM-like target): Q_sub(H) = C(|H|, K) / C(V, K) exactly, so
    alpha* = min_h [p(h smallest p) + 1 - C(h, K) / C(V, K)]; the compiled path within 1e-12, as
    the numpy path."""
    V = 151_936
    p = _wor_rows("llm", V, 2)[0]
    q = np.full(V, 1.0 / V)
    p, q = as_pair(p, q)
    Pc = np.concatenate(([0.0], np.cumsum(np.sort(p))))
    h = np.arange(V + 1, dtype=np.float64)
    qsub = np.ones(V + 1)
    for j in range(K):
        qsub *= np.maximum(h - j, 0.0) / (V - j)
    exact = float(np.min(Pc + 1.0 - qsub))
    fast, ref = _both(multidraft_bound, p, q, K, False)
    assert abs(fast.value - exact) <= 1e-12 and abs(ref.value - exact) <= 1e-12, (fast.value, ref.value, exact)
    assert abs(fast.q_subset - math.comb(fast.H.size, K) / math.comb(V, K)) <= 1e-12


def test_bound_against_numpy_llm_like_V_151936():
    """The benchmark's LLM-like row (thousands of prefixes integrated at K = 4)."""
    p, q = as_pair(*_wor_rows("llm", 151_936, 0))
    for K in (2, 4):
        fast, ref = _both(multidraft_bound, p, q, K, False)
        assert abs(fast.value - ref.value) <= 1e-12, K


# --------------------------------------------------------------------------- kernels one by one
@pytest.mark.parametrize("kind", ["llm", "uniform", "tied", "subnormal"])
def test_power_moments_against_numpy(kind):
    q = _wor_rows(kind, 3000, 1)[1]
    q = q[q > 0]
    for R in (3, 12, 30):
        fast, ref = _both(_race._power_moments, q, float(q.max()), R, None)
        assert _close(fast[1:], ref[1:], 1e-14), (kind, R)


def _random_state(rng, K, g):
    e = rng.random((K, g)) * 10.0 ** rng.uniform(-5, 5, (K, g))
    e[0] = 1.0
    return _race.RaceState(e, rng.integers(0, 2, g).astype(np.float64), rng.uniform(0, 800, g))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.integers(0, 60), st.integers(1, 12), st.integers(0, 2 ** 32 - 1))
def test_race_recursion_against_numpy(K, w, g, seed):
    """race_states + low_probability + the quadrature's weights (numpy) against the compiled loop
    (race_prefix_weights): tokens with q t from 1e-12 to past the sure level (arrived), start
    masses past 700 (the logarithmic branch), prefix columns anywhere in 0..w; the weighted sums
    within 1e-13 of sum_i lt_i e^{-lt_i} (1 + lt_i) (1 - P carries absolute rounding ~eps on either
    path, e^{-lt} relative ~lt eps from the rounding of lam) and the state after all tokens."""
    from lp._race_kernels import race_prefix_weights

    rng = np.random.default_rng(seed)
    qtok = 10.0 ** rng.uniform(-8, 0, w)
    t = np.sort(10.0 ** rng.uniform(-4, 3, g))
    start = _random_state(rng, K, g)
    cols = np.unique(rng.integers(0, w + 1, 1 + w // 3))
    lam_tok = 10.0 ** rng.uniform(-6, 0) + np.concatenate((np.cumsum(qtok[::-1])[::-1], [0.0]))
    ref = _race.race_states(qtok, t[:, None], K, _race.SURE, start, cols)
    lt = np.minimum(t[:, None] * lam_tok[cols][None, :], 800.0)
    scale = (lt * np.exp(-lt) * (1.0 + lt)).sum(axis=0)          # e^{-lt} is lt-conditioned in lam
    want = (lt * np.exp(-lt) * np.clip(1.0 - ref.low_probability(), 0.0, 1.0)).sum(axis=0)
    total = np.empty(cols.size)
    end = _race.RaceState(np.empty((K, g)), np.empty(g), np.empty(g))
    race_prefix_weights(qtok, lam_tok, t, K, _race.SURE, start.esym, start.arrived, start.mass, cols, total, *end)
    assert np.all(np.abs(total - want) <= 1e-13 * scale + 1e-300)
    last = ref.column(-1) if cols[-1] == w else _race.race_states(qtok, t[:, None], K, _race.SURE, start,
                                                                  np.array([w])).column(0)
    assert _close(end.esym, last.esym, 1e-12) and np.array_equal(end.arrived, last.arrived)
    assert _close(end.mass, last.mass, 1e-13)


def test_chord_block_sums_against_numpy():
    from lp._race_kernels import chord_block_sums

    rng = np.random.default_rng(3)
    for block in (rng.dirichlet(np.full(5000, 0.2)) * 0.2, np.full(40_000, 1e-5), np.array([0.1])):
        T = 1.0
        u = block / (T - block)
        ref = (u.sum(), u @ block, (u * block) @ block, block @ block)
        assert _close(chord_block_sums(block, T), ref, 1e-13)


def test_numpy_reference_really_differs_from_a_broken_kernel(monkeypatch, bucket_small_rows):
    """Negative control: a compiled bucket pass that drops one token's q is caught by the comparison."""
    from lp import _race_kernels

    good = _race_kernels.wor_bucket_pass

    def broken(p, q, *args):
        q = q.copy()
        q[0] *= 0.5
        return good(p, q, *args)

    monkeypatch.setattr(_race_kernels, "wor_bucket_pass", broken)
    p, q = as_pair(*_wor_rows("random", 1500, 0))
    fast, ref = _both(_wor_buckets, p, q, 3)
    assert not _close(fast.Q_e, ref.Q_e)


@pytest.mark.parametrize("kind", ["llm", "uniform", "tied", "random"])
def test_chord_screen_against_numpy(kind, bucket_small_rows, monkeypatch):
    """The compiled chord screen (block sums and per-prefix bounds) against the numpy one on the
    arguments the head path passes it: the sharpened optimistic objectives and the cap agree to 1e-13."""
    calls = []
    original = lp.coupling._chord_screen

    def record(*args):
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(lp.coupling, "_chord_screen", record)
    p, q = as_pair(*_wor_rows(kind, 3000, 4))
    for K in (3, 4, 8):
        multidraft_bound(p, q, K, False)
    sharpened = 0
    for args in calls:
        (opt_f, cap_f), (opt_r, cap_r) = _both(original, *args)
        assert np.max(np.abs(opt_f - opt_r)) <= 1e-13 and abs(cap_f - cap_r) <= 1e-13
        sharpened += bool(np.any(opt_f > args[7]))               # args[7]: the optimistic objectives in
    assert sharpened                                             # (not only the early return)


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 8), st.integers(10, 3000), st.floats(0.05, 3.0), st.integers(0, 2 ** 32 - 1))
def test_quadrature_weights_against_numpy(K, V, spread, seed):
    """wor_subset_quadrature with the weights folded into the compiled recursion
    (race_prefix_weights: e^{-lam t} carried along the tokens) against the numpy weights pass:
    Dirichlet drafts from flat to a few dominant masses (tokens arrived past the sure level, dead
    rows, several clusters), prefixes anywhere; Q_sub within 1e-13."""
    rng = np.random.default_rng(seed)
    q = rng.dirichlet(np.full(V, spread))
    q = q[rng.permutation(V)]
    Qc = np.concatenate(([0.0], np.cumsum(q)))
    lam = np.zeros(V + 1)
    lam[:V] = np.cumsum(q[::-1])[::-1]
    ks = np.unique(rng.integers(K, V, 1 + rng.integers(0, 40)))
    ks = ks[lam[ks] > 0]
    if rng.random() < 0.3:                                       # a dense run of prefixes (one cluster)
        a = int(rng.integers(K, V))
        ks = np.unique(np.concatenate((ks, np.arange(a, min(a + 500, V)))))
    if ks.size == 0:
        return
    fast, ref = _both(_race.wor_subset_quadrature, q, Qc, lam, K, ks, 0.25)
    assert np.max(np.abs(fast - ref)) <= 1e-13, np.max(np.abs(fast - ref))


@pytest.mark.parametrize("kind", WOR_KINDS)
def test_segment_sums_against_numpy(kind, bucket_small_rows):
    """The compiled prefix sums along the sorted segment (segment_sums) against the numpy ones
    (_segment_sums), for segments of every live range and of wider ones (the largest mass before,
    inside or after the segment)."""
    from lp._race_kernels import segment_sums
    from lp.coupling import _segment_sums, _stable_argsort

    for seed in (0, 1):
        p, q = as_pair(*_wor_rows(kind, 1500, seed))
        for K in (2, 3, 8):
            if _check_K(q, K, False) >= int(np.count_nonzero(q)):
                continue
            b = _wor_buckets(p, q, K)
            if b is None:
                continue
            live = np.flatnonzero(b.live)
            ranges = [(0, 4096)] + ([(int(live[0]), int(live[-1]) + 1)] if live.size else [])
            if b.ids[b.star] < 4096:                             # (4096: dropped)
                ranges.append((int(b.ids[b.star]), int(b.ids[b.star]) + 1))
            for b_lo, b_hi in ranges:
                seg = np.flatnonzero((b.ids >= b_lo) & (b.ids < b_hi))
                seg = seg[_stable_argsort(b.r[seg])]
                ref = _segment_sums(p, q, b, seg, b_lo, b_hi, np.empty(seg.size))
                qs = np.empty(seg.size)
                fast = segment_sums(seg, p, q, float(b.P_e[b_lo]), float(b.Q_e[b_lo]), float(b.W_e[b_lo]),
                                    float(b.lam_e[b_hi]), b.qtot, b.star, bool(b.ids[b.star] < b_lo), b.rest_star, qs)
                for f, r in zip(fast + (qs,), ref):
                    assert _close(f, r, 1e-15), (kind, K, b_lo, b_hi)


@pytest.mark.parametrize("kind", ["llm", "uniform", "tied", "subnormal", "random"])
def test_small_token_state_against_numpy(kind):
    """The block's law from its moments (power sums and Newton's identities, moment_esym) against
    the numpy path: P(N' = j) = e^{-mass} e_j within 1e-14, K = 2..12, rows up to q t = x_max."""
    q = _wor_rows(kind, 3000, 2)[1]
    q = q[q > 0]
    for K in (2, 3, 4, 8, 12):
        x_max = min(1.0, 2.0 / max(K - 1, 1))
        t = np.geomspace(1e-6, x_max / q.max(), 40)
        fast, ref = _both(_race.small_token_state, q, t, K, x_max)
        pf, pr = fast.esym * np.exp(-fast.mass), ref.esym * np.exp(-ref.mass)
        assert np.max(np.abs(pf - pr)) <= 1e-14 and _close(fast.mass, ref.mass, 0.0), (kind, K)


# --------------------------------------------------------------------------- vectorised passes
def _screen_block(kind, V, seed=0):
    """Draft masses of a row, as the chord screen sees a block (each <= T / 4, T = their sum)."""
    q = _wor_rows(kind, V, seed)[1]
    return q[q <= 0.25 * q.sum()], float(q.sum())


@pytest.mark.parametrize("kind", WOR_KINDS)
@pytest.mark.parametrize("V", [3, 9, 1023, 1025, 5000])
def test_chord_block_sums_vectorised_against_numpy(kind, V):
    """The block sums with the divisions in a loop of their own (blocks of DIV_BLOCK, four lanes)
    against the numpy screen's sums, on every row kind and on lengths around the block size."""
    from lp._race_kernels import chord_block_sums

    block, T = _screen_block(kind, V)
    u = block / (T - block)
    ref = (u.sum(), u @ block, (u * block) @ block, block @ block)
    assert _close(chord_block_sums(block, T), ref, 1e-13, 1e-300), (kind, V)


def test_chord_block_sums_vectorised_at_V_151936():
    from lp._race_kernels import chord_block_sums

    block, T = _screen_block("llm", 151_936, 3)
    u = block / (T - block)
    ref = (math.fsum(u), math.fsum(u * block), math.fsum(u * block * block), math.fsum(block * block))
    assert _close(chord_block_sums(block, T), ref, 1e-13)


@pytest.mark.parametrize("kind", WOR_KINDS)
@pytest.mark.parametrize("V", [3, 63, 64, 65, 1025, 3000])
def test_power_moments_chunked_against_numpy(kind, V):
    """The chunked moments (powers per chunk from its largest base, tied chunks as one product)
    against the numpy path on every row kind, lengths around the chunk size, R = 3..30."""
    q = _wor_rows(kind, V, 2)[1]
    q = q[q > 0]
    for R in (3, 12, 30):
        fast, ref = _both(_race._power_moments, q, float(q.max()), R, None)
        assert _close(fast[1:], ref[1:], 1e-14), (kind, V, R)


def test_power_moments_chunked_at_V_151936_and_a_negative_control():
    """V = 151,936 (LLM-like and uniform drafts: a random order, and one tied chunk after another),
    and a sum that leaves out one token is caught at the same tolerance."""
    from lp._race_kernels import power_moments

    for kind in ("llm", "uniform"):
        q = _wor_rows(kind, 151_936, 3)[1]
        tau = float(q.max())
        fast, ref = _both(_race._power_moments, q, tau, 26, None)
        assert _close(fast[1:], ref[1:], 1e-14), kind
    q = _wor_rows("llm", 3000, 1)[1]
    with _jit.disabled():
        ref = _race._power_moments(q, float(q.max()), 12, None)
    short = power_moments(np.delete(q, int(np.argmin(np.abs(q - np.median(q))))), float(q.max()), 12)
    assert not _close(short[1:], ref[1:], 1e-14)


@pytest.mark.parametrize("kind", WOR_KINDS)
def test_bucket_pass_ratios_and_support_count(kind, bucket_small_rows):
    """The bucket pass divides with selects in place of a zero test: r = p/q with numpy's inf
    (q = 0 < p) and nan (p = q = 0), and the count of nonzero draft masses it returns equals
    numpy's, on rows of V = 3 and 1500 (zeros in one-hot drafts, subnormal entries)."""
    from lp import _race_kernels
    from lp.coupling import _MANT_BITS, _N_BUCKETS, _bucket_floor

    for V in (3, 1500):
        p, q = as_pair(*_wor_rows(kind, V, 0))
        q = q.copy()
        q[:: 7] = 0.0                                            # more zero draft masses
        r, ids = np.empty(V), np.empty(V, dtype=np.int16)
        star, qtot = int(np.argmax(q)), float(q.sum())
        _, _, nnz = _race_kernels.wor_bucket_pass(p, q, _bucket_floor(3.0), 52 - _MANT_BITS, 3.0, _N_BUCKETS,
                                                  star, qtot, True, r, ids)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            assert _close(r, p / q, 0.0), kind
        assert nnz == np.count_nonzero(q), kind


@pytest.mark.parametrize("kind", ["llm", "random", "one-hot draft"])
def test_bound_when_K_reaches_the_support(kind, bucket_small_rows):
    """K = |supp q| (the bucketed path declines: the set is supp q) and K = |supp q| - 1 (it does
    not), at V = 9 against brute force and at V = 5000 the compiled path against the numpy one."""
    for V in (9, 5000):
        p, q = as_pair(*_wor_rows(kind, V, 1))
        q = q.copy()
        q[np.argsort(q)[:-6]] = 0.0                              # six nonzero draft masses
        q /= q.sum()
        for K in (5, 6):
            fast, ref = _both(multidraft_bound, p, q, K, False)
            assert abs(fast.value - ref.value) <= 1e-12 and np.array_equal(fast.H, ref.H), (kind, V, K)
            if V == 9:
                exact = multidraft_bound_bruteforce(p, q, K, replacement=False)
                assert abs(fast.value - exact.value) <= 1e-12, (kind, K)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(1, 80), st.integers(0, 2 ** 32 - 1))
def test_low_probability_compiled_against_numpy(K, g, seed):
    """RaceState.low_probability on 2-d states (compiled, row by row) against the numpy sums:
    e_j from 0 to 1e300, tokens counted as arrived, masses past 700 (the logarithms)."""
    rng = np.random.default_rng(seed)
    e = rng.random((K, g)) * 10.0 ** rng.uniform(-300, 300, (K, g))
    e[0] = 1.0
    e[:, rng.random(g) < 0.2] = 0.0
    state = _race.RaceState(e, rng.integers(0, 3, g).astype(np.float64), rng.uniform(0, 1500, g))
    fast, ref = _both(state.low_probability)
    assert _close(fast, ref, 1e-14)


@pytest.mark.parametrize("kind", ["llm", "uniform", "tied", "random", "subnormal"])
def test_chord_bounds_pruned_lower_bounds_equal_the_full_minimum(kind, bucket_small_rows, monkeypatch):
    """chord_bounds takes the lower bound only at prefixes whose upper-bound objective can beat the
    running minimum: its cap equals (bit for bit) the minimum of the lower-bound objective over
    every prefix (K = 3, 4, 8 on rows of V = 3000 through the bucketed path)."""
    from lp import _race_kernels

    calls = []
    original = _race_kernels.chord_bounds

    def record(*args):
        calls.append([a.copy() if isinstance(a, np.ndarray) else a for a in args])
        return original(*args)

    monkeypatch.setattr(_race_kernels, "chord_bounds", record)
    p, q = as_pair(*_wor_rows(kind, 3000, 4))
    for K in (3, 4, 8):
        multidraft_bound(p, q, K, False)
    assert calls
    for Pc, qs, Qc, lam, miss2, K, at, b1, b2, b3, b0, bmax, upper_obj in calls:
        n = K - 2
        A1, A2, A3, S2, qm = b1, b2, b3, b0, bmax
        full, c = np.inf, 0
        for k in range(qs.size + 1):
            while c < at.size and at[c] == k:
                Q, L = Qc[k], lam[k]
                T = Q + L
                E2 = max(Q * A2 + S2 * A1 - 2.0 * A3, 0.0) / T
                M = min(2.0 * qm, Q)
                low = _race_kernels._chord_lower(Q, L, qm, E2, M, 1.0 - miss2[k], n, np.empty(n), np.empty(n))
                full = min(full, Pc[k] + (1.0 - low))
                c += 1
            if k < qs.size:
                x = qs[k]
                u = x / (Qc[k] + lam[k + 1])
                A1, A2, A3, S2, qm = A1 + u, A2 + u * x, A3 + u * x * x, S2 + x * x, max(qm, x)
        assert original(Pc, qs, Qc, lam, miss2, K, at, b1, b2, b3, b0, bmax, np.empty(at.size)) == full


@pytest.mark.parametrize("kind", ["llm", "uniform", "tied", "random", "subnormal", "near-one-hot"])
def test_window_upper_against_numpy(kind, bucket_small_rows, monkeypatch):
    """The general screen's cap (window_upper, one loop): the optimum of _wor_miss_race on the
    arguments the head path passes it (V = 3000, K = 3, 4, 8) as on the numpy path, and the cap
    itself equal bit for bit to the numpy array operations on a synthetic window (lam = 0 at the end)."""
    calls = []
    original = lp.coupling._wor_miss_race

    def record(*args, **kwargs):
        calls.append((args, kwargs))
        return original(*args, **kwargs)

    monkeypatch.setattr(lp.coupling, "_wor_miss_race", record)
    p, q = as_pair(*_wor_rows(kind, 3000, 6))
    for K in (3, 4, 8):
        multidraft_bound(p, q, K, False)
    for args, kwargs in calls:
        fast, ref = _both(lambda: original(*args, **kwargs))
        Pc = args[0]                                             # (the prefixes integrated may differ)
        assert abs(np.min(Pc + fast) - np.min(Pc + ref)) <= 1e-12
    from lp._race_kernels import window_upper
    rng = np.random.default_rng(1)
    for K in (3, 4, 8):
        qs = rng.dirichlet(np.full(500, 0.3)) * 0.5
        Qc = 0.2 + np.concatenate(([0.0], np.cumsum(qs)))
        lam = np.concatenate((np.cumsum(qs[::-1])[::-1], [0.0])) + 0.3
        lam[-3:] = 0.0
        Pc = np.sort(rng.random(501))
        miss2 = rng.random(501) * 0.5
        lo, hi, head, nb = 7, 501, 0.01, 1000
        qmax = np.maximum.accumulate(np.concatenate(([head], qs[lo:hi - 1])))
        slack = (np.arange(lo, hi) + nb + K + 2) * np.finfo(np.float64).eps
        lower = 1.0 - miss2[lo:hi]
        for j in range(2, K):
            room = np.maximum(Qc[lo:hi] - j * qmax - slack, 0.0)
            with np.errstate(invalid="ignore"):
                lower *= np.where(room > 0, room / (lam[lo:hi] + room), 0.0)
        lower[lam[lo:hi] <= 0.0] = 1.0
        assert window_upper(Pc, qs, Qc, lam, miss2, K, lo, hi, head, nb) == float(np.min(Pc[lo:hi] + 1.0 - lower))
