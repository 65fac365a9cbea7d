"""Engine properties that are not law properties: degenerate inputs, batches, seeds, mutation.

An engine can have the right output law on well-formed single requests and still be wrong in
ways no goodness-of-fit test sees: a placeholder id gathered and accepted, a NaN draft row
accepted with certainty, a rejection whose residual (p - q)_+ is all zeros emitting token 0, the
caller's tensor modified in place, a request's output depending on its neighbours in the batch,
consecutive calls reusing random numbers.  :func:`check_engine_properties` runs a batched
verification function on adversarial batches built for each of these and reports each property
with a witness.

Layout (``layout="dense"``): ``verify(drafts, p, q, seeds) -> (accepted, tokens)`` with
``drafts`` int64 [B, L] (-1 = placeholder, only after a request's k_b real drafts), ``p``
float64 [B, L+1, V] (request b's bonus row is ``p[b, k_b]``), ``q`` float64 [B, L, V], ``seeds``
int64 [B] (request b's randomness must be a function of ``seeds[b]`` alone), returning
``accepted`` [B] (tau_b in 0..k_b) and ``tokens`` [B] (the one emitted token).  Rows past a
request's own (``q[b, k_b:]``, ``p[b, k_b + 1:]``) are padding the engine must not read.
A ``verify`` that can take injected uniforms has a keyword ``uniforms`` (float64 [B, L] in
[0, 1): the acceptance test of x_{i+1} uses ``uniforms[b, i]``, accepting iff
u q(x) < p(x); everything else still comes from the seed), or an attribute
``takes_uniforms = True`` (the adapters of :mod:`specsim.testing.engines` say there).  The adapters
of :mod:`specsim.testing.engines` put vLLM's, FlashInfer's, SGLang's and transformers' argument
lists in this layout.

Documented fallbacks accepted: on a NaN, all-zero or all-masked row (and on target rows that do
not sum to 1), and on placeholder ids, the engine may raise any exception; if it returns instead,
it must not accept a draft whose draft row is degenerate and must emit a token of positive target
probability.  Only the engine's own exception is such a refusal: when an adapter of
:mod:`specsim.testing.engines` cannot read what the engine returned (a -1 slot kept, no token
emitted) it raises :class:`~specsim.testing.engines.EngineOutputError`, and the property is broken
with that output as the witness.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats

from .._validate import check_int, check_seed
from .engines import EngineAdapter, EngineOutputError, _num_drafts

__all__ = ["PropertyResult", "EngineReport", "check_engine_properties", "PROPERTIES", "PROPERTY_MUTANTS",
           "reference_verify"]

#: The properties, in report order.
PROPERTIES = ("placeholder", "degenerate_rows", "zero_residual", "zero_target_draft", "inputs_unchanged",
              "batch_invariance", "consecutive_calls", "bonus_row")


@dataclass(frozen=True)
class PropertyResult:
    """One property: ``holds``, and when it does not, ``witness``: the input and the output that
    break it; ``note``: what the probe could not force (e.g. uniforms not injectable)."""

    name: str
    holds: bool
    witness: str = ""
    note: str = ""

    def __str__(self) -> str:
        return (f"{self.name}: {'holds' if self.holds else 'BROKEN'}" + (f" -- {self.witness}" if self.witness else "")
                + (f" ({self.note})" if self.note else ""))


@dataclass(frozen=True)
class EngineReport:
    """Result of :func:`check_engine_properties`: ``passed`` when every property holds;
    ``results`` one :class:`PropertyResult` per entry of :data:`PROPERTIES`; ``broken`` their
    names where they fail.  ``str()`` is the report."""

    name: str
    results: tuple

    @property
    def passed(self) -> bool:
        return all(r.holds for r in self.results)

    @property
    def broken(self) -> tuple:
        return tuple(r.name for r in self.results if not r.holds)

    def __getitem__(self, name: str) -> PropertyResult:
        for r in self.results:
            if r.name == name:
                return r
        raise KeyError(name)

    def __str__(self) -> str:
        return "\n".join([f"{self.name}: {'PASS' if self.passed else 'FAIL'} ({len(self.results)} properties)"]
                         + [f"  {r}" for r in self.results])


# ----------------------------------------------------------------------------- the reference
def reference_verify(drafts, p, q, seeds, uniforms=None):
    """Token-level speculative sampling (Leviathan et al., arXiv 2211.17192) per request in the
    dense seeded layout: request b uses ``numpy.random.default_rng(seeds[b])`` only and runs
    :data:`specsim.verifiers.token`'s sampler on its k_b real drafts, which validates its rows
    (so degenerate rows and placeholder ids raise ``ValueError``); with ``uniforms`` the
    acceptance tests use ``uniforms[b, :k_b]`` (module docstring) and the residual or bonus draw
    the seed.

    Returns: ``(accepted int64 [B], tokens int64 [B])``.

    >>> import numpy as np
    >>> from specsim.testing.properties import reference_verify
    >>> p = np.array([[[0.5, 0.5], [0.0, 1.0]]]); q = np.array([[[0.5, 0.5]]])
    >>> [a.tolist() for a in reference_verify(np.array([[0]]), p, q, np.array([3]))]
    [[1], [1]]
    """
    from ..verifiers import token

    drafts = np.asarray(drafts)
    B = drafts.shape[0]
    acc, tok = np.empty(B, dtype=np.int64), np.empty(B, dtype=np.int64)
    for b in range(B):
        k = _num_drafts(drafts[b])
        coins = () if uniforms is None else np.asarray(uniforms)[b, :k]
        acc[b], tok[b] = token.sample(tuple(drafts[b, :k].tolist()), np.asarray(p[b, :k + 1]),
                                      np.asarray(q[b, :k]), rng=_Coins(int(seeds[b]), coins))
    return acc, tok


class _Coins(np.random.Generator):
    """``numpy.random.default_rng(seed)``'s stream, except that its first scalar draws
    ``random()`` are the given coins: the token rule asks for one scalar per tested draft and
    draws the residual or bonus token with ``random(size)``, so the coins are its acceptance
    uniforms."""

    def __init__(self, seed, coins=()):
        super().__init__(np.random.PCG64(seed))
        self._coins = [float(c) for c in coins]

    def random(self, size=None, dtype=np.float64, out=None):
        if size is None and self._coins:
            return self._coins.pop(0)
        return super().random(size, dtype, out)


def _takes_uniforms(verify) -> bool:
    """The module docstring's test: a ``takes_uniforms`` attribute, else a ``uniforms`` parameter."""
    import inspect

    flag = getattr(verify, "takes_uniforms", None)  # the user's callable, not a module of this package
    if flag is not None:
        return bool(flag)
    try:
        return "uniforms" in inspect.signature(verify).parameters
    except (TypeError, ValueError):  # builtins without a signature
        return False


