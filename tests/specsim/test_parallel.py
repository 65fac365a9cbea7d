"""``workers=`` (specsim.parallel, issue 23): SciPy's convention (1, n > 1, -1, a map-like callable)
through joblib, one seed per task, and at every sweep that takes it, 1 worker vs 2 workers (joblib's
default backend: processes, tasks pickled by value) vs a map-like callable give identical results.

The two worker processes start once for the module (a fixture that imports in them the modules the
tests send them to: seconds, more on a loaded machine); joblib reuses them for every later call."""
from __future__ import annotations

import importlib
import importlib.util
import re

import numpy as np
import pytest

from specsim import parallel
from specsim.models import random_model
from specsim.parallel import check_workers, map_tasks, task_seed, task_seeds, worker_map

WORKER_MODULES = ["specsim.testing.selftest.mutation", "specsim.testing.selftest.power", "specsim.structure",
                  "specsim.real_evaluation", "specsim.cli"]
if importlib.util.find_spec("matplotlib") is not None:
    WORKER_MODULES.append("paper_figs._common")


def _import_all(names):
    for name in names:
        importlib.import_module(name)


@pytest.fixture(scope="module", autouse=True)
def _two_workers_started():
    map_tasks(_import_all, [WORKER_MODULES] * 2, 2)  # one task per worker: each takes seconds


BAD = [(0, ValueError), (-2, ValueError), (2.5, TypeError), ("2", TypeError), (True, TypeError),
       (None, TypeError)]


def reversed_map(calls):
    """A map-like callable that runs the tasks last first and returns them in task order (what a
    cluster's map does: any order of running, results in order); it records each call."""
    def run(f, it):
        jobs = list(it)
        calls.append(len(jobs))
        out = [f(x) for x in reversed(jobs)]
        return out[::-1]
    return run


# ------------------------------------------------------------------------------------ the module

@pytest.mark.parametrize("bad, err", BAD)
def test_bad_workers_are_named(bad, err):
    with pytest.raises(err, match="workers"):
        check_workers(bad)
    with pytest.raises(err, match="workers"):
        map_tasks(abs, [1], bad)
    with pytest.raises(err, match="--workers"):
        check_workers(bad, "--workers")


def test_good_workers():
    assert check_workers(1) == 1 and check_workers(np.int64(3)) == 3 and check_workers(-1) == -1
    assert type(check_workers(np.int64(3))) is int
    assert worker_map(1) is map
    f = lambda g, it: map(g, it)  # noqa: E731
    assert check_workers(f) is f and worker_map(f) is f


def test_task_seed_is_the_ith_spawned_child():
    for seed, n in [(0, 1), (5, 4), (2 ** 40, 3)]:
        kids = np.random.SeedSequence(seed).spawn(n)
        for i in range(n):
            assert task_seed(seed, i).generate_state(4).tolist() == kids[i].generate_state(4).tolist()
            assert task_seeds(seed, n)[i].generate_state(4).tolist() == kids[i].generate_state(4).tolist()
    # the stream of task i does not depend on how many tasks there are
    assert task_seeds(9, 2)[1].generate_state(2).tolist() == task_seeds(9, 50)[1].generate_state(2).tolist()
    with pytest.raises(ValueError, match="seed"):
        task_seed(-1, 0)
    with pytest.raises(ValueError, match="task index"):
        task_seed(0, -1)


def _draws(i):
    """A random task: its numbers come from its own stream."""
    return np.random.default_rng(task_seed(11, i)).standard_normal(5)


def test_random_tasks_give_the_same_numbers_on_1_and_2_workers_and_a_callable():
    calls = []
    one = map_tasks(_draws, range(6), 1)
    two = map_tasks(_draws, range(6), 2)
    three = map_tasks(_draws, range(6), reversed_map(calls))
    assert calls == [6]
    for a, b, c in zip(one, two, three):
        assert a.tobytes() == b.tobytes() == c.tobytes()
    # a shared stream (the old way of a serial loop) would give other numbers in another order
    assert not np.array_equal(np.concatenate(one), np.random.default_rng(11).standard_normal(30))


