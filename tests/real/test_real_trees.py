"""specsim.real_trees on the committed SmolLM2 draft-tree dataset (nothing is downloaded or run)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from specsim import real, real_evaluation, real_trees
from specsim.drafts import DraftTree

FAST = ["token", "block", "specinfer", "sequoia"]


@pytest.fixture(scope="module")
def ds():
    return real_trees.load_trees(real_trees.committed_trees())


@pytest.fixture(scope="module")
def evaluation(ds):
    return real_evaluation.evaluate_trees(ds, FAST, progress=False)


def test_every_stored_tree_is_a_draft_tree_of_its_process(ds):
    L = ds.manifest["L"]
    assert len(ds) == ds.manifest["n_trees"] > 0
    for rec in ds:
        assert isinstance(rec.tree, DraftTree) and rec.tree.max_depth == L
        np.testing.assert_allclose(rec.tree.p.sum(axis=1), 1.0, atol=1e-12)
        internal = [u for u in range(rec.tree.num_nodes) if rec.tree.children[u]]
        np.testing.assert_allclose(rec.tree.q[internal].sum(axis=1), 1.0, atol=1e-12)
        assert rec.process in ds.manifest["processes"] and rec.draft in ds.manifest["drafts"]


def test_tails_sum_to_the_mean_and_intervals_bracket_the_difference(evaluation):
    for (draft, process), g in evaluation.groups.items():
        for s in g.values():
            # E[tau | tree] = sum_d P(tau >= d | tree), computed separately from the outcome law
            np.testing.assert_allclose(s.per_tree, s.per_tree_tail.sum(axis=1), atol=1e-12)
            assert np.all(np.diff(s.per_tree_tail, axis=1) <= 1e-12)
        names = list(g)
        if len(names) >= 2:
            d, lo, hi = evaluation.paired(draft, process, names[0], names[1])
            assert lo <= d <= hi
            assert d == pytest.approx(g[names[0]].mean - g[names[1]].mean, abs=1e-12)


def test_specinfer_on_a_chain_is_token_verification(evaluation, ds):
    g = evaluation.groups[(ds.manifest["drafts"][0], "chain")]
    np.testing.assert_allclose(g["specinfer"].per_tree, g["token"].per_tree, atol=1e-12)
    np.testing.assert_allclose(g["sequoia"].per_tree, g["token"].per_tree, atol=1e-12)


def test_tables_print_settings_and_every_group(evaluation, ds):
    text = real_evaluation.format_evaluation(evaluation)
    assert f"L = {ds.manifest['L']}" in text and str(ds.manifest["positions"]) in text
    for draft, process in evaluation.groups:
        assert f"{draft} | {process} |" in text


def _copy(tmp_path):
    out = Path(tmp_path) / "trees"
    shutil.copytree(real_trees.committed_trees(), out)
    return out


def _edit(folder, **changes):
    m = json.loads((folder / "manifest.json").read_text())
    m.update(changes)
    (folder / "manifest.json").write_text(json.dumps(m))


def test_bad_datasets_are_named(tmp_path, ds):
    folder = _copy(tmp_path)
    _edit(folder, model={"file": "x.gguf"})
    with pytest.raises(ValueError, match="model hash"):
        real_trees.load_trees(folder)
    _edit(folder, model=ds.manifest["model"], data_sha256="0" * 64)
    with pytest.raises(ValueError, match="sha256"):
        real_trees.load_trees(folder)
    # trees that do not match the manifest's process: name the tree and the process
    procs = [f"fixed:{int(p[4:]) + 1}" if p.startswith("iid:") else p for p in ds.manifest["processes"]]
    _edit(folder, data_sha256=ds.manifest["data_sha256"], processes=procs)
    bad = real_trees.load_trees(folder)
    with pytest.raises(ValueError, match="does not draw"):
        list(bad)


def _tamper(folder, **changes):
    """Rewrite arrays of trees.npz (a callable maps an array) and fix the manifest's hash."""
    data = folder / "trees.npz"
    with np.load(data) as z:
        arrays = {k: z[k] for k in z.files}
    for k, f in changes.items():
        arrays[k] = f(arrays[k].copy())
    np.savez_compressed(data, **arrays)
    _edit(folder, data_sha256=real.file_sha256(data))


def _set(index, value):
    def f(x):
        x[index] = value
        return x
    return f


