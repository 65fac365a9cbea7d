"""Bad input to specsim's public functions: the exception type and the argument it names.

One table per module, rows ``(id, call, exception, message pattern)``; each table is one
parametrised test, so a new case is one line.
"""
import contextlib
import re

import numpy as np
import pytest

from specsim import divergences, drafts, exact, models, montecarlo, sequoia_dp
from specsim._validate import (as_distribution, as_pair, as_rows, check_bool, check_int, check_real, check_rng,
                               check_tokens)
from specsim.models import validate_model_pair, iid
from specsim.verifiers import block, token


def cases(table):
    """pytest parameters from a table of (id, call, exception, pattern)."""
    return [pytest.param(call, exc, pattern, id=name) for name, call, exc, pattern in table]


UNIFORM3 = np.full((3, 3), 1 / 3)
Q0 = np.array([[0.5, 0.5, 0.0], [1 / 3] * 3, [1 / 3] * 3])  # the root cannot draft token 2
HALF, HALF3 = iid([0.5, 0.5]), iid([0.2, 0.3, 0.5])
HALF3_2 = iid([0.3, 0.7])


def _tree(tokens, parent, p=UNIFORM3, q=UNIFORM3, **kw):
    return lambda: drafts.DraftTree(tokens, parent, p, q, **kw)


def _enumerate(process, target=HALF, draft_model=HALF, L=1):
    return lambda: list(process.enumerate(target, draft_model, L))


