"""Draft trees and the draft processes that generate them with their exact probabilities.

A :class:`DraftTree` holds the drafted tokens as a rooted tree (node 0 is the root, the empty
draft; parents precede children), the target row ``p(.|path)`` at every node and the draft row
``q(.|path)`` at internal nodes.  A chain of L tokens is the tree with nodes 0..L in a line.

A draft process is a law Q over draft trees of depth L.  It has ``enumerate(target,
draft_model, L)``, yielding every ``(Q(tree), tree)`` with Q(tree) > 0 (the probabilities sum to
1; the exact engine, docs/theory.md §2), and ``sample(target, draft_model, L, rng)`` (Monte
Carlo).  The process, not the caller, supplies the rows, so trees always agree with how their
children were drawn.  ``laws`` says which children laws it guarantees (:data:`DRAFT_LAWS`), which
is what a tree verifier may rely on (docs/theory.md §6).

Why one module of ~800 lines: the tree type and the processes share one contract (a process's
``enumerate``, ``sample`` and ``node_options`` must build the trees its ``laws`` promise, and
``DraftTree`` checks what they build), and about a third of the lines are runnable examples.

>>> from specsim.drafts import iid_paths
>>> from specsim.models import iid
>>> trees = list(iid_paths(2).enumerate(iid([0.5, 0.5]), iid([0.75, 0.25]), L=1))
>>> [(Q, tree.draws[0]) for Q, tree in trees]
[(0.5625, (0, 0)), (0.1875, (0, 1)), (0.1875, (1, 0)), (0.0625, (1, 1))]
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Iterator, Protocol

import numpy as np

from ._validate import (_float_array, as_distribution, as_rows, check_bool, check_int, check_rng, check_tokens,
                        sum_tolerance)
from .models import Model, validate_model_pair

__all__ = ["DraftTree", "DraftProcess", "Chain", "chain", "TreeProcess", "iid_paths", "swor_tree",
           "fixed_shape", "topk_tree", "delayed_expansion", "greedy_drafts", "parse_drafting",
           "draft_laws"]


@dataclass(frozen=True, eq=False)
class DraftTree:
    """A draft tree over V tokens: node i stands for the drafted prefix path(i) in V^depth(i).

    Node 0 is the root (the empty prefix, token -1, parent -1); node i > 0 extends its parent's
    prefix by ``tokens[i]``, parents precede children and no two children of a node share a
    token.  Rows: ``p[i] = p(.|path(i))`` at every node, ``q[i] = q(.|path(i))`` at every internal
    node (leaf rows are not used and may be zero).  A child's token must have q > 0 at its parent:
    it was drawn from that row.

    Parameters: ``tokens``, ``parent`` (tuples of n ints), ``p``, ``q`` (arrays [n, V], V >= 2),
    ``draws`` (``draws[i]`` lists node i's child tokens in the order they were drafted, with
    repeats when several i.i.d. draws gave the same token; default: the children's tokens in node
    order), ``validate`` (check everything above; ``False`` for trees built by the package).

    Returns: a frozen tree with derived fields ``depth[i]``, ``children[i]`` (node ids) and
    ``path_index[i]`` (base-V code of path(i), first token most significant); ``ValueError``
    naming the node and the problem when the tree is malformed.

    >>> import numpy as np
    >>> from specsim.drafts import DraftTree
    >>> p = np.array([[0.5, 0.5], [0.2, 0.8], [0.9, 0.1]])
    >>> q = np.array([[0.6, 0.4], [0.0, 0.0], [0.0, 0.0]])
    >>> tree = DraftTree(tokens=(-1, 0, 1), parent=(-1, 0, 0), p=p, q=q)
    >>> tree.children[0], tree.path(2), tree.depth, tree.is_chain
    ((1, 2), (1,), (0, 1, 1), False)
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
        if self.validate:
            self._check()
        n = len(self.tokens)
        V = self.p.shape[1]
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

    def _check(self) -> None:
        # the input contract of docs/design.md: integer ids, rows renormalised once in float64
        for name in ("tokens", "parent"):
            seq = getattr(self, name)
            if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
                raise TypeError(f"{name} must be a sequence of integers, got {type(seq).__name__}")
            seq = tuple(seq)
            for i, t in enumerate(seq):
                if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
                    raise TypeError(f"{name}[{i}] must be an integer, got {t!r}")
            object.__setattr__(self, name, tuple(int(t) for t in seq))
        n = len(self.tokens)
        if n < 1 or len(self.parent) != n:
            raise ValueError(f"tokens and parent must have the same positive length, got {n} and {len(self.parent)}")
        if self.tokens[0] != -1 or self.parent[0] != -1:
            raise ValueError("node 0 must be the root with token -1 and parent -1")
        (p, p_eps), (q, q_eps) = _float_array(self.p, "p"), _float_array(self.q, "q")
        V = p.shape[1] if p.ndim == 2 else 0
        if p.ndim != 2 or p.shape[0] != n or V < 2:
            raise ValueError(f"p must have shape [num_nodes={n}, V>=2], got {p.shape}")
        if q.shape != p.shape:
            raise ValueError(f"q must have shape {p.shape}, got {q.shape}")
        internal = {self.parent[i] for i in range(1, n) if 0 <= self.parent[i] < n}
        p = p.copy()
        q = q.copy()
        for i in range(n):
            p[i] = as_distribution(p[i], f"p at node {i}", sum_tolerance(p_eps, V))
            if i in internal:
                q[i] = as_distribution(q[i], f"q at node {i}", sum_tolerance(q_eps, V))
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "q", q)
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
        """The chain tree of a draft x = (x_1..x_L): node k is the prefix x^{1:k} (k = 0..L).

        Parameters: ``draft`` (L token ids), ``p`` ([L+1, V], row k = p(.|x^{1:k}), row L the
        bonus row), ``q`` ([L, V], row k = q(.|x^{1:k})), ``validate`` (as for the class).

        Returns: the :class:`DraftTree` with nodes 0..L in a line (leaf q row zero).

        >>> from specsim.drafts import DraftTree
        >>> tree = DraftTree.from_chain([1, 0], p=[[0.5, 0.5]] * 3, q=[[0.3, 0.7], [0.6, 0.4]])
        >>> tree.tokens, tree.parent, tree.is_chain
        ((-1, 1, 0), (-1, 0, 1), True)
        """
        if validate:  # rows renormalised here, while their dtype still sets the tolerance
            p = as_rows(p, "p")
            draft = check_tokens(draft, "draft", p.shape[1])
            L = len(draft)
            if p.shape[0] != L + 1:
                raise ValueError(f"chain of L={L} needs p [L+1, V], got {p.shape}")
            q = as_rows(q, "q", (L, p.shape[1])) if L else np.zeros((0, p.shape[1]))
        L = len(draft)
        p = np.asarray(p, dtype=np.float64)
        q = np.asarray(q, dtype=np.float64)
        qfull = np.vstack([q, np.zeros((1, p.shape[1]))])
        return cls((-1, *map(int, draft)), tuple(range(-1, L)), p, qfull, None, validate)

    # ------------------------------------------------------------------ views
    @property
    def num_nodes(self) -> int:
        """Number of nodes n, the root included."""
        return len(self.tokens)

    @property
    def V(self) -> int:
        """Vocabulary size (columns of ``p``)."""
        return self.p.shape[1]

    @property
    def max_depth(self) -> int:
        """Length of the longest drafted prefix (0 for a root alone)."""
        return max(self.depth)

    @property
    def is_chain(self) -> bool:
        """True when node i's parent is i - 1 for every i (a single draft path)."""
        return all(self.parent[i] == i - 1 for i in range(1, self.num_nodes))

    @property
    def shape(self) -> tuple:
        """What fixes a tree verifier's decision sequence: the parents and, at every node, the child
        node of each draw in drafting order (repeats kept), but not the tokens or rows.

        Trees with equal shapes differ only in their tokens and rows, so a ``batch_law`` can treat a
        group of them with arrays [N, nodes, V]; the exact engine groups the enumerated trees by this
        key (docs/theory.md §2.1).

        Returns: ``(parent, draw_nodes)``, two tuples (``draw_nodes[u]`` node ids of u's draws).

        >>> from specsim.drafts import iid_paths
        >>> from specsim.models import random_model
        >>> trees = [t for _, t in iid_paths(2).enumerate(random_model(3, 0), random_model(3, 1), 1)]
        >>> [t.draws[0] for t in trees[:4]], [t.shape[1][0] for t in trees[:4]]
        ([(0, 0), (0, 1), (0, 2), (1, 0)], [(1, 1), (1, 2), (1, 2), (1, 2)])
        """
        nodes = []
        for u, kids in enumerate(self.children):
            by_token = {self.tokens[c]: c for c in kids}
            nodes.append(tuple(by_token[t] for t in self.draws[u]))
        return self.parent, tuple(nodes)

    def path(self, node: int) -> tuple[int, ...]:
        """path(node): the tokens on the root-to-node path, root first (``()`` for the root).

        >>> from specsim.drafts import DraftTree
        >>> DraftTree.from_chain([1, 0], p=[[0.5, 0.5]] * 3, q=[[0.3, 0.7], [0.6, 0.4]]).path(2)
        (1, 0)
        """
        out = []
        while node > 0:
            out.append(self.tokens[node])
            node = self.parent[node]
        return tuple(reversed(out))

    def chain_arrays(self) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
        """The inverse of :meth:`from_chain`: ``(draft, p [L+1, V], q [L, V])`` of a chain tree,
        the arguments of a chain verifier's law; ``ValueError`` if the tree branches.

        >>> from specsim.drafts import DraftTree
        >>> tree = DraftTree.from_chain([1, 0], p=[[0.5, 0.5]] * 3, q=[[0.3, 0.7], [0.6, 0.4]])
        >>> draft, p, q = tree.chain_arrays()
        >>> draft, p.shape, q.shape
        ((1, 0), (3, 2), (2, 2))
        """
        if not self.is_chain:
            raise ValueError("tree branches: a chain verifier needs a chain draft")
        L = self.num_nodes - 1
        return tuple(self.tokens[1:]), self.p, self.q[:L]