# ----------------------------------------------------------------------------- batches
def _rows(rng, B, n, V, zero_token=None):
    w = rng.gamma(1.0, size=(B, n, V)) + 0.05
    if zero_token is not None:
        w[..., zero_token] = 0.0
    return w / w.sum(axis=-1, keepdims=True)


def _batch(rng, B, L, V):
    q = _rows(rng, B, L, V)
    p = _rows(rng, B, L + 1, V)
    drafts = np.stack([[rng.choice(V, p=q[b, i]) for i in range(L)] for b in range(B)]).astype(np.int64)
    return drafts, p, q


def _call(verify, drafts, p, q, seeds, copy=True, uniforms=None):
    """One call on copies (so a function that writes its inputs cannot spoil later checks)."""
    if copy:
        drafts, p, q = np.array(drafts), np.array(p), np.array(q)
    extra = {} if uniforms is None else {"uniforms": np.array(uniforms, dtype=np.float64)}
    a, t = verify(drafts, p, q, np.array(seeds, dtype=np.int64), **extra)
    return np.asarray(a).reshape(-1).astype(np.int64), np.asarray(t).reshape(-1).astype(np.int64)


def _raised(verify, *args, **kw):
    """``(refusal, None)`` when the engine raised on a degenerate batch (any exception of its own
    is an allowed answer), ``(None, output)`` when it returned.

    Only the engine's own exception is a refusal: an adapter's
    :class:`~specsim.testing.engines.EngineOutputError` (the engine returned output outside its
    own format) propagates to :func:`_malformed_is_broken`, and the batch is checked against an
    adapter's contract before the call, so a batch the adapter refuses is an error of the probe,
    never counted as the engine's refusal."""
    if isinstance(verify, EngineAdapter):
        verify.validate_batch(*args[:4], kw.get("uniforms"))
    try:
        return None, _call(verify, *args, **kw)
    except EngineOutputError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine's refusal, whatever its type
        return f"{type(exc).__name__}: {exc}", None


