"""The compiled final pass of check_lossless (specsim/_exact_kernels.py) against the numpy one it
shortcuts (completed_law, |C - P|, argmax): the same bits; the engine's one-buffer output law
(specsim._law_buffer) and when it is trusted; and the caches a repeat certificate reads (stacked
tables, level offsets, joints), keyed by model and length so that none returns another model's
law."""
import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import specsim as s
from specsim import _jit, exact
from specsim._law_buffer import EmittedLaw, flat_law, law_bounds
from specsim.drafts import iid_paths
from specsim.models import _level_starts
from specsim.testing.strategies import adversarial_pairs, model_pairs
from specsim.verifiers import CHAIN_VERIFIERS, specinfer
from tests.specsim.test_exact_level_stacking import _extreme_model

jit = pytest.mark.skipif(not _jit.enabled(), reason="numba not installed (the fast extra)")


def _numpy_final_pass(law, target):
    """The reference: the numpy completed law, its error, argmax and the values there."""
    C, P = exact.completed_law(law, target)
    err = np.abs(C - P)
    worst = int(np.argmax(err))
    return err, worst, float(C[worst]), float(P[worst])


def _same_bits(a, b):
    return np.array_equal(np.asarray(a).view(np.int64), np.asarray(b).view(np.int64))


def _assert_same_final_pass(verifier, t, d, L, drafting=None):
    law = s.output_law(verifier, t, d, L, drafting)
    ref = _numpy_final_pass(law, t)  # before the compiled pass overwrites the law's levels
    assert flat_law(law.emitted) is not None
    err, worst, c, p = exact._completed_error(law, t)
    assert _same_bits(err, ref[0]) and worst == ref[1], verifier.name
    assert _same_bits(c, ref[2]) and _same_bits(p, ref[3]), verifier.name


def _fields(cert):
    return {k: (v.tobytes() if isinstance(v, np.ndarray) else np.float64(v).tobytes() if isinstance(v, float) else v)
            for k, v in vars(cert).items()}


@jit
@pytest.mark.parametrize("V,L,concentration", [(2, 1, 1.0), (2, 7, 0.3), (3, 4, 0.1), (4, 5, 1.0), (5, 3, 0.05),
                                               (16, 2, 1.0), (17, 2, 0.2)])
def test_compiled_final_pass_gives_the_numpy_bits(V, L, concentration):
    t = s.random_model(V, 31 + V, concentration, stream="counter")
    d = s.random_model(V, 32 + V, concentration)
    for verifier in CHAIN_VERIFIERS.values():  # lossless and lossy rules: zero and large errors
        _assert_same_final_pass(verifier, t, d, L)


@jit
@pytest.mark.parametrize("V", [3, 4])
def test_compiled_final_pass_at_extreme_rows(V):
    """Zero, subnormal, tied, one-hot and near-one-hot rows (argmax over ties: the first)."""
    for shift in range(4):
        for verifier in (s.block, s.token, s.hsd_released, s.greedy):
            _assert_same_final_pass(verifier, _extreme_model(0, V), _extreme_model(shift, V), 3)


@jit
def test_certificates_without_a_compiled_law_are_bit_identical():
    """Only the final pass differs for rules without a compiled law, so their certificates agree
    bit for bit with the numpy path's, trees included; a lossy rule stays lossy (negative control)."""
    t, d = s.random_model(3, 5, 0.5), s.random_model(3, 6, 0.5)
    cases = [(v, None, 3) for v in CHAIN_VERIFIERS.values() if v is not s.block] + [(specinfer, iid_paths(2), 2)]
    for verifier, drafting, L in cases:
        fast = s.check_lossless(verifier, t, d, L, drafting)
        with _jit.disabled():
            ref = s.check_lossless(verifier, t, d, L, drafting)
        assert _fields(fast) == _fields(ref), verifier.name
    assert not s.check_lossless(s.hsd_released, t, d, 3).lossless


@jit
@settings(max_examples=30, deadline=None)
@given(pair=st.one_of(model_pairs(), adversarial_pairs()), L=st.integers(1, 3))
def test_compiled_final_pass_on_drawn_pairs(pair, L):
    for verifier in (s.block, s.token, s.hsd_released):
        _assert_same_final_pass(verifier, pair.target, pair.draft_model, L)


