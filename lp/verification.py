"""The information-agnostic LP: the best E[tau] of any lossless verifier (docs/theory.md §5).

For a draft process with law Pr(D) over draft trees D (a chain is a tree with one path), the
variables pi(D, v, y) >= 0 are the probabilities of keeping the root-to-node path of v and
emitting y; the verifier may look at everything (all of p and q), only the output format is fixed:

    max  sum_D Pr(D) sum_{v, y} depth(v) pi(D, v, y)
    s.t. sum_{v, y} pi(D, v, y) = 1                                                   for all D
         sum_{k=0}^{L} O(z^{1:k+1}) P(z^{k+2:L+1} | z^{1:k+1}) = P(z)                for all z in V^{L+1},
         O(s) = sum_D Pr(D) sum_{v in D: path(v) . y = s} pi(D, v, y)   (emitted-string law).

The equality is the exact losslessness criterion of docs/theory.md §2, so the optimum bounds E[tau]
of every lossless verifier with this output format, and the optimal pi is itself a verifier.
Source: Thomas & Pal, arXiv 2602.16961 (information-agnostic LP; the formulation is ours).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from specsim.drafts import DraftProcess, DraftTree, chain, draft_laws
from specsim.models import Model, validate_model_pair
from specsim.verifiers.base import Outcome, Verifier, tree_verifier

from ._solvers import LP_SOLVERS, check_solvers, solve, solve_highs_direct

__all__ = ["VerificationLP", "verification_lp", "tree_key"]


def tree_key(tree: DraftTree) -> tuple[tuple[int, ...], ...]:
    """Canonical form of a draft tree: the sorted tuple of its root-to-node token paths.

    Two trees with the same paths are the same draft to a verifier (node numbering ignored), so
    :func:`verification_lp` merges them and its optimal verifier looks trees up by this key.

    Parameters: ``tree`` (:class:`~specsim.drafts.DraftTree`).

    Returns: ``tuple`` of token-id tuples, the root's path ``()`` first.

    >>> import numpy as np
    >>> from specsim.drafts import DraftTree
    >>> rows = np.full((3, 3), 1 / 3)
    >>> tree_key(DraftTree((-1, 0, 2), (-1, 0, 0), rows, rows))
    ((), (0,), (2,))
    """
    if not isinstance(tree, DraftTree):
        raise TypeError(f"tree must be a specsim.drafts.DraftTree, got {type(tree).__name__}")
    return tuple(sorted(tree.path(i) for i in range(tree.num_nodes)))


@dataclass(frozen=True)
class VerificationLP:
    """Optimum of the information-agnostic LP and its optimal verifier.

    ``value`` = max E[tau] over lossless verifiers (``block_efficiency`` = value + 1);
    ``verifier`` is a tree :class:`~specsim.verifiers.base.Verifier` that looks a draft tree up by
    its paths and returns the LP's outcome list (``ValueError`` for a tree the process cannot
    produce).  ``n_drafts`` counts distinct trees after merging; ``seconds`` is the solve time.
    """

    value: float
    verifier: Verifier = field(repr=False)
    V: int
    L: int
    drafting: str
    n_drafts: int
    n_variables: int
    n_constraints: int
    solver: str
    seconds: float

    @property
    def block_efficiency(self) -> float:
        return self.value + 1.0


def _continuations(target: Model, L: int) -> list[np.ndarray]:
    """cont[m][c, r] = P(z^{m+1:L+1} | s), s = the length-m string with code c, r = code of the tail."""
    V = target.V
    ptab = target.table(L)
    cont = [None] * (L + 2)
    cont[L + 1] = np.ones((V ** (L + 1), 1))
    for m in range(L, -1, -1):
        # tail of s (length m) = first token t ~ p(.|s), then the tail of s.t
        nxt = cont[m + 1].reshape(V ** m, V, -1)                  # [V^m, V, V^(L-m)]
        cont[m] = (ptab[m][:, :, None] * nxt).reshape(V ** m, -1)
    return cont


def _polish(x: np.ndarray, M: sp.csc_matrix, rhs: np.ndarray) -> np.ndarray:
    """Re-solve the equalities on the solver's support (least squares) to remove its ~1e-8 feasibility
    slack; kept only if it stays non-negative and reduces the residual."""
    x = np.clip(x, 0.0, None)
    support = np.flatnonzero(x > 1e-12)
    if support.size == 0 or support.size > 5000:
        return x
    sub = M[:, support].toarray()
    y, *_ = np.linalg.lstsq(sub, rhs, rcond=None)
    if y.min() < -1e-12:
        return x
    polished = np.zeros_like(x)
    polished[support] = np.clip(y, 0.0, None)
    before = np.abs(M @ x - rhs).max()
    return polished if np.abs(M @ polished - rhs).max() < before else x


def verification_lp(target: Model, draft_model: Model, L: int, drafting: DraftProcess | None = None,
                    solver: str | Sequence[str] | None = None, context=()) -> VerificationLP:
    """Maximise E[tau] over all lossless verifiers with the prefix-plus-one-token output (docs/theory.md §5.1, §5.2).

    max sum_D Pr(D) sum_{v,y} depth(v) pi(D,v,y) subject to sum_{v,y} pi(D,v,y) = 1 for every
    draft tree D and the completion criterion C(z) = P(z) for all z in V^{L+1}.  Draft trees come
    from ``drafting.enumerate(target, draft_model, L)`` (chains by default; any
    :class:`~specsim.drafts.DraftProcess`), trees with the same paths are merged
    (:func:`tree_key`), and the LP is built with scipy.sparse and solved by HiGHS through
    ``scipy.optimize.linprog`` (:func:`lp._solvers.solve_highs_direct`: no cvxpy import), or, when
    that fails or ``solver`` is given, by cvxpy through the solver ladder :func:`lp._solvers.solve`.  For one path it equals block verification (Sun et al.,
    arXiv 2403.10444); for L = 1 and K drafts it is the multi-draft OT of
    :func:`lp.coupling.multidraft_lp`.  Thomas & Pal, arXiv 2602.16961.  Size: sum over trees of
    nodes x V variables, V^{L+1} + #trees equalities (V = 3, L = 4: 1215 variables).

    Parameters: ``target``, ``draft_model`` (:class:`~specsim.models.Model` over the same V),
    ``L`` draft length / tree depth (an integer >= 1),
    ``drafting`` (a draft process, default ``chain()``; ``TypeError`` for anything without
    ``enumerate``), ``solver`` (an installed cvxpy solver name or a sequence of them; default
    HiGHS, then Clarabel), ``context`` (the prefix to condition on, token ids checked by the models).

    Returns: :class:`VerificationLP` (the optimum ``value`` = E[tau] and the optimal ``verifier``).

    >>> from specsim.exact import check_lossless
    >>> from specsim.models import iid
    >>> target, draft_model = iid([1/3, 2/3]), iid([2/3, 1/3])
    >>> sol = verification_lp(target, draft_model, L=2)
    >>> round(sol.value, 6), round(11 / 9, 6)            # block verification's E[tau] (docs/theory.md §12)
    (1.222222, 1.222222)
    >>> check_lossless(sol.verifier, target, draft_model, 2).lossless
    True
    """
    L = validate_model_pair(target, draft_model, L)
    drafting = chain() if drafting is None else drafting
    if not callable(getattr(drafting, "enumerate", None)):
        raise TypeError(f"drafting must be a draft process (specsim.drafts: chain(), iid_paths(K), ...; "
                        f"specsim.drafts.parse_drafting for a spec string), got {drafting!r}")
    solvers = None if solver is None else check_solvers(solver)   # (check_solvers imports cvxpy)
    target_c, draft_c = target.shifted(context), draft_model.shifted(context)
    V = target.V

    merged: dict[tuple, float] = {}
    total = 0.0
    for prob, tree in drafting.enumerate(target_c, draft_c, L):
        if tree.max_depth > L:
            raise ValueError(f"draft process {drafting.name!r} produced a tree deeper than L={L}")
        key = tree_key(tree)
        merged[key] = merged.get(key, 0.0) + float(prob)
        total += float(prob)
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"draft process {drafting.name!r} enumerated total probability {total!r}, not 1")
    keys = list(merged)
    weights = np.array([merged[k] for k in keys])

    # variables x(d, node, y) = Pr(d) pi(d, node, y), the joint mass: a tree of probability 1e-20 keeps
    # coefficients of order 1 (pi itself scaled by Pr(d) left HiGHS without a solution); s = path . y
    offsets = np.cumsum([0] + [V ** m for m in range(1, L + 2)])     # string rows by length m = 1..L+1
    var_rows, var_cols, var_vals, objective, draft_of = [], [], [], [], []
    n = 0
    for d, key in enumerate(keys):
        for path in key:
            code = 0
            for t in path:
                code = code * V + t
            m = len(path) + 1
            rows = offsets[m - 1] + code * V + np.arange(V)
            var_rows.append(rows)
            var_cols.append(n + np.arange(V))
            var_vals.append(np.ones(V))
            objective.append(np.full(V, float(len(path))))
            draft_of.append(np.full(V, d))
            n += V
    n_strings = int(offsets[-1])
    B = sp.csr_matrix((np.concatenate(var_vals), (np.concatenate(var_rows), np.concatenate(var_cols))),
                      shape=(n_strings, n))
    cont = _continuations(target_c, L)
    blocks = []
    for m in range(1, L + 2):
        tail = V ** (L + 1 - m)
        c = cont[m]                                               # [V^m, tail]
        zr = (np.arange(V ** m)[:, None] * tail + np.arange(tail)[None, :]).ravel()
        sc = np.repeat(np.arange(V ** m), tail)
        blocks.append(sp.csr_matrix((c.ravel(), (zr, sc)), shape=(V ** (L + 1), V ** m)))
    Cm = sp.hstack(blocks, format="csr")
    A = (Cm @ B).tocsr()
    A.eliminate_zeros()
    b = cont[0].ravel()                                           # P(z)
    scale = 1.0 / np.maximum(abs(A).max(axis=1).toarray().ravel(), 1e-300)   # row equilibration
    A = (sp.diags(scale) @ A).tocsr()
    b = b * scale
    owner = np.concatenate(draft_of)                              # the tree of each variable
    S = sp.csr_matrix((np.ones(n), (owner, np.arange(n))), shape=(len(keys), n))
    obj = np.concatenate(objective)
    M, rhs = sp.vstack([A, S]).tocsc(), np.concatenate([b, weights])
    start = time.perf_counter()
    xs = None
    if solvers is None:      # default: HiGHS directly (no cvxpy import), the cvxpy ladder if it fails
        xs, used = solve_highs_direct(-obj, M, rhs), "HIGHS"
    if xs is None:
        import cvxpy as cp

        x = cp.Variable(n, nonneg=True)
        problem = cp.Problem(cp.Maximize(obj @ x), [A @ x == b, S @ x == weights])
        used = solve(problem, LP_SOLVERS if solvers is None else solvers)
        xs = x.value
    seconds = time.perf_counter() - start

    xv = _polish(np.asarray(xs, dtype=np.float64), M, rhs).reshape(-1, V)
    table: dict[tuple, list[tuple[tuple[int, ...], float, np.ndarray]]] = {}
    row = 0
    for key in keys:
        entries = []
        block = xv[row: row + len(key)]
        if block.sum() > 0:
            block /= block.sum()                                  # pi(D, ., .) = x / Pr(D), normalised exactly
        else:   # Pr(D) below the solver's feasibility tolerance and no mass left: reject at the root
            block[:] = 0.0
            block[key.index(())] = target_c(())
        for path, r in zip(key, block):
            mass = float(r.sum())
            if mass > 0:
                entries.append((path, mass, r / mass))
        table[key] = entries
        row += len(key)

    def law(tree: DraftTree) -> list[Outcome]:
        entries = table.get(tree_key(tree))
        if entries is None:
            raise ValueError(f"draft tree {tree.tokens} is not one the LP's draft process produces")
        node = {tree.path(i): i for i in range(tree.num_nodes)}
        return [Outcome(mass, node[path], dist) for path, mass, dist in entries]

    name = f"lp_optimal[{drafting.name}, L={L}]"
    # the table covers the trees this process draws: it needs the laws the process guarantees
    verifier = tree_verifier(name, needs=draft_laws(drafting) or {"any"},
                             doc="Optimal verifier of the information-agnostic LP (table lookup by tree paths).")(law)
    value = float((obj * weights[owner]) @ xv.ravel())           # sum_D Pr(D) E[depth | D], pi normalised
    return VerificationLP(value, verifier, V, L, drafting.name, len(keys), n,
                          A.shape[0] + len(keys), used, seconds)
