"""Unmodified samplers certified exactly: draws routed through injected uniforms
(specsim.testing.uniforms: UniformSource, routed_torch, from_rng_sampler)."""
import copy

import numpy as np
import pytest

from specsim.exact import check_lossless
from specsim.models import random_model
from specsim.testing import SamplerError, check_sampler_exact, from_rng_sampler
from specsim.testing.selftest.mutants import CHAIN_MUTANTS
from specsim.testing.uniforms import UniformSource, routed_torch
from specsim.verifiers import token


# ----------------------------------------------------------------------------- samplers as people write them
def np_token_level(draft, p, q, rng):
    """Token-level speculative sampling with rng.random and rng.choice (Leviathan et al., Alg. 1)."""
    for i, t in enumerate(draft):
        if rng.random() >= min(1.0, p[i, t] / q[i, t]):
            r = np.maximum(p[i] - q[i], 0)
            return i, int(rng.choice(len(r), p=r / r.sum()))
    return len(draft), int(rng.choice(p.shape[1], p=p[-1]))


def np_inverted_ratio(draft, p, q, rng):
    """Known-lossy: acceptance min(1, q/p)."""
    for i, t in enumerate(draft):
        if rng.random() >= min(1.0, q[i, t] / p[i, t]):
            r = np.maximum(p[i] - q[i], 0)
            return i, int(rng.choice(len(r), p=r / r.sum()))
    return len(draft), int(rng.choice(p.shape[1], p=p[-1]))


def torch_token_level(draft, p, q, rng, dtype=None, from_target=False):
    """The same rule in torch: torch.rand and torch.multinomial on the global generator."""
    import torch
    dtype = dtype or torch.float64
    P, Q = torch.as_tensor(p), torch.as_tensor(q)
    for i, t in enumerate(draft):
        if not torch.rand((), dtype=dtype).item() < min(1.0, float(P[i, t] / Q[i, t])):
            r = P[i] if from_target else torch.clamp(P[i] - Q[i], min=0)
            return i, int(torch.multinomial(r / r.sum(), 1))
    return len(draft), int(torch.multinomial(P[-1:], 1)[0, 0])


def torch_residual_from_target(draft, p, q, rng):
    """Known-lossy: on rejection resample from the target row itself."""
    return torch_token_level(draft, p, q, rng, from_target=True)


PAIRS = [(random_model(3, 0), random_model(3, 1)), (random_model(4, 5), random_model(4, 6))]


@pytest.mark.parametrize("k", range(len(PAIRS)))
def test_unmodified_numpy_sampler_is_certified_with_the_rules_exact_law(k):
    target, draft = PAIRS[k]
    cert = check_sampler_exact(from_rng_sampler(np_token_level), target, draft, L=2)
    assert cert.lossless and cert.max_abs_error < 1e-9, cert
    assert cert.expected_accepted == pytest.approx(check_lossless(token, target, draft, 2).expected_accepted, abs=1e-9)


@pytest.mark.parametrize("k", range(len(PAIRS)))
def test_lossy_numpy_variant_is_flagged_with_the_mutants_witness(k):
    target, draft = PAIRS[k]
    cert = check_sampler_exact(from_rng_sampler(np_inverted_ratio), target, draft, L=2)
    ref = check_lossless(CHAIN_MUTANTS["inverted_ratio"].verifier, target, draft, 2)
    assert not cert.lossless and not ref.lossless
    assert cert.max_abs_error == pytest.approx(ref.max_abs_error, abs=1e-9)
    assert cert.worst_sequence == ref.worst_sequence


def test_unmodified_torch_sampler_is_certified_and_its_lossy_variant_flagged():
    pytest.importorskip("torch")
    target, draft = PAIRS[1]  # V = 4 (the numpy tests cover V = 3 too); ~10 s
    cert = check_sampler_exact(from_rng_sampler(torch_token_level, torch=True), target, draft, L=2)
    assert cert.lossless and cert.max_abs_error < 1e-9, cert
    bad = check_sampler_exact(from_rng_sampler(torch_residual_from_target, torch=True), target, draft, L=2)
    ref = check_lossless(CHAIN_MUTANTS["residual_from_target"].verifier, target, draft, 2)
    assert not bad.lossless and bad.worst_sequence == ref.worst_sequence
    assert bad.max_abs_error == pytest.approx(ref.max_abs_error, abs=1e-9)


