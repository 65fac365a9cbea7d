"""The ``specsim`` command: the application layer over ``specsim``, ``lp`` and ``specsim.real``.

``specsim compare`` (the main job) prints every applicable verifier's exact E[tau], block
efficiency and losslessness certificate on a context-dependent toy pair; ``specsim bounds`` and
``specsim lossy`` print the LP/OT gap table and lossy certificates (need the ``lp`` extra);
``specsim real build|info|tables`` builds and tabulates real next-token distributions (needs the
``real`` extra to build).  The core ``specsim`` modules never import ``lp``; this module does,
inside the command functions, so ``import specsim.cli`` stays light.
"""
from __future__ import annotations

import argparse
import inspect
import itertools
import os
import sys
import time
from pathlib import Path

import numpy as np

from . import models
from .drafts import parse_drafting
from ._validate import check_int, check_real, check_seed
from .exact import check_lossless
from .parallel import check_workers, worker_map
from .verifiers import verifiers_for

__all__ = ["MODEL_KINDS", "model_pair", "compare", "bounds", "lossy_report", "lossy", "real", "real_trees",
           "build_parser", "main"]

MODEL_KINDS = ("random", "near", "markov", "toy")


def model_pair(kind: str, V: int, seed: int) -> tuple[models.Model, models.Model]:
    """The default (target, draft model) pair of ``specsim compare``.

    ``random``: independent Dirichlet rows per prefix (``random_model(V, seed)`` and
    ``random_model(V, seed + 1)``); ``near``: draft = 0.7 target + 0.3 independent rows;
    ``markov``: random first-order chains; ``toy``: the block-verification paper's
    p = (1/3, 2/3), q = (2/3, 1/3) at every prefix (V is ignored).

    Parameters: ``kind`` (one of :data:`MODEL_KINDS`), ``V`` vocabulary size (an integer >= 2),
    ``seed`` (an integer >= 0).

    Returns: ``(target, draft_model)``, two :class:`~specsim.models.Model` objects.

    >>> target, draft_model = model_pair("toy", 0, 0)
    >>> target(()).round(4).tolist(), draft_model((1,)).round(4).tolist()
    ([0.3333, 0.6667], [0.6667, 0.3333])
    """
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; choose one of {MODEL_KINDS}")
    seed = check_seed(seed)
    if kind == "toy":
        return models.iid([1 / 3, 2 / 3], "toy-p"), models.iid([2 / 3, 1 / 3], "toy-q")
    V = check_int(V, "V", 2)
    if kind == "random":
        return models.random_model(V, seed, name="target"), models.random_model(V, seed + 1, name="draft")
    if kind == "near":
        t = models.random_model(V, seed, name="target")
        return t, models.mix(t, models.random_model(V, seed + 1), 0.3)
    rng = np.random.default_rng(seed)                       # markov
    mk = lambda name: models.markov(rng.dirichlet(np.ones(V)), rng.dirichlet(np.ones(V), size=V), name)  # noqa: E731
    return mk("target"), mk("draft")


