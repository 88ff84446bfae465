#!/usr/bin/env bash
# The compact policy's target, peak reserved <= max(1.10 x P, P + 4 MiB)
# with P the peak allocated under torch's default, on every recorded
# workload (tests/data/whatif, tests/data/torch); tests/tools/compact_workloads.py
# says where each figure comes from.
set -u
cli="${TCUDA_CLI:?}"
src="${TCUDA_SOURCE_DIR:?}"
command -v python3 > /dev/null || { echo "SKIPPED: no python3"; exit 77; }
exec python3 "$src/tests/tools/compact_workloads.py" "$cli" "${TCUDA_TEST_DATA:-$src/tests/data}"
