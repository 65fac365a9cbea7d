"""check_sampler (statistical, stated false-alarm rate and power) and check_sampler_exact (injected
uniforms integrated exactly), with lossless and faulty samplers."""
import numpy as np
import pytest
from scipy import stats

from specsim.exact import check_lossless
from specsim.models import random_model
from specsim.testing import BatchSampler, check_sampler, check_sampler_exact, from_verifier
from specsim.testing.sampler import completed_and_target_laws, samples_to_detect
from specsim.testing.stats import detection_threshold
from specsim.testing.selftest.mutants import CHAIN_MUTANTS
from specsim.verifiers import block, hsd_released, token
from specsim.verifiers.base import Outcome, chain_verifier

TARGET, DRAFT = random_model(3, 0, 0.5), random_model(3, 1, 0.5)


def _inverse_cdf(row, u):
    c = np.cumsum(row)
    return int(min(np.searchsorted(c, u * c[-1], side="right"), np.flatnonzero(row > 0)[-1]))


def _token_batch(drafts, p, q, rng, residual="correct"):
    """Vectorised token-level speculative sampling (Leviathan et al.), numpy."""
    B, L = drafts.shape
    idx = np.arange(B)
    a = np.empty((B, L))
    for i in range(L):
        a[:, i] = p[idx, i, drafts[:, i]] / q[idx, i, drafts[:, i]]
    fail = rng.random((B, L)) >= a
    tau = np.where(fail.any(axis=1), fail.argmax(axis=1), L)
    rows = p[idx, tau].copy()
    rej = tau < L
    if residual == "correct":
        r = np.maximum(p[idx, tau][rej] - q[idx, np.minimum(tau, L - 1)][rej], 0)
        rows[rej] = r / r.sum(axis=1, keepdims=True)
    c = np.cumsum(rows, axis=1)
    tok = np.minimum((c <= rng.random(B)[:, None] * c[:, -1:]).sum(axis=1), p.shape[2] - 1)
    return tau, tok


def test_lossless_samplers_pass():
    res = check_sampler(from_verifier(token), TARGET, DRAFT, 2, n=6000)
    assert res.passed and res.impossible == 0 and len(res.subtests) == 4
    assert "PASS" in str(res) and "false-alarm rate 0.001" in str(res)
    assert check_sampler(BatchSampler(_token_batch), random_model(4, 5), random_model(4, 6), 3, n=40000).passed


def test_false_alarm_rate_is_as_stated():
    # 60 independent calls at alpha = 0.05 on a lossless sampler: rejections ~ Binomial(60, <= 0.05);
    # P(X >= 10) < 1e-3, so this assertion itself has a false-alarm rate below 1e-3.
    rejected = sum(not check_sampler(BatchSampler(_token_batch), TARGET, DRAFT, 2, n=3000, alpha=0.05,
                                     seed=s).passed for s in range(60))
    assert rejected < 10
    assert stats.binom.sf(9, 60, 0.05) < 1e-3


def test_power_at_the_predicted_sample_size():
    # hsd_released on this instance: the exact completed law C gives the n at which the test has 99% power
    C, P = completed_and_target_laws(hsd_released, TARGET, DRAFT, 2)
    n = samples_to_detect(C, P, 3, 2)
    assert 100 < n < 1e6
    res = check_sampler(from_verifier(hsd_released), TARGET, DRAFT, 2, n=int(n))
    assert not res.passed and any(t.rejected for t in res.subtests)  # fails with probability <= ~1%


def test_detectable_tv_follows_from_the_noncentral_chi_square():
    res = check_sampler(BatchSampler(_token_batch), TARGET, DRAFT, 2, n=10000)
    joint = res.subtests[0]
    lam = detection_threshold(joint.df, joint.level, 0.99)
    crit = stats.chi2.isf(joint.level, joint.df)
    assert stats.ncx2.sf(crit, joint.df, lam) == pytest.approx(0.99, abs=1e-6)
    assert res.detectable_tv == pytest.approx(np.sqrt(lam / (4 * 10000)) + joint.pooled_mass)
    # chi2(C||P) >= 4 TV^2: a law at TV = detectable_tv (unpooled) has non-centrality >= lambda*
    assert 4 * 10000 * (res.detectable_tv - joint.pooled_mass) ** 2 >= lam * (1 - 1e-9)


def test_wrong_residual_batch_sampler_is_flagged():
    bad = BatchSampler(lambda d, p, q, rng: _token_batch(d, p, q, rng, residual="from_target"))
    res = check_sampler(bad, TARGET, DRAFT, 2, n=5000)
    assert not res.passed and "FAIL" in str(res)