def compare(args) -> int:
    """``specsim compare``: exact E[tau], block efficiency E[tau] + 1 and the losslessness certificate
    max_z |C(z) - P(z)| (docs/theory.md §2) of every verifier that applies to the draft process.

    The ``optimum`` row is the information-agnostic LP over all lossless verifiers for the same
    draft process (:func:`lp.verification.verification_lp`, docs/theory.md §5.2) when the process
    has at most :data:`OPTIMUM_MAX_TREES` draft trees (else the row says why not); ``gap %`` is
    100 (E*[tau] - E[tau]) / E*[tau].  Each row uses the engine's fastest exact path; on a
    terminal a progress bar appears once a row takes more than a second.  With ``--workers``
    (1; n > 1 or -1 for processes: :mod:`specsim.parallel`) the verifiers' rows are independent
    tasks on worker processes, printed in table order as they finish; only the time column
    depends on the number of workers (each row's own seconds, in its worker).

    Parameters: ``args`` with ``model``, ``V``, ``seed``, ``L``, ``drafting`` (a
    :func:`specsim.drafts.parse_drafting` spec), ``only`` (verifier names or ``None``) and
    ``workers`` (default 1).

    Returns: the exit status 0; the table goes to stdout.

    >>> _ = main(["compare", "--model", "toy", "--L", "1"])   # doctest: +ELLIPSIS
    target toy-p, draft toy-q, V=2, L=1, drafting=chain
    ...
    token                    0.66667     1.66667       yes    0.00e+00...
    ...
    """
    L = check_int(args.L, "--L", 1)                     # checked before anything is printed
    workers = check_workers(getattr(args, "workers", 1), "--workers")
    target, draft_model = model_pair(args.model, args.V, args.seed)
    drafting = parse_drafting(args.drafting)
    rows = _selected(verifiers_for(drafting), getattr(args, "only", None), drafting)
    optimum, why = _optimum(target, draft_model, L, drafting)
    print(f"target {target.name}, draft {draft_model.name}, V={target.V}, L={L}, drafting={drafting.name}")
    head = (f"{'verifier':<22}{'E[tau]':>10}{'block eff.':>12}{'lossless':>10}{'max |C-P|':>12}{'time (s)':>10}"
            f"{'gap %':>8}")
    print(head)
    print("-" * len(head))
    if optimum is None:
        print(f"{'optimum':<22}  not computed: {why}")
    else:
        print(f"{'optimum':<22}{optimum.value:>10.5f}{optimum.value + 1:>12.5f}{'LP':>10}{'':>12}"
              f"{optimum.seconds:>10.3f}  (information-agnostic LP, docs/theory.md §5.2; {optimum.solver})")
    bar = _progress(worker_map(workers)(_compare_row, [(v, target, draft_model, L, drafting) for v in rows]), len(rows))
    for v, (c, dt) in zip(rows, bar):
        bar.set_postfix_str(v.name)
        gap = "" if optimum is None or optimum.value <= 0 else \
            f"{_gap_percent(optimum.value, c.expected_accepted):>8.2f}"
        claim = "" if v.lossless else "  (negative control / lossy by design)"
        bar.write(f"{v.name:<22}{c.expected_accepted:>10.5f}{c.block_efficiency:>12.5f}"
                  f"{'yes' if c.lossless else 'NO':>10}{c.max_abs_error:>12.2e}{dt:>10.3f}{gap:>8}{claim}",
                  file=sys.stdout)
    return 0


def _compare_row(task):
    """One row of ``specsim compare`` (a task): the verifier's certificate and the seconds it took."""
    v, target, draft_model, L, drafting = task
    t0 = time.perf_counter()
    c = check_lossless(v, target, draft_model, L, drafting, progress=None)
    return c, time.perf_counter() - t0


#: Largest number of draft trees for which ``specsim compare`` solves the optimum LP (about
#: trees x nodes x V variables: a few seconds with HiGHS at this size).
OPTIMUM_MAX_TREES = 2000


def _optimum(target, draft_model, L, drafting):
    """(:class:`lp.verification.VerificationLP`, "") for a small process, else (None, the reason)."""
    from lp.verification import verification_lp

    n = sum(1 for _ in itertools.islice(drafting.enumerate(target, draft_model, L), OPTIMUM_MAX_TREES + 1))
    if n > OPTIMUM_MAX_TREES:
        return None, (f"more than {OPTIMUM_MAX_TREES} draft trees (the LP has one block of nodes x V "
                      f"variables per tree); lower --V or --L")
    return verification_lp(target, draft_model, L, drafting), ""


def _gap_percent(best: float, value: float) -> float:
    """100 (best - value) / best, with LP rounding (|gap| < 5e-7 %) shown as 0."""
    gap = 100.0 * (best - value) / best
    return 0.0 if abs(gap) < 5e-7 else gap


