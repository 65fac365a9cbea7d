"""Verification kernels: Triton chain verification against the pure-torch reference and transformers.

Subject: ``reference_gpu.api.verify_chain(..., backend="triton")`` (docs/theory.md §11) in modes
token and block over ragged batches of B requests with L drafts each: row "triton kernel" is the
default path (the vocabulary split into ``splits`` chunks per request when B alone cannot fill the
GPU, ``reference_gpu.kernels.chain_plan``), row "triton kernel, one program per request" forces
``splits=1``; both are timed on the same tensors.  Baseline: the pure-torch
reference with identical semantics (``backend="torch"``), measured in the same run on the same
tensors; in token mode also transformers' ``_speculative_sampling`` (one request per call,
softmax from logits included) when transformers is installed.

Byte model (bytes the design must read, s = bytes per probability element):
  token: per request the residual (or bonus) rows p_tau, q_tau and the Exp(1) noise row: B (2 V s + 8 V);
  block: per request p_1..p_{L-1}, q_1..q_{L-1} for the weights, plus p_tau, q_tau and the noise
         row: B (2 L V s + 8 V).
Achieved bandwidth = bytes / kernel time, reported against the device's peak (:data:`PEAK_BW`).
On CUDA each timed call is 10 back-to-back launches between two CUDA events (time per launch).
Without CUDA the kernel runs only under Triton's CPU interpreter (``TRITON_INTERPRET=1``; its
timings say nothing about GPU speed), else the reference and transformers run alone, at small
sizes.  The JSON (``--json``) is what ``paper_figs/fig_kernel_bandwidth.py`` plots.

    python benchmarks/verify_kernels.py [--quick] [--modes token,block] [--dtype float32] [--json out.json]
"""
from __future__ import annotations

import torch

from reference_gpu import api
from specsim.testing.adapters import find_transformers_speculative_sampling

from _harness import Run  # this folder (Python puts the script's folder on sys.path)

#: Peak memory bandwidth in bytes/s by device-name substring (vendor data sheets).
PEAK_BW = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.0e12, "L40S": 0.864e12, "RTX 4090": 1.0e12}
CUDA_LAUNCHES_PER_CALL = 10


def peak_bandwidth(device_name: str) -> float | None:
    """Peak bytes/s of the first :data:`PEAK_BW` entry contained in ``device_name``, else None."""
    return next((bw for key, bw in PEAK_BW.items() if key in device_name), None)


