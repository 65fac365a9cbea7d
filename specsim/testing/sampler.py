"""Checks for implementations that only sample: statistical (``check_sampler``) and, when the
implementation accepts injected uniforms, exact (``check_sampler_exact``).

Statistical mode (criterion of docs/theory.md §2).  Draw n drafts x ~ Q, run the implementation once per
draft, complete every emitted string x^{1:tau} y with exact target samples to length L+1 and test
the completed strings against the target law P(z) on V^{L+1}, plus one test per position on the
marginal of z_k, with the completion chi-square of :mod:`specsim.testing.stats`.  Under
losslessness the completed strings are i.i.d. draws from P exactly, so the false-alarm rate is at
most the level (chi-square p-values below it are recomputed on the exact multinomial null law):
``alpha`` per call, split by Bonferroni over the L + 2 sub-tests.  Too few samples for the joint
test to detect anything give an INCONCLUSIVE verdict, never a pass.  Power: every
completed law with TV(C, P) >= sqrt(lambda* / 4n) (+ the target mass of pooled small cells) is
detected with probability ``power`` (non-central chi-square, see :mod:`specsim.testing.stats`).
An emitted string with P = 0 is a certain failure.

Why one module of ~720 lines: both modes take the same implementation protocol
(``sample_fn(draft, p, q, rng) -> (accepted, token)``) with the same output validation and
:class:`SamplerError`, so a sampler that passes one check is called the same way by the other.
The exact mode (from :class:`BoundaryPoint` on, about 320 lines, whose integrator
:mod:`specsim.testing.step` reuses) is the seam to split along if the module grows.
"""
from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field, fields
from typing import Callable

import numpy as np

from .._sampling import draw_rows
from .._validate import check_int, check_real, check_seed
from ..models import validate_model_pair
from ..drafts import Chain, chain
from ..exact import LOSSLESS_ATOL, Certificate, check_lossless, completed_law as _exact_completed_law, output_law
from ..models import Model
from ..verifiers.base import Outcome, chain_verifier, tree_verifier
from .report import ChiSquareCheck
from .stats import (SubTest, complete_with_target, goodness_of_fit, largest_residuals, position_marginals,
                    samples_for_power)

__all__ = ["check_sampler", "check_sampler_exact", "SamplerCheck", "SamplerCertificate", "BoundaryPoint",
           "SamplerError", "SubTest", "BatchSampler", "completed_and_target_laws",
           "samples_to_detect", "FLOAT32_POINTS"]

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

    def __post_init__(self):
        if not callable(self.fn):
            raise TypeError(f"fn must be callable, got {type(self.fn).__name__}")
        check_int(self.chunk, "chunk", 1)


class SamplerError(ValueError):
    """A sampler, step or batch function under test raised or returned malformed output: never a
    chi-square verdict.

    :func:`check_sampler` and :func:`check_sampler_exact` re-raise the implementation's exception
    (kept as ``__cause__``) with the draft and rows it was called on, and raise it for output that
    is not what the call promises (two integers in range; two integer arrays of the chunk's
    length for a :class:`BatchSampler`), naming the call, the output and what was expected;
    ``draft`` holds the draft (tokens or a description of the tree or chunk), ``rows`` the
    ``(p, q)`` rows when the call had them.  :mod:`specsim.testing.step` raises it naming the
    step call and its output.

    >>> from specsim.models import random_model
    >>> from specsim.testing import check_sampler
    >>> def broken(draft, p, q, rng):
    ...     raise KeyError("oops")
    >>> try:
    ...     check_sampler(broken, random_model(3, 0), random_model(3, 1), L=1, n=10)
    ... except Exception as err:
    ...     print(type(err).__name__, "|", str(err).splitlines()[0], "|", type(err.__cause__).__name__)
    SamplerError | broken raised KeyError: 'oops' on draft (2,) with rows | KeyError
    """

    def __init__(self, message: str, draft=None, rows=None):
        super().__init__(message)
        self.draft = draft
        self.rows = rows


def _fmt_rows(p, q) -> str:
    """The rows a chain sampler saw, one line per position."""
    fmt = lambda r: "(" + ", ".join(f"{x:.6g}" for x in np.asarray(r, dtype=float)) + ")"
    return "\n".join(f"    p{i} = {fmt(p[i])}" + (f"   q{i} = {fmt(q[i])}" if i < len(q) else "")
                     for i in range(len(p)))


def _two_ints(out) -> tuple[int, int]:
    """``out`` as (int, int); ``ValueError`` for anything else (floats and bools included: an
    id is never rounded)."""
    a, b = out
    if isinstance(a, (bool, np.bool_)) or isinstance(b, (bool, np.bool_)):
        raise ValueError("bool")
    return operator.index(a), operator.index(b)


