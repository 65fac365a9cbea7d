"""The MLX-LM adapter of check_generation on fakes with MLX-LM 0.32.2's exact signatures (mlx is not
needed: the fakes are numpy).  ``test_fake_signatures_match_mlx_lm`` compares them with the real
functions where mlx_lm is installed."""
import importlib
import inspect

import numpy as np
import pytest

from specsim.testing.generation import SamplingParams, check_generation, finished
from specsim.testing.generation.mlx import mlx_engine, mlx_params
from specsim.testing.generation.toy import LOGIT_SHIFT, TOKEN_TEXT, default_models

DEFAULT_QUANTIZED_KV_START = 5000  # mlx_lm.generate's default, copied
PROMPT = (1, 0)


def _raw_logits(model, seq):
    with np.errstate(divide="ignore"):
        return np.log(model(tuple(int(t) for t in seq))) + LOGIT_SHIFT


class FakeMLX:
    """``mlx_lm.generate.generate_step`` / ``speculative_generate_step`` and
    ``mlx_lm.sample_utils.make_sampler`` / ``make_logits_processors`` (signatures of MLX-LM 0.32.2)
    over toy models (``model(prefix) -> probs``), in numpy, with MLX-LM's rules: the sampler masks
    top-p, then min-p, then top-k on the log-probabilities and draws from softmax(x / temp);
    processors get (tokens [n], logits [1, V]), each penalty over the last ``context_size`` tokens
    (presence and frequency counting the prompt too).  The speculative path drafts with the same
    sampler and processors, samples every drafted position of the target and keeps drafts while they
    equal the samples.  ``bug``: None (clean), ``"drop_repetition_penalty"`` (the speculative
    target rows skip the repetition penalty), ``"prompt_last_token_only"`` (the speculative path's
    processors see the prompt's last token only, as MLX-LM 0.32.2's ``speculative_generate_step``
    does: its prefill never enters ``prev_tokens``)."""

    def __init__(self, bug=None):
        self.bug, self.rng = bug, np.random.default_rng(0)

    @property
    def steps(self):
        return (self.generate_step, self.speculative_generate_step, self.make_sampler, self.make_logits_processors,
                self.seed)

    def seed(self, seed: int):
        self.rng = np.random.default_rng(seed)

    # -- sample_utils
    def make_sampler(self, temp: float = 0.0, top_p: float = 0.0, min_p: float = 0.0, min_tokens_to_keep: int = 1,
                     top_k: int = 0, xtc_probability: float = 0.0, xtc_threshold: float = 0.1,
                     xtc_special_tokens=None):
        if temp == 0:
            return lambda logprobs: np.argmax(logprobs, axis=-1)
        methods = []
        if 0 < top_p < 1.0:
            methods.append(lambda x: _apply_top_p(x, top_p))
        if min_p != 0.0:
            methods.append(lambda x: np.where(x < x.max(axis=-1, keepdims=True) + np.log(min_p), -np.inf, x))
        if top_k > 0:
            methods.append(lambda x: _apply_top_k(x, top_k))

        def sampler(logprobs):
            for m in methods:
                logprobs = m(logprobs)
            x = logprobs[0] * (1.0 / temp)
            p = np.exp(x - x.max())
            return np.array([self.rng.choice(p.size, p=p / p.sum())])

        return sampler

    def make_logits_processors(self, logit_bias=None, repetition_penalty=None, repetition_context_size=20,
                               presence_penalty=None, presence_context_size=20, frequency_penalty=None,
                               frequency_context_size=20):
        procs = []

        def rep(tokens, logits, pen=repetition_penalty, c=repetition_context_size):
            if len(tokens):
                t = np.asarray(tokens)[-c:]
                logits = logits.copy()
                sel = logits[:, t]
                logits[:, t] = np.where(sel < 0, sel * pen, sel / pen)
            return logits

        def pres(tokens, logits, pen=presence_penalty, c=presence_context_size):
            if len(tokens):
                logits = logits.copy()
                logits[:, np.asarray(tokens)[-c:]] -= pen  # once per distinct token, as MLX's .at-free -=
            return logits

        def freq(tokens, logits, pen=frequency_penalty, c=frequency_context_size):
            if len(tokens):
                logits = logits.copy()
                np.subtract.at(logits, (0, np.asarray(tokens)[-c:]), pen)
            return logits

        for f, pen, kind in ((rep, repetition_penalty, "repetition"), (pres, presence_penalty, "presence"),
                             (freq, frequency_penalty, "frequency")):
            if pen is not None and pen != 0:
                f.kind = kind
                procs.append(f)
        return procs

    # -- generate
    def _row(self, model, seq, history, procs, skip=()):
        logits = _raw_logits(model, seq)[None]
        for proc in procs or ():
            if getattr(proc, "kind", None) not in skip:
                logits = proc(np.asarray(history, dtype=np.uint32), logits)
        m = logits.max()
        return logits - (m + np.log(np.exp(logits - m).sum()))

    def generate_step(self, prompt, model, stream=None, *, max_tokens: int = 256, sampler=None,
                      logits_processors=None, max_kv_size=None, prompt_cache=None, prefill_step_size: int = 2048,
                      kv_bits=None, kv_group_size: int = 64, quantized_kv_start: int = DEFAULT_QUANTIZED_KV_START,
                      prompt_progress_callback=None, input_embeddings=None):
        seq, n = [int(t) for t in prompt], 0
        while n != max_tokens:
            lp = self._row(model, seq, seq, logits_processors)
            y = int(sampler(lp)[0])
            yield y, lp[0]
            seq.append(y)
            n += 1

    def speculative_generate_step(self, prompt, model, draft_model, stream=None, *, num_draft_tokens: int = 2,
                                  max_tokens: int = 256, sampler=None, logits_processors=None, prompt_cache=None,
                                  prefill_step_size: int = 512, kv_bits=None, kv_group_size: int = 64,
                                  quantized_kv_start: int = DEFAULT_QUANTIZED_KV_START):
        prompt = [int(t) for t in prompt]
        cut = len(prompt) - 1 if self.bug == "prompt_last_token_only" else 0
        skip = ("repetition",) if self.bug == "drop_repetition_penalty" else ()
        seq, ntoks = list(prompt), 0
        while True:
            k = min(max_tokens - ntoks, num_draft_tokens)
            drafts = []
            for _ in range(k):
                s = seq + drafts
                drafts.append(int(sampler(self._row(draft_model, s, s[cut:], logits_processors))[0]))
            base = list(seq)
            for i in range(k + 1):
                s = base + drafts[:i]
                lp = self._row(model, s, s[cut:], logits_processors, skip)
                t = int(sampler(lp)[0])
                seq.append(t)
                ntoks += 1
                yield t, lp[0], i < k and t == drafts[i]
                if ntoks == max_tokens:
                    return
                if i == k or t != drafts[i]:
                    break


