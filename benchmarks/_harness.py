"""Shared harness of the benchmark scripts in this folder.

Every script builds one :class:`Run`, times each subject with :meth:`Run.time` and names the
baseline it is compared against, a measurement taken earlier IN THE SAME RUN on the same machine
(the ratio column is subject median / baseline median, so 0.01 means a hundred times faster).
Each timing is ``warmup`` untimed calls followed by ``repeats`` timed ones, reported as their
median and minimum.  The run starts with a machine banner (CPU model, cores, Python, numpy and
torch versions, date) and, with ``--json PATH``, writes everything to PATH:

    {"benchmark": str, "description": str, "command": str, "quick": bool,
     "machine": {"cpu", "cores", "platform", "python", "numpy", "torch", "date"},
     "context": {...},                      # benchmark-specific facts (e.g. the GPU)
     "rows": [{"case", "name", "median_s", "min_s", "repeats", "warmup", "baseline",
               "baseline_median_s", "ratio", "params", "metrics"}, ...]}

``baseline`` is ``"case / name"`` of the baseline row (null for a baseline itself) and ``ratio``
is null with it.  ``--quick`` selects CI-sized cases.  Scripts run from the repository root as
``python benchmarks/NAME.py``; Python then puts this folder on ``sys.path``, which is how they
import this module.  Benchmarks stay serial (no ``workers=``): timings must not share cores.
"""
from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

#: Fields every JSON row carries (the test suite checks them).
ROW_FIELDS = ("case", "name", "median_s", "min_s", "repeats", "warmup", "baseline", "baseline_median_s", "ratio",
              "params", "metrics")
#: Top-level fields of the JSON file.
RUN_FIELDS = ("benchmark", "description", "command", "quick", "machine", "context", "rows")
MACHINE_FIELDS = ("cpu", "cores", "platform", "python", "numpy", "torch", "date")


@dataclass(frozen=True)
class Timing:
    """Median and minimum wall time in seconds of ``repeats`` timed calls after ``warmup`` untimed ones."""

    median_s: float
    min_s: float
    repeats: int
    warmup: int


