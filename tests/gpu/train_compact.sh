#!/usr/bin/env bash
# The compact policy in a PyTorch training loop (pluggable allocator):
# physical memory (cudaMemGetInfo) within max(1.10 x, +4 MiB) of torch's
# peak allocated, and losses identical to tcuda's torch-identical policy.
# The step time is printed, not checked: bench/train_compact_torch.py
# judges it. SKIPPED (77) without torch or a GPU.
set -u
. "${TCUDA_SOURCE_DIR:?}/tests/tools/torch_gpu.sh"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
exec timeout 120 "$py" "$TCUDA_SOURCE_DIR/tests/python/train_compact.py" --cycles "${TCUDA_TRAIN_CYCLES:-6}"
