"""``specsim tree-design``: its printed numbers against independent computations, and its errors.

The oracle is checked against a brute-force maximum over every prefix-closed tree, the costs
against ``tree_cost`` of the built :class:`DraftTree` (not the ``paths_cost`` the command uses),
the sampled rows against a brute-force maximum of ``throughput`` over the listed shapes."""
from __future__ import annotations

import itertools
import re

import pytest

from specsim.cli import main
from specsim.drafts import TreeProcess
from specsim.exact import expected_accepted
from specsim.models import random_model
from specsim.structure import (CostModel, build_tree, deterministic_value, opt_tree, ranked_tree, search_space,
                               throughput, tree_cost)
from specsim.structure.design import format_tree_design, tree_design
from specsim.verifiers import TREE_VERIFIERS

NUM = r"(-?[0-9.]+)"
BEST = re.compile(rf"^(\S+)\s+(.+?)\s+(\d+)\s+(\d+)\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s+{NUM}\s\s")
HEUR = re.compile(rf"^(oracle|eagle2|opt_tree)\s+(exact optimum|heuristic)\s+(\d+)\s+(\d+)\s+{NUM}\s+{NUM}\s+{NUM}"
                  rf"\s+{NUM}\s+{NUM}\s\s")


def _closed_trees(V, L, n):
    nodes = [x for d in range(1, L + 1) for x in itertools.product(range(V), repeat=d)]
    for combo in itertools.combinations(nodes, n):
        s = set(combo)
        if all(len(x) == 1 or x[:-1] in s for x in combo):
            yield combo


def _rows(out, pattern):
    return {m.group(1): m.groups() for m in map(pattern.match, out.splitlines()) if m}


def test_deterministic_tables_match_brute_force_and_the_built_trees(capsys):
    V, seed, n, L = 3, 4, 4, 2
    assert main(["tree-design", "--V", str(V), "--seed", str(seed), "--budget", str(n), "--L", str(L),
                 "--family", "deterministic", "--draft-cost", "0.1", "--target-slope", "0.05",
                 "--overhead", "0.02", "--threshold", "0.3"]) == 0
    out = capsys.readouterr().out
    target, draft_model = random_model(V, seed, name="target"), random_model(V, seed + 1, name="draft")
    cost = CostModel(draft=0.1, target=[1.0 + 0.05 * k for k in range(n + 1)], overhead=0.02)

    def value_and_rate(paths):
        e = deterministic_value(target, paths)
        return e, (e + 1.0) / tree_cost(build_tree(target, draft_model, paths), cost)

    oracle_paths = max(_closed_trees(V, L, n), key=lambda t: deterministic_value(target, t))
    best, _ = value_and_rate(oracle_paths)
    trees = {"oracle": oracle_paths, "eagle2": [x for x, _ in ranked_tree(draft_model, n, L)],
             "opt_tree": [x for x, _ in opt_tree(draft_model, n, threshold=0.3, L=L)[0]]}
    heur = _rows(out, HEUR)
    assert set(heur) == set(trees)
    for method, paths in trees.items():
        e, rate = value_and_rate(paths)
        _, status, nodes, depth, e_p, regret_p, pct_p, rate_p, speed_p = heur[method]
        assert status == ("exact optimum" if method == "oracle" else "heuristic")
        assert int(nodes) == n and int(depth) == max(len(x) for x in paths)
        assert float(e_p) == pytest.approx(e, abs=1e-6) and float(rate_p) == pytest.approx(rate, abs=1e-6)
        assert float(regret_p) == pytest.approx(best - e, abs=1e-6)
        assert float(pct_p) == pytest.approx(100 * (best - e) / best, abs=0.006)
        assert float(speed_p) == pytest.approx(rate, abs=1e-4)         # target(1) = 1
    row = _rows(out, BEST)["deterministic_children"]
    assert row[1] == f"oracle top-{n}" and float(row[4]) == pytest.approx(best, abs=1e-6)
    assert float(row[7]) == pytest.approx(value_and_rate(oracle_paths)[1], abs=1e-6)


