"""certify's shared-work path (issue 27) against the previous implementation, kept here as the
reference: two separate KL passes, and full frontier points (with their own KL of q and the law
pi materialised) for every divergence."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from specsim import _jit
from lp.certificates import _support_note, certify
from lp.frontier import _frontier_beta, _frontier_point
from specsim._validate import as_pair
from specsim.divergences import kl, kl_pair
from specsim.testing.strategies import distribution_pairs
from specsim.verifiers._clip_family import SortedClipFamily
from tests.lp.certify_reference import certify_reference
from tests.lp.frontier_checks import FAMILY_RULES, assert_frontier_close, budget_rounding
from specsim.verifiers.lossy import (cactus, consultant_standin, ensemble, fuzzy, lenience, margin_standin,
                                     mentored, topk_accept, typical)

RULES = (typical(), lenience(0.7), topk_accept(3), fuzzy(0.3, "js_released"), cactus(0.05), cactus(0.5),
         mentored(0.6), ensemble(0.6, "geometric"), margin_standin(0.5), consultant_standin(1e-4))


def _certify_reference(rule, p, q):
    """The certificate as computed before issue 27 (fields that certify returns)."""
    ref = certify_reference(rule, p, q)
    return dict(ref, infinite=_support_note(ref["out"], as_pair(p, q)[0]))


def _same(c, ref, p, q):
    """Laws made from the clip family (mentored, Cactus) agree to rounding with numba on (its
    grouped family sums in another order), bit for bit otherwise; KL frontiers through their
    conditioning (tests/lp/frontier_checks.py)."""
    if c.rule in FAMILY_RULES:
        np.testing.assert_allclose(c.out, ref["out"], rtol=1e-13, atol=1e-300)
    else:
        np.testing.assert_array_equal(c.out, ref["out"])
    p, q = as_pair(p, q)
    assert c.beta == ref["beta"] or c.rule in FAMILY_RULES and abs(c.beta - ref["beta"]) <= budget_rounding(p, 0.0)
    assert c.infinite == ref["infinite"]
    for f in ("kl_out_p", "kl_p_out", "tv"):
        got, want = c.__dict__[f], ref[f]
        assert (got == want == np.inf) or abs(got - want) <= 1e-13 * max(1.0, want) + budget_rounding(p, 0.0), \
            (f, got, want)
    assert abs(c.frontier_tv - ref["frontier_tv"]) <= 1e-10
    for f, kind, eps in (("frontier_kl", "kl", c.kl_out_p), ("frontier_kl_reverse", "kl_reverse", c.kl_p_out)):
        assert abs(c.__dict__[f] - ref[f]) <= 1e-10 or np.array_equal(c.out, q) or \
            assert_frontier_close(c.__dict__[f], ref[f], p, q, eps, kind, f) is None


def _extreme(kind: str, V: int, seed: int):
    rng = np.random.default_rng(seed)
    p, q = rng.dirichlet(np.full(V, 0.3)), rng.dirichlet(np.full(V, 0.3))
    if kind == "zeros":
        p[: V // 4] = 0.0
        q[V // 4: V // 2] = 0.0
    elif kind == "subnormal":
        p[: V // 5] = 5e-324 * rng.integers(1, 9, V // 5)
        q[V // 5: 2 * V // 5] = 5e-320
    elif kind == "near-one-hot":
        q = q * 2.0 ** -40
        q[0] = 1.0 - 2.0 ** -40
    elif kind == "tied":
        q[: V // 2] = 2.0 * p[: V // 2]
    elif kind == "equal":
        q = p.copy()
    elif kind == "llm":
        z = 3 * rng.standard_normal(V)
        p, q = np.exp(z - z.max()), np.exp(z + rng.standard_normal(V) - z.max())
    return p / p.sum(), q / q.sum()


@pytest.mark.parametrize("kind", ["random", "zeros", "subnormal", "near-one-hot", "tied", "equal", "llm"])
def test_certify_equals_reference_on_extreme_rows(kind):
    for V, seed in ((5, 0), (60, 1), (4000, 2)):
        p, q = _extreme(kind, V, seed)
        for rule in RULES:
            try:
                ref = _certify_reference(rule, p, q)
            except ValueError as err:                     # q/p overflows: both refuse the row
                with pytest.raises(ValueError, match=str(err).split(" (")[0]):
                    certify(rule, p, q)
                continue
            _same(certify(rule, p, q), ref, p, q)


def test_certify_equals_reference_at_V_151936():
    p, q = _extreme("llm", 151_936, 3)
    for rule in (typical(), mentored(0.6), cactus(0.05), fuzzy(0.3, "js_released")):
        _same(certify(rule, p, q), _certify_reference(rule, p, q), p, q)


@settings(max_examples=30, deadline=None)
@given(distribution_pairs(st.integers(2, 40)), st.floats(0.0, 3.0))
def test_frontier_beta_equals_frontier_point(pq, eps):
    p, q = pq
    fam = SortedClipFamily(p, q)
    for kind in ("tv", "kl", "kl_reverse"):
        assert abs(_frontier_beta(p, q, eps, kind, fam) - _frontier_point(p, q, eps, kind, fam).beta) <= 1e-10


@settings(max_examples=50, deadline=None)
@given(distribution_pairs(st.integers(2, 40)))
def test_kl_pair_equals_two_kl_calls(pq):
    p, q = pq
    ab, ba = kl_pair(p, q)
    for got, want in ((ab, kl(p, q)), (ba, kl(q, p))):
        assert (got == want == np.inf) or abs(got - want) <= 1e-13 * max(1.0, want)


@settings(max_examples=40, deadline=None)
@given(st.integers(4096, 9000), st.sampled_from(["spread", "ties", "near-ties", "inf-zero"]), st.integers(0, 2 ** 32 - 1))
def test_packed_key_argsort_orders_like_argsort(n, kind, seed):
    """The ClipFamily order (int64 keys with the token id in the low bits) equals np.argsort's up to
    ties, including values that agree above the id bits (repaired by the stable pass)."""
    from specsim.verifiers._clip_family import _argsort_nonneg

    rng = np.random.default_rng(seed)
    r = rng.random(n) * 10.0 ** float(rng.integers(-300, 300))
    if kind == "ties":
        r = np.round(rng.random(n), 2)
    elif kind == "near-ties":
        r = 1.0 + rng.integers(0, 50, n) * 2.0 ** -52
    elif kind == "inf-zero":
        r[rng.random(n) < 0.2] = np.inf
        r[rng.random(n) < 0.1] = 0.0
        r[:5], r[5:10] = -0.0, 5e-324
    o = _argsort_nonneg(r)
    assert o.dtype == np.int64 and np.array_equal(np.sort(o), np.arange(n))
    assert np.array_equal(r[o], r[np.argsort(r)])


def _log_ratio_reference(a, b):
    """The previous _log_ratio: log1p gathered on the near entries and scattered back."""
    lr = np.divide(a, b)
    near = (lr > 0.5) & (lr < 2.0)
    np.log(lr, out=lr)
    if near.any():
        lr[near] = np.log1p((a[near] - b[near]) / b[near])
    return lr


@pytest.mark.parametrize("kind", ["random", "subnormal", "near-one-hot", "tied", "equal", "llm"])
def test_log_ratio_select_is_bit_identical_to_gather(kind):
    from specsim.divergences import _log_ratio

    for V, seed in ((7, 0), (3000, 1)):
        p, q = _extreme(kind, V, seed)
        keep = (p > 0) & (q > 0)
        a, b = p[keep], q[keep]
        with np.errstate(all="ignore"):
            got, want = _log_ratio(a, b), _log_ratio_reference(a, b)
        np.testing.assert_array_equal(got, want)


def _cactus_out_reference(p, q, delta):
    """Cactus's closed form before issue 27: bincounts over the ratio ranks, scattered by the order."""
    from specsim.verifiers.lossy import _cactus_h

    h, c = _cactus_h(p, delta)
    acc = np.minimum(q, h)
    rho = q - acc
    act = np.flatnonzero(rho > 0)
    fam = SortedClipFamily(p, q)
    ca, ra = c[act], rho[act]
    j = np.searchsorted(fam.r, ca, side="left")
    own = np.maximum(ca * p[act] - q[act], 0.0)
    w = ra / np.maximum(ca * fam.Pc[j] - fam.Qc[j] - own, ra)
    m = fam.r.size
    Wc = np.cumsum(np.bincount(j, weights=w * ca, minlength=m + 1)[::-1])[::-1]
    W = np.cumsum(np.bincount(j, weights=w, minlength=m + 1)[::-1])[::-1]
    G = np.zeros(p.size)
    G[fam.idx] = np.maximum(fam.ps * Wc[1:] - fam.qs * W[1:], 0.0)
    G[act] -= w * own
    np.maximum(G, 0.0, out=G)
    return G + acc


