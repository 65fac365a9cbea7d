# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lossy verification and what a certificate means
#
# A lossy rule trades fidelity for acceptance.  This notebook computes, exactly:
# the output law of each rule and its divergence from the target (each direction named), the best
# acceptance any rule can reach at that divergence (the frontier, docs/theory.md §9), the sequence-level
# law over several iterations, and acceptance certificates for deterministic relaxed rules
# (docs/theory.md §10.2).  Set `SPECSIM_QUICK=1` for small sizes.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import specsim as s
from lp.certificates import certify, certify_sequence
from lp.frontier import E1_P, E1_Q, frontier, frontier_curve, frontier_cvxpy
from lp.radius import (acceptance_radius, acceptance_radius_numeric, additive_greedy, margin_radius,
                       multiplicative_greedy, strict_greedy, top_m)
from specsim.divergences import kl, tv
from specsim.verifiers.lossy import LOSSY_RULES, cactus, lenience, mentored

QUICK = bool(os.environ.get("SPECSIM_QUICK"))
p, q = E1_P, E1_Q
print("E1: p =", p, " q =", q, f" TV = {tv(p, q):.6f}  KL(q||p) = {kl(q, p):.6f}")

# %% [markdown]
# ## One rule, one exact certificate
# Cactus fixes a parameter delta that looks like a KL budget.  The exact output law shows the real
# KL(out || p) is larger (docs/theory.md §9.3; anchor 0.082227 at delta = 0.05).

# %%
c = certify(cactus(0.05), p, q)
print(c)
assert abs(c.kl_out_p - 0.082227) < 1e-6 and c.kl_out_p > 0.05

# %% [markdown]
# ## The frontier: the best acceptance at a given divergence
# beta*(eps) = max_pi sum min(q, pi) s.t. D(pi, p) <= eps.  TV has a closed form; for KL the optimum
# clips the ratio pi/p into [b, a] (Algorithm 9.2).  An independent cvxpy solve agrees.

# %%
for eps in (0.05, 0.2):
    fast, cvx = frontier(p, q, eps, "kl"), frontier_cvxpy(p, q, eps, "kl")
    print(f"eps = {eps}: beta*_KL = {fast.beta:.6f} (a = {fast.a:.4f}, b = {fast.b:.4f});  cvxpy {cvx.beta:.6f}")
    assert abs(fast.beta - cvx.beta) < 1e-5
assert abs(frontier(p, q, 0.05, "kl").beta - 0.535138) < 1e-6    # docs/theory.md §12
assert abs(frontier(p, q, 0.05, "tv").beta - 0.45) < 1e-12

# %% [markdown]
# Every rule sits on or below the frontier at its own divergence; the gap says how much acceptance
# it leaves on the table.  Lenience and mentored decoding are on the TV frontier; mentored decoding
# is also on the KL(out||p) frontier (it is the ratio clip).

# %%
rules = {"lenience(0.8)": lenience(0.8), "mentored(0.8)": mentored(0.8), "cactus(0.05)": cactus(0.05),
         "typical()": LOSSY_RULES["typical"](), "ensemble(0.75)": LOSSY_RULES["ensemble"](0.75),
         "topk_accept(2)": LOSSY_RULES["topk_accept"](2)}
print(f"{'rule':>16} {'beta':>8} {'KL(out||p)':>11} {'TV':>8} {'gap KL':>8} {'gap TV':>8}")
for name, rule in rules.items():
    c = certify(rule, p, q)
    print(f"{name:>16} {c.beta:8.4f} {c.kl_out_p:11.6f} {c.tv:8.4f} {c.gap_kl:8.4f} {c.gap_tv:8.4f}")
    assert c.gap_kl >= -1e-9 and c.gap_tv >= -1e-9
assert abs(certify(mentored(0.8), p, q).gap_kl) < 1e-9

curve = frontier_curve(p, q, np.linspace(0, 1, 6 if QUICK else 21), "kl")
print("beta*_KL on a grid:", np.round(curve.beta, 4))
assert np.all(np.diff(curve.beta) >= -1e-12)

# %% [markdown]
# The two frontiers with every rule of the table at its exact (divergence, acceptance): no rule lies
# above the curve, and a rule on it (lenience and mentored on TV, mentored on KL) is optimal at its
# own divergence.  Lenience and mentored decoding coincide on the TV panel (hollow circles mark lenience);
# the KL panel stops at 0.45 nats, past every rule (the frontier reaches 1 at KL(q || p) = 1.25).

# %%
budgets = {"tv": np.linspace(0, 0.7, 29 if QUICK else 141), "kl": np.linspace(0, 0.45, 31 if QUICK else 151)}
certs = {name: certify(rule, p, q) for name, rule in rules.items()}
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
markers = dict(zip(rules, ("o", "s", "^", "v", "D", "X")))
for ax, kind, xlabel in ((axes[0], "tv", "TV(out, p)"), (axes[1], "kl", "KL(out || p)  [nats]")):
    front = frontier_curve(p, q, budgets[kind], kind)
    ax.plot(front.budgets, front.beta, "k-", lw=2, label="frontier beta*(eps)")
    for name, c in certs.items():
        x = c.tv if kind == "tv" else c.kl_out_p
        hollow = name.startswith("lenience")
        ax.plot([x], [c.beta], ls="none", marker=markers[name], ms=11 if hollow else 6,
                mfc="none" if hollow else "0.45",
                mec="k", label=name, zorder=3)
    ax.set_xlabel(xlabel)
    ax.set_title(f"{'TV' if kind == 'tv' else 'KL'} budget eps")
    ax.grid(alpha=0.3)
