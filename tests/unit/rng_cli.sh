#!/usr/bin/env bash
# tcuda rand: usage errors (bad options and values) exit 2 with a message,
# run-time errors exit 1; without a GPU (or with --cpu) uniform, random and
# randint are made on the CPU for a stated geometry, normal exits 1; on a
# GPU the CPU path gives the GPU's bytes for the device's geometry.
set -uo pipefail
cli=${TCUDA_CLI:?}
fail=0
tmpd=$(mktemp -d)
trap 'rm -rf "$tmpd"' EXIT
expect() { # expect RC SUBSTRING -- args...
  local rc=$1 sub=$2; shift 3
  out=$("$cli" rand "$@" 2>&1 >/dev/null); got=$?
  if [ "$got" != "$rc" ] || ! grep -qF -- "$sub" <<<"$out"; then
    echo "FAIL: tcuda rand $* -> rc $got, '$out' (want rc $rc, '$sub')"; fail=1
  fi
}
expect 2 "are required" -- --dtype float32 -n 4
expect 2 "unknown --dist 'gamma'" -- --dist gamma --dtype float32 -n 4
expect 2 "unknown --dist 'gauss'" -- --dist gauss --dtype float32 -n 4
expect 2 "needs --high" -- --dist randint --dtype int64 -n 4
expect 2 "is not an integer" -- --dist uniform --dtype float32 -n 4x
expect 2 "-n -4 is not a valid count" -- --dist uniform --dtype float32 -n -4
expect 2 "is not a number" -- --dist uniform --dtype float32 -n 4 --from abc
expect 2 "unknown option '--bogus'" -- --bogus 1
expect 2 "needs a value" -- --dist uniform --dtype float32 -n
# a bad value is a usage error (exit 2; it was 1 before the CLI convention)
expect 2 "unknown dtype name 'float128'" -- --dist uniform --dtype float128 -n 4
expect 2 "from=2 > to=1" -- --dist uniform --dtype float32 -n 4 --from 2 --to 1
expect 2 "low=3 >= high=3" -- --dist randint --dtype int64 -n 4 --low 3 --high 3
expect 2 "offset 6 is not a multiple of 4" -- --seed 1 --offset 6 --dist uniform --dtype float32 -n 4
expect 2 "--offset -4: must be 0 or more" -- --seed 1 --offset -4 --dist uniform --dtype float32 -n 4
# an option of another distribution is refused, not ignored
expect 2 "--mean does not apply to --dist uniform" -- --dist uniform --mean 1 --dtype float32 -n 4
expect 2 "--from does not apply to --dist normal" -- --dist normal --from 1 --dtype float32 -n 4
expect 2 "--high does not apply to --dist random" -- --dist random --high 9 --dtype int32 -n 4
expect 2 "--std does not apply to --dist randint" -- --dist randint --high 9 --std 2 --dtype int32 -n 4
expect 2 "--sm-count 0 is not a valid SM count" -- --cpu --sm-count 0 --dist uniform --dtype float32 -n 4
expect 2 "--cpu: normal needs the GPU" -- --cpu --seed 1 --dist normal --dtype float32 -n 4
"$cli" rand --help | grep -q "torch.rand" || { echo "FAIL: --help"; fail=1; }
"$cli" rand --help | grep -q "132 SMs x 2048" || { echo "FAIL: --help lacks the default geometry"; fail=1; }
"$cli" --help | grep -q "^  rand" || { echo "FAIL: rand not listed"; fail=1; }
# --cpu: the same bytes for the same seed, offset and geometry; another
# geometry gives other bytes; the offset after is torch's
a=$("$cli" rand --cpu --sm-count 132 --seed 3 --dist uniform --dtype float32 -n 300000 | od -An -tx1 | tr -d ' \n')
b=$("$cli" rand --cpu --sm-count 132 --seed 3 --dist uniform --dtype float32 -n 300000 | od -An -tx1 | tr -d ' \n')
c=$("$cli" rand --cpu --sm-count 108 --seed 3 --dist uniform --dtype float32 -n 300000 | od -An -tx1 | tr -d ' \n')
[ "$a" = "$b" ] && [ "$a" != "$c" ] && [ ${#a} = 2400000 ] || { echo "FAIL: --cpu output not reproducible or ignores the geometry"; fail=1; }
st=$("$cli" rand --cpu --sm-count 132 --threads-per-sm 2048 --seed 3 --offset 8 --dist uniform --dtype float32 -n 1081345 --state 2>&1 >/dev/null)
grep -q "^device=cpu sm_count=132 threads_per_sm=2048$" <<<"$st" && grep -q "^seed=3 offset=16$" <<<"$st" \
  || { echo "FAIL: --cpu --state is '$st'"; fail=1; }
if "$cli" info --json | grep -q '"cuda_available": false'; then
  # without a GPU the CPU makes uniform/random/randint, for an H200 unless told
  st=$("$cli" rand --seed 1 --dist randint --high 10 --dtype int64 -n 8 --state 2>&1 >/dev/null) \
    || { echo "FAIL: rand without a GPU: $st"; fail=1; }
  grep -q "^device=cpu sm_count=132 threads_per_sm=2048$" <<<"$st" || { echo "FAIL: default geometry: '$st'"; fail=1; }
  [ "$("$cli" rand --seed 1 --dist randint --high 10 --dtype int64 -n 8 | od -An -tx1 | tr -d ' \n')" = \
    "$("$cli" rand --cpu --sm-count 132 --seed 1 --dist randint --high 10 --dtype int64 -n 8 | od -An -tx1 | tr -d ' \n')" ] \
    || { echo "FAIL: the default CPU path is not the H200's"; fail=1; }
  expect 1 "normal needs the GPU's own sincosf and logf" -- --seed 1 --dist normal --dtype float32 -n 4
  expect 1 "--device 0 needs a GPU" -- --device 0 --seed 1 --dist uniform --dtype float32 -n 4
else
  read -r sms tpsm < <("$cli" info --json | python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"][0]; print(d["multi_processor_count"], d["max_threads_per_multi_processor"])')
  n=$("$cli" rand --seed 3 --dist uniform --dtype float16 -n 1001 | wc -c)
  [ "$n" = 2002 ] || { echo "FAIL: 1001 float16 gave $n bytes"; fail=1; }
  a=$("$cli" rand --seed 3 --dist normal --dtype float64 -n 64 | od -An -tx1 | tr -d ' \n')
  b=$("$cli" rand --seed 3 --dist normal --dtype float64 -n 64 | od -An -tx1 | tr -d ' \n')
  c=$("$cli" rand --seed 4 --dist normal --dtype float64 -n 64 | od -An -tx1 | tr -d ' \n')
  [ "$a" = "$b" ] && [ "$a" != "$c" ] || { echo "FAIL: seeded output not reproducible"; fail=1; }
  # the offset advances as torch's distribution_nullary_kernel computes it
  # from the launch: 256 threads a block, grid = min(SMs * threads per SM /
  # 256, blocks needed), 4 values a thread a round, 4 engine calls a round
  # (8 + 8 on a 132-SM H200)
  n=1081345
  need=$(( (n + 255) / 256 )); grid=$(( sms * (tpsm / 256) )); [ $need -lt $grid ] && grid=$need
  want=$(( 8 + ((n - 1) / (256 * grid * 4) + 1) * 4 ))
  st=$("$cli" rand --seed 3 --offset 8 --dist uniform --dtype float32 -n $n --state 2>&1 >/dev/null)
  grep -q "offset=$want$" <<<"$st" || { echo "FAIL: offset after $n floats on $sms SMs is '$st', want $want"; fail=1; }
  grep -q "^device=gpu:0 sm_count=$sms threads_per_sm=$tpsm$" <<<"$st" || { echo "FAIL: GPU --state: '$st'"; fail=1; }
  # the CPU path equals the GPU path, byte for byte and offset for offset,
  # for the device's geometry (given or by default)
  while read -r args; do
    g=$("$cli" rand --sm-count $sms --threads-per-sm $tpsm $args --state 2>"$tmpd/gs" | od -An -tx1 | tr -d ' \n')
    h=$("$cli" rand --cpu $args --state 2>"$tmpd/hs" | od -An -tx1 | tr -d ' \n')
    [ -n "$g" ] && [ "$g" = "$h" ] || { echo "FAIL: CPU and GPU bytes differ for: $args"; fail=1; }
    [ "$(tail -1 "$tmpd/gs")" = "$(tail -1 "$tmpd/hs")" ] || { echo "FAIL: CPU and GPU state differ for: $args"; fail=1; }
  done <<'CASES'
--seed 3 --dist uniform --dtype float32 -n 1081345
--seed 5 --offset 12 --dist uniform --dtype float64 -n 540673 --from -2 --to 3
--seed 6 --dist uniform --dtype bfloat16 -n 4099 --from 0.1 --to 0.7
--seed 7 --dist uniform --dtype complex64 -n 270337
--seed 8 --offset 4 --dist random --dtype int64 -n 600001
--seed 9 --dist random --dtype float16 -n 65537
--seed 10 --dist random --low -100 --dtype int8 -n 3000
--seed 11 --dist randint --low -5 --high 5 --dtype int64 -n 1000
--seed 12 --dist randint --high 1099511627776 --dtype int64 -n 300001
--seed 13 --dist randint --high 60000 --low 1 --dtype uint16 -n 70000
CASES
  other=$(( sms + 1 ))
  expect 2 "do not match device 0" -- --sm-count $other --seed 1 --dist uniform --dtype float32 -n 4
  "$cli" rand --cpu --sm-count $other --seed 1 --dist uniform --dtype float32 -n 4 >/dev/null \
    || { echo "FAIL: --cpu --sm-count $other refused"; fail=1; }
fi
[ $fail = 0 ] && echo PASS
exit $fail
