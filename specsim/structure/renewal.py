"""Throughput of a speculative decoder: tokens per unit cost, exactly, by renewal-reward.

One iteration drafts a tree D ~ Q (the draft process), makes one target call on the root and
every drafted node, and emits tau + 1 tokens (tau accepted, one from the verifier).  Iterations
are i.i.d. at a fixed context, so by the renewal-reward theorem the long-run tokens per unit cost
is the ratio of expectations (docs/theory.md §13):

    throughput = E[tau + 1] / E[cost(D)],      speedup = throughput * cost.plain,

E[tau] from the exact engine (:func:`specsim.exact.output_law`) and E[cost(D)] summed over the
same enumeration of the process: cost(D) = overhead + sum_d draft(n_d) + target(|D|), n_d the
number of depth-d nodes that drew children (one draft pass per depth) and |D| the number of
nodes, root included (i.i.d. trees with repeats have a random |D|).

>>> from specsim.models import iid
>>> from specsim.verifiers import token
>>> from specsim.structure import CostModel, throughput, leviathan_speedup
>>> t = throughput(token, iid([0.5, 0.5]), iid([0.8, 0.2]), 3, cost=CostModel(draft=0.1))
>>> round(t.tokens, 6), round(t.cost, 6), round(t.speedup, 6), t.exact
(2.533, 1.3, 1.948462, True)
>>> round(leviathan_speedup(0.7, 3, 0.1), 6)            # alpha = sum min(p, q) = 0.7
1.948462
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .._validate import check_int
from ..models import validate_model_pair
from ..drafts import Chain, DraftTree
from ..exact import _check_drafting, output_law
from ..verifiers.base import as_verifier
from .cost import CostModel

__all__ = ["Throughput", "throughput", "tree_cost", "paths_cost", "expected_cost", "optimal_length", "LengthChoice"]


@dataclass(frozen=True)
class Throughput:
    """Exact renewal-reward throughput of one (verifier, process, cost) at one context.

    Fields: ``tokens`` (E[tau + 1], tokens per iteration), ``cost`` (E[cost per iteration], in
    units of one plain decoding step when ``target(1) = 1``), ``rate`` (tokens / cost),
    ``speedup`` (rate * plain cost: > 1 beats plain decoding), ``exact`` (True: both
    expectations enumerated, not sampled), ``verifier``, ``drafting``, ``L``.
    """

    tokens: float
    cost: float
    rate: float
    speedup: float
    exact: bool
    verifier: str
    drafting: str
    L: int


def tree_cost(tree: DraftTree, cost: CostModel) -> float:
    """cost(D) = overhead + sum_d draft(n_d) + target(N): n_d depth-d nodes that drew children, N the nodes of D.

    A node drafts its children from its own draft row, and the rows of one depth come from one
    draft pass over those nodes, so a tree of depth L costs L draft passes (fewer when a level
    drew nothing); the target call reads the root (the last emitted token) and every drafted node.

    >>> import numpy as np
    >>> from specsim.drafts import DraftTree
    >>> from specsim.structure import CostModel, tree_cost
    >>> tree = DraftTree((-1, 0, 1, 0), (-1, 0, 0, 1), np.full((4, 2), 0.5), np.full((4, 2), 0.5))
    >>> tree_cost(tree, CostModel(draft=0.1, target=[1.0, 1.0, 1.0, 1.5]))   # passes of 1 and 1 node, 4 nodes
    1.7
    """
    return _iteration_cost([tree.depth[u] for u in range(tree.num_nodes) if tree.draws[u]], tree.num_nodes, cost)


def _iteration_cost(internal_depths, num_nodes: int, cost: CostModel) -> float:
    # one draft pass per depth over the nodes of that depth that draw children
    per_depth: dict[int, int] = {}
    for d in internal_depths:
        per_depth[d] = per_depth.get(d, 0) + 1
    return cost.iteration([per_depth[d] for d in sorted(per_depth)], num_nodes)


def paths_cost(paths, cost: CostModel) -> float:
    """:func:`tree_cost` of the deterministic tree whose drafted nodes have these root-to-node
    ``paths`` (prefix-closed): a node drafts children iff some path extends it by one token.

    >>> from specsim.structure import CostModel, paths_cost
    >>> paths_cost([(0,), (1,), (0, 1)], CostModel(draft=0.1, target=[1.0, 1.0, 1.0, 1.5]))
    1.7
    """
    paths = {tuple(x) for x in paths}
    internal = {x[:-1] for x in paths}
    return _iteration_cost([len(x) for x in internal], len(paths) + 1, _check_cost(cost))


def expected_cost(target, draft_model, L: int, drafting=None, cost: CostModel | None = None) -> float:
    """E[cost(D)] = sum_D Q(D) cost(D) over every tree the process can draft (:func:`tree_cost`).

    Parameters: ``target``, ``draft_model`` (:class:`specsim.models.Model`), ``L`` (depth >= 1),
    ``drafting`` (default the chain), ``cost`` (a :class:`CostModel`, default flat target call,
    free drafts).  Returns: a ``float``.

    >>> from specsim.models import iid
    >>> from specsim.drafts import iid_paths
    >>> from specsim.structure import CostModel, expected_cost
    >>> # two i.i.d. draws at q = (1/2, 1/2) merge with probability 1/2: |D| is 2 or 3
    >>> expected_cost(iid([0.5, 0.5]), iid([0.5, 0.5]), 1, iid_paths(2), CostModel(target=[1.0, 2.0, 3.0]))
    2.5
    """
    L = validate_model_pair(target, draft_model, L)
    drafting = _check_drafting(drafting)
    cost = _check_cost(cost)
    if isinstance(drafting, Chain):  # every chain of L tokens costs the same
        return cost.iteration([1] * L, L + 1)
    total = mass = 0.0
    for Q, tree in drafting.enumerate(target, draft_model, L):
        total += Q * tree_cost(tree, cost)
        mass += Q
    return total / mass  # mass is 1 up to rounding


def _check_cost(cost) -> CostModel:
    if cost is None:
        return CostModel()
    if not isinstance(cost, CostModel):
        raise TypeError(f"cost must be a specsim.structure.CostModel, got {type(cost).__name__}")
    return cost


def _label(obj) -> str:
    return getattr(obj, "name", type(obj).__name__)


def throughput(verifier, target, draft_model, L: int, drafting=None, cost: CostModel | None = None,
               context=()) -> Throughput:
    """Tokens per unit cost of a verifier on a draft process: E[tau + 1] / E[cost(D)], exactly.

    E[tau] is the exact engine's (:func:`specsim.exact.output_law`), E[cost(D)] is
    :func:`expected_cost` over the same process (docs/theory.md §13).  The verifier must apply
    to the process (its ``needs``; ``ValueError`` otherwise).

    Parameters: ``verifier`` (chain or tree verifier), ``target``, ``draft_model``, ``L``,
    ``drafting`` (default the chain), ``cost`` (:class:`CostModel`), ``context``.

    Returns: a :class:`Throughput`.

    >>> from specsim.models import random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers import specinfer
    >>> from specsim.structure import CostModel, throughput
    >>> t = throughput(specinfer, random_model(3, 0), random_model(3, 1), 2, iid_paths(2), CostModel(draft=0.05))
    >>> round(t.tokens, 6), round(t.rate, 6), t.speedup == t.rate
    (1.591079, 1.446435, True)
    """
    verifier = as_verifier(verifier)
    drafting = _check_drafting(drafting)
    cost = _check_cost(cost)
    L = validate_model_pair(target, draft_model, L)
    if verifier.kind == "tree" and not verifier.applies_to(drafting):
        raise ValueError(f"verifier {verifier.name!r} does not apply to drafting {_label(drafting)!r} "
                         f"(it needs {sorted(verifier.needs)})")
    if verifier.kind == "chain" and not isinstance(drafting, Chain):
        raise ValueError(f"verifier {verifier.name!r} is a chain verifier; drafting {_label(drafting)!r} is not the chain")
    tokens = output_law(verifier, target, draft_model, L, drafting, context).block_efficiency
    c = expected_cost(target.shifted(context), draft_model.shifted(context), L, drafting, cost)
    rate = tokens / c
    return Throughput(tokens, c, rate, rate * cost.plain, True, verifier.name, _label(drafting), L)


@dataclass(frozen=True)
class LengthChoice:
    """The best draft length (or budget) by throughput, with the whole curve it was read from.

    Fields: ``best`` (the argmax), ``speedup`` (its speedup), ``values`` (the candidates tried),
    ``curve`` (a :class:`Throughput` per candidate, same order), ``exact`` (every point exact).
    """

    best: int
    speedup: float
    values: tuple[int, ...]
    curve: tuple
    exact: bool


def optimal_length(verifier, target, draft_model, cost: CostModel | None = None, max_length: int = 8,
                   drafting: Callable[[int], object] | None = None) -> LengthChoice:
    """argmax_{1 <= L <= max_length} speedup(L) for a chain verifier (or a process family in L).

    Every L is evaluated exactly (:func:`throughput`); the curve need not be unimodal, so all of
    them are.  ``drafting`` optionally maps L to a process (default the chain).

    >>> from specsim.models import iid
    >>> from specsim.verifiers import token
    >>> from specsim.structure import CostModel, optimal_length
    >>> choice = optimal_length(token, iid([0.5, 0.5]), iid([0.9, 0.1]), CostModel(draft=0.1), max_length=6)
    >>> choice.best, round(choice.speedup, 6)       # alpha = 0.6: (1 - 0.6^4) / (0.4 * 1.3)
    (3, 1.673846)
    """
    max_length = check_int(max_length, "max_length", 1)
    curve = tuple(throughput(verifier, target, draft_model, L, None if drafting is None else drafting(L), cost)
                  for L in range(1, max_length + 1))
    k = int(np.argmax([t.speedup for t in curve]))
    return LengthChoice(k + 1, curve[k].speedup, tuple(range(1, max_length + 1)), curve, all(t.exact for t in curve))


def _check_values(values: Sequence[int], name: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a sequence of integers >= 1, got {type(values).__name__}")
    out = tuple(check_int(v, f"{name}[{i}]", 1) for i, v in enumerate(values))
    if not out:
        raise ValueError(f"{name} must not be empty")
    return out
