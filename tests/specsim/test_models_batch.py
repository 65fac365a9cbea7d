"""Level-at-once rows (``Model(batch=...)``, ``Model.rows``) against the per-row reference path.

The per-row path (one ``fn`` call and one validation per prefix) is the reference: every model
with a ``batch`` callable must give the same rows, bitwise, and the same ``ValueError`` (naming
the prefix) for a bad row.  The exact engine reads every row from ``Model.table``, so a
certificate built from batched tables must equal the one built row by row.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from specsim.exact import check_lossless, output_law
from specsim.models import (Model, all_prefixes, iid, markov, mix, prefix_index, random_model, temperature,
                            top_k)
from specsim.verifiers import block, hsd_released, token


def per_row(model: Model) -> Model:
    """The same model with its batch callable dropped: every row through ``fn`` (the reference)."""
    return Model(model._fn, model.V, model.name, model.atol)


def old_temperature_row(p, T):  # the pre-batch 1-D arithmetic of specsim.models.temperature
    if T == 0:
        out = np.zeros(p.size)
        out[int(np.argmax(p))] = 1.0
        return out
    with np.errstate(divide="ignore"):
        logits = np.log(p) / T
    logits -= logits.max()
    e = np.exp(logits)
    return e / e.sum()


def extreme_rows(V, rng):
    """Rows a model may legitimately return: one-hot, subnormal entries, near-uniform, peaked."""
    rows = [np.eye(V)[rng.integers(V)], np.full(V, 1.0 / V)]
    r = np.full(V, 5e-324)
    r[rng.integers(V)] = 1.0 - (V - 1) * 5e-324
    rows.append(r)
    g = rng.dirichlet(np.full(V, 0.05))
    rows.append(g / g.sum())
    return rows


MODELS = {
    "random generator": lambda V, s: random_model(V, s),
    "random counter": lambda V, s: random_model(V, s, stream="counter"),
    "random counter c=0.05": lambda V, s: random_model(V, s, 0.05, stream="counter"),
    "random counter c=3 depth=1": lambda V, s: random_model(V, s, 3.0, depth=1, stream="counter"),
    "random generator depth=0": lambda V, s: random_model(V, s, depth=0),
    "iid": lambda V, s: iid(np.random.default_rng(s).dirichlet(np.ones(V))),
    "markov": lambda V, s: markov(np.random.default_rng(s).dirichlet(np.ones(V)),
                                  np.random.default_rng(s + 1).dirichlet(np.ones(V), V)),
    "mix": lambda V, s: mix(random_model(V, s, stream="counter"), random_model(V, s + 1), 0.3),
    "temperature 0.7": lambda V, s: temperature(random_model(V, s, stream="counter"), 0.7),
    "temperature 0": lambda V, s: temperature(random_model(V, s, stream="counter"), 0.0),
    "shifted": lambda V, s: random_model(V, s, stream="counter").shifted((1, 0)),
}


@pytest.mark.parametrize("kind", sorted(MODELS))
@pytest.mark.parametrize("V,L", [(2, 4), (3, 3), (5, 2)])
def test_batched_tables_equal_per_row_tables_bitwise(kind, V, L):
    m = MODELS[kind](V, 7)
    ref = per_row(MODELS[kind](V, 7))
    for k, (a, b) in enumerate(zip(m.table(L), ref.table(L))):
        assert a.shape == (V ** k, V) and np.array_equal(a, b), (kind, k)
    # after tabulation, single calls read the table; a fresh model answers row by row
    fresh = MODELS[kind](V, 7)
    for s in [(), (V - 1,), (0, V - 1, 1)[:L]]:
        assert np.array_equal(m(s), fresh(s)) and np.array_equal(m(s), m.table(L)[len(s)][prefix_index(s, V)])


def test_temperature_batch_matches_the_old_row_arithmetic():
    base = random_model(4, 3, 0.2, stream="counter")
    for T in (0.0, 0.3, 1.0, 2.5):
        ref = Model(lambda s, T=T: old_temperature_row(base(s), T), 4, "old")  # validated as before
        for a, b in zip(temperature(base, T).table(2), ref.table(2)):
            assert np.array_equal(a, b)


@given(st.integers(0, 2**70), st.integers(2, 6), st.integers(0, 3),
       st.sampled_from([0.02, 0.5, 1.0, 1.7, 40.0]), st.sampled_from([None, 0, 1, 2]))
def test_counter_stream_row_alone_equals_row_in_its_level(seed, V, k, c, depth):
    m = random_model(V, seed, c, depth, stream="counter")
    P = all_prefixes(k, V)
    level = m.rows(P)
    assert np.isfinite(level).all() and (level >= 0).all() and np.allclose(level.sum(axis=1), 1, atol=1e-15, rtol=0)
    alone = random_model(V, seed, c, depth, stream="counter")  # no table: one row at a time
    for i in np.random.default_rng(seed % 2**32).choice(len(P), size=min(len(P), 5), replace=False):
        assert np.array_equal(alone(tuple(P[i].tolist())), level[i])
    if depth is not None and k > depth:  # rows depend on the last `depth` tokens only
        ctx = P[:, k - depth:]
        same = np.all(ctx == ctx[0], axis=1)
        assert np.array_equal(level[same], np.broadcast_to(level[0], level[same].shape))


@pytest.mark.parametrize("c", [0.1, 1.0, 2.0])
def test_counter_stream_draws_dirichlet(c):
    """Entry t of a Dirichlet(c, ..., c) row over V = 5 tokens is Beta(c, 4c).  Over the 3,125
    rows of level 5 (fixed seeds, so the check is deterministic) each entry's Kolmogorov-Smirnov
    p-value against that Beta law must exceed 1e-4 (a true Dirichlet fails one of the 5 entries
    with probability <= 5e-4), for the counter stream and for the generator stream as a control.
    Negative control (power): the same test rejects the Beta law of a concentration off by a
    factor 1.5 either way."""
    from scipy import stats
    V = 5
    beta = stats.beta(c, (V - 1) * c)
    for stream in ("counter", "generator"):
        R = random_model(V, 11, c, stream=stream).table(5)[5]
        for t in range(V):
            assert stats.kstest(R[:, t], beta.cdf).pvalue > 1e-4, (stream, t)
    R = random_model(V, 11, c, stream="counter").table(5)[5]
    for wrong_c in (c / 1.5, 1.5 * c):
        assert stats.kstest(R[:, 0], stats.beta(wrong_c, (V - 1) * wrong_c).cdf).pvalue < 1e-4


def test_counter_stream_tiny_concentration_keeps_rows_valid():
    m = random_model(8, 0, 1e-3, stream="counter")
    R = m.table(3)[3]
    assert np.isfinite(R).all() and (R >= 0).all() and np.allclose(R.sum(axis=1), 1, atol=1e-15, rtol=0)
    assert (R.max(axis=1) > 0.5).mean() > 0.9  # peaked, as Dirichlet(1e-3) rows are


@pytest.mark.parametrize("verifier", [block, token, hsd_released])
@pytest.mark.parametrize("make", [lambda V, s: random_model(V, s, stream="counter"),
                                  lambda V, s: random_model(V, s, 0.1),
                                  lambda V, s: temperature(random_model(V, s, stream="counter"), 0.5)])
def test_certificates_from_batched_tables_equal_per_row_ones(verifier, make):
    V, L = 3, 3
    t, d = make(V, 1), make(V, 2)
    a = check_lossless(verifier, t, d, L)
    b = check_lossless(verifier, per_row(make(V, 1)), per_row(make(V, 2)), L)
    assert (a.lossless, a.max_abs_error, a.tv, a.block_efficiency, a.worst_sequence) == \
        (b.lossless, b.max_abs_error, b.tv, b.block_efficiency, b.worst_sequence)
    assert a.lossless == (verifier is not hsd_released)  # negative control: the lossy rule is flagged
    ctx = (2, 0)  # at a context: the cached shifted model builds its tables from the base's rows
    c1, c2 = check_lossless(verifier, t, d, L, context=ctx), check_lossless(
        verifier, per_row(make(V, 1)), per_row(make(V, 2)), L, context=ctx)
    assert (c1.max_abs_error, c1.block_efficiency) == (c2.max_abs_error, c2.block_efficiency)
    assert t.shifted(ctx) is t.shifted(ctx)


def test_output_law_matches_the_add_at_accumulation():
    """emitted[m] is accumulated with bincount on the per-draft path; np.add.at over the same
    drafts is the reference (block's prefix-shared process_law is removed to reach that path)."""
    import dataclasses

    from specsim.drafts import chain
    t, d = random_model(4, 5, 0.3, stream="counter"), random_model(4, 6, stream="counter")
    L = 3
    law = output_law(dataclasses.replace(block, process_law=None), t, d, L)
    drafts, Qx, p, q = chain().arrays(t, d, L)
    probs, dists = block.batch_law(drafts, p, q)
    code = np.zeros(len(drafts), dtype=np.int64)
    for k in range(L + 1):
        ref = np.zeros((4 ** k, 4))
        np.add.at(ref, code, (Qx * probs[:, k])[:, None] * dists[:, k])
        assert np.array_equal(law.emitted[k + 1], ref.ravel())
        if k < L:
            code = code * 4 + drafts[:, k]


def test_float32_and_torch_batches_keep_their_tolerance():
    """A float32 batch gets the float32 row-sum tolerance, as a float32 row from fn does."""
    base = random_model(4, 2, stream="counter")
    noisy = lambda P: (base.rows(P) * (1 + 3e-7)).astype(np.float32)  # sums off by ~3e-7 in float32  # noqa: E731
    m = Model(lambda s: noisy(np.array([s], dtype=np.int64).reshape(1, len(s)))[0], 4, "f32", batch=noisy)
    ref = Model(m._fn, 4, "f32")
    assert np.array_equal(m.table(2)[2], ref.table(2)[2])
    torch = pytest.importorskip("torch")
    tb = lambda P: torch.tensor(base.rows(P), dtype=torch.bfloat16)  # noqa: E731
    mt = Model(lambda s: tb(np.array([s], dtype=np.int64).reshape(1, len(s)))[0], 4, "bf16", batch=tb)
    assert np.array_equal(mt.table(2)[2], Model(mt._fn, 4, "bf16").table(2)[2])


def bad_model(V, bad_prefix, row):
    base = random_model(V, 0, stream="counter")

    def one(s):
        return row if tuple(s) == bad_prefix else base(s)

    return Model(one, V, "bad", batch=lambda P: np.array([one(tuple(p)) for p in P.tolist()]))


@pytest.mark.parametrize("row,message", [
    ([0.5, np.nan, 0.5], "non-finite entry nan at token 1"),
    ([0.7, -0.1, 0.4], "negative entry -0.1 at token 1"),
    ([0.5, 0.5, 0.5], "entries sum to 1.5"),
])
def test_bad_batch_row_names_the_prefix_like_the_per_row_path(row, message):
    with pytest.raises(ValueError, match=r"bad at prefix \(1, 2\): " + message) as batched:
        bad_model(3, (1, 2), np.array(row)).table(2)
    with pytest.raises(ValueError) as single:
        per_row(bad_model(3, (1, 2), np.array(row))).table(2)
    assert str(batched.value) == str(single.value)


def test_bad_batch_shapes_and_prefix_arrays_are_named():
    m = Model(lambda s: [0.5, 0.5], 2, "m", batch=lambda P: np.full((P.shape[0], 3), 1 / 3))
    with pytest.raises(ValueError, match=r"m: batch returned rows of shape \(1, 3\) for 1 prefixes of length 0"):
        m.table(1)
    with pytest.raises(TypeError, match="m: batch must be callable"):
        Model(lambda s: [0.5, 0.5], 2, "m", batch=3)
    r = random_model(3, 0, stream="counter")
    with pytest.raises(ValueError, match=r"prefixes: token id 3 at \(1, 0\) is outside 0..2"):
        r.rows([[0], [3]])
    with pytest.raises(ValueError, match="prefixes: expected a 2-D array"):
        r.rows([0, 1])
    with pytest.raises(TypeError, match="prefixes: expected integer token ids"):
        r.rows([[0.5]])
    with pytest.raises(ValueError, match="stream must be 'generator' or 'counter'"):
        random_model(3, 0, stream="philox")
    assert r.rows(np.zeros((0, 2), dtype=int)).shape == (0, 3)


def test_rows_of_top_k_keep_the_per_row_path():
    """A model without a batch callable (top_k) still tabulates row by row, unchanged."""
    m = top_k(random_model(4, 1, stream="counter"), 2)
    tab = m.table(2)
    for i, s in enumerate(all_prefixes(2, 4).tolist()):
        assert np.array_equal(tab[2][i], m(tuple(s)))
    assert np.array_equal(m.rows([[1, 3], [0, 0]]), tab[2][[7, 0]])


def test_generator_stream_unchanged_for_existing_seeds():
    """The default stream still draws each row from default_rng([seed, len(ctx), *ctx])."""
    m = random_model(5, 9, 0.4)
    for s in [(), (3,), (1, 4, 0)]:
        r = np.random.default_rng([9, len(s), *s]).dirichlet(np.full(5, 0.4))
        assert np.array_equal(m.table(3)[len(s)][prefix_index(s, 5)], r / r.sum())


def test_shifted_cache_is_bounded_and_keeps_recent_contexts():
    from specsim.models import SHIFTED_CACHE
    m = random_model(3, 0, stream="counter")
    first = m.shifted((0,))
    for c in range(1, SHIFTED_CACHE + 3):
        m.shifted((c % 3, c // 3))
        assert len(m._shifted) <= SHIFTED_CACHE
    assert m.shifted((0,)) is not first and m.shifted((0,)) is m.shifted((0,))
    assert np.array_equal(first.table(2)[2], m.shifted((0,)).table(2)[2])
