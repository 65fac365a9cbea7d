"""The `specsim` command: every subcommand runs and prints what it promises."""
import subprocess
import sys

import numpy as np
import pytest

from lp.frontier import E1_P, E1_Q
from specsim import real
from specsim.cli import lossy_report, main
from specsim.divergences import tv


def test_compare_default_lists_chain_and_tree_verifiers(capsys):
    assert main(["compare", "--L", "2"]) == 0
    out = capsys.readouterr().out
    for name in ("token", "block", "hsd_released", "traversal", "gbv"):
        assert name in out
    line = next(l for l in out.splitlines() if l.startswith("hsd_released"))
    assert " NO " in line and "negative control" in line
    assert next(l for l in out.splitlines() if l.startswith("block ")).split()[3] == "yes"


def test_no_subcommand_runs_compare(capsys):
    assert main([]) == 0
    assert "drafting=chain" in capsys.readouterr().out


@pytest.mark.parametrize("spec,expected", [("iid:2", "specinfer"), ("swor:2", "sequoia"),
                                           ("greedy:2", "greedy_multidraft"), ("binary:2", "traversal")])
def test_compare_tree_drafting(capsys, spec, expected):
    assert main(["compare", "--drafting", spec, "--L", "2", "--V", "3"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[3:] if line.strip()]
    assert expected in names and "token" not in names  # chain-only rules do not apply to trees


@pytest.mark.parametrize("model", ["random", "near", "markov", "toy"])
def test_compare_every_model_kind(capsys, model):
    assert main(["compare", "--model", model, "--L", "1", "--V", "3"]) == 0
    assert "block " in capsys.readouterr().out


def test_bounds_reproduces_the_sequoia_anchor(capsys):
    assert main(["bounds", "--p", "1", "0", "--q", "0.5", "0.5", "--K", "2"]) == 0
    out = capsys.readouterr().out
    assert "SpecInfer RRS" in out and "0.750000" in out and "1.000000" in out


def test_lossy_prints_certificate_and_frontier(capsys):
    assert main(["lossy", "--rule", "cactus", "--param", "delta=0.05"]) == 0
    out = capsys.readouterr().out
    assert "KL(out||p) = 0.082227" in out and "frontier" in out


def test_lossy_report():
    s = lossy_report("cactus", budget=0.3, delta=0.05)
    assert "0.082227" in s and "<- budget" in s and "KL(p||pi)" in s
    assert "typical" in lossy_report()
    assert f"TV(p,q) = {tv(E1_P, E1_Q):.6f}" in lossy_report() and tv(E1_P, E1_Q) == pytest.approx(0.6)
    assert "p = [0.5 0.5]" in lossy_report("lenience", p=[0.5, 0.5], q=[0.9, 0.1], l=0.5)


def test_real_info_on_the_committed_dataset(capsys):
    assert main(["real", "info"]) == 0
    out = capsys.readouterr().out
    assert "V = 49152" in out and "| early_exit:24 |" in out


def test_real_tables_on_a_small_dataset(capsys, tmp_path):
    """All four tables for a dataset folder (a 4-token one written here: the committed rows at
    V = 49,152 take minutes for the lossy tables)."""
    p, q = np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.4, 0.3, 0.2, 0.1])
    pairs = [real.Pair(0, (1,), 2, p, {"early_exit:1": q}), real.Pair(0, (1, 2), -1, q, {"early_exit:1": p})]
    path = real.write_dataset(tmp_path / "ds", pairs, V=4, drafts=("early_exit:1",), prompts=["a"], tail=0.0)
    assert main(["real", "tables", str(path.parent), "--K", "2", "--wor-max-K", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("| draft |") == 4 and "without_replacement" in out and "lenience(l=0.8)" in out
    assert "| early_exit:1 | 2 | 0.6000 |" in out   # sum min(p, q) = 0.1 + 0.2 + 0.2 + 0.1 at both positions


def test_reader_closing_the_pipe_ends_quietly():
    # `specsim compare | head -1`: the rows after the first hit a closed pipe; no traceback
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "specsim.cli", "compare", "--V", "3", "--L", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) in (0, 1)
    assert "Traceback" not in err and "Broken pipe" not in err, err
