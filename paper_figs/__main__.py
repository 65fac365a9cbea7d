"""Regenerate every figure: ``python -m paper_figs [--quick] [--only NAME ...] [--out DIR]``."""
from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

from . import FIGURES
from ._common import OUT, save


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m paper_figs", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes (used in CI)")
    ap.add_argument("--only", nargs="+", choices=FIGURES, help="figures to make (default: all)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT})")
    args = ap.parse_args(argv)
    failed = []
    for name in args.only or FIGURES:
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"paper_figs.{name}")
            result = module.make(quick=args.quick)
        except Exception as e:  # report every figure, then fail at the end
            failed.append(name)
            print(f"{name}: FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        paths = save(result, args.out)
        status = "skipped: " + result.caption if result.skipped else ", ".join(p.name for p in paths)
        print(f"{name}: {status} ({time.perf_counter() - t0:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
