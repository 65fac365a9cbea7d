"""Adapters that put other implementations in the shape :func:`check_sampler` expects.

Chain sampling layout: ``sample_fn(draft_tokens, p, q, rng) -> (accepted, token)`` with ``p``
[L+1, V] (row k = target(.|x^{1:k}), row L = bonus row), ``q`` [L, V] and ``rng`` a
``numpy.random.Generator`` (docs/theory.md §1).  torch and transformers are imported only when an
adapter is made (its ``dtype`` and ``device`` are checked then, not at the first call).
"""
from __future__ import annotations

import numpy as np

from .._validate import check_real
from ..verifiers.base import as_verifier
from .sampler import BatchSampler

__all__ = ["from_verifier", "torch_batch_sampler", "transformers_sampler", "find_transformers_speculative_sampling"]


def from_verifier(verifier):
    """The chain ``sample_fn(draft, p, q, rng) -> (accepted, token)`` of a verifier: its own
    sampler when it has one (the algorithm run with fresh uniforms), else one draw from its
    exact outcome law.

    Parameters: ``verifier`` (a chain :class:`~specsim.verifiers.base.Verifier` or a plain law
    ``fn(draft, p, q) -> list[Outcome]``).

    Returns: the ``sample_fn`` for :func:`~specsim.testing.check_sampler` (its ``name`` attribute
    is the verifier's name).

    >>> from specsim.models import random_model
    >>> from specsim.testing import check_sampler, from_verifier
    >>> from specsim.verifiers import block
    >>> check_sampler(from_verifier(block), random_model(3, 0), random_model(3, 1), L=2, n=1000).passed
    True
    """
    verifier = as_verifier(verifier)

    def sample_fn(draft, p, q, rng):
        return verifier.sample(draft, p, q, rng=rng)

    sample_fn.name = verifier.name
    return sample_fn


def _check_callable(fn, name: str):
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    return fn


def _check_name(name, arg: str = "name", optional: bool = False):
    if not (isinstance(name, str) or (optional and name is None)):
        raise TypeError(f"{arg} must be a str{' or None' if optional else ''}, got {type(name).__name__}")
    return name


def _torch_float_dtype(dtype, name: str = "dtype"):
    """A floating ``torch.dtype`` from itself or its name ('float32', 'bfloat16', ...), checked when
    the adapter is made (not at its first call)."""
    import torch

    if isinstance(dtype, str):
        dt = getattr(torch, dtype, None)
        if not isinstance(dt, torch.dtype):
            raise ValueError(f"{name}: {dtype!r} is not a torch dtype name (e.g. 'float32', 'bfloat16', 'float64')")
    elif isinstance(dtype, torch.dtype):
        dt = dtype
    else:
        raise TypeError(f"{name} must be a torch floating dtype or its name, got {type(dtype).__name__}")
    if not dt.is_floating_point:
        raise ValueError(f"{name} must be a floating-point dtype (probabilities / logits), got {dt}")
    return dt


def _torch_device(device, name: str = "device"):
    """A ``torch.device`` from itself, a string or a CUDA ordinal, parsed when the adapter is made."""
    import torch

    if isinstance(device, torch.device):
        return device
    if isinstance(device, bool) or not isinstance(device, (str, int, np.integer)):
        raise TypeError(f"{name} must be a str, an int or a torch.device, got {type(device).__name__}")
    try:
        return torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"{name}: {device!r} is not a torch device ({exc})") from None


def torch_batch_sampler(fn, dtype="float32", device="cpu", chunk: int = 4096, name: str | None = None) -> BatchSampler:
    """Wrap a dense torch batch sampler (FlashInfer-style layout, docs/theory.md §11.1) for
    :func:`~specsim.testing.check_sampler`.

    ``fn(draft_token_ids: int64[B, L], draft_probs: [B, L, V], target_probs: [B, L+1, V],
    generator: torch.Generator) -> (accepted: int[B], tokens: int[B])`` where ``accepted`` = tau
    (draft tokens kept) and ``tokens`` the emitted correction / bonus token.  The generator is
    seeded from the check's numpy ``rng`` once per chunk, so runs are reproducible.

    Parameters: ``fn``; ``dtype`` of the probability tensors (name or ``torch.dtype``);
    ``device``; ``chunk`` (drafts per call); ``name`` (for the report).

    Returns: a :class:`~specsim.testing.BatchSampler`.

    >>> import torch
    >>> from specsim.models import random_model
    >>> from specsim.testing import check_sampler, torch_batch_sampler
    >>> def reject_all(ids, q, p, generator):  # tau = 0, y ~ p_0: lossless, accepts nothing
    ...     return torch.zeros(len(ids), dtype=torch.long), torch.multinomial(p[:, 0], 1, generator=generator)[:, 0]
    >>> sampler = torch_batch_sampler(reject_all, dtype="float64")
    >>> check_sampler(sampler, random_model(3, 0), random_model(3, 1), L=2, n=3000).passed
    True
    """
    _check_callable(fn, "fn")
    dt, device = _torch_float_dtype(dtype), _torch_device(device)
    _check_name(name, optional=True)

    def run(drafts, p, q, rng):
        import torch

        g = torch.Generator(device=device)
        g.manual_seed(int(rng.integers(2 ** 62)))
        a, t = fn(torch.as_tensor(drafts, device=device),
                  torch.as_tensor(q, dtype=dt, device=device),
                  torch.as_tensor(p, dtype=dt, device=device), g)
        return a.detach().cpu().numpy(), t.detach().cpu().numpy()

    return BatchSampler(run, chunk, name or getattr(fn, "__name__", "torch batch sampler"))


