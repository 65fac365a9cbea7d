"""Node-wise tree verifiers: SpecInfer, Sequoia and deterministic children (docs/theory.md §3.2, 6.1-6.2).

Every verifier here is a :class:`~specsim.verifiers.base.Verifier` of kind ``"tree"``:
``verifier(tree) -> list[Outcome]`` with ``accepted`` a node id (0 = root).  A *node-wise*
verifier runs, at each reached node, a token-level multi-draft rule over the node's draws
(``tree.draws[node]``, in drafting order, repeats kept) against the node's target row; on
acceptance it descends into the accepted child's whole subtree, on rejection it emits a residual
and stops, and at a leaf it emits the bonus from the leaf's own row.  :func:`_nodewise` turns a
node rule into the exact law; the rules differ only in what they do at one node, and the other
node-wise families (:mod:`.kseq`, :mod:`.two_step`, :mod:`.greedy_draft`) reuse it.

This module holds that engine with its scalar and batched acceptance helpers, and the
recursive-rejection-sampling family: SpecInfer (i.i.d. draws), SpecInfer along the first path,
Sequoia (draws without replacement) and deterministic children (EAGLE's rule), with their
samplers.  The rules and the engine take one ``faults=`` switch (:data:`NODEWISE_FAULTS`), which
exists only for the known-broken verifiers of :mod:`specsim.testing.selftest.mutants`.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Callable

import numpy as np

from .._sampling import draw_token
from .._validate import normalize
from ..drafts import DraftTree
from .base import Outcome, tree_verifier, validate_faults

__all__ = ["specinfer", "specinfer_first_path", "sequoia", "deterministic_children"]

# A node rule: (tree, node) -> ({child token: probability of descending}, stop probability, stop row)
NodeRule = Callable[[DraftTree, int], tuple[dict, float, np.ndarray]]


#: The faults the node-wise engine and its rules can be built with (mutants only).
NODEWISE_FAULTS = {
    "stale_residual": "RRS without the residual update between siblings: every sibling tested against p",
    "unmasked_rejected": "SWOR-RRS that keeps a rejected sibling in the draft row",
    "unmasked_children": "deterministic children: the rejection row is p with the children not zeroed",
    "bonus_from_parent": "the bonus at a fully accepted leaf drawn from the parent's row",
}


# --------------------------------------------------------------------------- node-wise engine
def _nodewise(tree: DraftTree, rule: NodeRule, faults=()) -> list[Outcome]:
    """Exact law of a node-wise scheme: reach(child) = reach(node) * rule's descend probability."""
    bonus_from_parent = "bonus_from_parent" in validate_faults(faults, NODEWISE_FAULTS, "node-wise engine")
    out: list[Outcome] = []
    stack = [(0, 1.0)]
    while stack:
        u, reach = stack.pop()
        kids = tree.children[u]
        if not kids:
            row = tree.p[tree.parent[u]] if bonus_from_parent and u > 0 else tree.p[u]
            out.append(Outcome(reach, u, row))
            continue
        by_token = {tree.tokens[c]: c for c in kids}
        descend, stop, row = rule(tree, u)
        if stop > 0:
            out.append(Outcome(reach * stop, u, row))
        for t, pr in descend.items():
            if pr > 0:
                stack.append((by_token[t], reach * pr))
    return out


def _distinct(tree: DraftTree, u: int, who: str) -> tuple[int, ...]:
    d = tree.draws[u]
    if len(set(d)) != len(d):
        raise ValueError(f"{who} needs distinct children (drafted without replacement); node {u} "
                         f"has repeated draws {d}")
    return d


def _accept_prob(r: float, q: float) -> float:
    # P(U q < r) for U ~ U[0,1): min(1, r/q); q = 0 (contract violation) accepts iff r > 0
    if q <= 0:
        return 1.0 if r > 0 else 0.0
    return 1.0 if r >= q else r / q  # r / q itself overflows when q is subnormal


def _rrs(p, q, draws, *, without_replacement=False, faults=()):
    """Recursive rejection sampling over ``draws`` (with or without replacement)."""
    faults = validate_faults(faults, NODEWISE_FAULTS, "RRS")
    update_residual, mask_rejected = "stale_residual" not in faults, "unmasked_rejected" not in faults
    R, D = p, q.copy()
    descend: dict[int, float] = defaultdict(float)
    reach = 1.0
    for x in draws:
        a = _accept_prob(R[x], D[x])
        descend[x] += reach * a
        reach *= 1.0 - a
        if reach <= 0.0:
            break
        if update_residual:
            R = normalize(np.maximum(R - D, 0.0), R)
        if without_replacement and mask_rejected:
            D[x] = 0.0
            s = D.sum()
            if s <= 0.0:  # every supported token drafted and rejected: stop the loop, emit R
                break
            D = D / s
    return descend, reach, R


