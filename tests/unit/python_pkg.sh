#!/usr/bin/env bash
# The Python package on CPU (tests/python/test_cpu.py, test_whatif.py) against the libtcuda
# just built. SKIPPED (77) when no python3 has pytest (Debian: python3-pytest).
set -u
src="${TCUDA_SOURCE_DIR:?}"
bin="${TCUDA_BINARY_DIR:?}"
py=""
for c in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$c" > /dev/null 2>&1 && "$c" -c "import pytest" 2> /dev/null; then py="$c"; break; fi
done
[ -n "$py" ] || { echo "SKIPPED: no python3 with pytest (apt-get install python3-pytest)"; exit 77; }
export TCUDA_LIBRARY="$bin/src/libtcuda.so"
[ -f "$TCUDA_LIBRARY" ] || { echo "FAIL: $TCUDA_LIBRARY not built"; exit 1; }
# A sanitizer build: Python must load ASan's runtime first. LSan is off
# because the interpreter itself keeps memory at exit.
san=$(ldd "$TCUDA_LIBRARY" 2> /dev/null | awk '/libasan|libubsan/ {print $3}' | tr '\n' ' ')
if [ -n "${san// /}" ]; then
  export LD_PRELOAD="$san${LD_PRELOAD:+ $LD_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
export PYTHONPATH="$src/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONDONTWRITEBYTECODE=1
exec "$py" -m pytest -q -p no:cacheprovider "$src/tests/python/test_cpu.py" "$src/tests/python/test_whatif.py"
