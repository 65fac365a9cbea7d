"""The compiled validation of long rows (specsim/_validate_kernels.py) against the numpy path.

Reference: the same call under ``_jit.disabled()``.  Accepted rows must come out bit for bit
the same (numpy's pairwise sum is kept, the scaled copy is one compiled pass); rejected rows must
raise the same exception with the same text, naming the same token.
"""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from specsim import _jit
from specsim._validate import JIT_MIN_V, as_distribution, as_pair, as_rows

pytest.importorskip("numba")


def _numpy(f, *args, **kw):
    with _jit.disabled():
        return f(*args, **kw)


def _same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    """Equal shapes, dtypes and bit patterns (so +0.0 and -0.0 differ, NaN equals itself)."""
    return x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x.view(np.int64), y.view(np.int64))


def _rows(V: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Valid rows of V entries: random, peaked, tied, one-hot, subnormal, near-one-hot, -0.0."""
    rand = rng.random(V)
    logits = 3.0 * rng.standard_normal(V)
    peaked = np.exp(logits - logits.max())
    one_hot = np.zeros(V)
    one_hot[V // 3] = 1.0
    sub = rng.random(V) * 5e-324 * 64
    sub[0] = 1.0
    near = np.full(V, 2.0 ** -60)
    near[1] = 1.0
    negz = rng.random(V)
    negz[::7] = -0.0
    return {"random": rand / rand.sum(), "peaked": peaked / peaked.sum(), "tied": np.full(V, 1.0 / V),
            "one-hot": one_hot, "subnormal": sub, "near-one-hot": near, "negative zeros": negz / negz.sum(),
            "off by 5e-9": (rand / rand.sum()) * (1 + 5e-9), "unnormalised": rand / rand.sum() * 1.7}


def test_same_bits_tells_signed_zeros_apart():
    """Negative control: the comparison sees what a missing ``+ 0.0`` would leave behind."""
    assert not _same_bits(np.array([-0.0, 1.0]), np.array([0.0, 1.0]))
    assert _same_bits(np.array([0.0, 1.0]), np.array([0.0, 1.0]))


@pytest.mark.parametrize("V", [JIT_MIN_V, 5000, 151_936])
def test_accepted_rows_bit_identical(V):
    rng = np.random.default_rng(V)
    for kind, row in _rows(V, rng).items():
        atol = 1.0 if kind == "unnormalised" else None
        for label, v in (("float64", row), ("float32", row.astype(np.float32)), ("list", row.tolist())):
            if label == "list" and V > 5000:
                continue
            before = np.array(v, copy=True)
            got, want = as_distribution(v, "p", atol), _numpy(as_distribution, v, "p", atol)
            assert _same_bits(got, want), (V, kind, label)
            assert not np.signbit(got).any()
            assert np.array_equal(np.asarray(v), before, equal_nan=True), "the input was modified"
            assert got is not v and not np.shares_memory(got, np.asarray(v))


def test_rows_and_pairs_bit_identical():
    rng = np.random.default_rng(3)
    rows = np.stack(list(_rows(6000, rng).values())[:-1])      # the valid ones at the default tolerance
    for arr in (rows, rows.astype(np.float32), rows[:0]):
        assert _same_bits(as_rows(arr, "q"), _numpy(as_rows, arr, "q"))
    p, q = rows[0], rows[1]
    for got, want in zip(as_pair(p, q), _numpy(as_pair, p, q)):
        assert _same_bits(got, want)


def test_strided_and_read_only_rows_take_the_numpy_path_with_the_same_result():
    rng = np.random.default_rng(4)
    wide = rng.random((2, 10_000))
    wide /= wide.sum(axis=1, keepdims=True)
    strided = wide[:, ::2] * 2 / (wide[:, ::2] * 2).sum(axis=1, keepdims=True)
    ro = wide[0].copy()
    ro.flags.writeable = False
    for v in (strided[0][::1], np.asfortranarray(strided)[0], ro):
        assert _same_bits(as_distribution(v), _numpy(as_distribution, v))


def _error(f, *args):
    try:
        f(*args)
    except Exception as exc:                       # noqa: BLE001 (compared below)
        return type(exc), str(exc)
    return None


@pytest.mark.parametrize("V", [JIT_MIN_V, 151_936])
def test_rejected_rows_same_error(V):
    rng = np.random.default_rng(V + 1)
    base = rng.random(V)
    base /= base.sum()
    cases = {}
    for bad in (np.nan, np.inf, -np.inf, -1e-3, -5e-324):
        for at in (0, V // 2, V - 1):
            row = base.copy()
            row[at] = bad
            cases[f"{bad} at {at}"] = row
    late_nan = base.copy()
    late_nan[5], late_nan[V - 2] = -0.25, np.nan      # non-finite is named first, wherever it is
    cases["negative then nan"] = late_nan
    cancel = base.copy()
    cancel[10], cancel[11] = cancel[10] + 0.5, -0.5    # sums to 1: only the entry check catches it
    cases["cancelling negative"] = cancel
    cases["sum 1.5"] = base * 1.5
    cases["sum 0"] = np.zeros(V)
    for kind, row in cases.items():
        for v in (row, row.astype(np.float32)):          # (in float32, -5e-324 becomes -0.0: valid)
            want = _numpy(_error, as_distribution, v, "q (draft)")
            assert v.dtype == np.float32 or (want is not None and want[0] is ValueError), kind
            assert _error(as_distribution, v, "q (draft)") == want, kind
        rows = np.stack([base, row, base])
        want = _numpy(_error, as_rows, rows, "p")
        assert want is not None and "p[1]" in want[1]
        assert _error(as_rows, rows, "p") == want, kind
    assert _error(as_pair, base, cases["nan at 0"]) == _numpy(_error, as_pair, base, cases["nan at 0"])


def test_zero_row_with_atol_one_matches():
    """atol = 1 accepts a row of zeros (sum 0): the compiled path steps aside, numpy's result stands."""
    v = np.zeros(JIT_MIN_V)
    with np.errstate(invalid="ignore"):
        assert _same_bits(as_distribution(v, "p", 1.0), _numpy(as_distribution, v, "p", 1.0))


@pytest.mark.skipif(not _jit.enabled(), reason="compiled path off (SPECSIM_JIT=0)")
def test_short_rows_do_not_import_numba():
    code = ("import sys, numpy as np; from specsim._validate import as_distribution, JIT_MIN_V; "
            "as_distribution(np.full(JIT_MIN_V - 1, 1.0 / (JIT_MIN_V - 1))); print('numba' in sys.modules); "
            "as_distribution(np.full(JIT_MIN_V, 1.0 / JIT_MIN_V)); print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


@pytest.mark.skipif(not _jit.enabled(), reason="compiled path off (SPECSIM_JIT=0): no work block is used")
def test_pair_into_scratch_is_bit_identical_and_never_overwrites_live_rows():
    """as_pair(scratch=...) writes long rows into a per-thread block: the same bits as fresh
    rows, and a second call while the first rows are alive gets other memory (first rows intact)."""
    rng = np.random.default_rng(5)
    rows = _rows(151_936, rng)
    p, q = rows["peaked"], rows["random"]
    want = _numpy(as_pair, p, q)
    p1, q1 = as_pair(p, q, scratch="test pair")
    assert _same_bits(p1, want[0]) and _same_bits(q1, want[1])
    assert np.shares_memory(p1, q1) is False and p1.base is q1.base is not None      # one block
    keep = p1.copy(), q1.copy()
    p2, q2 = as_pair(q, p, scratch="test pair")                  # p1, q1 alive: a fresh block
    assert not np.shares_memory(p1, p2) and _same_bits(p1, keep[0]) and _same_bits(q1, keep[1])
    assert _same_bits(p2, want[1]) and _same_bits(q2, want[0])
    address = p2.__array_interface__["data"][0]
    del p1, q1, p2, q2
    p3, _ = as_pair(p, q, scratch="test pair")                   # nothing alive: reused
    assert p3.__array_interface__["data"][0] == address and _same_bits(p3, want[0])
    for bad in (_error(as_pair, p, np.full(151_936, np.nan), None, "test pair"),):
        assert bad == _numpy(_error, as_pair, p, np.full(151_936, np.nan))


def test_multidraft_bound_results_do_not_hold_the_scratch():
    from lp.coupling import multidraft_bound

    rng = np.random.default_rng(6)
    rows = _rows(151_936, rng)
    p, q = rows["peaked"], rows["random"]
    first = multidraft_bound(p, q, 2)
    second = multidraft_bound(q, p, 3)                           # reuses the block
    again = multidraft_bound(p, q, 2)
    assert first.value == again.value and np.array_equal(first.H, again.H)
    assert not np.shares_memory(first.H, second.H)
    ref = _numpy(multidraft_bound, p, q, 2)
    assert abs(first.value - ref.value) <= 1e-13
