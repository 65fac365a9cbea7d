"""Bad input to the `specsim` command: exit status 2, nothing on stdout (arguments are checked before
anything is printed) and exactly one line on stderr naming the problem, no traceback.  One table of
(argv, message); rows marked "issue 12" ended in a traceback or printed half a table before."""
import json
import subprocess
import sys

import numpy as np
import pytest

from specsim import real
from specsim.cli import lossy_report, main

CASES = {
    "unparsable drafting": (["compare", "--drafting", "nonsense:3"], "cannot parse drafting"),
    "V = 1": (["compare", "--V", "1"], "V must be >= 2"),
    "negative seed": (["compare", "--seed", "-1"], "seed must be >= 0"),
    "L = 0 (issue 12: printed half a table)": (["compare", "--L", "0"], "--L must be >= 1"),
    "unknown model kind": (["compare", "--model", "nope"], "invalid choice"),
    "unknown verifier in --only": (["compare", "--L", "1", "--only", "nope"], "--only: ['nope']"),
    "L not a number": (["compare", "--L", "two"], "invalid int value"),
    "bounds: p does not sum to 1": (["bounds", "--p", "0.5", "0.6", "--q", "0.5", "0.5"], "sum to"),
    "bounds: p without q": (["bounds", "--p", "0.5", "0.5"], "both p and q"),
    "bounds: K = 0": (["bounds", "--K", "0"], "K must be >= 1"),
    "lossy: unknown rule": (["lossy", "--rule", "nonsense"], "unknown rule"),
    "lossy: rule without its parameter (issue 12: traceback)": (["lossy", "--rule", "cactus"],
                                                                "needs the parameter delta"),
    "lossy: parameter the rule does not have": (["lossy", "--rule", "cactus", "--param", "delta=0.1", "x=1"],
                                                "has no parameter x"),
    "lossy: parameter without value": (["lossy", "--rule", "lenience", "--param", "l"], "NAME=VALUE"),
    "lossy: parameter out of range": (["lossy", "--rule", "lenience", "--param", "l=2"], "l must lie in"),
    "lossy: parameter not a number": (["lossy", "--rule", "lenience", "--param", "l=abc"], "l must be a real number"),
    "lossy: negative budget": (["lossy", "--budget", "-1"], "budget must lie in"),
    "real: no command": (["real"], "required"),
    "real: no dataset there": (["real", "info", "/nonexistent/dataset"], "no manifest"),
    "real tables: K = 0": (["real", "tables", "--K", "0"], "--K must be >= 1"),
    "real tables: negative K without replacement": (["real", "tables", "--wor-max-K", "-1"],
                                                    "--wor-max-K must be >= 0"),
    "real build: tail = 1": (["real", "build", "--tail", "1"], "tail must lie in"),
    "real build: unreadable prompts file": (["real", "build", "--prompts-file", "/nonexistent/prompts.txt"],
                                            "No such file"),
}


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        status = main(argv)
    except SystemExit as exit_:     # argparse's own errors (usage, invalid choice)
        status = exit_.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _assert_one_line_error(status, out, err, message):
    assert status == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert message in err


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_and_nothing_printed(capsys, case):
    argv, message = CASES[case]
    _assert_one_line_error(*_run(argv, capsys), message)


@pytest.fixture
def dataset(tmp_path):
    """A small dataset folder (V = 4, one draft) to break in the tests below."""
    p, q = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])
    pairs = [real.Pair(0, (1,), 2, p, {"early_exit:1": q}), real.Pair(0, (1, 2), -1, q, {"early_exit:1": p})]
    return real.write_dataset(tmp_path / "ds", pairs, V=4, drafts=("early_exit:1",), prompts=["a"], tail=0.0).parent


def _truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])


def _rehash(folder):
    """Make the manifest's digest match rows.npz again (a truncated copy with a regenerated manifest)."""
    m = json.loads((folder / "manifest.json").read_text())
    m["data_sha256"] = real.file_sha256(folder / "rows.npz")
    (folder / "manifest.json").write_text(json.dumps(m))


BROKEN_DATASETS = {
    "truncated rows.npz (issue 12: traceback)": (lambda d: (_truncate(d / "rows.npz"), _rehash(d)),
                                                 "cannot read the arrays"),
    "truncated rows.npz, old digest": (lambda d: _truncate(d / "rows.npz"), "does not match the manifest"),
    "truncated manifest": (lambda d: _truncate(d / "manifest.json", 0.3), "not valid JSON"),
    "rows.npz replaced by text": (lambda d: ((d / "rows.npz").write_text("not an archive"), _rehash(d)),
                                  "cannot read the arrays"),
}


@pytest.mark.parametrize("command", ["info", "tables"])
@pytest.mark.parametrize("case", sorted(BROKEN_DATASETS))
def test_unreadable_dataset_is_one_line(capsys, dataset, case, command):
    breaks, message = BROKEN_DATASETS[case]
    breaks(dataset)
    _assert_one_line_error(*_run(["real", command, str(dataset)], capsys), message)


def test_the_installed_command_exits_2_without_a_traceback(dataset):
    """The same through a fresh interpreter (``python -m specsim.cli``): status and stderr as a user sees them."""
    _truncate(dataset / "rows.npz")
    _rehash(dataset)
    for argv in (["real", "info", str(dataset)], ["lossy", "--rule", "cactus"], ["compare", "--L", "0"]):
        r = subprocess.run([sys.executable, "-m", "specsim.cli", *argv], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and r.stdout == "", (argv, r.stdout)
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("specsim: error:"), (argv, r.stderr)


def test_lossy_report_rejects_bad_pairs_and_parameters():
    with pytest.raises(ValueError, match="q .draft"):
        lossy_report("typical", p=[0.5, 0.5], q=[0.5, 0.6])
    with pytest.raises(ValueError, match="needs the parameter delta"):
        lossy_report("cactus")
    with pytest.raises(TypeError, match="budget must be a real number"):
        lossy_report("typical", budget="0.1")
