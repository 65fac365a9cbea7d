"""Render the built documentation site in headless Chromium and check that its pages show content.

Usage::

    python -m sphinx -W -b html docs docs/_build/html
    python scripts/check_site.py [docs/_build/html] [--out /tmp/site-shots]

For the front page, one API page (specsim.structure) and the gallery page it takes a screenshot
(1280 x 2000) and the DOM after scripts ran (``--dump-dom``), then checks that the DOM holds the
page's expected headings and that the screenshot is not blank (more than 1% of its pixels differ
from the background).  Prints one line per page and exits 1 if any check fails.  Needs a
``chromium`` (or ``chromium-browser`` / ``google-chrome``) binary: ``apt-get install chromium``.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

PAGES = {  # page -> strings its rendered DOM must contain
    "index.html": ("specsim", "Guides", "API reference"),
    "_generated/api/specsim.structure.html": ("specsim.structure", "optimal_tree", "CostModel"),
    "_generated/gallery.html": ("Gallery", "fig_block_efficiency", "fig_draft_structure"),
}


def browser() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return name
    sys.exit("no chromium binary: apt-get install chromium")


def render(exe: str, page: Path, shot: Path) -> str:
    common = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    subprocess.run(common + ["--window-size=1280,2000", f"--screenshot={shot}", page.as_uri()],
                   check=True, capture_output=True, timeout=120)
    return subprocess.run(common + ["--dump-dom", page.as_uri()], check=True, capture_output=True, text=True,
                          timeout=120).stdout


def non_blank(shot: Path) -> float:
    """Share of pixels that differ from the most common colour (the background)."""
    import matplotlib.image as mpimg
    import numpy as np

    img = (mpimg.imread(shot)[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours, counts = np.unique(img, axis=0, return_counts=True)
    return 1.0 - counts.max() / img.shape[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("site", nargs="?", default="docs/_build/html")
    ap.add_argument("--out", default="/tmp/site-shots")
    a = ap.parse_args(argv)
    site, out = Path(a.site).resolve(), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    exe, failed = browser(), 0
    for rel, wanted in PAGES.items():
        page = site / rel
        if not page.exists():
            print(f"FAIL {rel}: not built")
            failed += 1
            continue
        shot = out / (rel.replace("/", "_").replace(".html", ".png"))
        dom = render(exe, page, shot)
        missing = [w for w in wanted if w not in dom]
        ink = non_blank(shot)
        ok = not missing and ink > 0.01
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {rel}: DOM {len(dom):,} chars, missing {missing or 'nothing'}, "
              f"{ink:.1%} of the screenshot is not background -> {shot}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