def _malformed_is_broken(probe):
    """The probe, with an adapter's :class:`~specsim.testing.engines.EngineOutputError` reported as a
    broken property whose witness is the engine's output (not as a refusal, not as the probe
    raising)."""
    import functools

    @functools.wraps(probe)
    def run(verify, *args, **kw):
        try:
            return probe(verify, *args, **kw)
        except EngineOutputError as exc:
            return False, f"the engine returned malformed output: {exc}"

    return run


def _placeholder(verify, rng, L, V, trials, **_):
    drafts, p, q = _batch(rng, trials, L, V)
    k = rng.integers(0, L, size=trials)
    for b in range(trials):
        drafts[b, k[b]:] = -1
    p[:, :, V - 1] += 1.0  # make the placeholder's negative-index twin (token V-1) very likely
    p /= p.sum(axis=-1, keepdims=True)
    q[:, :, V - 1] += 1.0
    q /= q.sum(axis=-1, keepdims=True)
    _, out = _raised(verify, drafts, p, q, rng.integers(2 ** 31, size=trials))
    for b in range(trials if out is not None else 0):  # a refusal here still leaves the second batch
        a, t = out
        if not (0 <= a[b] <= k[b] and 0 <= t[b] < V):
            return False, (f"request with {k[b]} real drafts {drafts[b].tolist()} returned accepted = {a[b]}, "
                           f"token = {t[b]}")
    # the real drafts have target probability 1 (kept by any lossless rule) and the bonus row
    # p[b, k_b] is one-hot on j; the padding draft row q[b, k_b] is one-hot on j too, so an engine
    # that verifies the first placeholder slot and resamples it from (p - q)_+ finds nothing there
    drafts, p, q = _batch(rng, trials, L, V)
    j = rng.integers(1, V - 1, size=trials)
    for b in range(trials):
        drafts[b, k[b]:] = -1
        p[b, :k[b]] = np.eye(V)[drafts[b, :k[b]]]
        p[b, k[b]] = q[b, k[b]] = np.eye(V)[j[b]]
    _, out = _raised(verify, drafts, p, q, rng.integers(2 ** 31, size=trials))
    if out is None:
        return True, ""
    a, t = out
    for b in range(trials):
        if a[b] != k[b] or t[b] != j[b]:
            return False, (f"request with {k[b]} real drafts {drafts[b].tolist()} of target probability 1 and the bonus "
                           f"row one-hot on {j[b]} (padding draft row one-hot on {j[b]}) returned accepted = {a[b]}, "
                           f"token = {t[b]}")
    return True, ""


def _degenerate(verify, rng, L, V, trials, draft_rows=True, **_):
    for kind in ("nan", "zero", "masked") if draft_rows else ("masked",):
        drafts, p, q = _batch(rng, trials, L, V)
        bad = rng.integers(0, L, size=trials)
        p[:, :, 0] = q[:, :, 0] = 0.0  # token 0 impossible everywhere, so a "token 0" fallback is seen
        p /= p.sum(axis=-1, keepdims=True)
        q /= q.sum(axis=-1, keepdims=True)
        drafts[drafts == 0] = 1
        for b in range(trials):
            q[b, bad[b]] = {"nan": np.nan, "zero": 0.0, "masked": 0.0}[kind]
            if kind == "masked":  # -inf logits everywhere: softmax gives NaN
                q[b, bad[b]] = np.nan
                p[b, bad[b]] = np.nan
        err, out = _raised(verify, drafts, p, q, rng.integers(2 ** 31, size=trials))
        if out is None:
            continue
        a, t = out
        for b in range(trials):
            if a[b] > bad[b]:
                return False, (f"{kind} draft row at position {bad[b]}: draft {drafts[b].tolist()} accepted "
                               f"{a[b]} tokens")
            row = p[b, a[b]]
            if not (0 <= t[b] < V) or not np.isfinite(row).all() or not row[t[b]] > 0:
                return False, f"{kind} row at position {bad[b]}: emitted token {t[b]} from row {row.tolist()}"
    return True, ""


