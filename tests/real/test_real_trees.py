"""specsim.real_trees on the committed SmolLM2 draft-tree dataset (nothing is downloaded or run)."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from specsim import real, real_trees
from specsim.drafts import DraftTree

FAST = ["token", "block", "specinfer", "sequoia"]


@pytest.fixture(scope="module")
def ds():
    return real_trees.load_trees(real_trees.committed_trees())


@pytest.fixture(scope="module")
def evaluation(ds):
    return real_trees.evaluate_trees(ds, FAST, progress=False)


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
    text = real_trees.format_evaluation(evaluation)
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
    procs = ["fixed:3" if p.startswith("iid:") else p for p in ds.manifest["processes"]]
    _edit(folder, data_sha256=ds.manifest["data_sha256"], processes=procs)
    bad = real_trees.load_trees(folder)
    with pytest.raises(ValueError, match="does not draw"):
        list(bad)


def test_bad_arguments(ds):
    with pytest.raises(ValueError, match="does not apply|applies"):
        real_trees.evaluate_trees(ds, ["gbv"])
    with pytest.raises(ValueError, match="unknown verifier"):
        real_trees.evaluate_trees(ds, ["nope"])
    with pytest.raises(TypeError):
        real_trees.evaluate_trees("folder")
    fake = real.LoadedModel(None, None, Path("x.gguf"), 30, 49152)
    with pytest.raises(ValueError, match="30 layers"):
        real_trees.build_trees("/nonexistent", drafts=("early_exit:31",), model=fake)
    with pytest.raises(ValueError, match="drafting spec"):
        real_trees.build_trees("/nonexistent", processes=("tree:2",), model=fake)
