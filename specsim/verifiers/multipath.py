"""Greedy multi-path block verification, GBV (Thomas & Pal, arXiv 2602.16961; docs/theory.md §6.7).

GBV selects one of K i.i.d. draft paths by a token order and runs block verification on it with
skewed rows; :data:`gbv` is lossless, :data:`gbv_capped` (capped key, mismatched ties) is the
lossy negative control.  Besides the per-tree law: a law over trees of one shape, and the law of
the selected path as a draft model (:func:`gbv_path_model`, :func:`gbv_path_arrays`), which the
engine uses as a fast path.  The per-tree law's ``faults=`` switch (:data:`GBV_FAULTS`) exists
only for :mod:`specsim.testing.selftest.mutants`.
"""
from __future__ import annotations

import numpy as np

from ..drafts import DraftTree
from ..models import Model, validate_model_pair
from .._validate import check_int
from .base import Outcome, tree_verifier, validate_faults
from .chain import block

__all__ = ["gbv", "gbv_capped", "tree_paths", "gbv_path_model", "gbv_path_arrays"]

# --------------------------------------------------------------------------- GBV
def tree_paths(tree: DraftTree) -> list[tuple[int, ...]]:
    """The K ordered paths of a K-path trie, read off the draws: path i takes token
    draws[root][i], and a node's j-th draw continues the j-th path through it (docs/theory.md §6.7).

    Parameters: ``tree`` a :class:`~specsim.drafts.DraftTree` from ``iid_paths(K)``.

    Returns: a list of K tuples of node ids (root excluded); ``ValueError`` if the tree is not K
    full paths merged into a trie.

    >>> from specsim.drafts import iid_paths
    >>> from specsim.models import random_model
    >>> _, tree = next(iter(iid_paths(2).enumerate(random_model(3, 0), random_model(3, 1), 2)))
    >>> tree.draws[0], tree_paths(tree)      # both paths drafted token 0, then token 0
    ((0, 0), [(1, 2), (1, 2)])
    """
    K = len(tree.draws[0])
    L = tree.max_depth
    paths = []
    for i in range(K):
        node, idx, nodes = 0, i, []
        for _ in range(L):
            d = tree.draws[node]
            if idx >= len(d):
                raise ValueError("tree is not K full i.i.d. paths merged into a trie (draw counts)")
            t = d[idx]
            idx = d[:idx].count(t)
            node = next(c for c in tree.children[node] if tree.tokens[c] == t)
            nodes.append(node)
        if tree.children[node]:
            raise ValueError("tree is not K full i.i.d. paths merged into a trie (paths of unequal length)")
        paths.append(tuple(nodes))
    for u in range(1, tree.num_nodes):
        if tree.children[u] and len(tree.draws[u]) != tree.draws[tree.parent[u]].count(tree.tokens[u]):
            raise ValueError(f"tree is not K full paths merged into a trie: node {u} has "
                             f"{len(tree.draws[u])} draws but {tree.draws[tree.parent[u]].count(tree.tokens[u])} paths")
    return paths


def _gbv_key(p, q, capped):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # subnormal q: key inf
        s = np.where(q > 0, p / np.where(q > 0, q, 1.0), np.inf)
    return np.minimum(s, 1.0) if capped else s


