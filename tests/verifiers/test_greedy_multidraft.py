"""Hu et al.'s greedy draft law and its verifier: lossless, and optimal for that law at one position."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import specsim as s
from specsim.drafts import greedy_drafts, parse_drafting
from specsim.testing.strategies import distributions, model_pairs
from specsim.verifiers.base import tree_verifier
from specsim.verifiers import greedy_multidraft, verifiers_for
from specsim.verifiers.nodewise import _nodewise, _rrs


@settings(max_examples=15)
@given(pair=model_pairs(), K=st.integers(1, 3), L=st.integers(1, 3))
def test_lossless_on_context_dependent_pairs(pair, K, L):
    t, d = pair
    assert s.check_lossless(greedy_multidraft, t, d, L, greedy_drafts(K)).lossless


def _closed_form(p, q, K):
    G = np.lexsort((np.arange(q.size), -q))[: K - 1]
    others = np.setdiff1d(np.arange(q.size), G)
    rest = q[others].sum()  # summed directly: 0 exactly when q lives on the hub
    if rest == 0:  # the draw outside the hub has nothing to draw from and is never accepted
        return p[G].sum()
    return p[G].sum() + np.minimum(p[others], q[others] / rest).sum()


def _dual_bound(p, q, K):
    """min_H p(H) + 1 - Q(all drafts in H), Q = 1[G in H] q(H minus G) / (1 - q(G)) (docs/theory.md §6.6)."""
    V = p.size
    G = set(np.lexsort((np.arange(V), -q))[: K - 1].tolist())
    rest = q[sorted(set(range(V)) - G)].sum()
    best = np.inf
    for mask in range(1 << V):
        H = {v for v in range(V) if mask >> v & 1}
        # with rest = 0 the last draw is void: every draft lies in H once the hub does
        Qsub = (q[list(H - G)].sum() / rest if rest > 0 else 1.0) if G <= H else 0.0
        best = min(best, p[list(H)].sum() + 1.0 - Qsub)
    return best


@settings(max_examples=8)
@given(pq=st.integers(4, 6).flatmap(lambda V: st.tuples(distributions(V), distributions(V))),
       K=st.integers(2, 4))
# fewer than K - 1 tokens with q > 0: the hub is filled with q = 0 tokens, lowest id first
# (found by fresh seeds: the old hub dropped them and gave 0.25 here, issue 26)
@example(pq=(np.full(4, 0.25), np.array([0.0, 0.0, 0.0, 1.0])), K=3)
@example(pq=(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.0, 0.0, 0.0, 1.0])), K=4)
def test_acceptance_equals_closed_form_lp_and_dual(pq, K):
    p, q = pq
    _check_closed_form(p, q, K)


def test_closed_form_when_q_lives_on_the_hub():
    # K - 1 = 2 hub tokens carry all of q: the draw outside them is void (Hypothesis found the 0/0)
    _check_closed_form(np.full(4, 0.25), np.array([0.5, 0.5, 0.0, 0.0]), 3)
    # K - 1 >= V: the hub is the whole vocabulary and everything is accepted
    _check_closed_form(np.array([0.3, 0.7]), np.array([0.0, 1.0]), 4)


def _rational_acceptance(p, q, K):
    """p(G) + sum_{x not in G} min(p_x, q_x / q(V minus G)) in exact rationals of the float rows,
    G the top K - 1 of q by (q descending, id ascending), q = 0 tokens included (docs/theory.md §6.6)."""
    pe, qe = [Fraction(float(v)) for v in p], [Fraction(float(v)) for v in q]
    G = sorted(range(len(q)), key=lambda t: (-qe[t], t))[: K - 1]
    rest = sum(qe[t] for t in range(len(q)) if t not in G)
    tail = sum(min(pe[x], qe[x] / rest) for x in range(len(q)) if x not in G) if rest else 0
    return sum(pe[g] for g in G) + tail


@pytest.mark.parametrize("eps", [0.0, 1e-300, 1e-12, 1e-3])
def test_acceptance_is_the_limit_along_the_tie_break(eps):
    """q = (eps, 0, 0, 1 - eps), K = 3: the hub is {3, 0} for every eps >= 0, so the acceptance
    p(3) + p(0) does not jump at eps = 0 (it did when q = 0 tokens were dropped from the hub);
    moving eps to token 2 instead changes the hub to {3, 2} -- the documented tie jump."""
    p = np.array([0.1, 0.2, 0.3, 0.4])
    for q, hub in ((np.array([eps, 0.0, 0.0, 1.0 - eps]), (3, 0)), (np.array([0.0, 0.0, eps, 1.0 - eps]), (3, 2 if eps else 0))):
        got = s.expected_accepted(greedy_multidraft, s.iid(p), s.iid(q), 1, greedy_drafts(3))
        assert abs(Fraction(got) - _rational_acceptance(p, q, 3)) <= Fraction(1, 10**15)
        assert abs(got - p[list(hub)].sum()) <= 1e-15
        assert s.check_lossless(greedy_multidraft, s.iid(p), s.iid(q), 2, greedy_drafts(3)).lossless


def _check_closed_form(p, q, K):
    exact = s.expected_accepted(greedy_multidraft, s.iid(p), s.iid(q), 1, greedy_drafts(K))
    assert exact == pytest.approx(_closed_form(p, q, K), abs=1e-12)
    assert exact == pytest.approx(_dual_bound(p, q, K), abs=1e-12)
    verification_lp = pytest.importorskip("lp.verification").verification_lp
    assert verification_lp(s.iid(p), s.iid(q), 1, greedy_drafts(K)).value == pytest.approx(exact, abs=1e-8)


def test_using_q_instead_of_the_restricted_draft_law_is_flagged():
    """Negative control: testing the sampled draft against q (not q restricted off the hub)."""
    def rule(tree, u):
        hub, x = tree.draws[u][:-1], tree.draws[u][-1]
        descend, stop, row = _rrs(tree.p[u], tree.q[u], (x,))
        return descend, stop, row
    faulty = tree_verifier("greedy_against_q", needs={"greedy"}, lossless=False)(lambda tree: _nodewise(tree, rule))
    t, d = s.random_model(4, 9, 0.7), s.random_model(4, 509, 0.7)
    assert not s.check_lossless(faulty, t, d, 2, greedy_drafts(2)).lossless
    assert s.check_lossless(greedy_multidraft, t, d, 2, greedy_drafts(2)).lossless


def test_process_parsing_and_applicability():
    proc = parse_drafting("greedy:3")
    assert proc.name == "greedy_drafts(3)"
    names = [v.name for v in verifiers_for(proc)]
    assert "greedy_multidraft" in names and "specinfer" not in names
    t, d = s.random_model(4, 2), s.random_model(4, 502)
    items = list(proc.enumerate(t, d, 2))
    assert sum(pr for pr, _ in items) == pytest.approx(1.0)
    root_draws = {tree.draws[0][:2] for _, tree in items}
    assert len(root_draws) == 1  # the two greedy tokens are fixed, only the last draw varies
