"""certify's divergence fields by chunks (lp._fields_kernels) against the whole-row compiled pass
(``chunk=0``, the previous implementation, kept as the reference) and the numpy path: the same
bits on every field, on LLM-like rows at V = 151,936, Dirichlet rows of odd lengths (chunk and
summation-block boundaries), ties, near-one-hot rows, out == p, out == q, float32-derived and
subnormal rows, for every rule of specsim.verifiers.lossy that certify accepts."""
from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("numba")

from lp import certificates as C  # noqa: E402
from specsim import _jit  # noqa: E402
from specsim._validate import as_pair  # noqa: E402
from specsim.verifiers._clip_family import clip_family  # noqa: E402
from specsim.verifiers.lossy import (cactus, cascade, consultant_standin, ensemble, fuzzy, lenience,  # noqa: E402
                                     margin_standin, mentored, topk_accept, typical)

RULES = (typical(), typical(0.2, 0.5, "truncated"), lenience(0.8), lenience(1.0), topk_accept(1), topk_accept(10),
         fuzzy(0.3), fuzzy(0.05, "kl"), fuzzy(0.2, "tv"), fuzzy(0.1, "js"), fuzzy(0.1, "kl_reverse"),
         cactus(0.0), cactus(0.05), mentored(0.6), mentored(1.0), ensemble(0.6, "geometric"), ensemble(0.3),
         cascade(0.5), margin_standin(0.5), consultant_standin(1e-4), consultant_standin(0.2))
#: the default chunk and small ones (many chunks, single-block chunks, a chunk ending mid-row)
CHUNKS = (C._CHUNK, 128, 333, 1000, 4096)

_spec = importlib.util.spec_from_file_location(
    "_bench_harness", Path(__file__).resolve().parents[2] / "benchmarks" / "_harness.py")
_harness = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(_harness)


@pytest.fixture(autouse=True)
def _numba_on():
    if not _jit.enabled():
        pytest.skip("compiled path switched off (SPECSIM_JIT=0)")


def _bits(x):
    """A field as comparable bits: floats by their IEEE pattern (-0.0 != 0.0, NaN == NaN)."""
    return struct.pack("<d", x) if isinstance(x, float) else x


class _Stats:
    def __init__(self):
        self.dense = self.pack_log1p = self.pack_log = self.chunks = self.miss = 0


def _check(out, p, q, stats, tag, atol=1e-12):
    """Every chunk size gives the whole-row pass's fields bit for bit; those equal the numpy path's."""
    ref = C._out_fields_compiled(out, p, q, atol, chunk=0)
    if ref is not None:
        want = C._out_fields(out, p, q, atol, SimpleNamespace(m=int(np.count_nonzero(p > 0))))
        assert [_bits(x) for x in ref[:7]] == [_bits(x) for x in want[:7]], (tag, ref, want)
    for chunk in CHUNKS:
        got = C._out_fields_compiled(out, p, q, atol, chunk=chunk)
        assert (got is None) == (ref is None), (tag, chunk)
        if ref is not None:
            assert [_bits(x) for x in got] == [_bits(x) for x in ref], (tag, chunk, got, ref)
        dense = C._dense_fields(np.ascontiguousarray(out, dtype=float), p, q, atol, chunk)
        if dense is not None:                   # the chunked pass answered (not the fallback)
            stats.dense += 1
            assert [_bits(x) for x in dense] == [_bits(x) for x in ref], (tag, chunk)
        miss = C._miss_fields(np.ascontiguousarray(out, dtype=float), p, q, atol, chunk)
        if miss is not None:                    # the pass for rows where out has zeros answered
            assert dense is None, (tag, chunk)
            stats.miss += 1
            assert [_bits(x) for x in miss] == [_bits(x) for x in ref], (tag, chunk)
            _check_miss_numbers(out, p, q, chunk, tag)


