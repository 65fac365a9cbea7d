"""transformers' speculative modes as a :class:`~specsim.testing.generation.GenerationEngine`.

``generate(prompt, n, theta, speculative, rng)`` calls ``model.generate(do_sample=True, ...)`` with
theta's parameters (transformers names them the same; it has no presence or frequency penalty,
so settings with them raise ``NotImplementedError``) and, on the speculative side, one of

* ``mode="assistant"``: assisted generation with ``assistant_model`` (a draft model), with
  ``num_assistant_tokens`` and ``num_assistant_tokens_schedule`` (``"constant"`` or
  ``"heuristic"``) and optionally ``assistant_confidence_threshold``;
* ``mode="prompt_lookup"``: prompt-lookup decoding (``prompt_lookup_num_tokens``).

With ``assistant_tokenizer`` (the draft's own tokenizer, different from the target's) the
assistant mode is *universal* assisted generation: transformers re-tokenises the text between the
two vocabularies (``generate(..., tokenizer=, assistant_tokenizer=)``).

Stop strings with a draft model: transformers 5.x (checked on 5.24.0 and 5.25.0) copies the target's
generation config, stop strings included, into the assistant's own ``generate`` call without a
tokenizer, which raises ``ValueError`` ("... could not locate a tokenizer"); passing
``assistant_tokenizer`` for a draft with the same vocabulary is refused.  Reported upstream as
huggingface/transformers#48039 (A).  So that the law behind it can be tested, the adapter hands
the assistant's ``generate`` its tokenizer for the duration of a speculative call with stop
strings (:func:`assistant_stop_string_workaround`); the call transformers itself refuses is
reproduced by ``stop_strings_workaround=False``.  A stop string completed inside an accepted
block does not stop either speculative mode (the stopping criteria look at the sequence's end
only; EOS is cut at its first position in the block): an engine fault the check reports, not
worked around (docs/engines.md, transformers).

torch is seeded from ``rng`` before each call.  The reported logprobs are log_softmax of the
processed scores transformers returns (``output_scores=True``); the stop reason is "eos" when the
last token is EOS, "length" at n tokens, "stop" otherwise (a stop string).  With
``exact=True`` (default when V <= 64, e.g. a toy model of
:func:`specsim.testing.language_models.transformers_lm`) the engine exposes its raw logits and
:func:`~specsim.testing.generation.check_generation` runs in exact mode.

torch and transformers are imported when an engine is built, not when this module is imported.
"""
from __future__ import annotations

import contextlib
import functools
from contextlib import contextmanager
from typing import Optional

from ..._validate import check_int
from . import GenerationEngine, SamplingParams, reported_stop

__all__ = ["transformers_engine", "transformers_params", "assistant_stop_string_workaround", "LookupDrafts",
           "MODES"]

MODES = ("assistant", "prompt_lookup")


def transformers_params(max_new_tokens: int = 4, eos_token_id: Optional[int] = None, stop_string: str | None = None,
                        base: Optional[dict] = None) -> dict:
    """The battery of :func:`~specsim.testing.generation.default_params` without the settings
    transformers has no processor for (presence and frequency penalties); EOS settings only when
    ``eos_token_id`` is given; stop strings only when ``stop_string`` is given (they need the
    tokenizer)."""
    from . import default_params

    base = base if base is not None else default_params(max_new_tokens, eos_token_id if eos_token_id is not None else 0,
                                                        stop_string or "x")
    drop = {"presence_penalty", "frequency_penalty"}
    if eos_token_id is None:
        drop |= {"eos", "min_new_tokens"}
    if stop_string is None:
        drop.add("stop_strings")
    return {k: v for k, v in base.items() if k not in drop}


@contextmanager
def assistant_stop_string_workaround(assistant_model, tokenizer):
    """Within the block, ``assistant_model.generate`` is called with ``tokenizer=tokenizer`` unless
    the caller passes one (an instance attribute shadowing the class method, removed on exit).

    transformers' candidate generator calls ``assistant_model.generate(generation_config=...)``
    with the target's stop strings and no tokenizer (huggingface/transformers#48039 (A)); with the
    tokenizer the draft stops drafting at a stop string, which changes only the proposals.

    >>> class M:
    ...     def generate(self, **kw):
    ...         return kw.get("tokenizer")
    >>> m = M()
    >>> with assistant_stop_string_workaround(m, "tok"):
    ...     m.generate()
    'tok'
    >>> m.generate() is None
    True
    """
    had = "generate" in vars(assistant_model)
    before = vars(assistant_model).get("generate")
    assistant_model.generate = functools.partial(type(assistant_model).generate, assistant_model, tokenizer=tokenizer)
    try:
        yield assistant_model
    finally:
        if had:
            assistant_model.generate = before
        else:
            del assistant_model.generate


