"""Boundary checks shared by every public function (internals trust their inputs)."""
from __future__ import annotations

import numpy as np

#: Default tolerance on |sum - 1| for a probability vector given by a caller.
SUM_ATOL = 1e-8


def as_distribution(v, name: str = "distribution", atol: float = SUM_ATOL) -> np.ndarray:
    """Return ``v`` as a float64 1-D probability vector or raise ``ValueError`` naming the problem."""
    a = np.asarray(v, dtype=np.float64)
    if a.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D probability vector, got shape {a.shape}")
    if a.size < 1:
        raise ValueError(f"{name}: empty probability vector")
    if not np.all(np.isfinite(a)):
        bad = int(np.flatnonzero(~np.isfinite(a))[0])
        raise ValueError(f"{name}: non-finite entry {a[bad]!r} at token {bad}")
    if np.any(a < 0):
        bad = int(np.flatnonzero(a < 0)[0])
        raise ValueError(f"{name}: negative entry {a[bad]!r} at token {bad}")
    s = float(a.sum())
    if abs(s - 1.0) > atol:
        raise ValueError(f"{name}: entries sum to {s!r}, not 1 (tolerance {atol:g})")
    return a


def as_rows(a, name: str, shape: tuple[int, int] | None = None, atol: float = SUM_ATOL) -> np.ndarray:
    """Return ``a`` as a float64 2-D array whose rows are probability vectors, else ``ValueError``."""
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array of probability rows, got shape {arr.shape}")
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {arr.shape}")
    for i, row in enumerate(arr):
        as_distribution(row, f"{name}[{i}]", atol)
    return arr


def as_pair(p, q, atol: float = SUM_ATOL) -> tuple[np.ndarray, np.ndarray]:
    """A (target, draft) pair of probability vectors over the same V >= 2 tokens, else ``ValueError``."""
    p = as_distribution(p, "p (target)", atol)
    q = as_distribution(q, "q (draft)", atol)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same vocabulary size, got {p.size} and {q.size} tokens")
    if p.size < 2:
        raise ValueError(f"vocabulary size must be >= 2, got {p.size}")
    return p, q


def check_int(value, name: str, minimum: int) -> int:
    """An integer argument at least ``minimum``, else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def normalize(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """``v / sum(v)``; ``fallback`` when the mass is zero (a residual reached only with probability 0)."""
    s = v.sum()
    if s <= 0.0:
        return fallback
    return v / s
