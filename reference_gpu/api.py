"""Validated entry points: ragged and dense chain verification, tree RRS, and noise drawing.

Chain verification (docs/theory.md §3, 4, 11): for request b with draft x^{1:L_b},

    tau_b = #leading accepts (token, greedy) or max{i : eta_i < h_i} (block),
    output[b] = (x_1, ..., x_tau, Y, -1, ..., -1),   Y ~ residual row tau (tau < L_b) or bonus row,

with the randomness passed in as tensors (:class:`ChainNoise`), so outputs are a deterministic
function of the inputs.  Sources: Leviathan et al. arXiv 2211.17192; Sun et al. arXiv 2403.10444
(block verification); Miao et al. arXiv 2305.09781 (SpecInfer RRS, :func:`verify_tree`).

Ragged layout (vLLM v1 style, docs/theory.md §11.1): ``draft_token_ids`` int[N], ``cu_num_draft_tokens``
int[B] inclusive cumsum (request b owns [cu[b-1], cu[b]), cu[-1] means the previous element, 0 for
b = 0), ``draft_probs`` float[N, V] or None (one-hot rule for deterministic drafts, docs/theory.md
§3.2), ``target_probs`` float[N + B, V]: request b's L_b + 1 rows [cu[b-1] + b, cu[b] + b], the last
being its bonus row.  Output int32[B, max_L + 1] padded with -1, and ``num_accepted`` = tau int32[B].

The Triton backend runs on CUDA tensors, or on CPU tensors when ``TRITON_INTERPRET=1`` was set
before :mod:`reference_gpu.kernels` was first imported; it agrees with the torch reference bit
for bit.

>>> import torch
>>> from reference_gpu.api import draw_chain_noise, verify_chain
>>> p = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25] * 4, [0.4, 0.3, 0.2, 0.1],   # request 0: L = 2
...                   [0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 0.5, 0.5]], dtype=torch.float64)  # request 1: L = 1
>>> q = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.25] * 4], dtype=torch.float64)
>>> ids, cu = torch.tensor([0, 3, 2]), torch.tensor([2, 3])
>>> noise = draw_chain_noise([2, 1], V=4, seeds=[11, 12])
>>> res = verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode="token", backend="torch")
>>> res.output_token_ids.tolist(), res.num_accepted.tolist()
([[0, 1, -1], [0, -1, -1]], [1, 0])
>>> device = "cuda" if torch.cuda.is_available() else "cpu"     # CPU: the Triton interpreter
>>> on = lambda t: t.to(device)
>>> kernel = verify_chain(on(ids), on(cu), target_probs=on(p), draft_probs=on(q), noise=noise, mode="token",
...                       backend="triton")
>>> torch.equal(kernel.output_token_ids.cpu(), res.output_token_ids)
True
"""
from __future__ import annotations

import numbers
import os
from dataclasses import dataclass
from typing import Sequence

import torch

from specsim._validate import check_bool, check_int, sum_tolerance

from . import reference as ref
from .reference import check_splits  # noqa: F401 (re-exported: part of the api)

__all__ = ["ChainNoise", "TreeNoise", "VerifyResult", "TreeResult", "RaggedBatch", "DenseBatch",
           "draw_chain_noise", "draw_tree_noise", "verify_chain", "verify_chain_dense",
           "verify_tree", "dense_to_ragged", "ragged_to_dense", "triton_usable", "default_atol", "check_splits"]

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@dataclass(frozen=True)
class ChainNoise:
    """Randomness of one chain verification call (docs/theory.md §11.2: randomness is an input).

    ``uniforms`` float64[N] (token acceptance: accept x iff u q(x) < p(x), u in [0, 1)),
    ``etas`` float64[N] (block stops: eta_i < h_i), ``residual``: Exp(1) rows [B, V]
    (``kind="exponential"``) or one uniform per request [B] (``kind="uniform"``, inverse CDF);
    the row serves the residual or the bonus draw (only one is used per request).
    :func:`draw_chain_noise` draws it; tests inject boundary values directly.

    >>> import torch
    >>> from reference_gpu.api import ChainNoise, verify_chain
    >>> p = torch.tensor([[0.5, 0.5], [0.0, 1.0]], dtype=torch.float64)
    >>> q = torch.tensor([[0.9, 0.1]], dtype=torch.float64)
    >>> zero = torch.zeros(1, dtype=torch.float64)
    >>> always = ChainNoise(uniforms=zero, etas=zero, residual=torch.ones(1, 2, dtype=torch.float64))
    >>> res = verify_chain(torch.tensor([0]), torch.tensor([1]), target_probs=p, draft_probs=q, noise=always,
    ...                    backend="torch")
    >>> res.output_token_ids.tolist()
    [[0, 1]]
    """

    uniforms: torch.Tensor
    etas: torch.Tensor
    residual: torch.Tensor
    kind: str = "exponential"