@pytest.mark.parametrize("changes, match", [
    (dict(vals=lambda v: v * 0.5), "not 1"),                                 # rows that do not sum to 1
    (dict(remainder=lambda r: r + 0.5), "remainder"),
    (dict(tree_sample=_set(0, 99)), "tree_sample out of range"),             # more samples than the manifest's
    (dict(context_prompt=_set(0, 99)), "context_prompt out of range"),
    (dict(context_position=lambda c: c + 1), "length differs from its position"),
    (dict(node_p=lambda x: x[:-1]), "node_p"),                                # shapes
    (dict(node_q=_set(0, 10 ** 6)), "node_q out of range"),
    (dict(ids=_set(0, 10 ** 6)), "token ids"),
])
def test_arrays_that_do_not_match_the_manifest_are_named(tmp_path, changes, match):
    folder = _copy(tmp_path)
    _tamper(folder, **changes)
    with pytest.raises(ValueError, match=match):
        real_trees.load_trees(folder)


def test_draws_that_are_not_the_childrens_tokens_are_named(tmp_path, ds):
    folder = _copy(tmp_path)
    _tamper(folder, draws=_set(0, int(ds.arrays["draws"][0]) ^ 1))   # the root's first draw of tree 0
    with pytest.raises(ValueError, match="tree 0: draws"):
        real_trees.load_trees(folder)[0]
    folder = _copy(tmp_path / "b")
    _edit(folder, n_rows=ds.manifest["n_rows"] + 1)
    with pytest.raises(ValueError, match="rows, the manifest says"):
        real_trees.load_trees(folder)


def test_bad_arguments(ds):
    # a process the chosen verifiers do not apply to is skipped with a note (issue 26: it stopped
    # the evaluation); one that applies to no process at all is refused (test_loader_validation.py)
    ev = real_evaluation.evaluate_trees(ds, ["gbv"], progress=False)
    fits = {p: real_evaluation._lookup("gbv").applies_to(real_trees._process(p)[0]) for p in ds.manifest["processes"]}
    assert {p for _, p in ev.skipped} == {p for p, ok in fits.items() if not ok} != set()
    assert {p for _, p in ev.groups} == {p for p, ok in fits.items() if ok} != set()
    with pytest.raises(ValueError, match="unknown verifier"):
        real_evaluation.evaluate_trees(ds, ["nope"])
    with pytest.raises(TypeError):
        real_evaluation.evaluate_trees("folder")
    fake = real.LoadedModel(None, None, Path("x.gguf"), 30, 49152)
    with pytest.raises(ValueError, match="30 layers"):
        real_trees.build_trees("/nonexistent", drafts=("early_exit:31",), model=fake)
    with pytest.raises(ValueError, match="drafting spec"):
        real_trees.build_trees("/nonexistent", processes=("tree:2",), model=fake)


def _summary(name, per_tree, tails):
    return real_evaluation.VerifierSummary(name, True, np.asarray(per_tree, float), np.asarray(tails, float))


def _planted(values: dict, n_contexts: int, samples: int, L: int = 2) -> real_evaluation.TreeEvaluation:
    """A TreeEvaluation with given per-tree values: ``values[(process, verifier)](context, sample) -> E[tau|tree]``;
    P(tau >= 1 | tree) = the value, the deeper tails 0 (so the tails sum to the value)."""
    groups, contexts, samples_of = {}, {}, {}
    keys = [(c, s) for c in range(n_contexts) for s in range(samples)]
    for (process, verifier), f in values.items():
        per = [f(c, s) for c, s in keys]
        tails = [[v] + [0.0] * (L - 1) for v in per]
        groups.setdefault(("d", process), {})[verifier] = _summary(verifier, per, tails)
        contexts[("d", process)] = [(c, -1) for c, _ in keys]
        samples_of[("d", process)] = [s for _, s in keys]
    manifest = dict(drafts=["d"], processes=sorted({p for p, _ in values}), L=L, samples=samples)
    return real_evaluation.TreeEvaluation(groups, contexts, manifest, samples_of)


