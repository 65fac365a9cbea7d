"""Traversal verification (Weng et al., arXiv 2505.12398; docs/theory.md §6.3-6.3.1) and its variants.

Three tree verifiers: :data:`traversal` (the merged trie, for children drawn without
replacement or i.i.d. with repeats merged), :data:`traversal_repeats` and
:data:`traversal_paths` (i.i.d. draws with the repeats kept).  Besides the per-tree law each has
a law summed over node states (``process_law``, the fast path of the engine) and ``traversal``
a law over trees of one shape (``batch_law``).  The private keyword switches of
:func:`_traversal_law` exist for :mod:`specsim.testing.selftest.mutants`.
"""
from __future__ import annotations

import functools

import numpy as np

from .._validate import normalize
from ..models import Model
from .base import Outcome, meets_needs, tree_verifier, validate_faults
from .nodewise import _normalize_rows

__all__ = ["traversal", "traversal_repeats", "traversal_paths", "TRAVERSAL_VARIANTS"]

# --------------------------------------------------------------------------- traversal
#: The traversal variants (docs/theory.md §6.3-6.3.1): what a node's draws are and how its draft row Ms is
#: updated.  "merged": the trie, children in order of first appearance, Ms masked on rejection (SWOR-RRS
#: at depth 1); "repeats": the trie, every draw in order an attempt (a repeat tries its child again as a
#: bare leaf), Ms = q(.|node) throughout (RRS); "paths": every draw its own subtree, Ms = q(.|node).
TRAVERSAL_VARIANTS = ("merged", "repeats", "paths")


#: The faults the traversal law can be built with (mutants only).
TRAVERSAL_FAULTS = {
    "mass_update": "parent weight w_b <- S (the residual mass) instead of S / (S + 1 - w_b)",
    "stale_weights": "the weights below a parent are not recomputed after a rejection",
    "masked_rows": "the rejected token is masked from the draft row although the next draw is from q again",
    "skipped_repeats": "on the i.i.d. trie, repeated draws are skipped (no attempt, no row update)",
}


def _traversal_law(tree, *, variant="merged", faults=()):
    """Traversal verification (Weng et al., arXiv 2505.12398), docs/theory.md §6.3 reconstruction.

    Node u carries Mb_u = p(.|u), Ms_u = q(.|u) and a weight w (w_root = 1); a child c is entered
    with w_c = min(1, w_u Mb_u(x_c)/Ms_u(x_c)) from its parent's current state.  Leaves are tried
    first (post-order, children in order of first appearance in the draws): a tried node is
    accepted with probability w (emit path(node), Y ~ Mb); else at its parent b,
    R = (w_b Mb_b - Ms_b)_+, S = sum R, Mb_b = R/S, Ms_b(x) <- 0 renormalised, and
    w_b = S/(S + 1 - w_b) (1 if the denominator is 0); the root is tried last and emits
    Y ~ Mb_root.  On a chain this is block verification; at depth 1 it is Sequoia's SWOR-RRS.
    Lossless when each node's children are drawn without replacement, or i.i.d. with repeats
    merged into one child (docs/theory.md §6.3.1: a subtree entered with weight w accepts with
    probability w on average).  :data:`traversal_repeats` and :data:`traversal_paths` are the
    variants for i.i.d. draws that keep the repeats.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import parse_drafting
    >>> from specsim.verifiers import traversal
    >>> cert = check_lossless(traversal, random_model(3, 0), random_model(3, 1), 2, parse_drafting("binary:2"))
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 1.157828)
    """
    if variant not in TRAVERSAL_VARIANTS:
        raise ValueError(f"variant must be one of {TRAVERSAL_VARIANTS}, got {variant!r}")
    faults = validate_faults(faults, TRAVERSAL_FAULTS, "traversal")  # TRAVERSAL_FAULTS: mutants only
    parent_update = "mass" if "mass_update" in faults else "odds"
    recompute, skip_repeats = "stale_weights" not in faults, "skipped_repeats" in faults
    mask = variant == "merged" or "masked_rows" in faults
    n, draws = tree.num_nodes, tree.draws
    child = [{tree.tokens[c]: c for c in kids} for kids in tree.children]
    width = [len(draws[u]) for u in range(n)]  # draws per copy of a node ("paths")
    for u in range(1, n):
        m = draws[tree.parent[u]].count(tree.tokens[u])
        if variant == "paths" and width[u] % m:
            raise ValueError(f"traversal_paths: node {u} is reached by {m} draws but has {width[u]} draws, "
                             f"which do not split evenly among them")
        width[u] //= m if variant == "paths" else 1
    stale = np.ones(n)  # the weights before any rejection (recompute=False)
    for c in range(1, n):
        b, x = tree.parent[c], tree.tokens[c]
        stale[c] = _traversal_child_weight(stale[b:b + 1], tree.p[b, x:x + 1], tree.q[b, x:x + 1])[0]
    out: list[Outcome] = []
    reach = [1.0]

    def visit(u, w, lo, hi):
        """Try the subtree of node u (its draws lo..hi-1), entered with weight w."""
        wb, Mb, Ms = np.array([w]), tree.p[u][None], tree.q[u][None]
        for i in range(lo, hi):
            if reach[0] <= 0:
                return
            x = draws[u][i]
            c = child[u][x]
            repeat = x in draws[u][lo:i]
            if repeat and (variant == "merged" or skip_repeats):
                continue  # merged: one child per token; skip_repeats: the lossy mutant
            wc = float(_traversal_child_weight(wb, Mb[:, x], Ms[:, x])[0]) if recompute else stale[c]
            if variant == "paths":
                j = draws[u][:i].count(x)  # copy j of c owns draws j*width .. (j+1)*width - 1 of c
                visit(c, wc, j * width[c], (j + 1) * width[c])
            elif not repeat:
                visit(c, wc, 0, len(draws[c]))
            else:  # "repeats": the child again, as a bare leaf (its subtree was rejected)
                out.append(Outcome(reach[0] * wc, c, tree.p[c]))
                reach[0] *= 1.0 - wc
            wb, Mb, Ms = _traversal_reject(wb, Mb, Ms, np.array([x]), u == 0, mask=mask, parent_update=parent_update)
        if reach[0] <= 0:
            return
        out.append(Outcome(reach[0] * float(wb[0]), u, normalize(Mb[0], tree.p[u])))
        reach[0] *= 1.0 - float(wb[0])

    visit(0, 1.0, 0, len(draws[0]))
    return [o for o in out if o.prob > 0]


