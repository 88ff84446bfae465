#!/usr/bin/env bash
# tcuda replay: JSON values of a small trace derived by hand from PyTorch's
# rules (docs/allocator.md), option handling and errors.
set -u
cli="${TCUDA_CLI:?}"
data="${TCUDA_TEST_DATA:?}/replay"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# ---- the hand-derived trace, in both address models ----
for va in ascending driver; do
  if ! "$cli" replay --simulate --va $va "$data/basic.trace" > "$tmp/$va.json" 2> "$tmp/err"; then
    bad "replay --va $va failed: $(cat "$tmp/err")"
    continue
  fi
  python3 - "$tmp/$va.json" $va <<'PY' || fail=1
import json, sys
cps = json.load(open(sys.argv[1])); va = sys.argv[2]
errs = []
def eq(what, got, want):
    if got != want: errs.append(f"{what}: got {got}, want {want}")
eq("checkpoints", len(cps), 4)
if len(cps) == 4:
    s0, s1, s2, s3 = (c["stats"] for c in cps)
    eq("key count", len(s0), 122)
    eq("keys sorted", list(s0), sorted(s0))
    K, M = 1024, 1 << 20
    # checkpoint 0: 1000 B -> 1024 B in a 2 MiB small segment; 3 MiB in a 20 MiB large one
    for k, v in {"allocation.all.current": 2, "allocation.small_pool.current": 1, "allocation.large_pool.current": 1,
                 "allocated_bytes.all.current": 1024 + 3 * M, "allocated_bytes.small_pool.current": 1024,
                 "active_bytes.large_pool.current": 3 * M, "requested_bytes.all.current": 1000 + 3 * M,
                 "reserved_bytes.all.current": 22 * M, "reserved_bytes.small_pool.current": 2 * M,
                 "segment.all.current": 2, "inactive_split.all.current": 2,
                 "inactive_split_bytes.small_pool.current": 2 * M - 1024,
                 "inactive_split_bytes.large_pool.current": 17 * M,
                 "num_device_alloc": 2, "num_device_free": 0, "num_sync_all_streams": 0,
                 "max_split_size": -1, "oversize_allocations.current": 0}.items():
        eq("cp0 " + k, s0[k], v)
    # checkpoint 1: free merges the small segment whole (net -1 split block),
    # stream 1 gets its own 2 MiB segment, the 3 MiB block merges back
    for k, v in {"allocation.all.current": 1, "allocation.all.peak": 2, "allocation.all.allocated": 3,
                 "allocation.all.freed": 2, "allocation.small_pool.peak": 1,
                 "allocated_bytes.all.current": 1024, "allocated_bytes.all.peak": 1024 + 3 * M,
                 "allocated_bytes.all.allocated": 2048 + 3 * M, "allocated_bytes.all.freed": 1024 + 3 * M,
                 "requested_bytes.all.current": 700, "requested_bytes.all.allocated": 1700 + 3 * M,
                 "requested_bytes.all.freed": 1000 + 3 * M,
                 "reserved_bytes.all.current": 24 * M, "reserved_bytes.small_pool.current": 4 * M,
                 "segment.all.current": 3, "segment.small_pool.current": 2,
                 "inactive_split.all.current": 1, "inactive_split.all.peak": 2,
                 "inactive_split.all.allocated": 3, "inactive_split.all.freed": 2,
                 "inactive_split.small_pool.allocated": 2, "inactive_split.small_pool.freed": 1,
                 "inactive_split_bytes.all.current": 2 * M - 1024,
                 "inactive_split_bytes.small_pool.allocated": 2 * (2 * M - 1024),
                 "inactive_split_bytes.large_pool.freed": 17 * M,
                 "inactive_split_bytes.all.peak": 19 * M - 1024, "num_device_alloc": 3}.items():
        eq("cp1 " + k, s1[k], v)
    # checkpoint 2: empty_cache frees the two whole stream-0 segments
    for k, v in {"segment.all.current": 1, "segment.all.freed": 2, "reserved_bytes.all.current": 2 * M,
                 "reserved_bytes.all.peak": 24 * M, "reserved_bytes.large_pool.freed": 20 * M,
                 "num_device_free": 2, "num_sync_all_streams": 1, "allocation.all.current": 1}.items():
        eq("cp2 " + k, s2[k], v)
    # checkpoint 3: reset_peak_memory_stats: peak = current, totals kept
    for k, v in {"reserved_bytes.all.peak": 2 * M, "allocation.all.peak": 1, "allocated_bytes.all.peak": 1024,
                 "inactive_split_bytes.all.peak": 2 * M - 1024, "reserved_bytes.all.allocated": 24 * M,
                 "num_device_alloc": 3}.items():
        eq("cp3 " + k, s3[k], v)
    # segments
    g0, g1, g2 = (c["segments"] for c in cps[:3])
    eq("cp0 segments", len(g0), 2)
    eq("cp1 segments", len(g1), 3)
    eq("cp2 segments", len(g2), 1)
    for c in cps:
        eq("sorted by address", [g["address"] for g in c["segments"]], sorted(g["address"] for g in c["segments"]))
    small = [g for g in g0 if g["segment_type"] == "small"]
    large = [g for g in g0 if g["segment_type"] == "large"]
    if len(small) == 1 and len(large) == 1:
        sm, lg = small[0], large[0]
        eq("cp0 small", (sm["total_size"], sm["allocated_size"], sm["active_size"], sm["requested_size"], sm["stream"]),
           (2 * M, 1024, 1024, 1000, 0))
        eq("cp0 small blocks", [(b["address"] - sm["address"], b["size"], b["requested_size"], b["state"]) for b in sm["blocks"]],
           [(0, 1024, 1000, "active_allocated"), (1024, 2 * M - 1024, 0, "inactive")])
        eq("cp0 large blocks", [(b["size"], b["requested_size"], b["state"]) for b in lg["blocks"]],
           [(3 * M, 3 * M, "active_allocated"), (17 * M, 0, "inactive")])
        eq("cp0 pool ids", (sm["segment_pool_id"], lg["is_expandable"]), ([0, 0], False))
        if va == "ascending":
            eq("ascending: first cudaMalloc lowest", sm["address"] < lg["address"], True)
    # the side stream's segment carries the trace's stream number
    eq("cp2 segment", [(g["stream"], g["segment_type"], [b["state"] for b in g["blocks"]]) for g in g2],
       [(1, "small", ["active_allocated", "inactive"])])
    # a merged free block keeps the requested size of the block just freed
    merged = [g for g in g1 if g["stream"] == 0 and g["segment_type"] == "small"]
    eq("cp1 merged small", [[(b["size"], b["requested_size"], b["state"]) for b in g["blocks"]] for g in merged],
       [[(2 * M, 1000, "inactive")]])
