#!/usr/bin/env bash
# tests/python/diff_torch.py: the same script against torch.cuda and against
# the tcuda package, outputs compared (memory, host memory, devices, events,
# RNG, streams, comm, graphs, NVTX). SKIPPED (77) without torch or a GPU.
# Two interpreters import torch and create NCCL communicators: 300 s is
# generous, and a hang still ends well before CTest's limit.
set -u
py=${PYTHON:-python3}
if ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
  # the GPU machine (scripts/gpu-check) promises torch: missing, it fails
  [ "${TCUDA_EXPECT_TORCH:-0}" = 1 ] && { echo "FAIL: TCUDA_EXPECT_TORCH=1 but no torch with a usable GPU"; exit 1; }
  echo "SKIPPED: no torch with a usable GPU"; exit 77
fi
export TCUDA_LIBRARY="${TCUDA_BINARY_DIR:?}/src/libtcuda.so" PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="${TCUDA_SOURCE_DIR:?}/python${PYTHONPATH:+:$PYTHONPATH}"
exec timeout 300 "$py" "$TCUDA_SOURCE_DIR/tests/python/diff_torch.py"
