"""Engine layout adapters: each is driven through a fake with the engine's exact signature built on
reference_gpu.reference, through check_sampler (law) and check_engine_properties (properties);
the real function runs instead when the engine is importable."""
import dataclasses
import importlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from reference_gpu.api import ChainNoise, verify_chain  # noqa: E402
from specsim.testing import SamplerError, check_sampler
from specsim.testing.adapters import find_transformers_speculative_sampling  # noqa: E402
from specsim.testing.engines import (EngineAdapter, flashinfer_chain_sampler, sglang_tree_sampler,  # noqa: E402
                                     transformers_chain_sampler, vllm_mrv2_rejection_sampler, vllm_rejection_sampler)
from specsim.testing.selftest.power import default_instance  # noqa: E402
from specsim.testing.properties import check_engine_properties  # noqa: E402

F64 = torch.float64


def generate_uniform_probs(num_tokens, num_draft_tokens, generators, device):
    """vLLM v1's uniform helper (same signature): each request's acceptance uniforms from its generator."""
    return torch.cat([torch.rand(n, generator=generators[b], dtype=F64) for b, n in enumerate(num_draft_tokens)])


def fake_rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
                          target_logits, bonus_token_ids, sampling_metadata):
    """vLLM 0.33 v1's signature on reference_gpu's validated token rule (torch reference): target
    logits softmaxed, the bonus rows one-hot on the given bonus ids, the acceptance uniforms
    from the module-level ``generate_uniform_probs`` (so the adapter can inject them), the
    residual noise from each request's generator."""
    B, V = len(num_draft_tokens), target_logits.shape[-1]
    target_probs = target_logits.to(F64).softmax(-1)
    starts = np.concatenate([[0], np.cumsum(num_draft_tokens)[:-1]]).astype(int)
    u = generate_uniform_probs(len(draft_token_ids), num_draft_tokens, sampling_metadata.generators, "cpu")
    rows, E = [], []
    for b, (s, n) in enumerate(zip(starts, num_draft_tokens)):
        rows += [target_probs[s:s + n], torch.nn.functional.one_hot(bonus_token_ids[b], V).to(F64)]
        E.append(torch.empty(1, V, dtype=F64).exponential_(generator=sampling_metadata.generators[b]))
    noise = ChainNoise(u, torch.zeros(len(draft_token_ids), dtype=F64), torch.cat(E))
    out = verify_chain(draft_token_ids, cu_num_draft_tokens, target_probs=torch.cat(rows), draft_probs=draft_probs,
                       noise=noise, mode="token", backend="torch").output_token_ids
    full = torch.full((B, max_spec_len + 1), -1, dtype=torch.int32)
    full[:, :out.shape[1]] = out
    return full


def fake_mrv2_rejection_sample(target_logits, draft_logits, draft_sampled, cu_num_logits, pos, idx_mapping,
                               expanded_idx_mapping, expanded_local_pos, temperature, seed, num_speculative_steps,
                               synthetic_conditional_rates=None, use_fp64=False, use_block_verification=False, **kw):
    """vLLM model runner v2's signature on reference_gpu's validated token or block rule: logits
    softmaxed; request b's noise is a function of (seed, position) only, numpy's generator
    seeded with [seed[state], pos[first row]] (the engine hashes each (seed, pos) pair)."""
    B, V = len(idx_mapping), target_logits.shape[-1]
    ids, rows, qs, u, eta, E, lens = [], [], [], [], [], [], []
    for b in range(B):
        s, e, st = int(cu_num_logits[b]), int(cu_num_logits[b + 1]), int(idx_mapping[b])
        k = e - s - 1
        g = np.random.default_rng([int(seed[st]), int(pos[s])])
        ids.append(draft_sampled[s + 1:e])
        rows.append(target_logits[s:e].to(F64).softmax(-1))
        qs.append(draft_logits[st, :k].to(F64).softmax(-1))
        u.append(g.random(k)), eta.append(g.random(k)), E.append(g.exponential(size=V)), lens.append(k)
    res = verify_chain(torch.cat(ids), torch.as_tensor(np.cumsum(lens)), target_probs=torch.cat(rows),
                       draft_probs=torch.cat(qs),
                       noise=ChainNoise(*(torch.as_tensor(np.concatenate(x)) for x in (u, eta)), torch.as_tensor(np.stack(E))),
                       mode="block" if use_block_verification else "token", backend="torch")
    sampled = torch.zeros((B, num_speculative_steps + 1), dtype=torch.int64)
    sampled[:, :res.output_token_ids.shape[1]] = res.output_token_ids.clamp(min=0)
    return sampled, (res.num_accepted + 1).to(torch.int32)


