"""Whole speculative steps: ``step(context, target_lm, draft_lm, rng) -> emitted token ids``.

A step runs one complete speculative iteration, drafting included, and emits s = (s_1..s_K),
K >= 1 tokens of any length up to ``max_tokens`` = m.  Completing s with exact target samples,
z_k ~ p(.|c, z^{1:k-1}) for k > K, gives a string z in V^m whose law C_m is the completed law.
The step is lossless at context c exactly when C_m(z) = P(z | c) for all z in V^m: the
completion criterion of docs/theory.md §2, with the emission length free instead of tau + 1
(a step that keeps the accepted prefix and emits one token is the case K = tau + 1 <= L + 1 = m).
Hierarchical or multi-token rules that emit several non-draft tokens fit unchanged.

Two checks:

* :func:`check_step`, statistical: n steps with a ``numpy.random.Generator``, the completed
  strings tested against P(. | c) by the completion chi-square of :mod:`specsim.testing.stats`
  (joint law on V^m and the law of every completed prefix of length k < m, Bonferroni over the
  m tests), with the false-alarm rate, the power, the detectable TV and the most over- and
  under-represented strings in the report;
* :func:`check_step_exact`, exact: the step draws every random number from a supplied uniform
  source (``rng.random``, ``rng.uniform``, ``rng.integers``, ``rng.choice``: one uniform per value,
  :class:`~specsim.testing.uniforms.UniformSource`); the law of its emission is integrated over the uniforms (exact for
  threshold rules and inverse-CDF draws, to about #breakpoints x ``tol``; not an enumeration of a
  fixed grid), block by block between the step's LM calls (``method="sequential"``) or by the
  breakpoint-refined product grid of :func:`specsim.testing.check_sampler_exact` over all of them
  (``method="product"``), then completed exactly and compared with P.

:func:`step_from_verifier` builds the step of any chain verifier (draft L tokens from the draft
LM, one batched target call, verify), the reference a hand-written engine step is compared with.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from .._sampling import draw_token
from .._validate import check_int, check_real, check_seed
from ..models import Model
from ..verifiers.base import as_verifier
from .report import ChiSquareCheck
from .sampler import MAX_JOINT_CELLS, SamplerError, _integrate
from .stats import StringCount, complete_with_target, goodness_of_fit, largest_residuals
from .language_models import ToyLM, _as_prefix, toy_lm
from .uniforms import UniformSource, _too_many
from .selftest.power import STEP_CONTEXT, default_instance

__all__ = ["StringCount", "StepCheck", "StepCertificate", "check_step", "check_step_exact",
           "step_from_verifier", "UniformSource"]


@dataclass(frozen=True, kw_only=True)
class StepCheck(ChiSquareCheck):
    """Verdict of :func:`check_step` (a :class:`~specsim.testing.report.ChiSquareCheck` with the
    horizon and the emitted lengths): ``passed`` unless a sub-test rejects, an emitted string has
    target probability 0, or the data are too few (``inconclusive``: the joint test detects no
    completed law with probability ``power`` at this n; ``verdict`` is then ``"INCONCLUSIVE"``).

    ``alpha`` is the false-alarm rate of the call (Bonferroni over ``subtests``: the joint law of
    the completed strings on V^m first, then the law of the completed prefix of each length
    k = 1..m-1); ``detectable_tv`` the TV(C_m, P) the joint test detects with probability
    ``power``; ``impossible`` the number of completed strings with P = 0 (each a certain
    failure); ``over`` / ``under`` the strings with the largest positive / negative standardised
    residuals (impossible strings first); ``length_counts[k-1]`` the steps that emitted k tokens;
    ``tokens_per_call`` the emitted tokens per batched target-LM call (block efficiency for
    steps that call the target once; nan when the step never called ``target_lm``); ``counts``
    the completed strings the sub-tests counted (int64 over V^m, base-V codes, first token most
    significant: Multinomial(n, P) for a lossless step, since the n steps are independent calls
    at one context).  ``str()`` is the report.

    >>> from specsim.testing import check_step
    >>> def one_target_token(context, target_lm, draft_lm, rng):  # lossless: y ~ p(.|context)
    ...     row = target_lm([context])[0]
    ...     return [int(rng.choice(len(row), p=row))]
    >>> res = check_step(one_target_token, n=2000, max_tokens=2)  # the default instance
    >>> res.passed, res.length_counts, len(res.subtests)
    (True, (2000, 0), 2)
    """

    horizon: int
    over: tuple = field(repr=False)
    under: tuple = field(repr=False)
    length_counts: tuple = ()
    tokens_per_call: float = float("nan")
    name: str = "step"
    counts: np.ndarray | None = field(default=None, repr=False, compare=False)

    def _head(self) -> list[str]:
        mean = sum((k + 1) * c for k, c in enumerate(self.length_counts)) / max(self.n, 1)
        return [f"{self.name} [V={self.V}, horizon={self.horizon}, n={self.n}]: {self.verdict} at false-alarm rate "
                f"{self.alpha:g} (Bonferroni over {len(self.subtests)} chi-square tests); detects "
                f"TV >= {self.detectable_tv:.3g} with power {self.power:g} (joint test, df = "
                f"{self.subtests[0].df}, non-central chi-square)",
                f"  emitted lengths 1..{self.horizon}: {list(self.length_counts)} (mean {mean:.3f} tokens per step"
                + (f", {self.tokens_per_call:.3f} per target call)" if np.isfinite(self.tokens_per_call) else ")")]

    def _tail(self) -> list[str]:
        return ["  most over-represented: " + "; ".join(map(str, self.over)),
                "  most under-represented: " + "; ".join(map(str, self.under))]


def _emission(out, call: str, V: int, max_tokens: int) -> tuple[int, ...]:
    """Validate one step output: 1..max_tokens integer ids in 0..V-1, else :class:`SamplerError`."""
    raw = out
    if hasattr(out, "tolist"):
        out = out.tolist()
    if isinstance(out, (int, np.integer)) or isinstance(out, (str, bytes)) or not hasattr(out, "__iter__"):
        raise SamplerError(f"{call} returned {raw!r}; expected a sequence of token ids")
    out = list(out)
    if any(isinstance(t, bool) or not isinstance(t, (int, np.integer)) for t in out):
        raise SamplerError(f"{call} returned {raw!r}; expected integer token ids (a flat sequence)")
    if not 1 <= len(out) <= max_tokens:
        raise SamplerError(f"{call} returned {len(out)} tokens {raw!r}; expected 1..{max_tokens} (max_tokens)")
    bad = [t for t in out if not 0 <= t < V]
    if bad:
        raise SamplerError(f"{call} returned {raw!r}; token {bad[0]} is outside 0..{V - 1}")
    return tuple(int(t) for t in out)


class _AtUniforms:
    """``"<name> at uniforms [...]"``, formatted only if a message needs it (the exact checks run
    the step ~10^4 times and rounding u for every call cost a few percent)."""

    def __init__(self, name: str, u):
        self.name, self.u = name, u

    def __str__(self) -> str:
        return f"{self.name} at uniforms {np.round(self.u, 6).tolist()}"


def _run_step(step, call, args, V: int, max_tokens: int) -> tuple[int, ...]:
    try:
        out = step(*args)
    except SamplerError:
        raise
    except Exception as exc:  # re-raised with the call that caused it
        raise SamplerError(f"{call} raised {type(exc).__name__}: {exc}") from exc
    refused = getattr(args[3], "refused", None)  # a refused draw the step caught is still a failure
    if refused is not None:
        raise SamplerError(f"{call}: {refused}")
    return _emission(out, call, V, max_tokens)


def _models(target, draft_model, max_tokens: int) -> tuple[Model, Model]:
    """The checks' model pair: both given, or both None for the recorded check_step instance."""
    if target is None and draft_model is None:
        target, draft_model, _ = default_instance("step", max_tokens=max_tokens)
    elif not isinstance(target, Model) or not isinstance(draft_model, Model):
        raise TypeError("target and draft_model must be specsim.models.Model objects (or both None for "
                        f"the default instance), got {type(target).__name__} and {type(draft_model).__name__}")
    if target.V != draft_model.V:
        raise ValueError(f"target and draft_model must share V, got {target.V} and {draft_model.V}")
    return target, draft_model


