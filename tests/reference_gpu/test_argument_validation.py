"""Bad input to reference_gpu.api: a ValueError (bad value) or TypeError (bad type) naming the
argument, raised before any kernel runs.

One table per entry point, rows ``(id, change to the valid arguments, exception, message
pattern)``; a new case is one line.  The valid batch: V = 4, two requests with 2 and 1 draft tokens.
"""
from __future__ import annotations

import re

import pytest
import torch

from reference_gpu import api
from specsim._validate import as_rows

V = 4
LENS = [2, 1]
F64 = torch.float64
P_ROWS = torch.tensor([[1, 4, 2, 1], [2, 3, 3, 0], [1, 1, 2, 4],   # request 0: p_0, p_1, bonus
                       [4, 2, 1, 1], [1, 1, 1, 5]], dtype=F64) / 8   # request 1: p_0, bonus
Q_ROWS = torch.tensor([[4, 1, 1, 2], [4, 1, 1, 2], [1, 1, 3, 3]], dtype=F64) / 8
IDS = torch.tensor([0, 3, 2], dtype=torch.int32)
CU = torch.tensor([2, 3], dtype=torch.int32)


def valid_chain_args(device="cpu") -> dict:
    return dict(draft_token_ids=IDS.to(device), cu_num_draft_tokens=CU.to(device), draft_probs=Q_ROWS.to(device),
                target_probs=P_ROWS.to(device), noise=api.draw_chain_noise(LENS, V, seeds=[0, 1], device=device))


def _set(name, index, value):
    """A copy of one valid tensor argument with one entry set to ``value``."""
    def change():
        t = valid_chain_args()[name].clone()
        t[index] = value
        return {name: t}
    return change


def _noise(**fields):
    def change():
        n = valid_chain_args()["noise"]
        parts = dict(uniforms=n.uniforms, etas=n.etas, residual=n.residual, kind=n.kind)
        parts.update({k: f(parts[k]) for k, f in fields.items()})
        return {"noise": api.ChainNoise(**parts)}
    return change


def _q_zero_at_draft():
    q = Q_ROWS.clone()
    q[0] = torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=F64)  # the drafted token 0 has q = 0
    return {"draft_probs": q}