axes[0].set_ylabel("acceptance beta (probability)")
axes[1].legend(fontsize=8, frameon=False, loc="lower right")
fig.suptitle("Lossy rules against the optimal acceptance-divergence frontier (pair E1)")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Over several iterations
# A token's law given its prefix mixes draft positions (law out) and bonus positions (law p), so
# per-token divergences only give **upper bounds** on the sequence divergence.  The exact law of the
# first n tokens, over as many iterations as it takes, comes from the exact engine.

# %%
target, draft = s.random_model(3, seed=0), s.random_model(3, seed=1)
seq = certify_sequence(cactus(0.05), target, draft, L=2, n=2 if QUICK else 3)
print(f"n = {seq.n}: KL(Out||P) = {seq.kl_out_p:.6f} <= bound {seq.kl_out_p_bound:.6f};  "
      f"TV = {seq.tv:.6f} <= bound {seq.tv_bound:.6f}")
assert seq.kl_out_p <= seq.kl_out_p_bound + 1e-12 and seq.tv <= seq.tv_bound + 1e-12
assert abs(seq.stream.sum() - 1) < 1e-12

# %% [markdown]
# ## Acceptance certificates for relaxed greedy rules
# A deterministic rule accepts x when p_x clears a threshold.  D*(b, x) is the smallest divergence
# from a reference b (here the draft, x = its argmax) at which some target rejects x: **any target
# closer than D* accepts**.  Anchors (docs/theory.md §12), b = (0.5, 0.3, 0.15, 0.05), as KL(p||b) /
# KL(b||p) / TV: strict greedy 0.025732 / 0.025267 / 0.1.

# %%
b = np.array([0.5, 0.3, 0.15, 0.05])
for name, rule in (("strict greedy", strict_greedy()), ("additive 0.05", additive_greedy(0.05)),
                   ("multiplicative 0.5", multiplicative_greedy(0.5)), ("top-2", top_m(2))):
    r = [acceptance_radius(rule, b, 0, k) for k in ("kl", "kl_reverse", "tv")]
    print(f"{name:>18}: " + " / ".join(f"{x:.6f}" for x in r))
assert np.allclose([acceptance_radius(strict_greedy(), b, 0, k) for k in ("kl", "kl_reverse", "tv")],
                   [0.025732, 0.025267, 0.1], atol=1e-6)

radius_rules = (("strict greedy", strict_greedy()), ("additive 0.05", additive_greedy(0.05)),
                ("multiplicative 0.5", multiplicative_greedy(0.5)), ("top-2", top_m(2)))
kinds = (("kl", "KL(p || b)", "////"), ("kl_reverse", "KL(b || p)", ".."), ("tv", "TV(p, b)", ""))
fig, ax = plt.subplots(figsize=(6.5, 3.8))
width = 0.27
for j, (kind, label, hatch) in enumerate(kinds):
    radii = [acceptance_radius(rule, b, 0, kind) for _, rule in radius_rules]
    ax.bar(np.arange(len(radius_rules)) + (j - 1) * width, radii, width, color=("white", "0.75", "0.35")[j],
           edgecolor="k", hatch=hatch, label=label)
ax.set_xticks(np.arange(len(radius_rules)), [name for name, _ in radius_rules])
ax.set_ylabel("certified radius D* (nats for KL)")
ax.set_title("Any target closer than D* to b accepts b's argmax")
ax.legend(fontsize=8, frameon=False)
plt.show()

# the closed form matches an independent convex solve over the rejection set
num = acceptance_radius_numeric(strict_greedy(), b, 0, "kl")
print(f"numerical radius {num.value:.6f}, attained at p = {np.round(num.p_reject, 4)}")
assert abs(num.value - acceptance_radius(strict_greedy(), b, 0, "kl")) < 1e-5

# %% [markdown]
# Margin alone already certifies: with Delta = b_(1) - b_(2), KL(p||b) < -1/2 log(1 - Delta^2)
# guarantees acceptance by strict greedy, whatever the rest of b (anchor 0.020411 at Delta = 0.2).

# %%
print(f"margin-only bound at Delta = 0.2: {margin_radius(0.2, 'kl'):.6f}; at b above (Delta = 0.2): "
      f"exact radius {acceptance_radius(strict_greedy(), b, 0, 'kl'):.6f}")
assert abs(margin_radius(0.2, "kl") - 0.020411) < 1e-6
assert margin_radius(0.2, "kl") <= acceptance_radius(strict_greedy(), b, 0, "kl")