@dataclass(frozen=True)
class TreeNoise:
    """Randomness of one tree call: ``uniforms`` float64[M] (one coin per node, used when the node
    is tested as a child) and ``residual`` ([B, V] Exp(1) rows or [B] uniforms, as in
    :class:`ChainNoise`); :func:`draw_tree_noise` draws it.

    >>> from reference_gpu.api import draw_tree_noise
    >>> noise = draw_tree_noise([4, 2], V=3, seeds=[5, 6])
    >>> tuple(noise.uniforms.shape), tuple(noise.residual.shape), noise.kind
    ((6,), (2, 3), 'exponential')
    """

    uniforms: torch.Tensor
    residual: torch.Tensor
    kind: str = "exponential"


@dataclass(frozen=True)
class VerifyResult:
    """Result of :func:`verify_chain`: ``output_token_ids`` int32[B, max_L+1] (request b's
    tau_b accepted drafts then one emitted token, -1 padding) and ``num_accepted`` int32[B]
    (tau_b, excluding the emitted token), so request b emits tau_b + 1 tokens."""

    output_token_ids: torch.Tensor
    num_accepted: torch.Tensor


@dataclass(frozen=True)
class TreeResult:
    """Result of :func:`verify_tree`: ``output_token_ids`` int32[B, max_depth+1] (the accepted
    path's tokens, then one emitted token, -1 padding), ``accepted_node`` (local node id,
    0 = root) and ``num_accepted`` (depth of that node) int32[B]."""

    output_token_ids: torch.Tensor
    accepted_node: torch.Tensor
    num_accepted: torch.Tensor


@dataclass(frozen=True)
class RaggedBatch:
    """Ragged chain batch (vLLM v1 layout, module docstring): ``draft_token_ids`` [N],
    ``cu_num_draft_tokens`` [B] (inclusive cumsum), ``draft_probs`` [N, V] or None,
    ``target_probs`` [N + B, V]; :func:`ragged_to_dense` converts it (example there)."""

    draft_token_ids: torch.Tensor
    cu_num_draft_tokens: torch.Tensor
    draft_probs: torch.Tensor | None
    target_probs: torch.Tensor


@dataclass(frozen=True)
class DenseBatch:
    """Dense chain batch (FlashInfer style): ``draft_token_ids`` [B, L] (-1 past ``num_draft_tokens``),
    ``draft_probs`` [B, L, V] or None, ``target_probs`` [B, L+1, V] (request b's bonus row at
    index ``num_draft_tokens[b]``; padding rows are zero); :func:`dense_to_ragged` converts it."""

    draft_token_ids: torch.Tensor
    draft_probs: torch.Tensor | None
    target_probs: torch.Tensor
    num_draft_tokens: torch.Tensor


# --------------------------------------------------------------------------- helpers
def default_atol(dtype: torch.dtype, V: int) -> float:
    """Tolerance on |row sum - 1| for rows of ``dtype`` over ``V`` tokens: the core's
    max(1e-8, min(4 V eps(dtype), 1e-2)) (:func:`specsim._validate.sum_tolerance`, docs/design.md
    "The input contract"), so these entry points accept exactly the rows ``specsim`` accepts.

    Parameters: ``dtype`` (a torch floating dtype), ``V`` (row length).

    Returns: the tolerance, a ``float``.

    >>> import torch
    >>> from reference_gpu.api import default_atol
    >>> default_atol(torch.float32, 3), default_atol(torch.float32, 50_000), default_atol(torch.float64, 50_000)
    (1.430511474609375e-06, 0.01, 1e-08)
    """
    return sum_tolerance(torch.finfo(dtype).eps, V)


def triton_usable(device: torch.device) -> bool:
    """True when the Triton kernels can run on ``device``: triton is installed and the device is
    CUDA, or CPU with ``TRITON_INTERPRET=1`` in the environment (``backend="auto"`` then picks
    Triton).

    >>> import os, torch
    >>> from reference_gpu.api import triton_usable
    >>> triton_usable(torch.device("cpu")) == (os.environ.get("TRITON_INTERPRET") == "1")
    True
    """
    try:
        import triton  # noqa: F401
    except Exception:
        return False
    if device.type == "cuda":
        return True
    return device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"


def _backend(backend: str, device: torch.device) -> str:
    if not isinstance(backend, str):
        raise TypeError(f"backend must be 'auto', 'triton' or 'torch', got {type(backend).__name__}")
    if backend not in ("auto", "triton", "torch"):
        raise ValueError(f"backend must be 'auto', 'triton' or 'torch', got {backend!r}")
    if backend == "auto":
        return "triton" if triton_usable(device) else "torch"
    if backend == "triton" and not triton_usable(device):
        raise ValueError(f"backend='triton' needs a CUDA tensor or TRITON_INTERPRET=1, got device {device}")
    return backend


