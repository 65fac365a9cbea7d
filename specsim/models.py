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

from typing import Callable, Sequence

import numpy as np

from ._validate import as_distribution, as_rows, check_int, check_real, check_seed, check_tokens

Prefix = tuple[int, ...]

__all__ = [
    "Model", "iid", "markov", "from_function", "random_model",
    "temperature", "mix", "top_k", "top_p", "prefix_index", "validate_model_pair",
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
    messages), ``atol`` (row-sum tolerance; ``None``: dtype-aware).

    Returns: a callable ``Model``; ``model(prefix)`` returns a read-only float64 array [V].

    >>> from specsim.models import iid
    >>> m = iid([0.2, 0.3, 0.5])
    >>> m((1, 2)).tolist()
    [0.2, 0.3, 0.5]
    """

    def __init__(self, fn: Callable[[Prefix], Sequence[float]], V: int, name: str = "model",
                 atol: float | None = None):
        if not callable(fn):
            raise TypeError(f"{name}: fn must be callable, got {type(fn).__name__}")
        self.V = check_int(V, "V", 2)
        self.name = name
        self.atol = None if atol is None else check_real(atol, "atol", 0.0, 1.0)
        self._fn = fn
        self._cache: dict[Prefix, np.ndarray] = {}
        self._tables: list[np.ndarray] = []
        self._joints: list[np.ndarray] = []  # _joints[k - 1] = P over V^k

    def __repr__(self) -> str:
        return f"Model({self.name}, V={self.V})"

    def __call__(self, prefix: Sequence[int] = ()) -> np.ndarray:
        key = prefix if type(prefix) is tuple else tuple(prefix)
        row = self._cache.get(key)
        if row is None:
            key = check_tokens(prefix, f"{self.name}: prefix", self.V)
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
        V = self.V
        while len(self._tables) <= L:
            k = len(self._tables)
            rows = np.empty((V ** k, V))
            for i in range(V ** k):
                rows[i] = self(_index_prefix(i, k, V))
            rows.setflags(write=False)
            self._tables.append(rows)
        return self._tables[: L + 1]

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
        return Model(lambda s: self(ctx + s), self.V, f"{self.name}|{ctx}", self.atol)


def _index_prefix(i: int, k: int, V: int) -> Prefix:
    out = [0] * k
    for j in range(k - 1, -1, -1):
        i, out[j] = divmod(i, V)
    return tuple(out)


def iid(p: Sequence[float], name: str = "iid") -> Model:
    """The context-independent model p(.|s) = p for every prefix s.

    Parameters: ``p`` (a probability vector over V >= 2 tokens), ``name``.

    Returns: a :class:`Model`.

    >>> from specsim.models import iid
    >>> iid([0.25, 0.75])((0, 1, 1)).tolist()
    [0.25, 0.75]
    """
    row = as_distribution(p, f"{name}: p")
    return Model(lambda s: row, row.size, name)


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
    return Model(lambda s: init if not s else T[s[-1]], init.size, name)


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
                 name: str | None = None) -> Model:
    """Context-dependent model: p(.|s) ~ Dirichlet(concentration, ..., concentration), one
    independent row per context.

    The context of prefix s is its last ``depth`` tokens (all of s when ``depth`` is None); rows
    are a deterministic function of ``(seed, context)``, so they are reproducible across
    processes.  Small concentrations give peaked rows with near-zeros.

    Parameters: ``V`` (>= 2), ``seed`` (>= 0), ``concentration`` (> 0), ``depth`` (>= 0 or None),
    ``name``.

    Returns: a :class:`Model`.

    >>> from specsim.models import random_model
    >>> m = random_model(3, seed=0)
    >>> round(float(m((2,)).sum()), 12), bool((m((2,)) != m((1,))).any())
    (1.0, True)
    """
    check_int(V, "V", 2)
    check_seed(seed)
    concentration = check_real(concentration, "concentration", 0.0, np.inf, lo_open=True, hi_open=True)
    if depth is not None:
        check_int(depth, "depth", 0)

    def row(s: Prefix) -> np.ndarray:
        ctx = s if depth is None else s[len(s) - depth:] if depth else ()
        rng = np.random.default_rng([seed, len(ctx), *ctx])
        r = rng.dirichlet(np.full(V, float(concentration)))
        return r / r.sum()

    return Model(row, V, name or f"random(V={V}, seed={seed}, c={concentration:g})")


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
    return Model(lambda s: (1 - weight) * a(s) + weight * b(s), a.V, f"mix({a.name},{b.name},{weight:g})")


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
