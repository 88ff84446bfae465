#!/usr/bin/env bash
# Workloads with tcuda as torch's allocator (tcuda.torch.install()) against
# native torch: a training loop that survives OOMs by halving its batch,
# CNN and UNet with cuDNN, a graph-captured training step, a side stream
# with record_stream; stats and layouts step by step
# (tests/gpu/torch_workloads.py). SKIPPED without torch, a GPU, or
# tcuda.torch in this tree.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../tools/torch_gpu.sh"
"$py" -c "import tcuda.torch" 2> /dev/null || { echo "SKIPPED: no tcuda.torch in this tree"; exit 77; }
export TCUDA_TORCH_CACHE="${TCUDA_TORCH_CACHE:-${TCUDA_BINARY_DIR}/torch-glue}"
exec timeout 300 "$py" "$HERE/torch_workloads.py"