class LookupDrafts:
    """Counts, inside a ``with`` block, the tokens transformers' prompt lookup proposes
    (``calls`` verification steps, ``proposed`` tokens) and the ones the target accepts
    (``accepted``): ``PromptLookupCandidateGenerator.get_candidates`` and
    ``update_candidate_strategy`` (called with the number of accepted drafts) are wrapped on the
    class and restored on exit.  Prompt lookup proposes nothing unless the context's last tokens
    occurred before, so a check of that mode is worth only as much as these counts.

    Each step emits its accepted drafts plus one token, so without EOS or stop strings the tokens
    generated are ``accepted + calls``.
    """

    _METHODS = ("get_candidates", "update_candidate_strategy")

    def __enter__(self):
        from transformers.generation.candidate_generator import PromptLookupCandidateGenerator as C

        self.cls, self.saved = C, {k: C.__dict__.get(k) for k in self._METHODS}
        self.calls = self.proposed = self.accepted = 0
        get, update = C.get_candidates, C.update_candidate_strategy

        def get_candidates(gen, input_ids, *args, **kw):
            out = get(gen, input_ids, *args, **kw)
            self.calls += 1
            self.proposed += int(out[0].shape[1] - input_ids.shape[1])
            return out

        def update_candidate_strategy(gen, input_ids, scores, num_matches):
            self.accepted += int(num_matches)
            return update(gen, input_ids, scores, num_matches)

        C.get_candidates, C.update_candidate_strategy = get_candidates, update_candidate_strategy
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                delattr(self.cls, k)
            else:
                setattr(self.cls, k, v)

    def __str__(self):
        return (f"prompt lookup: {self.proposed} tokens proposed in {self.calls} verification steps, "
                f"{self.accepted} accepted")


