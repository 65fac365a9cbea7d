"""Adapters of check_generation for real engines, on fakes with the engines' exact signatures
(llama-cpp-python) and on transformers itself with toy models (stop strings with a draft model)."""
import inspect
from dataclasses import replace

import numpy as np
import pytest

from specsim.testing.generation import SamplingParams, check_generation, finished, process_logits
from specsim.testing.generation.toy import TOKEN_TEXT, default_models
from specsim.testing.generation.llamacpp import CallableDraft, llamacpp_engine, llamacpp_params


# ----------------------------------------------------------------------------- llama-cpp-python fake
class FakeLlama:
    """``llama_cpp.Llama``'s generate / set_seed / detokenize / n_vocab / draft_model over a toy model
    (signatures copied from llama-cpp-python 0.3.36; ``test_fake_signatures_match`` compares them when
    llama_cpp is installed).  Its sampler is ``process_logits`` in llama.cpp's order (top-k, top-p,
    min-p), penalties over the sampled tokens.  ``generate`` speculates as llama-cpp-python does: after
    each sampled token the draft proposes, every drafted position is sampled in turn and a draft
    token is kept while the sample equals it.  ``blind=True`` keeps drafted tokens unsampled (a
    lossy engine)."""

    def __init__(self, model, blind=False):
        self.model, self.blind, self.draft_model, self._logits_all, self._seed = model, blind, None, True, 0

    def n_vocab(self) -> int:
        return self.model.V

    def set_seed(self, seed: int):
        self._seed = seed

    def detokenize(self, tokens, prev_tokens=None, special=False) -> bytes:
        return "".join(TOKEN_TEXT[t] for t in tokens).encode()

    def generate(self, tokens, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05, typical_p: float = 1.0,
                 temp: float = 0.80, repeat_penalty: float = 1.0, reset: bool = True, frequency_penalty: float = 0.0,
                 presence_penalty: float = 0.0, tfs_z: float = 1.0, mirostat_mode: int = 0, mirostat_tau: float = 5.0,
                 mirostat_eta: float = 0.1, penalize_nl: bool = True, logits_processor=None, stopping_criteria=None,
                 grammar=None):
        rng = np.random.default_rng(self._seed)
        prompt, out = tuple(tokens), []
        theta = SamplingParams(temperature=temp, top_k=top_k, top_p=top_p, min_p=min_p, repetition_penalty=repeat_penalty,
                               presence_penalty=presence_penalty, frequency_penalty=frequency_penalty)

        def sample():
            row = process_logits(np.log(self.model(prompt + tuple(out))), prompt, tuple(out), theta)
            return int(rng.choice(row.size, p=row))

        while True:
            out.append(sample())
            yield out[-1]
            if self.draft_model is None:
                continue
            for d in self.draft_model(np.array(prompt + tuple(out), dtype=np.intc)).tolist():
                t = int(d) if self.blind else sample()
                out.append(t)
                yield t
                if t != d:
                    break


def _greedy_target(target):
    return CallableDraft(lambda ids, k: [int(np.argmax(target(ids)))] * k, k=3)


def test_llamacpp_adapter_passes_clean_fake_and_flags_blind_acceptance():
    """Two-sample mode on the fake: the engine's sample-and-match speculation passes (stop string and
    EOS inside blocks, penalties counted per emitted token); accepting drafts unverified is flagged."""
    target, _ = default_models()
    params = {"stop_strings": SamplingParams(stop_strings=("ba",), max_new_tokens=4),
              "eos+presence": SamplingParams(eos_token_id=3, presence_penalty=1.0, max_new_tokens=4)}
    clean = llamacpp_engine(FakeLlama(target), _greedy_target(target))
    res = check_generation(clean, prompt=(1, 0), params=params, n=400, seed=1)
    assert res.mode == "two-sample" and res.verdict == "PASS", str(res)
    for pname, th in params.items():  # the adapter stopped where the setting says (tokens and reason)
        g = clean.generate((1, 0), th.max_new_tokens, th, True, np.random.default_rng(5))
        assert g[1] == finished(g[0], th, TOKEN_TEXT) and finished(g[0][:-1], th, TOKEN_TEXT) is None
    bad = llamacpp_engine(FakeLlama(target, blind=True), _greedy_target(target))
    res = check_generation(bad, prompt=(1, 0), params=params, n=400, seed=1)
    assert res.verdict == "FAIL" and res.rows[0].position is not None, str(res)


