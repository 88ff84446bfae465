/* Internal API of the core layer for the layers above it. Includes CUDA. */
#ifndef TC_CORE_H
#define TC_CORE_H
#include "error.h"
#include <cuda_runtime_api.h>

/* Wrap a CUDA runtime error: "func: call failed: cudaErrorX (text)". Maps
 * cudaErrorMemoryAllocation to TCUDA_ERROR_OUT_OF_MEMORY. Returns the status. */
tcuda_status tc_cuda_error(cudaError_t err, const char *func, const char *call);
#define TC_CUDA_TRY(func, call)                                                   \
  do {                                                                            \
    cudaError_t tc_e_ = (call);                                                   \
    if (tc_e_ != cudaSuccess) return tc_cuda_error(tc_e_, func, #call);           \
  } while (0)

/* Initialise on demand. Errors name `func`. */
tcuda_status tc_lazy_init(const char *func);
/* Device count after init (0 before). */
int tc_device_count(void);
/* Resolve -1 to the current device and range-check; errors name func. */
tcuda_status tc_resolve_device(const char *func, int *device);
/* Make the pending target device real (creates its context). Call before
 * work that needs the current device to be set in CUDA. */
tcuda_status tc_apply_target_device(const char *func);

/* A driver API function by name through the runtime; NULL if unavailable. */
void *tc_driver_fn(const char *name);

/* dlopen'ed libraries, so binaries start where they are missing. */
void *tc_nccl_sym(const char *name);
void *tc_cublas_sym(const char *name);

#endif
