"""Toy autoregressive models: a prefix (tuple of token ids) maps to a float64 distribution over V tokens.

A :class:`Model` wraps any callable ``prefix -> probabilities``, validates every row it returns
(finite, non-negative, sums to 1) and caches rows, so exact enumeration can ask for the same
prefix many times.  ``Model.table(L)`` tabulates every prefix of length ``0..L`` at once, which
is what the exact engine consumes.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ._validate import SUM_ATOL, as_distribution, check_int

Prefix = tuple[int, ...]

__all__ = [
    "Model", "iid", "markov", "from_function", "random_model",
    "temperature", "mix", "top_k", "top_p", "prefix_index",
]


def prefix_index(prefix: Sequence[int], V: int) -> int:
    """Base-V index of a prefix (first token most significant): the row of ``Model.table`` level ``len(prefix)``."""
    idx = 0
    for t in prefix:
        idx = idx * V + int(t)
    return idx


class Model:
    """An autoregressive model over ``V`` tokens: ``model(prefix)`` is the next-token law.

    Rows are validated on first use (``ValueError`` naming the prefix and the problem) and
    cached.  Returned arrays are read-only views of the cache.

    >>> m = iid([0.2, 0.3, 0.5])
    >>> m((1, 2)).tolist()
    [0.2, 0.3, 0.5]
    """

    def __init__(self, fn: Callable[[Prefix], Sequence[float]], V: int, name: str = "model",
                 atol: float = SUM_ATOL):
        self.V = check_int(V, "V", 2)
        self.name = name
        self.atol = atol
        self._fn = fn
        self._cache: dict[Prefix, np.ndarray] = {}
        self._tables: list[np.ndarray] = []

    def __repr__(self) -> str:
        return f"Model({self.name}, V={self.V})"

    def __call__(self, prefix: Sequence[int] = ()) -> np.ndarray:
        key = tuple(int(t) for t in prefix)
        row = self._cache.get(key)
        if row is None:
            for t in key:
                if not 0 <= t < self.V:
                    raise ValueError(f"{self.name}: prefix {key} has token {t} outside 0..{self.V - 1}")
            raw = np.asarray(self._fn(key), dtype=np.float64)
            if raw.shape != (self.V,):
                raise ValueError(f"{self.name}: row for prefix {key} has shape {raw.shape}, expected ({self.V},)")
            row = as_distribution(raw, f"{self.name} at prefix {key}", self.atol).copy()
            row.setflags(write=False)
            self._cache[key] = row
        return row

    def table(self, L: int) -> list[np.ndarray]:
        """Rows for every prefix of length 0..L: level k is an array ``[V**k, V]`` indexed by :func:`prefix_index`."""
        check_int(L, "L", 0)
        V = self.V
        while len(self._tables) <= L:
            k = len(self._tables)
            rows = np.empty((V ** k, V))
            for i in range(V ** k):
                rows[i] = self(_index_prefix(i, k, V))
            rows.setflags(write=False)
            self._tables.append(rows)
        return self._tables[: L + 1]

    def shifted(self, context: Sequence[int]) -> "Model":
        """The same model conditioned on a fixed context: ``shifted(c)(s) == self(c + s)``."""
        ctx = tuple(int(t) for t in context)
        if not ctx:
            return self
        return Model(lambda s: self(ctx + s), self.V, f"{self.name}|{ctx}", self.atol)


def _index_prefix(i: int, k: int, V: int) -> Prefix:
    out = [0] * k
    for j in range(k - 1, -1, -1):
        i, out[j] = divmod(i, V)
    return tuple(out)


def iid(p: Sequence[float], name: str = "iid") -> Model:
    """The same distribution ``p`` at every position (context-independent)."""
    row = as_distribution(p, f"{name}: p")
    return Model(lambda s: row, row.size, name)


def markov(initial: Sequence[float], transition, name: str = "markov") -> Model:
    """First-order Markov chain: ``p(.|()) = initial`` and ``p(.|s) = transition[s[-1]]``."""
    init = as_distribution(initial, f"{name}: initial")
    T = np.asarray(transition, dtype=np.float64)
    if T.shape != (init.size, init.size):
        raise ValueError(f"{name}: transition must have shape ({init.size}, {init.size}), got {T.shape}")
    for i, row in enumerate(T):
        as_distribution(row, f"{name}: transition[{i}]")
    return Model(lambda s: init if not s else T[s[-1]], init.size, name)


def from_function(fn: Callable[[Prefix], Sequence[float]], V: int, name: str = "function") -> Model:
    """Any callable ``prefix -> probabilities`` (validated row by row on use)."""
    if not callable(fn):
        raise ValueError(f"{name}: fn must be callable, got {type(fn).__name__}")
    return Model(fn, V, name)


def random_model(V: int, seed: int, concentration: float = 1.0, depth: int | None = None,
                 name: str | None = None) -> Model:
    """Context-dependent model with an independent Dirichlet(concentration) row for every prefix.

    Rows depend on the last ``depth`` tokens (all of the prefix when ``depth`` is None), are a
    deterministic function of ``(seed, context)`` and so are reproducible across processes.
    Small concentrations give peaked rows with near-zeros.
    """
    check_int(V, "V", 2)
    check_int(seed, "seed", 0)
    if not (np.isfinite(concentration) and concentration > 0):
        raise ValueError(f"concentration must be a positive finite number, got {concentration!r}")
    if depth is not None:
        check_int(depth, "depth", 0)

    def row(s: Prefix) -> np.ndarray:
        ctx = s if depth is None else s[len(s) - depth:] if depth else ()
        rng = np.random.default_rng([seed, len(ctx), *ctx])
        r = rng.dirichlet(np.full(V, float(concentration)))
        return r / r.sum()

    return Model(row, V, name or f"random(V={V}, seed={seed}, c={concentration:g})")


def _truncated(model: Model, keep: Callable[[np.ndarray], np.ndarray], name: str) -> Model:
    def row(s: Prefix) -> np.ndarray:
        p = model(s)
        kept = np.where(keep(p), p, 0.0)
        return kept / kept.sum()
    return Model(row, model.V, name)


def temperature(model: Model, T: float) -> Model:
    """Rows ``p**(1/T)`` renormalised; ``T = 0`` is greedy (one-hot argmax, ties to the lowest id)."""
    if not (np.isfinite(T) and T >= 0):
        raise ValueError(f"temperature must be finite and >= 0, got {T!r}")

    def row(s: Prefix) -> np.ndarray:
        p = model(s)
        if T == 0:
            out = np.zeros(model.V)
            out[int(np.argmax(p))] = 1.0
            return out
        with np.errstate(divide="ignore"):
            logits = np.log(p) / T
        logits -= logits.max()
        e = np.exp(logits)
        return e / e.sum()

    return Model(row, model.V, f"{model.name}@T={T:g}")


def mix(a: Model, b: Model, weight: float) -> Model:
    """Mixture ``(1 - weight) * a + weight * b`` row by row."""
    if a.V != b.V:
        raise ValueError(f"cannot mix models with V={a.V} and V={b.V}")
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"mixing weight must be in [0, 1], got {weight!r}")
    return Model(lambda s: (1 - weight) * a(s) + weight * b(s), a.V, f"mix({a.name},{b.name},{weight:g})")


def top_k(model: Model, k: int) -> Model:
    """Keep the ``k`` most likely tokens (ties broken toward lower ids) and renormalise."""
    check_int(k, "k", 1)

    def keep(p: np.ndarray) -> np.ndarray:
        order = np.argsort(-p, kind="stable")[:k]
        mask = np.zeros(p.size, bool)
        mask[order] = True
        return mask

    return _truncated(model, keep, f"{model.name}|top{k}")


def top_p(model: Model, p_mass: float) -> Model:
    """Nucleus truncation: the smallest most-likely set with mass >= ``p_mass`` (at least one token)."""
    if not 0.0 < p_mass <= 1.0:
        raise ValueError(f"top_p mass must be in (0, 1], got {p_mass!r}")

    def keep(p: np.ndarray) -> np.ndarray:
        order = np.argsort(-p, kind="stable")
        n = int(np.searchsorted(np.cumsum(p[order]), p_mass - 1e-12) + 1)
        mask = np.zeros(p.size, bool)
        mask[order[: min(n, p.size)]] = True
        return mask

    return _truncated(model, keep, f"{model.name}|topp{p_mass:g}")
