"""Checks for implementations that only sample: statistical (``check_sampler``) and, when the
implementation accepts injected uniforms, exact (``check_sampler_exact``).

Statistical mode (docs/theory.md §2, tier 5).  Draw n drafts x ~ Q, run the implementation once per
draft, complete every emitted string x^{1:tau} y with exact target samples to length L+1 and test
the completed strings against the target law P(z) on V^{L+1} (Pearson chi-square), plus one
chi-square per position on the marginal of z_k.  Under losslessness the completed strings are
i.i.d. draws from P exactly, so the false-alarm rate is the chi-square level: ``alpha`` per call,
split by Bonferroni over the L + 2 sub-tests.  Power comes from the non-central chi-square: a test
with df degrees of freedom at level a rejects with probability ``power`` once the non-centrality
n * chi2(C || P) reaches lambda*(df, a); since chi2(C || P) >= 4 TV(C, P)^2 (Cauchy-Schwarz), every
completed law with TV(C, P) >= sqrt(lambda* / 4n) (+ the target mass of pooled small cells) is
detected with at least that power.  An emitted string with P = 0 is a certain failure.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .._validate import check_int
from ..drafts import chain
from ..exact import LOSSLESS_ATOL, Certificate, check_lossless, output_law
from ..models import Model
from ..verifiers.base import Outcome, Verifier

__all__ = ["check_sampler", "check_sampler_exact", "SamplerCheck", "SubTest", "BatchSampler",
           "completed_law", "samples_to_detect", "detection_threshold"]


@dataclass(frozen=True)
class BatchSampler:
    """A vectorised sampler: ``fn(drafts [B, L] int64, p [B, L+1, V], q [B, L, V], rng) ->
    (accepted [B], tokens [B])``, called on chunks of ``chunk`` drafts by :func:`check_sampler`."""

    fn: Callable
    chunk: int = 4096
    name: str = "batch sampler"


@dataclass(frozen=True)
class SubTest:
    """One chi-square goodness-of-fit test: ``statistic`` on ``df`` degrees of freedom, its
    ``p_value`` and the Bonferroni ``level`` it is compared with; ``pooled_mass`` = target mass of
    cells pooled to keep expected counts >= 5; ``detectable_tv`` = the TV distance (of the tested
    law) detected with the stated power at this sample size."""

    name: str
    statistic: float
    df: int
    p_value: float
    level: float
    pooled_mass: float
    detectable_tv: float

    @property
    def rejected(self) -> bool:
        return self.p_value < self.level


@dataclass(frozen=True)
class SamplerCheck:
    """Verdict of :func:`check_sampler`: ``passed`` unless a sub-test rejects, an emitted string has
    target probability 0 (``impossible`` > 0) or the implementation returned invalid output.

    ``alpha`` is the false-alarm rate of the whole call; ``detectable_tv`` is the smallest TV between
    the completed law and the target's first L+1 tokens that the joint test detects with
    probability ``power`` at this ``n`` (Pearson chi-square, non-central chi-square power)."""

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
def detection_threshold(df: int, level: float, power: float = 0.99) -> float:
    """lambda*: the non-centrality at which a level-``level`` chi-square test on ``df`` degrees of
    freedom rejects with probability ``power`` (solves P(chi2'_{df}(lambda) > chi2_{df, 1-level}) = power)."""
    from scipy import optimize, stats

    crit = stats.chi2.isf(level, df)
    return float(optimize.brentq(lambda lam: stats.ncx2.sf(crit, df, lam) - power, 1e-9, 1e7, xtol=1e-9))


def _gof(name, counts, probs, n, level, power, min_expected):
    """Pearson chi-square of ``counts`` against ``probs`` (positive cells), pooling small cells."""
    from scipy import stats

    expected = probs * n
    order = np.argsort(expected, kind="stable")
    e, c, pr = expected[order], counts[order], probs[order]
    k = int(np.searchsorted(e, min_expected))  # cells below the threshold
    if k:
        cum = np.cumsum(e)
        k = max(k, int(np.searchsorted(cum, min_expected)) + 1)
        k = min(k, e.size)
    groups_e = np.concatenate(([e[:k].sum()], e[k:])) if k else e
    groups_c = np.concatenate(([c[:k].sum()], c[k:])) if k else c
    pooled = float(pr[:k].sum()) if k > 1 else 0.0
    df = groups_e.size - 1
    if df < 1:
        return SubTest(name, 0.0, 0, 1.0, level, pooled, 1.0)
    stat = float(((groups_c - groups_e) ** 2 / groups_e).sum())
    lam = detection_threshold(df, level, power)
    return SubTest(name, stat, df, float(stats.chi2.sf(stat, df)), level, pooled,
                   min(1.0, float(np.sqrt(lam / (4 * n))) + pooled))


def _target_joint(target: Model, L: int) -> np.ndarray:
    ptab = target.table(L)
    P = ptab[0][0].copy()
    for m in range(1, L + 1):
        P = (P[:, None] * ptab[m]).ravel()
    return P


def _marginals(joint: np.ndarray, V: int, L: int) -> list[np.ndarray]:
    J = joint.reshape((V,) * (L + 1))
    return [J.sum(axis=tuple(a for a in range(L + 1) if a != k)) for k in range(L + 1)]


def _draw(rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One token per row by inverse CDF (never a zero-probability token)."""
    c = np.cumsum(rows, axis=1)
    u = rng.random(rows.shape[0]) * c[:, -1]
    return np.minimum((c <= u[:, None]).sum(axis=1), rows.shape[1] - 1)


def _codes(z: np.ndarray, V: int) -> np.ndarray:
    code = np.zeros(z.shape[0], dtype=np.int64)
    for k in range(z.shape[1]):
        code = code * V + z[:, k]
    return code


def check_sampler(sample_fn, target: Model, draft: Model, L: int, n: int = 20000, alpha: float = 1e-3,
                  seed: int = 0, context=(), power: float = 0.99, min_expected: float = 5.0,
                  name: str | None = None, drafting=None) -> SamplerCheck:
    """Statistical losslessness test of a sampling-only implementation at one context.

    H0: C(z) = P(z) for all z in V^{L+1} (docs/theory.md §2), where C is the law of the emitted block
    completed with target samples.  Sub-tests: one Pearson chi-square on the completed strings
    (V^{L+1} cells, cells with expected count < ``min_expected`` pooled) and one per position on
    the marginal of z_k (k = 1..L+1), each at level ``alpha`` / (L + 2) (Bonferroni), so the
    false-alarm rate of the call is at most ``alpha`` (chi-square approximation).  Any emitted
    string with P = 0 fails outright.  Power: the non-central chi-square, see
    :class:`SamplerCheck`.  Cites Leviathan et al., arXiv 2211.17192, for the output format.

    Parameters: ``sample_fn(draft_tokens, p, q, rng) -> (accepted, token)`` in the chain layout
    (``p`` [L+1, V], ``q`` [L, V]; ``rng`` a numpy Generator it may use) or a
    :class:`BatchSampler`; ``target``, ``draft`` models; ``L``; ``n`` iterations; ``alpha``;
    ``seed``; ``context``; ``power``.  With ``drafting`` (a tree draft process such as
    ``iid_paths(2)``) the implementation is a tree sampler ``sample_fn(tree, rng) -> (node,
    token)`` on trees drawn by that process, and the emitted string is path(node) + token.

    >>> from specsim.verifiers import token
    >>> res = check_sampler(lambda d, p, q, rng: token.sample(d, p, q, rng=rng),
    ...                     random_model(3, 0), random_model(3, 1), L=2)
    >>> res.passed
    True
    """
    check_int(L, "L", 1)
    check_int(n, "n", 1)
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if not 0 < power < 1:
        raise ValueError(f"power must be in (0, 1), got {power!r}")
    if not isinstance(target, Model) or not isinstance(draft, Model) or target.V != draft.V:
        raise ValueError("target and draft must be specsim Models with the same V")
    name = name or getattr(sample_fn, "name", getattr(sample_fn, "__name__", "sampler"))
    target, draft = target.shifted(context), draft.shifted(context)
    V = target.V
    if V ** (L + 1) > 2_000_000:
        raise ValueError(f"V**(L+1) = {V ** (L + 1)} cells is too many for the joint test")
    rng = np.random.default_rng(seed)
    ptab, qtab = target.table(L), draft.table(L - 1)

    x = np.zeros((n, L), dtype=np.int64)  # drafts; for trees, the accepted path (padded)
    acc = np.empty(n, dtype=np.int64)
    tok = np.empty(n, dtype=np.int64)
    m = L + 2
    level = alpha / m

    def fail(msg):
        return SamplerCheck(False, n, V, L, alpha, power, 1.0, 0, (), msg, name)

    tree_mode = drafting is not None and getattr(drafting, "name", "") != "chain"
    if not tree_mode:  # drafts x ~ Q and their rows
        code = np.zeros(n, dtype=np.int64)
        P_rows = np.empty((n, L + 1, V))
        Q_rows = np.empty((n, L, V))
        for i in range(L):
            Q_rows[:, i] = qtab[i][code]
            P_rows[:, i] = ptab[i][code]
            x[:, i] = _draw(Q_rows[:, i], rng)
            code = code * V + x[:, i]
        P_rows[:, L] = ptab[L][code]

    if tree_mode:
        for j in range(n):
            tree = drafting.sample(target, draft, L, rng)
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

    # complete every emitted string with target samples to length L + 1
    z = np.zeros((n, L + 1), dtype=np.int64)
    z[:, :L] = x
    z[np.arange(n), acc] = tok
    code = np.zeros(n, dtype=np.int64)
    for k in range(L + 1):
        fill = acc < k
        if fill.any():
            z[fill, k] = _draw(ptab[k][code[fill]], rng)
        code = code * V + z[:, k]

    joint = _target_joint(target, L)
    counts = np.bincount(code, minlength=V ** (L + 1)).astype(float)
    impossible = int(counts[joint <= 0].sum())
    tests = [_gof("joint law of the completed block", counts[joint > 0], joint[joint > 0], n, level,
                  power, min_expected)]
    for k, marg in enumerate(_marginals(joint, V, L)):
        c = np.bincount(z[:, k], minlength=V).astype(float)
        tests.append(_gof(f"marginal of token {k + 1}", c[marg > 0], marg[marg > 0], n, level, power,
                          min_expected))
    passed = impossible == 0 and not any(t.rejected for t in tests)
    return SamplerCheck(passed, n, V, L, alpha, power, tests[0].detectable_tv, impossible, tuple(tests),
                        None, name)


# ----------------------------------------------------------------------------- design of experiments
def completed_law(verifier, target: Model, draft: Model, L: int, drafting=None, context=()):
    """(C, P): the exact completed law C(z) and the target law P(z) over V^{L+1} (flat, base-V codes)."""
    from .. import exact

    law = output_law(verifier, target, draft, L, drafting or chain(), context)
    return exact.completed_law(law, target.shifted(context))


def samples_to_detect(C: np.ndarray, P: np.ndarray, V: int, L: int, alpha: float = 1e-3,
                      power: float = 0.99) -> float:
    """Smallest n at which :func:`check_sampler` flags completed law ``C`` with probability
    ``power`` (approximately): min over its sub-tests of lambda*(df, alpha / (L+2)) / chi2(C || P),
    chi2(C || P) = sum_z (C(z) - P(z))^2 / P(z) on the unpooled cells; mass on P = 0 cells is
    flagged after log(1 - power) / log(1 - mass) draws.  ``inf`` when C = P."""
    level = alpha / (L + 2)
    best = np.inf
    zero = P <= 0
    if C[zero].sum() > 1e-15:
        best = np.log(1 - power) / np.log1p(-min(C[zero].sum(), 1 - 1e-15))
    pairs = [(C, P)] + list(zip(_marginals(C, V, L), _marginals(P, V, L)))
    for c, p in pairs:
        pos = p > 0
        chi = float(((c[pos] - p[pos]) ** 2 / p[pos]).sum())
        if chi > 1e-24 and pos.sum() > 1:
            best = min(best, detection_threshold(int(pos.sum()) - 1, level, power) / chi)
    return float(np.ceil(best)) if np.isfinite(best) else np.inf


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


def check_sampler_exact(sample_fn, target: Model, draft: Model, L: int, n_uniforms: int | None = None,
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
    [0,1); ``target``, ``draft``, ``L``; ``grid``; ``tol``; ``context``; ``atol``.

    >>> cert = check_sampler_exact(my_token_sampler_with_uniforms, random_model(3, 0),
    ...                            random_model(3, 1), L=2)
    """
    check_int(L, "L", 1)
    m = check_int(L + 1 if n_uniforms is None else n_uniforms, "n_uniforms", 1)
    check_int(grid, "grid", 1)
    name = getattr(sample_fn, "name", getattr(sample_fn, "__name__", "sampler"))

    def law(draft_tokens, p, q):
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

    return check_lossless(Verifier(name, law, "chain", None, True), target, draft, L, chain(), context, atol)