def _two_ints_or_none(out) -> tuple[int, int]:
    """:func:`_two_ints`, with (-1, -1) (out of every range) for output that is not two integers."""
    try:
        return _two_ints(out)
    except (TypeError, ValueError):
        return -1, -1


def _raised(name: str, exc: Exception, draft, p=None, q=None) -> SamplerError:
    where = f"draft {draft}" + (f" with rows\n{_fmt_rows(p, q)}" if p is not None else "")
    return SamplerError(f"{name} raised {type(exc).__name__}: {exc} on {where}", draft,
                        None if p is None else (p, q))


@dataclass(frozen=True, kw_only=True)
class SamplerCheck(ChiSquareCheck):
    """Verdict of :func:`check_sampler` (a :class:`~specsim.testing.report.ChiSquareCheck` with the
    draft length ``L``): ``passed`` unless a sub-test rejects, an emitted string has
    target probability 0 (``impossible`` > 0), or the data are too few (``inconclusive``: the joint
    test detects no completed law with probability ``power`` at this n, e.g. n = 1 or a huge
    ``min_expected`` pooling every cell; ``verdict`` is then ``"INCONCLUSIVE"``).  Malformed output of the implementation is never
    a verdict: :func:`check_sampler` raises :class:`SamplerError` instead.

    ``alpha`` is the false-alarm rate of the whole call; ``detectable_tv`` is the smallest TV between
    the completed law and the target's first L+1 tokens that the joint test detects with
    probability ``power`` at this ``n`` (Pearson chi-square, non-central chi-square power);
    ``subtests`` are the :class:`~specsim.testing.stats.SubTest` objects (joint law first, then one
    per position); ``over`` / ``under`` the completed strings with the largest positive / negative standardised
    residuals (:func:`~specsim.testing.stats.largest_residuals`; strings with P = 0 first), listed
    in the report of a FAIL.  When the target is deterministic on V^{L+1} (greedy decoding: one
    string, the argmax chain, has P = 1) the joint test is exact: any output off the argmax chain
    fails, and ``detectable_tv`` = 1 - (1 - power)^(1/n).  ``str()`` is the report.

    >>> from specsim.testing import check_sampler, default_instance
    >>> target, draft_model, L = default_instance()
    >>> def from_draft(d, p, q, rng):  # lossy: rejects x_1 and emits a draft-model sample
    ...     return 0, int(rng.choice(len(q[0]), p=q[0]))
    >>> res = check_sampler(from_draft, target, draft_model, L, n=2000)
    >>> res.passed, [t.rejected for t in res.subtests], res.over[0].string
    (False, [True, True, True, True, False], (3, 3, 1, 0))
    """

    L: int
    name: str = "sampler"

    _impossible_strings = "emitted strings"

    def _head(self) -> list[str]:
        head = f"{self.name} [V={self.V}, L={self.L}, n={self.n}]: {self.verdict}"
        joint = self.subtests[0]
        if joint.deterministic:  # greedy target: no chi-square, the check is exact
            head += (f": checks that no output leaves the argmax chain (the target's one string of "
                     f"probability 1); detects TV >= {self.detectable_tv:.3g} with power {self.power:g} "
                     f"(1 - (1 - power)^(1/n); exact, false-alarm rate 0)")
        else:
            head += (f" at false-alarm rate {self.alpha:g} (Bonferroni over {len(self.subtests)} chi-square "
                     f"tests); detects TV >= {self.detectable_tv:.3g} with power {self.power:g} "
                     f"(joint test, df = {joint.df}, non-central chi-square)")
        return [head]

    def _subtest_line(self, t) -> str:
        if t.deterministic:
            return f"  {t.name}: {t.impossible} outputs off the argmax chain{'  REJECTED' if t.rejected else ''}"
        return super()._subtest_line(t)

    def _tail(self) -> list[str]:
        lines = []
        if not self.passed:
            if self.over:
                lines.append("  most over-represented completed strings: " + "; ".join(map(str, self.over)))
            if self.under:
                lines.append("  most under-represented completed strings: " + "; ".join(map(str, self.under)))
        return lines


