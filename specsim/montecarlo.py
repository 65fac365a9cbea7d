"""Monte Carlo versions of the exact engine's quantities, for problems too large to enumerate.

Each iteration draws a draft from the draft process, runs the verifier's sampling form with fresh
randomness and records the emitted string.  Estimates come with standard errors.  When V^{L+1} is
small enough to tabulate, the completed strings (each emitted string extended with target samples
to length L+1) are also tested against the exact target law with a chi-square test; under a
lossless verifier that test's p-value is uniform.
"""
from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from ._validate import check_int
from .drafts import DraftProcess, chain
from .exact import _check_pair, _name
from .models import Model
from .verifiers.base import sample_outcome, verifier_kind

__all__ = ["MonteCarloEstimate", "estimate", "sample_iteration"]

#: Largest V^{L+1} for which the completed-law chi-square test is run.
MAX_COMPLETION_CELLS = 2 ** 20


@dataclass(frozen=True)
class MonteCarloEstimate:
    """Sampled E[tau] (with standard error), P(tau >= d), emitted-string counts and, when the
    target law can be tabulated, a chi-square test of the completed strings against it."""

    verifier: str
    drafting: str
    V: int
    L: int
    n: int
    expected_accepted: float
    expected_accepted_se: float
    accepted_at_least: np.ndarray
    emitted: Counter = field(repr=False)
    completion_chi2: float | None = None
    completion_dof: int | None = None
    completion_pvalue: float | None = None

    @property
    def block_efficiency(self) -> float:
        return self.expected_accepted + 1.0


def sample_iteration(verifier, target: Model, draft: Model, L: int, drafting: DraftProcess,
                     rng: np.random.Generator) -> tuple[int, ...]:
    """One iteration: draw a draft, verify it with fresh randomness, return the emitted string."""
    tree = drafting.sample(target, draft, L, rng)
    if verifier_kind(verifier) == "tree":
        args = (tree,)
    else:
        args = tree.chain_arrays()
    if getattr(verifier, "sampler", None) is not None:  # trusted internal call: skip re-validation
        node, y = verifier.sampler(*args, rng=rng)
    else:
        node, y = sample_outcome(verifier.law(*args) if hasattr(verifier, "law") else verifier(*args), rng)
    return (*tree.path(node), int(y))


def estimate(verifier, target: Model, draft: Model, L: int, n: int = 10_000,
             drafting: DraftProcess | None = None, rng: np.random.Generator | int | None = None,
             context=(), complete: bool = True, progress: bool | None = None) -> MonteCarloEstimate:
    """Estimate E[tau] = mean(|s| - 1) over n sampled iterations, with standard error sd/sqrt(n).

    ``rng`` is a ``numpy.random.Generator`` (or a seed).  With ``complete`` and V^{L+1} <= 2^20,
    every emitted string is completed with target samples to length L+1 and Pearson's chi-square
    compares the counts with n P(z) (cells with expected count < 5 pooled).
    """
    _check_pair(target, draft, L)
    check_int(n, "n", 2)
    drafting = drafting or chain()
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    target, draft = target.shifted(context), draft.shifted(context)
    it = range(n)
    if progress or (progress is None and sys.stderr.isatty() and n >= 50_000):
        from tqdm.auto import tqdm
        it = tqdm(it, desc=f"sampling ({_name(verifier)})", leave=False)
    emitted: Counter = Counter()
    taus = np.empty(n)
    for k in it:
        s = sample_iteration(verifier, target, draft, L, drafting, rng)
        emitted[s] += 1
        taus[k] = len(s) - 1
    at_least = np.array([(taus >= d).mean() for d in range(L + 1)])
    chi2 = dof = pval = None
    if complete and target.V ** (L + 1) <= MAX_COMPLETION_CELLS:
        chi2, dof, pval = _completion_test(emitted, target, L, n, rng)
    return MonteCarloEstimate(_name(verifier), _name(drafting), target.V, L, n, float(taus.mean()),
                              float(taus.std(ddof=1) / np.sqrt(n)), at_least, emitted, chi2, dof, pval)


def _completion_test(emitted: Counter, target: Model, L: int, n: int, rng: np.random.Generator):
    V = target.V
    ptab = target.table(L)
    strings = [st for st, c in emitted.items() for _ in range(c)]
    lengths = np.array([len(st) for st in strings])
    codes = np.array([sum(t * V ** (len(st) - 1 - j) for j, t in enumerate(st)) for st in strings])
    for m in range(1, L + 1):  # extend every string of length <= m by one target sample
        grow = lengths <= m
        cdf = np.cumsum(ptab[m][codes[grow]], axis=1)
        u = rng.random(int(grow.sum()))[:, None] * cdf[:, -1:]
        nxt = np.minimum((cdf <= u).sum(axis=1), V - 1)
        codes[grow] = codes[grow] * V + nxt
        lengths[grow] += 1
    counts = np.bincount(codes, minlength=V ** (L + 1)).astype(float)
    P = ptab[0][0].copy()
    for m in range(1, L + 1):
        P = (P[:, None] * ptab[m]).ravel()
    expected = n * P
    big = expected >= 5
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    chi2 = float(((obs - exp) ** 2 / exp).sum())
    dof = int(obs.size - 1)
    return chi2, dof, float(stats.chi2.sf(chi2, dof)) if dof > 0 else 1.0
