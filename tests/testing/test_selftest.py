"""The suite tested against the mutation suites: every mutant flagged, every control passed."""
import subprocess
import sys

import numpy as np
import pytest

from specsim.testing.selftest.mutation import format_table, mutation_suites, mutation_table

SAMPLER_SUBSET = {"residual_from_target", "reused_uniform", "block_first_failure", "onehot_no_removal",
                  "token", "block"}


@pytest.fixture(scope="module")
def table():
    return mutation_table(max_examples=30, shrink=False, sampler_only=SAMPLER_SUBSET, sampler_cap=8000)


def test_every_mutant_flagged_and_every_control_passed(table):
    suites = mutation_suites()
    assert set(suites) == {"chain", "tree"} and len(suites["chain"]) >= 12
    assert len(table) == sum(len(s) for s in suites.values())
    wrong = [(r.name, r.exact_flagged, r.sampler_flagged) for r in table if not r.correct]
    assert not wrong, format_table(table)
    for r in table:
        assert r.exact_flagged != r.expected_lossless
        if r.expected_lossless:
            assert r.samples_needed == np.inf  # C = P exactly: no sample size detects anything
        else:
            assert np.isfinite(r.samples_needed) and r.samples_needed >= 1


def test_sampler_mode_ran_on_the_subset(table):
    ran = {r.name: r for r in table if r.sampler_flagged is not None}
    assert set(ran) == SAMPLER_SUBSET
    for r in ran.values():  # mutants: n = 2x the 99%-power size; controls: 8000 draws at alpha = 1e-3
        assert r.sampler_flagged == (not r.expected_lossless)


def test_table_format(table):
    text = format_table(table)
    assert text.splitlines()[0].startswith("| suite | verifier |")
    assert text.count("\n") == len(table) + 1


def test_shrunk_counterexamples_are_small():
    from specsim.testing import LossyVerifierError, assert_lossless
    from specsim.testing.selftest.mutants import CHAIN_MUTANTS
    with pytest.raises(LossyVerifierError) as info:
        assert_lossless(CHAIN_MUTANTS["bonus_wrong_row"].verifier, max_examples=30, derandomize=True)
    assert info.value.case.pair.V == 3 and info.value.case.L == 1


def test_demo_runs():
    out = subprocess.run([sys.executable, "-m", "specsim.testing.demo"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "hsd_released is not lossless" in out.stdout and "completed sequence z" in out.stdout


def test_importing_specsim_testing_pulls_no_cvxpy_torch_triton():
    code = ("import sys, specsim.testing as T, specsim.testing.plugin, specsim.testing.selftest.mutation as S, "
            "specsim.testing.strategies as H; "
            "T.assert_lossless, T.check_sampler, S.mutation_table, H.model_pairs, T.transformers_sampler; "
            "bad = [m for m in ('cvxpy', 'torch', 'triton', 'transformers') if m in sys.modules]; "
            "assert not bad, bad")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