CHAIN = [
    ("negative-id", _set("draft_token_ids", 0, -1), ValueError, "outside 0..3"),
    ("id-equal-to-V", _set("draft_token_ids", 1, V), ValueError, "outside 0..3"),
    ("nan-target", _set("target_probs", (1, 0), float("nan")), ValueError, "NaN"),
    ("unnormalised-target", lambda: {"target_probs": P_ROWS * 1.5}, ValueError, "sums to"),
    ("target-shape", lambda: {"target_probs": P_ROWS[:-1]}, ValueError, "shape"),
    ("target-1-D", lambda: {"target_probs": P_ROWS[0]}, ValueError, "target_probs must be a 2-D tensor"),
    ("draft-shape", lambda: {"draft_probs": Q_ROWS[:, :3]}, ValueError, "shape"),
    ("cu-does-not-end-at-N", lambda: {"cu_num_draft_tokens": torch.tensor([2, 4], dtype=torch.int32)},
     ValueError, "cu_num_draft_tokens ends"),
    ("decreasing-cu", lambda: {"cu_num_draft_tokens": torch.tensor([3, 3, 2], dtype=torch.int32)},
     ValueError, "non-decreasing"),
    ("q-zero-at-drafted-token", _q_zero_at_draft, ValueError, "draft probability 0"),
    ("uniform-equal-to-1", _noise(uniforms=torch.ones_like), ValueError, "[0, 1)"),
    ("noise-shape", _noise(residual=lambda r: r[:1]), ValueError, "shape"),
    ("negative-exponential-noise", _noise(residual=lambda r: -r), ValueError, ">= 0"),
    ("mode", lambda: {"mode": "typical"}, ValueError, "mode must be"),
    ("backend", lambda: {"backend": "cuda"}, ValueError, "backend must be"),
    # issue 12: atol = NaN, negative or >= 1 passed rows summing to 2
    ("atol-nan-with-rows-summing-to-2", lambda: {"target_probs": P_ROWS * 2, "atol": float("nan")},
     ValueError, "atol must be"),
    ("atol-negative", lambda: {"atol": -1e-6}, ValueError, "atol must be finite and in [0, 1)"),
    ("atol-inf", lambda: {"atol": float("inf")}, ValueError, "atol must be"),
    ("atol-one-with-rows-summing-to-2", lambda: {"target_probs": P_ROWS * 2, "atol": 1.0}, ValueError, "atol must be"),
    # wrong types: TypeError naming the argument
    ("integer-probs", lambda: {"target_probs": P_ROWS.to(torch.int32)}, TypeError,
     "target_probs must be float16/bfloat16/float32/float64, got torch.int32"),
    ("target-a-list", lambda: {"target_probs": P_ROWS.tolist()}, TypeError, "target_probs must be a torch.Tensor, got list"),
    ("draft-an-array", lambda: {"draft_probs": Q_ROWS.numpy()}, TypeError, "draft_probs must be a torch.Tensor, got ndarray"),
    ("float-ids", lambda: {"draft_token_ids": IDS.double()}, TypeError,
     "draft_token_ids must have an integer dtype, got torch.float64"),
    ("bool-cu", lambda: {"cu_num_draft_tokens": CU.bool()}, TypeError, "cu_num_draft_tokens must have an integer dtype"),
    ("float32-uniforms", _noise(uniforms=lambda u: u.float()), TypeError,
     "noise.uniforms must be a float64 tensor (24-bit float32 uniforms bias P(u < a)), got torch.float32"),
    ("etas-a-list", _noise(etas=lambda e: e.tolist()), TypeError, "noise.etas must be a float64 tensor"),
    ("float16-exponential-noise", _noise(residual=lambda r: r.half()), TypeError,
     "noise.residual (exponential) must be a float32 or float64 tensor, got torch.float16"),
    ("tree-noise-for-a-chain", lambda: {"noise": api.draw_tree_noise(LENS, V, seeds=[0, 1])}, TypeError,
     "noise must be a ChainNoise (see draw_chain_noise), got TreeNoise"),
    ("mode-not-a-string", lambda: {"mode": 0}, TypeError, "mode must be one of"),
    ("backend-not-a-string", lambda: {"backend": None}, TypeError, "backend must be 'auto', 'triton' or 'torch', got NoneType"),
    ("validate-a-string", lambda: {"validate": "False"}, TypeError, "validate must be True or False"),
    ("atol-a-string", lambda: {"atol": "1e-6"}, TypeError, "atol must be None or a real number, got str"),
]


@pytest.mark.parametrize("change,exc,pattern", [pytest.param(c, e, m, id=i) for i, c, e, m in CHAIN])
def test_verify_chain_rejects_bad_input_before_any_kernel_runs(change, exc, pattern, monkeypatch):
    from reference_gpu import kernels, reference

    def boom(*a, **k):
        raise AssertionError("a kernel ran before validation")
    monkeypatch.setattr(kernels, "launch_chain", boom)
    monkeypatch.setattr(reference, "chain_reference", boom)
    with pytest.raises(exc, match=re.escape(pattern)):
        api.verify_chain(**{**valid_chain_args(), **change()})


def test_valid_chain_arguments_are_accepted():
    r = api.verify_chain(**valid_chain_args(), backend="torch")
    assert r.num_accepted.shape == (2,) and r.output_token_ids.shape == (2, 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_rows_rounded_to_low_precision_are_accepted(dtype):
    # softmax-like rows whose sums miss 1 after rounding (by more than 1e-8) are within the dtype's tolerance
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(P_ROWS.shape, generator=g, dtype=F64), -1).to(dtype)
    q = torch.softmax(torch.randn(Q_ROWS.shape, generator=g, dtype=F64), -1).to(dtype)
    assert float((p.double().sum(-1) - 1).abs().max()) > 1e-8
    r = api.verify_chain(**{**valid_chain_args(), "target_probs": p, "draft_probs": q}, backend="torch")
    assert r.num_accepted.shape == (2,)