def test_a_verifier_compared_with_itself_gives_zero_with_zero_width(evaluation, ds):
    draft = ds.manifest["drafts"][0]
    for c in (evaluation.compare(draft, "chain", "block", "block"),
              evaluation.compare_processes(draft, ("chain", "block"), ("chain", "block"))):
        assert (c.diff, c.lo, c.hi, c.relative) == (0.0, 0.0, 0.0, 0.0)
        assert np.all(c.tail_diff == 0) and np.all(c.tail_lo == 0) and np.all(c.tail_hi == 0)
        assert c.tail_diff.size == ds.manifest["L"]
    assert c.unit == "context" and c.n == len(set(evaluation.contexts[(draft, "chain")]))


def test_same_tree_intervals_are_the_paired_t_interval(evaluation, ds):
    draft = ds.manifest["drafts"][-1]
    g = evaluation.groups[(draft, "chain")]
    c = evaluation.compare(draft, "chain", "block", "token", cluster="tree")
    ref = stats.ttest_rel(g["block"].per_tree, g["token"].per_tree).confidence_interval(0.95)
    assert (c.lo, c.hi) == pytest.approx((ref.low, ref.high), abs=1e-12)
    assert (c.pair_lo, c.pair_hi) == (c.lo, c.hi) and c.cluster == "tree" and c.n_clusters == c.n
    assert c.unit == "tree" and c.n == g["block"].per_tree.size
    for d in range(ds.manifest["L"]):
        ref = stats.ttest_rel(g["block"].per_tree_tail[:, d], g["token"].per_tree_tail[:, d]).confidence_interval()
        assert (c.tail_lo[d], c.tail_hi[d]) == pytest.approx((ref.low, ref.high), abs=1e-12)


def test_default_intervals_are_over_prompts_with_the_tree_interval_beside(evaluation, ds):
    draft = ds.manifest["drafts"][-1]
    g = evaluation.groups[(draft, "chain")]
    c = evaluation.compare(draft, "chain", "block", "token")
    prompts = np.array([ctx[0] for ctx in evaluation.contexts[(draft, "chain")]])
    d = g["block"].per_tree - g["token"].per_tree
    per_prompt = np.array([d[prompts == k].mean() for k in np.unique(prompts)])
    ref = stats.ttest_1samp(per_prompt, 0.0).confidence_interval(0.95)
    assert c.cluster == "prompt" and c.n_clusters == len(ds.manifest["prompts"]) == per_prompt.size
    assert (c.lo, c.hi) == pytest.approx((ref.low, ref.high), abs=1e-12)
    tree = stats.ttest_rel(g["block"].per_tree, g["token"].per_tree).confidence_interval(0.95)
    assert (c.pair_lo, c.pair_hi) == pytest.approx((tree.low, tree.high), abs=1e-12)
    assert evaluation.paired(draft, "chain", "block", "token") == (c.diff, c.lo, c.hi)
    assert "6 prompts, 24 trees; tree-level [" in str(c)
    lo, hi = c.bootstrap(B=2000, seed=1)
    assert lo <= c.diff <= hi and c.lo <= lo + 1e-9 and hi <= c.hi + 1e-9  # with 6 clusters the bootstrap is narrower
    with pytest.raises(ValueError, match="cluster must be"):
        evaluation.compare(draft, "chain", "block", "token", cluster="position")
    with pytest.raises(ValueError, match="cluster must be"):
        evaluation.compare_processes(draft, ("chain", "block"), ("chain", "token"), cluster="tree")


def test_clustered_intervals_cover_and_tree_intervals_do_not_on_known_clusters():
    # d_gi = mu + a_g + e_gi with a_g ~ N(0, 1), e_gi ~ N(0, 1): G = 8 prompts of m = 12 pairs.
    # Prompt means are i.i.d. normal, so the t interval over prompts covers mu with probability exactly
    # 0.95; the interval over the 96 pairs ignores the shared a_g (the mean's variance is
    # (Var(a) + Var(e)/m) / G, not (Var(a) + Var(e)) / (G m)) and covers far less: for large G about
    # P(|Z| < 1.96 sqrt((1 + 1) / (m (1 + 1/m)))) = P(|Z| < 0.77) = 0.56.  R = 2000 seeded replicates:
    # s.d. of a 0.95 coverage is 0.0049, so the tolerance 0.015 is 3 s.d.; 0.65 is 8 s.d. above 0.56.
    rng = np.random.default_rng(20261203)
    G, m, R, mu = 8, 12, 2000, 0.3
    labels = np.repeat(np.arange(G), m)
    hit_prompt = hit_pair = 0
    for _ in range(R):
        d = mu + rng.normal(size=G)[labels] + rng.normal(size=G * m)
        c = real_evaluation.Comparison.paired("a", "b", "tree", d, np.zeros_like(d), d[:, None], np.zeros((d.size, 1)),
                                         labels, "prompt")
        hit_prompt += c.lo <= mu <= c.hi
        hit_pair += c.pair_lo <= mu <= c.pair_hi
        assert c.n_clusters == G and c.n == G * m
    assert abs(hit_prompt / R - 0.95) < 0.015
    assert hit_pair / R < 0.65


