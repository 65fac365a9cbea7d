"""pytest plugin (``pytest11`` entry point ``specsim``): fixtures for checking your own verifier.

A complete test file::

    from mypkg import my_verifier

    def test_my_verifier_is_lossless(lossless_check):
        lossless_check(my_verifier)

``lossless_check`` is :func:`specsim.testing.assert_lossless` (same keyword arguments; the
default number of examples comes from ``--specsim-examples``); ``sampler_check`` is
:func:`specsim.testing.check_sampler` and fails the test with its report when the sampler is
rejected; ``step_check`` is :func:`specsim.testing.check_step` for whole speculative steps.
This module imports only pytest at collection time: specsim.testing (numpy, scipy,
hypothesis) is imported when a fixture is used, never cvxpy, torch or triton.
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser):
    """Register ``--specsim-examples N``: Hypothesis examples per ``lossless_check`` call."""
    group = parser.getgroup("specsim", "specsim distribution-preservation checks")
    group.addoption("--specsim-examples", type=int, default=None,
                    help="Hypothesis examples per lossless_check call (default: assert_lossless's 60)")


@pytest.fixture
def lossless_check(request):
    """Fixture: ``lossless_check(verifier, **kw)`` asserts max_z |C(z) - P(z)| <= atol on every
    Hypothesis-drawn instance (:func:`specsim.testing.assert_lossless`, same keywords; the default
    ``max_examples`` comes from ``--specsim-examples``).

    Returns: the check function; it raises :class:`specsim.testing.LossyVerifierError` (an
    ``AssertionError``, so the test fails with the shrunk counterexample).  Fixtures are not
    called directly; the module docstring shows a complete test file.
    """
    from specsim.testing import assert_lossless

    n = request.config.getoption("--specsim-examples", default=None)

    def check(verifier, **kw):
        if n is not None:
            kw.setdefault("max_examples", n)
        assert_lossless(verifier, **kw)

    return check


@pytest.fixture
def sampler_check():
    """Fixture: ``sampler_check(sample_fn, target, draft_model, L, **kw)`` runs
    :func:`specsim.testing.check_sampler` (the completion chi-square at false-alarm rate
    ``alpha``, power stated in its report) and fails the test with the report when it rejects.

    Returns: the check function, which returns the :class:`specsim.testing.SamplerCheck` when it
    passes.  Fixtures are not called directly; see the module docstring.
    """
    from specsim.testing import check_sampler

    def check(sample_fn, target, draft_model, L, **kw):
        res = check_sampler(sample_fn, target, draft_model, L, **kw)
        if not res.passed:
            pytest.fail(str(res), pytrace=False)
        return res

    return check


@pytest.fixture
def step_check():
    """Fixture: ``step_check(step, target, draft_model, **kw)`` runs
    :func:`specsim.testing.check_step` on a whole speculative step (completion chi-square at
    false-alarm rate ``alpha``, power stated in its report) and fails the test with the report
    when it rejects; a malformed step output raises :class:`specsim.testing.SamplerError`.

    Returns: the check function, which returns the :class:`specsim.testing.StepCheck` when it
    passes.  Fixtures are not called directly; see the module docstring.
    """
    from specsim.testing import check_step

    def check(step, target, draft_model, **kw):
        res = check_step(step, target, draft_model, **kw)
        if not res.passed:
            pytest.fail(str(res), pytrace=False)
        return res

    return check
