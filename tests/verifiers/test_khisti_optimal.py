"""khisti_optimal: Khisti et al.'s two-step scheme with an optimal selection (docs/theory.md §6.5).

References: the exact engine (losslessness), multidraft_bound (the optimum alpha*, by the
sorted-prefix theorem, independent of the construction), and the selection law recomputed from
:meth:`OptimalSelection.select` over every ordered k-tuple of draws.
"""
import itertools

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lp.coupling import multidraft_bound
from specsim import check_lossless
from specsim.drafts import fixed_shape, iid_paths, swor_tree
from specsim.testing.strategies import distribution_pairs, model_pairs
from specsim.models import iid
from specsim.real_trees import committed_trees, load_trees
from specsim.multidraft import multidraft_acceptance
from specsim.verifiers import khisti, khisti_optimal, verifiers_for
from specsim.verifiers.two_step import khisti_optimal_selection, khisti_selection_law


@settings(max_examples=6, deadline=None)
@given(pair=model_pairs(V=3, depth=st.integers(1, 2)),
       process=st.sampled_from([iid_paths(2), iid_paths(3), fixed_shape((2, 2))]))
def test_lossless_on_iid_processes(pair, process):
    L = 2 if process.widths != (3,) else 1
    cert = check_lossless(khisti_optimal, *pair, L, process)
    assert cert.lossless, cert


# q(2) = 1e-17 sits after q(1) = 1.0 in position order, below the float spacing at 1: its position set
# is empty, and 0 * log(0) gave rho = nan (fresh seeds, via test_extreme_rows, issue 26)
SUB_SPACING = (np.array([0.5, 0.5, 0.0]), np.array([0.0, 1.0, 1e-17]))


@settings(max_examples=25, deadline=None)
@given(pq=distribution_pairs(V=st.integers(2, 5)), K=st.integers(1, 3))
@example(pq=SUB_SPACING, K=2)
def test_acceptance_equals_the_multidraft_bound(pq, K):
    p, q = pq
    alpha = multidraft_acceptance("khisti_optimal", p, q, K)
    assert alpha == pytest.approx(multidraft_bound(p, q, K).value, abs=1e-8)
    assert khisti_optimal_selection(p, q, K).acceptance == pytest.approx(alpha, abs=1e-12)
    # the self-normalised weights are one feasible choice: never above the optimum
    assert multidraft_acceptance("khisti", p, q, K) <= alpha + 1e-9


def test_k2_closed_form_and_gap_to_self_normalised():
    # p = (0, 1/2, 1/2), q = (0.8, 0.1, 0.1): min_S p(S) + 1 - q(S)^2 at S = {0} is 0 + 1 - 0.64
    p, q = [0.0, 0.5, 0.5], [0.8, 0.1, 0.1]
    assert multidraft_acceptance("khisti_optimal", p, q, 2) == pytest.approx(0.36, abs=1e-9)
    rng = np.random.default_rng(7)
    gaps = []
    for _ in range(40):
        p, q = rng.dirichlet(np.ones(4) * 0.5), rng.dirichlet(np.ones(4) * 0.5)
        gaps.append(multidraft_acceptance("khisti_optimal", p, q, 2) - multidraft_acceptance("khisti", p, q, 2))
    assert min(gaps) > -1e-9 and max(gaps) > 0.01   # the old rule is lossless but not optimal


def test_names_and_registry():
    assert khisti_optimal in verifiers_for(iid_paths(2))
    assert khisti_optimal not in verifiers_for(swor_tree(2))


@settings(max_examples=40, deadline=None)
@given(pq=distribution_pairs(V=st.integers(2, 6)), K=st.integers(1, 4))
@example(pq=SUB_SPACING, K=2)
@example(pq=SUB_SPACING, K=3)
def test_select_induces_rho(pq, K):
    """sum over ordered K-tuples x of Q(x) f(set(x), y) = rho(y), and each f(S, .) is a distribution."""
    p, q = iid(pq[0])(()), iid(pq[1])(())
    sel = khisti_optimal_selection(p, q, K)
    rho = np.zeros(p.size)
    for xs in itertools.product(np.flatnonzero(q > 0), repeat=K):
        f = sel.select(xs)
        assert set(f) <= set(xs) and sum(f.values()) == pytest.approx(1.0, abs=1e-12)
        for y, v in f.items():
            rho[y] += np.prod(q[list(xs)]) * v
    assert np.abs(rho - sel.rho).max() <= 1e-13
    # the class position sets tile [0, 1), each of measure its class's draft mass
    classes = {pcs: [y for y in sel.pieces if sel.pieces[y] == pcs] for pcs in sel.pieces.values()}
    ends = sorted(e for pcs in classes for e in pcs)
    assert ends[0][0] == 0.0 and ends[-1][1] == 1.0 and all(a[1] == b[0] for a, b in zip(ends, ends[1:]))
    for pcs, ys in classes.items():
        assert sum(b - a for a, b in pcs) == pytest.approx(q[ys].sum(), abs=1e-15)


def _real_rows(n_nodes):
    ds = load_trees(committed_trees())
    rows = []
    for n in range(len(ds)):
        t = ds[n].tree
        rows += [(t.p[u], t.q[u], len(t.draws[u])) for u in range(t.num_nodes) if len(t.draws[u]) > 1]
    return sorted(rows, key=lambda r: -np.count_nonzero(r[1]))[:n_nodes]


@pytest.mark.parametrize("p, q, K", _real_rows(3))
def test_real_rows_reach_the_bound(p, q, K):
    """SmolLM2 rows (V = 49152, the largest supports of the committed dataset): alpha* reached."""
    sel = khisti_optimal_selection(p, q, K)
    assert sel.acceptance == pytest.approx(multidraft_bound(p, q, K).value, abs=1e-12)
    assert sel.rho.sum() == pytest.approx(1.0, abs=1e-12) and (sel.rho >= 0).all()
    draws = np.argsort(-q)[:K]
    assert sum(sel.select(draws).values()) == pytest.approx(1.0, abs=1e-12)
    assert np.minimum(p, khisti_selection_law(p, q, K)).sum() <= sel.acceptance + 1e-12   # khisti's acceptance


def test_select_rejects_draws_outside_the_support():
    sel = khisti_optimal_selection([0.2, 0.3, 0.5], [0.0, 0.5, 0.5], 2)
    with pytest.raises(ValueError, match="draws must be 2 tokens of supp q"):
        sel.select([0, 1])
    with pytest.raises(ValueError, match="draws must be 2 tokens of supp q"):
        sel.select([1, 2, 2])
