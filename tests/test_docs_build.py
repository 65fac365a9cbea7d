"""The documentation site builds with warnings as errors, and its pages show what they should.

Runs ``python -m sphinx -W -b html docs OUT`` in a subprocess (the gallery at ``--quick`` sizes, as
CI builds it; about a minute here) and reads the front page, one API page and the gallery page of
the result.  ``scripts/check_site.py`` renders the same pages in a headless browser.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sphinx")
pytest.importorskip("myst_parser")
pytest.importorskip("numpydoc")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory, quick_figures) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "MPLBACKEND": "Agg", "SPECSIM_DOCS_FIGS_DIR": str(quick_figures[0])}  # drawn once per session
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "docs", str(out), "-q"],
                         cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 0, "sphinx -W failed:\n" + run.stderr[-4000:]
    return out


def _text(path: Path) -> str:
    return re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8"))


def test_front_page_links_the_guides_api_and_gallery(site):
    html = (site / "index.html").read_text(encoding="utf-8")
    for target in ("guide/verifiers.html", "guide/testing.html", "_generated/api/index.html",
                   "_generated/gallery.html", "theory.html"):
        assert target in html, target


def test_an_api_page_documents_its_names_with_their_math_and_examples(site):
    page = _text(site / "_generated" / "api" / "specsim.structure.html")
    for name in ("optimal_tree", "CostModel", "optimal_stopping", "check_policy_lossless"):
        assert name in page, name
    assert "target path" in page                    # a docstring body, not only a name
    assert "&gt;&gt;&gt;" in (site / "_generated" / "api" / "specsim.structure.html").read_text(encoding="utf-8")


def test_gallery_shows_every_paper_figure_with_its_caption(site):
    from paper_figs import FIGURES

    html = (site / "_generated" / "gallery.html").read_text(encoding="utf-8")
    for name in FIGURES:
        assert name in html, name
        # a figure is shown, or its caption says why not (the kernel figure needs GPU results)
        assert f"{name}.png" in html or f"{name} skipped" in html, name
    assert "(no caption written)" not in html
    assert sum(f"{name}.png" in html for name in FIGURES) >= len(FIGURES) - 1
