"""mistral.rs (its ``mistralrs`` Python package) as a :class:`~specsim.testing.generation.GenerationEngine`.

mistral.rs decides speculation when a ``Runner`` is built, not per request: ``Runner(which,
which_draft=..., speculative_gamma=...)`` in mistralrs <= 0.6.0 (a draft model), ``Runner(which,
mtp_model=..., mtp_n_predict=...)`` from 0.8 on (a multi-token-prediction assistant; the
draft-model arguments are gone).  So the adapter takes two runners on one model: ``plain_runner``
(no speculation) and ``spec_runner``.  Both are driven the same way:

``generate(prompt, n, theta, speculative, rng)`` sends one ``ChatCompletionRequest(messages=
[{"role": "user", "content": text}], model="default", max_tokens=n, temperature=, top_k=, top_p=,
min_p=, repetition_penalty=, presence_penalty=, frequency_penalty=, stop_seqs=, ignore_eos=,
logprobs=True)``.  The completion request takes text and returns text only, so the chat request is
used, on runners built with :data:`IDENTITY_TEMPLATE` as their chat template (``jinja_explicit=``
a file holding it): the model then sees exactly the prompt's text, which must tokenize back to
``prompt`` (checked once per prompt, and the response's ``usage.prompt_tokens`` each call).  The
generated ids are read from the per-token logprobs (their ``bytes``, mapped through ``vocab``),
not from the text, which mistral.rs strips and cuts at a stop string.  Stop reason: "length";
"stop" with theta's EOS as the last token is "eos"; "stop" with a stop string in the decoded
tokens is "stop"; anything else is None, which the check rejects.  theta's EOS must be one of the
model's (``eos_token_ids``); without one the request sets ``ignore_eos``.

What is compared, and what is not:

* mistral.rs's own sampler (its order of top-k, top-p, min-p and its penalty rules) on both paths:
  two-sample mode only, theta's ``order`` is not honoured.
* No no-repeat n-gram ban and no ``min_new_tokens`` in mistral.rs: those settings raise
  ``NotImplementedError`` (:func:`mistralrs_params` drops them); a request class without a field
  a setting needs (0.6.0 has no ``repetition_penalty`` and no ``ignore_eos``) raises the same.
* Logprobs: the logprob mistral.rs reports for each emitted token, compared speculative against
  plain (same token after the same prefix).
* Seeds: mistral.rs refuses to seed its CPU generator ("cannot seed the CPU rng with set_seed",
  0.9.5), so ``rng`` is not used: the calls are independent draws of the engine's own generator.

``request`` (default: ``mistralrs.ChatCompletionRequest``, imported when an engine is built) builds
the requests; the CI test passes a fake with mistralrs 0.9.5's names.  docs/engines.md says what
mistral.rs does on this CPU.
"""
from __future__ import annotations

import inspect
from typing import Optional, Sequence

from ..._validate import check_int
from ..sampler import SamplerError
from . import GenerationEngine, SamplingParams, without_settings

__all__ = ["mistralrs_engine", "mistralrs_params", "IDENTITY_TEMPLATE"]

#: A chat template that renders the first message's content and nothing else (no role markers, no
#: generation prompt): with it, a chat request samples after exactly the prompt's tokens.
IDENTITY_TEMPLATE = "{{ messages[0]['content'] }}"


def mistralrs_params(base: dict) -> dict:
    """``base`` without the settings mistral.rs has no sampler for (no-repeat n-grams, ``min_new_tokens``).

    >>> from specsim.testing.generation import SamplingParams
    >>> from specsim.testing.generation.mistralrs import mistralrs_params
    >>> sorted(mistralrs_params({"a": SamplingParams(no_repeat_ngram_size=2), "b": SamplingParams(min_new_tokens=1),
    ...                          "c": SamplingParams()}))
    ['c']
    """
    return without_settings(base, "no_repeat_ngram_size", "min_new_tokens")


def _token_ids(vocab: Sequence[bytes]) -> dict:
    """bytes -> id; a byte string two ids share maps to None (cannot be read back)."""
    out: dict = {}
    for i, b in enumerate(vocab):
        if not isinstance(b, (bytes, bytearray)):
            raise TypeError(f"vocab[{i}] must be bytes, got {type(b).__name__}")
        out[bytes(b)] = None if bytes(b) in out else i
    return out


