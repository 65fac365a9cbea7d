"""Self-test of the suite: every mutant flagged, every lossless control passed, through the public API.

For each faulty verifier in :data:`specsim.testing.selftest.mutants.CHAIN_MUTANTS` and
:data:`~specsim.testing.selftest.mutants.TREE_MUTANTS` (and each lossless control)
:func:`mutation_table` records

* the exact verdict of :func:`~specsim.testing.assert_lossless` and its shrunk counterexample;
* the samples :func:`~specsim.testing.check_sampler` needs to flag it with 99% power, computed from
  the exact completed law C (non-central chi-square, :func:`samples_to_detect`) on the most
  revealing of a few fixed instances (the shrunk counterexample and random prefix-dependent pairs),
  from :func:`~specsim.testing.sampler.completed_and_target_laws`;
* optionally the sampler verdict of an actual :func:`check_sampler` run with that many samples.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._validate import check_seed
from ...parallel import check_workers, map_tasks
from ...drafts import chain
from ...models import random_model
from . import mutants
from ..adapters import from_verifier
from ..assertions import LossyVerifierError, assert_lossless
from ..sampler import check_sampler, completed_and_target_laws, samples_to_detect

__all__ = ["MutationRow", "mutation_table", "format_table", "mutation_suites"]


@dataclass(frozen=True)
class MutationRow:
    """One line of the mutation table.  ``exact_flagged`` / ``sampler_flagged``: did the exact and
    statistical modes flag the verifier (``None`` = not run); ``samples_needed``: n at which
    ``check_sampler`` flags it with 99% power at false-alarm rate ``alpha``; ``counterexample``:
    the first line of the exact failure report.

    >>> from specsim.testing.selftest.mutation import MutationRow
    >>> row = MutationRow("bonus_wrong_row", "chain", False, "bonus from p_{L-1}", True, 120.0, None, None, "")
    >>> row.correct
    True
    """

    name: str
    suite: str
    expected_lossless: bool
    fault: str
    exact_flagged: bool
    samples_needed: float
    sampler_flagged: bool | None
    sampler_n: int | None
    counterexample: str

    @property
    def correct(self) -> bool:
        """The exact verdict agrees with the declaration, and the sampler's too when it ran."""
        ok = self.exact_flagged != self.expected_lossless
        if self.sampler_flagged is not None:
            ok = ok and self.sampler_flagged != self.expected_lossless
        return ok


def mutation_suites() -> dict:
    """The mutation suites with their lossless controls, one per family.

    Returns: ``{family: {name: (verifier, expected lossless, assert_lossless keyword overrides)}}``
    for ``"chain"`` (:data:`~.mutants.CHAIN_MUTANTS` and :data:`~.mutants.CHAIN_CONTROLS`, no
    overrides: ``assert_lossless`` searches every depth) and ``"tree"``
    (:data:`~.mutants.TREE_MUTANTS` and :data:`~.mutants.TREE_CONTROLS`; each entry's draft
    process, depth L and V = 3).

    >>> from specsim.testing.selftest.mutation import mutation_suites
    >>> suites = mutation_suites()
    >>> sorted(suites), suites["chain"]["block"][1]
    (['chain', 'tree'], True)
    """
    suites: dict = {"chain": {}, "tree": {}}
    for table in (mutants.CHAIN_MUTANTS, mutants.CHAIN_CONTROLS, mutants.TREE_MUTANTS, mutants.TREE_CONTROLS):
        for name, m in table.items():
            overrides = {} if m.family == "chain" else {"drafting": m.drafting, "L": m.L, "V": 3}
            suites[m.family][name] = (m.verifier, m.verifier.lossless, overrides)
    return suites


def _instances(err: LossyVerifierError | None, overrides: dict):
    """(target, draft, L, drafting): the shrunk counterexample, then random prefix-dependent pairs."""
    if err is not None:
        yield err.case.pair.target, err.case.pair.draft_model, err.case.L, err.case.drafting
    drafting = overrides.get("drafting", chain())
    for L in ((overrides["L"],) if "L" in overrides else (1, 2, 3)):
        for s in (0, 1):
            yield random_model(3, 2 * s, 0.5), random_model(3, 2 * s + 1, 0.5), L, drafting


