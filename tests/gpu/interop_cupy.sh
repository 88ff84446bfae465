#!/usr/bin/env bash
# A CuPy workload on CuPy's memory pool and on tcuda (CFunctionAllocator):
# identical results; a RESULT line for the run time. SKIPPED (77) without
# CuPy or a GPU.
set -u
py=${PYTHON:-python3}
"$py" -c "import cupy, sys; sys.exit(0 if cupy.cuda.runtime.getDeviceCount() > 0 else 1)" 2> /dev/null \
  || { echo "SKIPPED: no CuPy with a usable GPU"; exit 77; }
export TCUDA_LIBRARY="${TCUDA_BINARY_DIR:?}/src/libtcuda.so" PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="${TCUDA_SOURCE_DIR:?}/python${PYTHONPATH:+:$PYTHONPATH}"
exec timeout 120 "$py" "$TCUDA_SOURCE_DIR/tests/python/cupy_workload.py"
