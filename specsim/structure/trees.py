"""Optimal draft trees under a node budget, per verifier (docs/theory.md §13).

Deterministic trees (a fixed function of the rows, verified by sampling y ~ p and walking the
tree, :data:`specsim.verifiers.deterministic_children`): the walk follows a target sample, so
node v is reached with probability P_p(v) = prod of p along root -> v and

    E[tau] = sum over drafted nodes v of P_p(v).

P_p decreases along every path, so the n nodes of largest P_p form a prefix-closed tree: the
exact optimum over all trees of n drafted nodes (``"oracle"``).  The draft-ranked heuristics
take the n nodes of largest *draft* path probability P_q(v) (``"eagle2"``, EAGLE-2, arXiv
2406.16858) or OPT-Tree's layer-wise rule (``"opt_tree"``, arXiv 2406.17276); both are scored
with the same exact formula, so their regret against the oracle is exact.

Sampled trees (drawn by a process with i.i.d. or without-replacement draws) have no such
closed form: :func:`search_shapes` evaluates every per-depth width vector within the budget
with the exact engine, for each verifier that applies, and :func:`sequoia_shape` evaluates the
shape Sequoia's DP picks (arXiv 2402.12374) under its position-independent acceptance model.

>>> from specsim.models import random_model
>>> from specsim.structure import optimal_tree
>>> target, draft_model = random_model(4, 0), random_model(4, 1)
>>> best = optimal_tree(target, draft_model, 6, L=3)
>>> eagle = optimal_tree(target, draft_model, 6, L=3, method="eagle2")
>>> best.status, round(best.expected_accepted, 6), round(eagle.regret, 6)
('exact optimum', 1.808799, 1.390849)
"""
from __future__ import annotations

import heapq
import itertools
import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from .._validate import check_int, check_real
from ..drafts import DraftTree, TreeProcess, _options_swor
from ..exact import expected_accepted, outcomes_on_tree
from ..models import Model, validate_model_pair
from ..parallel import check_workers, map_tasks
from ..verifiers import TREE_VERIFIERS, deterministic_children
from ..verifiers.base import Verifier, as_verifier
from .cost import CostModel
from .renewal import Throughput, _check_cost, _check_values, paths_cost, throughput

__all__ = ["TreeDesign", "FixedTree", "ShapeProcess", "deterministic_value", "ranked_tree", "opt_tree",
           "build_tree", "optimal_tree", "search_space", "search_shapes", "sequoia_shape", "optimal_budget",
           "BudgetChoice", "speed_of_light", "SAMPLED_VERIFIERS", "MAX_SHAPES", "MAX_TREES", "STATUS"]

#: What a result may claim about itself.
STATUS = ("exact optimum", "exact optimum over the searched shapes", "DP optimum under position-independent acceptance",
          "heuristic")
#: The sampled-tree verifiers searched by default (each on the processes it applies to).
SAMPLED_VERIFIERS = ("specinfer", "sequoia", "traversal", "traversal_repeats", "traversal_paths", "gbv",
                     "khisti_optimal", "spectr")
#: Largest number of shapes :func:`search_shapes` evaluates before refusing.
MAX_SHAPES = 400
#: Largest V^N (N = most drafted nodes of a shape: a bound on the draft trees the engine may
#: enumerate for it) :func:`search_shapes` accepts before refusing.
MAX_TREES = 100_000


# ---------------------------------------------------------------------------------------- processes
@dataclass(frozen=True)
class FixedTree:
    """The draft process that always drafts one given tree (probability 1): a deterministic tree.

    ``laws = {"deterministic"}``, so only verifiers that need nothing of q apply
    (``deterministic_children``).  The tree's rows are used as given (``target``/``draft_model``
    are ignored by :meth:`enumerate`).
    """

    tree: DraftTree
    name: str = "fixed_tree"

    @property
    def laws(self) -> frozenset[str]:
        return frozenset({"deterministic"})

    def enumerate(self, target, draft_model, L) -> Iterator[tuple[float, DraftTree]]:
        yield 1.0, self.tree

    def sample(self, target, draft_model, L, rng) -> DraftTree:
        return self.tree


def _shape_layers(shape) -> int:
    return 1 + max((_shape_layers(c) for c in shape), default=0)


def _shape_size(shape) -> int:
    return 1 + sum(_shape_size(c) for c in shape)


