"""Draft-tree search: how the cost of finding the best tree grows with the budget, V and L.

Subjects (docs/theory.md §13): the exhaustive per-depth shape search ``search_shapes`` for a
sampled-tree verifier (SpecInfer on i.i.d. trees, traversal on i.i.d. and without-replacement
trees), every shape's E[tau] exact; Sequoia's DP (``sequoia_shape``: the DP plus one exact
evaluation of the tree it picks); the oracle deterministic tree (top-n target paths, a best-first
walk over target rows).  Baseline, per (V, L, budget, verifier), measured in the same run on the
same models: the exact E[tau] of the search space's largest shape alone, so the ratio reads as
"the search costs this many evaluations of its largest shape".  Metrics: shapes searched, the
largest shape's drafted nodes and V^nodes (the trees the engine enumerates for it), E[tau] of
the best shape.  ``--quick``: V = 3, L = 2, budgets 3 and 4.

    python benchmarks/tree_search.py [--quick] [--json out.json] [--repeats N]
"""
from __future__ import annotations

from specsim.exact import expected_accepted
from specsim.models import random_model
from specsim.structure import optimal_tree, search_shapes, search_space, sequoia_shape
from specsim.structure.trees import _max_nodes
from specsim.verifiers import specinfer, traversal

from _harness import Run  # this folder (Python puts the script's folder on sys.path)


def cases(quick: bool):
    """(V, L, budgets) in run order."""
    if quick:
        return [(3, 2, (3, 4))]
    return [(3, 2, (3, 4, 6, 8)), (3, 3, (4, 6)), (4, 2, (4, 6))]


def main(argv=None) -> dict:
    run = Run(__file__, __doc__, argv, repeats=3, quick_repeats=1)
    run.banner()
    for V, L, budgets in cases(run.quick):
        target, draft_model = random_model(V, 0), random_model(V, 1)
        expected_accepted(specinfer, target, draft_model, 1)  # tabulates the model rows
        run.section(f"V = {V}, L = {L}")
        for budget in budgets:
            for verifier in (specinfer, traversal):
                space = search_space(budget, L, verifier)
                largest = max(space, key=lambda p: _max_nodes(p.widths))
                n = _max_nodes(largest.widths)
                case = f"V={V}, L={L}, budget={budget}, {verifier.name}"
                params = {"V": V, "L": L, "budget": budget, "verifier": verifier.name}
                base, _ = run.time(case, f"largest shape {largest.name} (baseline)",
                                   lambda: expected_accepted(verifier, target, draft_model, len(largest.widths),
                                                             largest),
                                   params=params,
                                   metrics=lambda t, value, n=n: {"nodes": n, "trees": V ** n, "E_tau": value})
                run.time(case, "search_shapes", lambda: search_shapes(verifier, target, draft_model, budget, L),
                         baseline=base, params=params,
                         metrics=lambda t, d: {"shapes": d.searched, "best": d.drafting.name,
                                               "E_tau": d.expected_accepted})
                if verifier is traversal:
                    run.time(case, "sequoia_shape (DP + one evaluation)",
                             lambda: sequoia_shape(target, draft_model, budget, L, verifier), baseline=base,
                             params=params, metrics=lambda t, d: {"E_tau": d.expected_accepted})
            run.time(f"V={V}, L={L}, budget={budget}, oracle", "top-n target paths (baseline)",
                     lambda: optimal_tree(target, draft_model, budget, L=L),
                     params={"V": V, "L": L, "budget": budget},
                     metrics=lambda t, d: {"E_tau": d.expected_accepted})
    return run.finish()


if __name__ == "__main__":
    main()
