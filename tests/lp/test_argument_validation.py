"""Bad input to every public function of lp: a ValueError (bad value) or TypeError (bad type) whose
message names the argument.  One table; each row is (call, exception, message pattern)."""
from dataclasses import dataclass

import numpy as np
import pytest

from lp._solvers import SolveError, solve
from lp.certificates import certify, certify_sequence
from lp.coupling import (draft_set_law, maximal_coupling, multidraft_bound, multidraft_bound_bruteforce,
                         multidraft_lp, solve_lp, union_bound)
from lp.frontier import E1_P, E1_Q, frontier, frontier_curve, frontier_curve_cvxpy, frontier_cvxpy
from lp.radius import (acceptance_radius, acceptance_radius_numeric, additive_greedy, entropy_rule, margin_radius,
                       multiplicative_greedy, strict_greedy, top_m)
from lp.real_tables import acceptance_table, frontier_table, lossy_table, multidraft_table
from lp.tables import bounds_report, gap_table, model_gap_table, specinfer_acceptance, spectr_acceptance
from lp.verification import verification_lp
from specsim import DraftTree, chain, iid, random_model
from specsim.real import Pair
from specsim.verifiers.lossy import cactus

HALF = [0.5, 0.5]
B = [0.5, 0.3, 0.15, 0.05]
TOY_P, TOY_Q = iid([1 / 3, 2 / 3]), iid([2 / 3, 1 / 3])
PAIRS = [Pair(0, (1,), 2, np.array([0.5, 0.3, 0.2]), {"d": np.array([0.2, 0.3, 0.5])})]
#: V = 40, K = 30 without replacement: beyond the quadrature's range (needs K - 1 <= 690 / (36 + log V))
P40, Q40 = np.arange(1, 41) / 820, np.arange(40, 0, -1) / 820


@dataclass(frozen=True)
class _Leaky:
    """A draft process whose enumeration sums to 1/2."""
    name: str = "leaky"

    def enumerate(self, target, draft_model, L):
        for prob, tree in chain().enumerate(target, draft_model, L):
            yield 0.5 * prob, tree