@dataclass(frozen=True)
class ShapeProcess:
    """A tree whose node widths follow a nested-tuple shape (:mod:`specsim.sequoia_dp`): the node at
    rank path r draws len(shape[r]) children without replacement from its draft row (successive
    sampling, as :func:`specsim.drafts.swor_tree`), the j-th draw taking the shape shape[r][j].
    This is the tree Sequoia's DP returns; fewer children where q has fewer supported tokens.

    >>> from specsim.models import iid
    >>> from specsim.structure import ShapeProcess
    >>> trees = list(ShapeProcess((((),), ())).enumerate(iid([0.5, 0.5]), iid([0.5, 0.5]), 2))
    >>> [(Q, t.tokens) for Q, t in trees]
    [(0.25, (-1, 0, 1, 0)), (0.25, (-1, 0, 1, 1)), (0.25, (-1, 1, 0, 0)), (0.25, (-1, 1, 0, 1))]
    """

    shape: tuple
    name: str = ""

    def __post_init__(self):
        from ..sequoia_dp import _check_shape
        object.__setattr__(self, "shape", _check_shape(self.shape))
        if not self.name:
            from ..sequoia_dp import shape_widths
            object.__setattr__(self, "name", f"shape{shape_widths(self.shape)}")

    @property
    def laws(self) -> frozenset[str]:
        return frozenset({"swor"})

    def enumerate(self, target, draft_model, L) -> Iterator[tuple[float, DraftTree]]:
        L = validate_model_pair(target, draft_model, L)
        if _shape_layers(self.shape) > L + 1:
            raise ValueError(f"shape has {_shape_layers(self.shape) - 1} levels of drafts, deeper than L={L}")
        V = target.V
        zero = np.zeros(V)

        def grow(level, tokens, parent, paths, shapes, draws, prob):
            if not level:
                P = np.stack([target(x) for x in paths])
                Q = np.stack([draft_model(x) if draws[u] else zero for u, x in enumerate(paths)])
                yield prob, DraftTree(tuple(tokens), tuple(parent), P, Q, tuple(draws), False)
                return
            per_node = [_options_swor(np.asarray(draft_model(paths[u])), len(shapes[u])) for u in level]
            for combo in itertools.product(*per_node):
                tk, pa, pt, sh, dr = list(tokens), list(parent), list(paths), list(shapes), list(draws)
                pr, nxt = prob, []
                for u, (xs, px) in zip(level, combo):
                    pr *= px
                    dr[u] = xs
                    for j, x in enumerate(xs):
                        nxt.append(len(tk))
                        tk.append(x), pa.append(u), pt.append(pt[u] + (x,)), sh.append(shapes[u][j]), dr.append(())
                if pr > 0:
                    yield from grow([v for v in nxt if sh[v]], tk, pa, pt, sh, dr, pr)

        root = [0] if self.shape else []
        yield from grow(root, [-1], [-1], [()], [self.shape], [()], 1.0)

    def sample(self, target, draft_model, L, rng) -> DraftTree:
        raise NotImplementedError("ShapeProcess is for exact enumeration")


# ---------------------------------------------------------------------------------------- results
@dataclass(frozen=True)
class TreeDesign:
    """A draft tree chosen for a verifier under a node budget, with its exact value and what it claims.

    Fields: ``method`` (``"oracle"``, ``"eagle2"``, ``"opt_tree"``, ``"exhaustive"``,
    ``"sequoia_dp"``), ``verifier``, ``family`` (``"deterministic"`` or ``"sampled"``), ``budget``
    (drafted nodes allowed, root excluded), ``nodes`` (drafted nodes used; for sampled trees the
    most any draw gives), ``expected_accepted`` (exact E[tau]), ``optimum`` (the family's exact
    optimum at this budget when it was computed, else ``None``), ``regret`` (optimum - value),
    ``status`` (one of :data:`STATUS`), ``paths`` (deterministic: the drafted paths, best first),
    ``drafting`` (sampled: the process), ``searched`` (shapes evaluated), ``throughput`` (a
    :class:`~specsim.structure.Throughput` when a cost model was given), ``note``, ``predicted``
    (Sequoia's DP: the E[tau] its acceptance model predicts for its tree).
    """

    method: str
    verifier: str
    family: str
    budget: int
    nodes: int
    expected_accepted: float
    optimum: float | None
    regret: float | None
    status: str
    paths: tuple = ()
    drafting: object = None
    searched: int = 0
    throughput: Throughput | None = None
    note: str = ""
    predicted: float | None = None

    @property
    def tokens_per_step(self) -> float:
        """E[tau] + 1."""
        return self.expected_accepted + 1.0


