"""Draft trees and the draft processes that generate them with their exact probabilities.

A :class:`DraftTree` holds the drafted tokens as a rooted tree (node 0 is the root, the empty
draft; parents precede children), the target row ``p(.|path)`` at every node and the draft row
``q(.|path)`` at internal nodes.  A chain of L tokens is the tree with nodes 0..L in a line.

A draft process has ``enumerate(target, draft, L)``, yielding every ``(probability, tree)`` it can
produce (exact engine), and ``sample(target, draft, L, rng)`` (Monte Carlo).  The process, not the
caller, supplies the rows, so trees always agree with how their children were drawn.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Protocol

import numpy as np

from ._validate import as_distribution, check_int
from .models import Model

__all__ = ["DraftTree", "DraftProcess", "Chain", "chain"]


@dataclass(frozen=True, eq=False)
class DraftTree:
    """A draft tree: ``tokens[i]`` and ``parent[i]`` per node (root: token -1, parent -1).

    ``p`` is ``[n, V]`` with the target row at every node; ``q`` is ``[n, V]`` with the draft row at
    every internal node (rows at leaves are not used and may be zero).  ``draws[i]`` lists the
    child tokens of node ``i`` in the order they were drafted, with repeats (several i.i.d. paths
    may draft the same token); by default the children's tokens in node order.
    """

    tokens: tuple[int, ...]
    parent: tuple[int, ...]
    p: np.ndarray = field(repr=False)
    q: np.ndarray = field(repr=False)
    draws: tuple[tuple[int, ...], ...] | None = None
    validate: bool = field(default=True, repr=False)
    # derived
    depth: tuple[int, ...] = field(init=False, repr=False)
    children: tuple[tuple[int, ...], ...] = field(init=False, repr=False)
    path_index: tuple[int, ...] = field(init=False, repr=False)

    def __post_init__(self):
        n = len(self.tokens)
        V = self.p.shape[1] if np.ndim(self.p) == 2 else 0
        if self.validate:
            self._check(n, V)
        depth = [0] * n
        index = [0] * n
        kids: list[list[int]] = [[] for _ in range(n)]
        for i in range(1, n):
            par = self.parent[i]
            depth[i] = depth[par] + 1
            index[i] = index[par] * V + self.tokens[i]
            kids[par].append(i)
        object.__setattr__(self, "depth", tuple(depth))
        object.__setattr__(self, "children", tuple(tuple(k) for k in kids))
        object.__setattr__(self, "path_index", tuple(index))
        if self.draws is None:
            object.__setattr__(self, "draws", tuple(tuple(self.tokens[c] for c in k) for k in kids))
        elif self.validate:
            for i, d in enumerate(self.draws):
                if set(d) != {self.tokens[c] for c in kids[i]}:
                    raise ValueError(f"draws[{i}] = {d} does not match the children of node {i}")

    def _check(self, n: int, V: int) -> None:
        if n < 1 or len(self.parent) != n:
            raise ValueError(f"tokens and parent must have the same positive length, got {n} and {len(self.parent)}")
        if self.tokens[0] != -1 or self.parent[0] != -1:
            raise ValueError("node 0 must be the root with token -1 and parent -1")
        p = np.asarray(self.p)
        q = np.asarray(self.q)
        if p.ndim != 2 or p.shape[0] != n or V < 2:
            raise ValueError(f"p must have shape [num_nodes={n}, V>=2], got {p.shape}")
        if q.shape != p.shape:
            raise ValueError(f"q must have shape {p.shape}, got {q.shape}")
        internal = {self.parent[i] for i in range(1, n)}
        for i in range(n):
            as_distribution(p[i], f"p at node {i}")
            if i in internal:
                as_distribution(q[i], f"q at node {i}")
        for i in range(1, n):
            par, t = self.parent[i], self.tokens[i]
            if not 0 <= par < i:
                raise ValueError(f"node {i} has parent {par}: parents must precede children (no cycles)")
            if not 0 <= t < V:
                raise ValueError(f"node {i} has token {t} outside 0..{V - 1}")
            if q[par, t] <= 0:
                raise ValueError(f"node {i} drafts token {t} with q = 0 at its parent {par}")
        seen = set()
        for i in range(1, n):
            key = (self.parent[i], self.tokens[i])
            if key in seen:
                raise ValueError(f"node {i} repeats token {self.tokens[i]} under parent {self.parent[i]}: merge them")
            seen.add(key)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_chain(cls, draft, p, q, validate: bool = True) -> "DraftTree":
        """The chain tree of a draft: node k is ``draft[:k]``; ``p`` is ``[L+1, V]``, ``q`` is ``[L, V]``."""
        L = len(draft)
        p = np.asarray(p, dtype=np.float64)
        q = np.asarray(q, dtype=np.float64)
        if validate and (p.ndim != 2 or p.shape[0] != L + 1 or q.shape != (L, p.shape[1])):
            raise ValueError(f"chain of L={L} needs p [L+1, V] and q [L, V], got {p.shape} and {q.shape}")
        qfull = np.vstack([q, np.zeros((1, p.shape[1]))])
        return cls((-1, *map(int, draft)), tuple(range(-1, L)), p, qfull, None, validate)

    # ------------------------------------------------------------------ views
    @property
    def num_nodes(self) -> int:
        return len(self.tokens)

    @property
    def V(self) -> int:
        return self.p.shape[1]

    @property
    def max_depth(self) -> int:
        return max(self.depth)

    @property
    def is_chain(self) -> bool:
        return all(self.parent[i] == i - 1 for i in range(1, self.num_nodes))

    def path(self, node: int) -> tuple[int, ...]:
        """Tokens on the root-to-node path."""
        out = []
        while node > 0:
            out.append(self.tokens[node])
            node = self.parent[node]
        return tuple(reversed(out))

    def chain_arrays(self) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
        """``(draft, p, q)`` in the chain protocol; ``ValueError`` if the tree branches."""
        if not self.is_chain:
            raise ValueError("tree branches: a chain verifier needs a chain draft")
        L = self.num_nodes - 1
        return tuple(self.tokens[1:]), self.p, self.q[:L]


class DraftProcess(Protocol):
    """How drafts are produced: exact enumeration and sampling of :class:`DraftTree` objects."""

    name: str

    def enumerate(self, target: Model, draft: Model, L: int) -> Iterator[tuple[float, DraftTree]]: ...

    def sample(self, target: Model, draft: Model, L: int, rng: np.random.Generator) -> DraftTree: ...


@dataclass(frozen=True)
class Chain:
    """A single draft path of L tokens sampled autoregressively from the draft model."""

    name: str = "chain"

    def enumerate(self, target: Model, draft: Model, L: int) -> Iterator[tuple[float, DraftTree]]:
        """Every draft x in V^L with Q(x) > 0, vectorised over drafts."""
        check_int(L, "L", 1)
        V = target.V
        ptab, qtab = target.table(L), draft.table(L - 1)
        N = V ** L
        codes = np.arange(N)
        digits = np.stack([(codes // V ** (L - 1 - i)) % V for i in range(L)], axis=1)
        prefix = [codes // V ** (L - i) for i in range(L + 1)]
        P = np.stack([ptab[i][prefix[i]] for i in range(L + 1)], axis=1)   # [N, L+1, V]
        Qrows = np.stack([qtab[i][prefix[i]] for i in range(L)], axis=1)    # [N, L, V]
        Qx = np.prod(np.take_along_axis(Qrows, digits[:, :, None], axis=2)[:, :, 0], axis=1)
        leaf = np.zeros((1, V))
        for n in np.flatnonzero(Qx > 0):
            yield float(Qx[n]), DraftTree((-1, *digits[n].tolist()), tuple(range(-1, L)), P[n],
                                          np.vstack([Qrows[n], leaf]), None, False)

    def sample(self, target: Model, draft: Model, L: int, rng: np.random.Generator) -> DraftTree:
        check_int(L, "L", 1)
        toks: list[int] = []
        qs = []
        for _ in range(L):
            row = draft(tuple(toks))
            qs.append(row)
            toks.append(int(rng.choice(row.size, p=row)))
        ps = [target(tuple(toks[:i])) for i in range(L + 1)]
        return DraftTree.from_chain(toks, np.array(ps), np.array(qs), validate=False)


def chain() -> Chain:
    """The single-path draft process (the default everywhere)."""
    return Chain()
