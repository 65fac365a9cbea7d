"""pytest plugin (``pytest11`` entry point ``specsim``): fixtures for checking your own verifier.

A complete test file::

    from mypkg import my_verifier

    def test_my_verifier_is_lossless(lossless_check):
        lossless_check(my_verifier)

``lossless_check`` is :func:`specsim.testing.assert_lossless` (same keyword arguments; the
default number of examples comes from ``--specsim-examples``); ``sampler_check`` is
:func:`specsim.testing.check_sampler` and fails the test with its report when the sampler is
rejected (without target and draft model, its Hypothesis mode over ``model_pairs()``); ``step_check`` is :func:`specsim.testing.check_step` for whole speculative steps.
This module imports only pytest at collection time: specsim.testing (numpy, scipy,
hypothesis) is imported when a fixture is used, never cvxpy, torch or triton.
"""
from __future__ import annotations

import shlex

import pytest


def pytest_addoption(parser):
    """Register ``--specsim-examples N``: Hypothesis examples per ``lossless_check`` call and per
    Hypothesis-mode ``sampler_check`` call."""
    group = parser.getgroup("specsim", "specsim distribution-preservation checks")
    group.addoption("--specsim-examples", type=int, default=None,
                    help="Hypothesis examples per lossless_check call (default: assert_lossless's 60) and per "
                         "Hypothesis-mode sampler_check call (default 10)")


def _fail(request, report: str, instance: str | None = None, seed=None):
    """Fail the test with one report, the instance by name and a line to paste that reruns it
    (the checks are seeded, so the rerun gives the same report when the code draws only from the
    ``rng`` it is handed; Hypothesis replays its shrunk example from its database)."""
    lines = [report]
    if instance is not None:
        lines.append(f"  instance: {instance}")
    rerun = f"python -m pytest {shlex.quote(request.node.nodeid)}"
    lines.append(f"  reproduce: {rerun}" + ("" if seed is None else f"   (seed = {seed})"))
    pytest.fail("\n".join(lines), pytrace=False)


def _instance(target, draft_model, kw, default=None, **sizes) -> str:
    """The model pair by name (``default_instance(...)`` when it is that pair), sizes and context."""
    where = ", ".join([f"target = {target.name}", f"draft_model = {draft_model.name}"]
                      + [f"{k} = {v}" for k, v in sizes.items()] + [f"context = {tuple(kw.get('context', ()))}"])
    return f"{default} = ({where})" if default else where


def _is_default(pair, target, draft_model) -> bool:
    return (pair[0].name, pair[1].name) == (target.name, draft_model.name)


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
def sampler_check(request):
    """Fixture: ``sampler_check(sample_fn, target, draft_model, L, **kw)`` runs
    :func:`specsim.testing.check_sampler` (the completion chi-square at false-alarm rate
    ``alpha``, power stated in its report) and fails the test when it rejects, printing the
    report, the instance by name (``default_instance()`` when it is that pair) and a
    ``reproduce:`` line to paste (the pytest command of the test; the check is seeded).
    Without ``target`` and ``draft_model`` (``sampler_check(sample_fn, L=2, **kw)``) it is the
    Hypothesis mode, :func:`specsim.testing.assert_sampler_lossless`: the check on every
    ``model_pairs()`` pair Hypothesis draws (``alpha`` for the whole call), failing with the
    shrunk pair's report and its rows; the number of pairs is ``max_examples`` (default
    ``--specsim-examples`` or 10).

    Returns: the check function, which returns the :class:`specsim.testing.SamplerCheck` when it
    passes (``None`` in Hypothesis mode).  Fixtures are not called directly; see the module
    docstring.
    """
    from specsim.testing import LossyVerifierError, assert_sampler_lossless, check_sampler, default_instance
    from specsim.testing.assertions import InconclusiveCheckError

    examples = request.config.getoption("--specsim-examples", default=None)

    def check(sample_fn, target=None, draft_model=None, L=2, **kw):
        if target is None and draft_model is None:
            if examples is not None:
                kw.setdefault("max_examples", examples)
            try:
                assert_sampler_lossless(sample_fn, L=L, **kw)
            except (LossyVerifierError, InconclusiveCheckError) as err:
                _fail(request, str(err))  # the error names the shrunk instance and its rows
            return None
        if target is None or draft_model is None:
            raise TypeError("sampler_check needs both target and draft_model, or neither (Hypothesis mode)")
        res = check_sampler(sample_fn, target, draft_model, L, **kw)
        if not res.passed:
            pair = default_instance()
            default = "default_instance()" if _is_default(pair, target, draft_model) and L == pair[2] else None
            _fail(request, str(res), _instance(target, draft_model, kw, default, L=L, n=res.n),
                  kw.get("seed", 0))
        return res

    return check


@pytest.fixture
def step_check(request):
    """Fixture: ``step_check(step, target=None, draft_model=None, **kw)`` runs
    :func:`specsim.testing.check_step` on a whole speculative step (completion chi-square at
    false-alarm rate ``alpha``, power stated in its report) and fails the test with the report,
    the instance by name and a ``reproduce:`` line when it rejects; a malformed step output raises :class:`specsim.testing.SamplerError`.
    Without ``target`` and ``draft_model`` it runs on check_step's recorded default instance
    (``specsim.testing.default_instance("step", max_tokens=...)``, on which the step of every
    self-test chain mutant is flagged with 99% power by n = 9149 at max_tokens 3 and 4).

    Returns: the check function, which returns the :class:`specsim.testing.StepCheck` when it
    passes.  Fixtures are not called directly; see the module docstring.
    """
    from specsim.testing import check_step, default_instance

    def check(step, target=None, draft_model=None, **kw):
        res = check_step(step, target, draft_model, **kw)
        if not res.passed:
            m = kw.get("max_tokens", 3)
            default = None
            if target is None:
                target, draft_model = default_instance("step", max_tokens=m)[:2]
                default = f'default_instance("step", max_tokens={m})'
            _fail(request, str(res), _instance(target, draft_model, kw, default, max_tokens=m, n=res.n),
                  kw.get("seed", 0))
        return res

    return check