# ---------------------------------------------------------------------------------------- deterministic trees
def deterministic_value(target: Model, paths: Sequence[Sequence[int]]) -> float:
    """E[tau] = sum_v P_p(v) of a deterministic tree under sample-and-match verification.

    ``paths`` are the drafted nodes' root-to-node token paths (prefix-closed; ``ValueError`` if a
    path's parent is missing).  P_p(v) = prod_k p(v_k | v^{1:k-1}) read from ``target``.

    >>> from specsim.models import iid
    >>> from specsim.structure import deterministic_value
    >>> deterministic_value(iid([0.5, 0.3, 0.2]), [(0,), (1,), (0, 0)])       # 0.5 + 0.3 + 0.25
    1.05
    """
    paths = [tuple(int(t) for t in x) for x in paths]
    have = set(paths)
    total = 0.0
    for x in paths:
        if not x:
            raise ValueError("paths lists drafted nodes; the root (empty path) is not one")
        if len(x) > 1 and x[:-1] not in have:
            raise ValueError(f"paths is not prefix-closed: {x} is drafted without its parent {x[:-1]}")
        w = 1.0
        for k in range(len(x)):
            w *= float(target(x[:k])[x[k]])
        total += w
    return total


def _prefetch(model, prefixes) -> None:
    # a model backed by a batched forward pass (scripts/structure_real.py) may fill its cache in one call
    hook = getattr(model, "prefetch", None)
    if hook is not None:
        hook(list(prefixes))


def ranked_tree(rank_model: Model, budget: int, L: int) -> list[tuple[tuple[int, ...], float]]:
    """The ``budget`` nodes of largest path probability under ``rank_model``, depth <= L, best first.

    Best-first search: a heap holds, for each drafted node, its best not-yet-taken child; taking a
    node pushes its own best child and its parent's next child, so each node sorts one row.
    Ties go to the shallower node, then the smaller path, so a parent (weight >= its child's)
    always comes first and the result is prefix-closed.  Nodes of probability 0 are never taken.

    Returns: a list of ``(path, P_rank(path))``.

    >>> from specsim.models import iid
    >>> from specsim.structure import ranked_tree
    >>> [(x, round(w, 4)) for x, w in ranked_tree(iid([0.6, 0.3, 0.1]), 4, L=3)]
    [((0,), 0.6), ((0, 0), 0.36), ((1,), 0.3), ((0, 0, 0), 0.216)]
    """
    budget = check_int(budget, "budget", 1)
    L = check_int(L, "L", 1)
    orders: dict[tuple, np.ndarray] = {}

    def order(x):
        if x not in orders:
            row = np.asarray(rank_model(x))
            o = np.lexsort((np.arange(row.size), -row))
            orders[x] = o[row[o] > 0]
        return orders[x]

    def push(heap, parent, w_parent, j):
        o = order(parent)
        if j < o.size:
            t = int(o[j])
            w = w_parent * float(rank_model(parent)[t])
            if w > 0:
                x = parent + (t,)
                heapq.heappush(heap, (-w, len(x), x, parent, w_parent, j))

    heap: list = []
    push(heap, (), 1.0, 0)
    out = []
    while heap and len(out) < budget:
        negw, _, x, parent, w_parent, j = heapq.heappop(heap)
        out.append((x, -negw))
        push(heap, parent, w_parent, j + 1)
        if len(x) < L:
            _prefetch(rank_model, [x])
            push(heap, x, -negw, 0)
    return out


