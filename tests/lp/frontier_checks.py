"""Comparisons of the grouped clip family (compiled) with the sorted one (numpy, the reference).

The two sum the same terms in different orders (per bucket, then bucket totals; against one
running sum over the sorted row), so a KL frontier's clip level moves with the rounding of
D(pi(a), p): a sum of m terms, each exact to an ulp, is exact to m ulps of the sum of their sizes.
The comparison allows that much and no more, through the frontier's own conditioning."""
from __future__ import annotations

import numpy as np

from lp.frontier import frontier
from specsim import _jit

#: rules whose output law is made from the clip family (b levels, prefix sums)
FAMILY_RULES = ("mentored", "cactus")


def budget_rounding(p: np.ndarray, eps: float) -> float:
    """How far rounding may move D(pi(a), p) at budget ``eps``: m ulps of (1 + eps), m = #{p > 0}."""
    return 2.3e-16 * int(np.count_nonzero(p > 0)) * (1.0 + eps) + 1e-300


def assert_frontier_close(got: float, want: float, p, q, eps: float, kind: str, tag="") -> None:
    """``got`` and ``want`` (beta* of the two paths at budget eps) lie within what the numpy
    frontier moves by over eps +- :func:`budget_rounding`, widened by the rounding of beta* itself
    (a sum of m terms)."""
    if got == want:
        return
    d = budget_rounding(p, eps) if np.isfinite(eps) else 0.0
    slack = budget_rounding(p, 0.0)
    with _jit.disabled():
        lo = frontier(p, q, max(eps - d, 0.0), kind).beta - slack
        hi = frontier(p, q, eps + d, kind).beta + slack
    assert lo <= got <= hi and lo <= want <= hi, (tag, kind, eps, got, want, lo, hi)