# ---------------------------------------------------------------------------- specsim.drafts
DRAFTS = [
    ("DraftTree-lengths-differ", _tree((-1, 0), (-1, 0, 0), UNIFORM3[:2], UNIFORM3[:2]), ValueError, "same positive length"),
    ("DraftTree-no-root", _tree((0, 0, 1), (-1, 0, 0)), ValueError, "node 0 must be the root"),
    ("DraftTree-parent-after-child", _tree((-1, 0, 1), (-1, 2, 0)), ValueError, "parents must precede"),
    ("DraftTree-self-parent", _tree((-1, 0), (-1, 1), UNIFORM3[:2], UNIFORM3[:2]), ValueError, "parents must precede"),
    ("DraftTree-token-outside-V", _tree((-1, 3, 2), (-1, 0, 0)), ValueError, "token 3 outside 0..2"),
    ("DraftTree-token-with-q-zero", _tree((-1, 0, 2), (-1, 0, 0), q=Q0), ValueError, "q = 0 at its parent 0"),
    ("DraftTree-repeated-child", _tree((-1, 1, 1), (-1, 0, 0)), ValueError, "repeats token 1"),
    ("DraftTree-p-shape", _tree((-1, 0, 2), (-1, 0, 0), p=UNIFORM3[:2]), ValueError, r"p must have shape \[num_nodes=3"),
    ("DraftTree-q-shape", _tree((-1, 0, 2), (-1, 0, 0), q=UNIFORM3[:, :2]), ValueError, r"q must have shape \(3, 3\)"),
    ("DraftTree-p-row-sum", _tree((-1, 0, 2), (-1, 0, 0), p=np.array([[0.5, 0.6, 0.0]] + [[1 / 3] * 3] * 2)),
     ValueError, "p at node 0: entries sum to 1.1"),
    ("DraftTree-draws-mismatch", _tree((-1, 0, 2), (-1, 0, 0), draws=((0, 1), (), ())), ValueError,
     re.escape("draws[0] = (0, 1) does not match the children of node 0")),
    ("from_chain-shapes", lambda: drafts.DraftTree.from_chain((1, 2), UNIFORM3, UNIFORM3), ValueError,
     r"q: expected shape \(2, 3\), got \(3, 3\)"),
    ("from_chain-float-token", lambda: drafts.DraftTree.from_chain((0.7,), UNIFORM3[:2], UNIFORM3[:1]), TypeError,
     r"draft\[0\] must be an integer token id, got 0.7"),
    ("DraftTree-list-rows-bad-sum", _tree((-1, 0), (-1, 0), [[0.5, 0.6, 0.0], [1 / 3] * 3], [[1 / 3] * 3] * 2),
     ValueError, "p at node 0: entries sum to 1.1"),
    ("DraftTree-float-token", _tree((-1, 0.0, 2), (-1, 0, 0)), TypeError, r"tokens\[1\] must be an integer"),
    ("DraftTree-tokens-not-a-sequence", _tree(3, (-1,)), TypeError, "tokens must be a sequence of integers"),
    ("chain-sample-rng-None", lambda: drafts.chain().sample(HALF, HALF, 1, None), TypeError,
     r"rng must be a numpy.random.Generator \(.*\), got NoneType"),
    ("tree-sample-rng-seed", lambda: drafts.iid_paths(2).sample(HALF, HALF, 1, 0), TypeError,
     "rng must be a numpy.random.Generator"),
    ("chain_arrays-branching", lambda: _tree((-1, 0, 2), (-1, 0, 0))().chain_arrays(), ValueError,
     "a chain verifier needs a chain draft"),
    ("TreeProcess-empty-widths", lambda: drafts.TreeProcess(()), ValueError, "widths must be a non-empty sequence"),
    ("TreeProcess-zero-width", lambda: drafts.TreeProcess((0,)), ValueError, re.escape("widths[0] must be >= 1, got 0")),
    ("TreeProcess-negative-width", lambda: drafts.TreeProcess((2, -1)), ValueError,
     re.escape("widths[1] must be >= 1, got -1")),
    ("TreeProcess-float-width", lambda: drafts.TreeProcess((1.5,)), TypeError,
     re.escape("widths[0] must be an integer, got 1.5")),
    ("TreeProcess-integral-float-width", lambda: drafts.TreeProcess((2, 2.0)), TypeError,
     re.escape("widths[1] must be an integer, got 2.0")),
    ("TreeProcess-bool-width", lambda: drafts.TreeProcess((True,)), TypeError,
     re.escape("widths[0] must be an integer, got True")),
    ("TreeProcess-widths-an-int", lambda: drafts.TreeProcess(2), TypeError, "widths must be a sequence of integers"),
    ("TreeProcess-widths-a-string", lambda: drafts.TreeProcess("22"), TypeError, "widths must be a sequence of integers"),
    ("TreeProcess-mode", lambda: drafts.TreeProcess((2,), mode="uniform"), ValueError, "mode must be one of"),
    ("TreeProcess-mode-not-a-string", lambda: drafts.TreeProcess((2,), mode=None), TypeError, "mode must be a string"),
    ("TreeProcess-name-not-a-string", lambda: drafts.TreeProcess((2,), name=3), TypeError, "name must be a string"),
    ("fixed_shape-float-width", lambda: drafts.fixed_shape((2, 1.0)), TypeError,
     re.escape("widths[1] must be an integer, got 1.0")),
    ("fixed_shape-widths-an-int", lambda: drafts.fixed_shape(2), TypeError, "widths must be a sequence of integers"),
    ("fixed_shape-replacement-string", lambda: drafts.fixed_shape((2,), replacement="False"), TypeError,
     "replacement must be True or False"),
    ("topk_tree-zero-width", lambda: drafts.topk_tree((2, 0)), ValueError, re.escape("widths[1] must be >= 1, got 0")),
    ("topk_tree-float-width", lambda: drafts.topk_tree((2.0,)), TypeError, re.escape("widths[0] must be an integer")),
    ("iid_paths-K0", lambda: drafts.iid_paths(0), ValueError, "K must be >= 1"),
    ("iid_paths-K-float", lambda: drafts.iid_paths(2.0), TypeError, "K must be an integer, got 2.0"),
    ("iid_paths-K-bool", lambda: drafts.iid_paths(True), TypeError, "K must be an integer, got True"),
    ("swor_tree-K-float", lambda: drafts.swor_tree(1.5), TypeError, "K must be an integer"),
    ("greedy_drafts-K0", lambda: drafts.greedy_drafts(0), ValueError, "K must be >= 1"),
    ("delayed_expansion-d-negative", lambda: drafts.delayed_expansion(-1, 2), ValueError, "d must be >= 0"),
    ("delayed_expansion-K0", lambda: drafts.delayed_expansion(1, 0), ValueError, "K must be >= 1"),
    ("delayed_expansion-d-float", lambda: drafts.delayed_expansion(1.0, 2), TypeError, "d must be an integer"),
    ("delayed_expansion-replacement-int", lambda: drafts.delayed_expansion(1, 2, replacement=0), TypeError,
     "replacement must be True or False"),
    ("greedy_drafts-K-string", lambda: drafts.greedy_drafts("2"), TypeError, "K must be an integer"),
    ("enumerate-L0", _enumerate(drafts.iid_paths(2), L=0), ValueError, "L must be >= 1"),
    ("enumerate-V-mismatch", _enumerate(drafts.iid_paths(2), draft_model=HALF3), ValueError,
     "target has V=2 but draft_model has V=3"),
    ("enumerate-target-not-a-model", _enumerate(drafts.swor_tree(2), target=[0.5, 0.5]), TypeError,
     "target must be a specsim.models.Model"),
    ("chain-enumerate-L0", _enumerate(drafts.chain(), L=0), ValueError, "L must be >= 1"),
    ("chain-enumerate-V-mismatch", _enumerate(drafts.chain(), target=HALF3), ValueError, "target has V=3"),
    ("chain-sample-L0", lambda: drafts.chain().sample(HALF, HALF, 0, np.random.default_rng(0)), ValueError,
     "L must be >= 1"),
    ("parse_drafting-not-a-string", lambda: drafts.parse_drafting(3), TypeError, "drafting spec must be a string"),
] + [(f"parse_drafting-{spec.replace(':', '_') or 'empty'}", lambda spec=spec: drafts.parse_drafting(spec), ValueError,
      "cannot parse drafting spec")
     for spec in ["", "iid", "iid:x", "swor:2:3", "binary:0", "tree:2", "fixed:2:wor", "delayed:1", "chain:2",
                  "topk:2:swor", "iid:0"]]


