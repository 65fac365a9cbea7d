"""Issue 26: one manifest/data validation for both real-data loaders, every build argument checked
before a model is loaded, list arguments given as one string, and the real-tree evaluation's
skipped groups and oracle errors.

Each case failed on the code before the shared validation (``specsim/_manifest.py``): the tree
loader accepted it or ended in a foreign exception (BadZipFile, int()'s message, a NaN)."""
import json

import numpy as np
import pytest

from specsim import real


def _set(a, i, v):
    a = a.copy()
    a[i] = v
    return a


# ----------------------------------------------------------------------------------------------
# issue 26: one validation for both loaders (rows: specsim-real-v1, trees: specsim-real-trees-v1).
# Every case runs against a small dataset of each format written to tmp_path; the tree loader
# accepted all of these, or ended in a foreign exception, before.
# ----------------------------------------------------------------------------------------------

from specsim import real_evaluation, real_trees  # noqa: E402

LOADERS = {"rows": ("write_synthetic", real.load_dataset), "trees": ("write_trees", real_trees.load_trees)}


@pytest.fixture(params=sorted(LOADERS))
def dataset(request):
    """(manifest path of a fresh small dataset, its loader), once per format."""
    fixture, load = LOADERS[request.param]
    return request.getfixturevalue(fixture)(), load


def _edit_manifest(mpath, edit):
    mpath.write_text(json.dumps(edit(json.loads(mpath.read_text()))))


SHARED_MANIFESTS = {
    "drafts a string (trees: three drafters 'a', 'b', 'c')": (lambda m: dict(m, drafts="abc"),
                                                              "manifest field 'drafts' must be a list"),
    "drafts a list of non-strings": (lambda m: dict(m, drafts=[1, 2]), "manifest field 'drafts' must be a list"),
    "tail nan (trees: the remainder check passed everything)": (lambda m: dict(m, tail=float("nan")),
                                                                r"manifest field 'tail' must lie in \[0, 1\), got nan"),
    "tail as text": (lambda m: dict(m, tail=str(m["tail"])), "manifest field 'tail' must be a real number"),
    "V as text (trees: int()'s message)": (lambda m: dict(m, V=str(m["V"])),
                                           "manifest field 'V' must be an integer, got '"),
    "V as a fractional number": (lambda m: dict(m, V=m["V"] + 0.5), "manifest field 'V' must be an integer"),
    "V too small for the stored ids": (lambda m: dict(m, V=3), "token ids must lie in"),
    "prompt with a token id out of range": (lambda m: dict(m, prompts=[[1, 10 ** 6]] + m["prompts"][1:]),
                                            "manifest prompt 0"),
    "prompts not a list": (lambda m: dict(m, prompts="abc"), "manifest field 'prompts' must be a non-empty list"),
    "data file outside the folder": (lambda m: dict(m, data_file="../x.npz"), "manifest field 'data_file'"),
    "digest not hex": (lambda m: dict(m, data_sha256="zz" * 32), "manifest field 'data_sha256'"),
    "settings not a mapping": (lambda m: dict(m, settings=[1]), "manifest field 'settings' must be a mapping"),
    "model digest not hex": (lambda m: dict(m, model={"file": "x", "sha256": "abc"}), "manifest field 'model'"),
}


@pytest.mark.parametrize("case", sorted(SHARED_MANIFESTS))
def test_both_loaders_reject_bad_manifests(dataset, case):
    mpath, load = dataset
    edit, msg = SHARED_MANIFESTS[case]
    _edit_manifest(mpath, edit)
    with pytest.raises(ValueError, match=msg) as err:
        load(mpath)
    assert str(mpath.parent) in str(err.value)     # the message names the file


