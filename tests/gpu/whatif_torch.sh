#!/usr/bin/env bash
# On the GPU, with torch: the min_limit that `tcuda whatif` predicts from a
# recorded history is the real one. torch runs the same workload under
# set_per_process_memory_fraction(min_limit / total) with no OOM, and raises
# one at 2 MiB below it. Histories without survived OOM entries only (a
# library that adapts to memory, like cuDNN's convolutions, changes the
# requests under a limit: docs/whatif.md).
set -u
cli="${TCUDA_CLI:?}"
src="${TCUDA_SOURCE_DIR:?}"
data="${TCUDA_TEST_DATA:-$src/tests/data}/whatif"
rec="$src/scripts/record_torch_histories.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
  if [ "${TCUDA_EXPECT_TORCH:-0}" = 1 ]; then echo "FAIL: torch with CUDA is expected here"; exit 1; fi
  echo "SKIPPED: no torch with CUDA"
  exit 77
fi
fail=0
# name, workload, config of the row to check (the recorded row when it is
# the snapshot's own config, otherwise a prediction for another config).
# KNOWN: rows whose prediction is known to miss, checked and reported but
# not failed, with the reason (docs/whatif.md, section 4).
known_rp2="under a limit the cache flushes send new segments to addresses the driver model does not predict; measured on the H200 2026-12-01: torch ran at 2 MiB below the predicted min_limit"
for spec in "tf_default transformer " "tf_default transformer expandable_segments:True" \
            "tf_default transformer max_split_size_mb:64" "tf_expandable transformer expandable_segments:True" \
            "tf_default transformer roundup_power2_divisions:2"; do
  set -- $spec
  name=$1 workload=$2 conf=${3:-}
  args=(whatif --json "$data/$name.pickle")
  [ -n "$conf" ] && args+=(--config "$conf")
  if ! "$cli" "${args[@]}" > "$tmp/w.json" 2> "$tmp/err"; then
    echo "FAIL: tcuda ${args[*]}: $(cat "$tmp/err")"; fail=1; continue
  fi
  lim=$(python3 - "$tmp/w.json" "$conf" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
conf = sys.argv[2]
rows = [r for r in doc["configs"] if r["config"] == conf]
print(rows[0]["min_limit"] if rows and rows[0]["min_limit"] else "")
PY
)
  if [ -z "$lim" ]; then echo "FAIL: $name '$conf': no min_limit"; fail=1; continue; fi
  at=$(python3 "$rec" --run "$workload" --conf "$conf" --limit "$lim" | tail -1)
  below=$(python3 "$rec" --run "$workload" --conf "$conf" --limit $((lim - 2097152)) | tail -1)
  ok=$(python3 -c 'import json,sys; a=json.loads(sys.argv[1]); b=json.loads(sys.argv[2]); print(int(not a["raised"] and b["raised"]))' "$at" "$below")
  echo "$name '$conf': min_limit $lim: at it $at; 2 MiB below $below"
  if [ "$ok" != 1 ] && [ "$conf" = roundup_power2_divisions:2 ]; then
    echo "KNOWN: $name '$conf': torch disagrees with min_limit $lim ($known_rp2)"
  elif [ "$ok" != 1 ]; then
    echo "FAIL: $name '$conf': torch disagrees with min_limit $lim"; fail=1
  fi
done
exit $fail
