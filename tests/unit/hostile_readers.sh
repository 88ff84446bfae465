#!/usr/bin/env bash
# Crafted hostile inputs (tests/tools/hostile_inputs.py writes them at test
# time): each must cost no more than its size. Asserts the exit status, a
# wall-time bound, a peak-RSS bound and the error text of every case.
set -u
cli=${TCUDA_CLI:?}
src=${TCUDA_SOURCE_DIR:?}
command -v python3 > /dev/null || { echo "SKIPPED: python3 missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$src/tests/tools/hostile_inputs.py" --cli "$cli" --dir "$tmp"
