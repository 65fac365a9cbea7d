"""Each benchmark script runs in --quick mode from the repository root and writes the JSON the
harness promises: its fields, baselines that are rows of the same run, ratios that are the
quotient of the two medians, and each script's own agreement checks."""
from __future__ import annotations

import doctest
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"


def _load_harness():
    spec = importlib.util.spec_from_file_location("benchmarks_harness", BENCH / "_harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                     # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


harness = _load_harness()


def run_benchmark(name: str, tmp_path: Path, *extra: str, env: dict | None = None, timeout: float = 120) -> dict:
    out = tmp_path / f"{name}.json"
    r = subprocess.run([sys.executable, f"benchmarks/{name}.py", "--quick", "--repeats", "1", "--json", str(out),
                        *extra], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "# machine:" in r.stdout and "ratio" in r.stdout
    data = json.loads(out.read_text())  # strict JSON: the harness writes no NaN or Infinity
    check_schema(data, name)
    return data


def check_schema(data: dict, name: str, quick: bool = True) -> None:
    assert set(harness.RUN_FIELDS) <= set(data)
    assert data["benchmark"] == name and data["quick"] is quick
    assert data["command"].startswith(f"python benchmarks/{name}.py" + (" --quick" if quick else ""))
    assert set(harness.MACHINE_FIELDS) <= set(data["machine"])
    assert data["machine"]["cores"] >= 1 and data["machine"]["python"]
    rows = {(r["case"], r["name"]): r for r in data["rows"]}
    assert len(rows) == len(data["rows"]) > 0, "every (case, name) is one row"
    baselines = {f"{case} / {name}": r for (case, name), r in rows.items()}
    assert any(r["baseline"] is not None for r in rows.values()), "no row is compared with a baseline"
    for r in data["rows"]:
        assert set(harness.ROW_FIELDS) <= set(r)
        assert 0 < r["min_s"] <= r["median_s"] and r["repeats"] >= 1 and r["warmup"] >= 0
        if r["baseline"] is None:
            assert r["ratio"] is None and r["baseline_median_s"] is None
        else:
            base = baselines[r["baseline"]]             # measured in the same run
            assert base["baseline"] is None and data["rows"].index(base) < data["rows"].index(r)
            assert r["baseline_median_s"] == base["median_s"]
            assert r["ratio"] == pytest.approx(r["median_s"] / base["median_s"], rel=1e-12)


def test_exact_engine(tmp_path):
    data = run_benchmark("exact_engine", tmp_path)
    engine = [r for r in data["rows"] if r["name"] == "check_lossless"]
    assert engine and all(r["metrics"]["agree"] for r in engine)


def test_tree_verifiers(tmp_path):
    data = run_benchmark("tree_verifiers", tmp_path)
    trees = [r for r in data["rows"] if r["baseline"] is not None]
    assert {r["name"] for r in trees} >= {"specinfer", "gbv", "sequoia", "traversal"}
    assert all(r["metrics"]["lossless"] and r["metrics"]["objects"] > 0 for r in trees)


def test_tree_search(tmp_path):
    data = run_benchmark("tree_search", tmp_path)
    rows = {(r["case"], r["name"]): r for r in data["rows"]}
    searched = [r for r in data["rows"] if r["name"] == "search_shapes"]
    assert searched
    for r in searched:
        base = rows[tuple(r["baseline"].split(" / ", 1))]
        # the searched optimum is at least the largest shape's E[tau] (that shape is in the space)
        assert r["metrics"]["E_tau"] >= base["metrics"]["E_tau"] - 1e-12 and r["metrics"]["shapes"] >= 2


def test_lp_bounds(tmp_path):
    pytest.importorskip("cvxpy")
    data = run_benchmark("lp_bounds", tmp_path)
    checked = [r for r in data["rows"] if "abs_diff" in r["metrics"]]
    assert {r["name"] for r in checked} == {"multidraft_lp", "verification_lp (build + solve)"}
    assert all(r["metrics"]["abs_diff"] < 1e-6 for r in checked)
    wor = [r for r in data["rows"] if r["params"].get("replacement") is False]
    iid = {r["params"]["K"]: r for r in data["rows"] if r["params"].get("replacement") is True}
    assert all(r["metrics"]["alpha"] >= iid[r["params"]["K"]]["metrics"]["alpha"] - 1e-12 for r in wor)


def test_lossy_certificates(tmp_path):
    pytest.importorskip("cvxpy")
    data = run_benchmark("lossy_certificates", tmp_path)
    cvx = [r for r in data["rows"] if r["name"] == "frontier_cvxpy"]
    assert len(cvx) == 3 and all(r["metrics"]["abs_beta_diff"] < 1e-5 for r in cvx)
    assert all(0 <= r["metrics"]["beta"] <= 1 for r in data["rows"] if "beta" in r["metrics"])


def test_kernels_under_the_triton_interpreter(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("the GPU run is scripts/device_check.sh's")
    data = run_benchmark("verify_kernels", tmp_path, env={"TRITON_INTERPRET": "1"})
    kernel = [r for r in data["rows"] if r["name"] == "triton kernel"]
    assert {r["params"]["mode"] for r in kernel} == {"token", "block"}
    assert all(r["baseline"].endswith("/ torch reference (baseline)") for r in kernel)
    assert data["context"]["cuda"] is False


def test_bad_repeats_is_a_usage_error():
    r = subprocess.run([sys.executable, "benchmarks/exact_engine.py", "--repeats", "0"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--repeats must be >= 1" in r.stderr


def test_measure_reports_median_and_min_of_the_timed_calls():
    ticks = iter([0.3, 0.1, 0.2])
    calls = []
    timing, last = harness.measure(lambda: calls.append(1) or len(calls), repeats=3, warmup=2,
                                   timer=lambda fn: (next(ticks), fn()))
    assert (timing.median_s, timing.min_s, timing.repeats, timing.warmup) == (0.2, 0.1, 3, 2)
    assert len(calls) == 5 and last == 5                  # two untimed calls, then three timed ones
    with pytest.raises(ValueError, match="repeats"):
        harness.measure(lambda: None, repeats=0)


def test_harness_examples_run():
    result = doctest.testmod(harness, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0


def test_issue27(tmp_path):
    """Goals 1 and 3 (quick sizes): interleaved rows, each subject against its same-run baseline,
    and the fast paths agree with the old ones they are timed against."""
    data = run_benchmark("issue27", tmp_path, "--only", "1,3")
    iid = [r for r in data["rows"] if r["name"] == "bucketed (new)"]
    assert len(iid) == 4 and all(r["metrics"]["abs_diff_old"] <= 1e-13 for r in iid)
    wor = [r for r in data["rows"] if r["name"] == "multidraft_bound (new)"]
    assert len(wor) == 8
    assert all(r["metrics"].get("abs_err", r["metrics"].get("abs_diff_old")) <= 1e-12 for r in wor)
    assert all(r["metrics"].get("abs_err", r["metrics"].get("abs_diff_numpy_path")) <= 1e-12 for r in wor)
    numpy_rows = [r for r in data["rows"] if r["name"] == "multidraft_bound, numpy path"]
    assert len(numpy_rows) == 8 and all(r["metrics"].get("abs_err", 0.0) <= 1e-12 for r in numpy_rows)
    cert = [r for r in data["rows"] if r["name"] == "certify (new)"]
    assert len(cert) == 9 and all(r["metrics"]["max_field_diff_old"] <= 1e-10 for r in cert)
    assert set(data["context"]["goals"]) == {"1 (with replacement)", "1 (without replacement)", "3"}
    assert all("cpu_s" in r["metrics"] for r in data["rows"])


def test_issue27_goal2(tmp_path):
    """Goal 2 (quick sizes): the level-at-once default path gives the same certificate as the
    per-row path it is timed against, and every subject is a row against the same-run final pass."""
    data = run_benchmark("issue27", tmp_path, "--only", "2")
    rows = [r for r in data["rows"] if r["name"] == "first call, generator stream (default)"]
    assert len(rows) == 2 and all(r["metrics"]["same_certificate_as_per_row"] is True for r in rows)
    assert {r["name"] for r in data["rows"]} >= {"final pass (baseline)", "repeat call (counter stream)",
                                                 "first call, per-row rows (old path)", "first call, counter stream"}


def test_real_tree_build(tmp_path):
    """Goal 7 (quick size): the in-step build and the one-tree-at-a-time growth draw the same trees
    (the script checks it), each against the time inside the in-step build's forward passes."""
    pytest.importorskip("transformers")
    from specsim import real
    try:
        real.model_path()
    except ValueError as e:  # the SmolLM2 wheel is not installed
        pytest.skip(str(e))
    data = run_benchmark("real_tree_build", tmp_path, timeout=600)  # loads the real model
    rows = {r["name"]: r for r in data["rows"]}
    step = rows["in-step build, context tasks (goal <= 1.1x)"]
    one = rows["trees one by one, context tasks (previous growth)"]
    assert step["ratio"] >= 1 and step["metrics"]["passes"] < one["metrics"]["passes"]


RUNS = sorted((ROOT / "docs" / "results" / "benchmarks").glob("*.json"))
#: Benchmarks that time GPU kernels: their committed runs are scripts/device_check.sh's, in
#: benchmarks/results/ (H200, 2026-12-04), not full-size CPU runs.
GPU_ONLY = {"verify_kernels", "verify_kernels_profile"}


def test_gpu_runs_are_committed_and_the_profile_refuses_a_machine_without_cuda():
    for name in ("kernels.json", "kernels_profile.json"):
        assert json.loads((ROOT / "benchmarks" / "results" / name).read_text())
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("on a GPU the profile runs (scripts/device_check.sh)")
    r = subprocess.run([sys.executable, str(BENCH / "verify_kernels_profile.py")], capture_output=True, text=True,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert r.returncode != 0 and "needs a CUDA device" in r.stderr


def test_every_benchmark_has_a_committed_full_size_run():
    assert {p.stem for p in RUNS} >= {p.stem for p in BENCH.glob("*.py") if not p.stem.startswith("_")} - GPU_ONLY


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_committed_run_is_valid_and_rendered_from_its_json(path):
    """docs/results/benchmarks.md shows these runs through the harness's markdown (generated at
    build time): every row appears with its own median and ratio, none copied by hand."""
    data = json.loads(path.read_text())
    # NAME.json, or NAME_PART.json for a run of some of a benchmark's sections (issue27_goals13)
    assert path.stem == data["benchmark"] or path.stem.startswith(data["benchmark"] + "_")
    check_schema(data, data["benchmark"], quick=False)
    table = harness.markdown(data)
    for r in data["rows"]:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3g}"
        assert f"| {r['case']} | {r['name']} | {harness.format_seconds(r['median_s'])} |" in table
        assert f" | {ratio} | " in table
    assert "{include} ../_generated/benchmark_tables.inc" in (ROOT / "docs" / "results" / "benchmarks.md").read_text()
