"""``assert_lossless``: property-based exact certification of a verifier.

For each example Hypothesis draws (a context-dependent target / draft pair, a draft length L and a
draft process), the exact engine computes the completed law
C(z) = sum_k O(z^{1:k}) P(z^{k+1:L+1} | z^{1:k}) and certifies max_z |C(z) - P(z)| <= atol
(docs/theory.md §2; :func:`specsim.exact.check_lossless`).  A failing example is shrunk by Hypothesis
to a small one (V = 3, L = 1 or 2, simple rows) and reported with the rows that matter.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from ..drafts import chain
from ..exact import LOSSLESS_ATOL, Certificate, check_lossless
from ..verifiers.base import OUTCOME_ATOL, Verifier, check_outcomes, verifier_kind
from .strategies import ModelPair, _as_strategy, draft_processes, model_pairs

__all__ = ["assert_lossless", "LossyVerifierError", "Case", "certify_case", "describe_failure", "tree_needs"]


@dataclass(frozen=True)
class Case:
    """One instance: a model pair, a draft length ``L`` and a draft process."""

    pair: ModelPair
    L: int
    drafting: object

    def __repr__(self) -> str:
        return f"Case({self.pair!r}, L={self.L}, drafting={getattr(self.drafting, 'name', self.drafting)!r})"


class LossyVerifierError(AssertionError):
    """Raised by :func:`assert_lossless`; ``case`` is the (shrunk) failing instance and
    ``certificate`` its exact certificate (``None`` when the verifier misbehaved instead)."""

    def __init__(self, message: str, case: Case, certificate: Certificate | None = None):
        super().__init__(message)
        self.case = case
        self.certificate = certificate


class _VerifierFault(Exception):
    """The verifier raised or returned an invalid outcome list on a specific draft."""


def _fmt(row) -> str:
    return "(" + ", ".join(f"{x:.6g}" for x in np.asarray(row, dtype=float)) + ")"


def _guarded(verifier, V: int) -> Verifier:
    """Wrap a verifier so exceptions and invalid outcome lists name the draft that caused them."""
    kind = verifier_kind(verifier)
    law = getattr(verifier, "law", verifier)
    name = getattr(verifier, "name", getattr(verifier, "__name__", type(verifier).__name__))

    def describe(args) -> str:
        if kind == "chain":
            draft, p, q = args
            rows = "\n".join(f"    p{i} = {_fmt(p[i])}" + (f"   q{i} = {_fmt(q[i])}" if i < len(draft) else "")
                             for i in range(len(draft) + 1))
            return f"draft {tuple(draft)} with rows\n{rows}"
        tree = args[0]
        return f"draft tree tokens={tree.tokens} parent={tree.parent}"

    def wrapped(*args):
        try:
            outs = law(*args)
        except Exception as exc:  # noqa: BLE001 - any exception is a finding about the verifier
            raise _VerifierFault(f"{name} raised {type(exc).__name__}: {exc}\n  on {describe(args)}") from exc
        n = len(args[0]) + 1 if kind == "chain" else args[0].num_nodes
        try:
            return check_outcomes(outs, n, V, atol=OUTCOME_ATOL)
        except ValueError as exc:
            raise _VerifierFault(f"{name} returned an invalid outcome list: {exc}\n  on {describe(args)}") from None

    return Verifier(name, wrapped, kind, None, getattr(verifier, "lossless", True))


def certify_case(verifier, case: Case, atol: float = LOSSLESS_ATOL) -> Certificate:
    """Exact certificate of ``verifier`` on one :class:`Case` (``_VerifierFault`` if it misbehaves)."""
    pair = case.pair
    return check_lossless(_guarded(verifier, pair.V), pair.target, pair.draft, case.L, case.drafting, atol=atol)


def describe_failure(cert: Certificate, case: Case) -> str:
    """Human-readable counterexample: the worst completed sequence z, C(z) vs P(z) and the target /
    draft rows along z (the rows the verifier saw when it drafted or emitted a prefix of z)."""
    z = cert.worst_sequence
    t, d = case.pair.target, case.pair.draft
    lines = [
        f"{cert.verifier} is not lossless: {case!r}",
        f"  V = {cert.V}, L = {cert.L}, drafting = {cert.drafting}",
        f"  completed sequence z = {z}: C(z) = {cert.completed:.9g} but target P(z) = {cert.target:.9g} "
        f"(C - P = {cert.completed - cert.target:+.3g}); max |C - P| = {cert.max_abs_error:.3g}, "
        f"TV(C, P) = {cert.tv:.3g}, atol = {cert.atol:g}",
        "  rows along z (p_k = target(.|z[:k]), q_k = draft(.|z[:k])):",
    ]
    for k in range(cert.L + 1):
        s = f"    p{k} = {_fmt(t(z[:k]))}"
        if k < cert.L:
            s += f"   q{k} = {_fmt(d(z[:k]))}"
        lines.append(s)
    return "\n".join(lines)


def tree_needs(verifier):
    """Children laws a tree verifier relies on: its ``needs`` attribute, else its entry in
    ``specsim.verifiers.tree.TREE_VERIFIERS``, else ``None`` (no known requirement)."""
    needs = getattr(verifier, "needs", None)
    if needs is not None:
        return frozenset(needs)
    try:
        from ..verifiers.tree import TREE_VERIFIERS
    except ImportError:
        return None
    for v, n in TREE_VERIFIERS.values():
        if v is verifier:
            return frozenset(n)
    return None


def _strategy_for(verifier, V, L, drafting, depth):
    kind = verifier_kind(verifier)
    if drafting is None:
        drafting = draft_processes("chain") if kind == "chain" else draft_processes("any", tree_needs(verifier))
    if L is None:
        L = st.integers(1, 3 if kind == "chain" else 2)
    if V is None:
        V = st.integers(3, 4) if kind == "chain" else st.just(3)
    drafting = _as_strategy(drafting)
    return st.builds(Case, model_pairs(V=V, depth=depth), _as_strategy(L), drafting)


def assert_lossless(verifier, *, V=None, L=None, drafting=None, depth=st.integers(1, 2),
                    max_examples: int = 60, atol: float = LOSSLESS_ATOL, derandomize: bool | None = None,
                    shrink: bool = True):
    """Assert max_z |C(z) - P(z)| <= atol on every instance Hypothesis draws (docs/theory.md §2).

    C(z) = sum_{k=1}^{L+1} O(z^{1:k}) P(z^{k+1:L+1} | z^{1:k}) is the law of the emitted block
    completed with target samples, computed exactly by :func:`specsim.exact.check_lossless`; the
    criterion follows the output format of Leviathan et al. (arXiv 2211.17192) and block
    verification (arXiv 2403.10444).  Defaults search V in {3, 4} (3 for tree verifiers),
    L in 1..3 (1..2 for trees), prefix-dependent pairs with degenerate rows
    (:func:`~specsim.testing.strategies.model_pairs`) and every applicable draft process: chain
    drafts for chain verifiers; for tree verifiers, the processes guaranteeing the children law the
    verifier needs (its ``needs`` attribute or its ``TREE_VERIFIERS`` entry; all processes when
    unknown, so pass ``drafting=`` for a verifier that assumes, say, i.i.d. children).

    Parameters: ``verifier`` (chain or tree protocol, a :class:`~specsim.verifiers.base.Verifier`
    or plain callable); ``V``, ``L``, ``drafting``, ``depth``: ints / processes or Hypothesis
    strategies; ``max_examples``; ``atol``; ``derandomize`` (``None``: the active profile's);
    ``shrink`` (``False`` reports the first failing instance unshrunk: faster, less readable).
    Raises :class:`LossyVerifierError` (an ``AssertionError``) with the shrunk counterexample: V,
    L, the rows along the worst sequence, C vs P.  A verifier that raises or returns an invalid
    outcome list (probabilities not summing to 1, ``accepted`` beyond the draft) is reported the
    same way with the draft that caused it.  Do not call it inside another ``@given`` test.

    >>> from specsim.verifiers import block
    >>> assert_lossless(block)
    """
    cases = _strategy_for(verifier, V, L, drafting, depth)
    kw = dict(max_examples=max_examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    if derandomize is not None:
        kw["derandomize"] = derandomize
    if not shrink:
        kw["phases"] = [p for p in Phase if p not in (Phase.shrink, Phase.explain)]

    @settings(**kw)
    @given(cases)
    def run(case):
        try:
            cert = certify_case(verifier, case, atol)
        except _VerifierFault as exc:
            raise LossyVerifierError(f"{exc}\n  instance: {case!r}", case) from None
        if not cert.lossless:
            raise LossyVerifierError(describe_failure(cert, case), case, cert)

    run()