CASES = {
    # (p, q) pairs: one check everywhere (specsim._validate.as_pair)
    "p sums above 1": (lambda: maximal_coupling([0.5, 0.6], HALF), ValueError, "p .target.*sum"),
    "negative q": (lambda: maximal_coupling(HALF, [-0.1, 1.1]), ValueError, "q .draft.*negative"),
    "nan p": (lambda: maximal_coupling([np.nan, 1.0], HALF), ValueError, "non-finite"),
    "vocabularies differ": (lambda: maximal_coupling(HALF, [0.2, 0.3, 0.5]), ValueError, "same vocabulary"),
    "one token": (lambda: maximal_coupling([1.0], [1.0]), ValueError, "vocabulary size must be >= 2"),
    "2-D rows": (lambda: multidraft_bound([HALF], [HALF], 2), ValueError, "1-D"),
    "frontier: bad q": (lambda: frontier(E1_P, [0.5, 0.5, 0.5, -0.5], 0.1), ValueError, "q .draft"),
    "frontier: one token": (lambda: frontier([1.0], [1.0], 0.1), ValueError, "vocabulary size"),
    "certify: bad p": (lambda: certify(cactus(0.1), [0.2, 0.2], HALF), ValueError, "p .target"),
    "specinfer: sizes": (lambda: specinfer_acceptance(HALF, [1.0, 0.0, 0.0], 2), ValueError, "same vocabulary"),
    "spectr: q sums": (lambda: spectr_acceptance(HALF, [1.0, 0.5], 2), ValueError, "q .draft.*sum"),
    # coupling
    "coupling method": (lambda: maximal_coupling(HALF, HALF, method="simplex"), ValueError, "method"),
    "K = 0": (lambda: multidraft_bound(HALF, HALF, 0), ValueError, "K must be >= 1"),
    "K not an integer": (lambda: multidraft_bound(HALF, HALF, 1.5), ValueError, "K must be an integer"),
    "K > V without replacement": (lambda: multidraft_bound(HALF, HALF, 3, replacement=False), ValueError, "K <= V"),
    "K too large for the quadrature": (lambda: multidraft_bound(P40, Q40, 30, replacement=False), ValueError,
                                       "too large for the quadrature"),
    "LP: K = 0": (lambda: multidraft_lp(HALF, HALF, 0), ValueError, "K must be >= 1"),
    "LP: K > V without replacement": (lambda: multidraft_lp(HALF, HALF, 3, replacement=False), ValueError, "K <= V"),
    "brute force V > 16": (lambda: multidraft_bound_bruteforce(np.full(17, 1 / 17), np.full(17, 1 / 17), 2),
                           ValueError, "V <= 16"),
    "draft-set law: q sums": (lambda: draft_set_law([0.5, 0.4], 2), ValueError, "q .draft.*sum"),
    "union bound K = 0": (lambda: union_bound(HALF, HALF, 0), ValueError, "K must be >= 1"),
    # solver ladder
    "unknown solver": (lambda: maximal_coupling(HALF, HALF, method="lp", solver="NO_SUCH_SOLVER"), SolveError,
                       "NO_SUCH_SOLVER"),
    "no solvers": (lambda: solve_lp(None, ()), ValueError, "solvers"),
    "solver error names every attempt": (lambda: solve(_infeasible_lp(), ("HIGHS", "CLARABEL")), SolveError,
                                         "HIGHS .*status infeasible.*CLARABEL"),
    # tables
    "gap table K = 0": (lambda: gap_table(HALF, HALF, K_values=(0,)), ValueError, "K must be >= 1"),
    "gap table: target not a Model": (lambda: model_gap_table(HALF, iid(HALF)), TypeError, "target"),
    "gap table: vocabularies differ": (lambda: model_gap_table(iid(HALF), iid([0.2, 0.3, 0.5])), ValueError, "V="),
    "report: p without q": (lambda: bounds_report(p=HALF), ValueError, "both p and q"),
    "report: negative seed": (lambda: bounds_report(seed=-1), ValueError, "seed"),
    # frontier
    "unknown divergence": (lambda: frontier(E1_P, E1_Q, 0.1, "hellinger"), ValueError, "divergence must be one of"),
    "negative budget": (lambda: frontier(E1_P, E1_Q, -0.1, "kl"), ValueError, "budget must be >= 0"),
    "nan budget": (lambda: frontier(E1_P, E1_Q, np.nan), ValueError, "budget"),
    "text budget": (lambda: frontier(E1_P, E1_Q, "small"), ValueError, "budget must be a number"),
    "curve: negative budget": (lambda: frontier_curve(E1_P, E1_Q, [0.1, -1], "kl"), ValueError, "budget"),
    "curve: unknown divergence": (lambda: frontier_curve(E1_P, E1_Q, [0.1], "KL"), ValueError, "divergence"),
    "cvxpy: unknown divergence": (lambda: frontier_cvxpy(E1_P, E1_Q, 0.1, "js"), ValueError, "divergence"),
    "cvxpy curve: negative budget": (lambda: frontier_curve_cvxpy(E1_P, E1_Q, [-1]), ValueError, "budget"),
    "overflowing likelihood ratio (kl)": (lambda: frontier([5e-324, 0.5, 0.5], [0.2, 0.3, 0.5], 0.1, "kl"),
                                          ValueError, "overflows"),
    "overflowing likelihood ratio (kl_reverse)": (
        lambda: frontier([5e-324, 0.5, 0.5], [0.2, 0.3, 0.5], 0.1, "kl_reverse"), ValueError, "overflows"),
    # certificates
    "certify: rule name instead of rule": (lambda: certify("cactus", E1_P, E1_Q), TypeError, "rule must be"),
    "sequence: rule not a chain rule": (lambda: certify_sequence("cactus", TOY_P, TOY_Q, 2), TypeError, "rule"),
    "sequence: target not a Model": (lambda: certify_sequence(cactus(0.1), [0.5, 0.5], TOY_Q, 2), TypeError,
                                     "target"),
    "sequence: vocabularies differ": (lambda: certify_sequence(cactus(0.1), TOY_P, iid([0.2, 0.3, 0.5]), 2),
                                      ValueError, "V="),
    "sequence: L = 0": (lambda: certify_sequence(cactus(0.1), TOY_P, TOY_Q, 0), ValueError, "L must be >= 1"),
    "sequence: n = 0": (lambda: certify_sequence(cactus(0.1), TOY_P, TOY_Q, 1, n=0), ValueError, "n must be >= 1"),
    "sequence: both draft spellings": (lambda: certify_sequence(cactus(0.1), TOY_P, draft=TOY_Q, draft_model=TOY_Q, L=1),
                                       TypeError, "both 'draft'"),
    # radius
    "radius: token out of range": (lambda: acceptance_radius(strict_greedy(), B, 7), ValueError, "x=7"),
    "radius: token not an integer": (lambda: acceptance_radius(strict_greedy(), B, 0.5), ValueError, "x .token id."),
    "radius: unknown divergence": (lambda: acceptance_radius(strict_greedy(), B, 0, "hellinger"), ValueError,
                                   "divergence"),
    "radius: rule name": (lambda: acceptance_radius("greedy", B, 0), TypeError, "AcceptanceRule"),
    "radius: bad reference": (lambda: acceptance_radius(strict_greedy(), [0.5, 0.6], 0), ValueError, "b .reference"),
    "numeric radius: rule name": (lambda: acceptance_radius_numeric("greedy", B, 0), TypeError, "AcceptanceRule"),
    "numeric radius: token": (lambda: acceptance_radius_numeric(strict_greedy(), B, 4), ValueError, "x=4"),
    "numeric radius: restarts": (lambda: acceptance_radius_numeric(entropy_rule(), B, 0, restarts=0), ValueError,
                                 "restarts"),
    "accepts: token": (lambda: strict_greedy().accepts(B, -1), ValueError, "x .token id."),
    "accepts: bad row": (lambda: strict_greedy().accepts([0.5, 0.6], 0), ValueError, "p"),
    "additive eps = 1": (lambda: additive_greedy(1.0), ValueError, "eps must lie in"),
    "multiplicative lam = 0": (lambda: multiplicative_greedy(0.0), ValueError, "lam must lie in"),
    "top-m m = 0": (lambda: top_m(0), ValueError, "m must be >= 1"),
    "entropy delta > 1": (lambda: entropy_rule(delta=1.5), ValueError, "delta must lie in"),
    "margin > 1": (lambda: margin_radius(1.5), ValueError, "margin must lie in"),
    "margin: m = 0": (lambda: margin_radius(0.2, "kl", 0), ValueError, "m must be >= 1"),
    # verification LP
    "LP: target not a Model": (lambda: verification_lp([1 / 3, 2 / 3], TOY_Q, 2), TypeError, "target"),
    "LP: vocabularies differ": (lambda: verification_lp(TOY_P, iid([0.2, 0.3, 0.5]), 2), ValueError, "V="),
    "LP: L = 0": (lambda: verification_lp(TOY_P, TOY_Q, 0), ValueError, "L must be >= 1"),
    "LP: draft process leaks mass": (lambda: verification_lp(TOY_P, TOY_Q, 2, drafting=_Leaky()), ValueError,
                                     "total probability"),
    "LP verifier: unseen tree": (lambda: verification_lp(TOY_P, TOY_Q, 1).verifier(
        DraftTree.from_chain((0, 1), np.full((3, 2), 0.5), np.full((2, 2), 0.5))), ValueError, "not one the LP"),
    # tables on real rows
    "real tables: unknown rule": (lambda: lossy_table(PAIRS, rules=[("nope", {})]), ValueError, "unknown lossy rule"),
    "real tables: unknown draft": (lambda: acceptance_table(PAIRS, drafts=["other"]), ValueError, "unknown drafts"),
    "real tables: no pairs": (lambda: acceptance_table([]), ValueError, "no pairs"),
    "real tables: no K": (lambda: multidraft_table(PAIRS, K=[]), ValueError, "at least one"),
    "real tables: K = 0": (lambda: multidraft_table(PAIRS, K=[0]), ValueError, "K must be >= 1"),
    "real tables: negative eps": (lambda: frontier_table(PAIRS, eps=[-0.1]), ValueError, "eps"),
}


def _infeasible_lp():
    import cvxpy as cp
    x = cp.Variable(nonneg=True)
    return cp.Problem(cp.Minimize(x), [x <= -1])


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input(case):
    call, exc, message = CASES[case]
    with pytest.raises(exc, match=message):
        call()


def test_mismatched_pair_shapes_in_draft_tables():
    pairs = PAIRS + [Pair(0, (1, 2), -1, np.array([0.5, 0.5, 0.0]), {"e": np.array([0.2, 0.3, 0.5])})]
    with pytest.raises(ValueError, match="pair 1 has drafts"):
        acceptance_table(pairs)
