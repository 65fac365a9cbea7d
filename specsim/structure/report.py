"""The ``specsim stopping`` command's logic: every drafting policy's exact throughput, regret and
certificate on a toy pair (docs/theory.md §14).  ``specsim.cli`` only registers the subcommand.

>>> from specsim.models import random_model
>>> from specsim.structure import CostModel
>>> from specsim.structure.report import stopping_report
>>> print(stopping_report(random_model(3, 0), random_model(3, 1), 2, "token", CostModel(draft=0.1))[:60])
optimal stopping [token, V=3, L=2, draft pass 0.1, target 1.
"""
from __future__ import annotations

from ..verifiers import CHAIN_VERIFIERS, TREE_VERIFIERS
from .cost import CostModel
from .policies import ConfidenceThreshold, EntropyStop, FixedLength, HeuristicSchedule, SpecDecPP
from .stopping import check_policy_lossless, optimal_stopping, policy_value

__all__ = ["default_policies", "stopping_report", "add_stopping_command"]

#: Verifiers the command accepts (chain rules, and traversal, which on chains is block verification).
VERIFIERS = {"token": CHAIN_VERIFIERS["token"], "block": CHAIN_VERIFIERS["block"],
             "traversal": TREE_VERIFIERS["traversal"]}


def default_policies(L: int) -> list:
    """Fixed lengths 1..L, transformers' confidence threshold and schedule, llama.cpp's p_min,
    SpecDec++'s oracle rule and the entropy rule at their usual settings."""
    return ([FixedLength(l) for l in range(1, L + 1)]
            + [ConfidenceThreshold(0.4), ConfidenceThreshold(0.75, rule="top"), SpecDecPP(0.5), SpecDecPP(0.8),
               EntropyStop(1.0), HeuristicSchedule()])


def stopping_report(target, draft_model, L: int, verifier: str, cost: CostModel, policies=None) -> str:
    """A table: the optimal stopping rule's tokens per cost, then each policy's E[T], E[C], T/C,
    regret 1 - (T/C) / lambda* and its exact certificate (the schedule is certified through the
    fixed lengths it uses).  Rows marked * read target rows."""
    if not isinstance(verifier, str) or verifier not in VERIFIERS:
        raise ValueError(f"verifier must be one of {sorted(VERIFIERS)}, got {verifier!r}")
    v = VERIFIERS[verifier]
    opt = optimal_stopping(v, target, draft_model, L, cost)
    policies = default_policies(L) if policies is None else policies
    fixed_ok = all(check_policy_lossless(v, target, draft_model, L, FixedLength(l)).lossless for l in range(1, L + 1))
    lines = [f"optimal stopping [{verifier}, V={target.V}, L={L}, draft pass {cost.draft!r}, target {cost.target!r}, "
             f"overhead {cost.overhead:g}]: lambda* = {opt.value:.6f} tokens per unit cost "
             f"(speedup {opt.speedup:.4f}), E[T] = {opt.tokens:.4f}, P(l = k) = {opt.length_law.round(3).tolist()}",
             f"{'policy':<22}{'E[T]':>9}{'E[C]':>9}{'T/C':>10}{'regret':>9}  certificate"]
    for pol in policies:
        r = policy_value(pol, v, target, draft_model, L, cost, optimum=opt)
        if isinstance(pol, HeuristicSchedule):
            verdict = "LOSSLESS (each fixed length)" if fixed_ok else "LOSSY"
        else:
            c = check_policy_lossless(v, target, draft_model, L, pol)
            verdict = "LOSSLESS" if c.lossless else f"LOSSY (TV {c.tv:.3g})"
        lines.append(f"{r.name + (' *' if r.uses_target else ''):<22}{r.tokens:>9.4f}{r.cost:>9.4f}{r.value:>10.6f}"
                     f"{r.regret:>8.2%}  {verdict}")
    from .policies import drop_on_target, grammar_truncation

    for bad in (grammar_truncation(), drop_on_target(0.5)):
        c = check_policy_lossless(v, target, draft_model, L, bad)
        lines.append(f"{bad.name:<22}{'':>37}  {'LOSSLESS' if c.lossless else 'LOSSY'} (TV {c.tv:.3g}, "
                     f"worst {c.worst_sequence}): value-dependent dropping")
    lines.append("* reads target rows (oracle acceptance head); heuristic = transformers' schedule, stationary "
                 "length chain capped at L")
    return "\n".join(lines)


def add_stopping_command(sub, model_pair, model_kinds) -> None:
    """Register ``specsim stopping`` on an argparse subparsers object (called by :mod:`specsim.cli`)."""
    s = sub.add_parser("stopping", help="drafting policies vs the optimal stopping rule, with certificates")
    s.add_argument("--V", type=int, default=3, help="vocabulary size (default 3)")
    s.add_argument("--L", type=int, default=4, help="horizon: most tokens drafted (default 4)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--model", choices=model_kinds, default="random")
    s.add_argument("--verifier", choices=sorted(VERIFIERS), default="token")
    s.add_argument("--draft-cost", type=float, default=0.05, help="cost of a draft pass (target step = 1)")
    s.add_argument("--target-slope", type=float, default=0.0,
                   help="extra target cost per query token beyond the first (default 0: flat)")
    s.add_argument("--overhead", type=float, default=0.0)

    def run(args) -> int:
        target, draft_model = model_pair(args.model, args.V, args.seed)
        slope = args.target_slope
        if slope < 0:
            raise ValueError(f"--target-slope must be >= 0, got {slope}")
        cost = CostModel(draft=args.draft_cost, target=[1.0 + slope * n for n in range(args.L + 1)],
                         overhead=args.overhead) if slope else CostModel(draft=args.draft_cost, overhead=args.overhead)
        print(stopping_report(target, draft_model, args.L, args.verifier, cost))
        return 0

    s.set_defaults(func=run)