SHARED_ARRAYS = {
    "context id = V": (dict(contexts=lambda a: _set(a, 0, 10 ** 6)), "contexts out of range"),
    "context id = -1": (dict(contexts=lambda a: _set(a, 0, -1)), "contexts out of range"),
    "kept values as strings": (dict(vals=lambda a: a.astype(str)), "'vals' must hold floating-point numbers"),
    "remainders as strings": (dict(remainder=lambda a: a.astype(str)), "'remainder' must hold floating-point numbers"),
    "context ids as strings": (dict(contexts=lambda a: a.astype(str)), "'contexts' must hold integers"),
    "float token ids": (dict(ids=lambda a: a.astype(np.float64)), "'ids' must hold integers"),
    "token id out of range": (dict(ids=lambda a: _set(a, 0, 10 ** 6)), "ids out of range"),
    "negative token id": (dict(ids=lambda a: _set(a, 0, -1)), "ids out of range"),
    "duplicate token ids in a row": (dict(ids=lambda a: _set(a, 1, a[0])), "strictly increasing"),
    "negative kept value": (dict(vals=lambda a: _set(a, 0, -0.01)), "finite and >= 0"),
    "nan kept value": (dict(vals=lambda a: _set(a, 0, np.nan)), "finite and >= 0"),
    "a row of zeros": (dict(vals=lambda a: np.zeros_like(a)), "not 1"),
    "offsets not increasing": (dict(offsets=lambda a: _set(a, 1, 0)), "'offsets' must start at 0"),
    "nan remainder": (dict(remainder=lambda a: _set(a, 0, np.nan)), "remainder"),
    "2-D array": (dict(remainder=lambda a: a[:, None]), "must be 1-D"),
    "missing array": (dict(contexts=None), "missing arrays"),
    "context offsets past the end": (dict(context_offsets=lambda a: _set(a, len(a) - 1, a[-1] + 1)),
                                     "'context_offsets'"),
}


@pytest.mark.parametrize("case", sorted(SHARED_ARRAYS))
def test_both_loaders_reject_bad_arrays(dataset, tamper, case):
    mpath, load = dataset
    changes, msg = SHARED_ARRAYS[case]
    tamper(mpath, **changes)
    with pytest.raises(ValueError, match=msg) as err:
        load(mpath)
    assert str(mpath.parent) in str(err.value)


@pytest.mark.parametrize("keep", [0.0, 0.5, 0.99])
def test_both_loaders_reject_a_truncated_archive(dataset, keep):
    """The tree loader ended in zipfile.BadZipFile; now both say which file cannot be read."""
    mpath, load = dataset
    m = json.loads(mpath.read_text())
    data = mpath.parent / m["data_file"]
    data.write_bytes(data.read_bytes()[:int(keep * data.stat().st_size)])
    _edit_manifest(mpath, lambda m: dict(m, data_sha256=real.file_sha256(data)))
    with pytest.raises(ValueError, match="cannot read the arrays") as err:
        load(mpath)
    assert str(data) in str(err.value)


def test_both_loaders_reject_a_file_that_is_not_an_archive(dataset):
    mpath, load = dataset
    data = mpath.parent / json.loads(mpath.read_text())["data_file"]
    data.write_bytes(b"PK\x03\x04 not really a zip archive" * 10)
    _edit_manifest(mpath, lambda m: dict(m, data_sha256=real.file_sha256(data)))
    with pytest.raises(ValueError, match="cannot read the arrays"):
        load(mpath)


@pytest.mark.parametrize("index, exc, msg", [(True, TypeError, "index must be an integer, got True"),
                                             (False, TypeError, "index must be an integer, got False"),
                                             (1.0, TypeError, "index must be an integer, got 1.0"),
                                             ("0", TypeError, "index must be an integer"),
                                             (10 ** 6, ValueError, "out of range"),
                                             (-10 ** 6, ValueError, "out of range")])
def test_both_datasets_take_only_integer_indices(dataset, index, exc, msg):
    """``ds[True]`` returned item 1 of either dataset."""
    mpath, load = dataset
    ds = load(mpath)
    with pytest.raises(exc, match=msg):
        ds[index]
    first, last = ds[np.int64(0)], ds[-1]       # numpy integers and negative indices still work
    assert type(first) is type(last)


