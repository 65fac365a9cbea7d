"""The pytest plugin: a user's three-line test file, passing and failing."""
import pytest

pytest_plugins = ["pytester"]


def _plugin_args():
    """``-p specsim.testing.plugin`` unless the installed package already registers the entry point."""
    from importlib.metadata import entry_points
    installed = any(ep.value == "specsim.testing.plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "specsim.testing.plugin"]

USER_TEST = '''
from specsim.verifiers import {name} as my_verifier

def test_mine(lossless_check):
    lossless_check(my_verifier)
'''


@pytest.mark.parametrize("name,ok", [("block", True), ("hsd_released", False)])
def test_lossless_check_fixture(pytester, name, ok):
    pytester.makepyfile(test_user=USER_TEST.format(name=name))
    res = pytester.runpytest_subprocess(*_plugin_args(), "--specsim-examples", "30", "-q")
    if ok:
        res.assert_outcomes(passed=1)
    else:
        res.assert_outcomes(failed=1)
        res.stdout.fnmatch_lines(["*hsd_released is not lossless*", "*completed sequence z*"])


def test_sampler_check_fixture(pytester):
    pytester.makepyfile(test_user='''
from specsim.models import random_model
from specsim.testing import from_verifier
from specsim.verifiers import token

def test_sampler(sampler_check):
    sampler_check(from_verifier(token), random_model(3, 0), random_model(3, 1), L=2, n=3000)
''')
    res = pytester.runpytest_subprocess(*_plugin_args(), "-q")
    res.assert_outcomes(passed=1)


def test_sampler_check_failure_prints_one_report_the_instance_and_a_reproduce_line(pytester):
    pytester.makepyfile(test_user='''
from specsim.models import random_model
from specsim.testing import default_instance, from_verifier
from specsim.testing.selftest.mutants import CHAIN_MUTANTS

def test_named_pair(sampler_check):
    sampler_check(from_verifier(CHAIN_MUTANTS["residual_from_target"].verifier), random_model(3, 0),
                  random_model(3, 1), L=2, n=3000, seed=7)

def test_default_pair(sampler_check):
    sampler_check(from_verifier(CHAIN_MUTANTS["residual_from_target"].verifier), *default_instance(), n=3000)
''')
    res = pytester.runpytest_subprocess(*_plugin_args(), "-q")
    res.assert_outcomes(failed=2)
    res.stdout.fnmatch_lines(["*residual_from_target*FAIL*",
                              "*instance: target = random(V=3, seed=0, c=1), draft_model = random(V=3, seed=1, c=1), "
                              "L = 2, n = 3000, context = ()",
                              "*reproduce: python -m pytest test_user.py::test_named_pair   (seed = 7)",
                              "*instance: default_instance() = (target = random(V=4*",
                              "*reproduce: python -m pytest test_user.py::test_default_pair   (seed = 0)"])
    body = res.stdout.str().split("short test summary")[0]  # the summary repeats messages (in full under CI)
    assert body.count("reproduce:") == 2 and body.count("FAIL at false-alarm") == 2  # one report per test


HYPOTHESIS_SAMPLER_TEST = '''
import numpy as np
from specsim.testing import BatchSampler

def token_batch(drafts, p, q, rng):
    """Vectorised token-level speculative sampling; residual {residual}."""
    B, L = drafts.shape
    idx = np.arange(B)
    ratio = np.stack([p[idx, i, drafts[:, i]] / q[idx, i, drafts[:, i]] for i in range(L)], axis=1)
    fail = rng.random((B, L)) >= ratio
    tau = np.where(fail.any(axis=1), fail.argmax(axis=1), L)
    rows = p[idx, tau].copy()
    rej = tau < L
    if "{residual}" == "norm((p - q)_+)":
        r = np.maximum(p[idx, tau][rej] - q[idx, np.minimum(tau, L - 1)][rej], 0)
        rows[rej] = r / r.sum(axis=1, keepdims=True)
    c = np.cumsum(rows, axis=1)
    tok = np.minimum((c <= rng.random(B)[:, None] * c[:, -1:]).sum(axis=1), p.shape[2] - 1)
    return tau, tok

def test_sampler(sampler_check):
    sampler_check(BatchSampler(token_batch), L=2, n=3000, derandomize=True)
'''


@pytest.mark.parametrize("residual,ok", [("norm((p - q)_+)", True), ("p itself", False)])
def test_sampler_check_hypothesis_mode(pytester, residual, ok):
    """Without a model pair the fixture draws pairs from model_pairs(): a lossless sampler passes
    (false-alarm rate alpha for the whole call), a wrong-residual one fails with the shrunk pair,
    the report's strings and the rows along the most over-represented one."""
    pytester.makepyfile(test_user=HYPOTHESIS_SAMPLER_TEST.format(residual=residual))
    res = pytester.runpytest_subprocess(*_plugin_args(), "--specsim-examples", "5", "-q")
    if ok:
        res.assert_outcomes(passed=1)
    else:
        res.assert_outcomes(failed=1)
        res.stdout.fnmatch_lines(["*FAIL*", "*most over-represented completed strings*", "*instance: Case(ModelPair*",
                                  "*rows along*", "*p0 = (*q0 = (*",
                                  "*reproduce: python -m pytest test_user.py::test_sampler"])


STEP_TEST = '''
from specsim.testing import step_from_verifier
from specsim.testing.selftest.mutants import CHAIN_MUTANTS
from specsim.verifiers import block

def test_block_step(step_check):
    res = step_check(step_from_verifier(block, L=2), n=4000)
    assert (res.V, res.horizon) == (4, 3)  # the recorded default instance at the default max_tokens

def test_block_token_residual_step(step_check):
    step_check(step_from_verifier(CHAIN_MUTANTS["block_token_residual"].verifier, L=2), n=9000)
'''


def test_step_check_fixture_on_the_default_instance(pytester):
    """step_check(step) without a model pair uses default_instance("step"), on which the step of
    block verification with the token-level residual (the self-test mutant that needs the most
    samples there: 8,974 for 99% power, power_report(..., check="step")) is flagged at n = 9000;
    block verification itself passes (false-alarm rate 1e-3)."""
    pytester.makepyfile(test_user=STEP_TEST)
    res = pytester.runpytest_subprocess(*_plugin_args(), "-q")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*step(block_token_residual, L=2) [[]V=4, horizon=3, n=9000[]]: FAIL*",
                              "*most over-represented*",
                              '*instance: default_instance("step", max_tokens=3) = (target = random(V=4*',
                              "*reproduce: python -m pytest test_user.py::test_block_token_residual_step*"])