def check_step(step, target: Model | None = None, draft_model: Model | None = None, *, n: int = 20000,
               alpha: float = 1e-3, power: float = 0.99, max_tokens: int = 3, seed: int = 0,
               context: Sequence[int] = STEP_CONTEXT,
               backend: str = "numpy", output: str = "probs", min_expected: float = 5.0, report: int = 3,
               name: str | None = None) -> StepCheck:
    """Statistical losslessness test of a whole speculative step at one context c.

    H0: C_m(z) = P(z | c) for all z in V^m, m = ``max_tokens`` (module docstring; docs/theory.md
    §2 generalised to emissions of any length 1..m).  n steps are run, each emission completed
    with target samples to length m; sub-tests (:func:`specsim.testing.stats.goodness_of_fit`):
    the joint law of the completed strings (V^m cells, small expected counts pooled) and, for
    k = 1..m-1, the law of their first k tokens (V^k cells), each at level ``alpha`` / m, so the
    call's false-alarm rate is at most ``alpha`` when the completed strings are i.i.d. draws from
    P (a chi-square p-value below the level is recomputed on the exact multinomial null law,
    :func:`~specsim.testing.stats.goodness_of_fit`; 36 false alarms in 43,000 exact-null tables
    of the default instance at n = 3000, ``scripts/false_alarm_check_step.py null``; the real
    ``step_from_verifier(block, L=2)`` there: 1 in 1300 fresh seeds, ``... step``).  With too little data (the
    joint test detects no completed law at this n) the verdict is INCONCLUSIVE, never a pass.  A completed string
    with P = 0 fails outright.  Every completed law with TV(C_m, P) >= ``detectable_tv`` is
    flagged with probability >= ``power`` (non-central chi-square).

    Parameters: ``step(context, target_lm, draft_lm, rng) -> token ids`` (``context`` a tuple of
    ids; ``target_lm`` / ``draft_lm`` the :func:`specsim.testing.language_models.toy_lm` callables of ``target``
    and ``draft_model``, taking full prefixes, context included; ``rng`` a
    ``numpy.random.Generator``); ``target``, ``draft_model`` (Models over one V; both None, the
    default: ``default_instance("step", max_tokens=max_tokens)``, a V = 4 pair on which the step
    of every chain mutant is flagged with 99% power by n = 9149 at max_tokens 3 and 4, see
    :mod:`specsim.testing.selftest.power`); ``n``;
    ``alpha``; ``power``; ``max_tokens`` (>= 1, the horizon m; longer emissions are errors);
    ``seed``; ``context`` (default (1,), so a step that drops the context is seen); ``backend``,
    ``output`` (of the LMs, see :func:`~specsim.testing.language_models.toy_lm`); ``min_expected``; ``report``
    (strings listed each way); ``name``.

    Returns: a :class:`StepCheck`.  A step that raises or returns malformed output (not a flat
    sequence of integer ids, empty, longer than ``max_tokens``, ids outside 0..V-1) raises
    :class:`SamplerError` naming the call and the output.

    >>> from specsim.testing import check_step, step_from_verifier
    >>> from specsim.verifiers import block
    >>> res = check_step(step_from_verifier(block, L=2), n=4000)
    >>> res.passed, round(res.detectable_tv, 3), res.subtests[0].name
    (True, 0.075, 'joint law of the completed strings (V^3)')
    """
    check_int(n, "n", 1)
    check_seed(seed)
    m = check_int(max_tokens, "max_tokens", 1)
    target, draft_model = _models(target, draft_model, m)
    check_int(report, "report", 0)
    for value, label in ((alpha, "alpha"), (power, "power")):
        if not (isinstance(value, (int, float)) and 0 < value < 1):
            raise ValueError(f"{label} must be in (0, 1), got {value!r}")
    if not callable(step):
        raise TypeError(f"step must be callable, got {type(step).__name__}")
    V = target.V
    if V ** m > MAX_JOINT_CELLS:
        raise ValueError(f"V**max_tokens = {V ** m} cells is too many for the joint test (at most {MAX_JOINT_CELLS})")
    ctx = _as_prefix(context, "context")
    for t in ctx:
        if not 0 <= t < V:
            raise ValueError(f"context token {t} is outside 0..{V - 1}")
    name = name or getattr(step, "name", getattr(step, "__name__", "step"))
    tlm, dlm = toy_lm(target, backend, output), toy_lm(draft_model, backend, output)
    rng = np.random.default_rng(seed)

    emitted = np.zeros((n, m), dtype=np.int64)
    lengths = np.empty(n, dtype=np.int64)
    for j in range(n):
        s = _run_step(step, f"{name}: call {j} (context {ctx})", (ctx, tlm, dlm, rng), V, m)
        emitted[j, :len(s)] = s
        lengths[j] = len(s)
    calls = tlm.calls

    shifted = target.shifted(ctx)
    z, code = complete_with_target(emitted, lengths, shifted.table(m - 1), rng)
    joint = shifted.joint(m)
    counts = np.bincount(code, minlength=V ** m)
    tests = _subtests(counts, shifted, V, m, alpha, power, min_expected, rng)
    over, under = largest_residuals(counts, joint, V, m, report)
    # too little data is never a pass: INCONCLUSIVE when the joint test could detect nothing
    passed = not any(t.rejected for t in tests) and not tests[0].inconclusive
    return StepCheck(passed=passed, n=n, V=V, horizon=m, alpha=alpha, power=power,
                     detectable_tv=tests[0].detectable_tv, impossible=tests[0].impossible, subtests=tuple(tests),
                     over=over, under=under, length_counts=tuple(np.bincount(lengths - 1, minlength=m).tolist()),
                     tokens_per_call=float(lengths.sum() / calls) if calls else float("nan"), name=name, counts=counts)


