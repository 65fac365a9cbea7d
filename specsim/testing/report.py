"""The result shared by the statistical checks: :class:`ChiSquareCheck`, the base of
:class:`~specsim.testing.SamplerCheck` and :class:`~specsim.testing.StepCheck`.

Both checks complete each emission with target tokens to a fixed length, count the completed
strings and run Bonferroni-corrected chi-square sub-tests against the target law
(:mod:`specsim.chisquare`, docs/theory.md §2).  So both verdicts are read the same way, from the
same fields: the call passes unless a sub-test rejects, an emitted string has target probability
0, or the data are too few for the joint test (the first sub-test) to detect anything with the
stated power; the last case is INCONCLUSIVE, never a pass.  What differs is the header of the
report (the sampler's draft length L, the step's horizon m and emitted lengths) and what follows
the sub-tests; each subclass writes those parts.

>>> from specsim.testing import SamplerCheck, StepCheck
>>> issubclass(SamplerCheck, ChiSquareCheck) and issubclass(StepCheck, ChiSquareCheck)
True
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ChiSquareCheck"]


@dataclass(frozen=True, kw_only=True)
class ChiSquareCheck:
    """Verdict of a completion chi-square check (keyword-only fields).

    ``passed``: the call's decision (no sub-test rejected, no impossible string, not
    inconclusive); ``n`` the number of emissions; ``V`` the vocabulary size; ``alpha`` the
    false-alarm rate of the whole call (Bonferroni over ``subtests``); ``power`` the power at which
    ``detectable_tv`` is stated: the smallest TV between the completed law and the target law that
    the joint test detects with that probability at this ``n``; ``impossible`` the number of
    completed strings of target probability 0 (each a certain failure); ``subtests`` the
    :class:`~specsim.chisquare.SubTest` objects, the joint law first; ``over`` / ``under`` the
    completed strings with the largest positive / negative standardised residuals
    (:func:`~specsim.testing.stats.largest_residuals`); ``name`` the label of the report.

    >>> from specsim.chisquare import goodness_of_fit
    >>> few = goodness_of_fit([1, 0, 0], [0.5, 0.3, 0.2], level=1e-3)   # n = 1: nothing detectable
    >>> r = ChiSquareCheck(passed=False, n=1, V=3, alpha=1e-3, power=0.99,
    ...                    detectable_tv=few.detectable_tv, impossible=0, subtests=(few,))
    >>> r.inconclusive, r.verdict
    (True, 'INCONCLUSIVE')
    """

    passed: bool
    n: int
    V: int
    alpha: float
    power: float
    detectable_tv: float
    impossible: int
    subtests: tuple = field(repr=False)
    over: tuple = field(default=(), repr=False)
    under: tuple = field(default=(), repr=False)
    name: str = "check"

    @property
    def inconclusive(self) -> bool:
        """No sub-test rejected, but the joint test detects no completed law with the stated power
        at this n (:attr:`~specsim.chisquare.SubTest.inconclusive`): ``passed`` is False and
        the report says INCONCLUSIVE (more data are needed)."""
        return not any(t.rejected for t in self.subtests) and self.subtests[0].inconclusive

    @property
    def verdict(self) -> str:
        """``"PASS"``, ``"FAIL"`` or ``"INCONCLUSIVE"``."""
        return "PASS" if self.passed else ("INCONCLUSIVE" if self.inconclusive else "FAIL")

    # the report: a subclass writes the head lines, the line of each sub-test and the tail
    def _head(self) -> list[str]:
        return [f"{self.name} [V={self.V}, n={self.n}]: {self.verdict} at false-alarm rate {self.alpha:g}"]

    #: what an impossible string is called in the report
    _impossible_strings = "completed strings"

    def _subtest_line(self, t) -> str:
        cal = "" if t.calibrated_p is None else f", exact-null p = {t.calibrated_p:.3g}"
        return (f"  {t.name}: chi2 = {t.statistic:.4g}, df = {t.df}, p = {t.p_value:.3g}{cal} "
                f"(level {t.level:.2g}){'  REJECTED' if t.rejected else ''}")

    def _tail(self) -> list[str]:
        return []

    def __str__(self) -> str:
        lines = self._head()
        if self.inconclusive:
            lines.append(f"  INCONCLUSIVE: more data needed: at n = {self.n} the joint test detects no departure "
                         f"with power {self.power:g} (cells pooled to df = {self.subtests[0].df}); increase n")
        if self.impossible:
            lines.append(f"  {self.impossible} {self._impossible_strings} have target probability 0")
        lines += [self._subtest_line(t) for t in self.subtests]
        return "\n".join(lines + self._tail())
