"""Sequoia's tree-shape dynamic program (docs/theory.md §6.2, Algorithm 6.2 TreeDP).

Given the probability a_b that the b-th ranked child of a node is the accepted one (assumed the
same at every depth), the expected number of tokens per step of a tree is

    F(tree) = sum_{v in tree} prod_{edges root -> v} a_{rank(edge)}     (the root counts 1: the bonus),

and Sequoia (Chen et al., arXiv 2402.12374, Alg. 1) maximises it over trees with m nodes and at
most l layers (the root layer counted).  A tree shape is a nested tuple: a node is the tuple of
its children, in rank order, e.g. ``((), ((),))`` is a root with two children, the first a leaf
and the second with one child.

>>> from specsim.sequoia_dp import sequoia_tree, shape_widths
>>> best = sequoia_tree([0.6, 0.2, 0.1], m=6, layers=3)
>>> round(best.value, 6), shape_widths(best.shape)
(2.4, [[2], [2, 1]])
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ._validate import check_int

__all__ = ["TreeShape", "sequoia_tree", "tree_value", "brute_force_tree", "shape_widths"]

Shape = tuple  # recursive: tuple of child shapes


@dataclass(frozen=True)
class TreeShape:
    """The optimum of the tree DP: ``value`` = F*(m, l), attained by ``shape`` (nested tuples).

    Fields: ``value`` (expected tokens per step, the bonus included), ``nodes`` (m, the root
    included), ``layers`` (the limit l it was solved under), ``shape``.

    >>> from specsim.sequoia_dp import sequoia_tree
    >>> best = sequoia_tree([0.6, 0.2, 0.1], m=4, layers=2)
    >>> best.shape, best.depth, round(best.value, 6)
    (((), (), ()), 2, 1.9)
    """

    value: float
    nodes: int
    layers: int
    shape: Shape

    @property
    def depth(self) -> int:
        """Number of layers ``shape`` uses (root layer counted), at most ``layers``."""
        return _layers(self.shape)


def _layers(shape: Shape) -> int:
    return 1 + max((_layers(c) for c in shape), default=0)


def _size(shape: Shape) -> int:
    return 1 + sum(_size(c) for c in shape)


#: Deepest shape accepted (the recursive evaluations stay far from Python's recursion limit).
MAX_LAYERS = 256


def _check_shape(shape) -> Shape:
    """``shape`` as nested tuples; ``TypeError`` for a node that is not a tuple or list (a string
    would nest forever), ``ValueError`` beyond :data:`MAX_LAYERS` layers."""
    def convert(node, depth, where):
        if not isinstance(node, (tuple, list)):
            raise TypeError(f"shape: node {where} must be a tuple (or list) of child shapes, got {node!r}")
        if depth > MAX_LAYERS:
            raise ValueError(f"shape has more than {MAX_LAYERS} layers")
        return tuple(convert(c, depth + 1, f"{where}.{j}") for j, c in enumerate(node))
    return convert(shape, 1, "root")


def _check_a(a) -> tuple[float, ...]:
    try:
        arr = np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"a must be a 1-D vector of per-rank acceptance probabilities, got {a!r}") from None
    if arr.ndim != 1 or arr.size < 1:
        raise ValueError(f"a must be a non-empty 1-D vector of per-rank acceptance probabilities, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0) or np.any(arr > 1):
        raise ValueError(f"a must have entries in [0, 1], got {arr.tolist()}")
    if np.any(np.diff(arr) > 0):
        raise ValueError(f"a must be non-increasing (a_1 >= a_2 >= ...), got {arr.tolist()}")
    if arr.sum() > 1 + 1e-12:
        raise ValueError(f"a sums to {arr.sum()!r} > 1: at most one child is accepted")
    return tuple(float(x) for x in arr)


def tree_value(shape: Shape, a) -> float:
    """F(tree) = sum over nodes v of prod_{edges root -> v} a_{rank(edge)} (the root counts 1).

    Equivalently F(node) = 1 + sum_j a_j F(child_j), children in rank order j = 1, 2, ...

    Parameters: ``shape`` (nested tuples, see the module docstring), ``a`` (per-rank acceptance
    probabilities, non-increasing, entries in [0, 1], sum <= 1).

    Returns: F as a float; ``ValueError`` for a bad ``a`` or a node with more children than ranks.

    >>> from specsim.sequoia_dp import tree_value
    >>> tree_value(((),), [0.6, 0.2])            # the root and its best-ranked child
    1.6
    >>> round(tree_value(((), ((),)), [0.6, 0.2]), 6)   # 1 + 0.6 + 0.2 (1 + 0.6)
    1.92
    """
    a = _check_a(a)

    def val(s: Shape) -> float:
        if len(s) > len(a):
            raise ValueError(f"a node has {len(s)} children but a has only {len(a)} ranks")
        return 1.0 + sum(a[j] * val(c) for j, c in enumerate(s))

    return val(_check_shape(shape))


def sequoia_tree(a, m: int, layers: int | None = None) -> TreeShape:
    """Sequoia's TreeDP: the best tree with exactly m nodes and at most ``layers`` layers.

    T(1, l) = 1; T(m, 1) = -inf (m > 1); T(m, l) = 1 + G_l(m - 1, 1) with G_l(0, .) = 0,
    G_l(r > 0, j > len(a)) = -inf and G_l(r, j) = max_{1<=s<=r} [a_j T(s, l - 1) + G_l(r - s, j + 1)];
    F*(m, l) = max_{l' <= l} T(m, l').  O(m^2 l len(a)).  ``layers=None``: unlimited (l = m).
    (Sequoia, Chen et al., arXiv 2402.12374, Alg. 1; docs/theory.md §6.2.)

    Parameters: ``a`` (per-rank acceptance probabilities, as for :func:`tree_value`), ``m``
    (node budget >= 1, the root included), ``layers`` (limit >= 1 or ``None``).

    Returns: the optimal :class:`TreeShape`; ``ValueError`` when no tree with m nodes fits in the
    layers with at most ``len(a)`` children per node.

    >>> from specsim.sequoia_dp import sequoia_tree
    >>> best = sequoia_tree([0.6, 0.2, 0.1], 4)    # docs/theory.md §12, R12
    >>> round(best.value, 6), best.shape           # the chain 1 + 0.6 + 0.6^2 + 0.6^3
    (2.176, ((((),),),))
    """
    a = _check_a(a)
    check_int(m, "m", 1)
    l = m if layers is None else check_int(layers, "layers", 1)
    neg = (-np.inf, None)

    @functools.lru_cache(maxsize=None)
    def T(n: int, depth: int):
        if n == 1:
            return 1.0, ()
        if depth == 1:
            return neg
        v, kids = G(n - 1, 0, depth)
        return (1.0 + v, kids) if kids is not None else neg

    @functools.lru_cache(maxsize=None)
    def G(rem: int, j: int, depth: int):
        if rem == 0:
            return 0.0, ()
        if j >= len(a):
            return neg
        best = neg
        for s in range(1, rem + 1):
            tv, ts = T(s, depth - 1)
            gv, gs = G(rem - s, j + 1, depth)
            if ts is None or gs is None:
                continue
            v = a[j] * tv + gv
            if v > best[0]:
                best = (v, (ts,) + gs)
        return best

    best = max((T(m, d) for d in range(1, l + 1)), key=lambda r: r[0])
    if best[1] is None:
        raise ValueError(f"no tree with {m} nodes fits in {l} layers with at most {len(a)} children per node")
    return TreeShape(best[0], m, l, best[1])


def _all_trees(n: int, width: int, depth: int) -> list[Shape]:
    """Every ordered tree with n nodes, at most ``width`` children per node and <= depth layers."""

    @functools.lru_cache(maxsize=None)
    def trees(k: int, d: int) -> tuple:
        return tuple(forests(k - 1, width, d - 1)) if d >= 1 else ()

    def forests(k: int, w: int, d: int):
        if k == 0:
            yield ()
            return
        if w == 0 or d == 0:
            return
        for s in range(1, k + 1):
            for first in trees(s, d):
                for rest in forests(k - s, w - 1, d):
                    yield (first,) + rest

    return list(trees(n, depth))


def brute_force_tree(a, m: int, layers: int | None = None) -> TreeShape:
    """The optimum of :func:`sequoia_tree` by trying every ordered tree with m nodes (children
    ranked 1..k) and evaluating :func:`tree_value`: an independent check of the DP, for tests.

    Exponential in m (Catalan numbers); use m <= 10.  Parameters and result as
    :func:`sequoia_tree` (the first best tree found on ties, which may differ from the DP's).

    >>> from specsim.sequoia_dp import brute_force_tree
    >>> round(brute_force_tree([0.6, 0.2, 0.1], 4).value, 6)
    2.176
    """
    a = _check_a(a)
    check_int(m, "m", 1)
    l = m if layers is None else check_int(layers, "layers", 1)
    best = None
    for shape in _all_trees(m, len(a), l):
        v = tree_value(shape, a)
        if best is None or v > best[0]:
            best = (v, shape)
    if best is None:
        raise ValueError(f"no tree with {m} nodes fits in {l} layers with at most {len(a)} children per node")
    return TreeShape(best[0], m, l, best[1])


def shape_widths(shape: Shape) -> list[list[int]]:
    """Children counts per node, layer by layer (root layer first): a compact view of a shape.

    Parameters: ``shape`` (nested tuples or lists, at most :data:`MAX_LAYERS` layers).

    Returns: one list per layer that has a parent of a node (``[]`` for a root alone);
    ``TypeError`` when a node is not a tuple or list.

    >>> from specsim.sequoia_dp import shape_widths
    >>> shape_widths(((), ((),)))
    [[2], [0, 1]]
    """
    out, level = [], [_check_shape(shape)]
    while level:
        out.append([len(s) for s in level])
        level = [c for s in level for c in s]
    return out[:-1] if out and not any(out[-1]) else out