def test_process_comparisons_average_each_context_first(evaluation, ds):
    draft = ds.manifest["drafts"][0]
    c = evaluation.compare_processes(draft, ("iid:2", "specinfer"), ("chain", "token"), cluster="context")
    means = {}
    for process, name in (("iid:2", "specinfer"), ("chain", "token")):
        by = {}
        for ctx, v in zip(evaluation.contexts[(draft, process)], evaluation.groups[(draft, process)][name].per_tree):
            by.setdefault(ctx, []).append(v)
        means[process] = {ctx: np.mean(v) for ctx, v in by.items()}
    shared = sorted(means["chain"])
    xa, xb = [means["iid:2"][k] for k in shared], [means["chain"][k] for k in shared]
    ref = stats.ttest_rel(xa, xb).confidence_interval(0.95)
    assert c.n == len(shared) and c.diff == pytest.approx(np.mean(xa) - np.mean(xb), abs=1e-12)
    assert (c.lo, c.hi) == pytest.approx((ref.low, ref.high), abs=1e-12)
    assert c.relative == pytest.approx(c.diff / (np.mean(xb) + 1.0))
    by_prompt = evaluation.compare_processes(draft, ("iid:2", "specinfer"), ("chain", "token"))
    dd = np.subtract(xa, xb)
    per_prompt = [dd[[k[0] == i for k in shared]].mean() for i in sorted({k[0] for k in shared})]
    ref = stats.ttest_1samp(per_prompt, 0.0).confidence_interval(0.95)
    assert (by_prompt.lo, by_prompt.hi) == pytest.approx((ref.low, ref.high), abs=1e-12)
    assert (by_prompt.pair_lo, by_prompt.pair_hi) == pytest.approx((c.lo, c.hi), abs=1e-12)
    assert by_prompt.cluster == "prompt" and by_prompt.n_clusters == len(per_prompt) and by_prompt.n == c.n


def test_a_planted_difference_is_found_and_its_absence_is_not():
    noise = lambda c, s: 0.05 * np.sin(3.0 * c + 7.0 * s)  # deterministic, not constant
    ev = _planted({("chain", "a"): lambda c, s: 1.0 + noise(c, s), ("chain", "b"): lambda c, s: 0.9 + noise(c, s + 1),
                   ("iid:2", "a"): lambda c, s: 1.3 + noise(c + 2, s)}, n_contexts=10, samples=2)
    tree = ev.compare("d", "chain", "a", "b")
    assert tree.lo > 0 and tree.lo < 0.1 < tree.hi and tree.n == 20
    assert tree.tail_lo[0] > 0 and tree.tail_diff[1] == 0.0
    ctx = ev.compare_processes("d", ("iid:2", "a"), ("chain", "a"))
    assert ctx.lo < 0.3 < ctx.hi and ctx.lo > 0.2 and ctx.n == 10
    same = ev.compare_processes("d", ("chain", "a"), ("chain", "a"))
    assert (same.diff, same.lo, same.hi) == (0.0, 0.0, 0.0)


