"""The exact engine: output law, losslessness certificate and expected accepted tokens.

For a context, let O(s) be the probability that one iteration emits the string s (an accepted
prefix or root-to-node path plus one token), averaged over the draft process and the verifier's
randomness.  The verifier is lossless at the context iff every completion with target samples
matches the target (docs/theory.md §2):

    C(z) = sum_{k=1}^{L+1} O(z^{1:k}) P(z^{k+1:L+1} | z^{1:k}) = P(z)    for all z in V^{L+1}.

The engine enumerates every draft the process can produce (chains, i.i.d. paths, trees...), calls
the verifier's exact law on each, accumulates O by string length, and evaluates C and P with one
vectorised recursion over prefix tables: no Python loop over V^{L+1} sequences.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from . import _jit
from ._law_buffer import EmittedLaw, flat_law
from ._validate import check_bool, check_real, check_tokens
from .drafts import DraftProcess, DraftTree, chain
from .models import Model, _level_starts, validate_model_pair, prefix_index
from .verifiers.base import OUTCOME_ATOL, Outcome, as_verifier, validate_applies, validate_outcomes
from .verifiers.chain import _JIT_ROWS

__all__ = ["OutputLaw", "Certificate", "output_law", "completed_law", "check_lossless",
           "expected_accepted", "outcomes_on_tree"]

#: Default tolerance on max |C(z) - P(z)| for a lossless verdict (float64 enumeration error is ~1e-15).
LOSSLESS_ATOL = 1e-9


@dataclass(frozen=True)
class OutputLaw:
    """Emitted-string law O of one iteration, by string length.

    ``emitted[m]`` (m = 1..L+1) is a flat array over V^m: O(s), the probability of emitting
    exactly the string s of length m (accepted tokens, then one emitted token; index = base-V code
    of s, first token most significant, :func:`specsim.models.prefix_index`).
    ``accepted_at_least[d]`` is P(tau >= d) for d = 0..L, tau the number of accepted draft tokens.
    ``n_drafts`` counts the draft objects enumerated (node-level options on the node-wise path).

    >>> from specsim.exact import output_law
    >>> from specsim.models import iid
    >>> from specsim.verifiers import token
    >>> law = output_law(token, iid([0.5, 0.5]), iid([0.5, 0.5]), L=1)
    >>> law.emitted[2].tolist(), law.expected_accepted
    ([0.25, 0.25, 0.25, 0.25], 1.0)
    """

    V: int
    L: int
    emitted: dict[int, np.ndarray] = field(repr=False)
    accepted_at_least: np.ndarray
    n_drafts: int  # draft objects enumerated (node-level draft options on the node-wise path)

    @property
    def expected_accepted(self) -> float:
        """E[tau] = sum_{d=1}^{L} P(tau >= d), accepted draft tokens per iteration."""
        return float(self.accepted_at_least[1:].sum())

    @property
    def block_efficiency(self) -> float:
        """E[tau] + 1: tokens emitted per target call."""
        return self.expected_accepted + 1.0

    def prob(self, s) -> float:
        """O(s): the probability that one iteration emits exactly the string ``s`` (0 outside
        lengths 1..L+1).  ``s`` holds integer token ids in 0..V-1 (``TypeError`` /
        ``ValueError`` naming the position otherwise, the input contract of docs/design.md)."""
        s = check_tokens(s, "s (emitted string)", self.V)
        if not 1 <= len(s) <= self.L + 1:
            return 0.0
        return float(self.emitted[len(s)][prefix_index(s, self.V)])


@dataclass(frozen=True)
class Certificate:
    """Exact losslessness certificate of a verifier at one context (docs/theory.md §2).

    ``max_abs_error`` = max_z |C(z) - P(z)| over z in V^{L+1}; ``tv`` = (1/2) sum_z |C(z) - P(z)|,
    the total-variation distance between the completed law and the target's first L+1 tokens;
    ``worst_sequence`` attains the max with ``completed`` = C(z) and ``target`` = P(z);
    ``impossible_mass`` = sum of O(s) over emitted strings s that the target cannot emit (some
    token of s has target probability exactly 0 given its prefix), ``impossible_string`` the
    heaviest of them (``()`` if none); ``lossless`` is ``max_abs_error <= atol`` and
    ``impossible_mass == 0``: mass on an impossible string fails however small, as an emitted
    impossible string fails :func:`specsim.testing.check_sampler`.  Built by
    :func:`check_lossless`; ``str()`` is a one-line verdict (plus the worst sequence and any
    impossible string when lossy).

    >>> from specsim.exact import check_lossless
    >>> from specsim.models import iid
    >>> from specsim.verifiers import token
    >>> print(check_lossless(token, iid([0.5, 0.5]), iid([1.0, 0.0]), L=1))  # doctest: +NORMALIZE_WHITESPACE
    token [chain, V=2, L=1]: LOSSLESS (max |C-P| = 0, TV = 0, atol 1e-09);
    E[tau] = 0.500000, block efficiency = 1.500000
    """

    verifier: str
    drafting: str
    V: int
    L: int
    lossless: bool
    max_abs_error: float
    tv: float
    worst_sequence: tuple[int, ...]
    completed: float
    target: float
    expected_accepted: float
    block_efficiency: float
    accepted_at_least: np.ndarray = field(repr=False)
    atol: float = LOSSLESS_ATOL
    n_drafts: int = 0
    impossible_mass: float = 0.0
    impossible_string: tuple[int, ...] = ()

    def __str__(self) -> str:
        verdict = "LOSSLESS" if self.lossless else "LOSSY"
        s = (f"{self.verifier} [{self.drafting}, V={self.V}, L={self.L}]: {verdict} "
             f"(max |C-P| = {self.max_abs_error:.3g}, TV = {self.tv:.3g}, atol {self.atol:g}); "
             f"E[tau] = {self.expected_accepted:.6f}, block efficiency = {self.block_efficiency:.6f}")
        if not self.lossless:
            s += (f"\n  worst completed sequence {self.worst_sequence}: "
                  f"C = {self.completed:.6g} vs target {self.target:.6g}")
        if self.impossible_mass > 0:
            s += (f"\n  emits strings the target cannot emit with total probability {self.impossible_mass:.3g} "
                  f"(heaviest {self.impossible_string})")
        return s


def _impossible_mass(law: OutputLaw, target: Model) -> tuple[float, tuple[int, ...]]:
    """sum O(s) over emitted strings s with a token of target probability exactly 0 given its
    prefix, and the heaviest such s.  Exact zeros of the rows decide, not P(s) = 0 (a product of
    tiny probabilities may underflow), and only O(s) > 0 counts."""
    total, heaviest, where = 0.0, 0.0, ()
    if not target.zero_strings(law.L + 1)[1]:  # no zero up to length L+1, so none at any shorter length
        return total, where
    for k in range(1, law.L + 2):
        impossible, any_zero = target.zero_strings(k)  # cached: a target without zeros skips the pass
        if not any_zero:
            continue
        o = law.emitted[k]
        hit = impossible & (o > 0)
        if hit.any():
            total += float(o[hit].sum())
            code = int(np.flatnonzero(hit)[np.argmax(o[hit])])
            if o[code] > heaviest:
                heaviest, where = float(o[code]), tuple(int(d) for d in np.unravel_index(code, (law.V,) * k))
    return total, where


def _check_drafting(drafting) -> DraftProcess:
    """``drafting`` or the chain process for ``None``; ``TypeError`` for what is not a process."""
    if drafting is None:
        return chain()
    if not (callable(getattr(drafting, "enumerate", None)) and callable(getattr(drafting, "sample", None))):
        raise TypeError(f"drafting must be a draft process (specsim.drafts: chain(), iid_paths(K), ...) "
                        f"with enumerate and sample methods, got {type(drafting).__name__}")
    return drafting


def _name(obj) -> str:
    return getattr(obj, "name", getattr(obj, "__name__", type(obj).__name__))


def outcomes_on_tree(verifier, tree: DraftTree) -> list[Outcome]:
    """The outcome law of a chain or tree verifier on one draft tree, with node ids as ``accepted``.

    A chain verifier is applied to the tree's single path (``tree.chain_arrays()``); chain nodes
    are numbered by depth, so its ``accepted`` count k is node k.

    Parameters: ``verifier`` (chain or tree protocol), ``tree`` (:class:`specsim.drafts.DraftTree`).

    Returns: the list of :class:`specsim.verifiers.base.Outcome`.

    >>> import numpy as np
    >>> from specsim.drafts import DraftTree
    >>> from specsim.exact import outcomes_on_tree
    >>> from specsim.verifiers import token
    >>> tree = DraftTree.from_chain((0,), np.array([[0.5, 0.5], [0.5, 0.5]]), np.array([[1.0, 0.0]]))
    >>> [(o.accepted, round(o.prob, 6)) for o in outcomes_on_tree(token, tree)]
    [(0, 0.5), (1, 0.5)]
    """
    verifier = as_verifier(verifier)
    if verifier.kind == "tree":
        return verifier.law(tree)
    draft, p, q = tree.chain_arrays()  # chain nodes are numbered by depth, so k == node k
    return verifier.law(draft, p, q)


def output_law(verifier, target: Model, draft_model: Model, L: int, drafting: DraftProcess | None = None,
               context=(), progress: bool | None = None, atol: float = OUTCOME_ATOL,
               check_needs: bool = True) -> OutputLaw:
    """Exact law of the string emitted by one iteration, by enumerating every draft.

    O(s) = sum_D Pr(D) sum_{outcomes (pi, v, d)} pi d(y) [s = path(v) y], over every draft D
    the process can produce (probability Pr(D)) and every outcome of the verifier on D: with
    probability pi keep the path to node v and emit y ~ d.  Every outcome list is validated
    (probabilities sum to 1 within ``atol``, ``accepted`` within the draft).

    Parameters: ``verifier`` (chain or tree protocol), ``target`` and ``draft_model``
    (:class:`~specsim.models.Model` over the same V), ``L`` (draft length / tree depth >= 1),
    ``drafting`` (default :func:`specsim.drafts.chain`), ``context`` (the prefix both models are
    conditioned on), ``progress`` (tqdm bar; ``None``: only on a terminal for large problems),
    ``atol``, ``check_needs`` (below).

    Returns: an :class:`OutputLaw`.  A process that guarantees none of the children laws the
    verifier needs (``Verifier.needs``, :func:`specsim.drafts.draft_laws`) is refused with a
    ``ValueError`` (:func:`specsim.verifiers.base.validate_applies`), here and in
    :func:`check_lossless` and :func:`expected_accepted`: off its contract a verifier's law
    certifies nothing about it.  ``check_needs=False`` computes it anyway, for the one question
    where that law is the point: what an engine that runs the verifier on such drafts emits (a
    design that drops drafted tokens by value, :func:`specsim.structure.check_policy_lossless`).

    >>> from specsim.exact import output_law
    >>> from specsim.models import iid, random_model
    >>> from specsim.verifiers import block
    >>> law = output_law(block, random_model(3, 0), random_model(3, 1), L=2)
    >>> round(sum(float(o.sum()) for o in law.emitted.values()), 12), round(law.expected_accepted, 6)
    (1.0, 0.34161)
    >>> round(output_law(block, iid([0.2, 0.8]), iid([0.2, 0.8]), L=2).expected_accepted, 12)  # q = p: all accepted
    2.0
    """
    L = validate_model_pair(target, draft_model, L)
    verifier = as_verifier(verifier)
    drafting = _check_drafting(drafting)
    if check_bool(check_needs, "check_needs"):
        validate_applies(verifier, drafting)  # a law off the verifier's contract certifies nothing
    atol = check_real(atol, "atol", 0.0, 1.0)
    if progress is not None:
        check_bool(progress, "progress")
    target, draft_model = target.shifted(context), draft_model.shifted(context)
    V = target.V
    emitted = EmittedLaw(V, L)
    depth_mass = np.zeros(L + 1)
    items = drafting.enumerate(target, draft_model, L)
    if progress or (progress is None and V ** L > 20000 and sys.stderr.isatty()):
        from tqdm.auto import tqdm
        items = tqdm(items, desc=f"enumerating drafts ({verifier.name})", leave=False)
    batch, rule = verifier.batch_law, verifier.node_rule
    path = verifier.path_model(target, draft_model, L, drafting) if verifier.path_model is not None else None
    if (verifier.kind == "chain" and verifier.process_law is not None and  # prefix-shared, level by level
            (n := verifier.process_law(drafting, target, draft_model, L, emitted, depth_mass)) is not None):
        pass
    elif verifier.kind == "chain" and batch is not None and hasattr(drafting, "arrays"):
        n = _accumulate_batch(batch, drafting.arrays(target, draft_model, L), emitted, depth_mass, atol)
    elif path is not None:
        n = _accumulate_batch(path[0].batch_law, path[1], emitted, depth_mass, atol)
    elif rule is not None and hasattr(drafting, "node_options"):
        n = _accumulate_nodewise(rule, drafting, target, draft_model, L, emitted, depth_mass)
    elif (verifier.process_law is not None and
          (n := verifier.process_law(drafting, target, draft_model, L, emitted, depth_mass)) is not None):
        pass
    elif verifier.kind == "tree" and batch is not None:
        n = _accumulate_shape_groups(verifier, items, emitted, depth_mass, V, atol)
    else:
        n = _accumulate_trees(verifier, items, emitted, depth_mass, V, atol)
    return OutputLaw(V, L, emitted, _survival(depth_mass, emitted, verifier, drafting, atol), n)


def _survival(depth_mass, emitted, verifier, drafting, atol) -> np.ndarray:
    """P(tau >= d) from P(tau = d), after checking the law it came from: finite, total mass 1
    within ``atol``; rounding is clipped so the result is non-increasing in [0, 1]."""
    flat = flat_law(emitted)
    if not (np.isfinite(depth_mass).all() and
            (np.isfinite(flat).all() if flat is not None else all(np.isfinite(o).all() for o in emitted.values()))):
        raise ValueError(f"verifier {verifier.name!r} on drafting {_name(drafting)!r}: "
                         "the output law has non-finite entries")
    total = float(depth_mass.sum())
    if abs(total - 1.0) > atol:
        raise ValueError(f"verifier {verifier.name!r} on drafting {_name(drafting)!r}: "
                         f"the output law sums to {total!r}, not 1 (tolerance {atol:g})")
    at_least = np.cumsum(np.maximum(depth_mass, 0.0)[::-1])[::-1]
    return np.clip(at_least / at_least[0], 0.0, 1.0)


def _accumulate_trees(verifier, items, emitted, depth_mass, V, atol) -> int:
    """O[path(v) y] += Pr(D) pi d(y) over every enumerated tree D and outcome (pi, v, d)."""
    rows: dict[int, list] = {m: [] for m in emitted}
    n = 0
    total = 0.0
    for prob, tree in items:
        n += 1
        total += prob
        outs = outcomes_on_tree(verifier, tree)
        where = f" (draft tree tokens {tree.tokens}, parents {tree.parent})"
        validate_outcomes(outs, tree.num_nodes, V, where, atol)
        for o in outs:
            if o.prob <= 0:
                continue
            d = tree.depth[o.accepted]
            w = prob * o.prob
            depth_mass[d] += w
            rows[d + 1].append((tree.path_index[o.accepted], w, o.next_dist))
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"draft process enumerated total probability {total!r}, not 1")
    for m, entries in rows.items():
        if entries:
            idx = np.array([e[0] for e in entries])
            contrib = np.array([e[1] for e in entries])[:, None] * np.array([e[2] for e in entries])
            np.add.at(emitted[m].reshape(-1, V), idx, contrib)
    return n


#: Trees per shape group handed to a tree verifier's ``batch_law`` at once (bounds the memory).
SHAPE_GROUP_SIZE = 4096


def _accumulate_shape_groups(verifier, items, emitted, depth_mass, V, atol) -> int:
    """The per-tree accumulation with the verifier's law vectorised over trees of one shape:
    trees are grouped by :attr:`specsim.drafts.DraftTree.shape` and each group of up to
    :data:`SHAPE_GROUP_SIZE` trees goes through ``batch_law`` in one call.  Same sum, same checks."""
    groups: dict[tuple, list] = {}
    n, total = 0, 0.0
    for prob, tree in items:
        n += 1
        total += prob
        group = groups.setdefault(tree.shape, [])
        group.append((prob, tree))
        if len(group) >= SHAPE_GROUP_SIZE:
            _flush_shape_group(verifier, group, emitted, depth_mass, V, atol)
            group.clear()
    for group in groups.values():
        if group:
            _flush_shape_group(verifier, group, emitted, depth_mass, V, atol)
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"draft process enumerated total probability {total!r}, not 1")
    return n


def _flush_shape_group(verifier, group, emitted, depth_mass, V, atol) -> None:
    """O[path(u) y] += Q(D) P(stop at u) d_u(y) for the trees D of one shape group."""
    rep = group[0][1]
    n = rep.num_nodes
    where = lambda t: f"(draft tree tokens {t.tokens}, parents {t.parent})"  # noqa: E731
    for _, t in group:
        if t.p.shape != (n, V) or t.q.shape != (n, V) or len(t.tokens) != n:
            raise ValueError(f"verifier {verifier.name}: {where(t)[1:-1]} has p {t.p.shape}, "
                             f"q {t.q.shape} and {len(t.tokens)} tokens, but its shape group has {n} nodes "
                             f"over V = {V}")
    Q = np.array([prob for prob, _ in group])
    tokens = np.array([t.tokens for _, t in group], dtype=np.int64)
    probs, dists = verifier.batch_law(rep, tokens, np.stack([t.p for _, t in group]),
                                      np.stack([t.q for _, t in group]))
    N = len(group)
    if np.shape(probs) != (N, n) or np.shape(dists) != (N, n, V):
        raise ValueError(f"verifier {verifier.name}: batch_law returned arrays of shapes {np.shape(probs)} and "
                         f"{np.shape(dists)}, expected {(N, n)} and {(N, n, V)} for the shape group of the "
                         f"draft tree {where(rep)[1:-1]}")
    bad = ~np.isfinite(probs).all(axis=1) | (probs < -atol).any(axis=1) | (np.abs(probs.sum(axis=1) - 1) > atol)
    live = probs > 0
    bad |= (live & ((np.abs(dists.sum(axis=2) - 1) > 1e-6) | (dists < -atol).any(axis=2)
                    | ~np.isfinite(dists).all(axis=2))).any(axis=1)
    if bad.any():
        t = group[int(np.flatnonzero(bad)[0])][1]
        k = int(np.flatnonzero(bad)[0])
        raise ValueError(f"verifier {verifier.name}: batch_law is not a distribution over outcomes "
                         f"(P(stop at node u) = {probs[k].tolist()}, summing to {float(probs[k].sum())!r}) "
                         f"{where(t)}")
    code = np.zeros((N, n), dtype=np.int64)
    for u in range(1, n):
        code[:, u] = code[:, rep.parent[u]] * V + tokens[:, u]
    for u in range(n):
        w = Q * probs[:, u]
        d = rep.depth[u]
        depth_mass[d] += w.sum()
        np.add.at(emitted[d + 1].reshape(-1, V), code[:, u], w[:, None] * dists[:, u])


def _accumulate_batch(batch, arrays, emitted, depth_mass, atol) -> int:
    """The same accumulation for a chain verifier's vectorised law over all drafts at once."""
    drafts, Qx, p, q = arrays
    N, L = drafts.shape
    V = p.shape[2]
    probs, dists = batch(drafts, p, q)
    bad = ~np.isfinite(probs).all(axis=1) | (probs < -atol).any(axis=1) | (np.abs(probs.sum(axis=1) - 1) > atol)
    live = probs > 0
    bad |= (live & ((np.abs(dists.sum(axis=2) - 1) > 1e-6) | (dists < -atol).any(axis=2)
                    | ~np.isfinite(dists).all(axis=2))).any(axis=1)
    if bad.any():
        n = int(np.flatnonzero(bad)[0])
        raise ValueError(f"verifier law is not a distribution over outcomes (P(tau = k) = {probs[n].tolist()}) "
                         f"for draft {tuple(drafts[n].tolist())}")
    code = np.zeros(N, dtype=np.int64)
    cols = np.arange(V)
    for k in range(L + 1):
        w = Qx * probs[:, k]
        depth_mass[k] += w.sum()
        # bincount adds the weights in array order, as np.add.at would (same sums, bitwise, into
        # the still-zero emitted[k + 1]), at a fraction of its cost
        emitted[k + 1] += np.bincount((code[:, None] * V + cols).ravel(), (w[:, None] * dists[:, k]).ravel(),
                                      V ** (k + 1))
        if k < L:
            code = code * V + drafts[:, k]
    return N


