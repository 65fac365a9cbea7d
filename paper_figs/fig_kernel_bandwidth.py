"""Verification-kernel throughput against memory bandwidth, from saved GPU benchmark results.

A verification kernel reads every probability row once, so its speed limit is the memory
bandwidth: achieved GB/s = bytes moved / time, compared with the device's peak (Triton tutorials'
roofline style).  This figure never times anything itself (this machine may have no GPU): it
plots a results file written by the reference_gpu benchmark on a GPU machine, and is skipped,
with the reason, when there is none.

Results file (JSON), first found of :data:`RESULT_FILES`; ``rows`` are the row dicts that
``reference_gpu.bench.bench_case`` builds (only GPU rows carry ``kernel_s`` and ``GB/s``)::

    {"device": "NVIDIA H200", "peak_gbs": 4800.0, "command": "python -m reference_gpu.bench",
     "rows": [{"mode": "token", "B": 32, "L": 4, "V": 32768, "kernel_s": 1.2e-5, "GB/s": 900.0,
               "ref_s": ...}, ...]}

``python -m reference_gpu.bench --json reference_gpu/bench_results.json`` writes it;
``scripts/device_check.sh`` does so on a GPU machine.
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import matplotlib.pyplot as plt

from ._common import FigureResult, command

NAME = "fig_kernel_bandwidth"
ROOT = Path(__file__).resolve().parents[1]
#: where a benchmark run may have left its results (relative to the repository root)
RESULT_FILES = ("reference_gpu/bench_results.json", "reference_gpu/results/bench.json",
                "paper_figs/data/kernel_bench.json")
REQUIRED = ("mode", "B", "L", "V")


def find_results():
    """(path, parsed JSON) of the first results file present, or (None, reason)."""
    for rel in RESULT_FILES:
        path = ROOT / rel
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except json.JSONDecodeError as e:
                return None, f"{rel} is not valid JSON ({e})"
            rows = data.get("rows") if isinstance(data, dict) else None
            if not rows or not all(isinstance(r, dict) and all(k in r for k in REQUIRED) for r in rows):
                return None, f"{rel} has no 'rows' with fields {REQUIRED}"
            if not any(r.get("kernel_s") and r.get("GB/s") for r in rows):
                return None, f"{rel} has no kernel timings (a CPU-only benchmark run times only the reference)"
            return path, data
    bench = ROOT / "reference_gpu" / "bench.py"
    why = ("reference_gpu/bench.py does not exist yet" if not bench.is_file() else
           "no GPU benchmark results saved")
    return None, (f"{why}; looked for {', '.join(RESULT_FILES)} (run the benchmark on a GPU machine and "
                  f"save its JSON there)")


def make(quick: bool = False) -> FigureResult:
    path, data = find_results()
    if path is None:
        return FigureResult(NAME, None, f"{NAME} skipped: {data}.", skipped=True)
    series = defaultdict(list)
    for r in data["rows"]:
        if r.get("kernel_s") and r.get("GB/s"):
            key = f"{r['mode']}, L = {r['L']}, V = {r['V']}"
            series[key].append((int(r["B"]), float(r["GB/s"])))
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for key, pts in sorted(series.items()):
        pts.sort()
        ax.plot([b for b, _ in pts], [g for _, g in pts], "o-", ms=4, label=key)
    peak = data.get("peak_gbs")
    if peak:
        ax.axhline(float(peak), color="k", ls="--", lw=1, label=f"peak {float(peak):.0f} GB/s")
    ax.set_xscale("log")
    ax.set_xlabel("batch size B (requests)")
    ax.set_ylabel("achieved bandwidth [GB/s]")
    ax.set_title(str(data.get("device", "GPU")), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=7)
    fig.tight_layout()
    caption = (f"Achieved memory bandwidth (bytes read and written / kernel time) of the verification kernels "
               f"vs batch size (byte model of reference_gpu/bench.py), from {path.relative_to(ROOT)} (device {data.get('device', 'unknown')}; benchmark "
               f"command: {data.get('command', 'not recorded')}). Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)
