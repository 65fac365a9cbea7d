"""Shared plumbing for figure scripts: deterministic saving with captions, and the command line."""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt

# No matplotlib.use("Agg") at import: notebooks import the figure modules' helpers, and switching the
# backend there would turn the kernel's inline backend off (no figure shown).  The command line
# switches to Agg in make_and_save.

#: Default output folder, relative to the current directory (never the installed package).
OUT = Path("paper_figs_out")


@dataclass(frozen=True)
class FigureResult:
    """A figure, its caption and whether it was skipped (with the reason as caption)."""

    name: str
    figure: "plt.Figure | None"
    caption: str
    skipped: bool = False


def save(result: FigureResult, out_dir: Path = OUT) -> list[Path]:
    """Write ``name.png``, ``name.pdf`` and ``name.txt`` (the caption) without timestamps."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    if result.figure is not None:
        png, pdf = out_dir / f"{result.name}.png", out_dir / f"{result.name}.pdf"
        result.figure.savefig(png, dpi=130, metadata={"Software": None})
        result.figure.savefig(pdf, metadata={"CreationDate": None, "ModDate": None, "Producer": None,
                                              "Creator": None})
        plt.close(result.figure)
        paths += [png, pdf]
    txt = out_dir / f"{result.name}.txt"
    txt.write_text(result.caption.strip() + "\n")
    return paths + [txt]


def command(name: str, quick: bool) -> str:
    """The command that regenerates figure ``name`` (quoted in its caption).

    >>> command("fig_tree_vs_lp", quick=True)
    'python -m paper_figs --only fig_tree_vs_lp --quick'
    """
    return f"python -m paper_figs --only {name}" + (" --quick" if quick else "")


def _make_one(task) -> tuple[str, str | None, float]:
    """Make and save one figure (a task: figures share nothing): (line to print, error or None, seconds)."""
    name, quick, out_dir = task
    plt.switch_backend("Agg")                    # files only, the same bytes on every machine
    t0 = time.perf_counter()
    try:
        result = importlib.import_module(f"paper_figs.{name}").make(quick=quick)
    except Exception as e:  # report every figure, then fail at the end
        return f"{name}: FAILED: {type(e).__name__}: {e}", name, time.perf_counter() - t0
    paths = save(result, out_dir)
    status = "skipped: " + result.caption if result.skipped else ", ".join(str(p) for p in paths)
    return f"{name}: {status}", None, time.perf_counter() - t0


def make_and_save(names, quick: bool, out_dir: Path, workers=1) -> int:
    """Make and save each figure module of ``names``; report each, then return 1 if any failed.

    The figures are independent tasks over ``workers`` (1; an int n > 1 or -1 for processes, or a
    map-like callable: :mod:`specsim.parallel`), reported in the order of ``names``; every figure
    has its own fixed seeds, so the files do not depend on the number of workers."""
    from specsim.parallel import worker_map

    failed = []
    for line, error, seconds in worker_map(workers)(_make_one, [(name, quick, out_dir) for name in names]):
        if error is None:
            print(f"{line} ({seconds:.1f} s)")
        else:
            failed.append(error)
            print(line, file=sys.stderr)
    return 1 if failed else 0


def parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Options shared by ``python -m paper_figs`` and each ``python -m paper_figs.NAME``."""
    ap = argparse.ArgumentParser(prog=prog, description=description)
    ap.add_argument("--quick", action="store_true", help="small sizes (used in CI)")
    ap.add_argument("--out", type=Path, default=OUT,
                    help=f"output folder (default ./{OUT}/ under the current directory)")
    return ap


def main_one(name: str, argv=None) -> int:
    """``python -m paper_figs.NAME [--quick] [--out DIR]``: make one figure."""
    args = parser(f"python -m paper_figs.{name}", f"Make {name} (PNG, PDF and caption).").parse_args(argv)
    return make_and_save([name], args.quick, args.out)
