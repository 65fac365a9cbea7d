"""Engine layouts: adapters that call an engine's verification function with its own argument list.

Each adapter takes a function with the exact signature of one engine and returns an
:class:`EngineAdapter`, which is at once

* a ``verify(drafts, p, q, seeds) -> (accepted, tokens)`` in the seeded dense layout of
  :func:`specsim.testing.check_engine_properties` (drafts int [B, L] with -1 placeholders after
  request b's k_b real drafts, p [B, L+1, V] with the bonus row at ``p[b, k_b]``, q [B, L, V],
  one seed per request), and
* through :meth:`EngineAdapter.batch_sampler`, a :class:`specsim.testing.BatchSampler` for
  :func:`specsim.testing.check_sampler` (seeds drawn from the check's generator).

Signatures (read from the engines' sources; argument names and shapes as there):

* vLLM v1 ``rejection_sample(draft_token_ids [N], num_draft_tokens list[int], max_spec_len,
  cu_num_draft_tokens [B], draft_probs [N, V] | None, target_logits [N, V], bonus_token_ids
  [B, 1], sampling_metadata) -> output_token_ids int32 [B, max_spec_len + 1]`` (-1 placeholder;
  vLLM 0.33 takes ``target_logits`` and applies the softmax itself, earlier versions
  ``target_probs``: the adapter reads the parameter's name); the bonus token is sampled outside
  the function, so the adapter draws it from the bonus row; ``sampling_metadata`` carries
  ``all_greedy``, ``all_random``, ``temperature`` [B] and ``generators`` {request index:
  torch.Generator}, one per seeded request; the acceptance uniforms come from the module-level
  helper ``generate_uniform_probs(num_tokens, num_draft_tokens, generators, device)``;
* vLLM "model runner v2" (``vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils``)
  ``rejection_sample(target_logits [T, V], draft_logits [max_num_reqs, S, V] | None,
  draft_sampled [T], cu_num_logits [B+1], pos [T], idx_mapping [B], expanded_idx_mapping [T],
  expanded_local_pos [T], temperature [max_num_reqs], seed [max_num_reqs], num_speculative_steps
  = S, ..., use_block_verification=False, ...) -> (sampled int64 [B, S+1], num_sampled [B])``:
  T = sum_b (k_b + 1) logit rows, request b's rows being its k_b target rows and its bonus row;
  ``draft_sampled`` holds the row's input token, so the draft tested at row i is
  ``draft_sampled[row + 1]`` (-1: placeholder); randomness is seeds-plus-positions: every
  uniform and Gumbel draw is a hash of (``seed[request]``, ``pos[row]``);
* FlashInfer ``chain_speculative_sampling(draft_probs [B, n, V], draft_token_ids [B, n],
  target_probs [B, n+1, V], maybe_output_accepted_token_num=None,
  maybe_output_emitted_draft_token_num=None, deterministic=True, generator=None, seed=None,
  offset=None) -> (output_token_ids int32 [B, n+1], accepted_num [B], emitted_draft_num [B])``:
  one generator per call, so the adapter calls it once per request (``per_request=True``, the
  request's seed) or once per batch seeded from the first request's seed;
* SGLang ``tree_speculative_sampling_target_only(predicts [B * n], accept_index [B, num_spec_step],
  accept_token_num [B], candidates [B, n], retrive_index [B, n], retrive_next_token [B, n],
  retrive_next_sibling [B, n], uniform_samples [B, n], uniform_samples_for_final_sampling [B],
  target_probs [B, n, V], draft_probs [B, n, V], threshold_single=1.0, threshold_acc=1.0,
  deterministic=True) -> None`` (the first three written in place): a tree of n nodes per request,
  node 0 the last verified token, first child / next sibling links (-1: none), target rows per
  node; "target only" treats drafts as deterministic proposals (docs/theory.md §3.2), so
  ``draft_probs`` is zeros; the adapter passes each chain as a path tree;
* transformers ``_speculative_sampling(candidate_input_ids [1, T + L], candidate_logits
  [1, L, V], candidate_length, new_logits [1, L+1, V], ...) -> (valid_tokens [1, n + 1],
  n_matches)``: one request per call, torch's global generator seeded with the request's seed.

torch is imported inside the adapters only.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable

import numpy as np

from .._validate import _float_array, check_bool, sum_tolerance
from .adapters import _check_callable, _check_name, _torch_device, _torch_float_dtype
from .sampler import BatchSampler
from .step import SamplerError

__all__ = ["EngineAdapter", "EngineOutputError", "validate_batch", "vllm_rejection_sampler", "vllm_mrv2_rejection_sampler",
           "flashinfer_chain_sampler", "sglang_tree_sampler", "transformers_chain_sampler"]


def _num_drafts(row) -> int:
    """k_b: the real drafts before the first placeholder (-1)."""
    neg = np.flatnonzero(np.asarray(row) < 0)
    return int(neg[0]) if neg.size else len(row)


class EngineOutputError(SamplerError):
    """The engine returned, and what it returned is not in its own output format (a row that is not
    kept drafts, one token, then -1; a count that disagrees with the row; something that is not
    a tensor): raised by the adapters, never by an engine.

    :func:`specsim.testing.check_engine_properties` tells it from the engine's own exception: an
    engine may refuse a degenerate batch by raising, but output it cannot have meant is a broken
    property, with the output as the witness.
    """


@contextmanager
def _reading_output(name: str):
    """Any failure while reading the engine's output (an ``AttributeError`` on a list where a tensor
    was due, a short array) is the engine's malformed output, not the engine raising."""
    try:
        yield
    except EngineOutputError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever reading the output tripped on
        raise EngineOutputError(f"{name}: the engine's output could not be read: {type(exc).__name__}: {exc}") from exc


