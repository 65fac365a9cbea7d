"""Verification-kernel throughput against the device's peak memory bandwidth, from saved results.

A verification kernel reads every probability row once, so its speed limit is the memory
bandwidth: achieved GB/s = bytes of the byte model / kernel time, plotted against the device's
peak (the baseline; Triton tutorials' roofline style).  This figure never times anything itself
(this machine may have no GPU): it plots the JSON that ``python benchmarks/verify_kernels.py --json PATH``
writes on a GPU machine (``scripts/device_check.sh`` writes :data:`RESULT_FILE`), and is skipped,
with the reason, when there is none.  Rows used: ``name == "triton kernel"`` with
``metrics["GB/s"]`` (only CUDA runs have it) and ``params`` mode, B, L, V; ``context`` gives the
device and its peak.
"""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib.pyplot as plt

from ._common import FigureResult, command, main_one

NAME = "fig_kernel_bandwidth"
#: The kernel benchmark's results, relative to the current directory (the repository root).
RESULT_FILE = Path("benchmarks/results/kernels.json")
KERNEL_ROW = "triton kernel"
#: The one-program-per-request kernel (``splits=1``), drawn dotted beside the default path.
ONE_PROGRAM_ROW = "triton kernel, one program per request"
PARAMS = ("mode", "B", "L", "V")


def kernel_rows(data, name: str = KERNEL_ROW) -> list[dict]:
    """The benchmark rows named ``name`` that carry a kernel bandwidth (CUDA runs only).

    >>> row = {"name": "triton kernel", "params": {"mode": "token", "B": 1, "L": 4, "V": 64}, "metrics": {}}
    >>> kernel_rows({"rows": [row]})                       # an interpreter run: no GB/s
    []
    >>> row["metrics"]["GB/s"] = 900.0
    >>> len(kernel_rows({"rows": [row]}))
    1
    """
    rows = data.get("rows") if isinstance(data, dict) else None
    return [r for r in rows or () if isinstance(r, dict) and r.get("name") == name
            and all(k in r.get("params", {}) for k in PARAMS) and r.get("metrics", {}).get("GB/s")]


def find_results(path: Path = RESULT_FILE):
    """(path, parsed JSON) when ``path`` holds GPU kernel timings, else (None, the reason)."""
    if not path.is_file():
        return None, (f"no kernel benchmark results at {path} (under {Path.cwd()}); run "
                      f"`python benchmarks/verify_kernels.py --json {path}` on a GPU machine")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        return None, f"{path} is not valid JSON ({e})"
    if not kernel_rows(data):
        return None, (f"{path} has no '{KERNEL_ROW}' rows with a GB/s metric (a run without CUDA times "
                      f"no GPU kernel)")
    return path, data


def make(quick: bool = False) -> FigureResult:
    path, data = find_results()
    if path is None:
        return FigureResult(NAME, None, f"{NAME} skipped: {data}.", skipped=True)
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    colours = {}
    for name, style in ((KERNEL_ROW, "o-"), (ONE_PROGRAM_ROW, "x:")):
        series = defaultdict(list)
        for r in kernel_rows(data, name):
            par = r["params"]
            series[f"{par['mode']}, L = {par['L']}, V = {par['V']}"].append((int(par["B"]), float(r["metrics"]["GB/s"])))
        for key, pts in sorted(series.items()):
            pts.sort()
            line, = ax.plot([b for b, _ in pts], [g for _, g in pts], style, ms=4, color=colours.get(key),
                            label=key if name == KERNEL_ROW else None)
            colours.setdefault(key, line.get_color())
    if kernel_rows(data, ONE_PROGRAM_ROW):
        ax.plot([], [], "kx:", ms=4, label="dotted: one program per request")
    context = data.get("context", {})
    peak = context.get("peak_gbs")
    if peak:
        ax.axhline(float(peak), color="k", ls="--", lw=1, label=f"peak {float(peak):.0f} GB/s")
    ax.set_xscale("log")
    ax.set_yscale("log")  # 2 GB/s at B = 1 to ~700 at B = 128: a linear axis hides the small batches
    ax.set_xlabel("batch size B (requests)")
    ax.set_ylabel("achieved bandwidth [GB/s]")
    ax.set_title(str(context.get("device", "GPU")), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    caption = (f"Achieved memory bandwidth (bytes of the byte model in benchmarks/verify_kernels.py / time of one "
               f"verify_chain call, CUDA events; host work included, which benchmarks/verify_kernels_profile.py "
               f"separates) of the Triton verification kernels vs batch size (solid: the automatic path, where "
               f"reference_gpu.kernels.chain_plan decides whether a request's vocabulary is split over several "
               f"programs; dotted: one program per request), against the device's peak (dashed), from {path} "
               f"(device {context.get('device', 'unknown')}, dtype {context.get('dtype', 'unknown')}; benchmark "
               f"command: {data.get('command', 'not recorded')}; run {data.get('machine', {}).get('date', '')}). "
               f"Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