def _subtests(counts, shifted: Model, V: int, m: int, alpha: float, power: float, min_expected: float,
              rng) -> list:
    """check_step's sub-tests of the completed-string counts (flat over V^m): the joint law, then the
    law of each completed prefix of length k = 1..m-1, each at level alpha / m (Bonferroni)."""
    level = alpha / m
    counts = np.asarray(counts)
    tests = [goodness_of_fit(counts, shifted.joint(m), level, power, min_expected,
                             f"joint law of the completed strings (V^{m})", rng)]
    for k in range(1, m):
        tests.append(goodness_of_fit(counts.reshape(V ** k, -1).sum(axis=1), shifted.joint(k), level, power,
                                     min_expected, f"law of the first {k} completed tokens", rng))
    return tests


# ----------------------------------------------------------------------------- reference steps
def step_from_verifier(verifier, L: int):
    """The whole step of a chain verifier: draft x_i ~ q(.|c, x^{1:i-1}) for i = 1..L from the
    draft LM (one call per token), read the target rows p(.|c, x^{1:k}), k = 0..L, in one batched
    call, run the verifier's sampler and emit x^{1:tau} y.

    Parameters: ``verifier`` (a chain :class:`~specsim.verifiers.base.Verifier` or its law; a
    tree verifier is a ``TypeError``); ``L`` (>= 1) draft tokens.

    Returns: ``step(context, target_lm, draft_lm, rng) -> tuple of ids`` for :func:`check_step`
    (also usable by :func:`check_step_exact`: it uses only ``rng.random``).

    >>> import numpy as np
    >>> from specsim.models import iid
    >>> from specsim.testing import step_from_verifier; from specsim.testing.language_models import toy_lm
    >>> from specsim.verifiers import token
    >>> step = step_from_verifier(token, L=2)
    >>> step((0,), toy_lm(iid([0.5, 0.5])), toy_lm(iid([0.5, 0.5])), np.random.default_rng(0))
    (1, 0, 1)
    """
    verifier = as_verifier(verifier)
    if verifier.kind != "chain":  # the step drafts one chain and calls verifier.sample(draft, p, q)
        raise TypeError(f"step_from_verifier runs a chain verifier on one drafted chain; {verifier.name!r} is a "
                        f"tree verifier (check it on its draft processes with specsim.check_lossless or "
                        f"specsim.testing.check_sampler(..., drafting=...))")
    L = check_int(L, "L", 1)

    def step(context, target_lm, draft_lm, rng):
        ctx = tuple(context)
        draft, q = [], []
        for _ in range(L):
            row = np.asarray(draft_lm([ctx + tuple(draft)])[0], dtype=np.float64)
            q.append(row)
            draft.append(draw_token(row, rng))
        p = np.asarray(target_lm([ctx + tuple(draft[:k]) for k in range(L + 1)]), dtype=np.float64)
        tau, y = verifier.sample(tuple(draft), p, np.stack(q), rng=rng)
        return tuple(draft[:tau]) + (int(y),)

    step.name = f"step({verifier.name}, L={L})"
    return step


