"""The ``specsim tree-design`` command's logic: the best draft tree per verifier under a node budget,
with its exact throughput, and the deterministic heuristics' regret (docs/theory.md §13).
``specsim.cli`` only registers the subcommand; every number comes from :mod:`.trees`.

Two tables.  *Best tree per verifier*: for deterministic trees (``deterministic_children``,
sample-and-match) the oracle, top-n target paths, which maximises E[tau] at the budget; for each
sampled-tree verifier the exhaustive per-depth shape search (:func:`~specsim.structure.search_shapes`
run with the cost model), which maximises tokens per unit cost over the shapes it lists.
*Deterministic heuristics*: EAGLE-2's draft-ranked tree and OPT-Tree's depth rule scored with
the same exact formula, with their regret in accepted tokens per step against the oracle.

>>> from specsim.models import random_model
>>> from specsim.structure import CostModel
>>> from specsim.structure.design import tree_design, format_tree_design
>>> d = tree_design(random_model(3, 0), random_model(3, 1), 4, 2, CostModel(draft=0.05), family="deterministic")
>>> [r.method for r in d.best], [r.method for r in d.heuristics]
(['oracle'], ['oracle', 'eagle2', 'opt_tree'])
>>> print(format_tree_design(d).splitlines()[0])
tree design [target random(V=3, seed=0, c=1), draft random(V=3, seed=1, c=1), V=3; budget 4 drafted nodes, depth <= 2; draft pass 0.05, target 1.0, overhead 0]
"""
from __future__ import annotations

from dataclasses import dataclass

from .._validate import check_int, check_real
from ..models import validate_model_pair
from ..verifiers import TREE_VERIFIERS, deterministic_children
from .cost import CostModel
from .renewal import _check_cost
from .trees import SAMPLED_VERIFIERS, BudgetChoice, TreeDesign, optimal_budget, optimal_tree

__all__ = ["FAMILIES", "TreeDesignReport", "tree_design", "format_tree_design", "add_tree_design_command"]

#: Values of ``family``: deterministic trees, sampled trees, or both tables.
FAMILIES = ("deterministic", "sampled", "both")
#: The deterministic heuristics compared with the oracle, in table order.
HEURISTICS = ("oracle", "eagle2", "opt_tree")


@dataclass(frozen=True)
class TreeDesignReport:
    """What ``specsim tree-design`` prints.

    Fields: ``target``, ``draft_model``, ``budget``, ``L``, ``cost``, ``family``, ``best`` (a
    :class:`~specsim.structure.TreeDesign` per verifier, each with its throughput), ``heuristics``
    (oracle, EAGLE-2, OPT-Tree designs; empty for ``family="sampled"``), ``budget_choice`` (a
    :class:`~specsim.structure.BudgetChoice` over the oracle trees of budgets 1, 2, 4, ...,
    ``budget``; ``None`` for ``family="sampled"``), ``threshold``/``max_depth`` (OPT-Tree's).
    """

    target: object
    draft_model: object
    budget: int
    L: int
    cost: CostModel
    family: str
    best: tuple
    heuristics: tuple
    budget_choice: BudgetChoice | None
    threshold: float
    max_depth: int


def _budgets(budget: int) -> tuple[int, ...]:
    out, b = [], 1
    while b < budget:
        out.append(b)
        b *= 2
    return tuple(out + [budget])


def _verifier_names(verifiers, family: str) -> list[str]:
    if verifiers is None:
        names = []
        if family in ("deterministic", "both"):
            names.append(deterministic_children.name)
        if family in ("sampled", "both"):
            names.extend(SAMPLED_VERIFIERS)
        return names
    if isinstance(verifiers, str) or not hasattr(verifiers, "__iter__"):
        raise TypeError(f"verifiers must be a list of tree verifier names, got {verifiers!r}")
    names = [n for item in verifiers for n in str(item).split(",") if n]  # "a b" and "a,b" both work
    if not names:
        raise ValueError("verifiers must name at least one tree verifier")
    unknown = [n for n in names if n not in TREE_VERIFIERS]
    if unknown:
        raise ValueError(f"verifiers: {unknown} are not tree verifiers; choose from {sorted(TREE_VERIFIERS)}")
    return list(dict.fromkeys(names))


