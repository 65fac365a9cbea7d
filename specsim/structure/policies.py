"""Drafting policies: when to stop drafting, as objects (docs/theory.md §14).

A drafting policy watches a chain being drafted, x_{k+1} ~ q(.|x^{1:k}), and after each prefix
x^{1:k} (k = 0..L-1, L the horizon) says *stop* (verify x^{1:k}) or *continue* (draft x_{k+1}).
It sees a :class:`DraftState`: the prefix, the draft rows that drew it and, only when it declares
so, the draft row q(.|x^{1:k}) of the next position (``reads_next_row``: the pass that computed
it is charged even when the policy then stops) and the target rows p(.|x^{1:j}), j <= k
(``uses_target``: an oracle acceptance head).  Everything a policy sees is a function of the
prefix, so every :class:`Policy` is a *stopping time of the draft's own filtration*, and every
drawn token is verified: the emitted law is the target's (docs/theory.md §14.1; certified by
:func:`specsim.structure.stopping.check_policy_lossless`).

:class:`DroppingDesign` is the other kind of rule: it looks at a token *after* drawing it and,
depending on its value, throws it away unverified and ends the draft.  Such rules are not
stopping times of the draft filtration and change the output law (docs/theory.md §14.2);
:func:`grammar_truncation` and :func:`drop_on_target` are the two designs of issue 21, kept as
negative controls (also in :data:`specsim.testing.selftest.mutants.POLICY_MUTANTS`).

The transformers schedule (``num_assistant_tokens_schedule="heuristic"``) carries a length across
iterations instead of deciding within one: :class:`HeuristicSchedule`.

>>> from specsim.structure.policies import ConfidenceThreshold, FixedLength, SpecDecPP
>>> [p.name for p in (FixedLength(3), ConfidenceThreshold(0.4), SpecDecPP(0.7))]
['fixed:3', 'confidence:0.4', 'specdec++:0.7']
>>> SpecDecPP(0.7).uses_target, ConfidenceThreshold(0.75, rule="top").reads_next_row
(True, True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._validate import check_bool, check_int, check_real

__all__ = ["DraftState", "Policy", "FixedLength", "ConfidenceThreshold", "SpecDecPP", "EntropyStop",
           "CallablePolicy", "HeuristicSchedule", "DroppingDesign", "grammar_truncation", "drop_on_target",
           "as_policy"]


@dataclass(frozen=True, eq=False)
class DraftState:
    """What a policy sees after the prefix x^{1:k} was drafted (k = ``depth``, 0..L-1).

    ``prefix`` (k token ids); ``q`` [k, V] (row j = q(.|x^{1:j}), the rows that drew the prefix);
    ``next_q`` (q(.|x^{1:k}), only for a policy with ``reads_next_row``, else ``None``); ``p``
    [k+1, V] (row j = p(.|x^{1:j}), only for a policy with ``uses_target``, else ``None``);
    ``horizon`` (L: the policy is not asked at depth L, where drafting stops).
    """

    prefix: tuple[int, ...]
    q: np.ndarray = field(repr=False)
    next_q: np.ndarray | None = field(default=None, repr=False)
    p: np.ndarray | None = field(default=None, repr=False)
    horizon: int = 1

    @property
    def depth(self) -> int:
        """k, the number of drafted tokens."""
        return len(self.prefix)

    def confidence(self) -> float:
        """q(x_k | x^{1:k-1}), the draft's probability of the last drafted token (1 at depth 0)."""
        k = self.depth
        return float(self.q[k - 1, self.prefix[k - 1]]) if k else 1.0

    def survival(self) -> float:
        """prod_{j<=k} min(1, p(x_j|x^{1:j-1}) / q(x_j|x^{1:j-1})): P(no token-level rejection in
        x^{1:k}) under speculative sampling; needs the target rows (``uses_target``)."""
        if self.p is None:
            raise ValueError("survival() reads target rows: the policy must declare uses_target=True")
        s = 1.0
        for j, x in enumerate(self.prefix):
            s *= min(1.0, self.p[j, x] / self.q[j, x])
        return s