def test_float32_torch_uniforms_are_exact_on_the_float32_lattice():
    """torch.rand in float32 draws from k 2^-24; on grid="float32" that is the law integrated."""
    torch = pytest.importorskip("torch")
    fn = from_rng_sampler(lambda d, p, q, rng: torch_token_level(d, p, q, rng, dtype=torch.float32), torch=True)
    target, draft = PAIRS[0]
    cert = check_sampler_exact(fn, target, draft, L=1, grid="float32")
    assert cert.lossless, cert


# ----------------------------------------------------------------------------- the maps, against the libraries
def _p_families(rng, V):
    raw = rng.random(V)
    tiny = np.full(V, 5e-324)
    tiny[0] = 1.0
    near = np.full(V, 1e-12)
    near[-1] = 1.0
    one_hot = np.zeros(V)
    one_hot[rng.integers(V)] = 1.0
    ties = np.array([1.0, 1.0] + [0.0] * (V - 2))
    return [raw / raw.sum(), tiny, near / near.sum(), one_hot, ties / 2, np.full(V, 1.0 / V)]


@pytest.mark.parametrize("seed", range(5))
def test_choice_with_p_is_numpys_inverse_cdf_for_the_same_uniform(seed):
    """numpy's choice(p=) draws one double with random() and searchsorts the cdf: for the same
    generator state, the uniform numpy would use gives numpy's own index."""
    gen = np.random.default_rng(seed)
    for V in (2, 3, 7):
        for p in _p_families(gen, V):
            for _ in range(20):
                twin = copy.deepcopy(gen)
                expected = gen.choice(V, p=p)
                u = twin.random()
                assert UniformSource([u]).choice(V, p=p) == expected
    for p in _p_families(gen, 4):  # extreme uniforms: never an index of probability 0
        for u in (0.0, 1.0 - 2.0 ** -53):
            assert p[UniformSource([u]).choice(4, p=p)] > 0


def test_choice_validates_p_as_numpy_does():
    for p, match in [([0.5, 0.6], "do not sum to 1"), ([1.5, -0.5], "non-negative"), ([np.nan, 1.0], "NaN"),
                     ([1.0], "length 2")]:
        with pytest.raises(ValueError, match=match):
            UniformSource([0.5]).choice(2, p=p)
        with pytest.raises(ValueError):
            np.random.default_rng(0).choice(2, p=p)


def test_uniform_integer_maps_cover_the_range_evenly():
    n = 5
    for k in range(n):
        u = (k + 0.5) / n
        assert UniformSource([u]).integers(n) == k and UniformSource([u]).integers(2, 2 + n) == 2 + k
        assert UniformSource([u]).choice(n) == k and UniformSource([u]).choice(list("abcde")) == "abcde"[k]
    top = 1.0 - 2.0 ** -53
    assert UniformSource([top]).integers(n) == n - 1 and UniformSource([0.0]).integers(n) == 0
    assert UniformSource([top]).integers(0, n, endpoint=True) == n
    assert UniformSource([0.3, 0.7]).integers(10, size=2).tolist() == [3, 7]
    with pytest.raises(ValueError, match="low >= high"):
        UniformSource([0.5]).integers(3, 3)


def test_random_float32_is_the_2_to_24_lattice_and_uniform_scales():
    u = 0.1 + 2.0 ** -30
    v = UniformSource([u]).random(dtype=np.float32)
    assert v.dtype == np.float32 and v <= u and float(v) * 2 ** 24 == int(float(v) * 2 ** 24)
    assert UniformSource([0.25]).uniform(2.0, 6.0) == 3.0
    out = np.empty(2)
    assert UniformSource([0.1, 0.2]).random(out=out) is out and out.tolist() == [0.1, 0.2]


def test_torch_rand_and_bernoulli_follow_torchs_own_cpu_rule():
    """bernoulli(p) on the CPU equals rand(...) < p under the same seed (the rule routed), and the
    routed calls return torch's values when fed torch's uniforms."""
    torch = pytest.importorskip("torch")
    for dtype, bits in ((torch.float32, 24), (torch.float64, 53)):
        for seed in range(10):
            p = torch.rand(6, dtype=dtype, generator=torch.Generator().manual_seed(100 + seed))
            p[0], p[1] = 0.0, 1.0
            torch.manual_seed(seed)
            real_b = torch.bernoulli(p)
            torch.manual_seed(seed)
            real_u = torch.rand(6, dtype=dtype)
            assert torch.equal(real_b, (real_u < p).to(dtype))
            assert torch.equal(real_u * 2 ** bits, torch.floor(real_u * 2 ** bits))  # torch's lattice
            src = UniformSource(real_u.double().numpy())
            with routed_torch(src):
                assert torch.equal(torch.bernoulli(p), real_b)
            with routed_torch(UniformSource(real_u.double().numpy())):
                assert torch.equal(torch.rand(6, dtype=dtype), real_u)


