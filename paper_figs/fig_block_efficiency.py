"""Block efficiency vs draft length L on the block-verification toy pair (exact).

Measures E[tau] + 1 from the exact engine for block verification, traversal verification (on a
chain it is block verification) and the hierarchical rule as released, against token-level
speculative sampling as the baseline; block verification is the LP optimum among lossless
verifiers (docs/theory.md §4, §5.1), so the released hierarchical rule's extra efficiency is bias
(the engine labels it lossy).
"""
from __future__ import annotations

import sys

import matplotlib.pyplot as plt

import specsim as s
from specsim.verifiers import traversal

from ._common import FigureResult, command, main_one

NAME = "fig_block_efficiency"


def make(quick: bool = False) -> FigureResult:
    Ls = range(1, 5 if quick else 7)
    target, draft = s.iid([1 / 3, 2 / 3], "p"), s.iid([2 / 3, 1 / 3], "q")
    fig, ax = plt.subplots(figsize=(5, 3.4))
    styles = {"token": "o-", "block": "s-", "traversal": "x--", "hsd_released": "^:"}
    for v in (s.token, s.block, traversal, s.hsd_released):
        certs = [s.check_lossless(v, target, draft, L) for L in Ls]
        label = v.name + ("" if all(c.lossless for c in certs) else " (lossy)")
        ax.plot(list(Ls), [c.block_efficiency for c in certs], styles.get(v.name, ".-"), label=label)
    ax.set_xticks(list(Ls))
    ax.set_xlabel("draft length L")
    ax.set_ylabel("block efficiency E[tau] + 1")
    ax.set_title("p = (1/3, 2/3), q = (2/3, 1/3): exact")
    ax.legend(frameon=False)
    fig.tight_layout()
    caption = (f"Exact block efficiency vs L on the block-verification toy pair (Sun et al., arXiv 2403.10444), "
               f"L = 1..{max(Ls)}. Made by `{command(NAME, quick)}`. Block and traversal coincide (the LP "
               f"optimum); the released hierarchical rule lies above the optimum because it is lossy.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
