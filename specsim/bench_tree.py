"""Tree-certification benchmark: ``python -m specsim.bench_tree [--full]``.

Times the exact certificate ``check_lossless(verifier, target, draft, L, drafting)`` for
multi-draft and tree processes at V = 3 and V = 4 against a baseline measured in the same run on
the same models: the chain certificate of block verification at the same L (the engine's
vectorised path).  Prints seconds, the number of enumerated draft objects (whole trees, or
node-level draft options for node-wise verifiers, which the engine sums node by node),
microseconds per object and the ratio to the baseline.  The sampled binary tree of depth 3 (width
2 at every node, without replacement) has 6^7 = 279,936 trees at V = 3 and 12^7 ~ 3.6e7 at V = 4:
node-wise verifiers (Sequoia, deterministic children) certify it in milliseconds; ``--full`` adds
traversal verification on it at V = 3, which needs per-tree enumeration (about a minute).
Not a test: timings depend on the machine; compare the ratios.
"""
from __future__ import annotations

import platform
import sys
import time

from .drafts import chain, iid_paths, parse_drafting, topk_tree
from .exact import check_lossless
from .models import random_model
from .verifiers.chain import block
from .verifiers.tree import gbv, sequoia, specinfer, traversal, deterministic_children


def _time(verifier, target, draft, L, drafting):
    t0 = time.perf_counter()
    cert = check_lossless(verifier, target, draft, L, drafting)
    return time.perf_counter() - t0, cert


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    full = "--full" in argv
    print(f"specsim.bench_tree  python {platform.python_version()}  {platform.machine()}  "
          f"{platform.processor() or platform.platform()}")
    cases = [
        ("K=2 i.i.d. paths, L=3", iid_paths(2), 3, (specinfer, gbv)),
        ("binary SWOR tree, depth 2", parse_drafting("binary:2"), 2, (sequoia, traversal)),
        ("binary SWOR tree, depth 3", parse_drafting("binary:3"), 3, (sequoia, deterministic_children)),
        ("binary top-k tree, depth 3", topk_tree((2, 2, 2)), 3, (deterministic_children,)),
    ]
    print(f"{'case':32s} {'V':>2s} {'verifier':22s} {'objects':>8s} {'seconds':>9s} {'us/obj':>8s} "
          f"{'x chain':>8s} lossless")
    for V in (3, 4):
        target, draft = random_model(V, 0), random_model(V, 1)
        check_lossless(block, target, draft, 1)  # warm the model tables
        for name, drafting, L, verifiers in cases:
            base, _ = _time(block, target, draft, L, chain())
            for v in verifiers:
                sec, cert = _time(v, target, draft, L, drafting)
                print(f"{name:32s} {V:2d} {v.name:22s} {cert.n_drafts:8d} {sec:9.3f} "
                      f"{1e6 * sec / cert.n_drafts:8.1f} {sec / base:8.1f} {cert.lossless}")
            print(f"{'  baseline: chain, block':32s} {V:2d} {'block':22s} {V ** L:8d} {base:9.4f}")
    if full:
        target, draft = random_model(3, 0), random_model(3, 1)
        base, _ = _time(block, target, draft, 3, chain())
        sec, cert = _time(traversal, target, draft, 3, parse_drafting("binary:3"))
        print(f"{'binary SWOR tree, depth 3':32s} {3:2d} {'traversal':22s} {cert.n_drafts:8d} {sec:9.3f} "
              f"{1e6 * sec / cert.n_drafts:8.1f} {sec / base:8.1f} {cert.lossless}")


if __name__ == "__main__":
    main()