@jit
def test_final_pass_at_a_context_and_above_the_size_limit(monkeypatch):
    t, d = s.random_model(3, 1, 0.5), s.random_model(3, 2, 0.5)
    _assert_same_final_pass(s.hsd_released, t.shifted((2, 0)), d.shifted((2, 0)), 2)
    fast = s.check_lossless(s.hsd_released, t, d, 2, context=(2, 0))
    monkeypatch.setattr(exact, "_JIT_ROWS", 1)  # the numpy pass
    assert _fields(s.check_lossless(s.hsd_released, t, d, 2, context=(2, 0))) == _fields(fast)


def test_the_law_is_one_buffer_trusted_only_while_intact():
    law = s.output_law(s.token, s.random_model(3, 0), s.random_model(3, 1), 2)
    flat = flat_law(law.emitted)
    assert flat is not None and flat.size == 3 + 9 + 27
    assert all(np.shares_memory(law.emitted[m], flat) for m in law.emitted)
    assert np.array_equal(np.concatenate([law.emitted[m] for m in (1, 2, 3)]), flat)
    assert flat_law(dict(law.emitted)) is None                          # a plain dict
    for copied in (copy.copy(law.emitted), copy.deepcopy(law.emitted), pickle.loads(pickle.dumps(law.emitted))):
        assert type(copied) is dict and flat_law(copied) is None          # copies are plain dicts
        assert all(np.array_equal(copied[m], law.emitted[m]) for m in law.emitted)
    big = s.output_law(s.token, s.random_model(4, 0), s.random_model(4, 1), 4).emitted
    assert len(pickle.dumps(big)) < flat_law(big).nbytes + 2048          # the buffer is not pickled twice
    unpickled = pickle.loads(pickle.dumps(law))
    assert all(np.array_equal(unpickled.emitted[m], law.emitted[m]) for m in law.emitted)
    law.emitted[2] = law.emitted[2].copy()                                # an entry rebound
    assert flat_law(law.emitted) is None
    with pytest.raises(ValueError, match="non-finite"):                 # the one-buffer finiteness check
        e = EmittedLaw(3, 2)
        e[3][5] = np.nan
        exact._survival(np.array([0.5, 0.25, 0.25]), e, s.token, s.chain(), 1e-9)


@pytest.mark.parametrize("fast", [True, False])
def test_caches_never_return_another_models_law(fast):
    """Two models of the same V and L, and several L on one model, interleaved: each certificate
    is the one a fresh copy of its models gives (the caches are per model and per L)."""
    if fast and not _jit.enabled():
        pytest.skip("numba not installed (the fast extra)")

    def pair(seed):
        return s.random_model(3, seed, 0.4, stream="counter"), s.random_model(3, seed + 100, 0.4, stream="counter")

    def cert(models, L, verifier):
        if fast:
            return _fields(s.check_lossless(verifier, *models, L))
        with _jit.disabled():
            return _fields(s.check_lossless(verifier, *models, L))

    a, b = pair(1), pair(2)
    order = [(a, 3), (b, 3), (a, 2), (a, 4), (b, 2), (a, 3), (b, 4), (b, 3)]
    for verifier in (s.block, s.hsd_released):
        seen = {}
        for models, L in order:
            got = cert(models, L, verifier)
            fresh = cert(pair(1 if models is a else 2), L, verifier)
            assert got == fresh, (verifier.name, L)
            seen.setdefault(L, []).append(got)
        for L, certs in seen.items():  # the two models' certificates differ at every L
            assert any(c != certs[0] for c in certs), L
    for m in (*a, *b):
        for L in (2, 3, 4):
            stacked = m.stacked_table(L)
            assert np.array_equal(stacked, np.concatenate(m.table(L))) and not stacked.flags.writeable
    assert a[0].stacked_table(3) is a[0].stacked_table(3) and a[0].stacked_table(3) is not b[0].stacked_table(3)


def test_level_offsets_and_law_bounds():
    for V in (2, 3, 16):
        for L in (1, 2, 5):
            start = _level_starts(V, L)
            assert start.tolist() == [sum(V ** k for k in range(i)) for i in range(L + 2)]
            assert not start.flags.writeable and _level_starts(V, L) is start
            bounds = law_bounds(V, L)
            assert [b - a for a, b in bounds] == [V ** m for m in range(1, L + 2)]
            assert [a for a, _ in bounds] == [start[m] - 1 for m in range(1, L + 2)]
