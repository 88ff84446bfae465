#!/usr/bin/env bash
# tcuda rand against torch, byte for byte (rng_torch_compare.py). Skips
# (77) without torch or a GPU.
set -uo pipefail
py=${PYTHON:-python3}
"$py" -c "import torch" 2>/dev/null || { echo "SKIPPED: python3 has no torch"; exit 77; }
exec "$py" "$(dirname "$0")/rng_torch_compare.py" "${TCUDA_CLI:?}"
