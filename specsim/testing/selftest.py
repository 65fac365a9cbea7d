"""Self-test of the suite: every mutant flagged, every lossless control passed, through the public API.

For each faulty verifier in :data:`specsim.testing.mutants.CHAIN_MUTANTS` (and the tree suite
``specsim.testing.tree_mutants`` when it exists) :func:`mutation_table` records

* the exact verdict of :func:`~specsim.testing.assert_lossless` and its shrunk counterexample;
* the samples :func:`~specsim.testing.check_sampler` needs to flag it with 99% power, computed from
  the exact completed law C (non-central chi-square, :func:`samples_to_detect`) on the most
  revealing of a few fixed instances (the shrunk counterexample and random prefix-dependent pairs);
* optionally the sampler verdict of an actual :func:`check_sampler` run with that many samples.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

import numpy as np

from ..drafts import chain
from ..models import random_model
from ..verifiers.base import verifier_kind
from .adapters import from_verifier
from .assertions import LossyVerifierError, assert_lossless
from .sampler import check_sampler, completed_law, samples_to_detect

__all__ = ["MutationRow", "mutation_table", "format_table", "mutation_suites"]


@dataclass(frozen=True)
class MutationRow:
    """One line of the mutation table.  ``exact_flagged`` / ``sampler_flagged``: did the exact and
    statistical modes flag the verifier (``None`` = not run); ``samples_needed``: n at which
    ``check_sampler`` flags it with 99% power at false-alarm rate ``alpha``; ``counterexample``:
    the first line of the exact failure report."""

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
        """Exact verdict agrees with the declaration, and the sampler's too when it ran."""
        ok = self.exact_flagged != self.expected_lossless
        if self.sampler_flagged is not None:
            ok = ok and self.sampler_flagged != self.expected_lossless
        return ok


def mutation_suites() -> dict:
    """``{suite: {name: (verifier, expected lossless, assert_lossless keyword overrides)}}`` for
    the suites present now: ``mutants`` (``CHAIN_MUTANTS``, ``LOSSLESS_CONTROLS``) and
    ``tree_mutants`` (``MUTANTS``, ``CONTROLS``: each entry names its draft process and depth)."""
    out = {}
    for mod, mutants, controls in (("specsim.testing.mutants", "CHAIN_MUTANTS", "LOSSLESS_CONTROLS"),
                                   ("specsim.testing.tree_mutants", "MUTANTS", "CONTROLS")):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        suite = {}
        for attr, lossless in ((mutants, False), (controls, True)):
            for name, v in getattr(m, attr, {}).items():
                if hasattr(v, "verifier"):  # a tree mutant record: verifier + where to test it
                    suite[name] = (v.verifier, lossless, {"drafting": v.drafting, "L": v.L, "V": 3})
                else:
                    suite[name] = (v, lossless, {})
        if suite:
            out[mod.rsplit(".", 1)[-1]] = suite
    return out


def _instances(err: LossyVerifierError | None, overrides: dict):
    """(target, draft, L, drafting): the shrunk counterexample, then random prefix-dependent pairs."""
    if err is not None:
        yield err.case.pair.target, err.case.pair.draft, err.case.L, err.case.drafting
    drafting = overrides.get("drafting", chain())
    for L in ((overrides["L"],) if "L" in overrides else (1, 2, 3)):
        for s in (0, 1):
            yield random_model(3, 2 * s, 0.5), random_model(3, 2 * s + 1, 0.5), L, drafting


def mutation_table(suites: dict | None = None, max_examples: int = 40, run_sampler: bool = True,
                   sampler_cap: int = 20000, alpha: float = 1e-3, seed: int = 0,
                   sampler_only: set | None = None, shrink: bool = True) -> list[MutationRow]:
    """Run every verifier of ``suites`` (default :func:`mutation_suites`) through the public API.

    Exact mode: ``assert_lossless(v, max_examples=max_examples)``.  Samples needed: min over the
    instances of :func:`samples_to_detect` (the shrunk counterexample and random prefix-dependent
    V = 3 pairs; for tree suites with the entry's draft process and depth).  Sampler mode (when
    ``run_sampler``): ``check_sampler`` with n = min(max(2 * needed, 2000), ``sampler_cap``) on the
    chosen instance, or ``sampler_cap`` draws on a random pair for lossless controls (chain
    verifiers only: ``check_sampler`` takes the chain layout);
    ``sampler_only`` restricts sampler mode to those names; ``shrink=False`` skips Hypothesis
    shrinking (faster; counterexamples unshrunk).

    >>> print(format_table(mutation_table()))
    """
    suites = mutation_suites() if suites is None else suites
    rows = []
    for suite, members in suites.items():
        for name, (v, lossless, overrides) in members.items():
            err = None
            try:
                assert_lossless(v, max_examples=max_examples, derandomize=True, shrink=shrink, **overrides)
            except LossyVerifierError as e:
                err = e
            fault = (getattr(v, "doc", "") or "").strip().splitlines()[0] if getattr(v, "doc", "") else ""
            needed, inst = np.inf, None
            for target, draft, L, drafting in _instances(err, overrides):
                C, P = completed_law(v, target, draft, L, drafting)
                n = samples_to_detect(C, P, target.V, L, alpha)
                if n < needed or inst is None:
                    needed, inst = n, (target, draft, L, drafting)
            s_flag, s_n = None, None
            wanted = run_sampler and (sampler_only is None or name in sampler_only)
            if wanted and verifier_kind(v) == "chain" and (lossless or needed <= sampler_cap):
                s_n = sampler_cap if not np.isfinite(needed) else int(min(max(2 * needed, 2000), sampler_cap))
                res = check_sampler(from_verifier(v), *inst[:3], n=s_n, alpha=alpha, seed=seed)
                s_flag = not res.passed
            first = str(err).splitlines()[0] if err is not None else ""
            rows.append(MutationRow(name, suite, lossless, fault, err is not None, needed, s_flag, s_n, first))
    return rows


def format_table(rows: list[MutationRow]) -> str:
    """Markdown table: fault class, exact verdict, sampler verdict, samples needed (99% power)."""
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
