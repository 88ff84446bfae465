#!/usr/bin/env bash
# Install libtcuda into a temporary prefix, then build README.md's example the
# ways README.md gives (its CMake project with tcuda::tcuda and
# tcuda::tcuda_static, and its pkg-config command lines), taking the source and
# the commands from README.md so the two cannot drift. Each program must link
# from C, start without LD_LIBRARY_PATH, and print what the example promises:
# without a GPU, TCUDA_ERROR_NOT_AVAILABLE from the RNG, stream and allocator
# calls; with one, the allocation and the out-of-range device's error.
set -euo pipefail
readme="${TCUDA_SOURCE_DIR:?}/README.md"
cmake_cmd=${CMAKE_COMMAND:-cmake}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$cmake_cmd" --install "${TCUDA_BINARY_DIR:?}" --prefix "$tmp/prefix" > /dev/null
pc=$(find "$tmp/prefix" -name tcuda.pc | head -1)
[ -n "$pc" ] || fail "tcuda.pc not installed"
libdir=$(dirname "$(dirname "$pc")")
test -f "$tmp/prefix/include/tcuda.h" || fail "tcuda.h not installed"
test -f "$libdir/cmake/tcuda/tcudaConfig.cmake" || fail "tcudaConfig.cmake not installed"
# The licence python/pyproject.toml declares, in the tree and installed.
grep -q 'BSD-3-Clause' "$TCUDA_SOURCE_DIR/python/pyproject.toml" \
  || fail "python/pyproject.toml declares another licence"
for f in "$TCUDA_SOURCE_DIR/LICENSE" "$tmp/prefix/share/doc/tcuda/LICENSE"; do
  grep -q '^BSD 3-Clause License$' "$f" && grep -q '^Copyright (c) 2026, the tcuda authors$' "$f" \
    || fail "$f is not the BSD-3-Clause licence of the tcuda authors"
done

# The static library must need no C++ runtime where the build drops it
# (x86-64, see the top CMakeLists.txt): no exception or guard symbols, no
# C++ library calls, and no libstdc++ in libtcuda.so.
if [ "$(uname -m)" = x86_64 ]; then
  cxx=$(nm -A "$libdir/libtcuda.a" 2> /dev/null | grep -E ' U (__gxx_personality|__cxa_guard|_Unwind_Resume|_Z)' || true)
  [ -z "$cxx" ] || fail "libtcuda.a needs the C++ runtime:
$cxx"
  ! readelf -d "$libdir/libtcuda.so" | grep -q 'libstdc++' || fail "libtcuda.so needs libstdc++"
fi

# README.md's fenced block of language $1 after "## Example".
block() {
  awk -v fence='```'"$1" '/^## Example/ { on = 1 }
    on && inb && /^```/ { exit }
    inb { print }
    on && $0 == fence { inb = 1 }' "$readme"
}
block c > "$tmp/app.c"
grep -q 'tcuda_malloc' "$tmp/app.c" || fail "no example source in README.md"

check() { # program, label: run it and check what it prints
  local out
  out=$(env -u LD_LIBRARY_PATH "$1") || fail "$2 exited with $?"
  sed "s/^/$2: /" <<< "$out"
  if grep -q '^no GPU:' <<< "$out"; then
    for f in tcuda_get_rng_state tcuda_stream_from_pool tcuda_malloc tcuda_set_device; do
      grep -q "^TCUDA_ERROR_NOT_AVAILABLE: $f: " <<< "$out" || fail "$2: no TCUDA_ERROR_NOT_AVAILABLE from $f"
    done
    [ "$(grep -c '^TCUDA_' <<< "$out")" = 4 ] || fail "$2: other errors than the four expected"
  else
    grep -q '^allocated 1048576 bytes$' <<< "$out" || fail "$2: no allocation"
    grep -q '^TCUDA_ERROR_INVALID_DEVICE: tcuda_set_device: device 99 out of range' <<< "$out" \
      || fail "$2: no error for device 99"
    [ "$(grep -c '^TCUDA_' <<< "$out")" = 1 ] || fail "$2: unexpected errors"
  fi
}
is_static() { # no libtcuda.so needed at run time, and the history layer's
  # self-registration (snapshot on OOM) linked in
  ! readelf -d "$1" | grep -q 'NEEDED.*libtcuda' || fail "$1 needs libtcuda.so"
  nm "$1" | grep ' tc_history_on_oom$' > /dev/null || fail "$1 lacks the history layer (TCUDA_OOM_SNAPSHOT would do nothing)"
}

# CMake: README.md's project, as given (shared) and with tcuda::tcuda_static.
gen=()
command -v ninja > /dev/null && gen=(-G Ninja)
for kind in shared static; do
  d="$tmp/cmake_$kind"
  mkdir -p "$d"
  cp "$tmp/app.c" "$d/"
  block cmake > "$d/CMakeLists.txt"
  if [ $kind = static ]; then
    sed -i 's/PRIVATE tcuda::tcuda)/PRIVATE tcuda::tcuda_static)/' "$d/CMakeLists.txt"
    grep -q 'tcuda::tcuda_static)' "$d/CMakeLists.txt" || fail "README.md's CMake block links no tcuda::tcuda"
  fi
  "$cmake_cmd" -S "$d" -B "$d/build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" > "$d/configure.log" 2>&1 || { cat "$d/configure.log"; fail "cmake ($kind)"; }
  "$cmake_cmd" --build "$d/build" > "$d/build.log" 2>&1 || { cat "$d/build.log"; fail "CMake build ($kind)"; }
  [ $kind = shared ] || is_static "$d/build/app"
  check "$d/build/app" "cmake $kind"
done

# pkg-config: README.md's command lines, run as written.
if ! command -v pkg-config > /dev/null; then
  echo "NOTE: pkg-config not installed here: only the CMake consumers were built"
  echo PASS
  exit 0
fi
export PKG_CONFIG_PATH="$libdir/pkgconfig"
mapfile -t cmds < <(block sh | grep '^cc app\.c ')
[ ${#cmds[@]} = 2 ] || fail "expected two cc lines in README.md's pkg-config block, got ${#cmds[@]}"
mkdir -p "$tmp/pc"
cp "$tmp/app.c" "$tmp/pc/"
for c in "${cmds[@]}"; do
  (cd "$tmp/pc" && eval "$c -std=c11 -Wall -Wextra -Werror") || fail "README.md's command failed: $c"
done
is_static "$tmp/pc/app_static"
check "$tmp/pc/app" "pkg-config shared"
check "$tmp/pc/app_static" "pkg-config static"
echo PASS