#: Both integrations keep a split cell's evaluated point (:func:`specsim.testing.sampler._integrate`,
#: ``keep_points``): a sixth fewer runs of the step for block verification at V = 3, L = 3; the
#: tests set it False to compare with the reference (every cell at its lower middle).
_KEEP_POINTS = True


# ----------------------------------------------------------------------------- sequential integration
class _BlockEnd(BaseException):
    """Ends a run inside the step: the block being integrated reached an LM call (``label``).  A
    BaseException, so that the step's own ``except Exception`` lets it through."""

    def __init__(self, label):
        super().__init__(label)
        self.label = label


class _NeedMore(BaseException):
    """Ends a run inside the step: it asked for uniforms past the block, ``total`` in all."""

    def __init__(self, total: int):
        super().__init__(total)
        self.total = total


class _BlockSource(UniformSource):
    """The uniforms prefix + block; asking past them within the step's budget of ``n_uniforms``
    raises :class:`_NeedMore` (the block is widened), past the budget :class:`SamplerError`."""

    def __init__(self, u, budget: int):
        super().__init__(u)
        self._budget = budget

    def _short(self, total: int):
        raise _too_many(self._budget) if total > self._budget else _NeedMore(total)


#: The traced LMs cache their rows (_TracedLM); the tests set it False for the reference.
_CACHE_ROWS = True


