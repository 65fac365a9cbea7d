"""Tree verifiers' exact E[tau] against the tree LP bound for the same draft process.

For each draft process D (K i.i.d. paths merged into a trie; K distinct root children without
replacement) and depth L, every applicable verifier's E[tau] is computed by the exact engine
(:func:`specsim.check_lossless`, which also flags lossy rules), and the information-agnostic LP
(docs/theory.md §5.2, :func:`lp.verification.verification_lp`) gives max E[tau] over every lossless
verifier with the prefix-plus-one-token output for that D.  Lossless rules lie on or below it.
"""
from __future__ import annotations

import sys

import matplotlib.pyplot as plt

import specsim as s

from ._common import FigureResult, command, main_one

NAME = "fig_tree_vs_lp"
#: One marker per depth L (shape and fill, readable in greyscale).
MARKERS = {1: ("o", "0.0"), 2: ("s", "0.45"), 3: ("^", "0.8")}


def make(quick: bool = False) -> FigureResult:
    from lp.verification import verification_lp
    from specsim.drafts import iid_paths, swor_tree
    from specsim.verifiers import verifiers_for

    V, K, seeds = 3, 2, (0, 1)
    Ls = list(range(1, 3 if quick else 4))
    target = s.random_model(V, seed=seeds[0], name="target")
    draft = s.random_model(V, seed=seeds[1], name="draft")
    processes = (iid_paths(K), swor_tree(K))
    rows = {proc.name: [] for proc in processes}
    notes, bounds = [], []
    for proc in processes:
        lps = [verification_lp(target, draft, L, drafting=proc) for L in Ls]
        bounds.append(f"{proc.name}: " + ", ".join(f"L={L} {x.value:.4f} ({x.n_drafts} trees)" for L, x in zip(Ls, lps)))
        for v in verifiers_for(proc):
            certs = [s.check_lossless(v, target, draft, L, drafting=proc) for L in Ls]
            lossy = not all(c.lossless for c in certs)
            ratios = [c.expected_accepted / b.value for c, b in zip(certs, lps)]
            over = [L for L, r in zip(Ls, ratios) if r > 1 + 1e-7]
            if over and not lossy:
                raise RuntimeError(f"{v.name} is certified lossless but beats the LP at L = {over}")
            if over:
                notes.append(f"{v.name} ({proc.name}) exceeds the LP at L = {over}")
            rows[proc.name].append((v.name + (" (lossy)" if lossy else ""), ratios, lossy))
    height = max(len(r) for r in rows.values())
    fig, axes = plt.subplots(1, len(processes), figsize=(10, 0.32 * height + 1.6), squeeze=False)
    lo = min(min(r) for rs in rows.values() for _, r, _ in rs)
    for ax, proc in zip(axes[0], processes):
        rs = sorted(rows[proc.name], key=lambda row: row[1][-1])   # by the deepest L's ratio
        for y, (label, ratios, lossy) in enumerate(rs):
            ax.plot(ratios, [y] * len(ratios), "-", color="0.85", lw=1, zorder=1)
            for L, r in zip(Ls, ratios):
                m, fill = MARKERS[L]
                ax.plot(r, y, m, ms=6, mec="k", mfc="white" if lossy else fill, zorder=2,
                        label=f"L = {L}" if y == 0 else None)
        ax.axvline(1.0, color="k", lw=1.2, ls="--")
        ax.set_yticks(range(len(rs)), [label for label, _, _ in rs], fontsize=8)
        ax.set_xlim(min(lo, 0.95) - 0.01, 1.01)
        ax.set_title(f"{proc.name}, V = {V}, K = {K}")
        ax.set_xlabel("E[tau] / tree LP bound (1 = the optimum)")
        ax.grid(axis="x", alpha=0.3)
    axes[0, -1].legend(frameon=False, fontsize=8, loc="upper left")
    fig.tight_layout()
    caption = (
        f"Exact expected accepted tokens E[tau] of every tree verifier that applies to the draft process "
        f"(specsim.verifiers.verifiers_for) as a fraction of the information-agnostic tree LP bound (docs/theory.md "
        f"§5.2; Thomas & Pal, arXiv 2602.16961) for the same process, on a context-dependent random pair "
        f"(random_model(V={V}, seed={seeds[0]}) target, seed={seeds[1]} draft), K = {K}, one marker per depth "
        f"L = {Ls[0]}..{Ls[-1]} (circle, square, triangle); hollow markers and '(lossy)': the rule fails the exact "
        f"completion check, so it may exceed the bound. Every verifier is shown; the axis starts below the smallest "
        f"ratio. The bounds (E[tau] of the LP optimum): {'; '.join(bounds)}."
        + (f" {'; '.join(notes)}." if notes else "") + f" Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
