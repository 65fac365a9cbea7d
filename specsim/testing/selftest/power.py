"""Which faults can a sampler check see?  Power of :func:`~specsim.testing.check_sampler` against
every mutant of the self-test, from exact laws.

A check at one instance (target, draft model, L, draft process) and sample size n can only flag a
fault whose completed law C differs from the target law P there (docs/theory.md §2); some faults
vanish on some instances (block verification with the token-level residual is exact whenever the
joint-ratio weights never exceed 1, e.g. on ``random_model(3, 0)`` / ``random_model(3, 1)`` at
L = 2).  :func:`power_report` computes, for each mutant of :data:`specsim.testing.selftest.mutants.CHAIN_MUTANTS`
(and, in tree mode, of :data:`specsim.testing.selftest.mutants.TREE_MUTANTS`), the exact C (from
:func:`~specsim.testing.sampler.completed_and_target_laws`), TV(C, P), the power of the check at n and
the n needed for 99% power (:func:`~specsim.testing.sampler.samples_to_detect`).

:func:`default_instance` is a chain instance on which every chain mutant is detected with 99%
power at check_sampler's default n = 20000.  It was found once by ``python -m
specsim.testing.selftest.power`` (the search in :func:`_search`: V in {3, 4}, L in {2, 3}, concentration
in {0.2, 0.3, 0.5, 1.0}, target/draft seeds (s, s + 1) for s = 0, 2, ..., 38, ranked by the largest
n any chain mutant needs; ``--workers N`` spreads the candidates over N processes, with the same
result); its result, V = 4, L = 3, concentration 0.5, seeds (24, 25), every chain
mutant flagged with 99% power by n = 4718, is recorded in :data:`DEFAULT_INSTANCE` (the 2-core
run took about 2 minutes).

The check_step instance (``default_instance("step")``, check_step's default models) is searched
separately, since check_step's sub-tests (joint law and completed prefixes at level alpha /
max_tokens) and its default context (1,) differ: on the check_sampler instance above the step of
``block_token_residual`` needs 1.7 million samples at max_tokens = 4.  ``python -m
specsim.testing.selftest.power step`` (:func:`_search_step`: the same candidates, each ranked by the
largest n any chain mutant turned into a step by ``step_from_verifier(v, L)`` needs, over L = 2
and 3, i.e. max_tokens = 3 and 4; a candidate is dropped at the first length where it is already
worse than the best so far, so only the first line is a full maximum) printed, in 67 s::

    check_step: max n needed 9149.0     V=4 concentration=1 seeds=(34, 35)
    check_step: max n needed 9763.0     V=4 concentration=0.5 seeds=(32, 33)
    check_step: max n needed 12817.0    V=4 concentration=1 seeds=(6, 7)
    chosen: {'V': 4, 'concentration': 1.0, 'target_seed': 34, 'draft_seed': 35, 'max_samples_needed': 9149.0}

recorded in :data:`DEFAULT_STEP_INSTANCE`: every mutant step is flagged with 99% power by
n = 9149 at both lengths.  At max_tokens = 2 (L = 1) the three block mutants coincide with
block verification (= token-level at L = 1) on every instance, so no instance sees them there.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..._validate import check_int, check_real
from ...parallel import check_workers, map_tasks, worker_map
from ...models import validate_model_pair
from ...drafts import Chain
from ...models import Model, random_model
from . import mutants
from ..language_models import _as_prefix
from ..sampler import completed_and_target_laws
from ..stats import position_marginals, predicted_power, samples_for_power

__all__ = ["MutantPower", "PowerReport", "power_report", "default_instance", "DEFAULT_INSTANCE",
           "DEFAULT_STEP_INSTANCE", "STEP_CONTEXT"]

#: check_sampler's default sample size.
DEFAULT_N = 20000

#: check_step's default context: one token, so that a step that drops the context is seen.
STEP_CONTEXT = (1,)

#: Result of ``python -m specsim.testing.selftest.power`` (the search of :func:`_search`, run once):
#: V, L, concentration, target seed, draft seed, and the largest n any chain mutant needs for 99%
#: power at alpha = 1e-3 (the search's ranking key).
DEFAULT_INSTANCE = {"V": 4, "L": 3, "concentration": 0.5, "target_seed": 24, "draft_seed": 25,
                    "max_samples_needed": 4718}

#: Result of ``python -m specsim.testing.selftest.power step`` (the search of :func:`_search_step`, run
#: once): V, concentration, target seed, draft seed, and the largest n any mutant step
#: (``step_from_verifier(v, L)`` for every chain mutant v, L in {2, 3}) needs for 99% power in
#: check_step at alpha = 1e-3 and context (1,).
DEFAULT_STEP_INSTANCE = {"V": 4, "concentration": 1.0, "target_seed": 34, "draft_seed": 35,
                         "max_samples_needed": 9149}


@dataclass(frozen=True)
class MutantPower:
    """One mutant at one instance: ``tv`` = TV(C, P) of its exact completed law, ``power`` the
    predicted probability that the check at ``n`` flags it, ``samples_needed`` the n for 99%
    power (``inf`` when C = P: no sample size detects it), ``suite`` ``"chain"`` or ``"tree"``.

    >>> MutantPower("m", "chain", 0.1, 1000, 0.995, 800.0).detected
    True
    """

    name: str
    suite: str
    tv: float
    n: int
    power: float
    samples_needed: float

    @property
    def detected(self) -> bool:
        """Detected with at least 99% power at ``n``."""
        return self.power >= 0.99


@dataclass(frozen=True)
class PowerReport:
    """Verdict of :func:`power_report`: one :class:`MutantPower` per mutant in ``rows``;
    ``detects_all`` when every one is detected with 99% power at ``n``; ``check`` the check sized
    (``"sampler"`` or ``"step"``, whose mutants are steps of max_tokens = L + 1) at ``context``;
    ``str()`` is a table.

    >>> r = PowerReport(3, 2, 100, 1e-3, "chain", (MutantPower("m", "chain", 0.0, 100, 0.001, float("inf")),))
    >>> r.detects_all, r.undetectable
    (False, ('m',))
    """

    V: int
    L: int
    n: int
    alpha: float
    drafting: str
    rows: tuple
    check: str = "sampler"
    context: tuple = ()

    @property
    def detects_all(self) -> bool:
        return all(r.detected for r in self.rows)

    @property
    def undetectable(self) -> tuple:
        """Names of the mutants no sample size detects (C = P up to rounding at this instance)."""
        return tuple(r.name for r in self.rows if not np.isfinite(r.samples_needed))

    def __str__(self) -> str:
        missed = [r.name for r in self.rows if not r.detected]
        where = (f"L={self.L}, drafting={self.drafting}" if self.check == "sampler"
                 else f"max_tokens={self.L + 1}, context={self.context}")
        head = (f"check_{self.check} power [V={self.V}, {where}, n={self.n}, alpha={self.alpha:g}]: "
                + ("detects every mutant with 99% power" if not missed
                   else f"misses {len(missed)} of {len(self.rows)} mutants at 99% power: {', '.join(missed)}"))
        lines = [head, f"  {'mutant':<30} {'suite':<6} {'TV(C, P)':>10} {'power':>7} {'n for 99%':>14}"]
        for r in self.rows:
            need = "never" if not np.isfinite(r.samples_needed) else f"{int(r.samples_needed):,}"
            lines.append(f"  {r.name:<30} {r.suite:<6} {r.tv:>10.3g} {r.power:>7.3f} {need:>14}")
        return "\n".join(lines)


def _subtest_pairs(C, P, V: int, L: int, check: str) -> list:
    """The (completed, target) law pairs of the check's sub-tests, joint law first: check_sampler
    adds the law of each position z_k (k = 1..L+1), check_step the law of each completed prefix
    z^{1:k} (k = 1..L)."""
    if check == "sampler":
        return [(C, P)] + list(zip(position_marginals(C, V, L), position_marginals(P, V, L)))
    return [(C, P)] + [(C.reshape(V ** k, -1).sum(axis=1), P.reshape(V ** k, -1).sum(axis=1))
                       for k in range(1, L + 1)]


def _level(alpha: float, L: int, check: str) -> float:
    """Per-sub-test level: Bonferroni over check_sampler's L + 2 or check_step's L + 1 tests."""
    return alpha / (L + 2) if check == "sampler" else alpha / (L + 1)


def power_report(target: Model, draft_model: Model, L: int, n: int = DEFAULT_N, *, alpha: float = 1e-3,
                 drafting=None, check: str = "sampler", context=None) -> PowerReport:
    """Which self-test mutants ``check_sampler(..., target, draft_model, L, n=n, alpha=alpha,
    drafting=drafting)`` detects, or (``check="step"``) which mutant steps
    ``check_step(step_from_verifier(v, L), target, draft_model, n=n, alpha=alpha, max_tokens=L + 1)``
    detects.

    For each mutant v: C = its exact completed law and P the target's law on V^{L+1} at the
    context (:func:`~specsim.testing.sampler.completed_and_target_laws`); TV(C, P) = sum_z |C(z) - P(z)| / 2;
    the power at n is that of the call's best sub-test, each predicted on the pooled table it
    uses at n (:func:`specsim.testing.stats.predicted_power`, non-central chi-square): for
    check_sampler the joint law and the L + 1 position marginals at level alpha / (L + 2), for
    check_step the joint law and the L completed prefixes at level alpha / (L + 1); the n for
    99% power is :func:`specsim.testing.stats.samples_for_power` on the same sub-tests.  The
    step of a chain verifier emits the verifier's block (accepted prefix and one token), so its
    completed law is the verifier's.  Chain mode (``drafting`` None or a chain) covers every
    chain mutant; tree mode (check_sampler only) covers the chain mutants on chain drafts plus the
    tree mutants pinned to the same draft process (``Mutant.drafting`` of the same name), at
    depth L.

    Parameters: ``target``, ``draft_model`` (models over one V), ``L`` (>= 1: the draft length;
    a step's ``max_tokens`` is L + 1), ``n`` (>= 1, default the checks' 20000), ``alpha`` in
    (0, 1), ``drafting`` (a draft process or None), ``check`` (``"sampler"`` or ``"step"``),
    ``context`` (default the check's: () for check_sampler, (1,) for check_step).

    Returns: a :class:`PowerReport` (``rows``, ``detects_all``, ``undetectable``; ``str()`` a table).

    >>> from specsim.models import random_model
    >>> from specsim.testing.selftest.power import power_report
    >>> rep = power_report(random_model(3, 0), random_model(3, 1), L=2)
    >>> rep.detects_all, rep.undetectable
    (False, ('block_token_residual',))
    """
    L = validate_model_pair(target, draft_model, L)
    check_int(n, "n", 1)
    alpha = check_real(alpha, "alpha", 0.0, 1.0, lo_open=True, hi_open=True)
    if check not in ("sampler", "step"):
        raise ValueError(f"check must be 'sampler' or 'step', got {check!r}")
    ctx = _as_prefix((() if check == "sampler" else STEP_CONTEXT) if context is None else context, "context")
    V = target.V
    cases = [(name, "chain", m.verifier, None) for name, m in mutants.CHAIN_MUTANTS.items()]
    tree_mode = drafting is not None and not isinstance(drafting, Chain)
    if tree_mode:
        if not hasattr(drafting, "sample"):
            raise TypeError(f"drafting must be a draft process or None, got {type(drafting).__name__}")
        if check == "step":
            raise ValueError("check='step' covers chain steps only (drafting must be None or a chain)")
        cases += [(name, "tree", m.verifier, drafting) for name, m in mutants.TREE_MUTANTS.items()
                  if m.drafting.name == drafting.name]
    level = _level(alpha, L, check)
    rows = []
    for name, suite, v, proc in cases:
        C, P = completed_and_target_laws(v, target, draft_model, L, proc, ctx)
        pairs = _subtest_pairs(C, P, V, L, check)
        rows.append(MutantPower(name, suite, float(np.abs(C - P).sum() / 2), n,
                                max(predicted_power(c, p, n, level) for c, p in pairs),
                                samples_for_power(pairs, level)))
    return PowerReport(V, L, n, alpha, drafting.name if tree_mode else "chain", tuple(rows), check, ctx)


def default_instance(check: str = "sampler", *, max_tokens: int = 3):
    """An instance on which the check at its defaults (n = 20000, alpha = 1e-3) detects every chain
    mutant with 99% power: ``random_model`` target and draft with the V, concentration and seeds
    of :data:`DEFAULT_INSTANCE` (check_sampler, at its L) or of :data:`DEFAULT_STEP_INSTANCE`
    (check_step, at context (1,), chosen for the mutant steps of max_tokens = 3 and 4 at once),
    each found by the search recorded in the module docstring.

    Parameters: ``check`` (``"sampler"`` or ``"step"``); ``max_tokens`` (>= 1, check="step" only:
    returned as the third item; the power was searched at 3 and 4; at 2 the block mutants equal
    block verification on every instance, at 1 no chain mutant applies).

    Returns: ``(target, draft_model, L)`` for check="sampler", ready for
    ``check_sampler(fn, *default_instance())``; ``(target, draft_model, max_tokens)`` for
    check="step", for ``check_step(step, target, draft_model, max_tokens=max_tokens)``
    (check_step's default models).

    >>> from specsim.testing import default_instance; from specsim.testing.selftest.power import power_report
    >>> power_report(*default_instance()).detects_all
    True
    >>> target, draft_model, m = default_instance("step", max_tokens=4)
    >>> power_report(target, draft_model, m - 1, check="step").detects_all
    True
    """
    if check == "sampler":
        d = DEFAULT_INSTANCE
        return (random_model(d["V"], d["target_seed"], d["concentration"]),
                random_model(d["V"], d["draft_seed"], d["concentration"]), d["L"])
    if check != "step":
        raise ValueError(f"check must be 'sampler' or 'step', got {check!r}")
    d = DEFAULT_STEP_INSTANCE
    return (random_model(d["V"], d["target_seed"], d["concentration"]),
            random_model(d["V"], d["draft_seed"], d["concentration"]), check_int(max_tokens, "max_tokens", 1))


def _candidates():
    """The (V, concentration, target seed, draft seed) pairs both searches try."""
    for V, conc, s in itertools.product((3, 4), (0.2, 0.3, 0.5, 1.0), range(0, 40, 2)):
        yield V, conc, s, s + 1


def _search_task(task):
    """One candidate of :func:`_search`: (largest needed n, V, L, concentration, seeds)."""
    V, conc, s, d, L, n, alpha = task
    rep = power_report(random_model(V, s, conc), random_model(V, d, conc), L, n, alpha=alpha)
    return max(r.samples_needed for r in rep.rows), V, L, conc, s, d


def _search(n: int = DEFAULT_N, alpha: float = 1e-3, *, workers=1, candidates=None):
    """The search behind :data:`DEFAULT_INSTANCE`: every candidate (default :func:`_candidates`;
    L in {2, 3}) with its largest needed n, sorted.  Candidates are independent tasks, spread
    over ``workers`` (:mod:`specsim.parallel`); nothing is random."""
    tasks = [(V, conc, s, d, L, n, alpha)
             for (V, conc, s, d), L in itertools.product(_candidates() if candidates is None else candidates, (2, 3))]
    return sorted(map_tasks(_search_task, tasks, workers))


def _step_task(task):
    """One candidate of :func:`_search_step`: the largest n any mutant step needs at each length,
    up to the first length where the running maximum exceeds ``bound`` (the search stops there
    or earlier)."""
    V, conc, s, d, lengths, n, alpha, bound = task
    target, draft_model = random_model(V, s, conc), random_model(V, d, conc)
    values = []
    for L in lengths:
        values.append(max(r.samples_needed for r in power_report(target, draft_model, L, n, alpha=alpha,
                                                                   check="step").rows))
        if max(values) > bound:
            break
    return values


def _search_step(n: int = DEFAULT_N, alpha: float = 1e-3, lengths=(2, 3), *, workers=1, candidates=None):
    """The search behind :data:`DEFAULT_STEP_INSTANCE`: every candidate (default
    :func:`_candidates`) with the largest n any mutant step needs at any draft length in
    ``lengths`` (max_tokens = L + 1), at check_step's default context; a candidate stops at the
    first length where it is worse than the best so far.

    The candidates are tasks over ``workers`` (:mod:`specsim.parallel`) and the early stop is
    replayed on their values in candidate order, so the result is the serial search's for any
    number of workers.  Each task gets the best so far when it is handed out as a bound: with one
    worker the exact best (the serial search's work); with more, the best of the results read by
    then, which can only be larger, so a task may compute a length the serial search skips,
    never miss one it needs."""
    cands = list(_candidates() if candidates is None else candidates)
    best = [np.inf]  # the best so far; at any later candidate's turn it can only have fallen

    def tasks():
        for c in cands:
            yield (*c, tuple(lengths), n, alpha, best[0])

    out = []
    for (V, conc, s, d), values in zip(cands, worker_map(workers)(_step_task, tasks())):
        worst = 0.0
        for value in values:  # a task stopped at or after the length where this loop stops
            worst = max(worst, value)
            if worst > best[0]:
                break
        best[0] = min(best[0], worst)
        out.append((worst, V, conc, s, d))
    return sorted(out)


def _main(argv) -> None:
    """``python -m specsim.testing.selftest.power [sampler] [step] [--workers N]``."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m specsim.testing.selftest.power",
                                 description="the searches behind DEFAULT_INSTANCE and DEFAULT_STEP_INSTANCE")
    ap.add_argument("which", nargs="*", help="sampler and/or step (default both)")
    ap.add_argument("--workers", type=int, default=1, help="processes for the candidates (-1: every core)")
    args = ap.parse_args(argv[1:])
    if set(args.which) - {"sampler", "step"}:  # not choices=: Python 3.11 checks an empty list against them
        ap.error(f"choose searches from 'sampler' and 'step', got {args.which}")
    which, workers = args.which or ["sampler", "step"], check_workers(args.workers, "--workers")
    if "sampler" in which:
        results = _search(workers=workers)
        for row in results[:10]:
            print("check_sampler: max n needed %-10s V=%d L=%d concentration=%g seeds=(%d, %d)" % row)
        best = results[0]
        print("chosen:", {"V": best[1], "L": best[2], "concentration": best[3], "target_seed": best[4],
                          "draft_seed": best[5], "max_samples_needed": best[0]})
    if "step" in which:
        results = _search_step(workers=workers)
        for row in results[:10]:
            print("check_step: max n needed %-10s V=%d concentration=%g seeds=(%d, %d)" % row)
        best = results[0]
        print("chosen:", {"V": best[1], "concentration": best[2], "target_seed": best[3],
                          "draft_seed": best[4], "max_samples_needed": best[0]})


if __name__ == "__main__":
    import sys

    _main(sys.argv)
