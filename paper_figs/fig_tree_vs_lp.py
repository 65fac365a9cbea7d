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
STYLES = {"specinfer": "o-", "specinfer_first_path": "o:", "spectr": "s-", "khisti": "D-", "gbv": "^-",
          "gbv_capped": "^:", "sequoia": "v-", "traversal": "x-", "deterministic_children": ".:"}


def make(quick: bool = False) -> FigureResult:
    from lp.verification import verification_lp
    from specsim.drafts import iid_paths, swor_tree
    from specsim.verifiers import verifiers_for

    V, K, seeds = 3, 2, (0, 1)
    Ls = list(range(1, 3 if quick else 4))
    target = s.random_model(V, seed=seeds[0], name="target")
    draft = s.random_model(V, seed=seeds[1], name="draft")
    processes = (iid_paths(K), swor_tree(K))
    fig, axes = plt.subplots(2, len(processes), figsize=(10, 6.4), sharex=True,
                             gridspec_kw={"height_ratios": (3, 2)})
    notes = []
    for ax, rax, proc in zip(axes[0], axes[1], processes):
        lps = [verification_lp(target, draft, L, drafting=proc) for L in Ls]
        ax.plot(Ls, [x.value for x in lps], "k-", lw=2.5, alpha=0.35, label="tree LP bound")
        rax.axhline(1.0, color="k", lw=2.5, alpha=0.35)
        for v in verifiers_for(proc):
            certs = [s.check_lossless(v, target, draft, L, drafting=proc) for L in Ls]
            lossy = not all(c.lossless for c in certs)
            ys = [c.expected_accepted for c in certs]
            over = [L for L, y, b in zip(Ls, ys, lps) if y > b.value + 1e-7]
            if over and not lossy:
                raise RuntimeError(f"{v.name} is certified lossless but beats the LP at L = {over}")
            if over:
                notes.append(f"{v.name} ({proc.name}) exceeds the LP at L = {over}")
            ax.plot(Ls, ys, STYLES.get(v.name, ".-"), ms=5, label=v.name + (" (lossy)" if lossy else ""))
            rax.plot(Ls, [y / b.value for y, b in zip(ys, lps)], STYLES.get(v.name, ".-"), ms=5)
        rax.set_xticks(Ls)
        rax.set_xlabel("tree depth L")
        rax.set_ylim(0.85, 1.01)
        rax.grid(alpha=0.3)
        ax.set_title(f"{proc.name}, V = {V}")
        ax.grid(alpha=0.3)
        ax.legend(frameon=False, fontsize=7)
        sizes = ", ".join(f"L={L}: {x.n_drafts} trees" for L, x in zip(Ls, lps))
        notes.append(f"{proc.name}: LP over {sizes}")
    axes[0, 0].set_ylabel("E[tau] (accepted draft tokens)")
    axes[1, 0].set_ylabel("E[tau] / LP bound")
    fig.tight_layout()
    caption = (
        f"Exact expected accepted tokens E[tau] of every tree verifier that applies to the draft process "
        f"(specsim.verifiers.verifiers_for) vs the information-agnostic tree LP bound (docs/theory.md §5.2; "
        f"Thomas & Pal, arXiv 2602.16961) for the same process, on a context-dependent random pair "
        f"(random_model(V={V}, seed={seeds[0]}) target, seed={seeds[1]} draft), K = {K}, L = {Ls[0]}..{Ls[-1]}. "
        f"Bottom: E[tau] as a fraction of the bound (axis cut at 0.85). Labels marked lossy fail the exact completion check. {'; '.join(notes)}. "
        f"Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
