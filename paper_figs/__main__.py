"""Regenerate every figure: ``python -m paper_figs [--quick] [--only NAME ...] [--out DIR]``.

Writes NAME.png, NAME.pdf and NAME.txt (the caption) for each figure to ``./paper_figs_out/`` under
the current directory, or to ``--out DIR``.
"""
from __future__ import annotations

import sys

from . import FIGURES
from ._common import make_and_save, parser


def main(argv=None) -> int:
    ap = parser("python -m paper_figs", __doc__)
    ap.add_argument("--only", nargs="+", choices=FIGURES, help="figures to make (default: all)")
    args = ap.parse_args(argv)
    return make_and_save(args.only or FIGURES, args.quick, args.out)


if __name__ == "__main__":
    sys.exit(main())