def _power_gap(hi, gap, K):
    """hi^K - (hi - gap)^K in the stable form hi^K (-expm1(K log1p(-gap/hi)))."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(hi > 0, hi ** K * -np.expm1(K * np.log1p(-np.minimum(gap / np.where(hi > 0, hi, 1.0), 1.0))),
                        0.0)


def _gbv_step(p, q, t, A, Qv, K, capped=False, mismatch=False):
    """Skewed rows qt(.|v) [N, V] at nodes v of N selected paths (rows p, q [N, V], next tokens
    t [N], A [N], Q(v) [N]) and (A, Q) of the children v.t (docs/theory.md §6.7)."""
    N, V = p.shape
    ar = np.arange(N)
    ids = np.broadcast_to(np.arange(V), (N, V))
    key = _gbv_key(p, q, capped)
    order = np.lexsort((ids, key) if mismatch else (-ids, key), axis=-1)
    qs = np.take_along_axis(q, order, axis=1)
    Fc = np.cumsum(qs, axis=1)
    row = np.empty((N, V))
    np.put_along_axis(row, order, _power_gap(A[:, None] + Qv[:, None] * Fc, Qv[:, None] * qs, K), axis=1)
    with np.errstate(invalid="ignore"):  # Q(v) = 0: a path of draft probability 0, dropped by callers
        row /= _power_gap(A + Qv, Qv, K)[:, None]
    pos = np.argmax(order == np.asarray(t)[:, None], axis=1)
    return row, A + Qv * (Fc[ar, pos] - qs[ar, pos]), Qv * q[ar, t]


def gbv_path_model(draft_model: Model, K: int, capped: bool = False, target: Model | None = None) -> Model:
    """The law of the path GBV selects from K i.i.d. draft paths, as a draft model (docs/theory.md §6.7).

    qt(t|v) = [(A_v + Q(v) F_v(t))^K - (A_v + Q(v) F_v(t-))^K] / [(A_v + Q(v))^K - A_v^K] along the
    prefix v.  GBV on ``iid_paths(K)`` is block verification on a single path drawn from this model,
    so ``check_lossless(block, target, gbv_path_model(draft_model, K, target=target), L)`` gives
    GBV's exact law through the vectorised chain engine (tests compare it with the tree enumeration).

    Parameters: ``draft_model``; ``K`` >= 1 paths;
    ``capped`` (key min(1, p/q)); ``target`` (required: the token order uses p/q).

    Returns: a :class:`~specsim.models.Model` over the same vocabulary (K = 1 gives the draft rows).

    >>> from specsim.models import random_model
    >>> target, draft_model = random_model(3, 0), random_model(3, 1)
    >>> gbv_path_model(draft_model, 2, target=target)(()).round(6).tolist()
    [0.277891, 0.089216, 0.632893]
    """
    if target is None:
        raise ValueError("gbv_path_model needs the target model (the selection order uses p/q)")
    validate_model_pair(target, draft_model, 1)  # no draft length here: only the models are checked
    check_int(K, "K", 1)

    def row(prefix):
        A, Qv = np.zeros(1), np.ones(1)
        for i, t in enumerate(prefix):
            _, A, Qv = _gbv_step(target(prefix[:i])[None], draft_model(prefix[:i])[None], [t], A, Qv, K, capped)
            if Qv[0] <= 0:  # unreachable prefix (a token of draft probability 0): any valid row
                return draft_model(prefix)
        return _gbv_step(target(prefix)[None], draft_model(prefix)[None], [0], A, Qv, K, capped)[0][0]

    return Model(row, draft_model.V, f"gbv_path({draft_model.name}, K={K})")


#: The faults the GBV law can be built with (mutants only).
GBV_FAULTS = {"select_by_q": "the path selected by draft probability while the skewed law assumes the key order"}


def _gbv_law(tree, *, capped=False, mismatch=False, faults=()):
    """Greedy multi-path block verification (Thomas & Pal, arXiv 2602.16961; docs/theory.md §6.7).

    From K i.i.d. paths merged into a trie, select x* = the lexicographic maximum under the token
    order of key s_v(t) = p(t|v)/q(t|v) (ties: lower token id ranks higher) by walking to the
    highest-ranked child L times.  Along x*, with Q(v) = prod q on v's path, F_v(t) = q-mass of
    tokens ranked at or below t, A_root = 0, A_{v.t} = A_v + Q(v) F_v(t-):
        qt(t|v) = [(A_v + Q(v) F_v(t))^K - (A_v + Q(v) F_v(t-))^K] / [(A_v + Q(v))^K - A_v^K]
    (the law of the selected path), then block verification on x* with qt in place of q.
    Stable form (A+Q)^K (-expm1(K log1p(-Q/(A+Q)))) in float64.  ``capped`` uses the key
    min(1, p/q) (ties galore); ``mismatch`` orders ties the other way in qt than in selection —
    the hazard of docs/theory.md §6.7 (lossy); ``faults`` (:data:`GBV_FAULTS`) builds mutants.
    Needs K i.i.d. full paths (``iid_paths``).

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.multidraft import multidraft_acceptance
    >>> round(multidraft_acceptance("gbv", [1/3, 2/3], [2/3, 1/3], 2), 6)   # 8/9, the optimum of §6.6
    0.888889
    """
    select_by_q = "select_by_q" in validate_faults(faults, GBV_FAULTS, "gbv")
    tree_paths(tree)  # validates the K-path structure
    K = len(tree.draws[0])
    V = tree.V
    node, path = 0, [0]
    while tree.children[node]:
        s = tree.q[node] if select_by_q else _gbv_key(tree.p[node], tree.q[node], capped)
        node = max(tree.children[node], key=lambda c: (s[tree.tokens[c]], -tree.tokens[c]))
        path.append(node)
    L = len(path) - 1
    qt = np.empty((L, V))
    A, Qv = np.zeros(1), np.ones(1)
    for i in range(L):
        v, t = path[i], tree.tokens[path[i + 1]]
        row, A, Qv = _gbv_step(tree.p[v][None], tree.q[v][None], [t], A, Qv, K, capped, mismatch)
        qt[i] = row[0]
    draft = tuple(tree.tokens[c] for c in path[1:])
    P = np.stack([tree.p[c] for c in path])
    return [Outcome(o.prob, path[o.accepted], o.next_dist) for o in block.law(draft, P, qt)]


def _gbv_plain(tree):
    return _gbv_law(tree)


def _gbv_capped(tree):
    """GBV with the capped key min(1, p/q) and ties ordered differently in selection and in the
    skewed law (the reference-code hazard of docs/theory.md §6.7): LOSSY negative control
    whenever two drafted tokens tie at key 1.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers import gbv_capped
    >>> check_lossless(gbv_capped, random_model(3, 0), random_model(3, 1), 2, iid_paths(2)).lossless
    False
    """
    return _gbv_law(tree, capped=True, mismatch=True)


def _gbv_batch_law(tree, tokens, p, q, *, capped=False, mismatch=False):
    """GBV over N trees of one shape: each tree's selected path walked with arrays (the path
    depends on the rows, the shape fixes the candidates), then block verification's batched law
    on the N selected paths with the skewed rows."""
    tree_paths(tree)  # the K-path structure is a property of the shape
    N, n, V = p.shape
    ar = np.arange(N)
    K = len(tree.draws[0])
    width = max(len(k) for k in tree.children)
    kids = np.full((n, width), -1)
    for u, ks in enumerate(tree.children):
        kids[u, :len(ks)] = ks
    L = tree.max_depth
    path = np.zeros((N, L + 1), dtype=np.int64)
    qt = np.empty((N, L, V))
    A, Qv = np.zeros(N), np.ones(N)
    for i in range(L):
        v = path[:, i]
        cand = kids[v]                                          # [N, width], -1 = no child
        tok = np.where(cand >= 0, tokens[ar[:, None], np.maximum(cand, 0)], V)
        key = np.take_along_axis(np.pad(_gbv_key(p[ar, v], q[ar, v], capped), ((0, 0), (0, 1)),
                                        constant_values=-np.inf), tok, axis=1)
        first = np.lexsort((tok, -key), axis=-1)[:, 0]          # highest key, then lowest token
        path[:, i + 1] = cand[ar, first]
        qt[:, i], A, Qv = _gbv_step(p[ar, v], q[ar, v], tok[ar, first], A, Qv, K, capped, mismatch)
    drafts = tokens[ar[:, None], path[:, 1:]]
    probs_k, dists_k = block.batch_law(drafts, p[ar[:, None], path], qt)
    probs, dists = np.zeros((N, n)), np.zeros((N, n, V))
    probs[ar[:, None], path] = probs_k
    dists[ar[:, None], path] = dists_k
    return probs, dists


def _gbv_capped_batch(tree, tokens, p, q):
    return _gbv_batch_law(tree, tokens, p, q, capped=True, mismatch=True)


def _k_paths(drafting) -> int | None:
    """K when ``drafting`` is K i.i.d. full paths merged into a trie (the chain is K = 1), else None."""
    from ..drafts import Chain, TreeProcess

    if isinstance(drafting, Chain):
        return 1
    if isinstance(drafting, TreeProcess) and drafting.mode == "iid" and all(k == 1 for k in drafting.widths[1:]):
        return drafting.widths[0]
    return None


def gbv_path_arrays(target: Model, draft_model: Model, L: int, K: int, capped: bool = False,
                    mismatch: bool = False):
    """Every path GBV can select from K i.i.d. draft paths, with its probability and the rows block
    verification uses on it (docs/theory.md §6.7), for all V^L paths at once.

    Q(x) = prod_i qt(x_i | x^{1:i}) with the skewed rows of the selection order (key p/q, or
    min(1, p/q) if ``capped``; ties to the lower id); the verification rows are the same qt, or,
    with ``mismatch``, the rows computed with ties ordered the other way (``gbv_capped``'s hazard).
    GBV's law on ``iid_paths(K)`` is block verification's on these weighted paths.

    Parameters: ``target``, ``draft_model`` (models over the same V), ``L`` >= 1, ``K`` >= 1,
    ``capped``, ``mismatch``.

    Returns: ``(drafts int [N, L], Q [N], p [N, L+1, V], qt [N, L, V])`` over the N paths with
    Q > 0 (the arrays of :meth:`specsim.drafts.Chain.arrays`).

    >>> from specsim.models import random_model
    >>> drafts, Q, p, qt = gbv_path_arrays(random_model(3, 0), random_model(3, 1), 2, K=2)
    >>> drafts.shape, round(float(Q.sum()), 12), qt.shape
    ((9, 2), 1.0, (9, 2, 3))
    """
    L = validate_model_pair(target, draft_model, L)
    check_int(K, "K", 1)
    V = target.V
    ptab, qtab = target.table(L), draft_model.table(L - 1)
    codes = np.arange(V ** L)
    digits = np.stack([(codes // V ** (L - 1 - i)) % V for i in range(L)], axis=1)
    prefix = [codes // V ** (L - i) for i in range(L + 1)]
    Q = np.ones(codes.size)
    qt = np.empty((codes.size, L, V))
    A, Qv = np.zeros(codes.size), np.ones(codes.size)
    A_ver = A
    for i in range(L):
        P_i, Q_i, t = ptab[i][prefix[i]], qtab[i][prefix[i]], digits[:, i]
        sel, A_next, Qv_next = _gbv_step(P_i, Q_i, t, A, Qv, K, capped)
        with np.errstate(invalid="ignore"):
            Q = Q * sel[np.arange(codes.size), t]
        if mismatch:
            qt[:, i], A_ver, _ = _gbv_step(P_i, Q_i, t, A_ver, Qv, K, capped, True)
        else:
            qt[:, i] = sel
        A, Qv = A_next, Qv_next
    keep = Q > 0
    prows = np.stack([ptab[i][prefix[i][keep]] for i in range(L + 1)], axis=1)
    return digits[keep], Q[keep], prows, qt[keep]


def _gbv_path_model(target, draft_model, L, drafting, *, capped=False, mismatch=False):
    K = _k_paths(drafting)
    if K is None:
        return None
    return block, gbv_path_arrays(target, draft_model, L, K, capped, mismatch)


def _gbv_capped_path_model(target, draft_model, L, drafting):
    return _gbv_path_model(target, draft_model, L, drafting, capped=True, mismatch=True)


gbv = tree_verifier("gbv", needs={"paths"}, doc=_gbv_law.__doc__, batch_law=_gbv_batch_law,
                   path_model=_gbv_path_model)(_gbv_plain)
gbv_capped = tree_verifier("gbv_capped", needs={"paths"}, lossless=False, batch_law=_gbv_capped_batch,
                          path_model=_gbv_capped_path_model)(_gbv_capped)
