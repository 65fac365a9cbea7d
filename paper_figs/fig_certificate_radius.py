"""Acceptance-certificate radius of the relaxed greedy rules vs the draft's margin.

D*(b, x) = inf { Div(p || b) : the rule rejects x under target p } (docs/theory.md §10.2): if the true
target is within D* of the reference b, the drafted token x = argmax b is accepted.  Measures the
closed forms of :func:`lp.radius.acceptance_radius` for strict greedy, additive, multiplicative and
top-m in three divergences, against the margin-only lower bounds of :func:`lp.radius.margin_radius`
(the baseline: worst case over every b with margin Delta = b_(1) - b_(2)), which must lie below
them.  Context: A. Sharma, "When Is a Draft Accepted?", arXiv 2606.30265
(abstract only; the closed forms are this project's).
"""
from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np

from ._common import FigureResult, command, main_one

NAME = "fig_certificate_radius"
TOP_PAIR = 0.8          # b_(1) + b_(2); the remaining mass is split evenly over two more tokens


def reference(margin: float) -> np.ndarray:
    """b = (c + Delta/2, c - Delta/2, r/2, r/2) with 2c = TOP_PAIR, r = 1 - TOP_PAIR (x = token 0).

    >>> reference(0.2).round(6).tolist()
    [0.5, 0.3, 0.1, 0.1]
    """
    c, r = TOP_PAIR / 2, 1.0 - TOP_PAIR
    return np.array([c + margin / 2, c - margin / 2, r / 2, r / 2])


def make(quick: bool = False) -> FigureResult:
    from lp.radius import (acceptance_radius, additive_greedy, margin_radius, multiplicative_greedy,
                           strict_greedy, top_m)

    rules = (("strict greedy", strict_greedy(), "-"), ("additive eps = 0.05", additive_greedy(0.05), "--"),
             ("multiplicative lam = 0.5", multiplicative_greedy(0.5), "-."), ("top-2", top_m(2), ":"))
    d_max = TOP_PAIR - (1.0 - TOP_PAIR)          # beyond it b_(2) < r/2 and the runner-up changes
    margins = np.linspace(0.0, d_max, 13 if quick else 121)
    kinds = (("kl", "KL(p || b)"), ("kl_reverse", "KL(b || p)"), ("tv", "TV(p, b)"))
    fig, axes = plt.subplots(1, len(kinds), figsize=(11, 3.6))
    for ax, (kind, label) in zip(axes, kinds):
        for name, rule, style in rules:
            ax.plot(margins, [acceptance_radius(rule, reference(d), 0, kind) for d in margins], style, label=name)
        lb1 = np.array([margin_radius(d, kind) for d in margins])
        lb2 = np.array([margin_radius(d, kind, m=2) for d in margins])
        ax.plot(margins, lb1, "k-", lw=2.5, alpha=0.3, label="margin-only bound (greedy)")
        ax.plot(margins, lb2, "k:", lw=2.5, alpha=0.3, label="margin-only bound (top-2)")
        # the bound must sit below the strict-greedy and top-2 radii it bounds
        g = np.array([acceptance_radius(rules[0][1], reference(d), 0, kind) for d in margins])
        t2 = np.array([acceptance_radius(rules[3][1], reference(d), 0, kind) for d in margins])
        if np.any(lb1 > g + 1e-12) or np.any(lb2 > t2 + 1e-12):
            raise RuntimeError(f"margin-only bound above the radius in {kind}")
        ax.set_xlabel("margin Delta = b_(1) - b_(2)")
        ax.set_title(f"radius in {label}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("certificate radius D*")
    axes[0].legend(frameon=False, fontsize=7)
    fig.tight_layout()
    anchor = acceptance_radius(strict_greedy(), [0.5, 0.3, 0.15, 0.05], 0, "kl")
    if abs(anchor - 0.025732) > 1e-6:                # public anchor, docs/theory.md §12
        raise RuntimeError(f"strict-greedy KL radius anchor is {anchor!r}, expected 0.025732")
    caption = (
        f"Certificate radius D*(b, x) = inf Div(p, b) over targets p that reject x = argmax b, for four "
        f"relaxed acceptance rules (lp.radius.acceptance_radius, closed forms of docs/theory.md §10.2), along "
        f"b = (0.4 + Delta/2, 0.4 - Delta/2, 0.1, 0.1), Delta = 0..{d_max:.1f} ({margins.size} points); any "
        f"target within D* of b accepts x. Grey: the margin-only lower bounds (lp.radius.margin_radius; worst "
        f"case b_(1) + b_(2) = 1), checked to lie below the strict-greedy and top-2 radii. Anchor: strict "
        f"greedy at b = (0.5, 0.3, 0.15, 0.05) has KL radius {anchor:.6f} (docs/theory.md §12: 0.025732). "
        f"Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