class Policy:
    """Base class of stopping policies: subclasses implement ``stop(state) -> bool``.

    Attributes: ``name``; ``uses_target`` (reads target rows, an oracle acceptance head);
    ``reads_next_row`` (reads q(.|x^{1:k}) before deciding, paying that draft pass).
    :meth:`decide` wraps ``stop`` and refuses an answer that is not a bool.
    """

    name: str = "policy"
    uses_target: bool = False
    reads_next_row: bool = False

    def stop(self, state: DraftState) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def decide(self, state: DraftState) -> bool:
        """``stop(state)``, checked: ``True`` (stop) or ``False`` (continue), else ``TypeError``."""
        out = self.stop(state)
        if not isinstance(out, (bool, np.bool_)):
            raise TypeError(f"policy {self.name!r} returned {out!r} at prefix {state.prefix}: a policy must "
                            f"return True (stop) or False (continue)")
        return bool(out)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"


@dataclass(frozen=True, repr=False)
class FixedLength(Policy):
    """Draft exactly ``L`` tokens (capped by the horizon): stop iff k >= L (Leviathan et al.)."""

    L: int

    def __post_init__(self):
        object.__setattr__(self, "L", check_int(self.L, "L", 0))

    @property
    def name(self) -> str:
        return f"fixed:{self.L}"

    def stop(self, state):
        return state.depth >= self.L


@dataclass(frozen=True, repr=False)
class ConfidenceThreshold(Policy):
    """Stop when the drafter's confidence falls below ``threshold`` (in [0, 1]).

    ``rule="token"`` (transformers' ``assistant_confidence_threshold``, default 0.4, through its
    ``ConfidenceCriteria`` stopping criterion): after drafting x_k, stop if q(x_k|x^{1:k-1}) <
    threshold; the low-confidence token is kept and verified.  (transformers also re-tunes the
    threshold between iterations from an ROC curve when scikit-learn is installed; that adaptation
    is not modelled: the threshold here is fixed.)
    ``rule="top"`` (llama.cpp's ``p_min``, ``--draft-p-min``, default 0.75 in ``common.h``): at
    x^{1:k} the drafter computes q(.|x^{1:k}) and drafts nothing more if max_v q(v|x^{1:k}) <
    threshold; decided before the next token is drawn (llama.cpp drafts the top token), and it may
    stop at k = 0.  It reads the next row, so that draft pass is charged.
    """

    threshold: float = 0.4
    rule: str = "token"

    def __post_init__(self):
        object.__setattr__(self, "threshold", check_real(self.threshold, "threshold", 0.0, 1.0))
        if not isinstance(self.rule, str) or self.rule not in ("token", "top"):
            raise ValueError(f"rule must be 'token' (transformers) or 'top' (llama.cpp p_min), got {self.rule!r}")

    @property
    def name(self) -> str:
        return f"confidence:{self.threshold:g}" + ("" if self.rule == "token" else ":top")

    @property
    def reads_next_row(self) -> bool:
        return self.rule == "top"

    def stop(self, state):
        if self.rule == "top":
            return bool(state.next_q.max() < self.threshold)
        return state.depth > 0 and state.confidence() < self.threshold


@dataclass(frozen=True, repr=False)
class SpecDecPP(Policy):
    """SpecDec++'s rule (Huang, Guo, Wang, arXiv 2405.19715) with an oracle acceptance head: after
    x^{1:k} (k >= 1), stop if P(at least one of x^{1:k} is rejected) = 1 - prod_j min(1, p/q) >
    ``threshold`` (in [0, 1]).  The head is exact (it reads the target rows), so ``uses_target``;
    the token that crossed the threshold is kept and verified."""

    threshold: float = 0.7

    def __post_init__(self):
        object.__setattr__(self, "threshold", check_real(self.threshold, "threshold", 0.0, 1.0))

    uses_target = True

    @property
    def name(self) -> str:
        return f"specdec++:{self.threshold:g}"

    def stop(self, state):
        return state.depth > 0 and 1.0 - state.survival() > self.threshold


def _entropy(row: np.ndarray) -> float:
    r = row[row > 0]
    return float(-(r * np.log(r)).sum())


