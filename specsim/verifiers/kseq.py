"""SpecTr's k-sequential selection, K-SEQ (docs/theory.md §6.4): the rho* search and the verifier.

A node-wise tree verifier (the engine is :func:`specsim.verifiers.nodewise._nodewise`).
The private ``rho=`` switch of the node rule exists for :mod:`specsim.testing.selftest.mutants`.
"""
from __future__ import annotations

import functools
from collections import defaultdict

import numpy as np

from .._validate import as_pair, check_int, check_real, normalize
from .base import tree_verifier
from .nodewise import _accept_prob, _nodewise

__all__ = ["spectr", "kseq_rho"]

# --------------------------------------------------------------------------- SpecTr K-SEQ
def _kseq_parts(p, q, k, rho):
    m = np.minimum(q, p / rho)
    beta = float(m.sum())
    c = sum((1.0 - beta) ** j for j in range(k))  # geometric sum, not (1 - (1-beta)^k)/beta
    return m, beta, c, p - m * c


@functools.lru_cache(maxsize=65536)
def _kseq_rho_cached(pb: bytes, qb: bytes, k: int, tol: float) -> float:
    p, q = np.frombuffer(pb), np.frombuffer(qb)
    ok = lambda rho: _kseq_parts(p, q, k, rho)[3].min() >= -tol  # noqa: E731
    if k == 1 or ok(1.0):
        return 1.0
    grid = np.linspace(1.0, float(k), 65)
    # rho = k is feasible in exact arithmetic (p - min(q, p/k) c >= p (1 - c/k) >= 0); if rounding
    # hides it at tol = 0, k is returned
    hi_i = next((i for i, r in enumerate(grid) if ok(r)), len(grid) - 1)
    lo, hi = grid[hi_i - 1], grid[hi_i]
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return float(hi)


def kseq_rho(p, q, k: int, tol: float = 1e-13) -> float:
    """SpecTr's rho*: the smallest rho in [1, k] with a valid K-SEQ residual (docs/theory.md §6.4).

    beta(rho) = sum min(q, p/rho), c = sum_{j<k} (1 - beta)^j; valid iff
    p_y - min(q_y, p_y/rho) c >= 0 for every y.  Feasibility is not monotone in rho: a grid scan
    finds the first feasible bracket, then bisection; the feasible end is returned.

    Parameters: ``p`` target and ``q`` draft rows over the same V >= 2 tokens (the input
    contract of docs/design.md); ``k`` >= 1 drafts; ``tol`` (slack allowed on the residual's
    sign, a real in [0, 1e-3]).

    Returns: rho* as a ``float`` (cached per (p, q, k)).

    >>> kseq_rho([1.0, 0.0], [0.5, 0.5], 2)   # every rho in [1, 2] is valid here
    1.0
    >>> round(kseq_rho([0.5, 0.3, 0.2], [0.2, 0.3, 0.5], 2), 6)
    1.456776
    """
    p, q = as_pair(p, q)
    check_int(k, "k", 1)
    return _kseq_rho_cached(p.tobytes(), q.tobytes(), k, check_real(tol, "tol", 0.0, 1e-3))


def _spectr_rule(tree, u, *, rho=None):
    p, q, draws = tree.p[u], tree.q[u], tree.draws[u]
    k = len(draws)
    rho = _kseq_rho_cached(p.tobytes(), q.tobytes(), k, 1e-13) if rho is None else rho
    m, beta, c, num = _kseq_parts(p, q, k, rho)
    descend: dict[int, float] = defaultdict(float)
    reach = 1.0
    for x in draws:
        a = _accept_prob(p[x] / rho, q[x])
        descend[x] += reach * a
        reach *= 1.0 - a
    return descend, reach, normalize(np.maximum(num, 0.0), p)


def _spectr_law(tree):
    """SpecTr k-sequential selection, K-SEQ (Sun et al., "SpecTr", arXiv 2310.15141), node-wise.

    At node u with k i.i.d. draws x_1..x_k from q: rho = rho*(p, q, k) (:func:`kseq_rho`);
    accept the first x_i passing U_i rho q(x_i) < p(x_i); if none passes, Y ~ r with
    r(y) = [p_y - min(q_y, p_y/rho) c(beta)] / (1 - beta)^k.  Drafts through the accepted token
    stay i.i.d., so K-SEQ runs again over the survivors (the accepted child's draws).
    Acceptance per node 1 - (1 - beta(rho))^k.

    Returns: the outcome list of the tree protocol (``accepted`` a node id, then the emitted law).

    >>> from specsim.multidraft import multidraft_acceptance
    >>> round(multidraft_acceptance("spectr", [1/3, 2/3], [2/3, 1/3], 2), 6)   # K = 2 drafts
    0.81142
    """
    return _nodewise(tree, _spectr_rule)


spectr = tree_verifier("spectr", needs={"iid"}, node_rule=_spectr_rule)(_spectr_law)
