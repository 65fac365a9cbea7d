"""A reference speculative generator over toy LMs, and known-broken ones (mutants).

:func:`toy_engine` builds a :class:`~specsim.testing.generation.GenerationEngine` whose plain
path samples the processed target law pi_theta (:func:`~specsim.testing.generation.process_logits`)
token by token, and whose speculative path runs multi-step speculative decoding: each step drafts
up to L tokens from the draft LM's processed law, reads the processed target rows
pi_theta(. | c, g + x^{1:k}), k = 0..L (penalty counts include every drafted token before the
row, so each accepted token is counted once), verifies with a chain verifier of the package
(``block`` by default; any of :mod:`specsim.verifiers`), emits x^{1:tau} y and truncates that
block at the first EOS, stop string or ``max_new_tokens``.  Reported logprobs are
log pi_theta of each emitted token after its prefix.  The default draft is 85 % the target, so
blocks of several tokens are accepted (the mean accepted length is in ``engine.stats``).

Mutants (:data:`MUTANTS`), each a real-engine bug class: ``penalty_bonus_only`` (penalties on the
bonus row only), ``top_k_top_p_swapped`` (top-p before top-k in the speculative target rows),
``eos_mid_block_ignored`` (an EOS accepted before the end of a block does not stop the
generation), ``penalty_once_per_step`` (one token per step enters the penalty counts),
``logprob_zero`` (logprob 0 reported for accepted draft tokens), ``min_new_tokens_too_long`` (EOS
masked by the length at the start of the step, so too long inside a block).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np

from ..._sampling import draw_token
from ..._validate import check_int
from ...models import Model, mix, random_model
from ...verifiers.base import as_verifier
from . import Generation, GenerationEngine, finished, process_logits

__all__ = ["toy_engine", "MUTANTS", "MUTANT_SETTINGS", "TOKEN_TEXT", "LOGIT_SHIFT", "default_models"]

#: Decoded text of the default toy's 4 tokens (token 2 spans two characters, so the stop string
#: "ba" can be completed across a token boundary or inside one).
TOKEN_TEXT = ("a", "b", "ab", "<eos>")

#: Added to log p to make the toy's raw logits: softmax is unchanged, and the repetition penalty
#: meets logits of both signs (x / r above 0, x r below).
LOGIT_SHIFT = 1.0

MUTANTS = ("penalty_bonus_only", "top_k_top_p_swapped", "eos_mid_block_ignored", "penalty_once_per_step",
           "logprob_zero", "min_new_tokens_too_long")

#: The setting of :func:`~specsim.testing.generation.default_params` on which each mutant's bug shows.
MUTANT_SETTINGS = {"penalty_bonus_only": "presence_penalty", "top_k_top_p_swapped": "top_k->top_p",
                   "eos_mid_block_ignored": "eos", "penalty_once_per_step": "frequency_penalty",
                   "logprob_zero": "temperature", "min_new_tokens_too_long": "min_new_tokens"}


def default_models(V: int = 4, seed: int = 3, agreement: float = 0.85) -> tuple[Model, Model]:
    """The default (target, draft): a prefix-dependent random target (whole-prefix rows) and the draft
    ``mix(other, target, agreement)``, close enough that multi-token blocks are accepted."""
    target = random_model(V, seed, concentration=1.0)
    return target, mix(random_model(V, seed + 1000, concentration=1.0), target, agreement)


def _logits_of(model: Model):
    def logits(prefix):
        with np.errstate(divide="ignore"):
            return np.log(model(tuple(prefix))) + LOGIT_SHIFT
    return logits


def toy_engine(target: Optional[Model] = None, draft_model: Optional[Model] = None, *, verifier="block", L: int = 3,
               mutant: Optional[str] = None, token_text=TOKEN_TEXT) -> GenerationEngine:
    """The reference generator (``mutant=None``) or one of :data:`MUTANTS` as a GenerationEngine.

    Parameters: ``target``, ``draft_model`` (Models over one V; both None: :func:`default_models`),
    ``verifier`` (a chain verifier, or its name in :mod:`specsim.verifiers`), ``L`` (>= 1, draft
    tokens per step), ``mutant``, ``token_text`` (V strings, or None).

    Returns: a :class:`~specsim.testing.generation.GenerationEngine` with ``logits`` (exact mode);
    its ``generate.stats`` dict counts ``steps`` and ``accepted`` draft tokens.

    >>> import numpy as np
    >>> from specsim.testing.generation import SamplingParams
    >>> from specsim.testing.generation.toy import toy_engine
    >>> eng = toy_engine()
    >>> out = eng.generate((1,), 4, SamplingParams(eos_token_id=3), True, np.random.default_rng(0))
    >>> len(out.tokens) <= 4 and out.stop_reason in ("length", "eos")
    True
    """
    if target is None and draft_model is None:
        target, draft_model = default_models()
    if not isinstance(target, Model) or not isinstance(draft_model, Model):
        raise TypeError("target and draft_model must be specsim.models.Model objects (or both None)")
    if target.V != draft_model.V:
        raise ValueError(f"target and draft_model must share V, got {target.V} and {draft_model.V}")
    if isinstance(verifier, str):
        import specsim.verifiers as _v
        if not hasattr(_v, verifier):
            raise ValueError(f"verifier {verifier!r} is not in specsim.verifiers")
        verifier = getattr(_v, verifier)
    verifier = as_verifier(verifier)
    L = check_int(L, "L", 1)
    if mutant is not None and mutant not in MUTANTS:
        raise ValueError(f"mutant must be None or one of {MUTANTS}, got {mutant!r}")
    if token_text is not None and len(token_text) != target.V:
        token_text = None  # the default text is for V = 4 only
    tlog, dlog = _logits_of(target), _logits_of(draft_model)
    stats = {"steps": 0, "accepted": 0}

    def target_row(prompt, g, k, Lk, theta, counted):
        """pi_theta(. | prompt, g + draft[:k]) as the engine (or the mutant) computes it; ``g`` here
        already includes draft[:k]."""
        if mutant == "penalty_bonus_only" and k < Lk:
            theta = replace(theta, repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0)
        if mutant == "min_new_tokens_too_long":  # mask by the length at the start of the step
            theta = replace(theta, min_new_tokens=theta.min_new_tokens + k)
        order = ("top_p", "top_k", "min_p") if mutant == "top_k_top_p_swapped" else None
        return process_logits(tlog(prompt + g), prompt, g, theta, counted=counted, order=order)

    def generate(prompt, n_tokens, params, speculative, rng):
        prompt = tuple(prompt)
        theta = params if n_tokens == params.max_new_tokens else replace(params, max_new_tokens=n_tokens)
        g, lps, counted, reason = (), [], (), None
        if not speculative:
            while reason is None:
                row = process_logits(tlog(prompt + g), prompt, g, theta)
                t = draw_token(row, rng)
                g, reason = g + (t,), None
                lps.append(float(np.log(row[t])))
                reason = finished(g, theta, token_text)
            return Generation(g, reason, tuple(lps))
        while reason is None:
            Lk = min(L, n_tokens - len(g))
            draft, q = (), []
            for _ in range(Lk):
                row = process_logits(dlog(prompt + g + draft), prompt, g + draft, theta)
                q.append(row)
                draft += (draw_token(row, rng),)
            base = counted if mutant == "penalty_once_per_step" else g
            p = np.stack([target_row(prompt, g + draft[:k], k, Lk, theta, base + draft[:k]) for k in range(Lk + 1)])
            tau, y = verifier.sample(draft, p, np.stack(q), rng=rng)
            stats["steps"] += 1
            stats["accepted"] += tau
            block = draft[:tau] + (int(y),)
            for k, t in enumerate(block):
                g += (t,)
                lps.append(0.0 if mutant == "logprob_zero" and k < tau else float(np.log(p[k][t])))
                reason = finished(g, theta, token_text)
                if reason == "eos" and mutant == "eos_mid_block_ignored" and k < len(block) - 1 and len(g) < n_tokens:
                    reason = None
                if reason is not None:
                    break
            counted += (block[-1],)  # only the mutant penalty_once_per_step reads this
        return Generation(g, reason, tuple(lps))

    generate.stats = stats
    name = f"toy speculative ({verifier.name}, L={L})" + (f" mutant {mutant}" if mutant else "")
    return GenerationEngine(generate, target.V, tlog, token_text, name)