def test_the_oracle_depth_is_cross_fitted():
    # per context, sample 0 / sample 1: root branching 1.0 / 0.0, delayed:1,2 0.0 / 0.9.  Chosen on the
    # other sample, sample 0 takes delayed (0.9 > 0.0) and scores 0.0, sample 1 takes root (1.0 > 0.0)
    # and scores 0.0: the oracle is 0.0 against root's 0.5, where the in-sample choice would give 0.5.
    ev = _planted({("iid:2", "v"): lambda c, s: (1.0, 0.0)[s] + 0.01 * c,
                   ("delayed:1,2", "v"): lambda c, s: (0.0, 0.9)[s] + 0.01 * c}, n_contexts=4, samples=2)
    c = ev.compare_oracle("d", "v", 2)
    assert c.unit == "context" and c.n == 4
    assert c.diff == pytest.approx(-0.5) and c.mean_b == pytest.approx(0.5 + 0.015)
    _, in_sample, _ = real_evaluation.oracle_delayed(ev, "d", "v", 2)
    assert in_sample == pytest.approx(0.5 + 0.015)
    # a depth that is better on every tree is always chosen
    better = _planted({("iid:2", "v"): lambda c, s: 1.0 + 0.1 * s, ("delayed:1,2", "v"): lambda c, s: 1.2 + 0.1 * s},
                      n_contexts=3, samples=3)
    c = better.compare_oracle("d", "v", 2)
    assert c.diff == pytest.approx(0.2) and c.hi - c.lo == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="at least 2"):
        _planted({("iid:2", "v"): lambda c, s: 1.0, ("delayed:1,2", "v"): lambda c, s: 1.0},
                 n_contexts=3, samples=1).compare_oracle("d", "v", 2)
    with pytest.raises(ValueError, match="no delayed"):
        better.compare_oracle("d", "v", 4)


def test_claim_comparisons_cover_every_claim_the_dataset_allows(ds):
    names = ["token", "block", "hsd_capped", "specinfer", "spectr", "sequoia", "traversal"]
    ev = real_evaluation.evaluate_trees(ds, names, progress=False)
    claims = real_evaluation.claim_comparisons(ev)
    for draft in ds.manifest["drafts"]:
        assert {c for d, c in claims if d == draft} == {"i.i.d. rollouts", "without replacement", "delayed vs root", "chains"}
        assert any("cross-fitted" in c.a for c in claims[(draft, "delayed vs root")])
        assert all(c.unit == "tree" for c in claims[(draft, "i.i.d. rollouts")])
    text = real_evaluation.format_comparisons(ev)
    assert text.count("\n") == sum(len(v) + 1 for v in claims.values())


def test_comparisons_name_what_is_missing(evaluation, ds):
    draft = ds.manifest["drafts"][0]
    with pytest.raises(ValueError, match="no trees"):
        evaluation.compare("nope", "chain", "block", "token")
    with pytest.raises(ValueError, match="was not evaluated"):
        evaluation.compare(draft, "chain", "block", "gbv")
    with pytest.raises(ValueError, match="K must"):
        evaluation.compare_oracle(draft, "specinfer", 1)


def test_a_build_reuses_the_context_cache_and_matches_full_forward_passes(tmp_path, tiny_llama):
    torch = pytest.importorskip("torch")
    prompts = [[3, 1, 4, 1, 5, 9], [2, 7, 1, 8]]
    path = real_trees.build_trees(tmp_path / "t", prompts=prompts, positions=(-1,), drafts=("early_exit:1", "temperature:0.5"),
                                  processes=("chain", "iid:2", "swor:2", "delayed:1,2"), L=3, samples=2, tail=0.0,
                                  model=tiny_llama, progress=False)
    ds = real_trees.load_trees(path)
    assert len(ds) == 2 * 2 * 4 * 2 and ds.manifest["L"] == 3
    m = tiny_llama.model
    for rec in ds:
        context = prompts[rec.prompt][:rec.position]
        t = rec.tree
        for u in range(t.num_nodes):
            path_ids, v = [], u
            while v > 0:
                path_ids.append(int(rec.vocab[t.tokens[v]]))
                v = t.parent[v]
            with torch.no_grad():
                out = m(torch.tensor([context + path_ids[::-1]]), output_hidden_states=True)
            p = torch.softmax(out.logits[0, -1].double(), -1).numpy()
            np.testing.assert_allclose(t.p[u][np.searchsorted(rec.vocab, np.arange(40))], p, atol=1e-6)
            if t.children[u]:
                z = out.logits[0, -1] if rec.draft.startswith("temperature") else \
                    m.lm_head(m.model.norm(out.hidden_states[1][0, -1]))
                q = torch.softmax(z.double() / (0.5 if rec.draft.startswith("temperature") else 1.0), -1).detach().numpy()
                np.testing.assert_allclose(t.q[u][np.searchsorted(rec.vocab, np.arange(40))], q, atol=1e-6)
    ev = real_evaluation.evaluate_trees(ds, ["token", "specinfer", "sequoia"], progress=False)
    assert ev.compare_oracle("temperature:0.5", "specinfer", 2).n == 2