def test_joblib_dask_backend_is_a_switch():
    """``with joblib.parallel_config(backend="dask")`` and a ``distributed.Client`` (here a local
    two-worker cluster of threads) sends integer workers' tasks to the cluster."""
    distributed = pytest.importorskip("distributed")
    joblib = pytest.importorskip("joblib")

    def where(i):
        return i, distributed.get_worker().address, _draws(i).tobytes()

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client, joblib.parallel_config(backend="dask"):
        got = map_tasks(where, range(4), 2)
        assert len(client.scheduler_info()["workers"]) == 2
    assert [i for i, _, _ in got] == list(range(4))
    assert all(addr.startswith(("inproc://", "tcp://")) for _, addr, _ in got)
    assert [b for _, _, b in got] == [_draws(i).tobytes() for i in range(4)]


# ------------------------------------------------------------------------------- the sweeps

def test_power_search_on_1_and_2_workers():
    from specsim.testing.selftest import power

    cands = [(3, 0.5, 0, 1)]
    one = power._search(candidates=cands)
    assert one == power._search(candidates=cands, workers=2) == power._search(candidates=cands,
                                                                             workers=reversed_map([]))
    assert len(one) == 2 * len(cands) and one == sorted(one)


def _search_step_serial(candidates, n=20000, alpha=1e-3, lengths=(2, 3)):
    """The serial search with its early stop as it was before workers= (the reference)."""
    from specsim.testing.selftest.power import power_report

    out, best = [], np.inf
    for V, conc, s, d in candidates:
        target, draft_model = random_model(V, s, conc), random_model(V, d, conc)
        worst = 0.0
        for L in lengths:
            rep = power_report(target, draft_model, L, n, alpha=alpha, check="step")
            worst = max(worst, *(r.samples_needed for r in rep.rows))
            if worst > best:
                break
        best = min(best, worst)
        out.append((worst, V, conc, s, d))
    return sorted(out)


def test_step_search_replays_the_serial_early_stop(monkeypatch):
    from specsim.testing.selftest import power

    # the later two stop early (worse than the best after one length), with a smaller number
    # than their full maximum: a search that did not replay the stop would report other rows
    cands = [(3, 0.5, 8, 9), (3, 0.5, 0, 1), (3, 1.0, 10, 11)]
    ref = _search_step_serial(cands)
    full = sorted((max(power._step_task((*c, (2, 3), 20000, 1e-3, np.inf))), *c) for c in cands)
    assert ref != full and ref[0] == full[0]
    # one worker does the serial search's work: 4 power reports, not 6
    calls = []
    real_report = power.power_report

    def counting(*a, **kw):
        calls.append(a[2])
        return real_report(*a, **kw)

    monkeypatch.setattr(power, "power_report", counting)
    assert power._search_step(candidates=cands) == ref
    assert calls == [2, 3, 2, 2]
    monkeypatch.setattr(power, "power_report", real_report)
    assert power._search_step(candidates=cands, workers=2) == ref
    assert power._search_step(candidates=cands, workers=reversed_map([])) == ref


def test_power_command_takes_workers(capsys, monkeypatch):
    from specsim.testing.selftest import power

    seen = []
    monkeypatch.setattr(power, "_search_step", lambda **kw: seen.append(("step", kw["workers"])) or [(1.0, 3, 0.5, 0, 1)])
    monkeypatch.setattr(power, "_search", lambda **kw: seen.append(("sampler", kw["workers"])) or [(1.0, 3, 2, 0.5, 0, 1)])
    power._main(["power", "step", "--workers", "2"])
    assert seen == [("step", 2)] and "chosen:" in capsys.readouterr().out
    power._main(["power"])  # both searches, serial
    assert seen[1:] == [("sampler", 1), ("step", 1)]
    with pytest.raises(ValueError, match="--workers"):
        power._main(["power", "step", "--workers", "0"])
    with pytest.raises(SystemExit):
        power._main(["power", "steps"])