for e in errs: print(f"FAIL ({va}): {e}")
sys.exit(1 if errs else 0)
PY
done
# no ties in this trace, so both address models give the same stats
python3 "$TCUDA_SOURCE_DIR/tests/tools/compare_replay.py" --stats-only "$tmp/ascending.json" "$tmp/driver.json" \
  || bad "driver and ascending stats differ"

# ---- errors: non-zero exit, message on stderr, nothing on stdout ----
expect_fail() { # expected-substring, args...
  local want="$1"; shift
  if "$cli" replay "$@" > "$tmp/out" 2> "$tmp/err"; then bad "replay $* succeeded"; return; fi
  grep -qF -- "$want" "$tmp/err" || bad "replay $*: stderr lacks '$want': $(cat "$tmp/err")"
  [ -s "$tmp/out" ] && bad "replay $*: printed to stdout on failure"
  return 0
}
printf 'a 1 100\nc\n\n# ok so far\na 2 x\n' > "$tmp/bad1.trace"
expect_fail "trace line 5: bad size 'x'" --simulate "$tmp/bad1.trace"
printf 'a 1 100\nf 2\n' > "$tmp/bad2.trace"
expect_fail "trace line 2: free of unknown id 2" --simulate "$tmp/bad2.trace"
printf 'a 1 100\na 1 5\n' > "$tmp/bad3.trace"
expect_fail "trace line 2: id 1 is already live" --simulate "$tmp/bad3.trace"
printf 'q\n' > "$tmp/bad4.trace"
expect_fail "trace line 1: unknown op 'q'" --simulate "$tmp/bad4.trace"
expect_fail "does-not-exist.trace: cannot open: " --simulate "$tmp/does-not-exist.trace"
# a size whose rounding up to 2 MiB would overflow is refused by the parser,
# before anything runs, like any other bad line
printf 'a 1 100\nc\na 2 18446744073709551615\nc\n' > "$tmp/huge.trace"
expect_fail "trace line 3: size 18446744073709551615 out of range (at most 18446744073707454463" \
  --simulate "$tmp/huge.trace"
