"""Bad input to every public function of lp: a ValueError (bad value) or TypeError (bad type) whose
message names the argument.  One table; each row is (call, exception, message pattern).  Rows marked
"issue 12" are the reproducers of that issue (they ran, hung or answered wrongly before).  Then the
input contract's other half: float32 and near-normalised rows are accepted and answered as their
float64 renormalisation."""
from dataclasses import dataclass

import numpy as np
import pytest

from lp._solvers import SolveError, check_solvers, solve
from lp.certificates import certify, certify_sequence
from lp.coupling import (draft_set_law, maximal_coupling, multidraft_bound, multidraft_bound_bruteforce,
                         multidraft_lp, solve_lp, union_bound)
from lp.frontier import E1_P, E1_Q, frontier, frontier_curve, frontier_curve_cvxpy, frontier_cvxpy
from lp.radius import (AcceptanceRule, acceptance_radius, acceptance_radius_numeric, additive_greedy, entropy_rule,
                       margin_radius, multiplicative_greedy, strict_greedy, top_m)
from lp.real_tables import acceptance_table, format_rows, frontier_table, lossy_table, multidraft_table
from lp.tables import (bounds_report, gap_table, model_gap_table, specinfer_acceptance, spectr_acceptance,
                       spectr_rho)
from lp.verification import tree_key, verification_lp
from specsim import DraftTree, chain, iid, random_model
from specsim.exact import expected_accepted
from specsim.real import Pair
from specsim.verifiers.chain import block
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


