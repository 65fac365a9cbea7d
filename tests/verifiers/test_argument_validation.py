"""Bad input to the verifiers package: each case names the call, the exception and its message.

ValueError for a bad value, TypeError for a bad type, naming the argument (common rule of the
package).  Covers the chain protocol's inputs, outcome lists, tree verifiers and their helpers,
the lossy rules' parameters and rows, the decorators and the shared draw.
"""
import numpy as np
import pytest

import specsim as s
from specsim._sampling import draw_rows
from specsim.drafts import chain, fixed_shape, iid_paths
from specsim.verifiers import Outcome, Verifier, as_verifier, chain_verifier, meets_needs, tree_verifier
from specsim.verifiers.base import validate_outcomes
from specsim.verifiers.lossy import (cactus, cascade, consultant_standin, ensemble, fuzzy, lenience, margin_standin,
                                     mentored, single_token_chain, topk_accept, typical)
from specsim.multidraft import multidraft_acceptance
from specsim.verifiers import gbv, sequoia, traversal
from specsim.verifiers.kseq import kseq_rho
from specsim.verifiers.multipath import gbv_path_model, tree_paths
from specsim.verifiers.two_step import khisti_selection_law

P3 = np.full((3, 3), 1 / 3)          # chain rows for L = 2, V = 3
Q3 = np.full((2, 3), 1 / 3)
TOY_P, TOY_Q = s.iid([1 / 3, 2 / 3]), s.iid([2 / 3, 1 / 3])
T3, D3 = s.random_model(3, 0), s.random_model(3, 1)
REPEATS = next(iter(iid_paths(3).enumerate(T3, D3, 1)))[1]          # root draws (0, 0, 0)
NOT_PATHS = next(iter(fixed_shape((2, 2)).enumerate(T3, D3, 2)))[1]
HALF = np.array([0.5, 0.5])


def _law(draft, p, q):
    return [Outcome(1.0, 0, p[0])]


def _with(rows, i, j, value):
    out = rows.copy()
    out[i, j] = value
    return out


CHAIN_INPUTS = [
    ("no-draft-tokens", lambda: s.token((), P3[:1], Q3[:0]), ValueError, "at least one token"),
    ("p-shape", lambda: s.block((0, 1), P3[:2], Q3), ValueError, r"p must have shape \[L\+1, V\]"),
    ("q-shape", lambda: s.block((0, 1), P3, Q3[:1]), ValueError, r"q: expected shape \(2, 3\)"),
    ("p-row-sum", lambda: s.token((0, 1), _with(P3, 1, 0, 0.9), Q3), ValueError, r"p\[1\].*sum"),
    ("drafted-with-q-zero", lambda: s.token((0, 1), P3, np.array([[1 / 3] * 3, [0.5, 0.0, 0.5]])), ValueError,
     "draft probability q = 0"),
    ("token-outside-vocabulary", lambda: s.token((0, 3), P3, Q3), ValueError, "outside 0..2"),
    ("token-id-float", lambda: s.token((0.7,), P3[:2], Q3[:1]), TypeError, r"draft\[0\] must be an integer token id"),
    ("token-id-bool", lambda: s.block((True,), P3[:2], Q3[:1]), TypeError, r"draft\[0\] must be an integer token id"),
    ("token-id-negative", lambda: s.token((0, -1), P3, Q3), ValueError, r"draft\[1\] = -1 is outside 0..2"),
    ("p-strings", lambda: s.token((0,), [["a", "b"], ["c", "d"]], [[0.5, 0.5]]), TypeError, "p: expected real numbers"),
    ("p-nan-names-row", lambda: s.block((0, 1), _with(P3, 2, 1, np.nan), Q3), ValueError,
     r"p\[2\]: non-finite entry nan at token 1"),
    ("wrong-number-of-arguments", lambda: s.token((0,), P3[:2]), TypeError, r"takes \(draft, p, q\), got 2 arguments"),
    ("sample-rng-None", lambda: s.block.sample((0,), P3[:2], Q3[:1], rng=None), TypeError,
     "rng must be a numpy.random.Generator"),
    ("vocabulary-of-one", lambda: s.token((0,), np.ones((2, 1)), np.ones((1, 1))), ValueError, "must be >= 2"),
    ("lossy-drafted-with-q-zero", lambda: cactus(0.1)((0,), np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]),
                                                      np.array([[0.0, 0.5, 0.5]])), ValueError, "draft probability"),
]

