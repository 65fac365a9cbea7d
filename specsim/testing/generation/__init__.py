"""Whole generations: speculation must not change the law of the generated text.

An engine generates up to N = ``max_new_tokens`` tokens from a prompt c under sampling
parameters theta, plainly or speculatively.  Plain generation draws token t from the *processed*
target law

    pi_theta(. | c, g) = warp(penalise(logits(c + g), c, g), theta),

g the tokens generated so far (penalties, no-repeat n-grams, the ``min_new_tokens`` EOS mask,
temperature, then top-k / top-p / min_p in ``theta.order``), and stops at EOS, at a stop string,
or after N tokens.  A speculative engine is correct exactly when the law of its whole output
(tokens and stop reason) equals that of plain generation, and when each logprob it reports is
log pi_theta(t | c, g) of the same token after the same prefix.  Bug reports against real engines
are mostly a wrong *target* (penalties applied at the bonus position only, top-k and top-p
swapped, generation continuing past an EOS accepted mid-block, ...): a check whose reference is
softmax(logits) cannot see them; this one compares the generated sequences.

Two modes (:func:`check_generation`):

* **exact**, when the adapter gives the raw logits of every prefix (toy LMs of
  :mod:`specsim.testing.language_models`, or any model small enough): :func:`process_logits` is
  the processing, written once as a pure function of (logits row, prompt, generated prefix,
  theta), and :func:`generation_law` enumerates the exact law of the output sequence.  Each side's
  empirical counts are tested against it with the calibrated chi-square of
  :mod:`specsim.chisquare` (the law of the whole output, and of its first k tokens for
  k = 1..N-1, so the report names the first position that moved);
* **two-sample**, otherwise: speculative and plain counts of the output prefixes of length
  k = 1..N are compared by a chi-square homogeneity test (rows: the two sides; cells: the prefixes
  seen, small cells pooled), whose p-value below the level is recomputed by a permutation
  (multivariate hypergeometric) Monte Carlo, exactly valid at every n.  Power: with n generations
  per side and laws C (speculative), P (plain) on the cells, the statistic is approximately
  non-central chi-square with non-centrality n sum (C - P)^2 / (C + P) >= 2 n TV(C, P)^2
  (Cauchy-Schwarz), so every pair at TV >= sqrt(lambda* / (2 n)) + pooled mass is detected with
  probability ``power`` (lambda* from :func:`specsim.chisquare.detection_threshold`); it needs
  n >= lambda* / (2 TV^2) generations per side, about twice the exact mode's.

Logprobs are compared exactly (to ``logprob_atol``): in exact mode with log pi_theta, in
two-sample mode with the plain path's logprob of the same token after the same prefix.  Output an
engine cannot have meant (fewer tokens than asked without a stop reason, ids outside the
vocabulary, logprobs that are not log-probabilities) raises :class:`SamplerError` naming the call.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Optional, Protocol, Sequence

import numpy as np
from scipy import stats

from ..._validate import check_int, check_real, check_seed
from ...chisquare import detection_threshold, goodness_of_fit
from ...models import iid, top_k as _top_k_model, top_p as _top_p_model
from ..language_models import _as_prefix
from ..sampler import SamplerError

__all__ = ["SamplingParams", "Generation", "GenerateFn", "GenerationEngine", "process_logits", "generation_law",
           "check_generation", "GenerationCheck", "ParameterVerdict", "default_params", "STOP_REASONS",
           "FLOAT32_LOGPROB_ATOL"]

#: Stop reasons an engine may report: N tokens generated, EOS emitted, a stop string completed.
STOP_REASONS = ("length", "eos", "stop")

#: ``logprob_atol`` for a real engine computing in float32 (``check_generation``'s default, 1e-5,
#: suits float64 toys).  One token's float32 logprob after one prefix moves with the batch / cache
#: layout of the forward (one position per forward vs a verified block, a padded batch): by up to
#: 2e-5 at the emitted token and 4.6e-5 over a row's top 8 on SmolLM2-135M
#: (``scripts/logprob_jitter.py``); temperature 0.7 and repetition penalty 1.5 scale that by up to
#: 2.1.  5e-4 leaves a 5x margin and stays 14x below the smallest real fault recorded (MLX-LM's
#: penalty context, 6.8e-3, docs/engines.md).
FLOAT32_LOGPROB_ATOL = 5e-4
_WARPERS = ("top_k", "top_p", "min_p")


@dataclass(frozen=True)
class SamplingParams:
    """Sampling parameters theta of one generation (the names of transformers / vLLM).

    ``temperature`` (> 0); ``top_k`` (0: off); ``top_p`` in (0, 1] (1: off); ``min_p`` in [0, 1)
    (0: off); ``order`` of the three truncations after temperature (transformers' order by
    default); ``repetition_penalty`` r > 0 (CTRL rule on every token of prompt + generated:
    x -> x / r if x > 0 else x r); ``presence_penalty`` a and ``frequency_penalty`` f (OpenAI
    rule on the generated tokens only: x_v -> x_v - a [n_v > 0] - f n_v); ``no_repeat_ngram_size``
    (0: off; bans a token that would repeat an n-gram of prompt + generated); ``eos_token_id``
    (None: none); ``stop_strings`` (generation stops once the decoded generated text contains
    one; the token that completes it is kept); ``min_new_tokens`` (EOS masked while fewer were
    generated); ``max_new_tokens`` N.

    >>> from specsim.testing.generation import SamplingParams
    >>> SamplingParams(top_k=2, max_new_tokens=3).describe()
    'top_k=2, max_new_tokens=3'
    """

    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    order: tuple = _WARPERS
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    no_repeat_ngram_size: int = 0
    eos_token_id: Optional[int] = None
    stop_strings: tuple = ()
    min_new_tokens: int = 0
    max_new_tokens: int = 4

    def __post_init__(self):
        check_real(self.temperature, "temperature", 0.0, np.inf, lo_open=True, hi_open=True)
        check_int(self.top_k, "top_k", 0)
        check_real(self.top_p, "top_p", 0.0, 1.0, lo_open=True)
        check_real(self.min_p, "min_p", 0.0, 1.0, hi_open=True)
        if sorted(self.order) != sorted(_WARPERS):
            raise ValueError(f"order must be a permutation of {_WARPERS}, got {self.order!r}")
        check_real(self.repetition_penalty, "repetition_penalty", 0.0, np.inf, lo_open=True, hi_open=True)
        check_real(self.presence_penalty, "presence_penalty")
        check_real(self.frequency_penalty, "frequency_penalty")
        check_int(self.no_repeat_ngram_size, "no_repeat_ngram_size", 0)
        if self.eos_token_id is not None:
            check_int(self.eos_token_id, "eos_token_id", 0)
        if isinstance(self.stop_strings, str) or not all(isinstance(s, str) and s for s in self.stop_strings):
            raise TypeError(f"stop_strings must be a tuple of non-empty strings, got {self.stop_strings!r}")
        check_int(self.min_new_tokens, "min_new_tokens", 0)
        check_int(self.max_new_tokens, "max_new_tokens", 1)

    def describe(self) -> str:
        """The parameters that differ from the defaults, ``name=value`` joined by commas."""
        base = SamplingParams()
        return ", ".join(f"{k}={getattr(self, k)!r}" if isinstance(getattr(self, k), (str, tuple)) else
                         f"{k}={getattr(self, k)}" for k in self.__dataclass_fields__
                         if getattr(self, k) != getattr(base, k)) or "defaults"


@dataclass(frozen=True)
class Generation:
    """One engine output: ``tokens`` (the generated ids, prompt excluded), ``stop_reason`` (one of
    :data:`STOP_REASONS`, or None: then exactly ``max_new_tokens`` tokens are required) and
    ``logprobs`` (one per token, or None when the engine reports none)."""

    tokens: tuple
    stop_reason: Optional[str] = None
    logprobs: Optional[tuple] = None


class GenerateFn(Protocol):
    """The adapter signature: ``generate(prompt, n_tokens, params, speculative, rng) -> Generation``.

    ``prompt`` a tuple of ids; ``n_tokens`` = ``params.max_new_tokens`` (the most tokens to
    generate); ``params`` a :class:`SamplingParams`; ``speculative`` True for the speculative
    path, False for the engine's own plain sampling; ``rng`` a ``numpy.random.Generator`` (an
    engine seeded otherwise derives its seed from it, e.g. ``int(rng.integers(2**31))``).
    Returns a :class:`Generation` or a tuple ``(tokens, stop_reason[, logprobs])``.
    """

    def __call__(self, prompt: tuple, n_tokens: int, params: SamplingParams, speculative: bool,
                 rng: np.random.Generator): ...


@dataclass(frozen=True)
class GenerationEngine:
    """An engine under test: ``generate`` (a :class:`GenerateFn`), ``V`` (vocabulary size),
    ``logits`` (optional ``logits(full_prefix) -> [V]`` raw float logits of the next token after
    prompt + generated: given, the check runs in exact mode), ``token_text`` (the decoded string of
    each token id, needed for stop strings in exact mode), ``name``."""

    generate: Callable
    V: int
    logits: Optional[Callable] = None
    token_text: Optional[Sequence[str]] = None
    name: str = "engine"

    def __post_init__(self):
        if not callable(self.generate):
            raise TypeError(f"generate must be callable, got {type(self.generate).__name__}")
        check_int(self.V, "V", 2)
        if self.logits is not None and not callable(self.logits):
            raise TypeError(f"logits must be callable or None, got {type(self.logits).__name__}")
        if self.token_text is not None and len(self.token_text) != self.V:
            raise ValueError(f"token_text must hold V = {self.V} strings, got {len(self.token_text)}")


# ----------------------------------------------------------------------------- the processing
def _penalised(x: np.ndarray, prompt: tuple, counted: Sequence[int], params: SamplingParams) -> np.ndarray:
    """Repetition (CTRL, over prompt + counted), presence and frequency (OpenAI, over counted)."""
    if params.repetition_penalty != 1.0:
        seen = np.array(sorted(set(prompt) | set(counted)), dtype=np.int64)
        if seen.size:
            v = x[seen]
            x[seen] = np.where(v > 0, v / params.repetition_penalty, v * params.repetition_penalty)
    if (params.presence_penalty or params.frequency_penalty) and counted:
        for t, n in Counter(counted).items():
            x[t] -= params.presence_penalty + params.frequency_penalty * n
    return x


def _banned_ngram(seq: tuple, n: int) -> set:
    """Tokens t such that seq + (t,) ends with an n-gram already in seq."""
    if n <= 0 or len(seq) < n - 1 or (n == 1 and not seq):
        return set(seq) if n == 1 else set()
    tail = seq[len(seq) - (n - 1):] if n > 1 else ()
    return {seq[i + n - 1] for i in range(len(seq) - n + 1) if seq[i:i + n - 1] == tail}


def _min_p(p: np.ndarray, min_p: float) -> np.ndarray:
    kept = np.where(p >= min_p * p.max(), p, 0.0)
    return kept / kept.sum()


def process_logits(logits, prompt: Sequence[int], generated: Sequence[int], params: SamplingParams, *,
                   counted: Optional[Sequence[int]] = None, order: Optional[tuple] = None) -> np.ndarray:
    """The processed next-token law pi_theta(. | prompt, generated) from one raw logits row.

    In this order: repetition penalty over prompt + ``counted``; presence and frequency penalties
    over ``counted`` (default ``counted`` = ``generated``); no-repeat n-gram ban over
    prompt + generated; EOS masked while len(generated) < ``min_new_tokens``; softmax(x / T);
    then top-k (the package's :func:`specsim.models.top_k`, ties toward lower ids), top-p
    (:func:`specsim.models.top_p`) and min_p (keep p_v >= min_p max p) in ``params.order``, each on
    the renormalised law left by the previous one.  ``counted`` and ``order`` exist so that a
    broken engine can be modelled (:mod:`specsim.testing.generation.toy`); a correct engine
    uses the defaults.

    Parameters: ``logits`` [V] (float; -inf allowed), ``prompt``, ``generated`` (token ids),
    ``params`` (:class:`SamplingParams`), ``counted``, ``order``.

    Returns: a float64 probability vector [V].  ``ValueError`` when nothing is left to sample.

    >>> import numpy as np
    >>> from specsim.testing.generation import SamplingParams, process_logits
    >>> x = np.log([0.1, 0.2, 0.3, 0.4])
    >>> process_logits(x, (), (), SamplingParams(top_k=2)).round(6).tolist()
    [0.0, 0.0, 0.428571, 0.571429]
    >>> process_logits(x, (), (3,), SamplingParams(presence_penalty=np.log(2))).round(6).tolist()
    [0.125, 0.25, 0.375, 0.25]
    """
    x = np.array(logits, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"logits must be one row [V], got shape {x.shape}")
    prompt, generated = tuple(prompt), tuple(generated)
    x = _penalised(x, prompt, generated if counted is None else tuple(counted), params)
    for t in _banned_ngram(prompt + generated, params.no_repeat_ngram_size):
        x[t] = -np.inf
    if params.eos_token_id is not None and len(generated) < params.min_new_tokens and params.eos_token_id < x.size:
        x[params.eos_token_id] = -np.inf
    x = x / params.temperature
    if not np.isfinite(x.max()):
        raise ValueError("no token is left to sample after the penalties and masks")
    p = np.exp(x - x.max())
    p /= p.sum()
    for w in params.order if order is None else order:
        if w == "top_k" and 0 < params.top_k < p.size:
            p = _top_k_model(iid(p), params.top_k)(())
        elif w == "top_p" and params.top_p < 1.0:
            p = _top_p_model(iid(p), params.top_p)(())
        elif w == "min_p" and params.min_p > 0:
            p = _min_p(p, params.min_p)
    return np.asarray(p, dtype=np.float64)


def streamed_stop(params: SamplingParams, n_tokens: int, decode):
    """A stop test for adapters that read an engine's output token by token: ``stop(t)`` is called
    with each token in turn and returns "eos" (t is theta's EOS), "stop" (the text decoded so far,
    ``decode(t)`` a token's text, completes a stop string) or "length" (n_tokens read), else None."""
    state = {"n": 0, "text": ""}

    def stop(t: int) -> Optional[str]:
        state["n"] += 1
        if params.eos_token_id is not None and t == params.eos_token_id:
            return "eos"
        if params.stop_strings:
            before = state["text"]
            state["text"] = before + decode(t)
            if any(s in state["text"] and s not in before for s in params.stop_strings):
                return "stop"
        return "length" if state["n"] >= n_tokens else None

    return stop


def reported_stop(tokens: Sequence[int], n_tokens: int, params: SamplingParams) -> Optional[str]:
    """The stop reason of an engine's finished output when the engine does not report one: "eos"
    when the last token is theta's EOS, "length" at ``n_tokens`` tokens, else "stop" if theta has
    stop strings (the engine ended early for one of them) and None otherwise (which
    :func:`check_generation` reports as output the engine cannot have meant)."""
    if tokens and params.eos_token_id is not None and tokens[-1] == params.eos_token_id:
        return "eos"
    if len(tokens) >= n_tokens:
        return "length"
    return "stop" if params.stop_strings else None


def without_settings(base: dict, *fields: str) -> dict:
    """``base`` (name -> :class:`SamplingParams`) without the settings that set any of ``fields``
    (attribute names): what an engine adapter drops when the engine has no sampler for them.

    >>> from specsim.testing.generation import SamplingParams, without_settings
    >>> sorted(without_settings({"a": SamplingParams(min_p=0.1), "b": SamplingParams()}, "min_p"))
    ['b']
    """
    return {k: v for k, v in base.items() if not any(getattr(v, f) for f in fields)}


def finished(generated: Sequence[int], params: SamplingParams, token_text: Optional[Sequence[str]] = None):
    """The stop reason of a generated prefix, or None when generation continues: "eos" when its
    last token is EOS, "stop" when its decoded text contains a stop string that the text without
    its last token does not, "length" at ``max_new_tokens`` tokens (checked in that order)."""
    g = tuple(generated)
    if g and params.eos_token_id is not None and g[-1] == params.eos_token_id:
        return "eos"
    if g and params.stop_strings:
        if token_text is None:
            raise ValueError("stop_strings need token_text (the decoded string of each token)")
        text, before = "".join(token_text[t] for t in g), "".join(token_text[t] for t in g[:-1])
        if any(s in text and s not in before for s in params.stop_strings):
            return "stop"
    if len(g) >= params.max_new_tokens:
        return "length"
    return None


#: Most output sequences :func:`generation_law` enumerates.
MAX_SEQUENCES = 200_000


def generation_law(logits: Callable, prompt: Sequence[int], params: SamplingParams,
                   token_text: Optional[Sequence[str]] = None) -> dict:
    """The exact law of plain generation: {output tokens: probability} over every output sequence
    g = (g_1..g_K) with P(g) = prod_k pi_theta(g_k | prompt, g_{<k}) (:func:`process_logits`),
    each ending at its stop (:func:`finished`).

    Parameters: ``logits`` (``full_prefix -> [V]`` raw logits), ``prompt``, ``params``,
    ``token_text`` (for stop strings).

    Returns: a dict from token tuples to float probabilities (they sum to 1 up to rounding).

    >>> import numpy as np
    >>> from specsim.testing.generation import SamplingParams, generation_law
    >>> law = generation_law(lambda s: np.log([0.5, 0.5]), (), SamplingParams(eos_token_id=1, max_new_tokens=2))
    >>> law
    {(0, 0): 0.25, (0, 1): 0.25, (1,): 0.5}
    """
    prompt = _as_prefix(prompt, "prompt")
    law: dict = {}
    stack = [((), 1.0)]
    while stack:
        g, prob = stack.pop()
        if finished(g, params, token_text) is not None:
            law[g] = law.get(g, 0.0) + prob
            if len(law) > MAX_SEQUENCES:
                raise ValueError(f"more than {MAX_SEQUENCES} output sequences: use fewer max_new_tokens or a smaller V")
            continue
        row = process_logits(logits(prompt + g), prompt, g, params)
        for t in np.flatnonzero(row > 0)[::-1]:
            stack.append((g + (int(t),), prob * float(row[t])))
    return dict(sorted(law.items()))


# ----------------------------------------------------------------------------- engine output
def _generation(out, call: str, V: int, n_tokens: int) -> Generation:
    """Validate one output; :class:`SamplerError` naming the call for anything an engine cannot mean."""
    if isinstance(out, tuple) and len(out) in (2, 3) and not isinstance(out[0], (int, np.integer)):
        out = Generation(*out)
    if not isinstance(out, Generation):
        raise SamplerError(f"{call} returned {out!r}; expected a Generation or (tokens, stop_reason[, logprobs])")
    toks = out.tokens.tolist() if hasattr(out.tokens, "tolist") else out.tokens
    if isinstance(toks, (str, bytes)) or not hasattr(toks, "__iter__"):
        raise SamplerError(f"{call} returned tokens {out.tokens!r}; expected a sequence of token ids")
    toks = list(toks)
    if any(isinstance(t, bool) or not isinstance(t, (int, np.integer)) for t in toks):
        raise SamplerError(f"{call} returned tokens {toks!r}; expected integer ids")
    bad = [t for t in toks if not 0 <= t < V]
    if bad:
        raise SamplerError(f"{call} returned token {bad[0]} outside the vocabulary 0..{V - 1} (tokens {toks})")
    reason = out.stop_reason
    if reason is not None and reason not in STOP_REASONS:
        raise SamplerError(f"{call} returned stop reason {reason!r}; expected one of {STOP_REASONS} or None")
    if len(toks) > n_tokens:
        raise SamplerError(f"{call} returned {len(toks)} tokens; at most n_tokens = {n_tokens} were asked for")
    if len(toks) < n_tokens and reason in (None, "length"):
        raise SamplerError(f"{call} returned {len(toks)} tokens of the {n_tokens} asked for without a stop "
                           f"reason (stop_reason={reason!r}): a truncated generation")
    if not toks:
        raise SamplerError(f"{call} returned no tokens (stop reason {reason!r})")
    lps = out.logprobs
    if lps is not None:
        lps = lps.tolist() if hasattr(lps, "tolist") else list(lps)
        if len(lps) != len(toks):
            raise SamplerError(f"{call} returned {len(lps)} logprobs for {len(toks)} tokens")
        for k, lp in enumerate(lps):
            if isinstance(lp, bool) or not isinstance(lp, (int, float, np.floating, np.integer)) \
                    or not np.isfinite(lp) or lp > 1e-6:
                raise SamplerError(f"{call} returned logprob {lp!r} for token {toks[k]} at position {k}: not the "
                                   f"log of a positive probability (finite, <= 0)")
        lps = tuple(float(v) for v in lps)
    return Generation(tuple(int(t) for t in toks), reason or "length", lps)


# ----------------------------------------------------------------------------- verdicts
@dataclass(frozen=True)
class ParameterVerdict:
    """The verdict for one parameter setting: ``parameter`` (its name), ``params``, ``verdict``
    ("PASS" / "FAIL" / "INCONCLUSIVE"), ``witness`` (what moved: the sub-test, the first position
    k whose prefix law moved, the strings most over- and under-represented, or a logprob
    mismatch), ``position`` (that k, or None), ``n`` generations per side, ``alpha`` (this row's
    false-alarm rate), ``mode`` ("exact" / "two-sample"), ``detectable_tv`` (of the output law,
    detected with ``power``), ``subtests``."""

    parameter: str
    params: SamplingParams
    verdict: str
    witness: str
    position: Optional[int]
    n: int
    alpha: float
    mode: str
    detectable_tv: float
    power: float
    subtests: tuple = field(repr=False, default=())

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"


@dataclass(frozen=True)
class GenerationCheck:
    """Verdict of :func:`check_generation`: one :class:`ParameterVerdict` per parameter setting
    (``rows``); ``passed`` when all pass; ``verdict`` FAIL if any row fails, else INCONCLUSIVE if
    any is, else PASS; ``alpha`` the call's false-alarm rate (the sum of the rows').  ``str()`` is
    the verdict table."""

    name: str
    rows: tuple
    alpha: float
    mode: str

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows)

    @property
    def verdict(self) -> str:
        vs = {r.verdict for r in self.rows}
        return "FAIL" if "FAIL" in vs else ("INCONCLUSIVE" if "INCONCLUSIVE" in vs else "PASS")

    def row(self, parameter: str) -> ParameterVerdict:
        for r in self.rows:
            if r.parameter == parameter:
                return r
        raise KeyError(parameter)

    def __str__(self) -> str:
        head = (f"{self.name}: {self.verdict} ({self.mode} mode; false-alarm rate {self.alpha:g} for the call, "
                f"Bonferroni over {len(self.rows)} parameter settings)")
        w = max([9] + [len(r.parameter) for r in self.rows])
        lines = [head, f"  {'parameter':<{w}}  {'verdict':<12} {'n':>6}  false-alarm  detects TV  witness"]
        for r in self.rows:
            lines.append(f"  {r.parameter:<{w}}  {r.verdict:<12} {r.n:>6}  {r.alpha:<11.3g}  {r.detectable_tv:<10.3g}"
                         f"  {r.witness}")
        return "\n".join(lines)


def default_params(max_new_tokens: int = 4, eos_token_id: int = 3, stop_string: str = "ba") -> dict:
    """The parameter battery of :func:`check_generation`: one setting per parameter, each far
    enough from the defaults to change the law on a V = 4 toy (names are the table's rows)."""
    P = lambda **kw: SamplingParams(max_new_tokens=max_new_tokens, **kw)  # noqa: E731
    return {
        "temperature": P(temperature=0.6),
        "top_k->top_p": P(top_k=3, top_p=0.75),
        "min_p": P(min_p=0.2),
        "repetition_penalty": P(repetition_penalty=2.0),
        "presence_penalty": P(presence_penalty=1.5),
        "frequency_penalty": P(frequency_penalty=1.0),
        "no_repeat_ngram": P(no_repeat_ngram_size=2),
        "eos": P(eos_token_id=eos_token_id),
        "stop_strings": P(stop_strings=(stop_string,)),
        "min_new_tokens": P(eos_token_id=eos_token_id, min_new_tokens=2),
        "max_new_tokens": SamplingParams(max_new_tokens=max(1, max_new_tokens - 2)),
    }


def _strings(counts: Counter, law: Mapping, n: int, k: int = 2):
    """The k most over- and under-represented output strings by standardised residual."""
    keys = set(counts) | {s for s, p in law.items() if p > 0}
    res = []
    for s in keys:
        e = n * law.get(s, 0.0)
        o = counts.get(s, 0)
        res.append(((o - e) / np.sqrt(e) if e > 0 else (np.inf if o else 0.0), s, o, e))
    res.sort(key=lambda r: -r[0])
    fmt = lambda r: f"{r[1]} {r[2]} vs {r[3]:.1f}"  # noqa: E731
    over = [fmt(r) for r in res[:k] if r[0] > 2]
    under = [fmt(r) for r in res[::-1][:k] if r[0] < -2]
    return over, under


def _prefix_counts(outputs, k: int) -> Counter:
    """Counts of the first k tokens of each output (shorter outputs whole, with an end mark)."""
    return Counter(o.tokens[:k] + (("end",) if len(o.tokens) < k else ()) for o in outputs)


def _prefix_law(law: Mapping, k: int) -> dict:
    out: dict = {}
    for s, p in law.items():
        key = s[:k] + (("end",) if len(s) < k else ())
        out[key] = out.get(key, 0.0) + p
    return out


def _exact_tests(outputs, law: dict, N: int, level: float, power: float, rng, side: str) -> list:
    """Goodness of fit of the whole output law, then of the first k tokens, k = 1..N-1."""
    tests = []
    for k in [N] + list(range(1, N)):
        # outputs have at most N tokens: at k = N the cells are the outputs themselves
        lk = law if k == N else _prefix_law(law, k)
        cnt = Counter(o.tokens for o in outputs) if k == N else _prefix_counts(outputs, k)
        keys = list(lk) + [s for s in cnt if s not in lk]
        counts = np.array([cnt.get(s, 0) for s in keys], dtype=np.float64)
        probs = np.array([lk.get(s, 0.0) for s in keys], dtype=np.float64)
        label = "whole output" if k == N else f"first {k} tokens"
        tests.append((k, goodness_of_fit(counts, probs, level, power, name=f"{side}: {label}", rng=rng)))
    return tests


def homogeneity(a: Counter, b: Counter, level: float, power: float, rng, name: str = "homogeneity"):
    """Chi-square test that two samples of cell labels come from one law (2 x cells table, cells
    expecting < 5 in either row pooled; p-value below ``level`` recomputed by a permutation Monte
    Carlo over the multivariate hypergeometric law of the table given its margins).

    Returns ``(statistic, df, p_value, detectable_tv, pooled_mass, rejected)``.

    >>> import numpy as np
    >>> from collections import Counter
    >>> from specsim.testing.generation import homogeneity
    >>> homogeneity(Counter({0: 50, 1: 50}), Counter({0: 52, 1: 48}), 1e-3, 0.99, np.random.default_rng(0))[5]
    False
    """
    keys = sorted(set(a) | set(b), key=repr)
    A = np.array([a.get(s, 0) for s in keys], dtype=np.float64)
    B = np.array([b.get(s, 0) for s in keys], dtype=np.float64)
    na, nb = A.sum(), B.sum()
    tot = A + B
    share = tot / (na + nb)
    small = share * min(na, nb) < 5  # cells expecting < 5 in the smaller row: pooled into one
    pooled = float(share[small].sum()) if small.sum() > 1 else 0.0
    if small.sum() > 1:
        A = np.concatenate(([A[small].sum()], A[~small]))
        B = np.concatenate(([B[small].sum()], B[~small]))
    tot = A + B
    df = tot.size - 1
    n = int(min(na, nb))
    if df < 1:
        return 0.0, 0, 1.0, 1.0, pooled, False

    def stat(X, Y):
        E_x, E_y = tot * na / (na + nb), tot * nb / (na + nb)
        return (((X - E_x) ** 2 / E_x) + ((Y - E_y) ** 2 / E_y)).sum(axis=-1)

    x2 = float(stat(A, B))
    p = float(stats.chi2.sf(x2, df))
    if p < level:  # the tail is unreliable here: permutation p-value, exact for any n
        total = int(min(2_000_000, np.ceil(10 / level)))
        sims = rng.multivariate_hypergeometric(tot.astype(np.int64), int(na), size=total)
        hits = int((stat(sims, tot - sims) >= x2 * (1 - 1e-12) - 1e-9).sum())
        p = (1 + hits) / (total + 1)
    tv = min(1.0, float(np.sqrt(detection_threshold(df, level, power) / (2 * n))) + pooled)
    return x2, df, p, tv, pooled, p < level


def check_generation(engine: GenerationEngine, prompt: Sequence[int] = (1,),
                     params: SamplingParams | Mapping[str, SamplingParams] | None = None, *, n: int = 1000,
                     alpha: float = 1e-3, power: float = 0.99, seed: int = 0, mode: str = "auto",
                     logprob_atol: float = 1e-5, name: Optional[str] = None) -> GenerationCheck:
    """Does speculation change the law of the generated sequence?  One verdict per parameter setting.

    For each setting theta (``params``: one :class:`SamplingParams`, a mapping name -> params, or
    None for :func:`default_params`), n speculative and n plain generations are run
    (``engine.generate(prompt, theta.max_new_tokens, theta, speculative, rng)``).

    * exact mode (``engine.logits`` given; ``mode="auto"`` or ``"exact"``): both sides' counts of
      the whole output, and of its first k tokens for k = 1..N-1, are tested against the exact law
      of :func:`generation_law` (calibrated chi-square, :func:`specsim.chisquare.goodness_of_fit`),
      each at level alpha / (settings x 2 N); a FAIL names the side, the first position k that
      moved and the strings most over- and under-represented.  A plain side that fails means the
      reference processing does not model this engine's plain path (the row says so).
    * two-sample mode (no logits, or ``mode="two-sample"``): speculative against plain counts of
      the first k tokens, k = 1..N (:func:`homogeneity`), each at level alpha / (settings x N).

    Logprobs reported by the engine are compared with log pi_theta (exact mode) or with the plain
    path's logprob of the same token after the same prefix (two-sample mode, where the prefix was
    seen on the plain side): any difference above ``logprob_atol`` fails the row (deterministic, no
    false alarm).  With too little data (the whole-output test detects nothing at this n) a row is
    INCONCLUSIVE.

    Parameters: ``engine`` (:class:`GenerationEngine`), ``prompt``, ``params``, ``n`` (per side,
    per setting), ``alpha`` (false-alarm rate of the call), ``power``, ``seed``, ``mode``
    ("auto", "exact", "two-sample"), ``logprob_atol``, ``name``.

    Returns: a :class:`GenerationCheck`.  Malformed engine output raises :class:`SamplerError`
    naming the call.

    >>> from specsim.testing.generation import check_generation, SamplingParams
    >>> from specsim.testing.generation.toy import toy_engine
    >>> res = check_generation(toy_engine(), params={"min_p": SamplingParams(min_p=0.2, max_new_tokens=2)}, n=400)
    >>> res.verdict, res.rows[0].mode
    ('PASS', 'exact')
    """
    if not isinstance(engine, GenerationEngine):
        raise TypeError(f"engine must be a GenerationEngine, got {type(engine).__name__}")
    prompt = _as_prefix(prompt, "prompt")
    if params is None:
        params = default_params()
    if isinstance(params, SamplingParams):
        params = {params.describe(): params}
    if not isinstance(params, Mapping) or not params or \
            not all(isinstance(v, SamplingParams) for v in params.values()):
        raise TypeError("params must be a SamplingParams, a non-empty mapping name -> SamplingParams, or None")
    check_int(n, "n", 1)
    check_real(alpha, "alpha", 0.0, 1.0, lo_open=True, hi_open=True)
    check_real(power, "power", 0.0, 1.0, lo_open=True, hi_open=True)
    check_seed(seed)
    check_real(logprob_atol, "logprob_atol", 0.0, np.inf, hi_open=True)
    if mode not in ("auto", "exact", "two-sample"):
        raise ValueError(f"mode must be 'auto', 'exact' or 'two-sample', got {mode!r}")
    if mode == "exact" and engine.logits is None:
        raise ValueError("mode='exact' needs engine.logits (the raw logits of every prefix)")
    exact = engine.logits is not None and mode != "two-sample"
    name = name or engine.name
    row_alpha = alpha / len(params)
    rows = []
    for i, (pname, theta) in enumerate(params.items()):
        rng = np.random.default_rng([seed, i])
        N = theta.max_new_tokens
        outs = {}
        for spec in (True, False):
            side = "speculative" if spec else "plain"
            outs[spec] = [_generation(engine.generate(prompt, N, theta, spec, rng), f"{name}: {pname}, {side} "
                                      f"call {j} (prompt {prompt})", engine.V, N) for j in range(n)]
        rows.append(_exact_row if exact else _two_sample_row)
        rows[-1] = rows[-1](engine, prompt, pname, theta, outs, n, row_alpha, power, rng, logprob_atol)
    return GenerationCheck(name, tuple(rows), alpha, "exact" if exact else "two-sample")


def _logprob_witness(outputs, expected: Callable, atol: float, side: str) -> Optional[str]:
    """The first reported logprob that differs from ``expected(prefix, token)`` (None if none)."""
    for o in outputs:
        if o.logprobs is None:
            continue
        for k, (t, lp) in enumerate(zip(o.tokens, o.logprobs)):
            want = expected(o.tokens[:k], t)
            if want is not None and not abs(lp - want) <= atol:
                return (f"logprob: {side} reported {lp:.6g} for token {t} at position {k + 1} after {o.tokens[:k]}, "
                        f"the plain law gives {want:.6g}")
    return None


def _exact_row(engine, prompt, pname, theta, outs, n, alpha, power, rng, atol) -> ParameterVerdict:
    law = generation_law(engine.logits, prompt, theta, engine.token_text)
    N = theta.max_new_tokens
    level = alpha / (2 * N)
    cache: dict = {}

    def expected(g, t):
        if g not in cache:
            with np.errstate(divide="ignore"):
                cache[g] = np.log(process_logits(engine.logits(prompt + g), prompt, g, theta))
        return float(cache[g][t])

    subtests, witness, position, verdict = [], "", None, "PASS"
    for spec in (True, False):
        side = "speculative" if spec else "plain"
        tests = _exact_tests(outs[spec], law, N, level, power, rng, side)
        subtests += [t for _, t in tests]
        lp = _logprob_witness(outs[spec], expected, atol, side)
        bad = sorted(k for k, t in tests if t.rejected)
        if verdict == "PASS" and (bad or lp):
            verdict = "FAIL"
            if bad:
                position = bad[0]
                over, under = _strings(Counter(o.tokens for o in outs[spec]), law, n)
                t = dict(tests)[position]
                witness = (f"{side} {'output' if position == N else f'first {position} tokens'} moved "
                           f"(p = {t.decision_p:.2g}{', impossible output' if t.impossible else ''}); "
                           f"over: {'; '.join(over) or '-'}; under: {'; '.join(under) or '-'}")
                if not spec:
                    witness += " [the plain path disagrees with the reference processing]"
            else:
                witness = lp
    whole = subtests[0]
    if verdict == "PASS" and whole.inconclusive:
        verdict, witness = "INCONCLUSIVE", f"n = {n} detects no departure with power {power:g}; increase n"
    return ParameterVerdict(pname, theta, verdict, witness or "-", position, n, alpha, "exact",
                            whole.detectable_tv, power, tuple(subtests))


def _two_sample_row(engine, prompt, pname, theta, outs, n, alpha, power, rng, atol) -> ParameterVerdict:
    N = theta.max_new_tokens
    level = alpha / N
    plain_lp: dict = {}
    for o in outs[False]:
        if o.logprobs is not None:
            for k, (t, lp) in enumerate(zip(o.tokens, o.logprobs)):
                plain_lp.setdefault((o.tokens[:k], t), lp)
    subtests, witness, position, verdict, tv_whole = [], "", None, "PASS", 1.0
    for k in range(1, N + 1):
        a, b = _prefix_counts(outs[True], k), _prefix_counts(outs[False], k)
        x2, df, p, tv, pooled, rej = homogeneity(a, b, level, power, rng, f"first {k} tokens")
        subtests.append((k, x2, df, p))
        if k == N:
            tv_whole = tv
        if rej and verdict == "PASS":
            verdict, position = "FAIL", k
            diff = sorted(set(a) | set(b), key=lambda s: -abs(a.get(s, 0) - b.get(s, 0)))[:2]
            witness = (f"first {k} tokens moved (p = {p:.2g}); " +
                       "; ".join(f"{s}: speculative {a.get(s, 0)} vs plain {b.get(s, 0)}" for s in diff))
    lp = _logprob_witness(outs[True], lambda g, t: plain_lp.get((g, t)), atol, "speculative")
    if verdict == "PASS" and lp:
        verdict, witness = "FAIL", lp
    if verdict == "PASS" and tv_whole >= 1.0:
        verdict, witness = "INCONCLUSIVE", f"n = {n} detects no departure with power {power:g}; increase n"
    return ParameterVerdict(pname, theta, verdict, witness or "-", position, n, alpha, "two-sample", tv_whole,
                            power, tuple(subtests))


def with_max_new_tokens(params: Mapping[str, SamplingParams], N: int) -> dict:
    """The same battery with every setting's ``max_new_tokens`` set to N."""
    return {k: replace(v, max_new_tokens=N) for k, v in params.items()}