TREE_MANIFESTS = {
    "processes a string": (lambda m: dict(m, processes="chain"), "manifest field 'processes' must be a list"),
    "processes repeated": (lambda m: dict(m, processes=["chain"] + m["processes"]), "duplicate"),
    "processes unparsable": (lambda m: dict(m, processes=["nope:2"] + m["processes"][1:]), "cannot parse drafting"),
    "L as text": (lambda m: dict(m, L=str(m["L"])), "manifest field 'L' must be an integer"),
    "L = 0": (lambda m: dict(m, L=0), "manifest field 'L' must be >= 1"),
    "samples as text": (lambda m: dict(m, samples="2"), "manifest field 'samples' must be an integer"),
    "seed negative": (lambda m: dict(m, seed=-1), "manifest field 'seed' must be >= 0"),
    "T nan": (lambda m: dict(m, T=float("nan")), "manifest field 'T'"),
    "n_trees fractional": (lambda m: dict(m, n_trees=m["n_trees"] + 0.5), "manifest field 'n_trees' must be an integer"),
    "n_trees differs": (lambda m: dict(m, n_trees=m["n_trees"] + 1), "tree_offsets"),
    "positions not integers": (lambda m: dict(m, positions=["-1"]), "manifest field 'positions'"),
    "no model": (lambda m: dict(m, model=None), "model hash"),
    "no positions": (lambda m: {k: v for k, v in m.items() if k != "positions"}, "no 'positions'"),
}


@pytest.mark.parametrize("case", sorted(TREE_MANIFESTS))
def test_tree_loader_rejects_bad_manifest_fields(write_trees, case):
    mpath = write_trees()
    edit, msg = TREE_MANIFESTS[case]
    _edit_manifest(mpath, edit)
    with pytest.raises(ValueError, match=msg) as err:
        real_trees.load_trees(mpath)
    assert str(mpath.parent) in str(err.value)


TREE_ARRAYS = {
    "node token out of range": (dict(node_tokens=lambda a: _set(a, 1, 10 ** 6)), "node_tokens out of range"),
    "draw out of range": (dict(draws=lambda a: _set(a, 0, -5)), "draws out of range"),
    "node_q below -1": (dict(node_q=lambda a: _set(a, 0, -2)), "node_q out of range"),
    "node parent out of range": (dict(node_parent=lambda a: _set(a, 1, 10 ** 6)), "node_parent out of range"),
    "tree offsets decreasing": (dict(tree_offsets=lambda a: _set(a, 1, 0)), "'tree_offsets' must start at 0"),
    "draw offsets decreasing": (dict(draw_offsets=lambda a: _set(a, 1, a[2] + 1)), "'draw_offsets'"),
    "tree drafter index out of range": (dict(tree_draft=lambda a: _set(a, 0, 2)), "tree_draft out of range"),
    "string drafter indices": (dict(tree_draft=lambda a: a.astype(str)), "'tree_draft' must hold integers"),
}


@pytest.mark.parametrize("case", sorted(TREE_ARRAYS))
def test_tree_loader_rejects_bad_tree_arrays(write_trees, tamper, case):
    mpath = write_trees()
    changes, msg = TREE_ARRAYS[case]
    tamper(mpath, **changes)
    with pytest.raises(ValueError, match=msg):
        real_trees.load_trees(mpath)


# ----------------------------------------------------------------------------------------------
# issue 26: every argument of a build is checked before anything is loaded
# ----------------------------------------------------------------------------------------------

@pytest.fixture
def no_model(monkeypatch):
    """Loading the model fails the test: arguments must be refused before it."""
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the arguments were checked")
    monkeypatch.setattr(real, "load_model", refuse)
    monkeypatch.setattr(real_trees, "load_model", refuse)


BUILD_TREES = {
    "seed -1": (dict(seed=-1), ValueError, "seed must be >= 0, got -1"),
    "seed 1.5": (dict(seed=1.5), TypeError, "seed must be an integer seed >= 0, got 1.5"),
    "seed as text": (dict(seed="0"), TypeError, "seed must be an integer"),
    "seed a bool": (dict(seed=True), TypeError, "seed must be an integer"),
    "tail as text": (dict(tail="0.1"), TypeError, "tail must be a real number"),
    "tail nan": (dict(tail=float("nan")), ValueError, "tail must lie in"),
    "position 1.5": (dict(positions=(1.5,)), TypeError, "position must be an integer"),
    "position 0": (dict(positions=(0,)), ValueError, "position"),
    "no positions": (dict(positions=()), ValueError, "positions"),
    "no processes": (dict(processes=()), ValueError, "processes"),
    "process not a string": (dict(processes=(3,)), TypeError, r"processes\[0\] must be a string"),
    "processes repeated": (dict(processes=("chain", "chain")), ValueError, "duplicate"),
    "unknown process": (dict(processes=("nope:2",)), ValueError, "cannot parse drafting"),
    "out_dir None": (dict(out_dir=None), TypeError, "out_dir"),
    "model of the wrong kind": (dict(model=3), TypeError, "model must be a LoadedModel"),
    "model file missing": (dict(model="smollm2"), ValueError, "does not exist"),
    "progress as text": (dict(progress="yes"), TypeError, "progress"),
    "L = 0": (dict(L=0), ValueError, "L must be >= 1"),
    "batch 0": (dict(batch=0), ValueError, "batch must be >= 1"),
    "samples 1.0": (dict(samples=1.0), TypeError, "samples must be an integer"),
    "T = 0": (dict(T=0.0), ValueError, "temperature T"),
    "unknown draft": (dict(drafts=("nope:1",)), ValueError, "draft 'nope:1'"),
}


