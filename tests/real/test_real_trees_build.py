"""build_trees on the tiny random Llama: generated-text contexts, fake-quantised drafters, workers,
shards and resume (issue 23).  Nothing is downloaded; each build takes a few seconds."""
import json

import numpy as np
import pytest

from specsim import real, real_trees

torch = pytest.importorskip("torch")

PROMPTS = [[3, 1, 4, 1, 5], [2, 7, 1, 8], [6, 6, 2]]
KW = dict(prompts=PROMPTS, positions=(1, 3), drafts=("temperature:0.5", "quant:3"), processes=("chain", "iid:2"),
          L=2, samples=1, tail=0.0, progress=False, context_source="generated")


def _arrays(manifest_path):
    m = json.loads(manifest_path.read_text())
    with np.load(manifest_path.parent / m["data_file"]) as z:
        return m, {k: z[k] for k in z.files}


def test_generated_contexts_are_the_targets_seeded_continuations(tmp_path, tiny_llama):
    path = real_trees.build_trees(tmp_path / "g", model=tiny_llama, seed=5, **KW)
    m, a = _arrays(path)
    assert m["context_source"] == "generated" and m["positions"] == [1, 3]
    # independent: full forward passes (no cache), prompt i's stream is child i of SeedSequence(5)
    for i, prompt in enumerate(PROMPTS):
        rng = np.random.default_rng(np.random.SeedSequence(5).spawn(len(PROMPTS))[i])
        ids = list(prompt)
        for _ in range(3):
            with torch.no_grad():
                logits = tiny_llama.model(torch.tensor([ids])).logits[0, -1].double()
            p = torch.softmax(logits, -1).numpy()
            ids.append(int(rng.choice(p.size, p=p / p.sum())))
        assert m["continuations"][i] == ids[len(prompt):]
        for k in (1, 3):
            ci = [j for j in range(a["context_prompt"].size)
                  if a["context_prompt"][j] == i and a["context_position"][j] == len(prompt) + k]
            assert len(ci) == 1
            lo, hi = a["context_offsets"][ci[0]], a["context_offsets"][ci[0] + 1]
            assert a["contexts"][lo:hi].tolist() == ids[:len(prompt) + k]
    ds = real_trees.load_trees(path)
    assert len(ds) == len(PROMPTS) * 2 * 2 * 2


def test_quantised_drafter_rows_are_the_quantised_models_rows(tmp_path, tiny_llama):
    path = real_trees.build_trees(tmp_path / "q", model=tiny_llama, **KW)
    ds = real_trees.load_trees(path)
    qm = real_trees.fake_quantize(tiny_llama.model, 3, 32)
    a = ds.arrays
    checked = 0
    for rec in ds:
        if rec.draft != "quant:3":
            continue
        ci = [j for j in range(a["context_prompt"].size) if a["context_prompt"][j] == rec.prompt
              and a["context_position"][j] == rec.position][0]
        context = a["contexts"][a["context_offsets"][ci]:a["context_offsets"][ci + 1]].tolist()
        t = rec.tree
        for u in range(t.num_nodes):
            if not t.children[u]:
                continue
            path_ids, v = [], u
            while v > 0:
                path_ids.append(int(rec.vocab[t.tokens[v]]))
                v = t.parent[v]
            with torch.no_grad():
                q = torch.softmax(qm(torch.tensor([context + path_ids[::-1]])).logits[0, -1].double(), -1).numpy()
            np.testing.assert_allclose(t.q[u][np.searchsorted(rec.vocab, np.arange(40))], q, atol=1e-6)
            checked += 1
    assert checked > 0


