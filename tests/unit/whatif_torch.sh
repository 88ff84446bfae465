#!/usr/bin/env bash
# tcuda's replay of real PyTorch snapshots against torch's own figures
# (tests/data/whatif, recorded on an H200 by scripts/record_torch_histories.py):
# every memory_stats key at every snapshot entry, configs predicted from
# another config's run, and the first OOM under a limit.
# tests/tools/compare_whatif.py says what each check compares.
set -u
cli="${TCUDA_CLI:?}"
src="${TCUDA_SOURCE_DIR:?}"
data="${TCUDA_TEST_DATA:-$src/tests/data}/whatif"
command -v python3 > /dev/null || { echo "SKIPPED: no python3"; exit 77; }
exec python3 "$src/tests/tools/compare_whatif.py" "$cli" "$data"