def tree_design(target, draft_model, budget: int, L: int, cost: CostModel, family: str = "both", verifiers=None,
                threshold: float = 0.5, max_depth: int = 10) -> TreeDesignReport:
    """Every design the command prints, computed by :func:`~specsim.structure.optimal_tree`.

    ``verifiers`` (names; default ``deterministic_children`` and :data:`SAMPLED_VERIFIERS` as
    ``family`` allows): ``deterministic_children`` gets the oracle tree, any other name the
    exhaustive search of sampled shapes (``ValueError`` from :func:`optimal_tree` if it does not
    apply, or if the search space is too large).  ``L`` caps every tree's depth.
    """
    budget = check_int(budget, "budget", 1)
    L = validate_model_pair(target, draft_model, L)
    cost = _check_cost(cost)
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    threshold = check_real(threshold, "threshold", 0.0)
    max_depth = check_int(max_depth, "max_depth", 2)
    best = []
    for name in _verifier_names(verifiers, family):
        if name == deterministic_children.name:
            if family == "sampled":
                raise ValueError("verifiers: deterministic_children verifies deterministic trees; "
                                 "use family='deterministic' or 'both'")
            best.append(optimal_tree(target, draft_model, budget, name, "deterministic", L=L, cost=cost))
        else:
            if family == "deterministic":
                raise ValueError(f"verifiers: {name!r} is searched over sampled trees; use family='sampled' "
                                 f"or 'both' (deterministic trees are verified by deterministic_children)")
            best.append(optimal_tree(target, draft_model, budget, name, "sampled", L=L, cost=cost))
    heuristics, choice = (), None
    if family != "sampled":
        heuristics = tuple(optimal_tree(target, draft_model, budget, deterministic_children, "deterministic", L=L,
                                        method=m, cost=cost, threshold=threshold, max_depth=max_depth)
                           for m in HEURISTICS)
        choice = optimal_budget(target, draft_model, cost, _budgets(budget), L=L)
    return TreeDesignReport(target, draft_model, budget, L, cost, family, tuple(best), heuristics, choice,
                            threshold, max_depth)


def _tree_label(d: TreeDesign) -> str:
    if d.family == "deterministic":
        return f"{d.method} top-{d.nodes}"
    return d.drafting.name


def _depth(d: TreeDesign) -> int:
    return d.throughput.L