MALFORMED = [  # (sampler, check_sampler keywords, message): never a verdict
    (lambda d, p, q, rng: (len(d) + 1, 0), {},
     r"returned \(3, 0\) on draft \(\d, \d\) \(call 0\) with rows\n    p0 = [\s\S]*\n  expected \(accepted, token\): "
     r"two integers in 0\.\.2 x 0\.\.2"),
    (lambda d, p, q, rng: (0, 3), {}, r"returned \(0, 3\) on draft"),
    (lambda d, p, q, rng: (0, -1), {}, r"returned \(0, -1\) on draft"),
    (lambda d, p, q, rng: (0, 1.0), {}, r"returned \(0, 1\.0\) on draft"),
    (lambda d, p, q, rng: (True, 1), {}, r"returned \(True, 1\) on draft"),
    (lambda d, p, q, rng: 1, {}, r"returned 1 on draft"),
    (lambda d, p, q, rng: (0, 1, 2), {}, r"returned \(0, 1, 2\) on draft"),
    (BatchSampler(lambda d, p, q, rng: (np.zeros(len(d), int), np.zeros(len(d) - 1, int)), chunk=16), {},
     r"batch sampler returned accepted int64\[16\] and tokens int64\[15\] on draft chunk 0\.\.15 "
     r"\(first draft \(\d, \d\)\); expected two integer arrays of length 16"),
    (BatchSampler(lambda d, p, q, rng: (np.zeros(len(d), int), np.zeros(len(d)))), {},
     r"and tokens float64\[50\] on draft chunk 0\.\.49"),
    (BatchSampler(lambda d, p, q, rng: (np.zeros(len(d), int), np.arange(len(d))), chunk=16), {},
     r"returned \(accepted, token\) = \(0, 3\) for row 3 \(draft \(\d, \d\)\) of chunk 0\.\.15 "
     r"\(first draft .*\); expected \(accepted, token\): two integers in 0\.\.2 x 0\.\.2"),
    (lambda tree, rng: (tree.num_nodes, 0), {"drafting": "iid_paths"},
     r"returned \(\d, 0\) on draft tree tokens=.* parent=.* \(call 0\); expected \(node, token\): "
     r"two integers in 0\.\.\d x 0\.\.2"),
    (lambda tree, rng: None, {"drafting": "iid_paths"}, r"returned None on draft tree tokens="),
]


@pytest.mark.parametrize("sample_fn,kw,match", MALFORMED, ids=[f"malformed-{i}" for i in range(len(MALFORMED))])
def test_malformed_output_is_a_sampler_error_naming_the_call(sample_fn, kw, match):
    from specsim.drafts import iid_paths
    from specsim.testing import SamplerError
    kw = {k: iid_paths(2) if v == "iid_paths" else v for k, v in kw.items()}
    with pytest.raises(SamplerError, match=match) as info:
        check_sampler(sample_fn, TARGET, DRAFT, 2, n=50, **kw)
    assert info.value.draft is not None and info.value.__cause__ is None


MALFORMED_EXACT = [
    (lambda d, p, q, u: (len(d) + 1, 0), {}, r"returned \(accepted, token\) = \(2, 0\), outside 0\.\.1 x 0\.\.2, "
     r"on draft \(\d,\) at uniforms \["),
    (lambda d, p, q, u: (0, float(u[0])), {}, r"returned \(0, 0\.\d+\), not \(accepted, token\), on draft \(\d,\)"),
    (lambda tree, u: (tree.num_nodes, 0), {"drafting": "iid_paths"},
     r"returned \(node, token\) = \(\d, 0\), outside 0\.\.\d x 0\.\.2, on draft tree tokens="),
]


@pytest.mark.parametrize("sample_fn,kw,match", MALFORMED_EXACT, ids=["range", "float", "tree-range"])
def test_malformed_exact_output_is_a_sampler_error_naming_the_call(sample_fn, kw, match):
    from specsim.drafts import iid_paths
    from specsim.testing import SamplerError
    kw = {k: iid_paths(2) if v == "iid_paths" else v for k, v in kw.items()}
    with pytest.raises(SamplerError, match=match) as info:
        check_sampler_exact(sample_fn, TARGET, DRAFT, 1, **kw)
    assert info.value.draft is not None and (info.value.rows is None) == bool(kw)