class DraftProcess(Protocol):
    """How drafts are produced: a law Q over :class:`DraftTree` objects of depth L.

    ``enumerate(target, draft_model, L)`` yields every ``(Q(tree), tree)`` with Q(tree) > 0,
    probabilities summing to 1, each tree once; ``sample(target, draft_model, L, rng)`` draws one
    tree from Q.  Rows come from the two models.  A process may also carry ``laws``, the children
    laws it guarantees (:data:`DRAFT_LAWS`); one without ``laws`` guarantees none
    (:func:`draft_laws`).  :class:`Chain` and :class:`TreeProcess` implement it.
    """

    name: str

    def enumerate(self, target: Model, draft_model: Model, L: int) -> Iterator[tuple[float, DraftTree]]: ...

    def sample(self, target: Model, draft_model: Model, L: int, rng: np.random.Generator) -> DraftTree: ...


@dataclass(frozen=True)
class Chain:
    """A single draft path x = (x_1..x_L) drawn autoregressively from the draft model:
    Q(x) = prod_{k<L} q(x_{k+1} | x^{1:k}) (docs/theory.md §1); the default process everywhere.

    >>> from specsim.drafts import chain
    >>> from specsim.models import iid
    >>> round(sum(Q for Q, _ in chain().enumerate(iid([0.5, 0.5]), iid([0.75, 0.25]), L=3)), 12)
    1.0
    """

    name: str = "chain"

    @property
    def laws(self) -> frozenset[str]:
        """One draw from q per node is at once i.i.d., without replacement and a one-path trie."""
        return frozenset({"iid", "swor", "paths", "chain"})

    def arrays(self, target: Model, draft_model: Model, L: int):
        """Every draft x in V^L with Q(x) > 0 at once, in base-V order (the vectorised form of
        :meth:`enumerate`).

        Parameters: ``target``, ``draft_model`` (:class:`specsim.models.Model` over the same V),
        ``L`` (draft length >= 1).

        Returns: ``(drafts, Q, p, q)``: drafts int [N, L], Q(x) [N], target rows p [N, L+1, V]
        and draft rows q [N, L, V] along each draft (row k conditions on x^{1:k}).

        >>> from specsim.drafts import chain
        >>> from specsim.models import iid
        >>> drafts, Q, p, q = chain().arrays(iid([0.5, 0.5]), iid([0.75, 0.25]), L=2)
        >>> drafts.tolist(), Q.tolist(), p.shape, q.shape
        ([[0, 0], [0, 1], [1, 0], [1, 1]], [0.5625, 0.1875, 0.1875, 0.0625], (4, 3, 2), (4, 2, 2))
        """
        validate_model_pair(target, draft_model, L)
        V = target.V
        ptab, qtab = target.table(L), draft_model.table(L - 1)
        codes = np.arange(V ** L)
        digits = np.stack([(codes // V ** (L - 1 - i)) % V for i in range(L)], axis=1)
        prefix = [codes // V ** (L - i) for i in range(L + 1)]
        qrows = np.stack([qtab[i][prefix[i]] for i in range(L)], axis=1)
        Qx = np.prod(np.take_along_axis(qrows, digits[:, :, None], axis=2)[:, :, 0], axis=1)
        keep = Qx > 0
        prows = np.stack([ptab[i][prefix[i][keep]] for i in range(L + 1)], axis=1)
        return digits[keep], Qx[keep], prows, qrows[keep]

    def enumerate(self, target: Model, draft_model: Model, L: int) -> Iterator[tuple[float, DraftTree]]:
        """Every draft x in V^L with Q(x) > 0, as ``(Q(x), chain tree)`` in base-V order.

        Parameters: as :meth:`arrays`.  Returns: an iterator of ``(float, DraftTree)``.

        >>> from specsim.drafts import chain
        >>> from specsim.models import iid
        >>> [(Q, t.tokens) for Q, t in chain().enumerate(iid([0.5, 0.5]), iid([1.0, 0.0]), L=2)]
        [(1.0, (-1, 0, 0))]
        """
        drafts, Qx, prows, qrows = self.arrays(target, draft_model, L)
        leaf = np.zeros((1, target.V))
        parents = tuple(range(-1, L))
        for n in range(Qx.size):
            yield float(Qx[n]), DraftTree((-1, *drafts[n].tolist()), parents, prows[n],
                                          np.vstack([qrows[n], leaf]), None, False)

    def sample(self, target: Model, draft_model: Model, L: int, rng: np.random.Generator) -> DraftTree:
        """One draft drawn token by token, x_{k+1} ~ q(.|x^{1:k}) with ``rng`` (a numpy Generator).

        Returns: the chain :class:`DraftTree` of the draft.

        >>> import numpy as np
        >>> from specsim.drafts import chain
        >>> from specsim.models import iid
        >>> chain().sample(iid([0.5, 0.5]), iid([1.0, 0.0]), 3, np.random.default_rng(0)).tokens
        (-1, 0, 0, 0)
        """
        validate_model_pair(target, draft_model, L)
        check_rng(rng)
        toks: list[int] = []
        qs = []
        for _ in range(L):
            row = draft_model(tuple(toks))
            qs.append(row)
            toks.append(int(rng.choice(row.size, p=row)))
        ps = [target(tuple(toks[:i])) for i in range(L + 1)]
        return DraftTree.from_chain(toks, np.array(ps), np.array(qs), validate=False)


def chain() -> Chain:
    """The single-path draft process :class:`Chain`, Q(x) = prod_k q(x_{k+1} | x^{1:k}).

    Returns: a :class:`Chain` (all instances are equal).

    >>> from specsim.drafts import chain
    >>> chain().name, sorted(chain().laws)
    ('chain', ['chain', 'iid', 'paths', 'swor'])
    """
    return Chain()


# ====================================================================== tree-shaped processes
#: Children laws a process can guarantee at every node (what a tree verifier may rely on):
#: ``iid``  the draws at a node are i.i.d. from q(.|node) (repeats allowed, their number fixed
#:          before they are drawn); ``swor`` the draws are distinct and drawn by successive
#:          sampling without replacement from q(.|node); ``paths`` the tree is K i.i.d. full
#:          paths of length L merged into a trie; ``chain`` a single path drawn from q;
#:          ``deterministic`` the tree is a fixed function of the rows (no draft randomness);
#:          ``greedy`` the draws are the widths[d] - 1 most likely tokens of q (ties and q = 0
#:          tokens to the lowest id) and then one token drawn from q outside them, in that order,
#:          that last draw void when q has no mass outside them (Hu et al.'s greedy draft law).
DRAFT_LAWS = ("iid", "swor", "paths", "chain", "deterministic", "greedy")


def draft_laws(drafting) -> frozenset[str]:
    """The children laws (:data:`DRAFT_LAWS`) a draft process guarantees at every node.

    A tree verifier that needs one of these laws applies to the process (docs/theory.md §6).

    Parameters: ``drafting``, any :class:`DraftProcess`; one without a ``laws`` attribute (a
    user-written process) guarantees none.

    Returns: a frozenset of :data:`DRAFT_LAWS` tags.

    >>> from specsim.drafts import chain, draft_laws, iid_paths, swor_tree
    >>> sorted(draft_laws(iid_paths(2))), sorted(draft_laws(swor_tree(2))), sorted(draft_laws(chain()))
    (['iid', 'paths'], ['swor'], ['chain', 'iid', 'paths', 'swor'])
    """
    return frozenset(getattr(drafting, "laws", ()))


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
        out.append((xs, float(pr)))
    return out


def _options_topk(row: np.ndarray, n: int) -> list[tuple[tuple[int, ...], float]]:
    # the n most likely supported tokens, by decreasing q (ties to the lowest id)
    order = np.lexsort((np.arange(row.size), -row))
    return [(tuple(int(t) for t in order[:n] if row[t] > 0), 1.0)]


def _greedy_hub(row: np.ndarray, n: int) -> tuple[tuple[int, ...], float]:
    # the n - 1 most likely tokens of q, ties to the lowest id, tokens with q = 0 included (a
    # top-k of the draft's row; docs/theory.md §6.6: this keeps the law the limit of rows with
    # q > 0 on those tokens), and the mass outside them, summed directly: 1 - q(hub) cancels to
    # rounding noise when the hub holds almost all the mass
    order = np.lexsort((np.arange(row.size), -row))
    hub = tuple(int(t) for t in order[: n - 1])
    outside = np.ones(row.size, dtype=bool)
    outside[list(hub)] = False
    return hub, float(row[outside].sum())


def _options_greedy(row: np.ndarray, n: int) -> list[tuple[tuple[int, ...], float]]:
    # Hu et al.'s greedy draft set: the top n-1 tokens of q, then one draw from q outside them
    hub, rest = _greedy_hub(row, n)
    if rest <= 0.0:
        return [(hub, 1.0)]
    others = [int(t) for t in np.flatnonzero(row > 0) if int(t) not in hub]
    return [(hub + (x,), float(row[x] / rest)) for x in others]


def _sample_greedy(row, n, rng):
    hub, rest = _greedy_hub(row, n)
    if rest <= 0.0:
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
class RowRequest:
    """What :meth:`TreeProcess.grow_steps` yields when it needs the draft rows of one level:
    the nodes' ``keys`` (in the order the rows must come back) and their ``depth``."""

    keys: tuple
    depth: int


@dataclass(frozen=True)
class TreeProcess:
    """A draft tree grown level by level with ``widths[d]`` draws per node at depth d (1 beyond).

    Every node draws its children independently of the other nodes, from its own row q(.|node),
    so the law of a tree is the product over internal nodes u of P(draws[u] | q(.|u)).
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
      (Hu et al., arXiv 2502.18779); with width 1 it is a single draw from q.  Ties go to the
      lowest id and the hub is filled with q = 0 tokens when q has fewer positive ones; the last
      draw is void (omitted) when q has no mass outside the hub (docs/theory.md §6.6).
    - ``"topk"``: the widths[d] most likely tokens of q (ties to the lowest id), probability 1
      (EAGLE-style static trees).

    Children are numbered level by level (breadth first) in order of first appearance in their
    parent's draws, so node order within a parent is drafting order.

    Parameters: ``widths`` (non-empty integers >= 1), ``mode`` (``"iid"``, ``"swor"``,
    ``"greedy"`` or ``"topk"``), ``name`` (default ``f"{mode}{list(widths)}"``).  The factories
    below (:func:`iid_paths`, :func:`swor_tree`, :func:`fixed_shape`, ...) name the usual shapes.

    Returns: a frozen :class:`DraftProcess`; ``TypeError`` for a non-string mode or name, widths
    that are not a sequence or a width that is not an integer, ``ValueError`` for an unknown mode,
    empty widths or a width < 1 (the width named by its depth, ``widths[d]``).

    >>> from specsim.drafts import TreeProcess
    >>> from specsim.models import random_model
    >>> trees = list(TreeProcess((2,), "iid").enumerate(random_model(3, 0), random_model(3, 1), L=2))
    >>> len(trees), round(sum(Q for Q, _ in trees), 12)
    (81, 1.0)
    """

    widths: tuple[int, ...]
    mode: str = "iid"
    name: str = ""

    def __post_init__(self):
        if not isinstance(self.mode, str):
            raise TypeError(f"mode must be a string, one of {sorted(_ENUMERATE)}, got {type(self.mode).__name__}")
        if self.mode not in _ENUMERATE:
            raise ValueError(f"mode must be one of {sorted(_ENUMERATE)}, got {self.mode!r}")
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string, got {type(self.name).__name__}")
        if isinstance(self.widths, (str, bytes)) or not hasattr(self.widths, "__iter__"):
            raise TypeError(f"widths must be a sequence of integers >= 1, got {type(self.widths).__name__}")
        w = tuple(check_int(k, f"widths[{d}]", 1) for d, k in enumerate(self.widths))
        if not w:
            raise ValueError("widths must be a non-empty sequence of integers >= 1, got an empty sequence")
        object.__setattr__(self, "widths", w)
        if not self.name:
            object.__setattr__(self, "name", f"{self.mode}{list(self.widths)}")

    @property
    def laws(self) -> frozenset[str]:
        """Children laws guaranteed at every node (:data:`DRAFT_LAWS`, see :func:`draft_laws`).

        >>> from specsim.drafts import TreeProcess
        >>> sorted(TreeProcess((2, 1)).laws), sorted(TreeProcess((2, 2)).laws)
        (['iid', 'paths'], ['iid'])
        """
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
        """The draws per node at depths 0..L-1: ``widths`` cut or padded with 1 to length L.

        >>> from specsim.drafts import TreeProcess
        >>> TreeProcess((3, 2)).widths_for(4)
        (3, 2, 1, 1)
        """
        return tuple(self.widths[d] if d < len(self.widths) else 1 for d in range(L))

    def grow(self, L: int, q_rows, options, root=(), child=lambda key, x: key + (x,)):
        """Grow trees of depth <= ``L`` from a row source, level by level (breadth first).

        ``q_rows(keys, depth)`` returns the draft rows q(.|node) of one level's nodes, so a source
        that computes rows in batches (a real model: one forward pass per level) gets a whole
        level at once; ``options(row, n)`` lists a node's draw tuples with their probabilities
        (:meth:`node_options`'s law to enumerate, one sampled tuple to sample).  Nodes are keyed
        by ``child(parent_key, token)`` from ``root`` (default: the prefix tuple).

        Yields: ``(probability, tokens, parent, keys, depths, draws)`` per tree, tokens[0] = -1 the
        root, nodes numbered as in the class docstring; an iterator, so a sampler takes the first.
        """
        steps = self.grow_steps(L, options, root, child)
        reply = None
        while True:
            try:
                out = steps.send(reply)
            except StopIteration:
                return
            if isinstance(out, RowRequest):
                reply = q_rows(out.keys, out.depth)
            else:
                reply = None
                yield out

    def grow_steps(self, L: int, options, root=(), child=lambda key, x: key + (x,)):
        """:meth:`grow` as a coroutine, for a driver that grows many trees in step: it yields a
        :class:`RowRequest` wherever it needs a level's draft rows (send them back, one per key,
        in order) and each finished tree as :meth:`grow` does (resume it with ``send(None)``), so
        a driver can answer the requests of many trees with one batched source call per level.
        """
        widths, iid_mode = self.widths_for(L), self.mode == "iid"

        def expand(level, tokens, parent, keys, depths, mult, draws, prob, d):
            # level: node ids at depth d, expanded jointly (one option per node)
            if d == L or not level:
                yield prob, tokens, parent, keys, depths, draws + [()] * (len(tokens) - len(draws))
                return
            rows = yield RowRequest(tuple(keys[u] for u in level), d)
            per_node = [options(row, mult[u] * widths[d] if iid_mode else widths[d]) for u, row in zip(level, rows)]
            for combo in itertools.product(*per_node):
                tk, pa, ke, de, mu = list(tokens), list(parent), list(keys), list(depths), list(mult)
                dr = list(draws) + [()] * (len(tokens) - len(draws))
                pr = prob
                nxt = []
                for u, (xs, px) in zip(level, combo):
                    pr *= px
                    dr[u] = xs
                    made: dict[int, int] = {}
                    for x in xs:
                        if x in made:   # an i.i.d. repeat: one node carrying several draws
                            mu[made[x]] += 1
                            continue
                        made[x] = len(tk)
                        tk.append(x), pa.append(u), ke.append(child(keys[u], x)), de.append(d + 1), mu.append(1)
                        nxt.append(made[x])
                if pr > 0:
                    yield from expand(nxt, tk, pa, ke, de, mu, dr, pr, d + 1)

        yield from expand([0], [-1], [-1], [root], [0], [1], [], 1.0, 0)

    def _grow(self, target: Model, draft_model: Model, L: int, options) -> Iterator[tuple[float, DraftTree]]:
        # trees of a toy model pair: rows from the full tables, nodes keyed by base-V prefix codes
        validate_model_pair(target, draft_model, L)
        V = target.V
        ptab, qtab = target.table(L), draft_model.table(L - 1)
        zero = np.zeros(V)
        q_rows = lambda codes, d: [qtab[d][c] for c in codes]  # noqa: E731
        for prob, tokens, parent, codes, depths, draws in self.grow(L, q_rows, options, 0, lambda c, x: c * V + x):
            P = np.stack([ptab[d][c] for d, c in zip(depths, codes)])
            Q = np.stack([qtab[d][c] if d < L else zero for d, c in zip(depths, codes)])
            yield prob, DraftTree(tuple(tokens), tuple(parent), P, Q, tuple(draws), False)

    def sampler(self, rng: np.random.Generator):
        """The ``options`` of :meth:`grow` that draws one tuple per node with ``rng`` (probability 1
        attached): growing with it samples one tree of the process."""
        check_rng(rng)
        if self.mode == "topk":
            return _options_topk
        draw = {"iid": _sample_iid, "swor": _sample_swor, "greedy": _sample_greedy}[self.mode]
        return lambda row, n: draw(row, n, rng)

    def node_options(self, q_row: np.ndarray, multiplicity: int, depth: int, L: int):
        """The law of one node's draws: every ordered draw tuple with its probability.

        n = ``widths_for(L)[depth]`` draws (times ``multiplicity``, the number of draws that
        reached the node, in i.i.d. mode): i.i.d. tuples have probability prod_j q(x_j),
        successive sampling prod_j q(x_j) / (1 - sum_{i<j} q(x_i)); greedy and top-k as in the
        class docstring.  Only tokens with q > 0 are drawn, except in a greedy hub (filled with q = 0
        tokens, lowest id first, when q has fewer than widths[d] - 1 positive tokens).

        Parameters: ``q_row`` (the node's draft row [V]), ``multiplicity``, ``depth``, ``L``.

        Returns: a list of ``(draws, probability)`` with draws a tuple of token ids.

        >>> import numpy as np
        >>> from specsim.drafts import TreeProcess
        >>> options = TreeProcess((2,), "swor").node_options(np.array([0.5, 0.3, 0.2]), 1, 0, L=1)
        >>> [(draws, round(pr, 4)) for draws, pr in options[:3]]
        [((0, 1), 0.3), ((0, 2), 0.2), ((1, 0), 0.2143)]
        """
        width = self.widths_for(L)[depth]
        return _ENUMERATE[self.mode](q_row, multiplicity * width if self.mode == "iid" else width)

    def enumerate(self, target: Model, draft_model: Model, L: int) -> Iterator[tuple[float, DraftTree]]:
        """Every tree of depth L with Q(tree) > 0, Q(tree) = prod over internal nodes of the
        probability of their draws (:meth:`node_options`).

        Parameters: ``target``, ``draft_model`` (models over the same V), ``L`` (depth >= 1).

        Returns: an iterator of ``(Q(tree), DraftTree)``, each tree once, Q summing to 1.

        >>> from specsim.drafts import swor_tree
        >>> from specsim.models import iid
        >>> trees = swor_tree(2).enumerate(iid([0.2, 0.3, 0.5]), iid([0.5, 0.5, 0.0]), L=1)
        >>> [(Q, tree.draws[0]) for Q, tree in trees]
        [(0.5, (0, 1)), (0.5, (1, 0))]
        """
        return self._grow(target, draft_model, L, _ENUMERATE[self.mode])

    def sample(self, target: Model, draft_model: Model, L: int, rng: np.random.Generator) -> DraftTree:
        """One tree drawn from Q node by node with ``rng`` (a numpy Generator).

        Returns: the :class:`DraftTree` (the same object :meth:`enumerate` lists for those draws).

        >>> import numpy as np
        >>> from specsim.drafts import swor_tree
        >>> from specsim.models import iid
        >>> tree = swor_tree(2).sample(iid([0.2, 0.3, 0.5]), iid([0.5, 0.5, 0.0]), 1, np.random.default_rng(0))
        >>> sorted(tree.draws[0])
        [0, 1]
        """
        return next(iter(self._grow(target, draft_model, L, self.sampler(rng))))[1]


def fixed_shape(widths, replacement: bool = True) -> TreeProcess:
    """A given shape: ``widths[d]`` draws per node at depth d (1 beyond ``len(widths)``), i.i.d.
    (``replacement=True``: equal tokens merge into one node that carries all their draws) or
    distinct by successive sampling (``replacement=False``).

    Parameters: ``widths`` (integers >= 1), ``replacement``.

    Returns: a :class:`TreeProcess` in mode ``"iid"`` or ``"swor"``.

    >>> from specsim.drafts import fixed_shape
    >>> from specsim.models import iid
    >>> Q, tree = next(fixed_shape((2, 2)).enumerate(iid([0.5, 0.5]), iid([0.75, 0.25]), L=2))
    >>> tree.draws[:2], Q == 0.75 ** 6     # root draws (0, 0): the merged child draws 2 x 2 times
    (((0, 0), (0, 0, 0, 0)), True)
    >>> fixed_shape((2, 2), replacement=False).name
    'swor[2, 2]'
    """
    check_bool(replacement, "replacement")
    return TreeProcess(widths, "iid" if replacement else "swor")


def iid_paths(K: int) -> TreeProcess:
    """K independent length-L paths from the draft model merged into a trie (SpecInfer's
    multi-draft setting, arXiv 2305.09781): Q(x^(1), ..., x^(K)) = prod_k Q(x^(k)), the path
    order kept in ``draws`` (docs/theory.md §6.1).

    Parameters: ``K`` (number of paths, >= 1).  Returns: a :class:`TreeProcess`, widths ``(K,)``.

    >>> from specsim.drafts import iid_paths
    >>> from specsim.models import iid
    >>> [(Q, tree.draws[0]) for Q, tree in iid_paths(2).enumerate(iid([0.5, 0.5]), iid([0.75, 0.25]), L=1)]
    [(0.5625, (0, 0)), (0.1875, (0, 1)), (0.1875, (1, 0)), (0.0625, (1, 1))]
    """
    check_int(K, "K", 1)
    return TreeProcess((K,), "iid", f"iid_paths({K})")


def swor_tree(K: int) -> TreeProcess:
    """K distinct root children by successive sampling without replacement from q(.|root)
    (Sequoia, arXiv 2402.12374), P(x_1..x_K) = prod_j q(x_j) / (1 - sum_{i<j} q(x_i)), each
    continued as a chain drawn from q to depth L (docs/theory.md §6.2).  Fewer than K children
    when q(.|root) has fewer than K supported tokens.

    Parameters: ``K`` (>= 1).  Returns: a :class:`TreeProcess`, widths ``(K,)``, mode ``"swor"``.

    >>> from specsim.drafts import swor_tree
    >>> from specsim.models import iid
    >>> trees = swor_tree(2).enumerate(iid([0.2, 0.3, 0.5]), iid([0.5, 0.3, 0.2]), L=1)
    >>> [(round(Q, 4), tree.draws[0]) for Q, tree in trees][:3]
    [(0.3, (0, 1)), (0.2, (0, 2)), (0.2143, (1, 0))]
    """
    check_int(K, "K", 1)
    return TreeProcess((K,), "swor", f"swor_tree({K})")


def topk_tree(widths) -> TreeProcess:
    """Deterministic EAGLE-style tree: the widths[d] most likely tokens of q at every depth-d node
    (ties to the lowest id; one child, the argmax, beyond ``len(widths)``); probability 1.

    Parameters: ``widths`` (integers >= 1).  Returns: a :class:`TreeProcess` in mode ``"topk"``.

    >>> from specsim.drafts import topk_tree
    >>> from specsim.models import iid
    >>> [(Q, tree.draws) for Q, tree in topk_tree((2,)).enumerate(iid([0.2, 0.3, 0.5]), iid([0.5, 0.3, 0.2]), L=2)]
    [(1.0, ((0, 1), (0,), (0,), (), ()))]
    """
    return TreeProcess(widths, "topk")  # the default name, topk[w1, ...]


def delayed_expansion(d: int, K: int, replacement: bool = True) -> TreeProcess:
    """Delayed tree expansion: a single path for the first ``d`` tokens, then K branches at depth
    d (i.i.d. or distinct), each continued as a chain: widths = (1,)*d + (K,).

    Parameters: ``d`` (>= 0), ``K`` (>= 1), ``replacement`` (i.i.d. or successive sampling).

    Returns: a :class:`TreeProcess`.

    >>> from specsim.drafts import delayed_expansion
    >>> process = delayed_expansion(1, 3)
    >>> process.widths, process.name
    ((1, 3), 'delayed(1,3)')
    """
    check_int(d, "d", 0)
    check_int(K, "K", 1)
    check_bool(replacement, "replacement")
    return TreeProcess((1,) * d + (K,), "iid" if replacement else "swor",
                       f"delayed({d},{K}{'' if replacement else ',swor'})")


def greedy_drafts(K: int) -> TreeProcess:
    """Hu et al.'s greedy multi-draft law ("Towards Optimal Multi-draft Speculative Decoding",
    arXiv 2502.18779; SpecHub, arXiv 2411.05289, at K = 2): the root's children are the K - 1 most
    likely tokens of q (deterministic) plus one token drawn from q restricted to the rest; every
    child continues as a chain drawn from q.  ``draws[root]`` lists the K - 1 greedy tokens first
    and the sampled one last.  Q(all drafts in H) = 1[G in H] q(H minus G) / (1 - q(G)) (docs/theory.md §6.6).
    Ties in q go to the lowest id, and when q has fewer than K - 1 positive tokens the hub is
    filled with q = 0 tokens the same way (the law stays the limit of rows with q > 0 there); the
    last draw is then void, so ``draws[root]`` is the hub alone.

    Parameters: ``K`` (>= 1; K = 1 is a single draw from q).

    Returns: a :class:`TreeProcess` in mode ``"greedy"``.

    >>> from specsim.drafts import greedy_drafts
    >>> from specsim.models import iid
    >>> [(Q, tree.draws[0]) for Q, tree in greedy_drafts(2).enumerate(iid([0.2, 0.3, 0.5]), iid([0.5, 0.3, 0.2]), L=1)]
    [(0.6, (0, 1)), (0.4, (0, 2))]
    >>> [tree.draws[0] for _, tree in greedy_drafts(3).enumerate(iid([0.25] * 4), iid([0, 0, 0, 1]), L=1)]
    [(3, 0)]
    """
    check_int(K, "K", 1)
    return TreeProcess((K,), "greedy", f"greedy_drafts({K})")


def parse_drafting(spec: str):
    """Draft process from a CLI string.

    Grammar: ``chain`` | ``iid:K`` (:func:`iid_paths`) | ``swor:K`` (:func:`swor_tree`) |
    ``greedy:K`` (:func:`greedy_drafts`) | ``binary:D`` (width 2 at depths < D, without
    replacement) | ``fixed:w1,w2,...[:swor]`` (:func:`fixed_shape`) | ``topk:w1,w2,...``
    (:func:`topk_tree`) | ``delayed:d,K[:swor]`` (:func:`delayed_expansion`); case and
    surrounding spaces are ignored.

    Parameters: ``spec`` (a string).

    Returns: the :class:`DraftProcess`; ``ValueError`` quoting the grammar when ``spec`` does not
    parse, ``TypeError`` when it is not a string.

    >>> from specsim.drafts import parse_drafting
    >>> parse_drafting("iid:2").name, parse_drafting("fixed:2,1:swor").name, parse_drafting("binary:2").widths
    ('iid_paths(2)', 'swor[2, 1]', (2, 2))
    >>> parse_drafting("tree:2")
    Traceback (most recent call last):
    ...
    ValueError: cannot parse drafting spec 'tree:2'; expected chain | iid:K | swor:K | greedy:K | binary:D | fixed:w1,w2,...[:swor] | topk:w1,... | delayed:d,K[:swor]
    """
    grammar = ("chain | iid:K | swor:K | greedy:K | binary:D | fixed:w1,w2,...[:swor] | topk:w1,... | "
               "delayed:d,K[:swor]")
    if not isinstance(spec, str):
        raise TypeError(f"drafting spec must be a string ({grammar}), got {type(spec).__name__}")
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