def _accumulate_nodewise(rule, drafting, target: Model, draft_model: Model, L: int, emitted, depth_mass) -> int:
    """The same accumulation for a node-wise verifier on a process drawing each node's children
    independently: walk the node states (prefix, number of draws that reached it) level by level,
    merging the probability of reaching each state, instead of enumerating whole trees.

    A node reached with weight w and draws xs (probability px) emits its stop row with weight
    w px stop and passes w px P(descend to t) to child t; leaves (depth L or no draws) emit the
    bonus row p(.|path).  Exact, and equal to the per-tree sum by linearity.
    """
    V = target.V
    ptab, qtab = target.table(L), draft_model.table(L - 1)
    zero = np.zeros(V)
    level: dict[tuple[int, int], float] = {(0, 1): 1.0}
    evaluations = 0
    for d in range(L + 1):
        nxt: dict[tuple[int, int], float] = {}
        out = emitted[d + 1].reshape(-1, V)
        for (code, mult), w in level.items():
            options = drafting.node_options(qtab[d][code], mult, d, L) if d < L else []
            if not options or not options[0][0]:
                out[code] += w * ptab[d][code]
                depth_mass[d] += w
                continue
            if abs(sum(px for _, px in options) - 1.0) > 1e-9:
                raise ValueError(f"draft process {_name(drafting)}: node options at depth {d} sum to "
                                 f"{sum(px for _, px in options)!r}, not 1")
            for xs, px in options:
                evaluations += 1
                kids = tuple(dict.fromkeys(xs))
                # the node sits at its true depth below d placeholder ancestors: a rule may read
                # tree.depth[u] (rows, draws and depth of u are all it may read)
                star = DraftTree((-1,) + (0,) * d + kids, tuple(range(-1, d)) + (d,) * len(kids),
                                 np.vstack([ptab[d][code]] * (d + 1) + [ptab[d + 1][code * V + x] for x in kids]),
                                 np.vstack([qtab[d][code]] * (d + 1) + [zero] * len(kids)),
                                 ((0,),) * d + (xs,) + ((),) * len(kids), False)
                descend, stop, row = rule(star, d)
                if stop > 0:
                    out[code] += w * px * stop * np.asarray(row)
                    depth_mass[d] += w * px * stop
                for t, pr in descend.items():
                    if pr > 0:
                        key = (code * V + t, xs.count(t))
                        nxt[key] = nxt.get(key, 0.0) + w * px * pr
        level = nxt
    return evaluations


