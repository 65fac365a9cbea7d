"""``lp.certificates.certify`` as it was before issue 27, frozen: the reference its fast paths are
compared with (tests/lp/test_certify_fast.py) and timed against (benchmarks/issue27.py)."""
from __future__ import annotations

from lp.certificates import _rule_of
from lp.frontier import _frontier_point
from specsim._validate import as_pair
from specsim.divergences import kl, tv
from specsim.verifiers._clip_family import SortedClipFamily


def certify_reference(rule, p, q) -> dict:
    """The certificate's law and number fields by the pre-issue-27 steps: one sorted clip family
    shared by the closed form and both KL frontiers, separate KL and TV passes."""
    r = _rule_of(rule)
    p, q = as_pair(p, q)
    fam = SortedClipFamily(p, q)
    with fam.shared():
        out = r.closed_out(p, q)
    k1, k2, t = kl(out, p), kl(p, out), tv(out, p)
    return dict(out=out, beta=float(r.closed_beta(p, q)), kl_out_p=k1, kl_p_out=k2, tv=t,
                frontier_tv=_frontier_point(p, q, t, "tv").beta,
                frontier_kl=_frontier_point(p, q, k1, "kl", fam).beta,
                frontier_kl_reverse=_frontier_point(p, q, k2, "kl_reverse", fam).beta)
