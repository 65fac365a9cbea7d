"""The verifier protocol: a draft in, its exact outcome law out.

Chain verifiers are callables ``verifier(draft, p, q) -> list[Outcome]`` with ``draft`` a tuple of
L token ids, ``p`` float64 ``[L+1, V]`` (``p[i] = target(.|draft[:i])``) and ``q`` float64
``[L, V]`` (``q[i] = draft_model(.|draft[:i])``).  Tree verifiers are callables
``verifier(tree) -> list[Outcome]`` on a :class:`specsim.drafts.DraftTree`, where ``accepted`` is
a node id (0 = root = no token accepted).  A chain is the tree with one path, and the exact
engine adapts chain verifiers to chain trees, so there is one engine for both.

With probability ``prob`` the verifier keeps the accepted prefix (or root-to-node path) and emits
one more token drawn from ``next_dist``.  The verifier's own randomness is integrated out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

import numpy as np

__all__ = ["Outcome", "Verifier", "chain_verifier", "tree_verifier", "check_outcomes",
           "sample_outcome", "validate_chain_inputs"]

#: Tolerance on ``|sum(prob) - 1|`` for an outcome list and on each ``next_dist``.
OUTCOME_ATOL = 1e-9


@dataclass(frozen=True)
class Outcome:
    """With probability ``prob``: keep the first ``accepted`` draft tokens (chain) or the path to
    node ``accepted`` (tree), then emit one token drawn from ``next_dist``."""

    prob: float
    accepted: int
    next_dist: np.ndarray = field(repr=False)

    def __eq__(self, other) -> bool:  # arrays make the generated __eq__ ambiguous
        return (isinstance(other, Outcome) and self.prob == other.prob
                and self.accepted == other.accepted and np.array_equal(self.next_dist, other.next_dist))

    __hash__ = None  # type: ignore[assignment]


Kind = Literal["chain", "tree"]


@dataclass(frozen=True)
class Verifier:
    """A named verifier: its exact law (``__call__``) and a sampling form (``sample``).

    ``law`` follows the chain or tree protocol (``kind``).  ``sampler`` takes the same arguments
    plus ``rng`` (a ``numpy.random.Generator``) and returns ``(accepted, token)`` by running the
    algorithm with explicit uniforms; when absent, ``sample`` draws from the exact law.
    ``lossless`` records the claim (``False`` for documented negative controls and lossy rules).
    ``batch_law`` (chain verifiers, optional) is the same law vectorised over N drafts:
    ``(drafts int[N, L], p [N, L+1, V], q [N, L, V]) -> (probs [N, L+1], dists [N, L+1, V])`` with
    ``probs[n, k] = P(tau = k)`` and ``dists[n, k]`` the emitted token's law given tau = k.  The
    exact engine uses it to avoid a Python call per draft; tests check it against ``law``.
    ``node_rule`` (tree verifiers, optional) marks a node-wise scheme: ``node_rule(tree, u) ->
    ({child token: P(descend)}, P(stop at u), law of the emitted token on stopping)`` reading only
    node u's rows and draws, the walk never returning once it descends.  With a draft process that
    draws each node's children independently (``node_options``), the engine then sums over
    draft trees node by node (cost ~ number of node states, not number of trees).
    """

    name: str
    law: Callable[..., list[Outcome]]
    kind: Kind = "chain"
    sampler: Callable[..., tuple[int, int]] | None = None
    lossless: bool = True
    doc: str = ""
    batch_law: Callable[..., tuple[np.ndarray, np.ndarray]] | None = field(default=None, repr=False)
    node_rule: Callable[..., tuple[dict, float, np.ndarray]] | None = field(default=None, repr=False)

    def __call__(self, *args) -> list[Outcome]:
        """Exact law; chain arguments are validated first (the engine calls ``law`` directly)."""
        if self.kind == "chain":
            args = validate_chain_inputs(*args)
        return self.law(*args)

    def sample(self, *args, rng: np.random.Generator) -> tuple[int, int]:
        """One verification with fresh randomness: ``(accepted, emitted token)``."""
        if self.kind == "chain":
            args = validate_chain_inputs(*args)
        if self.sampler is not None:
            return self.sampler(*args, rng=rng)
        return sample_outcome(self.law(*args), rng)

    def __repr__(self) -> str:
        return f"Verifier({self.name!r}, kind={self.kind!r}, lossless={self.lossless})"


def chain_verifier(name: str, *, lossless: bool = True, sampler=None):
    """Decorator: turn ``fn(draft, p, q) -> list[Outcome]`` into a chain :class:`Verifier`."""
    def wrap(fn):
        return Verifier(name, fn, "chain", sampler, lossless, (fn.__doc__ or "").strip())
    return wrap


def tree_verifier(name: str, *, lossless: bool = True, sampler=None):
    """Decorator: turn ``fn(tree) -> list[Outcome]`` into a tree :class:`Verifier`."""
    def wrap(fn):
        return Verifier(name, fn, "tree", sampler, lossless, (fn.__doc__ or "").strip())
    return wrap


def verifier_kind(verifier) -> Kind:
    """``"tree"`` for tree verifiers, ``"chain"`` for :class:`Verifier` chains and plain callables."""
    return getattr(verifier, "kind", "chain")


def check_outcomes(outcomes, n_accept: int, V: int, where: str = "",
                   atol: float = OUTCOME_ATOL) -> list[Outcome]:
    """Validate an outcome list: ``ValueError`` naming the problem and the input ``where``.

    ``accepted`` must lie in ``0..n_accept - 1``; probabilities must be finite, non-negative and
    sum to 1; every ``next_dist`` with positive weight must be a distribution over V tokens.
    """
    try:
        items = list(outcomes)
    except TypeError:
        raise ValueError(f"verifier returned {type(outcomes).__name__}, not a list of Outcome{where}") from None
    total = 0.0
    for o in items:
        if not isinstance(o, Outcome):
            raise ValueError(f"verifier returned {o!r}, not an Outcome{where}")
        if not (np.isfinite(o.prob) and o.prob >= -atol):
            raise ValueError(f"outcome probability {o.prob!r} is negative or not finite{where}")
        if not (isinstance(o.accepted, (int, np.integer)) and 0 <= o.accepted < n_accept):
            raise ValueError(f"outcome accepts {o.accepted!r}, outside 0..{n_accept - 1}{where}")
        d = np.asarray(o.next_dist)
        if d.shape != (V,):
            raise ValueError(f"outcome next_dist has shape {d.shape}, expected ({V},){where}")
        if o.prob > 0 and (not np.all(np.isfinite(d)) or np.any(d < -atol) or abs(d.sum() - 1) > 1e-6):
            raise ValueError(f"outcome next_dist is not a probability vector (sum {d.sum()!r}){where}")
        total += o.prob
    if abs(total - 1.0) > max(atol, 1e-9 * len(items)):
        raise ValueError(f"outcome probabilities sum to {total!r}, not 1{where}")
    return items


def sample_outcome(outcomes: list[Outcome], rng: np.random.Generator) -> tuple[int, int]:
    """Draw ``(accepted, token)`` from an exact outcome law."""
    probs = np.array([max(o.prob, 0.0) for o in outcomes])
    o = outcomes[int(rng.choice(len(outcomes), p=probs / probs.sum()))]
    d = np.clip(o.next_dist, 0.0, None)
    return o.accepted, int(rng.choice(d.size, p=d / d.sum()))


def validate_chain_inputs(draft, p, q) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """Check a chain verifier's arguments; ``ValueError`` on bad shapes, rows or a drafted token with q = 0."""
    from .._validate import as_rows

    draft = tuple(int(t) for t in draft)
    L = len(draft)
    if L < 1:
        raise ValueError("draft must have at least one token (L >= 1)")
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != L + 1:
        raise ValueError(f"p must have shape [L+1, V] = [{L + 1}, V], got {p.shape}")
    V = p.shape[1]
    if V < 2:
        raise ValueError(f"vocabulary size must be >= 2, got {V}")
    as_rows(p, "p")
    as_rows(q, "q", (L, V))
    q = np.asarray(q, dtype=np.float64)
    for i, t in enumerate(draft):
        if not 0 <= t < V:
            raise ValueError(f"draft token {t} at position {i} outside 0..{V - 1}")
        if q[i, t] <= 0:
            raise ValueError(f"draft token {t} at position {i} has draft probability q = 0: "
                             "it cannot have been drawn from q")
    return draft, p, q
