"""Gap tables: each multi-draft verifier's token-level acceptance next to the optimum (docs/theory.md §6).

Acceptance = P(the emitted token is one of the drafts) at one position, for K drafts.  Closed forms
are computed here; verifiers without one are evaluated by exact enumeration of the draft tuples
(:func:`specsim.multidraft.multidraft_acceptance`, small V^K only):

- single-draft speculative sampling: sum_v min(p_v, q_v) (uses one of the K drafts);
- SpecInfer recursive rejection sampling (Miao et al., arXiv 2305.09781), K i.i.d. drafts:
  1 - prod_j (1 - a_j), a_j = sum min(R_{j-1}, q), R_0 = p, R_j = norm((R_{j-1} - q)_+);
- SpecTr k-sequential selection (Sun et al., arXiv 2310.15141): 1 - (1 - beta(rho*))^K with
  beta(rho) = sum min(q, p/rho) and rho* the smallest valid rho in [1, K];
- the optima with and without replacement (:func:`lp.coupling.multidraft_bound`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from specsim._validate import as_pair, check_int, check_seed
from specsim.models import validate_model_pair
from specsim.models import Model, random_model

from specsim.multidraft import multidraft_acceptance
from specsim.verifiers.kseq import kseq_rho

from .coupling import maximal_coupling, multidraft_bound

__all__ = ["specinfer_acceptance", "spectr_acceptance", "spectr_rho", "GapRow", "GapTable",
           "gap_table", "model_gap_table", "bounds_report", "DEFAULT_VERIFIERS"]


def specinfer_acceptance(p, q, K: int) -> float:
    """SpecInfer RRS with K i.i.d. drafts: alpha = 1 - prod_{j=1}^K (1 - a_j) (docs/theory.md §6.1).

    a_j = sum_v min(R_{j-1}, q), R_0 = p, R_j = norm((R_{j-1} - q)_+); Miao et al., "SpecInfer",
    arXiv 2305.09781.

    Parameters: ``p`` target, ``q`` draft (probability vectors over the same V >= 2, the input contract of docs/design.md),
    ``K`` >= 1.

    Returns: the acceptance alpha (``float``).

    >>> specinfer_acceptance([1, 0], [0.5, 0.5], 2)
    0.75
    """
    p, q = as_pair(p, q)
    K = check_int(K, "K", 1)
    R, miss = p.copy(), 1.0
    for _ in range(K):
        a = float(np.minimum(R, q).sum())
        miss *= 1.0 - a
        rest = np.maximum(R - q, 0.0)
        if rest.sum() <= 0.0:       # R = q: accepted surely
            return 1.0
        R = rest / rest.sum()
    return 1.0 - miss


def spectr_rho(p, q, K: int) -> float:
    """rho* = the smallest valid rho in [1, K] for SpecTr's K-SEQ (docs/theory.md §6.4).

    The verifier's own :func:`specsim.verifiers.kseq.kseq_rho`, so tables and verifier agree by
    construction.

    Parameters: ``p`` target, ``q`` draft (the input contract of docs/design.md), ``K`` >= 1 drafts.

    Returns: rho* (``float``).

    >>> spectr_rho([1, 0], [0.5, 0.5], 2)
    1.0
    """
    return kseq_rho(p, q, check_int(K, "K", 1))


def spectr_acceptance(p, q, K: int) -> float:
    """SpecTr K-SEQ acceptance 1 - (1 - beta(rho*))^K, beta(rho) = sum_v min(q_v, p_v/rho) (docs/theory.md §6.4).

    Sun, Suresh, Ro, Beirami, Jain, Yu, "SpecTr", arXiv 2310.15141 (the paper's p is the draft).

    Parameters: ``p`` target, ``q`` draft (probability vectors over the same V >= 2, the input contract of docs/design.md),
    ``K`` >= 1.

    Returns: the acceptance (``float``).

    >>> spectr_acceptance([1, 0], [0.5, 0.5], 2)
    0.75
    """
    p, q = as_pair(p, q)
    rho = spectr_rho(p, q, K)
    beta = float(np.minimum(q, p / rho).sum())
    return 1.0 - (1.0 - beta) ** K


#: Largest number of ordered draft tuples (V^K) for which verifiers without a closed form are
#: evaluated by the exact engine (:func:`specsim.multidraft.multidraft_acceptance`).
MAX_EXACT_TUPLES = 5000


def _enumerated_acceptance(name: str, replacement: bool):
    """acceptance(p, q, K) of tree verifier ``name`` by exact enumeration of the V^K draft tuples."""
    def acceptance(p, q, K):
        if p.size ** K > MAX_EXACT_TUPLES:
            return None  # no closed form and too many draft tuples to enumerate: row omitted
        return multidraft_acceptance(name, p, q, K, replacement)
    return acceptance


#: name -> (acceptance(p, q, K) or None when not computable at this size, drafts with replacement?)
DEFAULT_VERIFIERS: dict[str, tuple[Callable[[np.ndarray, np.ndarray, int], float | None], bool]] = {
    "speculative sampling (1 draft)": (lambda p, q, K: maximal_coupling(p, q).value, True),
    "SpecInfer RRS": (specinfer_acceptance, True),
    "SpecTr K-SEQ": (spectr_acceptance, True),
    "Khisti two-step (exact)": (_enumerated_acceptance("khisti", True), True),
    "GBV, L=1 (exact)": (_enumerated_acceptance("gbv", True), True),
    "Sequoia SWOR RRS (exact)": (_enumerated_acceptance("sequoia", False), False),
    "traversal, L=1 (exact)": (_enumerated_acceptance("traversal", False), False),
}


@dataclass(frozen=True)
class GapRow:
    """One verifier at one K: ``acceptance`` vs the ``optimum`` for the same draft law."""

    name: str
    K: int
    replacement: bool
    acceptance: float
    optimum: float

    @property
    def gap_percent(self) -> float:
        """100 (optimum - acceptance) / optimum (0 when the optimum is 0)."""
        return 100.0 * (self.optimum - self.acceptance) / self.optimum if self.optimum > 0 else 0.0


@dataclass(frozen=True)
class GapTable:
    """Rows of :class:`GapRow`; ``str()`` prints acceptance, optimum and gap in percent."""

    rows: tuple[GapRow, ...]
    V: int
    title: str = ""

    def __str__(self) -> str:
        head = f"{'K':>3}  {'verifier':<34}{'drafts':<10}{'accept':>10}{'optimum':>10}{'gap %':>8}"
        lines = [self.title] if self.title else []
        lines += [head, "-" * len(head)]
        for r in self.rows:
            lines.append(f"{r.K:>3}  {r.name:<34}{'iid' if r.replacement else 'w/o repl':<10}"
                         f"{r.acceptance:>10.6f}{r.optimum:>10.6f}{r.gap_percent:>8.2f}")
        return "\n".join(lines)


def _check_verifiers(verifiers) -> dict[str, tuple[Callable, bool]]:
    """``verifiers``: a mapping name -> acceptance(p, q, K) or (acceptance, replacement)."""
    if not isinstance(verifiers, Mapping):
        raise TypeError(f"verifiers must be a mapping name -> acceptance(p, q, K) or (acceptance, replacement), "
                        f"got {type(verifiers).__name__}")
    out = {}
    for name, spec in verifiers.items():
        fn, rep = spec if isinstance(spec, tuple) and len(spec) == 2 else (spec, True)
        if not callable(fn) or not isinstance(rep, (bool, np.bool_)):
            raise TypeError(f"verifiers[{name!r}] must be acceptance(p, q, K) or (acceptance, replacement: bool), "
                            f"got {spec!r}")
        out[str(name)] = (fn, bool(rep))
    return out


def gap_table(p, q, K_values=(1, 2, 4), verifiers: Mapping | None = None, title: str = "") -> GapTable:
    """Acceptance of each multi-draft verifier next to alpha* = min_H [p(H) + 1 - Q_sub(H)].

    For every K in ``K_values``: one row per verifier (``verifiers`` maps a name to
    ``(acceptance(p, q, K), replacement)``; default :data:`DEFAULT_VERIFIERS`), compared with the
    optimum for its draft law, then the optima themselves (i.i.d. and, when K <= V, without
    replacement).  Gap = 100 (optimum - acceptance) / optimum.

    Parameters: ``p`` target, ``q`` draft (the input contract of docs/design.md), ``K_values``
    (integers >= 1), ``verifiers`` (a mapping name -> ``acceptance(p, q, K)`` or
    ``(acceptance, replacement)``), ``title`` (a string).

    Returns: :class:`GapTable` (``str()`` prints it).

    >>> t = gap_table([1, 0], [0.5, 0.5], K_values=(2,))
    >>> [(r.name, round(r.acceptance, 6), round(r.gap_percent, 2)) for r in t.rows][:3]
    [('speculative sampling (1 draft)', 0.5, 33.33), ('SpecInfer RRS', 0.75, 0.0), ('SpecTr K-SEQ', 0.75, 0.0)]
    """
    p, q = as_pair(p, q)
    verifiers = _check_verifiers(DEFAULT_VERIFIERS if verifiers is None else verifiers)
    if not isinstance(title, str):
        raise TypeError(f"title must be a string, got {title!r}")
    Ks = [check_int(K, "K", 1) for K in np.atleast_1d(K_values).tolist()]
    rows = []
    for K in Ks:
        opt = {True: multidraft_bound(p, q, K, True).value}
        if K <= p.size:
            opt[False] = multidraft_bound(p, q, K, False).value
        for name, (fn, rep) in verifiers.items():
            value = fn(p, q, K) if rep in opt else None
            if value is not None:
                rows.append(GapRow(name, K, rep, float(value), opt[rep]))
        for rep, val in opt.items():
            rows.append(GapRow("optimum", K, rep, val, val))
    return GapTable(tuple(rows), p.size, title)


def model_gap_table(target: Model, draft_model: Model, K_values=(1, 2, 4), context=(),
                    verifiers: Mapping | None = None) -> GapTable:
    """:func:`gap_table` for a model pair at the position after ``context``: p = target(context),
    q = draft_model(context).

    Parameters: ``target``, ``draft_model`` (:class:`~specsim.models.Model` over the same V),
    ``K_values``, ``context`` (token ids), ``verifiers``.

    Returns: :class:`GapTable`.

    >>> from specsim.models import iid
    >>> t = model_gap_table(iid([1.0, 0.0]), iid([0.5, 0.5]), K_values=(2,))
    >>> [(r.name, r.replacement, round(r.acceptance, 6)) for r in t.rows if r.name == "optimum"]
    [('optimum', True, 0.75), ('optimum', False, 1.0)]
    """
    validate_model_pair(target, draft_model, 0, min_L=0)   # one position: no draft length
    return gap_table(target(context), draft_model(context), K_values, verifiers,
                     f"{target.name} vs {draft_model.name} at context {tuple(context)}")


def bounds_report(p=None, q=None, K=(1, 2, 4), V: int = 8, seed: int = 0) -> str:
    """Text report for ``specsim bounds``: the gap table for (p, q), or for a random pair.

    Without ``p`` and ``q``, p and q are the first-position rows of ``random_model(V, seed)`` and
    ``random_model(V, seed + 1)``.

    Parameters: ``p``, ``q`` (both or neither), ``K`` (an int or a sequence of ints), ``V``,
    ``seed`` (random pair).

    Returns: the table as text (``str``).

    >>> print(bounds_report([1, 0], [0.5, 0.5], K=2).splitlines()[0])
    V=2
    """
    if (p is None) != (q is None):
        raise ValueError("give both p and q, or neither (a random pair is drawn)")
    if p is None:
        check_seed(seed)
        return str(model_gap_table(random_model(V, seed), random_model(V, seed + 1), K))
    return str(gap_table(p, q, K, title=f"V={len(np.atleast_1d(p))}"))
