"""Checks for implementations that only sample: statistical (``check_sampler``) and, when the
implementation accepts injected uniforms, exact (``check_sampler_exact``).

Statistical mode (criterion of docs/theory.md §2).  Draw n drafts x ~ Q, run the implementation once per
draft, complete every emitted string x^{1:tau} y with exact target samples to length L+1 and test
the completed strings against the target law P(z) on V^{L+1}, plus one test per position on the
marginal of z_k, with the completion chi-square of :mod:`specsim.testing.stats`.  Under
losslessness the completed strings are i.i.d. draws from P exactly, so the false-alarm rate is the
chi-square level: ``alpha`` per call, split by Bonferroni over the L + 2 sub-tests.  Power: every
completed law with TV(C, P) >= sqrt(lambda* / 4n) (+ the target mass of pooled small cells) is
detected with probability ``power`` (non-central chi-square, see :mod:`specsim.testing.stats`).
An emitted string with P = 0 is a certain failure.
"""
from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._deprecation import renamed_keyword
from .._sampling import draw_rows
from .._validate import check_int, check_model_pair
from ..drafts import Chain, chain
from ..exact import LOSSLESS_ATOL, Certificate, check_lossless, completed_law as _exact_completed_law, output_law
from ..models import Model
from ..verifiers.base import Outcome, chain_verifier
from .stats import SubTest, complete_with_target, goodness_of_fit, samples_for_power

__all__ = ["check_sampler", "check_sampler_exact", "SamplerCheck", "SubTest", "BatchSampler",
           "completed_and_target_laws", "completed_law", "samples_to_detect"]

#: Largest V^{L+1} for which :func:`check_sampler` tabulates the joint test.
MAX_JOINT_CELLS = 2_000_000


@dataclass(frozen=True)
class BatchSampler:
    """A vectorised sampler for :func:`check_sampler`, called on chunks of ``chunk`` drafts.

    ``fn(drafts [B, L] int64, p [B, L+1, V], q [B, L, V], rng) -> (accepted [B], tokens [B])``:
    row b is one verification of draft b (``p[b, k]`` = target(.|x^{1:k}), ``q[b, k]`` =
    draft(.|x^{1:k})), ``accepted`` = tau in 0..L and ``tokens`` the emitted token; ``rng`` is the
    check's ``numpy.random.Generator``.

    >>> import numpy as np
    >>> from specsim.models import random_model
    >>> from specsim.testing import BatchSampler, check_sampler
    >>> def reject_all(drafts, p, q, rng):  # lossless: tau = 0, y ~ p_0
    ...     c = np.cumsum(p[:, 0], axis=1)
    ...     y = (c <= rng.random(len(drafts))[:, None]).sum(axis=1)
    ...     return np.zeros(len(drafts), dtype=int), np.minimum(y, p.shape[2] - 1)
    >>> check_sampler(BatchSampler(reject_all), random_model(3, 0), random_model(3, 1), L=2, n=3000).passed
    True
    """

    fn: Callable
    chunk: int = 4096
    name: str = "batch sampler"


