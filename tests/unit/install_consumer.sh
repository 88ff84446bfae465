#!/usr/bin/env bash
# Install libtcuda into a temporary prefix, then build two tiny consumers:
# one with find_package(tcuda) and one with pkg-config, and run them.
set -euo pipefail
cmake_cmd=${CMAKE_COMMAND:-cmake}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cmake_cmd" --install "${TCUDA_BINARY_DIR:?}" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/tcuda.h"
test -f "$tmp/prefix/lib/cmake/tcuda/tcudaConfig.cmake" || test -f "$tmp/prefix/lib64/cmake/tcuda/tcudaConfig.cmake"
mkdir -p "$tmp/consumer"
cat > "$tmp/consumer/main.c" <<'C'
#include <tcuda.h>
#include <stdio.h>
int main(void) {
  printf("consumer: tcuda %s, available=%d, devices=%d\n", tcuda_version_string(),
         tcuda_is_available(), tcuda_device_count());
  return tcuda_version() == TCUDA_VERSION_MAJOR * 10000 + TCUDA_VERSION_MINOR * 100 + TCUDA_VERSION_PATCH ? 0 : 1;
}
C
cat > "$tmp/consumer/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.24)
project(consumer C)
find_package(tcuda REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE tcuda::tcuda)
add_executable(consumer_static main.c)
target_link_libraries(consumer_static PRIVATE tcuda::tcuda_static)
C
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
"$cmake_cmd" -S "$tmp/consumer" -B "$tmp/cbuild" "${gen[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
"$cmake_cmd" --build "$tmp/cbuild" >/dev/null
"$tmp/cbuild/consumer"
"$tmp/cbuild/consumer_static"
libdir=$(dirname "$(find "$tmp/prefix" -name 'tcuda.pc' | head -1)")
if command -v pkg-config >/dev/null; then
  export PKG_CONFIG_PATH="$libdir"
  cc "$tmp/consumer/main.c" $(pkg-config --cflags --libs tcuda) -Wl,-rpath,"$(pkg-config --variable=libdir tcuda)" -o "$tmp/pc_consumer"
  "$tmp/pc_consumer"
else
  echo "NOTE: pkg-config not installed here: only the CMake consumers were built"
fi
echo PASS