@pytest.mark.parametrize("kind", ["random", "zeros", "subnormal", "near-one-hot", "tied", "equal", "llm"])
def test_cactus_thresholds_in_token_order_equal_rank_bincounts(kind):
    """Few active drafts (counting thresholds) and many (searchsorted): bit-identical to the rank path."""
    for V, seed in ((5, 0), (60, 1), (4000, 2)):
        p, q = as_pair(*_extreme(kind, V, seed))
        for delta in (0.0, 0.05, 0.5, 4.0):
            rule = cactus(delta).rule
            try:
                want = _cactus_out_reference(p, q, delta)
            except ValueError as err:                     # q/p overflows: both refuse the row
                with pytest.raises(ValueError, match=str(err).split(" (")[0]):
                    rule.out_beta(p, q)
                continue
            with _jit.disabled():                           # the same family: bit for bit
                got, beta = rule.out_beta(p, q)
            np.testing.assert_array_equal(got, want)
            assert beta == rule.closed_beta(p, q)
            fast, beta_fast = rule.out_beta(p, q)             # the grouped family: to rounding
            np.testing.assert_allclose(fast, want, rtol=1e-13, atol=1e-300)
            assert beta_fast == beta


def test_cactus_many_active_drafts_take_the_searchsorted_path():
    p, q = as_pair(*_extreme("random", 4000, 5))
    from specsim.verifiers.lossy import _cactus_h
    assert np.count_nonzero(q > _cactus_h(p, 0.05)[0]) > 16         # the case the test is for
    with _jit.disabled():
        np.testing.assert_array_equal(cactus(0.05).rule.out_beta(p, q)[0], _cactus_out_reference(p, q, 0.05))
    np.testing.assert_allclose(cactus(0.05).rule.out_beta(p, q)[0], _cactus_out_reference(p, q, 0.05),
                               rtol=1e-13, atol=1e-300)


