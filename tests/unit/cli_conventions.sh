#!/usr/bin/env bash
# The CLI's one convention, for every subcommand: --help prints the usage on
# stdout and exits 0; an unknown option, a missing value or a bad value
# exits 2 with the message and the usage on stderr; a failure at run time
# (a malformed input file included) exits 1; a simulated OOM is a success
# with torch's message on stderr. Also: replay's --simulate hint without a
# GPU, the allocator config from the environment, --capacity units.
set -u
cli=${TCUDA_CLI:?}
data=${TCUDA_TEST_DATA:?}/replay
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# run RC SUBSTRING ARGS...: exit status RC and SUBSTRING on stderr
run() {
  local want=$1 sub=$2; shift 2
  "$cli" "$@" > "$tmp/out" 2> "$tmp/err"; local got=$?
  [ "$got" = "$want" ] || bad "tcuda $* -> exit $got, want $want: $(head -c 600 "$tmp/err")"
  [ -z "$sub" ] || grep -qF -- "$sub" "$tmp/err" || bad "tcuda $*: stderr lacks '$sub': $(head -c 600 "$tmp/err")"
}

# ---- --help and unknown options, every subcommand ----
for c in info demo replay snapshot viz rand; do
  "$cli" $c --help > "$tmp/out" 2> "$tmp/err"; rc=$?
  [ $rc = 0 ] || bad "$c --help exited $rc"
  grep -q "^usage: tcuda $c" "$tmp/out" || bad "$c --help: no usage on stdout"
  [ -s "$tmp/err" ] && bad "$c --help wrote to stderr"
  "$cli" help $c | grep -q "^usage: tcuda $c" || bad "tcuda help $c"
  run 2 "unknown option '--bogus'" $c --bogus
  grep -q "^usage: tcuda $c" "$tmp/err" || bad "$c --bogus: no usage on stderr"
  [ -s "$tmp/out" ] && bad "$c --bogus wrote to stdout"
  run 2 "unknown option '-Z'" $c -Z
done
"$cli" demo --help | grep -q "^tcuda demo$" && bad "demo --help ran the demo"
run 2 "option '--json' takes no value" info --json=yes
run 2 "unexpected argument 'extra'" info extra
run 2 "unexpected argument 'extra'" demo extra
run 2 "option '--va' needs a value" replay --simulate --va
run 2 "unknown command 'nosuch'" nosuch
"$cli" --help | grep -q "^  2  bad usage" || bad "tcuda --help does not state the exit codes"

# ---- replay: usage (2) against run-time (1) ----
run 2 "more than one trace" replay --simulate "$data/basic.trace" "$data/basic.trace"
run 2 "--device -1 is not a valid device index" replay --device -1 "$data/basic.trace"
run 2 "--fraction 1.5" replay --simulate --fraction 1.5 "$data/basic.trace"
run 2 "record_addresses" replay --simulate --record-addresses "$tmp/rec" "$data/basic.trace"
printf 'a 1 100\nq\n' > "$tmp/bad.trace"
run 1 "trace line 2: unknown op 'q'" replay --simulate "$tmp/bad.trace"
run 1 "nonexistent.trace: cannot open: " replay --simulate "$tmp/nonexistent.trace"
printf '0x7f0000000000\n' > "$tmp/bad.addresses"
run 1 "expected 'ADDR SIZE'" replay --simulate --addresses "$tmp/bad.addresses" "$data/basic.trace"
run 1 "cannot open trace" snapshot --trace "$tmp/nonexistent.trace"

# ---- replay without a GPU suggests --simulate ----
if "$cli" info --json | grep -q '"cuda_available": false'; then
  run 1 "add --simulate" replay "$data/basic.trace"
fi

