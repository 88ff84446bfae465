#!/usr/bin/env bash
# tcuda snapshots open in torch's own memory tools (pickle + torch.cuda._memory_viz):
# one from a real-GPU replay with --history, one simulated, one from the
# C API with stacks (gpu_test_history writes it). Exit 77 without python3/torch.
set -u
CLI=${TCUDA_CLI:?}
DATA=${TCUDA_TEST_DATA:?}
HERE=$(cd "$(dirname "$0")" && pwd)
if ! command -v python3 >/dev/null || ! python3 -c 'import torch.cuda._memory_viz' 2>/dev/null; then
  [ "${TCUDA_EXPECT_TORCH:-0}" = 1 ] && { echo "FAIL: TCUDA_EXPECT_TORCH=1 but no python3 with torch"; exit 1; }
  echo "SKIPPED: no python3 with torch"; exit 77
fi
skipped=
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
head -n 700 "$DATA/torch/multi_stream3.trace" > "$W/part.trace"
"$CLI" replay --simulate --history "$W/sim.pickle" "$W/part.trace" >/dev/null || { echo "FAIL: simulated replay"; exit 1; }
files=("$W/sim.pickle")
if "$CLI" replay --history "$W/gpu.pickle" "$W/part.trace" >/dev/null 2>"$W/err"; then
  files+=("$W/gpu.pickle")
else
  grep -qi "not available\|no CUDA" "$W/err" || { echo "FAIL: GPU replay: $(cat "$W/err")"; exit 1; }
  skipped="$skipped the GPU replay's snapshot (no GPU);"
fi
# the C API's snapshot with stacks: a failing writer fails this test
BIN=${TCUDA_BINARY_DIR:?}/tests/gpu_test_history
[ -x "$BIN" ] || { echo "FAIL: $BIN not built"; exit 1; }
TCUDA_HISTORY_DUMP="$W/api.pickle" "$BIN" test_dump_for_torch > "$W/hist.log" 2>&1; rc=$?
if [ $rc = 0 ]; then
  [ -s "$W/api.pickle" ] || { echo "FAIL: gpu_test_history passed but wrote no $W/api.pickle"; exit 1; }
  files+=("$W/api.pickle")
elif [ $rc = 77 ]; then
  skipped="$skipped the C API's snapshot ($(tail -1 "$W/hist.log"));"
else
  echo "FAIL: gpu_test_history test_dump_for_torch (exit $rc):"; tail -20 "$W/hist.log"; exit 1
fi
python3 "$HERE/memviz_torch.py" "${files[@]}" || exit 1
if [ -n "$skipped" ]; then echo "SKIPPED part:$skipped"; exit 77; fi
