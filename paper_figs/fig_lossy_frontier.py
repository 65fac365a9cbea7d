"""Acceptance vs divergence on the E1 pair: every lossy rule (exact) against the optimal frontier.

Baseline: beta*(eps) = max_pi sum_v min(q_v, pi_v) s.t. D(pi, p) <= eps (docs/theory.md §9; maximal
coupling), for D = TV(pi, p) (closed form min(1, 1 - TV(p, q) + eps)) and D = KL(pi || p) (ratio
clipping, Algorithm 9.2), from :func:`lp.frontier.frontier_curve`.  Measured: each lossy rule of
:mod:`specsim.verifiers.lossy` at its exact (D(out, p), beta) from :func:`lp.certificates.certify`,
with a parameter sweep drawn as a line.  No point may lie above the frontier.

Each sweep leaves out the parameter at which its rule is lossless speculative sampling (all four
such rules land on one point, drawn once); the sweeps' parameters are chosen so that no two rules
share a point, except lenience and mentored decoding, whose (TV, beta) are equal at equal parameters
(hollow circles around the squares).  FSD is all-or-nothing: below its threshold it accepts every
draft (out = q), above it rejects every draft (out = p), so it has two points.
"""
from __future__ import annotations

import sys

import matplotlib.pyplot as plt
import numpy as np

from ._common import FigureResult, command, main_one

NAME = "fig_lossy_frontier"

#: (label, factory name in LOSSY_RULES, parameter name, values); one line per rule.  No sweep holds
#: its lossless parameter (see :data:`LOSSLESS`), and consultant tau starts above min p = 0.05 (at
#: tau <= min p it accepts every draft, the point FSD's acceptance has).  On the TV frontier lenience,
#: mentored, Cactus and ensemble all lie on one line: their values keep the points >= 0.017 apart in TV.
SWEEPS = (
    ("lenience l", "lenience", "l", (0.8, 0.6, 0.3)),
    ("mentored alpha", "mentored", "alpha", (0.8, 0.6, 0.3)),
    ("Cactus delta", "cactus", "delta", (0.01, 0.05, 0.3)),
    ("ensemble w (target weight)", "ensemble", "w", (0.75, 0.5, 0.25)),
    ("top-k accept k", "topk_accept", "k", (3, 2, 1)),
    ("consultant stand-in tau", "consultant_standin", "tau", (0.1, 0.2, 0.3)),
    ("typical (defaults)", "typical", None, (None,)),
    ("FSD T (js_released)", "fuzzy", "T", (0.2, 0.5)),
)
#: (factory name, parameter name, value) at which a swept rule is lossless speculative sampling:
#: out = p, beta = 1 - TV(p, q).  One point for all four, checked in :func:`make`.
LOSSLESS = (("lenience", "l", 1.0), ("mentored", "alpha", 1.0), ("cactus", "delta", 0.0), ("ensemble", "w", 1.0))


def rule_points(p, q):
    """[(label, [(params, LossyCertificate), ...])] for every sweep in :data:`SWEEPS`."""
    from lp.certificates import certify
    from specsim.verifiers.lossy import LOSSY_RULES

    out = []
    for label, name, par, values in SWEEPS:
        certs = []
        for v in values:
            kw = {} if par is None else {par: v}
            certs.append((kw, certify(LOSSY_RULES[name](**kw), p, q)))
        out.append((label, certs))
    return out


