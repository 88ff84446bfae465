/* DLPack for the comm layer: the real dlpack.h when the build found one,
 * otherwise a copy of its stable ABI (DLTensor's layout has not changed
 * between v0.6 and v1.x), so the comm layer and its tests always build. */
#ifndef TC_DLPACK_COMPAT_H
#define TC_DLPACK_COMPAT_H
#include <stdint.h>

#if defined(TCUDA_HAVE_DLPACK) || __has_include(<dlpack/dlpack.h>)
#include <dlpack/dlpack.h>
#else
#define DLPACK_DLPACK_H_ 1
#define TC_DLPACK_MIRROR 1
typedef struct {
  int32_t device_type;
  int32_t device_id;
} DLDevice;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
#endif

/* Numeric codes, so any dlpack version's enum spelling works (v0.5 said
 * kDLGPU, v0.6 kDLCUDA; kDLBool only exists from v0.8). */
enum {
  TC_DL_CPU = 1, TC_DL_CUDA = 2, TC_DL_CUDA_HOST = 3, TC_DL_CUDA_MANAGED = 13
};
enum {
  TC_DL_INT = 0, TC_DL_UINT = 1, TC_DL_FLOAT = 2, TC_DL_BFLOAT = 4, TC_DL_COMPLEX = 5, TC_DL_BOOL = 6,
  /* v1.1 fp8 codes: byte-sized, move-only (no sums) */
  TC_DL_FLOAT8_FIRST = 7, TC_DL_FLOAT8_LAST = 13
};
#endif
