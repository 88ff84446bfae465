#!/usr/bin/env bash
# scripts/deps parses, calls no command that is missing, and asks apt-get only
# for what is missing, looked for the way the tests look for it, so a second
# run installs nothing. apt-get and id are stand-ins here (id says root), so
# the install branch runs without changing the machine.
set -u
deps="${TCUDA_SOURCE_DIR:?}/scripts/deps"
bash=$(command -v bash)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$bash" -n "$deps" || fail "scripts/deps does not parse"

stub() { # dir name body
  printf '#!/bin/sh\n%s\n' "$3" > "$1/$2"
  chmod +x "$1/$2"
}
mkdir "$tmp/root"
stub "$tmp/root" apt-get "echo \"\$*\" >> '$tmp/apt.log'"
stub "$tmp/root" id 'echo 0'

run() { # PATH to run scripts/deps with; prints the packages asked for
  : > "$tmp/apt.log"
  PATH="$1" "$bash" "$deps" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  cat "$tmp/out" "$tmp/err" >&2
  [ $rc = 0 ] || fail "scripts/deps exited with $rc"
  ! grep -E 'command not found|No such file or directory' "$tmp/err" > /dev/null \
    || fail "scripts/deps calls a command that does not exist"
  awk '$1 == "install" { for (i = 2; i <= NF; i++) if ($i !~ /^-/) print $i }' "$tmp/apt.log"
}

# 1. This machine: every package asked for must really be missing.
missing() {
  case $1 in
    cmake)
      ! command -v cmake > /dev/null \
        || [ "$(printf '%s\n3.24\n' "$(cmake --version | awk 'NR == 1 {print $3}')" | sort -V | head -1)" != 3.24 ] ;;
    ninja-build) ! command -v ninja > /dev/null ;;
    pkg-config) ! command -v pkg-config > /dev/null ;;
    python3) ! command -v python3 > /dev/null ;;
    python3-venv) ! python3 -c "import ensurepip, venv" 2> /dev/null ;; # as scripts/nocuda-check needs it
    gcc) ! command -v cc > /dev/null ;;
    g++) ! command -v c++ > /dev/null ;;
    clang) ! command -v clang > /dev/null ;;
    libdlpack-dev) [ ! -f /usr/include/dlpack/dlpack.h ] ;;
    chromium) # as tests/unit/viz_report.sh finds it
      ! { command -v chromium || command -v chromium-browser || command -v google-chrome; } > /dev/null ;;
    python3-pytest) # as tests/unit/python_pkg.sh finds it
      for c in ${PYTHON:-} python3 /usr/bin/python3; do
        command -v "$c" > /dev/null 2>&1 && "$c" -c "import pytest" 2> /dev/null && return 1
      done
      return 0 ;;
    *) echo "unknown package $1" >&2; return 1 ;;
  esac
}
asked=$(run "$tmp/root:$PATH") || exit 1
for p in $asked; do
  missing "$p" || fail "scripts/deps installs $p, which is here"
done
echo "this machine: asked for: ${asked:-nothing}"

# 2. Everything present, but the python3 first on PATH has no pytest (it
# has venv) and $PYTHON has it (as where pyenv's python3 shadows Debian's):
# nothing to install, apart from the dlpack header if this machine lacks it.
mkdir "$tmp/all"
for t in cmake ninja pkg-config python3 cc c++ clang chromium nvcc pyok apt-get id; do
  case $t in
    cmake) stub "$tmp/all" $t 'echo "cmake version 3.30.0"' ;;
    python3) stub "$tmp/all" $t 'case "$*" in *ensurepip*) exit 0 ;; esac; exit 1' ;;
    apt-get | id) cp "$tmp/root/$t" "$tmp/all/" ;;
    *) stub "$tmp/all" $t 'exit 0' ;;
  esac
done
for t in head awk sort; do ln -s "$(command -v $t)" "$tmp/all/$t"; done
asked=$(PYTHON=pyok run "$tmp/all") || exit 1
for p in $asked; do
  [ "$p" = libdlpack-dev ] && [ ! -f /usr/include/dlpack/dlpack.h ] && continue
  fail "scripts/deps installs $p with everything present"
done
echo PASS