def test_llamacpp_adapter_arguments():
    target, _ = default_models()
    draft = _greedy_target(target)
    eng = llamacpp_engine(FakeLlama(target), draft)
    with pytest.raises(NotImplementedError, match="no-repeat"):
        eng.generate((1,), 2, SamplingParams(no_repeat_ngram_size=2, max_new_tokens=2), True, np.random.default_rng(0))
    assert set(llamacpp_params({"a": SamplingParams(min_new_tokens=1), "b": SamplingParams()})) == {"b"}
    with pytest.raises(TypeError, match="draft_model"):
        llamacpp_engine(FakeLlama(target), None)
    with pytest.raises(TypeError, match="no generate"):
        llamacpp_engine(object(), draft)
    lazy = FakeLlama(target)
    lazy._logits_all = False
    with pytest.raises(ValueError, match="logits_all"):
        llamacpp_engine(lazy, draft)
    with pytest.raises(ValueError, match="k must be"):
        CallableDraft(lambda ids, k: [], k=0)


def test_fake_signatures_match_llama_cpp():
    llama_cpp = pytest.importorskip("llama_cpp")
    for meth in ("generate", "set_seed", "detokenize", "n_vocab"):
        real = inspect.signature(getattr(llama_cpp.Llama, meth))
        fake = inspect.signature(getattr(FakeLlama, meth))
        assert list(real.parameters) == list(fake.parameters), meth
        assert [p.default for p in real.parameters.values()] == [p.default for p in fake.parameters.values()], meth


# ----------------------------------------------------------------------------- transformers, stop strings
def _toy_tokenizer():
    """A character tokenizer whose ids 0..3 decode to TOKEN_TEXT (ids 4.. are 'c'..'f', which
    transformers' stop-string preprocessing needs to encode its probe 'abcdef'; the toy never emits them)."""
    from tokenizers import Tokenizer, decoders
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Split
    from transformers import PreTrainedTokenizerFast

    bt = Tokenizer(WordLevel(vocab={t: i for i, t in enumerate(TOKEN_TEXT + tuple("cdef"))}, unk_token="<eos>"))
    bt.pre_tokenizer = Split("", "isolated")
    bt.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=bt)


def _passes_a_stop(tokens, theta):
    """True when the output goes on after a stop string was completed."""
    return any(finished(tokens[:k], replace(theta, max_new_tokens=99), TOKEN_TEXT) == "stop"
               for k in range(1, len(tokens)))


@pytest.mark.usefixtures("one_torch_thread")
@pytest.mark.parametrize("mode", ["assistant", "prompt_lookup"])
def test_transformers_stop_strings_exact(mode):
    """Stop strings through transformers' speculative loops on toy LMs (exact mode).  The plain path
    matches the reference processing; the speculative row fails exactly when some output goes on
    after completing a stop string (transformers 5.24 checks stop strings only at the end of an
    accepted block, huggingface/transformers#48039 (B)); with a draft model the call runs only
    through the adapter's workaround, without it transformers raises (#48039 (A)) or, once fixed, runs."""
    pytest.importorskip("transformers")
    from specsim.testing.generation.transformers import transformers_engine
    from specsim.testing.language_models import transformers_lm

    target, draft = default_models()
    tok = _toy_tokenizer()
    kw = dict(mode=mode, tokenizer=tok, num_assistant_tokens=3, prompt_lookup_num_tokens=2)
    eng = transformers_engine(transformers_lm(target), transformers_lm(draft), **kw)
    th = SamplingParams(stop_strings=("ba",), max_new_tokens=4)
    res = check_generation(eng, prompt=(1, 0, 1, 0), params={"stop_strings": th}, n=40, seed=2)
    row = res.rows[0]
    n_plain = len(row.subtests) // 2
    assert not any(t.rejected for t in row.subtests[n_plain:]), str(res)  # the plain side
    rng = np.random.default_rng(3)
    outs = [eng.generate((1, 0, 1, 0), 4, th, True, rng)[0] for _ in range(40)]
    if any(_passes_a_stop(o, th) for o in outs):
        assert row.verdict == "FAIL" and "impossible output" in row.witness, str(res)
    if mode == "assistant":
        raw = transformers_engine(transformers_lm(target), transformers_lm(draft), stop_strings_workaround=False, **kw)
        try:
            raw.generate((1, 0, 1, 0), 4, th, True, np.random.default_rng(0))
        except ValueError as e:
            assert "tokenizer" in str(e)