def check_sampler(sample_fn, target: Model, draft_model: Model, L: int, n: int = 20000, alpha: float = 1e-3,
                  seed: int = 0, context=(), power: float = 0.99, min_expected: float = 5.0,
                  name: str | None = None, drafting=None, report: int = 3) -> SamplerCheck:
    """Statistical losslessness test of a sampling-only implementation at one context.

    H0: C(z) = P(z) for all z in V^{L+1} (docs/theory.md §2), where C is the law of the emitted block
    completed with target samples.  Sub-tests (:func:`specsim.testing.stats.goodness_of_fit`): one
    Pearson chi-square on the completed strings (V^{L+1} cells, cells with expected count <
    ``min_expected`` pooled) and one per position on the marginal of z_k (k = 1..L+1), each at
    level ``alpha`` / (L + 2) (Bonferroni), so the false-alarm rate of the call is at most
    ``alpha`` (a chi-square p-value below the level is recomputed on the exact multinomial null
    law, :func:`~specsim.testing.stats.goodness_of_fit`).  Any emitted string with P = 0 fails
    outright; with too little data (the joint test detects no completed law at this n) the verdict
    is INCONCLUSIVE and ``passed`` is False.  Power:
    a completed law at TV(C, P) >= ``detectable_tv`` is flagged with probability >= ``power``
    (non-central chi-square).  The output format (tau, then one token) is that of Leviathan et
    al., arXiv 2211.17192.

    Parameters: ``sample_fn(draft_tokens, p, q, rng) -> (accepted, token)`` in the chain layout
    (``p`` [L+1, V], ``q`` [L, V]; ``rng`` a numpy Generator it may use) or a
    :class:`BatchSampler`; ``target``, ``draft_model`` models over the same V; ``L`` (>= 1);
    ``n`` iterations (>= 1); ``alpha`` and ``power`` in (0, 1); ``seed`` (an int >= 0);
    ``context``; ``min_expected`` (finite, > 0); ``name`` (for the report).  Bad values raise
    ``ValueError``, bad types ``TypeError`` (docs/design.md, "The input contract").  An
    exception inside the implementation is re-raised as :class:`SamplerError` naming the draft
    and its rows, and output that is not (accepted, token) integers in 0..L x 0..V-1 (for a
    :class:`BatchSampler`: two integer arrays of the chunk's length, entries in those ranges)
    raises :class:`SamplerError` naming the call, the output and what was expected.  With ``drafting`` (a tree draft process such as ``iid_paths(2)``) the
    implementation is a tree sampler ``sample_fn(tree, rng) -> (node, token)`` on trees drawn by
    that process, and the emitted string is path(node) + token.  ``report`` (>= 0): completed
    strings listed each way in the report of a FAIL.

    Returns: a :class:`SamplerCheck` (``passed``, ``detectable_tv``, sub-tests; ``str()`` reports).

    >>> from specsim.testing import check_sampler
    >>> from specsim.testing import default_instance
    >>> from specsim.verifiers import token
    >>> target, draft_model, L = default_instance()  # every self-test mutant detectable by n = 4,718
    >>> res = check_sampler(lambda d, p, q, rng: token.sample(d, p, q, rng=rng), target, draft_model, L, n=2000)
    >>> res.passed, len(res.subtests), round(res.detectable_tv, 3)
    (True, 5, 0.179)
    """
    L = validate_model_pair(target, draft_model, L)
    if not (isinstance(sample_fn, BatchSampler) or callable(sample_fn)):
        raise TypeError(f"sample_fn must be callable or a BatchSampler, got {type(sample_fn).__name__}")
    check_int(n, "n", 1)
    alpha = check_real(alpha, "alpha", 0.0, 1.0, lo_open=True, hi_open=True)
    power = check_real(power, "power", 0.0, 1.0, lo_open=True, hi_open=True)
    min_expected = check_real(min_expected, "min_expected", 0.0, np.inf, lo_open=True, hi_open=True)
    check_seed(seed)
    check_int(report, "report", 0)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"name must be a str or None, got {type(name).__name__}")
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
    expected = f"expected (accepted, token): two integers in 0..{L} x 0..{V - 1}"

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
                out = sample_fn(tree, rng)
            except Exception as exc:  # noqa: BLE001 - re-raised with the tree it was called on
                raise _raised(name, exc, f"tree tokens={tree.tokens} parent={tree.parent}") from exc
            node, t = _two_ints_or_none(out)
            if not (0 <= node < tree.num_nodes and 0 <= t < V):
                desc = f"tree tokens={tree.tokens} parent={tree.parent}"
                raise SamplerError(f"{name} returned {out!r} on draft {desc} (call {j}); expected (node, token): "
                                   f"two integers in 0..{tree.num_nodes - 1} x 0..{V - 1}", desc)
            path = tree.path(node)
            x[j, :len(path)] = path
            acc[j], tok[j] = len(path), t
    elif isinstance(sample_fn, BatchSampler):
        for s in range(0, n, sample_fn.chunk):
            e = min(n, s + sample_fn.chunk)
            chunk = f"chunk {s}..{e - 1} (first draft {tuple(x[s].tolist())})"
            try:
                a, t = sample_fn.fn(x[s:e], P_rows[s:e], Q_rows[s:e], rng)
            except Exception as exc:  # noqa: BLE001 - re-raised with the chunk it was called on
                raise _raised(name, exc, chunk, P_rows[s], Q_rows[s]) from exc
            a, t = np.asarray(a).reshape(-1), np.asarray(t).reshape(-1)
            if a.shape != (e - s,) or t.shape != (e - s,) or not (
                    np.issubdtype(a.dtype, np.integer) and np.issubdtype(t.dtype, np.integer)):
                raise SamplerError(f"{name} returned accepted {a.dtype}{list(a.shape)} and tokens "
                                   f"{t.dtype}{list(t.shape)} on draft {chunk}; expected two integer "
                                   f"arrays of length {e - s}", chunk)
            bad = np.flatnonzero((a < 0) | (a > L) | (t < 0) | (t >= V))
            if bad.size:
                b = int(bad[0])
                raise SamplerError(f"{name} returned (accepted, token) = ({a[b]}, {t[b]}) for row {b} "
                                   f"(draft {tuple(x[s + b].tolist())}) of {chunk}; {expected}",
                                   tuple(x[s + b].tolist()), (P_rows[s + b], Q_rows[s + b]))
            acc[s:e], tok[s:e] = a, t
    else:
        for j in range(n):
            draft = tuple(x[j].tolist())
            try:
                out = sample_fn(draft, P_rows[j], Q_rows[j], rng)
            except Exception as exc:  # noqa: BLE001 - re-raised with the draft it was called on
                raise _raised(name, exc, draft, P_rows[j], Q_rows[j]) from exc
            a, t = _two_ints_or_none(out)
            if not (0 <= a <= L and 0 <= t < V):
                raise SamplerError(f"{name} returned {out!r} on draft {draft} (call {j}) with rows\n"
                                   f"{_fmt_rows(P_rows[j], Q_rows[j])}\n  {expected}", draft,
                                   (P_rows[j], Q_rows[j]))
            acc[j], tok[j] = a, t

    # complete every emitted string x^{1:tau} y with target samples to length L + 1
    emitted = np.zeros((n, L + 1), dtype=np.int64)
    emitted[:, :L] = x
    emitted[np.arange(n), acc] = tok
    z, code = complete_with_target(emitted, acc + 1, ptab, rng)

    joint = target.joint(L + 1)
    counts = np.bincount(code, minlength=V ** (L + 1))
    tests = [goodness_of_fit(counts, joint, level, power, min_expected, "joint law of the completed block", rng)]
    for k, marg in enumerate(position_marginals(joint, V, L)):
        tests.append(goodness_of_fit(np.bincount(z[:, k], minlength=V), marg, level, power, min_expected,
                                     f"marginal of token {k + 1}", rng))
    # too little data is never a pass: INCONCLUSIVE when the joint test could detect nothing
    passed = not any(t.rejected for t in tests) and not tests[0].inconclusive
    over, under = largest_residuals(counts, joint, V, L + 1, report)
    return SamplerCheck(passed=passed, n=n, V=V, L=L, alpha=alpha, power=power,
                        detectable_tv=tests[0].detectable_tv, impossible=tests[0].impossible,
                        subtests=tuple(tests), name=name, over=over, under=under)