def _int_vector(x, name: str, device=None) -> torch.Tensor:
    t = torch.as_tensor(x, device=device)
    if t.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
    if t.numel() and (t.dtype.is_floating_point or t.dtype == torch.bool or t.is_complex()):
        raise TypeError(f"{name} must have an integer dtype, got {t.dtype}")
    return t.to(torch.int64)


def _check_atol(atol) -> float | None:
    """``atol`` of the row-sum check: ``None`` (:func:`default_atol` of the rows) or a real
    number in [0, 1); NaN would pass every row and atol >= 1 a row summing to 2."""
    if atol is None:
        return None
    if isinstance(atol, bool) or not isinstance(atol, numbers.Real):
        raise TypeError(f"atol must be None or a real number, got {type(atol).__name__}")
    atol = float(atol)
    if not 0.0 <= atol < 1.0:   # also False for NaN
        raise ValueError(f"atol must be finite and in [0, 1), got {atol!r}")
    return atol


def _check_tensor(x, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")


def _check_rows(x: torch.Tensor, name: str, shape, atol, rows_to_check=None) -> None:
    _check_tensor(x, name)
    if x.dtype not in _FLOATS:
        raise TypeError(f"{name} must be float16/bfloat16/float32/float64, got {x.dtype}")
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(x.shape)}")
    if x.numel() == 0:
        return
    a = x.to(torch.float64)
    bad = ~torch.isfinite(a)
    if bool(bad.any()):
        r = int(bad.any(-1).nonzero()[0])
        raise ValueError(f"{name}: row {r} has a NaN or infinite entry")
    if bool((a < 0).any()):
        r = int((a < 0).any(-1).nonzero()[0])
        raise ValueError(f"{name}: row {r} has a negative entry")
    tol = default_atol(x.dtype, x.shape[-1]) if atol is None else atol
    s = a.sum(-1)
    off = (s - 1).abs() > tol
    if rows_to_check is not None:
        off = off & rows_to_check
    if bool(off.any()):
        r = int(off.nonzero()[0])
        raise ValueError(f"{name}: row {r} sums to {float(s[r]):.9g}, not 1 (tolerance {tol:g})")


def _check_unit(x, name: str, shape, device) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float64:
        got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
        raise TypeError(f"{name} must be a float64 tensor (24-bit float32 uniforms bias P(u < a)), got {got}")
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(x.shape)}")
    if x.numel() and not bool(((x >= 0) & (x < 1)).all()):
        raise ValueError(f"{name}: every entry must lie in [0, 1) (docs/theory.md §11.3)")
    return x.to(device).contiguous()


def _check_residual(noise, B, V, device):
    if noise.kind not in ref.NOISE_KINDS:
        raise ValueError(f"noise kind must be one of {ref.NOISE_KINDS}, got {noise.kind!r}")
    r = noise.residual
    if noise.kind == "uniform":
        return _check_unit(r, "noise.residual (uniform)", (B,), device)
    if not isinstance(r, torch.Tensor) or r.dtype not in (torch.float32, torch.float64):
        got = r.dtype if isinstance(r, torch.Tensor) else type(r).__name__
        raise TypeError(f"noise.residual (exponential) must be a float32 or float64 tensor, got {got}")
    if tuple(r.shape) != (B, V):
        raise ValueError(f"noise.residual (exponential) must have shape {(B, V)}, got {tuple(r.shape)}")
    if r.numel() and not bool((torch.isfinite(r) & (r >= 0)).all()):
        raise ValueError("noise.residual (exponential): entries must be finite and >= 0")
    return r.to(device).contiguous()


# --------------------------------------------------------------------------- noise
def _generators(n: int, seeds, generator) -> list[torch.Generator]:
    if seeds is None:
        if generator is None:
            raise ValueError("give per-request seeds or a torch.Generator")
        if not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        # drawn on the generator's own device (a CUDA generator cannot drive a CPU draw)
        seeds = torch.randint(0, 2 ** 62, (n,), generator=generator, device=generator.device).tolist()
    seeds = [check_int(s, f"seeds[{i}]", 0) for i, s in enumerate(seeds)]
    if len(seeds) != n:
        raise ValueError(f"need one seed per request: {n} requests, {len(seeds)} seeds")
    return [torch.Generator().manual_seed(s) for s in seeds]