@pytest.mark.parametrize("case", sorted(BUILD_TREES))
def test_build_trees_checks_every_argument_before_loading_the_model(no_model, tmp_path, case):
    kw, exc, msg = BUILD_TREES[case]
    args = dict(out_dir=tmp_path / "t") | kw
    with pytest.raises(exc, match=msg):
        real_trees.build_trees(args.pop("out_dir"), **args)


BUILD_ROWS = {
    "position 1.5": (dict(positions=[1.5]), TypeError, "position must be an integer"),
    "position 0": (dict(positions=[0]), ValueError, "position"),
    "positions a number": (dict(positions=3), TypeError, "positions"),
    "model of the wrong kind": (dict(model="smollm2"), TypeError, "model must be a LoadedModel"),
    "progress as text": (dict(progress="yes"), TypeError, "progress"),
    "tail as text": (dict(tail="0"), TypeError, "tail must be a real number"),
}


@pytest.mark.parametrize("build, case", [(b, c) for b in ("build_dataset", "next_token_pairs") for c in sorted(BUILD_ROWS)
                                         if not (b == "next_token_pairs" and "tail" in BUILD_ROWS[c][0])])
def test_row_builders_check_every_argument_before_loading_the_model(no_model, tmp_path, case, build):
    kw, exc, msg = BUILD_ROWS[case]     # (next_token_pairs has no tail)
    args = dict(prompts=["x"]) | kw
    if build == "build_dataset":
        args["out_dir"] = tmp_path / "ds"
    with pytest.raises(exc, match=msg):
        getattr(real, build)(**args)


# ----------------------------------------------------------------------------------------------
# issue 26: a list argument given as one string is one name (as drafts and prompts always were)
# ----------------------------------------------------------------------------------------------

def test_a_string_of_verifiers_is_one_name(tiny_trees):
    """``verifiers='block'`` was read letter by letter ('b' is no verifier)."""
    ds = real_trees.load_trees(tiny_trees)
    one = real_evaluation.evaluate_trees(ds, "block", progress=False)
    listed = real_evaluation.evaluate_trees(ds, ["block"], progress=False)
    assert list(one.groups) == list(listed.groups) == [(d, "chain") for d in ds.manifest["drafts"]]
    for key, g in listed.groups.items():
        np.testing.assert_array_equal(one.groups[key]["block"].per_tree, g["block"].per_tree)
    for bad, exc in (([3], TypeError), (b"block", TypeError), ([], ValueError), (["block", "block"], ValueError)):
        with pytest.raises(exc, match="verifiers"):
            real_evaluation.evaluate_trees(ds, bad, progress=False)


def test_a_string_of_processes_or_drafts_is_one_name(tmp_path, tiny_llama):
    path = real_trees.build_trees(tmp_path / "t", prompts=[[3, 1, 4]], positions=(-1,), drafts="temperature:0.5",
                                  processes="iid:2", L=1, samples=1, tail=0.0, model=tiny_llama, progress=False)
    m = real_trees.load_trees(path).manifest
    assert m["processes"] == ["iid:2"] and m["drafts"] == ["temperature:0.5"] and m["n_trees"] == 1


