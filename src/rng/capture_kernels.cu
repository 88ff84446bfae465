#include "rng/capture_kernels.h"

static __global__ void set_philox(uint64_t *seed_ptr, uint64_t *offset_ptr, uint64_t seed, uint64_t offset) {
  *seed_ptr = seed;
  *offset_ptr = offset;
}

extern "C" cudaError_t tc_rng_set_philox_words(uint64_t *seed_ptr, uint64_t *offset_ptr, uint64_t seed,
                                               uint64_t offset, cudaStream_t stream) {
  set_philox<<<1, 1, 0, stream>>>(seed_ptr, offset_ptr, seed, offset);
  return cudaGetLastError();
}