def test_a_quantised_drafter_equal_to_the_target_is_refused(tmp_path, tiny_llama):
    # a target already on the 3-bit grid of groups of 8 (as SmolLM2's Q4_1 file is on the 4-bit grid
    # of groups of 32): quant:3 with groups of 8 gives it back exactly, so q = p; named before drafting
    on_grid = real.LoadedModel(real_trees.fake_quantize(tiny_llama.model, 3, 8), None, tiny_llama.path, 2, 40)
    assert real_trees._same_weights(on_grid.model, real_trees.fake_quantize(on_grid.model, 3, 8))
    with pytest.raises(ValueError, match=r"'quant:3' with quant_group=8 reproduces the target's weights"):
        real_trees.build_trees(tmp_path / "x", model=on_grid, quant_group=8, **KW)
    assert not (tmp_path / "x").exists()
    # the same target at another group size, or 2 bits, is a different drafter and builds
    for bits, group in ((3, 16), (2, 8)):
        assert not real_trees._same_weights(on_grid.model, real_trees.fake_quantize(on_grid.model, bits, group))


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_fake_quantisation_is_round_to_nearest_on_a_group_grid(tiny_llama, bits):
    qm = real_trees.fake_quantize(tiny_llama.model, bits, group=8)
    for (name, w), (_, wq) in zip(tiny_llama.model.model.layers.named_parameters(),
                                  qm.model.layers.named_parameters()):
        w, wq = w.detach().double().numpy(), wq.detach().double().numpy()
        if w.ndim != 2:
            np.testing.assert_array_equal(w, wq)  # norms are not quantised
            continue
        for g in range(0, w.shape[1], 8):
            x, xq = w[:, g:g + 8], wq[:, g:g + 8]
            s = (x.max(1) - x.min(1)) / (2 ** bits - 1)
            assert np.all(np.abs(x - xq) <= s[:, None] / 2 + 1e-6)  # nearest grid point
            k = (xq - x.min(1)[:, None]) / np.where(s > 0, s, 1)[:, None]
            np.testing.assert_allclose(k, np.round(k), atol=1e-4)  # on the grid min + s * integer
    assert not np.array_equal(tiny_llama.model.lm_head.weight.detach().numpy(), np.zeros(1))
    np.testing.assert_array_equal(tiny_llama.model.lm_head.weight.detach().numpy(), qm.lm_head.weight.detach().numpy())


def test_bad_drafter_and_workers_are_named(tmp_path, tiny_llama):
    for spec in ("quant:1", "quant:9", "quant:2.5", "early_exit:3"):
        with pytest.raises(ValueError, match="draft"):
            real_trees.build_trees(tmp_path / "x", model=tiny_llama, **{**KW, "drafts": (spec,)})
    for bad, err in (("2", TypeError), (2.0, TypeError), (True, TypeError), (0, ValueError), (-3, ValueError)):
        with pytest.raises(err, match="workers"):
            real_trees.build_trees(tmp_path / "x", model=tiny_llama, workers=bad, **KW)
    with pytest.raises(ValueError, match="context_source"):
        real_trees.build_trees(tmp_path / "x", model=tiny_llama, **{**KW, "context_source": "sampled"})
    with pytest.raises(ValueError, match="generated tokens"):
        real_trees.build_trees(tmp_path / "x", model=tiny_llama, **{**KW, "positions": (-1,)})
    with pytest.raises(ValueError, match="bits"):
        real_trees.fake_quantize(tiny_llama.model, 9)
    with pytest.raises(ValueError, match="quant:b"):
        list(real.next_token_pairs([[1, 2, 3]], drafts=("quant:4",), model=tiny_llama))


def test_one_and_two_workers_give_the_same_dataset(tmp_path, tiny_llama):
    joblib = pytest.importorskip("joblib")
    one = real_trees.build_trees(tmp_path / "one", model=tiny_llama, workers=1, **KW)
    # two worker processes through joblib; its forking backend here (loky, the default, starts
    # fresh interpreters that import torch: ~50 s on a loaded 2-core machine for the same result)
    with joblib.parallel_config(backend="multiprocessing"):
        two = real_trees.build_trees(tmp_path / "two", model=tiny_llama, workers=2, **KW)
    calls = []

    def my_map(f, it):  # a map-like callable (a cluster's map would go here)
        calls.append(f.__name__)
        return map(f, list(it)[::-1])  # in another order

    three = real_trees.build_trees(tmp_path / "three", model=tiny_llama, workers=my_map, **KW)
    hashes = {json.loads(p.read_text())["data_sha256"] for p in (one, two, three)}
    assert len(hashes) == 1
    assert calls == ["_continuation_task", "_context_task"]
    assert not (tmp_path / "one" / "shards").exists()


def test_a_killed_build_resumes_without_redoing_finished_contexts(tmp_path, tiny_llama):
    ref = real_trees.build_trees(tmp_path / "ref", model=tiny_llama, **KW)
    out = tmp_path / "cut"

    class Killed(Exception):
        pass

    def dies_after_two(f, it):
        for n, job in enumerate(it):
            if f.__name__ == "_context_task" and n == 2:
                raise Killed  # as a kill between two contexts
            yield f(job)

    with pytest.raises(Killed):
        real_trees.build_trees(out, model=tiny_llama, workers=dies_after_two, **KW)
    assert sorted(p.name for p in (out / "shards").glob("ctx-*.npz")) == ["ctx-00000.npz", "ctx-00001.npz"]
    (out / "shards" / "ctx-00002.part.npz").write_bytes(b"cut mid-write")
    done = []

    def counting(f, it):
        jobs = list(it)
        done.append((f.__name__, len(jobs)))
        return map(f, jobs)

    path = real_trees.build_trees(out, model=tiny_llama, workers=counting, **KW)
    n_ctx = len(PROMPTS) * 2
    assert done == [("_continuation_task", 0), ("_context_task", n_ctx - 2)]
    m = json.loads(path.read_text())
    assert m["resumed_contexts"] == 2 and m["data_sha256"] == json.loads(ref.read_text())["data_sha256"]