def completed_law(law: OutputLaw, target: Model) -> tuple[np.ndarray, np.ndarray]:
    """The completed law C(z) and the target law P(z) over z in V^{L+1} (docs/theory.md §2).

    C(z) = sum_{k=1}^{L+1} O(z^{1:k}) P(z^{k+1:L+1} | z^{1:k}): the law of the emitted string
    extended with target samples to length L+1, by the recursion A_1 = O_1,
    A_{m+1}(s t) = A_m(s) p(t|s) + O_{m+1}(s t); P(z) is ``target.joint(L + 1)``.

    Parameters: ``law`` (an :class:`OutputLaw`), ``target`` conditioned on the same context as
    ``law`` (``target.shifted(context)``).

    Returns: ``(C, P)``, two flat float64 arrays of length V^{L+1} indexed by base-V codes.

    >>> from specsim.exact import completed_law, output_law
    >>> from specsim.models import random_model
    >>> from specsim.verifiers import token
    >>> t, d = random_model(3, 0), random_model(3, 1)
    >>> C, P = completed_law(output_law(token, t, d, L=2), t)
    >>> C.shape, float(abs(C - P).max()) < 1e-15
    ((27,), True)
    """
    ptab = target.table(law.L)
    A = law.emitted[1].copy()
    for m in range(1, law.L + 1):
        A = (A[:, None] * ptab[m]).ravel() + law.emitted[m + 1]
    return A, target.joint(law.L + 1)