def cuda_timer(fn):
    """Seconds per launch of ``fn`` over CUDA_LAUNCHES_PER_CALL back-to-back launches (CUDA events)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(CUDA_LAUNCHES_PER_CALL):
        out = fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1e3 / CUDA_LAUNCHES_PER_CALL, out


def model_bytes(mode: str, B: int, L: int, V: int, element_size: int) -> int:
    """Bytes read per batch under the byte model of the module docstring."""
    per_request = 2 * V * element_size + 8 * V if mode == "token" else 2 * L * V * element_size + 8 * V
    return B * per_request


def make_batch(B: int, L: int, V: int, device: str, dtype: torch.dtype):
    """A seeded ragged batch: (ids, cu, q rows, p rows, noise, draft logits, target logits)."""
    g = torch.Generator(device=device).manual_seed(B * 1000 + L)
    p_logits = torch.randn(B, L + 1, V, device=device, generator=g) * 2
    q_logits = torch.randn(B, L, V, device=device, generator=g) * 2
    p = torch.softmax(p_logits, -1).reshape(B * (L + 1), V).to(dtype)
    q = torch.softmax(q_logits, -1).reshape(B * L, V).to(dtype)
    ids = torch.multinomial(q.float(), 1, generator=g)[:, 0].to(torch.int32)
    cu = torch.arange(1, B + 1, dtype=torch.int32, device=device) * L
    noise = api.draw_chain_noise([L] * B, V, seeds=list(range(B)), device=device)
    return ids, cu, q, p, noise, q_logits, p_logits


def sizes(cuda: bool, interpreter: bool, quick: bool):
    """(batch sizes, draft lengths, vocabulary sizes) for this machine."""
    if cuda:
        return ([1, 32, 128], [4], [32768, 131072]) if quick else ([1, 8, 32, 128], [4, 8], [32768, 131072])
    if interpreter or quick:
        return [1, 2], [2], [64]
    return [1, 8], [4], [32768]


def main(argv=None) -> dict:
    def options(ap):
        ap.add_argument("--modes", default="token,block", help="comma-separated modes (token, block)")
        ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])

    run = Run(__file__, __doc__, argv, repeats=20, quick_repeats=5, add_arguments=options)
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    with_kernel = api.triton_usable(torch.device(device))
    interpreter = with_kernel and not cuda
    dtype = getattr(torch, run.args.dtype)
    gpu = torch.cuda.get_device_name() if cuda else None
    peak = peak_bandwidth(gpu) if cuda else None
    run.banner(device=gpu or "cpu", cuda=cuda, peak_gbs=peak / 1e9 if peak else None, dtype=run.args.dtype,
               kernel=("Triton" if cuda else "Triton under the CPU interpreter (timings meaningless)")
               if with_kernel else "not run (no CUDA and TRITON_INTERPRET unset)")
    timer = cuda_timer if cuda else None
    hf = find_transformers_speculative_sampling()
    Bs, Ls, Vs = sizes(cuda, interpreter, run.quick)
    for mode in run.args.modes.split(","):
        if mode not in ("token", "block"):
            raise SystemExit(f"--modes: unknown mode {mode!r} (expected token, block)")
        for V in Vs:
            for L in Ls:
                for B in Bs:
                    ids, cu, q, p, noise, q_logits, p_logits = make_batch(B, L, V, device, dtype)
                    if with_kernel:
                        from reference_gpu.kernels import chain_plan, default_block_v
                    case = f"{mode}, B={B}, L={L}, V={V}"
                    params = {"mode": mode, "B": B, "L": L, "V": V,
                              "bytes": model_bytes(mode, B, L, V, p.element_size())}
                    timed = {} if timer is None else {"timer": timer}
                    ref, _ = run.time(case, "torch reference (baseline)",
                                      lambda: api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise,
                                                               mode=mode, backend="torch", validate=False),
                                      params=params, **timed)
                    if with_kernel:
                        # default (automatic split, the row the figure plots), then splits=1
                        S, bv = chain_plan(B, V, device)
                        for label, splits in (("triton kernel", None), ("triton kernel, one program per request", 1)):
                            kparams = dict(params, splits=S if splits is None else 1,
                                           block_v=bv if splits is None else default_block_v(V))
                            run.time(case, label,
                                     lambda: api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise,
                                                              mode=mode, backend="triton", validate=False,
                                                              splits=splits),
                                     baseline=ref, repeats=min(run.repeats, 3) if interpreter else None,
                                     params=kparams, **timed,
                                     metrics=(lambda t, _: {"GB/s": params["bytes"] / t.median_s / 1e9,
                                                            "peak_fraction": params["bytes"] / t.median_s / peak
                                                            if peak else None}) if cuda else None)
                    if mode == "token" and hf is not None:
                        ids_2d = ids.reshape(B, L).to(torch.int64)

                        def transformers_batch():
                            for b in range(B):  # transformers verifies one request per call
                                hf(candidate_input_ids=ids_2d[b:b + 1], candidate_logits=q_logits[b:b + 1],
                                   candidate_length=L, new_logits=p_logits[b:b + 1])
                        run.time(case, "transformers, per request", transformers_batch, baseline=ref,
                                 repeats=max(2, run.repeats // 5), params=params, **timed)
    return run.finish()


if __name__ == "__main__":
    main()
