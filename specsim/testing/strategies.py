"""Hypothesis strategies for speculative-decoding tests: rows, model pairs, draft processes.

Losslessness, C(z) = P(z) for every z in V^{L+1} (docs/theory.md §2), must hold for *every* target /
draft pair, so tests should search the pairs that break implementations: V >= 3 (with V = 2 every
residual is a point mass), rows that change with the prefix (identical rows hide wrong-row bugs),
and degenerate rows: p = q, disjoint supports, zeros, one-hot rows and ties.

Rows are built from integer weights, so failing examples shrink to readable rows such as
(1/3, 2/3, 0); drawn rows shrink toward the uniform row, V toward 3 and L toward 1.

>>> from hypothesis import given
>>> @given(model_pairs())
... def test_mine(pair): ...
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from .. import drafts as _drafts
from ..models import Model, random_model

__all__ = ["distributions", "model_pairs", "adversarial_pairs", "ModelPair", "RELATIONS",
           "draft_processes", "available_draft_processes", "chain_lengths"]

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
    shrinks to uniform rows.  Returns float64 arrays summing to 1.

    >>> distributions(3).example().shape
    (3,)
    """
    V = draw(_as_strategy(V))
    if V < 2:
        raise ValueError(f"distributions need V >= 2, got {V}")
    lo = 0 if allow_zeros else 1
    kind = draw(st.sampled_from(("weights", "generic", "generic", "onehot") if near_onehot else ("weights", "generic")))
    if kind == "onehot":
        top = draw(st.integers(0, V - 1))
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


def _contexts(V: int, depth: int):
    return [c for k in range(depth + 1) for c in itertools.product(range(V), repeat=k)]


@dataclass(frozen=True, eq=False)
class ModelPair:
    """A target / draft pair drawn by :func:`model_pairs`.

    Rows depend on the last ``depth`` tokens of the prefix (``rows[c]`` for every context c of
    length <= depth; longer prefixes use their last ``depth`` tokens).  ``relations[c]`` says how
    the draft row was made from the target row at c.  ``seed`` is set instead when the pair comes
    from :func:`specsim.models.random_model`.
    """

    target: Model
    draft: Model
    V: int
    depth: int | None
    relations: dict = field(default_factory=dict, repr=False)
    seed: tuple | None = None

    def __iter__(self):  # allows ``target, draft = pair``
        return iter((self.target, self.draft))

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

    >>> pair = model_pairs().example(); pair.target.V >= 3
    True
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

    >>> adversarial_pairs(3).example().V
    3
    """
    return model_pairs(V, depth, relations=_ADVERSARIAL, seeded=False)


def chain_lengths(max_L: int = 3):
    """Draft lengths 1..max_L, shrinking to 1."""
    return st.integers(1, max_L)


_TREE_FACTORIES = (  # (attribute in specsim.drafts, argument sets tried in turn)
    ("iid_paths", ({"K": 2},)),
    ("swor_tree", ({"K": 2}, {"K": 3})),
    ("fixed_shape", ({"widths": (2, 2), "replacement": False}, {"widths": (2, 2)})),
    ("delayed_expansion", ({"d": 1, "K": 2},)),
    ("topk_tree", ({"widths": (2,)},)),
)


def _laws(proc) -> frozenset:
    f = getattr(_drafts, "draft_laws", None)
    return frozenset(f(proc)) if callable(f) else frozenset({"chain"} if isinstance(proc, _drafts.Chain) else ())


def available_draft_processes(kind: str = "any", needs=None) -> list:
    """The draft processes :mod:`specsim.drafts` provides right now (discovered at run time).

    ``kind`` = ``"chain"`` (single-path processes, the ones chain verifiers accept), ``"tree"``
    (branching processes) or ``"any"``.  ``needs``: children laws a tree verifier relies on
    (``specsim.drafts.DRAFT_LAWS``, e.g. ``{"iid"}``; ``"any"`` or ``None`` = no requirement):
    only processes guaranteeing one of them are returned.  ``chain()`` comes first when it applies.
    """
    if kind not in ("chain", "tree", "any"):
        raise ValueError(f"kind must be 'chain', 'tree' or 'any', got {kind!r}")
    out = [_drafts.chain()] if kind in ("chain", "any") else []
    if kind != "chain":
        for attr, options in _TREE_FACTORIES:
            factory = getattr(_drafts, attr, None)
            if not callable(factory):
                continue
            for kw in options:
                try:
                    proc = factory(**kw)
                except (TypeError, ValueError):
                    continue
                if hasattr(proc, "enumerate"):
                    out.append(proc)
    if needs is not None and "any" not in needs:
        out = [p for p in out if _laws(p) & frozenset(needs)]
    return out


def draft_processes(kind: str = "any", needs=None):
    """A strategy over :func:`available_draft_processes` (shrinks to ``chain()`` when it applies).

    Tree processes added to :mod:`specsim.drafts` (``iid_paths(K)``, ``swor_tree(K)``,
    ``fixed_shape``, ``delayed_expansion``, ``topk_tree``) are picked up automatically.
    """
    procs = available_draft_processes(kind, needs)
    if not procs:
        raise ValueError(f"no available draft process of kind {kind!r} guarantees {sorted(needs or ())}")
    return st.sampled_from(procs)