def _selected(verifiers, only, drafting):
    """The verifiers named in ``--only`` (all when it is not given), in table order."""
    if not only:
        return verifiers
    only = [n for item in only for n in item.split(",") if n]  # "a b" and "a,b" both work
    names = [v.name for v in verifiers]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise ValueError(f"--only: {unknown} not among the verifiers for {drafting.name}: {names}")
    return [v for v in verifiers if v.name in only]


def _progress(rows, total: int):
    """A tqdm bar over the rows on a terminal, shown once a row has run for a second."""
    from tqdm.auto import tqdm

    return tqdm(rows, total=total, desc="compare", unit="verifier", delay=1.0, leave=False,
                disable=not sys.stderr.isatty())


def bounds(args) -> int:
    """``specsim bounds``: each multi-draft verifier's acceptance next to the optimum
    alpha* = min_H [p(H) + 1 - Q_sub(H)] (docs/theory.md §6.6; :func:`lp.tables.bounds_report`).

    Parameters: ``args`` with ``p``, ``q`` (both or neither), ``K``, ``V``, ``seed``.

    Returns: the exit status 0; the table goes to stdout.

    >>> _ = main(["bounds", "--p", "1", "0", "--q", "0.5", "0.5", "--K", "2"])   # doctest: +ELLIPSIS
    V=2
    ...
      2  SpecInfer RRS                     iid         0.750000  0.750000    0.00
    ...
    """
    from lp.tables import bounds_report
    print(bounds_report(p=args.p, q=args.q, K=tuple(args.K), V=args.V, seed=args.seed))
    return 0


