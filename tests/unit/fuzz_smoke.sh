#!/usr/bin/env bash
# Build the libFuzzer targets with clang (TCUDA_FUZZ=ON) in a build tree of
# their own, run each on its committed corpus (tests/fuzz/corpus/NAME: inputs
# that once broke it, kept as regressions), then fuzz each for a while
# (TCUDA_FUZZ_SECONDS, default 30) seeded with that corpus, the repository's
# traces and some configs. SKIPPED (77) when clang cannot build a libFuzzer
# binary here.
set -u
# undefined behaviour stops a target (by default UBSan reports and goes on)
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
src="${TCUDA_SOURCE_DIR:?}"
secs="${TCUDA_FUZZ_SECONDS:-30}"
cc="${TCUDA_FUZZ_CC:-clang}"
if ! command -v "$cc" > /dev/null; then echo "SKIPPED: no $cc"; exit 77; fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n' > "$probe/p.c"
if ! "$cc" -fsanitize=fuzzer,address,undefined "$probe/p.c" -o "$probe/p" 2> "$probe/err"; then
  echo "SKIPPED: $cc cannot build libFuzzer targets: $(head -c 300 "$probe/err")"
  exit 77
fi
# kept between runs (incremental rebuilds); a fresh temp dir without a binary dir
bld="${TCUDA_BINARY_DIR:+$TCUDA_BINARY_DIR/fuzz-smoke}"
bld="${bld:-$probe/build}"
gen=(); command -v ninja > /dev/null && gen=(-G Ninja)
start=$SECONDS
if ! cmake -S "$src" -B "$bld" ${gen[@]+"${gen[@]}"} -DCMAKE_C_COMPILER="$cc" -DCMAKE_CUDA_HOST_COMPILER=g++ \
     -DCMAKE_CUDA_ARCHITECTURES=90-real -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTCUDA_FUZZ=ON \
     -DTCUDA_BUILD_BENCH=OFF > "$probe/cfg.log" 2>&1; then
  echo "FAIL: configure"; tail -30 "$probe/cfg.log"; exit 1
fi
if ! cmake --build "$bld" --target fuzz_trace fuzz_config fuzz_addresses fuzz_ipc_handle fuzz_unpickle fuzz_snapshot fuzz_gunzip -j 2 > "$probe/build.log" 2>&1; then
  echo "FAIL: build"; tail -40 "$probe/build.log"; exit 1
fi
echo "built in $((SECONDS - start)) s"

# seed corpora: byte 0 selects the config, the rest is the trace
mkdir -p "$probe/trace" "$probe/config" "$probe/addresses" "$probe/ipc_handle" "$probe/pickle" "$probe/snapshot" \
  "$probe/gunzip"
i=0
for t in "$src"/tests/data/replay/*.trace "$src"/tests/data/torch/*.trace; do
  [ -f "$t" ] || continue
  [ "$(wc -c < "$t")" -le 60000 ] || continue
  for sel in 0 1 4 6; do
    { printf "\\$(printf %03o $sel)"; cat "$t"; } > "$probe/trace/seed$i"; i=$((i + 1))
  done
done
printf '\003a 1 1000\na 2 3145728 1\nc\nf 1\ne\nc\n' > "$probe/trace/seed_small"
n=0
for c in "max_split_size_mb:64" "roundup_power2_divisions:[64:8,256:4,>:1]" "expandable_segments:True" \
         "garbage_collection_threshold:0.6,max_split_size_mb:100" "roundup_power2_divisions:4" \
         "max_non_split_rounding_mb:40,release_lock_on_cudamalloc:True"; do
  printf '%s' "$c" > "$probe/config/c$n"; n=$((n + 1))
done
# the snapshot readers: torch's recorded snapshots (the small ones) and a
# few small pickles and JSON documents written here
for t in "$src"/tests/data/whatif/*.pickle; do
  [ -f "$t" ] || continue
  [ "$(wc -c < "$t")" -le 60000 ] || continue
  cp "$t" "$probe/pickle/$(basename "$t")"
done
printf '\200\004}(\214\001a]K\001aK\002\212\001\377G?\370\000\000\000\000\000\000\210\211N\206\224h\000u.' > "$probe/pickle/p_small"
printf '\200\002(X\002\000\000\000hiq\000C\001xq\001)\205r\002\000\000\000j\001\000\000\000l.' > "$probe/pickle/p_memo"
printf '{"segments": [{"address": 1, "blocks": [[1, 2.5e3], "x\\u00e9\\ud83d\\ude00", true, null]}]}' > "$probe/pickle/j_small"
printf '[NaN, -Infinity, -0, 9223372036854775808, {"a": {}}, "\\n\\"", 1e-7]' > "$probe/pickle/j_values"
# whole snapshots for the what-if path: the small recorded ones
for t in "$src"/tests/data/whatif/*.pickle; do
  [ -f "$t" ] && [ "$(wc -c < "$t")" -le 20000 ] && cp "$t" "$probe/snapshot/$(basename "$t")"
done

# gzip: small files at several levels, as python3's gzip writes them
for t in "$src"/tests/data/replay/*.trace; do
  [ -f "$t" ] && [ "$(wc -c < "$t")" -le 20000 ] || continue
  for l in 0 1 9; do
    python3 -c "import gzip,sys; sys.stdout.buffer.write(gzip.compress(open(sys.argv[1],'rb').read(), $l))" "$t" \
      > "$probe/gunzip/$(basename "$t").$l.gz" 2> /dev/null || rm -f "$probe/gunzip/$(basename "$t").$l.gz"
  done
done

fail=0
for f in fuzz_trace fuzz_config fuzz_addresses fuzz_ipc_handle fuzz_unpickle fuzz_snapshot fuzz_gunzip; do
  name=${f#fuzz_}
  [ "$name" = unpickle ] && name=pickle
  corpus="$probe/$name"
  kept="$src/tests/fuzz/corpus/$name"
  kept_dirs=()
  # each committed input once, by name, so a regression says which one
  for k in "$kept"/*; do
    [ -f "$k" ] || continue
    kept_dirs=("$kept")
    if ! "$bld/tests/fuzz/$f" -timeout=20 -rss_limit_mb=4096 -artifact_prefix="$probe/kept-" "$k" > "$probe/$f.kept.log" 2>&1; then
      echo "FAIL $f on the committed input $(basename "$k"):"
      grep -v '^INFO\|^\s*$\|^ *#[0-9]' "$probe/$f.kept.log" | head -5
      fail=1
    fi
  done
  # new inputs go to the first directory (the temporary one), never to the tree
  if "$bld/tests/fuzz/$f" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
       -artifact_prefix="$probe/" "$corpus" ${kept_dirs[@]+"${kept_dirs[@]}"} > "$probe/$f.log" 2>&1; then
    echo "ok   $f: $(grep -E 'stat::number_of_executed_units' "$probe/$f.log" | awk '{print $2}') runs in ${secs}s"
  else
    echo "FAIL $f:"
    grep -v '^#\|^INFO\|^\s*$' "$probe/$f.log" | tail -40
    for a in "$probe"/crash-* "$probe"/leak-* "$probe"/timeout-* "$probe"/oom-*; do
      [ -f "$a" ] && { echo "--- reproducer $(basename "$a") (base64):"; base64 "$a" | head -20; }
    done
    fail=1
  fi
done
exit $fail
