"""Hypothesis strategies for speculative-decoding tests: rows, model pairs, draft processes.

Losslessness, C(z) = P(z) for every z in V^{L+1} (docs/theory.md §2), must hold for *every* target /
draft pair, so tests should search the pairs that break implementations: V >= 3 (with V = 2 every
residual is a point mass), rows that change with the prefix (identical rows hide wrong-row bugs),
and degenerate rows: p = q, disjoint supports, zeros, one-hot rows and ties.

Rows are built from integer weights, so failing examples shrink to readable rows such as
(1/3, 2/3, 0); drawn rows shrink toward the uniform row, V toward 3 and L toward 1.

>>> from hypothesis import given, settings
>>> from specsim.exact import check_lossless
>>> from specsim.testing.strategies import model_pairs
>>> from specsim.verifiers import token
>>> @settings(max_examples=5, database=None)
... @given(model_pairs())
... def test_token_is_lossless(pair):
...     assert check_lossless(token, pair.target, pair.draft_model, 2).lossless
>>> test_token_is_lossless()
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from .. import drafts as _drafts
from ..models import Model, random_model
from ..verifiers.base import meets_needs

__all__ = ["distributions", "distribution_pairs", "model_pairs", "adversarial_pairs", "ModelPair",
           "RELATIONS", "chain_inputs", "draft_processes", "available_draft_processes", "chain_lengths"]

#: How the draft row at a context relates to the target row there (first = the shrink target).
RELATIONS = ("independent", "equal", "disjoint", "onehot", "skewed", "zeros")
_ADVERSARIAL = RELATIONS[1:]


def _as_strategy(x):
    return x if isinstance(x, st.SearchStrategy) else st.just(x)


def _normalise(w) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    s = w.sum()
    return np.full(w.size, 1.0 / w.size) if s <= 0 else w / s


@st.composite
def distributions(draw, V=3, allow_zeros: bool = True, ties: bool = True, near_onehot: bool = True):
    """Probability vectors over ``V`` tokens: p_v = w_v / sum(w) with small integer weights w.

    Three kinds of rows: small weights 0..6 (zeros, ties: degenerate rows), generic weights
    1..10^4 (full support), and near-one-hot rows.  Parameters: ``V`` (int or strategy),
    ``allow_zeros`` (entries exactly 0), ``ties`` (allow equal entries; ``False`` draws distinct
    weights), ``near_onehot`` (also draw rows with mass 1 - eps on one token, eps in
    {1e-3, 1e-6, 0}).  All-zero weights give the uniform row, so the strategy
    shrinks to uniform rows.

    Returns: a strategy of float64 arrays [V] summing to 1.

    >>> from hypothesis import find
    >>> from specsim.testing.strategies import distributions
    >>> find(distributions(3), lambda row: True).tolist()  # the shrink target: the uniform row
    [0.3333333333333333, 0.3333333333333333, 0.3333333333333333]
    >>> find(distributions(4), lambda row: row.max() == 1.0).tolist()
    [0.0, 0.0, 0.0, 1.0]
    """
    V = draw(_as_strategy(V))
    if V < 2:
        raise ValueError(f"distributions need V >= 2, got {V}")
    lo = 0 if allow_zeros else 1
    kind = draw(st.sampled_from(("weights", "generic", "generic", "onehot") if near_onehot else ("weights", "generic")))
    if kind == "onehot":
        # the mode comes from V weights so this branch makes more choices than "weights": Hypothesis
        # shrinks shorter choice sequences first, and the uniform row must stay the shrink target
        top = int(np.argmax(draw(st.lists(st.integers(0, 6), min_size=V, max_size=V))))
        eps = draw(st.sampled_from((1e-3, 1e-6, 0.0) if allow_zeros else (1e-3, 1e-6)))
        row = np.full(V, eps / (V - 1))
        row[top] = 1.0 - eps
        return row / row.sum()
    if kind == "generic":  # no zeros, ties unlikely: rows where every residual has full support
        w = draw(st.lists(st.integers(1, 10 ** 4), min_size=V, max_size=V, unique=not ties))
    elif ties:
        w = draw(st.lists(st.integers(lo, 6), min_size=V, max_size=V))
    else:
        w = draw(st.lists(st.integers(lo, 4 * V), min_size=V, max_size=V, unique=True))
    return _normalise(w)


def _related(rel: str, p: np.ndarray, free: np.ndarray) -> np.ndarray:
    """The draft row for relation ``rel`` to target row ``p`` (``free`` = an independent row)."""
    V = p.size
    if rel == "equal":
        return p.copy()
    if rel == "disjoint":  # mass only where p is smallest: supports disjoint unless p has no zeros
        out = np.where(p == p.min(), 1.0, 0.0)
        return _normalise(out if p.min() == 0 else np.eye(V)[int(np.argmin(p))])
    if rel == "onehot":
        return np.eye(V)[int(np.argmax(free))]
    if rel == "skewed":  # the target's ranking reversed, sharpened: draft confident where p is not
        order = np.argsort(np.argsort(-p, kind="stable"), kind="stable")
        return _normalise(2.0 ** order)
    if rel == "zeros":  # the independent row with the target's most likely token removed
        z = free.copy()
        z[int(np.argmax(p))] = 0.0
        return _normalise(z)
    return free


@st.composite
def distribution_pairs(draw, V=st.integers(3, 4), relations=RELATIONS, allow_zeros: bool = True):
    """(p, q) pairs of probability vectors over the same V tokens, the draft row q related to the
    target row p as in :func:`model_pairs`: ``independent``, ``equal`` (q = p), ``disjoint`` (mass
    where p is smallest), ``onehot``, ``skewed`` (p's ranking reversed and sharpened) or
    ``zeros`` (p's mode removed).

    Parameters: ``V`` (int or strategy, >= 2), ``relations`` (the relations to draw from; the
    first is the shrink target), ``allow_zeros`` (as in :func:`distributions`).

    Returns: a strategy of ``(p, q)`` tuples of float64 arrays [V].

    >>> from hypothesis import find
    >>> from specsim.testing.strategies import distribution_pairs
    >>> p, q = find(distribution_pairs(3, relations=("disjoint",)), lambda pq: pq[0][0] > 0.5)
    >>> bool((p * q).sum() == 0 or p.min() > 0)
    True
    """
    V = draw(_as_strategy(V))
    if V < 2:
        raise ValueError(f"distribution_pairs need V >= 2, got {V}")
    rel = draw(st.sampled_from(tuple(relations)))
    p = draw(distributions(V, allow_zeros=allow_zeros))
    return p, _related(rel, p, draw(distributions(V, allow_zeros=allow_zeros)))


def _contexts(V: int, depth: int):
    return [c for k in range(depth + 1) for c in itertools.product(range(V), repeat=k)]


@dataclass(frozen=True, eq=False)
class ModelPair:
    """A target / draft pair drawn by :func:`model_pairs`.

    Rows depend on the last ``depth`` tokens of the prefix (``rows[c]`` for every context c of
    length <= depth; longer prefixes use their last ``depth`` tokens).  ``relations[c]`` says how
    the draft row was made from the target row at c.  ``seed`` is set instead when the pair comes
    from :func:`specsim.models.random_model`.  ``target, draft_model = pair`` unpacks it.

    >>> from specsim.models import random_model
    >>> from specsim.testing.strategies import ModelPair
    >>> pair = ModelPair(random_model(3, 0), random_model(3, 1), 3, None, seed=(0, 1))
    >>> pair
    ModelPair(V=3, random_model seeds=(0, 1))
    >>> target, draft_model = pair
    """

    target: Model
    draft_model: Model
    V: int
    depth: int | None
    relations: dict = field(default_factory=dict, repr=False)
    seed: tuple | None = None

    def __iter__(self):  # allows ``target, draft_model = pair``
        return iter((self.target, self.draft_model))

    def __repr__(self) -> str:
        if self.seed is not None:
            return f"ModelPair(V={self.V}, random_model seeds={self.seed})"
        rel = {k: v for k, v in self.relations.items() if v != "independent"}
        return f"ModelPair(V={self.V}, depth={self.depth}, non-independent draft rows={rel})"


def _table_model(rows: dict, V: int, depth: int, name: str) -> Model:
    def fn(prefix):
        return rows[prefix[len(prefix) - depth:] if depth else ()] if len(prefix) > depth else rows[prefix]
    return Model(fn, V, name)


@st.composite
def model_pairs(draw, V=st.integers(3, 4), depth=st.integers(1, 2), relations=RELATIONS,
                seeded: bool = True, allow_zeros: bool = True):
    """Context-dependent (target, draft) :class:`ModelPair` objects over V tokens.

    Target rows p(.|c) are drawn by :func:`distributions` for every context c of length <= depth
    (a depth-``depth`` Markov model, so rows differ along any draft); the draft row at c is either
    independent or derived from p(.|c) by a relation in ``relations``: ``equal`` (q = p),
    ``disjoint`` (mass where p is smallest), ``onehot``, ``skewed`` (p's ranking reversed and
    sharpened), ``zeros`` (p's mode removed).  With ``seeded`` a share of pairs are
    :func:`specsim.models.random_model` pairs (every prefix its own Dirichlet row, peaked rows via
    small concentrations).  Shrinks to V = 3 and, per branch, to random_model pairs with small
    seeds or to depth-1 drawn rows with small integer weights (uniform rows when nothing fails).

    Parameters: ``V``, ``depth`` (ints or strategies), ``relations``, ``seeded``, ``allow_zeros``.

    Returns: a strategy of :class:`ModelPair`.

    >>> from hypothesis import given, settings
    >>> from specsim.testing.strategies import model_pairs
    >>> @settings(max_examples=10, database=None, derandomize=True)
    ... @given(model_pairs(V=3, seeded=False))
    ... def rows_are_distributions(pair):
    ...     assert pair.V == 3 and abs(pair.draft_model((2, 1)).sum() - 1) < 1e-12
    >>> rows_are_distributions()
    """
    V = draw(_as_strategy(V))
    if V < 2:
        raise ValueError(f"model_pairs need V >= 2, got {V}")
    relations = tuple(relations)
    if seeded and draw(st.booleans()):
        s = draw(st.tuples(st.integers(0, 2 ** 16), st.integers(0, 2 ** 16),
                           st.sampled_from((1.0, 0.3, 3.0))))
        return ModelPair(random_model(V, s[0], s[2], name=f"target(seed={s[0]}, c={s[2]})"),
                         random_model(V, s[1] + 2 ** 17, s[2], name=f"draft(seed={s[1]}, c={s[2]})"),
                         V, None, {}, s)
    d = draw(_as_strategy(depth))
    ctxs = _contexts(V, d)
    prow = {c: draw(distributions(V, allow_zeros=allow_zeros)) for c in ctxs}
    mixed = relations[0] == "independent" and len(relations) > 1
    # with independent rows available, a context gets a degenerate relation one time in three
    rels = {c: draw(st.sampled_from(relations[1:])) if mixed and draw(st.integers(0, 2)) == 2
            else (relations[0] if mixed else draw(st.sampled_from(relations))) for c in ctxs}
    qrow = {c: _related(rels[c], prow[c], draw(distributions(V, allow_zeros=allow_zeros))) for c in ctxs}
    return ModelPair(_table_model(prow, V, d, "target"), _table_model(qrow, V, d, "draft"), V, d, rels)


def adversarial_pairs(V=st.integers(3, 4), depth=st.integers(1, 2)):
    """Model pairs whose draft rows are all degenerate relative to the target: p = q, disjoint
    supports, one-hot, skewed (reversed ranking) or p's mode removed (see :func:`model_pairs`).

    Parameters: ``V``, ``depth`` (ints or strategies).

    Returns: a strategy of :class:`ModelPair` with ``seed`` None.

    >>> from hypothesis import given, settings
    >>> from specsim.testing.strategies import adversarial_pairs
    >>> @settings(max_examples=10, database=None, derandomize=True)
    ... @given(adversarial_pairs(3))
    ... def every_row_degenerate(pair):
    ...     assert "independent" not in pair.relations.values()
    >>> every_row_degenerate()
    """
    return model_pairs(V, depth, relations=_ADVERSARIAL, seeded=False)


def chain_lengths(max_L: int = 3):
    """Draft lengths L in 1..max_L, shrinking to 1.

    Returns: a strategy of ``int``.

    >>> from hypothesis import find
    >>> from specsim.testing.strategies import chain_lengths
    >>> find(chain_lengths(3), lambda L: True)
    1
    """
    return st.integers(1, max_L)


@st.composite
def chain_inputs(draw, V=st.integers(3, 4), L=st.integers(1, 3), pairs=None):
    """Chain-verifier arguments (draft, p, q) along a draft drawn from a model pair.

    A :class:`ModelPair` is drawn (``pairs``, default :func:`model_pairs` over ``V``), then the
    draft x_1..x_L token by token from the support of q(.|x^{1:k-1}); p[k] = target(.|x^{1:k})
    for k = 0..L (row L is the bonus row) and q[k] = draft(.|x^{1:k}) for k = 0..L-1, the layout
    of the chain protocol (:mod:`specsim.verifiers.base`).

    Parameters: ``V``, ``L`` (ints or strategies), ``pairs`` (a strategy of :class:`ModelPair`).

    Returns: a strategy of ``(draft tuple[int], p [L+1, V], q [L, V])``.

    >>> from hypothesis import find
    >>> from specsim.testing.strategies import chain_inputs
    >>> draft, p, q = find(chain_inputs(L=2), lambda args: True)
    >>> len(draft), p.shape, q.shape, bool(all(q[k, t] > 0 for k, t in enumerate(draft)))
    (2, (3, 3), (2, 3), True)
    """
    pair = draw(pairs if pairs is not None else model_pairs(V=V))
    L = draw(_as_strategy(L))
    draft: list[int] = []
    for _ in range(L):
        support = np.flatnonzero(pair.draft_model(tuple(draft)) > 0).tolist()
        draft.append(draw(st.sampled_from(support)))
    p = np.array([pair.target(tuple(draft[:k])) for k in range(L + 1)])
    q = np.array([pair.draft_model(tuple(draft[:k])) for k in range(L)])
    return tuple(draft), p, q


def _tree_processes() -> list:
    """The branching processes searched by default (small K and depth keep enumeration cheap)."""
    return [_drafts.iid_paths(2), _drafts.swor_tree(2), _drafts.swor_tree(3),
            _drafts.fixed_shape((2, 2), replacement=False), _drafts.fixed_shape((2, 2)),
            _drafts.delayed_expansion(1, 2), _drafts.topk_tree((2,))]


def available_draft_processes(kind: str = "any", needs=None) -> list:
    """The draft processes searched by :func:`draft_processes`: ``chain()``, ``iid_paths(2)``,
    ``swor_tree(2)``, ``swor_tree(3)``, ``fixed_shape((2, 2))`` with and without replacement,
    ``delayed_expansion(1, 2)`` and ``topk_tree((2,))`` from :mod:`specsim.drafts`.

    Parameters: ``kind`` = ``"chain"`` (single-path processes, the ones chain verifiers accept),
    ``"tree"`` (branching processes) or ``"any"``; ``needs``: children laws a tree verifier relies
    on (``specsim.drafts.DRAFT_LAWS``, e.g. ``{"iid"}``; ``"any"`` or ``None`` = no requirement):
    only processes guaranteeing one of them are returned.

    Returns: a list of draft processes, ``chain()`` first when it applies.

    >>> from specsim.testing.strategies import available_draft_processes
    >>> [p.name for p in available_draft_processes("chain")]
    ['chain']
    >>> len(available_draft_processes("tree")), len(available_draft_processes("any", needs={"iid"})) >= 2
    (7, True)
    """
    if kind not in ("chain", "tree", "any"):
        raise ValueError(f"kind must be 'chain', 'tree' or 'any', got {kind!r}")
    out = [_drafts.chain()] if kind in ("chain", "any") else []
    if kind != "chain":
        out += _tree_processes()
    if needs is not None:
        out = [p for p in out if meets_needs(p, needs)]
    return out


def draft_processes(kind: str = "any", needs=None):
    """A strategy over :func:`available_draft_processes` (shrinks to ``chain()`` when it applies).

    Parameters: ``kind``, ``needs`` as in :func:`available_draft_processes`.

    Returns: a strategy of draft processes; ``ValueError`` when none applies.

    >>> from hypothesis import find
    >>> from specsim.testing.strategies import draft_processes
    >>> find(draft_processes("any"), lambda p: True).name
    'chain'
    """
    procs = available_draft_processes(kind, needs)
    if not procs:
        raise ValueError(f"no available draft process of kind {kind!r} guarantees {sorted(needs or ())}")
    return st.sampled_from(procs)
