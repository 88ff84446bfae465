#!/usr/bin/env bash
# tcuda rand: usage errors exit 2 with a message, library errors exit 1 with
# the library's message; without a GPU a valid call says CUDA is missing.
set -uo pipefail
cli=${TCUDA_CLI:?}
fail=0
expect() { # expect RC SUBSTRING -- args...
  local rc=$1 sub=$2; shift 3
  out=$("$cli" rand "$@" 2>&1 >/dev/null); got=$?
  if [ "$got" != "$rc" ] || ! grep -qF -- "$sub" <<<"$out"; then
    echo "FAIL: tcuda rand $* -> rc $got, '$out' (want rc $rc, '$sub')"; fail=1
  fi
}
expect 2 "are required" -- --dtype float32 -n 4
expect 2 "unknown --dist 'gamma'" -- --dist gamma --dtype float32 -n 4
expect 2 "needs --high" -- --dist randint --dtype int64 -n 4
expect 2 "is not an integer" -- --dist uniform --dtype float32 -n 4x
expect 2 "is not a number" -- --dist uniform --dtype float32 -n 4 --from abc
expect 2 "unknown option '--bogus'" -- --bogus 1
expect 2 "needs a value" -- --dist uniform --dtype float32 -n
expect 1 "unknown dtype name 'float128'" -- --dist uniform --dtype float128 -n 4
"$cli" rand --help | grep -q "torch.rand" || { echo "FAIL: --help"; fail=1; }
"$cli" --help | grep -q "^  rand" || { echo "FAIL: rand not listed"; fail=1; }
if "$cli" info --json | grep -q '"cuda_available": false'; then
  expect 1 "CUDA is not available" -- --seed 1 --dist uniform --dtype float32 -n 4
  # argument errors come before CUDA
  expect 1 "from=2 > to=1" -- --dist uniform --dtype float32 -n 4 --from 2 --to 1
  expect 1 "low=3 >= high=3" -- --dist randint --dtype int64 -n 4 --low 3 --high 3
else
  expect 1 "offset 6 is not a multiple of 4" -- --seed 1 --offset 6 --dist uniform --dtype float32 -n 4
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
  read -r sms tpsm < <("$cli" info --json | python3 -c 'import json,sys; d=json.load(sys.stdin)["devices"][0]; print(d["multi_processor_count"], d["max_threads_per_multi_processor"])')
  n=1081345
  need=$(( (n + 255) / 256 )); grid=$(( sms * (tpsm / 256) )); [ $need -lt $grid ] && grid=$need
  want=$(( 8 + ((n - 1) / (256 * grid * 4) + 1) * 4 ))
  st=$("$cli" rand --seed 3 --offset 8 --dist uniform --dtype float32 -n $n --state 2>&1 >/dev/null)
  grep -q "offset=$want$" <<<"$st" || { echo "FAIL: offset after $n floats on $sms SMs is '$st', want $want"; fail=1; }
fi
[ $fail = 0 ] && echo PASS
exit $fail
