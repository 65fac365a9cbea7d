#!/usr/bin/env bash
# Device check for reference_gpu: the GPU tests, then the kernel benchmark, in one go (< 8 min on an H200).
# On a machine without CUDA it runs the CPU-interpreter tests and the reference-only benchmark.
# Usage (from anywhere): bash scripts/device_check.sh [RESULTS_JSON]
#   RESULTS_JSON defaults to benchmarks/results/kernels.json on a GPU (what paper_figs/fig_kernel_bandwidth.py
#   plots) and to benchmarks/results/kernels_cpu.json without one (so a CPU run never replaces GPU results).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
has_cuda=$(python -c "import torch; print(int(torch.cuda.is_available()))")
echo "== reference_gpu device check (cuda=$has_cuda) =="
if [ "$has_cuda" = "1" ]; then
  nvidia-smi --query-gpu=name,memory.total --format=csv || true
  # GPU tier: bit-exact parity at real V plus the full kernel suite compiled for the GPU.  A failing
  # test does not stop the benchmark (one lease should bring back both); the exit status is the tests'.
  tests_rc=0
  timeout 300 python -m pytest -q -rfE --durations=10 tests/reference_gpu -p no:cacheprovider || tests_rc=$?
  results="${1:-benchmarks/results/kernels.json}"
  timeout 150 python benchmarks/verify_kernels.py --quick --json "$results"
  # where the call's time goes: device time inside the kernels against the call's wall time
  timeout 120 python benchmarks/verify_kernels_profile.py --json "$(dirname "$results")/kernels_profile.json"
  echo "== device check done: results in $results; tests exit status $tests_rc =="
  exit "$tests_rc"
else
  timeout 400 python -m pytest -q -x tests/reference_gpu/test_props.py -p no:cacheprovider
  results="${1:-benchmarks/results/kernels_cpu.json}"
  timeout 60 python benchmarks/verify_kernels.py --modes token --json "$results"
fi
echo "== device check done: results in $results =="