def draw_chain_noise(num_draft_tokens: Sequence[int], V: int, seeds: Sequence[int] | None = None,
                     generator: torch.Generator | None = None, kind: str = "exponential",
                     device="cpu") -> ChainNoise:
    """u, eta ~ U[0,1)^{L_b} (float64) and the residual noise (Exp(1)^V or U[0,1)) per request.

    Request b's noise comes from its own generator seeded with ``seeds[b]`` (or a seed drawn from
    ``generator``), so it does not depend on the rest of the batch (docs/theory.md §11.2).

    Parameters: ``num_draft_tokens`` (L_b per request, >= 0), ``V``, ``seeds`` (one per request)
    or ``generator`` (a ``torch.Generator``), ``kind`` (``"exponential"`` or ``"uniform"``),
    ``device``.

    Returns: a :class:`ChainNoise` in the ragged layout (N = sum L_b entries).

    >>> from reference_gpu.api import draw_chain_noise
    >>> noise = draw_chain_noise([2, 1], V=4, seeds=[11, 12])
    >>> tuple(noise.uniforms.shape), tuple(noise.residual.shape)
    ((3,), (2, 4))
    >>> alone = draw_chain_noise([1], V=4, seeds=[12])       # request 1 on its own: same noise
    >>> alone.uniforms.tolist() == noise.uniforms[2:].tolist()
    True
    """
    if not isinstance(kind, str):
        raise TypeError(f"kind must be one of {ref.NOISE_KINDS}, got {type(kind).__name__}")
    if kind not in ref.NOISE_KINDS:
        raise ValueError(f"kind must be one of {ref.NOISE_KINDS}, got {kind!r}")
    V = check_int(V, "V", 2)
    if isinstance(num_draft_tokens, torch.Tensor):
        num_draft_tokens = _int_vector(num_draft_tokens, "num_draft_tokens").tolist()
    lens = [check_int(x, f"num_draft_tokens[{i}]", 0) for i, x in enumerate(num_draft_tokens)]
    u, e, r = [], [], []
    for L, g in zip(lens, _generators(len(lens), seeds, generator)):
        u.append(torch.rand(L, generator=g, dtype=torch.float64))
        e.append(torch.rand(L, generator=g, dtype=torch.float64))
        if kind == "exponential":
            r.append(torch.empty(V, dtype=torch.float64).exponential_(generator=g))
        else:
            r.append(torch.rand(1, generator=g, dtype=torch.float64))
    cat = lambda xs, shape: (torch.cat(xs) if xs else torch.zeros(shape, dtype=torch.float64)).to(device)
    res = (torch.stack(r) if kind == "exponential" else torch.cat(r)) if r else \
        torch.zeros((0, V) if kind == "exponential" else (0,), dtype=torch.float64)
    return ChainNoise(cat(u, 0), cat(e, 0), res.to(device), kind)


def draw_tree_noise(num_nodes: Sequence[int], V: int, seeds: Sequence[int] | None = None,
                    generator: torch.Generator | None = None, kind: str = "exponential",
                    device="cpu") -> TreeNoise:
    """One coin per node and the residual noise per request, keyed by per-request seeds (the
    noise :func:`draw_chain_noise` draws for ``num_nodes`` "tokens" per request).

    Parameters: ``num_nodes`` (nodes per tree, the root included), ``V``, ``seeds`` or
    ``generator``, ``kind``, ``device``.  Returns: a :class:`TreeNoise`.

    >>> from reference_gpu.api import draw_tree_noise
    >>> tuple(draw_tree_noise([4], V=3, seeds=[5], kind="uniform").residual.shape)
    (1,)
    """
    n = draw_chain_noise(num_nodes, V, seeds, generator, kind, device)
    return TreeNoise(n.uniforms, n.residual, kind)


