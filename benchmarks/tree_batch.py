"""Fast exact paths of the tree verifiers against their per-tree law, in the same run.

Subject: ``output_law(verifier, target, draft, L, drafting)`` (docs/theory.md §2.1) on the engine's
fastest exact path for each verifier -- node states (traversal, docs/theory.md §6.3.1), node
rule (``specinfer_first_path``) or path model (GBV: block verification on the selected path's
law) -- with the per-tree law (the same verifier without its fast paths, one Python call per
tree) as the baseline.  Cases: traversal on ``swor_tree(2)``, the depth-3 binary
without-replacement tree (V = 3, 4) and ``iid_paths(K)``, K = 2, 3, L = 2, 3, V = 3, 4; GBV and first-path RRS on ``iid_paths(K)``, K = 2, 3, L = 2, 3, V = 3, 4, 8 (``--quick``:
V = 3, L = 2).  Per-tree baselines slower than ``--max-baseline`` seconds (estimated from the
number of trees) are skipped and the row says so.  Metrics: max |O_fast - O_per_tree| when the
baseline ran, draft objects, peak traced memory (tracemalloc) of one fast call.

    python benchmarks/tree_batch.py [--quick] [--max-baseline S] [--json out.json] [--repeats N]
"""
from __future__ import annotations

import tracemalloc

import numpy as np

from specsim import output_law, tree_verifier
from specsim.drafts import iid_paths, parse_drafting, swor_tree
from specsim.models import random_model
from specsim.verifiers import gbv, specinfer_first_path, traversal

from _harness import Run  # this folder (Python puts the script's folder on sys.path)

#: Rough per-tree cost of the per-tree law on this kind of machine, to skip hopeless baselines.
PER_TREE_SECONDS = 4e-4


def _trees(drafting, V, L) -> int:
    if drafting.mode == "iid":
        return V ** (L * drafting.widths[0])
    count, level = 1, 1
    for width in drafting.widths_for(L):                  # ordered distinct draws at each node
        count *= int(np.prod(np.arange(V, V - width, -1))) ** level
        level *= width
    return count


def cases(quick: bool):
    """(V, L, drafting, verifier) in run order."""
    if quick:
        return [(3, 2, swor_tree(2), traversal), (3, 2, iid_paths(2), gbv), (3, 2, iid_paths(2), specinfer_first_path)]
    out = [(V, L, swor_tree(2), traversal) for V in (3, 4) for L in (2, 3)]
    out += [(V, 3, parse_drafting("binary:3"), traversal) for V in (3, 4)]
    out += [(V, L, iid_paths(K), traversal) for K in (2, 3) for L in (2, 3) for V in (3, 4)]
    out += [(V, L, iid_paths(K), v) for v in (gbv, specinfer_first_path) for K in (2, 3) for L in (2, 3)
            for V in (3, 4, 8)]
    return out


def _peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main(argv=None) -> dict:
    run = Run(__file__, __doc__, argv, repeats=3, quick_repeats=1,
              add_arguments=lambda ap: ap.add_argument("--max-baseline", type=float, default=120.0,
                                                       help="skip per-tree baselines estimated above this (s)"))
    run.banner()
    for V, L, drafting, v in cases(run.quick):
        t, d = random_model(V, 0), random_model(V, 1)
        t.table(L), d.table(L)  # tabulate the rows outside the timings
        case = f"{drafting.name}, V={V}, L={L}"
        params = {"V": V, "L": L, "drafting": drafting.name, "verifier": v.name}
        n_trees = _trees(drafting, V, L)
        base, ref = None, None
        if n_trees * PER_TREE_SECONDS <= run.args.max_baseline:
            per_tree = tree_verifier(v.name, needs=v.needs, lossless=v.lossless)(v.law)
            base, ref = run.time(case, f"{v.name} per tree (baseline)", lambda: output_law(per_tree, t, d, L, drafting),
                                 repeats=1, warmup=0, params=params, metrics={"objects": n_trees})
        peak = _peak(lambda: output_law(v, t, d, L, drafting))

        def metrics(timing, law):
            m = {"objects": law.n_drafts, "peak_MiB": peak / 2 ** 20}
            if ref is not None:
                m["max_err"] = max(float(np.abs(law.emitted[k] - ref.emitted[k]).max()) for k in law.emitted)
            else:
                m["baseline"] = f"skipped (~{n_trees * PER_TREE_SECONDS:.0f} s est.)"
            return m
        run.time(case, f"{v.name} fastest path", lambda: output_law(v, t, d, L, drafting), baseline=base,
                 params=params, metrics=metrics)
    return run.finish()


if __name__ == "__main__":
    main()
