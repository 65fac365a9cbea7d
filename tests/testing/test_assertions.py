"""assert_lossless: lossless rules pass, lossy rules and misbehaving verifiers fail with a clear,
shrunk counterexample (negative and positive controls)."""
import re

import numpy as np
import pytest

from specsim.testing import LossyVerifierError, assert_lossless, assert_sampler_lossless
from specsim.verifiers import block, hsd_capped, hsd_released, onehot, token
from specsim.verifiers.base import Outcome, chain_verifier


@pytest.mark.parametrize("v", [token, block, onehot, hsd_capped], ids=lambda v: v.name)
def test_lossless_verifiers_pass(v):
    assert_lossless(v, max_examples=30)


def test_plain_function_verifier_passes():
    def my_token(draft, p, q):  # a user's verifier: plain callable in the chain protocol
        return token.law(draft, p, q)

    assert_lossless(my_token, max_examples=15)


def test_released_hsd_is_caught_with_a_small_readable_counterexample():
    with pytest.raises(LossyVerifierError) as info:
        assert_lossless(hsd_released, max_examples=60, derandomize=True)
    err = info.value
    msg = str(err)
    for part in ("hsd_released is not lossless", "V = 3", "completed sequence z", "C(z) =", "target P(z)",
                 "p0 =", "q0 =", "p2 ="):
        assert part in msg
    cert = err.certificate
    assert not cert.lossless and cert.V == 3 and cert.L == 2  # the joint law of tokens 1-2 is wrong (docs/theory.md §7)
    assert err.case.L == 2 and cert.max_abs_error > 1e-6


def _law_with(fault):
    @chain_verifier("faulty", lossless=False)
    def law(draft, p, q):
        return fault(draft, p, q)
    return law


def test_verifier_that_raises_is_reported_with_its_input():
    def boom(draft, p, q):
        if len(draft) >= 2:
            raise RuntimeError("index out of range in my kernel")
        return token.law(draft, p, q)

    with pytest.raises(LossyVerifierError, match=r"raised RuntimeError: index out of range") as info:
        assert_lossless(_law_with(boom), max_examples=30)
    assert "draft (" in str(info.value) and "p0 =" in str(info.value)
    assert info.value.certificate is None and info.value.case.L == 2  # shrunk to the smallest L that raises


def test_probabilities_not_summing_to_one_are_reported():
    def leaky(draft, p, q):
        return [Outcome(o.prob * 0.9, o.accepted, o.next_dist) for o in token.law(draft, p, q)]

    with pytest.raises(LossyVerifierError, match="invalid outcome list.*sum to"):
        assert_lossless(_law_with(leaky), max_examples=10)


def test_outcome_beyond_the_draft_is_reported():
    def overreach(draft, p, q):
        return [Outcome(1.0, len(draft) + 1, p[-1])]

    with pytest.raises(LossyVerifierError, match=r"outcome accepts \d+, outside 0\.\.\d+") as err:
        assert_lossless(_law_with(overreach), max_examples=10)
    # whatever L the shrinker settles on, the report names the accepted count L + 1 and the range 0..L
    accepted, top = map(int, re.search(r"outcome accepts (\d+), outside 0\.\.(\d+)", str(err.value)).groups())
    assert accepted == top + 1


def test_bad_distribution_row_is_reported():
    def nan_row(draft, p, q):
        return [Outcome(1.0, 0, np.full(p.shape[1], np.nan))]

    with pytest.raises(LossyVerifierError, match="not a probability vector"):
        assert_lossless(_law_with(nan_row), max_examples=5)


def test_explicit_arguments():
    from hypothesis import strategies as st
    assert_lossless(block, V=5, L=st.just(2), depth=1, max_examples=5)


def test_tree_verifiers_use_applicable_processes():
    from specsim import verifiers as tree
    assert_lossless(tree.specinfer, max_examples=15)  # only i.i.d. processes: no false alarm
    assert_lossless(tree.sequoia, max_examples=15)    # only without-replacement processes
    with pytest.raises(LossyVerifierError, match="gbv_capped is not lossless"):
        assert_lossless(tree.gbv_capped, max_examples=30, derandomize=True, shrink=False)


def test_two_distinct_failures_give_one_shrunk_lossy_verifier_error():
    """A verifier wrong in two ways (raises at V = 4, lossy at V = 3) is reported as one
    LossyVerifierError with its shrunk case, never as Hypothesis's ExceptionGroup of both."""
    def two_faults(draft, p, q):
        if p.shape[1] == 4:
            raise RuntimeError("kernel fault at V = 4")
        return hsd_released.law(draft, p, q)  # lossy from L = 2 on (docs/theory.md §7)

    with pytest.raises(LossyVerifierError) as info:
        assert_lossless(_law_with(two_faults), max_examples=60, derandomize=True)
    err = info.value
    if err.case.pair.V == 4:  # the exception, shrunk to the shortest draft
        assert err.certificate is None and err.case.L == 1 and "kernel fault at V = 4" in str(err)
    else:  # the lossy law, shrunk to the shortest draft where it is lossy
        assert err.case.pair.V == 3 and not err.certificate.lossless and err.case.L == 2


def test_assert_sampler_lossless_treats_inconclusive_as_failure_asking_for_more_data():
    # issue 26: too little data is never a pass
    from specsim.testing import InconclusiveCheckError
    with pytest.raises(InconclusiveCheckError, match="more data needed"):
        assert_sampler_lossless(lambda d, p, q, rng: (0, 0), L=1, n=1, max_examples=2, derandomize=True)