OUTCOME_LISTS = [
    ("engine-sum-below-one", lambda: s.check_lossless(chain_verifier("leaky")(
        lambda draft, p, q: [Outcome(0.9, 0, p[0])]), TOY_P, TOY_Q, 2), ValueError, "sum to 0.9"),
    ("engine-accepts-beyond-draft", lambda: s.check_lossless(chain_verifier("beyond")(
        lambda draft, p, q: [Outcome(1.0, len(draft) + 1, p[0])]), TOY_P, TOY_Q, 2), ValueError, "outside 0..2"),
    ("not-a-list", lambda: validate_outcomes(3, 2, 2), ValueError, "not a list of Outcome"),
    ("not-an-outcome", lambda: validate_outcomes([(1.0, 0, HALF)], 2, 2), ValueError, "not an Outcome"),
    ("negative-probability", lambda: validate_outcomes([Outcome(-0.5, 0, HALF), Outcome(1.5, 1, HALF)], 2, 2),
     ValueError, "negative or not finite"),
    ("next-dist-shape", lambda: validate_outcomes([Outcome(1.0, 0, np.ones(3) / 3)], 2, 2), ValueError,
     r"expected \(2,\)"),
    ("next-dist-not-a-law", lambda: validate_outcomes([Outcome(1.0, 0, np.array([0.9, 0.9]))], 2, 2), ValueError,
     "not a probability vector"),
]

TREE = [
    ("sequoia-repeated-draws", lambda: sequoia(REPEATS), ValueError, "distinct"),
    ("gbv-not-paths", lambda: gbv(NOT_PATHS), ValueError, "not K full"),
    ("tree_paths-not-paths", lambda: tree_paths(NOT_PATHS), ValueError, "not K full"),
    ("multidraft-unknown-name", lambda: multidraft_acceptance("nope", HALF, HALF, 2), ValueError,
     "unknown tree verifier 'nope'"),
    ("multidraft-wrong-draft-law", lambda: multidraft_acceptance("sequoia", HALF, HALF, 2), ValueError,
     "with replacement"),
    ("multidraft-sizes", lambda: multidraft_acceptance("specinfer", HALF, [0.2, 0.3, 0.5], 2), ValueError,
     "same vocabulary size"),
    ("multidraft-not-a-law", lambda: multidraft_acceptance("specinfer", [0.5, 0.6], HALF, 2), ValueError,
     "sum to"),
    ("multidraft-K0", lambda: multidraft_acceptance("specinfer", HALF, HALF, 0), ValueError, "K must be >= 1"),
    # issue 26: V = 3, K = 13 would enumerate 3^13 draw tuples (more than 10 s); refused up front
    ("multidraft-too-large", lambda: multidraft_acceptance("specinfer", [0.2, 0.3, 0.5], [0.5, 0.3, 0.2], 13),
     ValueError, r"1,594,323 ordered draw tuples .*lp\.coupling\.multidraft_bound"),
    ("multidraft-too-large-swor", lambda: multidraft_acceptance("sequoia", [0.1] * 10, [0.1] * 10, 5, replacement=False),
     ValueError, r"30,240 ordered draw tuples \(\|supp q\| = 10, s!/\(s-K\)!\)"),
    ("kseq_rho-k0", lambda: kseq_rho(HALF, HALF, 0), ValueError, "k must be >= 1"),
    ("kseq_rho-tol-negative", lambda: kseq_rho(HALF, [0.9, 0.1], 2, tol=-1), ValueError,
     r"tol must lie in \[0, 0.001\], got -1"),
    ("kseq_rho-tol-nan", lambda: kseq_rho(HALF, [0.9, 0.1], 2, tol=np.nan), ValueError, "tol must lie in"),
    ("tree-verifier-not-a-tree", lambda: sequoia((0, 1)), TypeError, "takes one specsim.drafts.DraftTree, got tuple"),
    ("tree-verifier-no-argument", lambda: gbv(), TypeError, "got no arguments"),
    ("tree-sample-rng-None", lambda: sequoia.sample(NOT_PATHS, rng=None), TypeError,
     "rng must be a numpy.random.Generator"),
    ("kseq_rho-sizes", lambda: kseq_rho(HALF, [0.2, 0.3, 0.5], 2), ValueError, "same vocabulary size"),
    ("khisti-k-float", lambda: khisti_selection_law(HALF, HALF, 1.5), TypeError, "k must be an integer"),
    ("gbv_path_model-no-target", lambda: gbv_path_model(D3, 2), ValueError, "needs the target"),
    ("gbv_path_model-V", lambda: gbv_path_model(s.random_model(4, 1), 2, target=T3), ValueError,
     "target has V=3 but draft_model has V=4"),
    ("gbv_path_model-not-a-model", lambda: gbv_path_model("draft", 2, target=T3), TypeError,
     "draft_model must be a specsim.models.Model"),
    ("gbv_path_model-K0", lambda: gbv_path_model(D3, 0, target=T3), ValueError, "K must be >= 1"),
]