# ----------------------------------------------------------------------------- design of experiments
def completed_and_target_laws(verifier, target: Model, draft_model: Model, L: int, drafting=None, context=()):
    """(C, P) of a verifier: the exact completed law C(z) and the target law P(z) over V^{L+1}.

    C(z) = sum_k O(z^{1:k}) P(z^{k+1:L+1} | z^{1:k}) from the verifier's exact output law
    (:func:`specsim.exact.output_law`, then :func:`specsim.exact.completed_law` at ``context``);
    P = ``target.shifted(context).joint(L + 1)``.  This is what :func:`check_sampler` samples
    from, so :func:`samples_to_detect` on (C, P) sizes a sampler check.

    Parameters: ``verifier``, ``target``, ``draft_model``, ``L``, ``drafting`` (default the chain
    process), ``context`` (as in :func:`specsim.exact.output_law`).

    Returns: ``(C, P)``, flat float64 arrays of length V^{L+1} indexed by base-V codes.

    >>> from specsim.testing.sampler import completed_and_target_laws
    >>> from specsim.testing import default_instance
    >>> from specsim.verifiers import hsd_released
    >>> C, P = completed_and_target_laws(hsd_released, *default_instance())
    >>> round(float(abs(C - P).sum() / 2), 6)  # TV(C, P): the released-residual fault
    0.03499
    """
    law = output_law(verifier, target, draft_model, L, drafting or chain(), context)
    return _exact_completed_law(law, target.shifted(context))


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

    >>> from specsim.testing.sampler import completed_and_target_laws, samples_to_detect
    >>> from specsim.testing import default_instance
    >>> from specsim.verifiers import hsd_released
    >>> target, draft_model, L = default_instance()
    >>> C, P = completed_and_target_laws(hsd_released, target, draft_model, L)
    >>> samples_to_detect(C, P, target.V, L)
    4417.0
    """
    pairs = [(C, P)] + list(zip(position_marginals(C, V, L), position_marginals(P, V, L)))
    return samples_for_power(pairs, alpha / (L + 2), power, min_expected)


# ----------------------------------------------------------------------------- exact mode
#: Points per uniform of ``grid="float32"``: u = k 2^-24, k = 0..2^24 - 1, the values a float32
#: uniform generator returns (torch.rand, curand_uniform and Philox-to-float32 conversions).
FLOAT32_POINTS = 2 ** 24
#: Bisection steps from a lattice step of continuous mode to adjacent float64 values (enough for
#: boundaries above 2^-100; below that the exact float is not sought).
_FLOAT_STEPS = 128


@dataclass(frozen=True)
class BoundaryPoint:
    """A uniform vector at which an integrated sampler's output differs from the outputs on both
    sides of it along one uniform (at an end of the lattice, u_j = 0: from the one side it has), found by
    :func:`check_sampler_exact`.  This is where ``<=`` vs ``<`` faults live: ``u <= p/q`` with
    p = 0 accepts the draft at u = 0 only.

    ``draft`` the draft (tokens, or a description of the tree), ``axis`` the uniform j, ``u`` the
    point, ``output`` the sampler's ``(accepted, token)`` (or ``(node, token)``) there,
    ``neighbours`` the outputs just below and above (``None`` past an end of the lattice: below
    u_j = 0, above the last point), ``impossible`` whether
    ``output`` emits a string with target probability 0.
    """

    draft: object
    axis: int
    u: tuple[float, ...]
    output: tuple[int, int]
    neighbours: tuple
    impossible: bool

    def __str__(self) -> str:
        below, above = self.neighbours
        return (f"draft {self.draft}, u[{self.axis}] boundary at u = {list(self.u)}: output {self.output}, "
                f"{'u_j = 0' if below is None else f'below {below}'}, above {above}"
                + ("  (target probability 0)" if self.impossible else ""))


@dataclass(frozen=True)
class SamplerCertificate(Certificate):
    """The :class:`specsim.exact.Certificate` of :func:`check_sampler_exact` plus what the
    integration saw: ``grid`` (``"float64"``: uniforms on the lattice of spacing ``tol``,
    standing for [0, 1); ``"float32"``: the 2^-24 lattice itself), ``boundary_points`` (the
    :class:`BoundaryPoint` list) and ``evaluations`` (sampler calls).  ``lossless`` also requires
    that no boundary point emits a string of target probability 0.
    """

    grid: str = "float64"
    boundary_points: tuple = field(default=(), repr=False)
    evaluations: int = 0

    def __str__(self) -> str:
        lines = [super().__str__() + f"; uniforms on the {self.grid} grid, {self.evaluations} sampler calls"]
        for b in self.boundary_points[:10]:
            lines.append(f"  boundary point: {b}")
        if len(self.boundary_points) > 10:
            lines.append(f"  ... {len(self.boundary_points) - 10} more boundary points")
        return "\n".join(lines)


def _cell_points(edges: list, old) -> list:
    """One lattice point per cell [edges[i], edges[i+1]): the point of ``old`` inside it if any
    (a cell holds at most one: the cells refine those ``old`` was chosen for), else its lower
    middle."""
    old = iter(sorted(old))
    r = next(old, None)
    pts = []
    for a, b in zip(edges[:-1], edges[1:]):
        while r is not None and r < a:
            r = next(old, None)
        pts.append(r if r is not None and r < b else (a + b - 1) // 2)
    return pts


def _integrate(f, m: int, grid: int, tol: float, *, points: int | None = None, dtype=np.float64,
               boundary: list | None = None, keep_points: bool = False) -> tuple[dict, int]:
    """Integrate a piecewise-constant f over uniforms u on the lattice {k / K : 0 <= k < K}^m.

    K = ``points`` (``None``: ceil(1 / ``tol``), the lattice standing for [0, 1)); u is passed to
    f as an array of ``dtype``.  Each uniform's lattice is cut into cells: {0} alone, ``grid``
    equal cells, {K - 1} alone; every cell is evaluated at one point (its lower middle), and
    wherever two neighbouring cells differ without the change sitting at their common edge, the
    first lattice point of the new value is located by integer bisection and becomes an edge;
    repeat until nothing changes.  Located edges are exact on the lattice.  With ``boundary`` a
    list, the :func:`BoundaryPoint` candidates are appended as ``(axis, u, output, below,
    above)``: one-point cells whose output differs from both neighbouring cells, and, when
    ``points`` is ``None``, the exact float64 boundary inside each located lattice step
    (bisection to adjacent floats, once per axis, edge and pair of outputs) where the output
    there differs from both sides.

    ``keep_points``: a cell split by a new edge keeps its evaluated point in the part that holds
    it (only the other parts get their lower middle), so a pass re-evaluates the product grid
    only on the slabs of the new parts; the edges and the law are those of the default (every
    cell at its lower middle, which the reported ``boundary`` points are built from).

    Returns: ``(law, evaluations)``, law mapping each output to its lattice measure.
    """
    K = int(np.ceil(1.0 / tol)) if points is None else int(points)
    cuts = {0, 1, K - 1, K, *(K * i // grid for i in range(1, grid))}
    edges = [sorted(c for c in cuts if 0 <= c <= K) for _ in range(m)]
    cache: dict = {}
    ids: dict = {}  # output value -> small int, so cells compare as integers
    values: list = []
    evals = 0

    def call_u(u):
        nonlocal evals
        key = tuple(u)
        if key not in cache:
            evals += 1
            v = f(np.array(u, dtype=dtype))
            if v not in ids:
                ids[v] = len(values)
                values.append(v)
            cache[key] = ids[v]
        return cache[key]

    call = lambda ks: call_u([k / K for k in ks])
    mids = [[] for _ in range(m)]
    while True:
        mids = [_cell_points(e, old if keep_points else ()) for e, old in zip(edges, mids)]
        shape = tuple(len(mm) for mm in mids)
        out = np.empty(shape, dtype=np.int64)
        for idx in itertools.product(*(range(s) for s in shape)):
            out[idx] = call([mids[j][idx[j]] for j in range(m)])
        found = [set() for _ in range(m)]
        searched = set()
        for j in range(m):
            for k in range(shape[j] - 1):
                sl_a, sl_b = [slice(None)] * m, [slice(None)] * m
                sl_a[j], sl_b[j] = k, k + 1
                a, b = np.atleast_1d(out[tuple(sl_a)]), np.atleast_1d(out[tuple(sl_b)])
                e = edges[j][k + 1]  # the edge between the two cells
                for loc in np.argwhere(a != b):
                    rest = list(loc) if m > 1 else []
                    base = [mids[i][rest.pop(0)] if i != j else 0 for i in range(m)]
                    at = lambda x: call(base[:j] + [x] + base[j + 1:])
                    o_a, o_b = a[tuple(loc)], b[tuple(loc)]
                    if at(e - 1) != o_a:  # a change inside cell a
                        lo, hi, side = mids[j][k], e - 1, k
                    elif at(e) != o_b:  # a change inside cell b
                        lo, hi, side = e, mids[j][k + 1], k + 1
                    else:
                        continue
                    if (j, side) in searched:  # one bisection per cell and pass: the edge it adds
                        continue               # usually explains the other rows' change too
                    searched.add((j, side))
                    o_lo = at(lo)
                    while hi - lo > 1:
                        mid = (lo + hi) // 2
                        lo, hi = (mid, hi) if at(mid) == o_lo else (lo, mid)
                    found[j].add(hi)
        if not any(found):
            break
        edges = [sorted(set(e) | f_) for e, f_ in zip(edges, found)]

    if boundary is not None:
        refined = set()  # (axis, edge, below, output): one float refinement per distinct transition
        for j in range(m):
            for k in range(shape[j]):
                lo_edge, hi_edge = edges[j][k], edges[j][k + 1]
                for idx in itertools.product(*(range(s) if i != j else (k,) for i, s in enumerate(shape))):
                    o = int(out[idx])
                    below = int(out[idx[:j] + (k - 1,) + idx[j + 1:]]) if k > 0 else None
                    above = int(out[idx[:j] + (k + 1,) + idx[j + 1:]]) if k + 1 < shape[j] else None
                    ks = [mids[i][idx[i]] for i in range(m)]
                    if hi_edge - lo_edge == 1 and o != below and o != above:
                        boundary.append((j, tuple(x / K for x in ks), values[o],
                                         None if below is None else values[below],
                                         None if above is None else values[above]))
                    if (points is None and lo_edge > 1 and below is not None and below != o
                            and (j, lo_edge, below, o) not in refined):
                        refined.add((j, lo_edge, below, o))
                        # the sampler's own float64 boundary in (u(lo_edge - 1), u(lo_edge)]; u = 0
                        # is a one-point cell already (and bisecting towards 0 would walk the subnormals)
                        u = [x / K for x in ks]
                        line = lambda x: call_u(u[:j] + [x] + u[j + 1:])
                        lo, hi = (lo_edge - 1) / K, lo_edge / K
                        o_lo = line(lo)
                        for _ in range(_FLOAT_STEPS):
                            if not np.nextafter(lo, 1.0) < hi:
                                break
                            mid = lo + (hi - lo) / 2
                            lo, hi = (mid, hi) if line(mid) == o_lo else (lo, mid)
                        v, nxt = line(hi), line(float(np.nextafter(hi, 2.0)))
                        if np.nextafter(lo, 1.0) >= hi and v != o_lo and v != nxt:
                            boundary.append((j, tuple(u[:j] + [hi] + u[j + 1:]), values[v], values[o_lo],
                                             values[nxt]))
    law: dict = {}
    widths = [np.diff(e) / K for e in edges]
    for idx in itertools.product(*(range(len(w)) for w in widths)):
        vol = float(np.prod([widths[j][idx[j]] for j in range(m)]))
        key = values[out[idx]]
        law[key] = law.get(key, 0.0) + vol
    return law, evals


def check_sampler_exact(sample_fn, target: Model, draft_model: Model, L: int, n_uniforms: int | None = None,
                        grid: int | str = 2, tol: float = 2.0 ** -40, context=(),
                        atol: float | None = None, drafting=None) -> SamplerCertificate:
    """Exact certificate of a sampler that takes its uniforms as an input.

    For every draft x the law of (tau, Y) is the integral of ``sample_fn(x, p, q, u)`` over the
    uniforms u; that law feeds the exact engine (C(z) = P(z) check, docs/theory.md §2).  The
    uniforms live on a lattice {k / K}^m: with an integer ``grid`` (continuous uniforms), K =
    ceil(1 / ``tol``), standing for [0, 1); with ``grid="float32"``, K = 2^24, the lattice of
    float32 uniform generators (u is passed as a float32 array), on which the law is that of the
    real sampler rather than an approximation.  Integration: each uniform starts from the point
    u = 0 alone, ``grid`` (2 for ``"float32"``) equal cells and the last point; each cell is
    evaluated at one point, and wherever neighbouring cells differ the first lattice point of the
    new output is located by integer bisection and becomes an edge, until nothing changes.

    What is exact.  Under two assumptions, true for token-level and block verification, their
    tree forms and their usual faults (thresholds and inverse-CDF residuals that depend only on
    the draft, its rows and discrete earlier outcomes): (1) the breakpoints along each uniform are
    a finite set independent of the continuous values of the others (axis-aligned product
    structure); (2) along a uniform the output never leaves a value and returns to it inside one
    initial cell.  Then every located edge is the exact first lattice point of its new output, so
    the integrated law is exactly the sampler's law on the lattice: exact for ``"float32"``,
    within (#breakpoints x ``tol``) of the continuous law otherwise.  Samplers drawing one uniform
    per vocabulary entry (Gumbel or exponential races) violate (1): use :func:`check_sampler`.

    Boundary points: u_j = 0 is always evaluated exactly (its own one-point cell), and in
    continuous mode every located breakpoint is refined to adjacent float64 values, so the output
    at the exact boundary (u = p/q for a threshold rule) is evaluated too; points whose output
    differs from both sides are reported (``boundary_points``).  One that emits a string of
    target probability 0 fails the certificate; on the float32 lattice such a point also carries
    mass 2^-24 per uniform in the law.  Impossible strings: any emitted mass on a string of target
    probability 0 fails, however small (``impossible_mass``, as in :func:`specsim.exact.check_lossless`).

    A sampler written for :func:`check_sampler`, drawing from its ``rng`` (``random``, ``choice(p=)``,
    ``integers``) or torch's (``torch.rand``, ``torch.multinomial``...), is certified unmodified
    through :func:`~specsim.testing.from_rng_sampler`, which routes those draws to u.

    Parameters: ``sample_fn(draft_tokens, p, q, u) -> (accepted, token)``, or with ``drafting``
    (a tree process such as ``iid_paths(2)``) ``sample_fn(tree, u) -> (node, token)``, integrated
    over u per enumerated tree; ``u`` holds ``n_uniforms`` values (default: the number of draft
    nodes, root included: L + 1 for a chain, one per drafted token plus one for the emitted token);
    ``target``, ``draft_model``, ``L``; ``grid`` (int >= 1, or
    ``"float32"``); ``tol`` in [2^-52, 2^-20] (continuous mode's lattice spacing); ``context``;
    ``atol`` in [0, 1] on max |C - P| (default 1e-9; for ``"float32"``, (L + 1) m 2^-24, the
    rounding of each of the m uniforms' intervals to the lattice, m the largest number of
    uniforms).  An exception inside ``sample_fn`` is re-raised as :class:`SamplerError` naming the
    draft, its rows and the uniforms; output that is not two integers in range raises
    :class:`SamplerError` (a ``ValueError``).

    Returns: a :class:`SamplerCertificate` (a :class:`specsim.exact.Certificate`).

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
    >>> cert.lossless, cert.max_abs_error < 1e-9, cert.boundary_points
    (True, True, ())
    """
    L = validate_model_pair(target, draft_model, L)
    if not callable(sample_fn):
        raise TypeError(f"sample_fn must be callable, got {type(sample_fn).__name__}")
    if n_uniforms is not None:
        check_int(n_uniforms, "n_uniforms", 1)
    if isinstance(grid, str):
        if grid != "float32":
            raise ValueError(f"grid must be an int >= 1 or 'float32', got {grid!r}")
        cells, points, dtype = 2, FLOAT32_POINTS, np.float32
    else:
        cells, points, dtype = check_int(grid, "grid", 1), None, np.float64
    # bisection stops once hi - lo <= tol: reachable only if tol exceeds the float spacing below 1
    tol = check_real(tol, "tol", 2.0 ** -52, 2.0 ** -20)
    if atol is not None:
        atol = check_real(atol, "atol", 0.0, 1.0)
    tree_mode = drafting is not None and not isinstance(drafting, Chain)
    name = getattr(sample_fn, "name", getattr(sample_fn, "__name__", "sampler"))
    shifted = target.shifted(context)
    ptab = shifted.table(L)
    found: list = []
    evaluations = 0
    most_uniforms = 0

    def impossible(path) -> bool:
        code = 0
        for k, t in enumerate(path):
            if ptab[k][code][t] == 0:
                return True
            code = code * target.V + t
        return False

    what = "(node, token)" if tree_mode else "(accepted, token)"

    def integrate(call, m, n_outcomes, V, draft, path_of, rows=()):
        """The outcome law of one draft: (accepted or node) -> emitted-token distribution."""
        nonlocal evaluations, most_uniforms
        most_uniforms = max(most_uniforms, m)

        def f(u):
            try:
                out = call(u)
            except Exception as exc:  # noqa: BLE001 - re-raised with the draft and uniforms
                raise _raised(name, exc, f"{draft} at uniforms {u.tolist()}", *rows) from exc
            try:
                a, t = _two_ints(out)
            except (TypeError, ValueError):
                raise SamplerError(f"{name} returned {out!r}, not {what}, on draft {draft} at "
                                   f"uniforms {u.tolist()}", draft, rows or None) from None
            if not (0 <= a < n_outcomes and 0 <= t < V):
                raise SamplerError(f"{name} returned {what} = ({a}, {t}), outside 0..{n_outcomes - 1} x 0..{V - 1}, "
                                   f"on draft {draft} at uniforms {u.tolist()}", draft, rows or None)
            return a, t

        seen: list = []
        dist, n = _integrate(f, m, cells, tol, points=points, dtype=dtype, boundary=seen)
        evaluations += n
        for axis, u, o, below, above in seen:
            found.append(BoundaryPoint(draft, axis, u, o, (below, above), impossible(path_of(o[0]) + (o[1],))))
        outs = {}
        for (a, t), w in dist.items():
            outs.setdefault(a, np.zeros(V))[t] += w
        return [Outcome(float(r.sum()), a, r / r.sum()) for a, r in sorted(outs.items())]

    if tree_mode:
        @tree_verifier(name)
        def integrated(tree):
            desc = f"tree tokens={tree.tokens} parent={tree.parent}"
            m = tree.num_nodes if n_uniforms is None else n_uniforms
            return integrate(lambda u: sample_fn(tree, u), m, tree.num_nodes, tree.p.shape[1], desc,
                             lambda node: tuple(tree.path(node)))
    else:
        @chain_verifier(name)
        def integrated(draft_tokens, p, q):
            draft = tuple(int(t) for t in draft_tokens)
            m = L + 1 if n_uniforms is None else n_uniforms
            return integrate(lambda u: sample_fn(draft, p, q, u), m, len(draft) + 1, p.shape[1], draft,
                             lambda a: draft[:a], (p, q))
    cert = check_lossless(integrated, target, draft_model, L, drafting or chain(), context, 1.0)
    if atol is None:
        atol = LOSSLESS_ATOL if points is None else (L + 1) * most_uniforms / FLOAT32_POINTS
    bad_boundary = any(b.impossible for b in found)
    base = {f.name: getattr(cert, f.name) for f in fields(Certificate)}
    base.update(atol=atol, lossless=bool(cert.max_abs_error <= atol and cert.impossible_mass == 0 and not bad_boundary))
    return SamplerCertificate(**base, grid="float32" if points else "float64", boundary_points=tuple(found),
                              evaluations=evaluations)