def test_sampled_rows_are_the_brute_force_best_rate_over_the_listed_shapes(capsys):
    V, seed, n, L = 3, 0, 3, 2
    names = ["specinfer", "traversal", "gbv"]
    assert main(["tree-design", "--V", str(V), "--seed", str(seed), "--budget", str(n), "--L", str(L),
                 "--family", "sampled", "--draft-cost", "0.2", "--verifiers", *names]) == 0
    out = capsys.readouterr().out
    assert "heuristics vs the oracle" not in out                   # the deterministic table is not asked for
    target, draft_model = random_model(V, seed), random_model(V, seed + 1)
    cost = CostModel(draft=0.2)
    rows = _rows(out, BEST)
    assert list(rows) == names
    for name in names:
        v = TREE_VERIFIERS[name]
        rates = {p.name: (throughput(v, target, draft_model, len(p.widths), p, cost).rate, p)
                 for p in search_space(n, L, v)}
        top = max(r for r, _ in rates.values())
        _, shape, nodes, depth, e_p, tokens_p, cost_p, rate_p, speed_p = rows[name]
        rate, proc = rates[shape]
        assert rate == pytest.approx(top, abs=1e-12)                 # the printed shape is a maximiser
        assert float(rate_p) == pytest.approx(top, abs=1e-6)
        assert int(depth) == len(proc.widths)
        e = expected_accepted(v, target, draft_model, len(proc.widths), proc)
        assert float(e_p) == pytest.approx(e, abs=1e-6) and float(tokens_p) == pytest.approx(e + 1, abs=1e-4)
        assert float(cost_p) == pytest.approx((e + 1) / rate, abs=1e-4)
    assert f"over {len(search_space(n, L, TREE_VERIFIERS['traversal']))} searched shapes" in out


def test_a_worse_tree_is_never_the_reported_best():
    # with a strong drafter (near the target) EAGLE-2 can match the oracle, never beat it
    target, draft_model = random_model(4, 7), random_model(4, 8)
    rep = tree_design(target, draft_model, 6, 3, CostModel(draft=0.05), family="deterministic")
    oracle, *heuristics = rep.heuristics
    for h in heuristics:
        assert h.status == "heuristic" and h.expected_accepted <= oracle.expected_accepted + 1e-12
        assert h.regret == pytest.approx(oracle.expected_accepted - h.expected_accepted, abs=1e-12)
    assert rep.best[0].expected_accepted == oracle.expected_accepted
    assert rep.budget_choice.speedup == max(d.throughput.speedup for d in rep.budget_choice.designs)
    assert "exact optimum" in format_tree_design(rep)


@pytest.mark.parametrize("argv, message", [
    (["--budget", "0"], "--budget must be >= 1"),
    (["--L", "0"], "--L must be >= 1"),
    (["--draft-cost", "-0.1"], "--draft-cost must lie in [0, inf]"),
    (["--target-slope", "-1"], "--target-slope must lie in [0, inf]"),
    (["--overhead", "-1"], "--overhead must lie in [0, inf]"),
    (["--threshold", "-1"], "--threshold must lie in [0, inf]"),
    (["--max-depth", "1"], "--max-depth must be >= 2"),
    (["--V", "1"], "V must be >= 2"),
    (["--verifiers", "token"], "['token'] are not tree verifiers"),
    (["--family", "deterministic", "--verifiers", "specinfer"], "'specinfer' is searched over sampled trees"),
    (["--family", "sampled", "--verifiers", "deterministic_children"], "deterministic_children verifies deterministic"),
    (["--family", "sampled", "--verifiers", "gbv", "--V", "5", "--budget", "12"], "V^12 = 2.44e+08 trees"),
])
def test_bad_arguments_are_one_line_errors_before_any_output(argv, message, capsys):
    assert main(["tree-design", "--family", "deterministic", *argv]
                if "--family" not in argv else ["tree-design", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("specsim: error:") and message in captured.err


def test_library_arguments_are_checked():
    target, draft_model = random_model(3, 0), random_model(3, 1)
    with pytest.raises(ValueError, match="family must be one of"):
        tree_design(target, draft_model, 2, 1, CostModel(), family="trees")
    with pytest.raises(TypeError, match="cost must be a specsim.structure.CostModel"):
        tree_design(target, draft_model, 2, 1, 0.1)
    with pytest.raises(TypeError, match="verifiers must be a list"):
        tree_design(target, draft_model, 2, 1, CostModel(), verifiers="gbv")
    with pytest.raises(ValueError, match="budget must be >= 1"):
        tree_design(target, draft_model, 0, 1, CostModel())
