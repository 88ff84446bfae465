/* The host side of comm's .cu files, for a build without the CUDA toolkit
 * (src/core/nocuda/kernels.c says why). */
#include <cuda_runtime_api.h>

#include "comm/kernels.h"

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