def _int_array(a, name: str, ndim: int) -> np.ndarray:
    """An integer array of ``ndim`` dimensions (bools and floats refused: an id is never rounded)."""
    arr = np.asarray(a.detach().cpu() if type(a).__module__.split(".")[0] == "torch" else a)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension{'s' if ndim > 1 else ''}, got shape {arr.shape}")
    return arr.astype(np.int64)


def _check_rows(a: np.ndarray, name: str, eps: float) -> None:
    """Rows [..., V] of the dense layout: entries finite and >= 0 summing to at most 1 + tol, or
    the whole row NaN.  Rows summing to less than 1 (zero rows, rows whose mass rounding or
    masking removed) and all-NaN rows (a softmax of -inf logits) are passed on to the engine on
    purpose: they are the degenerate rows of check_engine_properties."""
    tol = sum_tolerance(eps, a.shape[-1])
    nan = np.isnan(a)
    masked = nan.all(axis=-1)
    where = lambda mask: tuple(int(i) for i in np.argwhere(mask)[0])  # noqa: E731
    if (nan.any(axis=-1) & ~masked).any():
        i = where(nan & ~masked[..., None])
        raise ValueError(f"{name}{list(i[:-1])}: NaN at token {i[-1]} in a row that is not all NaN (a fully "
                         f"masked row is all NaN)")
    if np.isinf(a).any():
        i = where(np.isinf(a))
        raise ValueError(f"{name}{list(i[:-1])}: non-finite entry {float(a[i])!r} at token {i[-1]}")
    if (a < 0).any():
        i = where(a < 0)
        raise ValueError(f"{name}{list(i[:-1])}: negative entry {float(a[i])!r} at token {i[-1]}")
    sums = np.where(masked, 0.0, np.nan_to_num(a).sum(axis=-1))
    if (sums > 1.0 + tol).any():
        i = where(sums > 1.0 + tol)
        raise ValueError(f"{name}{list(i)}: entries sum to {float(sums[i])!r}, more than 1 (tolerance {tol:g})")


