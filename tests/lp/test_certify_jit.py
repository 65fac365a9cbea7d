"""certify's compiled path (numba, specsim.verifiers._clip_kernels) against its numpy path, which
stays the reference (``with _jit.disabled():``): every certificate field, the clip family's arrays,
the frontier's clip level and kl, on random and extreme rows."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("numba")

from lp.certificates import certify  # noqa: E402
from lp.frontier import frontier, frontier_curve  # noqa: E402
from specsim import _jit  # noqa: E402
from specsim.testing.strategies import distribution_pairs  # noqa: E402
from specsim import _kl_kernels as KL  # noqa: E402
from specsim.verifiers import _clip_kernels as K  # noqa: E402
from specsim.verifiers._clip_family import ClipFamily  # noqa: E402
from tests.lp.frontier_checks import FAMILY_RULES, assert_frontier_close, budget_rounding  # noqa: E402
from specsim.verifiers.lossy import (cactus, cascade, consultant_standin, ensemble, fuzzy, lenience,  # noqa: E402
                                     margin_standin, mentored, topk_accept, typical)

RULES = (typical(), typical(0.2, 0.5, "truncated"), lenience(0.7), lenience(1.0), topk_accept(1), topk_accept(3),
         fuzzy(0.3, "js_released"), fuzzy(0.05, "kl"), fuzzy(0.2, "tv"), fuzzy(0.1, "js"), fuzzy(0.1, "kl_reverse"),
         cactus(0.0), cactus(0.05), cactus(0.5), mentored(0.6), mentored(1.0), ensemble(0.6, "geometric"),
         ensemble(0.3), cascade(0.5), margin_standin(0.5), consultant_standin(1e-4), consultant_standin(0.2))

#: fields that must agree bit for bit (same operations in the same order on both paths)
EXACT = ("beta", "kl_out_p", "kl_p_out", "tv", "max_ratio", "dinf", "between", "frontier_tv", "infinite")
#: the KL frontiers: the compiled bisection takes scalar logs by libm, numpy's may differ by an ulp
CLOSE = ("frontier_kl", "frontier_kl_reverse")

ROW_KINDS = ("random", "tied", "uniform-p", "onehot-p", "onehot-q", "subnormal", "near-one-hot", "p-zeros",
             "q-zeros", "equal", "llm")


def _row(kind: str, V: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.full(V, 0.4)), rng.dirichlet(np.full(V, 0.4))
    if kind == "tied":                     # ratios q/p tied on half the tokens
        q[: V // 2 + 1] = 2.0 * p[: V // 2 + 1]
    elif kind == "uniform-p":              # every ratio ties with another
        p = np.full(V, 1.0 / V)
        q = np.round(q * 4 * V) + 1.0
    elif kind == "onehot-p":
        p = np.zeros(V)
        p[seed % V] = 1.0
    elif kind == "onehot-q":
        q = np.zeros(V)
        q[seed % V] = 1.0
    elif kind == "subnormal":
        k = max(1, V // 5)
        p[:k] = 5e-324 * rng.integers(1, 9, k)
        q[k: 2 * k] = 5e-320
    elif kind == "near-one-hot":
        q = q * 2.0 ** -40
        q[0] = 1.0 - 2.0 ** -40
    elif kind == "p-zeros":
        p[: max(1, V // 3)] = 0.0
    elif kind == "q-zeros":
        q[: max(1, V // 3)] = 0.0
    elif kind == "equal":
        q = p.copy()
    elif kind == "llm":
        z = 3.0 * rng.standard_normal(V)
        p, q = np.exp(z - z.max()), np.exp(z + rng.standard_normal(V) - z.max())
    return p / p.sum(), q / q.sum()


def _fields(c) -> dict:
    return {f: getattr(c, f) for f in EXACT + CLOSE}


def _assert_same(rule, p, q, tag=""):
    """certify by both paths: the same ValueError, or the same out and fields.  Rules whose law is
    made from the clip family (mentored, Cactus) agree to rounding (the grouped family sums in
    another order); every other rule's fields agree bit for bit; the KL frontiers agree through
    their conditioning (frontier_checks)."""
    try:
        with _jit.disabled():
            ref = certify(rule, p, q)
    except ValueError as err:
        with pytest.raises(ValueError) as got:
            certify(rule, p, q)
        assert str(got.value) == str(err), tag
        return
    c = certify(rule, p, q)
    got, want = _fields(c), _fields(ref)
    if rule.name in FAMILY_RULES:
        np.testing.assert_allclose(c.out, ref.out, rtol=1e-13, atol=1e-300, err_msg=f"{tag} {rule.name}")
        for f in ("beta", "kl_out_p", "kl_p_out", "tv", "max_ratio", "frontier_tv"):
            assert (got[f] == want[f]) or abs(got[f] - want[f]) <= 1e-12 * abs(want[f]) + budget_rounding(p, 0.0), \
                (tag, rule.name, f, got[f], want[f])
        assert got["between"] == want["between"] and got["infinite"] == want["infinite"], (tag, rule.name)
    else:
        np.testing.assert_array_equal(c.out, ref.out, err_msg=f"{tag} {rule.name}")
        for f in EXACT:
            assert got[f] == want[f] or (got[f] != got[f] and want[f] != want[f]), (tag, rule.name, f, got[f], want[f])
    for f, kind, eps in (("frontier_kl", "kl", c.kl_out_p), ("frontier_kl_reverse", "kl_reverse", c.kl_p_out)):
        if c.out is not None and np.array_equal(c.out, q):   # the rule emits q: beta* = 1 on both paths
            assert got[f] == want[f] == 1.0
            continue
        assert_frontier_close(got[f], want[f], p / p.sum(), q / q.sum(), eps, kind, f"{tag} {rule.name}")


@pytest.fixture(autouse=True)
def _numba_on():
    if not _jit.enabled():
        pytest.skip("compiled path switched off (SPECSIM_JIT=0)")


@pytest.mark.parametrize("kind", ROW_KINDS)
def test_certify_compiled_equals_numpy_small_V(kind):
    for V in range(3, 9):
        for seed in range(3):
            p, q = _row(kind, V, seed)
            for rule in RULES:
                _assert_same(rule, p, q, f"{kind} V={V} seed={seed}")


@pytest.mark.parametrize("kind", ROW_KINDS)
def test_certify_compiled_equals_numpy_packed_sort(kind):
    """V >= 4096: the family orders tokens by packed int64 keys (ties above the id bits repaired)."""
    p, q = _row(kind, 5000, 7)
    for rule in RULES:
        _assert_same(rule, p, q, kind)


@pytest.mark.parametrize("V", [5, 5000])
def test_certify_compiled_equals_numpy_float32_and_q_max_near_one(V):
    """Extreme rows of the input contract: float32 rows (validated into float64 alike on both
    paths) and a draft whose largest entry is within 1e-15 of 1."""
    p, q = _row("llm", V, 4)
    rest = np.random.default_rng(V).dirichlet(np.full(V - 1, 0.5)) * 1e-15
    q_peak = np.concatenate([[1.0 - rest.sum()], rest])
    assert 1.0 - q_peak[0] <= 1e-15
    for rule in RULES:
        _assert_same(rule, p.astype(np.float32), q.astype(np.float32), f"float32 V={V}")
        _assert_same(rule, p, q_peak, f"q_max near 1, V={V}")


def test_certify_compiled_equals_numpy_at_V_151936():
    p, q = _row("llm", 151_936, 3)
    for rule in RULES:
        _assert_same(rule, p, q, "V=151936")


@settings(max_examples=60, deadline=None)
@given(distribution_pairs(st.integers(2, 12)), st.sampled_from(RULES))
def test_certify_compiled_equals_numpy_random_pairs(pq, rule):
    _assert_same(rule, *pq)


@settings(max_examples=40, deadline=None)
@given(distribution_pairs(st.integers(2, 30)), st.floats(0.0, 2.0), st.sampled_from(["kl", "kl_reverse"]))
def test_frontier_clip_level_compiled_equals_numpy(pq, eps, kind):
    p, q = pq
    with _jit.disabled():
        ref = frontier(p, q, eps, kind)
    got = frontier(p, q, eps, kind)
    assert_frontier_close(got.beta, ref.beta, p, q, eps, kind)
    assert abs(got.achieved - ref.achieved) <= budget_rounding(p, eps) + 1e-12 * ref.achieved or got.achieved <= eps


def test_frontier_curve_compiled_equals_numpy():
    p, q = _row("llm", 5000, 2)
    budgets = [0.0, 1e-4, 0.01, 0.3, 5.0]
    for kind in ("kl", "kl_reverse", "tv"):
        with _jit.disabled():
            ref = frontier_curve(p, q, budgets, kind)
        got = frontier_curve(p, q, budgets, kind)
        for e, g, w in zip(budgets, got.beta, ref.beta):
            assert_frontier_close(g, w, p, q, e, kind, "curve")


def test_compiled_path_is_taken_and_switch_works(monkeypatch):
    """Negative control for the comparisons above: they must not pass because both sides ran numpy."""
    from lp import _fields_kernels as FK

    calls = []

    def spy(real):
        def call(*args):
            calls.append(real.__name__)
            return real(*args)
        return call

    monkeypatch.setattr(K, "out_pass", spy(K.out_pass))           # the whole-row pass
    monkeypatch.setattr(FK, "fields_step", spy(FK.fields_step))   # the chunked pass (dense rows)
    p, q = _row("random", 6, 0)
    p0 = np.where(p > 0.1, p, 0.0)
    for a, b, want in ((p, q, "fields_step"), (p0 / p0.sum(), q, "out_pass")):   # dense, then p = 0 somewhere
        certify(cactus(0.05), a, b)
        assert want in calls, calls
        calls.clear()
        with _jit.disabled():
            certify(cactus(0.05), a, b)
        assert not calls


def test_field_comparison_detects_a_one_ulp_change():
    """Negative control: the exact comparison is sensitive to the last bit of a field."""
    p, q = _row("llm", 64, 1)
    c = certify(mentored(0.6), p, q)
    with _jit.disabled():
        ref = certify(mentored(0.6), p, q)
    assert c.kl_out_p == ref.kl_out_p
    assert np.nextafter(c.kl_out_p, np.inf) != ref.kl_out_p


def test_bad_rule_output_raises_the_numpy_error():
    """A rule whose closed form returns NaN: the compiled pass hands the row to the numpy path,
    which names the bad entry."""
    from specsim.verifiers.lossy import SingleTokenRule

    def nan_out(p, q):
        o = q.copy()
        o[1] = np.nan
        return o

    rule = SingleTokenRule("nan", lambda p, q, x: (1.0, q), nan_out, lambda p, q: 1.0)
    p, q = _row("random", 5, 0)
    with pytest.raises(ValueError, match="divergence: a has entry nan at token 1"):
        certify(rule, p, q)


@pytest.mark.parametrize("kind", ROW_KINDS)
def test_kl_on_long_rows_compiled_equals_numpy(kind):
    """specsim.divergences.kl takes the compiled passes from 4096 entries on: the same value bit for
    bit as its numpy path, both directions, including infinite ones and subnormal ratios (where
    the compiled path hands the row back to numpy)."""
    from specsim.divergences import _JIT_MIN, kl

    calls = []
    real = KL.ratio_rows

    def spy(*args):
        calls.append(1)
        return real(*args)

    for V in (_JIT_MIN - 1, _JIT_MIN, 6000):
        p, q = _row(kind, V, 9)
        for a, b in ((p, q), (q, p), ((p + q) / 2, p)):
            with _jit.disabled():
                want = kl(a, b)
            KL.ratio_rows = spy
            try:
                got = kl(a, b)
            finally:
                KL.ratio_rows = real
            assert got == want or (np.isnan(got) and np.isnan(want)), (kind, V, got, want)
        assert bool(calls) == (V >= _JIT_MIN), (V, calls)   # the compiled pass really ran (and only there)
        calls.clear()


def test_certificate_keeps_its_law_when_the_rows_were_validated_into_scratch():
    """certify validates long rows into a reusable per-thread block; a rule whose closed form returns
    the target row itself puts a view of that block in the certificate, and a later certify must
    not overwrite it (the block is reused only when no view of it is alive)."""
    from specsim.verifiers.lossy import SingleTokenRule

    rule = SingleTokenRule("emit-p", lambda p, q, x: (1.0, p), lambda p, q: p, lambda p, q: 0.0)
    p1, q1 = _row("llm", 5000, 1)
    p2, q2 = _row("random", 5000, 2)
    c1 = certify(rule, p1, q1)
    kept = c1.out.copy()
    for _ in range(3):
        certify(rule, p2, q2)
        certify(mentored(0.6), p2, q2)
    np.testing.assert_array_equal(c1.out, kept)
    np.testing.assert_allclose(c1.out, p1 / p1.sum(), rtol=1e-15)


def test_pairwise_scheme_is_numpy_sum():
    """The compiled sums that replace numpy's ``.sum()`` of a written-out row (TV and KL fields)
    reproduce it bit for bit: every length up to 4,100 and longer ones, terms over 40 binades
    of both signs (negative control: a plain running sum differs from numpy's on many lengths)."""
    from specsim import _kl_kernels as KL

    rng = np.random.default_rng(11)
    plain_differs = 0
    for n in [*range(0, 4101), 8191, 8192, 8193, 65537, 151_936]:
        a = rng.standard_normal(n) * np.exp(rng.standard_normal(n) * 5)
        assert KL.row_sum(a) == a.sum(), n
        plain_differs += n > 8 and float(np.cumsum(a)[-1]) != a.sum()
    assert plain_differs > 1000


def test_ensemble_passes_are_numpy_bit_for_bit():
    """The geometric ensemble's compiled passes (products with their sum, normalisation with
    sum min(q, nu)) give numpy's rows and sums bit for bit, on lengths around the pairwise
    blocks' edges and at V = 151,936."""
    from specsim.verifiers import _clip_kernels as K

    rng = np.random.default_rng(12)
    for n in [1, 7, 8, 9, 127, 128, 129, 1000, 4097, 151_936]:
        g, p, q = (rng.random(n) * np.exp(rng.standard_normal(n) * 5) for _ in range(3))
        q[::3] = g[::3]                             # ties of min(q, g / t)
        mine, ref = g.copy(), g * p
        assert K.mul_sum(mine, p) == ref.sum(), n
        np.testing.assert_array_equal(mine, ref)
        t = float(ref.sum())
        mine, ref = ref.copy(), ref / t
        assert K.div_min_sum(mine, t, q) == np.minimum(q, ref).sum(), n
        np.testing.assert_array_equal(mine, ref)


def test_add_scaled_is_numpy_bit_for_bit():
    """res += p * c compiled equals numpy's multiply then add (no fused multiply-add)."""
    from specsim.verifiers import _clip_kernels as K

    rng = np.random.default_rng(13)
    differs_if_fused = 0
    for n in (1, 9, 1000, 151_936):
        res, p = rng.random(n), rng.random(n)
        c = float(rng.random())
        ref = res + np.multiply(p, c)
        np.testing.assert_array_equal(K.add_scaled(res.copy(), p, c), ref)
        from fractions import Fraction              # a fused multiply-add rounds once: exactly this
        differs_if_fused += sum(float(Fraction(a) * Fraction(c) + Fraction(b)) != r
                                for a, b, r in zip(p[:300].tolist(), res[:300].tolist(), ref[:300].tolist()))
    assert differs_if_fused > 0                 # the check can tell a fused multiply-add apart


@pytest.mark.parametrize("kind", ROW_KINDS)
def test_lenience_pair_compiled_is_numpy_bit_for_bit(kind):
    """lenience's compiled closed pair (sums from one pass, the law from a second, no term rows)
    gives the numpy chain's law and beta bit for bit."""
    from specsim._validate import as_pair as _validated

    for V in (5000, 40_001):
        try:
            p, q = _validated(*_row(kind, V, 4))
        except ValueError:
            continue
        for l in (0.05, 0.8, 1.0):
            rule = lenience(l).rule
            out, beta = rule.out_beta(p, q)
            with _jit.disabled():
                ref_out, ref_beta = rule.out_beta(p, q)
            np.testing.assert_array_equal(out, ref_out)
            assert beta == ref_beta


def test_cactus_suffix_sums_are_numpys():
    """The compiled per-threshold sums of Cactus's law are np.unique / np.bincount / reversed
    cumsum bit for bit (ranks with repeats and zeros, weights over 10 binades)."""
    rng = np.random.default_rng(14)
    for _ in range(500):
        k = int(rng.integers(1, 40))
        j = rng.integers(0, 6, k).astype(np.int64)
        w, ca = rng.random(k) * np.exp(rng.standard_normal(k) * 5), rng.random(k)
        bins, inv = np.unique(j, return_inverse=True)
        Wc, W = np.bincount(inv, weights=w * ca), np.bincount(inv, weights=w)
        first = int(np.searchsorted(bins, 1))
        got = K.cactus_suffix_sums(j, w * ca, w)
        np.testing.assert_array_equal(got[0], bins)
        assert got[1] == first
        np.testing.assert_array_equal(got[2], np.append(np.cumsum(Wc[first:][::-1])[::-1], 0.0))
        np.testing.assert_array_equal(got[3], np.append(np.cumsum(W[first:][::-1])[::-1], 0.0))