#: a random (p, q) pair at V = 6 (K = 3 without replacement goes through the race quadrature)
P6, Q6 = np.random.default_rng(0).dirichlet(np.ones(6)), np.random.default_rng(1).dirichlet(np.ones(6))

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
    "spectr rho: p sums": (lambda: spectr_rho([0.5, 0.6], HALF, 2), ValueError, "p .target.*sum"),
    # coupling
    "coupling method": (lambda: maximal_coupling(HALF, HALF, method="simplex"), ValueError, "method"),
    "K = 0": (lambda: multidraft_bound(HALF, HALF, 0), ValueError, "K must be >= 1"),
    "K not an integer": (lambda: multidraft_bound(HALF, HALF, 1.5), TypeError, "K must be an integer"),
    "K a bool": (lambda: draft_set_law(HALF, True), TypeError, "K must be an integer"),
    "K > V without replacement": (lambda: multidraft_bound(HALF, HALF, 3, replacement=False), ValueError, "K <= V"),
    "K too large for the quadrature": (lambda: multidraft_bound(P40, Q40, 30, replacement=False), ValueError,
                                       "too large for the quadrature"),
    "step = -1 (issue 12: answered 1.0)": (lambda: multidraft_bound(P6, Q6, 3, replacement=False, step=-1),
                                           ValueError, "step must lie in"),
    "step = 1e-6 (issue 12: hung)": (lambda: multidraft_bound(P6, Q6, 3, replacement=False, step=1e-6),
                                     ValueError, "step must lie in"),
    "step nan": (lambda: multidraft_bound(P6, Q6, 3, replacement=False, step=np.nan), ValueError, "step must lie in"),
    "step as text": (lambda: multidraft_bound(P6, Q6, 3, replacement=False, step="0.1"), TypeError,
                     "step must be a real number"),
    "replacement='False' (issue 12: ran with replacement)": (
        lambda: multidraft_bound(P6, Q6, 2, replacement="False"), TypeError, "replacement must be True or False"),
    "replacement None": (lambda: multidraft_bound(P6, Q6, 2, replacement=None), TypeError,
                         "replacement must be True or False"),
    "draft-set law: replacement as text": (lambda: draft_set_law(Q6, 2, "no"), TypeError,
                                           "replacement must be True or False"),
    "brute force: replacement 0": (lambda: multidraft_bound_bruteforce(P6, Q6, 2, replacement=0), TypeError,
                                   "replacement must be True or False"),
    "LP: replacement as text": (lambda: multidraft_lp(P6, Q6, 2, replacement="False"), TypeError,
                                "replacement must be True or False"),
    "LP: K = 0": (lambda: multidraft_lp(HALF, HALF, 0), ValueError, "K must be >= 1"),
    "LP: K > V without replacement": (lambda: multidraft_lp(HALF, HALF, 3, replacement=False), ValueError, "K <= V"),
    "LP solution: set index out of range": (lambda: multidraft_lp(HALF, HALF, 2).output_given_set(7), ValueError,
                                            "draft-set index.* < 3"),
    "LP solution: negative set index": (lambda: multidraft_lp(HALF, HALF, 2).output_given_set(-1), ValueError,
                                        "draft-set index.* >= 0"),
    "brute force V > 16": (lambda: multidraft_bound_bruteforce(np.full(17, 1 / 17), np.full(17, 1 / 17), 2),
                           ValueError, "V <= 16"),
    "draft-set law: q sums": (lambda: draft_set_law([0.5, 0.4], 2), ValueError, "q .draft.*sum"),
    "union bound K = 0": (lambda: union_bound(HALF, HALF, 0), ValueError, "K must be >= 1"),
    # solvers: bad names are bad input (ValueError/TypeError); SolveError only when a program fails
    "unknown solver": (lambda: maximal_coupling(HALF, HALF, method="lp", solver="NO_SUCH_SOLVER"), ValueError,
                       "solver: 'NO_SUCH_SOLVER' is not an installed cvxpy solver"),
    "solver not a name": (lambda: multidraft_lp(HALF, HALF, 2, solver=3), TypeError, "solver must be a cvxpy solver"),
    "no solvers": (lambda: solve_lp(None, ()), ValueError, "solver: give at least one"),
    "solver list with a number": (lambda: check_solvers(["HIGHS", 3]), TypeError, "got 3 in"),
    "solver error names every attempt": (lambda: solve(_infeasible_lp(), ("HIGHS", "CLARABEL")), SolveError,
                                         "HIGHS .*status infeasible.*CLARABEL"),
    # tables
    "gap table K = 0": (lambda: gap_table(HALF, HALF, K_values=(0,)), ValueError, "K must be >= 1"),
    "gap table: verifiers not a mapping": (lambda: gap_table(HALF, HALF, verifiers=3), TypeError,
                                           "verifiers must be a mapping"),
    "gap table: verifier not callable": (lambda: gap_table(HALF, HALF, verifiers={"x": 3}), TypeError,
                                         r"verifiers\['x'\]"),
    "gap table: title not text": (lambda: gap_table(HALF, HALF, title=3), TypeError, "title must be a string"),
    "gap table: target not a Model": (lambda: model_gap_table(HALF, iid(HALF)), TypeError, "target"),
    "gap table: vocabularies differ": (lambda: model_gap_table(iid(HALF), iid([0.2, 0.3, 0.5])), ValueError, "V="),
    "report: p without q": (lambda: bounds_report(p=HALF), ValueError, "both p and q"),
    "report: negative seed": (lambda: bounds_report(seed=-1), ValueError, "seed"),
    # frontier
    "unknown divergence": (lambda: frontier(E1_P, E1_Q, 0.1, "hellinger"), ValueError, "divergence must be one of"),
    "negative budget": (lambda: frontier(E1_P, E1_Q, -0.1, "kl"), ValueError, r"budget must lie in \[0, inf\]"),
    "nan budget": (lambda: frontier(E1_P, E1_Q, np.nan), ValueError, "budget must lie in"),
    "text budget": (lambda: frontier(E1_P, E1_Q, "small"), TypeError, "budget must be a real number"),
    "numeric text budget (was read as 0.1)": (lambda: frontier(E1_P, E1_Q, "0.1"), TypeError,
                                              "budget must be a real number"),
    "bool budget (was read as 1)": (lambda: frontier(E1_P, E1_Q, True), TypeError, "budget must be a real number"),
    "curve: negative budget": (lambda: frontier_curve(E1_P, E1_Q, [0.1, -1], "kl"), ValueError, r"budgets\[1\]"),
    "curve: no budgets": (lambda: frontier_curve(E1_P, E1_Q, []), ValueError, "give at least one budget"),
    "curve: nested budgets": (lambda: frontier_curve(E1_P, E1_Q, [[0.1]]), TypeError, r"budgets\[0\]"),
    "curve: text": (lambda: frontier_curve(E1_P, E1_Q, "0.1"), TypeError, "budgets must be a number or a sequence"),
    "curve: unknown divergence": (lambda: frontier_curve(E1_P, E1_Q, [0.1], "KL"), ValueError, "divergence"),
    "cvxpy: unknown divergence": (lambda: frontier_cvxpy(E1_P, E1_Q, 0.1, "js"), ValueError, "divergence"),
    "cvxpy: unknown solver": (lambda: frontier_cvxpy(E1_P, E1_Q, 0.1, solver="NOPE"), ValueError,
                              "not an installed cvxpy solver"),
    "cvxpy curve: negative budget": (lambda: frontier_curve_cvxpy(E1_P, E1_Q, [-1]), ValueError, "budget"),
    "cvxpy curve: no budgets": (lambda: frontier_curve_cvxpy(E1_P, E1_Q, []), ValueError, "at least one budget"),
    "overflowing likelihood ratio (kl)": (lambda: frontier([5e-324, 0.5, 0.5], [0.2, 0.3, 0.5], 0.1, "kl"),
                                          ValueError, "overflows"),
    "overflowing likelihood ratio (kl_reverse)": (
        lambda: frontier([5e-324, 0.5, 0.5], [0.2, 0.3, 0.5], 0.1, "kl_reverse"), ValueError, "overflows"),
    # certificates
    "certify: rule name instead of rule": (lambda: certify("cactus", E1_P, E1_Q), TypeError, "rule must be"),
    "certify: atol nan": (lambda: certify(cactus(0.05), E1_P, E1_Q, atol=np.nan), ValueError, "atol must lie in"),
    "certify: negative atol": (lambda: certify(cactus(0.05), E1_P, E1_Q, atol=-1e-3), ValueError, "atol must lie in"),
    "certify: atol as text": (lambda: certify(cactus(0.05), E1_P, E1_Q, atol="1e-9"), TypeError,
                              "atol must be a real number"),
    "sequence: rule not a chain rule": (lambda: certify_sequence("cactus", TOY_P, TOY_Q, 2), TypeError, "rule"),
    "sequence: target not a Model": (lambda: certify_sequence(cactus(0.1), [0.5, 0.5], TOY_Q, 2), TypeError,
                                     "target"),
    "sequence: vocabularies differ": (lambda: certify_sequence(cactus(0.1), TOY_P, iid([0.2, 0.3, 0.5]), 2),
                                      ValueError, "V="),
    "sequence: L = 0": (lambda: certify_sequence(cactus(0.1), TOY_P, TOY_Q, 0), ValueError, "L must be >= 1"),
    "sequence: n = 0": (lambda: certify_sequence(cactus(0.1), TOY_P, TOY_Q, 1, n=0), ValueError, "n must be >= 1"),
    # radius
    "radius: token out of range": (lambda: acceptance_radius(strict_greedy(), B, 7), ValueError, "x=7"),
    "radius: token not an integer": (lambda: acceptance_radius(strict_greedy(), B, 0.5), TypeError, "x .token id."),
    "radius: unknown divergence": (lambda: acceptance_radius(strict_greedy(), B, 0, "hellinger"), ValueError,
                                   "divergence"),
    "radius: rule name": (lambda: acceptance_radius("greedy", B, 0), TypeError, "AcceptanceRule"),
    "radius: bad reference": (lambda: acceptance_radius(strict_greedy(), [0.5, 0.6], 0), ValueError, "b .reference"),
    "numeric radius: rule name": (lambda: acceptance_radius_numeric("greedy", B, 0), TypeError, "AcceptanceRule"),
    "numeric radius: token": (lambda: acceptance_radius_numeric(strict_greedy(), B, 4), ValueError, "x=4"),
    "numeric radius: restarts": (lambda: acceptance_radius_numeric(entropy_rule(), B, 0, restarts=0), ValueError,
                                 "restarts"),
    "numeric radius: negative seed": (lambda: acceptance_radius_numeric(entropy_rule(), B, 0, seed=-1), ValueError,
                                      "seed must be >= 0"),
    "numeric radius: unknown solver": (lambda: acceptance_radius_numeric(strict_greedy(), B, 0, solver="NOPE"),
                                       ValueError, "not an installed cvxpy solver"),
    "accepts: token": (lambda: strict_greedy().accepts(B, -1), ValueError, "x .token id."),
    "accepts: bad row": (lambda: strict_greedy().accepts([0.5, 0.6], 0), ValueError, "p"),
    "rule: unknown kind (was read as the entropy rule)": (lambda: AcceptanceRule("nope"), ValueError,
                                                          "kind must be one of"),
    "rule: nan slack": (lambda: AcceptanceRule("additive", eps=np.nan), ValueError, "eps must lie in"),
    "rule: top-0": (lambda: AcceptanceRule("top_m", m=0), ValueError, "m must be >= 1"),
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
    "LP: drafting as text": (lambda: verification_lp(TOY_P, TOY_Q, 2, drafting="chain"), TypeError,
                             "drafting must be a draft process"),
    "LP: unknown solver": (lambda: verification_lp(TOY_P, TOY_Q, 2, solver="NOPE"), ValueError,
                           "not an installed cvxpy solver"),
    "LP: draft process leaks mass": (lambda: verification_lp(TOY_P, TOY_Q, 2, drafting=_Leaky()), ValueError,
                                     "total probability"),
    "LP verifier: unseen tree": (lambda: verification_lp(TOY_P, TOY_Q, 1).verifier(
        DraftTree.from_chain((0, 1), np.full((3, 2), 0.5), np.full((2, 2), 0.5))), ValueError, "not one the LP"),
    "LP verifier: not a tree": (lambda: verification_lp(TOY_P, TOY_Q, 1).verifier((0, 1)), TypeError,
                                "specsim.drafts.DraftTree, got tuple"),
    "tree key: not a tree": (lambda: tree_key((0, 1)), TypeError, "tree must be a specsim.drafts.DraftTree"),
    # tables on real rows
    "real tables: unknown rule": (lambda: lossy_table(PAIRS, rules=[("nope", {})]), ValueError, "unknown lossy rule"),
    "real tables: rules as text": (lambda: lossy_table(PAIRS, rules="cactus"), TypeError, "rules must be a sequence"),
    "real tables: rule without parameters": (lambda: lossy_table(PAIRS, rules=["cactus"]), TypeError, r"rules\[0\]"),
    "real tables: unknown draft": (lambda: acceptance_table(PAIRS, drafts=["other"]), ValueError, "unknown drafts"),
    "real tables: no pairs": (lambda: acceptance_table([]), ValueError, "no pairs"),
    "real tables: source not pairs": (lambda: acceptance_table(3), TypeError, "source must be"),
    "real tables: a row that does not sum to 1": (lambda: acceptance_table(
        [Pair(0, (1,), 2, np.array([0.5, 0.6, 0.2]), {"d": np.array([0.2, 0.3, 0.5])})]), ValueError,
        "pair 0: p .target.*sum"),
    "real tables: no K": (lambda: multidraft_table(PAIRS, K=[]), ValueError, "at least one"),
    "real tables: K = 0": (lambda: multidraft_table(PAIRS, K=[0]), ValueError, "K must be >= 1"),
    "real tables: progress as text": (lambda: multidraft_table(PAIRS, K=[1], progress="yes"), TypeError, "progress"),
    "real tables: negative eps": (lambda: frontier_table(PAIRS, eps=[-0.1]), ValueError, r"eps\[0\]"),
    "real tables: eps as text": (lambda: frontier_table(PAIRS, eps=["a"]), TypeError, r"eps\[0\] must be a real"),
    "format: negative digits": (lambda: format_rows(acceptance_table(PAIRS), digits=-1), ValueError, "digits"),
    "format: not result rows": (lambda: format_rows([1, 2]), TypeError, "rows must be dataclass instances"),
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