def validate_batch(drafts, p, q, seeds, uniforms=None):
    """The arguments of one call in the seeded dense layout, validated and converted.

    ``drafts`` integer [B, L] (B, L >= 1) with ids in 0..V-1 and -1 only after a request's real
    drafts; ``p`` [B, L+1, V] and ``q`` [B, L, V] (V >= 2) of real numbers, each row finite and
    >= 0 with sum <= 1 + :func:`specsim._validate.sum_tolerance` (dtype, V), or all NaN (rows
    summing to less than 1 and all-NaN rows are the degenerate rows that
    :func:`~specsim.testing.check_engine_properties` passes on purpose); ``seeds`` integer [B],
    >= 0; ``uniforms`` (optional) real [B, L] in [0, 1).

    Returns: ``(drafts int64, p float64, q float64, seeds int64, uniforms float64 or None)``,
    rows not renormalised; ``TypeError`` / ``ValueError`` naming the argument and the entry.

    >>> import numpy as np
    >>> from specsim.testing.engines import validate_batch
    >>> p, q = np.full((1, 3, 3), 1 / 3), np.full((1, 2, 3), 1 / 3)
    >>> validate_batch(np.array([[1, -1]]), p, q, np.array([7]))[0].tolist()
    [[1, -1]]
    >>> validate_batch(np.array([[1, -1]]), 2 * p, q, np.array([7]))
    Traceback (most recent call last):
    ...
    ValueError: p[0, 0]: entries sum to 2.0, more than 1 (tolerance 1e-08)
    """
    drafts = _int_array(drafts, "drafts", 2)
    B, L = drafts.shape
    if B < 1 or L < 1:
        raise ValueError(f"drafts must have at least one request and one slot, got shape {drafts.shape}")
    (p, p_eps), (q, q_eps) = _float_array(p, "p"), _float_array(q, "q")
    if p.ndim != 3 or p.shape[:2] != (B, L + 1) or p.shape[2] < 2:
        raise ValueError(f"p must have shape (B, L + 1, V) = ({B}, {L + 1}, V) with V >= 2 for drafts of shape "
                         f"{drafts.shape}, got {p.shape}")
    V = p.shape[2]
    if q.shape != (B, L, V):
        raise ValueError(f"q must have shape (B, L, V) = {(B, L, V)}, got {q.shape}")
    bad = (drafts < -1) | (drafts >= V)
    if bad.any():
        b, i = (int(x) for x in np.argwhere(bad)[0])
        raise ValueError(f"drafts[{b}, {i}] = {drafts[b, i]} is outside 0..{V - 1} (or -1, a placeholder)")
    after = np.maximum.accumulate(drafts < 0, axis=1) & (drafts >= 0)  # a real id after a placeholder
    if after.any():
        b, i = (int(x) for x in np.argwhere(after)[0])
        raise ValueError(f"drafts[{b}] = {drafts[b].tolist()}: id {drafts[b, i]} after a -1 placeholder "
                         f"(placeholders come only after a request's real drafts)")
    _check_rows(p, "p", p_eps)
    _check_rows(q, "q", q_eps)
    seeds = _int_array(seeds, "seeds", 1)
    if seeds.shape != (B,):
        raise ValueError(f"seeds must hold one seed per request, B = {B}, got {seeds.size}")
    if (seeds < 0).any():
        raise ValueError(f"seeds must be >= 0, got {int(seeds[seeds < 0][0])} at request "
                         f"{int(np.flatnonzero(seeds < 0)[0])}")
    if uniforms is not None:
        u, _ = _float_array(uniforms, "uniforms")
        if u.shape != (B, L):
            raise ValueError(f"uniforms must have shape (B, L) = {(B, L)}, got {u.shape}")
        if not ((u >= 0) & (u < 1)).all():  # NaN fails both
            raise ValueError(f"uniforms must lie in [0, 1), got {float(u[~((u >= 0) & (u < 1))][0])!r}")
        uniforms = u
    return drafts, p.astype(np.float64), q.astype(np.float64), seeds, uniforms


@dataclass(frozen=True)
class EngineAdapter:
    """An engine function in the seeded dense layout (module docstring).

    ``adapter(drafts, p, q, seeds) -> (accepted int64 [B], tokens int64 [B])``;
    :meth:`batch_sampler` gives the :class:`~specsim.testing.BatchSampler` for
    :func:`~specsim.testing.check_sampler`.  Outputs are checked: an engine row whose kept
    prefix differs from the draft, or which has no emitted token, raises :class:`EngineOutputError`
    (a :class:`SamplerError`) naming the request and the row, and so does ``fn`` returning
    anything but two integer arrays of length B.  The batch is checked first
    (:func:`validate_batch`: ``TypeError`` / ``ValueError`` naming the argument).

    ``fn`` may itself be a function in the dense layout (``EngineAdapter(fn, name)``), which then
    gets the checked batch (drafts int64, rows float64).
    """

    fn: Callable
    name: str
    #: whether ``uniforms`` can be injected (the engine takes or draws them through a hook)
    takes_uniforms: bool = False

    def __post_init__(self):
        _check_callable(self.fn, "fn")
        _check_name(self.name, "name")
        check_bool(self.takes_uniforms, "takes_uniforms")

    def __call__(self, drafts, p, q, seeds, uniforms=None):
        if uniforms is not None and not self.takes_uniforms:
            raise TypeError(f"{self.name} draws its own uniforms: uniforms cannot be injected")
        *args, uniforms = validate_batch(drafts, p, q, seeds, uniforms)
        out = self.fn(*args) if uniforms is None else self.fn(*args, uniforms=uniforms)
        with _reading_output(self.name):
            acc, tok = (np.asarray(x.detach().cpu() if hasattr(x, "detach") else x) for x in out)
        B = len(args[0])
        for what, x in (("accepted", acc), ("tokens", tok)):
            if x.dtype.kind not in "iu" or x.shape != (B,):
                raise EngineOutputError(f"{self.name} returned {what} {x.dtype}{list(x.shape)}; "
                                        f"expected integers [{B}]")
        return acc.astype(np.int64), tok.astype(np.int64)

    def validate_batch(self, drafts, p, q, seeds, uniforms=None):
        """:func:`validate_batch` (what a call checks before the engine runs)."""
        return validate_batch(drafts, p, q, seeds, uniforms)

    def batch_sampler(self, chunk: int = 4096) -> BatchSampler:
        """The :class:`~specsim.testing.BatchSampler` calling the engine on whole chunks, one fresh
        seed per request from the check's generator."""
        def run(drafts, p, q, rng):
            return self(drafts, p, q, rng.integers(2 ** 31, size=len(drafts)))

        return BatchSampler(run, chunk, self.name)