def test_clip_family_spare_rows():
    """Per-family rows: the same row for the same name, filled once; beyond the spares, fresh arrays."""
    p, q = as_pair(*_extreme("random", 50, 0))
    fam = SortedClipFamily(p, q)
    rows = [fam.spare_row(f"x{i}", 10) for i in range(SortedClipFamily._SPARE + 2)]
    assert all(fresh for _, fresh in rows)
    again, fresh = fam.spare_row("x0", 10)
    assert again is rows[0][0] and not fresh
    assert not any(np.shares_memory(rows[i][0], rows[k][0]) for i in range(len(rows)) for k in range(i))
    fam2 = SortedClipFamily(p, q)
    for kind in ("kl", "kl_reverse", "tv"):
        first = fam2.mid(kind).copy()
        np.testing.assert_array_equal(fam2.mid(kind), first)
        np.testing.assert_array_equal(SortedClipFamily(p, q).mid(kind), first)


@settings(max_examples=15, deadline=None)
@given(st.integers(4096, 6000), st.sampled_from(["near-ties", "spread", "zeros"]), st.integers(0, 2 ** 32 - 1))
def test_clip_family_checks_its_order_on_the_sorted_ratios(n, kind, seed):
    """The family sorts packed keys without the sorted-values pass and repairs inversions among
    ratios tied above the id bits on its own sorted q/p: the rows stay consistent and sorted."""
    rng = np.random.default_rng(seed)
    p = rng.random(n) + 0.5
    if kind == "near-ties":                                # ratios 1 + k 2^-52: tied above the id bits
        q = p * (1.0 + rng.integers(0, 50, n) * 2.0 ** -52)
    else:
        q = rng.random(n) * 10.0 ** float(rng.integers(-5, 5))
        if kind == "zeros":
            p[rng.random(n) < 0.1] = 0.0
    fam = SortedClipFamily(p, q)
    m = int(np.count_nonzero(p > 0))
    assert fam.idx.size == m and np.array_equal(np.sort(fam.idx), np.flatnonzero(p > 0))
    np.testing.assert_array_equal(fam.ps, p[fam.idx])
    np.testing.assert_array_equal(fam.qs, q[fam.idx])
    np.testing.assert_array_equal(fam.r, q[fam.idx] / p[fam.idx])
    assert np.all(fam.r[1:] >= fam.r[:-1])
    np.testing.assert_array_equal(fam.r, np.sort(q[p > 0] / p[p > 0]))


@pytest.mark.parametrize("kind", ["random", "zeros", "subnormal", "near-one-hot", "tied", "equal", "llm"])
def test_certify_of_a_rule_that_emits_q_or_p(kind):
    """FSD far above (out = q: beta* = 1 without a clip search) and at 0 (out = p unless q = p)."""
    for V, seed in ((5, 0), (60, 1), (4000, 2)):
        p, q = _extreme(kind, V, seed)
        for rule in (fuzzy(1e9, "kl_reverse"), fuzzy(1e9, "tv"), fuzzy(0.0, "tv")):
            try:
                ref = _certify_reference(rule, p, q)
            except ValueError as err:
                with pytest.raises(ValueError, match=str(err).split(" (")[0]):
                    certify(rule, p, q)
                continue
            _same(certify(rule, p, q), ref, p, q)
