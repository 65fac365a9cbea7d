"""Samplers against exact laws (the statistical tier) and the one inverse-CDF draw they share.

Every sampler test draws N (accepted, token) pairs on one fixed draft and compares the counts with
the exact outcome law by the package's chi-square (:func:`specsim.testing.stats.goodness_of_fit`)
at false-alarm rate LEVEL = 1e-6 per test.  Each test also states its power: the test rejects
with probability >= 0.99 every sampler whose law is at TV >= ``detectable_tv`` from the exact
law (asserted < 0.05), and its negative control, the same samples against the exact law with
0.1 of its mass moved between two cells (TV 0.1), must be rejected.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

from specsim._sampling import draw_rows, draw_token
from specsim.drafts import iid_paths, swor_tree, topk_tree
from specsim.models import random_model
from specsim.testing.stats import goodness_of_fit
from specsim.testing.strategies import distributions
from specsim.verifiers import (block, deterministic_children, hsd_capped, onehot, sequoia, specinfer, spectr,
                               token)
from specsim.verifiers.lossy import cactus, mentored, topk_accept, typical

LEVEL = 1e-6
V, L = 4, 2
TARGET, DRAFT_MODEL = random_model(V, 3), random_model(V, 4, concentration=0.4)


class _GivenUniforms:
    """Stands in for a ``numpy.random.Generator``: ``random(n)`` returns the given uniforms."""

    def __init__(self, u):
        self.u = np.asarray(u, dtype=np.float64)

    def random(self, size=None):
        return self.u[:size] if size is not None else float(self.u[0])


def _chain_rows(draft):
    return (np.stack([TARGET(draft[:i]) for i in range(len(draft) + 1)]),
            np.stack([DRAFT_MODEL(draft[:i]) for i in range(len(draft))]))


def _busiest_draft(verifier, outcome_table):
    """The length-L draft whose outcome law has the most cells above 1e-3 (a non-degenerate test)."""
    drafts = [(a, b) for a in range(V) for b in range(V)]
    return max(drafts, key=lambda d: np.count_nonzero(outcome_table(verifier(d, *_chain_rows(d)), L + 1, V) > 1e-3))


def _sampled_counts(sample, shape, n, seed):
    rng = np.random.default_rng(seed)
    counts = np.zeros(shape)
    for _ in range(n):
        counts[sample(rng)] += 1
    return counts


def _shifted(law, mass=0.1):
    """``law`` with ``mass`` moved from its largest cell to its second largest: TV = ``mass``."""
    flat = law.ravel().copy()
    first, second = np.argsort(flat)[::-1][:2]
    flat[first] -= mass
    flat[second] += mass
    return flat


def _assert_matches(counts, law):
    """The counts pass against ``law`` at LEVEL, the test has power 0.99 at TV 0.05, and the same
    counts are rejected against the law shifted by TV 0.1 (the negative control)."""
    test = goodness_of_fit(counts.ravel(), law.ravel(), level=LEVEL, power=0.99)
    assert not test.rejected, test
    assert test.detectable_tv < 0.05, test
    assert goodness_of_fit(counts.ravel(), _shifted(law), level=LEVEL).rejected


# --------------------------------------------------------------------------- the shared draw
@given(rows=st.lists(distributions(4), min_size=1, max_size=6),
       u=st.sampled_from([0.0, 0.25, 0.5, 1.0 - 2.0 ** -53]))
def test_draw_is_the_inverse_cdf_and_never_a_zero_probability_token(rows, u):
    """y = min{i : C(i) > u C(V-1)}, capped at the last positive token (reached when u C rounds up)."""
    rows = np.array(rows)
    ys = draw_rows(rows, _GivenUniforms(np.full(len(rows), u)))
    for row, y in zip(rows, ys):
        assert row[y] > 0
        c = np.cumsum(row)
        x = u * c[-1]
        above = np.flatnonzero(c > x)
        expected = above[0] if above.size else np.flatnonzero(row > 0)[-1]
        assert y == min(expected, np.flatnonzero(row > 0)[-1])
        assert draw_token(row, _GivenUniforms([u])) == y


def test_draw_token_is_draw_rows_on_one_row_at_extreme_rows_and_uniforms():
    """draw_token's one-row path against draw_rows (the reference) with the same uniform: random,
    tied, one-hot, near-one-hot, subnormal, huge and infinite weights, and uniforms at 0, in the
    bulk and just below 1 (where u C(V-1) rounds up to C(V-1))."""
    rng = np.random.default_rng(7)
    tiny = np.nextafter(0.0, 1.0)
    rows = [rng.dirichlet(np.ones(5)), np.full(4, 0.25), np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0]),
            np.array([1 - 1e-15, 1e-15, 0.0]), np.array([tiny, 0.0, tiny]), np.array([0.0, 1e300, 1e300]),
            np.array([0.0, np.inf, 1.0]), np.array([0.5, -1e-17, 0.5]), rng.random(1000) ** 8]
    for row in rows:
        for u in (0.0, 2.0 ** -40, 0.3, 0.5, 1.0 - 2.0 ** -53, *rng.random(5)):
            with np.errstate(invalid="ignore"):  # u = 0 times an infinite total is nan in both paths
                got, ref = draw_token(row, _GivenUniforms([u])), draw_rows(row[None], _GivenUniforms([u]))[0]
            assert got == ref, (row, u)
    for bad in ([0.0, 0.0], [np.nan, 1.0], [], [[0.5, 0.5]]):
        with pytest.raises(ValueError, match="no positive weight|2-D array"):
            draw_token(bad, _GivenUniforms([0.5]))


def test_draw_frequencies_match_the_row():
    row = np.array([0.1, 0.0, 0.6, 0.3])
    ys = draw_rows(np.tile(row, (20_000, 1)), np.random.default_rng(5))
    counts = np.bincount(ys, minlength=4)
    _assert_matches(counts.astype(float), row)


# --------------------------------------------------------------------------- chain samplers
@pytest.mark.parametrize("verifier", [token, onehot, block, hsd_capped], ids=lambda v: v.name)
def test_chain_sampler_matches_exact_law(verifier, outcome_table):
    """``hsd_capped`` has no sampler of its own: ``sample`` draws from its exact law."""
    draft = _busiest_draft(verifier, outcome_table)
    p, q = _chain_rows(draft)
    counts = _sampled_counts(lambda rng: verifier.sample(draft, p, q, rng=rng), (L + 1, V), 12_000, seed=123)
    _assert_matches(counts, outcome_table(verifier(draft, p, q), L + 1, V))


@pytest.mark.parametrize("verifier", [cactus(0.1), typical(0.2, 0.5), mentored(0.5), topk_accept(2)],
                         ids=lambda v: v.name)
def test_lossy_sampler_matches_exact_law(verifier, outcome_table):
    draft = _busiest_draft(verifier, outcome_table)
    p, q = _chain_rows(draft)
    counts = _sampled_counts(lambda rng: verifier.sample(draft, p, q, rng=rng), (L + 1, V), 12_000, seed=0)
    _assert_matches(counts, outcome_table(verifier(draft, p, q), L + 1, V))


# --------------------------------------------------------------------------- tree samplers
@pytest.mark.parametrize("verifier, process", [(specinfer, iid_paths(3)), (sequoia, swor_tree(2)),
                                               (deterministic_children, topk_tree((2, 2))),
                                               (spectr, iid_paths(2))],
                         ids=["specinfer", "sequoia", "deterministic_children", "spectr"])
def test_tree_sampler_matches_exact_law(verifier, process, outcome_table):
    """On one sampled tree of depth 2 (``spectr`` samples from its exact law: no sampler of its own)."""
    tree = process.sample(TARGET, DRAFT_MODEL, 2, np.random.default_rng(1))
    law = outcome_table(verifier.law(tree), tree.num_nodes, V)
    counts = _sampled_counts(lambda rng: verifier.sample(tree, rng=rng), (tree.num_nodes, V), 12_000, seed=2)
    _assert_matches(counts, law)
