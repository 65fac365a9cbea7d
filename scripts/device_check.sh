#!/usr/bin/env bash
# Device check for reference_gpu: GPU tests, then the benchmark, in one go (< 8 min on an H200).
# On a machine without CUDA it runs the CPU-interpreter tests and the reference-only benchmark.
# Usage: bash scripts/device_check.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
has_cuda=$(python -c "import torch; print(int(torch.cuda.is_available()))")
echo "== reference_gpu device check (cuda=$has_cuda) =="
if [ "$has_cuda" = "1" ]; then
  nvidia-smi --query-gpu=name,memory.total --format=csv || true
  # GPU tier: bit-exact parity at real V plus the full kernel suite compiled for the GPU
  timeout 300 python -m pytest -q -x tests/test_reference_gpu_props.py tests/test_reference_gpu_kernels.py \
    tests/test_reference_gpu_exact.py tests/test_reference_gpu_stats.py -p no:cacheprovider
  timeout 150 python -m reference_gpu.bench --quick --json reference_gpu/bench_results.json
else
  timeout 400 python -m pytest -q -x tests/test_reference_gpu_props.py -p no:cacheprovider
  timeout 60 python -m reference_gpu.bench --modes token
fi
echo "== device check done =="
