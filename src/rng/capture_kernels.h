/* The kernel behind a generator's graph words (capture_kernels.cu). */
#ifndef TC_RNG_CAPTURE_KERNELS_H
#define TC_RNG_CAPTURE_KERNELS_H
#include <stdint.h>
#include <cuda_runtime_api.h>
#ifdef __cplusplus
extern "C" {
#endif
/* *seed_ptr = seed, *offset_ptr = offset, in stream order. Values travel as
 * kernel arguments: a copy from pageable host memory could block. */
cudaError_t tc_rng_set_philox_words(uint64_t *seed_ptr, uint64_t *offset_ptr, uint64_t seed, uint64_t offset,
                                    cudaStream_t stream);
#ifdef __cplusplus
}
#endif
#endif
