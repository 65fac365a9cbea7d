"""The mistral.rs adapter of check_generation on a fake with mistralrs 0.9.5's signatures
(``Runner.send_chat_completion_request``, ``tokenize_text``, ``detokenize_text``,
``ChatCompletionRequest``; the response's ``choices[0].finish_reason / stop_sequence /
logprobs.content[i].bytes / .logprob`` and ``usage.prompt_tokens``) over toy LMs.

The fake's sampling is the package's reference toy generator (:func:`toy_engine`): its plain path
samples theta's law, its speculative path drafts and verifies blocks; a mutant of it stands for a
broken speculative path.  Its tokenizer is a longest match over the toy's token texts ("a", "b",
"ab", "<eos>"), so (0, 1) = "a" "b" does not round-trip (it reads back as "ab").
"""
import inspect
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from specsim.testing.generation import SamplingParams, check_generation
from specsim.testing.generation.mistralrs import IDENTITY_TEMPLATE, mistralrs_engine, mistralrs_params
from specsim.testing.generation.toy import LOGIT_SHIFT, TOKEN_TEXT, default_models, toy_engine
from specsim.testing.sampler import SamplerError
from tests.testing.adapter_checks import assert_clean_fake_passes

EOS = 3
VOCAB = [t.encode() for t in TOKEN_TEXT]


class FakeChatCompletionRequest:
    """The fields the adapter passes, with mistralrs 0.9.5's names and defaults
    (``test_fake_signatures_match_mistralrs`` compares them when mistralrs is installed)."""

    def __init__(self, messages, model, logprobs: bool = False, n_choices: int = 1, logit_bias=None,
                 top_logprobs=None, max_tokens=None, presence_penalty=None, frequency_penalty=None,
                 repetition_penalty=None, stop_seqs=None, temperature=None, top_p=None, top_k=None,
                 stream: bool = False, grammar=None, grammar_type=None, min_p=None, ignore_eos: bool = False):
        self.__dict__.update({k: v for k, v in locals().items() if k != "self"})


class OldRequest:
    """mistralrs 0.6.0's request: no repetition_penalty, no ignore_eos."""

    def __init__(self, messages, model, logprobs: bool = False, max_tokens=None, presence_penalty=None,
                 frequency_penalty=None, stop_seqs=None, temperature=None, top_p=None, top_k=None, min_p=None):
        self.__dict__.update({k: v for k, v in locals().items() if k != "self"})


class FakeRunner:
    """``mistralrs.Runner`` over a toy GenerationEngine: ``speculative`` picks its path.
    ``chat_template=False`` models a Runner left with the model's chat template (the prompt
    arrives wrapped: more prompt tokens than sent); ``unknown_bytes`` reports bytes no token has."""

    def __init__(self, engine, speculative, chat_template=True, unknown_bytes=False):
        self.engine, self.speculative, self.rng = engine, speculative, np.random.default_rng(11)
        self.chat_template, self.unknown_bytes = chat_template, unknown_bytes

    def send_chat_completion_request(self, request, model_id=None):
        assert request.logprobs and request.model == "default"
        prompt = tuple(self.tokenize_text(request.messages[0]["content"], False, None))
        rep = getattr(request, "repetition_penalty", None) or 1.0  # 0.6.0's request has none
        th = SamplingParams(temperature=request.temperature, top_k=request.top_k or 0, top_p=request.top_p or 1.0,
                            min_p=request.min_p or 0.0, repetition_penalty=rep,
                            presence_penalty=request.presence_penalty or 0.0,
                            frequency_penalty=request.frequency_penalty or 0.0,
                            eos_token_id=None if getattr(request, "ignore_eos", False) else EOS,
                            stop_strings=tuple(request.stop_seqs or ()), max_new_tokens=request.max_tokens)
        out = self.engine.generate(prompt, request.max_tokens, th, self.speculative, self.rng)
        toks = list(out.tokens)
        text = "".join(TOKEN_TEXT[t] for t in toks)
        stop_seq = next((s for s in th.stop_strings if s in text), None) if out.stop_reason == "stop" else None
        content = [SimpleNamespace(token=TOKEN_TEXT[t], logprob=lp, top_logprobs=[],
                                   bytes=list(b"?" if self.unknown_bytes else TOKEN_TEXT[t].encode()))
                   for t, lp in zip(toks, out.logprobs)]
        choice = SimpleNamespace(finish_reason="length" if out.stop_reason == "length" else "stop", index=0,
                                 stop_sequence=stop_seq, logprobs=SimpleNamespace(content=content),
                                 message=SimpleNamespace(content=text.strip(), role="assistant"))
        usage = SimpleNamespace(prompt_tokens=len(prompt) + (0 if self.chat_template else 30),
                                completion_tokens=len(toks))
        return SimpleNamespace(choices=[choice], usage=usage)

    def tokenize_text(self, text, add_special_tokens, enable_thinking, model_id=None):
        out, i = [], 0
        while i < len(text):
            t = max((j for j, s in enumerate(TOKEN_TEXT) if text.startswith(s, i)), key=lambda j: len(TOKEN_TEXT[j]))
            out.append(t)
            i += len(TOKEN_TEXT[t])
        return out

    def detokenize_text(self, tokens, skip_special_tokens, model_id=None):
        return "".join(TOKEN_TEXT[t] for t in tokens)


