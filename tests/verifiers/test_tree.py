"""Tree and multi-draft verifiers: exact certificates, reductions, anchors, mutants."""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from specsim.drafts import chain, delayed_expansion, fixed_shape, iid_paths, parse_drafting, swor_tree, topk_tree
from specsim.exact import check_lossless, expected_accepted
from specsim.models import iid, random_model
from specsim.testing.strategies import distributions, model_pairs
from specsim.testing.selftest.mutants import (CHAIN_CONTROLS, CHAIN_MUTANTS, TREE_CONTROLS, TREE_MUTANTS,
                                              Mutant)
from specsim.verifiers.chain import block, hsd_released, token
from specsim.multidraft import multidraft_acceptance
from specsim.verifiers import gbv, gbv_capped, khisti, sequoia, specinfer, spectr, traversal, verifiers_for
from specsim.verifiers.kseq import kseq_rho
from specsim.verifiers.multipath import tree_paths
from specsim.verifiers.two_step import khisti_selection_law

# process, depth L used with V = 3
PROCESSES = [(chain(), 2), (iid_paths(2), 2), (iid_paths(3), 1), (swor_tree(2), 2), (swor_tree(3), 1),
             (fixed_shape((2, 2)), 2), (parse_drafting("binary:2"), 2), (topk_tree((2, 2)), 2),
             (delayed_expansion(1, 2), 2), (delayed_expansion(1, 2, replacement=False), 2)]


@settings(max_examples=12)
@given(pair=model_pairs(V=3))
def test_every_lossless_tree_verifier_is_certified_on_every_applicable_process(pair):
    target, draft = pair
    for proc, L in PROCESSES:
        for v in verifiers_for(proc):
            if not v.lossless:
                continue
            cert = check_lossless(v, target, draft, L, proc)
            assert cert.lossless, str(cert)


def test_negative_controls_are_flagged():
    target, draft = random_model(3, 0), random_model(3, 1)
    assert not check_lossless(hsd_released, target, draft, 2).lossless
    assert not check_lossless(gbv_capped, target, draft, 2, iid_paths(2)).lossless
    assert check_lossless(gbv, target, draft, 2, iid_paths(2)).lossless


#: every mutant record, chain and tree: one record type, one test of where each is flagged
MUTANTS = {**CHAIN_MUTANTS, **TREE_MUTANTS}
CONTROLS = {**CHAIN_CONTROLS, **TREE_CONTROLS}


def test_one_record_for_both_families():
    assert len(MUTANTS) == len(CHAIN_MUTANTS) + len(TREE_MUTANTS)     # no name shared across families
    assert len(CONTROLS) == len(CHAIN_CONTROLS) + len(TREE_CONTROLS)
    for table, family, lossless in ((CHAIN_MUTANTS, "chain", False), (CHAIN_CONTROLS, "chain", True),
                                    (TREE_MUTANTS, "tree", False), (TREE_CONTROLS, "tree", True)):
        for name, m in table.items():
            assert isinstance(m, Mutant) and m.name == name
            assert m.family == family == m.verifier.kind and m.verifier.lossless is lossless
            assert bool(m.fault) is (not lossless)
            assert m.verifier.applies_to(m.drafting)   # the claim a checker searches includes the process


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_mutants_are_flagged(name):
    m = MUTANTS[name]
    flagged = [not check_lossless(m.verifier, random_model(3, s), random_model(3, s + 100, 0.5), m.L,
                                  m.drafting).lossless for s in range(3)]
    assert any(flagged), name


@pytest.mark.parametrize("name", [n for n, m in CHAIN_MUTANTS.items() if m.L > 1])
def test_chain_mutant_depth_is_the_smallest(name):
    """The block faults coincide with block verification (= token-level) at L = 1: the record's
    L = 2 is where they first show."""
    m = CHAIN_MUTANTS[name]
    assert all(check_lossless(m.verifier, random_model(3, s), random_model(3, s + 100, 0.5), m.L - 1,
                              m.drafting).lossless for s in range(3))


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_mutant_controls_pass(name):
    m = CONTROLS[name]
    for s in range(3):
        assert check_lossless(m.verifier, random_model(3, s), random_model(3, s + 100, 0.5), m.L,
                              m.drafting).lossless


def _same(a, b, atol=1e-12):
    key = lambda o: o.accepted  # noqa: E731
    a = sorted((o for o in a if o.prob > atol), key=key)
    b = sorted((o for o in b if o.prob > atol), key=key)
    assert [o.accepted for o in a] == [o.accepted for o in b]
    for x, y in zip(a, b):
        assert x.prob == pytest.approx(y.prob, abs=atol)
        np.testing.assert_allclose(x.next_dist, y.next_dist, atol=1e-9)


