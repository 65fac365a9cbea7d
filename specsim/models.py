"""Toy autoregressive models: a prefix (tuple of token ids) maps to a float64 distribution over V tokens.

A :class:`Model` wraps any callable ``prefix -> probabilities``, validates every row it returns
(finite, non-negative, sums to 1) and caches rows, so exact enumeration can ask for the same
prefix many times.  ``Model.table(L)`` tabulates every prefix of length ``0..L`` at once, and
``Model.joint(n)`` is the joint law P(z) = prod_k p(z_k | z^{1:k-1}) over V^n built from those
tables: the one copy of P(z) used by the exact engine, Monte Carlo and the testing suite
(docs/theory.md §2).

Strings of length n are indexed by their base-V code, first token most significant
(:func:`prefix_index`), everywhere in the package.
"""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from ._validate import as_distribution, as_rows, check_int, check_real, check_seed, check_tokens

Prefix = tuple[int, ...]

__all__ = [
    "Model", "iid", "markov", "from_function", "random_model",
    "temperature", "mix", "top_k", "top_p", "prefix_index", "all_prefixes", "validate_model_pair",
]


def prefix_index(prefix: Sequence[int], V: int) -> int:
    """Base-V code of a string: sum_j s_j V^(n-1-j) for s = (s_0, ..., s_{n-1}) (first token most significant).

    It is the row of ``Model.table(L)[len(prefix)]`` holding p(.|prefix) and the index of the
    string in ``Model.joint(len(prefix))`` and :class:`specsim.exact.OutputLaw` arrays.

    Parameters: ``prefix`` (integer token ids in 0..V-1), ``V`` (vocabulary size).

    Returns: the code, an ``int`` in 0..V^n - 1; ``TypeError`` / ``ValueError`` naming the
    position of a non-integer or out-of-range id.

    >>> from specsim.models import prefix_index
    >>> prefix_index((1, 2), 3)
    5
    """
    V = check_int(V, "V", 1)
    idx = 0
    for t in check_tokens(prefix, "prefix", V):
        idx = idx * V + t
    return idx


#: How many shifted models (:meth:`Model.shifted`) a model keeps, the most recently used: one
#: certificate asks for the same context three times; a sweep over contexts must not keep them all.
SHIFTED_CACHE = 4


