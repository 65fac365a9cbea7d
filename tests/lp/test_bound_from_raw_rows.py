"""multidraft_bound with replacement from the checked rows and their sums (issue 27, goal 1).

The public call no longer normalises the rows into copies: ``specsim._validate.pair_sums``
checks them (the checks and errors of ``as_pair``; compiled, the signs are left to the bound's
first pass) and the compiled bound divides by the sums as it reads.  References: the same call
on the numpy path (``with _jit.disabled():``, which normalises with as_pair's code first) and
exact integers on as_pair's rows.  Contract: the value within 1e-13 of the reference (not bit
for bit: a bucket's sums are those of the rows as given, divided by their sums, and the numpy
path sums by sub-bins); H equal, or (tied objectives) attaining the exact optimum to 1e-13.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from lp.coupling import _iid_bound_bucketed, multidraft_bound
from specsim import _jit
from specsim._validate import as_distribution, as_pair, pair_sums
from tests.lp.test_bucketed_bound import (KINDS, TOL, _exact_iid_alpha, _exact_objective, _exact_prefix_min, _ints,
                                          _rows, _tie_row)

needs_numba = pytest.mark.skipif(not _jit.enabled(), reason="compiled path off (numba missing or SPECSIM_JIT=0)")


def _numpy(f, *args, **kw):
    with _jit.disabled():
        return f(*args, **kw)


def _error(f, *args, **kw):
    try:
        f(*args, **kw)
    except Exception as exc:                       # noqa: BLE001 (compared by the caller)
        return type(exc), str(exc)
    return None


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x.view(np.int64), y.view(np.int64))


def _given(kind: str, V: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A pair as a caller gives it: _rows' kinds, then scaled off 1 within the float64 tolerance
    (``off``) or rounded to float32 (``f32``, sums off by up to ~V eps32)."""
    base, _, how = kind.partition("+")
    p, q = _rows(base, V, seed)
    if how == "off":
        p, q = p * (1 + 7e-9), q * (1 - 6e-9)
        p, q = np.where(p == 0, -0.0, p), np.where(q == 0, -0.0, q)  # valid; as_pair makes them +0.0
    elif how == "f32":
        p, q = p.astype(np.float32), q.astype(np.float32)
    return p, q


def _check(given, K, exact=None, label=""):
    """The public call against the numpy path and (``exact``) exact integers on as_pair's rows."""
    fast = multidraft_bound(*given, K)
    ref = _numpy(multidraft_bound, *given, K)
    assert abs(fast.value - ref.value) <= TOL, label
    assert fast.H.dtype == np.int64 and np.all(np.diff(fast.H) > 0), label
    p, q = as_pair(*given)
    if not np.array_equal(fast.H, ref.H):                       # tied objectives: both optimal
        target = float(exact) if exact is not None else ref.value
        assert abs(float(_exact_objective(p, q, K, fast.H.tolist())) - target) <= TOL, label
    else:
        assert abs(fast.p_H - ref.p_H) <= TOL and abs(fast.q_subset - ref.q_subset) <= TOL, label
    if exact is not None:
        assert abs(fast.value - float(exact)) <= TOL, label
    return fast


SMALL_KINDS = [k + how for k in KINDS for how in ("", "+off", "+f32")]


def test_pair_sums_give_as_pairs_rows_bit_for_bit():
    """p / s_p + 0.0 from pair_sums is as_pair's row, -0.0 entries and float32 input included."""
    for kind in ("llm+off", "one-hot+off", "subnormal", "near-one-hot+f32", "tied+f32"):
        for V in (3, 4096, 5000):
            given = _given(kind, V, 1)
            p, q, s_p, s_q = pair_sums(*given)
            for got, want in zip((p / s_p + 0.0, q / s_q + 0.0), as_pair(*given)):
                assert _same_bits(got, want), (kind, V)
            assert _same_bits(*(p, given[0])) or given[0].dtype != np.float64, "a float64 row is used as given"


@needs_numba
@pytest.mark.parametrize("kind", SMALL_KINDS)
@pytest.mark.parametrize("V", [3, 5, 24])
def test_public_call_against_numpy_and_exact_small_V(kind, V):
    for K in (1, 2, 3, 8):
        given = _given(kind, V, 7 * V + K)
        _check(given, K, _exact_iid_alpha(*as_pair(*given), K), (kind, V, K))


@needs_numba
@pytest.mark.parametrize("kind", ["random+off", "llm+f32", "tied+off", "one-hot+off", "one-hot draft+f32",
                                  "subnormal+off", "near-one-hot+off"])
@pytest.mark.parametrize("V", [4096, 5000])
def test_public_call_against_numpy_long_rows(kind, V):
    for K in (1, 2, 4, 8):
        _check(_given(kind, V, V + K), K, label=(kind, V, K))


@needs_numba
@pytest.mark.parametrize("kind", ["llm+off", "llm+f32", "tied+f32", "subnormal+off", "near-one-hot+off"])
def test_public_call_against_numpy_at_V_151936(kind):
    given = _given(kind, 151_936, 3)
    for K in (2, 8):
        _check(given, K, label=(kind, K))


