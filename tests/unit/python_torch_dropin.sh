#!/usr/bin/env bash
# tcuda.torch without a GPU (tests/python/test_torch_dropin_cpu.py): refusals,
# cache directory, the TCUDA_TORCH_ALLOCATOR hook, and the glue compiling
# against the installed torch. SKIPPED (77) without a python3 with pytest,
# and when part of it could not run (no torch or no CUDA toolkit: the
# compile test) and nothing failed. TCUDA_TORCH_PYTHON picks the
# interpreter that has torch.
set -u
src="${TCUDA_SOURCE_DIR:?}"
bin="${TCUDA_BINARY_DIR:?}"
py=""
for c in ${TCUDA_TORCH_PYTHON:-} ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$c" > /dev/null 2>&1 && "$c" -c "import pytest" 2> /dev/null; then py="$c"; break; fi
done
[ -n "$py" ] || { echo "SKIPPED: no python3 with pytest (apt-get install python3-pytest)"; exit 77; }
export TCUDA_LIBRARY="$bin/src/libtcuda.so"
[ -f "$TCUDA_LIBRARY" ] || { echo "FAIL: $TCUDA_LIBRARY not built"; exit 1; }
if ldd "$TCUDA_LIBRARY" 2> /dev/null | grep -q "libasan\|libtsan"; then
  echo "SKIPPED: a sanitizer build (the glue would load an instrumented libtcuda into torch)"; exit 77
fi
[ -d /usr/local/cuda/bin ] && export PATH="$PATH:/usr/local/cuda/bin"
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
export TCUDA_TORCH_TEST_CACHE="$bin/torch-glue-test"
out=$("$py" -m pytest -q -rs -p no:cacheprovider "$src/tests/python/test_torch_dropin_cpu.py" 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || exit 1
if echo "$out" | grep -q "SKIPPED"; then echo "SKIPPED part: see the reasons above"; exit 77; fi
exit 0
