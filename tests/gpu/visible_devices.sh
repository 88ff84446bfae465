#!/usr/bin/env bash
# device_count honours CUDA_VISIBLE_DEVICES (through the runtime).
set -euo pipefail
cli=${TCUDA_CLI:?}
count() { python3 -c "import json,sys; print(json.load(sys.stdin)['device_count'])"; }
all=$(env -u CUDA_VISIBLE_DEVICES "$cli" info --json | count)
if [ "$all" = 0 ]; then echo "SKIPPED: no CUDA device"; exit 77; fi
[ "$(CUDA_VISIBLE_DEVICES= "$cli" info --json | count)" = 0 ] || { echo "empty list should hide all"; exit 1; }
[ "$(CUDA_VISIBLE_DEVICES=0 "$cli" info --json | count)" = 1 ] || { echo "0 should show 1"; exit 1; }
[ "$(CUDA_VISIBLE_DEVICES=$all "$cli" info --json | count)" = 0 ] || { echo "out-of-range ordinal should hide all"; exit 1; }
# with nothing visible, info still exits 0 and says why
out=$(CUDA_VISIBLE_DEVICES= "$cli" info)
grep -q "CUDA is not available" <<<"$out"
if [ "$all" -gt 1 ]; then
  [ "$(CUDA_VISIBLE_DEVICES=1,0 "$cli" info --json | count)" = 2 ] || exit 1
  # order follows the list: device 0 is physical 1
  u1=$("$cli" info --json | python3 -c "import json,sys; print(json.load(sys.stdin)['devices'][1]['uuid'])")
  v0=$(CUDA_VISIBLE_DEVICES=1 "$cli" info --json | python3 -c "import json,sys; print(json.load(sys.stdin)['devices'][0]['uuid'])")
  [ "$u1" = "$v0" ] || { echo "visible order not honoured"; exit 1; }
fi
echo PASS "($all devices)"
