"""``python -m specsim.testing.demo``: the released HSD rule caught with a minimal counterexample.

The released hierarchical speculative decoding rule (Zhou et al., arXiv 2601.05724; docs/theory.md §7)
accepts the whole draft with min(1, r_L) instead of block verification's min(1, r_L / M_{L-1}).
Its first-token marginal is exact, so first-token tests pass; the exact completion check
C(z) = P(z) over V^{L+1} flags it, and Hypothesis shrinks the failing instance.
"""
from __future__ import annotations

import time


def main() -> int:
    """Certify block verification on 30 Hypothesis instances, then catch ``hsd_released`` and print
    its shrunk counterexample (worst completed sequence z, C(z) vs P(z), the rows along z).

    Returns: the exit status, 0 when the suite behaves (block passes, hsd_released is flagged).
    It runs for several seconds, so it has no inline example: ``python -m specsim.testing.demo``
    (exercised by tests/testing/test_selftest.py).
    """
    from specsim.testing import LossyVerifierError, assert_lossless
    from specsim.verifiers import block, hsd_released

    t0 = time.perf_counter()
    assert_lossless(block, max_examples=30, derandomize=True)
    print(f"block verification: lossless on 30 Hypothesis instances ({time.perf_counter() - t0:.1f} s)\n")
    t0 = time.perf_counter()
    try:
        assert_lossless(hsd_released, max_examples=60, derandomize=True)
    except LossyVerifierError as err:
        print(err)
        print(f"\ncaught in {time.perf_counter() - t0:.1f} s (search + shrinking)")
        return 0
    print("hsd_released was NOT flagged: the suite is broken")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