def fake_chain_speculative_sampling(draft_probs, draft_token_ids, target_probs, maybe_output_accepted_token_num=None,
                                    maybe_output_emitted_draft_token_num=None, deterministic=True, generator=None,
                                    seed=None, offset=None):
    """FlashInfer's signature on reference_gpu's validated token rule (one generator per call)."""
    B, n, V = draft_probs.shape
    g = generator or torch.Generator().manual_seed(int(seed) + int(offset or 0))
    u = torch.rand(B * n, generator=g, dtype=F64)
    E = torch.empty(B, V, dtype=F64).exponential_(generator=g)
    res = verify_chain(draft_token_ids.reshape(-1), torch.arange(1, B + 1) * n,
                       target_probs=target_probs.reshape(B * (n + 1), V), draft_probs=draft_probs.reshape(B * n, V),
                       noise=ChainNoise(u, torch.zeros(B * n, dtype=F64), E), mode="token", backend="torch")
    return res.output_token_ids, res.num_accepted, res.num_accepted


def fake_tree_speculative_sampling_target_only(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                               retrive_next_token, retrive_next_sibling, uniform_samples,
                                               uniform_samples_for_final_sampling, target_probs, draft_probs,
                                               threshold_single=1.0, threshold_acc=1.0, deterministic=True):
    """SGLang's signature for path trees on reference_gpu's one-hot token rule (docs/theory.md
    §3.2, draft_probs=None): the child of node j is tested with uniform_samples[b, j], the
    correction with the final uniform (inverse CDF); outputs written in place."""
    B, n = candidates.shape
    lens = []
    for b in range(B):
        k, j = 0, 0
        while retrive_next_token[b, j] >= 0:
            j = int(retrive_next_token[b, j])
            k += 1
        lens.append(k)
    ids = torch.cat([candidates[b, 1:k + 1] for b, k in enumerate(lens)])
    rows = torch.cat([target_probs[b, :k + 1] for b, k in enumerate(lens)]).to(F64)
    u = torch.cat([uniform_samples[b, :k] for b, k in enumerate(lens)]).to(F64)
    res = verify_chain(ids, torch.as_tensor(np.cumsum(lens)), target_probs=rows, draft_probs=None,
                       noise=ChainNoise(u, torch.zeros_like(u), uniform_samples_for_final_sampling.to(F64), kind="uniform"),
                       mode="token", backend="torch")
    for b in range(B):
        tau = int(res.num_accepted[b])
        accept_token_num[b] = tau
        accept_index[b, :tau + 1] = retrive_index[b, :tau + 1].to(torch.int32)
        predicts[retrive_index[b, :tau + 1].long()] = res.output_token_ids[b, :tau + 1]


def fake_tree_accepting_at_equality(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                    retrive_next_token, retrive_next_sibling, uniform_samples,
                                    uniform_samples_for_final_sampling, target_probs, draft_probs, **kw):
    """The SGLang fake with the comparison of SGLang's kernel, ``coin <= prob_acc``: accepting iff
    u <= p(x) is accepting iff u < p(x)+, p(x)+ the next float64 above p(x), so the fake's strict
    rule runs on p+ (whose extra ulps the fixed-point residual draw does not see)."""
    up = torch.nextafter(target_probs, torch.tensor(float("inf"), dtype=target_probs.dtype))
    return fake_tree_speculative_sampling_target_only(
        predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
        retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, up, draft_probs, **kw)


def _real(module, attr):
    try:
        return getattr(importlib.import_module(module), attr)
    except Exception:  # noqa: BLE001 - engine not installed here
        return None


