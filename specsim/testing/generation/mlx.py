"""MLX-LM as a :class:`~specsim.testing.generation.GenerationEngine` (runs on the CPU with ``mlx[cpu]``).

Checked against MLX-LM 0.32.2 (mlx 0.32.4, CPU backend).  The plain path is
``mlx_lm.generate.generate_step(prompt, model, max_tokens=, sampler=, logits_processors=)``; the
speculative one ``speculative_generate_step(prompt, model, draft_model, num_draft_tokens=,
max_tokens=, sampler=, logits_processors=)`` with the same sampler and processors.  MLX-LM verifies
by sampling every drafted position from the target with that sampler and keeping draft tokens
while they equal the samples (sample-and-match: the emitted tokens are target samples whatever the
draft proposes); the draft model drafts with the same sampler and processors.

``generate(prompt, n, theta, speculative, rng)`` seeds MLX (``mx.random.seed``) from ``rng``, builds
the sampler with ``mlx_lm.sample_utils.make_sampler(temp, top_p, min_p, top_k)`` and the processors
with ``make_logits_processors(repetition_penalty, presence_penalty, frequency_penalty)`` (each
penalty's context window set to ``len(prompt) + n``, so it spans the whole sequence instead of
MLX-LM's default last 20 tokens), reads the generator token by token and stops it at theta's EOS,
at a stop string (each token decoded with ``decode``) or after ``max_new_tokens``; MLX-LM's step
functions stop at none of them, so both paths stop the same way.

What is compared, and what is not:

* MLX-LM's sampler applies top-p, then min-p, then top-k to the log-probabilities *before* the
  temperature, which divides the kept logits at the draw.  That is theta's law (temperature, then
  the truncations in ``theta.order``) when top-p and min-p are off or the temperature is 1, and
  when top-p comes before every other active truncation in ``theta.order`` (min-p and top-k
  commute).  Other settings have no MLX-LM equivalent and raise ``NotImplementedError`` naming
  ``temperature`` or ``order``; a top-k of V or more is passed as 0 (off: MLX-LM raises on it).
* The repetition penalty is the CTRL rule over prompt + generated, as theta's.  MLX-LM's presence
  and frequency penalties count the *prompt's* tokens too (theta's OpenAI rule counts the
  generated ones only): in two-sample mode they are passed as they are (both paths use the same
  rule, which is what that mode compares); in exact mode (``logits`` given) they raise
  ``NotImplementedError``, since the reference would not be MLX-LM's law.
* MLX-LM has no no-repeat n-gram ban and no ``min_new_tokens``: ``NotImplementedError``
  (:func:`mlx_params` drops those settings).
* Logprobs: MLX-LM yields log_softmax of the *processed* logits before truncation and temperature
  (not log pi_theta, the law it samples).  The definition is the same on both paths, so in
  two-sample mode they are reported and compared (speculative against plain, same token after the
  same prefix, to ``logprob_atol``); in exact mode, where they would be compared with
  log pi_theta, they are not reported.

``mlx_lm`` is imported when an engine is built unless ``steps=(generate_step,
speculative_generate_step, make_sampler, make_logits_processors, seed)`` is given (the CI test
passes fakes with MLX-LM's signatures and numpy arrays).
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from ..._validate import check_int
from . import GenerationEngine, SamplingParams, streamed_stop, without_settings

__all__ = ["mlx_engine", "mlx_params"]


def mlx_params(base: dict) -> dict:
    """``base`` without the settings MLX-LM has no sampler for (no-repeat n-grams, ``min_new_tokens``).

    >>> from specsim.testing.generation import SamplingParams
    >>> from specsim.testing.generation.mlx import mlx_params
    >>> sorted(mlx_params({"a": SamplingParams(min_new_tokens=1), "b": SamplingParams()}))
    ['b']
    """
    return without_settings(base, "no_repeat_ngram_size", "min_new_tokens")


def _unsupported(params: SamplingParams, exact: bool, V: int) -> Optional[str]:
    """Why MLX-LM cannot sample theta's law (None when it can)."""
    if params.no_repeat_ngram_size:
        return "no_repeat_ngram_size: MLX-LM has no no-repeat n-gram ban"
    if params.min_new_tokens:
        return "min_new_tokens: MLX-LM has no min_new_tokens"
    if params.temperature != 1.0 and (params.top_p < 1.0 or params.min_p > 0.0):
        return ("temperature: MLX-LM applies top_p and min_p before the temperature; with either on, "
                "only temperature 1 is theta's law")
    if params.top_p < 1.0:
        active = {"top_k": 0 < params.top_k < V, "top_p": True, "min_p": params.min_p > 0.0}
        on = [w for w in params.order if active[w]]
        if on[0] != "top_p":
            return f"order: MLX-LM applies top_p before top_k and min_p, theta applies {' -> '.join(on)}"
    if exact and (params.presence_penalty or params.frequency_penalty):
        which = "presence_penalty" if params.presence_penalty else "frequency_penalty"
        return (f"{which}: MLX-LM counts the prompt's tokens too, the exact reference the generated ones only "
                "(use two-sample mode)")
    return None


