"""``specsim stopping``: the table, its certificates and its errors."""
from __future__ import annotations

import re

from specsim.cli import main


def test_stopping_command_prints_every_policy_with_regret_and_certificate(capsys):
    assert main(["stopping", "--V", "3", "--L", "3", "--verifier", "block", "--draft-cost", "0.1"]) == 0
    out = capsys.readouterr().out
    lam = float(re.search(r"lambda\* = ([0-9.]+)", out).group(1))
    rows = {line.split()[0]: line for line in out.splitlines()[2:] if line and not line.startswith("*")}
    for name in ("fixed:1", "fixed:3", "confidence:0.4", "specdec++:0.5", "entropy:1", "heuristic"):
        assert "LOSSLESS" in rows[name]
        value = float(rows[name].split()[-3 if name != "heuristic" else -6])
        assert value <= lam + 1e-6
    assert "LOSSY" in rows["grammar_truncation"] and "LOSSY" in rows["drop_on_target:0.5"]


def test_stopping_command_refuses_a_horizon_too_large(capsys):
    assert main(["stopping", "--V", "50", "--L", "4"]) == 2
    err = capsys.readouterr().err
    assert "horizon L=4 over V=50 gives 6377551 draft prefixes" in err


def test_stopping_command_refuses_a_negative_slope(capsys):
    assert main(["stopping", "--L", "2", "--target-slope", "-1"]) == 2
    assert "--target-slope must be >= 0" in capsys.readouterr().err