@dataclass(frozen=True, repr=False)
class EntropyStop(Policy):
    """An entropy rule in the manner of SVIP (Zhang et al., "Draft Model Knows When to Stop",
    arXiv 2411.18462, which sets the draft length from the draft model's entropy):
    at x^{1:k} stop if the draft's entropy H(q(.|x^{1:k})) (nats) exceeds ``threshold`` >= 0.
    SVIP thresholds a monotone function of this entropy (a lower bound on the acceptance rate);
    any such rule is this one at another threshold.  The exact function and its constants were not
    read from the paper (docs/theory.md §14).  Reads the next row (charged)."""

    threshold: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "threshold", check_real(self.threshold, "threshold", 0.0))

    reads_next_row = True

    @property
    def name(self) -> str:
        return f"entropy:{self.threshold:g}"

    def stop(self, state):
        return _entropy(state.next_q) > self.threshold


class CallablePolicy(Policy):
    """A user rule ``fn(state: DraftState) -> bool`` (True = stop), with its declarations.

    Parameters: ``fn``; ``name``; ``uses_target`` (``fn`` may read ``state.p``; without it
    ``state.p`` is ``None``); ``reads_next_row`` (``fn`` may read ``state.next_q``).

    >>> from specsim.structure.policies import CallablePolicy
    >>> CallablePolicy(lambda s: s.depth >= 2, name="two").name
    'two'
    """

    def __init__(self, fn: Callable[[DraftState], bool], name: str = "callable", uses_target: bool = False,
                 reads_next_row: bool = False):
        if not callable(fn):
            raise TypeError(f"fn must be callable (state -> bool), got {type(fn).__name__}")
        if not isinstance(name, str):
            raise TypeError(f"name must be a string, got {name!r}")
        self.fn, self.name = fn, name
        self.uses_target = check_bool(uses_target, "uses_target")
        self.reads_next_row = check_bool(reads_next_row, "reads_next_row")

    def stop(self, state):
        return self.fn(state)


def as_policy(policy) -> Policy:
    """``policy`` as a :class:`Policy`: a Policy, an int L (:class:`FixedLength`) or a callable."""
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, (int, np.integer)) and not isinstance(policy, bool):
        return FixedLength(int(policy))
    if callable(policy):
        return CallablePolicy(policy, getattr(policy, "__name__", "callable"))
    raise TypeError(f"policy must be a specsim.structure Policy, an integer length or a callable "
                    f"state -> bool, got {type(policy).__name__}")


