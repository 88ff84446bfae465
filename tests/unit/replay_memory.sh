#!/usr/bin/env bash
# tcuda replay streams its JSON as checkpoints are produced: memory follows
# the allocator's state, not the output. A 17 KB trace (1000 allocations of
# 25 MB, then 1000 checkpoints of those 1000 segments) prints about 360 MB;
# the CLI must stay under 64 MB of resident memory doing it.
# SKIPPED (77) without GNU time (/usr/bin/time -v).
set -u
cli="${TCUDA_CLI:?}"
if ! /usr/bin/time -v true > /dev/null 2>&1; then echo "SKIPPED: no GNU time"; exit 77; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

awk 'BEGIN { for (i = 0; i < 1000; i++) print "a " i " 25000000"; for (i = 0; i < 1000; i++) print "c" }' \
  > "$tmp/big.trace"
# the output goes straight into a checker that keeps one line at a time:
# every checkpoint describes the same state, so each element is the same line.
# Under AddressSanitizer freed memory waits in a quarantine (256 MB) before
# reuse, which would count here: turn it off (other builds ignore this).
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0" \
  /usr/bin/time -v -o "$tmp/time" "$cli" replay --simulate "$tmp/big.trace" 2> "$tmp/err" |
  python3 -c '
import sys
f = sys.stdin.buffer
n = first = 0
total = 0
lines = 0
for line in f:
    total += len(line)
    lines += 1
    if lines == 1:
        assert line == b"[\n", line[:40]
        continue
    if line == b"]\n":
        continue
    body = line.rstrip(b"\n").rstrip(b",")
    assert body.startswith(b"{\"stats\": {"), body[:40]
    if first == 0:
        first = body
    elif body != first:
        sys.exit("checkpoint %d differs from the first" % (n + 1))
    n += 1
assert line == b"]\n", line[-40:]
print("checkpoints", n, "bytes", total)
sys.exit(0 if n == 1000 else "%d checkpoints, want 1000" % n)
' > "$tmp/check" 2>&1 || bad "replay output: $(cat "$tmp/check") $(head -c 300 "$tmp/err")"
rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tmp/time")
status=$(awk -F': ' '/Exit status/ { print $2 }' "$tmp/time")
[ "$status" = 0 ] || bad "replay exited with status $status: $(head -c 300 "$tmp/err")"
if [ -z "$rss" ]; then
  bad "no maximum RSS in the time report"
elif [ "$rss" -ge $((64 * 1024)) ]; then
  bad "replay used $rss KB of resident memory (limit 65536 KB)"
fi
echo "replay_memory: $(cat "$tmp/check"), max RSS ${rss:-?} KB"
[ $fail = 0 ] && echo "replay_memory: all passed"
exit $fail
