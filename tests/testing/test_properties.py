"""Engine properties: the validated references have all of them, and each property has a mutant
that breaks it and is caught, with a witness naming the input."""
import numpy as np
import pytest

from specsim.testing.properties import PROPERTIES, PROPERTY_MUTANTS, check_engine_properties, reference_verify


def test_reference_has_every_property():
    report = check_engine_properties(reference_verify, trials=16)
    assert report.passed, str(report)
    assert tuple(r.name for r in report.results) == PROPERTIES


@pytest.mark.parametrize("prop", PROPERTIES)
def test_each_property_has_a_mutant_that_is_caught(prop):
    report = check_engine_properties(PROPERTY_MUTANTS[prop], trials=16)
    assert prop in report.broken, str(report)
    assert report[prop].witness and "BROKEN" in str(report)


def test_reference_gpu_api_has_every_property():
    torch = pytest.importorskip("torch")
    from reference_gpu.api import draw_chain_noise, verify_chain

    def verify(drafts, p, q, seeds):
        """reference_gpu's validated torch path in the seeded dense layout (placeholders dropped
        into the ragged layout, the bonus row at each request's own length)."""
        ks = [int(np.flatnonzero(d < 0)[0]) if (d < 0).any() else len(d) for d in drafts]
        ids = np.concatenate([d[:k] for d, k in zip(drafts, ks)])
        qs = np.concatenate([q[b, :k] for b, k in enumerate(ks)])
        ps = np.concatenate([p[b, :k + 1] for b, k in enumerate(ks)])
        res = verify_chain(torch.as_tensor(ids), torch.as_tensor(np.cumsum(ks)), target_probs=torch.as_tensor(ps),
                           draft_probs=torch.as_tensor(qs),
                           noise=draw_chain_noise(ks, p.shape[-1], seeds=seeds.tolist()), backend="torch")
        return res.num_accepted.numpy(), res.output_token_ids.numpy()[np.arange(len(ks)), res.num_accepted.numpy()]

    report = check_engine_properties(verify, trials=16)
    assert report.passed, str(report)


@pytest.mark.parametrize("kw,exc,match", [
    (dict(layout="ragged"), ValueError, "layout"),
    (dict(V=2), ValueError, "V"),
    (dict(L=1), ValueError, "L"),
    (dict(trials=1), ValueError, "trials"),
    (dict(properties=("nope",)), ValueError, "unknown properties"),
])
def test_bad_arguments(kw, exc, match):
    with pytest.raises(exc, match=match):
        check_engine_properties(reference_verify, **kw)


def test_raising_on_well_formed_input_is_reported():
    def broken(drafts, p, q, seeds):
        raise RuntimeError("illegal memory access")

    report = check_engine_properties(broken, properties=("bonus_row",))
    assert not report.passed and "illegal memory access" in report["bonus_row"].witness
