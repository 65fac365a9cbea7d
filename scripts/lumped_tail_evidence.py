"""How much the lumped tail of a stored real tree moves each verifier's E[tau | tree] (issue 23).

A stored tree is read over a *lumped* vocabulary (:func:`specsim.real_trees.load_trees`): the
tokens kept in any of its rows, plus one bucket token for the B = V - (kept) others, which carry
equal p and equal q within every row.  This script splits the bucket back into B tokens of mass
p_bucket / B and q_bucket / B in every row (the dense tree the lumped one stands for, V tokens)
and evaluates both trees exactly with the same verifier; the difference is what lumping does to
that verifier.  A rule that depends on the rows only through sums that are homogeneous of degree
one in each token's (p, q) -- RRS (SpecInfer, Sequoia), block verification, traversal -- gives the
same value up to rounding.

With ``--against DIR`` it measures the truncation instead: DIR is the same build with ``tail 0``
(every row stored whole; the draws come from the model's rows, so the trees are the same), and
each tree's E[tau | tree] on the truncated rows is compared with the one on the whole rows.

Run from the repository root::

    PYTHONPATH=$PWD python scripts/lumped_tail_evidence.py [DATASET_DIR] [--verifiers ...] [--processes ...]
    PYTHONPATH=$PWD python scripts/lumped_tail_evidence.py DATASET_DIR --against WHOLE_ROWS_DIR

Default: the committed dataset, verifiers spectr, khisti, khisti_optimal, gbv, specinfer,
traversal on every iid:K / delayed tree.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specsim import real_trees  # noqa: E402

from specsim.real_evaluation import _outcome_depths  # noqa: E402
from specsim.drafts import DraftTree  # noqa: E402
from specsim.verifiers import TREE_VERIFIERS  # noqa: E402


def dense_tree(rec: real_trees.TreeRecord, V: int) -> DraftTree | None:
    """The lumped tree with its bucket split into its V - kept tokens (None: no bucket)."""
    t = rec.tree
    B = V - int((rec.vocab >= 0).sum())
    if B <= 1:
        return None

    def split(M):
        return np.concatenate([M[:, :-1], np.repeat(M[:, -1:] / B, B, axis=1)], axis=1)

    return DraftTree(t.tokens, t.parent, split(t.p), split(t.q), t.draws)


def expected_tau(verifier, tree: DraftTree) -> float:
    return sum(pr * d for pr, d in _outcome_depths(verifier, tree))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset", nargs="?", default=None)
    ap.add_argument("--verifiers", nargs="+", default=["specinfer", "traversal", "spectr", "khisti",
                                                       "khisti_optimal", "gbv"])
    ap.add_argument("--processes", nargs="+", default=None, help="default: every iid:K and delayed process")
    ap.add_argument("--against", default=None, help="the same build with tail 0: measure the truncation")
    a = ap.parse_args(argv)
    ds = real_trees.load_trees(a.dataset or real_trees.committed_trees())
    whole = {}
    if a.against:
        w = real_trees.load_trees(a.against)
        for n in range(len(w)):
            r = w[n]
            whole[(r.prompt, r.position, r.draft, r.process, r.sample)] = r
    V = int(ds.manifest["V"])
    procs = a.processes or [p for p in ds.manifest["processes"] if p.startswith(("iid:", "delayed:"))]
    worst: dict = {}
    t0 = time.perf_counter()
    n_trees = 0
    for n in range(len(ds)):
        rec = ds[n]
        if rec.process not in procs:
            continue
        if a.against:
            other = whole.get((rec.prompt, rec.position, rec.draft, rec.process, rec.sample))
            if other is None:
                continue
            # the same draws: model token ids along every node
            if [int(other.vocab[t]) for t in other.tree.tokens[1:]] != [int(rec.vocab[t]) for t in rec.tree.tokens[1:]]:
                raise ValueError(f"tree {n} differs between the two builds; --against needs the same build at tail 0")
            dt = other.tree
        else:
            dt = dense_tree(rec, V)
        if dt is None:
            continue
        n_trees += 1
        for name in a.verifiers:
            v = TREE_VERIFIERS[name]
            if not v.applies_to(real_trees._process(rec.process)[0]):
                continue
            d = expected_tau(v, dt) - expected_tau(v, rec.tree)
            key = (rec.draft, rec.process, name)
            w = worst.setdefault(key, [0.0, -1, 0, 0.0])
            w[2] += 1
            w[3] += d
            if abs(d) > abs(w[0]):
                w[0], w[1] = d, n
    print(f"# {ds.path}: {n_trees} trees (processes {procs}), V = {V}, {time.perf_counter() - t0:.0f} s")
    what = "whole rows - truncated" if a.against else "dense - lumped"
    print(f"| drafter | process | verifier | trees | max abs E[tau | tree] difference, {what} | at tree | "
          f"mean difference |")
    print("|---|---|---|---|---|---|---|")
    for (draft, proc, name), (d, n, c, total) in sorted(worst.items()):
        print(f"| {draft} | {proc} | {name} | {c} | {abs(d):.2e} | {n} | {total / c:+.2e} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
