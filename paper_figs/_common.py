"""Shared plumbing for figure scripts: deterministic saving with captions."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


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
    return f"python -m paper_figs --only {name}" + (" --quick" if quick else "")
