#!/usr/bin/env bash
# On a GPU: `tcuda replay` on the real device and `tcuda replay --simulate`
# must agree at every checkpoint. The GPU run records the addresses its
# cudaMallocs returned; the simulator fed those addresses must then give
# identical stats AND segments (the policy is the same code, only the
# backend differs). Against PyTorch's recording (where one exists) and the
# simulator's driver model, the stats that follow from the requests alone
# must agree (compare_replay.py --placement-free: block counts and requested
# bytes); the counters that depend
# on where the driver put segments are reported. Traces under a memory
# fraction are reported only: their OOMs follow from placement.
# Traces: tests/data/torch/*.trace, tests/data/replay/*.trace and random
# traces generated here under several configs.
set -u
cli="${TCUDA_CLI:?}"
src="${TCUDA_SOURCE_DIR:?}"
data="${TCUDA_TEST_DATA:-$src/tests/data}"
cmp="$src/tests/tools/compare_replay.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$cli" info --json > "$tmp/info.json"; then
  echo "FAIL: tcuda info --json"
  exit 1
fi
if ! python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["cuda_available"] else 1)' "$tmp/info.json"; then
  echo "SKIPPED: no CUDA device"
  exit 77
fi

# random traces: sizes 1 B..64 MiB (mostly small), 3 streams, frees, empty_cache
python3 - "$tmp" <<'PY'
import random, sys
out = sys.argv[1]
for seed, conf in [(1, ""), (2, "max_split_size_mb:64"), (3, "roundup_power2_divisions:4"),
                   (4, "expandable_segments:True"), (5, "max_split_size_mb:40,roundup_power2_divisions:[64:8,>:2]")]:
    r = random.Random(seed)
    live, nid, lines = [], 0, []
    for i in range(3000):
        x = r.random()
        if x < 0.5 or not live:
            size = int(2 ** r.uniform(0, 26)) if r.random() < 0.9 else r.choice([512, 1 << 20, 2 << 20, 20 << 20])
            lines.append(f"a {nid} {max(1, size)} {r.choice([0, 0, 0, 1, 2])}")
            live.append(nid); nid += 1
        elif x < 0.93:
            lines.append(f"f {live.pop(r.randrange(len(live)))}")
        elif x < 0.95:
            lines.append("e")
        else:
            lines.append("c")
        if len(live) > 400:
            lines.append(f"f {live.pop(0)}")
    lines.append("c")
    open(f"{out}/random{seed}.trace", "w").write("\n".join(lines) + "\n")
    if conf: open(f"{out}/random{seed}.config", "w").write(conf)
PY

fail=0 n=0
shopt -s nullglob
for tr in "$data"/torch/*.trace "$data"/replay/*.trace "$tmp"/random*.trace; do
  base="${tr%.trace}"
  name=$(basename "$base")
  n=$((n + 1))
  opts=()
  [ -f "$base.config" ] && opts+=(--config "$(cat "$base.config")")
  [ -f "$base.fraction" ] && opts+=(--fraction "$(cat "$base.fraction")")
  if ! "$cli" replay --record-addresses "$tmp/$name.addr" ${opts[@]+"${opts[@]}"} "$tr" > "$tmp/$name.gpu.json" 2> "$tmp/err"; then
    echo "FAIL $name: GPU replay failed: $(cat "$tmp/err")"
    fail=1
    continue
  fi
  if ! "$cli" replay --simulate --addresses "$tmp/$name.addr" ${opts[@]+"${opts[@]}"} "$tr" > "$tmp/$name.sim.json" 2> "$tmp/err"; then
    echo "FAIL $name: simulated replay failed: $(cat "$tmp/err")"
    fail=1
    continue
  fi
  # expandable segments: virtual ranges come from cuMemAddressReserve, which
  # the simulator does not take from the recording, so only stats must agree
  exp=()
  grep -qi 'expandable_segments:true' "$base.config" 2> /dev/null && exp=(--stats-only)
  if out=$(python3 "$cmp" ${exp[@]+"${exp[@]}"} "$tmp/$name.sim.json" "$tmp/$name.gpu.json"); then
    echo "ok   $name: GPU and simulator identical ($(grep -c . "$tmp/$name.addr") cudaMallocs)"
  else
    echo "FAIL $name: simulator vs GPU: $out"
    fail=1
  fi
  strict=1
  [ -f "$base.fraction" ] && strict=0
  if "$cli" replay --simulate --va driver ${opts[@]+"${opts[@]}"} "$tr" > "$tmp/$name.drv.json" 2>"$tmp/err"; then
    echo "info $name, driver model vs GPU: $(python3 "$cmp" --count --stats-only "$tmp/$name.drv.json" "$tmp/$name.gpu.json") (stats)," \
         "$(python3 "$cmp" --count "$tmp/$name.drv.json" "$tmp/$name.gpu.json") (with segments)"
    if [ $strict = 1 ] && ! out=$(python3 "$cmp" --placement-free "$tmp/$name.drv.json" "$tmp/$name.gpu.json"); then
      echo "FAIL $name: driver model vs GPU, request-determined stats: $out"
      fail=1
    fi
  else
    echo "FAIL $name: driver-model replay failed: $(cat "$tmp/err")"
    fail=1
  fi
  if [ -f "$base.expected.json" ]; then
    echo "info $name, GPU vs PyTorch: $(python3 "$cmp" --count "$tmp/$name.gpu.json" "$base.expected.json")"
    if [ $strict = 1 ] && ! out=$(python3 "$cmp" --placement-free "$tmp/$name.gpu.json" "$base.expected.json"); then
      echo "FAIL $name: GPU vs PyTorch, request-determined stats: $out"
      fail=1
    fi
  fi
done
echo "$n trace(s) replayed on the GPU"
exit $fail