ADAPTERS = {
    "vllm": lambda: vllm_rejection_sampler(fake_rejection_sample, dtype="float64"),
    "vllm-mrv2": lambda: vllm_mrv2_rejection_sampler(fake_mrv2_rejection_sample, dtype="float64"),
    "vllm-mrv2-block": lambda: vllm_mrv2_rejection_sampler(fake_mrv2_rejection_sample, dtype="float64",
                                                           block_verification=True),
    "flashinfer": lambda: flashinfer_chain_sampler(fake_chain_speculative_sampling, dtype="float64"),
    "sglang": lambda: sglang_tree_sampler(fake_tree_speculative_sampling_target_only, dtype="float64"),
    "transformers": lambda: transformers_chain_sampler(find_transformers_speculative_sampling()),
}
REAL = {  # vLLM's real samplers: tests/testing/test_vllm_real.py
    "flashinfer": lambda: flashinfer_chain_sampler(_real("flashinfer.sampling", "chain_speculative_sampling")),
    "sglang": lambda: sglang_tree_sampler(_real("sgl_kernel", "tree_speculative_sampling_target_only")),
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def instance():
    """The pair on which check_sampler's default n detects every chain mutant (specsim.testing.selftest.power)."""
    return default_instance()


@pytest.mark.parametrize("engine", sorted(ADAPTERS))
def test_adapter_law(engine, instance):
    if engine == "transformers" and find_transformers_speculative_sampling() is None:
        pytest.skip("transformers not installed")
    adapter = ADAPTERS[engine]()
    res = check_sampler(adapter.batch_sampler(chunk=2000), *instance, n=1500 if engine == "transformers" else 6000)
    assert res.passed, str(res)


@pytest.mark.parametrize("engine", ["vllm", "vllm-mrv2", "vllm-mrv2-block", "flashinfer", "sglang"])
def test_fake_engines_have_every_property(engine):
    report = check_engine_properties(ADAPTERS[engine](), trials=16, draft_rows=engine != "sglang")
    assert report.passed, str(report)


def test_transformers_properties():
    fn = find_transformers_speculative_sampling()
    if fn is None:
        pytest.skip("transformers not installed")
    report = check_engine_properties(transformers_chain_sampler(fn), trials=8)
    assert report.passed, str(report)


def test_adapter_rejects_a_row_that_is_not_the_draft():
    def wrong_prefix(draft_probs, draft_token_ids, target_probs, **kw):
        B, n, _ = draft_probs.shape
        out = torch.full((B, n + 1), -1, dtype=torch.int32)
        out[:, :2] = (draft_token_ids[:, :1] + 1) % draft_probs.shape[-1]
        return out, torch.ones(B, dtype=torch.int32), torch.ones(B, dtype=torch.int32)

    p, q = np.full((1, 3, 3), 1 / 3), np.full((1, 2, 3), 1 / 3)
    with pytest.raises(SamplerError, match="the kept prefix is not the draft's"):
        flashinfer_chain_sampler(wrong_prefix)(np.array([[0, 1]]), p, q, np.array([0]))


def test_vllm_adapter_injects_uniforms_through_the_helper():
    """u = 0 everywhere: the fake (strict u q < p) keeps every draft of positive target probability;
    the module's helper is restored afterwards."""
    adapter = ADAPTERS["vllm"]()
    assert adapter.takes_uniforms and not ADAPTERS["vllm-mrv2"]().takes_uniforms
    p, q = np.full((2, 3, 3), 1 / 3), np.full((2, 2, 3), 1 / 3)
    acc, _ = adapter(np.array([[0, 1], [2, -1]]), p, q, np.array([1, 2]), uniforms=np.zeros((2, 2)))
    assert acc.tolist() == [2, 1]
    assert globals()["generate_uniform_probs"].__name__ == "generate_uniform_probs"
    with pytest.raises(TypeError, match="cannot be injected"):
        ADAPTERS["vllm-mrv2"]()(np.array([[0, 1]]), p[:1], q[:1], np.array([1]), uniforms=np.zeros((1, 2)))


def test_sglang_adapter_passes_injected_uniforms_to_the_engine():
    """uniforms[b, i] arrive as uniform_samples[b, i] bit for bit (float32 values); node L's coin and
    the final-sampling uniform are the seed's, as without injection."""
    seen = []

    def recording(*args, **kw):
        seen.append((args[7].clone(), args[8].clone()))  # (uniform_samples, uniform_samples_for_final_sampling)
        return fake_tree_speculative_sampling_target_only(*args, **kw)

    adapter = sglang_tree_sampler(recording, dtype="float64")
    assert adapter.takes_uniforms
    drafts, seeds = np.array([[0, 1], [2, -1]]), np.array([3, 4])
    p, q = np.full((2, 3, 3), 1 / 3), np.full((2, 2, 3), 1 / 3)
    u = np.random.default_rng(0).random((2, 2)).astype(np.float32).astype(np.float64)
    adapter(drafts, p, q, seeds)
    adapter(drafts, p, q, seeds, uniforms=u)
    (drawn, final_drawn), (passed, final_passed) = seen
    assert passed[:, :2].double().numpy().tolist() == u.tolist()
    assert passed[:, 2].tolist() == drawn[:, 2].tolist() and final_passed.tolist() == final_drawn.tolist()
    acc, _ = adapter(drafts, p, q, seeds, uniforms=np.zeros((2, 2)))  # u = 0 < 1/3: every draft kept
    assert acc.tolist() == [2, 1]
    with pytest.raises(ValueError, match="uniforms must have shape"):
        adapter(drafts, p, q, seeds, uniforms=np.zeros((2, 3)))


def test_zero_target_draft_with_injected_uniforms_flags_the_sglang_kernel_comparison():
    """At u = 0, ``coin <= p(x)`` keeps a draft of target probability 0; the strict fake does not.
    Without injection the fault is out of reach (u = 0 has probability 2^-24 per coin)."""
    faulty = sglang_tree_sampler(fake_tree_accepting_at_equality, dtype="float64")
    report = check_engine_properties(faulty, trials=16, draft_rows=False, properties=("zero_target_draft",))
    assert report.broken == ("zero_target_draft",) and "at u = 0" in report["zero_target_draft"].witness
    drawn_only = dataclasses.replace(faulty, takes_uniforms=False)
    report = check_engine_properties(drawn_only, trials=16, draft_rows=False, properties=("zero_target_draft",))
    assert report.passed and "u = 0 not forced" in report["zero_target_draft"].note
    correct = check_engine_properties(ADAPTERS["sglang"](), trials=16, draft_rows=False,
                                      properties=("zero_target_draft",))
    assert correct.passed and correct["zero_target_draft"].note == ""


def test_mrv2_adapter_derives_seeds_and_positions_from_the_dense_seed():
    """A request's output depends on its dense seed only; the fake sees (seed, first position) pairs
    that differ between seeds."""
    seen = []

    def recording(target_logits, draft_logits, draft_sampled, cu_num_logits, pos, idx_mapping, *args, **kw):
        seen.append((args[3].clone(), pos[cu_num_logits[:-1].long()].clone()))  # (seed, first positions)
        return fake_mrv2_rejection_sample(target_logits, draft_logits, draft_sampled, cu_num_logits, pos,
                                          idx_mapping, *args, **kw)

    adapter = vllm_mrv2_rejection_sampler(recording, dtype="float64")
    drafts, p, q = np.array([[0, 1], [2, 0]]), np.full((2, 3, 3), 1 / 3), np.full((2, 2, 3), 1 / 3)
    both = adapter(drafts, p, q, np.array([5, 6]))
    alone = adapter(drafts[1:], p[1:], q[1:], np.array([6]))
    assert (both[0][1], both[1][1]) == (alone[0][0], alone[1][0])
    assert seen[0][0][1] == seen[1][0][0] and seen[0][1][1] == seen[1][1][0]
    assert seen[0][0][0] != seen[0][0][1] and seen[0][1][0] != seen[0][1][1]


@pytest.mark.parametrize("engine", sorted(REAL))
def test_real_engine(engine, instance):
    if _real({"vllm": "vllm.v1.sample.rejection_sampler", "flashinfer": "flashinfer.sampling",
              "sglang": "sgl_kernel"}[engine], "__name__") is None:
        pytest.skip(f"{engine} is not installed")  # before the adapter, which refuses a None engine
    adapter = REAL[engine]()
    res = check_sampler(adapter.batch_sampler(), *instance)
    assert res.passed, str(res)
    print(check_engine_properties(adapter))


# ---------------------------------------------------------------------------- the engine's refusal vs malformed output
# Issue 26: an engine that keeps its -1 slots returns rows the adapter cannot read; the adapter's
# output check raised SamplerError, and the probes counted that as the engine's allowed refusal.
def _vllm_keeping(refuse=False):
    def rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
                         target_logits, bonus_token_ids, sampling_metadata):
        """Keeps every slot it is given, -1 placeholders included, then the bonus token (or, with
        ``refuse``, raises on a -1 slot as an engine that checks its input would)."""
        if refuse and bool((draft_token_ids < 0).any()):
            raise ValueError("draft_token_ids holds -1 placeholders")
        out = torch.full((len(num_draft_tokens), max_spec_len + 1), -1, dtype=torch.int32)
        start = 0
        for b, n in enumerate(num_draft_tokens):
            out[b, :n] = draft_token_ids[start:start + n]
            out[b, n] = bonus_token_ids[b, 0]
            start += n
        return out
    return rejection_sample