@dataclass(frozen=True)
class SamplerCheck:
    """Verdict of :func:`check_sampler`: ``passed`` unless a sub-test rejects, an emitted string has
    target probability 0 (``impossible`` > 0) or the implementation returned invalid output.

    ``alpha`` is the false-alarm rate of the whole call; ``detectable_tv`` is the smallest TV between
    the completed law and the target's first L+1 tokens that the joint test detects with
    probability ``power`` at this ``n`` (Pearson chi-square, non-central chi-square power);
    ``subtests`` are the :class:`~specsim.testing.stats.SubTest` objects (joint law first, then one
    per position); ``invalid`` describes bad output of the implementation (``None`` if none).
    ``str()`` is the report.

    >>> from specsim.models import random_model
    >>> from specsim.testing import check_sampler
    >>> res = check_sampler(lambda d, p, q, rng: (len(d) + 1, 0), random_model(3, 0), random_model(3, 1), L=1, n=10)
    >>> res.passed, res.invalid
    (False, '(accepted, token) = (2, 0) outside 0..1 x 0..2 on draft (2,)')
    """

    passed: bool
    n: int
    V: int
    L: int
    alpha: float
    power: float
    detectable_tv: float
    impossible: int
    subtests: tuple = field(repr=False)
    invalid: str | None = None
    name: str = "sampler"

    def __str__(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        head = (f"{self.name} [V={self.V}, L={self.L}, n={self.n}]: {verdict} at false-alarm rate "
                f"{self.alpha:g} (Bonferroni over {len(self.subtests)} chi-square tests); detects "
                f"TV >= {self.detectable_tv:.3g} with power {self.power:g}"
                + (f" (joint test, df = {self.subtests[0].df}, non-central chi-square)" if self.subtests else ""))
        if self.invalid:
            return head + f"\n  invalid output: {self.invalid}"
        lines = [head]
        if self.impossible:
            lines.append(f"  {self.impossible} emitted strings have target probability 0")
        for t in self.subtests:
            lines.append(f"  {t.name}: chi2 = {t.statistic:.4g}, df = {t.df}, p = {t.p_value:.3g} "
                         f"(level {t.level:.2g}){'  REJECTED' if t.rejected else ''}")
        return "\n".join(lines)


# ----------------------------------------------------------------------------- statistics
def _marginals(joint: np.ndarray, V: int, L: int) -> list[np.ndarray]:
    J = joint.reshape((V,) * (L + 1))
    return [J.sum(axis=tuple(a for a in range(L + 1) if a != k)) for k in range(L + 1)]


@renamed_keyword("draft", "draft_model")
def check_sampler(sample_fn, target: Model, draft_model: Model, L: int, n: int = 20000, alpha: float = 1e-3,
                  seed: int = 0, context=(), power: float = 0.99, min_expected: float = 5.0,
                  name: str | None = None, drafting=None) -> SamplerCheck:
    """Statistical losslessness test of a sampling-only implementation at one context.

    H0: C(z) = P(z) for all z in V^{L+1} (docs/theory.md §2), where C is the law of the emitted block
    completed with target samples.  Sub-tests (:func:`specsim.testing.stats.goodness_of_fit`): one
    Pearson chi-square on the completed strings (V^{L+1} cells, cells with expected count <
    ``min_expected`` pooled) and one per position on the marginal of z_k (k = 1..L+1), each at
    level ``alpha`` / (L + 2) (Bonferroni), so the false-alarm rate of the call is at most
    ``alpha`` (chi-square approximation).  Any emitted string with P = 0 fails outright.  Power:
    a completed law at TV(C, P) >= ``detectable_tv`` is flagged with probability >= ``power``
    (non-central chi-square).  The output format (tau, then one token) is that of Leviathan et
    al., arXiv 2211.17192.

    Parameters: ``sample_fn(draft_tokens, p, q, rng) -> (accepted, token)`` in the chain layout
    (``p`` [L+1, V], ``q`` [L, V]; ``rng`` a numpy Generator it may use) or a
    :class:`BatchSampler`; ``target``, ``draft_model`` models over the same V; ``L`` (>= 1);
    ``n`` iterations; ``alpha``; ``seed``; ``context``; ``power``; ``min_expected``; ``name``
    (for the report).  With ``drafting`` (a tree draft process such as ``iid_paths(2)``) the
    implementation is a tree sampler ``sample_fn(tree, rng) -> (node, token)`` on trees drawn by
    that process, and the emitted string is path(node) + token.  ``draft=`` is a deprecated
    spelling of ``draft_model=``.

    Returns: a :class:`SamplerCheck` (``passed``, ``detectable_tv``, sub-tests; ``str()`` reports).

    >>> from specsim.models import random_model
    >>> from specsim.testing import check_sampler
    >>> from specsim.verifiers import token
    >>> res = check_sampler(lambda d, p, q, rng: token.sample(d, p, q, rng=rng),
    ...                     random_model(3, 0), random_model(3, 1), L=2, n=2000)
    >>> res.passed, len(res.subtests), round(res.detectable_tv, 3)
    (True, 4, 0.099)
    """
    L = check_model_pair(target, draft_model, L)
    check_int(n, "n", 1)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    name = name or getattr(sample_fn, "name", getattr(sample_fn, "__name__", "sampler"))
    target, draft_model = target.shifted(context), draft_model.shifted(context)
    V = target.V
    if V ** (L + 1) > MAX_JOINT_CELLS:
        raise ValueError(f"V**(L+1) = {V ** (L + 1)} cells is too many for the joint test "
                         f"(at most {MAX_JOINT_CELLS})")
    rng = np.random.default_rng(seed)
    ptab, qtab = target.table(L), draft_model.table(L - 1)

    x = np.zeros((n, L), dtype=np.int64)  # drafts; for trees, the accepted path (padded)
    acc = np.empty(n, dtype=np.int64)
    tok = np.empty(n, dtype=np.int64)
    m = L + 2
    level = alpha / m

    def fail(msg):
        return SamplerCheck(False, n, V, L, alpha, power, 1.0, 0, (), msg, name)

    tree_mode = drafting is not None and not isinstance(drafting, Chain)
    if not tree_mode:  # drafts x ~ Q and their rows
        code = np.zeros(n, dtype=np.int64)
        P_rows = np.empty((n, L + 1, V))
        Q_rows = np.empty((n, L, V))
        for i in range(L):
            Q_rows[:, i] = qtab[i][code]
            P_rows[:, i] = ptab[i][code]
            x[:, i] = draw_rows(Q_rows[:, i], rng)
            code = code * V + x[:, i]
        P_rows[:, L] = ptab[L][code]

    if tree_mode:
        for j in range(n):
            tree = drafting.sample(target, draft_model, L, rng)
            try:
                node, t = sample_fn(tree, rng)
            except Exception as exc:  # noqa: BLE001 - report, do not crash the suite
                return fail(f"raised {type(exc).__name__}: {exc} on draft tree {tree.tokens}, parents {tree.parent}")
            if not (0 <= int(node) < tree.num_nodes and 0 <= int(t) < V):
                return fail(f"(node, token) = ({node}, {t}) outside the tree of {tree.num_nodes} nodes x 0..{V - 1}")
            path = tree.path(int(node))
            x[j, :len(path)] = path
            acc[j], tok[j] = len(path), int(t)
    elif isinstance(sample_fn, BatchSampler):
        for s in range(0, n, sample_fn.chunk):
            a, t = sample_fn.fn(x[s:s + sample_fn.chunk], P_rows[s:s + sample_fn.chunk],
                                Q_rows[s:s + sample_fn.chunk], rng)
            acc[s:s + sample_fn.chunk] = np.asarray(a).reshape(-1)
            tok[s:s + sample_fn.chunk] = np.asarray(t).reshape(-1)
    else:
        for j in range(n):
            try:
                a, t = sample_fn(tuple(x[j].tolist()), P_rows[j], Q_rows[j], rng)
            except Exception as exc:  # noqa: BLE001 - report, do not crash the suite
                return fail(f"raised {type(exc).__name__}: {exc} on draft {tuple(x[j].tolist())}")
            acc[j], tok[j] = int(a), int(t)
    bad = np.flatnonzero((acc < 0) | (acc > L) | (tok < 0) | (tok >= V))
    if bad.size:
        j = int(bad[0])
        return fail(f"(accepted, token) = ({acc[j]}, {tok[j]}) outside 0..{L} x 0..{V - 1} "
                    f"on draft {tuple(x[j].tolist())}")

    # complete every emitted string x^{1:tau} y with target samples to length L + 1
    emitted = np.zeros((n, L + 1), dtype=np.int64)
    emitted[:, :L] = x
    emitted[np.arange(n), acc] = tok
    z, code = complete_with_target(emitted, acc + 1, ptab, rng)

    joint = target.joint(L + 1)
    counts = np.bincount(code, minlength=V ** (L + 1))
    tests = [goodness_of_fit(counts, joint, level, power, min_expected, "joint law of the completed block")]
    for k, marg in enumerate(_marginals(joint, V, L)):
        tests.append(goodness_of_fit(np.bincount(z[:, k], minlength=V), marg, level, power, min_expected,
                                     f"marginal of token {k + 1}"))
    passed = not any(t.rejected for t in tests)
    return SamplerCheck(passed, n, V, L, alpha, power, tests[0].detectable_tv, tests[0].impossible,
                        tuple(tests), None, name)


# ----------------------------------------------------------------------------- design of experiments
@renamed_keyword("draft", "draft_model")
def completed_and_target_laws(verifier, target: Model, draft_model: Model, L: int, drafting=None, context=()):
    """(C, P) of a verifier: the exact completed law C(z) and the target law P(z) over V^{L+1}.

    C(z) = sum_k O(z^{1:k}) P(z^{k+1:L+1} | z^{1:k}) from the verifier's exact output law
    (:func:`specsim.exact.output_law`, then :func:`specsim.exact.completed_law` at ``context``);
    P = ``target.shifted(context).joint(L + 1)``.  This is what :func:`check_sampler` samples
    from, so :func:`samples_to_detect` on (C, P) sizes a sampler check.

    Parameters: ``verifier``, ``target``, ``draft_model``, ``L``, ``drafting`` (default the chain
    process), ``context`` (as in :func:`specsim.exact.output_law`).

    Returns: ``(C, P)``, flat float64 arrays of length V^{L+1} indexed by base-V codes.

    >>> from specsim.models import random_model
    >>> from specsim.testing import completed_and_target_laws
    >>> from specsim.verifiers import hsd_released
    >>> C, P = completed_and_target_laws(hsd_released, random_model(3, 0), random_model(3, 1), L=2)
    >>> round(float(abs(C - P).sum() / 2), 6)
    0.062795
    """
    law = output_law(verifier, target, draft_model, L, drafting or chain(), context)
    return _exact_completed_law(law, target.shifted(context))


def completed_law(*args, **kwargs):
    """Deprecated name of :func:`completed_and_target_laws` (renamed so that it differs from
    :func:`specsim.exact.completed_law`, which takes an output law); removed in the next release.

    Returns: ``(C, P)`` as :func:`completed_and_target_laws`, after a ``DeprecationWarning``.

    >>> import warnings
    >>> from specsim.models import random_model
    >>> from specsim.testing.sampler import completed_law
    >>> from specsim.verifiers import token
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     C, P = completed_law(token, random_model(3, 0), random_model(3, 1), 1)
    >>> w[0].category.__name__, C.shape
    ('DeprecationWarning', (9,))
    """
    warnings.warn("specsim.testing.completed_law is deprecated, use completed_and_target_laws",
                  DeprecationWarning, stacklevel=2)
    return completed_and_target_laws(*args, **kwargs)


def samples_to_detect(C: np.ndarray, P: np.ndarray, V: int, L: int, alpha: float = 1e-3,
                      power: float = 0.99, min_expected: float = 5.0) -> float:
    """Smallest n at which :func:`check_sampler` flags the completed law ``C`` with probability
    ``power`` (approximately).

    The call rejects when any of its sub-tests (joint law on V^{L+1}, then each position's
    marginal, each at level alpha / (L+2)) rejects, so its power is at least that of its best
    sub-tests; each sub-test's power at n is predicted on the pooled table it uses at that n
    (:func:`specsim.testing.stats.predicted_power`: non-central chi-square, plus certain
    detection of completed mass on cells with P = 0), and n is searched by
    :func:`specsim.testing.stats.samples_for_power`.

    Parameters: ``C``, ``P`` flat laws over V^{L+1} (e.g. from :func:`completed_and_target_laws`),
    ``V``, ``L``, ``alpha``, ``power``, ``min_expected`` as in :func:`check_sampler`.

    Returns: n as a ``float``, ``inf`` when C = P.

    >>> from specsim.models import random_model
    >>> from specsim.testing import completed_and_target_laws, samples_to_detect
    >>> from specsim.verifiers import hsd_released
    >>> C, P = completed_and_target_laws(hsd_released, random_model(3, 0), random_model(3, 1), L=2)
    >>> samples_to_detect(C, P, 3, 2)
    1715.0
    """
    pairs = [(C, P)] + list(zip(_marginals(C, V, L), _marginals(P, V, L)))
    return samples_for_power(pairs, alpha / (L + 2), power, min_expected)


# ----------------------------------------------------------------------------- exact mode
def _integrate(f, m: int, grid: int, tol: float) -> tuple[dict, int]:
    """Integrate a piecewise-constant f: [0,1)^m -> hashable over uniforms, refining a product grid
    by bisection at every change between neighbouring cell midpoints.  Returns (law, #evaluations)."""
    # sentinel cells of width 8 tol at both ends expose breakpoints between 0 (or 1) and the
    # first (last) grid midpoint
    delta = 8 * tol
    init = sorted({0.0, delta, *np.linspace(0.0, 1.0, grid + 1)[1:-1].tolist(), 1.0 - delta, 1.0})
    edges = [list(init) for _ in range(m)]
    cache: dict = {}
    ids: dict = {}  # output value -> small int, so cells compare as integers
    values: list = []
    evals = 0

    def call(u):
        nonlocal evals
        key = tuple(u)
        if key not in cache:
            evals += 1
            v = f(np.array(u))
            if v not in ids:
                ids[v] = len(values)
                values.append(v)
            cache[key] = ids[v]
        return cache[key]

    while True:
        mids = [[(a + b) / 2 for a, b in zip(e[:-1], e[1:])] for e in edges]
        shape = tuple(len(mm) for mm in mids)
        out = np.empty(shape, dtype=np.int64)
        for idx in itertools.product(*(range(s) for s in shape)):
            out[idx] = call([mids[j][idx[j]] for j in range(m)])
        new = False
        for j in range(m):
            for k in range(shape[j] - 1):
                sl_a = [slice(None)] * m
                sl_b = [slice(None)] * m
                sl_a[j], sl_b[j] = k, k + 1
                a, b = np.atleast_1d(out[tuple(sl_a)]), np.atleast_1d(out[tuple(sl_b)])
                e = edges[j][k + 1]  # the edge between the two cells
                for loc in np.argwhere(a != b):
                    rest = list(loc) if m > 1 else []
                    base = [mids[i][rest.pop(0)] if i != j else 0.0 for i in range(m)]
                    at = lambda x: call(base[:j] + [x] + base[j + 1:])
                    o_a, o_b = a[tuple(loc)], b[tuple(loc)]
                    # is the change explained by a breakpoint at the edge itself?
                    if at(e - 4 * tol) != o_a:
                        lo, hi = mids[j][k], e - 4 * tol
                    elif at(e + 4 * tol) != o_b:
                        lo, hi = e + 4 * tol, mids[j][k + 1]
                    else:
                        continue
                    o_lo = at(lo)
                    while hi - lo > tol:
                        mid = (lo + hi) / 2
                        if at(mid) == o_lo:
                            lo = mid
                        else:
                            hi = mid
                    if min(abs(hi - x) for x in edges[j]) > 2 * tol:
                        edges[j] = sorted(edges[j] + [hi])
                        new = True
                        break
                if new:
                    break
            if new:
                break
        if not new:
            break
    law: dict = {}
    widths = [np.diff(e) for e in edges]
    for idx in itertools.product(*(range(len(w)) for w in widths)):
        vol = float(np.prod([widths[j][idx[j]] for j in range(m)]))
        key = values[out[idx]]
        law[key] = law.get(key, 0.0) + vol
    return law, evals


@renamed_keyword("draft", "draft_model")
def check_sampler_exact(sample_fn, target: Model, draft_model: Model, L: int, n_uniforms: int | None = None,
                        grid: int = 2, tol: float = 2.0 ** -40, context=(),
                        atol: float = LOSSLESS_ATOL) -> Certificate:
    """Exact certificate of a sampler that takes its uniforms as an input.

    For every draft x the law of (tau, Y) is the integral of ``sample_fn(x, p, q, u)`` over
    u in [0,1)^m; that law feeds the exact engine (C(z) = P(z) check, docs/theory.md §2).  The integral
    is computed on a product of per-coordinate partitions: start from ``grid`` equal cells per
    uniform, evaluate at every cell midpoint, and wherever two neighbouring midpoints give different
    outputs locate the breakpoint between them by bisection (to ``tol``) and split there; repeat
    until nothing changes.  Each located breakpoint is off by at most ``tol``, so the law is exact
    to about (#breakpoints x tol) ~ 1e-11.

    Exact under two assumptions, true for token-level and block verification and their usual
    faults (one uniform per decision, thresholds depending only on the draft and its rows,
    inverse-CDF residuals): (1) the breakpoints of each uniform do not depend on the other uniforms
    (axis-aligned product structure); (2) along a uniform, the output never leaves a value and
    returns to it within one of the ``grid`` initial cells.  Samplers that draw one uniform per
    vocabulary entry (Gumbel or exponential races) violate (1) and should use
    :func:`check_sampler`.  Cost: prod_j (#intervals_j) evaluations per draft, V^L drafts.

    Parameters: ``sample_fn(draft_tokens, p, q, u) -> (accepted, token)`` with ``u`` a float64
    array of ``n_uniforms`` (default L + 1: one per position, one for the emitted token) values in
    [0,1); ``target``, ``draft_model`` (``draft=`` is deprecated), ``L``; ``grid``; ``tol``;
    ``context``; ``atol``.

    Returns: the :class:`specsim.exact.Certificate` of the integrated law.

    >>> import numpy as np
    >>> from specsim.models import random_model
    >>> from specsim.testing import check_sampler_exact
    >>> def token_sampler(draft, p, q, u):  # token-level rule, inverse CDF with u[-1]
    ...     for i, t in enumerate(draft):
    ...         if not u[i] * q[i, t] < p[i, t]:
    ...             r = np.maximum(p[i] - q[i], 0)
    ...             return i, int(np.searchsorted(np.cumsum(r), u[-1] * r.sum(), side="right"))
    ...     return len(draft), int(np.searchsorted(np.cumsum(p[-1]), u[-1], side="right"))
    >>> cert = check_sampler_exact(token_sampler, random_model(3, 0), random_model(3, 1), L=1)
    >>> cert.lossless, cert.max_abs_error < 1e-9
    (True, True)
    """
    L = check_model_pair(target, draft_model, L)
    m = check_int(L + 1 if n_uniforms is None else n_uniforms, "n_uniforms", 1)
    check_int(grid, "grid", 1)
    name = getattr(sample_fn, "name", getattr(sample_fn, "__name__", "sampler"))

    @chain_verifier(name)
    def integrated(draft_tokens, p, q):
        V = p.shape[1]

        def f(u):
            a, t = sample_fn(tuple(draft_tokens), p, q, u)
            return int(a), int(t)

        dist, _ = _integrate(f, m, grid, tol)
        outs = {}
        for (a, t), w in dist.items():
            if not (0 <= a <= len(draft_tokens) and 0 <= t < V):
                raise ValueError(f"{name} returned (accepted, token) = ({a}, {t}) on draft {tuple(draft_tokens)}")
            outs.setdefault(a, np.zeros(V))[t] += w
        return [Outcome(float(r.sum()), a, r / r.sum()) for a, r in sorted(outs.items())]

    return check_lossless(integrated, target, draft_model, L, chain(), context, atol)