def test_impossible_outputs_fail():
    def zero_prob_token(d, p, q, rng):
        return 0, int(np.argmin(p[0]))  # emits a token with target probability 0

    t = random_model(3, 3).shifted(())
    from specsim.models import top_k
    res = check_sampler(zero_prob_token, top_k(t, 2), DRAFT, 1, n=200)
    assert not res.passed and res.impossible == 200


def _token_u(draft, p, q, u):
    """Token-level SpS with uniforms u[0..L-1] for the tests and u[L] for the emitted token."""
    for i, t in enumerate(draft):
        if not u[i] * q[i, t] < p[i, t]:
            r = np.maximum(p[i] - q[i], 0)
            return i, _inverse_cdf(r / r.sum(), u[-1])
    return len(draft), _inverse_cdf(p[-1], u[-1])


def _token_u_reused(draft, p, q, u):
    """The classic bug: the uniform that rejected x_i also samples the residual."""
    for i, t in enumerate(draft):
        a = min(1.0, p[i, t] / q[i, t])
        if not u[i] < a:
            r = np.maximum(p[i] - q[i], 0)
            return i, _inverse_cdf(r / r.sum(), u[i])
    return len(draft), _inverse_cdf(p[-1], u[-1])


def _block_u(draft, p, q, u):
    from specsim.verifiers.chain import block_weights
    w, h, res = block_weights(draft, p, q)
    L = len(draft)
    passing = [i for i in range(1, L + 1) if u[i - 1] < h[i]]
    tau = passing[-1] if passing else 0
    return tau, _inverse_cdf(p[L] if tau == L else res[tau], u[-1])


@pytest.mark.parametrize("fn", [_token_u, _block_u])
def test_exact_mode_certifies_lossless_samplers(fn):
    for L in (1, 2):
        cert = check_sampler_exact(fn, TARGET, DRAFT, L)
        assert cert.lossless and cert.max_abs_error < 1e-9
    # and it reproduces the exact law of the rule it implements
    law = check_lossless(token if fn is _token_u else block, TARGET, DRAFT, 2)
    assert cert.expected_accepted == pytest.approx(law.expected_accepted, abs=1e-9)


def test_exact_mode_flags_reused_uniform_with_the_mutant_law():
    cert = check_sampler_exact(_token_u_reused, TARGET, DRAFT, 2)
    assert not cert.lossless
    # two independent computations of the same fault agree: grid integration vs the analytic mutant law
    ref = check_lossless(CHAIN_MUTANTS["reused_uniform"].verifier, TARGET, DRAFT, 2)
    assert cert.max_abs_error == pytest.approx(ref.max_abs_error, abs=1e-9)
    assert cert.worst_sequence == ref.worst_sequence


def test_exact_mode_reports_bad_output():
    with pytest.raises(ValueError, match="returned"):
        check_sampler_exact(lambda d, p, q, u: (5, 0), TARGET, DRAFT, 1)


def test_check_sampler_on_tree_samplers():
    """Tree layout: SpecInfer's own sampler passes; a stale-residual sampler is caught.

    False-alarm rate alpha = 1e-3 per call; the faulty sampler's completed-law TV on this pair is
    computed exactly first, and n is chosen so the call has power >= 0.99 against it."""
    from specsim.drafts import iid_paths
    from specsim.testing.selftest.mutants import TREE_MUTANTS
    from specsim.verifiers import specinfer
    t, d = random_model(3, 11, concentration=0.6), random_model(3, 12, concentration=0.6)
    ok = check_sampler(lambda tree, rng: specinfer.sample(tree, rng=rng), t, d, 2, n=6000,
                       drafting=iid_paths(2), seed=1)
    assert ok.passed, ok
    name = next(k for k in TREE_MUTANTS if "stale" in k)
    mutant = TREE_MUTANTS[name].verifier
    C, P = completed_and_target_laws(mutant, t, d, 2, drafting=iid_paths(2))
    assert samples_to_detect(C, P, 3, 2) <= 6000  # power >= 0.99 at this n
    bad = check_sampler(lambda tree, rng: mutant.sample(tree, rng=rng), t, d, 2, n=6000,
                        drafting=iid_paths(2), seed=2)
    assert not bad.passed