def opt_tree(draft_model: Model, budget: int, threshold: float = 0.5, max_depth: int = 10,
             L: int | None = None) -> tuple[list[tuple[tuple[int, ...], float]], int]:
    """OPT-Tree's tree (Wang et al., arXiv 2406.17276; Jikai0Wang/OPT-Tree, ``Tree.update``).

    Layer by layer it keeps n = ``budget`` candidates: layer 1 is the n most likely tokens of
    q(.|root); layer d+1 the n largest products w(u) q(x|u) over the layer-d candidates u and
    their n most likely tokens x.  Let E_d be the sum of the n largest weights among layers
    1..d (E_0 = 0).  After drafting layer d+1 it stops if E_d - E_{d-1} <= ``threshold`` or
    d + 1 = ``max_depth``, and drafts the n largest weights of layers 1..d: the tree's depth
    is the first d whose gain E_d - E_{d-1} is at most the threshold, capped at max_depth - 1
    (and at ``L`` here, the models' horizon).  The beam keeps exactly the global top-n draft
    paths of depth <= d, so the result is ``ranked_tree(draft_model, n, d)``.

    Returns: ``(nodes, depth)`` with nodes as in :func:`ranked_tree`.

    >>> from specsim.models import iid
    >>> from specsim.structure import opt_tree
    >>> nodes, depth = opt_tree(iid([0.6, 0.3, 0.1]), 4, threshold=0.5, max_depth=10)
    >>> depth, [x for x, _ in nodes]      # E_1 = 1.0 > 0.5, then E_2 - E_1 = 1.44 - 1.0 <= 0.5
    (2, [(0,), (0, 0), (1,), (0, 1)])
    """
    n = check_int(budget, "budget", 1)
    threshold = check_real(threshold, "threshold", 0.0)
    max_depth = check_int(max_depth, "max_depth", 2)
    cap = max_depth - 1 if L is None else min(max_depth - 1, check_int(L, "L", 1))
    layers: list[list[tuple[float, tuple]]] = []
    level = [(1.0, ())]
    prev = 0.0
    depth = cap
    for d in range(1, cap + 1):
        _prefetch(draft_model, [x for _, x in level])
        cand = []
        for w, x in level:
            row = np.asarray(draft_model(x))
            o = np.lexsort((np.arange(row.size), -row))[:n]
            cand.extend((w * float(row[t]), x + (int(t),)) for t in o if row[t] > 0)
        cand.sort(key=lambda c: (-c[0], c[1]))
        level = cand[:n]
        layers.append(level)
        E = sum(sorted((w for lay in layers for w, _ in lay), reverse=True)[:n])
        if E - prev <= threshold or not level:
            depth = d
            break
        prev = E
    return ranked_tree(draft_model, n, depth), depth


def build_tree(target: Model, draft_model: Model, paths: Sequence[Sequence[int]]) -> DraftTree:
    """The :class:`~specsim.drafts.DraftTree` of a prefix-closed set of drafted paths (breadth
    first), with target and draft rows at every node; not validated against q (a target-ranked
    tree may draft tokens the drafter gives probability 0; sample-and-match ignores q)."""
    paths = sorted({tuple(x) for x in paths}, key=lambda x: (len(x), x))
    index = {(): 0}
    tokens, parent = [-1], [-1]
    for x in paths:
        index[x] = len(tokens)
        tokens.append(x[-1]), parent.append(index[x[:-1]])
    nodes = [()] + paths
    kids: list[list[int]] = [[] for _ in nodes]
    for i in range(1, len(nodes)):
        kids[parent[i]].append(tokens[i])
    P = np.stack([target(x) for x in nodes])
    Q = np.stack([draft_model(x) if kids[i] else np.zeros(target.V) for i, x in enumerate(nodes)])
    return DraftTree(tuple(tokens), tuple(parent), P, Q, tuple(tuple(k) for k in kids), False)


def _deterministic(target, draft_model, budget, L, method, threshold, max_depth, cost, optimum):
    if method == "oracle":
        nodes, note = ranked_tree(target, budget, L), "top-n target path probabilities"
    elif method == "eagle2":
        nodes, note = ranked_tree(draft_model, budget, L), "top-n draft path probabilities (EAGLE-2 ranking)"
    elif method == "opt_tree":
        nodes, depth = opt_tree(draft_model, budget, threshold, max_depth, L)
        note = f"OPT-Tree depth rule: threshold {threshold:g}, stopped at depth {depth}"
    else:
        raise ValueError(f"method must be 'oracle', 'eagle2' or 'opt_tree' for deterministic trees, got {method!r}")
    paths = tuple(x for x, _ in nodes)
    value = deterministic_value(target, paths)
    if optimum is None:
        optimum = value if method == "oracle" else deterministic_value(target, [x for x, _ in ranked_tree(target, budget, L)])
    tp = None
    if cost is not None:
        c = paths_cost(paths, cost)
        tp = Throughput(value + 1.0, c, (value + 1.0) / c, (value + 1.0) / c * cost.plain, True,
                        deterministic_children.name, f"{method}({budget})", max((len(x) for x in paths), default=0))
    return TreeDesign(method, deterministic_children.name, "deterministic", budget, len(paths), value, optimum,
                      max(0.0, optimum - value), "exact optimum" if method == "oracle" else "heuristic",
                      paths=paths, throughput=tp, note=note)


