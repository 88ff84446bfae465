#!/usr/bin/env bash
# bench_frag on the simulated device: a trace, a snapshot, a missing file and
# a malformed trace give one row each (errors name the file), the table and
# RESULT lines come out, and the run exits 0.
set -u
bin="${1:?usage: frag_smoke.sh BENCH_FRAG}"
src="${TCUDA_SOURCE_DIR:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

printf 'a 1 1000\na 2 3000000 1\nf 1\nf 9\n' > "$tmp/bad.trace"
args=("$src/tests/data/torch/fragmentation.trace" "$tmp/missing.trace" "$tmp/bad.trace")
have_py=0
if command -v python3 > /dev/null; then
  have_py=1
  args+=("$src/tests/data/whatif/side_stream.pickle")
fi
"$bin" --sim "${args[@]}" > "$tmp/out" 2>&1
rc=$?
cat "$tmp/out"
[ $rc = 0 ] || bad "exit status $rc"
grep -q '^SKIPPED bench_frag' "$tmp/out" || bad "no SKIPPED line for the GPU part"
grep -q '^| trace/fragmentation | NA \[' "$tmp/out" || bad "no row for trace/fragmentation with NA torch column"
grep -E '^\| trace/fragmentation \|' "$tmp/out" | grep -qE '\| [0-9]+\.[0-9] \|' || bad "no simulated tcuda figure for fragmentation"
grep -q "missing.trace: No such file or directory" "$tmp/out" || bad "missing file not named"
grep -q "bad.trace line 4: free of unknown id 9" "$tmp/out" || bad "bad trace not reported with file and line"
grep -q '^RESULT name=frag_sim metric=workloads_within_bound ' "$tmp/out" || bad "no summary RESULT line"
grep -q '^RESULT name=frag_sim metric=compact_peak_reserved:trace/fragmentation ' "$tmp/out" || bad "no per-workload RESULT line"
if [ $have_py = 1 ]; then
  grep -q '^| snap/side_stream |' "$tmp/out" || bad "no row for the snapshot"
  python3 "$src/scripts/snapshot_to_trace.py" "$src/tests/data/whatif/side_stream.pickle" > "$tmp/a" &&
    python3 "$src/scripts/snapshot_to_trace.py" "$src/tests/data/whatif/side_stream.pickle" > "$tmp/b" &&
    cmp -s "$tmp/a" "$tmp/b" || bad "snapshot_to_trace.py output not deterministic"
  grep -q '^a [0-9]* [0-9]* 1$' "$tmp/a" || bad "side stream not numbered 1"
fi
exit $fail