def mutation_table(suites: dict | None = None, max_examples: int = 40, run_sampler: bool = True,
                   sampler_cap: int = 20000, alpha: float = 1e-3, seed: int = 0,
                   sampler_only: set | None = None, shrink: bool = True, workers=1) -> list[MutationRow]:
    """Run every verifier of ``suites`` (default :func:`mutation_suites`) through the public API.

    Exact mode: ``assert_lossless(v, max_examples=max_examples)``.  Samples needed: min over the
    instances of :func:`samples_to_detect` (the shrunk counterexample and random prefix-dependent
    V = 3 pairs; for tree suites with the entry's draft process and depth).  Sampler mode (when
    ``run_sampler``): ``check_sampler`` with n = min(max(2 * needed, 2000), ``sampler_cap``) on the
    chosen instance, or ``sampler_cap`` draws on a random pair for lossless controls (chain
    verifiers only: ``check_sampler`` takes the chain layout);
    ``sampler_only`` restricts sampler mode to those names; ``shrink=False`` skips Hypothesis
    shrinking (faster; counterexamples unshrunk).

    Parameters: as above; ``alpha`` the sampler false-alarm rate, ``seed`` its seed (every
    row's sampler run uses it, so a row does not depend on the others); ``workers`` (1; an int
    n > 1 or -1 for processes, or a map-like callable: :mod:`specsim.parallel`): the verifiers
    are independent tasks (Hypothesis derandomised, the sampler seeded), so the rows are the same
    for any number of workers.

    Returns: a list of :class:`MutationRow`, one per verifier (see :func:`format_table`).

    >>> from specsim.testing.selftest.mutation import mutation_suites, mutation_table
    >>> one = {"chain": {k: v for k, v in mutation_suites()["chain"].items() if k == "bonus_wrong_row"}}
    >>> [(r.name, r.exact_flagged, r.correct) for r in mutation_table(one, max_examples=10, run_sampler=False, shrink=False)]
    [('bonus_wrong_row', True, True)]
    """
    check_seed(seed)
    workers = check_workers(workers)
    suites = mutation_suites() if suites is None else suites
    tasks = [(suite, name, v, lossless, overrides, max_examples, run_sampler, sampler_cap, alpha, seed,
              sampler_only, shrink) for suite, members in suites.items()
             for name, (v, lossless, overrides) in members.items()]
    return map_tasks(_row, tasks, workers)


def _row(task) -> MutationRow:
    """One verifier's line of :func:`mutation_table` (a task: it reads nothing shared)."""
    (suite, name, v, lossless, overrides, max_examples, run_sampler, sampler_cap, alpha, seed,
     sampler_only, shrink) = task
    err = None
    try:
        assert_lossless(v, max_examples=max_examples, derandomize=True, shrink=shrink, **overrides)
    except LossyVerifierError as e:
        err = e
    fault = v.doc.strip().splitlines()[0] if v.doc.strip() else ""
    needed, inst = np.inf, None
    for target, draft, L, drafting in _instances(err, overrides):
        C, P = completed_and_target_laws(v, target, draft, L, drafting)
        n = samples_to_detect(C, P, target.V, L, alpha)
        if n < needed or inst is None:
            needed, inst = n, (target, draft, L, drafting)
    s_flag, s_n = None, None
    wanted = run_sampler and (sampler_only is None or name in sampler_only)
    if wanted and v.kind == "chain" and (lossless or needed <= sampler_cap):
        s_n = sampler_cap if not np.isfinite(needed) else int(min(max(2 * needed, 2000), sampler_cap))
        res = check_sampler(from_verifier(v), *inst[:3], n=s_n, alpha=alpha, seed=seed)
        # an INCONCLUSIVE run counts as a success for neither side: it neither passes a
        # lossless control nor flags a mutant
        s_flag = not res.passed if lossless else res.verdict == "FAIL"
    first = str(err).splitlines()[0] if err is not None else ""
    return MutationRow(name, suite, lossless, fault, err is not None, needed, s_flag, s_n, first)


def format_table(rows: list[MutationRow]) -> str:
    """Markdown table of :func:`mutation_table` rows: suite, verifier, declaration, exact verdict,
    sampler verdict (n), samples needed for 99% power.

    Returns: the table, a ``str`` (header, rule, one line per row).

    >>> from specsim.testing.selftest.mutation import MutationRow, format_table
    >>> print(format_table([MutationRow("token", "chain", True, "", False, float("inf"), False, 2000, "")]))
    | suite | verifier | declared | exact mode | sampler mode (n) | samples to detect (99% power) |
    |---|---|---|---|---|---|
    | chain | token | lossless | passed | passed (2000) | - |
    """
    out = ["| suite | verifier | declared | exact mode | sampler mode (n) | samples to detect (99% power) |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        exact = "flagged" if r.exact_flagged else "passed"
        samp = "not run" if r.sampler_flagged is None else (
            f"{'flagged' if r.sampler_flagged else 'passed'} ({r.sampler_n})")
        need = "-" if not np.isfinite(r.samples_needed) else f"{int(r.samples_needed):,}"
        decl = "lossless" if r.expected_lossless else "faulty"
        out.append(f"| {r.suite} | {r.name} | {decl} | {exact} | {samp} | {need} |")
    return "\n".join(out)