# --------------------------------------------------------------------------- rows the contract accepts
def _renormalised(row) -> np.ndarray:
    row = np.asarray(row, dtype=np.float64)
    return row / row.sum()


#: (p, q) at V = 6 whose float32 roundings miss 1 by 2.3e-8 and -2.2e-8 (beyond the old 1e-8 tolerance)
P_EXACT, Q_EXACT = (np.random.default_rng(0).dirichlet(np.ones(6)) for _ in range(2))
LOW_PRECISION = {
    "float32": lambda r: np.asarray(r, dtype=np.float32),
    "float16": lambda r: np.asarray(r, dtype=np.float16),
    "sum 1 + 9e-9": lambda r: np.asarray(r) * (1 + 9e-9),
}
ROW_FUNCTIONS = {
    "maximal coupling": lambda p, q: maximal_coupling(p, q).value,
    "draft-set law (without replacement)": lambda p, q: draft_set_law(q, 3, False)[1],
    "multidraft bound (i.i.d.)": lambda p, q: multidraft_bound(p, q, 3).value,
    "multidraft bound (without replacement, race)": lambda p, q: multidraft_bound(p, q, 3, False).value,
    "brute force": lambda p, q: multidraft_bound_bruteforce(p, q, 2, False).value,
    "flow LP": lambda p, q: multidraft_lp(p, q, 2).value,
    "union bound": lambda p, q: union_bound(p, q, 2),
    "SpecInfer": lambda p, q: specinfer_acceptance(p, q, 3),
    "SpecTr": lambda p, q: spectr_acceptance(p, q, 3),
    "gap table": lambda p, q: [r.acceptance for r in gap_table(p, q, K_values=(2,)).rows],
    "frontier (kl)": lambda p, q: frontier(p, q, 0.05, "kl").beta,
    "frontier curve (kl_reverse)": lambda p, q: frontier_curve(p, q, [0.01, 0.1], "kl_reverse").beta,
    "certificate": lambda p, q: certify(cactus(0.05), p, q).beta,
    "acceptance radius": lambda p, q: acceptance_radius(strict_greedy(), p, int(np.argmax(p)), "kl"),
}


