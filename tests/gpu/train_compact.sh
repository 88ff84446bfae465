#!/usr/bin/env bash
# The compact policy in a PyTorch training loop (pluggable allocator):
# physical memory (cudaMemGetInfo) within max(1.10 x, +4 MiB) of torch's
# peak allocated, and losses identical to tcuda's torch-identical policy.
# The step time is printed, not checked: bench/train_compact_torch.py
# judges it. SKIPPED (77) without torch or a GPU.
set -u
py=${PYTHON:-python3}
if ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
  # the GPU machine (scripts/gpu-check) promises torch: missing, it fails
  [ "${TCUDA_EXPECT_TORCH:-0}" = 1 ] && { echo "FAIL: TCUDA_EXPECT_TORCH=1 but no torch with a usable GPU"; exit 1; }
  echo "SKIPPED: no torch with a usable GPU"; exit 77
fi
export TCUDA_LIBRARY="${TCUDA_BINARY_DIR:?}/src/libtcuda.so" PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="${TCUDA_SOURCE_DIR:?}/python${PYTHONPATH:+:$PYTHONPATH}"
export CUBLAS_WORKSPACE_CONFIG=:4096:8
exec timeout 120 "$py" "$TCUDA_SOURCE_DIR/tests/python/train_compact.py" --cycles "${TCUDA_TRAIN_CYCLES:-6}"