def _parse_rows(out, drafts, name):
    """(tau, token) per row of an engine output [B, >= L+1] laid out as kept drafts, one token, -1."""
    with _reading_output(name):
        out = np.asarray(out)
        if out.ndim != 2 or out.shape[0] != len(drafts) or out.dtype.kind not in "iu":
            raise EngineOutputError(f"{name}: returned {out.dtype}{list(out.shape)}; expected integer rows "
                                    f"[{len(drafts)}, >= {drafts.shape[1] + 1}]")
    acc, tok = np.empty(len(drafts), dtype=np.int64), np.empty(len(drafts), dtype=np.int64)
    for b, row in enumerate(out):
        valid = np.flatnonzero(row >= 0)
        n = int(valid.size)
        if n == 0 or not np.array_equal(valid, np.arange(n)):
            raise EngineOutputError(f"{name}: request {b} with draft {drafts[b].tolist()} returned the row "
                                    f"{row.tolist()} (expected kept drafts, one token, then -1)")
        k = _num_drafts(drafts[b])
        if n - 1 > k or not np.array_equal(row[:n - 1], drafts[b, :n - 1]):
            raise EngineOutputError(f"{name}: request {b} with draft {drafts[b].tolist()} returned {row.tolist()}: "
                                    f"the kept prefix is not the draft's")
        acc[b], tok[b] = n - 1, int(row[n - 1])
    return acc, tok


def _draw_bonus(p_row, seed):
    """The bonus token, drawn by the adapter from the bonus row with the request's own stream."""
    from .._sampling import draw_token

    return draw_token(np.nan_to_num(p_row, nan=0.0) if np.isfinite(p_row).any() else np.ones_like(p_row),
                      np.random.default_rng([int(seed), 1]))