# --------------------------------------------------------------------------- SpecInfer
def _specinfer_rule(tree, u, **kw):
    return _rrs(tree.p[u], tree.q[u], tree.draws[u], **kw)


def _specinfer_law(tree):
    """SpecInfer recursive rejection sampling (Miao et al., "SpecInfer", arXiv 2305.09781), node-wise.

    At node u with draws x_1..x_k (i.i.d. from q = q(.|u), in drafting order, repeats kept):
    R_0 = p(.|u); draw j is accepted with min(1, R_{j-1}(x_j) / q(x_j)), else
    R_j = norm((R_{j-1} - q)_+); after acceptance verification continues in the accepted child's
    whole subtree; after k rejections emit Y ~ R_k; a leaf emits its bonus p(.|leaf).
    Needs i.i.d. children (``iid_paths``, ``fixed_shape(..., replacement=True)``).

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers import specinfer
    >>> check_lossless(specinfer, random_model(3, 0), random_model(3, 1), 2, iid_paths(2)).lossless
    True
    >>> from specsim.multidraft import multidraft_acceptance
    >>> round(multidraft_acceptance("specinfer", [1/3, 2/3], [2/3, 1/3], 2), 6)   # K = 2 drafts
    0.777778
    """
    return _nodewise(tree, _specinfer_rule)


def _first_path_rule(tree, u):
    draws = tree.draws[u] if tree.depth[u] == 0 else tree.draws[u][:1]
    return _rrs(tree.p[u], tree.q[u], draws)


def _specinfer_first_path_law(tree):
    """SpecInfer RRS at the root, then token-level verification along the first-drafted path.

    Precisely: at the root, RRS over all draws as in :data:`specinfer`; at every deeper node only
    the first draw ``draws[node][0]`` is tested (min(1, p/q), residual norm((p - q)_+)), i.e.
    once a root child is accepted verification follows one path and ignores siblings.  For K
    i.i.d. paths this is "continue along the accepted path": the accepted draw is the first path
    with that token (an earlier equal token was rejected and has R = 0), and that path's next
    token is the first draw at the child.  Lossless whenever root draws are i.i.d. and every
    first draw is distributed as q; never better than :data:`specinfer` on the same tree law.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.multidraft import multidraft_acceptance
    >>> round(multidraft_acceptance("specinfer_first_path", [1/3, 2/3], [2/3, 1/3], 2), 6)   # K = 2 drafts
    0.777778
    """
    return _nodewise(tree, _first_path_rule)


# --------------------------------------------------------------------------- Sequoia (SWOR)
def _sequoia_rule(tree, u, **kw):
    return _rrs(tree.p[u], tree.q[u], _distinct(tree, u, "sequoia"), without_replacement=True, **kw)


def _sequoia_law(tree):
    """Sequoia's without-replacement recursive rejection sampling (Chen et al., arXiv 2402.12374;
    Jeon et al., arXiv 2402.14160), node-wise.

    At node u with distinct children x_1..x_k drawn by successive sampling from q(.|u):
    R = p(.|u), D = q(.|u); child j is accepted with min(1, R(x_j)/D(x_j)); on rejection
    R <- norm((R - D)_+), D(x_j) <- 0, D <- norm(D).  If D has no mass left (every supported
    token drafted and rejected) the loop stops and Y ~ R (Sequoia's code instead continues with a
    uniform D over untried tokens; our processes never draft beyond supp q, so the choice only
    decides what happens after the last child).  ``ValueError`` on repeated draws.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.multidraft import multidraft_acceptance
    >>> round(multidraft_acceptance("sequoia", [1/3, 2/3], [2/3, 1/3], 2, replacement=False), 6)
    1.0
    """
    return _nodewise(tree, _sequoia_rule)


# --------------------------------------------------------------------------- deterministic children
def _deterministic_rule(tree, u, *, faults=()):
    mask_children = "unmasked_children" not in validate_faults(faults, NODEWISE_FAULTS, "deterministic children")
    p = tree.p[u]
    kids = tuple(dict.fromkeys(tree.draws[u]))
    descend = {x: float(p[x]) for x in kids}
    stop = max(0.0, 1.0 - sum(descend.values()))
    r = p.copy()
    if mask_children:
        r[list(kids)] = 0.0
    return descend, stop, normalize(r, p)


