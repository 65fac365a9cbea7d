"""Monte Carlo versions of the exact engine's quantities, for problems too large to enumerate.

Each iteration draws a draft from the draft process, runs the verifier's sampling form with fresh
randomness and records the emitted string.  Estimates come with standard errors.  When V^{L+1} is
small enough to tabulate, the completed strings (each emitted string extended with target samples
to length L+1) are also tested against the exact target law P(z) = ``target.joint(L + 1)`` with
the completion chi-square of :mod:`specsim.chisquare` (docs/theory.md §2); under a lossless
verifier that test's p-value is uniform.
"""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ._validate import as_rng, check_int
from .chisquare import SubTest, complete_with_target, goodness_of_fit
from .drafts import DraftProcess
from .exact import _check_drafting, _name
from .models import Model, validate_model_pair
from .verifiers.base import as_verifier, validate_applies, sample_outcome

__all__ = ["MonteCarloEstimate", "estimate", "sample_iteration"]

#: Largest V^{L+1} for which the completed-law chi-square test is run.
MAX_COMPLETION_CELLS = 2 ** 20


@dataclass(frozen=True)
class MonteCarloEstimate:
    """Sampled E[tau] (with standard error sd / sqrt(n)), P(tau >= d) for d = 0..L, emitted-string
    counts and, when the target law can be tabulated, ``completion``: the chi-square test
    (:class:`~specsim.chisquare.SubTest`) of the completed strings against P(z).
    ``completion_chi2`` / ``completion_dof`` / ``completion_pvalue`` read that test (``None``
    without it).  Built by :func:`estimate`.

    >>> from specsim.models import iid
    >>> from specsim.montecarlo import estimate
    >>> from specsim.verifiers import token
    >>> e = estimate(token, iid([0.5, 0.5]), iid([1.0, 0.0]), L=1, n=400, rng=0)  # E[tau] = 1/2 exactly
    >>> round(e.expected_accepted, 3), round(e.expected_accepted_se, 3), e.completion.df
    (0.482, 0.025, 3)
    """

    verifier: str
    drafting: str
    V: int
    L: int
    n: int
    expected_accepted: float
    expected_accepted_se: float
    accepted_at_least: np.ndarray
    emitted: Counter = field(repr=False)
    completion: SubTest | None = None

    @property
    def block_efficiency(self) -> float:
        """E[tau] + 1: tokens emitted per target call."""
        return self.expected_accepted + 1.0

    @property
    def completion_chi2(self) -> float | None:
        return None if self.completion is None else self.completion.statistic

    @property
    def completion_dof(self) -> int | None:
        return None if self.completion is None else self.completion.df

    @property
    def completion_pvalue(self) -> float | None:
        return None if self.completion is None else self.completion.p_value


def sample_iteration(verifier, target: Model, draft_model: Model, L: int, drafting: DraftProcess,
                     rng: np.random.Generator) -> tuple[int, ...]:
    """One iteration: draw a draft D from the process, verify it with fresh randomness and return
    the emitted string path(v) + (y,), v the accepted node and y the emitted token.

    Uses the verifier's own sampler when it has one, else draws from its exact law.

    Parameters: ``verifier``, ``target``, ``draft_model`` (trusted: no checks), ``L``, ``drafting``,
    ``rng`` (``numpy.random.Generator``).

    Returns: the emitted string, a tuple of 1..L+1 token ids.

    >>> import numpy as np
    >>> from specsim.drafts import chain
    >>> from specsim.models import iid
    >>> from specsim.montecarlo import sample_iteration
    >>> from specsim.verifiers import token
    >>> m = iid([0.0, 1.0])
    >>> sample_iteration(token, m, m, 2, chain(), np.random.default_rng(0))
    (1, 1, 1)
    """
    verifier = as_verifier(verifier)
    tree = drafting.sample(target, draft_model, L, rng)
    args = (tree,) if verifier.kind == "tree" else tree.chain_arrays()
    if verifier.sampler is not None:  # trusted call: no re-validation
        node, y = verifier.sampler(*args, rng=rng)
    else:
        node, y = sample_outcome(verifier.law(*args), rng)
    return (*tree.path(node), int(y))