LOSSY_PARAMETERS = [
    ("typical-epsilon-0", lambda: typical(epsilon=0), ValueError, r"epsilon must lie in \(0, 1\]"),
    ("typical-delta-negative", lambda: typical(delta=-1), ValueError, "delta must lie in"),
    ("typical-residual", lambda: typical(residual="mode"), ValueError, "residual must be"),
    ("typical-epsilon-string", lambda: typical(epsilon="0.1"), TypeError, "epsilon must be a real number"),
    ("lenience-0", lambda: lenience(0), ValueError, r"l must lie in \(0, 1\]"),
    ("lenience-above-1", lambda: lenience(1.2), ValueError, "l must lie in"),
    ("lenience-None", lambda: lenience(None), TypeError, "l must be a real number"),
    ("topk-0", lambda: topk_accept(0), ValueError, "k must be >= 1"),
    ("topk-float", lambda: topk_accept(1.5), TypeError, "k must be an integer"),
    ("fuzzy-T-negative", lambda: fuzzy(-0.1), ValueError, "T must lie in"),
    ("fuzzy-divergence", lambda: fuzzy(0.1, divergence="hellinger"), ValueError, "divergence must be one of"),
    ("cactus-negative", lambda: cactus(-0.01), ValueError, "delta must lie in"),
    ("cactus-nan", lambda: cactus(float("nan")), ValueError, "delta must lie in"),
    ("cactus-inf", lambda: cactus(float("inf")), ValueError, "delta must lie in"),
    ("cactus-bool", lambda: cactus(True), TypeError, "delta must be a real number"),
    ("mentored-0", lambda: mentored(0), ValueError, "alpha must lie in"),
    ("mentored-above-1", lambda: mentored(1.5), ValueError, "alpha must lie in"),
    ("ensemble-w", lambda: ensemble(1.1), ValueError, r"w must lie in \[0, 1\]"),
    ("ensemble-kind", lambda: ensemble(0.5, kind="harmonic"), ValueError, "kind must be"),
    ("margin-0", lambda: margin_standin(0), ValueError, "theta must lie in"),
    ("consultant-2", lambda: consultant_standin(2.0), ValueError, "tau must lie in"),
    ("cascade-negative", lambda: cascade(-0.1), ValueError, "alpha must lie in"),
]

LOSSY_ROWS = [
    ("out-negative-entry", lambda: cactus(0.1).out([0.5, 0.6, -0.1], [0.2, 0.3, 0.5]), ValueError,
     r"p \(target\): negative entry"),
    ("out-sizes", lambda: cactus(0.1).out(HALF, [0.2, 0.3, 0.5]), ValueError, "same vocabulary size"),
    ("beta-not-a-law", lambda: lenience(0.5).beta(HALF, [0.2, 0.3]), ValueError, r"q \(draft\): entries sum"),
    ("rule-call-sizes", lambda: lenience(0.5).rule(HALF, [0.2, 0.3, 0.5], 0), ValueError, "same vocabulary size"),
    ("single_token_chain-not-a-rule", lambda: single_token_chain("not a rule"), TypeError,
     "rule must be a SingleTokenRule"),
]

