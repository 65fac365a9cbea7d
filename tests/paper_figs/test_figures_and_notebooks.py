"""Every notebook (jupytext percent scripts) converts and executes, draws at least one figure and prints
no warning, stderr or progress-bar fragment; JupyterLab opens them as notebooks on double-click (the
repository's labconfig); `python -m paper_figs --quick` runs and writes under the current directory
(or --out), never into the package; each figure runs alone; the kernel figure reads the kernel
benchmark's JSON."""
from __future__ import annotations

import doctest
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def run(args, cwd, timeout=900, env=ENV):
    r = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_converts_and_cites_the_theory(path, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("jupytext")
    out = tmp_path / f"{path.stem}.ipynb"
    run(["-m", "jupytext", "--to", "notebook", "--output", str(out), str(path)], cwd=ROOT, timeout=120)
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    kinds = {c.cell_type for c in nb.cells}
    assert kinds == {"markdown", "code"}
    assert any("docs/theory.md §" in c.source for c in nb.cells if c.cell_type == "markdown")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path, monkeypatch):
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("SPECSIM_QUICK", "1")           # the kernel inherits it
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    nb = jupytext.read(path)
    monkeypatch.delenv("MPLBACKEND", raising=False)    # the kernel's inline backend makes the PNGs
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    images, problems = 0, []
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.output_type == "stream":
                texts = [out.text]
                if out.name == "stderr":
                    problems.append(f"cell {i}: stderr: {out.text[:300]!r}")
            elif out.output_type in ("display_data", "execute_result"):
                images += "image/png" in out.data
                texts = [v for k, v in out.data.items() if k.startswith("text/")]
            else:
                texts = []
            for text in texts:
                if "Warning" in text or "\r" in text:
                    problems.append(f"cell {i}: warning or progress-bar fragment: {text[:300]!r}")
    assert not problems, "\n".join(problems)
    assert images >= 1, f"{path.stem} draws no figure (no image/png output)"


def test_jupyterlab_opens_python_files_as_notebooks():
    """`.jupyter/labconfig/default_setting_overrides.json` (read from every folder on the Jupyter config
    path, e.g. JUPYTER_CONFIG_PATH=$PWD/.jupyter) makes jupytext's viewer the default for Python files:
    the setting `jupytext-config set-default-viewer python` writes.  notebooks/README.md says how."""
    path = ROOT / ".jupyter" / "labconfig" / "default_setting_overrides.json"
    overrides = json.loads(path.read_text())
    viewers = overrides["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]
    assert viewers["python"] == "Jupytext Notebook"
    assert "markdown" not in viewers                   # README.md and the docs stay text
    readme = (ROOT / "notebooks" / "README.md").read_text()
    assert 'JUPYTER_CONFIG_PATH="$PWD/.jupyter" jupyter lab' in readme


def test_paper_figs_quick(quick_figures):
    from paper_figs import FIGURES

    out, stdout, before, after = quick_figures
    assert after == before, "figures must not be written into the package folder"
    skipped = {line.split(":")[0] for line in stdout.splitlines() if ": skipped: " in line}
    for name in FIGURES:
        caption = (out / f"{name}.txt").read_text()
        if name in skipped:
            assert "skipped" in caption
        else:
            assert (out / f"{name}.png").is_file() and (out / f"{name}.pdf").is_file()
            assert f"python -m paper_figs --only {name} --quick" in caption
    assert "fig_block_efficiency" not in skipped


def test_default_output_is_paper_figs_out_under_the_current_directory(tmp_path):
    pytest.importorskip("matplotlib")
    run(["-m", "paper_figs", "--quick", "--only", "fig_block_efficiency"], cwd=tmp_path, timeout=300)
    assert sorted(p.name for p in (tmp_path / "paper_figs_out").iterdir()) == [
        "fig_block_efficiency.pdf", "fig_block_efficiency.png", "fig_block_efficiency.txt"]


def test_a_figure_runs_alone(tmp_path):
    pytest.importorskip("matplotlib")
    run(["-m", "paper_figs.fig_certificate_radius", "--quick"], cwd=tmp_path, timeout=300)
    assert (tmp_path / "paper_figs_out" / "fig_certificate_radius.png").is_file()


def test_kernel_figure_plots_the_kernel_benchmark_json(tmp_path):
    """The benchmark's JSON (here from the Triton interpreter, with a bandwidth added to each kernel
    row as a CUDA run records it) is what the figure plots; without bandwidths it is skipped."""
    pytest.importorskip("matplotlib")
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if torch.cuda.is_available():
        pytest.skip("on a GPU the device check makes the real results")
    results = tmp_path / "benchmarks" / "results" / "kernels.json"
    run([str(ROOT / "benchmarks" / "verify_kernels.py"), "--quick", "--repeats", "1", "--json", str(results)],
        cwd=ROOT, timeout=300, env={**ENV, "TRITON_INTERPRET": "1"})
    r = run(["-m", "paper_figs.fig_kernel_bandwidth", "--out", "figs"], cwd=tmp_path, timeout=300)
    assert "skipped" in r.stdout and "GB/s" in r.stdout

    data = json.loads(results.read_text())
    kernel_rows = [row for row in data["rows"] if row["name"] == "triton kernel"]
    assert kernel_rows
    for row in kernel_rows:
        row["metrics"]["GB/s"] = row["params"]["bytes"] / row["median_s"] / 1e9
    data["context"]["peak_gbs"] = 1.0
    results.write_text(json.dumps(data))
    run(["-m", "paper_figs.fig_kernel_bandwidth", "--out", "figs"], cwd=tmp_path, timeout=300)
    assert (tmp_path / "figs" / "fig_kernel_bandwidth.png").is_file()
    assert data["command"] in (tmp_path / "figs" / "fig_kernel_bandwidth.txt").read_text()


def test_paper_figs_examples_run():
    pytest.importorskip("matplotlib")
    from paper_figs import FIGURES

    attempted = 0
    for name in ["_common", *FIGURES]:
        result = doctest.testmod(importlib.import_module(f"paper_figs.{name}"))
        assert result.failed == 0, name
        attempted += result.attempted
    assert attempted >= 3
