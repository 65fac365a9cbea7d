"""Measured false-alarm rate of ``check_step`` on a lossless step (issue 26).

The step is ``step_from_verifier(block, L=2)`` on check_step's default instance (context (1,),
max_tokens 3, alpha = 1e-3); block verification is lossless and ``check_step_exact`` certifies this
step to 1e-12, so every FAIL is a false alarm.  Two modes, one line per seed, then the number of
failures, the rate and its Clopper-Pearson 95 % interval:

* ``step``: the real ``check_step(step, n=N, seed=s)`` for seeds s in [FIRST, LAST) (about 1.5 s
  of CPU per seed at N = 3000: the step runs N times in Python);
* ``null``: the same decision code (``specsim.testing.step._subtests``, check_step's sub-tests) on
  counts drawn from Multinomial(N, P) with ``numpy.random.default_rng(s)``: the law of check_step's
  completed-string counts for any lossless step (the N completed strings are i.i.d. draws from
  P), so the rate is the same, at a few ms per seed.  It also tallies the rule before issue 26
  (reject when a chi-square p-value is below the level, ``SubTest.p_value``), on the same counts.

    python scripts/false_alarm_check_step.py null 0 100000 3000
    python scripts/false_alarm_check_step.py tail 0 1000000 3000     # the joint sub-test's old rule, vectorised
    python scripts/false_alarm_check_step.py step 0 1000 3000
    python scripts/false_alarm_check_step.py tally OUT1 OUT2 ...     # adds up step-mode outputs
    python scripts/false_alarm_check_step.py tally-null OUT1 OUT2 ... # adds up null-mode running totals
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's specsim

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

ALPHA = 1e-3


def clopper_pearson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Exact binomial confidence interval for k successes in n trials."""
    a = (1 - conf) / 2
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def summary(label: str, fails: int, seeds: int) -> str:
    lo, hi = clopper_pearson(fails, seeds)
    return (f"{label}: {fails} false alarms in {seeds} seeds = {fails / seeds:.4%} (Clopper-Pearson 95%: "
            f"[{lo:.4%}, {hi:.4%}]; stated rate {ALPHA:.2%})")


def null_mode(first: int, last: int, n: int, quiet: bool = False) -> tuple[int, int, int]:
    """(calibrated failures, chi-square-rule failures, joint-test chi-square failures) on Multinomial(n, P)."""
    from specsim.testing.selftest.power import STEP_CONTEXT, default_instance
    from specsim.testing.step import _subtests

    target, _, m = default_instance("step", max_tokens=3)
    shifted = target.shifted(STEP_CONTEXT)
    P, V = shifted.joint(m), target.V
    after = before = joint_before = 0
    for s in range(first, last):
        rng = np.random.default_rng(s)
        tests = _subtests(rng.multinomial(n, P), shifted, V, m, ALPHA, 0.99, 5.0, rng)
        rej = any(t.rejected for t in tests)
        old = [t.impossible > 0 or t.p_value < t.level for t in tests]
        after, before, joint_before = after + rej, before + any(old), joint_before + old[0]
        if (rej or any(old)) and not quiet:
            print(s, int(not rej), *(f"{t.p_value:.3g}/{t.decision_p:.3g}" for t in tests), flush=True)
        if not quiet and (s + 1 - first) % 1000 == 0:  # running totals, so a partial run can be tallied
            print(f"# seeds {first}..{s}: calibrated {after}, before {before}, joint before {joint_before}",
                  flush=True)
    return after, before, joint_before


