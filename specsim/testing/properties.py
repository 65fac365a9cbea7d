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
``accepted`` [B] (tau_b in 0..k_b) and ``tokens`` [B] (the one emitted token).  The adapters
of :mod:`specsim.testing.layouts` put vLLM's, FlashInfer's, SGLang's and transformers' argument
lists in this layout.

Documented fallbacks accepted: on a NaN, all-zero or all-masked row (and on target rows that do
not sum to 1) the engine may raise any exception; if it returns instead, it must not accept a
draft whose draft row is degenerate and must emit a token of positive target probability.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from scipy import stats

from .._validate import check_int

__all__ = ["PropertyResult", "EngineReport", "check_engine_properties", "PROPERTIES", "PROPERTY_MUTANTS",
           "reference_verify"]

#: The properties, in report order.
PROPERTIES = ("placeholder", "degenerate_rows", "zero_residual", "inputs_unchanged", "batch_invariance",
              "consecutive_calls", "bonus_row")


@dataclass(frozen=True)
class PropertyResult:
    """One property: ``holds``, and when it does not, ``witness``: the input and the output that
    break it."""

    name: str
    holds: bool
    witness: str = ""

    def __str__(self) -> str:
        return f"{self.name}: {'holds' if self.holds else 'BROKEN'}" + (f" -- {self.witness}" if self.witness else "")


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
def reference_verify(drafts, p, q, seeds):
    """Token-level speculative sampling (Leviathan et al., arXiv 2211.17192) per request in the
    dense seeded layout: request b uses ``numpy.random.default_rng(seeds[b])`` only and runs
    :data:`specsim.verifiers.token`'s sampler on its k_b real drafts, which validates its rows
    (so degenerate rows and placeholder ids raise ``ValueError``).

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
        acc[b], tok[b] = token.sample(tuple(drafts[b, :k].tolist()), np.asarray(p[b, :k + 1]),
                                      np.asarray(q[b, :k]), rng=np.random.default_rng(int(seeds[b])))
    return acc, tok


def _num_drafts(row) -> int:
    """k_b: the real drafts before the first placeholder (-1)."""
    neg = np.flatnonzero(np.asarray(row) < 0)
    return int(neg[0]) if neg.size else len(row)


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


def _call(verify, drafts, p, q, seeds, copy=True):
    """One call on copies (so a function that writes its inputs cannot spoil later checks)."""
    if copy:
        drafts, p, q = np.array(drafts), np.array(p), np.array(q)
    a, t = verify(drafts, p, q, np.array(seeds, dtype=np.int64))
    return np.asarray(a).reshape(-1).astype(np.int64), np.asarray(t).reshape(-1).astype(np.int64)


def _raised(verify, *args):
    try:
        return None, _call(verify, *args)
    except Exception as exc:  # any exception is an allowed answer to degenerate input
        return f"{type(exc).__name__}: {exc}", None


def _placeholder(verify, rng, L, V, trials, draft_rows=True):
    drafts, p, q = _batch(rng, trials, L, V)
    k = rng.integers(0, L, size=trials)
    for b in range(trials):
        drafts[b, k[b]:] = -1
    p[:, :, V - 1] += 1.0  # make the placeholder's negative-index twin (token V-1) very likely
    p /= p.sum(axis=-1, keepdims=True)
    q[:, :, V - 1] += 1.0
    q /= q.sum(axis=-1, keepdims=True)
    err, out = _raised(verify, drafts, p, q, rng.integers(2 ** 31, size=trials))
    if out is None:
        return True, ""
    a, t = out
    for b in range(trials):
        if not (0 <= a[b] <= k[b] and 0 <= t[b] < V):
            return False, (f"request with {k[b]} real drafts {drafts[b].tolist()} returned accepted = {a[b]}, "
                           f"token = {t[b]}")
    return True, ""


def _degenerate(verify, rng, L, V, trials, draft_rows=True):
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


def _zero_residual(verify, rng, L, V, trials, draft_rows=True):
    # p = q except p(x_1) = 0, and p = q = 0 on tokens 0 and V-1: rejection of x_1 is certain and
    # (p - q)_+ = 0, so only the fallback decides; the first and last ids (the usual argmax-of-zeros
    # and clamped-search fallbacks) have target probability 0
    q = _rows(rng, trials, L, V, zero_token=[0, V - 1])
    p = np.concatenate([q, _rows(rng, trials, 1, V)], axis=1)
    drafts = np.stack([[rng.choice(V, p=q[b, i]) for i in range(L)] for b in range(trials)]).astype(np.int64)
    for b in range(trials):
        p[b, 0, drafts[b, 0]] = 0.0
    err, out = _raised(verify, drafts, p, q, rng.integers(2 ** 31, size=trials))
    if out is None:
        return True, ""
    a, t = out
    for b in range(trials):
        if a[b] != 0 or not (0 <= t[b] < V) or not p[b, 0, t[b]] > 0:
            return False, (f"forced rejection of x_1 = {drafts[b, 0]} with zero residual (p_0 = {p[b, 0].round(4).tolist()})"
                           f" returned accepted = {a[b]}, token = {t[b]}")
    return True, ""


def _inputs_unchanged(verify, rng, L, V, trials, draft_rows=True):
    drafts, p, q = _batch(rng, trials, L, V)
    seeds = rng.integers(2 ** 31, size=trials)
    copies = [x.copy() for x in (drafts, p, q, seeds)]
    verify(drafts, p, q, seeds)
    for name, x, c in zip(("drafts", "p", "q", "seeds"), (drafts, p, q, seeds), copies):
        if not np.array_equal(x, c, equal_nan=True):
            idx = tuple(int(i) for i in np.argwhere(x != c)[0])
            return False, f"{name}{list(idx)} changed from {c[idx]!r} to {x[idx]!r}"
    return True, ""


def _batch_invariance(verify, rng, L, V, trials, draft_rows=True):
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


def _consecutive(verify, rng, L, V, trials, draft_rows=True, level=1e-4):
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


def _bonus(verify, rng, L, V, trials, draft_rows=True):
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


_CHECKS: dict[str, Callable] = {"placeholder": _placeholder, "degenerate_rows": _degenerate,
                                "zero_residual": _zero_residual, "inputs_unchanged": _inputs_unchanged,
                                "batch_invariance": _batch_invariance, "consecutive_calls": _consecutive,
                                "bonus_row": _bonus}


def check_engine_properties(verify, layout: str = "dense", *, V: int = 4, L: int = 3, trials: int = 32,
                            seed: int = 0, properties=PROPERTIES, draft_rows: bool = True,
                            name: str | None = None) -> EngineReport:
    """Run a batched verification function on adversarial batches and report each property.

    Properties (:data:`PROPERTIES`): ``placeholder`` -- padding ids (-1) are never accepted or
    emitted (accepted <= k_b, token in 0..V-1); ``degenerate_rows`` -- with a NaN, all-zero or
    all-masked draft row the engine raises, or accepts no draft at or after it and emits a token
    of positive target probability; ``zero_residual`` -- a certain rejection whose residual
    (p - q)_+ is all zeros (rows summing to less than 1, as rounding leaves them) raises or
    emits a token with target probability > 0; ``inputs_unchanged`` -- drafts, rows and seeds
    are unchanged after the call; ``batch_invariance`` -- each request's output depends only on
    its seed and rows (same result after permuting the batch, and alone); ``consecutive_calls``
    -- consecutive calls with fresh seeds are independent (agreement rate against
    sum_y pi(y)^2, one-sided binomial test at level 1e-4); ``bonus_row`` -- when every drafted
    token has target probability 1 (so any lossless rule keeps them all) the token comes from
    the bonus row.

    Parameters: ``verify`` in ``layout`` (only ``"dense"``, the module docstring's seeded dense
    layout; :mod:`specsim.testing.layouts` converts engine argument lists to it); ``V`` (>= 3),
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
        raise ValueError(f"layout must be 'dense' (see specsim.testing.layouts for engine layouts), got {layout!r}")
    if not callable(verify):
        raise TypeError(f"verify must be callable, got {type(verify).__name__}")
    check_int(V, "V", 3)
    check_int(L, "L", 2)
    check_int(trials, "trials", 2)
    unknown = [p for p in properties if p not in _CHECKS]
    if unknown:
        raise ValueError(f"unknown properties {unknown}; expected a subset of {PROPERTIES}")
    rng = np.random.default_rng(seed)
    results = []
    for prop in properties:
        try:
            holds, witness = _CHECKS[prop](verify, rng, L, V, trials, draft_rows=draft_rows)
        except Exception as exc:  # a well-formed batch must not raise: report it as the witness
            holds, witness = False, f"raised {type(exc).__name__}: {exc} on a well-formed batch"
        results.append(PropertyResult(prop, holds, witness))
    return EngineReport(name or getattr(verify, "name", getattr(verify, "__name__", "engine")), tuple(results))