def test_torch_multinomial_is_the_inverse_cdf_of_the_normalised_row():
    torch = pytest.importorskip("torch")
    w = torch.tensor([[0.0, 2.0, 0.0, 2.0, 0.0], [1.0, 1.0, 1.0, 1.0, 0.0]])  # unnormalised, zeros at both ends
    cases = [(0.0, [1, 0]), (0.49, [1, 1]), (0.5, [3, 2]), (1.0 - 2.0 ** -53, [3, 3])]
    for u, expected in cases:
        with routed_torch(UniformSource([u, u])):
            assert torch.multinomial(w, 1)[:, 0].tolist() == expected
    with routed_torch(UniformSource([0.1, 0.9, 0.6])):  # one row, three samples with replacement
        assert w[1].multinomial(3, replacement=True).tolist() == [0, 3, 2]
    for bad, match in [(torch.tensor([0.0, 0.0]), "no positive weight"), (torch.tensor([1.0, -1.0]), ">= 0"),
                       (torch.tensor([1.0, float("nan")]), "finite")]:
        with pytest.raises(ValueError, match=match), routed_torch(UniformSource([0.5])):
            torch.multinomial(bad, 1)


def test_torch_uniform_randint_and_out_consume_one_uniform_per_value():
    torch = pytest.importorskip("torch")
    src = UniformSource([0.5, 0.25, 0.75, 0.1, 0.95, 0.0, 0.4])
    with routed_torch(src):
        buf = torch.empty(2, dtype=torch.float64)
        assert torch.rand(2, out=buf, dtype=torch.float64) is buf and buf.tolist() == [0.5, 0.25]
        assert torch.empty(1, dtype=torch.float64).uniform_(2.0, 6.0).tolist() == [5.0]
        assert torch.randint(10, (2,)).tolist() == [1, 9] and torch.randint(3, 5, (1,)).tolist() == [3]
        assert torch.rand_like(torch.zeros(1, dtype=torch.float64)).tolist() == [0.4]
    assert src.used == 7


def test_routed_torch_restores_everything():
    torch = pytest.importorskip("torch")
    before = (torch.rand, torch.multinomial, torch.randn, "multinomial" in torch.Tensor.__dict__,
              "exponential_" in torch.Tensor.__dict__)
    with pytest.raises(SamplerError):
        with routed_torch(UniformSource([0.5])):
            torch.randn(2)
    assert (torch.rand, torch.multinomial, torch.randn, "multinomial" in torch.Tensor.__dict__,
            "exponential_" in torch.Tensor.__dict__) == before
    torch.rand(2), torch.ones(3).exponential_()  # the real ones work again


# ----------------------------------------------------------------------------- refusals
def _gumbel_race(draft, p, q, rng):
    return len(draft), int(np.argmax(np.log(p[-1]) + rng.gumbel(size=p.shape[1])))


def _permutes(draft, p, q, rng):
    return 0, int(rng.permutation(p.shape[1])[0])


def _catches(draft, p, q, rng):
    try:
        return 0, int(rng.permutation(p.shape[1])[0])
    except Exception:  # noqa: BLE001 - the fallback a refusal must not allow
        return 0, int(np.random.default_rng(0).integers(p.shape[1]))


def _global_numpy(draft, p, q, rng):
    return 0, int(np.random.choice(p.shape[1], p=p[0]))


def _greedy(draft, p, q, rng):
    rng.random(len(draft) + 2)
    return 0, 0


@pytest.mark.parametrize("fn,match", [(_gumbel_race, r"rng\.gumbel"), (_permutes, r"rng\.permutation"),
                                      (_catches, r"rng\.permutation"), (_global_numpy, "numpy's global"),
                                      (_greedy, "more than n_uniforms = 3")],
                         ids=["gumbel", "permutation", "caught", "global", "too-many"])