def _traversal_repeats_law(tree):
    """Traversal verification on i.i.d. draws with the repeats kept (docs/theory.md §6.3.1).

    The reconstruction of :data:`traversal` on the merged trie, with two changes that make every
    draw an attempt: a node's draft row stays Ms = q(.|node) (no masking: every draw is
    distributed as q whatever was rejected before it), and the draws are taken in drafting
    order; a repeat of a token whose child subtree was rejected tries that child again as a bare
    leaf (accepted with its entry weight, emitting p(.|child)), and every draw, repeats
    included, updates the node's state R = (w Mb - q)_+, Mb = R/S, w = S/sum (q - w Mb)_+.  At
    depth 1 this is SpecInfer's recursive rejection sampling; on a chain it is block
    verification.  Lossless on every process whose nodes draw i.i.d. from q(.|node).

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers import traversal_repeats
    >>> cert = check_lossless(traversal_repeats, random_model(3, 0), random_model(3, 1), 2, iid_paths(2))
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 0.593639)
    """
    return _traversal_law(tree, variant="repeats")


def _traversal_paths_law(tree):
    """Traversal verification on the tree of draws: every i.i.d. draw its own subtree
    (docs/theory.md §6.3.1).

    The merged trie is unfolded: copy j of a node reached by m draws owns its draws
    j w..(j+1) w - 1 (w = draws per copy), so ``iid_paths(K)`` becomes K separate paths sharing
    the root, and duplicate siblings are tried as separate attempts, each with its own
    subtree.  Traversal runs on that tree with Ms = q(.|node) at every node (the next sibling
    is distributed as q whatever was rejected before it); outcomes name the trie node of the
    accepted prefix.  At depth 1 it is SpecInfer's recursive rejection sampling.  Lossless on
    every process whose nodes draw i.i.d. from q(.|node).

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers import traversal_paths
    >>> cert = check_lossless(traversal_paths, random_model(3, 0), random_model(3, 1), 2, iid_paths(2))
    >>> cert.lossless, round(cert.expected_accepted, 6)
    (True, 0.591378)
    """
    return _traversal_law(tree, variant="paths")


