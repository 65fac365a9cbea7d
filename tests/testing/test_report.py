"""SamplerCheck and StepCheck share one result base, ChiSquareCheck: the same fields, the same
verdict rule and the same report lines for what they share."""
import dataclasses

import pytest

from specsim.chisquare import goodness_of_fit
from specsim.testing import SamplerCheck, StepCheck
from specsim.testing.report import ChiSquareCheck

SHARED = {"passed", "n", "V", "alpha", "power", "detectable_tv", "impossible", "subtests", "over", "under", "name"}

# three sub-tests with known decisions (counts against a V = 3 law, level 1e-3)
LAW = [0.5, 0.3, 0.2]
FIT = goodness_of_fit([500, 300, 200], LAW, level=1e-3)      # X^2 = 0: not rejected
OFF = goodness_of_fit([900, 50, 50], LAW, level=1e-3)        # far off: rejected
FEW = goodness_of_fit([1, 0, 0], LAW, level=1e-3)            # n = 1: nothing detectable


def _make(cls, tests, passed):
    extra = {"L": 2} if cls is SamplerCheck else {"horizon": 3, "over": (), "under": (), "length_counts": (1, 0, 0)}
    return cls(passed=passed, n=1000, V=3, alpha=1e-3, power=0.99,
               detectable_tv=tests[0].detectable_tv, impossible=tests[0].impossible, subtests=tuple(tests), **extra)


def test_the_sub_tests_decide_as_described():
    assert not FIT.rejected and not FIT.inconclusive
    assert OFF.rejected
    assert FEW.inconclusive and not FEW.rejected


def test_one_base_with_the_shared_fields():
    assert {f.name for f in dataclasses.fields(ChiSquareCheck)} == SHARED
    for cls in (SamplerCheck, StepCheck):
        assert issubclass(cls, ChiSquareCheck)
        assert SHARED <= {f.name for f in dataclasses.fields(cls)}
        # the verdict rule is written once
        assert cls.verdict is ChiSquareCheck.verdict and cls.inconclusive is ChiSquareCheck.inconclusive


@pytest.mark.parametrize("cls", [SamplerCheck, StepCheck])
@pytest.mark.parametrize("tests, passed, verdict", [
    ((FIT, FIT), True, "PASS"),
    ((FIT, OFF), False, "FAIL"),        # a marginal sub-test rejects
    ((OFF, FIT), False, "FAIL"),        # the joint test rejects
    ((FEW, FIT), False, "INCONCLUSIVE"),  # nothing rejected, the joint test detects nothing
    ((FEW, OFF), False, "FAIL"),        # a rejection is a failure even when the joint test is weak
])
def test_same_verdict_from_the_same_fields(cls, tests, passed, verdict):
    r = _make(cls, tests, passed)
    assert r.verdict == verdict and r.passed is passed
    assert r.inconclusive is (verdict == "INCONCLUSIVE")
    text = str(r)
    assert verdict in text.splitlines()[0]
    assert ("INCONCLUSIVE: more data needed" in text) is (verdict == "INCONCLUSIVE")
    assert text.count("REJECTED") == sum(t.rejected for t in tests)


@pytest.mark.parametrize("cls", [SamplerCheck, StepCheck])
def test_fields_are_keyword_only(cls):
    with pytest.raises(TypeError):
        cls(True, 1, 3, 2, 1e-3, 0.99, 0.1, 0, (FIT,))
