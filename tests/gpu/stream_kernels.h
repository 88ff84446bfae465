/* Test kernels for streams and events (stream_kernels.cu); any gpu test may
 * use them. Each launcher returns the launch's cudaError_t. */
#ifndef TCT_STREAM_KERNELS_H
#define TCT_STREAM_KERNELS_H
#include <stddef.h>
#include <cuda_runtime_api.h>
#ifdef __cplusplus
extern "C" {
#endif

/* One thread that busy-waits `us` microseconds of %globaltimer time. */
cudaError_t tct_spin_us(unsigned long long us, cudaStream_t stream);
/* One thread that waits until *flag (host-mapped memory) is non-zero, or
 * `timeout_us` passed, so a test can hold a stream busy exactly as long as
 * it needs. */
cudaError_t tct_wait_flag(const volatile unsigned *flag, unsigned long long timeout_us, cudaStream_t stream);
/* p[i] = tct_pattern(i, seed) for i < n. */
cudaError_t tct_fill(unsigned *p, size_t n, unsigned seed, cudaStream_t stream);
/* Adds to *mismatches the number of i < n with p[i] != tct_pattern(i, seed). */
cudaError_t tct_check(const unsigned *p, size_t n, unsigned seed, unsigned *mismatches, cudaStream_t stream);

#ifdef __CUDACC__
#define TCT_HD __host__ __device__
#else
#define TCT_HD
#endif
static inline TCT_HD unsigned tct_pattern(size_t i, unsigned seed) { return seed ^ (unsigned)(i * 2654435761u); }

#ifdef __cplusplus
}
#endif
#endif
