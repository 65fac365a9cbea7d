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

from .._validate import check_bool, check_int, check_real
from ..drafts import chain
from ..exact import LOSSLESS_ATOL, Certificate, check_lossless
from ..verifiers.base import OUTCOME_ATOL, Verifier, as_verifier, chain_verifier, validate_outcomes, tree_verifier
from .strategies import ModelPair, _as_strategy, draft_processes, model_pairs

__all__ = ["assert_lossless", "assert_sampler_lossless", "LossyVerifierError", "InconclusiveCheckError", "Case", "certify_case",
           "describe_failure", "tree_needs"]


@dataclass(frozen=True)
class Case:
    """One instance of :func:`assert_lossless`: a :class:`~specsim.testing.strategies.ModelPair`,
    a draft length / tree depth ``L`` and a draft process ``drafting``.

    >>> from specsim.drafts import chain
    >>> from specsim.models import random_model
    >>> from specsim.testing.assertions import Case
    >>> from specsim.testing.strategies import ModelPair
    >>> Case(ModelPair(random_model(3, 0), random_model(3, 1), 3, None, seed=(0, 1)), 2, chain())
    Case(ModelPair(V=3, random_model seeds=(0, 1)), L=2, drafting='chain')
    """

    pair: ModelPair
    L: int
    drafting: object

    def __repr__(self) -> str:
        return f"Case({self.pair!r}, L={self.L}, drafting={getattr(self.drafting, 'name', self.drafting)!r})"


class LossyVerifierError(AssertionError):
    """Raised by :func:`assert_lossless` (an ``AssertionError``); ``case`` is the (shrunk) failing
    :class:`Case` and ``certificate`` its exact :class:`~specsim.exact.Certificate` (``None`` when
    the verifier raised or returned an invalid outcome list instead, and from
    :func:`assert_sampler_lossless`, whose failing :class:`~specsim.testing.SamplerCheck` is
    ``check``; ``None`` otherwise).

    >>> from specsim.testing import LossyVerifierError, assert_lossless
    >>> from specsim.verifiers import hsd_released
    >>> try:
    ...     assert_lossless(hsd_released, max_examples=20, derandomize=True, shrink=False)
    ... except LossyVerifierError as err:
    ...     print(err.certificate.lossless, err.certificate.max_abs_error > 1e-6)
    False True
    """

    def __init__(self, message: str, case: Case, certificate: Certificate | None = None, check=None):
        super().__init__(message)
        self.case = case
        self.certificate = certificate
        self.check = check


class InconclusiveCheckError(AssertionError):
    """Raised by :func:`assert_sampler_lossless` when a check was INCONCLUSIVE (too few samples for
    the stated power; never a pass); ``check`` is the :class:`~specsim.testing.SamplerCheck`."""

    def __init__(self, message: str, check=None):
        super().__init__(message)
        self.check = check


class _VerifierFault(Exception):
    """The verifier raised or returned an invalid outcome list on a specific draft."""


def _fmt(row) -> str:
    return "(" + ", ".join(f"{x:.6g}" for x in np.asarray(row, dtype=float)) + ")"


def _guarded(verifier, V: int) -> Verifier:
    """Wrap a verifier so exceptions and invalid outcome lists name the draft that caused them."""
    verifier = as_verifier(verifier)
    kind, law, name = verifier.kind, verifier.law, verifier.name

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
            return validate_outcomes(outs, n, V, atol=OUTCOME_ATOL)
        except ValueError as exc:
            raise _VerifierFault(f"{name} returned an invalid outcome list: {exc}\n  on {describe(args)}") from None

    if kind == "chain":
        return chain_verifier(name, lossless=verifier.lossless)(wrapped)
    return tree_verifier(name, needs=verifier.needs, lossless=verifier.lossless)(wrapped)


def certify_case(verifier, case: Case, atol: float = LOSSLESS_ATOL) -> Certificate:
    """Exact certificate (max_z |C(z) - P(z)| <= atol, :func:`specsim.exact.check_lossless`) of
    ``verifier`` on one :class:`Case`, the verifier's outcome lists validated on every draft.

    Parameters: ``verifier`` (chain or tree protocol), ``case``, ``atol``.

    Returns: a :class:`~specsim.exact.Certificate`; raises ``_VerifierFault`` (naming the draft)
    when the verifier raises or returns an invalid outcome list.

    >>> from specsim.drafts import chain
    >>> from specsim.models import random_model
    >>> from specsim.testing.assertions import Case, certify_case
    >>> from specsim.testing.strategies import ModelPair
    >>> from specsim.verifiers import block
    >>> pair = ModelPair(random_model(3, 0), random_model(3, 1), 3, None, seed=(0, 1))
    >>> certify_case(block, Case(pair, 2, chain())).lossless
    True
    """
    if not isinstance(case, Case):
        raise TypeError(f"case must be a specsim.testing.assertions.Case, got {type(case).__name__}")
    atol = check_real(atol, "atol", 0.0, 1.0)
    pair = case.pair
    return check_lossless(_guarded(verifier, pair.V), pair.target, pair.draft_model, case.L, case.drafting, atol=atol)


