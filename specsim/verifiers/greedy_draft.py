"""Verification for Hu et al.'s greedy draft law (arXiv 2502.18779; SpecHub, arXiv 2411.05289).

One node-wise tree verifier, :data:`greedy_multidraft`, for ``specsim.drafts.greedy_drafts(K)``
(the engine is :func:`specsim.verifiers.nodewise._nodewise`).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from .._validate import normalize
from .base import tree_verifier
from .nodewise import _accept_prob, _nodewise

__all__ = ["greedy_multidraft"]

# --------------------------------------------------------------------------- greedy draft law (Hu et al.)
def _greedy_multidraft_rule(tree, u):
    p, q, draws = tree.p[u], tree.q[u], tree.draws[u]
    hub, x = draws[:-1], draws[-1]
    rest = q.copy()
    rest[list(hub)] = 0.0
    if rest.any():
        rest = normalize(rest, q)
        a = _accept_prob(p[x], rest[x])
    else:  # the hub ends in q = 0 tokens and holds all of q: no last draw (drafts._greedy_hub)
        hub, a = draws, 0.0
    R = normalize(np.maximum(p - rest, 0.0), p)
    descend: dict[int, float] = defaultdict(float)
    descend[x] += a
    for g in hub:
        descend[g] += (1.0 - a) * R[g]
    row = R.copy()
    row[list(hub)] = 0.0
    return descend, (1.0 - a) * max(0.0, 1.0 - float(R[list(hub)].sum())), normalize(row, p)


def _greedy_multidraft_law(tree):
    """Verification for Hu et al.'s greedy draft law ("Towards Optimal Multi-draft Speculative
    Decoding", arXiv 2502.18779; SpecHub, arXiv 2411.05289, at K = 2), node-wise.

    At a node whose draws are the K - 1 most likely tokens G of q followed by one token x drawn
    from q' = q restricted to V minus G: speculative sampling of x against p with q'
    (accept with min(1, p(x)/q'(x)), else Y ~ norm((p - q')_+)); a residual sample landing in G
    is a drafted child, so verification descends into it; otherwise Y is emitted.  Token law
    q' a + (1 - beta) residual = p, so lossless; acceptance
    p(G) + sum_{x not in G} min(p_x, q_x / (1 - q(G))), the optimum for this draft law.  Needs
    ``greedy_drafts(K)`` (a single draw per node is ordinary speculative sampling).  SpecHub's
    code also force-accepts when p(hub) > 1 - 1e-3 (biased); that shortcut is not reproduced.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim import expected_accepted, iid
    >>> from specsim.drafts import greedy_drafts
    >>> from specsim.verifiers import greedy_multidraft
    >>> round(expected_accepted(greedy_multidraft, iid([1/3, 2/3]), iid([2/3, 1/3]), 1, greedy_drafts(2)), 6)
    1.0
    """
    return _nodewise(tree, _greedy_multidraft_rule)


greedy_multidraft = tree_verifier("greedy_multidraft", needs={"greedy"},
                                  node_rule=_greedy_multidraft_rule)(_greedy_multidraft_law)
