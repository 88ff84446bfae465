# Sourced by the scripts: toolchain paths and the generator.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
TCUDA_GEN=()
command -v ninja >/dev/null 2>&1 && TCUDA_GEN=(-G Ninja)
TCUDA_JOBS=$(nproc 2>/dev/null || echo 2)