DECORATORS = [
    ("needs-unknown-tag", lambda: tree_verifier("x", needs={"bogus"})(_law), ValueError,
     r"unknown needs tag\(s\) \['bogus'\]"),
    ("needs-a-string", lambda: tree_verifier("x", needs="iid")(_law), TypeError, "needs must be a collection"),
    ("needs-empty", lambda: tree_verifier("x", needs=set())(_law), ValueError, "at least one"),
    ("needs-any-and-more", lambda: tree_verifier("x", needs={"any", "iid"})(_law), ValueError,
     "'any' already covers"),
    ("needs-not-strings", lambda: tree_verifier("x", needs={1})(_law), TypeError, "needs must hold strings"),
    ("chain-missing-law", lambda: chain_verifier("x")(None), TypeError, "decorates a law function"),
    ("tree-missing-law", lambda: tree_verifier("x")(42), TypeError, "decorates a law function"),
    ("name-not-a-string", lambda: chain_verifier(3)(_law), TypeError, "name must be a non-empty string"),
    ("name-empty", lambda: chain_verifier("")(_law), TypeError, "name must be a non-empty string"),
    ("sampler-not-callable", lambda: chain_verifier("x", sampler=5)(_law), TypeError, "sampler of verifier 'x'"),
    ("node_rule-not-callable", lambda: tree_verifier("x", node_rule="r")(_law), TypeError, "node_rule of verifier"),
    ("lossless-not-bool", lambda: chain_verifier("x", lossless="yes")(_law), TypeError, "lossless must be"),
    ("batched-not-bool", lambda: chain_verifier("x", batched=1), TypeError, "batched must be"),
    ("doc-not-a-string", lambda: chain_verifier("x", doc=3)(_law), TypeError, "doc must be a string"),
    ("extra-field-for-plain-verifier", lambda: chain_verifier("x", rule=None)(_law), TypeError, "rule"),
    ("as_verifier-not-callable", lambda: as_verifier(3), TypeError, "verifier must be a Verifier"),
    ("meets_needs-unknown-tag", lambda: meets_needs(chain(), {"nope"}), ValueError, "unknown needs tag"),
    # the Verifier's own checks, behind the decorators
    ("kind-unknown", lambda: Verifier(name="x", law=_law, kind="graph", needs={"any"}), ValueError,
     "kind must be 'chain' or 'tree'"),
    ("chain-needs-a-tree-law", lambda: Verifier(name="x", law=_law, kind="chain", needs={"iid"}), ValueError,
     "needs must be {'chain'}"),
    ("path_model-on-a-chain", lambda: Verifier(name="x", law=_law, kind="chain", needs={"chain"}, path_model=_law),
     ValueError, "path_model is for tree verifiers"),
    ("node_rule-on-a-chain", lambda: Verifier(name="x", law=_law, kind="chain", needs={"chain"}, node_rule=_law),
     ValueError, "node_rule is for tree verifiers"),
    ("positional-construction", lambda: Verifier("x", _law, "chain", {"chain"}), TypeError, "positional"),
]

DRAW = [
    ("draw-no-positive-weight", lambda: draw_rows([[0.0, 0.0], [0.5, 0.5]], np.random.default_rng(0)), ValueError,
     r"rows\[0\] has no positive weight"),
    ("draw-one-dimensional", lambda: draw_rows(HALF, np.random.default_rng(0)), ValueError, "2-D array"),
]

CASES = CHAIN_INPUTS + OUTCOME_LISTS + TREE + LOSSY_PARAMETERS + LOSSY_ROWS + DECORATORS + DRAW


@pytest.mark.parametrize("call, error, match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_plain_callables_are_chain_verifiers():
    """The positive counterpart of the outcome-list cases: a valid plain callable is accepted."""
    assert s.check_lossless(lambda draft, p, q: [Outcome(1.0, 0, p[0])], TOY_P, TOY_Q, 2).lossless