# --------------------------------------------------------------------------- chain
def _validate_chain(ids, cu, q, p, noise, mode, atol):
    atol = _check_atol(atol)
    if not isinstance(mode, str):
        raise TypeError(f"mode must be one of {ref.MODES}, got {type(mode).__name__}")
    if mode not in ref.MODES:
        raise ValueError(f"mode must be one of {ref.MODES}, got {mode!r}")
    _check_tensor(p, "target_probs")
    if p.ndim != 2:
        raise ValueError(f"target_probs must be a 2-D tensor [N + B, V], got shape {tuple(p.shape)}")
    device, V = p.device, p.shape[1]
    if V < 2:
        raise ValueError(f"vocabulary size must be >= 2, got {V}")
    ids = _int_vector(ids, "draft_token_ids", device)
    cu = _int_vector(cu, "cu_num_draft_tokens", device)
    N, B = ids.numel(), cu.numel()
    if B == 0:
        raise ValueError("cu_num_draft_tokens is empty: need at least one request")
    lens = torch.diff(cu, prepend=cu.new_zeros(1))
    if bool((lens < 0).any()):
        raise ValueError(f"cu_num_draft_tokens must be a non-decreasing inclusive cumsum starting >= 0, got {cu.tolist()}")
    if int(cu[-1]) != N:
        raise ValueError(f"cu_num_draft_tokens ends at {int(cu[-1])} but draft_token_ids has {N} entries")
    _check_rows(p, "target_probs", (N + B, V), atol)
    if q is not None:
        _check_rows(q, "draft_probs", (N, V), atol)
    bad = (ids < 0) | (ids >= V)
    if bool(bad.any()):
        i = int(bad.nonzero()[0])
        b = int((cu <= i).sum())
        raise ValueError(f"draft_token_ids[{i}] = {int(ids[i])} (request {b}) outside 0..{V - 1}")
    if q is not None and mode != "greedy" and N:
        qx = q.to(torch.float64).gather(1, ids[:, None])[:, 0]
        if bool((qx <= 0).any()):
            i = int((qx <= 0).nonzero()[0])
            raise ValueError(f"draft_token_ids[{i}] = {int(ids[i])} has draft probability 0: "
                             "it cannot have been drawn from draft_probs")
    if not isinstance(noise, ChainNoise):
        raise TypeError(f"noise must be a ChainNoise (see draw_chain_noise), got {type(noise).__name__}")
    u = _check_unit(noise.uniforms, "noise.uniforms", (N,), device)
    e = _check_unit(noise.etas, "noise.etas", (N,), device)
    r = _check_residual(noise, B, V, device)
    return ids, cu, u, e, r, int(lens.max())


def verify_chain(draft_token_ids, cu_num_draft_tokens, *, target_probs, draft_probs,
                 noise: ChainNoise, mode: str = "token", backend: str = "auto",
                 atol: float | None = None, validate: bool = True, splits: int | None = None) -> VerifyResult:
    """Verify a ragged batch of draft chains: per request b, tau_b and the tokens
    (x_1..x_tau, Y) of the module docstring, under the token rule (Leviathan et al.), the block
    rule (Sun et al.) or greedy matching; the rules in full are in :mod:`reference_gpu.reference`.

    Parameters: ``draft_token_ids`` int [N], ``cu_num_draft_tokens`` int [B]; keyword-only
    (target before draft, as everywhere in the package): ``target_probs`` [N + B, V],
    ``draft_probs`` [N, V] or ``None`` (one-hot drafts, docs/theory.md §3.2),
    ``noise`` (:class:`ChainNoise`), ``mode`` (``"token"``, ``"block"``, ``"greedy"``),
    ``backend`` (``"triton"``: CUDA, or CPU with TRITON_INTERPRET=1; ``"torch"``: the
    reference; ``"auto"``), ``atol`` (tolerance on |row sum - 1|, a number in [0, 1); default
    :func:`default_atol` of the rows' dtype and V, so float32, float16 and bfloat16 rows that
    sum to 1 to their precision are accepted), ``validate`` (check every argument first, as in
    docs/design.md "The input contract": bad values raise ``ValueError`` and bad types
    ``TypeError`` (not a tensor, a float dtype for ids, a non-float64 uniform, a non-number
    ``atol``), naming the argument), ``splits`` (Triton backend: vocabulary chunks per request,
    ``None`` = automatic, 1 = one program per request; results are bit-identical for every
    value; anything but ``None`` or an int >= 1 raises ``ValueError``).  Inputs are never modified.

    Returns: a :class:`VerifyResult`.

    >>> import torch
    >>> from reference_gpu.api import draw_chain_noise, verify_chain
    >>> p = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.25] * 4, [0.4, 0.3, 0.2, 0.1],
    ...                   [0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 0.5, 0.5]], dtype=torch.float64)
    >>> q = torch.tensor([[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4], [0.25] * 4], dtype=torch.float64)
    >>> ids, cu, noise = torch.tensor([0, 3, 2]), torch.tensor([2, 3]), draw_chain_noise([2, 1], 4, seeds=[11, 12])
    >>> for mode in ("token", "block", "greedy"):
    ...     res = verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode=mode, backend="torch")
    ...     print(mode, res.output_token_ids.tolist())
    token [[0, 1, -1], [0, -1, -1]]
    block [[3, -1, -1], [0, -1, -1]]
    greedy [[3, -1, -1], [0, -1, -1]]
    >>> verify_chain(ids, cu, target_probs=p[:4], draft_probs=q, noise=noise)
    Traceback (most recent call last):
    ...
    ValueError: target_probs must have shape (5, 4), got (4, 4)
    """
    p = target_probs
    check_splits(splits)
    if check_bool(validate, "validate"):
        ids, cu, u, e, r, Lmax = _validate_chain(draft_token_ids, cu_num_draft_tokens, draft_probs,
                                                 p, noise, mode, atol)
    else:
        ids, cu = torch.as_tensor(draft_token_ids), torch.as_tensor(cu_num_draft_tokens)
        u, e, r = noise.uniforms, noise.etas, noise.residual
        Lmax = int(torch.diff(cu.to(torch.int64), prepend=cu.new_zeros(1, dtype=torch.int64)).max())
    device = p.device
    if _backend(backend, device) == "torch":
        out, tau = ref.chain_reference(ids, cu, draft_probs, p, u, e, r, mode, noise.kind)
        return VerifyResult(out, tau)
    from .kernels import launch_chain
    B = cu.numel()
    out = torch.full((B, Lmax + 1), -1, dtype=torch.int32, device=device)
    tau = torch.empty(B, dtype=torch.int32, device=device)
    dummy = torch.zeros(1, dtype=torch.float64, device=device)
    launch_chain(ids.to(torch.int32).contiguous(), cu.to(torch.int32).contiguous(),
                 None if draft_probs is None else draft_probs.contiguous(), p.contiguous(),
                 u if u.numel() else dummy, e if e.numel() else dummy, r.contiguous(), out, tau,
                 mode, noise.kind, splits=splits)
    return VerifyResult(out, tau)


