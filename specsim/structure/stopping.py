"""When to stop drafting: exact policy values, the optimal stopping rule and policy certificates.

Setting (docs/theory.md §14).  At a context, a chain is drafted x_{k+1} ~ q(.|x^{1:k}) up to a
horizon L; a stopping rule sigma picks, from the prefix alone, the draft length l; the verifier
then emits T(x^{1:l}) = E[tau | x^{1:l}] + 1 tokens on average and the iteration costs
C_sigma(l) = ``cost.iteration([1] * passes, l + 1)`` (l draft passes, one more when a policy read
q(.|x^{1:l}) before stopping early, and a target call on l + 1 query tokens; :class:`CostModel`).
Iterations are i.i.d., so throughput is the renewal-reward ratio

    R(sigma) = E[T(x^{1:l})] / E[C_sigma(l)].

**Optimal stopping.**  For a price lambda, backward induction over the prefix tree,

    W(x^{1:L}) = T(x^{1:L}) - lambda C(L),
    W(x^{1:k}) = max( T(x^{1:k}) - lambda C(k),  sum_x q(x|x^{1:k}) W(x^{1:k} x) ),

gives the rule maximising E[T] - lambda E[C]; lambda* = max_sigma R(sigma) is the root of
F(lambda) = max_sigma E[T - lambda C] (Dinkelbach's iteration lambda <- R(sigma_lambda) reaches it
in finitely many steps; bisection on F is the check).  :func:`optimal_stopping` returns the rule
and lambda*, :func:`policy_value` any policy's R and its regret 1 - R / lambda*.

**Certificates.**  :func:`policy_drafting` turns a policy (or a dropping design) into a draft
process of :mod:`specsim.drafts` (chains of random length), so the one exact engine,
:func:`specsim.exact.check_lossless`, certifies the verifier *with* the policy:
:func:`check_policy_lossless`.

>>> from specsim.models import random_model
>>> from specsim.structure import CostModel
>>> from specsim.structure.stopping import optimal_stopping, policy_value
>>> from specsim.structure.policies import FixedLength
>>> from specsim.verifiers import token
>>> t, d, cost = random_model(3, 0), random_model(3, 1), CostModel(draft=0.1)
>>> opt = optimal_stopping(token, t, d, 3, cost)
>>> fixed = policy_value(FixedLength(1), token, t, d, 3, cost, optimum=opt)
>>> round(opt.value, 6), round(fixed.value, 6), fixed.regret > 0
(1.230132, 1.105431, True)
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from .._validate import check_int, check_rng, check_real
from ..drafts import DraftTree
from ..exact import Certificate, LOSSLESS_ATOL, check_lossless, outcomes_on_tree
from ..models import Model, validate_model_pair, prefix_index
from ..parallel import check_workers, map_tasks
from ..verifiers import as_verifier
from .cost import CostModel
from .policies import DraftState, DroppingDesign, HeuristicSchedule, Policy, as_policy
from .renewal import _check_cost

__all__ = ["MAX_PREFIXES", "PolicyValue", "OptimalStopping", "PolicyDrafting", "PolicyCertificate",
           "optimal_stopping", "policy_value", "compare_policies", "policy_drafting", "check_policy_lossless",
           "format_table", "chain_values", "stopped_length"]

#: Largest number of draft prefixes (sum_{k<=L} V^k) the exact enumeration walks.
MAX_PREFIXES = 200_000


def _check_horizon(V: int, L: int) -> int:
    n = sum(V ** k for k in range(L + 1))
    if n > MAX_PREFIXES:
        raise ValueError(f"horizon L={L} over V={V} gives {n} draft prefixes, more than the exact "
                         f"enumeration's limit of {MAX_PREFIXES} (sum_k V^k for k <= L); lower L")
    return n


def _decode(code: int, k: int, V: int) -> tuple[int, ...]:
    out = []
    for _ in range(k):
        code, t = divmod(code, V)
        out.append(t)
    return tuple(reversed(out))


@dataclass(frozen=True, eq=False)
class _Prefixes:
    """Every draft prefix up to depth L at one context: Q (probability), T (tokens if stopped)."""

    V: int
    L: int
    ptab: list
    qtab: list
    Q: list          # Q[k] [V^k]
    T: list          # T[k] [V^k] (0 where Q = 0)


def _tokens_level(verifier, k: int, codes: np.ndarray, ptab, qtab, V: int) -> np.ndarray:
    """E[tau | x^{1:k}] + 1 for the drafts ``codes`` of length k (the verifier's exact law)."""
    if k == 0:
        return np.ones(codes.size)
    digits = np.stack([(codes // V ** (k - 1 - i)) % V for i in range(k)], axis=1)
    pre = [codes // V ** (k - i) for i in range(k + 1)]
    prow = np.stack([ptab[i][pre[i]] for i in range(k + 1)], axis=1)
    qrow = np.stack([qtab[i][pre[i]] for i in range(k)], axis=1)
    if verifier.kind == "chain" and verifier.batch_law is not None:
        probs, _ = verifier.batch_law(digits, prow, qrow)
        return probs @ np.arange(1, k + 2)
    out = np.empty(codes.size)
    zero = np.zeros((1, V))
    for n in range(codes.size):
        tree = DraftTree((-1, *digits[n].tolist()), tuple(range(-1, k)), prow[n], np.vstack([qrow[n], zero]),
                         None, False)
        out[n] = sum(o.prob * (tree.depth[o.accepted] + 1) for o in outcomes_on_tree(verifier, tree))
    return out


def _prefixes(verifier, target: Model, draft_model: Model, L: int, context) -> _Prefixes:
    L = validate_model_pair(target, draft_model, L)
    verifier = as_verifier(verifier)
    V = target.V
    _check_horizon(V, L)
    target, draft_model = target.shifted(context), draft_model.shifted(context)
    ptab, qtab = target.table(L), draft_model.table(L - 1)
    Q = [np.ones(1)]
    for k in range(L):
        Q.append((Q[k][:, None] * qtab[k]).ravel())
    T = []
    for k in range(L + 1):
        t = np.zeros(V ** k)
        live = np.flatnonzero(Q[k] > 0)
        t[live] = _tokens_level(verifier, k, live, ptab, qtab, V)
        T.append(t)
    return _Prefixes(V, L, ptab, qtab, Q, T)


def _state(pre: _Prefixes, k: int, code: int, policy) -> DraftState:
    prefix = _decode(code, k, pre.V)
    codes = [code // pre.V ** (k - i) for i in range(k + 1)]
    q = np.array([pre.qtab[i][codes[i]] for i in range(k)]).reshape(k, pre.V)
    nq = pre.qtab[k][code] if (getattr(policy, "reads_next_row", False) and k < pre.L) else None
    p = np.array([pre.ptab[i][codes[i]] for i in range(k + 1)]) if getattr(policy, "uses_target", False) else None
    return DraftState(prefix, q, nq, p, pre.L)


def _stop_sets(pre: _Prefixes, policy: Policy) -> list[np.ndarray]:
    """stop[k][code]: the policy stops at x^{1:k} (k < L; every prefix stops at L)."""
    stops = []
    for k in range(pre.L + 1):
        s = np.ones(pre.V ** k, dtype=bool)
        if k < pre.L:
            for code in np.flatnonzero(pre.Q[k] > 0):
                s[code] = policy.decide(_state(pre, k, int(code), policy))
        stops.append(s)
    return stops


def _costs(pre: _Prefixes, cost: CostModel, reads_next_row: bool) -> np.ndarray:
    """C(l) for l = 0..L; a policy reading q(.|x^{1:l}) pays that pass when it stops at l < L."""
    return np.array([cost.iteration([1] * (l + (1 if reads_next_row and l < pre.L else 0)), l + 1)
                     for l in range(pre.L + 1)])


def _evaluate(pre: _Prefixes, stops, C: np.ndarray):
    """(E[T], E[C], P(l = k) for k = 0..L) of the rule ``stops`` by a forward pass over prefixes."""
    reach = np.ones(1)
    ET = EC = 0.0
    law = np.zeros(pre.L + 1)
    for k in range(pre.L + 1):
        w = reach * stops[k]
        mass = float(w.sum())
        law[k] = mass
        ET += float(w @ pre.T[k])
        EC += mass * C[k]
        if k < pre.L:
            reach = ((reach * ~stops[k])[:, None] * pre.qtab[k]).ravel()
    return ET, EC, law


@dataclass(frozen=True)
class OptimalStopping:
    """The stopping rule maximising E[tokens] / E[cost] (docs/theory.md §14.3).

    ``value`` = lambda* (tokens per unit cost), ``speedup`` = lambda* x ``cost.plain``,
    ``tokens`` = E[T], ``cost`` = E[C], ``length_law`` (P(l = k), k = 0..L), ``stop`` (stop[k] a
    boolean array over V^k prefix codes: the rule of backward induction at lambda*, which stops at
    every prefix, reached or not, where drafting on pays less than lambda* per unit cost; ties
    stop), ``iterations`` (Dinkelbach steps or bisection steps),
    ``method``, ``policy`` (the rule as a :class:`Policy` that reads the prefix).
    """

    value: float
    speedup: float
    tokens: float
    cost: float
    length_law: np.ndarray
    stop: list = field(repr=False)
    iterations: int
    method: str
    V: int
    L: int

    @property
    def policy(self) -> Policy:
        from .policies import CallablePolicy

        stop, V = self.stop, self.V
        return CallablePolicy(lambda s: bool(stop[s.depth][prefix_index(s.prefix, V)]), name="optimal")


def _induct(pre: _Prefixes, C: np.ndarray, lam: float, min_length: int):
    """Backward induction at price lam: (stop sets, F(lam) = max E[T - lam C])."""
    V = pre.V
    W = pre.T[pre.L] - lam * C[pre.L]
    stops = [None] * (pre.L + 1)
    stops[pre.L] = np.ones(V ** pre.L, dtype=bool)
    for k in range(pre.L - 1, -1, -1):
        here = pre.T[k] - lam * C[k]
        cont = (pre.qtab[k] * W.reshape(-1, V)).sum(axis=1)
        s = here >= cont - 1e-12 * (1.0 + abs(lam))   # ties stop: the shorter draft
        if k < min_length:
            s[:] = False
        stops[k] = s
        W = np.where(s, here, cont)
    return stops, float(W[0])


def optimal_stopping(verifier, target: Model, draft_model: Model, L: int, cost: CostModel, context=(),
                     method: str = "dinkelbach", min_length: int = 0, tol: float = 1e-13) -> OptimalStopping:
    """The optimal stopping rule of drafting for throughput, exactly (docs/theory.md §14.3).

    lambda* = max over stopping rules sigma (functions of the draft prefix, drafting at most L
    tokens and at least ``min_length``) of E[T] / E[C]; found by Dinkelbach's iteration
    (``method="dinkelbach"``: lambda_{n+1} = R(sigma_{lambda_n}), finite) or by bisection on
    F(lambda) = max_sigma E[T - lambda C] (``method="bisection"``, to ``tol``).  T(x^{1:l}) is the
    verifier's exact E[tau | draft] + 1, C(l) the cost model's iteration cost.

    Parameters: ``verifier`` (chain verifier or a tree verifier applied to chains), ``target``,
    ``draft_model`` (:class:`~specsim.models.Model` pair), ``L`` (horizon >= 1; at most
    :data:`MAX_PREFIXES` prefixes), ``cost`` (:class:`CostModel`), ``context``, ``method``,
    ``min_length`` (0..L), ``tol``.

    Returns: an :class:`OptimalStopping`.

    >>> from specsim.models import iid
    >>> from specsim.structure import CostModel, leviathan_speedup
    >>> from specsim.verifiers import token
    >>> opt = optimal_stopping(token, iid([0.4, 0.4, 0.2]), iid([0.5, 0.5, 0.0]), 6, CostModel(draft=0.05))
    >>> opt.length_law.round(12).tolist(), round(opt.speedup, 9) == round(leviathan_speedup(0.8, 6, 0.05), 9)
    ([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0], True)
    """
    cost = _check_cost(cost)
    if not isinstance(method, str) or method not in ("dinkelbach", "bisection"):
        raise ValueError(f"method must be 'dinkelbach' or 'bisection', got {method!r}")
    pre = _prefixes(verifier, target, draft_model, L, context)
    min_length = check_int(min_length, "min_length", 0, pre.L)
    tol = check_real(tol, "tol", 0.0, 1.0, lo_open=True)
    C = _costs(pre, cost, False)
    if method == "dinkelbach":
        lam, it, best = 0.0, 0, None
        while it < 200:
            it += 1
            stops, _ = _induct(pre, C, lam, min_length)
            ET, EC, law = _evaluate(pre, stops, C)
            new = ET / EC
            if best is None or new > best[0]:
                best = (new, stops, ET, EC, law)
            if new <= lam + tol * max(1.0, lam):
                break
            lam = new
        lam, stops, ET, EC, law = best      # the best rule met (rounding cannot report a worse one)
        # that rule was induced at the lambda_n before the last step: where it differs from the rule
        # induced at lambda* it continues at prefixes it never reaches.  Report the rule of lambda*
        # (stop wherever continuing pays less than lambda* per unit cost) when it is as good.
        at_star, _ = _induct(pre, C, lam, min_length)
        ET2, EC2, law2 = _evaluate(pre, at_star, C)
        if ET2 / EC2 >= lam * (1.0 - 1e-14):      # the same ratio up to rounding
            lam, stops, ET, EC, law = ET2 / EC2, at_star, ET2, EC2, law2
    else:
        lo, hi = 0.0, (pre.L + 1.0) / float(C.min())
        it = 0
        while hi - lo > tol * max(1.0, hi) and it < 200:
            it += 1
            mid = 0.5 * (lo + hi)
            _, F = _induct(pre, C, mid, min_length)
            lo, hi = (mid, hi) if F > 0 else (lo, mid)
        stops, _ = _induct(pre, C, lo, min_length)
        ET, EC, law = _evaluate(pre, stops, C)
        lam = ET / EC
    return OptimalStopping(float(lam), float(lam * cost.plain), float(ET), float(EC), law, stops, it, method,
                           pre.V, pre.L)


@dataclass(frozen=True)
class PolicyValue:
    """A policy's exact throughput at one context (docs/theory.md §14.3).

    ``name``; ``value`` = E[T] / E[C] (tokens per unit cost); ``speedup`` = value x ``cost.plain``;
    ``tokens`` = E[T] (tokens per target call, the block efficiency); ``cost`` = E[C];
    ``length_law`` (P(l = k)); ``regret`` = 1 - value / lambda* and ``gap`` = lambda* - value
    (``nan`` when no optimum was computed); ``uses_target``.
    """

    name: str
    value: float
    speedup: float
    tokens: float
    cost: float
    length_law: np.ndarray
    regret: float
    gap: float
    uses_target: bool = False


def _schedule_value(schedule: HeuristicSchedule, verifier, pre: _Prefixes, cost: CostModel):
    """Long-run E[T] and E[C] per iteration of the length chain of ``schedule`` over 1..L:
    T_s = E[T(x^{1:s})], A_s = P(all s drafted tokens accepted), weights from the chain."""
    C = _costs(pre, cost, False)
    accept = _accept_levels(verifier, pre)
    T = np.array([float(pre.Q[s] @ pre.T[s]) for s in range(1, pre.L + 1)])
    A = np.array([float(pre.Q[s] @ accept[s]) for s in range(1, pre.L + 1)])
    w = schedule.weights(A)
    return float(w @ T), float(w @ C[1:]), np.concatenate([[0.0], w])


def policy_value(policy, verifier, target: Model, draft_model: Model, L: int, cost: CostModel, context=(),
                 optimum: OptimalStopping | None = None) -> PolicyValue:
    """A policy's exact throughput E[T] / E[C] and its regret against the optimal stopping rule.

    E[T] = sum over stopped drafts of Q(x^{1:l}) T(x^{1:l}), E[C] likewise with C(l) (one more
    draft pass when the policy read q(.|x^{1:l}) and stopped before L).  A
    :class:`~specsim.structure.policies.HeuristicSchedule` is evaluated on its length chain
    (stationary, or over its first iterations; see its docstring).

    Parameters: ``policy`` (a :class:`~specsim.structure.policies.Policy`, an int L, a callable
    ``state -> bool`` or a ``HeuristicSchedule``), then as :func:`optimal_stopping`; ``optimum``
    (an :class:`OptimalStopping` for the same problem; computed when ``None``).

    Returns: a :class:`PolicyValue`.

    >>> from specsim.models import random_model
    >>> from specsim.structure import CostModel
    >>> from specsim.structure.policies import ConfidenceThreshold
    >>> from specsim.verifiers import block
    >>> v = policy_value(ConfidenceThreshold(0.4), block, random_model(3, 0), random_model(3, 1), 3, CostModel(draft=0.1))
    >>> round(v.tokens, 6), round(v.regret, 6)
    (1.227494, 0.158689)
    """
    cost = _check_cost(cost)
    verifier = as_verifier(verifier)
    pre = _prefixes(verifier, target, draft_model, L, context)
    if optimum is None:
        optimum = optimal_stopping(verifier, target, draft_model, L, cost, context)
    elif not isinstance(optimum, OptimalStopping):
        raise TypeError(f"optimum must be an OptimalStopping, got {type(optimum).__name__}")
    if isinstance(policy, HeuristicSchedule):
        ET, EC, law = _schedule_value(policy, verifier, pre, cost)
        name, uses_target = policy.name, False
    else:
        policy = as_policy(policy)
        ET, EC, law = _evaluate(pre, _stop_sets(pre, policy), _costs(pre, cost, policy.reads_next_row))
        name, uses_target = policy.name, policy.uses_target
    value = ET / EC
    return PolicyValue(name, float(value), float(value * cost.plain), float(ET), float(EC), law,
                       float(1.0 - value / optimum.value), float(optimum.value - value), uses_target)


def _accept_levels(verifier, pre: _Prefixes) -> list:
    """P(tau = s | x^{1:s}) for every prefix of length s (all drafted tokens accepted)."""
    V = pre.V
    out = [np.ones(1)]
    zero = np.zeros((1, V))
    for s in range(1, pre.L + 1):
        a = np.zeros(V ** s)
        for code in np.flatnonzero(pre.Q[s] > 0):
            x = _decode(int(code), s, V)
            codes = [int(code) // V ** (s - i) for i in range(s + 1)]
            tree = DraftTree((-1, *x), tuple(range(-1, s)), np.array([pre.ptab[i][codes[i]] for i in range(s + 1)]),
                             np.vstack([np.array([pre.qtab[i][codes[i]] for i in range(s)]), zero]), None, False)
            a[code] = sum(o.prob for o in outcomes_on_tree(verifier, tree) if tree.depth[o.accepted] == s)
        out.append(a)
    return out


def compare_policies(policies, verifier, target: Model, draft_model: Model, L: int, cost: CostModel,
                     context=(), *, workers=1) -> tuple[OptimalStopping, list[PolicyValue]]:
    """The optimal stopping rule and every policy's :class:`PolicyValue` against it (one optimum).

    The optimum is solved once, here; the policies are then independent tasks over ``workers``
    (1; an int n > 1 or -1 for processes, or a map-like callable: :mod:`specsim.parallel`), each
    evaluated exactly against that optimum, so the rows do not depend on the number of workers.

    >>> from specsim.models import random_model
    >>> from specsim.structure import CostModel
    >>> from specsim.verifiers import token
    >>> opt, rows = compare_policies([1, 2, 3], token, random_model(3, 0), random_model(3, 1), 3, CostModel(draft=0.1))
    >>> [r.name for r in rows], all(r.regret >= -1e-12 for r in rows)
    (['fixed:1', 'fixed:2', 'fixed:3'], True)
    """
    workers = check_workers(workers)
    opt = optimal_stopping(verifier, target, draft_model, L, cost, context)
    return opt, map_tasks(_policy_task, [(p, verifier, target, draft_model, L, cost, context, opt) for p in policies],
                          workers)


def _policy_task(task) -> PolicyValue:
    return policy_value(*task)


def format_table(opt: OptimalStopping, rows) -> str:
    """A plain-text regret table: policy, tokens per call, cost per iteration, tokens per cost, regret."""
    lines = [f"{'policy':<22}{'E[T]':>9}{'E[C]':>9}{'T/C':>9}{'regret':>9}",
             f"{'optimal':<22}{opt.tokens:>9.4f}{opt.cost:>9.4f}{opt.value:>9.4f}{0.0:>8.2%}"]
    for r in rows:
        lines.append(f"{r.name + (' *' if r.uses_target else ''):<22}{r.tokens:>9.4f}{r.cost:>9.4f}"
                     f"{r.value:>9.4f}{r.regret:>8.2%}")
    return "\n".join(lines)


# ====================================================================== certificates
@dataclass(frozen=True)
class PolicyDrafting:
    """The draft process of a stopping policy or a dropping design: chains of random length <= L.

    ``enumerate(target, draft_model, L)`` yields every ``(probability, chain DraftTree)`` the rule
    can produce (lengths 0..L); ``sample`` draws one.  A :class:`~specsim.structure.policies.Policy`
    keeps every drawn token, so each node's child is one draw from q (laws ``chain``, ``iid``,
    ``swor``); a :class:`~specsim.structure.policies.DroppingDesign` keeps a token only when it is
    not dropped, which no children law describes (``laws`` empty).
    """

    rule: object
    name: str

    @property
    def laws(self) -> frozenset[str]:
        return frozenset() if isinstance(self.rule, DroppingDesign) else frozenset({"chain", "iid", "swor"})

    def _walk(self, target: Model, draft_model: Model, L: int):
        L = validate_model_pair(target, draft_model, L)
        _check_horizon(target.V, L)
        V = target.V
        rule = self.rule
        leaf = np.zeros((1, V))
        stack = [((), 1.0)]
        while stack:
            prefix, w = stack.pop()
            k = len(prefix)
            q = np.array([draft_model(prefix[:i]) for i in range(k)]).reshape(k, V)
            p = np.array([target(prefix[:i]) for i in range(k + 1)])
            nxt = draft_model(prefix) if k < L else None
            state = DraftState(prefix, q, nxt if getattr(rule, "reads_next_row", False) else None,
                               p if getattr(rule, "uses_target", False) else None, L)
            tree = lambda: DraftTree((-1, *prefix), tuple(range(-1, k)), p, np.vstack([q, leaf]), None, False)  # noqa: E731
            if k == L:
                yield w, tree()
                continue
            if isinstance(rule, DroppingDesign):
                dropped = 0.0
                for x in np.flatnonzero(nxt > 0):
                    if rule.decide_drop(state, int(x)):
                        dropped += nxt[x]
                    else:
                        stack.append((prefix + (int(x),), w * nxt[x]))
                if dropped > 0:
                    yield w * dropped, tree()
            elif rule.decide(state):
                yield w, tree()
            else:
                row = draft_model(prefix)
                for x in np.flatnonzero(row > 0):
                    stack.append((prefix + (int(x),), w * row[x]))

    def enumerate(self, target: Model, draft_model: Model, L: int):
        """Every (probability, chain tree) of the rule; trees of equal prefix are merged."""
        merged: dict[tuple, list] = {}
        for w, tree in self._walk(target, draft_model, L):
            key = tree.tokens
            if key in merged:
                merged[key][0] += w
            else:
                merged[key] = [w, tree]
        for w, tree in merged.values():
            yield float(w), tree

    def sample(self, target: Model, draft_model: Model, L: int, rng: np.random.Generator) -> DraftTree:
        """One draft of the rule, drawn token by token with ``rng`` (x_{k+1} ~ q_k, then the rule)."""
        L = validate_model_pair(target, draft_model, L)
        check_rng(rng)
        V, rule = target.V, self.rule
        prefix: tuple[int, ...] = ()
        while len(prefix) < L:
            k = len(prefix)
            q = np.array([draft_model(prefix[:i]) for i in range(k)]).reshape(k, V)
            p = np.array([target(prefix[:i]) for i in range(k + 1)])
            row = draft_model(prefix)
            state = DraftState(prefix, q, row if getattr(rule, "reads_next_row", False) else None,
                               p if getattr(rule, "uses_target", False) else None, L)
            if isinstance(rule, DroppingDesign):
                x = int(rng.choice(V, p=row))
                if rule.decide_drop(state, x):
                    break
                prefix += (x,)
            elif rule.decide(state):
                break
            else:
                prefix += (int(rng.choice(V, p=row)),)
        k = len(prefix)
        q = np.array([draft_model(prefix[:i]) for i in range(k)]).reshape(k, V)
        p = np.array([target(prefix[:i]) for i in range(k + 1)])
        return DraftTree((-1, *prefix), tuple(range(-1, k)), p, np.vstack([q, np.zeros((1, V))]), None, False)


def policy_drafting(rule) -> PolicyDrafting:
    """The draft process of a stopping policy (or an int L, or a callable) or a dropping design.

    >>> from specsim.models import iid
    >>> from specsim.structure.policies import grammar_truncation
    >>> proc = policy_drafting(grammar_truncation())
    >>> sorted((t.tokens, round(w, 6)) for w, t in proc.enumerate(iid([.5, .5, 0]), iid([.6, .1, .3]), 1))
    [((-1,), 0.3), ((-1, 0), 0.6), ((-1, 1), 0.1)]
    """
    if isinstance(rule, DroppingDesign):
        return PolicyDrafting(rule, rule.name)
    if isinstance(rule, HeuristicSchedule):
        raise TypeError("a HeuristicSchedule carries its length across iterations: certify each length it "
                        "uses with FixedLength(s) (a fixed length is a stopping time)")
    rule = as_policy(rule)
    return PolicyDrafting(rule, rule.name)


@dataclass(frozen=True)
class PolicyCertificate:
    """Exact certificate of a verifier run with a drafting rule (docs/theory.md §14.1-14.2).

    ``certificate`` (the engine's :class:`~specsim.exact.Certificate` over the rule's draft
    process), ``lossless`` (its verdict), ``rule`` (name), ``kind`` (``"stopping time"`` for a
    policy, ``"value-dependent dropping"`` for a dropping design), ``uses_target`` (the rule reads
    target rows; for a stopping policy they are rows of the kept prefix, still a function of it).
    """

    certificate: Certificate
    rule: str
    kind: str
    uses_target: bool

    @property
    def lossless(self) -> bool:
        return self.certificate.lossless

    @property
    def tv(self) -> float:
        return self.certificate.tv

    @property
    def worst_sequence(self) -> tuple[int, ...]:
        return self.certificate.worst_sequence

    def __str__(self) -> str:
        reads = "reads target rows (declared uses_target)" if self.uses_target else "reads draft rows only"
        return f"{self.certificate}\n  rule {self.rule}: {self.kind}; {reads}"


def check_policy_lossless(verifier, target: Model, draft_model: Model, L: int, policy, context=(),
                          atol: float = LOSSLESS_ATOL) -> PolicyCertificate:
    """Certify ``verifier`` run on drafts chosen by ``policy``: the exact engine
    (:func:`specsim.exact.check_lossless`) over :func:`policy_drafting` (policy).

    A stopping policy is a stopping time of the draft filtration, so a lossless chain verifier
    stays lossless (docs/theory.md §14.1): the certificate says LOSSLESS.  A
    :class:`~specsim.structure.policies.DroppingDesign` discards drawn tokens by value: the
    certificate says LOSSY with the worst completed string.

    Parameters: ``verifier``, ``target``, ``draft_model``, ``L`` (horizon), ``policy`` (a policy,
    an int, a callable, or a dropping design), ``context``, ``atol``.

    Returns: a :class:`PolicyCertificate`.

    >>> from specsim.models import iid
    >>> from specsim.structure.policies import grammar_truncation
    >>> from specsim.verifiers import token
    >>> c = check_policy_lossless(token, iid([.5, .5, 0]), iid([.6, .1, .3]), 1, grammar_truncation())
    >>> c.lossless, round(c.tv, 12)
    (False, 0.15)
    """
    proc = policy_drafting(policy)
    dropping = isinstance(proc.rule, DroppingDesign)
    # a dropping design is off every verifier's contract by construction; its law is what we certify
    cert = check_lossless(verifier, target, draft_model, L, drafting=proc, context=context, atol=atol,
                          check_needs=not dropping)
    return PolicyCertificate(cert, proc.name, "value-dependent dropping" if dropping else "stopping time",
                             bool(getattr(proc.rule, "uses_target", False)))


def brute_force_stopping(verifier, target: Model, draft_model: Model, L: int, cost: CostModel, context=(),
                         min_length: int = 0, limit: int = 1 << 16) -> float:
    """max over *every* deterministic stopping rule of E[T] / E[C], by enumeration (a check of
    :func:`optimal_stopping` on tiny problems: 2^(internal prefixes) rules, at most ``limit``)."""
    cost = _check_cost(cost)
    pre = _prefixes(verifier, target, draft_model, L, context)
    C = _costs(pre, cost, False)
    nodes = [(k, int(c)) for k in range(min_length, pre.L) for c in np.flatnonzero(pre.Q[k] > 0)]
    if 2 ** len(nodes) > limit:
        raise ValueError(f"{2 ** len(nodes)} stopping rules exceed limit={limit}")
    best = -np.inf
    for bits in itertools.product((False, True), repeat=len(nodes)):
        stops = [np.zeros(pre.V ** k, dtype=bool) for k in range(pre.L)] + [np.ones(pre.V ** pre.L, dtype=bool)]
        for (k, c), b in zip(nodes, bits):
            stops[k][c] = b
        ET, EC, _ = _evaluate(pre, stops, C)
        best = max(best, ET / EC)
    return best


# ====================================================================== one stored chain
def chain_values(verifier, draft, p, q) -> tuple[np.ndarray, np.ndarray]:
    """For the prefixes x^{1:l} (l = 0..L) of one drafted chain: T_l = E[tau | x^{1:l}] + 1 and
    A_l = P(tau = l | x^{1:l}) (every drafted token accepted), from the verifier's exact law.
    Used on stored real chains, where only the drafted path's rows are known.

    Parameters: ``verifier``, ``draft`` (L token ids), ``p`` [L+1, V], ``q`` [L, V] (the chain
    protocol; rows are validated once by :meth:`specsim.drafts.DraftTree.from_chain`).

    Returns: ``(T, A)``, two arrays of length L + 1.

    >>> import numpy as np
    >>> from specsim.verifiers import token
    >>> T, A = chain_values(token, (0, 0), np.array([[0.5, 0.5]] * 3), np.array([[1.0, 0.0]] * 2))
    >>> T.tolist(), A.tolist()
    ([1.0, 1.5, 1.75], [1.0, 0.5, 0.25])
    """
    tree = DraftTree.from_chain(draft, p, q)
    draft, p, q = tree.chain_arrays()
    L = len(draft)
    T, A = np.ones(L + 1), np.ones(L + 1)
    verifier = as_verifier(verifier)
    for l in range(1, L + 1):
        sub = DraftTree.from_chain(draft[:l], p[:l + 1], q[:l], validate=False)
        outs = outcomes_on_tree(verifier, sub)
        T[l] = sum(o.prob * (sub.depth[o.accepted] + 1) for o in outs)
        A[l] = sum(o.prob for o in outs if sub.depth[o.accepted] == l)
    return T, A


def stopped_length(policy, draft, p, q) -> int:
    """The draft length l in 0..L at which ``policy`` stops on the chain (draft, p, q): the first
    k with ``policy.decide`` true, else L.  Rows as in :func:`chain_values`.

    >>> import numpy as np
    >>> from specsim.structure.policies import ConfidenceThreshold
    >>> stopped_length(ConfidenceThreshold(0.5), (0, 1, 0), np.full((4, 2), 0.5), np.array([[0.9, 0.1], [0.6, 0.4], [0.5, 0.5]]))
    2
    """
    policy = as_policy(policy)
    tree = DraftTree.from_chain(draft, p, q)
    draft, p, q = tree.chain_arrays()
    L = len(draft)
    for k in range(L):
        state = DraftState(tuple(draft[:k]), q[:k], q[k] if policy.reads_next_row else None,
                           p[:k + 1] if policy.uses_target else None, L)
        if policy.decide(state):
            return k
    return L
