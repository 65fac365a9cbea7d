"""Block efficiency vs draft length L on the block-verification toy pair (exact).

Token-level speculative sampling, block verification, traversal verification (on a chain it is
block verification) and the hierarchical rule as released (lossy: its extra efficiency is bias).
"""
from __future__ import annotations

import matplotlib.pyplot as plt

import specsim as s

from ._common import FigureResult, command

NAME = "fig_block_efficiency"


def _verifiers():
    vs = [s.token, s.block, s.hsd_released]
    try:
        from specsim.verifiers.tree import traversal
        vs.insert(2, traversal)
    except ImportError:
        pass
    return vs


def make(quick: bool = False) -> FigureResult:
    Ls = range(1, 5 if quick else 7)
    target, draft = s.iid([1 / 3, 2 / 3], "p"), s.iid([2 / 3, 1 / 3], "q")
    fig, ax = plt.subplots(figsize=(5, 3.4))
    styles = {"token": "o-", "block": "s-", "traversal": "x--", "hsd_released": "^:"}
    for v in _verifiers():
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