def transformers_engine(model, assistant_model=None, *, mode: str = "assistant", num_assistant_tokens: int = 3,
                        schedule: str = "constant", confidence_threshold: Optional[float] = None,
                        prompt_lookup_num_tokens: int = 3, tokenizer=None, assistant_tokenizer=None,
                        stop_strings_workaround: bool = True, exact: Optional[bool] = None,
                        V: Optional[int] = None, name: Optional[str] = None) -> GenerationEngine:
    """A GenerationEngine over ``model.generate`` (plain) and its speculative ``mode``.

    Parameters: ``model`` (a transformers causal LM); ``assistant_model`` (the draft, for
    ``mode="assistant"``); ``mode`` (:data:`MODES`); ``num_assistant_tokens``; ``schedule``
    (``"constant"`` or ``"heuristic"``); ``confidence_threshold`` (``assistant_confidence_threshold``,
    None: not passed); ``prompt_lookup_num_tokens``; ``tokenizer`` (needed for stop strings, and
    gives ``token_text``); ``assistant_tokenizer`` (the draft's tokenizer when it differs from the
    target's: universal assisted generation; needs ``tokenizer``); ``stop_strings_workaround``
    (give the draft's ``generate`` its tokenizer when stop strings are set, see the module
    docstring; False: call transformers as is); ``exact`` (expose the raw logits for exact mode; default V <= 64);
    ``V`` (vocabulary, default the model's output width); ``name``.

    Returns: a :class:`~specsim.testing.generation.GenerationEngine`.

    >>> from specsim.models import random_model, mix
    >>> from specsim.testing.language_models import transformers_lm
    >>> from specsim.testing.generation.transformers import transformers_engine
    >>> eng = transformers_engine(transformers_lm(random_model(3, 0)), transformers_lm(random_model(3, 1)))
    >>> eng.V, eng.logits is not None
    (3, True)
    """
    import torch

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "assistant" and assistant_model is None:
        raise ValueError("mode='assistant' needs assistant_model (the draft model)")
    if schedule not in ("constant", "heuristic"):
        raise ValueError(f"schedule must be 'constant' or 'heuristic', got {schedule!r}")
    check_int(num_assistant_tokens, "num_assistant_tokens", 1)
    check_int(prompt_lookup_num_tokens, "prompt_lookup_num_tokens", 1)
    if assistant_tokenizer is not None and (tokenizer is None or mode != "assistant"):
        raise ValueError("assistant_tokenizer (universal assisted generation) needs mode='assistant' and tokenizer")
    device = next(iter(model.parameters())).device

    def forward_last(ids):
        with torch.no_grad():
            return model(torch.tensor([list(ids)], dtype=torch.long, device=device)).logits[0, -1].double().cpu()

    if V is None:
        V = int(model.config.vocab_size) if getattr(model.config, "vocab_size", None) else None
    if V is None:
        raise ValueError("V must be given: the model config has no vocab_size")
    exact = V <= 64 if exact is None else bool(exact)
    token_text = None
    if tokenizer is not None:
        token_text = [tokenizer.decode([t]) for t in range(V)]
    pad = model.generation_config.pad_token_id
    for m in (model, assistant_model):  # EOS comes from theta alone (a model's own EOS would stop theta-less runs)
        if m is not None:
            m.generation_config.eos_token_id = None
    if pad is None:
        pad = 0

    def generate(prompt, n_tokens, params: SamplingParams, speculative: bool, rng):
        if params.presence_penalty or params.frequency_penalty:
            raise NotImplementedError("transformers has no presence or frequency penalty")
        if tuple(params.order) != ("top_k", "top_p", "min_p"):
            raise NotImplementedError("transformers applies top_k, top_p, min_p in that order only")
        torch.manual_seed(int(rng.integers(2 ** 62)))
        kw = dict(do_sample=True, max_new_tokens=n_tokens, min_new_tokens=params.min_new_tokens or None,
                  temperature=params.temperature, top_k=params.top_k, top_p=params.top_p,
                  min_p=params.min_p or None, repetition_penalty=params.repetition_penalty,
                  no_repeat_ngram_size=params.no_repeat_ngram_size, eos_token_id=params.eos_token_id,
                  pad_token_id=pad, output_scores=True, return_dict_in_generate=True)
        if params.stop_strings:
            if tokenizer is None:
                raise NotImplementedError("stop strings need the tokenizer")
            kw.update(stop_strings=list(params.stop_strings), tokenizer=tokenizer)
        shim = None
        if speculative and mode == "assistant":
            kw.update(assistant_model=assistant_model, num_assistant_tokens=num_assistant_tokens,
                      num_assistant_tokens_schedule=schedule)
            if confidence_threshold is not None:
                kw["assistant_confidence_threshold"] = confidence_threshold
            if assistant_tokenizer is not None:
                kw.update(tokenizer=tokenizer, assistant_tokenizer=assistant_tokenizer)
            if params.stop_strings and stop_strings_workaround:
                shim = assistant_stop_string_workaround(assistant_model, assistant_tokenizer or tokenizer)
        elif speculative:
            kw["prompt_lookup_num_tokens"] = prompt_lookup_num_tokens
        ids = torch.tensor([list(prompt)], dtype=torch.long, device=device)
        with torch.no_grad(), (shim if shim is not None else contextlib.nullcontext()):
            out = model.generate(ids, **kw)
        toks = out.sequences[0, len(prompt):].tolist()
        lps = []
        for k, t in enumerate(toks):
            if k < len(out.scores):
                row = torch.log_softmax(out.scores[k][0].double(), dim=-1)
                lps.append(float(row[t]) if t < row.numel() else float("nan"))
        logprobs = tuple(lps) if len(lps) == len(toks) else None
        reason = reported_stop(toks, n_tokens, params)
        return toks, reason, logprobs

    def logits(prefix):
        return forward_last(prefix).numpy()[:V]

    if mode == "assistant":
        detail = f"{schedule}, k={num_assistant_tokens}" + (
            f", threshold={confidence_threshold}" if confidence_threshold is not None else "")
    else:
        detail = f"k={prompt_lookup_num_tokens}"
    label = f"transformers {'universal ' if assistant_tokenizer is not None else ''}{mode} ({detail})"
    return GenerationEngine(generate, V, logits if exact else None, token_text, name or label)
