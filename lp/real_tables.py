"""Tables on real next-token distributions: acceptance, optimal multi-draft acceptance, lossy rules.

Per position (target p, draft q, full vocabulary) and averaged over positions:

- single-draft acceptance alpha = sum_v min(p_v, q_v) = 1 - TV(p, q) (Leviathan et al., arXiv 2211.17192);
- optimal K-draft acceptance alpha*_K = min_H [p(H) + 1 - Q_sub(H)] with i.i.d. drafts
  (Q_sub = q(H)^K) and without replacement ("Towards Optimal Multi-draft Speculative Decoding",
  arXiv 2502.18779), from :func:`lp.coupling.multidraft_bound`;
- lossy rules: exact output law, acceptance beta, KL(out||p), TV(out, p) and the gap to the
  acceptance-vs-divergence frontier beta*(D(out, p)) - beta (docs/theory.md §9, 10.1), from
  :func:`lp.certificates.certify`; and the frontier itself beta*(eps) from :func:`lp.frontier.frontier`.

Sources are a :class:`specsim.real.RealDataset` or a list of :class:`specsim.real.Pair`.  The
module lives in ``lp`` because the core ``specsim`` never imports ``lp``; ``specsim real tables``
(:mod:`specsim.cli`) prints these tables for a dataset.

Example::

    from specsim import real
    from lp import real_tables
    ds = real.load_dataset(real.committed_dataset())
    print(real_tables.format_rows(real_tables.acceptance_table(ds)))
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from specsim._manifest import check_names
from specsim._validate import as_distribution, check_int
from specsim.verifiers.lossy import LOSSY_RULES

from .certificates import certify
from .coupling import multidraft_bound
from .frontier import _budgets, frontier
from .tables import specinfer_acceptance, spectr_acceptance

__all__ = ["AcceptanceRow", "MultidraftRow", "FrontierRow", "LossyRow", "DEFAULT_RULES", "acceptance_table",
           "multidraft_table", "frontier_table", "lossy_table", "format_rows"]

#: Lossy rules of the default table: (name in specsim.verifiers.lossy.LOSSY_RULES, parameters).
DEFAULT_RULES = (("lenience", {"l": 0.8}), ("mentored", {"alpha": 0.8}), ("typical", {}),
                 ("ensemble", {"w": 0.75}), ("cactus", {"delta": 0.05}), ("topk_accept", {"k": 5}))


@dataclass(frozen=True)
class AcceptanceRow:
    """alpha = sum min(p, q) over the positions of one draft: mean, quartiles, extremes."""
    draft: str
    n: int
    mean: float
    min: float
    q25: float
    median: float
    q75: float
    max: float


@dataclass(frozen=True)
class MultidraftRow:
    """Mean optimal K-draft acceptance (i.i.d. drafts and without replacement; nan if not computed)
    and the mean acceptance of SpecInfer RRS and SpecTr K-SEQ with K i.i.d. drafts, with their mean
    gap to the i.i.d. optimum in percent, 100 (alpha* - alpha) / alpha*."""
    draft: str
    K: int
    n: int
    iid: float
    without_replacement: float
    specinfer: float
    specinfer_gap_pct: float
    spectr: float
    spectr_gap_pct: float


@dataclass(frozen=True)
class FrontierRow:
    """Mean frontier beta*(eps) for one draft and budget eps, in three divergences D(pi, p)."""
    draft: str
    eps: float
    n: int
    tv: float
    kl: float
    kl_reverse: float


@dataclass(frozen=True)
class LossyRow:
    """Means over positions of a lossy rule's certificate: beta, KL(out||p), TV(out, p), frontier gaps.

    ``n_inf`` counts positions with KL(out||p) = inf (its mean is then inf); ``max_gap_kl`` is the
    largest frontier gap at equal KL(out||p).
    """
    draft: str
    rule: str
    n: int
    beta: float
    kl_out_p: float
    tv: float
    gap_kl: float
    gap_tv: float
    max_gap_kl: float
    n_inf: int


def _by_draft(source, drafts: Sequence[str] | None = None) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """(p, q) rows per draft name: from a dataset (validated when loaded) or a list of pairs (validated here)."""
    if hasattr(source, "pairs") and hasattr(source, "drafts"):   # a specsim.real.RealDataset
        names = tuple(source.drafts)
        get = lambda d: list(source.pairs(d))  # noqa: E731
    else:
        if isinstance(source, (str, bytes, Mapping)) or not isinstance(source, Iterable):
            raise TypeError(f"source must be a specsim.real.RealDataset or a list of specsim.real.Pair, "
                            f"got {type(source).__name__}")
        source = list(source)
        if not source:
            raise ValueError("no pairs given")
        rows = []
        for n, pr in enumerate(source):
            if not (hasattr(pr, "p") and isinstance(getattr(pr, "q", None), Mapping)):
                raise TypeError(f"pair {n}: expected a specsim.real.Pair (rows p and q[name]), got {type(pr).__name__}")
            if n and tuple(pr.q) != tuple(source[0].q):
                raise ValueError(f"pair {n} has drafts {tuple(pr.q)}, expected {tuple(source[0].q)}")
            p = as_distribution(pr.p, f"pair {n}: p (target)")
            qs = {d: as_distribution(row, f"pair {n}: q[{d!r}]") for d, row in pr.q.items()}
            for d, q in qs.items():
                if q.size != p.size:
                    raise ValueError(f"pair {n}: q[{d!r}] has {q.size} tokens, p has {p.size}")
            rows.append((p, qs))
        names = tuple(source[0].q)
        get = lambda d: [(p, qs[d]) for p, qs in rows]  # noqa: E731
    if drafts is not None:
        drafts = check_names(drafts, "drafts", example=names[0] if names else "")   # a bare string is one name
        unknown = [d for d in drafts if d not in names]
        if unknown:
            raise ValueError(f"unknown drafts {unknown}; available: {names}")
        names = drafts
    return {d: get(d) for d in names}


def _progress(it, desc, progress):
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be True, False or None (when interactive), got {progress!r}")
    from tqdm.auto import tqdm
    return tqdm(it, desc=desc, disable=None if progress is None else not progress, leave=False)


def acceptance_table(source, drafts: Sequence[str] | None = None) -> list[AcceptanceRow]:
    """alpha = sum_v min(p_v, q_v) = 1 - TV(p, q) per position, summarised per draft.

    Parameters: ``source`` (a :class:`specsim.real.RealDataset` or a list of
    :class:`specsim.real.Pair`, whose rows are checked under the input contract of docs/design.md), ``drafts`` (names to include; default all).

    Returns: ``list`` of :class:`AcceptanceRow`, one per draft.

    >>> import numpy as np
    >>> from specsim.real import Pair
    >>> pairs = [Pair(0, (1,), 2, np.array([0.5, 0.3, 0.2]), {"d": np.array([0.2, 0.3, 0.5])}),
    ...          Pair(0, (1, 2), -1, np.array([0.1, 0.6, 0.3]), {"d": np.array([0.3, 0.4, 0.3])})]
    >>> row = acceptance_table(pairs)[0]
    >>> row.draft, row.n, round(row.mean, 6), round(row.min, 6)
    ('d', 2, 0.75, 0.7)
    """
    rows = []
    for d, prs in _by_draft(source, drafts).items():
        a = np.array([np.minimum(p, q).sum() for p, q in prs])
        qs = np.quantile(a, [0.25, 0.5, 0.75])
        rows.append(AcceptanceRow(d, a.size, float(a.mean()), float(a.min()), *map(float, qs), float(a.max())))
    return rows


def multidraft_table(source, K: Iterable[int] = range(1, 9), drafts: Sequence[str] | None = None,
                     without_replacement_max_K: int | None = None, progress: bool | None = None) -> list[MultidraftRow]:
    """Mean over positions of alpha*_K = min_H [p(H) + 1 - Q_sub(H)] (``lp.coupling.multidraft_bound``),
    next to SpecInfer RRS and SpecTr K-SEQ (closed forms in ``lp.tables``) and their gap to it.

    i.i.d. drafts cost O(V log V) per position; without replacement needs a quadrature for K >= 3
    (~0.3 s per position on the committed SmolLM2 rows at V = 49,152), so
    ``without_replacement_max_K`` can cap it (larger K gets nan).

    Parameters: ``source`` (dataset or list of pairs), ``K`` (numbers of drafts), ``drafts``,
    ``without_replacement_max_K``, ``progress`` (tqdm bar; None = when interactive).

    Returns: ``list`` of :class:`MultidraftRow`, one per (draft, K).

    >>> import numpy as np
    >>> from specsim.real import Pair
    >>> pairs = [Pair(0, (1,), 2, np.array([0.5, 0.3, 0.2]), {"d": np.array([0.2, 0.3, 0.5])}),
    ...          Pair(0, (1, 2), -1, np.array([0.1, 0.6, 0.3]), {"d": np.array([0.3, 0.4, 0.3])})]
    >>> [(r.K, round(r.iid, 6), round(r.without_replacement, 6)) for r in multidraft_table(pairs, K=[1, 2])]
    [(1, 0.75, 0.75), (2, 0.93, 0.992857)]
    """
    Ks = [check_int(k, "K", 1) for k in K]
    if not Ks:
        raise ValueError("K: give at least one number of drafts")
    cap = max(Ks) if without_replacement_max_K is None else check_int(without_replacement_max_K, "without_replacement_max_K", 0)
    rows = []
    for d, prs in _by_draft(source, drafts).items():
        for k in _progress(Ks, f"multidraft {d}", progress):
            opt = np.array([multidraft_bound(p, q, k, replacement=True).value for p, q in prs])
            wor = np.mean([multidraft_bound(p, q, k, replacement=False).value for p, q in prs]) if k <= cap else math.nan
            rrs = np.array([specinfer_acceptance(p, q, k) for p, q in prs])
            seq = np.array([spectr_acceptance(p, q, k) for p, q in prs])
            gap = lambda a: float(np.mean(100.0 * (opt - a) / np.where(opt > 0, opt, 1.0)))  # noqa: E731
            rows.append(MultidraftRow(d, k, len(prs), float(opt.mean()), float(wor), float(rrs.mean()), gap(rrs),
                                      float(seq.mean()), gap(seq)))
    return rows


def frontier_table(source, eps: Iterable[float] = (0.0, 0.01, 0.05, 0.1, 0.5),
                   drafts: Sequence[str] | None = None) -> list[FrontierRow]:
    """Mean over positions of beta*(eps) = max_pi sum min(q, pi) s.t. D(pi, p) <= eps
    (:func:`lp.frontier.frontier`), for D in TV(pi, p), KL(pi||p), KL(p||pi).

    Parameters: ``source`` (dataset or list of pairs), ``eps`` (budgets >= 0), ``drafts``.

    Returns: ``list`` of :class:`FrontierRow`, one per (draft, budget).

    >>> import numpy as np
    >>> from specsim.real import Pair
    >>> pairs = [Pair(0, (1,), 2, np.array([0.5, 0.3, 0.2]), {"d": np.array([0.2, 0.3, 0.5])}),
    ...          Pair(0, (1, 2), -1, np.array([0.1, 0.6, 0.3]), {"d": np.array([0.3, 0.4, 0.3])})]
    >>> r = frontier_table(pairs, eps=[0.05])[0]
    >>> round(r.tv, 6), round(r.kl, 6), round(r.kl_reverse, 6)
    (0.8, 0.863988, 0.871503)
    """
    budgets = _budgets(eps, "eps").tolist()
    rows = []
    for d, prs in _by_draft(source, drafts).items():
        for e in budgets:
            vals = {kind: float(np.mean([frontier(p, q, e, kind).beta for p, q in prs]))
                    for kind in ("tv", "kl", "kl_reverse")}
            rows.append(FrontierRow(d, e, len(prs), vals["tv"], vals["kl"], vals["kl_reverse"]))
    return rows


def lossy_table(source, rules: Sequence[tuple[str, Mapping]] = DEFAULT_RULES,
                drafts: Sequence[str] | None = None) -> list[LossyRow]:
    """Exact certificates of lossy rules at every position (``lp.certificates.certify``), averaged per (draft, rule).

    Parameters: ``source`` (dataset or list of pairs), ``rules`` ((name, parameters) with names
    from ``specsim.verifiers.lossy.LOSSY_RULES``), ``drafts``.

    Returns: ``list`` of :class:`LossyRow`, one per (draft, rule).

    >>> import numpy as np
    >>> from specsim.real import Pair
    >>> pairs = [Pair(0, (1,), 2, np.array([0.5, 0.3, 0.2]), {"d": np.array([0.2, 0.3, 0.5])}),
    ...          Pair(0, (1, 2), -1, np.array([0.1, 0.6, 0.3]), {"d": np.array([0.3, 0.4, 0.3])})]
    >>> r = lossy_table(pairs, rules=[("lenience", {"l": 0.8})])[0]
    >>> r.rule, round(r.beta, 6), round(r.gap_tv, 6)
    ('lenience(l=0.8)', 0.7875, 0.0)
    """
    if isinstance(rules, (str, Mapping)) or not isinstance(rules, Iterable):
        raise TypeError(f"rules must be a sequence of (name, parameters) pairs, got {rules!r}")
    made = []
    for i, spec in enumerate(rules):
        if not (isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], Mapping)):
            raise TypeError(f"rules[{i}] must be a (name, parameters dict) pair, got {spec!r}")
        name, params = spec
        if name not in LOSSY_RULES:
            raise ValueError(f"unknown lossy rule {name!r}; known: {sorted(LOSSY_RULES)}")
        made.append((name + "(" + ", ".join(f"{k}={v}" for k, v in dict(params).items()) + ")",
                     LOSSY_RULES[name](**dict(params))))
    rows = []
    for d, prs in _by_draft(source, drafts).items():
        for label, rule in made:
            cs = [certify(rule, p, q) for p, q in prs]
            kl = np.array([c.kl_out_p for c in cs])
            gaps = np.array([c.gap_kl for c in cs])
            rows.append(LossyRow(d, label, len(cs), float(np.mean([c.beta for c in cs])), float(kl.mean()),
                                 float(np.mean([c.tv for c in cs])), float(gaps.mean()),
                                 float(np.mean([c.gap_tv for c in cs])), float(gaps.max()),
                                 int(np.isinf(kl).sum())))
    return rows


def format_rows(rows: Sequence, digits: int = 4) -> str:
    """A Markdown table of result dataclasses: one column per field, floats to ``digits`` places.

    Parameters: ``rows`` (dataclass instances of one type), ``digits``.

    Returns: the table as text (``str``; ``"(no rows)"`` when empty).

    >>> import numpy as np
    >>> from specsim.real import Pair
    >>> pairs = [Pair(0, (1,), 2, np.array([0.5, 0.3, 0.2]), {"d": np.array([0.2, 0.3, 0.5])}),
    ...          Pair(0, (1, 2), -1, np.array([0.1, 0.6, 0.3]), {"d": np.array([0.3, 0.4, 0.3])})]
    >>> print(format_rows(acceptance_table(pairs), digits=2))
    | draft | n | mean | min | q25 | median | q75 | max |
    |---|---|---|---|---|---|---|---|
    | d | 2 | 0.75 | 0.70 | 0.72 | 0.75 | 0.78 | 0.80 |
    """
    rows = list(rows)
    digits = check_int(digits, "digits", 0)
    if not rows:
        return "(no rows)"
    kinds = {type(r) for r in rows}
    if len(kinds) > 1 or not dataclasses.is_dataclass(rows[0]) or isinstance(rows[0], type):
        raise TypeError(f"rows must be dataclass instances of one type, got {sorted(k.__name__ for k in kinds)}")
    names = [f.name for f in dataclasses.fields(rows[0])]

    def cell(v):
        return f"{v:.{digits}f}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(cell(getattr(r, n)) for n in names) + " |" for r in rows]
    return "\n".join(lines)