# ------------------------------------------------------------------- what a FAIL says it saw
def test_fail_report_lists_the_strings_the_fault_moves():
    """The wrong-residual batch sampler at 4x the n of 99% power: the over-represented strings of
    the report are strings its exact completed law (the residual_from_target mutant) over-weights
    (C > P), the under-represented ones strings it under-weights, with their counts; a PASS report
    lists none."""
    C, P = completed_and_target_laws(CHAIN_MUTANTS["residual_from_target"].verifier, TARGET, DRAFT, 2)
    n = 4 * int(samples_to_detect(C, P, 3, 2))
    bad = BatchSampler(lambda d, p, q, rng: _token_batch(d, p, q, rng, residual="from_target"))
    res = check_sampler(bad, TARGET, DRAFT, 2, n=n, report=2)
    assert not res.passed and len(res.over) == 2 and len(res.under) == 2
    code = lambda z: z[0] * 9 + z[1] * 3 + z[2]
    assert all(C[code(s.string)] > P[code(s.string)] for s in res.over)
    assert all(C[code(s.string)] < P[code(s.string)] for s in res.under)
    assert all(s.expected == pytest.approx(n * P[code(s.string)]) for s in res.over + res.under)
    text = str(res)
    assert "most over-represented" in text and f"observed {res.over[0].observed}" in text
    ok = check_sampler(from_verifier(token), TARGET, DRAFT, 2, n=2000)
    assert ok.passed and "over-represented" not in str(ok)


def test_impossible_strings_lead_the_report_with_their_count():
    from specsim.models import top_k
    t = top_k(random_model(3, 3), 2)
    res = check_sampler(lambda d, p, q, rng: (0, int(np.argmin(p[0]))), t, DRAFT, 1, n=200)
    assert not res.passed and res.impossible == 200
    assert res.over[0].residual == np.inf and res.over[0].expected == 0.0
    assert "200 emitted strings have target probability 0" in str(res)


def test_greedy_target_reports_the_argmax_chain_check():
    """A one-hot target (greedy decoding) has no chi-square (df = 0): the check is 'no output off
    the argmax chain', exact, and detects a fault that leaves the chain with probability e once
    1 - (1 - e)^n >= power."""
    from specsim.models import iid
    greedy_target = iid([0.0, 1.0, 0.0])
    res = check_sampler(from_verifier(token), greedy_target, DRAFT, 2, n=500)
    assert res.passed and "argmax chain" in str(res) and "df = 0" not in str(res)
    assert 1 - (1 - res.detectable_tv) ** 500 == pytest.approx(0.99)

    def off_chain_at_rate(e):
        def sample(d, p, q, rng):
            greedy_accepted = next((i for i, t in enumerate(d) if t != 1), len(d))  # the argmax prefix
            return (0, 0) if rng.random() < e else (greedy_accepted, 1)
        return sample

    bad = check_sampler(off_chain_at_rate(0.02), greedy_target, DRAFT, 2, n=500)  # 1 - 0.98^500 > 0.9999
    assert not bad.passed and bad.impossible > 0 and "outputs off the argmax chain  REJECTED" in str(bad)


# ------------------------------------------------------------------- impossible strings, grids, boundaries
def _zero_target():
    """A target with an exact zero in every row (top-2 of a V = 3 model): impossible strings exist."""
    from specsim.models import top_k
    return top_k(random_model(3, 3), 2)


def _token_u_leq(draft, p, q, u):
    """The `>=` fault of a rejection test written as u <= p/q: at u = 0 it accepts a draft token
    of target probability 0."""
    for i, t in enumerate(draft):
        if not u[i] * q[i, t] <= p[i, t]:
            r = np.maximum(p[i] - q[i], 0)
            return i, _inverse_cdf(r / r.sum(), u[-1])
    return len(draft), _inverse_cdf(p[-1], u[-1])


def test_exact_mode_fails_any_mass_on_an_impossible_string():
    """check_lossless: 1e-12 of emitted mass on a token of target probability 0 is below atol in
    max |C - P| but fails as impossible mass, reported with the string."""
    t = _zero_target()

    @chain_verifier("leak", lossless=False)
    def leak(draft, p, q):
        y = int(np.argmin(p[0]))  # p[0][y] == 0
        row = p[0] * (1 - 1e-12)
        row[y] += 1e-12
        return [Outcome(1.0, 0, row)]

    cert = check_lossless(leak, t, DRAFT, 1)
    assert cert.max_abs_error < cert.atol  # what the old tolerance accepted
    assert not cert.lossless and cert.impossible_mass == pytest.approx(1e-12, rel=1e-6)
    assert t(())[cert.impossible_string[0]] == 0 and "cannot emit" in str(cert)
    ok = check_lossless(token, t, DRAFT, 2)
    assert ok.lossless and ok.impossible_mass == 0.0 and ok.impossible_string == ()