def _flashinfer_keeping(refuse=False):
    def chain_speculative_sampling(draft_probs, draft_token_ids, target_probs, maybe_output_accepted_token_num=None,
                                   maybe_output_emitted_draft_token_num=None, deterministic=True, generator=None,
                                   seed=None, offset=None):
        """Keeps all n slots (-1 included) and emits the argmax of the last target row."""
        if refuse and bool((draft_token_ids < 0).any()):
            raise ValueError("draft_token_ids holds -1 placeholders")
        B, n = draft_token_ids.shape
        bonus = target_probs[:, n].argmax(-1, keepdim=True)
        out = torch.cat([draft_token_ids, bonus], 1).to(torch.int32)
        return out, torch.full((B,), n, dtype=torch.int32), torch.full((B,), n, dtype=torch.int32)
    return chain_speculative_sampling


def _dense_keeping(refuse=False):
    def verify(drafts, p, q, seeds):
        """Dense layout: counts the -1 slots as kept drafts (accepted = L) and emits argmax p[b, L]."""
        if refuse and (drafts < 0).any():
            raise ValueError("drafts holds -1 placeholders")
        return np.full(len(drafts), drafts.shape[1]), np.argmax(p[:, -1], axis=-1)
    return verify


KEEPING = {
    "vllm-pad_drafts": lambda refuse: vllm_rejection_sampler(_vllm_keeping(refuse), dtype="float64", pad_drafts=True),
    "flashinfer": lambda refuse: flashinfer_chain_sampler(_flashinfer_keeping(refuse), dtype="float64"),
    "dense": lambda refuse: EngineAdapter(_dense_keeping(refuse), "dense"),
}