def _zero_residual(verify, rng, L, V, trials, **_):
    # p = q except p(x_1) = 0, and p = q = 0 on tokens 0 and V-1: rejection of x_1 is certain and
    # (p - q)_+ = 0, so only the fallback decides; the first and last ids (the usual argmax-of-zeros
    # and clamped-search fallbacks) have target probability 0
    q = _rows(rng, trials, L, V, zero_token=[0, V - 1])
    p = np.concatenate([q, _rows(rng, trials, 1, V)], axis=1)
    drafts = np.stack([[rng.choice(V, p=q[b, i]) for i in range(L)] for b in range(trials)]).astype(np.int64)
    for b in range(trials):
        p[b, 0, drafts[b, 0]] = 0.0

    def first_violation(drafts, p, q, describe):
        # a forced rejection must emit a token of positive target probability (or the call raises)
        _, out = _raised(verify, drafts, p, q, rng.integers(2 ** 31, size=trials))
        if out is None:
            return None
        a, t = out
        for b in range(trials):
            if a[b] != 0 or not (0 <= t[b] < V) or not p[b, 0, t[b]] > 0:
                return f"{describe(b)} returned accepted = {a[b]}, token = {t[b]}"
        return None

    witness = first_violation(drafts, p, q, lambda b: f"forced rejection of x_1 = {drafts[b, 0]} with zero residual "
                                                      f"(p_0 = {p[b, 0].round(4).tolist()})")
    if witness:
        return False, witness
    # normalised rows, for engines that renormalise: p_0 one-hot on y, q_0 the same plus 1e-30 on
    # x_1, so p_0(x_1) = 0 forces the rejection and (p_0 - q_0)_+ is 0 in any float format (the
    # exact residual, 1e-30 on y, is lost to rounding); only y has target probability > 0
    drafts, p, q = _batch(rng, trials, L, V)
    for b in range(trials):
        x1, y = (1, 2) if V == 3 else rng.choice(np.arange(1, V - 1), size=2, replace=False)
        drafts[b, 0] = x1
        p[b, 0] = q[b, 0] = np.eye(V)[y]
        q[b, 0, x1] = 1e-30
    witness = first_violation(drafts, p, q, lambda b: f"forced rejection of x_1 = {drafts[b, 0]} (p_0 one-hot on "
                              f"{int(np.argmax(p[b, 0]))}, q_0 the same plus 1e-30 on x_1: zero residual after rounding)")
    return (False, witness) if witness else (True, "")


def _zero_target_draft(verify, rng, L, V, trials, inject=False, **_):
    # x_1 has target probability 0: no uniform, u = 0 included, may accept it (accept iff
    # u q < p, strict); with injected uniforms every u is 0, the boundary a `>=` test gets wrong
    drafts, p, q = _batch(rng, trials, L, V)
    for b in range(trials):
        p[b, 0, drafts[b, 0]] = 0.0
    p /= p.sum(axis=-1, keepdims=True)
    u = np.zeros((trials, L)) if inject else None
    a, t = _call(verify, drafts, p, q, rng.integers(2 ** 31, size=trials), uniforms=u)
    for b in range(trials):
        if a[b] != 0 or not p[b, 0, t[b]] > 0:
            return False, (f"draft {drafts[b].tolist()} with p_0(x_1) = 0 " + ("at u = 0 " if inject else "")
                           + f"returned accepted = {a[b]}, token = {t[b]}")
    return True, "", "" if inject else "u = 0 not forced: verify takes no uniforms"


def _inputs_unchanged(verify, rng, L, V, trials, **_):
    drafts, p, q = _batch(rng, trials, L, V)
    seeds = rng.integers(2 ** 31, size=trials)
    copies = [x.copy() for x in (drafts, p, q, seeds)]
    verify(drafts, p, q, seeds)
    for name, x, c in zip(("drafts", "p", "q", "seeds"), (drafts, p, q, seeds), copies):
        if not np.array_equal(x, c, equal_nan=True):
            idx = tuple(int(i) for i in np.argwhere(x != c)[0])
            return False, f"{name}{list(idx)} changed from {c[idx]!r} to {x[idx]!r}"
    return True, ""


