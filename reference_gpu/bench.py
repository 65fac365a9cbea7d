"""Benchmark: Triton chain verification vs the pure-torch reference vs transformers'
``_speculative_sampling``, side by side in one run (``python -m reference_gpu.bench``).

Byte model (the bytes the design must read, s = bytes per probability element):
  token: per request the residual (or bonus) row p_tau and q_tau plus the Exp(1) noise row:
         B (2 V s + 8 V)      (the L acceptance tests read O(L) scalars);
  block: per request rows p_1..p_{L-1}, q_1..q_{L-1} for Z_i, plus p_tau, q_tau and the noise row:
         B (2 L V s + 8 V).
Achieved bandwidth = bytes / kernel time, reported as a fraction of the device's peak memory
bandwidth (table below; "?" when unknown).  Ratios are timings measured in the same run.
On a machine without CUDA only the reference (and transformers) run, at small sizes.
Options: ``--quick`` (fewer sizes), ``--modes token,block``.
"""
from __future__ import annotations

import argparse
import sys
import platform
import time

import torch

from . import api

PEAK_BW = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.0e12, "L40S": 0.864e12, "RTX 4090": 1.0e12}


def peak_bandwidth(name: str):
    for k, v in PEAK_BW.items():
        if k in name:
            return v
    return None


def _time(fn, device, reps=20):
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / 1e3 / reps
    t = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t) / reps


def _transformers_fn(ids, q_logits, p_logits, lens):
    try:
        from transformers.generation.utils import _speculative_sampling
    except Exception:
        return None
    B = len(lens)

    def run():
        for b in range(B):  # transformers verifies one request at a time
            _speculative_sampling(candidate_input_ids=ids[b:b + 1], candidate_logits=q_logits[b:b + 1],
                                  candidate_length=lens[b], new_logits=p_logits[b:b + 1])
    return run


def bench_case(B, L, V, mode, device, dtype, reps):
    g = torch.Generator(device=device).manual_seed(B * 1000 + L)
    lens = [L] * B
    N = B * L
    p_logits = torch.randn(B, L + 1, V, device=device, generator=g) * 2
    q_logits = torch.randn(B, L, V, device=device, generator=g) * 2
    p = torch.softmax(p_logits, -1).reshape(B * (L + 1), V).to(dtype)
    q = torch.softmax(q_logits, -1).reshape(N, V).to(dtype)
    ids = torch.multinomial(q.float(), 1, generator=g)[:, 0].to(torch.int32)
    cu = torch.arange(1, B + 1, dtype=torch.int32, device=device) * L
    noise = api.draw_chain_noise(lens, V, seeds=list(range(B)), device=device)
    s = p.element_size()
    nbytes = B * (2 * V * s + 8 * V) if mode == "token" else B * (2 * L * V * s + 8 * V)
    row = {"B": B, "L": L, "V": V, "mode": mode}
    run_ref = lambda: api.verify_chain(ids, cu, q, p, noise, mode, backend="torch", validate=False)
    row["ref_s"] = _time(run_ref, device, reps)
    if device == "cuda":
        run_k = lambda: api.verify_chain(ids, cu, q, p, noise, mode, backend="triton", validate=False)
        row["kernel_s"] = _time(run_k, device, reps)
        row["GB/s"] = nbytes / row["kernel_s"] / 1e9
    if mode == "token":
        tf = _transformers_fn(ids.reshape(B, L).to(torch.int64), q_logits, p_logits, lens)
        if tf is not None:
            row["hf_s"] = _time(tf, device, max(2, reps // 5))
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--modes", default="token,block")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--json", default=None, metavar="PATH",
                    help="also write the rows as JSON (read by paper_figs/fig_kernel_bandwidth.py)")
    args = ap.parse_args(argv)
    rows = []
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = getattr(torch, args.dtype)
    name = torch.cuda.get_device_name() if cuda else platform.processor() or platform.machine()
    bw = peak_bandwidth(name) if cuda else None
    print(f"# reference_gpu.bench on {name} ({device}); torch {torch.__version__}; dtype {args.dtype}")
    if not cuda:
        print("# no CUDA device: Triton kernels not run; timing the pure-torch reference (small sizes)")
        Bs, Ls, Vs = [1, 8], [4], [32768]
    elif args.quick:
        Bs, Ls, Vs = [1, 32, 128], [4], [32768, 131072]
    else:
        Bs, Ls, Vs = [1, 8, 32, 128], [4, 8], [32768, 131072]
    reps = 20 if cuda else 3
    hdr = f"{'mode':>6} {'B':>4} {'L':>2} {'V':>7} {'kernel_us':>10} {'GB/s':>8} {'%peak':>6} {'ref_us':>10} {'ref/kern':>9} {'hf_us':>10} {'hf/kern':>8}"
    print(hdr)
    for mode in args.modes.split(","):
        for V in Vs:
            for L in Ls:
                for B in Bs:
                    r = bench_case(B, L, V, mode, device, dtype, reps)
                    rows.append(r)
                    k = r.get("kernel_s")
                    f = lambda x: f"{x * 1e6:10.1f}" if x is not None else f"{'-':>10}"
                    ratio = lambda x: f"{x / k:8.2f}x" if (x is not None and k) else f"{'-':>9}"
                    pct = f"{100 * r['GB/s'] * 1e9 / bw:6.1f}" if (k and bw) else f"{'?' if k else '-':>6}"
                    gbs = f"{r['GB/s']:8.1f}" if k else f"{'-':>8}"
                    print(f"{mode:>6} {B:>4} {L:>2} {V:>7} {f(k)} {gbs} {pct} {f(r['ref_s'])} {ratio(r['ref_s'])} "
                          f"{f(r.get('hf_s'))} {ratio(r.get('hf_s'))}", flush=True)
    print("# byte model: token B(2Vs+8V), block B(2LVs+8V); hf = transformers _speculative_sampling "
          "(one request per call, softmax from logits included)")
    if args.json:
        import json
        payload = {"device": name, "cuda": cuda, "peak_gbs": bw / 1e9 if bw else None,
                   "command": "python -m reference_gpu.bench " + " ".join(argv if argv is not None else sys.argv[1:]),
                   "dtype": args.dtype, "rows": rows}
        with open(args.json, "w") as fh:
            json.dump(payload, fh, indent=1, default=float)
        print(f"# rows written to {args.json}")


if __name__ == "__main__":
    main()
