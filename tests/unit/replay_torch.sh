#!/usr/bin/env bash
# Ground truth: every tests/data/torch/X.trace with X.expected.json and
# X.addresses (recorded from PyTorch 2.11 on an H200; optional X.config holds
# the PYTORCH_CUDA_ALLOC_CONF string, X.fraction the memory fraction) must
# replay on the simulator, fed the recorded cudaMalloc addresses (and, for
# expandable segments, the recorded maps X.maps), to exactly the recorded
# stats and segments. The driver placement model (no addresses) is held to
# the floors below. SKIPPED (77) until recordings exist.
set -u
cli="${TCUDA_CLI:?}"
src="${TCUDA_SOURCE_DIR:?}"
data="${TCUDA_TEST_DATA:-$src/tests/data}/torch"
cmp="$src/tests/tools/compare_replay.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The driver model (no recorded addresses) must keep at least this many
# checkpoints' segments identical to torch's, up to the base address. Its
# stats must all match. roundup4, roundup_list2 (and msplit_roundup, which
# matches in full) align their 512 MiB-multiple segments to 512 MiB, so
# their layout depends on where the driver's first chunk fell in 512 MiB,
# which differs per process: the model's offset fits msplit_roundup's run.
declare -A driver_floor=(
  [boundary_sizes]=17 [empty_cache_mid]=32 [expandable]=22 [expandable_growth]=12
  [expandable_msplit]=14 [expandable_multistream]=18 [fragmentation]=15 [large_mixed]=24
  [msplit_roundup]=14 [multi_stream2_first_side]=14 [multi_stream3]=27 [oversize_msplit20]=16
  [oversize_msplit64]=18 [reset_peak]=27 [roundup4]=1 [roundup_list]=14 [roundup_list2]=2
  [small_churn]=30 [training_loop]=20)
shopt -s nullglob
n=0 fail=0
for tr in "$data"/*.trace; do
  base="${tr%.trace}"
  name=$(basename "$base")
  [ -f "$base.expected.json" ] && [ -f "$base.addresses" ] || continue
  n=$((n + 1))
  opts=()
  [ -f "$base.config" ] && opts+=(--config "$(cat "$base.config")")
  [ -f "$base.fraction" ] && opts+=(--fraction "$(cat "$base.fraction")")
  # Expandable segments: their VA reservations go where torch's segments
  # began, taken from the recorded maps (X.maps).
  rec=(--addresses "$base.addresses")
  [ -f "$base.maps" ] && rec+=(--maps "$base.maps")
  if ! "$cli" replay --simulate "${rec[@]}" ${opts[@]+"${opts[@]}"} "$tr" > "$tmp/$name.json" 2> "$tmp/err"; then
    echo "FAIL $name: replay failed: $(cat "$tmp/err")"
    fail=1
  elif out=$(python3 "$cmp" "$tmp/$name.json" "$base.expected.json"); then
    echo "ok   $name: identical to PyTorch with recorded addresses"
  else
    echo "FAIL $name: $out"
    fail=1
  fi
  floor=${driver_floor[$name]-}
  if "$cli" replay --simulate --va driver ${opts[@]+"${opts[@]}"} "$tr" > "$tmp/$name.drv.json" 2> "$tmp/err"; then
    st=$(python3 "$cmp" --count --stats-only "$tmp/$name.drv.json" "$base.expected.json")
    sg=$(python3 "$cmp" --count --relative "$tmp/$name.drv.json" "$base.expected.json")
    msg="$name, driver model: $st (stats), $sg (segments up to the base address)"
    if [ -z "$floor" ]; then
      echo "info $msg"
    elif python3 "$cmp" --stats-only "$tmp/$name.drv.json" "$base.expected.json" > /dev/null && [ "${sg%%/*}" -ge "$floor" ]; then
      echo "ok   $msg, at least $floor"
    else
      echo "FAIL $msg: stats must all match and segments at least $floor"
      fail=1
    fi
  else
    echo "${floor:+FAIL}${floor:-info} $name, driver model: replay failed: $(cat "$tmp/err")"
    [ -n "$floor" ] && fail=1
  fi
done
if [ $n = 0 ]; then
  echo "SKIPPED: no recordings (X.trace + X.expected.json + X.addresses) in $data"
  exit 77
fi
echo "$n recording(s) compared"
exit $fail