def mistralrs_engine(plain_runner, spec_runner, *, vocab: Sequence[bytes], eos_token_ids: Sequence[int] = (),
                     request=None, name: Optional[str] = None) -> GenerationEngine:
    """A GenerationEngine over two ``mistralrs.Runner`` objects on one model, both built with
    :data:`IDENTITY_TEMPLATE` as their chat template: ``plain_runner`` (no speculation) and
    ``spec_runner`` (``which_draft=`` or ``mtp_model=``).

    Parameters: ``plain_runner``, ``spec_runner``; ``vocab`` (the bytes of each token id, V of
    them; the model's tokenizer gives them); ``eos_token_ids`` (the model's EOS ids: theta's EOS
    must be one of them); ``request`` (the ``ChatCompletionRequest`` class, default mistralrs's);
    ``name``.

    Returns: a :class:`~specsim.testing.generation.GenerationEngine` (two-sample mode).
    """
    for what, r in (("plain_runner", plain_runner), ("spec_runner", spec_runner)):
        for attr in ("send_chat_completion_request", "tokenize_text", "detokenize_text"):
            if not callable(getattr(r, attr, None)):
                raise TypeError(f"{what} must be a mistralrs.Runner (it has no {attr}())")
    if plain_runner is spec_runner:
        raise ValueError("plain_runner and spec_runner must be two Runner objects (mistral.rs speculates per Runner)")
    ids = _token_ids(vocab)
    V = check_int(len(vocab), "len(vocab)", 2)
    eos_set = {check_int(e, "eos_token_ids", 0) for e in eos_token_ids}
    if request is None:
        from mistralrs import ChatCompletionRequest as request
    fields = set(inspect.signature(request).parameters)
    texts: dict = {}

    def prompt_text(prompt: tuple) -> str:
        if prompt not in texts:
            text = plain_runner.detokenize_text(list(prompt), False)
            back = tuple(int(t) for t in plain_runner.tokenize_text(text, False, None))
            if back != prompt:
                raise ValueError(f"prompt {prompt} decodes to {text!r}, which tokenizes back to {back}: "
                                 "mistral.rs takes text, so the prompt must round-trip")
            texts[prompt] = text
        return texts[prompt]

    def token_of(b, call) -> int:
        t = ids.get(bytes(b), -1) if b is not None else -1
        if t is None:
            raise SamplerError(f"{call}: token bytes {bytes(b)!r} belong to several ids of vocab")
        return t  # -1 (unknown bytes) is rejected by the check as outside the vocabulary

    def generate(prompt, n_tokens, params: SamplingParams, speculative: bool, rng):
        if params.no_repeat_ngram_size or params.min_new_tokens:
            raise NotImplementedError("mistral.rs has no no-repeat n-gram ban and no min_new_tokens")
        if params.eos_token_id is not None and params.eos_token_id not in eos_set:
            raise NotImplementedError(f"eos_token_id {params.eos_token_id} is not one of the model's EOS ids "
                                      f"{sorted(eos_set)} (mistral.rs stops at those only)")
        prompt = tuple(int(t) for t in prompt)
        kw = dict(max_tokens=n_tokens, temperature=params.temperature, top_k=params.top_k or None,
                  top_p=params.top_p if params.top_p < 1.0 else None, min_p=params.min_p or None,
                  repetition_penalty=None if params.repetition_penalty == 1.0 else params.repetition_penalty,
                  presence_penalty=params.presence_penalty or None, frequency_penalty=params.frequency_penalty or None,
                  stop_seqs=list(params.stop_strings) or None, ignore_eos=params.eos_token_id is None,
                  logprobs=True)
        missing = [k for k, v in kw.items() if k not in fields and v not in (None, False)]
        if missing:
            raise NotImplementedError(f"this mistralrs ChatCompletionRequest has no {', '.join(missing)}")
        kw = {k: v for k, v in kw.items() if k in fields}
        req = request(messages=[{"role": "user", "content": prompt_text(prompt)}], model="default", **kw)
        runner = spec_runner if speculative else plain_runner
        res = runner.send_chat_completion_request(req)
        call = f"{'speculative' if speculative else 'plain'} mistral.rs request"
        if res.usage.prompt_tokens != len(prompt):
            raise ValueError(f"{call} read {res.usage.prompt_tokens} prompt tokens, not the {len(prompt)} of "
                             f"{prompt}: build the Runner with jinja_explicit= a file holding IDENTITY_TEMPLATE")
        choice = res.choices[0]
        content = choice.logprobs.content if choice.logprobs is not None else None
        if content is None:
            raise SamplerError(f"{call} returned no per-token logprobs (needed to read the token ids)")
        toks = [token_of(lp.bytes, call) for lp in content]
        lps = [float(lp.logprob) for lp in content]
        reason = None
        if choice.finish_reason == "length":
            reason = "length"
        elif choice.finish_reason == "stop" and toks:
            if params.eos_token_id is not None and toks[-1] == params.eos_token_id:
                reason = "eos"
            elif params.stop_strings:
                text = b"".join(bytes(lp.bytes) for lp in content).decode("utf-8", errors="replace")
                reason = "stop" if any(s in text for s in params.stop_strings) else None
        return toks, reason, lps

    label = name or "mistral.rs speculative Runner"
    return GenerationEngine(generate, V, None, None, label)