@pytest.mark.parametrize("grid", [2, "float32"])
def test_u_leq_threshold_at_a_zero_probability_token_is_caught_at_u_zero(grid):
    t = _zero_target()
    good = check_sampler_exact(_token_u, t, DRAFT, 1, grid=grid)
    assert good.lossless and good.boundary_points == () and good.impossible_mass == 0
    bad = check_sampler_exact(_token_u_leq, t, DRAFT, 1, grid=grid)
    assert not bad.lossless and bad.impossible_mass > 0
    hits = [b for b in bad.boundary_points if b.impossible]
    assert hits and all(b.u[b.axis] == 0.0 and b.neighbours[0] is None for b in hits)
    assert all(t(())[b.draft[0]] == 0 and b.output[0] == 1 for b in hits)  # accepted the impossible draft
    if grid == "float32":  # u = 0 is one of the 2^24 lattice points: mass Q(x) 2^-24 per impossible draft x
        q0 = DRAFT(())
        assert bad.impossible_mass == pytest.approx(sum(q0[x] for x in range(3) if t(())[x] == 0) / 2 ** 24)


def test_float32_grid_gives_the_lattice_law_exactly():
    """On u = k 2^-24 the acceptance probability of draft token x is #{k : k 2^-24 q_x < p_x} / 2^24,
    counted here over all 2^24 lattice points; E[tau] of the certificate is its Q-average."""
    t = TARGET
    cert = check_sampler_exact(_token_u, t, DRAFT, 1, grid="float32")
    u = np.arange(2 ** 24, dtype=np.float32)
    u *= np.float32(2.0 ** -24)
    p, q = t(()), DRAFT(())
    accept = [np.count_nonzero(u * q[x] < p[x]) / 2 ** 24 for x in range(3)]
    assert cert.expected_accepted == pytest.approx(float(np.dot(q, accept)), abs=1e-15)
    assert cert.lossless and cert.grid == "float32" and cert.atol == pytest.approx(2 * 2 / 2 ** 24)


def test_a_special_case_at_exactly_u_equal_p_over_q_is_a_boundary_point():
    """A fault only at the float u == p/q (emit an impossible token there): measure zero in the
    continuous law, found by refining the located breakpoint to adjacent floats."""
    t = _zero_target()

    def tie_fault(draft, p, q, u):
        x = draft[0]
        if q[0, x] > 0 and p[0, x] > 0 and u[0] == p[0, x] / q[0, x]:
            return 0, int(np.argmin(p[0]))  # target probability 0
        return _token_u(draft, p, q, u)

    cert = check_sampler_exact(tie_fault, t, DRAFT, 1)
    ties = [b for b in cert.boundary_points if b.impossible]
    assert not cert.lossless and ties and cert.impossible_mass == 0
    for b in ties:
        x = b.draft[0]
        assert b.u[0] == t(())[x] / DRAFT(())[x] and b.neighbours[0] != b.output != b.neighbours[1]


def _specinfer_u(tree, u, stale=False):
    """SpecInfer (recursive rejection sampling) on one level of i.i.d. draws, uniforms injected:
    u[k] tests the k-th draw, u[-1] samples the emitted token."""
    r = tree.p[0].copy()
    q = tree.q[0]
    for k, x in enumerate(tree.draws[0]):
        if u[k] * q[x] < r[x]:
            child = next(j for j in range(1, tree.num_nodes) if tree.parent[j] == 0 and tree.tokens[j] == x)
            return child, _inverse_cdf(tree.p[child], u[-1])
        if not stale:
            r = np.maximum(r - q, 0)
            r = r / r.sum()
    return 0, _inverse_cdf(r, u[-1])


def test_exact_mode_tree_form_integrates_per_enumerated_tree():
    from specsim.drafts import iid_paths
    from specsim.verifiers import specinfer
    t, d = random_model(3, 11, 0.6), random_model(3, 12, 0.6)
    cert = check_sampler_exact(_specinfer_u, t, d, 1, drafting=iid_paths(2))
    ref = check_lossless(specinfer, t, d, 1, iid_paths(2))
    assert cert.lossless and cert.expected_accepted == pytest.approx(ref.expected_accepted, abs=1e-9)
    stale = check_sampler_exact(lambda tree, u: _specinfer_u(tree, u, stale=True), t, d, 1, drafting=iid_paths(2))
    assert not stale.lossless and stale.max_abs_error > 1e-4


