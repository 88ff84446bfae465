#!/usr/bin/env bash
# The Python package's ctypes prototypes against include/tcuda.h
# (tests/python/check_bindings.py): every exported function bound with the
# header's types or listed as deliberately unbound. SKIPPED (77) without python3.
set -u
src="${TCUDA_SOURCE_DIR:?}"
bin="${TCUDA_BINARY_DIR:?}"
py=""
for c in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$c" > /dev/null 2>&1; then py="$c"; break; fi
done
[ -n "$py" ] || { echo "SKIPPED: no python3"; exit 77; }
export TCUDA_LIBRARY="$bin/src/libtcuda.so"
[ -f "$TCUDA_LIBRARY" ] || { echo "FAIL: $TCUDA_LIBRARY not built"; exit 1; }
san=$(ldd "$TCUDA_LIBRARY" 2> /dev/null | awk '/libasan|libubsan/ {print $3}' | tr '\n' ' ')
if [ -n "${san// /}" ]; then
  export LD_PRELOAD="$san${LD_PRELOAD:+ $LD_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$py" "$src/tests/python/check_bindings.py" --header "$src/include/tcuda.h"
