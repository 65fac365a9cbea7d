"""Statistical tier: chi-square goodness of fit of the emitted block (tau, Y) and of each position's
acceptance against specsim's exact laws, with fresh torch noise.

Uses the pure-torch reference for the large samples (the kernel equals it bit for bit, see
test_reference_gpu_kernels).  False alarms: ALPHA_TOTAL = 1e-6 per suite run, Bonferroni over
the N_TESTS goodness-of-fit tests below.  Power: for n samples and Cohen's effect size w
(w^2 = sum (pi_alt - pi)^2 / pi), the statistic is non-central chi-square with lambda = n w^2;
each test asserts power >= 0.99 at w = 0.05 before sampling, and a negative control (the block
sample scored against the token law) must be rejected.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

torch = pytest.importorskip("torch")

from reference_gpu import api  # noqa: E402
from specsim.verifiers.chain import block, token  # noqa: E402
from test_reference_gpu_exact import random_chain  # noqa: E402

ALPHA_TOTAL = 1e-6
N_TESTS = 6          # 2 modes x 2 seeds joint tests + 2 per-position tests
ALPHA = ALPHA_TOTAL / N_TESTS
N = 60_000
EFFECT_W = 0.05


def joint_law(verifier, x, p, q):
    V, L = p.shape[1], len(x)
    t = np.zeros((L + 1, V))
    for o in verifier.law(x, p, q):
        t[o.accepted] += o.prob * o.next_dist
    return t.ravel()


def sample(x, p, q, mode, n, seed):
    V, L = p.shape[1], len(x)
    g = torch.Generator().manual_seed(seed)
    noise = api.ChainNoise(torch.rand(n * L, generator=g, dtype=torch.float64),
                           torch.rand(n * L, generator=g, dtype=torch.float64),
                           torch.empty(n, V, dtype=torch.float64).exponential_(generator=g))
    r = api.verify_chain(torch.tensor(list(x) * n, dtype=torch.int32),
                         torch.arange(1, n + 1, dtype=torch.int32) * L,
                         torch.tensor(np.tile(q, (n, 1))), torch.tensor(np.tile(p, (n, 1))),
                         noise, mode, backend="torch", validate=False)
    tau = r.num_accepted.numpy().astype(int)
    y = r.output_token_ids.numpy()[np.arange(n), tau]
    return np.bincount(tau * V + y, minlength=(L + 1) * V)


def chi2_pvalue(counts, probs):
    """Pearson chi-square p-value; cells with probability 0 must be empty (else p = 0)."""
    n = counts.sum()
    zero = probs <= 1e-15
    if counts[zero].sum() > 0:
        return 0.0, 1
    e = probs[~zero] * n
    stat = ((counts[~zero] - e) ** 2 / e).sum()
    df = int((~zero).sum()) - 1
    return float(stats.chi2.sf(stat, df)), df


def power(df, n=N, w=EFFECT_W, alpha=ALPHA):
    crit = stats.chi2.isf(alpha, df)
    return float(stats.ncx2.sf(crit, df, n * w * w))


@pytest.mark.parametrize("mode,verifier", [("token", token), ("block", block)])
@pytest.mark.parametrize("seed", [10, 11])
def test_emitted_block_law_goodness_of_fit(mode, verifier, seed):
    x, p, q = random_chain(4, 3, seed)
    law = joint_law(verifier, x, p, q)
    assert power((law > 1e-15).sum() - 1) >= 0.99
    pv, df = chi2_pvalue(sample(x, p, q, mode, N, seed), law)
    assert pv > ALPHA, (pv, df)


@pytest.mark.parametrize("mode,verifier", [("token", token), ("block", block)])
def test_per_position_acceptance(mode, verifier):
    """P(tau = i) for each i (the per-position stop law) against the exact law."""
    x, p, q = random_chain(5, 4, 12)
    V, L = 5, 4
    law = joint_law(verifier, x, p, q).reshape(L + 1, V).sum(1)
    counts = sample(x, p, q, mode, N, 99).reshape(L + 1, V).sum(1)
    assert power((law > 1e-15).sum() - 1) >= 0.99
    pv, _ = chi2_pvalue(counts, law)
    assert pv > ALPHA, pv


def test_negative_control_block_samples_fail_the_token_law():
    x, p, q = random_chain(4, 3, 10)
    tl, bl = joint_law(token, x, p, q), joint_law(block, x, p, q)
    assert np.abs(tl - bl).sum() > 0.02          # the laws differ at L = 3
    pv, _ = chi2_pvalue(sample(x, p, q, "block", N, 5), tl)
    assert pv < ALPHA