@settings(max_examples=20)
@given(pair=model_pairs(), L=st.integers(1, 3))
def test_chain_reductions_outcome_by_outcome(pair, L):
    """On a chain: traversal = GBV (K = 1) = block; SpecInfer = Sequoia = SpecTr = Khisti = token."""
    target, draft = pair
    for _, tree in chain().enumerate(target, draft, L):
        d, p, q = tree.chain_arrays()
        _same(traversal.law(tree), block.law(d, p, q))
        _same(gbv.law(tree), block.law(d, p, q))
        for v in (specinfer, sequoia, spectr, khisti):
            _same(v.law(tree), token.law(d, p, q))


def test_traversal_at_depth_one_is_sequoia():
    target, draft = random_model(4, 5), random_model(4, 6, 0.5)
    for _, tree in swor_tree(3).enumerate(target, draft, 1):
        _same(traversal.law(tree), sequoia.law(tree))


def test_multidraft_anchors():
    # docs/theory.md §12 "Multi-draft": p = (1, 0), q = (1/2, 1/2), K = 2
    p, q = [1.0, 0.0], [0.5, 0.5]
    assert multidraft_acceptance("specinfer", p, q, 2) == pytest.approx(0.75, abs=1e-12)
    assert multidraft_acceptance("spectr", p, q, 2) == pytest.approx(0.75, abs=1e-12)
    assert multidraft_acceptance("sequoia", p, q, 2, replacement=False) == pytest.approx(1.0, abs=1e-12)
    assert multidraft_acceptance("traversal", p, q, 2, replacement=False) == pytest.approx(1.0, abs=1e-12)
    # GBV on the block-verification toy, K = 2 paths of length 1: 8/9 (docs/theory.md §6.7)
    assert multidraft_acceptance("gbv", [1 / 3, 2 / 3], [2 / 3, 1 / 3], 2) == pytest.approx(8 / 9, abs=1e-12)
    assert kseq_rho(p, q, 2) == 1.0  # every rho in [1, 2] is valid here


def _alpha_star(p, q, K, replacement):
    """Multi-draft optimum min_H [p(H) + 1 - P(set of draws within H)] (docs/theory.md §6.6, a theorem)."""
    proc = iid_paths(K) if replacement else swor_tree(K)
    sets = [(pr, set(t.draws[0])) for pr, t in proc.enumerate(iid(p), iid(q), 1)]
    V = len(p)
    best = 1.0
    for r in range(V + 1):
        for H in itertools.combinations(range(V), r):
            inside = sum(pr for pr, s in sets if s <= set(H))
            best = min(best, sum(p[h] for h in H) + 1 - inside)
    return best


def _rrs_closed_form(p, q, K):
    R, miss = np.array(p), 1.0
    for _ in range(K):
        a = np.minimum(R, q).sum()
        miss *= 1 - a
        R = np.maximum(R - q, 0)
        R = R / R.sum() if R.sum() > 0 else R
    return 1 - miss


row_pairs = st.integers(3, 4).flatmap(lambda V: st.tuples(distributions(V), distributions(V)))


@settings(max_examples=25)
@given(pq=row_pairs, K=st.sampled_from([1, 2, 3]))
def test_multidraft_acceptance_closed_forms_and_optimum(pq, K):
    p, q = pq
    acc = {n: multidraft_acceptance(n, p, q, K) for n in ("specinfer", "spectr", "khisti", "gbv")}
    assert acc["specinfer"] == pytest.approx(_rrs_closed_form(p, q, K), abs=1e-12)
    rho = kseq_rho(p, q, K)
    beta = np.minimum(q, p / rho).sum()
    assert acc["spectr"] == pytest.approx(1 - (1 - beta) ** K, abs=1e-10)
    assert acc["khisti"] == pytest.approx(np.minimum(p, khisti_selection_law(p, q, K)).sum(), abs=1e-12)
    star = _alpha_star(p, q, K, True)
    for n, a in acc.items():
        assert a <= star + 1e-9, n
    assert acc["spectr"] >= (1 - 1 / np.e) * star - 1e-9  # SpecTr's guarantee (P)
    if K == 1:
        for a in acc.values():
            assert a == pytest.approx(np.minimum(p, q).sum(), abs=1e-10)
    wor = {n: multidraft_acceptance(n, p, q, K, replacement=False) for n in ("sequoia", "traversal")}
    star_wor = _alpha_star(p, q, K, False)
    assert wor["sequoia"] == pytest.approx(wor["traversal"], abs=1e-12)
    assert wor["sequoia"] <= star_wor + 1e-9
    assert star_wor >= star - 1e-12  # without replacement never loses at the optimum (docs/theory.md §6.6)