def lossy_report(rule_name: str = "typical", budget: float | None = None, p=None, q=None, **params) -> str:
    """Certificate of one lossy rule at (p, q) and the frontier beta*(eps) it is measured against.

    The certificate is :func:`lp.certificates.certify` (exact output law, KL both ways, TV, gap to
    the frontier); the sweep lists beta*_TV, beta*_KL(pi||p), beta*_KL(p||pi) of
    :func:`lp.frontier.frontier_curve` at eps in {0, .02, .05, .1, .2, .5, 1} plus ``budget``.

    Parameters: ``rule_name`` (a key of ``specsim.verifiers.lossy.LOSSY_RULES``), ``budget``
    (extra eps, marked), ``p`` target and ``q`` draft (default E1 of docs/theory.md §12),
    ``params`` (the rule factory's arguments, e.g. ``delta=0.05`` for cactus).

    Returns: the report (``str``).

    >>> print(lossy_report("cactus", delta=0.05).splitlines()[6])
      KL(out||p) = 0.082227   frontier at that KL: 0.569970  (gap +0.001049)
    """
    from lp.certificates import certify
    from lp.frontier import E1_P, E1_Q, frontier_curve
    from specsim.divergences import DIVERGENCES, kl, tv
    from specsim.verifiers.lossy import LOSSY_RULES
    from ._validate import as_pair

    if rule_name not in LOSSY_RULES:
        raise ValueError(f"unknown rule {rule_name!r}; choose from {sorted(LOSSY_RULES)}")
    factory = LOSSY_RULES[rule_name]
    accepted = inspect.signature(factory).parameters
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"rule {rule_name!r} has no parameter {', '.join(unknown)} "
                         f"(its parameters: {', '.join(accepted) or 'none'})")
    missing = [n for n, a in accepted.items() if a.default is inspect.Parameter.empty and n not in params]
    if missing:
        raise ValueError(f"rule {rule_name!r} needs the parameter {', '.join(missing)} "
                         f"(specsim lossy: --param {missing[0]}=VALUE)")
    if budget is not None:
        budget = check_real(budget, "budget", 0.0, np.inf)
    p, q = as_pair(E1_P if p is None else p, E1_Q if q is None else q)
    cert = certify(factory(**params), p, q)
    budgets = [0.0, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
    if budget is not None:
        budgets = sorted(set(budgets) | {budget})
    curves = {k: frontier_curve(p, q, budgets, k) for k in DIVERGENCES}
    lines = [f"p = {np.array2string(p, precision=6)}   q = {np.array2string(q, precision=6)}",
             f"TV(p,q) = {tv(p, q):.6f}   KL(q||p) = {kl(q, p):.6f}   KL(p||q) = {kl(p, q):.6f}", "",
             str(cert), "", "frontier beta*(eps)",
             f"  {'eps':>8}  {'TV':>9}  {'KL(pi||p)':>10}  {'KL(p||pi)':>10}"]
    for i, e in enumerate(budgets):
        mark = "  <- budget" if budget is not None and e == budget else ""
        lines.append(f"  {e:8.4g}  {curves['tv'].beta[i]:9.6f}  {curves['kl'].beta[i]:10.6f}  "
                     f"{curves['kl_reverse'].beta[i]:10.6f}{mark}")
    return "\n".join(lines)


def _parse_rule_param(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` -> (NAME, int, float or str VALUE) for ``--param``."""
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
    """``specsim lossy``: :func:`lossy_report` for ``--rule`` with ``--param NAME=VALUE`` arguments.

    Parameters: ``args`` with ``rule``, ``budget``, ``param`` (list of ``NAME=VALUE`` strings).

    Returns: the exit status 0; the report goes to stdout.

    >>> _ = main(["lossy", "--rule", "lenience", "--param", "l=0.8"])   # doctest: +ELLIPSIS
    p = [0.05 0.15 0.25 0.55]   q = [0.55 0.25 0.15 0.05]
    ...
    lenience(l=0.8)
    ...
    """
    params = dict(_parse_rule_param(t) for t in args.param)
    print(lossy_report(rule_name=args.rule, budget=args.budget, **params))
    return 0


def real(args) -> int:
    """``specsim real build|info|tables``: build a dataset of real next-token rows, summarise one,
    or print its tables (single-draft acceptance sum min(p, q), optimal K-draft acceptance, the
    lossy frontier and each lossy rule's certificate; :mod:`lp.real_tables`).

    Parameters: ``args`` with ``cmd`` (``build``, ``info`` or ``tables``) and that command's
    options (see ``specsim real <cmd> --help``).

    Returns: the exit status 0; output goes to stdout.

    >>> _ = main(["real", "info"])   # doctest: +ELLIPSIS
    /.../smollm2_small: ... positions, V = 49152, drafts [...], tail 0.0001, ...
    | draft | n | mean | min | q25 | median | q75 | max |
    ...
    """
    from . import real as real_data

    if args.cmd == "trees":
        return real_trees(args)
    if args.cmd == "build":
        prompts = real_data.DEFAULT_PROMPTS
        if args.prompts_file:
            prompts = [s.replace("\\n", "\n") for s in Path(args.prompts_file).read_text().splitlines() if s.strip()]
        path = real_data.build_dataset(args.out, prompts, args.positions, args.T, args.drafts, args.tail,
                                       progress=True)
        ds = real_data.load_dataset(path)
        size = sum(f.stat().st_size for f in path.parent.iterdir())
        print(f"wrote {path.parent}: {len(ds)} positions x {1 + len(ds.drafts)} rows, {size} bytes")
        return 0
    from lp import real_tables

    if args.cmd == "tables":
        check_int(args.K, "--K", 1)
        check_int(args.wor_max_K, "--wor-max-K", 0)
    ds = real_data.load_dataset(args.path or real_data.committed_dataset())
    if args.cmd == "info":
        m = ds.manifest
        print(f"{ds.path}: {len(ds)} positions, V = {ds.V}, drafts {list(ds.drafts)}, tail {m['tail']:g}, "
              f"max remainder {m['max_remainder']:.3g}, model sha256 {(m.get('model') or {}).get('sha256')}")
        print(real_tables.format_rows(real_tables.acceptance_table(ds)))
        return 0
    print(real_tables.format_rows(real_tables.acceptance_table(ds)))
    print()
    print(real_tables.format_rows(real_tables.multidraft_table(ds, K=range(1, args.K + 1),
                                                               without_replacement_max_K=args.wor_max_K)))
    print()
    print(real_tables.format_rows(real_tables.frontier_table(ds)))
    print()
    print(real_tables.format_rows(real_tables.lossy_table(ds)))
    return 0


def _add_real_commands(r: argparse.ArgumentParser) -> None:
    from .real import DEFAULT_DRAFTERS

    sub = r.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="generate a dataset from the shipped SmolLM2 model")
    b.add_argument("--out", default=None, help="output folder (default: $SPECSIM_CACHE or ~/.cache/specsim, /real/smollm2)")
    b.add_argument("--prompts-file", default=None, help="text file, one prompt per line (default: built-in prompts)")
    b.add_argument("--positions", type=int, nargs="*", default=None,
                   help="context lengths; negative counts from the end (-1 = whole prompt); default: all")
    b.add_argument("--T", type=float, default=1.0, help="target temperature")
    b.add_argument("--drafts", nargs="+", default=list(DEFAULT_DRAFTERS))
    b.add_argument("--tail", type=float, default=1e-4, help="mass left out of each stored row")
    for name in ("info", "tables"):
        s = sub.add_parser(name, help="validate and summarise" if name == "info" else "acceptance tables")
        s.add_argument("path", nargs="?", default=None, help="dataset folder (default: the committed one)")
        if name == "tables":
            s.add_argument("--K", type=int, default=8, help="largest number of drafts")
            s.add_argument("--wor-max-K", type=int, default=4,
                           help="largest K for the without-replacement bound (~0.3 s per position for K >= 3 on these rows)")
    t = sub.add_parser("trees", help="real draft trees: build | tables")
    tsub = t.add_subparsers(dest="trees_cmd", required=True)
    tb = tsub.add_parser("build", help="draft trees with the shipped SmolLM2 model")
    tb.add_argument("--out", required=True, help="output folder")
    tb.add_argument("--prompts", type=int, default=4, help="use the first N built-in prompts")
    tb.add_argument("--positions", type=int, nargs="+", default=[-2, -1])
    tb.add_argument("--T", type=float, default=1.0, help="target temperature")
    tb.add_argument("--drafts", nargs="+", default=None, help="draft specs (default: early_exit:24 temperature:0.7)")
    tb.add_argument("--processes", nargs="+", default=None, help="draft processes (parse_drafting specs)")
    tb.add_argument("--L", type=int, default=4, help="tree depth")
    tb.add_argument("--samples", type=int, default=2, help="trees per (context, drafter, process)")
    tb.add_argument("--seed", type=int, default=0)
    tb.add_argument("--tail", type=float, default=1e-3, help="mass left out of each stored row")
    tb.add_argument("--workers", type=int, default=1, help="processes for the contexts (default 1; -1: every core)")
    tt = tsub.add_parser("tables", help="exact per-tree E[tau] tables")
    tt.add_argument("path", nargs="?", default=None, help="dataset folder (default: the committed one)")
    tt.add_argument("--verifiers", nargs="+", default=None, help="verifier names (default: all that apply)")
    tt.add_argument("--workers", type=int, default=1,
                    help="processes, one (drafter, process, verifier) per task (default 1; -1: every core)")
    r.set_defaults(func=real)


def real_trees(args) -> int:
    """``specsim real trees build|tables``: draft real trees with SmolLM2 (:func:`specsim.real_trees.build_trees`)
    or print the exact per-tree tables of a dataset (:func:`specsim.real_evaluation.evaluate_trees`) and the
    paired comparisons of the headline claims (:func:`specsim.real_evaluation.format_comparisons`).

    Parameters: ``args`` with ``trees_cmd`` and that command's options.

    Returns: the exit status 0; output goes to stdout.
    """
    from . import real as real_data
    from . import real_evaluation as re_, real_trees as rt

    if args.trees_cmd == "build":
        path = rt.build_trees(args.out, real_data.DEFAULT_PROMPTS[:check_int(args.prompts, "--prompts", 1)],
                              args.positions, args.T, args.drafts or rt.DEFAULT_TREE_DRAFTS,
                              args.processes or rt.DEFAULT_PROCESSES, args.L, args.samples, args.seed, args.tail,
                              progress=True, workers=check_workers(args.workers, "--workers"))
        ds = rt.load_trees(path)
        size = sum(f.stat().st_size for f in path.parent.iterdir())
        print(f"wrote {path.parent}: {len(ds)} trees, {ds.manifest['n_rows']} rows, {size} bytes, "
              f"{ds.manifest['forward_passes']} forward passes in {ds.manifest['build_seconds']} s")
        return 0
    ds = rt.load_trees(args.path or rt.committed_trees())
    ev = re_.evaluate_trees(ds, args.verifiers, workers=check_workers(args.workers, "--workers"))
    print(re_.format_evaluation(ev))
    print()
    print(re_.format_comparisons(ev))
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``PROG: error: MESSAGE`` on stderr and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``specsim`` argument parser (subcommands compare, bounds, lossy, real).

    Returns: ``argparse.ArgumentParser``; each subcommand sets ``func`` to its command function.

    >>> args = build_parser().parse_args(["bounds", "--K", "2", "3"])
    >>> args.func.__name__, args.K
    ('bounds', [2, 3])
    """
    ap = _Parser(prog="specsim", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command")
    c = sub.add_parser("compare", help="exact E[tau], block efficiency and lossless certificate per verifier")
    c.add_argument("--V", type=int, default=3, help="vocabulary size (default 3)")
    c.add_argument("--L", type=int, default=4, help="draft length / tree depth (default 4)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--model", choices=MODEL_KINDS, default="random")
    c.add_argument("--drafting", default="chain", help="chain (default), iid:K, swor:K, ...")
    c.add_argument("--only", nargs="+", metavar="NAME", default=None,
                   help="only these verifiers (the optimum row is always shown)")
    c.add_argument("--workers", type=int, default=1,
                   help="processes for the verifiers' rows (default 1; -1: every core)")
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
    _add_real_commands(sub.add_parser("real", help="real SmolLM2 next-token distributions: build | info | tables"))
    from .structure.report import add_stopping_command  # the command's logic lives in specsim.structure
    add_stopping_command(sub, model_pair, MODEL_KINDS)
    from .structure.design import add_tree_design_command
    add_tree_design_command(sub, model_pair, MODEL_KINDS)
    return ap


def main(argv=None) -> int:
    """Run the ``specsim`` command line (``compare`` when no subcommand is given).

    Parameters: ``argv`` (list of strings; default ``sys.argv[1:]``).

    Returns: the exit status: 0, or 2 with one line ``specsim: error: ...`` on stderr (no
    traceback) for bad input (``ValueError``, ``TypeError``) or a file that cannot be read
    (``OSError``); arguments are checked before anything is printed.  Usage errors of argparse
    exit with status 2 (``SystemExit``) after one line as well.  A reader that closes the pipe
    early (``specsim compare | head``) ends the command quietly with status 1.

    >>> main(["bounds", "--p", "0.5", "0.6", "--q", "0.5", "0.5"])
    2
    """
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command is None:
        args = ap.parse_args(["compare", *(argv or [])])
    try:
        return args.func(args)
    except BrokenPipeError:  # the reader closed the pipe (``| head``): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        return 1
    except (ValueError, TypeError, OSError) as e:
        print(f"specsim: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
