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
# # GPU verification kernels: the reference, the kernel and the exact law
#
# `reference_gpu` verifies batches of drafts in the vLLM ragged layout (docs/theory.md §11).  All the
# randomness is an input tensor, so the pure-torch reference and the Triton kernel are bit-for-bit
# comparable, and the reference can be checked against the exact law from `specsim`.
#
# **This notebook runs without a GPU.**  The Triton kernel runs under Triton's CPU interpreter,
# which must be switched on (`TRITON_INTERPRET=1`) *before* Triton is imported; it is slow, so only
# one tiny call is made.  Timings here say nothing about GPU speed (see `python benchmarks/verify_kernels.py`
# on a GPU machine).  Set `SPECSIM_QUICK=1` for small sizes.

# %%
import os

os.environ.setdefault("TRITON_INTERPRET", "1")   # before anything imports triton

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import specsim as s  # noqa: E402
from reference_gpu import api  # noqa: E402
from specsim.exact import output_law  # noqa: E402

QUICK = bool(os.environ.get("SPECSIM_QUICK"))
print("CUDA available:", torch.cuda.is_available(), "| Triton usable on CPU:", api.triton_usable(torch.device("cpu")))

# %% [markdown]
# ## A ragged batch from a specsim model pair
# Every request drafts L tokens from the draft model; its rows are the prefix-dependent target and
# draft rows along that draft.  Request b owns draft entries [cu[b-1], cu[b]) (inclusive cumsum)
# and L + 1 target rows, the last being the bonus row.

# %%
V, L = 4, 3
B = 2000 if QUICK else 20000
target, draft = s.random_model(V, seed=0, name="target"), s.random_model(V, seed=1, name="draft")
drafts, Qx, P, Q = s.chain().arrays(target, draft, L)        # every draft with its probability
rng = np.random.default_rng(0)
pick = rng.choice(Qx.size, size=B, p=Qx / Qx.sum())          # B drafts sampled from the draft model

ids = torch.as_tensor(drafts[pick].ravel(), dtype=torch.int32)
cu = torch.arange(1, B + 1, dtype=torch.int32) * L
q_rows = torch.as_tensor(Q[pick].reshape(B * L, V))
p_rows = torch.as_tensor(P[pick].reshape(B * (L + 1), V))
noise = api.draw_chain_noise([L] * B, V, seeds=list(range(B)))
print(ids.shape, cu[:3].tolist(), q_rows.shape, p_rows.shape)

# %% [markdown]
# ## The reference agrees with the exact law
# E[tau] from the reference over B sampled drafts vs the exact E[tau] from the exact engine; the
# check allows 6 standard errors (false-alarm rate about 2e-9).

# %%
taus = {}
for mode, verifier in (("token", s.token), ("block", s.block)):
    res = api.verify_chain(ids, cu, target_probs=p_rows, draft_probs=q_rows, noise=noise, mode=mode, backend="torch")
    tau = res.num_accepted.numpy().astype(float)
    taus[mode] = tau
    exact = s.expected_accepted(verifier, target, draft, L)
    se = tau.std(ddof=1) / np.sqrt(B)
    print(f"{mode:>5}: reference E[tau] = {tau.mean():.4f} +- {se:.4f}; exact {exact:.4f}")
    assert abs(tau.mean() - exact) < 6 * se
    # output format: tau accepted drafts, one more token, then -1 padding
    out = res.output_token_ids.numpy()
    assert np.all((out >= 0).sum(axis=1) == tau + 1)

# %% [markdown]
# The whole law of tau, not only its mean: the exact P(tau = k) from the exact engine (bars), the
# frequencies over the B requests of the torch reference, and those of the Triton kernel over the first
# requests (the CPU interpreter takes about 25 ms a request; on the same noise each of its results equals
# the reference's, which is asserted).  Error bars: +-2 binomial standard errors.

# %%
n_kernel = 60 if QUICK else 400
ks = np.arange(L + 1)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
for ax, (mode, verifier) in zip(axes, (("token", s.token), ("block", s.block))):
    at_least = output_law(verifier, target, draft, L).accepted_at_least       # P(tau >= k), k = 0..L
    exact_law = at_least - np.append(at_least[1:], 0.0)
    first_noise = api.draw_chain_noise([L] * n_kernel, V, seeds=list(range(n_kernel)))   # the first requests' noise
    ker = api.verify_chain(ids[: n_kernel * L], cu[:n_kernel], target_probs=p_rows[: n_kernel * (L + 1)],
                           draft_probs=q_rows[: n_kernel * L], noise=first_noise, mode=mode, backend="triton")
    ker_tau = ker.num_accepted.numpy()
    assert np.array_equal(ker_tau, taus[mode][:n_kernel].astype(ker_tau.dtype)), mode     # bit for bit
    ax.bar(ks, exact_law, 0.6, color="0.85", edgecolor="k", hatch="//", label="exact law (specsim)")
    for tau, n, dx, fmt, label in ((taus[mode], B, -0.1, "ko", f"torch reference, {B} requests"),
                                   (ker_tau, n_kernel, 0.1, "ks", f"Triton kernel, {n_kernel} requests")):
        freq = np.bincount(tau.astype(int), minlength=L + 1) / n
        ax.errorbar(ks + dx, freq, yerr=2 * np.sqrt(freq * (1 - freq) / n), fmt=fmt, ms=5, capsize=3,
                    mfc="k" if fmt == "ko" else "white", label=label)
    freq = np.bincount(taus[mode].astype(int), minlength=L + 1) / B
    assert np.all(np.abs(freq - exact_law) <= 6 * np.sqrt(exact_law * (1 - exact_law) / B) + 1e-12), mode
    ax.set_xticks(ks)
    ax.set_xlabel("accepted draft tokens tau")
    ax.set_title(f"{mode} verification", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
axes[0].set_ylabel("probability")
axes[0].legend(fontsize=8, frameon=False)
fig.suptitle(f"Law of tau: the kernel and its reference vs the exact engine (V = {V}, L = {L})")
fig.tight_layout()
plt.show()

# %% [markdown]
# An exact fact: when the draft is the target (q = p) every draft token is accepted, for any noise.

# %%
same = torch.as_tensor(P[pick][:, :L].reshape(B * L, V))      # q rows := the target's own rows
res = api.verify_chain(ids, cu, target_probs=p_rows, draft_probs=same, noise=noise, mode="token", backend="torch")
assert int(res.num_accepted.min()) == L
print("q = p: every request accepted all", L, "drafts")

# %% [markdown]
# ## One tiny Triton call (CPU interpreter) vs the reference, bit for bit

# %%
small = slice(0, 3)                                           # 3 requests
ids3, cu3 = ids[: 3 * L], cu[small]
q3, p3 = q_rows[: 3 * L], p_rows[: 3 * (L + 1)]
noise3 = api.draw_chain_noise([L] * 3, V, seeds=[0, 1, 2])
for mode in ("token", "block"):
    ref = api.verify_chain(ids3, cu3, target_probs=p3, draft_probs=q3, noise=noise3, mode=mode, backend="torch")
    ker = api.verify_chain(ids3, cu3, target_probs=p3, draft_probs=q3, noise=noise3, mode=mode, backend="triton")
    print(mode, ker.output_token_ids.tolist(), ker.num_accepted.tolist())
    assert torch.equal(ref.output_token_ids, ker.output_token_ids)
    assert torch.equal(ref.num_accepted, ker.num_accepted)
