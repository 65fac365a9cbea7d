"""Tree certification: ``check_lossless`` on multi-draft and tree processes against the chain certificate.

Subject: the exact certificate ``check_lossless(verifier, target, draft, L, drafting)`` (docs/theory.md
§2, §6) for K = 2 i.i.d. paths (SpecInfer, GBV), binary without-replacement trees of depth 2 and 3
(Sequoia, traversal, deterministic children) and a binary top-k tree, at V = 3 and V = 4
(``--quick``: V = 3, the two small cases).  Baseline, per V and L, measured in the same run on the
same models: the chain certificate of block verification at that L (the engine's vectorised
path).  Metrics: draft objects enumerated (whole trees, or node-level draft options for node-wise
verifiers, which the engine sums node by node) and microseconds per object.  ``--full`` adds
traversal on the depth-3 binary tree at V = 3 (per-tree enumeration of 6^7 = 279,936 trees, about a
minute).

    python benchmarks/tree_verifiers.py [--quick] [--full] [--json out.json] [--repeats N]
"""
from __future__ import annotations

from specsim.drafts import chain, iid_paths, parse_drafting, topk_tree
from specsim.exact import check_lossless
from specsim.models import random_model
from specsim.verifiers.chain import block
from specsim.verifiers import deterministic_children, gbv, sequoia, specinfer, traversal

from _harness import Run  # this folder (Python puts the script's folder on sys.path)


def cases(quick: bool, full: bool):
    """(V, case name, draft process, L, verifiers) in run order."""
    small = [("K=2 i.i.d. paths, L=2", iid_paths(2), 2, (specinfer, gbv)),
             ("binary SWOR tree, depth 2", parse_drafting("binary:2"), 2, (sequoia, traversal))]
    if quick:
        return [(3, *c) for c in small]
    large = [("K=2 i.i.d. paths, L=3", iid_paths(2), 3, (specinfer, gbv)),
             ("binary SWOR tree, depth 2", parse_drafting("binary:2"), 2, (sequoia, traversal)),
             ("binary SWOR tree, depth 3", parse_drafting("binary:3"), 3, (sequoia, deterministic_children)),
             ("binary top-k tree, depth 3", topk_tree((2, 2, 2)), 3, (deterministic_children,))]
    out = [(V, *c) for V in (3, 4) for c in large]
    if full:
        out.append((3, "binary SWOR tree, depth 3", parse_drafting("binary:3"), 3, (traversal,)))
    return out


def main(argv=None) -> dict:
    run = Run(__file__, __doc__, argv, repeats=3, quick_repeats=1,
              add_arguments=lambda ap: ap.add_argument("--full", action="store_true",
                                                       help="add traversal on the depth-3 binary tree"))
    run.banner()
    models, baselines = {}, {}
    for V, name, drafting, L, verifiers in cases(run.quick, run.args.full):
        if V not in models:
            models[V] = (random_model(V, 0), random_model(V, 1))
            check_lossless(block, *models[V], 1)  # tabulates the model rows
        target, draft_model = models[V]
        if (V, L) not in baselines:
            baselines[V, L], _ = run.time(f"chain, V={V}, L={L}", "block (baseline)",
                                          lambda: check_lossless(block, target, draft_model, L, chain()),
                                          params={"V": V, "L": L}, metrics={"objects": V ** L})
        for v in verifiers:
            slow = v is traversal and name.endswith("depth 3")
            run.time(f"{name}, V={V}", v.name,
                     lambda v=v: check_lossless(v, target, draft_model, L, drafting),
                     baseline=baselines[V, L], repeats=1 if slow else None, warmup=0 if slow else 1,
                     params={"V": V, "L": L, "drafting": drafting.name},
                     metrics=lambda t, cert: {"objects": cert.n_drafts,
                                              "us_per_object": 1e6 * t.median_s / cert.n_drafts,
                                              "lossless": cert.lossless})
    return run.finish()


if __name__ == "__main__":
    main()