def test_real_tables_take_a_string_of_drafts_as_one_name(synthetic_pairs):
    from lp import real_tables

    pairs = synthetic_pairs()
    assert real_tables.acceptance_table(pairs, drafts="topk:2") == real_tables.acceptance_table(pairs, drafts=["topk:2"])
    with pytest.raises(TypeError, match=r"drafts\[0\] must be a string"):
        real_tables.acceptance_table(pairs, drafts=[3])


# ----------------------------------------------------------------------------------------------
# issue 26: evaluation — processes no named verifier applies to are skipped with a note; the
# delayed-expansion oracle names an unknown drafter instead of returning nan
# ----------------------------------------------------------------------------------------------

def test_groups_no_named_verifier_applies_to_are_skipped_with_a_note(tiny_trees):
    ds = real_trees.load_trees(tiny_trees)
    ev = real_evaluation.evaluate_trees(ds, ["token", "block", "specinfer"], progress=False)
    processes = {p for _, p in ev.groups}
    assert processes == {"chain", "iid:2", "delayed:1,2"}          # specinfer applies to these
    assert {p for _, p in ev.skipped} == {"swor:2"}                 # none of the three applies to swor:2
    assert all("none of the verifiers" in why for why in ev.skipped.values())
    text = real_evaluation.format_evaluation(ev)
    for draft in ds.manifest["drafts"]:
        assert f"{draft} | swor:2 | skipped: none of the verifiers ['token', 'block', 'specinfer'] applies" in text
    # a name that applies to no process of the dataset is a mistake, not a note
    with pytest.raises(ValueError, match="'sequoia', 'nope'|unknown verifier 'nope'"):
        real_evaluation.evaluate_trees(ds, ["sequoia", "nope"], progress=False)


def test_cli_tree_tables_skip_processes_none_of_the_verifiers_applies_to(tiny_trees, capsys):
    """``specsim real trees tables DIR --verifiers token block specinfer`` stopped at swor:2."""
    from specsim.cli import main

    assert main(["real", "trees", "tables", str(tiny_trees.parent), "--verifiers", "token", "block", "specinfer"]) == 0
    out = capsys.readouterr().out
    for draft in real_trees.load_trees(tiny_trees).manifest["drafts"]:
        assert f"{draft} | swor:2 | skipped: none of the verifiers ['token', 'block', 'specinfer'] applies" in out
        assert f"{draft} | iid:2 | " in out and f"{draft} | chain | " in out


def test_a_verifier_that_applies_to_no_process_is_named(tmp_path, tiny_llama):
    path = real_trees.build_trees(tmp_path / "t", prompts=[[3, 1, 4]], positions=(-1,), drafts=("temperature:0.5",),
                                  processes=("swor:2",), L=1, samples=1, tail=0.0, model=tiny_llama, progress=False)
    ds = real_trees.load_trees(path)
    with pytest.raises(ValueError, match=r"verifier 'token' applies to none of the processes \['swor:2'\]"):
        real_evaluation.evaluate_trees(ds, ["sequoia", "token"], progress=False)


def test_oracle_delayed_names_an_unknown_drafter_and_verifier(tiny_trees):
    ds = real_trees.load_trees(tiny_trees)
    ev = real_evaluation.evaluate_trees(ds, ["specinfer", "sequoia"], progress=False)
    means, oracle, wins = real_evaluation.oracle_delayed(ev, "temperature:0.5", "specinfer", 2)
    assert set(means) == {"iid:2", "delayed:1,2"} and np.isfinite(oracle) and sum(wins.values()) == 4
    # the oracle takes the best process per context, so it is at least every per-process mean
    assert oracle >= max(means.values()) - 1e-12
    with pytest.raises(ValueError, match=r"unknown drafter 'topk:9'; the evaluation has \['early_exit:1', "
                                         r"'temperature:0.5'\]"):
        real_evaluation.oracle_delayed(ev, "topk:9", "specinfer", 2)
    with pytest.raises(ValueError, match="verifier 'sequoia' was not evaluated on"):
        real_evaluation.oracle_delayed(ev, "temperature:0.5", "sequoia", 2)
    with pytest.raises(ValueError, match="no iid:3 or delayed:d,3 groups"):
        real_evaluation.oracle_delayed(ev, "temperature:0.5", "specinfer", 3)
    with pytest.raises(TypeError, match="K must be an integer"):
        real_evaluation.oracle_delayed(ev, "temperature:0.5", "specinfer", 2.0)