@pytest.mark.parametrize("precision", sorted(LOW_PRECISION))
@pytest.mark.parametrize("function", sorted(ROW_FUNCTIONS))
def test_low_precision_rows_are_accepted_and_renormalised(function, precision):
    """float16/float32 rows (and float64 rows off 1 by 9e-9) are accepted, and every function answers
    as it does for the same row renormalised in float64 (docs/design.md, the input contract)."""
    fn, cast = ROW_FUNCTIONS[function], LOW_PRECISION[precision]
    p, q = cast(P_EXACT), cast(Q_EXACT)
    if precision == "float32":
        assert abs(float(p.astype(np.float64).sum()) - 1) > 2e-8     # the float32 rows
    expected = fn(_renormalised(p), _renormalised(q))
    np.testing.assert_allclose(fn(p, q), expected, rtol=0, atol=1e-9 if function == "flow LP" else 1e-12)


def test_near_normalised_model_rows_in_the_verification_lp():
    """Issue 12: model rows summing to 1 + 9e-9 made the LP's equality system infeasible; after the
    boundary renormalisation its optimum is block verification's E[tau] on those rows."""
    target, draft_model = iid([0.5 + 4.5e-9, 0.5 + 4.5e-9]), iid([0.7 + 4.5e-9, 0.3 + 4.5e-9])
    value = verification_lp(target, draft_model, 2).value
    assert abs(value - expected_accepted(block, target, draft_model, 2)) < 1e-8