# ---------------------------------------------------------------------------------------- sampled trees
def _max_nodes(widths: Sequence[int]) -> int:
    total, level = 0, 1
    for w in widths:
        level *= w
        total += level
    return total


def _width_vectors(budget: int, L: int) -> list[tuple[int, ...]]:
    """Every (w_0..w_{l-1}), 1 <= l <= L, w_d >= 1, with at most ``budget`` drafted nodes."""
    out = []

    def rec(prefix, level, used):
        if prefix:
            out.append(tuple(prefix))
        if len(prefix) == L:
            return
        w = 1
        while used + level * w <= budget:
            rec(prefix + [w], level * w, used + level * w)
            w += 1

    rec([], 1, 0)
    return out


def _modes(widths, mode):
    # a chain of width-1 levels is the same process in both modes: list it once, as "iid"
    if mode is None:
        return ("iid",) if all(w == 1 for w in widths) else ("iid", "swor")
    return (mode,)


def _processes_for(verifier: Verifier, widths, mode):
    modes = _modes(widths, mode)
    procs = []
    for m in modes:
        proc = TreeProcess(widths, m)
        if verifier.applies_to(proc):
            procs.append(proc)
    return procs


def search_space(budget: int, L: int, verifier=None, mode: str | None = None) -> list[TreeProcess]:
    """The shapes :func:`search_shapes` evaluates: per-depth width vectors w = (w_0..w_{l-1}),
    depth l <= L (the tree has depth exactly l: it is evaluated at L = l), with at most ``budget``
    drafted nodes, sum_{d=1}^{l} prod_{j<d} w_j <= budget, as
    :class:`~specsim.drafts.TreeProcess` objects in every mode (``"iid"``, ``"swor"`` or
    ``mode``) the verifier applies to (all modes when ``verifier`` is ``None``).

    >>> from specsim.structure import search_space
    >>> from specsim.verifiers import gbv
    >>> len(search_space(4, 2)), [p.name for p in search_space(3, 2, gbv)]
    (14, ['iid[1]', 'iid[1, 1]', 'iid[2]', 'iid[3]'])
    """
    budget = check_int(budget, "budget", 1)
    L = check_int(L, "L", 1)
    if mode is not None and mode not in ("iid", "swor"):
        raise ValueError(f"mode must be 'iid', 'swor' or None, got {mode!r}")
    out = []
    for w in _width_vectors(budget, L):
        if verifier is None:
            out.extend(TreeProcess(w, m) for m in _modes(w, mode))
        else:
            out.extend(_processes_for(as_verifier(verifier), w, mode))
    return out


