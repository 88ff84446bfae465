#!/usr/bin/env bash
# What `tcuda whatif` concludes from the recorded PyTorch snapshots
# (tests/data/whatif): the inferred recorded limit against the one torch ran
# under, the two recommendations, min_limit as a property of the history
# and config alone, the same numbers whatever the output or thread count,
# truncated histories and the table's text.
# tests/tools/check_whatif_advice.py says what each check compares.
set -u
cli="${TCUDA_CLI:?}"
src="${TCUDA_SOURCE_DIR:?}"
data="${TCUDA_TEST_DATA:-$src/tests/data}/whatif"
command -v python3 > /dev/null || { echo "SKIPPED: no python3"; exit 77; }
exec python3 "$src/tests/tools/check_whatif_advice.py" "$cli" "$data"