def test_a_shard_from_another_build_is_refused(tmp_path, tiny_llama):
    out = tmp_path / "mixed"

    def dies(f, it):
        for n, job in enumerate(it):
            if f.__name__ == "_context_task" and n == 1:
                raise RuntimeError("killed")
            yield f(job)

    with pytest.raises(RuntimeError):
        real_trees.build_trees(out, model=tiny_llama, workers=dies, **KW)
    with pytest.raises(ValueError, match="another build.*settings that differ: seed\\)"):
        real_trees.build_trees(out, model=tiny_llama, **{**KW, "seed": 1})
    # a shard copied in from elsewhere (its own key) is refused too
    (out / "shards" / "build_key").unlink()
    np.savez(out / "shards" / "ctx-00001.npz", key=np.asarray("0" * 64))
    with pytest.raises(ValueError, match="another build"):
        real_trees.build_trees(out, model=tiny_llama, **KW)


def test_a_model_that_ran_with_hidden_states_pickles_for_workers(tiny_llama):
    """Workers in other processes receive the LoadedModel pickled; after an early-exit draft the
    model carries transformers' output-capturing hooks (local functions), so it travels as config
    + weights and computes the same logits."""
    import pickle

    import torch

    list(real.next_token_pairs([[1, 2, 3]], drafts=("early_exit:1",), model=tiny_llama))
    copy = pickle.loads(pickle.dumps(tiny_llama))
    x = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        assert torch.equal(copy.model(x).logits, tiny_llama.model(x).logits)
    assert (copy.path, copy.n_layers, copy.V) == (tiny_llama.path, tiny_llama.n_layers, tiny_llama.V)


class _ToyRows:
    """The row source of ``_grow_in_step`` over a toy model pair: rows by prefix, with the calls
    and the prefixes asked in each call recorded."""

    def __init__(self, target, drafts):
        self.target, self.drafts, self.cache, self.calls = target, drafts, {}, []

    def ensure(self, prefixes, drafts=True):
        new = sorted({tuple(x) for x in prefixes} - set(self.cache))
        self.calls.append(len(new))
        for x in new:
            self.cache[x] = (self.target(x), {d: m(x) for d, m in self.drafts.items()})


def test_trees_grown_in_step_are_the_trees_grown_one_by_one():
    # the in-step driver answers many trees' row requests together; each tree must still be the
    # one its own process and rng draw alone (the toy rows make every prefix's row distinct)
    from specsim.models import random_model

    target, drafts = random_model(5, 1), {"a": random_model(5, 2), "b": random_model(5, 3)}
    specs = ["chain", "iid:2", "iid:4", "delayed:1,2", "swor:3"]
    jobs = [(d, real_trees._grower(s), np.random.default_rng([9, k])) for k, (d, s) in
            enumerate((d, s) for d in drafts for s in specs)]
    rows = _ToyRows(target, drafts)
    got = real_trees._grow_in_step(rows, jobs, 3)
    for k, (d, s) in enumerate((d, s) for d in drafts for s in specs):
        process = real_trees._grower(s)
        one = next(iter(process.grow(3, lambda keys, depth: [drafts[d](x) for x in keys],
                                     process.sampler(np.random.default_rng([9, k])))))
        tokens, parent, prefixes, _, draws = one[1], one[2], one[3], one[4], one[5]
        assert got[k] == (tokens, parent, prefixes, draws)
        assert all(x in rows.cache for x in prefixes)  # leaves' rows included
    assert len(rows.calls) <= 3 + 1 + 1  # one call per level (and the leaves), not one per tree and level