# --------------------------------------------------------------------------- dense adapter
def ragged_to_dense(batch: RaggedBatch) -> DenseBatch:
    """Ragged -> dense: pad drafts with -1 and probability rows with zeros (exact inverse of
    :func:`dense_to_ragged`).

    Returns: a :class:`DenseBatch` with L = max_b L_b.

    >>> import torch
    >>> from reference_gpu.api import RaggedBatch, dense_to_ragged, ragged_to_dense
    >>> p, q = torch.full((5, 4), 0.25, dtype=torch.float64), torch.full((3, 4), 0.25, dtype=torch.float64)
    >>> ragged = RaggedBatch(torch.tensor([0, 3, 2]), torch.tensor([2, 3]), q, p)
    >>> dense = ragged_to_dense(ragged)
    >>> dense.draft_token_ids.tolist(), dense.num_draft_tokens.tolist(), tuple(dense.target_probs.shape)
    ([[0, 3], [2, -1]], [2, 1], (2, 3, 4))
    >>> back = dense_to_ragged(dense)
    >>> back.draft_token_ids.tolist(), back.cu_num_draft_tokens.tolist(), torch.equal(back.target_probs, p)
    ([0, 3, 2], [2, 3], True)
    """
    ids, cu, q, p = batch.draft_token_ids, batch.cu_num_draft_tokens, batch.draft_probs, batch.target_probs
    cu64 = cu.to(torch.int64)
    lens = torch.diff(cu64, prepend=cu64.new_zeros(1))
    B, V = lens.numel(), p.shape[-1]
    L = int(lens.max()) if B else 0
    k = torch.arange(L + 1, device=p.device)
    start = cu64 - lens
    inside = k[None, :L] < lens[:, None]
    flat = (start[:, None] + k[None, :L]).clamp(max=max(ids.numel() - 1, 0))
    d_ids = torch.full((B, L), -1, dtype=ids.dtype, device=ids.device)
    if ids.numel():
        d_ids = torch.where(inside, ids[flat], d_ids)
    rows_in = k[None, :] <= lens[:, None]
    trow = (start + torch.arange(B, device=p.device))[:, None] + k[None, :]
    d_p = torch.where(rows_in[..., None], p[trow.clamp(max=p.shape[0] - 1)], torch.zeros((), dtype=p.dtype))
    d_q = None
    if q is not None:
        d_q = torch.zeros((B, L, V), dtype=q.dtype, device=q.device)
        if q.shape[0]:
            d_q = torch.where(inside[..., None], q[flat], d_q)
    return DenseBatch(d_ids, d_q, d_p, lens)


def dense_to_ragged(batch: DenseBatch) -> RaggedBatch:
    """Dense -> ragged: keep request b's first L_b drafts and L_b + 1 target rows (example in
    :func:`ragged_to_dense`).

    Returns: a :class:`RaggedBatch` (``cu_num_draft_tokens`` int32).
    """
    ids, q, p, lens = batch.draft_token_ids, batch.draft_probs, batch.target_probs, batch.num_draft_tokens
    lens = torch.as_tensor(lens, device=ids.device).to(torch.int64)
    B, L = ids.shape
    k = torch.arange(L + 1, device=ids.device)
    inside = k[None, :L] < lens[:, None]
    rows_in = k[None, :] <= lens[:, None]
    return RaggedBatch(ids[inside], torch.cumsum(lens, 0).to(torch.int32),
                       None if q is None else q[inside], p[rows_in])