def _logprob(row, t: int) -> float:
    v = row[t]
    return float(v.item() if hasattr(v, "item") else v)


def mlx_engine(model, draft_model, *, V: int, num_draft_tokens: int = 3, decode: Optional[Callable] = None,
               logits: Optional[Callable] = None, token_text: Optional[Sequence[str]] = None,
               steps: Optional[tuple] = None, name: Optional[str] = None) -> GenerationEngine:
    """A GenerationEngine over MLX-LM's ``generate_step`` (plain) and ``speculative_generate_step``.

    Parameters: ``model``, ``draft_model`` (MLX-LM models on one vocabulary, e.g. from
    ``mlx_lm.load``); ``V`` (vocabulary size); ``num_draft_tokens`` (>= 1); ``decode`` (token id
    list -> text, e.g. the tokenizer's ``decode``; needed for stop strings unless ``token_text``
    is given); ``logits`` (optional ``logits(full_prefix) -> [V]`` raw logits of the target: given,
    the check runs in exact mode, see the module docstring); ``token_text`` (the decoded string of
    each id, for stop strings); ``steps`` (see the module docstring); ``name``.

    Returns: a :class:`~specsim.testing.generation.GenerationEngine` (two-sample mode, or exact
    mode with ``logits``).  ``TypeError`` / ``ValueError`` name the argument that is wrong.
    """
    V = check_int(V, "V", 2)
    num_draft_tokens = check_int(num_draft_tokens, "num_draft_tokens", 1)
    if model is None or draft_model is None:
        raise TypeError("model and draft_model must be MLX-LM models (got None)")
    if decode is not None and not callable(decode):
        raise TypeError(f"decode must be callable (token ids -> text) or None, got {type(decode).__name__}")
    if logits is not None and not callable(logits):
        raise TypeError(f"logits must be callable or None, got {type(logits).__name__}")
    if token_text is not None:
        if isinstance(token_text, str) or len(token_text) != V:
            raise ValueError(f"token_text must hold V = {V} strings")
    if steps is None:
        import mlx.core as mx
        from mlx_lm.generate import generate_step, speculative_generate_step
        from mlx_lm.sample_utils import make_logits_processors, make_sampler

        steps = (generate_step, speculative_generate_step, make_sampler, make_logits_processors, mx.random.seed)

        def as_prompt(ids):
            return mx.array(ids, dtype=mx.uint32)
    else:
        def as_prompt(ids):
            return np.asarray(ids, dtype=np.uint32)
    if not isinstance(steps, (tuple, list)) or len(steps) != 5 or not all(callable(s) for s in steps):
        raise TypeError("steps must be 5 callables (generate_step, speculative_generate_step, make_sampler, "
                        "make_logits_processors, seed)")
    plain_step, spec_step, make_sampler, make_processors, seed = steps
    exact = logits is not None
    text_cache: dict = {}

    def text(t):
        if t not in text_cache:
            text_cache[t] = token_text[t] if token_text is not None else decode([t])
        return text_cache[t]

    def generate(prompt, n_tokens, params: SamplingParams, speculative: bool, rng):
        why = _unsupported(params, exact, V)
        if why:
            raise NotImplementedError(why)
        if params.stop_strings and decode is None and token_text is None:
            raise ValueError("stop_strings need decode or token_text (the text of each token)")
        seed(int(rng.integers(2 ** 31)))
        sampler = make_sampler(temp=params.temperature, top_p=params.top_p, min_p=params.min_p,
                               top_k=params.top_k if params.top_k < V else 0)
        ctx = len(prompt) + n_tokens
        procs = make_processors(
            repetition_penalty=params.repetition_penalty if params.repetition_penalty != 1.0 else None,
            repetition_context_size=ctx, presence_penalty=params.presence_penalty or None,
            presence_context_size=ctx, frequency_penalty=params.frequency_penalty or None,
            frequency_context_size=ctx)
        p = as_prompt(list(prompt))
        if speculative:
            gen = spec_step(p, model, draft_model, num_draft_tokens=num_draft_tokens, max_tokens=n_tokens,
                            sampler=sampler, logits_processors=procs)
        else:
            gen = plain_step(p, model, max_tokens=n_tokens, sampler=sampler, logits_processors=procs)
        toks, lps, reason, stop = [], [], None, streamed_stop(params, n_tokens, text)
        try:
            for item in gen:
                t = int(item[0])
                toks.append(t)
                if not exact:
                    lps.append(_logprob(item[1], t) if 0 <= t < V else 0.0)
                reason = stop(t)
                if reason is not None:
                    break
        finally:
            gen.close()
        return toks, reason, (None if exact else tuple(lps))

    label = name or f"mlx-lm speculative_generate_step (num_draft_tokens={num_draft_tokens})"
    return GenerationEngine(generate, V, logits, token_text, label)