def _deterministic_law(tree):
    """Deterministic-children verification (EAGLE's evaluate_posterior; docs/theory.md §3.2), node-wise.

    At node u with distinct children c_1..c_k: one coin U, accept c_j for the first j with
    U < sum_{m<=j} p(c_m|u) and descend; otherwise Y ~ p(.|u) with every c_m zeroed,
    renormalised.  The test ignores q, so it is lossless for any drafter (top-k trees, n-grams);
    for a stochastic drafter it gives up acceptance.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import expected_accepted, random_model
    >>> from specsim.drafts import topk_tree
    >>> from specsim.verifiers import deterministic_children
    >>> target, draft_model = random_model(3, 0), random_model(3, 1)
    >>> round(expected_accepted(deterministic_children, target, draft_model, 2, topk_tree((2, 2))), 6)
    0.569416
    """
    return _nodewise(tree, _deterministic_rule)


def _accept_probs(r, q):
    """Vectorised :func:`_accept_prob`: P(U q < r) = min(1, r/q); q = 0 accepts iff r > 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q > 0, np.minimum(1.0, r / np.where(q > 0, q, 1.0)), (r > 0).astype(float))


def _normalize_rows(v, fallback):
    """Row-wise :func:`specsim._validate.normalize`: v / sum(v), ``fallback`` where sum(v) <= 0."""
    s = v.sum(axis=-1, keepdims=True)
    return np.where(s > 0, v / np.where(s > 0, s, 1.0), fallback)


def _first_path_batch(tree, tokens, p, q):
    """:data:`specinfer_first_path` over N trees of one shape: RRS over every root draw, then over
    the first draw at deeper nodes, each node's reach carried down (same rule as the per-tree law)."""
    N, n, V = p.shape
    ar = np.arange(N)
    draw_nodes = tree.shape[1]
    reach = np.zeros((N, n))
    reach[:, 0] = 1.0
    probs, dists = np.zeros((N, n)), p.copy()  # a leaf emits its own row
    for u in range(n):  # parents precede children
        if not tree.children[u]:
            probs[:, u] = reach[:, u]
            continue
        R, D = p[:, u], q[:, u]
        left = np.ones(N)
        for c in (draw_nodes[u] if u == 0 else draw_nodes[u][:1]):
            x = tokens[:, c]
            a = _accept_probs(R[ar, x], D[ar, x])
            reach[:, c] += reach[:, u] * left * a
            left = left * (1.0 - a)
            R = _normalize_rows(np.maximum(R - D, 0.0), R)
        probs[:, u] = reach[:, u] * left
        dists[:, u] = R
    return probs, dists


# --------------------------------------------------------------------------- samplers
def _rrs_sample(tree, rng, without_replacement):
    u = 0
    while True:
        if not tree.children[u]:
            return u, draw_token(tree.p[u], rng)
        R, D = tree.p[u], tree.q[u].copy()
        by_token = {tree.tokens[c]: c for c in tree.children[u]}
        draws = _distinct(tree, u, "sequoia") if without_replacement else tree.draws[u]
        for x in draws:
            if rng.random() * D[x] < R[x]:
                u = by_token[x]
                break
            R = normalize(np.maximum(R - D, 0.0), R)
            if without_replacement:
                D[x] = 0.0
                if D.sum() <= 0:
                    return u, draw_token(R, rng)
                D = D / D.sum()
        else:
            return u, draw_token(R, rng)


def _deterministic_sample(tree, rng):
    u = 0
    while tree.children[u]:
        p = tree.p[u]
        kids = tuple(dict.fromkeys(tree.draws[u]))
        coin, cum = rng.random(), 0.0
        nxt = None
        for x in kids:
            cum += p[x]
            if coin < cum:
                nxt = next(c for c in tree.children[u] if tree.tokens[c] == x)
                break
        if nxt is None:
            r = p.copy()
            r[list(kids)] = 0.0
            return u, draw_token(normalize(r, p), rng)
        u = nxt
    return u, draw_token(tree.p[u], rng)


def _specinfer_sample(tree, rng):
    return _rrs_sample(tree, rng, without_replacement=False)


def _sequoia_sample(tree, rng):
    return _rrs_sample(tree, rng, without_replacement=True)


# --------------------------------------------------------------------------- verifiers
specinfer = tree_verifier("specinfer", needs={"iid"}, sampler=_specinfer_sample,
                          node_rule=_specinfer_rule)(_specinfer_law)
specinfer_first_path = tree_verifier("specinfer_first_path", needs={"iid"}, node_rule=_first_path_rule,
                                     batch_law=_first_path_batch)(_specinfer_first_path_law)
sequoia = tree_verifier("sequoia", needs={"swor"}, sampler=_sequoia_sample,
                        node_rule=_sequoia_rule)(_sequoia_law)
deterministic_children = tree_verifier("deterministic_children", needs={"any"}, sampler=_deterministic_sample,
                                       node_rule=_deterministic_rule)(_deterministic_law)
