"""Boundary checks shared by every public function (internals trust their inputs).

A public function checks its arguments once, here, and raises ``ValueError`` (a bad value) or
``TypeError`` (a bad type) naming the argument and what was expected; the code behind it then
trusts them.

>>> from specsim._validate import as_distribution
>>> as_distribution([0.5, 0.6], "p")
Traceback (most recent call last):
...
ValueError: p: entries sum to 1.1, not 1 (tolerance 1e-08)
"""
from __future__ import annotations

import numpy as np

#: Default tolerance on |sum - 1| for a probability vector given by a caller.
SUM_ATOL = 1e-8


def as_distribution(v, name: str = "distribution", atol: float = SUM_ATOL) -> np.ndarray:
    """A probability vector: v_i finite, v_i >= 0 and |sum_i v_i - 1| <= ``atol``.

    Parameters: ``v`` (array-like), ``name`` (used in the message), ``atol`` (sum tolerance).

    Returns: ``v`` as a float64 1-D array (not renormalised); ``ValueError`` naming the first
    offending token otherwise.

    >>> from specsim._validate import as_distribution
    >>> as_distribution([0.25, 0.75])
    array([0.25, 0.75])
    >>> as_distribution([[0.5, 0.5]], "q")
    Traceback (most recent call last):
    ...
    ValueError: q: expected a 1-D probability vector, got shape (1, 2)
    """
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
    """A 2-D array whose every row is a probability vector (:func:`as_distribution`).

    Parameters: ``a`` (array-like), ``name``, ``shape`` (required ``(rows, V)`` or ``None``),
    ``atol``.

    Returns: ``a`` as a float64 2-D array; ``ValueError`` naming the row (``name[i]``) otherwise.

    >>> from specsim._validate import as_rows
    >>> as_rows([[0.5, 0.5], [1.0, 0.0]], "q").shape
    (2, 2)
    >>> as_rows([[0.5, 0.5], [1.0, 0.1]], "q")
    Traceback (most recent call last):
    ...
    ValueError: q[1]: entries sum to 1.1, not 1 (tolerance 1e-08)
    """
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array of probability rows, got shape {arr.shape}")
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(f"{name}: expected shape {tuple(shape)}, got {arr.shape}")
    for i, row in enumerate(arr):
        as_distribution(row, f"{name}[{i}]", atol)
    return arr


def as_pair(p, q, atol: float = SUM_ATOL) -> tuple[np.ndarray, np.ndarray]:
    """A (target p, draft q) pair of probability vectors over the same V >= 2 tokens.

    Parameters: ``p``, ``q`` (array-like), ``atol``.

    Returns: ``(p, q)`` as float64 arrays; ``ValueError`` for a bad row, different sizes or V < 2.

    >>> from specsim._validate import as_pair
    >>> p, q = as_pair([0.5, 0.5], [0.9, 0.1])
    >>> p.tolist(), q.tolist()
    ([0.5, 0.5], [0.9, 0.1])
    >>> as_pair([0.5, 0.5], [0.2, 0.3, 0.5])
    Traceback (most recent call last):
    ...
    ValueError: p and q must have the same vocabulary size, got 2 and 3 tokens
    """
    p = as_distribution(p, "p (target)", atol)
    q = as_distribution(q, "q (draft)", atol)
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same vocabulary size, got {p.size} and {q.size} tokens")
    if p.size < 2:
        raise ValueError(f"vocabulary size must be >= 2, got {p.size}")
    return p, q


def check_int(value, name: str, minimum: int) -> int:
    """An integer argument ``value >= minimum`` (Python or numpy integer; ``bool`` refused).

    Parameters: ``value``, ``name`` (used in the message), ``minimum``.

    Returns: ``value`` as an ``int``; ``ValueError`` otherwise.

    >>> from specsim._validate import check_int
    >>> check_int(3, "L", 1)
    3
    >>> check_int(0, "L", 1)
    Traceback (most recent call last):
    ...
    ValueError: L must be >= 1, got 0
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def normalize(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """norm(v) = v / sum(v); ``fallback`` when sum(v) <= 0 (a residual that is reached only with
    probability 0 has no mass, and any row may stand in for it).  Internal: no checks.

    >>> import numpy as np
    >>> from specsim._validate import normalize
    >>> normalize(np.array([1.0, 3.0]), np.array([0.5, 0.5])).tolist()
    [0.25, 0.75]
    >>> normalize(np.zeros(2), np.array([0.5, 0.5])).tolist()
    [0.5, 0.5]
    """
    s = v.sum()
    if s <= 0.0:
        return fallback
    return v / s


def check_model_pair(target, draft_model, L, min_L: int = 1) -> int:
    """Check the (target, draft model, L) arguments of an exact or sampled computation.

    Both models must be :class:`specsim.models.Model` objects over the same vocabulary (strings
    z in V^{L+1} are compared against the target's joint law), and the draft length / tree depth
    ``L`` an integer >= ``min_L``.

    Parameters: ``target``, ``draft_model`` (models), ``L``, ``min_L``.

    Returns: ``L`` as an ``int``; ``TypeError`` when a model is not a ``Model``, ``ValueError``
    when the vocabularies differ or ``L`` is out of range.

    >>> from specsim.models import iid
    >>> check_model_pair(iid([0.5, 0.5]), iid([0.9, 0.1]), 2)
    2
    >>> check_model_pair(iid([0.5, 0.5]), iid([0.2, 0.3, 0.5]), 2)
    Traceback (most recent call last):
    ...
    ValueError: target has V=2 but draft_model has V=3
    """
    from .models import Model  # models imports this module: resolve at call time

    for value, name in ((target, "target"), (draft_model, "draft_model")):
        if not isinstance(value, Model):
            raise TypeError(f"{name} must be a specsim.models.Model, got {type(value).__name__}")
    if target.V != draft_model.V:
        raise ValueError(f"target has V={target.V} but draft_model has V={draft_model.V}")
    return check_int(L, "L", min_L)
