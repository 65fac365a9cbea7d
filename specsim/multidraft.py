"""Token-level acceptance of K drafts at one position, exactly, for the registered tree verifiers.

:func:`multidraft_acceptance` runs the exact engine (:mod:`specsim.exact`) on a tree verifier
of the registry (:mod:`specsim.verifiers.registry`) with context-independent rows, so it sits
above both; the engine itself knows only the verifier protocol.
"""
from __future__ import annotations

import math

import numpy as np

from ._validate import as_pair, check_int
from .drafts import iid_paths, swor_tree
from .exact import expected_accepted
from .models import iid
from .verifiers.registry import TREE_VERIFIERS

__all__ = ["multidraft_acceptance", "MAX_DRAW_TUPLES"]

#: Most ordered draw tuples multidraft_acceptance enumerates: the engine spends roughly 0.1 ms per
#: tuple (V = 3: K = 9, 19683 tuples, about 1 s; K = 11 about 9 s on a loaded 2-core machine).
MAX_DRAW_TUPLES = 20_000


def multidraft_acceptance(verifier_name: str, p, q, K: int, replacement: bool = True) -> float:
    """Token-level acceptance of K drafts at one position: P(tau = 1) for L = 1, exactly.

    alpha = sum_D Pr(D) sum_{outcomes accepting a child} prob, computed by the exact engine with
    context-independent rows p, q and ``iid_paths(K)`` (``replacement=True``) or ``swor_tree(K)``.
    Comparable with the multi-draft optimum (docs/theory.md §6.6).

    Parameters: ``verifier_name`` a key of :data:`TREE_VERIFIERS`; ``p``, ``q`` rows over the
    same V >= 2 tokens; ``K`` >= 1 drafts; ``replacement``.

    The engine enumerates every ordered tuple of the K draws from supp q: s^K with replacement,
    s!/(s-K)! without (s = |supp q|).  Above :data:`MAX_DRAW_TUPLES` tuples a ``ValueError`` says
    how many; the optimal K-draft acceptance at any size is ``lp.coupling.multidraft_bound``.
    Verifiers with a path model (``gbv``) do not enumerate the tuples and have no limit.

    Returns: alpha as a ``float``; ``ValueError`` for an unknown name, a verifier that does not
    apply to that draft law (e.g. ``sequoia`` with replacement) or an enumeration above the limit.

    >>> multidraft_acceptance("specinfer", [1, 0], [0.5, 0.5], 2)
    0.75
    """
    if verifier_name not in TREE_VERIFIERS:
        raise ValueError(f"unknown tree verifier {verifier_name!r}; choose from {sorted(TREE_VERIFIERS)}")
    p, q = as_pair(p, q)
    check_int(K, "K", 1)
    verifier = TREE_VERIFIERS[verifier_name]
    drafting = iid_paths(K) if replacement else swor_tree(K)
    if not verifier.applies_to(drafting):
        raise ValueError(f"{verifier_name} needs drafts {sorted(verifier.needs)}, not "
                         f"{'with' if replacement else 'without'} replacement")
    support = int(np.count_nonzero(q > 0))
    tuples = support ** K if replacement else math.perm(support, min(K, support))
    if verifier.path_model is None and tuples > MAX_DRAW_TUPLES:
        raise ValueError(f"multidraft_acceptance({verifier_name!r}, K={K}) would enumerate {tuples:,} ordered draw "
                         f"tuples (|supp q| = {support}, {'s^K' if replacement else 's!/(s-K)!'}), more than "
                         f"MAX_DRAW_TUPLES = {MAX_DRAW_TUPLES:,}; use a smaller K or support, or "
                         f"lp.coupling.multidraft_bound(p, q, K) for the optimal K-draft acceptance")
    return expected_accepted(verifier, iid(p, "p"), iid(q, "q"), 1, drafting)