class _TracedLM(ToyLM):
    """A numpy toy LM whose every batched call is shown to the integrator first (which may end
    the run there).

    The integration re-runs the step ~10^4 times on the same fixed prefix, so the same calls
    recur: their rows are cached (a fresh copy per call, so a step that writes into its rows
    cannot change later answers).  Only prefixes of plain ints are cached; anything else takes
    the ToyLM path and its validation every time."""

    def __init__(self, model: Model, tag: str, integrator):
        super().__init__(model, "numpy", "probs", np.float64)
        self._tag = tag
        self._integrator = integrator
        self._rows_of: dict = {}

    def __call__(self, prefixes):
        self._integrator.lm_call(self._tag, prefixes)
        key = _int_rows(prefixes) if _CACHE_ROWS else None
        rows = None if key is None else self._rows_of.get(key)
        if rows is None:
            rows = super().__call__(prefixes)
            if key is not None:
                self._rows_of[key] = rows.copy()
            return rows
        self.calls += 1
        self.rows += len(key)
        return rows.copy()


def _int_rows(prefixes):
    """``prefixes`` as a tuple of tuples when it is a list or tuple of lists or tuples of plain
    ints (bools excluded: they equal 0 and 1 as keys but ToyLM refuses them), else None."""
    if type(prefixes) not in (list, tuple):
        return None
    key = []
    for s in prefixes:
        if type(s) not in (list, tuple) or not all(type(t) is int for t in s):
            return None
        key.append(tuple(s))
    return tuple(key)


#: Above this many (own, other) pairs the gaps come from a k-d tree (the final block of a step
#: holds ~10^3 points, so the pairwise table was a fifth of check_step_exact's time at L = 3).
_PAIRWISE_GAPS = 1 << 16


