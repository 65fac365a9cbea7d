"""The `specsim` command: every subcommand runs and prints what it promises; bad input exits 2."""
import pytest

from specsim.cli import main


def test_compare_default_lists_chain_and_tree_verifiers(capsys):
    assert main(["compare", "--L", "2"]) == 0
    out = capsys.readouterr().out
    for name in ("token", "block", "hsd_released", "traversal", "gbv"):
        assert name in out
    line = next(l for l in out.splitlines() if l.startswith("hsd_released"))
    assert " NO " in line and "negative control" in line
    assert next(l for l in out.splitlines() if l.startswith("block ")).split()[3] == "yes"


@pytest.mark.parametrize("spec,expected", [("iid:2", "specinfer"), ("swor:2", "sequoia"),
                                           ("greedy:2", "greedy_multidraft"), ("binary:2", "traversal")])
def test_compare_tree_drafting(capsys, spec, expected):
    assert main(["compare", "--drafting", spec, "--L", "2", "--V", "3"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()[3:] if line.strip()]
    assert expected in names and "token" not in names  # chain-only rules do not apply to trees


def test_bounds_reproduces_the_sequoia_anchor(capsys):
    pytest.importorskip("cvxpy")
    assert main(["bounds", "--p", "1", "0", "--q", "0.5", "0.5", "--K", "2"]) == 0
    out = capsys.readouterr().out
    assert "SpecInfer RRS" in out and "0.750000" in out and "1.000000" in out


def test_lossy_prints_certificate_and_frontier(capsys):
    pytest.importorskip("cvxpy")
    assert main(["lossy", "--rule", "cactus", "--param", "delta=0.05"]) == 0
    out = capsys.readouterr().out
    assert "KL(out||p) = 0.082227" in out and "frontier" in out


@pytest.mark.parametrize("argv,message", [
    (["compare", "--drafting", "nonsense:3"], "cannot parse drafting"),
    (["compare", "--V", "1"], "V must be >= 2"),
    (["bounds", "--p", "0.5", "0.6", "--q", "0.5", "0.5"], "sum to"),
    (["lossy", "--rule", "nonsense"], "unknown rule"),
    (["lossy", "--rule", "lenience", "--param", "l"], "NAME=VALUE"),
])
def test_bad_input_is_a_clear_error(capsys, argv, message):
    if argv[0] in ("bounds", "lossy"):
        pytest.importorskip("cvxpy")
    assert main(argv) == 2
    assert message in capsys.readouterr().err
