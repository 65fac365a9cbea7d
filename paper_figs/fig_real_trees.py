"""Block efficiency on real SmolLM2 draft trees: every verifier on every draft process, exactly per tree.

Reads the committed real-tree dataset (:func:`specsim.real_trees.committed_trees`) and evaluates it
with :func:`specsim.real_evaluation.evaluate_trees`: for each stored tree and verifier the exact
E[tau | tree] over the verifier's own randomness (Rao-Blackwellised), averaged over the trees of
each (drafter, process) group.  Top row: block efficiency E[tau] + 1 per verifier and process with
95% intervals (mean +- 1.96 standard errors over trees; lossy rules hollow).  Bottom row:
P(tau >= d) by depth d for traversal and the process's multi-draft baseline (SpecInfer, or
Sequoia without replacement).  The whole dataset takes a few seconds, so ``--quick`` makes the same
figure.
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


def make(quick: bool = False) -> FigureResult:
    from specsim import real_evaluation, real_trees

    ds = real_trees.load_trees(real_trees.committed_trees())
    ev = real_evaluation.evaluate_trees(ds, _verifier_names(ds), progress=False)
    m = ds.manifest
    drafts, processes, L = m["drafts"], m["processes"], int(m["L"])
    names = list(dict.fromkeys(n for g in ev.groups.values() for n in g))
    colours = {n: plt.cm.tab20(i % 20) for i, n in enumerate(names)}
    fig, axes = plt.subplots(2, len(drafts), figsize=(6.5 * len(drafts), 7.2), squeeze=False)
    width = 0.8 / len(names)
    lines = []
    for col, draft in enumerate(drafts):
        ax, axt = axes[0, col], axes[1, col]
        for i, process in enumerate(processes):
            g = ev.groups.get((draft, process), {})
            parts = []
            for j, name in enumerate(names):
                s = g.get(name)
                if s is None or s.skipped:
                    continue
                x = i - 0.4 + (j + 0.5) * width
                ax.errorbar(x, s.mean + 1, yerr=1.96 * s.se, fmt="o", ms=3.5, lw=0.9, color=colours[name],
                            mfc=colours[name] if s.lossless else "white",
                            label=(name + ("" if s.lossless else " (lossy)")) if i == 0 or name not in
                            {n for p in processes[:i] for n in ev.groups.get((draft, p), {})} else None)
                parts.append(f"{name} {s.mean + 1:.3f} +- {1.96 * s.se:.3f}")
            baseline = "sequoia" if process.startswith("swor") else "specinfer"
            for name, style in ((baseline, "-o"), ("traversal", "--s")):
                s = g.get(name)
                if s is not None and not s.skipped:
                    axt.plot(range(1, L + 1), s.tail, style, ms=3.5, color=plt.cm.tab10(i % 10),
                             label=f"{process}, {name}")
            lines.append(f"{draft} | {process} ({len(ev.contexts.get((draft, process), []))} trees): "
                         + ", ".join(parts))
        ax.set_xticks(range(len(processes)), processes, fontsize=8)
        ax.set_title(f"draft {draft}", fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        axt.set_xticks(range(1, L + 1))
        axt.set_xlabel("depth d")
        axt.grid(alpha=0.3)
        axt.legend(frameon=False, fontsize=6, ncol=2)
    axes[0, 0].set_ylabel("block efficiency E[tau] + 1 (95% interval)")
    axes[1, 0].set_ylabel("P(tau >= d)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(len(labels), 6), frameon=False, fontsize=7)
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    caption = (
        f"Block efficiency E[tau] + 1 on real SmolLM2-135M-Instruct draft trees (specsim/data/smollm2_trees: "
        f"{len(ds)} trees, depth L = {L}, target temperature T = {m['T']}, {len(m['prompts'])} prompts x "
        f"positions {m['positions']}, {m['samples']} trees per (context, drafter, process), seed {m['seed']}, "
        f"rows stored to tail {m['tail']:g}). E[tau | tree] is exact per tree (specsim.real_evaluation.evaluate_trees); "
        f"points are means over a group's trees with 95% intervals (1.96 s.e.; hollow = lossy rule). "
        f"Bottom: P(tau >= d) by depth for SpecInfer (Sequoia on swor) solid and traversal dashed. Intervals are over trees of few "
        f"contexts; differences between verifiers are paired in `specsim real trees tables`. "
        + "; ".join(lines) + f". Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