@needs_numba
def test_public_call_150000_ties_unnormalised_against_exact_integers():
    """The 150,000-tie row, scaled off 1 (so every entry is divided by a sum that is not 1): the
    bucket sums of the raw row over its sum stay within 1e-13 of exact integers at K = 2."""
    K = 2
    p, q = _tie_row(151_936, 150_000, 4)
    given = (p * (1 + 9e-9), q * (1 - 8e-9))
    a, b = map(_ints, as_pair(*given))
    order = sorted(range(len(a)), key=lambda v: Fraction(a[v], b[v]))
    _check(given, K, _exact_prefix_min(a, b, order, K))


@needs_numba
def test_dropping_the_sums_is_caught():
    """Negative control: the compiled bound on the raw rows with the sums left out (scales 1)
    misses the reference on rows whose sums are not 1, by far more than the tolerance."""
    given = _given("llm+f32", 5000, 2)
    given = (given[0] * np.float32(1.002), given[1])             # within float32's tolerance at V = 5000
    p, q, s_p, s_q = pair_sums(*given)
    ref = _numpy(multidraft_bound, *given, 2)
    right = _iid_bound_bucketed(p.astype(np.float64), q.astype(np.float64), 2, (s_p, s_q))
    wrong = _iid_bound_bucketed(p.astype(np.float64), q.astype(np.float64), 2, (1.0, 1.0))
    assert abs(right.value - ref.value) <= TOL
    assert abs(wrong.value - ref.value) > 1e-6


def _bad_rows(V: int) -> dict[str, tuple]:
    rng = np.random.default_rng(V)
    p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
    cases = {}
    for bad in (np.nan, np.inf, -np.inf, -1e-3, -5e-324):
        for at in (0, V // 2, V - 1):
            for side in ("p", "q"):
                row = (p if side == "p" else q).copy()
                row[at] = bad
                cases[f"{side}: {bad} at {at}"] = (row, q) if side == "p" else (p, row)
    cancel = q.copy()
    cancel[0], cancel[1] = cancel[0] + cancel[1] + 0.5, -0.5      # sums to 1: only the sign check sees it
    cases["cancelling negative in q"] = (p, cancel)
    neg_p, nan_q = p.copy(), q.copy()
    neg_p[V - 1], nan_q[0] = -0.25, np.nan                       # p's error is named first
    cases["negative p, nan q"] = (neg_p, nan_q)
    cases["negative p, q too long"] = (neg_p, np.append(q, 0.0))
    cases["negative p, q of strings"] = (neg_p, ["a"] * V)
    cases["zero q"] = (p, np.zeros(V))
    cases["q sums to 1.5"] = (p, q * 1.5)
    cases["cancelling negative in float32 q"] = (p.astype(np.float32), cancel.astype(np.float32))
    cases["cancelling negative in float32 p, q sums to 1.5"] = (cancel.astype(np.float32), q * 1.5)
    cases["cancelling negative in list p"] = (cancel.tolist(), q)
    return cases


@pytest.mark.parametrize("V", [3, 4096, 151_936])
def test_bad_rows_raise_as_pairs_error_on_both_paths(V):
    for label, (p, q) in _bad_rows(V).items():
        want = _error(as_pair, p, q)
        assert want is not None and want[0] in (ValueError, TypeError), label
        # as_pair itself (compiled: the signs checked by its scaling pass) against its numpy path
        assert _numpy(_error, as_pair, p, q) == want, label
        assert _error(as_pair, p, q, None, "test bad rows") == want, label
        for v in (p, q):
            assert _error(as_distribution, v, "q (draft)") == _numpy(_error, as_distribution, v, "q (draft)"), label
        for K in (2, 0, "2"):                                     # a bad K too: the rows' error comes first
            assert _error(multidraft_bound, p, q, K) == want, (label, K)
            assert _numpy(_error, multidraft_bound, p, q, K) == want, (label, K)
        assert _error(pair_sums, p, q) == want, label
        # signs=False lets through a negative entry whose row sums to 1 (the caller's pass finds it)
        passes = "cancelling" in label and "1.5" not in label
        assert _error(pair_sums, p, q, signs=False) == (None if passes else want), label


@needs_numba
def test_compiled_pass_reports_a_negative_entry():
    """pair_sums(signs=False) lets a negative entry through when the sum is right; the bound's
    first pass finds it (None), and the public call then raises as_pair's error."""
    rng = np.random.default_rng(8)
    for V in (4, 5000):
        p, q = rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V))
        q[V - 1], q[V - 2] = q[V - 1] + q[V - 2] + 1e-3, -1e-3     # the sum stays 1
        rows = pair_sums(p, q, signs=False)
        assert _iid_bound_bucketed(rows[0], rows[1], 2, tuple(rows[2:])) is None
        assert _error(multidraft_bound, p, q, 2) == _error(as_pair, p, q)
        assert "negative entry -0.001 at token" in _error(as_pair, p, q)[1]


@needs_numba
def test_read_only_strided_and_list_rows():
    """Rows the kernel cannot read in place (read-only, strided) are copied first; lists are
    converted: the same bound as the numpy path in every case, one compiled signature."""
    from lp import _bound_kernels

    p, q = _given("llm+off", 10_000, 4)
    ro = p.copy()
    ro.flags.writeable = False
    wide = np.stack([q, q]).T.copy()                             # q[:, 0] is strided
    for given in ((ro, q), (p, wide[:, 0]), (p.tolist(), q.tolist())):
        _check(given, 3)
    assert len(_bound_kernels.iid_bound.signatures) == 1
