"""llama.cpp (through llama-cpp-python) as a :class:`~specsim.testing.generation.GenerationEngine`.

llama-cpp-python speculates inside ``Llama.generate``: a ``LlamaDraftModel`` (``llm.draft_model``)
proposes tokens after each sampled one, the target evaluates them in one batch, and the sampler
chain samples every position in turn; a draft token is kept while the sampled token equals it,
and the first sampled token that differs ends the block (sample-and-match verification: the
emitted tokens are target samples whatever the draft proposes).  The plain path is the same
generator with ``draft_model = None``.

``generate(prompt, n, theta, speculative, rng)`` seeds the sampler (``llm.set_seed``) from
``rng``, sets ``llm.draft_model`` to the draft (speculative) or None (plain), and reads tokens from
``llm.generate(prompt, top_k=, top_p=, min_p=, temp=, repeat_penalty=, frequency_penalty=,
presence_penalty=)`` until EOS (theta's ``eos_token_id``), a stop string (decoded with
``llm.detokenize``) or ``max_new_tokens``.  ``create_completion`` stops the same generator token by
token, the same way on both paths, so the adapter stops it itself and gets token ids.  llama.cpp's
own order is penalties, top-k, typical, top-p, min-p, temperature; it has no no-repeat n-gram ban
and no ``min_new_tokens``: settings with them raise ``NotImplementedError``
(:func:`llamacpp_params` drops them).  Logprobs are not reported (llama-cpp-python's are of the
raw logits, not of the law it samples).  Two-sample mode only.

``llm`` must keep every position's logits (``Llama(..., logits_all=True)``, which llama-cpp-python
forces when built with a ``draft_model``).  llama_cpp is never imported here: any object with the
same methods works (the CI test uses a fake with llama-cpp-python's signatures).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..._validate import check_int
from . import GenerationEngine, SamplingParams, streamed_stop, without_settings

__all__ = ["llamacpp_engine", "llamacpp_params", "CallableDraft"]


class CallableDraft:
    """A ``LlamaDraftModel``: ``draft(input_ids) -> np.intc array`` of up to ``k`` proposed tokens
    from ``propose(tuple_of_ids, k)`` (any function of the whole context).  Subclass
    ``llama_cpp.llama_speculative.LlamaDraftModel`` is not required: llama-cpp-python only calls it.

    >>> from specsim.testing.generation.llamacpp import CallableDraft
    >>> CallableDraft(lambda ids, k: [ids[-1]] * k, k=2)(np.array([5, 7], dtype=np.intc)).tolist()
    [7, 7]
    """

    def __init__(self, propose, k: int = 3):
        if not callable(propose):
            raise TypeError(f"propose must be callable, got {type(propose).__name__}")
        self.propose, self.k = propose, check_int(k, "k", 1)

    def __call__(self, input_ids, /, **kwargs):
        out = list(self.propose(tuple(int(t) for t in input_ids), self.k))[: self.k]
        return np.asarray(out, dtype=np.intc)


def llamacpp_params(base: dict) -> dict:
    """``base`` without the settings llama.cpp has no sampler for (no-repeat n-grams, ``min_new_tokens``)."""
    return without_settings(base, "no_repeat_ngram_size", "min_new_tokens")


def llamacpp_engine(llm, draft_model, *, V: Optional[int] = None, name: Optional[str] = None) -> GenerationEngine:
    """A GenerationEngine over ``llm.generate`` without (plain) and with (speculative) ``draft_model``.

    Parameters: ``llm`` (a ``llama_cpp.Llama`` built with ``logits_all=True``, or an object with its
    ``generate``, ``set_seed``, ``detokenize``, ``n_vocab`` and ``draft_model``); ``draft_model``
    (a ``LlamaDraftModel``, e.g. ``LlamaPromptLookupDecoding`` or :class:`CallableDraft`); ``V``
    (default ``llm.n_vocab()``); ``name``.

    Returns: a :class:`~specsim.testing.generation.GenerationEngine` (two-sample mode).
    """
    if draft_model is None or not callable(draft_model):
        raise TypeError("draft_model must be a LlamaDraftModel (callable on the input ids)")
    for attr in ("generate", "set_seed", "detokenize", "n_vocab"):
        if not callable(getattr(llm, attr, None)):
            raise TypeError(f"llm must be a llama_cpp.Llama (it has no {attr}())")
    if getattr(llm, "_logits_all", True) is False:
        raise ValueError("llm must be built with logits_all=True (speculation reads every drafted position's logits)")
    V = int(llm.n_vocab()) if V is None else check_int(V, "V", 2)
    text_cache: dict = {}

    def text(t):
        if t not in text_cache:
            text_cache[t] = llm.detokenize([t]).decode("utf-8", errors="replace")
        return text_cache[t]

    def generate(prompt, n_tokens, params: SamplingParams, speculative: bool, rng):
        if params.no_repeat_ngram_size or params.min_new_tokens:
            raise NotImplementedError("llama.cpp has no no-repeat n-gram ban and no min_new_tokens")
        llm.set_seed(int(rng.integers(2 ** 31)))
        llm.draft_model = draft_model if speculative else None
        toks, reason, stop = [], None, streamed_stop(params, n_tokens, text)
        try:
            gen = llm.generate(list(prompt), top_k=params.top_k, top_p=params.top_p, min_p=params.min_p,
                               temp=params.temperature, repeat_penalty=params.repetition_penalty,
                               frequency_penalty=params.frequency_penalty,
                               presence_penalty=params.presence_penalty, reset=True)
            for t in gen:
                toks.append(int(t))
                reason = stop(int(t))
                if reason is not None:
                    break
            gen.close()
        finally:
            llm.draft_model = None
        return toks, reason

    label = name or f"llama.cpp ({type(draft_model).__name__})"
    return GenerationEngine(generate, V, None, None, label)
