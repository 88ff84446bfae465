/* The host side of rng's .cu files, for a build without the CUDA toolkit
 * (src/core/nocuda/kernels.c says why). */
#include "rng/capture_kernels.h"
#include "rng/kernels.h"

cudaError_t tc_rng_set_philox_words(uint64_t *seed_ptr, uint64_t *offset_ptr, uint64_t seed, uint64_t offset,
                                    cudaStream_t stream) {
  return cudaErrorNoDevice;
}
cudaError_t tc_rng_launch(const tc_rng_op *op, void *out, uint64_t n, uint32_t threads,
                          const tc_philox_args *philox, int reference, int sm_count, cudaStream_t stream) {
  return cudaErrorNoDevice;
}
