#!/usr/bin/env bash
# tcuda snapshots open in torch's own memory tools (pickle + torch.cuda._memory_viz):
# one from a real-GPU replay with --history, one simulated, one from the
# C API with stacks (gpu_test_history writes it). Exit 77 without python3/torch.
set -u
CLI=${TCUDA_CLI:?}
DATA=${TCUDA_TEST_DATA:?}
HERE=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "SKIPPED: no python3"; exit 77; }
python3 -c 'import torch.cuda._memory_viz' 2>/dev/null || { echo "SKIPPED: no torch"; exit 77; }
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
head -n 700 "$DATA/torch/multi_stream3.trace" > "$W/part.trace"
"$CLI" replay --simulate --history "$W/sim.pickle" "$W/part.trace" >/dev/null || { echo "FAIL: simulated replay"; exit 1; }
files=("$W/sim.pickle")
if "$CLI" replay --history "$W/gpu.pickle" "$W/part.trace" >/dev/null 2>"$W/err"; then
  files+=("$W/gpu.pickle")
else
  grep -qi "not available\|no CUDA" "$W/err" || { echo "FAIL: GPU replay: $(cat "$W/err")"; exit 1; }
fi
BIN=${TCUDA_BINARY_DIR:-}/tests/gpu_test_history
if [ -x "$BIN" ] && TCUDA_HISTORY_DUMP="$W/api.pickle" "$BIN" test_dump_for_torch >/dev/null && [ -s "$W/api.pickle" ]; then
  files+=("$W/api.pickle")
fi
python3 "$HERE/memviz_torch.py" "${files[@]}"