def _traversal_child_weight(wb, mb, ms):
    """w_c = min(1, w_b Mb_b(x_c) / Ms_b(x_c)) for arrays [N] (docs/theory.md §6.3); 1 when
    Ms_b(x_c) = 0 < w_b Mb_b(x_c), 0 when w_b Mb_b(x_c) = 0 (as the per-tree law)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # subnormal Ms: ratio inf, min 1
        ratio = np.minimum(1.0, wb * mb / np.where(ms > 0, ms, 1.0))
    return np.where((wb > 0) & (mb > 0) & (ms > 0), ratio, np.where((wb > 0) & (mb > 0), 1.0, 0.0))


def _traversal_reject(wb, Mb, Ms, x, root, mask=True, parent_update="odds"):
    """Node b's state after its child of token x is rejected, for rows [N, V] (docs/theory.md §6.3):
    R = (w_b Mb_b - Ms_b)_+, Mb_b <- R / S (kept when S = 0), Ms_b(x) <- 0 renormalised (``mask``;
    i.i.d. draws keep Ms_b = q, §6.3.1), and w_b <- S / sum (Ms_b - w_b Mb_b)_+ (1 when that
    deficit is 0); the root keeps w = 1.  ``parent_update="mass"`` (w_b <- S) is the ``mass_update`` fault.

    Returns: ``(w_b, Mb_b, Ms_b)``, new arrays."""
    ar = np.arange(len(x))
    R = np.maximum(wb[:, None] * Mb - Ms, 0.0)
    S = R.sum(axis=1)
    # S + 1 - w_b = sum (Ms_b - w_b Mb_b)_+; the direct sum avoids cancellation when w_b ~ 1
    deficit = np.maximum(Ms - wb[:, None] * Mb, 0.0).sum(axis=1)
    Mb = np.where(S[:, None] > 0, R / np.where(S > 0, S, 1.0)[:, None], Mb)
    if mask:
        Ms = Ms.copy()
        Ms[ar, x] = 0.0
        Ms = _normalize_rows(Ms, Ms)
    if not root:
        if parent_update == "mass":
            wb = np.minimum(1.0, S)
        else:
            wb = np.where(deficit > 0, np.minimum(1.0, S / np.where(deficit > 0, deficit, 1.0)), 1.0)
    return wb, Mb, Ms


_TRAVERSAL_NEEDS = frozenset({"swor", "iid"})
_TRAVERSAL_IID_NEEDS = frozenset({"iid"})  # Ms = q(.|node) needs every draw distributed as q


def _traversal_process_law(drafting, target: Model, draft_model: Model, L: int, emitted, depth_mass, *,
                           variant: str = "merged") -> int | None:
    """Traversal verification's law summed over node states instead of whole trees
    (docs/theory.md §6.3.1), for processes whose nodes draw their children independently from
    q(.|node), without replacement or i.i.d. (``variant`` as in :data:`TRAVERSAL_VARIANTS`);
    ``None`` on other processes (the engine then groups trees by shape).

    A node is entered in the state (prefix, number of draws that reached it, entry weight w) with
    a weight W.  For each option of its draws (probability px), the draws are attempted in turn
    ("merged": the distinct children x_1..x_k in order of first appearance); attempt j enters its
    child with weight W px prod_{i<j} (1 - w_i) and entry weight w_j = min(1, w Mb(x_j)/Ms(x_j))
    from the node's state after the earlier attempts were rejected ("repeats": a repeated token
    is a bare leaf instead, emitting p(.|prefix x_j) with that weight times w_j; "paths": every
    draw enters its own copy, reached by one draw); the node itself then emits Mb with weight
    W px prod_i (1 - w_i) w', w' its final weight (1 at the root); a leaf at depth L emits
    p(.|prefix) with weight W w.  The factor 1 - w_i is the mean rejection probability of
    attempt i's whole subtree, whatever it holds (§6.3.1), and sibling subtrees are independent
    given the node's draws: the sum equals the per-tree law.
    """
    needs = _TRAVERSAL_NEEDS if variant == "merged" else _TRAVERSAL_IID_NEEDS
    if not (hasattr(drafting, "node_options") and meets_needs(drafting, needs)):
        return None
    V = target.V
    ptab, qtab = target.table(L), draft_model.table(L - 1)
    level: dict[tuple[int, int, float], float] = {(0, 1, 1.0): 1.0}
    evaluations = 0
    for d in range(L + 1):
        nxt: dict[tuple[int, int, float], float] = {}
        out = emitted[d + 1].reshape(-1, V)
        for (code, mult, w), weight in level.items():
            options = drafting.node_options(qtab[d][code], mult, d, L) if d < L else []
            if not options or not options[0][0]:
                out[code] += weight * w * ptab[d][code]
                depth_mass[d] += weight * w
                continue
            # attempts: "merged" the distinct tokens with their multiplicities (orders of the repeats summed),
            # else the draws themselves, in order; grouped by length for the arrays below
            groups: dict[int, dict[tuple, float]] = {}
            for xs, px in options:
                if variant == "merged":
                    kids = tuple(dict.fromkeys(xs))
                    key = (kids, tuple(xs.count(x) for x in kids))
                else:
                    key = (xs, tuple(xs.count(x) if variant == "repeats" else 1 for x in xs))
                by_len = groups.setdefault(len(key[0]), {})
                by_len[key] = by_len.get(key, 0.0) + px
            for k, merged in groups.items():
                evaluations += len(merged)
                X = np.array([key[0] for key in merged], dtype=np.int64)
                mults = [key[1] for key in merged]
                px = np.fromiter(merged.values(), float, len(merged))
                N = len(px)
                ar = np.arange(N)
                Mb, Ms = np.tile(ptab[d][code], (N, 1)), np.tile(qtab[d][code], (N, 1))
                wv, reach = np.full(N, w), weight * px
                bare = emitted[d + 2].reshape(-1, V)  # a repeat's bare leaf, at depth d + 1
                for j in range(k):
                    x = X[:, j]
                    wc = _traversal_child_weight(wv, Mb[ar, x], Ms[ar, x])
                    repeat = (X[:, :j] == x[:, None]).any(axis=1) if variant == "repeats" else np.zeros(N, bool)
                    for i in range(N):
                        if reach[i] > 0 and wc[i] > 0:
                            child = code * V + int(x[i])
                            if repeat[i]:  # the child again, as a bare leaf
                                bare[child] += reach[i] * wc[i] * ptab[d + 1][child]
                                depth_mass[d + 1] += reach[i] * wc[i]
                            else:
                                state = (child, mults[i][j], float(wc[i]))
                                nxt[state] = nxt.get(state, 0.0) + float(reach[i])
                    reach = reach * (1.0 - wc)
                    wv, Mb, Ms = _traversal_reject(wv, Mb, Ms, x, d == 0, mask=variant == "merged")
                stop = reach * wv
                out[code] += stop @ Mb
                depth_mass[d] += float(stop.sum())
        level = nxt
    return evaluations


def _traversal_batch(tree, tokens, p, q):
    """:data:`traversal` over N trees of one shape: the order in which leaves are tried and parents
    updated depends only on the shape, so the per-tree loop runs once on arrays [N, ...]."""
    N, n, V = p.shape
    ar = np.arange(N)
    draw_nodes = [tuple(dict.fromkeys(nodes)) for nodes in tree.shape[1]]  # first-appearance order
    Mb, Ms = p.copy(), q.copy()
    alive = [True] * n
    w = np.ones((N, n))
    below = [[c for c in range(b + 1, n) if _is_below(tree, c, b)] for b in range(n)]

    def reweight(c):
        b, x = tree.parent[c], tokens[:, c]
        w[:, c] = _traversal_child_weight(w[:, b], Mb[ar, b, x], Ms[ar, b, x])

    for c in range(1, n):
        reweight(c)
    probs, dists = np.zeros((N, n)), np.zeros((N, n, V))
    reach = np.ones(N)
    while True:
        a = 0
        while True:
            nxt = next((c for c in draw_nodes[a] if alive[c]), None)
            if nxt is None:
                break
            a = nxt
        if a == 0:
            probs[:, 0] = reach
            dists[:, 0] = _normalize_rows(Mb[:, 0], p[:, 0])
            return probs, dists
        probs[:, a] = reach * w[:, a]
        dists[:, a] = _normalize_rows(Mb[:, a], p[:, a])
        reach = reach * (1.0 - w[:, a])
        alive[a] = False
        b = tree.parent[a]
        w[:, b], Mb[:, b], Ms[:, b] = _traversal_reject(w[:, b], Mb[:, b], Ms[:, b], tokens[:, a], b == 0)
        for c in below[b]:
            if alive[c]:
                reweight(c)


def _is_below(tree, c, b):
    """Whether node c lies in the subtree of node b (c != b)."""
    while c > b:
        c = tree.parent[c]
    return c == b


traversal = tree_verifier("traversal", needs=_TRAVERSAL_NEEDS, batch_law=_traversal_batch,
                          process_law=_traversal_process_law)(_traversal_law)
traversal_repeats = tree_verifier("traversal_repeats", needs=_TRAVERSAL_IID_NEEDS, process_law=functools.partial(
    _traversal_process_law, variant="repeats"))(_traversal_repeats_law)
traversal_paths = tree_verifier("traversal_paths", needs=_TRAVERSAL_IID_NEEDS, process_law=functools.partial(
    _traversal_process_law, variant="paths"))(_traversal_paths_law)