def check_lossless(verifier, target: Model, draft_model: Model, L: int, drafting: DraftProcess | None = None,
                   context=(), atol: float = LOSSLESS_ATOL, progress: bool | None = None,
                   check_needs: bool = True) -> Certificate:
    """Certify a verifier exactly: is max_z |C(z) - P(z)| <= atol over all z in V^{L+1}?

    C is the completed law of :func:`completed_law` and P the target's joint law of its first
    L+1 tokens; C = P for every target / draft pair is losslessness (docs/theory.md §2).  The
    float64 enumeration error is ~1e-15, hence the default ``atol`` = 1e-9.  Emitted mass on a
    string the target cannot emit fails with no tolerance (``Certificate.impossible_mass``): a
    lossless rule puts exactly 0 there (min(1, 0/q) = 0 and (0 - q)_+ = 0 in floating point).

    Parameters: ``verifier`` (chain or tree protocol), ``target`` and ``draft_model`` models over
    the same V, draft length / tree depth ``L`` (>= 1), ``drafting`` process (default
    :func:`specsim.drafts.chain`), the ``context`` to certify at (default the empty prefix),
    tolerance ``atol``, ``progress`` and ``check_needs`` (as in :func:`output_law`).

    Returns: a :class:`Certificate`.

    >>> from specsim.exact import check_lossless
    >>> from specsim.models import random_model
    >>> from specsim.verifiers import block, hsd_released
    >>> t, d = random_model(3, 0), random_model(3, 1)
    >>> cert = check_lossless(block, t, d, L=3)
    >>> cert.lossless, round(cert.block_efficiency, 6)
    (True, 1.434242)
    >>> check_lossless(hsd_released, t, d, L=3).lossless
    False
    """
    atol = check_real(atol, "atol", 0.0, 1.0)
    drafting = _check_drafting(drafting)
    law = output_law(verifier, target, draft_model, L, drafting, context, progress, check_needs=check_needs)
    V, target = target.V, target.shifted(context)
    impossible, impossible_string = _impossible_mass(law, target)
    err, worst, c_worst, p_worst = _completed_error(law, target)
    z = []
    code = worst
    for _ in range(L + 1):
        code, t = divmod(code, V)
        z.append(t)
    max_err, accepted = float(err[worst]), law.expected_accepted
    return Certificate(as_verifier(verifier).name, _name(drafting), V, L,
                       bool(max_err <= atol and impossible == 0.0), max_err,
                       0.5 * float(err.sum()), tuple(reversed(z)), c_worst, p_worst,
                       accepted, accepted + 1.0, law.accepted_at_least, atol, law.n_drafts,  # + 1: block_efficiency
                       impossible, impossible_string)