def test_mutation_table_on_1_and_2_workers():
    from specsim.testing.selftest.mutation import mutation_suites, mutation_table

    s = mutation_suites()
    sub = {"chain": {k: s["chain"][k] for k in ("bonus_wrong_row", "token")},
           "tree": {k: s["tree"][k] for k in ("specinfer_stale_residual",)}}
    kw = dict(max_examples=8, sampler_cap=2000, shrink=False)
    calls = []
    one = mutation_table(sub, **kw)
    assert one == mutation_table(sub, workers=2, **kw) == mutation_table(sub, workers=reversed_map(calls), **kw)
    assert calls == [3] and [r.name for r in one] == ["bonus_wrong_row", "token", "specinfer_stale_residual"]
    assert all(r.correct for r in one) and one[0].sampler_flagged is True


def _same_policy_values(a, b):
    assert [r.name for r in a] == [r.name for r in b]
    for x, y in zip(a, b):
        for f in ("value", "speedup", "tokens", "cost", "regret", "gap", "uses_target"):
            assert getattr(x, f) == getattr(y, f), f
        assert x.length_law.tobytes() == y.length_law.tobytes()


def test_compare_policies_on_1_and_2_workers():
    from specsim.structure import CostModel
    from specsim.structure.policies import ConfidenceThreshold, HeuristicSchedule
    from specsim.structure.stopping import compare_policies
    from specsim.verifiers import token

    t, d, cost = random_model(3, 0), random_model(3, 1), CostModel(draft=0.1)
    # an int, a policy object, a schedule and a lambda (pickled by value for the workers)
    pols = [1, 3, ConfidenceThreshold(0.4), HeuristicSchedule(), lambda state: state.depth >= 2 or state.confidence() < 0.3]
    opt1, one = compare_policies(pols, token, t, d, 3, cost)
    opt2, two = compare_policies(pols, token, t, d, 3, cost, workers=2)
    opt3, three = compare_policies(pols, token, t, d, 3, cost, workers=reversed_map([]))
    assert opt1.value == opt2.value == opt3.value
    _same_policy_values(one, two)
    _same_policy_values(one, three)
    for bad, err in BAD:
        with pytest.raises(err, match="workers"):
            compare_policies(pols, token, t, d, 3, cost, workers=bad)


def _same_design(a, b):
    assert a.drafting.name == b.drafting.name
    for f in ("expected_accepted", "searched", "nodes", "status"):
        assert getattr(a, f) == getattr(b, f), f
    assert (a.throughput is None) == (b.throughput is None)
    if a.throughput is not None:
        assert a.throughput.rate == b.throughput.rate and a.throughput.tokens == b.throughput.tokens


@pytest.mark.parametrize("with_cost", [False, True])
def test_shape_search_on_1_and_2_workers(with_cost):
    from specsim.structure import CostModel, optimal_tree, search_shapes
    from specsim.verifiers import specinfer

    t, d = random_model(3, 0), random_model(3, 1)
    cost = CostModel(draft=0.05, target=lambda n: 1.0 + 0.05 * n) if with_cost else None  # a lambda travels too
    one = search_shapes(specinfer, t, d, budget=4, L=2, cost=cost)
    assert one.searched > 2
    _same_design(one, search_shapes(specinfer, t, d, budget=4, L=2, cost=cost, workers=2))
    calls = []
    _same_design(one, search_shapes(specinfer, t, d, budget=4, L=2, cost=cost, workers=reversed_map(calls)))
    assert calls == [one.searched]
    _same_design(one, optimal_tree(t, d, 4, "specinfer", "sampled", L=2, cost=cost, workers=2))
    for bad, err in BAD:
        with pytest.raises(err, match="workers"):
            search_shapes(specinfer, t, d, budget=4, L=2, workers=bad)
        with pytest.raises(err, match="workers"):
            optimal_tree(t, d, 4, workers=bad)