def test_user_code_errors_name_their_input_in_every_mode():
    """An exception inside the implementation is a SamplerError naming the draft (rows, uniforms),
    never a verdict: per-sample, batch, tree and exact (chain and tree) modes."""
    from specsim.drafts import iid_paths
    from specsim.testing import SamplerError

    def boom(*args):
        raise IndexError("gather out of range")

    cases = [
        (lambda: check_sampler(boom, TARGET, DRAFT, 2, n=10), "with rows"),
        (lambda: check_sampler(BatchSampler(boom), TARGET, DRAFT, 2, n=10), "chunk 0..9"),
        (lambda: check_sampler(boom, TARGET, DRAFT, 2, n=10, drafting=iid_paths(2)), "tree tokens="),
        (lambda: check_sampler_exact(boom, TARGET, DRAFT, 1), "at uniforms"),
        (lambda: check_sampler_exact(boom, TARGET, DRAFT, 1, drafting=iid_paths(2)), "at uniforms"),
    ]
    for run, where in cases:
        with pytest.raises(SamplerError, match="raised IndexError: gather out of range") as info:
            run()
        assert where in str(info.value) and isinstance(info.value.__cause__, IndexError)
        assert info.value.draft is not None


def _always_token_0(draft, p, q, rng):
    return 0, 0


@pytest.mark.parametrize("kw", [dict(n=1), dict(n=2000, min_expected=1e9)], ids=["n=1", "min_expected=1e9"])
def test_too_little_data_is_inconclusive_never_a_pass(kw):
    # issue 26: n = 1 (or pooling every cell) used to PASS a sampler that always emits token 0
    from specsim.models import random_model
    t, d = random_model(3, 0), random_model(3, 1)
    res = check_sampler(_always_token_0, t, d, 2, **kw)
    assert not res.passed and res.inconclusive and res.verdict == "INCONCLUSIVE"
    assert "INCONCLUSIVE" in str(res) and "more data needed" in str(res)
    # negative controls: with enough data the broken sampler FAILs and a lossless one PASSes
    bad = check_sampler(_always_token_0, t, d, 2, n=2000)
    assert bad.verdict == "FAIL" and not bad.inconclusive
    from specsim.verifiers import token
    good = check_sampler(lambda dr, p, q, rng: token.sample(dr, p, q, rng=rng), t, d, 2, n=2000)
    assert good.passed and good.verdict == "PASS"


def _threshold_rule(t, rows):
    """A block-verification-like output on m = len(t) + 1 uniforms: the largest j with u_j < t_j
    (0 if none) picks rows[j], and the last uniform draws a token from it by inverse CDF."""
    t = np.asarray(t, dtype=np.float64)
    cdfs = np.cumsum(rows, axis=1)

    def f(u):
        passing = np.flatnonzero(u[:-1] < t)
        j = int(passing[-1]) + 1 if passing.size else 0
        return j, int(np.count_nonzero(cdfs[j] <= u[-1] * cdfs[j][-1]))
    return f


@pytest.mark.parametrize("case", range(12))
def test_integrate_with_kept_points_locates_the_reference_edges(case):
    """_integrate(keep_points=True), the points check_step_exact uses, against the reference
    (every cell at its lower middle) on threshold-and-inverse-CDF rules with random, tied, zero,
    subnormal, sub-lattice, grid-cut (0.5), near-one and one thresholds and random, uniform,
    one-hot and near-one-hot rows: the same law bit for bit, in no more evaluations."""
    from specsim.testing.sampler import _integrate
    rng = np.random.default_rng(case)
    extreme = [0.0, 5e-324, 2.0 ** -45, 0.5, 1 - 2.0 ** -41, 1.0]
    n = 1 + case % 3
    t = rng.random(n) if case < 4 else rng.choice(extreme + list(rng.random(2)), n)
    if case % 4 == 3:
        t[:] = t[0]  # ties
    V = 3 + case % 2
    rows = rng.dirichlet(np.ones(V), n + 1)
    rows[case % (n + 1)] = np.eye(V)[case % V] if case % 2 else np.full(V, 1.0 / V)
    if case >= 8:
        rows[0] = np.r_[1 - 1e-15, np.full(V - 1, 1e-15 / (V - 1))]
    f = _threshold_rule(t, rows)
    for grid in (1, 2, 3):
        ref, n_ref = _integrate(f, n + 1, grid, 2.0 ** -40)
        law, n_new = _integrate(f, n + 1, grid, 2.0 ** -40, keep_points=True)
        assert law == ref and n_new <= n_ref, (t, grid)