def _gaps(own: np.ndarray, others: np.ndarray, tree: bool | None = None) -> np.ndarray:
    """For each row of ``own``, its max-norm distance to the nearest row of ``others`` (exact in
    both paths: the k-d tree's Chebyshev distance is the same max of |differences|, and with
    eps = 0 its nearest neighbour is exact); ``tree`` None picks by size."""
    if tree is None:
        tree = len(own) * len(others) > _PAIRWISE_GAPS
    if tree:
        from scipy.spatial import cKDTree
        return cKDTree(others).query(own, k=1, p=np.inf)[0]
    return np.concatenate([np.abs(own[i:i + 256, None, :] - others[None]).max(axis=2).min(axis=1)
                           for i in range(0, len(own), 256)])


def _representatives(points: dict, label, k: int):
    """Two points (first ``k`` coordinates) of the region with ``label``: ``rep``, the evaluated
    point farthest (max norm) from every point of another label, and ``alt``, the evaluated point
    of the region farthest from ``rep`` (None when the region was evaluated at one point only)."""
    own = np.unique(np.array([v[:k] for v in points[label]]), axis=0)
    others = [v[:k] for lab, vs in points.items() if lab != label for v in vs]
    rep = own[0]
    if others:
        rep = own[int(_gaps(own, np.array(others)).argmax())]
    far = np.abs(own - rep).max(axis=1)
    return rep, (own[int(far.argmax())] if far.max() > 0 else None)


class _SequentialLaw:
    """The emission law of a step integrated block by block (:func:`check_step_exact`,
    ``method="sequential"``).

    A block is the run of uniforms the step consumes from its first uniform after the fixed
    prefix u_1..u_K up to its next LM call (or its end); its label is that call (which LM, the
    prefixes, the uniforms consumed so far) or the emission.  The block's uniforms are integrated
    jointly by the breakpoint-refined product grid (:func:`specsim.testing.sampler._integrate`,
    widened to as many uniforms as the block asks for), and each label that is a call recurses
    on the prefix extended by one representative point of its region."""

    def __init__(self, step, name, ctx, target, draft_model, V, m, M, grid, tol):
        self.step, self.name, self.ctx, self.V, self.m, self.M = step, name, ctx, V, m, M
        self.grid, self.tol = grid, tol
        self._width: dict = {}  # prefix length -> uniforms in the last block after such a prefix
        self.tlm, self.dlm = _TracedLM(target, "target_lm", self), _TracedLM(draft_model, "draft_lm", self)
        self.evaluations = 0
        self._source, self._start = None, 0

    def lm_call(self, tag: str, prefixes) -> None:
        src = self._source
        if src is not None and src.used > self._start:  # the block's first uniform is consumed
            if hasattr(prefixes, "tolist"):
                prefixes = prefixes.tolist()
            rows = tuple(_as_prefix(s, f"prefixes[{b}]") for b, s in enumerate(prefixes))
            raise _BlockEnd(("call", tag, rows, src.used))

    def label(self, u: np.ndarray, start: int):
        """Run the step on the uniforms ``u`` (the block starts after ``start``): its label."""
        self.evaluations += 1
        self._source, self._start = _BlockSource(u, self.M), start
        try:
            return ("out", _run_step(self.step, _AtUniforms(self.name, u),
                                     (self.ctx, self.tlm, self.dlm, self._source), self.V, self.m))
        except _BlockEnd as end:
            return end.label
        finally:
            self._source = None

    def block(self, prefix: np.ndarray):
        """(law of the label of the block after ``prefix``, the points evaluated per label).  The
        block starts as wide as the last one after a prefix of this length (then as wide as the
        step asks)."""
        d = self._width.get(prefix.size, 0)
        while True:
            points: dict = {}

            def f(v):
                lab = self.label(np.concatenate([prefix, v]), prefix.size)
                points.setdefault(lab, []).append(v)
                return lab

            try:
                law = {f(np.empty(0)): 1.0} if d == 0 else \
                    _integrate(f, d, self.grid, self.tol, keep_points=_KEEP_POINTS)[0]
            except _NeedMore as more:
                d = more.total - prefix.size
                continue
            self._width[prefix.size] = d
            return law, points

    def check_same(self, a: np.ndarray, block, b: np.ndarray) -> None:
        """The assumption, probed: after the prefixes ``a`` and ``b`` of one label the next block
        (``block``, integrated after ``a``) gives the same label at a point inside each of its
        regions."""
        law, points = block
        for lab in law:
            v = _representatives(points, lab, len(points[lab][0]))[0]
            got = self.label(np.concatenate([b, v]), b.size)
            if got != lab:
                raise SamplerError(
                    f"{self.name}: method='sequential' needs the step's behaviour after an LM call to depend "
                    f"on the uniforms so far only through its LM calls, but the uniforms "
                    f"{np.round(a, 6).tolist()} and {np.round(b, 6).tolist()} (the same calls) followed by "
                    f"{np.round(v, 6).tolist()} give {lab} and {got}; use method='product'")

    def law(self, prefix: np.ndarray, weight: float, block, out: dict) -> None:
        """Add ``weight`` x the emission law after ``prefix`` (whose block is ``block``) to ``out``."""
        labels, points = block
        for lab, w in labels.items():
            if lab[0] == "out":
                out[lab[1]] = out.get(lab[1], 0.0) + weight * w
                continue
            rep, alt = _representatives(points, lab, lab[3] - prefix.size)
            nxt = np.concatenate([prefix, rep])
            nxt_block = self.block(nxt)
            if alt is not None:
                self.check_same(nxt, nxt_block, np.concatenate([prefix, alt]))
            self.law(nxt, weight * w, nxt_block, out)

    def __call__(self) -> dict:
        out: dict = {}
        start = np.empty(0)
        self.law(start, 1.0, self.block(start), out)
        return out