def search_shapes(verifier, target: Model, draft_model: Model, budget: int, L: int, mode: str | None = None,
                  cost: CostModel | None = None, max_shapes: int = MAX_SHAPES,
                  max_trees: int = MAX_TREES, *, workers=1) -> TreeDesign:
    """Exhaustive search for the best sampled-tree shape of a verifier under a node budget.

    Every process of :func:`search_space` is evaluated exactly (E[tau] by the engine; with a
    ``cost``, tokens per unit cost by :func:`~specsim.structure.throughput`) and the best is
    returned with status ``"exact optimum over the searched shapes"``.  The search is refused
    (``ValueError`` stating its size) above ``max_shapes`` shapes or when its largest shape may
    draft more than ``max_trees`` trees (V^N, N its most drafted nodes): the engine's cost per
    shape grows like that count, the number of shapes only polynomially in the budget.

    The shapes are independent tasks over ``workers`` (1; an int n > 1 or -1 for processes, or a
    map-like callable: :mod:`specsim.parallel`); the best is then picked in the search space's
    order, so the result does not depend on the number of workers.

    >>> from specsim.models import random_model
    >>> from specsim.verifiers import specinfer
    >>> from specsim.structure import search_shapes
    >>> best = search_shapes(specinfer, random_model(3, 0), random_model(3, 1), budget=3, L=2)
    >>> best.drafting.name, round(best.expected_accepted, 6), best.searched
    ('iid[3]', 0.503796, 5)
    """
    verifier = as_verifier(verifier)
    L = validate_model_pair(target, draft_model, L)
    budget = check_int(budget, "budget", 1)
    max_shapes = check_int(max_shapes, "max_shapes", 1)
    cost = None if cost is None else _check_cost(cost)
    workers = check_workers(workers)
    space = search_space(budget, L, verifier, mode)
    if not space:
        raise ValueError(f"verifier {verifier.name!r} applies to no i.i.d. or without-replacement tree process "
                         f"(it needs {sorted(verifier.needs)}); use family='deterministic' for deterministic_children")
    if len(space) > max_shapes:
        raise ValueError(f"budget={budget}, L={L}: the search space holds {len(space)} shapes for {verifier.name!r} "
                         f"(limit max_shapes={max_shapes}); lower budget or L, raise max_shapes, or use "
                         f"sequoia_shape (Sequoia's DP) or a deterministic heuristic (method='eagle2'/'opt_tree')")
    largest = max(_max_nodes(p.widths) for p in space)
    if float(target.V) ** largest > max_trees:
        raise ValueError(f"budget={budget}, L={L}: the search space holds {len(space)} shapes for {verifier.name!r} and "
                         f"its largest drafts {largest} nodes, up to V^{largest} = {float(target.V) ** largest:.3g} trees "
                         f"to enumerate (limit max_trees={max_trees}); lower budget or L, raise max_trees, or use "
                         f"sequoia_shape (Sequoia's DP) or a deterministic heuristic (method='eagle2'/'opt_tree')")
    best = None
    scored = map_tasks(_score_shape, [(verifier, target, draft_model, proc, cost) for proc in space], workers)
    for proc, (score, value, tp) in zip(space, scored):
        if best is None or score > best[0] + 1e-12:
            best = (score, value, proc, tp)
    _, value, proc, tp = best
    return TreeDesign("exhaustive", verifier.name, "sampled", budget, _max_nodes(proc.widths), value,
                      value if cost is None else None, 0.0 if cost is None else None,
                      "exact optimum over the searched shapes", drafting=proc, searched=len(space), throughput=tp,
                      note=f"per-depth widths, depth <= {L}, " + ("max E[tau]" if cost is None else "max tokens per cost"))


def _score_shape(task):
    """(score, E[tau], throughput or None) of one shape of :func:`search_shapes`."""
    verifier, target, draft_model, proc, cost = task
    depth = len(proc.widths)  # the shape's own depth
    if cost is None:
        value = expected_accepted(verifier, target, draft_model, depth, proc)
        return value, value, None
    tp = throughput(verifier, target, draft_model, depth, proc, cost)
    return tp.rate, tp.tokens - 1.0, tp


def _rank_acceptance(verifier, target, draft_model, K: int) -> np.ndarray:
    """a_j = P(the j-th drawn root child is the one accepted), K draws without replacement at the
    root (L = 1), from the verifier's exact outcome law: Sequoia's per-rank acceptance vector."""
    from ..drafts import swor_tree
    a = np.zeros(K)
    for Q, tree in swor_tree(K).enumerate(target, draft_model, 1):
        for o in outcomes_on_tree(verifier, tree):
            if o.accepted > 0:
                a[o.accepted - 1] += Q * o.prob
    return a


def sequoia_shape(target: Model, draft_model: Model, budget: int, L: int, verifier="sequoia",
                  width: int = 4) -> TreeDesign:
    """The tree Sequoia's DP picks (:func:`specsim.sequoia_dp.sequoia_tree`, budget + 1 nodes, at
    most L + 1 layers) with its *exact* E[tau] under ``verifier`` (SWOR draws per node,
    :class:`ShapeProcess`).

    The DP assumes every node's j-th draw is accepted with the same probability a_j; here a_j is
    measured exactly at the root with ``width`` draws (:func:`_rank_acceptance`), sorted
    non-increasing as the DP requires.  ``status`` says it is a DP optimum under that model;
    ``optimum``/``regret`` are left ``None`` (compare with :func:`search_shapes` yourself: the
    DP's per-node shapes are not in the per-depth search space, so the gap may have either sign).
    """
    verifier = as_verifier(TREE_VERIFIERS[verifier] if isinstance(verifier, str) else verifier)
    L = validate_model_pair(target, draft_model, L)
    budget = check_int(budget, "budget", 1)
    width = check_int(width, "width", 1)
    if not verifier.applies_to(ShapeProcess(((),))):
        raise ValueError(f"verifier {verifier.name!r} does not apply to Sequoia's without-replacement trees "
                         f"(it needs {sorted(verifier.needs)})")
    from ..sequoia_dp import sequoia_tree
    a = np.sort(_rank_acceptance(verifier, target, draft_model, width))[::-1]
    a = a / max(1.0, a.sum())  # rounding: the DP refuses a sum above 1
    dp = sequoia_tree(a, budget + 1, L + 1)
    proc = ShapeProcess(dp.shape)
    value = expected_accepted(verifier, target, draft_model, L, proc)
    return TreeDesign("sequoia_dp", verifier.name, "sampled", budget, budget, value, None, None,
                      STATUS[2], drafting=proc, searched=1, predicted=dp.value - 1.0,
                      note=f"per-rank acceptance a = {np.round(a, 6).tolist()} measured at the root")