def describe_failure(cert: Certificate, case: Case) -> str:
    """Human-readable counterexample: the worst completed sequence z, C(z) vs P(z) and the target /
    draft rows along z (the rows the verifier saw when it drafted or emitted a prefix of z).

    Parameters: ``cert`` (a failing :class:`~specsim.exact.Certificate`), ``case`` (its :class:`Case`).

    Returns: the report, a multi-line ``str``.

    >>> from specsim.drafts import chain
    >>> from specsim.models import random_model
    >>> from specsim.testing.assertions import Case, certify_case, describe_failure
    >>> from specsim.testing.strategies import ModelPair
    >>> from specsim.verifiers import hsd_released
    >>> case = Case(ModelPair(random_model(3, 0), random_model(3, 1), 3, None, seed=(0, 1)), 2, chain())
    >>> print(describe_failure(certify_case(hsd_released, case), case).splitlines()[0])
    hsd_released is not lossless: Case(ModelPair(V=3, random_model seeds=(0, 1)), L=2, drafting='chain')
    """
    z = cert.worst_sequence
    t, d = case.pair.target, case.pair.draft_model
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


def tree_needs(verifier) -> frozenset[str]:
    """The children laws a verifier relies on: ``Verifier.needs`` (a plain callable is a chain
    verifier, which needs ``{"chain"}``).

    Parameters: ``verifier`` a :class:`~specsim.verifiers.base.Verifier` or a plain chain callable.

    Returns: a ``frozenset`` of :data:`specsim.verifiers.base.NEED_TAGS`.

    >>> from specsim.verifiers import sequoia
    >>> sorted(tree_needs(sequoia))
    ['swor']
    """
    return as_verifier(verifier).needs


def _rows_along(pair: ModelPair, z, L: int) -> str:
    """The target / draft rows along the string z (p_k = target(.|z[:k]), q_k = draft(.|z[:k]))."""
    lines = []
    for k in range(L + 1):
        s = f"    p{k} = {_fmt(pair.target(tuple(z[:k])))}"
        if k < L:
            s += f"   q{k} = {_fmt(pair.draft_model(tuple(z[:k])))}"
        lines.append(s)
    return "\n".join(lines)


def _settings(max_examples: int, derandomize, shrink: bool):
    """Hypothesis settings of the assertions: one shrunk failure (never an ExceptionGroup)."""
    # report_multiple_bugs=False: Hypothesis reports the one shrunk failure, never an ExceptionGroup of
    # distinct ones (a lossy verdict and a fault on another instance are both LossyVerifierError)
    kw = dict(max_examples=max_examples, deadline=None, database=None, report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck))
    if derandomize is not None:
        kw["derandomize"] = derandomize
    if not shrink:
        kw["phases"] = [p for p in Phase if p not in (Phase.shrink, Phase.explain)]
    return settings(**kw)