def wall_timer(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds one call of ``fn`` takes by ``time.perf_counter``, and what it returned."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def measure(fn: Callable[[], Any], repeats: int, warmup: int = 1,
            timer: Callable[[Callable[[], Any]], tuple[float, Any]] = wall_timer) -> tuple[Timing, Any]:
    """Call ``fn`` ``warmup`` times untimed, then ``repeats`` times timed by ``timer``.

    ``timer(fn) -> (seconds, value)`` times one call (:func:`wall_timer`; the kernel benchmark
    passes a CUDA-event timer).  Returns (:class:`Timing`, the value of the last call), so a
    benchmark can check what it timed without one more call.

    >>> ticks = iter([0.3, 0.1, 0.2])
    >>> measure(lambda: "done", repeats=3, warmup=1, timer=lambda fn: (next(ticks), fn()))
    (Timing(median_s=0.2, min_s=0.1, repeats=3, warmup=1), 'done')
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats!r}")
    for _ in range(warmup):
        fn()
    times, out = [], None
    for _ in range(repeats):
        t, out = timer(fn)
        times.append(t)
    return Timing(statistics.median(times), min(times), repeats, warmup), out


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict:
    """The banner's facts: CPU model, usable cores, platform, Python/numpy/torch versions, UTC date.

    >>> tuple(machine_info()) == MACHINE_FIELDS
    True
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": _cpu_model(), "cores": cores, "platform": platform.platform(),
            "python": platform.python_version(), "numpy": np.__version__, "torch": _version("torch"),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def llm_like_pair(V: int, seed: int = 0, draft_weight: float = 0.8) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) = (softmax(3 z), softmax(draft_weight * 3 z + e)) with z, e ~ N(0, 1)^V i.i.d.

    A peaked target over a real vocabulary size and a correlated, noisier draft.

    >>> p, q = llm_like_pair(151_936)
    >>> p.shape, round(float(p.sum()), 12), round(float(q.sum()), 12)
    ((151936,), 1.0, 1.0)
    """
    rng = np.random.default_rng(seed)
    logits = 3.0 * rng.standard_normal(V)
    draft_logits = draft_weight * logits + rng.standard_normal(V)
    p = np.exp(logits - logits.max())
    q = np.exp(draft_logits - draft_logits.max())
    return p / p.sum(), q / q.sum()


def format_seconds(s: float | None) -> str:
    """Seconds with three significant digits in s, ms, us or ns.

    >>> format_seconds(0.0123), format_seconds(4.5e-7), format_seconds(None)
    ('12.3 ms', '450 ns', '-')
    """
    if s is None or not math.isfinite(s):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _format_metric(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


class Run:
    """One benchmark run: options, banner, rows printed as they are measured, JSON at the end.

    ``argv`` defaults to ``sys.argv[1:]``; ``add_arguments(parser)`` may add script options.
    ``quick_repeats`` / ``repeats`` are the default number of timed calls (``--repeats`` overrides).
    """

    def __init__(self, script: str, description: str, argv=None, repeats: int = 5, quick_repeats: int = 2,
                 add_arguments: Callable[[argparse.ArgumentParser], None] | None = None):
        self.name = Path(script).stem
        self.description = description.strip().splitlines()[0]
        ap = argparse.ArgumentParser(prog=f"python benchmarks/{self.name}.py", description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
        ap.add_argument("--quick", action="store_true", help="CI-sized cases (seconds, not minutes)")
        ap.add_argument("--json", type=Path, metavar="PATH", help="also write the results to PATH as JSON")
        ap.add_argument("--repeats", type=int, metavar="N", help="timed calls per measurement")
        if add_arguments is not None:
            add_arguments(ap)
        argv = sys.argv[1:] if argv is None else list(argv)
        self.args = ap.parse_args(argv)
        if self.args.repeats is not None and self.args.repeats < 1:
            ap.error(f"--repeats must be >= 1, got {self.args.repeats}")
        self.quick: bool = self.args.quick
        self.repeats: int = self.args.repeats or (quick_repeats if self.quick else repeats)
        self.command = " ".join([f"python benchmarks/{self.name}.py", *argv])
        self.machine = machine_info()
        self.context: dict = {}
        self.rows: list[dict] = []
        self._header_printed = False

    # ------------------------------------------------------------------ output
    def banner(self, **context) -> None:
        """Print the machine banner; ``context`` (e.g. the GPU) is printed and stored in the JSON."""
        self.context.update(context)
        m = self.machine
        print(f"# benchmarks/{self.name}.py -- {self.description}")
        print(f"# command: {self.command}")
        print(f"# machine: {m['cpu']}, {m['cores']} cores, {m['platform']}; python {m['python']}, "
              f"numpy {m['numpy']}, torch {m['torch'] or 'not installed'}; {m['date']}")
        for k, v in context.items():
            print(f"# {k}: {v}")
        print("# times: median and min of n timed calls after 'warm' untimed ones; ratio = median / "
              "baseline median, the baseline measured in this run")

    def section(self, title: str) -> None:
        print(f"\n## {title}")
        self._header_printed = False

    def _print_row(self, row: dict) -> None:
        if not self._header_printed:
            print(f"{'case':<34} {'name':<32} {'median':>10} {'min':>10} {'warm':>4} {'n':>3} {'ratio':>9}  metrics")
            self._header_printed = True
        ratio = "baseline" if row["baseline"] is None else f"{row['ratio']:.3g}x"
        metrics = "  ".join(f"{k}={_format_metric(v)}" for k, v in row["metrics"].items())
        print(f"{row['case']:<34} {row['name']:<32} {format_seconds(row['median_s']):>10} "
              f"{format_seconds(row['min_s']):>10} {row['warmup']:>4} {row['repeats']:>3} {ratio:>9}  {metrics}", flush=True)

    # ------------------------------------------------------------------ rows
    def record(self, case: str, name: str, timing: Timing, baseline: dict | None = None,
               params: dict | None = None, metrics: dict | None = None) -> dict:
        """Add (and print) one row; ``baseline`` is an earlier row of this run."""
        row = {"case": case, "name": name, "median_s": timing.median_s, "min_s": timing.min_s,
               "repeats": timing.repeats, "warmup": timing.warmup, "baseline": None, "baseline_median_s": None, "ratio": None,
               "params": dict(params or {}), "metrics": dict(metrics or {})}
        if baseline is not None:
            row["baseline"] = f"{baseline['case']} / {baseline['name']}"
            row["baseline_median_s"] = baseline["median_s"]
            row["ratio"] = timing.median_s / baseline["median_s"]
        self.rows.append(row)
        self._print_row(row)
        return row

    def time(self, case: str, name: str, fn: Callable[[], Any], baseline: dict | None = None,
             repeats: int | None = None, warmup: int = 1, params: dict | None = None,
             metrics: Callable[[Timing, Any], dict] | dict | None = None,
             timer: Callable[[Callable[[], Any]], tuple[float, Any]] = wall_timer) -> tuple[dict, Any]:
        """Time ``fn`` (see :func:`measure`) and record it; ``metrics`` may be a function of
        (timing, last value).  Returns (row, last value)."""
        timing, out = measure(fn, self.repeats if repeats is None else repeats, warmup, timer)
        m = metrics(timing, out) if callable(metrics) else metrics
        return self.record(case, name, timing, baseline, params, m), out

    def finish(self) -> dict:
        """The run as a JSON-ready dict; written to ``--json PATH`` when given."""
        payload = {"benchmark": self.name, "description": self.description, "command": self.command,
                   "quick": self.quick, "machine": self.machine, "context": self.context, "rows": self.rows}
        if self.args.json is not None:
            self.args.json.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(_strict(payload), indent=1, allow_nan=False)
            self.args.json.write_text(text + "\n")
            print(f"\n# results written to {self.args.json}")
        return payload


def markdown(payload: dict) -> str:
    """One run (the ``--json`` dict) as a Markdown section: its command (less ``--json PATH``),
    machine and date, then one table row per timing (median, min, calls, the baseline it is
    compared with, the ratio and the metrics).  The documentation's benchmark page is made of these, never of copied numbers.

    >>> row = {"case": "V=4", "name": "engine", "median_s": 0.012, "min_s": 0.011, "repeats": 5, "warmup": 1,
    ...        "baseline": "V=4 / loops", "baseline_median_s": 1.2, "ratio": 0.01, "params": {}, "metrics": {"err": 1e-13}}
    >>> run = {"benchmark": "demo", "description": "A demo.", "command": "python benchmarks/demo.py --json d.json",
    ...        "quick": False, "machine": {"cpu": "CPU", "cores": 2, "platform": "Linux", "python": "3.11", "numpy": "2", "torch": None,
    ...                    "date": "2026-12-04T06:00:00+00:00"}, "context": {}, "rows": [row]}
    >>> print(markdown(run).splitlines()[0])
    ### `python benchmarks/demo.py`
    >>> print(markdown(run).splitlines()[-1])
    | V=4 | engine | 12 ms | 11 ms | 5 | loops (1.2 s) | 0.01 | err=1e-13 |
    """
    m = payload["machine"]
    words = payload["command"].split()
    command = " ".join(w for i, w in enumerate(words) if w != "--json" and (i == 0 or words[i - 1] != "--json"))
    lines = [f"### `{command}`", "",
             f"{payload['description'].strip().splitlines()[0]}  ",
             f"{m['cpu']}, {m['cores']} cores, Python {m['python']}, numpy {m['numpy']}"
             + (f", torch {m['torch']}" if m.get("torch") else "") + f"; {m['date'][:16].replace('T', ' ')} UTC"
             + (" (`--quick` sizes)" if payload["quick"] else "") + ".", ""]
    lines += [f"- {k}: {v}" for k, v in payload["context"].items()]
    if payload["context"]:
        lines.append("")
    lines += ["| case | name | median | min | calls | baseline (same run) | ratio | metrics |",
              "|---|---|---|---|---|---|---|---|"]
    for r in payload["rows"]:
        base = r["baseline"] or "(baseline)"
        if base.startswith(f"{r['case']} / "):                    # the usual case: a baseline of the same case
            base = base[len(r["case"]) + 3:]
        if r["baseline"] is not None:
            base += f" ({format_seconds(r['baseline_median_s'])})"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3g}"
        metrics = ", ".join(f"{k}={_format_metric(v)}" for k, v in r["metrics"].items())
        lines.append(f"| {r['case']} | {r['name']} | {format_seconds(r['median_s'])} | {format_seconds(r['min_s'])} | "
                     f"{r['repeats']} | {base} | {ratio} | {metrics} |")
    return "\n".join(lines) + "\n"


def _strict(x):
    """``x`` with numpy scalars as Python numbers and non-finite floats as None (strict JSON)."""
    if isinstance(x, dict):
        return {str(k): _strict(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_strict(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x