# ---------------------------------------------------------------------------------------- front door
_METHODS = {"deterministic": ("oracle", "eagle2", "opt_tree"), "sampled": ("exhaustive", "sequoia_dp")}


def optimal_tree(target: Model, draft_model: Model, budget: int, verifier=None, family: str = "deterministic",
                 L: int | None = None, method: str | None = None, cost: CostModel | None = None,
                 threshold: float = 0.5, max_depth: int = 10, mode: str | None = None,
                 max_shapes: int = MAX_SHAPES, max_trees: int = MAX_TREES, *, workers=1) -> TreeDesign:
    """The best draft tree of at most ``budget`` drafted nodes for a verifier, or a heuristic's tree
    scored against it (docs/theory.md §13).

    ``family="deterministic"`` (verifier ``deterministic_children``, the default): ``method``
    ``"oracle"`` (default; the exact optimum, top-n target paths), ``"eagle2"`` (top-n draft
    paths) or ``"opt_tree"`` (OPT-Tree's depth rule with ``threshold`` and ``max_depth``), each
    with exact E[tau] = sum_v P_p(v) and regret against the oracle; ``L`` caps the depth
    (default ``budget``).  ``family="sampled"``: ``method`` ``"exhaustive"`` (default,
    :func:`search_shapes`) or ``"sequoia_dp"`` (:func:`sequoia_shape`); ``L`` is required
    (the exact engine enumerates V^(L+1) strings).  With a ``cost`` the result carries its
    throughput and the exhaustive search maximises tokens per unit cost instead of E[tau];
    ``workers`` spreads the exhaustive search's shapes (:func:`search_shapes`; the other methods
    score one tree and ignore it).

    ``ValueError`` for budget < 1, a verifier that does not apply to the family, an unknown
    method, or a search space above ``max_shapes`` shapes or ``max_trees`` trees (naming its size).

    Returns: a :class:`TreeDesign`.

    >>> from specsim.models import random_model
    >>> from specsim.structure import optimal_tree
    >>> d = optimal_tree(random_model(4, 0), random_model(4, 1), 6, L=3, method="opt_tree", threshold=0.3)
    >>> d.status, d.nodes, round(d.regret, 6)
    ('heuristic', 6, 1.390849)
    """
    budget = check_int(budget, "budget", 1)
    workers = check_workers(workers)
    if family not in _METHODS:
        raise ValueError(f"family must be 'deterministic' or 'sampled', got {family!r}")
    if verifier is None:
        verifier = deterministic_children if family == "deterministic" else "specinfer"
    if isinstance(verifier, str):
        if verifier not in TREE_VERIFIERS:
            raise ValueError(f"verifier must be a tree verifier name ({sorted(TREE_VERIFIERS)}), got {verifier!r}")
        verifier = TREE_VERIFIERS[verifier]
    verifier = as_verifier(verifier)
    method = _METHODS[family][0] if method is None else method
    if method not in _METHODS[family]:
        raise ValueError(f"method must be one of {_METHODS[family]} for family={family!r}, got {method!r}")
    if family == "deterministic":
        if not (verifier.kind == "tree" and verifier.applies_to(FixedTree(None))):
            raise ValueError(f"verifier {verifier.name!r} does not apply to deterministic trees (it needs "
                             f"{sorted(verifier.needs)}); use family='sampled' or verifier='deterministic_children'")
        validate_model_pair(target, draft_model, 1)
        L = budget if L is None else check_int(L, "L", 1)
        return _deterministic(target, draft_model, budget, L, method, threshold, max_depth,
                              None if cost is None else _check_cost(cost), None)
    if L is None:
        raise ValueError("L (the tree depth limit) is required for family='sampled': the exact engine enumerates V^(L+1) strings")
    if verifier.kind != "tree" or not any(verifier.applies_to(TreeProcess((2,), m)) or verifier.applies_to(TreeProcess((2, 2), m))
                                          for m in ("iid", "swor")):
        raise ValueError(f"verifier {verifier.name!r} does not apply to sampled trees (it needs {sorted(verifier.needs)}); "
                         f"use family='deterministic'")
    if method == "sequoia_dp":
        return sequoia_shape(target, draft_model, budget, L, verifier)
    return search_shapes(verifier, target, draft_model, budget, L, mode, cost, max_shapes, max_trees, workers=workers)


