"""Block verification's process law with its levels stacked, and the cached zero-string masks of
the lossless check, against the per-level code they replaced (kept here as the references): the
same bits on random, tied, one-hot, subnormal and near-one-hot rows, and the same certificates.
The numpy law is the one compared here (the compiled one, specsim._jit, is checked against it in
tests/specsim/test_chain_kernels.py)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import specsim as s
from specsim import _jit
from specsim.drafts import chain
from specsim.testing.strategies import adversarial_pairs, model_pairs
from specsim.verifiers import chain as chain_module
from specsim.verifiers.chain import _block_level, _next_weight, _ratio, _row_sums


@pytest.fixture(autouse=True)
def _numpy_law():
    with _jit.disabled():
        yield


def _reference_process_law(target, draft_model, L, emitted, depth_mass):
    """The per-level process law (before the levels were stacked)."""
    V = target.V
    ptab, qtab = target.table(L), draft_model.table(L - 1)
    w, Q = np.ones(1), np.ones(1)
    levels = []
    for i in range(L):
        excess, h, Z = _block_level(w, ptab[i], qtab[i], _row_sums)
        levels.append((np.ones(1) if i == 0 else h, excess, Z))
        w = _next_weight(np.repeat(w, V), _ratio(ptab[i], qtab[i]).ravel())
        Q = (Q[:, None] * qtab[i]).ravel()
    G, h_next = Q, w
    stop = w * G
    depth_mass[L] += stop.sum()
    emitted[L + 1] += (stop[:, None] * ptab[L]).ravel()
    for i in range(L - 1, -1, -1):
        G = _row_sums((G * (1.0 - h_next)).reshape(-1, V))
        h_next, excess, Z = levels[i]
        stop = h_next * G
        depth_mass[i] += stop.sum()
        out = emitted[i + 1].reshape(-1, V)
        out += (np.where(Z > 0, stop, 0.0) / np.where(Z > 0, Z, 1.0))[:, None] * excess
        empty = np.flatnonzero((Z <= 0) & (stop != 0))
        if empty.size:
            out[empty] += stop[empty, None] * ptab[i][empty]
    return int(np.count_nonzero(Q > 0))


def _reference_impossible_mass(law, target):
    """The per-call zero-string pass (before the masks were cached on the model)."""
    ptab = target.table(law.L)
    impossible = ptab[0][0] == 0
    total, heaviest, where = 0.0, 0.0, ()
    for k in range(1, law.L + 2):
        o = law.emitted[k]
        hit = impossible & (o > 0)
        if hit.any():
            total += float(o[hit].sum())
            code = int(np.flatnonzero(hit)[np.argmax(o[hit])])
            if o[code] > heaviest:
                heaviest, where = float(o[code]), tuple(int(d) for d in np.unravel_index(code, (law.V,) * k))
        if k <= law.L:
            impossible = (impossible[:, None] | (ptab[k] == 0)).ravel()
    return total, where


def _assert_same_bits(t, d, L, stack_rows=None, monkeypatch=None):
    if stack_rows is not None:
        monkeypatch.setattr(chain_module, "_STACK_ROWS", stack_rows)
    V = t.V
    new_e, new_m = {m: np.zeros(V ** m) for m in range(1, L + 2)}, np.zeros(L + 1)
    ref_e, ref_m = {m: np.zeros(V ** m) for m in range(1, L + 2)}, np.zeros(L + 1)
    n_new = chain_module._block_process_law(chain(), t, d, L, new_e, new_m)
    n_ref = _reference_process_law(t, d, L, ref_e, ref_m)
    assert n_new == n_ref
    assert np.array_equal(new_m, ref_m)
    for m in ref_e:
        assert np.array_equal(new_e[m], ref_e[m]), m
    law = s.output_law(s.block, t, d, L)
    from specsim.exact import _impossible_mass
    assert _impossible_mass(law, t) == _reference_impossible_mass(law, t)


def _extreme_model(shift, V=3):
    """Rows with zero, subnormal, tied, one-hot and near-one-hot entries, varying along the prefix."""
    tiny = 5e-324
    rows = [np.eye(V)[0], np.array([1 - 2 * tiny, tiny, tiny] + [0.0] * (V - 3)), np.full(V, 1 / V),
            np.array([0.5, 0.5] + [0.0] * (V - 2)), np.array([0.0, 1 - 1e-15, 1e-15] + [0.0] * (V - 3)),
            np.eye(V)[V - 1]]
    return s.Model(lambda prefix: rows[(sum(prefix) * 7 + len(prefix) + shift) % len(rows)], V, f"rows{shift}")


@pytest.mark.parametrize("stack_rows", [None, 0, 1, 5, 10 ** 9])
@pytest.mark.parametrize("V,L,concentration", [(2, 1, 1.0), (2, 9, 0.3), (3, 5, 0.1), (4, 6, 1.0), (4, 7, 5.0),
                                               (5, 4, 0.05), (16, 3, 1.0), (17, 2, 0.2)])
def test_stacked_levels_give_the_per_level_bits(V, L, concentration, stack_rows, monkeypatch):
    """Random pairs, peaked (near one-hot) to flat, V <= 8 (column sums) and V > 8 (einsum), with
    every level alone (0), all stacked (10^9) and groups in between."""
    t = s.random_model(V, 11 + V, concentration, stream="counter")
    d = s.random_model(V, 12 + V, concentration, stream="counter")
    _assert_same_bits(t, d, L, stack_rows, monkeypatch)


@pytest.mark.parametrize("stack_rows", [None, 1, 10 ** 9])
@pytest.mark.parametrize("V", [3, 4])
def test_stacked_levels_give_the_per_level_bits_at_extreme_rows(V, stack_rows, monkeypatch):
    """Zero, subnormal, tied, one-hot and near-one-hot rows; q = p; drafts of probability 0."""
    for shift in range(4):
        _assert_same_bits(_extreme_model(0, V), _extreme_model(shift, V), 4, stack_rows, monkeypatch)
    _assert_same_bits(_extreme_model(1, V), _extreme_model(1, V), 4, stack_rows, monkeypatch)


@settings(max_examples=40, deadline=None)
@given(pair=st.one_of(model_pairs(), adversarial_pairs()), L=st.integers(1, 4))
def test_stacked_levels_give_the_per_level_bits_on_drawn_pairs(pair, L):
    _assert_same_bits(pair.target, pair.draft_model, L)


def test_zero_strings_mark_exact_zeros_only_and_are_cached():
    """A zero row entry marks every string through it; an entry that underflows P(z) does not."""
    tiny = 5e-324
    m = s.Model(lambda prefix: [tiny, 1 - tiny] if len(prefix) < 2 else [0.0, 1.0], 2, "m")
    for n in (1, 2):
        mask, any_zero = m.zero_strings(n)
        assert not any_zero and not mask.any()
    assert m.joint(2)[0] == 0  # tiny * tiny underflows, yet no row entry is 0
    mask, any_zero = m.zero_strings(3)
    assert any_zero and mask.tolist() == [True, False] * 4 and not mask.flags.writeable
    assert m.zero_strings(3)[0] is mask
    with pytest.raises(ValueError, match="n"):
        m.zero_strings(0)


def test_impossible_mass_finds_the_same_mass_and_string():
    """Negative control: emitted laws that put mass on strings of target probability 0 (random
    weights on every string) give the same mass and heaviest string as the per-call pass, and a
    target without zeros gives none."""
    from types import SimpleNamespace
    from specsim.exact import _impossible_mass
    rng = np.random.default_rng(0)
    for V, t in ((3, _extreme_model(0)), (4, _extreme_model(3, 4)), (3, s.random_model(3, 1))):
        for L in (1, 2, 3):
            law = SimpleNamespace(V=V, L=L, emitted={m: rng.random(V ** m) * (rng.random(V ** m) < 0.5)
                                                     for m in range(1, L + 2)})
            got = _impossible_mass(law, t)
            assert got == _reference_impossible_mass(law, t)
            assert (got[0] > 0) == (t.name != s.random_model(3, 1).name)