def verify_chain_dense(draft_token_ids, *, target_probs, draft_probs, noise: ChainNoise,
                       num_draft_tokens=None, mode: str = "token", backend: str = "auto",
                       atol: float | None = None) -> VerifyResult:
    """Dense adapter: ``draft_token_ids`` [B, L]; keyword-only ``target_probs`` [B, L+1, V] (row L_b =
    bonus), ``draft_probs`` [B, L, V] or None; ``num_draft_tokens`` [B] (default L for all).

    Converted with :func:`dense_to_ragged` and verified by :func:`verify_chain` (``noise`` is in
    the ragged layout, e.g. ``draw_chain_noise(num_draft_tokens, V, seeds)``); ``mode``,
    ``backend`` and ``atol`` as there.

    Returns: a :class:`VerifyResult` with ``output_token_ids`` [B, L+1].

    >>> import torch
    >>> from reference_gpu.api import draw_chain_noise, verify_chain_dense
    >>> p = torch.tensor([[[0.1, 0.2, 0.3, 0.4], [0.25] * 4, [0.4, 0.3, 0.2, 0.1]],
    ...                   [[0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 0.5, 0.5], [0.0] * 4]], dtype=torch.float64)
    >>> q = torch.tensor([[[0.4, 0.3, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]], [[0.25] * 4, [0.0] * 4]], dtype=torch.float64)
    >>> ids = torch.tensor([[0, 3], [2, -1]])
    >>> res = verify_chain_dense(ids, target_probs=p, draft_probs=q, noise=draw_chain_noise([2, 1], 4, seeds=[11, 12]),
    ...                          num_draft_tokens=[2, 1], backend="torch")
    >>> res.output_token_ids.tolist(), res.num_accepted.tolist()      # as the ragged example
    ([[0, 1, -1], [0, -1, -1]], [1, 0])
    """
    ids = torch.as_tensor(draft_token_ids)
    if ids.ndim != 2:
        raise ValueError(f"draft_token_ids must be [B, L], got shape {tuple(ids.shape)}")
    B, L = ids.shape
    _check_tensor(target_probs, "target_probs")
    if target_probs.ndim != 3 or tuple(target_probs.shape[:2]) != (B, L + 1):
        raise ValueError(f"target_probs must be [B, L+1, V] = [{B}, {L + 1}, V], got shape {tuple(target_probs.shape)}")
    if draft_probs is not None:
        _check_tensor(draft_probs, "draft_probs")
    if draft_probs is not None and tuple(draft_probs.shape) != (B, L, target_probs.shape[2]):
        raise ValueError(f"draft_probs must be [B, L, V] = {(B, L, target_probs.shape[2])}, got {tuple(draft_probs.shape)}")
    lens = torch.full((B,), L, dtype=torch.int64) if num_draft_tokens is None else _int_vector(num_draft_tokens, "num_draft_tokens")
    if lens.numel() != B or bool(((lens < 0) | (lens > L)).any()):
        raise ValueError(f"num_draft_tokens must have {B} entries in 0..{L}, got {lens.tolist()}")
    rb = dense_to_ragged(DenseBatch(ids, draft_probs, target_probs, lens.to(ids.device)))
    res = verify_chain(rb.draft_token_ids, rb.cu_num_draft_tokens, target_probs=rb.target_probs,
                       draft_probs=rb.draft_probs, noise=noise, mode=mode, backend=backend, atol=atol)
    out = torch.full((B, L + 1), -1, dtype=torch.int32, device=res.output_token_ids.device)
    out[:, :res.output_token_ids.shape[1]] = res.output_token_ids
    return VerifyResult(out, res.num_accepted)