# ----------------------------------------------------------------------------- mutants
def _placeholder_gathered(drafts, p, q, seeds):
    """-1 gathered as token V-1 (negative indexing) and verified like a real draft."""
    d = np.where(np.asarray(drafts) < 0, np.asarray(p).shape[-1] - 1, drafts)
    L = d.shape[1]
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


def _zero_residual_token0(drafts, p, q, seeds):
    """Token rule without validation; a rejection with (p - q)_+ = 0 emits argmax = token 0."""
    drafts, p, q = np.asarray(drafts), np.asarray(p), np.asarray(q)
    acc, tok = np.empty(len(drafts), dtype=np.int64), np.empty(len(drafts), dtype=np.int64)
    for b in range(len(drafts)):
        rng = np.random.default_rng(int(seeds[b]))
        k = _num_drafts(drafts[b])
        i = 0
        while i < k and rng.random() * q[b, i, drafts[b, i]] < p[b, i, drafts[b, i]]:
            i += 1
        r = p[b, i] if i == k else np.maximum(p[b, i] - q[b, i], 0.0)
        acc[b] = i
        tok[b] = int(np.argmax(r)) if not r.sum() > 0 else int(rng.choice(len(r), p=r / r.sum()))
    return acc, tok


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
                    "zero_residual": _zero_residual_token0, "inputs_unchanged": _modifies_input,
                    "batch_invariance": _batch_position_seed, "consecutive_calls": _fixed_stream_per_call,
                    "bonus_row": _bonus_from_last_draft_row}