def test_tree_tables_on_1_and_2_workers():
    from specsim import real_evaluation, real_trees

    ds = real_trees.load_trees(real_trees.committed_trees())
    # each applies to some groups only (chains, without replacement, i.i.d.): the same on every route
    names = ["block", "sequoia", "gbv"]
    calls = []
    one = real_evaluation.evaluate_trees(ds, names, progress=False)
    two = real_evaluation.evaluate_trees(ds, names, progress=False, workers=2)
    three = real_evaluation.evaluate_trees(ds, names, progress=False, workers=reversed_map(calls))
    assert calls == [sum(len(g) for g in one.groups.values())]
    for other in (two, three):
        assert list(other.groups) == list(one.groups) and other.skipped == one.skipped
        assert other.contexts == one.contexts and other.samples == one.samples
        for key, g in one.groups.items():
            assert list(other.groups[key]) == list(g)
            for name, summ in g.items():
                o = other.groups[key][name]
                assert (o.per_tree.tobytes(), o.per_tree_tail.tobytes(), o.skipped) == (summ.per_tree.tobytes(),
                                                                                summ.per_tree_tail.tobytes(), summ.skipped)
    assert ("temperature:0.7", "iid:2") in one.groups and "gbv" in one.groups[("temperature:0.7", "iid:2")]
    for bad, err in BAD:
        with pytest.raises(err, match="workers"):
            real_evaluation.evaluate_trees(ds, names, workers=bad)


def _without_times(out: str) -> str:
    # the time column (each row's own seconds) is the only cell that may differ
    return "\n".join(re.sub(r"\s+\d+\.\d{3}(?=\s|$)", " T", line) if re.match(r"^\w+\s+-?\d\.\d{5}", line) else line
                     for line in out.splitlines())


def test_compare_command_on_1_and_2_workers(capsys):
    from specsim.cli import main

    argv = ["compare", "--V", "3", "--L", "2", "--drafting", "iid:2"]
    assert main(argv) == 0
    one = capsys.readouterr().out
    assert main([*argv, "--workers", "2"]) == 0
    two = capsys.readouterr().out
    assert _without_times(one) == _without_times(two)
    assert len(re.findall(r"^\w+\s+-?\d\.\d{5}", one, re.M)) > 5 and " T" in _without_times(one)
    for bad in ("0", "-2"):
        assert main([*argv, "--workers", bad]) == 2
        assert "--workers must be 1 (serial)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*argv, "--workers", "2.5"])


def test_figures_on_1_and_2_workers(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from paper_figs._common import make_and_save

    names = ["fig_block_efficiency", "fig_lossy_frontier"]
    assert make_and_save(names, True, tmp_path / "one") == 0
    assert make_and_save(names, True, tmp_path / "two", workers=2) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in out] == names * 2  # reported in the order asked
    files = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert len(files) == 3 * len(names)
    for f in files:
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes(), f


def test_figures_command_checks_workers(capsys):
    pytest.importorskip("matplotlib")
    from paper_figs.__main__ import main

    with pytest.raises(ValueError, match="--workers"):
        main(["--quick", "--only", "fig_block_efficiency", "--workers", "0"])


def test_one_copy_of_the_worker_logic():
    """Only specsim/parallel.py starts workers: no other module of the package or the figures
    imports joblib or multiprocessing."""
    from pathlib import Path

    root = Path(parallel.__file__).resolve().parents[1]
    users = sorted(str(p.relative_to(root)) for d in ("specsim", "paper_figs") for p in (root / d).rglob("*.py")
                   if re.search(r"^\s*(import|from) (joblib|multiprocessing)\b", p.read_text(), re.M))
    assert users == ["specsim/parallel.py"]
