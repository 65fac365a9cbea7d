"""The ``specsim`` command.

``specsim compare`` (the main job) prints every applicable verifier's exact E[tau], block
efficiency and losslessness certificate on a context-dependent toy pair; ``specsim bounds`` and
``specsim lossy`` print the LP/OT gap table and lossy certificates (need the ``lp`` extra);
``specsim real`` builds and tabulates real next-token distributions (needs the ``real`` extra).
"""
from __future__ import annotations

import argparse
import sys
import time

from . import models
from .exact import check_lossless

MODEL_KINDS = ("random", "near", "markov", "toy")


def model_pair(kind: str, V: int, seed: int) -> tuple[models.Model, models.Model]:
    """Default (target, draft) pairs: ``random`` (independent Dirichlet rows per prefix),
    ``near`` (draft = 70% target + 30% independent noise), ``markov`` (random first-order chains),
    ``toy`` (the block-verification paper's p = (1/3, 2/3), q = (2/3, 1/3); V is ignored)."""
    if kind == "toy":
        return models.iid([1 / 3, 2 / 3], "toy-p"), models.iid([2 / 3, 1 / 3], "toy-q")
    if kind == "random":
        return models.random_model(V, seed, name="target"), models.random_model(V, seed + 1, name="draft")
    if kind == "near":
        t = models.random_model(V, seed, name="target")
        return t, models.mix(t, models.random_model(V, seed + 1), 0.3)
    if kind == "markov":
        import numpy as np
        rng = np.random.default_rng(seed)
        mk = lambda name: models.markov(rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V), size=V), name)
        return mk("target"), mk("draft")
    raise ValueError(f"unknown model kind {kind!r}; choose one of {MODEL_KINDS}")


def _drafting(spec: str):
    from . import drafts
    if spec == "chain":
        return drafts.chain()
    parse = getattr(drafts, "parse_drafting", None)
    if parse is None:
        raise SystemExit(f"drafting {spec!r} is not available in this version (only 'chain')")
    return parse(spec)


def _verifiers_for(drafting):
    from .verifiers import tree as tree_mod  # noqa: F401  (tree verifiers, when installed)
    return tree_mod.verifiers_for(drafting)


def compare(args) -> int:
    target, draft = model_pair(args.model, args.V, args.seed)
    drafting = _drafting(args.drafting)
    try:
        verifiers = _verifiers_for(drafting)
    except (ImportError, AttributeError):
        from .verifiers.chain import CHAIN_VERIFIERS
        verifiers = list(CHAIN_VERIFIERS.values())
    V = target.V
    print(f"target {target.name}, draft {draft.name}, V={V}, L={args.L}, drafting={drafting.name}")
    head = f"{'verifier':<22}{'E[tau]':>10}{'block eff.':>12}{'lossless':>10}{'max |C-P|':>12}{'time (s)':>10}"
    print(head)
    print("-" * len(head))
    for v in verifiers:
        t0 = time.perf_counter()
        c = check_lossless(v, target, draft, args.L, drafting, progress=None)
        dt = time.perf_counter() - t0
        claim = "" if getattr(v, "lossless", True) else "  (negative control / lossy by design)"
        print(f"{v.name:<22}{c.expected_accepted:>10.5f}{c.block_efficiency:>12.5f}"
              f"{'yes' if c.lossless else 'NO':>10}{c.max_abs_error:>12.2e}{dt:>10.3f}{claim}")
    return 0


def bounds(args) -> int:
    from lp.tables import bounds_report
    print(bounds_report(p=args.p, q=args.q, K=tuple(args.K), V=args.V, seed=args.seed))
    return 0


def _param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--param expects NAME=VALUE, got {text!r}")
    for cast in (int, float):
        try:
            return key, cast(value)
        except ValueError:
            pass
    return key, value


def lossy(args) -> int:
    from lp.lossy import lossy_report
    params = dict(_param(t) for t in args.param)
    print(lossy_report(rule_name=args.rule, budget=args.budget, **params))
    return 0


def real(args) -> int:
    from .real import main as real_main
    return real_main(args.rest) or 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="specsim", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command")
    c = sub.add_parser("compare", help="exact E[tau], block efficiency and lossless certificate per verifier")
    c.add_argument("--V", type=int, default=3, help="vocabulary size (default 3)")
    c.add_argument("--L", type=int, default=4, help="draft length / tree depth (default 4)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--model", choices=MODEL_KINDS, default="random")
    c.add_argument("--drafting", default="chain", help="chain (default), iid:K, swor:K, ...")
    c.set_defaults(func=compare)
    b = sub.add_parser("bounds", help="each verifier's acceptance next to the optimal multi-draft bound")
    b.add_argument("--K", type=int, nargs="+", default=[1, 2, 4])
    b.add_argument("--V", type=int, default=8)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--p", type=float, nargs="+", default=None, help="target distribution (with --q)")
    b.add_argument("--q", type=float, nargs="+", default=None, help="draft distribution (with --p)")
    b.set_defaults(func=bounds)
    lo = sub.add_parser("lossy", help="certificate table of a lossy rule and the optimal frontier")
    lo.add_argument("--rule", default="typical")
    lo.add_argument("--budget", type=float, default=None, help="divergence budget for the frontier sweep")
    lo.add_argument("--param", nargs="*", default=[], metavar="NAME=VALUE",
                    help="rule parameters, e.g. --param epsilon=0.09 delta=0.3")
    lo.set_defaults(func=lossy)
    r = sub.add_parser("real", help="real SmolLM2 next-token distributions: build | info | tables (extra 'real')")
    r.add_argument("rest", nargs=argparse.REMAINDER, help="arguments for python -m specsim.real")
    r.set_defaults(func=real)
    return ap


def main(argv=None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command is None:
        args = ap.parse_args(["compare", *(argv or [])])
    try:
        return args.func(args)
    except ValueError as e:
        print(f"specsim: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