class Model:
    """An autoregressive model over ``V`` tokens: ``model(prefix)`` is the next-token law p(.|prefix).

    Rows are validated on first use under the input contract of docs/design.md (finite,
    non-negative, |sum - 1| within the dtype-aware tolerance of
    :func:`specsim._validate.sum_tolerance` or ``atol``; ``ValueError`` naming the prefix and the
    problem), renormalised once in float64 and cached; returned arrays are read-only views of the
    cache.  Prefixes are integer token ids in 0..V-1 (``TypeError`` / ``ValueError`` naming the
    position otherwise).

    Parameters: ``fn`` (callable ``prefix tuple -> V probabilities``: a list, a float16 /
    bfloat16 / float32 / float64 array or a torch tensor), ``V`` (>= 2), ``name`` (used in
    messages), ``atol`` (row-sum tolerance; ``None``: dtype-aware), ``batch`` (optional callable
    ``prefixes -> rows``: given an int array [n, k] of n prefixes of one length k, it returns the
    n rows [n, V] at once, in any dtype ``fn`` may use; it must agree with ``fn`` row by row).

    A ``batch`` callable lets :meth:`table` (and so the exact engine, whose every row comes from
    the tables) build a whole level in one call, validated in one vectorised pass (the same
    checks and messages as ``fn``'s rows); without it each row is one call of ``fn``, the
    reference path.

    Returns: a callable ``Model``; ``model(prefix)`` returns a read-only float64 array [V].

    >>> from specsim.models import iid
    >>> m = iid([0.2, 0.3, 0.5])
    >>> m((1, 2)).tolist()
    [0.2, 0.3, 0.5]
    """

    def __init__(self, fn: Callable[[Prefix], Sequence[float]], V: int, name: str = "model",
                 atol: float | None = None, batch: Callable[[np.ndarray], Sequence] | None = None):
        if not callable(fn):
            raise TypeError(f"{name}: fn must be callable, got {type(fn).__name__}")
        if batch is not None and not callable(batch):
            raise TypeError(f"{name}: batch must be callable or None, got {type(batch).__name__}")
        self.V = check_int(V, "V", 2)
        self.name = name
        self.atol = None if atol is None else check_real(atol, "atol", 0.0, 1.0)
        self._fn = fn
        self._batch = batch
        self._shifted: dict[Prefix, "Model"] = {}
        self._cache: dict[Prefix, np.ndarray] = {}
        self._tables: list[np.ndarray] = []
        self._stacked: dict[int, np.ndarray] = {}  # stacked_table(L)
        self._joints: list[np.ndarray] = []  # _joints[k - 1] = P over V^k
        self._zeros: list[tuple[np.ndarray, bool]] = []  # _zeros[k - 1]: see zero_strings

    def __repr__(self) -> str:
        return f"Model({self.name}, V={self.V})"

    def __call__(self, prefix: Sequence[int] = ()) -> np.ndarray:
        key = prefix if type(prefix) is tuple else tuple(prefix)
        row = self._cache.get(key)
        if row is None:
            key = check_tokens(prefix, f"{self.name}: prefix", self.V)
            if len(key) < len(self._tables):  # already tabulated (a level built at once)
                return self._tables[len(key)][prefix_index(key, self.V)]
            row = as_distribution(self._fn(key), f"{self.name} at prefix {key}", self.atol)
            if row.shape != (self.V,):
                raise ValueError(f"{self.name}: row for prefix {key} has shape {row.shape}, expected ({self.V},)")
            row.setflags(write=False)
            self._cache[key] = row
        return row

    def table(self, L: int) -> list[np.ndarray]:
        """Rows for every prefix of length 0..L: level k holds p(.|s) for all s in V^k.

        Parameters: ``L`` (>= 0), the longest prefix.

        Returns: a list of L + 1 read-only float64 arrays; level k has shape ``[V**k, V]`` with
        row :func:`prefix_index` (s) = p(.|s).  Tabulated once and cached.

        >>> from specsim.models import markov
        >>> tab = markov([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]]).table(2)
        >>> [level.shape for level in tab], tab[2][3].tolist()
        ([(1, 2), (2, 2), (4, 2)], [0.2, 0.8])
        """
        check_int(L, "L", 0)
        while len(self._tables) <= L:
            k = len(self._tables)
            rows = self._level_rows(all_prefixes(k, self.V))
            rows.setflags(write=False)
            self._tables.append(rows)
        return self._tables[: L + 1]

    def stacked_table(self, L: int) -> np.ndarray:
        """:meth:`table`'s levels 0..L as one read-only array [sum_k V^k, V] (level k from row
        sum_{j<k} V^j), built once per L: compiled code takes one array where it cannot take a
        list of them.

        >>> from specsim.models import iid
        >>> iid([0.25, 0.75]).stacked_table(1).tolist()
        [[0.25, 0.75], [0.25, 0.75], [0.25, 0.75]]
        """
        stacked = self._stacked.get(L)
        if stacked is None:
            stacked = np.concatenate(self.table(L))
            stacked.setflags(write=False)
            self._stacked[L] = stacked
        return stacked

    def rows(self, prefixes) -> np.ndarray:
        """p(.|s) for n prefixes of one length k at once: row i is ``self(prefixes[i])``.

        Uses the model's ``batch`` callable when it has one (one call, one vectorised
        validation), the tables when the level is already tabulated, and one call of ``fn`` per
        row otherwise (the reference path).

        Parameters: ``prefixes``, integer token ids in 0..V-1 of shape [n, k] (k >= 0).

        Returns: a float64 array [n, V]; ``TypeError`` / ``ValueError`` naming ``prefixes`` for
        ids that are not integers, out of range or not a 2-D array, and, for a row that is not a
        distribution, the same ``ValueError`` (naming the prefix) as :meth:`__call__`.

        >>> import numpy as np
        >>> from specsim.models import markov
        >>> markov([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]]).rows([[0, 1], [1, 0]]).tolist()
        [[0.2, 0.8], [0.9, 0.1]]
        """
        P = _check_prefix_array(prefixes, f"{self.name}: prefixes", self.V)
        k = P.shape[1]
        if k < len(self._tables):
            return self._tables[k][_codes(P, self.V)]
        return self._level_rows(P)

    def _level_rows(self, P: np.ndarray) -> np.ndarray:
        """Validated float64 rows [n, V] for a checked int array P [n, k] of prefixes."""
        n, V = P.shape[0], self.V
        if self._batch is None or n == 0:
            out = np.empty((n, V))
            for i in range(n):
                out[i] = self(tuple(P[i].tolist()))
            return out
        raw = self._batch(P)
        shape = tuple(np.shape(raw))
        if shape != (n, V):
            raise ValueError(f"{self.name}: batch returned rows of shape {shape} for {n} prefixes of length "
                             f"{P.shape[1]}, expected {(n, V)}")
        try:
            return as_rows(raw, f"{self.name} rows", atol=self.atol)
        except ValueError:
            for i in range(n):  # name the first bad row by its prefix, as the per-row path does
                as_distribution(raw[i], f"{self.name} at prefix {tuple(P[i].tolist())}", self.atol)
            raise

    def joint(self, n: int) -> np.ndarray:
        """The joint law of the first n tokens: P(z) = prod_{k=1}^{n} p(z_k | z^{1:k-1}), z in V^n.

        Built from :meth:`table` by the recursion P_{k+1}(s t) = P_k(s) p(t | s); this is the one
        copy of the target law P(z) in the package (the losslessness criterion C(z) = P(z) of
        docs/theory.md §2 is stated against it).

        Parameters: ``n`` (>= 1), the string length.

        Returns: a read-only flat float64 array of length ``V**n`` indexed by the base-V code of z
        (:func:`prefix_index`, first token most significant); ``reshape((V,) * n)`` gives the
        [V]*n array.  Computed once and cached.

        >>> from specsim.models import markov
        >>> P = markov([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]]).joint(2)
        >>> P.tolist()
        [0.45, 0.05, 0.1, 0.4]
        """
        check_int(n, "n", 1)
        while len(self._joints) < n:
            k = len(self._joints)  # build the law over V^(k+1)
            rows = self.table(k)[k]
            P = rows[0].copy() if k == 0 else (self._joints[-1][:, None] * rows).ravel()
            P.setflags(write=False)
            self._joints.append(P)
        return self._joints[n - 1]

    def zero_strings(self, n: int) -> tuple[np.ndarray, bool]:
        """Which z in V^n hold a token of probability exactly 0 given its prefix, and whether any
        does: exact zeros of the rows decide, not P(z) = 0 (a product of tiny probabilities may
        underflow).  Built level by level from :meth:`table` and cached, so a model without zeros
        costs one test per level on later calls.

        Parameters: ``n`` (>= 1), the string length.

        Returns: ``(mask, any)``, ``mask`` a read-only flat bool array of length ``V**n`` indexed
        by base-V code.

        >>> from specsim.models import markov
        >>> mask, any_zero = markov([1.0, 0.0], [[0.5, 0.5], [1.0, 0.0]]).zero_strings(2)
        >>> mask.tolist(), any_zero
        ([False, False, True, True], True)
        """
        check_int(n, "n", 1)
        while len(self._zeros) < n:
            k = len(self._zeros)  # the mask over V^(k+1)
            zero = self.table(k)[k] == 0
            mask = zero[0].copy() if k == 0 else (self._zeros[-1][0][:, None] | zero).ravel()
            mask.setflags(write=False)
            self._zeros.append((mask, bool(mask.any())))
        return self._zeros[n - 1]

    def shifted(self, context: Sequence[int]) -> "Model":
        """The model conditioned on a fixed context c: ``shifted(c)(s) == self(c + s)``.

        Parameters: ``context`` (token ids).

        Returns: a new :class:`Model` (``self`` when the context is empty).

        >>> from specsim.models import markov
        >>> m = markov([0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]])
        >>> m.shifted((1,))(()).tolist()
        [0.2, 0.8]
        """
        ctx = check_tokens(context, f"{self.name}: context", self.V)
        if not ctx:
            return self
        model = self._shifted.pop(ctx, None)
        if model is None:  # the last few contexts' shifted models are kept, so their tables are built once
            head = np.array(ctx, dtype=np.int64)

            def batch(P: np.ndarray) -> np.ndarray:
                return self.rows(np.hstack([np.broadcast_to(head, (P.shape[0], head.size)), P]))

            model = Model(lambda s: self(ctx + s), self.V, f"{self.name}|{ctx}", self.atol, batch)
        self._shifted[ctx] = model  # most recent last; bounded, since each holds its own tables
        while len(self._shifted) > SHIFTED_CACHE:
            del self._shifted[next(iter(self._shifted))]
        return model


