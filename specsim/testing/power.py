"""Which faults can a sampler check see?  Power of :func:`~specsim.testing.check_sampler` against
every mutant of the self-test, from exact laws.

A check at one instance (target, draft model, L, draft process) and sample size n can only flag a
fault whose completed law C differs from the target law P there (docs/theory.md §2); some faults
vanish on some instances (block verification with the token-level residual is exact whenever the
joint-ratio weights never exceed 1, e.g. on ``random_model(3, 0)`` / ``random_model(3, 1)`` at
L = 2).  :func:`power_report` computes, for each mutant of :data:`specsim.testing.mutants.CHAIN_MUTANTS`
(and, in tree mode, of :data:`specsim.testing.tree_mutants.MUTANTS`), the exact C (from
:func:`~specsim.testing.completed_and_target_laws`), TV(C, P), the power of the check at n and
the n needed for 99% power (:func:`~specsim.testing.samples_to_detect`).

:func:`default_instance` is a chain instance on which every chain mutant is detected with 99%
power at check_sampler's default n = 20000.  It was found once by ``python -m
specsim.testing.power`` (the search in :func:`_search`: V in {3, 4}, L in {2, 3}, concentration
in {0.2, 0.3, 0.5, 1.0}, target/draft seeds (s, s + 1) for s = 0, 2, ..., 38, ranked by the largest
n any chain mutant needs); its result, V = 4, L = 3, concentration 0.5, seeds (24, 25), every chain
mutant flagged with 99% power by n = 4718, is recorded in :data:`DEFAULT_INSTANCE` (the 2-core
run took about 2 minutes).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .._validate import check_int, check_model_pair, check_real
from ..drafts import Chain
from ..models import Model, random_model
from . import mutants, tree_mutants
from .sampler import _marginals, completed_and_target_laws, samples_to_detect
from .stats import predicted_power

__all__ = ["MutantPower", "PowerReport", "power_report", "default_instance", "DEFAULT_INSTANCE"]

#: check_sampler's default sample size.
DEFAULT_N = 20000

#: Result of ``python -m specsim.testing.power`` (the search of :func:`_search`, run once):
#: V, L, concentration, target seed, draft seed, and the largest n any chain mutant needs for 99%
#: power at alpha = 1e-3 (the search's ranking key).
DEFAULT_INSTANCE = {"V": 4, "L": 3, "concentration": 0.5, "target_seed": 24, "draft_seed": 25,
                    "max_samples_needed": 4718}


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
    ``detects_all`` when every one is detected with 99% power at ``n``; ``str()`` is a table.

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

    @property
    def detects_all(self) -> bool:
        return all(r.detected for r in self.rows)

    @property
    def undetectable(self) -> tuple:
        """Names of the mutants no sample size detects (C = P up to rounding at this instance)."""
        return tuple(r.name for r in self.rows if not np.isfinite(r.samples_needed))

    def __str__(self) -> str:
        missed = [r.name for r in self.rows if not r.detected]
        head = (f"check_sampler power [V={self.V}, L={self.L}, n={self.n}, alpha={self.alpha:g}, "
                f"drafting={self.drafting}]: "
                + ("detects every mutant with 99% power" if not missed
                   else f"misses {len(missed)} of {len(self.rows)} mutants at 99% power: {', '.join(missed)}"))
        lines = [head, f"  {'mutant':<30} {'suite':<6} {'TV(C, P)':>10} {'power':>7} {'n for 99%':>14}"]
        for r in self.rows:
            need = "never" if not np.isfinite(r.samples_needed) else f"{int(r.samples_needed):,}"
            lines.append(f"  {r.name:<30} {r.suite:<6} {r.tv:>10.3g} {r.power:>7.3f} {need:>14}")
        return "\n".join(lines)


def _power_at(C, P, V: int, L: int, n: int, alpha: float) -> float:
    """check_sampler's power at n: its best sub-test (joint, then each marginal, at alpha / (L+2))."""
    pairs = [(C, P)] + list(zip(_marginals(C, V, L), _marginals(P, V, L)))
    return max(predicted_power(c, p, n, alpha / (L + 2)) for c, p in pairs)


