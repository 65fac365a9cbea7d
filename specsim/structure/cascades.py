"""Speculative cascades: deferral rules, their exact output laws, divergences and costs
(docs/theory.md §14.5).

Narasimhan et al., "Faster Cascades via Speculative Decoding" (arXiv 2405.19261, ICLR 2025)
replace speculative sampling's target p by a deferral mixture: at a context, a rule r(p, q) in
{0, 1} decides whether the token comes from the draft (pi = q: every drafted token kept) or is
deferred to the target (pi = p: speculative sampling against p, acceptance 1 - TV(p, q)).  The
target still scores every draft in parallel, so the cost of an iteration is unchanged; what a
cascade buys is acceptance, at the price of emitting pi instead of p.  Rules here:

- ``opt(alpha)``: r = 1[max q < max p - alpha TV(p, q)], the paper's optimal deferral rule for a
  speculative cascade with the target standing in for the ground truth (the plug-in of its
  Lemma; with the target as the quality reference the plug-in *is* the rule).  This is the
  package's :func:`specsim.verifiers.lossy.cascade`, reused as is;
- ``diff(alpha)``: r = 1[max q < max p - alpha] (the paper's "Diff" plug-in, ignoring the
  deferral's rejection cost);
- ``chow(alpha)``: r = 1[max q < 1 - alpha] (Chow's rule: the draft's confidence only);
- ``token_confidence(theta)``: per drafted token, keep x if q(x) >= theta, else verify x by
  speculative sampling against p (the confidence-threshold cascade of drafting engines: the
  draft decides for the tokens it is sure of).

The recollection of the paper's formulas above is from memory (its full text was not at hand):
re-check before attributing numbers to it.  Each rule is a
:class:`~specsim.verifiers.lossy.SingleTokenRule`, lifted to chains by
:func:`~specsim.verifiers.lossy.single_token_chain`, so the exact engine gives the law of whole
emitted strings (:func:`cascade_report`).

>>> import numpy as np
>>> from specsim.structure.cascades import CASCADE_RULES
>>> p, q = np.array([0.7, 0.2, 0.1]), np.array([0.4, 0.35, 0.25])
>>> [(name, CASCADE_RULES[name](0.7).out(p, q).round(3).tolist()) for name in ("opt", "chow")]
[('opt', [0.7, 0.2, 0.1]), ('chow', [0.4, 0.35, 0.25])]
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._validate import check_real, normalize
from ..divergences import kl, tv
from ..exact import completed_law, output_law
from ..models import Model
from ..verifiers.lossy import LossyVerifier, SingleTokenRule, cascade, single_token_chain
from .cost import CostModel

__all__ = ["opt", "diff", "chow", "token_confidence", "CASCADE_RULES", "CascadePoint", "cascade_point",
           "CascadeReport", "cascade_report"]


def _deferral(name: str, defer, params: dict, doc: str) -> LossyVerifier:
    """A per-context deferral cascade: pi = p if defer(p, q) else q, by speculative sampling against pi."""

    def decide(p, q, x):
        if not defer(p, q):
            return 1.0, q.copy()
        return (min(1.0, p[x] / q[x]) if q[x] > 0 else float(p[x] > 0)), normalize(np.maximum(p - q, 0.0), p)

    def out(p, q):
        return (p if defer(p, q) else q).copy()

    def beta(p, q):
        return float(np.minimum(p, q).sum()) if defer(p, q) else 1.0

    return single_token_chain(SingleTokenRule(name, decide, out, beta, params), doc=doc)


def opt(alpha: float) -> LossyVerifier:
    """The optimal deferral rule r = 1[max q < max p - alpha TV(p, q)] (:func:`specsim.verifiers.lossy.cascade`)."""
    return cascade(alpha)


def diff(alpha: float) -> LossyVerifier:
    """Deferral r = 1[max q < max p - alpha] (alpha >= 0); pi = p when deferring, else q."""
    a = check_real(alpha, "alpha", 0.0, np.inf)
    return _deferral("cascade_diff", lambda p, q: bool(q.max() < p.max() - a), dict(alpha=a), diff.__doc__)


def chow(alpha: float) -> LossyVerifier:
    """Chow's rule r = 1[max q < 1 - alpha] (alpha in [0, 1]): defer when the draft is unsure."""
    a = check_real(alpha, "alpha", 0.0, 1.0)
    return _deferral("cascade_chow", lambda p, q: bool(q.max() < 1.0 - a), dict(alpha=a), chow.__doc__)


