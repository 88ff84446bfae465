#!/usr/bin/env bash
# Crafted snapshots that share objects through the pickle memo, each once
# far costlier than its size (time, memory, output) or answered wrongly
# with exit 0: each must now be refused with a message naming the file and
# what is wrong, or answered within a time and peak-memory bound.
# tests/tools/hostile_snapshots.py writes them and says what each checks.
set -u
cli="${TCUDA_CLI:?}"
src="${TCUDA_SOURCE_DIR:?}"
command -v python3 > /dev/null || { echo "SKIPPED: no python3"; exit 77; }
[ -r /proc/self/status ] || { echo "SKIPPED: no /proc to read peak memory from"; exit 77; }
exec python3 "$src/tests/tools/hostile_snapshots.py" "$cli"