def _batch_with_bonus_row(row: torch.Tensor) -> dict:
    """One request with one draft token whose bonus target row is ``row`` (the other rows are
    float64 rows summing to 1)."""
    V = row.numel()
    base = torch.full((V,), 1 / V, dtype=F64).to(row.dtype)
    return dict(draft_token_ids=torch.tensor([0]), cu_num_draft_tokens=torch.tensor([1]),
                draft_probs=base[None], target_probs=torch.stack([base, row]),
                noise=api.draw_chain_noise([1], V, seeds=[0]))


def _row_missing_one_by(V: int, dtype: torch.dtype, offset: float) -> tuple[torch.Tensor, float]:
    """A softmax row rounded to ``dtype`` with ``offset`` added to its largest entry, and how far
    its sum (exact, in float64) actually is from 1 after the rounding."""
    row = torch.softmax(torch.randn(V, generator=torch.Generator().manual_seed(V), dtype=F64), -1)
    row[row.argmax()] += offset
    row = row.to(dtype)
    return row, float(row.to(F64).sum()) - 1.0


@pytest.mark.parametrize("V", [3, 50_000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_row_sum_tolerance_is_the_cores(dtype, V):
    """Rows that sum to 1 only to their dtype's precision (off by more than float64's 1e-8) are
    accepted, a row off by twice the tolerance is refused naming the row and the tolerance, and
    specsim's own check (docs/design.md, "The input contract") gives the same verdict on both."""
    tol = api.default_atol(dtype, V)
    close, close_off = _row_missing_one_by(V, dtype, tol / 2)
    far, far_off = _row_missing_one_by(V, dtype, 2 * tol)
    assert 1e-8 < abs(close_off) <= tol < abs(far_off)

    res = api.verify_chain(**_batch_with_bonus_row(close), backend="torch")
    assert res.num_accepted.shape == (1,)
    assert as_rows(close[None], "row").shape == (1, V)

    with pytest.raises(ValueError, match=re.escape(f"target_probs: row 1 sums to {1 + far_off:.9g}, not 1 "
                                                   f"(tolerance {tol:g})")):
        api.verify_chain(**_batch_with_bonus_row(far), backend="torch")
    with pytest.raises(ValueError, match="sum"):
        as_rows(far[None], "row")


NOISE = [
    ("float-length", lambda: api.draw_chain_noise([1.7], V, seeds=[0]), TypeError, r"num_draft_tokens\[0\] must be an integer"),
    ("negative-length", lambda: api.draw_chain_noise([2, -1], V, seeds=[0, 1]), ValueError, r"num_draft_tokens\[1\] must be >= 0"),
    ("float-V", lambda: api.draw_chain_noise([2], 4.0, seeds=[0]), TypeError, "V must be an integer"),
    ("V1", lambda: api.draw_chain_noise([2], 1, seeds=[0]), ValueError, "V must be >= 2"),
    ("float-seed", lambda: api.draw_chain_noise([2], V, seeds=[0.5]), TypeError, r"seeds\[0\] must be an integer"),
    ("generator-type", lambda: api.draw_chain_noise([2], V, generator=3), TypeError, "generator must be a torch.Generator"),
    ("tree-float-nodes", lambda: api.draw_tree_noise([2.5], V, seeds=[0]), TypeError, "must be an integer"),
    ("tree-atol", lambda: api.verify_tree(torch.tensor([-1, 0]), torch.tensor([-1, 0]), torch.tensor([2]),
                                          target_probs=torch.full((2, V), 0.5, dtype=F64),
                                          draft_probs=torch.full((2, V), 0.5, dtype=F64),
                                          noise=api.draw_tree_noise([2], V, seeds=[0]), atol=float("nan")),
     ValueError, "atol must be"),
    ("kind-not-a-string", lambda: api.draw_chain_noise([2], V, seeds=[0], kind=None), TypeError, "kind must be one of"),
    ("kind", lambda: api.draw_chain_noise([2], V, seeds=[0], kind="gumbel"), ValueError, "kind must be one of"),
    ("dense-target-a-list", lambda: api.verify_chain_dense(torch.tensor([[0]]), target_probs=[[[0.25] * V] * 2],
                                                           draft_probs=torch.full((1, 1, V), 0.25, dtype=F64),
                                                           noise=api.draw_chain_noise([1], V, seeds=[0])),
     TypeError, "target_probs must be a torch.Tensor, got list"),
    ("dense-draft-an-array", lambda: api.verify_chain_dense(torch.tensor([[0]]),
                                                            target_probs=torch.full((1, 2, V), 0.25, dtype=F64),
                                                            draft_probs=torch.full((1, 1, V), 0.25).numpy(),
                                                            noise=api.draw_chain_noise([1], V, seeds=[0])),
     TypeError, "draft_probs must be a torch.Tensor, got ndarray"),
    ("dense-atol", lambda: api.verify_chain_dense(torch.tensor([[0]]),
                                                  target_probs=torch.full((1, 2, V), 0.5, dtype=F64),
                                                  draft_probs=torch.full((1, 1, V), 0.25, dtype=F64),
                                                  noise=api.draw_chain_noise([1], V, seeds=[0]), atol=-1.0),
     ValueError, "atol must be"),
]


@pytest.mark.parametrize("call,exc,pattern", [pytest.param(c, e, m, id=i) for i, c, e, m in NOISE])
def test_noise_and_tolerance_arguments(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


TREE_P = torch.full((3, V), 1 / V, dtype=F64)
TREE_TOKENS, TREE_PARENT = [-1, 0, 1], [-1, 0, 0]
TREE = [
    ("parent-after-child", dict(tokens=[-1, 0, 1], parent=[-1, 2, 0]), ValueError, "parents must precede"),
    ("no-root", dict(tokens=[0, 0, 1]), ValueError, "root"),
    ("token-outside-V", dict(tokens=[-1, 0, 7]), ValueError, "outside"),
    ("cu-does-not-end-at-M", dict(cu=torch.tensor([2])), ValueError, "cu_num_nodes must be"),
    ("target-rows-summing-to-2", dict(p=TREE_P * 2), ValueError, "target_probs: row 0 sums to 2"),
    ("noise-type", dict(noise=None), TypeError, "noise must be a TreeNoise (see draw_tree_noise), got NoneType"),
    ("chain-noise-for-a-tree", dict(noise=api.draw_chain_noise([3], V, seeds=[0])), TypeError,
     "noise must be a TreeNoise (see draw_tree_noise), got ChainNoise"),
    ("float-tokens", dict(tokens=torch.tensor([-1.0, 0.0, 1.0])), TypeError, "tokens must have an integer dtype"),
    ("float-cu", dict(cu=torch.tensor([3.0])), TypeError, "cu_num_nodes must have an integer dtype"),
    ("target-a-list", dict(p=TREE_P.tolist()), TypeError, "target_probs must be a torch.Tensor, got list"),
    ("integer-draft", dict(q=TREE_P.to(torch.int64)), TypeError,
     "draft_probs must be float16/bfloat16/float32/float64, got torch.int64"),
    ("float32-uniforms", dict(noise=api.TreeNoise(torch.rand(3), torch.rand(1, V).double(), "exponential")), TypeError,
     "noise.uniforms must be a float64 tensor"),
    ("backend-not-a-string", dict(backend=1), TypeError, "backend must be"),
]


@pytest.mark.parametrize("case,exc,pattern", [pytest.param(c, e, m, id=i) for i, c, e, m in TREE])
def test_verify_tree_rejects_bad_input(case, exc, pattern):
    args = dict(tokens=torch.as_tensor(case.get("tokens", TREE_TOKENS)),
                parent=torch.as_tensor(case.get("parent", TREE_PARENT)),
                cu_num_nodes=case.get("cu", torch.tensor([3], dtype=torch.int32)),
                target_probs=case.get("p", TREE_P), draft_probs=case.get("q", TREE_P),
                noise=case.get("noise", api.draw_tree_noise([3], V, seeds=[0])), backend=case.get("backend", "auto"))
    with pytest.raises(exc, match=re.escape(pattern)):
        api.verify_tree(**args)