def token_confidence(theta: float) -> LossyVerifier:
    """Confidence-threshold cascade: keep the drafted x when q(x) >= theta (in [0, 1]), otherwise
    speculative sampling of x against p.  out = q 1[q >= theta] + min(p, q) 1[q < theta] +
    m norm((p - q)_+) with m = sum_{q(x) < theta} (q(x) - min(p(x), q(x))); beta = sum_{q >= theta} q
    + sum_{q < theta} min(p, q).  theta = 0 keeps every draft (out = q), theta > max q is
    speculative sampling (out = p)."""
    th = check_real(theta, "theta", 0.0, 1.0)

    def decide(p, q, x):
        if q[x] >= th:
            return 1.0, q.copy()
        return (min(1.0, p[x] / q[x]) if q[x] > 0 else float(p[x] > 0)), normalize(np.maximum(p - q, 0.0), p)

    def out(p, q):
        low = q < th
        m = np.minimum(p, q)
        res = normalize(np.maximum(p - q, 0.0), p)
        return np.where(low, m, q) + float((q - m)[low].sum()) * res

    def beta(p, q):
        low = q < th
        return float(np.where(low, np.minimum(p, q), q).sum())

    return single_token_chain(SingleTokenRule("cascade_token_confidence", decide, out, beta, dict(theta=th)),
                              doc=token_confidence.__doc__)


#: Deferral-rule families by name (each a function of its one parameter).
CASCADE_RULES = {"opt": opt, "diff": diff, "chow": chow, "token_confidence": token_confidence}


@dataclass(frozen=True)
class CascadePoint:
    """One cascade at one context: ``out`` (the emitted law pi), ``acceptance`` beta =
    sum_v min(q_v, pi_v), ``tv`` = TV(pi, p), ``kl`` = KL(pi || p) (inf when pi leaves p's
    support), ``deferred`` (pi equals p) and ``name``."""

    name: str
    out: np.ndarray = field(repr=False)
    acceptance: float
    tv: float
    kl: float


def cascade_point(rule: LossyVerifier, p, q) -> CascadePoint:
    """A rule's exact one-token law, acceptance and divergences to the target at the pair (p, q).

    >>> from specsim.structure.cascades import cascade_point, chow
    >>> pt = cascade_point(chow(0.7), [0.7, 0.2, 0.1], [0.4, 0.35, 0.25])
    >>> pt.acceptance, round(pt.tv, 6)
    (1.0, 0.3)
    """
    if not isinstance(rule, LossyVerifier):
        raise TypeError(f"rule must be a lossy chain verifier (specsim.structure.cascades.CASCADE_RULES), "
                        f"got {type(rule).__name__}")
    out = rule.out(p, q)
    from .._validate import as_pair

    pp, qq = as_pair(p, q)
    return CascadePoint(rule.name, out, float(rule.beta(pp, qq)), float(tv(out, pp)), float(kl(out, pp)))


@dataclass(frozen=True)
class CascadeReport:
    """A cascade over whole iterations at one context (docs/theory.md §14.5).

    ``tokens`` = E[tau] + 1 per target call; ``cost_per_token`` = ``cost.iteration([1] * L, L + 1)``
    / tokens (the target scores every draft); ``tv`` and ``kl`` between the completed law C over
    V^{L+1} (emitted string, then target samples) and the target's P; ``lossless``."""

    name: str
    L: int
    tokens: float
    cost_per_token: float
    tv: float
    kl: float


def cascade_report(rule: LossyVerifier, target: Model, draft_model: Model, L: int, cost: CostModel,
                   context=()) -> CascadeReport:
    """Exact sequence-level law of a cascade: the engine's output law of the lifted rule, completed
    with target samples, against P (TV and KL(C || P)), with the expected cost per emitted token.

    >>> from specsim.models import random_model
    >>> from specsim.structure import CostModel
    >>> from specsim.structure.cascades import cascade_report, opt
    >>> r = cascade_report(opt(0.0), random_model(3, 0), random_model(3, 1), 2, CostModel(draft=0.05))
    >>> r.tv > 0, round(r.tokens, 6)
    (True, 2.665142)
    """
    if not isinstance(cost, CostModel):
        raise TypeError(f"cost must be a specsim.structure.CostModel, got {type(cost).__name__}")
    law = output_law(rule, target, draft_model, L, context=context)
    C, P = completed_law(law, target.shifted(context))
    tokens = law.block_efficiency
    return CascadeReport(rule.name, L, tokens, cost.iteration([1] * L, L + 1) / tokens,
                         float(0.5 * np.abs(C - P).sum()), float(kl(C, P)))
