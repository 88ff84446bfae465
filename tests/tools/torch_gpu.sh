# Sourced by the GPU tests that run Python against torch: sets $py, ends
# the test as SKIPPED (77) without torch or a usable GPU, or as a failure
# where scripts/gpu-check promises torch (TCUDA_EXPECT_TORCH=1), and points
# the tcuda package at this build's library.
py=${PYTHON:-python3}
if ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
  [ "${TCUDA_EXPECT_TORCH:-0}" = 1 ] && { echo "FAIL: TCUDA_EXPECT_TORCH=1 but no torch with a usable GPU"; exit 1; }
  echo "SKIPPED: no torch with a usable GPU"; exit 77
fi
export TCUDA_LIBRARY="${TCUDA_BINARY_DIR:?}/src/libtcuda.so" PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="${TCUDA_SOURCE_DIR:?}/python${PYTHONPATH:+:$PYTHONPATH}"