@pytest.mark.parametrize("call, exc, pattern", cases(DRAFTS))
def test_drafts(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------------------- specsim.sequoia_dp
A = [0.6, 0.2, 0.1]


def _deep(n):
    shape = ()
    for _ in range(n):
        shape = (shape,)
    return shape
TREESHAPE = [
    ("a-empty", lambda: sequoia_dp.sequoia_tree([], 3), ValueError, "non-empty 1-D vector"),
    ("a-2d", lambda: sequoia_dp.sequoia_tree([[0.5]], 3), ValueError, r"got shape \(1, 1\)"),
    ("a-increasing", lambda: sequoia_dp.sequoia_tree([0.2, 0.5], 3), ValueError, "non-increasing"),
    ("a-above-1", lambda: sequoia_dp.sequoia_tree([1.2], 3), ValueError, r"entries in \[0, 1\]"),
    ("a-nan", lambda: sequoia_dp.sequoia_tree([np.nan], 3), ValueError, r"entries in \[0, 1\]"),
    ("a-sum-above-1", lambda: sequoia_dp.sequoia_tree([0.7, 0.6], 3), ValueError, "at most one child is accepted"),
    ("m0", lambda: sequoia_dp.sequoia_tree(A, 0), ValueError, "m must be >= 1"),
    ("m-float", lambda: sequoia_dp.sequoia_tree(A, 2.0), TypeError, "m must be an integer"),
    ("layers0", lambda: sequoia_dp.sequoia_tree(A, 3, layers=0), ValueError, "layers must be >= 1"),
    ("no-tree-fits", lambda: sequoia_dp.sequoia_tree([0.5], 3, layers=2), ValueError, "no tree with 3 nodes fits in 2 layers"),
    ("brute_force-no-tree-fits", lambda: sequoia_dp.brute_force_tree([0.5], 3, layers=2), ValueError, "no tree with 3 nodes"),
    ("brute_force-a-increasing", lambda: sequoia_dp.brute_force_tree([0.2, 0.5], 3), ValueError, "non-increasing"),
    ("tree_value-more-children-than-ranks", lambda: sequoia_dp.tree_value(((), (), (), ()), A), ValueError,
     "a node has 4 children but a has only 3 ranks"),
    ("tree_value-a-above-1", lambda: sequoia_dp.tree_value(((),), [1.5]), ValueError, r"entries in \[0, 1\]"),
    ("shape_widths-string", lambda: sequoia_dp.shape_widths("ab"), TypeError,
     "shape: node root must be a tuple"),
    ("tree_value-string-child", lambda: sequoia_dp.tree_value(((), "x"), A), TypeError, r"node root.1 must be a tuple"),
    ("shape_widths-too-deep", lambda: sequoia_dp.shape_widths(_deep(300)), ValueError, "more than 256 layers"),
    ("a-strings", lambda: sequoia_dp.sequoia_tree(["x"], 3), TypeError, "per-rank acceptance probabilities"),
]


DIVERGENCE = [
    ("kl-nan", lambda: divergences.divergence([np.nan, 1], [0.5, 0.5], "kl"), ValueError,
     "divergence: a has entry nan at token 0"),
    ("tv-negative", lambda: divergences.tv([0.5, 0.5], [1.5, -0.5]), ValueError, "divergence: b has entry -0.5 at token 1"),
    ("kl-lengths", lambda: divergences.kl([0.5, 0.5], [0.2, 0.3, 0.5]), ValueError, "same length, got 2 and 3"),
    ("kl-2d", lambda: divergences.kl([[0.5, 0.5]], [[0.5, 0.5]]), ValueError, "must be a 1-D vector"),
    ("kl-strings", lambda: divergences.kl(["a"], [1.0]), TypeError, "a must be a vector of probabilities"),
    ("divergence-kind", lambda: divergences.divergence([1.0], [1.0], "js"), ValueError, "divergence must be one of"),
    ("divergence-kind-type", lambda: divergences.divergence([1.0], [1.0], ["kl"]), ValueError,
     "divergence must be one of"),
]


@pytest.mark.parametrize("call, exc, pattern", cases(DIVERGENCE))
def test_divergences(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


@pytest.mark.parametrize("call, exc, pattern", cases(TREESHAPE))
def test_sequoia_dp(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------------------- specsim._validate
VALIDATE = [
    ("as_distribution-2d", lambda: as_distribution([[0.5, 0.5]], "p"), ValueError, r"p: expected a 1-D .* shape \(1, 2\)"),
    ("as_distribution-empty", lambda: as_distribution([], "p"), ValueError, "p: empty probability vector"),
    ("as_distribution-nan", lambda: as_distribution([np.nan, 1.0], "p"), ValueError, "p: non-finite entry .* at token 0"),
    ("as_distribution-negative", lambda: as_distribution([1.5, -0.5], "p"), ValueError, "p: negative entry .* at token 1"),
    ("as_distribution-sum", lambda: as_distribution([0.5, 0.6], "p"), ValueError, "p: entries sum to 1.1, not 1"),
    ("as_distribution-atol", lambda: as_distribution([0.5, 0.5 + 1e-6], "p", atol=1e-9), ValueError, "tolerance 1e-09"),
    ("as_rows-1d", lambda: as_rows([0.5, 0.5], "q"), ValueError, r"q: expected a 2-D array .* shape \(2,\)"),
    ("as_rows-shape", lambda: as_rows([[0.5, 0.5]], "q", shape=(2, 2)), ValueError, r"q: expected shape \(2, 2\), got \(1, 2\)"),
    ("as_rows-bad-row", lambda: as_rows([[0.5, 0.5], [1.0, 0.1]], "q"), ValueError, r"q\[1\]: entries sum to 1.1"),
    ("as_pair-sizes", lambda: as_pair([0.5, 0.5], [0.2, 0.3, 0.5]), ValueError, "same vocabulary size, got 2 and 3"),
    ("as_pair-V1", lambda: as_pair([1.0], [1.0]), ValueError, "vocabulary size must be >= 2, got 1"),
    ("as_pair-bad-target", lambda: as_pair([0.5, 0.6], [0.5, 0.5]), ValueError, r"p \(target\): entries sum"),
    ("as_pair-bad-draft", lambda: as_pair([0.5, 0.5], [-0.5, 1.5]), ValueError, r"q \(draft\): negative entry"),
    ("check_int-below-minimum", lambda: check_int(0, "L", 1), ValueError, "L must be >= 1, got 0"),
    ("check_int-float", lambda: check_int(2.0, "L", 1), TypeError, "L must be an integer, got 2.0"),
    ("check_int-bool", lambda: check_int(True, "L", 1), TypeError, "L must be an integer, got True"),
    ("check_int-string", lambda: check_int("3", "L", 1), TypeError, "L must be an integer, got '3'"),
    ("check_int-maximum", lambda: check_int(5, "k", 1, 4), ValueError, "k must be <= 4, got 5"),
    ("as_distribution-strings", lambda: as_distribution(["a", "b"], "p"), TypeError, "p: expected real numbers"),
    ("as_distribution-ragged", lambda: as_distribution([[0.5], [0.2, 0.3]], "p"), ValueError,
     "p: expected an array of probabilities"),
    ("as_distribution-bool", lambda: as_distribution(np.array([True, False]), "p"), TypeError, "dtype bool"),
    ("as_distribution-float32-off", lambda: as_distribution(np.array([0.5, 0.6], np.float32), "p"), ValueError,
     r"p: entries sum to 1.1\d*, not 1 \(tolerance 9.53674e-07\)"),
    ("as_distribution-atol-nan", lambda: as_distribution([0.5, 0.5], "p", atol=np.nan), ValueError,
     r"atol must lie in \[0, 1\], got nan"),
    ("as_rows-nan-names-row", lambda: as_rows([[0.5, 0.5], [np.nan, 1.0]], "q"), ValueError,
     r"q\[1\]: non-finite entry nan at token 0"),
    ("check_real-nan", lambda: check_real(np.nan, "atol", 0.0, 1.0), ValueError, r"atol must lie in \[0, 1\], got nan"),
    ("check_real-string", lambda: check_real("0.1", "atol", 0.0, 1.0), TypeError, "atol must be a real number"),
    ("check_real-bool", lambda: check_real(True, "atol", 0.0, 1.0), TypeError, "atol must be a real number"),
    ("check_real-open-end", lambda: check_real(0.0, "T", 0.0, 1.0, lo_open=True), ValueError, r"T must lie in \(0, 1\]"),
    ("check_bool-string", lambda: check_bool("False", "replacement"), TypeError, "replacement must be True or False"),
    ("check_tokens-float", lambda: check_tokens((0.7,), "draft", 2), TypeError, r"draft\[0\] must be an integer"),
    ("check_tokens-bool", lambda: check_tokens((True,), "draft", 2), TypeError, r"draft\[0\] must be an integer"),
    ("check_tokens-negative", lambda: check_tokens((1, -1), "s", 2), ValueError, r"s\[1\] = -1 is outside 0..1"),
    ("check_tokens-string", lambda: check_tokens("01", "s", 2), TypeError, "s must be a sequence of token ids"),
    ("check_rng-None", lambda: check_rng(None), TypeError, "rng must be a numpy.random.Generator"),
    ("validate_model_pair-target-type", lambda: validate_model_pair([0.5, 0.5], HALF, 1), TypeError,
     "target must be a specsim.models.Model, got list"),
    ("validate_model_pair-draft-type", lambda: validate_model_pair(HALF, None, 1), TypeError,
     "draft_model must be a specsim.models.Model, got NoneType"),
    ("validate_model_pair-V", lambda: validate_model_pair(HALF, HALF3, 1), ValueError, "target has V=2 but draft_model has V=3"),
    ("validate_model_pair-L", lambda: validate_model_pair(HALF, HALF, 0), ValueError, "L must be >= 1, got 0"),
]


@pytest.mark.parametrize("call, exc, pattern", cases(VALIDATE))
def test_validate(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------------------- specsim.models
MODELS = [
    ("row-sum-names-prefix", lambda: models.from_function(lambda s: [0.5, 0.5, 0.5] if s == (1,) else [0.2, 0.3, 0.5],
                                                          3, "toy")((1,)), ValueError, r"toy at prefix \(1,\).*sum"),
    ("row-negative", lambda: models.from_function(lambda s: [-0.1, 0.6, 0.5], 3)(()), ValueError, "negative"),
    ("row-nan", lambda: models.from_function(lambda s: [np.nan, 0.5, 0.5], 3)(()), ValueError, "non-finite"),
    ("row-shape", lambda: models.from_function(lambda s: [0.5, 0.5], 3)(()), ValueError, r"shape \(2,\), expected \(3,\)"),
    ("prefix-token-outside-V", lambda: iid([0.5, 0.5])((2,)), ValueError, r"prefix\[0\] = 2 is outside 0..1"),
    ("Model-V1", lambda: models.Model(lambda s: [1.0], 1), ValueError, "V must be >= 2"),
    ("prefix-float-token", lambda: iid([0.5, 0.5])((0.7,)), TypeError, r"prefix\[0\] must be an integer token id"),
    ("prefix-negative-token", lambda: iid([0.5, 0.5])((-1,)), ValueError, r"prefix\[0\] = -1 is outside 0..1"),
    ("prefix_index-float", lambda: models.prefix_index((1, 0.5), 3), TypeError, r"prefix\[1\] must be an integer"),
    ("shifted-context-out-of-range", lambda: HALF.shifted((5,)), ValueError, r"context\[0\] = 5 is outside 0..1"),
    ("Model-atol-negative", lambda: models.Model(lambda s: [0.5, 0.5], 2, atol=-1.0), ValueError,
     r"atol must lie in \[0, 1\]"),
    ("Model-fn-not-callable", lambda: models.Model([0.5, 0.5], 2), TypeError, "fn must be callable"),
    ("float32-row-above-tolerance", lambda: iid(np.array([0.5, 0.51], np.float32)), ValueError,
     r"iid: p: entries sum to 1.0099\d*, not 1 \(tolerance 9.53674e-07\)"),
    ("temperature-nan", lambda: models.temperature(HALF, np.nan), ValueError, "temperature T must lie in"),
    ("temperature-model-type", lambda: models.temperature([0.5, 0.5], 1.0), TypeError,
     "temperature: model must be a specsim.models.Model, got list"),
    ("top_k-model-type", lambda: models.top_k(None, 1), TypeError, "top_k: model must be a specsim.models.Model"),
    ("top_p-nan", lambda: models.top_p(HALF, np.nan), ValueError, "top_p mass must lie in"),
    ("mix-weight-nan", lambda: models.mix(HALF, HALF, np.nan), ValueError, "mixing weight must lie in"),
    ("mix-model-type", lambda: models.mix(HALF, [0.5, 0.5], 0.5), TypeError, "mix: b must be a specsim.models.Model"),
    ("random_model-concentration-string", lambda: models.random_model(3, 0, concentration="1"), TypeError,
     "concentration must be a real number"),
    ("from_function-not-callable", lambda: models.from_function([0.5, 0.5], 2), TypeError, "fn must be callable"),
    ("table-L-negative", lambda: HALF.table(-1), ValueError, "L must be >= 0"),
    ("joint-n0", lambda: HALF.joint(0), ValueError, "n must be >= 1, got 0"),
    ("joint-n-float", lambda: HALF.joint(2.0), TypeError, "n must be an integer"),
    ("iid-sum", lambda: iid([0.5, 0.6]), ValueError, "iid: p: entries sum to 1.1"),
    ("markov-transition-shape", lambda: models.markov([0.5, 0.5], [[1.0, 0.0]]), ValueError,
     r"transition: expected shape \(2, 2\), got \(1, 2\)"),
    ("markov-transition-row", lambda: models.markov([0.5, 0.5], [[1.0, 0.0], [0.5, 0.6]]), ValueError,
     r"transition\[1\]: entries sum"),
    ("random_model-concentration", lambda: models.random_model(3, 0, concentration=0.0), ValueError, "concentration"),
    ("random_model-seed", lambda: models.random_model(3, -1), ValueError, "seed must be >= 0"),
    ("random_model-depth", lambda: models.random_model(3, 0, depth=-1), ValueError, "depth must be >= 0"),
    ("temperature-negative", lambda: models.temperature(HALF, -1), ValueError, r"temperature T must lie in \[0, inf\), got -1"),
    ("mix-weight", lambda: models.mix(HALF, HALF, 1.5), ValueError, r"mixing weight must lie in \[0, 1\], got 1.5"),
    ("mix-V", lambda: models.mix(HALF, HALF3, 0.5), ValueError, "V=2 and V=3"),
    ("top_k-0", lambda: models.top_k(HALF, 0), ValueError, "k must be >= 1"),
    ("top_p-0", lambda: models.top_p(HALF, 0.0), ValueError, r"top_p mass must lie in \(0, 1\], got 0.0"),
]


@pytest.mark.parametrize("call, exc, pattern", cases(MODELS))
def test_models(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------------------- specsim.exact and specsim.montecarlo
ENGINE = [
    ("check_lossless-L0", lambda: exact.check_lossless(token, HALF, HALF, 0), ValueError, "L must be >= 1"),
    ("check_lossless-V", lambda: exact.check_lossless(token, HALF, HALF3, 2), ValueError,
     "target has V=2 but draft_model has V=3"),
    ("check_lossless-target-type", lambda: exact.check_lossless(token, [0.5, 0.5], HALF, 1), TypeError,
     "target must be a specsim.models.Model"),
    ("output_law-draft-type", lambda: exact.output_law(block, HALF, np.full(2, 0.5), 1), TypeError,
     "draft_model must be a specsim.models.Model, got ndarray"),
    ("expected_accepted-L-float", lambda: exact.expected_accepted(block, HALF, HALF, 1.0), TypeError,
     "L must be an integer"),
    ("check_lossless-atol-nan", lambda: exact.check_lossless(block, HALF, HALF3_2, 1, atol=np.nan), ValueError,
     r"atol must lie in \[0, 1\], got nan"),
    ("check_lossless-atol-negative", lambda: exact.check_lossless(block, HALF, HALF3_2, 1, atol=-1e-9), ValueError,
     r"atol must lie in \[0, 1\]"),
    ("output_law-atol-string", lambda: exact.output_law(block, HALF, HALF, 1, atol="1e-9"), TypeError,
     "atol must be a real number"),
    ("output_law-drafting-type", lambda: exact.output_law(block, HALF, HALF, 1, "iid:2"), TypeError,
     "drafting must be a draft process"),
    ("output_law-progress-string", lambda: exact.output_law(block, HALF, HALF, 1, progress="yes"), TypeError,
     "progress must be True or False"),
    ("output_law-context-float", lambda: exact.output_law(block, HALF, HALF, 1, context=(0.5,)), TypeError,
     r"context\[0\] must be an integer"),
    ("OutputLaw.prob-negative-id", lambda: exact.output_law(token, HALF, HALF, 1).prob((1, -1)), ValueError,
     r"s \(emitted string\)\[1\] = -1 is outside 0..1"),
    ("OutputLaw.prob-float-id", lambda: exact.output_law(token, HALF, HALF, 1).prob((0.0,)), TypeError,
     r"s \(emitted string\)\[0\] must be an integer"),
    ("estimate-n1", lambda: montecarlo.estimate(token, HALF, HALF, 2, n=1), ValueError, "n must be >= 2"),
    ("estimate-V", lambda: montecarlo.estimate(token, HALF3, HALF, 2, n=10), ValueError,
     "target has V=3 but draft_model has V=2"),
    ("estimate-L0", lambda: montecarlo.estimate(token, HALF, HALF, 0, n=10), ValueError, "L must be >= 1"),
]


@pytest.mark.parametrize("call, exc, pattern", cases(ENGINE))
def test_engine(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


# ---------------------------------------------------------------------------- issue 26: fuzz findings in the core
from specsim.drafts import iid_paths, swor_tree  # noqa: E402
from specsim.verifiers import TREE_VERIFIERS, Outcome, as_verifier, chain_verifier, tree_verifier  # noqa: E402

T3, D3 = models.random_model(3, 0), models.random_model(3, 1)


def _root_law(tree):
    """f(tree): a tree law handed over without the decorator."""
    return [Outcome(1.0, 0, tree.p[0])]


def _reject_law(draft, p, q):
    """f(draft, p, q): a plain chain law (lossless: tau = 0, y ~ p_0)."""
    return [Outcome(1.0, 0, p[0])]


class _Unlabelled:
    """A user-written process that declares no ``laws`` (so it guarantees none): chain drafts."""

    name = "unlabelled"

    def enumerate(self, target, draft_model, L):
        return drafts.chain().enumerate(target, draft_model, L)

    def sample(self, target, draft_model, L, rng):
        return drafts.chain().sample(target, draft_model, L, rng)


_NOT_APPLICABLE = "does not apply to draft process"
#: gbv needs 'paths', khisti_optimal and traversal_repeats need 'iid': swor_tree(2) guarantees only 'swor'
#: (these came back LOSSY with TV 0.37 instead of being refused)
CORE_FUZZ = [
    *[(f"{entry}-{name}-on-swor_tree", (lambda call=call, name=name: call(TREE_VERIFIERS[name])), ValueError,
       rf"verifier '{name}' {_NOT_APPLICABLE} 'swor_tree\(2\)'.*needs .*'{need}'.*guarantees \['swor'\]")
      for name, need in (("gbv", "paths"), ("khisti_optimal", "iid"), ("traversal_repeats", "iid"))
      for entry, call in (("check_lossless", lambda v: exact.check_lossless(v, T3, D3, 2, swor_tree(2))),
                          ("output_law", lambda v: exact.output_law(v, T3, D3, 2, swor_tree(2))),
                          ("expected_accepted", lambda v: exact.expected_accepted(v, T3, D3, 2, swor_tree(2))),
                          ("estimate", lambda v: montecarlo.estimate(v, T3, D3, 2, n=10, drafting=swor_tree(2), rng=0)))],
    ("chain-verifier-on-iid_paths", lambda: exact.check_lossless(block, T3, D3, 1, iid_paths(2)), ValueError,
     rf"verifier 'block' {_NOT_APPLICABLE} 'iid_paths\(2\)'.*needs .*'chain'"),
    ("chain-verifier-on-a-process-without-laws", lambda: exact.check_lossless(block, T3, D3, 1, _Unlabelled()),
     ValueError, rf"verifier 'block' {_NOT_APPLICABLE} 'unlabelled'.*guarantees none.*laws"),
    # a plain callable f(tree) was called as f(draft, p, q) and failed inside with "takes 1 positional argument"
    ("check_lossless-plain-f(tree)", lambda: exact.check_lossless(_root_law, T3, D3, 1, iid_paths(2)), TypeError,
     r"verifier _root_law is a plain callable of 1 argument.*\(draft, p, q\).*@tree_verifier"),
    ("as_verifier-plain-f(tree)", lambda: as_verifier(_root_law), TypeError, r"_root_law.*tree_verifier\(name"),
    ("as_verifier-two-arguments", lambda: as_verifier(lambda draft, p: []), TypeError,
     r"verifier <lambda> is a plain callable of 2 arguments"),
    ("estimate-plain-f(tree)", lambda: montecarlo.estimate(_root_law, T3, D3, 1, n=10, rng=0), TypeError,
     "tree_verifier"),
    # V = 0 rows were reported as "entries sum to 0.0"
    ("as_rows-V0", lambda: as_rows(np.zeros((2, 0)), "p"), ValueError, r"p: the rows are empty \(shape \(2, 0\)\)"),
    ("as_rows-V0-no-rows", lambda: as_rows(np.zeros((0, 0)), "q"), ValueError, "q: the rows are empty"),
    ("chain-verifier-V0", lambda: block((0,), np.zeros((2, 0)), np.zeros((1, 0))), ValueError,
     "p: the rows are empty"),
    ("DraftTree-V0", _tree((-1,), (-1,), np.zeros((1, 0)), np.zeros((1, 0))), ValueError, r"V>=2\], got \(1, 0\)"),
    # seeds and rng reached numpy unchecked ("expected non-negative integer", "SeedSequence expects int")
    ("estimate-rng-negative", lambda: montecarlo.estimate(token, HALF, HALF, 1, n=10, rng=-1), ValueError,
     "rng must be >= 0"),
    ("estimate-rng-float", lambda: montecarlo.estimate(token, HALF, HALF, 1, n=10, rng=1.5), TypeError,
     r"rng must be a numpy.random.Generator, an integer seed >= 0 or None, got 1.5"),
    ("estimate-rng-string", lambda: montecarlo.estimate(token, HALF, HALF, 1, n=10, rng="0"), TypeError, "rng must be"),
    ("estimate-rng-bool", lambda: montecarlo.estimate(token, HALF, HALF, 1, n=10, rng=True), TypeError, "rng must be"),
    ("random_model-seed-float", lambda: models.random_model(3, 1.5), TypeError, "seed must be an integer"),
    ("random_model-seed-bool", lambda: models.random_model(3, True), TypeError, "seed must be an integer"),
]


@pytest.mark.parametrize("call, exc, pattern", cases(CORE_FUZZ))
def test_core_fuzz_findings(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


@pytest.mark.parametrize("name", ["gbv", "khisti_optimal", "traversal_repeats", "sequoia", "traversal"])
def test_applicable_pairs_still_run(name):
    # negative control of the applicability check: each verifier on a process meeting its needs is certified
    v = TREE_VERIFIERS[name]
    proc = iid_paths(2) if v.applies_to(iid_paths(2)) else swor_tree(2)
    assert v.applies_to(proc)
    assert exact.check_lossless(v, T3, D3, 2, proc).lossless
    assert montecarlo.estimate(v, T3, D3, 2, n=20, drafting=proc, rng=0).n == 20


def test_chain_verifiers_run_on_every_process_guaranteeing_a_chain():
    # TreeProcess((1, 1)) draws one child per node: a chain (laws include 'chain'), so block applies there
    one_path = drafts.TreeProcess((1, 1))
    assert "chain" in drafts.draft_laws(one_path)
    a = exact.expected_accepted(block, T3, D3, 2, one_path)
    assert a == pytest.approx(exact.expected_accepted(block, T3, D3, 2), abs=1e-12)


def test_decorated_and_plain_verifiers_still_work():
    # negative controls for the arity check: the decorated tree law, a plain chain law (a function, a lambda,
    # a callable object) and a process without laws for a verifier that needs nothing ('any')
    root = tree_verifier("root")(_root_law)
    assert exact.check_lossless(root, T3, D3, 2, iid_paths(2)).lossless
    assert exact.check_lossless(root, T3, D3, 1, _Unlabelled()).lossless
    assert exact.check_lossless(_reject_law, T3, D3, 2).lossless
    assert exact.check_lossless(lambda d, p, q: [Outcome(1.0, 0, p[0])], T3, D3, 1).lossless
    assert as_verifier(chain_verifier("rej")(_reject_law)).kind == "chain"

    class Law:
        def __call__(self, draft, p, q, *extra):
            return [Outcome(1.0, 0, p[0])]
    assert exact.check_lossless(Law(), T3, D3, 1).lossless


@pytest.mark.parametrize("rng", [0, np.int64(7), 2 ** 70, None, np.random.default_rng(3)])
def test_estimate_accepts_every_valid_seed(rng):
    # negative control of the seed check: integers >= 0 of any size, None and a Generator still run
    assert montecarlo.estimate(token, HALF, HALF, 1, n=10, rng=rng).n == 10


def test_check_seed_names_the_argument():
    from specsim._validate import as_rng, check_seed
    assert check_seed(np.uint8(5), "seeds[2]") == 5
    with pytest.raises(ValueError, match=r"seeds\[2\] must be >= 0, got -3"):
        check_seed(-3, "seeds[2]")
    with pytest.raises(TypeError, match=r"seed must be an integer seed >= 0, got 2.0"):
        check_seed(2.0)
    g = np.random.default_rng(0)
    assert as_rng(g) is g
    assert as_rng(5).random() == np.random.default_rng(5).random()


def test_negative_zeros_come_out_positive():
    """-0.0 is a valid probability, but as a divisor it makes p/q = -inf, which sorted first in the
    K-draft bound (the value for q = (-0.0, 1) was 1.0 instead of 0.5).  Validated rows carry no
    negative zeros, and the bound agrees with q = (+0.0, 1) on every path."""
    from lp.coupling import multidraft_bound
    from specsim import _jit

    assert not np.signbit(as_distribution([-0.0, 1.0])).any()
    assert not np.signbit(as_rows([[-0.0, 1.0], [0.5, 0.5]], "q")).any()
    for off in (False, True):
        with _jit.disabled() if off else contextlib.nullcontext():
            for replacement in (True, False):
                got = multidraft_bound([0.5, 0.5], [-0.0, 1.0], 2, replacement).value
                assert got == multidraft_bound([0.5, 0.5], [0.0, 1.0], 2, replacement).value == 0.5
