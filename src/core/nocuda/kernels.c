/* The host side of the .cu files, for a build without the CUDA toolkit:
 * every launch fails as the stand-in runtime does. Nothing reaches these,
 * since no device can be initialised; they exist so the layers link. */
#include "comm/kernels.h"
#include "rng/capture_kernels.h"
#include "rng/kernels.h"

cudaError_t tc_selftest_launch(unsigned *out, unsigned v, cudaStream_t s) { return cudaErrorNoDevice; }
cudaError_t tc_rng_set_philox_words(uint64_t *seed_ptr, uint64_t *offset_ptr, uint64_t seed, uint64_t offset,
                                    cudaStream_t stream) {
  return cudaErrorNoDevice;
}
cudaError_t tc_rng_launch(const tc_rng_op *op, void *out, uint64_t n, uint32_t threads,
                          const tc_philox_args *philox, int reference, int sm_count, cudaStream_t stream) {
  return cudaErrorNoDevice;
}
int tc_k_copy(struct CUstream_st *s, void *dst, const void *src, size_t bytes, int blocks) {
  return cudaErrorNoDevice;
}
int tc_k_multicopy(struct CUstream_st *s, const tc_copy_item *items, size_t n, uint64_t max_bytes, int blocks) {
  return cudaErrorNoDevice;
}
int tc_k_strided(struct CUstream_st *s, const tc_strided_desc *d, int blocks) { return cudaErrorNoDevice; }
int tc_k_add(struct CUstream_st *s, int kind, void *out, const void *a, const void *b, size_t n, int blocks) {
  return cudaErrorNoDevice;
}