PARAMS = {"stop_strings": SamplingParams(stop_strings=("ba",), max_new_tokens=4),
          "eos+presence": SamplingParams(eos_token_id=EOS, presence_penalty=1.0, max_new_tokens=4),
          "temperature+top_k+top_p+repetition": SamplingParams(temperature=0.5, top_k=3, top_p=0.9,
                                                               repetition_penalty=2.0, max_new_tokens=3)}


def _engine(mutant=None, request=FakeChatCompletionRequest, **kw):
    plain, spec = toy_engine(), toy_engine(mutant=mutant)
    return mistralrs_engine(FakeRunner(plain, False, **kw), FakeRunner(spec, True, **kw), vocab=VOCAB,
                            eos_token_ids=(EOS,), request=request)


def test_mistralrs_adapter_passes_clean_fake_and_flags_mutant():
    """Two-sample mode: the clean fake passes (EOS and stop string inside blocks, logprobs equal on
    both paths); a speculative path that applies the presence penalty at the bonus position only is
    flagged."""
    assert_clean_fake_passes(_engine(), PARAMS)
    bad = _engine(mutant="penalty_bonus_only")
    res = check_generation(bad, prompt=(1, 0), params={"presence": PARAMS["eos+presence"]}, n=400, seed=1)
    assert res.verdict == "FAIL", str(res)


def test_mistralrs_adapter_exact_mode_on_the_fake():
    """With the toy's logits attached both paths are tested against theta's exact law: the adapter
    hands every parameter over (the plain side would fail otherwise)."""
    target, _ = default_models()
    logits = lambda prefix: np.log(target(tuple(prefix))) + LOGIT_SHIFT  # noqa: E731
    eng = replace(_engine(), logits=logits, token_text=TOKEN_TEXT)
    res = check_generation(eng, prompt=(1, 0), params=PARAMS, n=400, seed=2)
    assert res.mode == "exact" and res.verdict == "PASS", str(res)
    bad = replace(_engine(mutant="logprob_zero"), logits=logits, token_text=TOKEN_TEXT)
    res = check_generation(bad, prompt=(1, 0), params=PARAMS, n=100, seed=2)
    assert res.verdict == "FAIL", str(res)