def _apply_top_p(logprobs, top_p):
    s = np.sort(logprobs, axis=-1)
    probs = np.exp(s)
    above = np.cumsum(probs[..., ::-1], axis=-1)[..., ::-1] - probs  # mass strictly above each sorted entry
    total = above[..., :1] + probs[..., :1]
    dropped = (above >= top_p * total).sum(axis=-1, keepdims=True)
    threshold = np.take_along_axis(s, dropped, axis=-1)
    return np.where(logprobs < threshold, -np.inf, logprobs)


def _apply_top_k(logprobs, top_k):
    if not 0 < top_k < logprobs.shape[-1]:  # as MLX-LM's apply_top_k
        raise ValueError(f"`top_k` has to be an integer in the (0, {logprobs.shape[-1]}) interval, but is {top_k}.")
    idx = np.argpartition(-logprobs, top_k - 1, axis=-1)[..., top_k:]
    out = logprobs.copy()
    np.put_along_axis(out, idx, -np.inf, axis=-1)
    return out


def _engine(bug=None, exact=True, **kw):
    target, draft = default_models()
    extra = dict(logits=lambda prefix: _raw_logits(target, prefix)) if exact else {}
    return mlx_engine(target, draft, V=4, num_draft_tokens=3, token_text=TOKEN_TEXT, steps=FakeMLX(bug).steps,
                      **extra, **kw)


#: Settings MLX-LM samples as theta says (the adapter raises for the others), max_new_tokens 4.
EXACT = {"temperature+top_k": SamplingParams(temperature=0.6, top_k=3),
         "top_p->top_k": SamplingParams(top_k=3, top_p=0.75, order=("top_p", "top_k", "min_p")),
         "min_p": SamplingParams(min_p=0.2),
         "repetition_penalty": SamplingParams(repetition_penalty=2.0),
         "eos+stop": SamplingParams(eos_token_id=3, stop_strings=("ba",)),
         "max_new_tokens": SamplingParams(max_new_tokens=2)}


def test_mlx_adapter_exact_mode_on_fakes():
    """Exact mode (toy target logits): the clean fake passes on both sides, so the adapter's mapping
    of theta to make_sampler / make_logits_processors is MLX-LM's law; a speculative path that drops
    the repetition penalty, or whose processors see only the prompt's last token (MLX-LM 0.32.2), is
    flagged on the speculative side of the repetition_penalty row."""
    res = check_generation(_engine(), prompt=PROMPT, params=EXACT, n=400, seed=1)
    assert res.mode == "exact" and res.verdict == "PASS", str(res)
    eng = _engine()
    for th in EXACT.values():  # the adapter stops where the setting says (tokens and reason)
        g = eng.generate(PROMPT, th.max_new_tokens, th, True, np.random.default_rng(5))
        assert g[1] == finished(g[0], th, TOKEN_TEXT) and finished(g[0][:-1], th, TOKEN_TEXT) is None
        assert g[2] is None  # no logprobs in exact mode (MLX-LM's are not log pi_theta)
    rep = {"repetition_penalty": EXACT["repetition_penalty"]}
    for bug in ("drop_repetition_penalty", "prompt_last_token_only"):
        row = check_generation(_engine(bug), prompt=PROMPT, params=rep, n=400, seed=1).rows[0]
        assert row.verdict == "FAIL" and row.witness.startswith("speculative"), (bug, row.witness)