@functools.lru_cache(maxsize=64)
def _level_starts(V: int, L: int) -> np.ndarray:
    """Row offsets of :meth:`Model.stacked_table`'s levels: ``start[i]`` = sum_{k<i} V^k for
    i = 0..L+1 (level i at rows ``start[i]:start[i + 1]``); a read-only int64 array, cached.

    >>> from specsim.models import _level_starts
    >>> _level_starts(2, 2).tolist()
    [0, 1, 3, 7]
    """
    start = np.cumsum([0] + [V ** i for i in range(L + 1)], dtype=np.int64)
    start.setflags(write=False)
    return start


def all_prefixes(k: int, V: int) -> np.ndarray:
    """Every string in V^k as rows of an int array [V^k, k], in base-V order (row i has code i).

    >>> from specsim.models import all_prefixes
    >>> all_prefixes(2, 2).tolist(), all_prefixes(0, 3).shape
    ([[0, 0], [0, 1], [1, 0], [1, 1]], (1, 0))
    """
    codes = np.arange(V ** k, dtype=np.int64)
    return np.stack([(codes // V ** (k - 1 - j)) % V for j in range(k)], axis=1) if k else np.zeros((1, 0), np.int64)


def _codes(P: np.ndarray, V: int) -> np.ndarray:
    """Base-V codes (first token most significant) of the rows of an int array [n, k]."""
    code = np.zeros(P.shape[0], dtype=np.int64)
    for j in range(P.shape[1]):
        code = code * V + P[:, j]
    return code


def _check_prefix_array(prefixes, name: str, V: int) -> np.ndarray:
    """An int64 array [n, k] of token ids in 0..V-1 (``TypeError`` / ``ValueError`` naming ``name``)."""
    try:
        P = np.asarray(prefixes)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name}: expected a 2-D array of integer token ids ({exc})") from None
    if P.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array [n, k] of token ids, got shape {P.shape}")
    if P.size == 0:
        return P.astype(np.int64).reshape(P.shape)
    if P.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected integer token ids, got dtype {P.dtype}")
    if P.min() < 0 or P.max() >= V:
        bad = tuple(int(i) for i in np.argwhere((P < 0) | (P >= V))[0])
        raise ValueError(f"{name}: token id {int(P[bad])} at {bad} is outside 0..{V - 1}")
    return P.astype(np.int64, copy=False)


def iid(p: Sequence[float], name: str = "iid") -> Model:
    """The context-independent model p(.|s) = p for every prefix s.

    Parameters: ``p`` (a probability vector over V >= 2 tokens), ``name``.

    Returns: a :class:`Model`.

    >>> from specsim.models import iid
    >>> iid([0.25, 0.75])((0, 1, 1)).tolist()
    [0.25, 0.75]
    """
    row = as_distribution(p, f"{name}: p")
    return Model(lambda s: row, row.size, name, batch=lambda P: np.broadcast_to(row, (P.shape[0], row.size)))


def markov(initial: Sequence[float], transition, name: str = "markov") -> Model:
    """First-order Markov chain: p(.|()) = ``initial`` and p(.|s) = ``transition[s[-1]]``.

    Parameters: ``initial`` (probability vector over V tokens), ``transition`` ([V, V] array whose
    rows are probability vectors), ``name``.

    Returns: a :class:`Model`.

    >>> from specsim.models import markov
    >>> markov([1.0, 0.0], [[0.9, 0.1], [0.2, 0.8]])((0, 1)).tolist()
    [0.2, 0.8]
    """
    init = as_distribution(initial, f"{name}: initial")
    T = as_rows(transition, f"{name}: transition", (init.size, init.size))
    return Model(lambda s: init if not s else T[s[-1]], init.size, name,
                 batch=lambda P: T[P[:, -1]] if P.shape[1] else np.broadcast_to(init, (P.shape[0], init.size)))


def from_function(fn: Callable[[Prefix], Sequence[float]], V: int, name: str = "function") -> Model:
    """A model from any callable ``fn(prefix) -> V probabilities`` (each row validated on first use).

    Parameters: ``fn`` (callable on tuples of token ids), ``V`` (>= 2), ``name``.

    Returns: a :class:`Model`.

    >>> from specsim.models import from_function
    >>> m = from_function(lambda s: [0.5, 0.5] if len(s) % 2 else [1.0, 0.0], 2)
    >>> m(()).tolist(), m((0,)).tolist()
    ([1.0, 0.0], [0.5, 0.5])
    """
    return Model(fn, V, name)


def random_model(V: int, seed: int, concentration: float = 1.0, depth: int | None = None,
                 name: str | None = None, stream: str = "generator") -> Model:
    """Context-dependent model: p(.|s) ~ Dirichlet(concentration, ..., concentration), one
    independent row per context.

    The context of prefix s is its last ``depth`` tokens (all of s when ``depth`` is None); rows
    are a deterministic function of ``(seed, context)``, so they are reproducible across
    processes.  Small concentrations give peaked rows with near-zeros.

    Two streams draw the same law with different numbers:

    - ``"generator"`` (the default; every seed's rows as in earlier releases): one
      ``numpy.random.default_rng([seed, len(ctx), *ctx])`` per context and its ``dirichlet``;
      about 30 us of generator set-up a row.
    - ``"counter"``: counter-based and vectorised over whole levels.  Entry t of the row of
      context c gets uniforms U_r = H(seed, c, t, r) from a SplitMix64 hash chain (r = 0, 1, ...),
      turned into an exact Gamma(concentration) draw G_t (an exponential -log U_0 when the
      concentration is 1; Marsaglia and Tsang's squeeze method, "A simple method for generating
      gamma variables", 2000, with the attempts numbered by r, otherwise; G = G' U^(1/c) with
      G' ~ Gamma(c + 1) below 1), and the row is G / sum(G).  A row is the same whether it is
      built alone or with its whole level (:meth:`Model.rows`), which makes ``table`` and the
      exact engine about 100x faster at V^L ~ 10^5 rows; rows differ from ``"generator"``'s.

    Parameters: ``V`` (>= 2), ``seed`` (>= 0), ``concentration`` (> 0), ``depth`` (>= 0 or None),
    ``name``, ``stream`` (``"generator"`` or ``"counter"``).

    Returns: a :class:`Model`.

    >>> from specsim.models import random_model
    >>> m = random_model(3, seed=0)
    >>> round(float(m((2,)).sum()), 12), bool((m((2,)) != m((1,))).any())
    (1.0, True)
    >>> f = random_model(3, seed=0, stream="counter")
    >>> bool((f.rows([[2], [1]])[0] == f((2,))).all()), bool((f((2,)) != m((2,))).any())
    (True, True)
    """
    check_int(V, "V", 2)
    check_seed(seed)
    concentration = check_real(concentration, "concentration", 0.0, np.inf, lo_open=True, hi_open=True)
    if depth is not None:
        check_int(depth, "depth", 0)
    if stream not in ("generator", "counter"):
        raise ValueError(f"stream must be 'generator' or 'counter', got {stream!r}")
    label = name or (f"random(V={V}, seed={seed}, c={concentration:g})"
                     + ("" if stream == "generator" else ", counter"))

    if stream == "counter":
        key = np.random.SeedSequence(seed).generate_state(1, np.uint64)[0]  # any seed -> 64 bits

        def batch(P: np.ndarray) -> np.ndarray:
            ctx = P if depth is None else P[:, P.shape[1] - min(depth, P.shape[1]):]
            return _counter_dirichlet(key, ctx, V, concentration)

        return Model(lambda s: batch(np.array([s], dtype=np.int64).reshape(1, len(s)))[0], V, label, batch=batch)

    def row(s: Prefix) -> np.ndarray:
        ctx = s if depth is None else s[len(s) - depth:] if depth else ()
        rng = np.random.default_rng([seed, len(ctx), *ctx])
        r = rng.dirichlet(np.full(V, float(concentration)))
        return r / r.sum()

    # level at once: the same per-context generators, validated once per level
    return Model(row, V, label, batch=lambda P: np.array([row(tuple(p)) for p in P.tolist()]))


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MAX_ATTEMPTS = 64  # Marsaglia-Tsang accepts >= 95% a try: 64 rejections in a row is ~1e-83


def _mix64(z: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser on uint64 arrays (wrapping arithmetic): a bijection that mixes bits."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _counter_dirichlet(key, ctx: np.ndarray, V: int, c: float) -> np.ndarray:
    """Dirichlet(c) rows [n, V] for the contexts ctx [n, j]: entry (i, t) is a function of
    (key, j, ctx[i], t) only (the "counter" stream of :func:`random_model`)."""
    n, j = ctx.shape
    with np.errstate(over="ignore"):
        h = _mix64(np.full(n, key, dtype=np.uint64) + np.uint64(j + 1) * _GOLDEN)
        for col in ctx.T:  # hash chain over the context's tokens
            h = _mix64(h + (col.astype(np.uint64) + np.uint64(1)) * _GOLDEN)
        cell = _mix64(h[:, None] ^ _mix64((np.arange(V, dtype=np.uint64) + np.uint64(1)) * _GOLDEN))

        def uniform(r: int, where=None) -> np.ndarray:  # U_r in (0, 1), 53 random bits
            x = _mix64((cell if where is None else cell[where]) + np.uint64(r + 1) * _GOLDEN)
            return ((x >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0 ** -53

        if c == 1.0:
            logg = np.log(-np.log(uniform(0)))
        else:
            a = c if c >= 1.0 else c + 1.0
            d = a - 1.0 / 3.0
            cc = 1.0 / np.sqrt(9.0 * d)
            logg = np.empty((n, V))
            todo = np.ones((n, V), dtype=bool)
            for attempt in range(_MAX_ATTEMPTS):
                idx = np.nonzero(todo)
                u1, u2, u3 = (uniform(3 * attempt + i, idx) for i in range(3))
                x = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)  # Box-Muller normal
                v = (1.0 + cc * x) ** 3
                with np.errstate(invalid="ignore", divide="ignore"):
                    ok = (v > 0) & (np.log(u3) < 0.5 * x * x + d - d * v + d * np.log(v))
                logg[idx[0][ok], idx[1][ok]] = np.log(d * v[ok])
                todo[idx[0][ok], idx[1][ok]] = False
                if not todo.any():
                    break
            else:  # pragma: no cover - probability ~1e-83 per entry
                raise RuntimeError("random_model: the counter stream's gamma sampler did not converge")
            if c < 1.0:  # G = G' U^(1/c), G' ~ Gamma(c + 1): kept in logs so tiny draws survive
                logg += np.log(uniform(3 * _MAX_ATTEMPTS)) / c
    e = np.exp(logg - logg.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _check_model(model, name: str) -> Model:
    if not isinstance(model, Model):
        raise TypeError(f"{name}: model must be a specsim.models.Model, got {type(model).__name__}")
    return model


def _truncated(model: Model, keep: Callable[[np.ndarray], np.ndarray], name: str) -> Model:
    def row(s: Prefix) -> np.ndarray:
        p = model(s)
        kept = np.where(keep(p), p, 0.0)
        return kept / kept.sum()
    return Model(row, model.V, name)


def temperature(model: Model, T: float) -> Model:
    """Temperature scaling: p_T(v|s) = p(v|s)^(1/T) / sum_u p(u|s)^(1/T); T = 0 is greedy
    (one-hot on the argmax, ties to the lowest id).

    Parameters: ``model``, ``T`` (finite, >= 0).

    Returns: a :class:`Model`.

    >>> from specsim.models import iid, temperature
    >>> [round(x, 6) for x in temperature(iid([0.2, 0.8]), 0.5)(()).tolist()]
    [0.058824, 0.941176]
    """
    _check_model(model, "temperature")
    T = check_real(T, "temperature T", 0.0, np.inf, hi_open=True)

    def rows(p: np.ndarray) -> np.ndarray:  # p [n, V]: the same arithmetic row by row
        if T == 0:
            out = np.zeros(p.shape)
            out[np.arange(p.shape[0]), np.argmax(p, axis=1)] = 1.0
            return out
        with np.errstate(divide="ignore"):
            logits = np.log(p) / T
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(axis=1, keepdims=True)

    return Model(lambda s: rows(model(s)[None])[0], model.V, f"{model.name}@T={T:g}",
                 batch=lambda P: rows(model.rows(P)))


def mix(a: Model, b: Model, weight: float) -> Model:
    """Row-wise mixture: p(.|s) = (1 - weight) a(.|s) + weight b(.|s).

    Parameters: ``a``, ``b`` (models over the same V), ``weight`` in [0, 1].

    Returns: a :class:`Model`.

    >>> from specsim.models import iid, mix
    >>> mix(iid([1.0, 0.0]), iid([0.0, 1.0]), 0.25)(()).tolist()
    [0.75, 0.25]
    """
    for m, label in ((a, "a"), (b, "b")):
        if not isinstance(m, Model):
            raise TypeError(f"mix: {label} must be a specsim.models.Model, got {type(m).__name__}")
    if a.V != b.V:
        raise ValueError(f"cannot mix models with V={a.V} and V={b.V}")
    weight = check_real(weight, "mixing weight", 0.0, 1.0)
    return Model(lambda s: (1 - weight) * a(s) + weight * b(s), a.V, f"mix({a.name},{b.name},{weight:g})",
                 batch=lambda P: (1 - weight) * a.rows(P) + weight * b.rows(P))


def top_k(model: Model, k: int) -> Model:
    """Top-k truncation: keep the ``k`` most likely tokens of each row (ties toward lower ids),
    zero the rest and renormalise.

    Parameters: ``model``, ``k`` (>= 1).

    Returns: a :class:`Model`.

    >>> from specsim.models import iid, top_k
    >>> [round(x, 6) for x in top_k(iid([0.1, 0.2, 0.3, 0.4]), 2)(()).tolist()]
    [0.0, 0.0, 0.428571, 0.571429]
    """
    _check_model(model, "top_k")
    check_int(k, "k", 1)

    def keep(p: np.ndarray) -> np.ndarray:
        order = np.argsort(-p, kind="stable")[:k]
        mask = np.zeros(p.size, bool)
        mask[order] = True
        return mask

    return _truncated(model, keep, f"{model.name}|top{k}")


def top_p(model: Model, p_mass: float) -> Model:
    """Nucleus (top-p) truncation: keep the smallest set of most likely tokens whose mass reaches
    ``p_mass`` (at least one token), zero the rest and renormalise.

    Parameters: ``model``, ``p_mass`` in (0, 1].

    Returns: a :class:`Model`.

    >>> from specsim.models import iid, top_p
    >>> [round(x, 6) for x in top_p(iid([0.1, 0.2, 0.3, 0.4]), 0.65)(()).tolist()]
    [0.0, 0.0, 0.428571, 0.571429]
    """
    _check_model(model, "top_p")
    p_mass = check_real(p_mass, "top_p mass", 0.0, 1.0, lo_open=True)

    def keep(p: np.ndarray) -> np.ndarray:
        order = np.argsort(-p, kind="stable")
        n = int(np.searchsorted(np.cumsum(p[order]), p_mass - 1e-12) + 1)
        mask = np.zeros(p.size, bool)
        mask[order[: min(n, p.size)]] = True
        return mask

    return _truncated(model, keep, f"{model.name}|topp{p_mass:g}")


def validate_model_pair(target, draft_model, L, min_L: int = 1) -> int:
    """Check the (target, draft model, L) arguments of an exact or sampled computation.

    Both models must be :class:`specsim.models.Model` objects over the same vocabulary (strings
    z in V^{L+1} are compared against the target's joint law), and the draft length / tree depth
    ``L`` an integer >= ``min_L``.

    Parameters: ``target``, ``draft_model`` (models), ``L``, ``min_L``.

    Returns: ``L`` as an ``int``; ``TypeError`` when a model is not a ``Model`` or ``L`` is not
    an integer, ``ValueError`` when the vocabularies differ or ``L`` is out of range.

    >>> from specsim.models import iid
    >>> validate_model_pair(iid([0.5, 0.5]), iid([0.9, 0.1]), 2)
    2
    >>> validate_model_pair(iid([0.5, 0.5]), iid([0.2, 0.3, 0.5]), 2)
    Traceback (most recent call last):
    ...
    ValueError: target has V=2 but draft_model has V=3
    """
    for value, name in ((target, "target"), (draft_model, "draft_model")):
        if not isinstance(value, Model):
            raise TypeError(f"{name} must be a specsim.models.Model, got {type(value).__name__}")
    if target.V != draft_model.V:
        raise ValueError(f"target has V={target.V} but draft_model has V={draft_model.V}")
    return check_int(L, "L", min_L)