def _check_miss_numbers(out, p, q, chunk, tag):
    """The support note prints its p mass to 3 digits: check the number itself (numpy's
    ``p[out <= 0].sum()``), the first such token and the TV sums, bit for bit."""
    from lp import _fields_kernels as FK

    out = np.ascontiguousarray(out, dtype=float)
    n = p.size
    rows = np.empty((2, n))
    idx = np.empty(n, np.int64)
    ok, _, _, _, k, first, t, tv_pq, mass = FK.miss_pass(out, p, q, 1e-12, C._chunk_plan(n, chunk)[0],
                                                         rows[0], rows[1], idx)
    miss = out <= 0
    assert ok and k == n - np.count_nonzero(miss) and first == int(np.flatnonzero(miss)[0]), tag
    assert np.array_equal(idx[:k], np.flatnonzero(~miss)) and np.array_equal(rows[0, :k], out[~miss]) \
        and np.array_equal(rows[1, :k], p[~miss]), tag
    assert _bits(mass) == _bits(float(p[miss].sum())), (tag, chunk)
    assert _bits(t) == _bits(float(np.abs(out - p).sum())) and _bits(tv_pq) == _bits(float(np.abs(p - q).sum()))


@pytest.fixture
def spy_miss(monkeypatch):
    """Counts the answers of the pass for rows where out has zeros (so it is known to answer)."""
    from lp import _fields_kernels as FK

    stats = _Stats()
    real = FK.miss_pass

    def miss_pass(*args):
        res = real(*args)
        stats.miss += bool(res[0])
        return res

    monkeypatch.setattr(FK, "miss_pass", miss_pass)
    return stats


@pytest.fixture
def spy_steps(monkeypatch):
    """Counts the chunk steps' packing codes (so the packed branches are known to run)."""
    from lp import _fields_kernels as FK

    stats = _Stats()
    real = FK.fields_step

    def step(*args):
        code = real(*args)
        stats.chunks += 1
        stats.pack_log1p += bool(code & FK.PACK_LOG1P)
        stats.pack_log += bool(code & FK.PACK_LOG)
        return code

    monkeypatch.setattr(FK, "fields_step", step)
    return stats


def _rule_rows(p, q, stats, tag, rules=RULES):
    p, q = as_pair(p, q)
    for rule in rules:
        r = C._rule_of(rule)
        try:
            fam = clip_family(p, q)
            with fam.shared():
                out, _ = r.out_beta(p, q)
        except ValueError:                      # outside the rule's input contract (certify raises)
            continue
        _check(out, p, q, stats, f"{tag} {r.name}")
    # rows no rule makes: out == p (every ratio 1: near only), out == q, out a mixture
    for name, out in (("out=p", p.copy()), ("out=q", q.copy()), ("mix", 0.3 * p + 0.7 * q)):
        _check(out, p, q, stats, f"{tag} {name}")


def _dirichlet(V, seed, alpha=0.4):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(V, alpha)), rng.dirichlet(np.full(V, alpha))


def test_chunked_fields_llm_row_V_151936(spy_steps):
    p, q = _harness.llm_like_pair(151_936, draft_weight=1.0)
    _rule_rows(p, q, spy_steps, "llm V=151936")
    assert spy_steps.dense > 0 and spy_steps.pack_log1p > 0 and spy_steps.pack_log > 0, vars(spy_steps)
    assert spy_steps.miss >= 2 * len(CHUNKS), vars(spy_steps)   # typical and topk_accept at least


@pytest.mark.parametrize("V", [3, 7, 1000, 5000, 40_001])
def test_chunked_fields_dirichlet_odd_lengths(V, spy_steps):
    for seed in range(2):
        p, q = _dirichlet(V, seed)
        _rule_rows(p, q, spy_steps, f"dirichlet V={V} seed={seed}")
        p2, q2 = _harness.llm_like_pair(V, seed=seed)
        _rule_rows(p2, q2, spy_steps, f"llm V={V} seed={seed}")
    assert spy_steps.dense > 0


