"""Bad input to the `specsim` command: exit status 2 and a message naming the problem on stderr
(or argparse's own usage error, exit 2).  One table of (argv, message)."""
import pytest

from specsim.cli import lossy_report, main

CASES = {
    "unparsable drafting": (["compare", "--drafting", "nonsense:3"], "cannot parse drafting"),
    "V = 1": (["compare", "--V", "1"], "V must be >= 2"),
    "unknown model kind": (["compare", "--model", "nope"], "invalid choice"),
    "bounds: p does not sum to 1": (["bounds", "--p", "0.5", "0.6", "--q", "0.5", "0.5"], "sum to"),
    "bounds: p without q": (["bounds", "--p", "0.5", "0.5"], "both p and q"),
    "bounds: K = 0": (["bounds", "--K", "0"], "K must be >= 1"),
    "lossy: unknown rule": (["lossy", "--rule", "nonsense"], "unknown rule"),
    "lossy: parameter without value": (["lossy", "--rule", "lenience", "--param", "l"], "NAME=VALUE"),
    "lossy: parameter out of range": (["lossy", "--rule", "lenience", "--param", "l=2"], "l must lie in"),
    "lossy: negative budget": (["lossy", "--budget", "-1"], "budget must be >= 0"),
    "real: no command": (["real"], "required"),
    "real: no dataset there": (["real", "info", "/nonexistent/dataset"], "no manifest"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_a_clear_error(capsys, case):
    argv, message = CASES[case]
    try:
        status = main(argv)
    except SystemExit as exit_:     # argparse's own errors (usage, invalid choice)
        status = exit_.code
    assert status == 2
    assert message in capsys.readouterr().err


def test_lossy_report_rejects_bad_pairs():
    with pytest.raises(ValueError, match="q .draft"):
        lossy_report("typical", p=[0.5, 0.5], q=[0.5, 0.6])
