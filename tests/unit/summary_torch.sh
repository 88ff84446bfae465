#!/usr/bin/env bash
# memory_summary() against PyTorch's own: for each trace whose summary torch
# 2.11 printed on the H200 (scripts/record_torch_extra.py), tcuda replays the
# trace on the simulated device and must print the same text, full and
# abbreviated, but for the title line (tcuda's own, as docs/allocator.md says).
set -u
CLI=${TCUDA_CLI:?}
DATA=${TCUDA_TEST_DATA:?}/torch
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
n=0
for want in "$DATA"/*.summary.txt; do
  name=$(basename "$want" .summary.txt)
  for abbr in "" --abbreviated; do
    ref=$want
    [ -n "$abbr" ] && ref=$DATA/$name.summary_abbrev.txt
    "$CLI" snapshot $abbr --trace "$DATA/$name.trace" > "$W/got" || { echo "FAIL: snapshot --trace $name"; exit 1; }
    sed -n 2p "$W/got" | grep -q "tcuda CUDA memory summary, device ID 0" || { echo "FAIL: $name title: $(sed -n 2p "$W/got")"; exit 1; }
    sed -n 2p "$ref" | grep -q "PyTorch CUDA memory summary" || { echo "FAIL: $ref is not torch's summary"; exit 1; }
    if ! diff <(sed 2d "$W/got") <(sed 2d "$ref") > "$W/diff"; then
      echo "FAIL: $name ${abbr:-full} summary differs from torch's:"; head -20 "$W/diff"; exit 1
    fi
    n=$((n + 1))
  done
done
[ $n -ge 6 ] || { echo "FAIL: only $n recorded summaries found in $DATA"; exit 1; }
echo "ok: $n summaries identical to torch's, title aside"