def find_transformers_speculative_sampling():
    """transformers' speculative sampling function (``transformers.generation.utils._speculative_sampling``
    in 4.x / 5.x), or ``None`` when transformers (an optional third-party dependency) or the
    function is missing.  Versions whose function takes ``is_done_candidate`` (4.x to 5.17) get
    it bound to ``False``, so every version is called with the same keywords.

    Returns: the function or ``None``.

    >>> from specsim.testing.adapters import find_transformers_speculative_sampling
    >>> fn = find_transformers_speculative_sampling()
    >>> fn is None or callable(fn)
    True
    """
    try:
        from transformers.generation import utils
    except Exception:  # noqa: BLE001 - transformers absent or broken
        return None
    fn = getattr(utils, "_speculative_sampling", None)
    import inspect

    if fn is not None and "is_done_candidate" in inspect.signature(fn).parameters:
        # 4.x to 5.17 take a required is_done_candidate (True: the candidate ends in EOS, so no
        # bonus token); later 5.x dropped it.  False is plain verification in every version.
        import functools

        fn = functools.partial(fn, is_done_candidate=False)
    return fn


def transformers_sampler(dtype="float32", assistant_ensemble_weight: float | None = None):
    """``sample_fn`` calling transformers' ``_speculative_sampling`` (Leviathan et al., arXiv 2211.17192, Alg. 1).

    Each call builds logits log p (``new_logits`` [1, L+1, V]) and log q (``candidate_logits``
    [1, L, V]) in ``dtype`` and passes everything by keyword; torch's global generator (the
    function draws with ``torch.rand_like`` / ``torch.multinomial``) is seeded from ``rng`` on the
    first call.  Creating the adapter sets torch to one intra-op thread (the tensors are tiny and
    thread start-up dominated, ~100x slower on a loaded 2-core machine); it returns
    ``(n_matches, last emitted token)``.  ``assistant_ensemble_weight`` is forwarded when set
    (the static-ensemble option of transformers >= 5, lossy by design).

    Parameters: ``dtype`` of the logits; ``assistant_ensemble_weight`` (``None``: not passed).

    Returns: the chain ``sample_fn`` for :func:`~specsim.testing.check_sampler`; ``ValueError``
    when transformers or the option is missing.

    >>> from specsim.models import random_model
    >>> from specsim.testing import check_sampler, transformers_sampler
    >>> check_sampler(transformers_sampler(), random_model(3, 0), random_model(3, 1), L=2, n=500).passed
    True
    """
    fn = find_transformers_speculative_sampling()
    if fn is None:
        raise ValueError("transformers with generation.utils._speculative_sampling is not installed")
    import inspect

    import torch

    params = inspect.signature(fn).parameters
    dt = _torch_float_dtype(dtype)
    if assistant_ensemble_weight is not None:
        check_real(assistant_ensemble_weight, "assistant_ensemble_weight")
        if "assistant_ensemble_weight" not in params:
            raise ValueError("this transformers version has no assistant_ensemble_weight argument")
    torch.set_num_threads(1)
    seeded = []

    def sample_fn(draft, p, q, rng):
        L = len(draft)
        if not seeded:  # once: torch.manual_seed is slow, and later draws continue the stream
            torch.manual_seed(int(rng.integers(2 ** 62)))
            seeded.append(True)
        with np.errstate(divide="ignore"):
            lp, lq = np.log(p), np.log(q)
        kw = dict(candidate_input_ids=torch.tensor([list(draft)], dtype=torch.long),
                  candidate_logits=torch.as_tensor(lq[None], dtype=dt),
                  candidate_length=L,
                  new_logits=torch.as_tensor(lp[None], dtype=dt))
        if assistant_ensemble_weight is not None:
            kw["assistant_ensemble_weight"] = assistant_ensemble_weight
        tokens, n_matches = fn(**kw)
        n = int(n_matches)
        emitted = tokens[0].tolist()
        if len(emitted) != n + 1 or tuple(emitted[:n]) != tuple(draft[:n]):
            raise ValueError(f"_speculative_sampling returned {emitted} with n_matches = {n} for draft {draft}")
        return n, int(emitted[-1])

    sample_fn.name = "transformers._speculative_sampling" + (
        f"(assistant_ensemble_weight={assistant_ensemble_weight})" if assistant_ensemble_weight is not None else "")
    return sample_fn
