#!/usr/bin/env bash
# tcuda rand against torch, byte for byte (rng_torch_compare.py). Skips
# (77) without torch or a GPU, except where TCUDA_EXPECT_TORCH=1 (the GPU
# machine, scripts/gpu-check) says torch is there: then its absence fails.
set -uo pipefail
py=${PYTHON:-python3}
if ! "$py" -c "import torch" 2>/dev/null; then
  [ "${TCUDA_EXPECT_TORCH:-0}" = 1 ] && { echo "FAIL: TCUDA_EXPECT_TORCH=1 but $py has no torch"; exit 1; }
  echo "SKIPPED: python3 has no torch"; exit 77
fi
exec "$py" "$(dirname "$0")/rng_torch_compare.py" "${TCUDA_CLI:?}"