def test_sequoia_cover_property():
    # supp p within supp q and |supp q| <= k: acceptance 1 (Sequoia Thm 3.7)
    p, q = [0.7, 0.3, 0.0, 0.0], [0.1, 0.6, 0.3, 0.0]
    assert multidraft_acceptance("sequoia", p, q, 3, replacement=False) == pytest.approx(1.0, abs=1e-12)
    # but not k = V alone (docs/theory.md §6.2)
    assert multidraft_acceptance("sequoia", [0.5, 0.5, 0.0], [1, 0, 0], 3, replacement=False) == pytest.approx(0.5)


def test_block_efficiency_theorems():
    """Orderings that are theorems: on a chain, traversal = block >= token (block is optimal);
    with a single draft per node every sampled-drafter rule equals token-level SpS."""
    target, draft = random_model(3, 21), random_model(3, 22, 0.5)
    e = {v.name: expected_accepted(v, target, draft, 3) for v in (token, block, traversal, gbv, specinfer)}
    assert e["traversal"] == pytest.approx(e["block"], abs=1e-12) == pytest.approx(e["gbv"], abs=1e-12)
    assert e["block"] >= e["token"] - 1e-12
    assert e["specinfer"] == pytest.approx(e["token"], abs=1e-12)


def test_tree_paths_recovers_the_paths():
    target, draft = random_model(3, 41), random_model(3, 42)
    for _, t in iid_paths(3).enumerate(target, draft, 2):
        paths = tree_paths(t)
        assert len(paths) == 3
        for i, nodes in enumerate(paths):
            assert t.tokens[nodes[0]] == t.draws[0][i]


def test_multidraft_acceptance_size_guard_counts_ordered_tuples_of_supp_q(monkeypatch):
    """The guard counts s^K (i.i.d.) or s!/(s-K)! (without replacement) over s = |supp q|, refuses
    above MAX_DRAW_TUPLES before any enumeration, and lets verifiers with a path model through."""
    import time

    from lp.coupling import multidraft_bound
    from specsim import multidraft

    p, q = [0.2, 0.3, 0.5], [0.5, 0.3, 0.2]
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="1,594,323 ordered draw tuples"):
        multidraft_acceptance("specinfer", p, q, 13)
    assert time.perf_counter() - t0 < 1.0           # refused up front, not after enumerating
    full = multidraft_acceptance("specinfer", p, q, 2)
    sparse = multidraft_acceptance("specinfer", p, [0.5, 0.5, 0.0], 3)   # s = 2: 8 tuples
    monkeypatch.setattr(multidraft, "MAX_DRAW_TUPLES", 8)
    with pytest.raises(ValueError, match="9 ordered draw tuples"):
        multidraft_acceptance("specinfer", p, q, 2)                        # 3^2 = 9 > 8
    assert multidraft_acceptance("specinfer", p, [0.5, 0.5, 0.0], 3) == sparse   # 2^3 = 8: allowed
    assert multidraft_acceptance("sequoia", p, q, 2, replacement=False) > full - 1e-12   # 3 * 2 = 6
    monkeypatch.setattr(multidraft, "MAX_DRAW_TUPLES", 5)
    with pytest.raises(ValueError, match=r"6 ordered draw tuples \(\|supp q\| = 3, s!/\(s-K\)!\)"):
        multidraft_acceptance("sequoia", p, q, 2, replacement=False)
    # GBV goes through its path model (V^L selected paths), so K = 13 runs and obeys the optimum
    alpha = multidraft_acceptance("gbv", p, q, 13)
    assert 0.0 < alpha <= multidraft_bound(p, q, 13).value + 1e-9


def test_fault_switches_are_documented_and_each_is_used_by_a_mutant():
    """Faulty variants are built through one ``faults=`` switch per family, from its documented
    table: an unknown fault is refused by name, and every documented fault has a mutant."""
    import inspect

    from specsim.testing.selftest.mutants import TREE_MUTANTS
    from specsim.verifiers import multipath, nodewise, traversals, two_step

    tables = {**nodewise.NODEWISE_FAULTS, **traversals.TRAVERSAL_FAULTS, **multipath.GBV_FAULTS,
              **two_step.TWO_STEP_FAULTS}
    source = inspect.getsource(inspect.getmodule(next(iter(TREE_MUTANTS.values())).__class__))
    for fault in tables:
        assert f'faults="{fault}"' in source, fault
    with pytest.raises(ValueError, match=r"unknown fault\(s\) \['no_such'\]; the documented ones are"):
        traversals._traversal_law(None, faults="no_such")
    with pytest.raises(ValueError, match="unknown fault"):
        nodewise._rrs(np.ones(2) / 2, np.ones(2) / 2, (0,), faults=("stale_residual", "typo"))