def test_a_model_file_with_another_hash_is_refused(tmp_path, tiny_llama):
    with pytest.raises(ValueError, match=f"has SHA-256 {tiny_llama.sha256}, not the expected {'0' * 64}"):
        real_trees.build_trees(tmp_path / "h", model=tiny_llama, model_sha256="0" * 64, **KW)
    with pytest.raises(ValueError, match="model_sha256 must be 64 lower-case hex digits"):
        real_trees.build_trees(tmp_path / "h", model=tiny_llama, model_sha256="abc", **KW)
    assert not (tmp_path / "h").exists()  # refused before anything is written
    path = real_trees.build_trees(tmp_path / "ok", model=tiny_llama, model_sha256=tiny_llama.sha256, **KW)
    assert json.loads(path.read_text())["model"]["sha256"] == tiny_llama.sha256


def _pass_rows(rng, B=6, V=300):
    """Rows of one pass: random, tied, one-hot, near-one-hot, with subnormals, float32-rounded."""
    x = rng.standard_normal((B, V)) * 4
    rows = np.exp(x - x.max(1, keepdims=True))
    rows[1] = np.repeat([3.0, 1.0, 0.0], V // 3)
    rows[2] = np.eye(1, V, 7)[0]
    rows[3] = 1e-12
    rows[3, 5] = 1.0
    rows[4, ::2] = 5e-324
    rows[5] = rows[5].astype(np.float32)
    return rows / rows.sum(1, keepdims=True)


def test_a_pass_is_checked_once_with_the_per_row_bits():
    # the pass-wide check and renormalisation against the per-row as_distribution it replaces
    from specsim._validate import as_distribution

    rng = np.random.default_rng(11)
    p, qa = _pass_rows(rng), _pass_rows(rng)
    chunk = [(k,) for k in range(p.shape[0])]
    rows = object.__new__(real_trees._Rows)
    rows.drafts = ("temperature:0.5", "early_exit:2", "topk:3")
    rows.parsed = [("temperature", 0.5), ("early_exit", 2), ("topk", 3)]
    rows.cache = {}
    rows._store(chunk, p, {"temperature:0.5": qa, "early_exit:2": p})
    for j, x in enumerate(chunk):
        pj = as_distribution(p[j])
        got_p, got_q = rows.cache[x]
        assert got_p.tobytes() == pj.tobytes()
        assert got_q["temperature:0.5"].tobytes() == as_distribution(qa[j]).tobytes()
        assert got_q["early_exit:2"].tobytes() == pj.tobytes()
        ref = as_distribution(real_trees.top_k(real_trees.iid(pj), 3)(()))
        assert got_q["topk:3"].tobytes() == ref.tobytes()
    bad = p.copy()
    bad[4, 3] = np.nan
    with pytest.raises(ValueError, match=r"target at prefix \(4,\): non-finite entry nan at token 3"):
        real_trees._Rows._checked(bad, chunk, "target")
    bad = qa.copy()
    bad[2] *= 1.5
    with pytest.raises(ValueError, match=r"draft temperature:0.5 at prefix \(2,\): entries sum to 1.5"):
        rows._store(chunk, p, {"temperature:0.5": bad, "early_exit:2": p})


def test_the_leaves_pass_skips_the_drafters_and_changes_no_byte(tmp_path, tiny_llama, monkeypatch):
    # leaves draw nothing, so their pass computes the target rows only (no second, quantised
    # model); the reference computes every drafter there too, as the build did before
    calls = []
    real_call = real_trees._Rows._call

    def counting(model, ids, past, hidden):
        if past is not None:  # a pass over drafted prefixes (not the context's own pass)
            calls.append((model is tiny_llama.model, len(ids[0])))
        return real_call(model, ids, past, hidden)

    def drafter_depths():
        depths = {n for is_target, n in calls if not is_target}
        calls.clear()
        return depths

    monkeypatch.setattr(real_trees._Rows, "_call", staticmethod(counting))
    kw = dict(KW, drafts=("temperature:0.5", "quant:3", "early_exit:1", "topk:2"), L=3, tail=0.01)
    _, fast = _arrays(real_trees.build_trees(tmp_path / "fast", model=tiny_llama, **kw))
    assert drafter_depths() == {1, 2}  # the quantised drafter never ran on the depth-3 prefixes
    ensure = real_trees._Rows.ensure
    monkeypatch.setattr(real_trees._Rows, "ensure", lambda self, prefixes, drafts=True: ensure(self, prefixes))
    _, ref = _arrays(real_trees.build_trees(tmp_path / "ref", model=tiny_llama, **kw))
    assert drafter_depths() == {1, 2, 3}  # the reference does (the check above can fail)
    assert sorted(fast) == sorted(ref)
    assert all(fast[k].dtype == ref[k].dtype and fast[k].tobytes() == ref[k].tobytes() for k in fast)