def tail_mode(draws: int, n: int, seed: int = 1) -> str:
    """The uncalibrated chi-square rule of the joint sub-test alone, vectorised: the fraction of
    ``draws`` Multinomial(n, P) tables whose pooled X^2 exceeds the chi-square critical value at
    the per-test level alpha / 3 (the grouping is pool_small_cells's, read off cell by cell)."""
    from specsim.testing.selftest.power import STEP_CONTEXT, default_instance
    from specsim.testing.stats import pool_small_cells

    target, _, m = default_instance("step", max_tokens=3)
    P = target.shifted(STEP_CONTEXT).joint(m)
    G = np.stack([pool_small_cells(np.eye(P.size)[c], P, n)[0] for c in range(P.size)])  # cell -> group
    eg = n * (P @ G)
    level, df = ALPHA / 3, G.shape[1] - 1
    crit = stats.chi2.isf(level, df)
    rng, hits, done = np.random.default_rng(seed), 0, 0
    while done < draws:
        b = min(50000, draws - done)
        x = rng.multinomial(n, P, size=b) @ G
        hits += int(((((x - eg) ** 2) / eg).sum(axis=1) > crit).sum())
        done += b
    lo, hi = clopper_pearson(hits, draws)
    return (f"joint sub-test, chi-square rule, exact null: {hits} of {draws} tables rejected = {hits / draws:.3g} "
            f"(Clopper-Pearson 95%: [{lo:.3g}, {hi:.3g}]) at per-test level {level:.3g}, df = {df}")


def step_mode(first: int, last: int, n: int) -> int:
    from specsim.testing import check_step, step_from_verifier
    from specsim.verifiers import block

    step = step_from_verifier(block, L=2)
    fails = 0
    for s in range(first, last):
        res = check_step(step, n=n, seed=s)
        fails += not res.passed
        print(s, int(res.passed), *(f"{t.p_value:.3g}/{t.decision_p:.3g}" for t in res.subtests), flush=True)
    return fails


def main(argv) -> None:
    mode = argv[1]
    if mode == "tally-null":  # the last running totals of each null-mode output
        tot = np.zeros(4, dtype=np.int64)
        for path in argv[2:]:
            last = [ln for ln in open(path) if ln.startswith("# seeds ")][-1].split()
            a, b = map(int, last[2].rstrip(":").split(".."))
            tot += [b - a + 1, int(last[4].rstrip(",")), int(last[6].rstrip(",")), int(last[9])]
        print(summary("calibrated test (issue 26 fix)", int(tot[1]), int(tot[0])))
        print(summary("chi-square rule before the fix", int(tot[2]), int(tot[0])))
        print(f"  joint test alone before the fix: {tot[3]} in {tot[0]} (per-test level {ALPHA / 3:.3g})")
        return
    if mode == "tally":
        seen = {}
        for path in argv[2:]:
            for line in open(path):
                parts = line.split()
                if len(parts) >= 2 and parts[0].isdigit():
                    seen[int(parts[0])] = int(parts[1])
        print(summary("check_step (step mode)", sum(v == 0 for v in seen.values()), len(seen)))
        return
    first, last = int(argv[2]), int(argv[3])
    n = int(argv[4]) if len(argv) > 4 else 3000
    t0 = time.time()
    if mode == "null":
        after, before, joint = null_mode(first, last, n)
        print(summary("calibrated test (issue 26 fix)", after, last - first))
        print(summary("chi-square rule before the fix", before, last - first))
        print(f"  joint test alone before the fix: {joint} in {last - first} "
              f"(per-test level {ALPHA / 3:.3g}, Clopper-Pearson 95%: "
              f"[{clopper_pearson(joint, last - first)[0]:.3g}, {clopper_pearson(joint, last - first)[1]:.3g}])")
    elif mode == "tail":  # FIRST..LAST is read as the number of tables, LAST - FIRST
        print(tail_mode(last - first, n))
    elif mode == "step":
        print(summary("check_step (step mode)", step_mode(first, last, n), last - first))
    else:
        raise SystemExit(f"mode must be null, tail, step, tally or tally-null, got {mode!r}")
    print(f"mode {mode}, n = {n}, seeds {first}..{last - 1}, {time.time() - t0:.0f} s wall")


if __name__ == "__main__":
    main(sys.argv)