def _batch_invariance(verify, rng, L, V, trials, **_):
    drafts, p, q = _batch(rng, trials, L, V)
    seeds = rng.integers(2 ** 31, size=trials)
    a, t = _call(verify, drafts, p, q, seeds)
    order = rng.permutation(trials)
    a2, t2 = _call(verify, drafts[order], p[order], q[order], seeds[order])
    for j, b in enumerate(order):
        if (a2[j], t2[j]) != (a[b], t[b]):
            return False, (f"request {b} gave (accepted, token) = ({a[b]}, {t[b]}) in the batch and "
                           f"({a2[j]}, {t2[j]}) at position {j} after a permutation")
    for b in range(min(trials, 4)):
        a1, t1 = _call(verify, drafts[b:b + 1], p[b:b + 1], q[b:b + 1], seeds[b:b + 1])
        if (a1[0], t1[0]) != (a[b], t[b]):
            return False, (f"request {b} gave ({a[b]}, {t[b]}) in a batch of {trials} and ({a1[0]}, {t1[0]}) alone")
    return True, ""


def _consecutive(verify, rng, L, V, trials, level=1e-4, **_):
    # the same request in consecutive calls with fresh seeds: under independence two consecutive
    # outputs agree with probability sum_y pi(y)^2, pi the one-call law, estimated from one batch
    # of copies of the request; shared random numbers push the agreement rate up
    drafts, p, q = _batch(rng, 1, L, V)
    p[0, :, :] = 1.0 / V  # a spread-out output law, so agreement by chance is moderate
    calls = 8 * trials
    rep = lambda x: np.repeat(x, calls, axis=0)
    a, t = _call(verify, rep(drafts), rep(p), rep(q), rng.integers(2 ** 31, size=calls))
    keys = {o: i for i, o in enumerate(sorted(set(zip(a.tolist(), t.tolist()))))}
    pi = np.bincount([keys[o] for o in zip(a.tolist(), t.tolist())], minlength=len(keys)) / calls
    outs = []
    for _ in range(calls):
        a, t = _call(verify, drafts, p, q, rng.integers(2 ** 31, size=1))
        outs.append((int(a[0]), int(t[0])))
    agree = sum(x == y for x, y in zip(outs[1:], outs[:-1]))
    expect = float((pi ** 2).sum())
    p_value = float(stats.binom.sf(agree - 1, calls - 1, expect))
    if p_value < level:
        return False, (f"{agree} of {calls - 1} consecutive calls agree, {expect * (calls - 1):.1f} expected "
                       f"under independence (p = {p_value:.2g}); outputs {outs[:6]} ...")
    return True, ""


def _bonus(verify, rng, L, V, trials, **_):
    # every drafted token has target probability 1 (any lossless rule accepts it, whatever it
    # does with q); the bonus row is one-hot on token V-1, which no drafted row can produce
    q = _rows(rng, trials, L, V, zero_token=V - 1)
    drafts = np.stack([[rng.choice(V, p=q[b, i]) for i in range(L)] for b in range(trials)]).astype(np.int64)
    p = np.zeros((trials, L + 1, V))
    for b in range(trials):
        p[b, np.arange(L), drafts[b]] = 1.0
    p[:, L, V - 1] = 1.0
    a, t = _call(verify, drafts, p, q, rng.integers(2 ** 31, size=trials))
    for b in range(trials):
        if a[b] != L or t[b] != V - 1:
            return False, (f"drafted tokens of target probability 1 and a one-hot bonus row on {V - 1}: draft "
                           f"{drafts[b].tolist()} returned accepted = {a[b]}, token = {t[b]}")
    return True, ""


_CHECKS: dict[str, Callable] = {name: _malformed_is_broken(probe) for name, probe in (
    ("placeholder", _placeholder), ("degenerate_rows", _degenerate), ("zero_residual", _zero_residual),
    ("zero_target_draft", _zero_target_draft), ("inputs_unchanged", _inputs_unchanged),
    ("batch_invariance", _batch_invariance), ("consecutive_calls", _consecutive), ("bonus_row", _bonus))}