def test_unroutable_numpy_calls_raise_naming_the_call(fn, match):
    target, draft = PAIRS[0]
    with pytest.raises(SamplerError, match=match):
        check_sampler_exact(from_rng_sampler(fn), target, draft, L=2)


def test_unroutable_torch_calls_raise_naming_the_call():
    torch = pytest.importorskip("torch")
    target, draft = PAIRS[0]
    calls = [(lambda d, p, q, rng: (0, int(torch.argmax(torch.as_tensor(p[0]) / torch.empty(3).exponential_()))),
              r"Tensor\.exponential_"),
             (lambda d, p, q, rng: (0, int(torch.randn(3).argmax())), r"torch\.randn"),
             (lambda d, p, q, rng: (0, int(torch.multinomial(torch.as_tensor(p[0]), 2)[0])), "replacement=False"),
             (lambda d, p, q, rng: (0, int(torch.nn.functional.dropout(torch.ones(3), 0.5).argmax())),
              "global generator")]
    for fn, match in calls:
        with pytest.raises(SamplerError, match=match):
            check_sampler_exact(from_rng_sampler(fn, torch=True), target, draft, L=2)


def test_from_rng_sampler_rejects_bad_arguments():
    with pytest.raises(TypeError, match="sample_fn must be callable"):
        from_rng_sampler(3)
    with pytest.raises(TypeError, match="torch must be a bool"):
        from_rng_sampler(np_token_level, torch="yes")
    assert from_rng_sampler(np_token_level).name == "np_token_level"


def test_the_testing_guides_example_runs_and_prints_both_verdicts(capsys):
    """docs/guide/testing.md, "Exact mode for an unmodified sampler": its block runs verbatim."""
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "testing.md").read_text(encoding="utf-8")
    section = text[text.index("## Exact mode for an unmodified sampler"):]
    block = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    exec(compile(block, "docs/guide/testing.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("token_level") and ": LOSSLESS" in out[0]
    assert out[1].startswith("swapped_ratio") and ": LOSSY" in out[1]


# ----------------------------------------------------------------------------- a real client, unmodified
def _transformers_call(dtype_name):
    """transformers' ``_speculative_sampling`` called as it is (torch.rand_like + torch.multinomial
    on the global generator), in the chain layout."""
    torch = pytest.importorskip("torch")
    from specsim.testing.adapters import find_transformers_speculative_sampling
    fn = find_transformers_speculative_sampling()
    if fn is None:
        pytest.skip("transformers' _speculative_sampling is not installed")
    dtype = getattr(torch, dtype_name)

    def sample(draft, p, q, rng):
        with np.errstate(divide="ignore"):
            lp, lq = np.log(p), np.log(q)
        tokens, n = fn(candidate_input_ids=torch.tensor([list(draft)]), candidate_logits=torch.as_tensor(lq[None], dtype=dtype),
                       candidate_length=len(draft), new_logits=torch.as_tensor(lp[None], dtype=dtype))
        return int(n), int(tokens[0, -1])
    return sample


def test_transformers_speculative_sampling_certified_exactly_and_its_boundary_found():
    """Its logic is lossless given a correct multinomial; and with float32 uniforms (torch.rand_like
    on the 2^-24 lattice) the test r <= p/q of transformers <= 5.24 accepts a draft of target
    probability 0 at r = 0: the impossible mass is exactly 2^-24 q(x) summed over such drafts (no
    uniforms forced by hand).  5.25 tests r < p/q: no impossible mass, float32 rounding only."""
    torch = pytest.importorskip("torch")
    import transformers
    from packaging.version import Version
    torch.set_num_threads(1)
    target, draft = PAIRS[0]
    cert = check_sampler_exact(from_rng_sampler(_transformers_call("float64"), torch=True), target, draft, L=2)
    assert cert.lossless, cert
    from specsim.models import top_k
    sparse = top_k(random_model(3, 3), 2)
    bad = check_sampler_exact(from_rng_sampler(_transformers_call("float32"), torch=True), sparse, draft, L=1)
    p0, q0 = sparse.table(1)[0][0], draft.table(1)[0][0]
    if Version(transformers.__version__).release >= (5, 25):
        # no impossible mass; what is left is float32 rounding of the softmax and of p/q (~6e-9 here)
        assert bad.impossible_mass == 0 and bad.max_abs_error < 1e-7, bad
    else:
        assert not bad.lossless and bad.impossible_mass == pytest.approx(2.0 ** -24 * q0[p0 == 0].sum(), rel=1e-6)