# ---- the allocator config: --config, then the environment, then defaults ----
for cmd in "replay --simulate" "snapshot --trace"; do
  # a bad variable is a run-time error naming the variable and the key
  TCUDA_ALLOC_CONF=bogus:1 run 1 "TCUDA_ALLOC_CONF='bogus:1': unknown key 'bogus'" $cmd "$data/basic.trace"
  PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:abc run 1 "PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:abc'" \
    $cmd "$data/basic.trace"
  PYTORCH_ALLOC_CONF=bogus:1 run 1 "PYTORCH_ALLOC_CONF='bogus:1'" $cmd "$data/basic.trace"
  # the first variable set wins, as in the library
  TCUDA_ALLOC_CONF= PYTORCH_CUDA_ALLOC_CONF=bogus:1 run 0 "" $cmd "$data/basic.trace"
  TCUDA_ALLOC_CONF=bogus:1 PYTORCH_CUDA_ALLOC_CONF= run 1 "TCUDA_ALLOC_CONF" $cmd "$data/basic.trace"
  # a bad --config is a usage error; --config overrides the environment
  run 2 "--config 'bogus:1': unknown key 'bogus'" $cmd "$data/basic.trace" --config bogus:1
  TCUDA_ALLOC_CONF=bogus:1 run 0 "" $cmd "$data/basic.trace" --config max_split_size_mb:20
done
# the environment's config is the one used: max_split_size 20 MiB shows in the stats
TCUDA_ALLOC_CONF=max_split_size_mb:20 "$cli" replay --simulate "$data/basic.trace" > "$tmp/env.json" \
  || bad "replay with TCUDA_ALLOC_CONF set failed"
PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:20 "$cli" replay --simulate "$data/basic.trace" > "$tmp/penv.json" \
  || bad "replay with PYTORCH_CUDA_ALLOC_CONF set failed"
"$cli" replay --simulate "$data/basic.trace" > "$tmp/def.json" || bad "replay failed"
python3 - "$tmp/env.json" "$tmp/penv.json" "$tmp/def.json" <<'PY' || fail=1
import json, sys
env, penv, dflt = (json.load(open(p))[0]["stats"]["max_split_size"] for p in sys.argv[1:])
if (env, penv, dflt) != (20 << 20, 20 << 20, -1):
    print(f"FAIL: max_split_size from the environment: {env}, {penv}, default {dflt}"); sys.exit(1)
PY

# ---- a simulated OOM: exit 0, torch's message on stderr ----
for cmd in "replay --simulate --va ascending" "snapshot --trace"; do
  run 0 "tcuda ${cmd%% *}: trace line 4: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 8.00 MiB of which 6.00 MiB is free." \
    $cmd "$data/basic.trace" --capacity 8MiB
done
run 0 "" replay --simulate "$data/basic.trace"
[ -s "$tmp/err" ] && bad "a replay without an OOM wrote to stderr: $(cat "$tmp/err")"

# ---- --capacity units ----
cap() { # ARG BYTES: the OOM message reports BYTES' total capacity
  "$cli" replay --simulate --capacity "$1" "$data/basic.trace" 2>&1 >/dev/null | grep -qF "total capacity of $2" \
    || bad "--capacity $1 is not $2"
}
cap 8MiB "8.00 MiB"
cap 8388608 "8.00 MiB"
cap 0x800000 "8.00 MiB"
cap 8.5MiB "8.50 MiB"
cap 10MB "9.54 MiB"
cap 0.01GB "9.54 MiB"
run 0 "" replay --simulate --capacity 80GB "$data/basic.trace"
run 0 "" replay --simulate --capacity 141GiB "$data/basic.trace"
run 2 "--capacity '80XB': unknown unit" replay --simulate --capacity 80XB "$data/basic.trace"
run 2 "--capacity '1.5B': not a whole number of bytes" replay --simulate --capacity 1.5B "$data/basic.trace"
run 2 "--capacity '0GiB'" replay --simulate --capacity 0GiB "$data/basic.trace"
run 2 "--capacity '-5'" snapshot --trace "$data/basic.trace" --capacity -5
run 2 "too large" replay --simulate --capacity 20000000TB "$data/basic.trace"
"$cli" replay --help | grep -q "150109880320 bytes" || bad "replay --help does not state the default capacity"
"$cli" replay --help | grep -q "PYTORCH_CUDA_ALLOC_CONF" || bad "replay --help does not explain the config order"
"$cli" snapshot --help | grep -q "150109880320 bytes" || bad "snapshot --help does not state the default capacity"

[ $fail = 0 ] && echo PASS
exit $fail
