#!/usr/bin/env bash
# `tcuda info` exits 0 on any machine; without a GPU it says why; --json parses.
set -euo pipefail
cli=${TCUDA_CLI:?}
out=$("$cli" info)
echo "$out"
grep -q "^tcuda " <<<"$out"
grep -q "CUDA runtime" <<<"$out"
json=$("$cli" info --json)
python3 - "$json" <<'PY'
import json, sys
j = json.loads(sys.argv[1])
for k in ("tcuda_version", "cuda_runtime_version", "cuda_driver_version", "nccl_version",
          "arch_list", "gencode_flags", "cuda_available", "device_count", "devices"):
    assert k in j, k
assert j["device_count"] == len(j["devices"])
if not j["cuda_available"]:
    assert j["unavailable_reason"], "no reason given"
    assert j["devices"] == []
else:
    for d in j["devices"]:
        assert d["total_memory"] > 0 and d["free_memory"] <= d["total_memory"]
        assert d["kernel_selftest"] is True
print("json ok")
PY
if [ "$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['cuda_available'])" "$json")" = False ]; then
  grep -q "CUDA is not available: " <<<"$out"
fi
# bad usage: exit 2 and a message; --help: the usage on stdout, exit 0
rc=0; "$cli" info --bogus 2>/dev/null || rc=$?
[ $rc = 2 ] || { echo "expected exit 2 for --bogus, got $rc"; exit 1; }
rc=0; "$cli" nosuchcommand 2>/dev/null || rc=$?
[ $rc = 2 ] || { echo "expected exit 2 for an unknown command, got $rc"; exit 1; }
"$cli" info --help | grep -q "^usage: tcuda info" || { echo "info --help"; exit 1; }
"$cli" demo --help | grep -q "^usage: tcuda demo" || { echo "demo --help ran the demo"; exit 1; }
"$cli" --version | grep -q "^tcuda "
"$cli" demo
echo PASS
