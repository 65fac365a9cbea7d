"""The one cvxpy solver ladder used by every program in ``lp``.

A program is handed to named solvers in order; each solver runs through its own ladder of options
(tight tolerances first, because LP optima feed exact losslessness checks at atol ~1e-9; looser
ones when the tight run reports a spurious infeasibility).  The first attempt that ends in an
accepted status wins; otherwise :class:`SolveError` lists every attempt and how it ended.
Every solve is quiet: HiGHS's licence banner, which it writes from C on the first solve of a
process, is discarded (:func:`_silence_highs_banner`).
"""
from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Sequence

__all__ = ["LP_SOLVERS", "CONIC_SOLVERS", "SOLVER_OPTIONS", "SolveError", "check_solvers", "solve",
           "solve_highs_direct"]

#: Default for linear programs: HiGHS (simplex / interior point), then Clarabel.
LP_SOLVERS = ("HIGHS", "CLARABEL")
#: Default for exponential-cone programs (KL constraints or objectives): Clarabel, then SCS.
CONIC_SOLVERS = ("CLARABEL", "SCS")
#: Option ladder per solver; a solver not listed here runs once with its defaults.  HiGHS drops
#: matrix entries below ``small_matrix_value`` (default 1e-9) before it solves: continuation
#: probabilities of that size are real coefficients of the verification LP, and dropping them
#: perturbs a constraint by more than the 1e-10 tolerance (Hypothesis seed 3688520293: "infeasible");
#: 1e-12 is the smallest value HiGHS accepts.
_HIGHS_KEEP = {"small_matrix_value": 1e-12}
SOLVER_OPTIONS = {
    "HIGHS": ({"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10, **_HIGHS_KEEP},
              {"primal_feasibility_tolerance": 1e-9, "dual_feasibility_tolerance": 1e-9, **_HIGHS_KEEP}, {}),
    "CLARABEL": ({"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10}, {}),
}


class SolveError(RuntimeError):
    """No solver reached an accepted status; ``attempts`` lists ``(solver, options, outcome)``."""

    def __init__(self, attempts: list[tuple[str, dict, str]]):
        self.attempts = attempts
        super().__init__("no solver succeeded (" + "; ".join(f"{s} {o}: {r}" for s, o, r in attempts) + ")")


@functools.cache
def _silence_highs_banner() -> None:
    """Create this process's first ``highspy.Highs`` object with file descriptor 1 on /dev/null.

    HiGHS prints its licence banner from C, past Python's ``sys.stdout``, when the first
    ``Highs`` object of a process is made (cvxpy makes one per solve, before any option could
    turn logging off); later objects print nothing, so one silenced construction keeps every
    solve quiet without redirecting output during the solves themselves.
    """
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            highspy.Highs()
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def check_solvers(solvers, name: str = "solver") -> tuple[str, ...]:
    """The solver argument of a public function: one installed cvxpy solver name or a non-empty sequence of them.

    Parameters: ``solvers`` (``str`` or a sequence of ``str``), ``name`` (the argument's name in messages).

    Returns: the names as a ``tuple``; ``TypeError`` for a non-string, ``ValueError`` for an empty
    sequence or a name that is not an installed cvxpy solver (the message lists the installed ones).

    >>> check_solvers("HIGHS"), check_solvers(["CLARABEL", "SCS"])
    (('HIGHS',), ('CLARABEL', 'SCS'))
    >>> check_solvers(["HIGHS", 3])
    Traceback (most recent call last):
    ...
    TypeError: solver must be a cvxpy solver name or a sequence of names, got 3 in ['HIGHS', 3]
    """
    import cvxpy as cp

    if isinstance(solvers, str):
        names = (solvers,)
    else:
        try:
            names = tuple(solvers)
        except TypeError:
            raise TypeError(f"{name} must be a cvxpy solver name or a sequence of names, got {solvers!r}") from None
    if not names:
        raise ValueError(f"{name}: give at least one cvxpy solver name")
    installed = cp.installed_solvers()
    for s in names:
        if not isinstance(s, str):
            raise TypeError(f"{name} must be a cvxpy solver name or a sequence of names, got {s!r} in {solvers!r}")
        if s not in installed:
            raise ValueError(f"{name}: {s!r} is not an installed cvxpy solver (installed: {', '.join(installed)})")
    return names


def solve(problem, solvers: str | Sequence[str] = LP_SOLVERS, accept: Sequence[str] = ("optimal",)) -> str:
    """Solve a cvxpy ``problem`` with the first solver in ``solvers`` that ends in an ``accept`` status.

    For each name in ``solvers`` (one name or a sequence, tried in order; checked by
    :func:`check_solvers`) the options of :data:`SOLVER_OPTIONS` are tried in order; a
    ``cvxpy.error.SolverError`` or ``ValueError`` (the solver unable to take the program) moves on
    to the next attempt, as does a status outside ``accept``.  The problem keeps the winning
    attempt's values.

    Parameters: ``problem`` (``cvxpy.Problem``), ``solvers`` (default :data:`LP_SOLVERS`),
    ``accept`` (cvxpy status strings; e.g. add ``"optimal_inaccurate"`` for conic programs, or
    ``"infeasible"`` where infeasibility is an answer).

    Returns: the name of the solver that succeeded (``str``).  Raises :class:`SolveError` naming
    every solver and option set tried and its outcome.

    >>> import cvxpy as cp
    >>> x = cp.Variable(2, nonneg=True)
    >>> prob = cp.Problem(cp.Maximize(x[0] + 2 * x[1]), [cp.sum(x) == 1])
    >>> solve(prob), round(float(prob.value), 6)
    ('HIGHS', 2.0)
    >>> solve(cp.Problem(cp.Maximize(x[0]), [cp.sum(x) == 1, x[0] >= 2]), solvers=["HIGHS"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    lp._solvers.SolveError: no solver succeeded (HIGHS {...}: status infeasible; ...)
    """
    import cvxpy as cp

    names = check_solvers(solvers, "solvers")
    if "HIGHS" in names:
        _silence_highs_banner()
    attempts = []
    for name in names:
        for opts in SOLVER_OPTIONS.get(name, ({},)):
            try:
                with warnings.catch_warnings():        # inaccurate results are judged by ``accept``
                    warnings.simplefilter("ignore", UserWarning)
                    problem.solve(solver=name, **opts)
            except (cp.error.SolverError, ValueError) as exc:
                attempts.append((name, opts, str(exc)[:80]))
                continue
            if problem.status in accept:
                return name
            attempts.append((name, opts, f"status {problem.status}"))
    raise SolveError(attempts)


def solve_highs_direct(c, A_eq, b_eq):
    """min c @ x s.t. A_eq x = b_eq, x >= 0 by HiGHS through ``scipy.optimize.linprog``, no cvxpy.

    The same tolerance ladder as :data:`SOLVER_OPTIONS` ["HIGHS"] (1e-10, then 1e-9, then HiGHS's
    defaults); importing cvxpy costs 2-3 s, scipy's HiGHS binding a fraction of that, so callers
    with a plain standard-form LP (``specsim compare``'s optimum row) use this first and the cvxpy
    ladder :func:`solve` only if it fails.

    Parameters: ``c`` (n,), ``A_eq`` (sparse or dense, m x n), ``b_eq`` (m,).

    Returns: the solution ``x`` (``ndarray``), or ``None`` when no attempt reports optimal.

    >>> import numpy as np
    >>> solve_highs_direct(np.array([-1.0, 0.0]), np.array([[1.0, 1.0]]), np.array([1.0])).tolist()
    [1.0, 0.0]
    """
    from scipy.optimize import OptimizeWarning, linprog

    for opts in SOLVER_OPTIONS["HIGHS"]:
        with warnings.catch_warnings():   # scipy passes options it does not know to HiGHS, with a warning
            warnings.filterwarnings("ignore", "Unrecognized options", OptimizeWarning)
            res = linprog(c, A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs", options=dict(opts))
        if res.status == 0 and res.x is not None:
            return res.x
    return None