def _strategy_for(verifier, V, L, drafting, depth):
    kind = as_verifier(verifier).kind
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
    strategies; ``max_examples`` (>= 1); ``atol`` in [0, 1] (a statement about the verifier:
    rows are renormalised at the boundary, docs/design.md "The input contract");
    ``derandomize`` (``None``: the active profile's); ``shrink`` (``False`` reports the first
    failing instance unshrunk: faster, less readable).  Bad values raise ``ValueError``, bad
    types ``TypeError``, before any example runs.
    Raises :class:`LossyVerifierError` (an ``AssertionError``; only the first distinct failure
    Hypothesis finds, never an ``ExceptionGroup``) with the shrunk counterexample: V, L, the rows
    along the worst sequence, C vs P.  A verifier that raises or returns an invalid
    outcome list (probabilities not summing to 1, ``accepted`` beyond the draft) is reported the
    same way with the draft that caused it.  Do not call it inside another ``@given`` test.

    Returns: ``None`` when every instance passes.

    >>> from specsim.testing import assert_lossless
    >>> from specsim.verifiers import block
    >>> assert_lossless(block, max_examples=10)
    """
    as_verifier(verifier)
    check_int(max_examples, "max_examples", 1)
    atol = check_real(atol, "atol", 0.0, 1.0)
    if derandomize is not None:
        derandomize = check_bool(derandomize, "derandomize")
    shrink = check_bool(shrink, "shrink")
    cases = _strategy_for(verifier, V, L, drafting, depth)

    @_settings(max_examples, derandomize, shrink)
    @given(cases)
    def run(case):
        try:
            cert = certify_case(verifier, case, atol)
        except _VerifierFault as exc:
            raise LossyVerifierError(f"{exc}\n  instance: {case!r}", case) from None
        if not cert.lossless:
            raise LossyVerifierError(describe_failure(cert, case), case, cert)

    run()


def assert_sampler_lossless(sample_fn, *, L: int = 2, pairs=None, n: int = 4000, alpha: float = 1e-3,
                            max_examples: int = 10, derandomize: bool | None = None, shrink: bool = True,
                            **check_kw):
    """Assert that a sampling-only implementation passes :func:`specsim.testing.check_sampler` on
    every model pair Hypothesis draws, at a stated false-alarm rate for the whole call.

    Each drawn :class:`~specsim.testing.strategies.ModelPair` (default
    ``model_pairs(V=3, depth=st.integers(1, 2))``: prefix-dependent rows with exact zeros,
    one-hot and disjoint draft rows) is checked with ``n`` samples at level ``alpha`` /
    ``max_examples``, so by the union bound a lossless sampler fails the call with probability
    at most ``alpha`` (exact calibration of small p-values, :func:`~specsim.testing.stats.goodness_of_fit`); each check states its own detectable TV.  A
    failing pair is shrunk (each check is deterministic given its seed) and reported with the
    check's report (the strings with the largest standardised residuals) and the target / draft
    rows along the most over-represented string.

    Parameters: ``sample_fn`` as in :func:`~specsim.testing.check_sampler` (a callable or a
    :class:`~specsim.testing.BatchSampler`); ``L`` (>= 1) or a strategy of it; ``pairs`` a
    strategy of ``ModelPair``; ``n``; ``alpha`` in (0, 1); ``max_examples`` (>= 1);
    ``derandomize``, ``shrink`` as in :func:`assert_lossless`; ``check_kw`` passed to
    ``check_sampler`` (``power``, ``seed``, ``drafting``, ...).

    Returns: ``None`` when every pair passes; raises :class:`InconclusiveCheckError` (an
    ``AssertionError`` saying more data are needed) when a check is INCONCLUSIVE, and
    :class:`LossyVerifierError` (``case`` the
    shrunk :class:`Case`, ``certificate`` ``None``, ``check`` the failing
    :class:`~specsim.testing.SamplerCheck`).  A sampler that raises, or returns malformed
    output, gives :class:`~specsim.testing.SamplerError` naming its input.

    >>> from specsim.testing import assert_sampler_lossless, from_verifier
    >>> from specsim.verifiers import token
    >>> assert_sampler_lossless(from_verifier(token), L=1, n=500, max_examples=3, derandomize=True)
    """
    from .sampler import check_sampler

    check_int(n, "n", 1)
    alpha = check_real(alpha, "alpha", 0.0, 1.0, lo_open=True, hi_open=True)
    check_int(max_examples, "max_examples", 1)
    if derandomize is not None:
        derandomize = check_bool(derandomize, "derandomize")
    shrink = check_bool(shrink, "shrink")
    if isinstance(L, int):
        check_int(L, "L", 1)
    pairs = model_pairs(V=3, depth=st.integers(1, 2)) if pairs is None else pairs
    cases = st.builds(Case, pairs, _as_strategy(L), st.just(check_kw.get("drafting") or chain()))
    level = alpha / max_examples

    @_settings(max_examples, derandomize, shrink)
    @given(cases)
    def run(case):
        res = check_sampler(sample_fn, case.pair.target, case.pair.draft_model, case.L, n=n, alpha=level, **check_kw)
        if res.inconclusive:
            raise InconclusiveCheckError(f"{res}\n  more data needed: n = {n} is too small for this check to detect "
                                         f"anything (INCONCLUSIVE is not a pass); increase n\n  instance: {case!r}", res)
        if not res.passed:
            where = res.over[0].string if res.over else (res.under[0].string if res.under else ())
            rows = f"\n  rows along {where}:\n{_rows_along(case.pair, where, case.L)}" if where else ""
            raise LossyVerifierError(f"{res}\n  instance: {case!r}{rows}", case, None, res)

    run()
