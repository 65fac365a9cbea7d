"""The headline tables of docs/results/real_trees.md from a real-tree dataset (issue 23), in Markdown.

Per drafter: mean E[tau] per process and verifier; then the seed claims' comparisons
(:func:`~specsim.real_evaluation.claim_comparisons` through ``compare_units`` of
``scripts/real_evidence.py``), each with its 95% t interval over prompts (the unit of the
interval: paired differences averaged within a prompt first) and, beside it, the interval that
takes the pairs (trees or contexts) as independent; and the per-depth differences in
P(tau >= d) for traversal against SpecTr.  ``scripts/real_evidence.py`` prints every comparison.

Run from the repository root::

    PYTHONPATH=$PWD python scripts/evidence_tables.py DATASET_DIR [--workers N] > tables.md

``--workers`` evaluates the (group, verifier) tasks in N processes (-1: every core); the tables
are the same for any N (:mod:`specsim.parallel`).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from real_evidence import compare_units  # noqa: E402

from specsim import real_trees  # noqa: E402

from specsim.real_evaluation import evaluate_trees  # noqa: E402

MEANS = ("block", "specinfer", "traversal", "spectr", "khisti", "khisti_optimal", "gbv")
VERSUS = {  # claim -> (a verifier, b verifier) pairs on the same process, or process pairs
    "i.i.d. rollouts": [("traversal", "specinfer"), ("spectr", "specinfer"), ("khisti_optimal", "specinfer"),
                        ("gbv", "specinfer"), ("traversal", "spectr")],
}
DELAYED = ("specinfer", "traversal", "spectr", "khisti_optimal")


def _row(r, rel=False) -> str:
    be = r["hi"] / r["rel_hi"] if rel and r["rel_hi"] else None  # b's block efficiency, mean_b + 1
    pct = f" ({100 * r['diff'] / be:+.1f}% [{100 * r['lo'] / be:+.1f}, {100 * r['hi'] / be:+.1f}])" if be else ""
    mark = "**" if r["resolved"] else ""
    return (f"{mark}{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]{mark}{pct} ({r['n_prompts']} prompts) | "
            f"[{r['pair_lo']:+.3f}, {r['pair_hi']:+.3f}] ({r['unit']}s, n = {r['n']})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--workers", type=int, default=1, help="processes for the evaluation (-1: every core)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    ds = real_trees.load_trees(a.dataset)
    ev = evaluate_trees(ds, progress=False, workers=a.workers)
    rows = compare_units(ev)
    m = ds.manifest
    drafts, procs = m["drafts"], m["processes"]
    print(f"<!-- {ds.path}: {len(ds)} trees, sha256 {m['data_sha256']}; evaluated and compared in "
          f"{time.perf_counter() - t0:.0f} s -->\n")
    print("**Mean E[tau] per tree** (block efficiency minus 1), every tree of the group:\n")
    print("| drafter | process | trees | " + " | ".join(MEANS) + " |")
    print("|---|---|---|" + "---|" * len(MEANS))
    for d in drafts:
        for p in procs:
            g = ev.groups.get((d, p), {})
            if not g:
                continue
            n = len(next(iter(g.values())).per_tree)
            cells = [f"{g[v].mean:.3f}" if v in g and not g[v].skipped else "–" for v in MEANS]
            print(f"| {d} | {p} | {n} | " + " | ".join(cells) + " |")
    by = {(r["draft"], r["a"], r["b"]): r for r in rows}
    print("\n**GBV on iid:K minus block verification on a chain** (paired over contexts; bold: the interval "
          "over prompts excludes 0; in brackets after it the difference as % of block's block efficiency):\n")
    print("| drafter | K | over prompts | over contexts as independent |")
    print("|---|---|---|---|")
    for d in drafts:
        for p in procs:
            r = by.get((d, f"gbv on {p}", "block on chain"))
            if r:
                print(f"| {d} | {p.split(':')[1]} | {_row(r, rel=True)} |")
    print("\n**Verifiers on the same i.i.d. rollouts** (paired over trees):\n")
    print("| drafter | process | a - b | over prompts | over trees as independent |")
    print("|---|---|---|---|---|")
    for d in drafts:
        for p in (p for p in procs if p.startswith("iid:")):
            for va, vb in VERSUS["i.i.d. rollouts"]:
                r = by.get((d, f"{va} on {p}", f"{vb} on {p}"))
                if r:
                    print(f"| {d} | {p} | {va} - {vb} | {_row(r)} |")
    print("\n**Per depth, traversal - SpecTr on the same trees**: P(tau >= d) differences, d = 1..L, "
          "95% t interval over prompts:\n")
    L = int(m["L"])
    print("| drafter | process | " + " | ".join(f"d = {k}" for k in range(1, L + 1)) + " |")
    print("|---|---|" + "---|" * L)
    for d in drafts:
        for p in (p for p in procs if p.startswith("iid:")):
            r = by.get((d, f"traversal on {p}", f"spectr on {p}"))
            if r:
                c = r["comparison"]
                print(f"| {d} | {p} | " + " | ".join(
                    f"{x:+.3f} [{lo:+.3f}, {hi:+.3f}]" for x, lo, hi in zip(c.tail_diff, c.tail_lo, c.tail_hi)) + " |")
    print("\n**Delayed expansion minus root branching** (delayed:d,2 - iid:2, the same verifier, paired over "
          "contexts):\n")
    print("| drafter | verifier | " + " | ".join(p for p in procs if p.startswith("delayed:")) + " |")
    print("|---|---|" + "---|" * sum(p.startswith("delayed:") for p in procs))
    for d in drafts:
        for v in DELAYED:
            cells = []
            for p in (p for p in procs if p.startswith("delayed:")):
                r = by.get((d, f"{v} on {p}", f"{v} on iid:{p.split(',')[-1]}"))
                cells.append("–" if r is None else
                             f"{'**' if r['resolved'] else ''}{r['diff']:+.3f} [{r['lo']:+.3f}, {r['hi']:+.3f}]"
                             f"{'**' if r['resolved'] else ''}")
            print(f"| {d} | {v} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