def power_report(target: Model, draft_model: Model, L: int, n: int = DEFAULT_N, *, alpha: float = 1e-3,
                 drafting=None) -> PowerReport:
    """Which self-test mutants ``check_sampler(..., target, draft_model, L, n=n, alpha=alpha,
    drafting=drafting)`` detects.

    For each mutant v: C = its exact completed law and P the target's law on V^{L+1}
    (:func:`~specsim.testing.completed_and_target_laws`); TV(C, P) = sum_z |C(z) - P(z)| / 2;
    the power at n is that of the call's best sub-test, each predicted on the pooled table it
    uses at n (:func:`specsim.testing.stats.predicted_power`, level alpha / (L + 2), non-central
    chi-square); the n for 99% power is :func:`~specsim.testing.samples_to_detect`.  Chain mode
    (``drafting`` None or a chain) covers every chain mutant; tree mode covers the chain mutants
    on chain drafts plus the tree mutants pinned to the same draft process (``TreeMutant.drafting``
    of the same name), at depth L.

    Parameters: ``target``, ``draft_model`` (models over one V), ``L`` (>= 1), ``n`` (>= 1, default
    check_sampler's 20000), ``alpha`` in (0, 1), ``drafting`` (a draft process or None).

    Returns: a :class:`PowerReport` (``rows``, ``detects_all``, ``undetectable``; ``str()`` a table).

    >>> from specsim.models import random_model
    >>> from specsim.testing import power_report
    >>> rep = power_report(random_model(3, 0), random_model(3, 1), L=2)
    >>> rep.detects_all, rep.undetectable
    (False, ('block_token_residual',))
    """
    L = check_model_pair(target, draft_model, L)
    check_int(n, "n", 1)
    alpha = check_real(alpha, "alpha", 0.0, 1.0, lo_open=True, hi_open=True)
    V = target.V
    cases = [(name, "chain", v, None) for name, v in mutants.CHAIN_MUTANTS.items()]
    tree_mode = drafting is not None and not isinstance(drafting, Chain)
    if tree_mode:
        if not hasattr(drafting, "sample"):
            raise TypeError(f"drafting must be a draft process or None, got {type(drafting).__name__}")
        cases += [(name, "tree", m.verifier, drafting) for name, m in tree_mutants.MUTANTS.items()
                  if m.drafting.name == drafting.name]
    rows = []
    for name, suite, v, proc in cases:
        C, P = completed_and_target_laws(v, target, draft_model, L, proc)
        rows.append(MutantPower(name, suite, float(np.abs(C - P).sum() / 2), n,
                                _power_at(C, P, V, L, n, alpha), samples_to_detect(C, P, V, L, alpha)))
    return PowerReport(V, L, n, alpha, drafting.name if tree_mode else "chain", tuple(rows))


def default_instance() -> tuple[Model, Model, int]:
    """A chain instance on which check_sampler at its defaults (n = 20000, alpha = 1e-3) detects
    every chain mutant with 99% power: ``random_model`` target and draft with the V, L,
    concentration and seeds of :data:`DEFAULT_INSTANCE` (found by the search recorded in the
    module docstring).

    Returns: ``(target, draft_model, L)``, ready for ``check_sampler(fn, *default_instance())``.

    >>> from specsim.testing import default_instance, power_report
    >>> power_report(*default_instance()).detects_all
    True
    """
    d = DEFAULT_INSTANCE
    return (random_model(d["V"], d["target_seed"], d["concentration"]),
            random_model(d["V"], d["draft_seed"], d["concentration"]), d["L"])


def _search(n: int = DEFAULT_N, alpha: float = 1e-3):
    """The search behind :data:`DEFAULT_INSTANCE`: every candidate with its largest needed n."""
    out = []
    for V, L, conc, s in itertools.product((3, 4), (2, 3), (0.2, 0.3, 0.5, 1.0), range(0, 40, 2)):
        rep = power_report(random_model(V, s, conc), random_model(V, s + 1, conc), L, n, alpha=alpha)
        worst = max(r.samples_needed for r in rep.rows)
        out.append((worst, V, L, conc, s, s + 1))
    return sorted(out)


if __name__ == "__main__":
    results = _search()
    for row in results[:10]:
        print("max n needed %-10s V=%d L=%d concentration=%g seeds=(%d, %d)" % row)
    best = results[0]
    print("chosen:", {"V": best[1], "L": best[2], "concentration": best[3], "target_seed": best[4],
                      "draft_seed": best[5], "max_samples_needed": best[0]})
