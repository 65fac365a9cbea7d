"""Regenerate every figure: ``python -m paper_figs [--quick] [--only NAME ...] [--out DIR] [--workers N]``.

Writes NAME.png, NAME.pdf and NAME.txt (the caption) for each figure to ``./paper_figs_out/`` under
the current directory, or to ``--out DIR``; ``--workers N`` makes N figures at a time in worker
processes (-1: every core; the files are the same bytes as with one).
"""
from __future__ import annotations

import sys

from specsim.parallel import check_workers

from . import FIGURES
from ._common import make_and_save, parser


def main(argv=None) -> int:
    ap = parser("python -m paper_figs", __doc__)
    ap.add_argument("--only", nargs="+", choices=FIGURES, help="figures to make (default: all)")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes, one figure per task (default 1; -1: every core)")
    args = ap.parse_args(argv)
    return make_and_save(args.only or FIGURES, args.quick, args.out, check_workers(args.workers, "--workers"))


if __name__ == "__main__":
    sys.exit(main())
