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