def make(quick: bool = False) -> FigureResult:
    from lp.frontier import E1_P, E1_Q, frontier_curve
    from specsim.divergences import kl, tv

    p, q = E1_P, E1_Q
    n = 41 if quick else 201
    kl_max = 1.1 * kl(q, p)
    curves = {"tv": frontier_curve(p, q, np.linspace(0.0, 0.7, n), "tv"),
              "kl": frontier_curve(p, q, np.linspace(0.0, kl_max, n), "kl")}
    points = rule_points(p, q)
    # no rule may beat the optimum (a broken rule or frontier would show here)
    worst = min(min(c.gap_tv, c.gap_kl) for _, cs in points for _, c in cs)
    if worst < -1e-9:
        raise RuntimeError(f"a lossy rule lies above the frontier by {-worst:.3g}")
    from lp.certificates import certify
    from specsim.verifiers.lossy import LOSSY_RULES
    alpha = 1.0 - tv(p, q)                       # speculative sampling's acceptance
    for name, par, v in LOSSLESS:
        c = certify(LOSSY_RULES[name](**{par: v}), p, q)
        if c.tv > 1e-12 or abs(c.beta - alpha) > 1e-12:
            raise RuntimeError(f"{name}({par}={v}) is not lossless speculative sampling")
    seen = {}                                    # no two rules on one point (lenience/mentored on TV aside)
    for label, certs in points:
        for kw, c in certs:
            key = (round(c.tv, 9), round(c.beta, 9))
            other = seen.setdefault(key, label)
            if other != label and {other.split()[0], label.split()[0]} != {"lenience", "mentored"}:
                raise RuntimeError(f"{label} {kw} and {other} share the point TV = {key[0]}, beta = {key[1]}")

    fig, axes = plt.subplots(1, 2, figsize=(12.5, 3.9), sharey=True)
    markers = "os^vDPXh"
    dropped = []
    for ax, kind, xlabel in ((axes[0], "tv", "TV(out, p)"), (axes[1], "kl", "KL(out || p)  [nats]")):
        c = curves[kind]
        ax.plot(c.budgets, c.beta, "k-", lw=2, label="optimal frontier beta*(eps)")
        ax.plot([0.0], [alpha], "*", color="k", ms=13, mfc="white", mew=1.3, zorder=4,
                label="lossless: speculative sampling")
        for (label, certs), m in zip(points, markers):
            xs = [getattr(ct, "tv" if kind == "tv" else "kl_out_p") for _, ct in certs]
            ys = [ct.beta for _, ct in certs]
            keep = [i for i, x in enumerate(xs) if np.isfinite(x)]
            if kind == "kl" and len(keep) < len(xs):
                dropped.append(label)
            hollow = dict(ms=10, mfc="none") if label.startswith("lenience") else dict(ms=5)  # around mentored
            ax.plot([xs[i] for i in keep], [ys[i] for i in keep], m + "--", lw=0.8, alpha=0.85, label=label,
                    mec="k", zorder=3, **hollow)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("acceptance beta (probability)")
    axes[0].set_title("TV frontier (closed form)")
    axes[1].set_title("KL(pi || p) frontier (ratio clipping)")
    axes[1].legend(frameon=False, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fmt = lambda v: "(" + ", ".join(f"{x:g}" for x in v) + ")"  # noqa: E731
    from specsim.verifiers.lossy import _js_released
    fsd_d = float(_js_released(np.asarray(p, float), np.asarray(q, float)))
    fig.suptitle(f"E1: p = {fmt(p)}, q = {fmt(q)}; TV(p, q) = {tv(p, q):.2f}", fontsize=9)
    fig.tight_layout()
    sweeps = "; ".join(f"{lab} in {vals}" for lab, _, par, vals in SWEEPS if par is not None)
    cactus = next(ct for lab, cs in points if lab.startswith("Cactus") for kw, ct in cs if kw["delta"] == 0.05)
    caption = (
        f"Acceptance vs divergence on the E1 pair of docs/theory.md §12, exact. Black: the optimal frontier "
        f"beta*(eps) = max sum min(q, pi) s.t. D(pi, p) <= eps (lp.frontier.frontier_curve, {n} budgets); "
        f"markers: each lossy rule's exact (D(out, p), beta) from lp.certificates.certify, swept over its "
        f"parameter ({sweeps}; typical acceptance at its defaults eps = 0.09, delta = 0.3). White star: the "
        f"lossless point (out = p, beta = 1 - TV(p, q) = {alpha:.2f}) shared by lenience l = 1, mentored alpha = 1, "
        f"Cactus delta = 0 and ensemble w = 1, drawn once. Lenience and mentored decoding have equal (TV, beta) at "
        f"equal parameters (hollow circles around the squares). FSD accepts every draft (out = q) when "
        f"js_released(p, q) = {fsd_d:.4f} <= T and rejects every draft (out = p) otherwise: two points. "
        f"No rule lies above the frontier (smallest gap {worst:.1e}). Cactus at delta = 0.05 has "
        f"KL(out||p) = {cactus.kl_out_p:.6f} > delta: its parameter is not the output KL. "
        + (f"Rules with infinite KL(out||p), not drawn on the right: {', '.join(dropped)}. " if dropped else "")
        + f"Made by `{command(NAME, quick)}`.")
    return FigureResult(NAME, fig, caption)


if __name__ == "__main__":
    sys.exit(main_one(NAME))