def estimate(verifier, target: Model, draft_model: Model, L: int, n: int = 10_000,
             drafting: DraftProcess | None = None, rng: np.random.Generator | int | None = None,
             context=(), complete: bool = True, progress: bool | None = None,
             alpha: float = 1e-3) -> MonteCarloEstimate:
    """Estimate E[tau] = mean(|s| - 1) over n sampled iterations s, with standard error sd / sqrt(n).

    With ``complete`` and V^{L+1} <= 2^20, every emitted string is completed with target samples
    to length L+1 and the completion chi-square (:func:`specsim.chisquare.goodness_of_fit`:
    Pearson, cells of expected count < 5 pooled, p-value 0 for a string with P = 0) compares the
    counts with n P(z); ``alpha`` is its level (its ``rejected`` verdict, and the TV it detects
    with power 0.99).

    Parameters: ``verifier``, ``target``, ``draft_model`` (models over the same V), ``L`` (>= 1),
    ``n`` (>= 2), ``drafting`` (default the chain process; one that guarantees none of the children
    laws the verifier needs is refused with a ``ValueError``, as in :func:`specsim.exact.output_law`),
    ``rng`` (a ``numpy.random.Generator``, an integer seed >= 0 or ``None``), ``context``,
    ``complete``, ``progress``, ``alpha``.

    Returns: a :class:`MonteCarloEstimate`.

    >>> from specsim.models import random_model
    >>> from specsim.montecarlo import estimate
    >>> from specsim.verifiers import block
    >>> e = estimate(block, random_model(3, 0), random_model(3, 1), L=2, n=2000, rng=0)
    >>> round(e.expected_accepted, 3), round(e.expected_accepted_se, 3), e.completion.rejected  # exact: 0.34161
    (0.331, 0.015, False)
    """
    L = validate_model_pair(target, draft_model, L)
    verifier = as_verifier(verifier)
    check_int(n, "n", 2)
    drafting = _check_drafting(drafting)
    validate_applies(verifier, drafting)
    rng = as_rng(rng)
    target, draft_model = target.shifted(context), draft_model.shifted(context)
    it = range(n)
    if progress or (progress is None and sys.stderr.isatty() and n >= 50_000):
        from tqdm.auto import tqdm
        it = tqdm(it, desc=f"sampling ({verifier.name})", leave=False)
    emitted: Counter = Counter()
    taus = np.empty(n)
    for k in it:
        s = sample_iteration(verifier, target, draft_model, L, drafting, rng)
        emitted[s] += 1
        taus[k] = len(s) - 1
    at_least = np.array([(taus >= d).mean() for d in range(L + 1)])
    completion = None
    if complete and target.V ** (L + 1) <= MAX_COMPLETION_CELLS:
        completion = _completion_test(emitted, target, L, rng, alpha)
    return MonteCarloEstimate(verifier.name, _name(drafting), target.V, L, n, float(taus.mean()),
                              float(taus.std(ddof=1) / np.sqrt(n)), at_least, emitted, completion)


def _completion_test(emitted: Counter, target: Model, L: int, rng: np.random.Generator, alpha: float) -> SubTest:
    """Complete every emitted string with target samples and test the counts against P(z)."""
    strings = [s for s, c in emitted.items() for _ in range(c)]
    z = np.zeros((len(strings), L + 1), dtype=np.int64)
    for i, s in enumerate(strings):
        z[i, :len(s)] = s
    lengths = np.array([len(s) for s in strings])
    _, codes = complete_with_target(z, lengths, target.table(L), rng)
    counts = np.bincount(codes, minlength=target.V ** (L + 1))
    return goodness_of_fit(counts, target.joint(L + 1), alpha, name="completed strings vs P(z)")
