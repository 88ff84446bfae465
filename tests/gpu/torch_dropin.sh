#!/usr/bin/env bash
# tcuda under torch (tcuda.torch.install()) against native torch, section by
# section (tests/gpu/torch_dropin.py). SKIPPED without torch or a GPU.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tools/torch_gpu.sh"
export TCUDA_TORCH_CACHE="${TCUDA_BINARY_DIR}/torch-glue"
exec "$py" "$HERE/torch_dropin.py" --cli "${TCUDA_CLI:?}"
