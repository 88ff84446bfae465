/* The cudaMallocAsync reference of bench_alloc and bench_frag: a device
 * pool of its own that keeps what it has reserved (release threshold at the
 * maximum), so its reserved high-water mark is comparable with a caching
 * allocator's peak reserved. */
#ifndef BENCH_MEMPOOL_H
#define BENCH_MEMPOOL_H
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cuda_runtime_api.h>

/* 0, or -1 with the reason in why. */
static inline int bench_make_pool(cudaMemPool_t *pool, char *why, size_t why_len) {
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  cudaError_t e = cudaMemPoolCreate(pool, &props);
  if (e != cudaSuccess) {
    snprintf(why, why_len, "cudaMemPoolCreate: %s", cudaGetErrorString(e));
    return -1;
  }
  uint64_t keep = UINT64_MAX;
  e = cudaMemPoolSetAttribute(*pool, cudaMemPoolAttrReleaseThreshold, &keep);
  if (e != cudaSuccess) {
    snprintf(why, why_len, "cudaMemPoolSetAttribute: %s", cudaGetErrorString(e));
    return -1;
  }
  return 0;
}
#endif
