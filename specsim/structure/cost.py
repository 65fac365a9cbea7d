"""The cost of one speculative iteration, in units of one plain decoding step.

One iteration makes ``draft_passes`` forward passes of the draft model (pass i reads
``n_i`` query tokens: 1 for a chain, the width of depth i for a tree drafted level by level),
then one target call that reads ``n`` query tokens (the last emitted token plus every drafted
node, so ``n = 1 + drafted nodes``), plus a fixed ``overhead``.  Plain decoding makes one target
call with one query token per emitted token, so ``target(1)`` is the unit and a speedup is
``(E[tokens] / E[cost]) * target(1)`` (renewal-reward: iterations are i.i.d. given the model
pair, so tokens per unit cost converges to the ratio of expectations).

>>> from specsim.structure import CostModel, leviathan_speedup
>>> cost = CostModel(draft=0.05)                      # flat target call, a draft pass costs 5%
>>> cost.iteration([1, 1, 1, 1], 5)                   # a chain of L = 4: 4 draft passes, 5 query tokens
1.2
>>> round(leviathan_speedup(0.8, 4, 0.05), 6)         # (1 - a^5) / ((1 - a)(4c + 1))
2.801333
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .._validate import check_int, check_real

__all__ = ["CostModel", "leviathan_speedup"]


def _as_cost(value, name: str):
    """A cost given as a number (flat), a table (entry n-1 = cost at n query tokens) or a callable."""
    if callable(value):
        return value
    if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool):
        return check_real(value, name, 0.0)
    try:
        table = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a number, a table of costs or a callable, got {value!r}") from None
    if table.ndim != 1 or table.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D table (entry n-1 = cost at n query tokens), "
                         f"got shape {table.shape}")
    if not np.all(np.isfinite(table)) or np.any(table <= 0):
        raise ValueError(f"{name} must hold positive finite costs, got {table.tolist()}")
    if np.any(np.diff(table) < 0):
        raise ValueError(f"{name} must be non-decreasing in the number of query tokens, got {table.tolist()}")
    return tuple(float(x) for x in table)


def _evaluate(cost, n: int, name: str) -> float:
    if isinstance(cost, float):
        return cost
    if isinstance(cost, tuple):
        if n > len(cost):
            raise ValueError(f"{name} table covers 1..{len(cost)} query tokens, asked for {n}")
        return cost[n - 1]
    value = cost(n)
    return check_real(value, f"{name}({n})", 0.0)


@dataclass(frozen=True)
class CostModel:
    """Costs of the calls one speculative iteration makes, relative to one plain decoding step.

    Parameters: ``draft`` (cost of one draft forward pass; a number, a table whose entry n-1 is
    the cost at n query tokens, or a callable ``n -> cost``; default 0), ``target`` (cost of one
    target call reading n query tokens, same forms; default 1.0, flat: the memory-bound regime of
    Leviathan et al., arXiv 2211.17192), ``overhead`` (fixed cost per speculative iteration,
    default 0).  Tables must be positive and non-decreasing; a callable's values are checked
    where they are used.

    Methods: ``draft_cost(n)``, ``target_cost(n)``, ``iteration(draft_passes, n)`` (draft passes
    given as their query-token counts), ``plain`` (cost per token of plain decoding,
    ``target_cost(1)``).
    """

    draft: float | Sequence[float] | Callable[[int], float] = 0.0
    target: float | Sequence[float] | Callable[[int], float] = 1.0
    overhead: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "draft", _as_cost(self.draft, "draft"))
        object.__setattr__(self, "target", _as_cost(self.target, "target"))
        object.__setattr__(self, "overhead", check_real(self.overhead, "overhead", 0.0))
        if isinstance(self.target, float) and self.target <= 0:
            raise ValueError(f"target must be a positive cost, got {self.target!r}")

    def draft_cost(self, n: int = 1) -> float:
        """Cost of one draft forward pass reading ``n`` query tokens."""
        return _evaluate(self.draft, check_int(n, "n", 1), "draft")

    def target_cost(self, n: int) -> float:
        """Cost of one target call reading ``n`` query tokens (n >= 1)."""
        return _evaluate(self.target, check_int(n, "n", 1), "target")

    @property
    def plain(self) -> float:
        """Cost per emitted token of plain (non-speculative) decoding."""
        return self.target_cost(1)

    def iteration(self, draft_passes: Sequence[int], n: int) -> float:
        """Cost of one iteration: the draft passes (their query-token counts) and a target call on n tokens."""
        return self.overhead + sum(self.draft_cost(k) for k in draft_passes) + self.target_cost(n)


def leviathan_speedup(alpha: float, gamma: int, c: float) -> float:
    """Leviathan et al.'s speedup (1 - a^(g+1)) / ((1 - a)(g c + 1)) for i.i.d. acceptance a, g drafts.

    Exact for token-level speculative sampling when every drafted token is accepted with the same
    probability ``alpha`` independently of the past, a draft pass costs ``c`` and the target call
    costs 1 whatever its length (``CostModel(draft=c)``).
    """
    a = check_real(alpha, "alpha", 0.0, 1.0)
    g = check_int(gamma, "gamma", 0)
    c = check_real(c, "c", 0.0)
    tokens = g + 1.0 if a == 1.0 else (1.0 - a ** (g + 1)) / (1.0 - a)
    return tokens / (g * c + 1.0)
