"""Every notebook (jupytext percent scripts) executes, and `python -m paper_figs --quick` runs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, tmp_path):
    jupytext = pytest.importorskip("jupytext")
    nbclient = pytest.importorskip("nbclient")
    nb = jupytext.read(path)
    os.environ["SPECSIM_QUICK"] = "1"
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()


def test_paper_figs_quick(tmp_path):
    pytest.importorskip("matplotlib")
    r = subprocess.run([sys.executable, "-m", "paper_figs", "--quick", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert "fig_block_efficiency.png" in pngs
    for txt in tmp_path.glob("*.txt"):
        assert "python -m paper_figs" in txt.read_text() or "skipped" in r.stdout