def vllm_rejection_sampler(rejection_sample, dtype="float32", device="cpu", pad_drafts: bool = False,
                           uniform_helper: str | None = "generate_uniform_probs",
                           name: str | None = None) -> EngineAdapter:
    """Adapter for vLLM v1's ``rejection_sample`` (ragged layout; module docstring).

    Request b contributes its k_b real drafts (``num_draft_tokens``, inclusive cumsum
    ``cu_num_draft_tokens``), their draft rows and the target rows p[b, :k_b] (as log p where
    the function takes ``target_logits``); the bonus token is drawn from p[b, k_b] by the adapter
    with the request's seed, and ``sampling_metadata.generators[b]`` is a torch.Generator seeded
    with ``seeds[b]`` (all requests random, temperature 1).  With ``pad_drafts`` every request
    passes all L slots, the placeholders as -1 with the dense rows p[b, i], q[b, i] of their
    slots, as vLLM pads the drafts of a batch; the token emitted at the first placeholder slot
    must then be a draw from p[b, k_b].

    Injected uniforms (``adapter(..., uniforms=u)``, u [B, L]): for the call, the adapter puts
    a function returning the ragged u[b, :k_b] (or u[b, :L] with ``pad_drafts``) in the place
    of the module-level helper ``uniform_helper`` in ``rejection_sample``'s globals and restores
    it afterwards; only the random source changes (not thread-safe).  ``uniform_helper=None``,
    or a function without that helper, takes no uniforms.

    Parameters: ``rejection_sample`` (the function or a fake with its signature); ``dtype`` of
    the probability tensors; ``device``; ``pad_drafts``; ``uniform_helper``; ``name``.

    Returns: an :class:`EngineAdapter`.

    >>> import torch
    >>> from specsim.testing.engines import vllm_rejection_sampler
    >>> def accept_none(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
    ...                 target_logits, bonus_token_ids, sampling_metadata):  # rejects x_1, emits token 0
    ...     out = torch.full((len(num_draft_tokens), max_spec_len + 1), -1, dtype=torch.int32)
    ...     out[:, 0] = 0
    ...     return out
    >>> import numpy as np
    >>> p, q = np.full((1, 3, 3), 1 / 3), np.full((1, 2, 3), 1 / 3)
    >>> [x.tolist() for x in vllm_rejection_sampler(accept_none)(np.array([[1, 2]]), p, q, np.array([0]))]
    [[0], [0]]
    """
    import inspect

    _check_callable(rejection_sample, "rejection_sample")
    dt, device = _torch_float_dtype(dtype), _torch_device(device)
    check_bool(pad_drafts, "pad_drafts")
    _check_name(uniform_helper, "uniform_helper", optional=True)
    _check_name(name, optional=True)
    try:
        params = list(inspect.signature(rejection_sample).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: read as taking probabilities
        params = []
    takes_logits = len(params) > 5 and params[5] == "target_logits"
    helpers = getattr(rejection_sample, "__globals__", {})
    injectable = uniform_helper is not None and uniform_helper in helpers

    def fn(drafts, p, q, seeds, uniforms=None):
        import torch

        B, L = drafts.shape
        ks = [_num_drafts(d) for d in drafts]
        slots = [L] * B if pad_drafts else ks
        ids = np.concatenate([drafts[b, :slots[b]] for b in range(B)]).astype(np.int64)
        qs = np.concatenate([q[b, :slots[b]] for b in range(B)])
        ps = np.concatenate([p[b, :slots[b]] for b in range(B)])
        if takes_logits:
            with np.errstate(divide="ignore", invalid="ignore"):
                ps = np.log(ps)
        bonus = np.array([[_draw_bonus(p[b, ks[b]], seeds[b])] for b in range(B)], dtype=np.int64)
        meta = SimpleNamespace(all_greedy=False, all_random=True,
                               temperature=torch.ones(B, dtype=torch.float32, device=device),
                               generators={b: torch.Generator(device=device).manual_seed(int(seeds[b]))
                                           for b in range(B)})
        args = (torch.as_tensor(ids, device=device), slots, max(slots),
                torch.as_tensor(np.cumsum(slots), dtype=torch.int32, device=device),
                torch.as_tensor(qs, dtype=dt, device=device).contiguous(),
                torch.as_tensor(ps, dtype=dt, device=device).contiguous(),
                torch.as_tensor(bonus, device=device).contiguous(), meta)
        if uniforms is None:
            out = rejection_sample(*args)
        else:
            flat = torch.as_tensor(np.concatenate([uniforms[b, :slots[b]] for b in range(B)]), dtype=torch.float64,
                                   device=device)
            original = helpers[uniform_helper]
            helpers[uniform_helper] = lambda *a, **k: flat.clone()
            try:
                out = rejection_sample(*args)
            finally:
                helpers[uniform_helper] = original
        with _reading_output(adapter.name):
            out = out.cpu().numpy()
        return _parse_rows(out, drafts, adapter.name)

    adapter = EngineAdapter(fn, name or f"vllm:{getattr(rejection_sample, '__name__', 'rejection_sample')}",
                            takes_uniforms=injectable)
    return adapter


def vllm_mrv2_rejection_sampler(rejection_sample, dtype="float32", device="cpu", block_verification: bool = False,
                                pad_drafts: bool = False, name: str | None = None) -> EngineAdapter:
    """Adapter for vLLM's "model runner v2" ``rejection_sample`` (seeds-plus-positions; module docstring).

    Request b is request state b (``idx_mapping = arange(B)``) with k_b + 1 logit rows
    (log p[b, :k_b + 1], the last its bonus row), input tokens ``draft_sampled`` = (0, x_1, ...,
    x_{k_b}), ``expanded_local_pos`` 0..k_b, draft logits log q[b] in ``draft_logits[b]``
    (S = L steps) and temperature 1.  Randomness: the engine hashes (seed, position), so the
    adapter derives both from the dense seed: ``numpy.random.default_rng(seeds[b])`` gives the
    engine seed (< 2^62) and the request's first position P_b (< 2^20), and row i has position
    P_b + i.  A request's output is thus a function of its dense seed alone; consecutive calls of
    a real engine advance the positions instead, which this layout does not model.  The bonus
    token is drawn by the engine (from the bonus row).  With ``pad_drafts`` every request passes
    all L slots, placeholders as -1.  Uniforms cannot be injected (they are hashed in the kernel).

    Parameters: ``rejection_sample`` (the function or a fake with its signature); ``dtype`` of the
    logits; ``device``; ``block_verification`` (``use_block_verification``: Sun et al., arXiv
    2403.10444); ``pad_drafts``; ``name``.

    Returns: an :class:`EngineAdapter`.

    >>> import numpy as np, torch
    >>> from specsim.testing.engines import vllm_mrv2_rejection_sampler
    >>> def accept_all(target_logits, draft_logits, draft_sampled, cu_num_logits, pos, idx_mapping,
    ...                expanded_idx_mapping, expanded_local_pos, temperature, seed, num_speculative_steps,
    ...                **kw):  # keeps every draft, bonus token 0
    ...     B = len(idx_mapping)
    ...     sampled = torch.zeros(B, num_speculative_steps + 1, dtype=torch.int64)
    ...     n = (cu_num_logits[1:] - cu_num_logits[:-1]).to(torch.int32)
    ...     for b in range(B):
    ...         sampled[b, :n[b] - 1] = draft_sampled[cu_num_logits[b] + 1:cu_num_logits[b + 1]]
    ...     return sampled, n
    >>> p, q = np.full((1, 3, 3), 1 / 3), np.full((1, 2, 3), 1 / 3)
    >>> [x.tolist() for x in vllm_mrv2_rejection_sampler(accept_all)(np.array([[1, 2]]), p, q, np.array([0]))]
    [[2], [0]]
    """
    _check_callable(rejection_sample, "rejection_sample")
    dt, device = _torch_float_dtype(dtype), _torch_device(device)
    check_bool(block_verification, "block_verification")
    check_bool(pad_drafts, "pad_drafts")
    _check_name(name, optional=True)

    def fn(drafts, p, q, seeds):
        import torch

        B, L = drafts.shape
        slots = [L] * B if pad_drafts else [_num_drafts(d) for d in drafts]
        starts = np.concatenate([[0], np.cumsum([k + 1 for k in slots])])
        with np.errstate(divide="ignore", invalid="ignore"):
            logp, logq = np.log(p), np.log(q)
        rows = np.concatenate([logp[b, :slots[b] + 1] for b in range(B)])
        tokens = np.concatenate([np.r_[0, drafts[b, :slots[b]]] for b in range(B)]).astype(np.int64)
        engine_seed, first_pos = np.empty(B, dtype=np.int64), np.empty(B, dtype=np.int64)
        for b in range(B):
            g = np.random.default_rng(int(seeds[b]))
            engine_seed[b], first_pos[b] = g.integers(2 ** 62), g.integers(2 ** 20)
        local = np.concatenate([np.arange(k + 1) for k in slots])
        owner = np.repeat(np.arange(B), [k + 1 for k in slots])
        as_t = lambda a, t=torch.int64: torch.as_tensor(np.ascontiguousarray(a), dtype=t, device=device)  # noqa: E731
        sampled, num_sampled = rejection_sample(
            as_t(rows, dt), as_t(logq, dt), as_t(tokens), as_t(starts, torch.int32), as_t(first_pos[owner] + local),
            as_t(np.arange(B), torch.int32), as_t(owner, torch.int32), as_t(local, torch.int32),
            torch.ones(B, dtype=torch.float32, device=device), as_t(engine_seed), L,
            use_block_verification=block_verification)
        with _reading_output(adapter.name):
            n = num_sampled.cpu().numpy().astype(np.int64)
            out = np.full((B, L + 1), -1, dtype=np.int64)
            sampled = sampled.cpu().numpy()
            for b in range(B):
                if not 1 <= n[b] <= L + 1:
                    raise EngineOutputError(f"{adapter.name}: request {b} returned num_sampled = {n[b]}")
                out[b, :n[b]] = sampled[b, :n[b]]
        return _parse_rows(out, drafts, adapter.name)

    adapter = EngineAdapter(fn, name or ("vllm-mrv2:block" if block_verification else "vllm-mrv2:token"))
    return adapter


def flashinfer_chain_sampler(chain_speculative_sampling, dtype="float32", device="cpu", per_request: bool = True,
                             name: str | None = None) -> EngineAdapter:
    """Adapter for FlashInfer's ``chain_speculative_sampling`` (dense layout; module docstring).

    All requests are passed with L drafts (placeholders as -1, as the dense layout has no
    lengths); tau_b is ``emitted_draft_num[b]``, checked against the output row.  With
    ``per_request`` each request is its own call with ``seed=seeds[b], offset=0``; otherwise one
    call per batch with ``seed=seeds[0]`` (batch invariance is then the engine's own property).

    Parameters: ``chain_speculative_sampling``; ``dtype``; ``device``; ``per_request``; ``name``.

    Returns: an :class:`EngineAdapter`.
    """
    _check_callable(chain_speculative_sampling, "chain_speculative_sampling")
    dt, device = _torch_float_dtype(dtype), _torch_device(device)
    check_bool(per_request, "per_request")
    _check_name(name, optional=True)

    def call(drafts, p, q, seed):
        import torch

        result = chain_speculative_sampling(
            torch.as_tensor(q, dtype=dt, device=device), torch.as_tensor(drafts, device=device),
            torch.as_tensor(p, dtype=dt, device=device), deterministic=True, seed=int(seed), offset=0)
        with _reading_output(adapter.name):
            out, _, emitted = result
            out, emitted = out.cpu().numpy(), emitted.cpu().numpy()
        acc, tok = _parse_rows(out, drafts, adapter.name)
        if not np.array_equal(acc, emitted.reshape(-1)):
            raise EngineOutputError(f"{adapter.name}: emitted_draft_num {emitted.tolist()} disagrees with the "
                                    f"output rows {out.tolist()}")
        return acc, tok

    def fn(drafts, p, q, seeds):
        if not per_request:
            return call(drafts, p, q, seeds[0])
        parts = [call(drafts[b:b + 1], p[b:b + 1], q[b:b + 1], seeds[b]) for b in range(len(drafts))]
        return np.concatenate([a for a, _ in parts]), np.concatenate([t for _, t in parts])

    adapter = EngineAdapter(fn, name or "flashinfer:chain_speculative_sampling")
    return adapter


def sglang_tree_sampler(tree_speculative_sampling_target_only, dtype="float32", device="cpu",
                        name: str | None = None) -> EngineAdapter:
    """Adapter for SGLang's ``tree_speculative_sampling_target_only`` (tree layout; module docstring).

    Request b's chain x_1..x_k becomes the path tree 0 -> 1 -> ... -> k (node 0 the last verified
    token, ``retrive_next_token[b, i] = i + 1``, no siblings; nodes past k_b unreachable), with
    ``retrive_index[b, i] = b n + i``, target rows ``p[b, i]`` at node i and zero draft rows;
    the uniforms (float32, as the engine takes them) come from request b's own generator.  The
    emitted tokens are ``predicts`` read at ``accept_index[b, 0..tau]``, tau =
    ``accept_token_num[b]``.

    Injected uniforms (``adapter(..., uniforms=u)``, u [B, L]): the engine takes its uniforms as
    arguments, so they are passed through: ``uniform_samples[b, i] = u[b, i]``, the coin with
    which the kernel tests node i's child x_{i+1}, rounded to float32 (exact for u = 0); the
    unused coin of node L and ``uniform_samples_for_final_sampling`` still come from the seed.

    Parameters: ``tree_speculative_sampling_target_only`` (the function or a fake with its
    signature); ``dtype`` of the probability tensors; ``device``; ``name``.

    Returns: an :class:`EngineAdapter` (``takes_uniforms`` true).

    >>> import numpy as np, torch
    >>> from specsim.testing.engines import sglang_tree_sampler
    >>> def keep_first(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
    ...                retrive_next_sibling, uniform_samples, uniform_samples_for_final_sampling, target_probs,
    ...                draft_probs, **kw):  # keeps x_1 iff its coin is 0, then emits token 0
    ...     for b in range(len(candidates)):
    ...         tau = int(uniform_samples[b, 0] == 0)
    ...         accept_token_num[b] = tau
    ...         accept_index[b, :tau + 1] = retrive_index[b, :tau + 1].to(torch.int32)
    ...         predicts[retrive_index[b, :tau]] = candidates[b, 1:tau + 1].to(torch.int32)
    ...         predicts[retrive_index[b, tau]] = 0
    >>> engine = sglang_tree_sampler(keep_first)
    >>> p, q = np.full((2, 3, 3), 1 / 3), np.full((2, 2, 3), 1 / 3)
    >>> [x.tolist() for x in engine(np.array([[1, 2], [2, 1]]), p, q, np.array([0, 1]), uniforms=np.zeros((2, 2)))]
    [[1, 1], [0, 0]]
    """
    _check_callable(tree_speculative_sampling_target_only, "tree_speculative_sampling_target_only")
    dt, device = _torch_float_dtype(dtype), _torch_device(device)
    _check_name(name, optional=True)

    def fn(drafts, p, q, seeds, uniforms=None):
        import torch

        B, L = drafts.shape
        n, V = L + 1, p.shape[-1]
        ks = [_num_drafts(d) for d in drafts]
        cand = np.zeros((B, n), dtype=np.int64)
        nxt = np.full((B, n), -1, dtype=np.int64)
        for b, k in enumerate(ks):
            cand[b, 1:k + 1] = drafts[b, :k]
            nxt[b, :k] = np.arange(1, k + 1)
        u = np.empty((B, n), dtype=np.float32)
        u_final = np.empty(B, dtype=np.float32)
        for b in range(B):
            draws = np.random.default_rng(int(seeds[b])).random(n + 1).astype(np.float32)
            u[b], u_final[b] = draws[:n], draws[n]
        if uniforms is not None:  # shape and range checked by EngineAdapter
            u[:, :L] = uniforms  # node i's coin tests its child x_{i+1}
        as_int = lambda a: torch.as_tensor(a, dtype=torch.int64, device=device)  # noqa: E731
        predicts = torch.full((B * n,), -1, dtype=torch.int32, device=device)
        accept_index = torch.full((B, n), -1, dtype=torch.int32, device=device)
        accept_num = torch.zeros(B, dtype=torch.int32, device=device)
        tree_speculative_sampling_target_only(
            predicts, accept_index, accept_num, as_int(cand), as_int(np.arange(B * n).reshape(B, n)), as_int(nxt),
            as_int(np.full((B, n), -1)), torch.as_tensor(u, device=device), torch.as_tensor(u_final, device=device),
            torch.as_tensor(np.ascontiguousarray(p[:, :n]), dtype=dt, device=device),
            torch.zeros((B, n, V), dtype=dt, device=device))
        with _reading_output(adapter.name):
            tau = accept_num.cpu().numpy().astype(np.int64)
            idx, pred = accept_index.cpu().numpy(), predicts.cpu().numpy()
            rows = np.full((B, n), -1, dtype=np.int64)
            for b in range(B):
                if not 0 <= tau[b] <= ks[b] or (idx[b, :tau[b] + 1] < 0).any():
                    raise EngineOutputError(f"{adapter.name}: request {b} returned accept_token_num = {tau[b]}, "
                                            f"accept_index = {idx[b].tolist()}")
                rows[b, :tau[b] + 1] = pred[idx[b, :tau[b] + 1]]
        return _parse_rows(rows, drafts, adapter.name)

    adapter = EngineAdapter(fn, name or "sglang:tree_speculative_sampling_target_only", takes_uniforms=True)
    return adapter


def transformers_chain_sampler(speculative_sampling, dtype="float32", name: str | None = None) -> EngineAdapter:
    """Adapter for transformers' ``_speculative_sampling`` (one request per call; module docstring).

    The logits passed are log p and log q (-inf where zero) of request b's k_b drafts, the
    candidate ids are the draft after a one-token prompt (id 0), and torch's default CPU
    generator is seeded with ``seeds[b]`` before the call.

    Parameters: ``speculative_sampling`` (e.g.
    :func:`specsim.testing.find_transformers_speculative_sampling` ()); ``dtype`` of the logits;
    ``name``.

    Returns: an :class:`EngineAdapter`.
    """
    _check_callable(speculative_sampling, "speculative_sampling")
    dt = _torch_float_dtype(dtype)
    _check_name(name, optional=True)

    def fn(drafts, p, q, seeds):
        import torch

        rows = []
        L = drafts.shape[1]
        for b in range(len(drafts)):
            k = _num_drafts(drafts[b])
            torch.random.default_generator.manual_seed(int(seeds[b]))  # torch.manual_seed is ~100x slower
            with np.errstate(divide="ignore", invalid="ignore"):
                lp, lq = np.log(p[b, :k + 1]), np.log(q[b, :k])
            ids = torch.tensor([[0] + drafts[b, :k].tolist()], dtype=torch.long)
            result = speculative_sampling(candidate_input_ids=ids,
                                          candidate_logits=torch.as_tensor(lq[None], dtype=dt),
                                          candidate_length=k, new_logits=torch.as_tensor(lp[None], dtype=dt))
            with _reading_output(adapter.name):
                valid, n = result
                row = np.full(L + 1, -1, dtype=np.int64)
                v = valid[0].tolist()
                if len(v) != int(n) + 1 or len(v) > L + 1:
                    raise EngineOutputError(f"{adapter.name}: request {b} returned {v} with n_matches = {int(n)}")
                row[:len(v)] = v
            rows.append(row)
        return _parse_rows(np.stack(rows), drafts, adapter.name)

    adapter = EngineAdapter(fn, name or "transformers:_speculative_sampling")
    return adapter
