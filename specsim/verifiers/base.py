"""The verifier protocol: a draft in, its exact outcome law out (docs/theory.md §1).

A verifier maps a draft D to a finite list of outcomes (pi_j, v_j, d_j) with sum_j pi_j = 1:
with probability pi_j it keeps the accepted prefix v_j and emits one more token y ~ d_j, the
verifier's own randomness integrated out.  Its output law is then
O(s) = sum_D Pr(D) sum_j pi_j d_j(y) [s = path(v_j) y].

Chain verifiers take ``(draft, p, q)``: ``draft`` a tuple of L token ids, ``p`` float64
``[L+1, V]`` (``p[i] = target(.|draft[:i])``), ``q`` float64 ``[L, V]``
(``q[i] = draft_model(.|draft[:i])``), and ``accepted`` counts draft tokens.  Tree verifiers take
a :class:`specsim.drafts.DraftTree`, and ``accepted`` is a node id (0 = root = nothing accepted).
A chain is the tree with one path; the exact engine adapts chain verifiers to chain trees.

Every :class:`Verifier` is built by one of two decorators, :func:`chain_verifier` and
:func:`tree_verifier`; ``Verifier.needs`` says which draft processes it is valid for.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

import numpy as np

from .._sampling import draw_token
from .._validate import as_rows, check_rng, check_tokens
from ..drafts import DRAFT_LAWS, DraftTree, draft_laws

__all__ = ["Outcome", "Verifier", "chain_verifier", "tree_verifier", "NEED_TAGS", "meets_needs",
           "validate_applies", "as_verifier", "verifier_kind", "law_from_batch", "validate_outcomes", "sample_outcome",
           "validate_chain_inputs", "validate_faults"]

#: Tolerance on ``|sum(prob) - 1|`` for an outcome list and on each ``next_dist``.
OUTCOME_ATOL = 1e-9

#: Tags a verifier's ``needs`` may hold: the children laws of :data:`specsim.drafts.DRAFT_LAWS`
#: and ``"any"`` (valid on every draft process).
NEED_TAGS = frozenset(DRAFT_LAWS) | {"any"}

Kind = Literal["chain", "tree"]


@dataclass(frozen=True)
class Outcome:
    """One outcome of a verification: with probability ``prob`` keep the first ``accepted`` draft
    tokens (chain) or the root-to-node path of node ``accepted`` (tree), then emit one token
    y ~ ``next_dist``.

    Parameters: ``prob`` in [0, 1]; ``accepted`` an int; ``next_dist`` a float array [V].

    >>> import numpy as np
    >>> o = Outcome(0.25, 1, np.array([0.5, 0.5]))
    >>> o.prob, o.accepted, o == Outcome(0.25, 1, np.array([0.5, 0.5]))
    (0.25, 1, True)
    """

    prob: float
    accepted: int
    next_dist: np.ndarray = field(repr=False)

    def __eq__(self, other) -> bool:  # arrays make the generated __eq__ ambiguous
        return (isinstance(other, Outcome) and self.prob == other.prob
                and self.accepted == other.accepted and np.array_equal(self.next_dist, other.next_dist))

    __hash__ = None  # type: ignore[assignment]


def _as_needs(needs) -> frozenset[str]:
    """``needs`` as a frozenset of :data:`NEED_TAGS`; ``TypeError`` / ``ValueError`` otherwise."""
    if isinstance(needs, str) or not hasattr(needs, "__iter__"):
        raise TypeError(f"needs must be a collection of tags such as {{'iid'}}, got {needs!r}")
    tags = frozenset(needs)
    if not all(isinstance(t, str) for t in tags):
        raise TypeError(f"needs must hold strings, got {sorted(map(repr, tags))}")
    if not tags:
        raise ValueError(f"needs must name at least one of {sorted(NEED_TAGS)}")
    unknown = tags - NEED_TAGS
    if unknown:
        raise ValueError(f"unknown needs tag(s) {sorted(unknown)}; choose from {sorted(NEED_TAGS)}")
    if "any" in tags and len(tags) > 1:
        raise ValueError(f"needs {sorted(tags)}: 'any' already covers every draft process")
    return tags


def meets_needs(drafting, needs) -> bool:
    """Whether a draft process guarantees what a verifier needs.

    applies  <=>  "any" in needs  or  needs ∩ draft_laws(drafting) ≠ ∅: any one of the listed
    children laws suffices (:func:`specsim.drafts.draft_laws`).

    Parameters: ``drafting`` a draft process; ``needs`` a collection of :data:`NEED_TAGS`.

    Returns: ``bool``.

    >>> from specsim.drafts import chain, iid_paths, swor_tree
    >>> meets_needs(iid_paths(2), {"iid"}), meets_needs(swor_tree(2), {"iid"}), meets_needs(chain(), {"swor"})
    (True, False, True)
    """
    tags = _as_needs(needs)
    return "any" in tags or bool(tags & draft_laws(drafting))


def validate_faults(faults, known: dict, where: str) -> frozenset:
    """The ``faults=`` switch of a verifier family's private law: names from the family's
    documented ``known`` table (name -> what the fault does).  Faults exist only to build the
    known-broken verifiers of :mod:`specsim.testing.selftest.mutants`; ``ValueError`` names an
    unknown one.

    >>> from specsim.verifiers.nodewise import NODEWISE_FAULTS
    >>> sorted(validate_faults(("stale_residual",), NODEWISE_FAULTS, "nodewise"))
    ['stale_residual']
    """
    faults = frozenset((faults,) if isinstance(faults, str) else faults)
    unknown = sorted(faults - set(known))
    if unknown:
        raise ValueError(f"{where}: unknown fault(s) {unknown}; the documented ones are {sorted(known)}")
    return faults


def validate_applies(verifier: "Verifier", drafting) -> None:
    """``ValueError`` unless ``drafting`` guarantees one of the children laws ``verifier`` needs.

    A verifier's exact law is only the algorithm's law on drafts drawn as it assumes: run on
    another process it can come out lossy (gbv, which needs i.i.d. full paths, on a
    without-replacement tree) or lossless by luck, and neither says anything about the verifier.
    The engine (:func:`specsim.exact.output_law` and what calls it, :func:`specsim.montecarlo.estimate`)
    therefore refuses the pair instead of certifying it.

    Parameters: ``verifier`` a :class:`Verifier`; ``drafting`` a draft process.

    Returns: ``None``; the ``ValueError`` names the verifier, the process, the laws the verifier
    needs and those the process guarantees.

    >>> from specsim.drafts import iid_paths, swor_tree
    >>> from specsim.verifiers import gbv
    >>> validate_applies(gbv, iid_paths(2))
    >>> validate_applies(gbv, swor_tree(2))
    Traceback (most recent call last):
    ...
    ValueError: verifier 'gbv' does not apply to draft process 'swor_tree(2)': it needs one of the children laws ['paths'], which the process does not guarantee (it guarantees ['swor']); specsim.verifiers.verifiers_for(process) lists the verifiers that apply
    """
    if meets_needs(drafting, verifier.needs):
        return
    laws = draft_laws(drafting)
    have = (f"it guarantees {sorted(laws)}" if laws else
            "it guarantees none: a process declares the children laws it guarantees in a `laws` attribute")
    name = getattr(drafting, "name", type(drafting).__name__)
    raise ValueError(f"verifier {verifier.name!r} does not apply to draft process {name!r}: it needs one of the "
                     f"children laws {sorted(verifier.needs)}, which the process does not guarantee ({have}); "
                     f"specsim.verifiers.verifiers_for(process) lists the verifiers that apply")


@dataclass(frozen=True, kw_only=True)
class Verifier:
    """A named verifier: its exact outcome law and what it needs of the draft process.

    ``law(draft, p, q)`` (chain) or ``law(tree)`` (tree) returns the outcomes (pi_j, v_j, d_j)
    with sum_j pi_j = 1 (module docstring); calling the verifier validates chain arguments and
    evaluates ``law``.  Build verifiers with :func:`chain_verifier` / :func:`tree_verifier`.

    Fields: ``name``; ``law``; ``kind`` (``"chain"`` or ``"tree"``); ``needs`` (frozenset of
    :data:`NEED_TAGS`: the draft process must guarantee one of them; chain verifiers need
    ``{"chain"}``); ``sampler`` (optional: the algorithm run with explicit uniforms, same
    arguments plus ``rng``, returning ``(accepted, token)``); ``lossless`` (the claim: ``False``
    for documented negative controls and lossy rules); ``doc``; ``batch_law`` (chain only,
    optional: the law vectorised over N drafts, ``(drafts int[N, L], p [N, L+1, V], q [N, L, V])
    -> (P(tau = k) [N, L+1], emitted token's law given tau = k [N, L+1, V])``; tree, optional: the
    law vectorised over N trees of one shape (:attr:`specsim.drafts.DraftTree.shape`),
    ``(tree, tokens int[N, n], p [N, n, V], q [N, n, V]) -> (P(stop at node u) [N, n], emitted law
    at u [N, n, V])``, ``tree`` one tree of the group standing for the shape; both used by the
    exact engine); ``node_rule`` (tree only, optional: ``node_rule(tree, u) -> ({child token:
    P(descend)}, P(stop at u), law emitted on stopping)`` reading only node u's rows, draws and depth,
    which lets the engine sum over draft trees node by node); ``path_model`` (tree only,
    optional: ``path_model(target, draft_model, L, drafting)`` returns ``(chain verifier,
    (drafts [N, L], Q [N], p [N, L+1, V], q [N, L, V]))`` when, on that process, the verifier's
    law is the chain verifier's on one path of law Q verified with rows q, else ``None``);
    ``process_law`` (optional: ``process_law(drafting, target, draft_model, L, emitted,
    depth_mass)`` adds the verifier's whole output law on that process into the engine's
    accumulators by a summation of the verifier's own (over node states for a tree verifier,
    over prefixes level by level for a chain verifier, which the engine then prefers to
    ``batch_law``) and returns the number of evaluations (drafts, for a chain verifier), or
    returns ``None`` when it does not apply to the process).

    Returns (calling it): ``list[Outcome]``; :meth:`sample` returns ``(accepted, token)``.

    >>> import numpy as np
    >>> from specsim.verifiers import token
    >>> p, q = np.full((2, 2), 0.5), np.array([[0.25, 0.75]])
    >>> [(round(o.prob, 4), o.accepted) for o in token((1,), p, q)]
    [(0.3333, 0), (0.6667, 1)]
    >>> token.kind, sorted(token.needs), token.lossless
    ('chain', ['chain'], True)
    """

    name: str
    law: Callable[..., list[Outcome]]
    kind: Kind
    needs: frozenset[str]
    sampler: Callable[..., tuple[int, int]] | None = None
    lossless: bool = True
    doc: str = ""
    batch_law: Callable[..., tuple[np.ndarray, np.ndarray]] | None = field(default=None, repr=False)
    node_rule: Callable[..., tuple[dict, float, np.ndarray]] | None = field(default=None, repr=False)
    path_model: Callable[..., tuple | None] | None = field(default=None, repr=False)
    process_law: Callable[..., int | None] | None = field(default=None, repr=False)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"name must be a non-empty string, got {self.name!r}")
        if not callable(self.law):
            raise TypeError(f"law of verifier {self.name!r} must be callable, got {self.law!r}")
        if self.kind not in ("chain", "tree"):
            raise ValueError(f"kind must be 'chain' or 'tree', got {self.kind!r}")
        needs = _as_needs(self.needs)
        if self.kind == "chain" and needs != {"chain"}:
            raise ValueError(f"chain verifier {self.name!r} runs on the chain process: needs must be "
                             f"{{'chain'}}, got {sorted(needs)}")
        object.__setattr__(self, "needs", needs)
        for attr in ("sampler", "batch_law", "node_rule", "path_model", "process_law"):
            value = getattr(self, attr)
            if value is not None and not callable(value):
                raise TypeError(f"{attr} of verifier {self.name!r} must be callable or None, got {value!r}")
        for attr in ("node_rule", "path_model"):
            if getattr(self, attr) is not None and self.kind != "tree":
                raise ValueError(f"{attr} is for tree verifiers; {self.name!r} is a chain verifier")
        if not isinstance(self.lossless, bool):
            raise TypeError(f"lossless must be True or False, got {self.lossless!r}")

    def _arguments(self, args) -> tuple:
        if self.kind == "chain":
            if len(args) != 3:
                raise TypeError(f"chain verifier {self.name!r} takes (draft, p, q), got {len(args)} arguments")
            return validate_chain_inputs(*args)
        if len(args) != 1 or not isinstance(args[0], DraftTree):
            raise TypeError(f"tree verifier {self.name!r} takes one specsim.drafts.DraftTree, got "
                            f"{', '.join(type(a).__name__ for a in args) or 'no arguments'}")
        return args

    def __call__(self, *args) -> list[Outcome]:
        """Exact law; the arguments are validated first (the engine calls ``law`` directly)."""
        return self.law(*self._arguments(args))

    def sample(self, *args, rng: np.random.Generator) -> tuple[int, int]:
        """One verification with fresh randomness ``rng`` (a ``numpy.random.Generator``):
        ``(accepted, emitted token)``."""
        args = self._arguments(args)
        check_rng(rng)
        if self.sampler is not None:
            return self.sampler(*args, rng=rng)
        return sample_outcome(self.law(*args), rng)

    def applies_to(self, drafting) -> bool:
        """Whether ``drafting`` guarantees what this verifier needs (:func:`meets_needs`)."""
        return meets_needs(drafting, self.needs)

    def __repr__(self) -> str:
        return f"Verifier({self.name!r}, kind={self.kind!r}, lossless={self.lossless})"


def law_from_batch(batch, draft, p, q) -> list[Outcome]:
    """The per-draft outcome list of a batched chain law, evaluated at N = 1.

    Outcome k = (P(tau = k), k, law of the emitted token given tau = k) for k = 0..L, with the
    outcomes of probability 0 dropped.

    Parameters: ``batch`` a batched law (see :class:`Verifier`, ``batch_law``); ``draft``, ``p``,
    ``q`` in the chain protocol (trusted).

    Returns: ``list[Outcome]``.

    >>> import numpy as np
    >>> def reject_all(drafts, p, q):
    ...     probs = np.zeros((len(drafts), drafts.shape[1] + 1)); probs[:, 0] = 1.0
    ...     return probs, p
    >>> p, q = np.full((2, 2), 0.5), np.full((1, 2), 0.5)
    >>> [(o.prob, o.accepted) for o in law_from_batch(reject_all, (0,), p, q)]
    [(1.0, 0)]
    """
    probs, dists = batch(np.asarray(draft, dtype=np.int64)[None], p[None], q[None])
    return [Outcome(float(pr), k, d) for k, (pr, d) in enumerate(zip(probs[0], dists[0])) if pr > 0]


def _doc(fn, doc) -> str:
    if doc is not None and not isinstance(doc, str):
        raise TypeError(f"doc must be a string or None, got {doc!r}")
    return (doc if doc is not None else getattr(fn, "__doc__", None) or "").strip()


def chain_verifier(name: str, *, lossless: bool = True, sampler=None, batched: bool = False,
                   doc: str | None = None, cls: type[Verifier] = Verifier, **fields):
    """Decorator: a chain :class:`Verifier` from its exact law (``needs`` = ``{"chain"}``).

    Decorate either the per-draft law ``fn(draft, p, q) -> list[Outcome]`` or, with
    ``batched=True``, the batched law ``fn(drafts [N, L], p [N, L+1, V], q [N, L, V]) ->
    (P(tau = k) [N, L+1], emitted law [N, L+1, V])``; the per-draft law is then that function at
    N = 1 (:func:`law_from_batch`), so the two cannot disagree.

    Parameters: ``name``; ``lossless`` (the claim); ``sampler(draft, p, q, rng) -> (accepted,
    token)`` (optional); ``batched``; ``doc`` (default: the function's docstring); ``cls`` a
    :class:`Verifier` subclass and ``fields`` its extra fields (e.g. ``LossyVerifier``'s ``rule``).

    Returns: a decorator turning the law into a ``cls`` instance.

    >>> import numpy as np
    >>> from specsim.verifiers.base import Outcome, chain_verifier
    >>> @chain_verifier("always_reject")
    ... def always_reject(draft, p, q):
    ...     '''Reject x_1 and emit y ~ p_0: lossless, accepts nothing.'''
    ...     return [Outcome(1.0, 0, p[0])]
    >>> always_reject.kind, sorted(always_reject.needs), always_reject.doc[:9]
    ('chain', ['chain'], 'Reject x_')
    >>> @chain_verifier("reject_batch", batched=True)
    ... def reject_batch(drafts, p, q):
    ...     probs = np.zeros((len(drafts), drafts.shape[1] + 1)); probs[:, 0] = 1.0
    ...     return probs, p
    >>> [(o.prob, o.accepted) for o in reject_batch((0,), np.full((2, 2), 0.5), np.full((1, 2), 0.5))]
    [(1.0, 0)]
    """
    if not isinstance(batched, bool):
        raise TypeError(f"batched must be True or False, got {batched!r}")

    def wrap(fn) -> Verifier:
        if not callable(fn):
            raise TypeError(f"chain_verifier({name!r}) decorates a law function, got {fn!r}")
        if batched:
            def law(draft, p, q):
                return law_from_batch(fn, draft, p, q)
            law.__name__ = law.__qualname__ = f"{getattr(fn, '__name__', name)}_per_draft"
        else:
            law = fn
        return cls(name=name, law=law, kind="chain", needs=frozenset({"chain"}), sampler=sampler,
                   lossless=lossless, doc=_doc(fn, doc), batch_law=fn if batched else None, **fields)
    return wrap


def tree_verifier(name: str, *, needs=frozenset({"any"}), lossless: bool = True, sampler=None,
                  node_rule=None, batch_law=None, path_model=None, process_law=None, doc: str | None = None):
    """Decorator: a tree :class:`Verifier` from its exact law ``fn(tree) -> list[Outcome]``.

    ``needs`` lists the children laws (:data:`NEED_TAGS`) of which the draft process must
    guarantee one; the default ``{"any"}`` claims validity on every process.

    Parameters: ``name``; ``needs``; ``lossless`` (the claim); ``sampler(tree, rng) ->
    (node, token)`` (optional); ``node_rule(tree, u) -> (descend, stop, row)`` (optional, for
    node-wise schemes: see :class:`Verifier`); ``batch_law(tree, tokens, p, q) -> (probs, dists)``
    (optional: the law over N trees of one shape, which the engine calls once per shape group;
    the per-tree law stays the reference it is tested against); ``path_model(target,
    draft_model, L, drafting)`` (optional: the verifier as a chain verifier on one path, see
    :class:`Verifier`); ``process_law(drafting, target, draft_model, L, emitted, depth_mass)``
    (optional: the verifier's own exact summation over a process, see :class:`Verifier`);
    ``doc`` (default: the function's docstring).

    Returns: a decorator turning the law into a tree :class:`Verifier`.

    >>> from specsim import check_lossless, random_model
    >>> from specsim.drafts import iid_paths
    >>> from specsim.verifiers.base import Outcome, tree_verifier
    >>> @tree_verifier("root_only")
    ... def root_only(tree):
    ...     '''Accept nothing and emit y ~ p(.|root): lossless on every process.'''
    ...     return [Outcome(1.0, 0, tree.p[0])]
    >>> check_lossless(root_only, random_model(3, 0), random_model(3, 1), 1, iid_paths(2)).lossless
    True
    """
    def wrap(fn) -> Verifier:
        if not callable(fn):
            raise TypeError(f"tree_verifier({name!r}) decorates a law function, got {fn!r}")
        return Verifier(name=name, law=fn, kind="tree", needs=needs, sampler=sampler, lossless=lossless,
                        doc=_doc(fn, doc), node_rule=node_rule, batch_law=batch_law, path_model=path_model,
                        process_law=process_law)
    return wrap


def _accepts_three_positional(fn) -> bool | None:
    """Whether ``fn(draft, p, q)`` binds, from its signature; ``None`` when it has none to read
    (some builtins), which is left to the call."""
    import inspect

    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(None, None, None)
    except TypeError:
        return False
    return True


def _positional_count(fn) -> str:
    import inspect

    params = [p for p in inspect.signature(fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return f"{len(params)} argument{'s' if len(params) != 1 else ''}"


def as_verifier(obj) -> Verifier:
    """``obj`` as a :class:`Verifier`: itself, or a plain callable ``fn(draft, p, q)`` as the chain
    verifier it implements (plain callables are chain verifiers by protocol).

    A plain callable whose signature cannot take ``(draft, p, q)`` (a tree law ``fn(tree)`` handed
    over without :func:`tree_verifier`, for one) is refused here, before the engine calls it.

    Parameters: ``obj`` a :class:`Verifier` or a callable.

    Returns: a :class:`Verifier`; ``TypeError`` for anything else, naming the callable and how to
    declare a tree verifier.

    >>> from specsim.verifiers.base import Outcome
    >>> as_verifier(lambda draft, p, q: [Outcome(1.0, 0, p[0])]).kind
    'chain'
    >>> def root_only(tree):
    ...     return [Outcome(1.0, 0, tree.p[0])]
    >>> as_verifier(root_only)
    Traceback (most recent call last):
    ...
    TypeError: verifier root_only is a plain callable of 1 argument, but a plain callable is taken as a chain verifier law fn(draft, p, q); declare a tree verifier law fn(tree) with the decorator @tree_verifier(name, needs={...}) (specsim.verifiers.tree_verifier), or a chain law with @chain_verifier(name)
    """
    if isinstance(obj, Verifier):
        return obj
    if not callable(obj):
        raise TypeError(f"verifier must be a Verifier or a callable law, got {type(obj).__name__}")
    name = getattr(obj, "__name__", type(obj).__name__)
    if _accepts_three_positional(obj) is False:
        raise TypeError(f"verifier {name} is a plain callable of {_positional_count(obj)}, but a plain callable is "
                        f"taken as a chain verifier law fn(draft, p, q); declare a tree verifier law fn(tree) with "
                        f"the decorator @tree_verifier(name, needs={{...}}) (specsim.verifiers.tree_verifier), "
                        f"or a chain law with @chain_verifier(name)")
    return chain_verifier(name)(obj)


def verifier_kind(verifier) -> Kind:
    """``verifier.kind`` for a :class:`Verifier`, ``"chain"`` for a plain callable.

    Parameters: ``verifier`` a :class:`Verifier` or a callable.

    Returns: ``"chain"`` or ``"tree"``.

    >>> from specsim.verifiers import block, sequoia
    >>> verifier_kind(block), verifier_kind(sequoia), verifier_kind(print)
    ('chain', 'tree', 'chain')
    """
    return verifier.kind if isinstance(verifier, Verifier) else "chain"


def validate_outcomes(outcomes, n_accept: int, V: int, where: str = "",
                   atol: float = OUTCOME_ATOL) -> list[Outcome]:
    """Validate an outcome list: ``ValueError`` naming the problem and the input ``where``.

    Requires 0 <= accepted < ``n_accept``; every prob finite and >= -atol with
    |sum prob - 1| <= atol; every ``next_dist`` of positive weight a distribution over V tokens.

    Parameters: ``outcomes``; ``n_accept`` (L + 1 for a chain, the node count for a tree); ``V``;
    ``where`` (appended to messages); ``atol``.

    Returns: the outcomes as a ``list[Outcome]``.

    >>> import numpy as np
    >>> len(validate_outcomes([Outcome(1.0, 0, np.array([0.5, 0.5]))], 2, 2))
    1
    >>> validate_outcomes([Outcome(0.9, 0, np.array([0.5, 0.5]))], 2, 2)
    Traceback (most recent call last):
    ...
    ValueError: outcome probabilities sum to 0.9, not 1
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
    """Draw ``(accepted, token)`` from an exact outcome law: j ~ pi, then y ~ d_j.

    Both draws are :func:`specsim._sampling.draw_token` (inverse CDF, one uniform each).

    Parameters: ``outcomes`` a valid outcome list; ``rng`` a ``numpy.random.Generator``.

    Returns: ``(accepted, token)``, both ``int``.

    >>> import numpy as np
    >>> sample_outcome([Outcome(1.0, 2, np.array([0.0, 1.0]))], np.random.default_rng(0))
    (2, 1)
    """
    j = draw_token([o.prob for o in outcomes], rng)
    return outcomes[j].accepted, draw_token(outcomes[j].next_dist, rng)


def validate_chain_inputs(draft, p, q) -> tuple[tuple[int, ...], np.ndarray, np.ndarray]:
    """Check a chain verifier's arguments under the input contract of docs/design.md: L >= 1
    integer tokens, p [L+1, V] and q [L, V] rows of distributions (V >= 2; float16 to float64,
    each row renormalised once in float64), each token in 0..V-1 with q_i(x_i) > 0 (it was drawn
    from q).

    Parameters: ``draft`` (integer token ids), ``p``, ``q``.

    Returns: ``(draft as a tuple of int, p, q as renormalised float64 arrays)``; ``TypeError``
    for a non-integer token, ``ValueError`` naming the problem otherwise.

    >>> import numpy as np
    >>> validate_chain_inputs([1], np.full((2, 2), 0.5), [[0.5, 0.5]])[0]
    (1,)
    >>> validate_chain_inputs([1], np.full((2, 2), 0.5), [[1.0, 0.0]])
    Traceback (most recent call last):
    ...
    ValueError: draft token 1 at position 0 has draft probability q = 0: it cannot have been drawn from q
    """
    p = as_rows(p, "p")
    V = p.shape[1]
    draft = check_tokens(draft, "draft", V)
    L = len(draft)
    if L < 1:
        raise ValueError("draft must have at least one token (L >= 1)")
    if p.shape[0] != L + 1:
        raise ValueError(f"p must have shape [L+1, V] = [{L + 1}, V], got {p.shape}")
    if V < 2:
        raise ValueError(f"vocabulary size must be >= 2, got {V}")
    q = as_rows(q, "q", (L, V))
    for i, t in enumerate(draft):
        if q[i, t] <= 0:
            raise ValueError(f"draft token {t} at position {i} has draft probability q = 0: "
                             "it cannot have been drawn from q")
    return draft, p, q
