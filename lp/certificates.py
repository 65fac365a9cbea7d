"""Exact certificates of lossy verification rules (docs/theory.md §10.1).

:func:`certify` gives a single-token rule's exact output law, its divergences from the target p
(each with its direction), and the gap to the acceptance-vs-divergence frontier of
:mod:`lp.frontier` at the rule's own divergence.  :func:`certify_sequence` gives the exact law of
the first n emitted tokens of a chain over several iterations (by the exact engine) and the
per-token upper bounds.  Never read a rule's parameter (Cactus delta, FSD threshold) as its output
divergence: these are the exact values.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from specsim import _jit
from specsim._validate import as_pair, check_int, check_real
from specsim.models import validate_model_pair
from specsim.divergences import _kl_log_sums, kl, kl_pair, tv
from specsim.drafts import chain
from specsim.exact import check_lossless, output_law
from specsim.models import Model
from specsim.verifiers.base import Verifier
from specsim.verifiers._clip_family import clip_family
from specsim.verifiers.lossy import LossyVerifier, SingleTokenRule, single_token_chain

from .frontier import _frontier_beta

__all__ = ["LossyCertificate", "certify", "SequenceCertificate", "certify_sequence"]


def _rule_of(rule) -> SingleTokenRule:
    if isinstance(rule, LossyVerifier) and rule.rule is not None:
        return rule.rule
    if isinstance(rule, SingleTokenRule):
        return rule
    raise TypeError(f"rule must be a lossy verifier from specsim.verifiers.lossy or a SingleTokenRule, "
                    f"got {rule!r}")


@dataclass(frozen=True)
class LossyCertificate:
    """Exact one-token certificate of a lossy rule at (p, q) (docs/theory.md §10.1).

    ``out`` is the exact output law; ``kl_out_p`` = KL(out||p), ``kl_p_out`` = KL(p||out) (inf when
    supports differ, explained in ``infinite``), ``tv`` = TV(out, p), ``max_ratio`` = max out/p and
    ``dinf`` = D_inf(out||p) = log max_ratio, ``between`` = min(p, q) <= out <= max(p, q).
    ``frontier_*`` = beta* at the rule's own divergence in that direction; ``gap_*`` = beta* - beta
    (>= 0 up to rounding: no rule beats the frontier).
    """

    rule: str
    params: dict
    out: np.ndarray = field(repr=False)
    beta: float
    kl_out_p: float
    kl_p_out: float
    tv: float
    max_ratio: float
    dinf: float
    between: bool
    frontier_tv: float
    frontier_kl: float
    frontier_kl_reverse: float
    infinite: str = ""
    label: str = ""

    @property
    def gap_tv(self) -> float:
        return self.frontier_tv - self.beta

    @property
    def gap_kl(self) -> float:
        return self.frontier_kl - self.beta

    @property
    def gap_kl_reverse(self) -> float:
        return self.frontier_kl_reverse - self.beta

    def __str__(self) -> str:
        par = ", ".join(f"{k}={v}" for k, v in self.params.items())
        lines = [f"{self.rule}({par})" + (f"  [{self.label}]" if self.label else ""),
                 f"  out = {np.array2string(self.out, precision=6, max_line_width=200)}",
                 f"  beta = {self.beta:.6f}   between p and q: {self.between}",
                 f"  KL(out||p) = {self.kl_out_p:.6f}   frontier at that KL: {self.frontier_kl:.6f}"
                 f"  (gap {self.gap_kl:+.6f})",
                 f"  KL(p||out) = {self.kl_p_out:.6f}   frontier at that KL: {self.frontier_kl_reverse:.6f}"
                 f"  (gap {self.gap_kl_reverse:+.6f})",
                 f"  TV(out,p)  = {self.tv:.6f}   frontier at that TV: {self.frontier_tv:.6f}"
                 f"  (gap {self.gap_tv:+.6f})",
                 f"  max out/p  = {self.max_ratio:.6f}   D_inf(out||p) = {self.dinf:.6f}"]
        if self.infinite:
            lines.append(f"  note: {self.infinite}")
        return "\n".join(lines)


def _support_note(out, p) -> str:
    notes = []
    off = (out > 0) & (p <= 0)
    if off.any():
        notes.append(f"KL(out||p) = inf: out puts mass {out[off].sum():.3g} where p = 0 "
                     f"(e.g. token {int(np.flatnonzero(off)[0])})")
    miss = (p > 0) & (out <= 0)
    if miss.any():
        notes.append(_miss_note(p[miss].sum(), int(np.flatnonzero(miss)[0])))
    return "; ".join(notes)


def _miss_note(mass, token) -> str:
    return f"KL(p||out) = inf: out = 0 on tokens with p mass {mass:.3g} (e.g. token {token})"


def _out_fields(out, p, q, atol, fam):
    """(KL(out||p), KL(p||out), TV(out, p), max out/p, betweenness, out == q, support note, None)
    of :func:`certify` by numpy (the reference; the path without numba)."""
    (k1, k2), t = kl_pair(out, p), tv(out, p)     # one log pass for both directions
    if fam.m == p.size:  # p > 0 everywhere
        mr = float((out / p).max())
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(p > 0, out / np.where(p > 0, p, 1.0), np.where(out > 0, np.inf, 0.0))
        mr = float(ratio.max())
    edge = np.minimum(p, q)
    edge -= atol
    between = bool(np.all(out >= edge))
    if between:
        np.maximum(p, q, out=edge)
        edge += atol
        between = bool(np.all(out <= edge))
    return k1, k2, t, mr, between, bool(np.array_equal(out, q)), _support_note(out, p), None


#: entries per chunk of the dense fields (:mod:`lp._fields_kernels`): a chunk's out, p, q and its
#: 8 work rows (11 x 64 KB) stay in a core's L2 cache (1 MB) between the passes over it
_CHUNK = 8192


@functools.lru_cache(maxsize=16)
def _chunk_plan(n, chunk):
    from . import _fields_kernels as FK

    plan = FK.chunk_plan(n, chunk)
    L, nc = int(plan[0]), int(plan[1])
    offs = plan[3 + L + nc:].tolist()
    return plan, tuple(b - a for a, b in zip(offs[:-1], offs[1:])), L


def _dense_fields(out, p, q, atol, chunk):
    """The fields of :func:`_out_fields_compiled` on a row with out > 0 and p > 0 everywhere, chunk by
    chunk (:mod:`lp._fields_kernels`): the same operations on the same values, so the same bits.
    None where the whole-row path must decide (a zero or non-finite entry, non-finite sums)."""
    from specsim.divergences import _kl_clip_pair
    from . import _fields_kernels as FK

    n = p.size
    plan, sizes, L = _chunk_plan(n, chunk)
    width = max(sizes)
    buf = _jit.work_block("certify chunks", 1, 8 * (width + 8))[0].reshape(8, width + 8)
    lr, d, logs, pk = buf[0], buf[1], buf[2], buf[5]
    acc = np.empty((5, max(L, 4)))
    step, log, log1p, nc = FK.fields_step, np.log, np.log1p, len(sizes)
    NEAR, FAR, ABORT, PACK_LOG1P, PACK = FK.NEAR, FK.FAR, FK.ABORT, FK.PACK_LOG1P, FK.PACK_LOG1P | FK.PACK_LOG
    with np.errstate(all="ignore"):
        for j in range(nc + 1):                 # step j sums chunk j - 1 and passes over chunk j
            code = step(out, p, q, atol, plan, j, buf, acc)
            if code & ABORT:
                return None
            if code:                            # chunk j's logs, numpy's (the reference bits)
                m = sizes[j]
                if code & FAR:
                    log(lr[:m], out=logs[:m])
                if code & NEAR:
                    log1p(d[:m], out=d[:m])
                if code & PACK:                 # the chunk's few ratios on the other side, packed
                    k = code >> 5
                    (log1p if code & PACK_LOG1P else log)(pk[:k], out=pk[:k])
        mr, between, equal_q, t, tv_pq, xy, yx = FK.fields_total(n, acc)
    pair = _kl_clip_pair(xy, -yx)
    if pair is None:
        return None
    return float(pair[0]), float(pair[1]), float(0.5 * t), float(mr), bool(between), bool(equal_q), "", \
        float(0.5 * tv_pq)


def _miss_fields(out, p, q, atol, chunk):
    """The fields of :func:`_out_fields_compiled` on a row with p > 0 everywhere and out >= 0 with
    zeros (KL(p||out) = inf): one compiled pass (:func:`lp._fields_kernels.miss_pass`) for the
    flags, max out/p, both TV sums and the support note's numbers, then the numpy path's own KL sum
    (:func:`specsim.divergences._log_ratio`, ``_dot``) over the k entries with out > 0, packed as
    numpy packs them: the same bits.  None where the whole-row path must decide."""
    from specsim.divergences import _dot, _log_ratio
    from . import _fields_kernels as FK

    plan = _chunk_plan(p.size, chunk)[0]
    work = _jit.work_block("certify", 5, p.size)
    ok, mr, broken, ne, k, first, t, tv_pq, mass = FK.miss_pass(out, p, q, atol, plan, work[0], work[1],
                                                                work[2].view(np.int64))
    if not ok:
        return None
    xs, ys = work[0][:k], work[1][:k]
    with np.errstate(all="ignore"):
        xy = _dot(xs, _log_ratio(xs, ys))
    if not np.isfinite(xy):                     # over- or underflowing ratios
        return None
    return max(xy, 0.0), np.inf, float(0.5 * t), float(mr), not broken, not ne, _miss_note(mass, first), \
        float(0.5 * tv_pq)


def _out_fields_compiled(out, p, q, atol, chunk=_CHUNK):
    """:func:`_out_fields` by two compiled passes and numpy's vectorised logs, with the same terms
    summed in the same order (:mod:`specsim.verifiers._clip_kernels`); None where the numpy path
    must decide (a bad ``out``, subnormal ratios).  The last field is TV(p, q), for the TV frontier.
    A dense row (out > 0 and p > 0 everywhere) goes by chunks of ``chunk`` entries
    (:func:`_dense_fields`), a row with p > 0 and zeros in out by one pass over the same chunks
    (:func:`_miss_fields`); ``chunk`` 0: by whole rows, the reference of the tests."""
    from specsim import _kl_kernels as KL
    from specsim.verifiers import _clip_kernels as K

    out, p, q = (np.ascontiguousarray(x, dtype=np.float64) for x in (out, p, q))
    if out.shape != p.shape:
        return None
    n = p.size
    if chunk and n:
        fields = _dense_fields(out, p, q, float(atol), chunk)
        if fields is None:                      # out = 0 somewhere (or a row the whole-row path decides)
            fields = _miss_fields(out, p, q, float(atol), chunk)
        if fields is not None:
            return fields
    work = _jit.work_block("certify", 5, n)
    with np.errstate(all="ignore"):
        bad, same, off, miss, mr, between, equal_q, dense, near, far, t, tv_pq = K.out_pass(
            out, p, q, float(atol), work[1], work[2])
        if bad:
            return None
        if mr < 0:
            mr = work[1].max() if n else 0.0
        t, tv_pq = float(0.5 * t), float(0.5 * tv_pq)
        k1 = k2 = np.inf
        if same:
            k = n if dense else KL.ratio_rows(out, p, work[1], work[2])[0]
            pair = _kl_log_sums(out, p, work, k, near, dense, True, far)
            if pair is None:
                return None
            k1, k2 = pair
        else:  # one direction at most is finite: the support of its first argument lies in the other's
            for flag, x, y in ((off, out, p), (miss, p, out)):
                if flag:
                    continue
                k, near_xy, _ = KL.ratio_rows(x, y, work[1], work[2])
                one = _kl_log_sums(x, y, work, k, near_xy, False, False)
                if one is None:
                    return None
                if x is out:
                    k1 = one[0]
                else:
                    k2 = one[0]
    note = _support_note(out, p) if (off or miss) else ""
    return float(k1), float(k2), t, float(mr), bool(between), bool(equal_q), note, tv_pq


def certify(rule, p, q, atol: float = 1e-12) -> LossyCertificate:
    """Exact one-token certificate of a single-token lossy rule at (p, q) (docs/theory.md §10.1).

    out(y) = q(y) a(y) + sum_x q(x) (1 - a(x)) R_x(y) (the rule's closed-form law) and
    beta = sum_x q(x) a(x); reported with KL(out||p), KL(p||out), TV(out, p),
    D_inf(out||p) = log max out/p, betweenness min(p, q) - atol <= out <= max(p, q) + atol, and the
    frontier beta*(D(out, p)) of :func:`lp.frontier.frontier` for each divergence D.  Cost without
    numba: one sort of q/p (a ``ClipFamily`` shared by the rule's closed form and both KL
    frontiers) plus O(V) passes.  With numba (specsim._jit) the family is grouped by buckets of
    q/p, built only if the rule or a KL frontier needs more than D(q, p), and sorts only the
    buckets its queries land in (no full sort); the divergence fields, KL sums, clip-level
    bisections and the heavier closed forms are compiled passes (the fields of a row with out > 0
    and p > 0 by chunks that stay in the L2 cache, of one with zeros in out in one pass writing only
    the k entries with out > 0, :mod:`lp._fields_kernels`): the fields of rules
    that do not use the family are the numpy path's bit for bit, the others agree to rounding (sums
    in another order).  1.1-2.0 ms at V = 151,936, 1.7-2.9x one ``np.sort(p)`` (0.69 ms, AVX-512)
    against 7.7-12.7x for the numpy path (``python benchmarks/issue27.py``, idle 2-core AMD EPYC,
    calls interleaved with other work so caches are cold; the first certificates in a fresh
    install compile for ~15 s, later processes load the disk cache in ~0.5 s).

    Parameters: ``rule`` (a lossy verifier from :mod:`specsim.verifiers.lossy` or its
    ``SingleTokenRule``), ``p`` target and ``q`` draft (probability vectors over the same V >= 2
    tokens, under the input contract of docs/design.md), ``atol`` (tolerance of the betweenness
    test, a real number in [0, 1]).

    Returns: :class:`LossyCertificate` (``str()`` prints it as a table).

    >>> from specsim.verifiers.lossy import cactus
    >>> from lp.frontier import E1_P, E1_Q
    >>> c = certify(cactus(0.05), E1_P, E1_Q)
    >>> round(c.kl_out_p, 6), round(c.beta, 6), round(c.gap_kl, 6)   # KL(out||p) > delta = 0.05
    (0.082227, 0.56892, 0.001049)
    """
    r = _rule_of(rule)
    p, q = as_pair(p, q, scratch="certify rows")   # the rows never leave the call (a view kept would pin them)
    atol = check_real(atol, "atol", 0.0, 1.0)
    fam = clip_family(p, q)  # one family for the rule (mentored, Cactus) and both KL frontiers
    with fam.shared():
        out, beta = r.out_beta(p, q)
    fields = _out_fields_compiled(out, p, q, atol) if _jit.enabled() else None
    k1, k2, t, mr, between, equal_q, note, tv_pq = fields or _out_fields(out, p, q, atol, fam)
    if equal_q:
        # the rule emits q (FSD below its threshold): pi = q meets the budget D(q, p) in either KL
        # direction, with acceptance 1, so beta* = 1 exactly (no clip level to search)
        f_kl = f_kl_reverse = 1.0
    else:
        f_kl, f_kl_reverse = (_frontier_beta(p, q, k, kind, fam, tv_pq=tv_pq)
                              for k, kind in ((k1, "kl"), (k2, "kl_reverse")))
    return LossyCertificate(r.name, dict(r.params), out, beta, k1, k2, t, mr,
                            float(np.log(mr)) if mr > 0 else -np.inf, between,
                            _frontier_beta(p, q, t, "tv", fam, tv_pq=tv_pq), f_kl, f_kl_reverse, note, r.label)


@dataclass(frozen=True)
class SequenceCertificate:
    """Exact law of the first n emitted tokens (several iterations) of a chain of a lossy rule.

    ``kl_out_p`` = KL(Out_{1:n} || P_{1:n}), ``kl_p_out`` = KL(P_{1:n} || Out_{1:n}), ``tv`` =
    TV(Out_{1:n}, P_{1:n}), all exact.  ``*_bound`` are the per-token UPPER BOUNDS of docs/theory.md §10.1:
    sum_{t=1}^n max_{|c| = t-1} D(out_c, p_c) over the rows c a token at position t can be verified
    with (the token's law given its prefix is a mixture of out_c and p_c; convexity).
    ``one_iteration_tv`` is the engine's TV between the completed one-iteration law and P_{1:L+1}.
    """

    rule: str
    V: int
    L: int
    n: int
    kl_out_p: float
    kl_p_out: float
    tv: float
    kl_out_p_bound: float
    kl_p_out_bound: float
    tv_bound: float
    block_efficiency: float
    one_iteration_tv: float
    stream: np.ndarray = field(repr=False)
    target: np.ndarray = field(repr=False)


def _strings_law(verifier, target, draft_model, L, n):
    """Law over V^n of the first n tokens of the stream, F(c, m) = sum_k O_c(z^{1:k}) F(c z^{1:k}, m-k),
    and the one-iteration law at the empty context."""
    V = target.V
    laws: dict[tuple, object] = {}
    memo: dict[tuple, np.ndarray] = {}

    def law_at(ctx):
        if ctx not in laws:
            laws[ctx] = output_law(verifier, target, draft_model, L, chain(), context=ctx)
        return laws[ctx]

    def F(ctx, m):
        key = (ctx, m)
        if key in memo:
            return memo[key]
        O = law_at(ctx)
        res = np.zeros(V ** m)
        for k in range(1, L + 2):
            Ok = O.emitted[k]
            if k >= m:
                res += Ok.reshape(V ** m, V ** (k - m)).sum(axis=1)
                continue
            block = V ** (m - k)
            for s in np.flatnonzero(Ok > 0):
                toks, code = [], int(s)
                for _ in range(k):
                    code, t = divmod(code, V)
                    toks.append(t)
                res[s * block:(s + 1) * block] += Ok[s] * F(ctx + tuple(reversed(toks)), m - k)
        memo[key] = res
        return res

    return F((), n), laws[()]


def certify_sequence(rule, target: Model, draft_model: Model, L: int, n: int | None = None) -> SequenceCertificate:
    """Exact sequence-level certificate of a lossy chain verifier (docs/theory.md §10.1).

    Out_{1:n}(z) = sum over the ways to cut z into iterations of prod O_c(segment), where O_c is
    the exact one-iteration law at context c from :func:`specsim.exact.output_law` (chain
    drafting), compared with the target's joint law P_{1:n}: KL both ways and TV, exactly, next to
    the per-token upper bounds sum_{t<=n} max_{|c| = t-1} D(out_c, p_c).  Cost: sum_{j<n} V^j
    engine calls of V^L drafts each (V <= 4, n <= 4 is instant).

    Parameters: ``rule`` (a lossy verifier or ``SingleTokenRule``; any chain ``Verifier`` for the
    exact part, whose bounds are then NaN), ``target`` and ``draft_model``
    (:class:`~specsim.models.Model` over the same V), draft
    length ``L`` >= 1, number of tokens ``n`` (default L + 1).

    Returns: :class:`SequenceCertificate` (with the stream law ``stream`` and ``target`` over V^n).

    >>> from specsim.models import random_model
    >>> from specsim.verifiers.lossy import cactus
    >>> c = certify_sequence(cactus(0.05), random_model(3, 0), random_model(3, 1), L=2)
    >>> c.stream.shape, bool(c.kl_out_p <= c.kl_out_p_bound), round(c.tv, 6)
    ((27,), True, 0.214083)
    """
    L = validate_model_pair(target, draft_model, L)
    n = L + 1 if n is None else check_int(n, "n", 1)
    if isinstance(rule, SingleTokenRule):
        verifier = single_token_chain(rule)
    elif isinstance(rule, Verifier) and rule.kind == "chain":
        verifier = rule
    else:
        raise TypeError(f"rule must be a chain Verifier or a SingleTokenRule, got {rule!r}")
    V = target.V
    stream, root = _strings_law(verifier, target, draft_model, L, n)
    P = target.joint(n)
    bounds = np.zeros(3)
    single = _rule_of(verifier) if isinstance(verifier, LossyVerifier) else None
    if single is not None:
        ptab, dtab = target.table(n - 1), draft_model.table(n - 1)
        for m in range(n):
            worst = np.zeros(3)
            for pr, qr in zip(ptab[m], dtab[m]):
                o = single.closed_out(pr, qr)
                worst = np.maximum(worst, [kl(o, pr), kl(pr, o), tv(o, pr)])
            bounds += worst
    else:
        bounds[:] = np.nan
    cert = check_lossless(verifier, target, draft_model, L)
    return SequenceCertificate(verifier.name, V, L, n, kl(stream, P), kl(P, stream), tv(stream, P),
                               float(bounds[0]), float(bounds[1]), float(bounds[2]),
                               root.block_efficiency, cert.tv, stream, P)
