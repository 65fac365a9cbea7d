"""``specsim compare``: the optimum row, gaps to it and --only."""
import re

from specsim.cli import main


def _rows(out: str) -> dict:
    return {m.group(1): m.group(0) for m in re.finditer(r"^(\w+)\s+-?\d\.\d{5}.*$", out, re.M)}


def test_optimum_row_and_gaps(capsys):
    assert main(["compare", "--L", "2", "--drafting", "swor:2"]) == 0
    rows = _rows(capsys.readouterr().out)
    best = float(rows["optimum"].split()[1])
    for name in ("sequoia", "traversal"):
        cells = rows[name].split()
        e_tau, gap = float(cells[1]), float(cells[6])
        assert e_tau <= best + 1e-7                      # lossless verifiers never beat the LP
        assert abs(gap - 100 * (best - e_tau) / best) < 0.01


def test_only_filters_rows_and_rejects_unknown_names(capsys):
    assert main(["compare", "--L", "1", "--drafting", "swor:2", "--only", "traversal"]) == 0
    rows = _rows(capsys.readouterr().out)
    assert set(rows) == {"optimum", "traversal"}
    assert main(["compare", "--L", "1", "--drafting", "swor:2", "--only", "nope"]) == 2
    assert "--only: ['nope'] not among the verifiers for swor_tree(2)" in capsys.readouterr().err


def test_optimum_skipped_for_large_processes(capsys):
    assert main(["compare", "--L", "3", "--V", "4", "--drafting", "iid:3", "--only", "gbv"]) == 0
    out = capsys.readouterr().out
    assert "optimum                 not computed: more than 2000 draft trees" in out
