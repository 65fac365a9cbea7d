"""power_report: its predictions against simulated check_sampler runs, the blind instance of issue 13
and the recorded default instance."""
import numpy as np
import pytest

from specsim.drafts import iid_paths
from specsim.models import random_model
from specsim.testing import BatchSampler, check_sampler, check_step, default_instance, step_from_verifier
from specsim.testing.selftest.power import power_report
from specsim.testing.selftest.mutants import CHAIN_MUTANTS
from specsim.testing.selftest.power import DEFAULT_STEP_INSTANCE
from specsim.testing.selftest.mutants import TREE_MUTANTS


def _law_batch_sampler(verifier):
    """A BatchSampler drawing (accepted, token) from the verifier's exact outcome law per draft
    (cached: V^L drafts), so that many check_sampler runs are cheap."""
    cache = {}

    def fn(drafts, p, q, rng):
        L, V = drafts.shape[1], p.shape[2]
        cdfs = np.empty((len(drafts), (L + 1) * V))
        for b, d in enumerate(drafts):
            key = tuple(d.tolist())
            if key not in cache:
                flat = np.zeros((L + 1, V))
                for o in verifier.law(key, p[b], q[b]):
                    flat[o.accepted] += o.prob * o.next_dist
                cache[key] = np.cumsum(flat.ravel())
            cdfs[b] = cache[key]
        k = (cdfs < rng.random(len(drafts))[:, None] * cdfs[:, -1:]).sum(axis=1)
        k = np.minimum(k, (L + 1) * V - 1)
        return k // V, k % V

    return BatchSampler(fn)


def test_predicted_power_matches_simulated_rejection_rate():
    target, draft_model = random_model(3, 0), random_model(3, 1)
    n, runs = 500, 300
    row = next(r for r in power_report(target, draft_model, 2, n).rows if r.name == "residual_from_target")
    assert 0.3 < row.power < 0.8  # an n where the prediction is informative
    fn = _law_batch_sampler(CHAIN_MUTANTS["residual_from_target"].verifier)
    rate = np.mean([not check_sampler(fn, target, draft_model, 2, n=n, seed=s).passed for s in range(runs)])
    # the prediction is the best sub-test's power (a lower bound on the call's): 4 binomial sigmas
    # below, and the other sub-tests add little above
    sigma = np.sqrt(row.power * (1 - row.power) / runs)
    assert row.power - 4 * sigma <= rate <= row.power + 0.1 + 4 * sigma


def test_mutant_flagged_at_the_n_reported_for_99_percent_power():
    target, draft_model = random_model(3, 0), random_model(3, 1)
    row = next(r for r in power_report(target, draft_model, 2).rows if r.name == "bonus_wrong_row")
    fn = _law_batch_sampler(CHAIN_MUTANTS["bonus_wrong_row"].verifier)
    assert 0 < row.tv < 0.1 and row.detected
    assert not check_sampler(fn, target, draft_model, 2, n=int(row.samples_needed), seed=1).passed


def test_blind_instance_reports_block_token_residual_undetectable():
    rep = power_report(random_model(3, 0), random_model(3, 1), L=2)
    row = next(r for r in rep.rows if r.name == "block_token_residual")
    assert row.tv < 1e-12 and row.samples_needed == np.inf and not row.detected
    assert not rep.detects_all and "block_token_residual" in rep.undetectable
    assert "block_token_residual" in str(rep) and "never" in str(rep)


def test_default_instance_detects_every_chain_mutant_at_default_n():
    target, draft_model, L = default_instance()
    rep = power_report(target, draft_model, L)
    assert rep.n == 20000 and rep.detects_all
    assert {r.name for r in rep.rows} == set(CHAIN_MUTANTS)
    assert all(r.samples_needed <= 20000 and r.tv > 0 for r in rep.rows)


def test_tree_mode_adds_the_mutants_of_that_process():
    rep = power_report(random_model(3, 0), random_model(3, 1), 1, drafting=iid_paths(2))
    tree = {r.name for r in rep.rows if r.suite == "tree"}
    assert tree == {name for name, m in TREE_MUTANTS.items() if m.drafting.name == "iid_paths(2)"}
    assert rep.drafting == "iid_paths(2)"


def test_step_mode_covers_every_chain_mutant_as_a_step():
    """check_step tests other sub-tests (completed prefixes, level alpha / max_tokens) at its own
    context, so its power differs from check_sampler's on the same pair."""
    target, draft_model, L = default_instance()
    step = power_report(target, draft_model, L, check="step")
    sampler = power_report(target, draft_model, L)
    assert [r.name for r in step.rows] == list(CHAIN_MUTANTS) and step.check == "step" and step.context == (1,)
    assert "check_step power" in str(step) and "max_tokens=4" in str(step)
    assert any(a.samples_needed != b.samples_needed for a, b in zip(step.rows, sampler.rows))


@pytest.mark.parametrize("max_tokens", [3, 4])
def test_default_step_instance_detects_every_mutant_step(max_tokens):
    target, draft_model, m = default_instance("step", max_tokens=max_tokens)
    rep = power_report(target, draft_model, m - 1, check="step")
    assert m == max_tokens and rep.detects_all and not rep.undetectable
    assert max(r.samples_needed for r in rep.rows) <= DEFAULT_STEP_INSTANCE["max_samples_needed"]


def test_mutant_step_flagged_at_the_n_reported_for_99_percent_power():
    target, draft_model, m = default_instance("step")
    row = next(r for r in power_report(target, draft_model, m - 1, check="step").rows
               if r.name == "residual_from_target")
    step = step_from_verifier(CHAIN_MUTANTS["residual_from_target"].verifier, m - 1)
    assert row.detected and row.samples_needed < 2000
    assert not check_step(step, n=int(row.samples_needed), max_tokens=m, seed=1).passed


def test_bad_arguments():
    t, d = random_model(3, 0), random_model(3, 1)
    with pytest.raises(ValueError, match="n"):
        power_report(t, d, 2, 0)
    with pytest.raises(ValueError, match="alpha"):
        power_report(t, d, 2, alpha=2.0)
    with pytest.raises(TypeError, match="drafting"):
        power_report(t, d, 2, drafting="iid")
    with pytest.raises(ValueError, match="check must be"):
        power_report(t, d, 2, check="engine")
    with pytest.raises(ValueError, match="chain steps only"):
        power_report(t, d, 1, drafting=iid_paths(2), check="step")
    with pytest.raises(ValueError, match="check must be"):
        default_instance("engine")


def test_the_front_of_specsim_testing_is_small_and_each_name_is_its_module_object():
    """specsim.testing exports the checks, their errors and the starting adapters (issue 25: 75 names
    before, among them a leaked ``annotations``; issue 22 added ``from_rng_sampler``, the adapter of
    the exact check); each is the object of the module it lives in."""
    import importlib
    import specsim.testing

    names = specsim.testing.__all__
    assert 16 <= len(names) <= 23 and "annotations" not in names and "importlib" not in names
    for name in names:
        mod = importlib.import_module(f"specsim.testing.{specsim.testing._WHERE[name]}")
        assert name in mod.__all__ and getattr(specsim.testing, name) is getattr(mod, name)
    with pytest.raises(AttributeError, match="mutation_table"):   # the back rooms are imported from their modules
        specsim.testing.mutation_table