def test_mistralrs_adapter_arguments_and_bad_output():
    eng = _engine()
    rng = np.random.default_rng(0)
    with pytest.raises(NotImplementedError, match="n-gram"):
        eng.generate((1,), 2, SamplingParams(no_repeat_ngram_size=2, max_new_tokens=2), True, rng)
    with pytest.raises(NotImplementedError, match="min_new_tokens"):
        eng.generate((1,), 2, SamplingParams(eos_token_id=EOS, min_new_tokens=1, max_new_tokens=2), True, rng)
    with pytest.raises(NotImplementedError, match="EOS ids"):
        eng.generate((1,), 2, SamplingParams(eos_token_id=2, max_new_tokens=2), False, rng)
    assert set(mistralrs_params({"a": SamplingParams(no_repeat_ngram_size=1), "b": SamplingParams(),
                                 "c": SamplingParams(min_new_tokens=1)})) == {"b"}
    # mistralrs 0.6.0's request has no repetition_penalty and no ignore_eos
    old = _engine(request=OldRequest)
    with pytest.raises(NotImplementedError, match="repetition_penalty"):
        old.generate((1,), 2, SamplingParams(repetition_penalty=1.5, eos_token_id=EOS, max_new_tokens=2), False, rng)
    with pytest.raises(NotImplementedError, match="ignore_eos"):
        old.generate((1,), 2, SamplingParams(max_new_tokens=2), False, rng)
    assert len(old.generate((1,), 2, SamplingParams(eos_token_id=EOS, max_new_tokens=2), False, rng)[0]) >= 1
    # the prompt must round-trip through the text mistral.rs takes: (0, 1) reads back as "ab" = (2,)
    with pytest.raises(ValueError, match="round-trip"):
        eng.generate((0, 1), 2, SamplingParams(max_new_tokens=2), False, rng)
    # a Runner left with the model's chat template reads more prompt tokens than sent
    with pytest.raises(ValueError, match="IDENTITY_TEMPLATE"):
        _engine(chat_template=False).generate((1, 0), 2, SamplingParams(max_new_tokens=2), True, rng)
    # bytes no token has: outside the vocabulary, no verdict
    with pytest.raises(SamplerError, match="outside the vocabulary"):
        check_generation(_engine(unknown_bytes=True), prompt=(1, 0), params={"t": SamplingParams(max_new_tokens=2)},
                         n=20, seed=0)
    runners = FakeRunner(toy_engine(), False), FakeRunner(toy_engine(), True)
    with pytest.raises(SamplerError, match="several ids"):
        dup = mistralrs_engine(*runners, vocab=[b"a", b"b", b"a", b"<eos>"], request=FakeChatCompletionRequest)
        for _ in range(200):  # until token 0 ("a", whose bytes id 2 shares here) is emitted
            dup.generate((1, 0), 4, SamplingParams(temperature=5.0, max_new_tokens=4), False, rng)
    with pytest.raises(TypeError, match="spec_runner"):
        mistralrs_engine(runners[0], object(), vocab=VOCAB, request=FakeChatCompletionRequest)
    with pytest.raises(ValueError, match="two Runner objects"):
        mistralrs_engine(runners[0], runners[0], vocab=VOCAB, request=FakeChatCompletionRequest)
    with pytest.raises(TypeError, match="bytes"):
        mistralrs_engine(*runners, vocab=["a", "b"], request=FakeChatCompletionRequest)
    with pytest.raises(ValueError, match="vocab"):
        mistralrs_engine(*runners, vocab=[b"a"], request=FakeChatCompletionRequest)
    assert "messages[0]" in IDENTITY_TEMPLATE


def test_fake_signatures_match_mistralrs():
    mistralrs = pytest.importorskip("mistralrs")

    real = inspect.signature(mistralrs.ChatCompletionRequest).parameters
    for name, p in inspect.signature(FakeChatCompletionRequest).parameters.items():
        assert name in real and real[name].default == p.default, name
    for meth in ("send_chat_completion_request", "tokenize_text", "detokenize_text"):
        real = list(inspect.signature(getattr(mistralrs.Runner, meth)).parameters)
        fake = list(inspect.signature(getattr(FakeRunner, meth)).parameters)
        assert real[1:] == fake[1:], meth