printf 'a 1 18446744073707454464\n' > "$tmp/huge2.trace"
expect_fail "trace line 1: size 18446744073707454464 out of range" --simulate "$tmp/huge2.trace"
# the largest size accepted replays: the request fails as an OOM (torch's
# "more than 1EB", which is not counted in num_ooms) and the replay goes on
printf 'a 1 18446744073707454463\nc\nf 1\na 2 1000\nc\n' > "$tmp/edge.trace"
if "$cli" replay --simulate "$tmp/edge.trace" > "$tmp/edge.json" 2> "$tmp/err"; then
  python3 -c 'import json, sys; s = [c["stats"] for c in json.load(open(sys.argv[1]))]
got = [(c["allocation.all.allocated"], c["allocated_bytes.all.current"]) for c in s]
assert got == [(0, 0), (1, 1024)], got' "$tmp/edge.json" || bad "the largest accepted size did not replay as an OOM"
else
  bad "replay of the largest accepted size failed: $(cat "$tmp/err")"
fi
expect_fail "max_split_size_mb" --simulate --config "max_split_size_mb:abc" "$data/basic.trace"
expect_fail "--va 'sideways'" --simulate --va sideways "$data/basic.trace"
expect_fail "need --simulate" --va driver "$data/basic.trace"
expect_fail "unknown option '--bogus'" --simulate --bogus "$data/basic.trace"
expect_fail "no trace given" --simulate
expect_fail "--capacity 'lots'" --simulate --capacity lots "$data/basic.trace"
expect_fail "memory_fraction 1.5" --simulate --fraction 1.5 "$data/basic.trace"
expect_fail "record_addresses" --simulate --record-addresses "$tmp/rec" "$data/basic.trace"

# recorded addresses that overlap: the second segment cannot be placed there
printf '0x7f0000000000 2097152\n0x7f0000000000 20971520\n' > "$tmp/overlap.addresses"
expect_fail "replay diverged at segment" --simulate --addresses "$tmp/overlap.addresses" "$data/basic.trace"
# address 0 marks an empty handle: a recorded segment cannot be there
printf '0 2097152\n' > "$tmp/zero.addresses"
expect_fail "with ADDR > 0" --simulate --addresses "$tmp/zero.addresses" "$data/basic.trace"
# an address no cudaMalloc returns (not 512-byte aligned): found by fuzz_addresses
printf '0x7f0000000001 2097152\n' > "$tmp/odd.addresses"
expect_fail "with ADDR a multiple of 512" --simulate --addresses "$tmp/odd.addresses" "$data/basic.trace"
# a line quoted in a message keeps no terminal escape
printf '0x7f0000000000 \033]0;pwned\007\n' > "$tmp/esc.addresses"
expect_fail "'0x7f0000000000 \\x1b]0;pwned\\x07'" --simulate --addresses "$tmp/esc.addresses" "$data/basic.trace"
grep -q "$(printf '\033')" "$tmp/err" && bad "an escape byte from the addresses file reached stderr"
# nor does a field quoted from the trace, a maps line, or a file name
printf 'a 1 \033]0;pwned\007\n' > "$tmp/esc.trace"
expect_fail "trace line 1: bad size '\\x1b]0;pwned\\x07'" --simulate "$tmp/esc.trace"
grep -q "$(printf '\033')" "$tmp/err" && bad "an escape byte from the trace reached stderr"
printf '\033[2J\n' > "$tmp/esc.maps"
expect_fail "esc.maps:1: expected 'ADDR SIZE', got '\\x1b[2J'" --simulate --maps "$tmp/esc.maps" "$data/basic.trace"
grep -q "$(printf '\033')" "$tmp/err" && bad "an escape byte from the maps file reached stderr"
expect_fail "$tmp/\\x1b[2Jgone.trace: cannot open: " --simulate "$tmp/$(printf '\033')[2Jgone.trace"
grep -q "$(printf '\033')" "$tmp/err" && bad "an escape byte from the trace's file name reached stderr"
# the same addresses, disjoint, are used as given
printf '0x7f0000000000 2097152\n0x7f0004000000 20971520\n0x7f0000200000 2097152\n' > "$tmp/ok.addresses"
if "$cli" replay --simulate --addresses "$tmp/ok.addresses" "$data/basic.trace" > "$tmp/addr.json" 2> "$tmp/err"; then
  python3 - "$tmp/addr.json" <<'PY' || fail=1