@dataclass(frozen=True)
class BudgetChoice:
    """The node budget with the best throughput, and every budget's design.

    Fields: ``best`` (budget), ``speedup``, ``budgets``, ``designs`` (a :class:`TreeDesign` per budget).
    """

    best: int
    speedup: float
    budgets: tuple[int, ...]
    designs: tuple


def optimal_budget(target: Model, draft_model: Model, cost: CostModel, budgets: Sequence[int] = (1, 2, 4, 8, 16),
                   verifier=None, family: str = "deterministic", **kwargs) -> BudgetChoice:
    """argmax over ``budgets`` of the speedup of :func:`optimal_tree` (run with ``cost``) per budget.

    For deterministic trees the oracle tree of each budget maximises E[tau], which with a cost
    growing in the tree's size is not always the best tree per unit cost at that budget; the
    maximum over budgets is still exact over the oracle trees listed.  Extra keywords go to
    :func:`optimal_tree`.

    >>> from specsim.models import random_model
    >>> from specsim.structure import CostModel, optimal_budget
    >>> cost = CostModel(draft=0.02, target=lambda n: 1.0 + 0.05 * (n - 1))
    >>> choice = optimal_budget(random_model(4, 0), random_model(4, 1), cost, budgets=(1, 2, 4, 8), L=4)
    >>> choice.best, round(choice.speedup, 6)
    (8, 2.062481)
    """
    cost = _check_cost(cost)
    budgets = _check_values(budgets, "budgets")
    designs = tuple(optimal_tree(target, draft_model, b, verifier, family, cost=cost, **kwargs) for b in budgets)
    k = int(np.argmax([d.throughput.speedup for d in designs]))
    return BudgetChoice(budgets[k], designs[k].throughput.speedup, budgets, designs)


# ---------------------------------------------------------------------------------------- speed of light
def speed_of_light(target: Model, P: int, L: int) -> float:
    """The leading term (mu + mu2) ln(P) / mu^2 of the Speed-of-Light bound of arXiv 2512.11718.

    The abstract bounds the expected tokens a deterministic speculative generator with verifier
    capacity P predicts per iteration by (mu + mu2) log(P) / mu^2 + O(1), mu the expected entropy
    of the verifier's output distribution and mu2 its expected second log-moment, assuming the
    per-prefix distributions are i.i.d.  The O(1) constant is not stated there, so this is not a
    bound: it is the leading term only, with natural logarithms, mu = E[-sum p ln p] and
    mu2 = E[sum p (ln p)^2] averaged over prefixes drawn from the target up to depth L - 1 (our
    reading of the definitions, not checked against the paper's body).

    >>> from specsim.models import iid
    >>> from specsim.structure import speed_of_light
    >>> round(speed_of_light(iid([0.5, 0.5]), 8, L=1), 6)     # uniform on V: log_V(P) + ln(P) = 3 + 3 ln 2
    5.079442
    """
    P = check_int(P, "P", 1)
    L = check_int(L, "L", 1)
    mu = mu2 = 0.0
    for k in range(L):
        joint = target.joint(k) if k else np.ones(1)
        rows = target.table(k)[k]
        with np.errstate(divide="ignore", invalid="ignore"):
            lg = np.where(rows > 0, np.log(np.where(rows > 0, rows, 1.0)), 0.0)
        mu += float(joint @ (-(rows * lg).sum(axis=1)))
        mu2 += float(joint @ ((rows * lg * lg).sum(axis=1)))
    mu, mu2 = mu / L, mu2 / L
    if mu <= 0:
        return math.inf
    return (mu + mu2) * math.log(P) / mu ** 2
