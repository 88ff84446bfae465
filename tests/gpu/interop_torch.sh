#!/usr/bin/env bash
# A PyTorch training loop on torch's allocator and on tcuda (pluggable
# allocator): identical losses bit for bit; RESULT lines for peak reserved
# memory and step time. SKIPPED (77) without torch or a GPU.
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
exec timeout 120 "$py" "$TCUDA_SOURCE_DIR/tests/python/train_loop.py" --steps "${TCUDA_TRAIN_STEPS:-300}"