import json, sys
cps = json.load(open(sys.argv[1]))
got = [[(g["address"], g["segment_type"]) for g in c["segments"]] for c in cps[:3]]
want = [[(0x7f0000000000, "small"), (0x7f0004000000, "large")],
        [(0x7f0000000000, "small"), (0x7f0000200000, "small"), (0x7f0004000000, "large")],
        [(0x7f0000200000, "small")]]
if got != want:
    print(f"FAIL: --addresses placement: got {got}, want {want}"); sys.exit(1)
PY
else
  bad "replay --addresses (disjoint) failed: $(cat "$tmp/err")"
fi

# expandable segments with recorded maps: each reservation starts at the next
# recorded map, and a map that is not the recorded one is a divergence
printf '0x10000000000 2097152\n0x20000000000 20971520 # large\n0x30000000000 2097152\n' > "$tmp/ok.maps"
if "$cli" replay --simulate --config expandable_segments:True --maps "$tmp/ok.maps" "$data/basic.trace" \
    > "$tmp/maps.json" 2> "$tmp/err"; then
  python3 - "$tmp/maps.json" <<'PY' || fail=1
import json, sys
cps = json.load(open(sys.argv[1]))
got = [[(g["address"], g["segment_type"], g["stream"]) for g in c["segments"]] for c in cps[:3]]
want = [[(0x10000000000, "small", 0), (0x20000000000, "large", 0)],
        [(0x10000000000, "small", 0), (0x20000000000, "large", 0), (0x30000000000, "small", 1)],
        [(0x30000000000, "small", 1)]]
if got != want:
    print(f"FAIL: --maps placement: got {got}, want {want}"); sys.exit(1)
PY
else
  bad "replay --maps failed: $(cat "$tmp/err")"
fi
printf '0x10000000000 2097152\n0x20000000000 41943040\n' > "$tmp/diverge.maps"
expect_fail "replay diverged at map 2: recorded 0x20000000000 (41943040 bytes)" --simulate \
  --config expandable_segments:True --maps "$tmp/diverge.maps" "$data/basic.trace"
printf '0x10000000000 2097152\n0x20000000000\n' > "$tmp/bad.maps"
expect_fail "bad.maps:2: expected 'ADDR SIZE'" --simulate --maps "$tmp/bad.maps" "$data/basic.trace"
expect_fail "need --simulate" --maps "$tmp/ok.maps" "$data/basic.trace"

# a tiny simulated device: the 3 MiB request cannot get its 20 MiB segment,
# which counts as an OOM, and freeing that handle later is a no-op
if "$cli" replay --simulate --va ascending --capacity $((8 << 20)) "$data/basic.trace" > "$tmp/oom.json" 2> "$tmp/err"; then
  python3 - "$tmp/oom.json" <<'PY' || fail=1
import json, sys
s = json.load(open(sys.argv[1]))[0]["stats"]
want = {"num_ooms": 1, "allocation.all.current": 1, "reserved_bytes.all.current": 2 << 20}
bad = {k: (s[k], v) for k, v in want.items() if s[k] != v}
if bad: print(f"FAIL: OOM replay: {bad}"); sys.exit(1)
PY
else
  bad "replay with a small capacity failed: $(cat "$tmp/err")"
fi
# stdout that cannot be written: a message and status 1, for a short output
# (found at the final flush) and a long one (found while streaming)
if [ -w /dev/full ]; then
  for t in "$data/basic.trace" "$TCUDA_SOURCE_DIR/tests/data/torch/training_loop.trace"; do
    if "$cli" replay --simulate "$t" > /dev/full 2> "$tmp/err"; then bad "replay to /dev/full succeeded"
    else grep -q "tcuda replay: write error: No space left on device" "$tmp/err" || bad "replay to /dev/full: $(cat "$tmp/err")"; fi
  done
fi
[ $fail = 0 ] && echo "replay_cli: all passed"
exit $fail