# ----------------------------------------------------------------------------- openvino-genai fake
class FakeGenAI:
    """The two names the OpenVINO adapter takes from ``openvino_genai``, with its attribute names."""

    class GenerationConfig:
        def __init__(self):
            self.do_sample, self.max_new_tokens, self.min_new_tokens, self.temperature = False, 20, 0, 1.0
            self.top_k, self.top_p, self.min_p, self.repetition_penalty = 0, 1.0, 0.0, 1.0
            self.presence_penalty, self.frequency_penalty, self.no_repeat_ngram_size = 0.0, 0.0, 0
            self.rng_seed, self.eos_token_id, self.ignore_eos, self.stop_strings = 0, -1, False, set()
            self.include_stop_str_in_output, self.num_assistant_tokens, self.max_ngram_size = False, 0, 0

    class TokenizedInputs:
        def __init__(self, input_ids, attention_mask):
            self.input_ids, self.attention_mask = input_ids, attention_mask


class FakePipeline:
    """``LLMPipeline.generate(inputs, generation_config)`` over a toy model; ``lookup=True`` refuses
    configs without prompt-lookup settings, as OpenVINO does; ``drop_penalty`` ignores the
    repetition penalty (a lossy speculative path)."""

    def __init__(self, model, lookup=False, drop_penalty=False):
        self.model, self.lookup, self.drop_penalty = model, lookup, drop_penalty

    def generate(self, inputs, generation_config=None, streamer=None, **kwargs):
        c = generation_config
        if self.lookup and not (c.num_assistant_tokens and c.max_ngram_size):
            raise RuntimeError("`max_ngram_size` && `num_assistant_tokens` should be specified")
        prompt = tuple(int(t) for t in np.asarray(inputs.input_ids)[0])
        th = SamplingParams(temperature=c.temperature, top_k=c.top_k, top_p=c.top_p, min_p=c.min_p,
                            repetition_penalty=1.0 if self.drop_penalty else c.repetition_penalty,
                            no_repeat_ngram_size=c.no_repeat_ngram_size, min_new_tokens=c.min_new_tokens,
                            eos_token_id=None if c.ignore_eos else c.eos_token_id,
                            stop_strings=tuple(sorted(c.stop_strings)), max_new_tokens=c.max_new_tokens)
        rng, out = np.random.default_rng(c.rng_seed), ()
        while finished(out, th, TOKEN_TEXT) is None:
            row = process_logits(np.log(self.model(prompt + out)), prompt, out, th)
            out += (int(rng.choice(row.size, p=row)),)
        return type("EncodedResults", (), {"tokens": [list(out)], "scores": [0.0]})()


def test_openvino_adapter_on_fake_pipelines():
    from specsim.testing.generation.openvino import openvino_engine

    target, _ = default_models()
    params = {"repetition_penalty": SamplingParams(repetition_penalty=2.0, max_new_tokens=3),
              "eos+stop": SamplingParams(eos_token_id=3, stop_strings=("ba",), min_new_tokens=1, max_new_tokens=4)}
    kw = dict(V=4, genai=FakeGenAI, tensor=np.asarray)
    clean = openvino_engine(FakePipeline(target), FakePipeline(target, lookup=True), **kw)
    res = check_generation(clean, prompt=(1, 0), params=params, n=300, seed=4)
    assert res.verdict == "PASS", str(res)
    lossy = openvino_engine(FakePipeline(target), FakePipeline(target, lookup=True, drop_penalty=True), **kw)
    res = check_generation(lossy, prompt=(1, 0), params=params, n=300, seed=4)
    assert res.row("repetition_penalty").verdict == "FAIL", str(res)
    with pytest.raises(TypeError, match="lookup_pipe"):
        openvino_engine(FakePipeline(target), object(), **kw)