@pytest.mark.parametrize("adapter", sorted(KEEPING))
def test_engine_keeping_its_placeholders_is_flagged(adapter):
    report = check_engine_properties(KEEPING[adapter](False), trials=8, properties=("placeholder",))
    assert report.broken == ("placeholder",), str(report)
    if adapter != "dense":  # the adapter could not read the rows: the witness is the engine's output
        assert "malformed output" in report["placeholder"].witness and "-1" in report["placeholder"].witness


@pytest.mark.parametrize("adapter", sorted(KEEPING))
def test_engine_refusing_placeholders_itself_passes(adapter):
    report = check_engine_properties(KEEPING[adapter](True), trials=8, properties=("placeholder",))
    assert report.passed, str(report)


def _vllm_token_rule(fallback):
    """vLLM v1's signature on the unvalidated token rule of specsim.testing.properties (acceptance
    u q < p, seeds from the generators); a rejection with no residual mass, or a request with a
    NaN or all-zero row, calls ``fallback()`` for the emitted id (-1: "no token", an id outside the
    engine's own output format)."""
    from specsim.testing.properties import _unvalidated_token_rule

    def rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
                         target_logits, bonus_token_ids, sampling_metadata):
        B, V = len(num_draft_tokens), target_logits.shape[-1]
        out = torch.full((B, max_spec_len + 1), -1, dtype=torch.int32)
        start = 0
        for b, n in enumerate(num_draft_tokens):
            ids = draft_token_ids[start:start + n].numpy()[None]
            p = np.concatenate([target_logits[start:start + n].double().softmax(-1).numpy(),
                                np.eye(V)[[int(bonus_token_ids[b, 0])]]])[None]
            q = draft_probs[start:start + n].double().numpy()[None]
            seed = int(torch.randint(2 ** 31, (1,), generator=sampling_metadata.generators[b]))
            if not (np.isfinite(p).all() and np.isfinite(q).all() and (q.sum(-1) > 0).all()):
                out[b, 0] = fallback()  # a row it cannot use: no token
            else:
                a, t = _unvalidated_token_rule(ids, p, q, [seed], None, lambda u, px, qx: u * qx < px)
                r = p[0, a[0]] - (q[0, a[0]] if a[0] < n else 0)
                out[b, :a[0]] = draft_token_ids[start:start + a[0]]
                out[b, a[0]] = int(t[0]) if np.maximum(r, 0).sum() > 0 else fallback()
            start += n
        return out
    return rejection_sample


def test_emitting_no_token_on_a_degenerate_row_is_flagged_not_counted_as_a_refusal():
    """The other probes that allow a refusal (degenerate_rows, zero_residual): an engine that writes
    -1 ("no token") when the residual has no mass returns a row the adapter cannot read; that is a
    broken property, not the engine raising; the same rule raising there passes."""
    props = ("degenerate_rows", "zero_residual")
    no_token = check_engine_properties(vllm_rejection_sampler(_vllm_token_rule(lambda: -1), dtype="float64"),
                                       trials=8, properties=props)
    assert set(no_token.broken) == set(props), str(no_token)
    assert all("malformed output" in no_token[p].witness for p in props), str(no_token)

    def refuse():
        raise ValueError("no residual mass")

    refusing = check_engine_properties(vllm_rejection_sampler(_vllm_token_rule(refuse), dtype="float64"),
                                       trials=8, properties=props)
    assert refusing.passed, str(refusing)