# --------------------------------------------------------------------------- tree
def _validate_tree(tokens, parent, cu, p, q, noise, atol):
    atol = _check_atol(atol)
    _check_tensor(p, "target_probs")
    if p.ndim != 2:
        raise ValueError(f"target_probs must be a 2-D tensor [M, V], got shape {tuple(p.shape)}")
    device, V = p.device, p.shape[1]
    if V < 2:
        raise ValueError(f"vocabulary size must be >= 2, got {V}")
    tok = _int_vector(tokens, "tokens", device)
    par = _int_vector(parent, "parent", device)
    cu = _int_vector(cu, "cu_num_nodes", device)
    M, B = tok.numel(), cu.numel()
    if par.numel() != M:
        raise ValueError(f"parent has {par.numel()} entries, tokens has {M}")
    if B == 0:
        raise ValueError("cu_num_nodes is empty: need at least one request")
    lens = torch.diff(cu, prepend=cu.new_zeros(1))
    if bool((lens < 1).any()) or int(cu[-1]) != M:
        raise ValueError(f"cu_num_nodes must be an increasing inclusive cumsum ending at {M} (every tree has a root), got {cu.tolist()}")
    tl, pl = tok.tolist(), par.tolist()
    start = (cu - lens).tolist()
    internal = torch.zeros(M, dtype=torch.bool)
    depth = [0] * M
    for b in range(B):
        s, n = start[b], int(lens[b])
        if tl[s] != -1 or pl[s] != -1:
            raise ValueError(f"tree {b}: node 0 must be the root (token -1, parent -1)")
        for c in range(1, n):
            if not 0 <= pl[s + c] < c:
                raise ValueError(f"tree {b}: node {c} has parent {pl[s + c]}; parents must precede children")
            if not 0 <= tl[s + c] < V:
                raise ValueError(f"tree {b}: node {c} has token {tl[s + c]} outside 0..{V - 1}")
            internal[s + pl[s + c]] = True
            depth[s + c] = depth[s + pl[s + c]] + 1
    _check_rows(p, "target_probs", (M, V), atol)
    _check_rows(q, "draft_probs", (M, V), atol, rows_to_check=internal.to(device))
    for b in range(B):
        s, n = start[b], int(lens[b])
        for c in range(1, n):
            if float(q[s + pl[s + c], tl[s + c]]) <= 0:
                raise ValueError(f"tree {b}: node {c} (token {tl[s + c]}) has draft probability 0 at its parent")
    if not isinstance(noise, TreeNoise):
        raise TypeError(f"noise must be a TreeNoise (see draw_tree_noise), got {type(noise).__name__}")
    u = _check_unit(noise.uniforms, "noise.uniforms", (M,), device)
    r = _check_residual(noise, B, V, device)
    return tok, par, cu, u, r, max(depth) if depth else 0


def verify_tree(tokens, parent, cu_num_nodes, *, target_probs, draft_probs, noise: TreeNoise,
                backend: str = "auto", atol: float | None = None) -> TreeResult:
    """SpecInfer recursive rejection sampling on a ragged batch of draft trees (docs/theory.md §6.1).

    At node u with children c_1..c_k (node order): accept c_j iff U_{c_j} q_u(x) < R_{j-1}(x), else
    R_j = norm((R_{j-1} - q_u)_+), R_0 = p_u; descend on acceptance; otherwise emit Y ~ R_k (a leaf
    emits its bonus from p_u).  Layout: ``tokens``/``parent`` int[M] (node 0 of each tree is the root:
    token -1, parent -1; local parent indices, parents first), ``cu_num_nodes`` int[B] inclusive,
    ``target_probs``/``draft_probs`` [M, V] (q rows used at internal nodes only).

    Parameters: those above (``target_probs``, ``draft_probs`` and what follows keyword-only, as in
    :func:`verify_chain`), ``noise`` (:class:`TreeNoise`), ``backend`` and ``atol`` as there;
    every argument is checked (``ValueError`` for a bad value, ``TypeError`` for a bad type,
    naming it).

    Returns: a :class:`TreeResult`.

    >>> import torch
    >>> from reference_gpu.api import draw_tree_noise, verify_tree
    >>> tokens, parent = torch.tensor([-1, 1, 2, 0]), torch.tensor([-1, 0, 0, 1])   # root -> 1 -> 0, root -> 2
    >>> p = torch.tensor([[0.2, 0.3, 0.5], [0.6, 0.2, 0.2], [1/3] * 3, [0.1, 0.1, 0.8]], dtype=torch.float64)
    >>> q = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25], [0.0] * 3, [0.0] * 3], dtype=torch.float64)
    >>> res = verify_tree(tokens, parent, torch.tensor([4]), target_probs=p, draft_probs=q,
    ...                   noise=draw_tree_noise([4], 3, seeds=[5]), backend="torch")
    >>> res.output_token_ids.tolist(), res.accepted_node.tolist(), res.num_accepted.tolist()
    ([[1, 0, 2]], [3], [2])
    """
    tok, par, cu, u, r, D = _validate_tree(tokens, parent, cu_num_nodes, target_probs, draft_probs,
                                           noise, atol)
    device = target_probs.device
    if _backend(backend, device) == "torch":
        out, node, depth = ref.tree_reference(tok, par, cu, target_probs, draft_probs, u, r, noise.kind)
        return TreeResult(out[:, :D + 1].contiguous(), node, depth)
    from .kernels import launch_tree
    B = cu.numel()
    out = torch.full((B, D + 1), -1, dtype=torch.int32, device=device)
    node = torch.empty(B, dtype=torch.int32, device=device)
    depth = torch.empty(B, dtype=torch.int32, device=device)
    launch_tree(tok.to(torch.int32).contiguous(), par.to(torch.int32).contiguous(),
                cu.to(torch.int32).contiguous(), target_probs.contiguous(), draft_probs.contiguous(),
                u, r, out, node, depth, noise.kind)
    return TreeResult(out, node, depth)
