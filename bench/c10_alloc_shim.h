/* C view of PyTorch's C++ caching allocator (libc10_cuda), for bench_alloc.
 * Built only when a torch install is found at configure time (BENCH_HAVE_C10).
 * Functions returning int give 0 on success and -1 on a C++ exception, whose
 * text c10_last_error() then holds. */
#ifndef BENCH_C10_ALLOC_SHIM_H
#define BENCH_C10_ALLOC_SHIM_H
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

typedef struct c10_shim_stats {
  int64_t allocated_current, allocated_peak;  /* allocated_bytes.all */
  int64_t reserved_current, reserved_peak;    /* reserved_bytes.all */
  int64_t segment_current;                    /* segment.all.current */
  int64_t num_device_alloc, num_device_free;
} c10_shim_stats;

int c10_init(int ndev);
/* stream: a cudaStream_t, NULL for the legacy default stream. NULL on failure. */
void *c10_raw_alloc(size_t size, void *stream);
void c10_raw_delete(void *ptr);
/* One record_stream round: allocate `size` on stream `alloc_stream` (the
 * current stream, as torch code does), recordStream it on `use_stream`,
 * free it (the block waits for an event on use_stream). */
int c10_cross_stream_round(size_t size, void *alloc_stream, void *use_stream);
int c10_stats(int device, c10_shim_stats *out);
int c10_empty_cache(void);
int c10_reset_peak(int device);
/* PYTORCH_CUDA_ALLOC_CONF syntax, applied at run time. */
int c10_set_settings(const char *conf);
const char *c10_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
