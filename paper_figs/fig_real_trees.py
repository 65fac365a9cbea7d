"""The headline comparisons on real SmolLM2 draft trees: paired differences with prompt-clustered intervals.

Reads the committed real-tree dataset (:func:`specsim.real_trees.committed_trees`), evaluates it
exactly per tree (:func:`specsim.real_evaluation.evaluate_trees`) and draws the paired comparisons
of the seed claims (:func:`specsim.real_evaluation.claim_comparisons`) as small multiples, one
panel per claim and drafter: the mean difference, its 95% interval over prompts (the unit sampled
independently) and, for contrast, the narrower interval that treats pairs as independent.  The
whole dataset takes a few seconds, so ``--quick`` makes the same figure.
"""
from __future__ import annotations

import sys

import matplotlib.pyplot as plt

from ._common import FigureResult, command, main_one

NAME = "fig_real_trees"


def _verifier_names(ds) -> list[str]:
    from specsim.drafts import parse_drafting
    from specsim.verifiers import verifiers_for

    names: list[str] = []
    for process in ds.manifest["processes"]:
        names += [v.name for v in verifiers_for(parse_drafting(process)) if v.name not in names]
    return names


def _headline(kind: str, c) -> bool:
    """The comparisons the seed claims are about (the full set: ``specsim real trees tables``): on
    i.i.d. rollouts the traversal variants against SpecTr, the optimal-transport verifier; for
    delayed expansion SpecInfer and traversal; every comparison of the other claims."""
    if kind == "i.i.d. rollouts":
        return c.b.startswith("spectr on iid:")
    if kind == "delayed vs root":
        return c.a.split(" on ")[0] in ("specinfer", "traversal")
    return True


def make(quick: bool = False) -> FigureResult:
    from specsim import real_evaluation, real_trees

    ds = real_trees.load_trees(real_trees.committed_trees())
    ev = real_evaluation.evaluate_trees(ds, _verifier_names(ds), progress=False)
    claims = {key: [c for c in cs if _headline(key[1], c)]
              for key, cs in real_evaluation.claim_comparisons(ev).items()}   # (drafter, claim) -> [Comparison]
    m = ds.manifest
    drafts = list(dict.fromkeys(d for d, _ in claims))
    kinds = list(dict.fromkeys(k for _, k in claims))
    rows_per = [max(len(claims.get((d, k), [])) for d in drafts) for k in kinds]
    fig, axes = plt.subplots(len(kinds), len(drafts), figsize=(7.4 * len(drafts), 0.42 * sum(rows_per) + 1.2 * len(kinds)),
                             squeeze=False, gridspec_kw={"height_ratios": [max(r, 1) for r in rows_per]})
    lines, resolved = [], 0
    for row, kind in enumerate(kinds):
        for col, draft in enumerate(drafts):
            ax = axes[row, col]
            cs = claims.get((draft, kind), [])
            for y, c in enumerate(cs):
                ax.plot([c.pair_lo, c.pair_hi], [y + 0.18] * 2, "-", color="0.6", lw=1.2)  # pairs as independent
                ax.plot([c.lo, c.hi], [y] * 2, "-", color="k", lw=2.4)                     # over prompts
                sig = c.lo > 0 or c.hi < 0
                resolved += sig
                ax.plot(c.diff, y, "o", ms=5, mec="k", mfc="k" if sig else "white")
                lines.append(f"{draft} | {c.a} - {c.b}: {c.diff:+.3f} [{c.lo:+.3f}, {c.hi:+.3f}] over "
                             f"{c.n_clusters} prompts ({c.unit} pairs: [{c.pair_lo:+.3f}, {c.pair_hi:+.3f}], n = {c.n})")
            ax.axvline(0.0, color="k", lw=0.8, ls="--")
            ax.set_yticks(range(len(cs)), [f"{c.a}  -  {c.b}" for c in cs], fontsize=7)
            ax.set_ylim(-0.6, max(len(cs), 1) - 0.4)
            ax.invert_yaxis()
            ax.grid(axis="x", alpha=0.3)
            ax.set_title(f"{kind} (drafter {draft})", fontsize=9)
            if row == len(kinds) - 1:
                ax.set_xlabel("paired difference in E[tau] (accepted tokens per step)")
    fig.tight_layout()
    caption = (
        f"The headline comparisons on real SmolLM2-135M-Instruct draft trees (specsim/data/smollm2_trees: {len(ds)} "
        f"trees, depth L = {m['L']}, T = {m['T']}, {len(m['prompts'])} prompts x positions {m['positions']}, "
        f"{m['samples']} trees per (context, drafter, process), seed {m['seed']}, rows stored to tail {m['tail']:g}), "
        f"one panel per claim and drafter (specsim.real_evaluation.claim_comparisons; on i.i.d. rollouts the "
        f"traversal variants against SpecTr, for delayed expansion SpecInfer and traversal; every comparison: "
        f"`specsim real trees tables`). E[tau | tree] is exact per "
        f"tree; a point is the mean paired difference a - b; black bar: 95% t interval over prompts (differences "
        f"averaged within prompt, the unit that was sampled independently); grey bar above it: the interval that "
        f"treats every tree or context pair as independent, shown for contrast. Filled point: the prompt interval "
        f"excludes 0 ({resolved} of {len(lines)}). " + "; ".join(lines) + f". Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
