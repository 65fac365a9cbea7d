#!/usr/bin/env bash
# Run the engine properties and layouts against real vLLM 0.33.0 on this machine, in a throwaway
# venv that sees the project's environment (system site packages) so nothing is added to it.
# Usage: bash scripts/vllm_check.sh [VENV_DIR]   (about 3 min of tests under the Triton interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-/tmp/specsim_vllm_venv}"
# a venv that sees the project's interpreter (not the base one a venv's --system-site-packages links)
source scripts/engine_check_venv.sh
engine_venv "$VENV"
# --no-deps: vLLM's own requirements would pull a CUDA torch; these are what `import vllm` needs
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps vllm==0.33.0 cbor2 aiohttp \
    multidict yarl propcache aiohappyeyeballs aiosignal frozenlist openai-harmony openai pybase64 \
    cachetools msgspec uvloop xgrammar apache-tvm-ffi fastapi starlette opentelemetry-api \
    partial-json-parser llguidance
if command -v nvidia-smi >/dev/null 2>&1; then unset TRITON_INTERPRET; else export TRITON_INTERPRET=1; fi
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/testing/test_vllm_real.py