@dataclass(frozen=True)
class HeuristicSchedule:
    """transformers' ``num_assistant_tokens_schedule="heuristic"``: draft s tokens; if all s are
    accepted, s <- s + 2, else s <- max(1, s - 1); transformers starts from ``num_assistant_tokens``
    = 20 (its assisted candidate generator's ``update_candidate_strategy`` method).

    The length is a Markov chain on {1..L} (capped at the horizon L: the enumeration stops there)
    whose step from s depends on a = P(tau = s | s drafted).  Evaluated (by
    :func:`specsim.structure.stopping.policy_value`) either as the **stationary** chain (default:
    ``iterations=None``; the long-run tokens per cost by the Markov renewal-reward theorem,
    sum_s pi_s T_s / sum_s pi_s C_s, pi solved exactly) or over the first ``iterations`` iterations
    from ``start`` (the same ratio with the visit counts of those iterations).  Both assume each
    iteration sees a fresh context drawn from the same law (at one fixed context for toys).
    """

    start: int = 20
    iterations: int | None = None
    up: int = 2
    down: int = 1

    def __post_init__(self):
        check_int(self.start, "start", 1)
        check_int(self.up, "up", 0)
        check_int(self.down, "down", 0)
        if self.iterations is not None:
            check_int(self.iterations, "iterations", 1, 100_000)

    @property
    def name(self) -> str:
        return "heuristic" + ("" if self.iterations is None else f":{self.iterations}")

    uses_target = False

    def transition(self, accept_all: np.ndarray) -> np.ndarray:
        """The transition matrix over lengths 1..L given a[s-1] = P(all s drafted tokens accepted)."""
        L = accept_all.size
        P = np.zeros((L, L))
        for s in range(1, L + 1):
            P[s - 1, min(s + self.up, L) - 1] += accept_all[s - 1]
            P[s - 1, max(1, s - self.down) - 1] += 1.0 - accept_all[s - 1]
        return P

    def weights(self, accept_all) -> np.ndarray:
        """Visit weights over lengths 1..L: the stationary law, or the expected visit counts of the
        first ``iterations`` iterations from min(start, L)."""
        a = np.clip(np.asarray(accept_all, dtype=np.float64), 0.0, 1.0)
        P = self.transition(a)
        L = a.size
        if self.iterations is not None:
            x = np.zeros(L)
            x[min(self.start, L) - 1] = 1.0
            total = np.zeros(L)
            for _ in range(self.iterations):
                total += x
                x = x @ P
            return total / total.sum()
        # stationary law: pi (P - I) = 0, sum pi = 1.  With one closed class it is unique and
        # solved exactly; when some a_s is exactly 0 or 1 the chain can have several closed classes,
        # and the long run depends on the start: then the Cesaro average of 20000 steps from
        # min(start, L) (error O(L / 20000)) is the law the schedule actually settles into.
        if np.linalg.matrix_rank(P - np.eye(L)) < L - 1:
            x = np.zeros(L)
            x[min(self.start, L) - 1] = 1.0
            total = np.zeros(L)
            for _ in range(20000):
                total += x
                x = x @ P
            return total / total.sum()
        A = np.vstack([(P - np.eye(L)).T, np.ones(L)])
        b = np.zeros(L + 1)
        b[-1] = 1.0
        pi = np.clip(np.linalg.lstsq(A, b, rcond=None)[0], 0.0, None)
        return pi / pi.sum()


@dataclass(frozen=True)
class DroppingDesign:
    """A *value-dependent dropping* rule: draw x_{k+1} ~ q(.|x^{1:k}); if ``drop(state, x)`` the
    token is discarded unverified and the draft ends at x^{1:k}; otherwise it is kept.  Not a
    stopping time of the draft filtration: the kept token's law is q conditioned on not being
    dropped, while the verifier still uses q, so the output law changes (docs/theory.md §14.2).
    Negative controls only.  ``uses_target``: ``drop`` reads ``state.p``.
    """

    name: str
    drop: Callable[[DraftState, int], bool] = field(repr=False)
    uses_target: bool = False
    reads_next_row: bool = True   # the row the dropped token was drawn from

    def decide_drop(self, state: DraftState, token: int) -> bool:
        out = self.drop(state, token)
        if not isinstance(out, (bool, np.bool_)):
            raise TypeError(f"dropping rule {self.name!r} returned {out!r}: expected True (drop) or False (keep)")
        return bool(out)


def grammar_truncation(forbidden=(2,)) -> DroppingDesign:
    """The "force-reject grammar-invalid drafts" design: a drafted token in ``forbidden`` (the
    grammar's excluded tokens) is dropped, the draft ends before it and the verifier resamples from
    the target.  With p = (.5, .5, 0), q = (.6, .1, .3), L = 1 and token verification it emits
    (0.65, 0.35, 0): TV 0.15 from the target (docs/theory.md §14.2).

    >>> grammar_truncation().name
    'grammar_truncation'
    """
    bad = frozenset(int(t) for t in forbidden)
    return DroppingDesign("grammar_truncation", lambda state, x: x in bad)


def drop_on_target(threshold: float = 0.5) -> DroppingDesign:
    """"Stop after seeing the target": SpecDec++'s oracle rule implemented one token late — the
    drawn x_{k+1} is scored with the target and *discarded* when including it would make
    P(at least one rejection) exceed ``threshold``.  Reads the target row of a token it then does
    not verify, so it is lossy (``uses_target``)."""
    h = check_real(threshold, "threshold", 0.0, 1.0)

    def drop(state, x):
        k = state.depth
        a = min(1.0, state.p[k, x] / state.next_q[x])
        return bool(1.0 - state.survival() * a > h)

    return DroppingDesign(f"drop_on_target:{h:g}", drop, uses_target=True)