@dataclass(frozen=True)
class StepCertificate:
    """Exact verdict of :func:`check_step_exact`: ``lossless`` when max_z |C_m(z) - P(z|c)| <=
    ``atol`` and no mass falls on strings with P = 0 (``impossible_mass``); ``tv`` = TV(C_m, P);
    ``worst`` the string of largest |C_m - P|; ``emission_law`` maps each emitted string to its
    probability; ``completed`` and ``target`` are C_m and P (flat, base-V codes); ``evaluations``
    the step calls the integration made; ``method`` the integration used."""

    lossless: bool
    max_abs_error: float
    tv: float
    impossible_mass: float
    worst: tuple
    emission_law: dict = field(repr=False)
    completed: np.ndarray = field(repr=False)
    target: np.ndarray = field(repr=False)
    evaluations: int = 0
    method: str = "sequential"


def check_step_exact(step, target: Model | None = None, draft_model: Model | None = None, *, n_uniforms: int,
                     max_tokens: int = 3, context: Sequence[int] = STEP_CONTEXT, grid: int = 2,
                     tol: float = 2.0 ** -40, atol: float = 1e-9, method: str = "sequential") -> StepCertificate:
    """Exact losslessness certificate of a step that draws its randomness from a uniform source.

    The emission law O(s) = Leb{u in [0,1)^M : step(c, ..., source(u)) = s} over the M =
    ``n_uniforms`` uniforms is integrated (not enumerated on a fixed grid: breakpoints are located
    by bisection to ``tol``, so the law is exact to about #breakpoints x ``tol`` for threshold
    rules and inverse-CDF draws); then C_m(z) = sum_{s prefix of z} O(s) P(z_{|s|+1..m} | c, s)
    and the certificate compares C_m with P(. | c) on V^m.

    ``method="product"``: the breakpoint-refined product grid of
    :func:`specsim.testing.check_sampler_exact` over all M uniforms at once (exact when the
    breakpoints along each uniform come from a finite set: their union is used for every value of
    the others).  Cost: the product of the per-uniform interval counts, which grows with every
    breakpoint a later uniform inherits from earlier draws: about a second for one drafted token
    at V = 3 (M = 3), minutes for block verification of two (M = 5).

    ``method="sequential"`` (default): the uniforms are cut into blocks at the step's LM calls.
    Block 1 is u_1..u_j, the uniforms consumed up to the first LM call after u_1 is asked for;
    its region of [0,1)^j is split by the label (that call: which LM, the prefixes, j; or the
    emission if the step ends first) on the product grid of the block alone; for each call
    label the integration recurses into the next block with u_1..u_j fixed at one point of the
    label's region, and so on:

        O(s) = sum_{labels l of block 1} Leb(region l) O(s | u^{1:j} = a point of region l).

    Assumption: the step's behaviour after an LM call depends on the uniforms consumed before it
    only through the calls it made (and its output), i.e. the drafts and decisions are revealed
    by the prefixes the step asks the LMs about; a step that queries the target once for the whole
    draft and then verifies puts all verification uniforms in its last block (integrated jointly,
    as ``"product"`` would).  The assumption is probed: each label's next block is integrated at
    two points of its region (the one farthest from other labels and the one farthest from it) and
    a difference raises :class:`SamplerError`.  Cost: the outcome tree of the blocks, not the
    product: block verification of 2 (3) drafted tokens at V = 4 in seconds (tens of seconds).

    Parameters: ``step(context, target_lm, draft_lm, rng)`` as in :func:`check_step`, using only
    ``rng.random(size=None)``; ``target``, ``draft_model`` (both None: the check_step instance of
    :func:`specsim.testing.default_instance`); ``n_uniforms`` (>= 1, the most the step asks for;
    unused ones are harmless); ``max_tokens``; ``context``; ``grid`` (>= 1 initial cells per
    uniform); ``tol`` in [2^-52, 2^-20]; ``atol`` in [0, 1]; ``method`` ``"sequential"`` or
    ``"product"``.

    Returns: a :class:`StepCertificate`.  Errors and malformed output raise :class:`SamplerError`.

    >>> from specsim.testing import check_step_exact, step_from_verifier
    >>> from specsim.verifiers import block
    >>> cert = check_step_exact(step_from_verifier(block, L=1), n_uniforms=3, max_tokens=2)
    >>> cert.lossless, cert.max_abs_error < 1e-9, len(cert.emission_law)
    (True, True, 17)
    """
    M = check_int(n_uniforms, "n_uniforms", 1)
    m = check_int(max_tokens, "max_tokens", 1)
    target, draft_model = _models(target, draft_model, m)
    check_int(grid, "grid", 1)
    # bisection stops once hi - lo <= tol: reachable only if tol exceeds the float spacing below 1
    tol = check_real(tol, "tol", 2.0 ** -52, 2.0 ** -20)
    atol = check_real(atol, "atol", 0.0, 1.0)
    if method not in ("sequential", "product"):
        raise ValueError(f"method must be 'sequential' or 'product', got {method!r}")
    if not callable(step):
        raise TypeError(f"step must be callable, got {type(step).__name__}")
    V = target.V
    ctx = _as_prefix(context, "context")
    name = getattr(step, "name", getattr(step, "__name__", "step"))
    if method == "sequential":
        integrator = _SequentialLaw(step, name, ctx, target, draft_model, V, m, M, grid, tol)
        law, evals = integrator(), integrator.evaluations
    else:
        tlm, dlm = toy_lm(target), toy_lm(draft_model)

        def f(u):
            return _run_step(step, _AtUniforms(name, u),
                             (ctx, tlm, dlm, UniformSource(u)), V, m)

        law, evals = _integrate(f, M, grid, tol, keep_points=_KEEP_POINTS)
    shifted = target.shifted(ctx)
    P = shifted.joint(m)
    C = np.zeros(V ** m)
    impossible = 0.0
    for s, w in law.items():
        k = len(s)
        code = 0
        for t in s:
            code = code * V + t
        ps = shifted.joint(k)[code]
        if ps == 0:
            impossible += w
            continue
        block = V ** (m - k)  # the strings z with prefix s: P(z | c) / P(s | c) is their completion
        C[code * block:(code + 1) * block] += w * P[code * block:(code + 1) * block] / ps
    err = np.abs(C - P)
    worst = tuple(int(d) for d in np.unravel_index(int(err.argmax()), (V,) * m))
    max_err = float(err.max())
    return StepCertificate(max_err <= atol and impossible <= 0.0, max_err, float(0.5 * (err.sum() + impossible)),
                           impossible, worst, law, C, P, evals, method)