def _completed_error(law: OutputLaw, target: Model) -> tuple[np.ndarray, int, float, float]:
    """|C(z) - P(z)| over V^{L+1}, its argmax and C, P there (:func:`completed_law`).  With numba,
    when the law is the engine's one buffer, in one compiled pass (bit-identical) that overwrites
    the law's levels 2..L with the completed ones: only :func:`check_lossless`, which owns the
    law and is done with it, calls this."""
    L, V = law.L, law.V
    flat = flat_law(law.emitted) if _jit.enabled() else None
    if flat is not None and (V ** (L + 1) - 1) // (V - 1) <= _JIT_ROWS:
        from ._exact_kernels import completed_error
        start, rows, joint = _level_starts(V, L), target.stacked_table(L), target.joint(L + 1)
        err = np.empty(V ** (L + 1))
        completed_error(flat, rows, joint, start, L, V, err)
        worst = int(np.argmax(err))
        s, t = divmod(worst, V)  # C(s t) = A_L(s) p(t|s) + O(s t), the kernel's expression
        c = float(flat[start[L] - 1 + s]) * float(rows[start[L] + s, t]) + float(flat[start[L + 1] - 1 + worst])
        return err, worst, c, float(joint[worst])
    C, P = completed_law(law, target)
    err = np.abs(C - P)
    worst = int(np.argmax(err))
    return err, worst, float(C[worst]), float(P[worst])


def expected_accepted(verifier, target: Model, draft_model: Model, L: int, drafting: DraftProcess | None = None,
                      context=()) -> float:
    """E[tau] = sum_{d=1}^{L} P(tau >= d): accepted draft tokens per iteration (block efficiency - 1).

    Parameters: as :func:`output_law`.

    Returns: a ``float``, computed exactly from the :class:`OutputLaw`.

    >>> from specsim.exact import expected_accepted
    >>> from specsim.models import iid
    >>> from specsim.verifiers import token
    >>> expected_accepted(token, iid([0.5, 0.5]), iid([1.0, 0.0]), L=2)
    0.75
    """
    return output_law(verifier, target, draft_model, L, drafting, context).expected_accepted