def check_engine_properties(verify, layout: str = "dense", *, V: int = 4, L: int = 3, trials: int = 32,
                            seed: int = 0, properties=PROPERTIES, draft_rows: bool = True,
                            name: str | None = None) -> EngineReport:
    """Run a batched verification function on adversarial batches and report each property.

    Properties (:data:`PROPERTIES`): ``placeholder`` -- padding ids (-1) are never accepted or
    emitted (accepted <= k_b, token in 0..V-1), and after k_b kept drafts the token is drawn from
    the bonus row p[b, k_b] (not from a residual with the padding draft row); ``degenerate_rows`` -- with a NaN, all-zero or
    all-masked draft row the engine raises, or accepts no draft at or after it and emits a token
    of positive target probability; ``zero_residual`` -- a certain rejection whose residual
    (p - q)_+ is all zeros (rows summing to less than 1, as rounding leaves them; and normalised
    one-hot rows whose 1e-30 difference rounding removes, for engines that renormalise) raises
    or emits a token with target probability > 0; ``zero_target_draft`` -- a draft of target
    probability 0 is never accepted, at u = 0 too when ``verify`` takes injected uniforms (module
    docstring; otherwise the result's ``note`` says u = 0 was not forced); ``inputs_unchanged`` -- drafts, rows and seeds
    are unchanged after the call; ``batch_invariance`` -- each request's output depends only on
    its seed and rows (same result after permuting the batch, and alone); ``consecutive_calls``
    -- consecutive calls with fresh seeds are independent (agreement rate against
    sum_y pi(y)^2, one-sided binomial test at level 1e-4); ``bonus_row`` -- when every drafted
    token has target probability 1 (so any lossless rule keeps them all) the token comes from
    the bonus row.

    Parameters: ``verify`` in ``layout`` (only ``"dense"``, the module docstring's seeded dense
    layout; :mod:`specsim.testing.engines` converts engine argument lists to it); ``V`` (>= 3),
    ``L`` (>= 2); ``trials`` requests per adversarial batch; ``seed``; ``properties`` (a subset
    of :data:`PROPERTIES`); ``draft_rows`` (``False`` for rules that never read the draft rows,
    such as target-only verification of deterministic drafts, docs/theory.md §3.2: degenerate
    draft rows alone are then not a fault, and only all-masked rows, target included, are
    tested); ``name``.

    Returns: an :class:`EngineReport`.

    >>> from specsim.testing.properties import check_engine_properties, reference_verify
    >>> check_engine_properties(reference_verify, trials=8).passed
    True
    """
    if layout != "dense":
        raise ValueError(f"layout must be 'dense' (see specsim.testing.engines for engine layouts), got {layout!r}")
    if not callable(verify):
        raise TypeError(f"verify must be callable, got {type(verify).__name__}")
    check_int(V, "V", 3)
    check_int(L, "L", 2)
    check_int(trials, "trials", 2)
    check_seed(seed)
    if isinstance(properties, str) or not hasattr(properties, "__iter__"):
        raise TypeError(f"properties must be a sequence of property names, got {type(properties).__name__}")
    properties = tuple(properties)
    if not properties:  # an empty check would report PASS for any engine
        raise ValueError(f"properties must name at least one property of {PROPERTIES}, got an empty sequence")
    unknown = [p for p in properties if p not in _CHECKS]
    if unknown:
        raise ValueError(f"unknown properties {unknown}; expected a subset of {PROPERTIES}")
    rng = np.random.default_rng(seed)
    inject = _takes_uniforms(verify)
    results = []
    for prop in properties:
        try:
            holds, witness, *note = _CHECKS[prop](verify, rng, L, V, trials, draft_rows=draft_rows, inject=inject)
        except Exception as exc:  # a well-formed batch must not raise: report it as the witness
            holds, witness, note = False, f"raised {type(exc).__name__}: {exc} on a well-formed batch", []
        results.append(PropertyResult(prop, holds, witness, *note))
    return EngineReport(name or getattr(verify, "name", getattr(verify, "__name__", "engine")), tuple(results))


# ----------------------------------------------------------------------------- mutants
def _placeholder_gathered(drafts, p, q, seeds):
    """-1 gathered as token V-1 (negative indexing) and verified like a real draft."""
    d = np.where(np.asarray(drafts) < 0, np.asarray(p).shape[-1] - 1, drafts)
    acc, tok = np.empty(len(d), dtype=np.int64), np.empty(len(d), dtype=np.int64)
    for b in range(len(d)):
        pb = np.array(p[b])
        k = _num_drafts(drafts[b])
        pb[k + 1:] = pb[k]  # the padding rows as an engine that never looks at lengths sees them
        a, t = reference_verify(d[b:b + 1], pb[None], np.asarray(q[b:b + 1]), seeds[b:b + 1])
        acc[b], tok[b] = a[0], t[0]
    return acc, tok