def test_mlx_adapter_two_sample_mode_logprobs():
    """Two-sample mode (no logits): MLX-LM's logprobs are compared speculative against plain.  The
    clean fake passes with presence and frequency penalties (MLX-LM's rule, prompt counted); the
    MLX-LM 0.32.2 penalty context fails deterministically on the logprobs."""
    params = {"presence_penalty": SamplingParams(presence_penalty=1.5, max_new_tokens=3),
              "frequency_penalty": SamplingParams(frequency_penalty=1.0, max_new_tokens=3)}
    res = check_generation(_engine(exact=False), prompt=PROMPT, params=params, n=200, seed=2)
    assert res.mode == "two-sample" and res.verdict == "PASS", str(res)
    g = _engine(exact=False).generate(PROMPT, 3, params["presence_penalty"], True, np.random.default_rng(0))
    assert len(g[2]) == len(g[0]) and all(lp <= 0 for lp in g[2])
    res = check_generation(_engine("prompt_last_token_only", exact=False), prompt=PROMPT, params=params, n=50,
                           seed=2)
    assert all(r.verdict == "FAIL" and r.witness.startswith("logprob") for r in res.rows), str(res)


def test_mlx_adapter_arguments():
    eng = _engine()
    rng = np.random.default_rng(0)
    for th, name in ((SamplingParams(no_repeat_ngram_size=2), "no_repeat_ngram_size"),
                     (SamplingParams(eos_token_id=3, min_new_tokens=1), "min_new_tokens"),
                     (SamplingParams(temperature=0.5, top_p=0.8), "temperature"),
                     (SamplingParams(temperature=0.5, min_p=0.1), "temperature"),
                     (SamplingParams(top_k=2, top_p=0.8), "order"),
                     (SamplingParams(min_p=0.1, top_p=0.8, order=("min_p", "top_p", "top_k")), "order"),
                     (SamplingParams(presence_penalty=1.0), "presence_penalty"),
                     (SamplingParams(frequency_penalty=1.0), "frequency_penalty")):
        with pytest.raises(NotImplementedError, match=name):
            eng.generate(PROMPT, th.max_new_tokens, th, True, rng)
    # top_p first, or top_k alone with a temperature: supported; top_k >= V passed as off
    for th in (SamplingParams(top_k=2, top_p=0.8, order=("top_p", "top_k", "min_p")),
               SamplingParams(temperature=0.5, top_k=2), SamplingParams(top_k=9),
               SamplingParams(top_k=4, top_p=0.8)):  # top_k >= V is off: top_p is then first
        assert len(eng.generate(PROMPT, 4, th, True, rng)[0]) == 4
    assert set(mlx_params({"a": SamplingParams(min_new_tokens=1), "b": SamplingParams(no_repeat_ngram_size=2),
                           "c": SamplingParams()})) == {"c"}
    target, draft = default_models()
    steps = FakeMLX().steps
    with pytest.raises(TypeError, match="draft_model"):
        mlx_engine(target, None, V=4, steps=steps)
    with pytest.raises(ValueError, match="V must"):
        mlx_engine(target, draft, V=1, steps=steps)
    with pytest.raises(ValueError, match="num_draft_tokens must"):
        mlx_engine(target, draft, V=4, num_draft_tokens=0, steps=steps)
    with pytest.raises(TypeError, match="steps"):
        mlx_engine(target, draft, V=4, steps=steps[:4])
    with pytest.raises(TypeError, match="decode"):
        mlx_engine(target, draft, V=4, decode="abc", steps=steps)
    with pytest.raises(TypeError, match="logits"):
        mlx_engine(target, draft, V=4, logits=3, steps=steps)
    with pytest.raises(ValueError, match="token_text"):
        mlx_engine(target, draft, V=4, token_text=("a", "b"), steps=steps)
    no_text = mlx_engine(target, draft, V=4, steps=steps)
    with pytest.raises(ValueError, match="stop_strings"):
        no_text.generate(PROMPT, 2, SamplingParams(stop_strings=("a",), max_new_tokens=2), False, rng)


def test_fake_signatures_match_mlx_lm():
    pytest.importorskip("mlx_lm")
    generate = importlib.import_module("mlx_lm.generate")  # the package's `generate` is a function
    sample_utils = importlib.import_module("mlx_lm.sample_utils")

    fake = FakeMLX()
    for mod, names in ((generate, ("generate_step", "speculative_generate_step")),
                       (sample_utils, ("make_sampler", "make_logits_processors"))):
        for nm in names:
            real = inspect.signature(getattr(mod, nm)).parameters
            mine = inspect.signature(getattr(fake, nm)).parameters
            assert [(p.name, p.kind) for p in real.values()] == [(p.name, p.kind) for p in mine.values()], nm
            assert [p.default for p in real.values() if p.name != "stream"] == \
                   [p.default for p in mine.values() if p.name != "stream"], nm
    assert generate.DEFAULT_QUANTIZED_KV_START == DEFAULT_QUANTIZED_KV_START
