#!/usr/bin/env bash
# A PyTorch training loop on torch's allocator and on tcuda (pluggable
# allocator): identical losses bit for bit; RESULT lines for peak reserved
# memory and step time. SKIPPED (77) without torch or a GPU.
set -u
. "${TCUDA_SOURCE_DIR:?}/tests/tools/torch_gpu.sh"
# thread_cache:N (docs/allocator.md) changes placements, snapshots and peaks
# by design: no exact comparison with torch then.
if printf '%s' "${TCUDA_ALLOC_CONF:-}" | grep -Eq 'thread_cache:[[:space:]]*[1-9]'; then
  echo "SKIPPED: TCUDA_ALLOC_CONF sets thread_cache; this test compares with torch exactly"
  exit 77
fi
export CUBLAS_WORKSPACE_CONFIG=:4096:8
exec timeout 120 "$py" "$TCUDA_SOURCE_DIR/tests/python/train_loop.py" --steps "${TCUDA_TRAIN_STEPS:-300}"