@pytest.mark.parametrize("V", [7, 5000])
def test_chunked_fields_extreme_rows(V, spy_steps):
    rng = np.random.default_rng(V)
    p, q = _dirichlet(V, 5)
    tied_q = q.copy()
    tied_q[: V // 2 + 1] = 2.0 * p[: V // 2 + 1]          # ties of q/p on half the tokens
    near_q = q * 2.0 ** -40
    near_q[0] = 1.0 - 2.0 ** -40                            # a near-one-hot draft
    near_p = p * 2.0 ** -40
    near_p[1] = 1.0 - 2.0 ** -40                            # a near-one-hot target
    sub_p = p.copy()
    k = max(1, V // 5)
    sub_p[:k] = 5e-324 * rng.integers(1, 9, k)              # subnormal entries
    sub_q = q.copy()
    sub_q[k: 2 * k] = 5e-320
    cases = {"tied": (p, tied_q), "near-one-hot q": (p, near_q), "near-one-hot p": (near_p, q),
             "subnormal p": (sub_p, q), "subnormal q": (p, sub_q),
             "float32": (p.astype(np.float32), q.astype(np.float32)),
             "uniform p": (np.full(V, 1.0 / V), q)}
    for name, (a, b) in cases.items():
        _rule_rows(a / a.sum(), b / b.sum(), spy_steps, f"{name} V={V}")
    assert spy_steps.dense > 0


def test_chunked_fields_subnormal_ratios_hand_back():
    """Ratios that overflow or underflow: the sums are not finite, so the chunked pass returns None
    and the caller decides as before (the whole-row pass, then numpy)."""
    V = 3000
    p, q = _dirichlet(V, 3)
    p[:5] = 1e-320                                          # out / p overflows to inf on these
    p /= p.sum()
    out = q.copy()
    stats = _Stats()
    _check(out, p, q, stats, "overflowing ratios")
    assert C._dense_fields(out, p, q, 1e-12, C._CHUNK) is None


def test_chunked_fields_detect_blocks_other_than_numpys(monkeypatch):
    """Negative control: chunks of blocks other than numpy's summation blocks (here every block
    boundary moved one entry to the left) change the sums' last bits, and the comparison above
    sees it; max out/p and the flags do not depend on the blocks."""
    p, q = as_pair(*_harness.llm_like_pair(40_001, seed=1, draft_weight=1.0))
    out = 0.3 * p + 0.7 * q
    whole = C._out_fields_compiled(out, p, q, 1e-12, chunk=0)
    plan, sizes, L = C._chunk_plan(p.size, 4096)
    bad = plan.copy()
    bad[2] -= 1                                 # block 0 one entry shorter, the last one longer
    bad[1 + L] += 1
    sizes = (sizes[0] - 1, *sizes[1:-1], sizes[-1] + 1)
    nc = len(sizes)
    bad[4 + L + nc:3 + L + 2 * nc] -= 1         # chunk starts (but the first) one entry earlier
    monkeypatch.setattr(C, "_chunk_plan", lambda n, chunk: (bad, sizes, L))
    got = C._out_fields_compiled(out, p, q, 1e-12)
    assert got[3:7] == whole[3:7]
    assert [_bits(x) for x in (*got[:3], got[7])] != [_bits(x) for x in (*whole[:3], whole[7])]


def test_non_dense_rows_take_the_whole_row_pass():
    """out = 0 or p = 0 somewhere: the chunked pass declines (None), the whole-row pass answers."""
    p, q = _dirichlet(2000, 4)
    out = q.copy()
    out[17] = 0.0
    out /= out.sum()
    assert C._dense_fields(out, p, q, 1e-12, C._CHUNK) is None
    assert C._out_fields_compiled(out, p, q, 1e-12) == C._out_fields_compiled(out, p, q, 1e-12, chunk=0)


def test_block_sums_are_numpys_sum():
    """The chunk's block sums (eight accumulators in one vector) combined as numpy combines its
    blocks give ``.sum()`` bit for bit: every length up to 1,100 and longer ones, terms over 40
    binades of both signs, from any block on (negative control: the same blocks summed in plain
    order differ from numpy's on many lengths)."""
    from lp import _fields_kernels as FK
    from specsim import _kl_kernels as KL

    rng = np.random.default_rng(12)
    plain_differs = 0
    for n in [*range(1, 1101), 4097, 65_537, 151_936]:
        t = rng.standard_normal(n) * np.exp(rng.standard_normal(n) * 5)
        u = rng.standard_normal(n)
        lens = KL.pairwise_blocks(n)
        st, su = np.empty(lens.size), np.empty(lens.size)
        half = lens.size // 2                   # two calls: the second from its first block's start
        start = int(lens[:half].sum())
        FK.block_sums(t, u, lens, 0, half, st, su)
        FK.block_sums(t[start:], u[start:], lens, half, lens.size, st, su)
        assert KL.pairwise_total(n, st) == t.sum() and KL.pairwise_total(n, su) == u.sum(), n
        plain = np.array([float(np.cumsum(t[a:a + m])[-1]) for a, m in zip(np.cumsum(lens) - lens, lens)])
        plain_differs += KL.pairwise_total(n, plain) != t.sum()
    assert plain_differs > 200


def _zero_rows(V, rng):
    """out rows with zeros where p > 0: zeros at summation-block and chunk edges, whole chunks of
    zeros, a single nonzero, k and n - k next to a block size, sparse and dense random supports."""
    p, q = _dirichlet(V, int(rng.integers(1000)))
    lens = np.cumsum(np.asarray(__import__("specsim._kl_kernels", fromlist=["x"]).pairwise_blocks(V)))
    rows = {}
    edges = np.zeros(V, bool)
    edges[np.minimum(np.concatenate([lens - 1, lens[:-1]]), V - 1)] = True
    rows["zeros at block edges"] = np.where(edges, 0.0, q)
    rows["nonzero only at block edges"] = np.where(edges, q, 0.0)
    chunky = q.copy()
    chunky[128: min(V, 128 + 1000)] = 0.0                  # whole small chunks and blocks of zeros
    rows["zero chunks"] = chunky
    one = np.zeros(V)
    one[V // 2] = 1.0
    rows["single nonzero"] = one
    rows["single nonzero at 0"] = np.eye(1, V, 0)[0]
    rows["single zero"] = np.where(np.arange(V) == V - 1, 0.0, q)
    for k in (7, 8, 9, 127, 128, 129, 136, 257):          # k, and n - k, next to block sizes
        for name, keep in ((f"k={k}", k), (f"n-k={k}", V - k)):
            if 0 < keep < V:
                r = np.zeros(V)
                sel = rng.choice(V, keep, replace=False)
                r[sel] = q[sel]
                rows[name] = r
    for frac in (0.01, 0.5, 0.99):
        rows[f"random support {frac}"] = np.where(rng.random(V) < frac, q, 0.0)
    rows["zeros and near-1 ratios"] = np.where(rng.random(V) < 0.5, p * (1 + 1e-3 * rng.standard_normal(V)), 0.0)
    return p, q, {name: r / r.sum() if r.sum() > 0 else r for name, r in rows.items()}


@pytest.mark.parametrize("V", [3, 130, 1000, 9000, 40_001])
def test_miss_fields_rows_with_zeros(V, spy_miss):
    """Rows where out has zeros: the new pass equals the whole-row pass and numpy bit for bit on
    every chunk size, and it is the one that answered."""
    rng = np.random.default_rng(V)
    p, q, rows = _zero_rows(V, rng)
    stats = _Stats()
    for name, out in rows.items():
        _check(out, p, q, stats, f"{name} V={V}")
    with_zeros = sum(bool((out <= 0).any()) for out in rows.values())
    assert with_zeros >= len(rows) - 3
    assert stats.miss == len(CHUNKS) * with_zeros and spy_miss.miss >= stats.miss, vars(stats)


def test_miss_fields_hand_back():
    """Rows the pass declines (p = 0 somewhere, a negative or non-finite out, ratios that
    overflow so a term is not finite): None, and the caller decides as before."""
    p, q = _dirichlet(3000, 7)
    out = np.where(np.arange(3000) % 3 == 0, 0.0, q)
    out /= out.sum()
    p_zero = p.copy()
    p_zero[5] = 0.0
    p_zero /= p_zero.sum()
    neg, nan = out.copy(), out.copy()
    neg[1], nan[1] = -1e-3, np.nan
    p_sub = p.copy()
    p_sub[1] = 1e-320                           # out / p overflows to inf there (out[1] > 0)
    p_sub /= p_sub.sum()
    stats = _Stats()
    for name, (o, a) in {"p = 0": (out, p_zero), "out < 0": (neg, p), "out NaN": (nan, p),
                         "overflow": (out, p_sub)}.items():
        assert C._miss_fields(o, a, q, 1e-12, C._CHUNK) is None, name
        if name != "out NaN" and name != "out < 0":
            _check(o, a, q, stats, name)
        else:
            assert C._out_fields_compiled(o, a, q, 1e-12) == C._out_fields_compiled(o, a, q, 1e-12, chunk=0)
    assert stats.miss == 0


def test_miss_mass_order_matters():
    """Negative control for the exact p-mass check: the same entries summed in plain order differ
    from numpy's ``p[out <= 0].sum()`` on many rows, so bit equality there is a real test."""
    rng = np.random.default_rng(3)
    differs = 0
    for _ in range(50):
        p = rng.dirichlet(np.full(5000, 0.3))
        sel = p[rng.random(5000) < 0.9]
        differs += float(np.cumsum(sel)[-1]) != float(sel.sum())
    assert differs > 10
