"""Draft trees and the draft processes that generate them with their exact probabilities.

A :class:`DraftTree` holds the drafted tokens as a rooted tree (node 0 is the root, the empty
draft; parents precede children), the target row ``p(.|path)`` at every node and the draft row
``q(.|path)`` at internal nodes.  A chain of L tokens is the tree with nodes 0..L in a line.

A draft process has ``enumerate(target, draft, L)``, yielding every ``(probability, tree)`` it can
produce (exact engine), and ``sample(target, draft, L, rng)`` (Monte Carlo).  The process, not the
caller, supplies the rows, so trees always agree with how their children were drawn.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterator, Protocol

import numpy as np

from ._validate import as_distribution, check_int
from .models import Model

__all__ = ["DraftTree", "DraftProcess", "Chain", "chain", "TreeProcess", "iid_paths", "swor_tree",
           "fixed_shape", "topk_tree", "delayed_expansion", "greedy_drafts", "parse_drafting",
           "draft_laws"]


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

    def arrays(self, target: Model, draft: Model, L: int):
        """All drafts with Q(x) > 0 at once: ``(drafts [N, L], Q [N], p [N, L+1, V], q [N, L, V])``."""
        check_int(L, "L", 1)
        V = target.V
        ptab, qtab = target.table(L), draft.table(L - 1)
        codes = np.arange(V ** L)
        digits = np.stack([(codes // V ** (L - 1 - i)) % V for i in range(L)], axis=1)
        prefix = [codes // V ** (L - i) for i in range(L + 1)]
        qrows = np.stack([qtab[i][prefix[i]] for i in range(L)], axis=1)
        Qx = np.prod(np.take_along_axis(qrows, digits[:, :, None], axis=2)[:, :, 0], axis=1)
        keep = Qx > 0
        prows = np.stack([ptab[i][prefix[i][keep]] for i in range(L + 1)], axis=1)
        return digits[keep], Qx[keep], prows, qrows[keep]

    def enumerate(self, target: Model, draft: Model, L: int) -> Iterator[tuple[float, DraftTree]]:
        """Every draft x in V^L with Q(x) > 0, as a chain tree."""
        drafts, Qx, prows, qrows = self.arrays(target, draft, L)
        leaf = np.zeros((1, target.V))
        parents = tuple(range(-1, L))
        for n in range(Qx.size):
            yield float(Qx[n]), DraftTree((-1, *drafts[n].tolist()), parents, prows[n],
                                          np.vstack([qrows[n], leaf]), None, False)

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


# ====================================================================== tree-shaped processes
#: Children laws a process can guarantee at every node (what a tree verifier may rely on):
#: ``iid``  the draws at a node are i.i.d. from q(.|node) (repeats allowed, their number fixed
#:          before they are drawn); ``swor`` the draws are distinct and drawn by successive
#:          sampling without replacement from q(.|node); ``paths`` the tree is K i.i.d. full
#:          paths of length L merged into a trie; ``chain`` a single path drawn from q;
#:          ``deterministic`` the tree is a fixed function of the rows (no draft randomness);
#:          ``greedy`` the draws are the widths[d] - 1 most likely tokens of q and then one token
#:          drawn from q outside them, in that order (Hu et al.'s greedy draft law).
DRAFT_LAWS = ("iid", "swor", "paths", "chain", "deterministic", "greedy")


def draft_laws(drafting) -> frozenset[str]:
    """The children laws (:data:`DRAFT_LAWS`) a draft process guarantees; :class:`Chain` has all
    sampled ones (one draw from q is i.i.d., without replacement and a 1-path trie)."""
    if isinstance(drafting, Chain):
        return frozenset({"iid", "swor", "paths", "chain"})
    return frozenset(getattr(drafting, "laws", frozenset()))


def _options_iid(row: np.ndarray, n: int) -> list[tuple[tuple[int, ...], float]]:
    # every ordered n-tuple of supported tokens, probability prod q
    support = np.flatnonzero(row > 0).tolist()
    return [(xs, float(np.prod(row[list(xs)]))) for xs in itertools.product(support, repeat=n)]


def _options_swor(row: np.ndarray, n: int) -> list[tuple[tuple[int, ...], float]]:
    # successive sampling: P(x_1..x_k) = prod_j q(x_j) / (1 - sum_{i<j} q(x_i))
    support = np.flatnonzero(row > 0).tolist()
    out = []
    for xs in itertools.permutations(support, min(n, len(support))):
        pr, left = 1.0, set(support)
        for x in xs:
            # the mass still available, summed directly: 1 - used cancels when it is tiny
            pr *= row[x] / sum(row[v] for v in left)
            left.discard(x)
        out.append((xs, pr))
    return out


def _options_topk(row: np.ndarray, n: int) -> list[tuple[tuple[int, ...], float]]:
    # the n most likely supported tokens, by decreasing q (ties to the lowest id)
    order = np.lexsort((np.arange(row.size), -row))
    return [(tuple(int(t) for t in order[:n] if row[t] > 0), 1.0)]


def _greedy_hub(row: np.ndarray, n: int) -> tuple[tuple[int, ...], float]:
    # the n - 1 most likely tokens of q (ties to the lowest id) and the mass they leave
    order = np.lexsort((np.arange(row.size), -row))
    hub = tuple(int(t) for t in order[: n - 1] if row[t] > 0)
    return hub, float(1.0 - row[list(hub)].sum()) if hub else 1.0


def _options_greedy(row: np.ndarray, n: int) -> list[tuple[tuple[int, ...], float]]:
    # Hu et al.'s greedy draft set: the top n-1 tokens of q, then one draw from q outside them
    hub, rest = _greedy_hub(row, n)
    if rest <= 1e-15:
        return [(hub, 1.0)]
    others = [int(t) for t in np.flatnonzero(row > 0) if int(t) not in hub]
    return [(hub + (x,), float(row[x] / rest)) for x in others]


def _sample_greedy(row, n, rng):
    hub, rest = _greedy_hub(row, n)
    if rest <= 1e-15:
        return [(hub, 1.0)]
    tail = row.copy()
    tail[list(hub)] = 0.0
    return [(hub + (int(rng.choice(row.size, p=tail / tail.sum())),), 1.0)]


def _sample_iid(row, n, rng):
    return [(tuple(int(t) for t in rng.choice(row.size, size=n, p=row)), 1.0)]


def _sample_swor(row, n, rng):
    rest, xs = row.copy(), []
    for _ in range(min(n, int(np.count_nonzero(row)))):
        x = int(rng.choice(row.size, p=rest / rest.sum()))
        xs.append(x)
        rest[x] = 0.0
    return [(tuple(xs), 1.0)]


_ENUMERATE = {"iid": _options_iid, "swor": _options_swor, "topk": _options_topk, "greedy": _options_greedy}


@dataclass(frozen=True)
class TreeProcess:
    """A draft tree grown level by level with ``widths[d]`` draws per node at depth d (1 beyond).

    ``mode`` says how a node's draws are made from q(.|node):

    - ``"iid"`` (with replacement): a node reached by m draws of its token gets m * widths[d]
      i.i.d. draws, so equal tokens merge and ``draws[node]`` keeps them in order with repeats.
      ``widths = (K,)`` is K i.i.d. paths merged into a trie: ``draws[root]`` lists the paths'
      first tokens in path order, ``draws[v]`` the next tokens of the paths through v, in path
      order.  The ordered path tuple is recoverable from the draws (the map is injective), so no
      two orderings give the same tree: nothing is merged and verifiers that use the order
      (SpecInfer's residual sequence) see it.
    - ``"swor"``: min(widths[d], |supp q|) distinct children by successive sampling
      (Sequoia, arXiv 2402.12374): P(x_1..x_k) = prod_j q(x_j) / (1 - sum_{i<j} q(x_i)).
    - ``"greedy"``: the widths[d] - 1 most likely tokens of q, then one draw from q outside them
      (Hu et al., arXiv 2502.18779); with width 1 it is a single draw from q.
    - ``"topk"``: the widths[d] most likely tokens of q (ties to the lowest id), probability 1
      (EAGLE-style static trees).

    Children are numbered level by level (breadth first) in order of first appearance in their
    parent's draws, so node order within a parent is drafting order.

    >>> procs = list(iid_paths(2).enumerate(random_model(3, 0), random_model(3, 1), L=2))
    >>> round(sum(p for p, _ in procs), 12)
    1.0
    """

    widths: tuple[int, ...]
    mode: str = "iid"
    name: str = ""

    def __post_init__(self):
        if self.mode not in _ENUMERATE:
            raise ValueError(f"mode must be one of {sorted(_ENUMERATE)}, got {self.mode!r}")
        w = tuple(self.widths)
        if not w or any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1 for k in w):
            raise ValueError(f"widths must be a non-empty sequence of integers >= 1, got {self.widths!r}")
        object.__setattr__(self, "widths", tuple(int(k) for k in w))
        if not self.name:
            object.__setattr__(self, "name", f"{self.mode}{list(self.widths)}")

    @property
    def laws(self) -> frozenset[str]:
        """Children laws guaranteed at every node (see :func:`draft_laws`)."""
        if self.mode == "topk":
            return frozenset({"deterministic"})
        if self.mode == "greedy":
            return frozenset({"greedy"})
        if all(k == 1 for k in self.widths):
            return frozenset({"iid", "swor", "paths", "chain"})
        if self.mode == "swor":
            return frozenset({"swor"})
        return frozenset({"iid", "paths"}) if all(k == 1 for k in self.widths[1:]) else frozenset({"iid"})

    def widths_for(self, L: int) -> tuple[int, ...]:
        return tuple(self.widths[d] if d < len(self.widths) else 1 for d in range(L))

    def _grow(self, target: Model, draft: Model, L: int, options) -> Iterator[tuple[float, DraftTree]]:
        check_int(L, "L", 1)
        if target.V != draft.V:
            raise ValueError(f"target has V={target.V} but draft has V={draft.V}")
        V, widths, iid_mode = target.V, self.widths_for(L), self.mode == "iid"
        ptab, qtab = target.table(L), draft.table(L - 1)
        zero = np.zeros(V)

        def build(tokens, parent, codes, depths, draws):
            P = np.stack([ptab[d][c] for d, c in zip(depths, codes)])
            Q = np.stack([qtab[d][c] if d < L else zero for d, c in zip(depths, codes)])
            return DraftTree(tuple(tokens), tuple(parent), P, Q, tuple(draws), False)

        def grow(level, tokens, parent, codes, depths, mult, draws, prob, d):
            # level: node ids at depth d, expanded jointly (one option per node)
            if d == L:
                yield prob, build(tokens, parent, codes, depths, draws + [()] * (len(tokens) - len(draws)))
                return
            per_node = [options(qtab[d][codes[u]], mult[u] * widths[d] if iid_mode else widths[d])
                        for u in level]
            for combo in itertools.product(*per_node):
                tk, pa, co, de, mu = list(tokens), list(parent), list(codes), list(depths), list(mult)
                dr = list(draws) + [()] * (len(tokens) - len(draws))
                pr = prob
                nxt = []
                for u, (xs, px) in zip(level, combo):
                    pr *= px
                    dr[u] = xs
                    made: dict[int, int] = {}
                    for x in xs:
                        if x in made:
                            mu[made[x]] += 1
                            continue
                        made[x] = len(tk)
                        tk.append(x), pa.append(u), co.append(codes[u] * V + x), de.append(d + 1), mu.append(1)
                        nxt.append(made[x])
                if pr > 0:
                    yield from grow(nxt, tk, pa, co, de, mu, dr, pr, d + 1)

        yield from grow([0], [-1], [-1], [0], [0], [1], [], 1.0, 0)

    def node_options(self, q_row: np.ndarray, multiplicity: int, depth: int, L: int):
        """The draws one node at ``depth`` can make, ``[(draws, probability)]``, given its draft row
        and how many draws reached it (i.i.d. mode); children are drawn independently per node."""
        width = self.widths_for(L)[depth]
        return _ENUMERATE[self.mode](q_row, multiplicity * width if self.mode == "iid" else width)

    def enumerate(self, target: Model, draft: Model, L: int) -> Iterator[tuple[float, DraftTree]]:
        """Every tree with its probability (the product of the nodes' draw probabilities)."""
        return self._grow(target, draft, L, _ENUMERATE[self.mode])

    def sample(self, target: Model, draft: Model, L: int, rng: np.random.Generator) -> DraftTree:
        """One tree, drawn node by node with ``rng``."""
        if self.mode == "topk":
            options = _options_topk
        else:
            draw = {"iid": _sample_iid, "swor": _sample_swor, "greedy": _sample_greedy}[self.mode]
            options = lambda row, n: draw(row, n, rng)  # noqa: E731
        return next(iter(self._grow(target, draft, L, options)))[1]


def fixed_shape(widths, replacement: bool = True) -> TreeProcess:
    """A given shape: ``widths[d]`` draws per node at depth d (1 beyond ``len(widths)``), i.i.d.
    (``replacement=True``, equal tokens merged) or distinct by successive sampling.

    >>> fixed_shape((2, 2), replacement=False).name
    'swor[2, 2]'
    """
    return TreeProcess(tuple(widths), "iid" if replacement else "swor")


def iid_paths(K: int) -> TreeProcess:
    """K independent length-L paths from the draft model merged into a trie (SpecInfer's
    multi-draft setting, arXiv 2305.09781); order kept in ``draws``."""
    check_int(K, "K", 1)
    return TreeProcess((K,), "iid", f"iid_paths({K})")


def swor_tree(K: int) -> TreeProcess:
    """K distinct root children by successive sampling without replacement from q(.|root)
    (Sequoia, arXiv 2402.12374), each continued as a chain drawn from q to depth L."""
    check_int(K, "K", 1)
    return TreeProcess((K,), "swor", f"swor_tree({K})")


def topk_tree(widths) -> TreeProcess:
    """Deterministic EAGLE-style tree: the widths[d] most likely tokens of q at every depth-d node
    (ties to the lowest id; one child, the argmax, beyond ``len(widths)``); probability 1."""
    return TreeProcess(tuple(widths), "topk", f"topk{list(widths)}")


def delayed_expansion(d: int, K: int, replacement: bool = True) -> TreeProcess:
    """Delayed tree expansion: a single path for the first ``d`` tokens, then K branches at depth
    d (i.i.d. or distinct), each continued as a chain: widths = (1,)*d + (K,)."""
    check_int(d, "d", 0)
    check_int(K, "K", 1)
    return TreeProcess((1,) * d + (K,), "iid" if replacement else "swor",
                       f"delayed({d},{K}{'' if replacement else ',swor'})")


def greedy_drafts(K: int) -> TreeProcess:
    """Hu et al.'s greedy multi-draft law ("Towards Optimal Multi-draft Speculative Decoding",
    arXiv 2502.18779; SpecHub, arXiv 2411.05289, at K = 2): the root's children are the K - 1 most
    likely tokens of q (deterministic) plus one token drawn from q restricted to the rest; every
    child continues as a chain drawn from q.  ``draws[root]`` lists the K - 1 greedy tokens first
    and the sampled one last.  Q(all drafts in H) = 1[G in H] q(H minus G) / (1 - q(G)) (docs/theory.md §6.6)."""
    check_int(K, "K", 1)
    return TreeProcess((K,), "greedy", f"greedy_drafts({K})")


def parse_drafting(spec: str):
    """Draft process from a CLI string.

    Grammar: ``chain`` | ``iid:K`` (:func:`iid_paths`) | ``swor:K`` (:func:`swor_tree`) |
    ``binary:D`` (width 2 at depths < D, without replacement) | ``fixed:w1,w2,...[:swor]``
    (:func:`fixed_shape`) | ``topk:w1,w2,...`` (:func:`topk_tree`) | ``delayed:d,K[:swor]``.

    >>> parse_drafting("iid:2").name
    'iid_paths(2)'
    """
    grammar = ("chain | iid:K | swor:K | greedy:K | binary:D | fixed:w1,w2,...[:swor] | topk:w1,... | "
               "delayed:d,K[:swor]")
    if not isinstance(spec, str):
        raise ValueError(f"drafting spec must be a string ({grammar}), got {spec!r}")
    parts = spec.strip().lower().split(":")
    try:
        kind, args = parts[0], parts[1:]
        if kind == "chain" and not args:
            return chain()
        nums = [int(x) for x in args[0].split(",")] if args else []
        swor = args[1:] == ["swor"]
        if len(args) > 2 or (len(args) == 2 and not swor) or not nums:
            raise ValueError
        if kind == "iid" and len(args) == 1 and len(nums) == 1:
            return iid_paths(nums[0])
        if kind == "swor" and len(args) == 1 and len(nums) == 1:
            return swor_tree(nums[0])
        if kind == "greedy" and len(args) == 1 and len(nums) == 1:
            return greedy_drafts(nums[0])
        if kind == "binary" and len(args) == 1 and len(nums) == 1 and nums[0] >= 1:
            return TreeProcess((2,) * nums[0], "swor", f"binary({nums[0]})")
        if kind == "fixed":
            return fixed_shape(nums, replacement=not swor)
        if kind == "topk" and len(args) == 1:
            return topk_tree(nums)
        if kind == "delayed" and len(nums) == 2:
            return delayed_expansion(nums[0], nums[1], replacement=not swor)
    except ValueError:
        pass
    raise ValueError(f"cannot parse drafting spec {spec!r}; expected {grammar}")
