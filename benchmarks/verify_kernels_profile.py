"""Where a Triton verification call spends its time on a GPU: device time inside kernels against
the call's wall time (CUDA events around back-to-back calls, as ``benchmarks/verify_kernels.py`` times it).

``benchmarks/verify_kernels.py`` reports bytes / call time; a low fraction of peak bandwidth can mean slow
kernels or a call dominated by host work (launches, small torch ops, a device-to-host sync).  This
script separates the two with ``torch.profiler``: for each case, the summed device time of every
kernel the call launches (per call, by kernel name) and the implied bandwidth of the kernels alone.
Baseline: the call's own CUDA-event time in the same run (ratio = kernel time / call time).

    python benchmarks/verify_kernels_profile.py [--json out.json]     (CUDA only)
"""
from __future__ import annotations

import argparse
import json
import platform
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from reference_gpu import api

from verify_kernels import CUDA_LAUNCHES_PER_CALL, cuda_timer, make_batch, model_bytes, peak_bandwidth

CASES = [("token", 1, 4, 32768), ("token", 128, 4, 131072), ("block", 1, 4, 32768), ("block", 128, 4, 131072)]
CALLS = 20


def profile_case(mode, B, L, V, dtype=torch.float32):
    ids, cu, q, p, noise, _, _ = make_batch(B, L, V, "cuda", dtype)

    def call():
        return api.verify_chain(ids, cu, target_probs=p, draft_probs=q, noise=noise, mode=mode,
                                backend="triton", validate=False)

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    call_s = min(cuda_timer(call)[0] for _ in range(5))
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            call()
        torch.cuda.synchronize()
    kernels = defaultdict(float)
    for ev in prof.key_averages():
        dev_us = getattr(ev, "self_device_time_total", None)
        if dev_us is None:
            dev_us = getattr(ev, "self_cuda_time_total", 0.0)
        if dev_us > 0:
            kernels[ev.key] += dev_us / CALLS / 1e6
    kernel_s = sum(kernels.values())
    nbytes = model_bytes(mode, B, L, V, torch.tensor([], dtype=dtype).element_size())
    return {"mode": mode, "B": B, "L": L, "V": V, "call_s": call_s, "kernel_s": kernel_s,
            "kernel_fraction_of_call": kernel_s / call_s, "call_GBps": nbytes / call_s / 1e9,
            "kernel_GBps": nbytes / kernel_s / 1e9 if kernel_s else None,
            "kernels_per_call_s": dict(sorted(kernels.items(), key=lambda kv: -kv[1]))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("verify_kernels_profile.py needs a CUDA device (it profiles device time)")
    name = torch.cuda.get_device_name()
    peak = peak_bandwidth(name)
    print(f"# {platform.node() or 'machine'}: {name}, torch {torch.__version__}; peak {peak and peak / 1e9} GB/s; "
          f"call time = CUDA events over {CUDA_LAUNCHES_PER_CALL} back-to-back calls (best of 5)")
    rows = []
    for case in CASES:
        r = profile_case(*case)
        rows.append(r)
        print(f"{r['mode']:5s} B={r['B']:<4d} L={r['L']} V={r['V']:<7d} call {r['call_s'] * 1e6:8.1f} us  "
              f"kernels {r['kernel_s'] * 1e6:8.1f} us ({r['kernel_fraction_of_call']:.2f} of the call)  "
              f"GB/s call {r['call_GBps']:7.1f} kernels {r['kernel_GBps'] or 0:7.1f}")
        for k, s in r["kernels_per_call_s"].items():
            print(f"      {s * 1e6:8.1f} us  {k[:100]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "peak_Bps": peak, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