def format_tree_design(report: TreeDesignReport) -> str:
    """The two tables and the best-budget line as text (see the module docstring)."""
    r, c = report, report.cost
    lines = [f"tree design [target {r.target.name}, draft {r.draft_model.name}, V={r.target.V}; budget {r.budget} "
             f"drafted nodes, depth <= {r.L}; draft pass {c.draft!r}, target {c.target!r}, overhead {c.overhead:g}]"]
    if r.best:
        lines += ["", "best tree per verifier (tokens = E[tau] + 1 per iteration, cost in target steps, "
                      "rate = tokens / cost, exact)",
                  f"{'verifier':<24}{'tree':<16}{'nodes':>6}{'depth':>6}{'E[tau]':>10}{'tokens':>9}{'cost':>9}"
                  f"{'rate':>10}{'speedup':>9}  chosen by"]
        for d in r.best:
            t = d.throughput
            how = ("max E[tau]: top-n target paths (exact optimum)" if d.family == "deterministic" else
                   f"max rate over {d.searched} searched shapes (exact optimum over them)")
            lines.append(f"{d.verifier:<24}{_tree_label(d):<16}{d.nodes:>6}{_depth(d):>6}{d.expected_accepted:>10.6f}"
                         f"{t.tokens:>9.4f}{t.cost:>9.4f}{t.rate:>10.6f}{t.speedup:>9.4f}  {how}")
        lines.append("nodes: drafted nodes (sampled: the most a draw gives; i.i.d. repeats merge, so the mean "
                     "cost counts fewer)")
        if any(d.family == "deterministic" for d in r.best):
            lines.append("the oracle tree is chosen from target rows: the best any deterministic tree can do, "
                         "not a tree a drafter can build")
    if r.heuristics:
        oracle = r.heuristics[0].expected_accepted
        lines += ["", "deterministic trees: heuristics vs the oracle (deterministic_children; regret = oracle "
                      "E[tau] - E[tau], tokens per step)",
                  f"{'method':<10}{'status':<15}{'nodes':>6}{'depth':>6}{'E[tau]':>10}{'regret':>10}{'regret %':>10}"
                  f"{'rate':>10}{'speedup':>9}  rule"]
        for d in r.heuristics:
            pct = 100.0 * d.regret / oracle if oracle > 0 else 0.0
            lines.append(f"{d.method:<10}{d.status:<15}{d.nodes:>6}{_depth(d):>6}{d.expected_accepted:>10.6f}"
                         f"{d.regret:>10.6f}{pct:>10.2f}{d.throughput.rate:>10.6f}{d.throughput.speedup:>9.4f}  {d.note}")
        ch = r.budget_choice
        lines.append(f"best budget for the oracle tree over {list(ch.budgets)}: {ch.best} drafted nodes, "
                     f"speedup {ch.speedup:.4f} (the oracle maximises E[tau] at each budget, not tokens per cost)")
    return "\n".join(lines)


def add_tree_design_command(sub, model_pair, model_kinds) -> None:
    """Register ``specsim tree-design`` on an argparse subparsers object (called by :mod:`specsim.cli`)."""
    s = sub.add_parser("tree-design", help="best draft tree per verifier under a node budget, heuristics' regret")
    s.add_argument("--V", type=int, default=3, help="vocabulary size (default 3)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--model", choices=model_kinds, default="random")
    s.add_argument("--budget", type=int, default=6, help="drafted nodes allowed, root excluded (default 6)")
    s.add_argument("--L", type=int, default=3, help="depth limit of every tree (default 3)")
    s.add_argument("--family", choices=FAMILIES, default="both",
                   help="deterministic trees, sampled trees (exhaustive shape search), or both (default)")
    s.add_argument("--verifiers", nargs="+", metavar="NAME", default=None,
                   help="tree verifiers (default: deterministic_children and every sampled-tree verifier)")
    s.add_argument("--draft-cost", type=float, default=0.05, help="cost of a draft pass (target step = 1)")
    s.add_argument("--target-slope", type=float, default=0.0,
                   help="extra target cost per query token beyond the first (default 0: flat)")
    s.add_argument("--overhead", type=float, default=0.0, help="fixed cost per iteration (default 0)")
    s.add_argument("--threshold", type=float, default=0.5, help="OPT-Tree's stopping threshold (default 0.5)")
    s.add_argument("--max-depth", type=int, default=10, help="OPT-Tree's max_depth (default 10)")

    def run(args) -> int:
        # every argument is checked, under its option's name, before anything is printed
        budget = check_int(args.budget, "--budget", 1)
        L = check_int(args.L, "--L", 1)
        draft = check_real(args.draft_cost, "--draft-cost", 0.0)
        slope = check_real(args.target_slope, "--target-slope", 0.0)
        overhead = check_real(args.overhead, "--overhead", 0.0)
        threshold = check_real(args.threshold, "--threshold", 0.0)
        max_depth = check_int(args.max_depth, "--max-depth", 2)
        target, draft_model = model_pair(args.model, args.V, args.seed)
        target_cost = [round(1.0 + slope * n, 12) for n in range(budget + 1)] if slope else 1.0  # no 1.1400000000000001
        cost = CostModel(draft=draft, target=target_cost, overhead=overhead)
        report = tree_design(target, draft_model, budget, L, cost, args.family, args.verifiers, threshold, max_depth)
        print(format_tree_design(report))
        return 0

    s.set_defaults(func=run)