def _nan_accepted(drafts, p, q, seeds):
    """A degenerate draft row replaced by the target row (min(NaN, 0) = 0 in log space: accept)."""
    q = np.array(q)
    bad = ~np.isfinite(q).all(axis=-1) | ~(q.sum(axis=-1) > 0)
    q[bad] = np.asarray(p)[:, :-1][bad]
    return reference_verify(drafts, np.nan_to_num(np.asarray(p), nan=0.25), q, seeds)


def _unvalidated_token_rule(drafts, p, q, seeds, uniforms, accept):
    """The token rule without row validation, with acceptance test ``accept(u, p(x), q(x))``; a
    residual with no positive weight gives argmax = token 0 (the engines' fallback)."""
    drafts, p, q = np.asarray(drafts), np.asarray(p), np.asarray(q)
    acc, tok = np.empty(len(drafts), dtype=np.int64), np.empty(len(drafts), dtype=np.int64)
    for b in range(len(drafts)):
        k = _num_drafts(drafts[b])
        rng = _Coins(int(seeds[b]), () if uniforms is None else np.asarray(uniforms)[b, :k])
        i = 0
        while i < k and accept(rng.random(), p[b, i, drafts[b, i]], q[b, i, drafts[b, i]]):
            i += 1
        r = p[b, i] if i == k else np.maximum(p[b, i] - q[b, i], 0.0)
        acc[b] = i
        tok[b] = int(np.argmax(r)) if not r.sum() > 0 else int(rng.choice(len(r), p=r / r.sum()))
    return acc, tok


def _zero_residual_token0(drafts, p, q, seeds, uniforms=None):
    """Token rule without validation; a rejection with (p - q)_+ = 0 emits argmax = token 0."""
    return _unvalidated_token_rule(drafts, p, q, seeds, uniforms, lambda u, px, qx: u * qx < px)


def _accept_at_ratio_equal_to_u(drafts, p, q, seeds, uniforms=None):
    """Acceptance ``p(x) / q(x) >= u`` (not strict), so x of target probability 0 is kept at u = 0."""
    return _unvalidated_token_rule(drafts, p, q, seeds, uniforms, lambda u, px, qx: qx > 0 and px / qx >= u)


def _modifies_input(drafts, p, q, seeds):
    """Correct output, but the residual is formed in place in the caller's q."""
    out = reference_verify(drafts, p, q, seeds)
    np.maximum(np.asarray(p)[:, :-1] - q, 0.0, out=q)
    return out


def _batch_position_seed(drafts, p, q, seeds):
    """Request b seeded with seeds[b] + b: its output depends on its place in the batch."""
    return reference_verify(drafts, p, q, np.asarray(seeds) + np.arange(len(seeds)))


def _fixed_stream_per_call(drafts, p, q, seeds):
    """Seeds ignored: every call restarts one generator at seed 0 and serves the requests from it
    in turn (consecutive calls repeat their random numbers)."""
    stream = np.random.default_rng(0)
    return reference_verify(drafts, p, q, stream.integers(2 ** 31, size=len(seeds)))


def _bonus_from_last_draft_row(drafts, p, q, seeds):
    """After full acceptance the bonus token is drawn from p[k-1] instead of p[k]."""
    p = np.array(p)
    for b in range(len(p)):
        k = _num_drafts(drafts[b])
        p[b, k] = p[b, k - 1]
    return reference_verify(drafts, p, q, seeds)


#: One faulty ``verify`` (dense layout) per property: property name -> the mutant that breaks it
#: (the faults are those of the module docstring, re-implemented on :func:`reference_verify`).
PROPERTY_MUTANTS = {"placeholder": _placeholder_gathered, "degenerate_rows": _nan_accepted,
                    "zero_residual": _zero_residual_token0, "zero_target_draft": _accept_at_ratio_equal_to_u,
                    "inputs_unchanged": _modifies_input,
                    "batch_invariance": _batch_position_seed, "consecutive_calls": _fixed_stream_per_call,
                    "bonus_row": _bonus_from_last_draft_row}
