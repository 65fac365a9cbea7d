"""OpenVINO GenAI as a :class:`~specsim.testing.generation.GenerationEngine` (prompt-lookup decoding).

OpenVINO GenAI (checked on 2026.4.1) reads a GGUF directly (``LLMPipeline(path, "CPU")``) and runs
prompt-lookup decoding on the CPU (``LLMPipeline(path, "CPU", prompt_lookup=True)`` with
``num_assistant_tokens`` and ``max_ngram_size`` in the generation config).  A prompt-lookup
pipeline refuses configs without them, so the plain path is a second pipeline on the same file.
Its draft-model path (``draft_model=openvino_genai.draft_model(path, "CPU")``) wants an
OpenVINO IR directory and does not open a GGUF.

``generate(prompt, n, theta, speculative, rng)`` fills a ``GenerationConfig`` from theta
(``do_sample``, temperature, top_k, top_p, min_p, repetition / presence / frequency penalties,
``no_repeat_ngram_size``, ``min_new_tokens``, ``max_new_tokens``, ``stop_strings``, ``eos_token_id``
or ``ignore_eos`` when theta has none, ``rng_seed`` drawn from ``rng``) and calls
``pipe.generate(TokenizedInputs(ids, mask), config)``; the tokens come from the ``EncodedResults``.
The stop reason is "eos" when the last token is EOS, "length" at n tokens, "stop" otherwise.
OpenVINO reports one cumulative score per sequence, not per-token logprobs: none are compared.

``genai`` (default: the ``openvino_genai`` module, imported when an engine is built) supplies
``GenerationConfig`` and ``TokenizedInputs``; ``tensor`` builds their tensors (default
``openvino.Tensor``).  The CI test passes a fake module with the same names.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..._validate import check_int
from . import GenerationEngine, SamplingParams, reported_stop

__all__ = ["openvino_engine"]


def openvino_engine(plain_pipe, lookup_pipe, *, V: int, num_assistant_tokens: int = 3, max_ngram_size: int = 2,
                    genai=None, tensor=None, name: Optional[str] = None) -> GenerationEngine:
    """A GenerationEngine over two ``openvino_genai.LLMPipeline`` objects on one model: ``plain_pipe``
    (plain sampling) and ``lookup_pipe`` (built with ``prompt_lookup=True``).

    Parameters: ``plain_pipe``, ``lookup_pipe``; ``V`` (vocabulary size); ``num_assistant_tokens``
    and ``max_ngram_size`` (prompt lookup); ``genai``, ``tensor`` (see the module docstring); ``name``.

    Returns: a :class:`~specsim.testing.generation.GenerationEngine` (two-sample mode).
    """
    for what, pipe in (("plain_pipe", plain_pipe), ("lookup_pipe", lookup_pipe)):
        if not callable(getattr(pipe, "generate", None)):
            raise TypeError(f"{what} must be an openvino_genai.LLMPipeline (it has no generate())")
    check_int(V, "V", 2)
    check_int(num_assistant_tokens, "num_assistant_tokens", 1)
    check_int(max_ngram_size, "max_ngram_size", 1)
    if genai is None:
        import openvino_genai as genai
    if tensor is None:
        import openvino

        tensor = openvino.Tensor

    def generate(prompt, n_tokens, params: SamplingParams, speculative: bool, rng):
        if tuple(params.order) != ("top_k", "top_p", "min_p"):
            raise NotImplementedError("the adapter passes top_k, top_p, min_p; OpenVINO applies its own order")
        cfg = genai.GenerationConfig()
        cfg.do_sample = True
        cfg.max_new_tokens = n_tokens
        cfg.min_new_tokens = params.min_new_tokens
        cfg.temperature = params.temperature
        cfg.top_k = params.top_k
        cfg.top_p = params.top_p
        cfg.min_p = params.min_p
        cfg.repetition_penalty = params.repetition_penalty
        cfg.presence_penalty = params.presence_penalty
        cfg.frequency_penalty = params.frequency_penalty
        cfg.no_repeat_ngram_size = params.no_repeat_ngram_size
        cfg.rng_seed = int(rng.integers(2 ** 31))
        if params.eos_token_id is None:
            cfg.ignore_eos = True  # EOS comes from theta alone, as in the other adapters
        else:
            cfg.eos_token_id = params.eos_token_id
        if params.stop_strings:
            cfg.stop_strings = set(params.stop_strings)
            cfg.include_stop_str_in_output = True
        if speculative:
            cfg.num_assistant_tokens = num_assistant_tokens
            cfg.max_ngram_size = max_ngram_size
        ids = np.array([list(prompt)], dtype=np.int64)
        inputs = genai.TokenizedInputs(tensor(ids), tensor(np.ones_like(ids)))
        res = (lookup_pipe if speculative else plain_pipe).generate(inputs, cfg)
        toks = [int(t) for t in res.tokens[0]]
        reason = reported_stop(toks, n_tokens, params)
        return toks, reason

    label = name or f"openvino-genai prompt lookup (num_assistant_tokens={num_assistant_tokens}, " \
                    f"max_ngram_size={max_ngram_size})"
    return GenerationEngine(generate, V, None, None, label)
