"""Headline comparisons of a real-tree dataset with prompt-clustered intervals, against the
intervals that take trees (or contexts) as independent (issue 23).

For every :class:`specsim.real_evaluation.Comparison` of :func:`specsim.real_evaluation.claim_comparisons`
the script computes the interval over prompts (paired differences averaged within prompt, t
interval over prompts, the default) and the one over the comparison's own pairs (trees for
verifier comparisons, contexts for process comparisons), and reports which verdicts (interval
excludes 0) change and the median width ratio; with ``--bootstrap`` the cluster bootstrap
interval is printed beside as a check.

Run from the repository root::

    PYTHONPATH=$PWD python scripts/real_evidence.py [DATASET_DIR] [--json out.json]

Default dataset: the committed one (:func:`specsim.real_trees.committed_trees`).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specsim import real_evaluation, real_trees  # noqa: E402


def compare_units(ev) -> list[dict]:
    """One row per headline comparison: the prompt-clustered and the pair-level intervals."""
    by_prompt = real_evaluation.claim_comparisons(ev, "prompt")
    by_pair = real_evaluation.claim_comparisons(ev, "pair")
    rows = []
    for key, cs in by_prompt.items():
        for c, p in zip(cs, by_pair[key]):
            assert (c.a, c.b) == (p.a, p.b)
            rows.append(dict(draft=key[0], claim=key[1], a=c.a, b=c.b, unit=c.unit, n=c.n,
                             n_prompts=c.n_clusters, diff=c.diff, lo=c.lo, hi=c.hi, pair_diff=p.diff,
                             pair_lo=p.lo, pair_hi=p.hi, resolved=c.resolved, pair_resolved=p.resolved,
                             rel_hi=c.relative_hi, pair_rel_hi=p.relative_hi, comparison=c))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset", nargs="?", default=None)
    ap.add_argument("--verifiers", default=None, help="comma-separated (default: every registered one that applies)")
    ap.add_argument("--bootstrap", type=int, default=0, help="cluster bootstrap resamples (0: none)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    ds = real_trees.load_trees(a.dataset or real_trees.committed_trees())
    ev = real_evaluation.evaluate_trees(ds, a.verifiers.split(",") if a.verifiers else None, progress=False)
    t_eval = time.perf_counter() - t0
    rows = compare_units(ev)
    m = ds.manifest
    print(f"# {ds.path}: {len(ds)} trees, {len(m['prompts'])} prompts x positions {m['positions']}, L = {m['L']}, "
          f"context source {m.get('context_source', 'prompt')}, data sha256 {m['data_sha256']}; evaluated in "
          f"{t_eval:.0f} s")
    print("# diff [95% t interval over prompts] | the same over the pair unit (trees or contexts as independent)")
    print("| drafter | claim | a - b | pair unit (n) | prompts | diff | over prompts | over pairs | width ratio | "
          "verdict change |" + (" bootstrap |" if a.bootstrap else ""))
    print("|---" * (10 + bool(a.bootstrap)) + "|")
    ratios, changes = [], []
    for r in rows:
        ratio = (r["hi"] - r["lo"]) / (r["pair_hi"] - r["pair_lo"]) if r["pair_hi"] > r["pair_lo"] else float("nan")
        ratios.append(ratio)
        change = "" if r["resolved"] == r["pair_resolved"] else (
            "resolved only over pairs" if r["pair_resolved"] else "resolved only over prompts")
        if change:
            changes.append(r)
        boot = ""
        if a.bootstrap:
            blo, bhi = r["comparison"].bootstrap(B=a.bootstrap, seed=0)
            boot = f" [{blo:+.3f}, {bhi:+.3f}] |"
        print(f"| {r['draft']} | {r['claim']} | {r['a']} - {r['b']} | {r['unit']} ({r['n']}) | {r['n_prompts']} | "
              f"{r['diff']:+.3f} | [{r['lo']:+.3f}, {r['hi']:+.3f}] | [{r['pair_lo']:+.3f}, {r['pair_hi']:+.3f}] | "
              f"{ratio:.2f} | {change} |{boot}")
    res_pair = sum(r["pair_resolved"] for r in rows)
    res_prompt = sum(r["resolved"] for r in rows)
    fin = [x for x in ratios if np.isfinite(x)]
    print(f"\n# {len(rows)} comparisons; resolved over pairs {res_pair}, over prompts {res_prompt}; "
          f"{len(changes)} verdicts change; median width ratio prompts / pairs {np.median(fin):.2f} "
          f"(tree-paired {np.median([x for x, r in zip(ratios, rows) if r['unit'] == 'tree' and np.isfinite(x)]):.2f}, "
          f"context-paired {np.median([x for x, r in zip(ratios, rows) if r['unit'] == 'context' and np.isfinite(x)] or [np.nan]):.2f})")
    for r in changes:
        print(f"#   {r['draft']} | {r['a']} - {r['b']}: over pairs [{r['pair_lo']:+.3f}, {r['pair_hi']:+.3f}], "
              f"over prompts [{r['lo']:+.3f}, {r['hi']:+.3f}]")
    if a.json:
        Path(a.json).write_text(json.dumps(dict(
            dataset=str(ds.path), sha256=m["data_sha256"], rows=[{k: v for k, v in r.items() if k != "comparison"}
                                                                  for r in rows]), indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
