// The library's bulk copy and sum kernels (src/comm/kernels.cuh) in every
// launch shape bench_comm sweeps: threads per block and 16-byte loads in
// flight per thread. The library launches one shape (src/comm/kernels.cu).
#include "comm/kernels.cuh"
#include "comm_sweep.h"

namespace {

int threads_for(int threads, int max) {
  int t = threads > 0 ? threads : kThreads;
  if (t > max) t = max;
  if (t < 32) t = 32;
  return t;
}

template <int U>
int launch_copy(cudaStream_t s, void *dst, const void *src, size_t bytes, int blocks, int threads) {
  int t = threads_for(threads, max_threads<U>());
  k_copy<U><<<grid_for(bytes / (16 * U) + 1, blocks, t), t, 0, s>>>((char *)dst, (const char *)src, bytes);
  return (int)cudaGetLastError();
}

template <int U>
int launch_add(cudaStream_t s, float *out, const float *a, const float *b, size_t n, int blocks, int threads) {
  int vec = (((uintptr_t)out | (uintptr_t)a | (uintptr_t)b) & 15) == 0;
  int t = threads_for(threads, max_threads<U>());
  uint64_t work = vec ? n / (16 / sizeof(float)) / U + 1 : n;
  k_add<float, U><<<grid_for(work, blocks, t), t, 0, s>>>(out, a, b, n, vec);
  return (int)cudaGetLastError();
}

} // namespace

extern "C" int sw_k_copy(struct CUstream_st *s, void *dst, const void *src, size_t bytes, int blocks, int threads,
                         int unroll) {
  if (!bytes) return 0;
  switch (unroll) {
  case 1: return launch_copy<1>(s, dst, src, bytes, blocks, threads);
  case 2: return launch_copy<2>(s, dst, src, bytes, blocks, threads);
  case 0:
  case 4: return launch_copy<4>(s, dst, src, bytes, blocks, threads);
  case 8: return launch_copy<8>(s, dst, src, bytes, blocks, threads);
  case 12: return launch_copy<12>(s, dst, src, bytes, blocks, threads);
  default: return (int)cudaErrorInvalidValue;
  }
}

extern "C" int sw_k_add_f32(struct CUstream_st *s, float *out, const float *a, const float *b, size_t n, int blocks,
                            int threads, int unroll) {
  if (!n) return 0;
  switch (unroll) {
  case 0:
  case 1: return launch_add<1>(s, out, a, b, n, blocks, threads);
  case 2: return launch_add<2>(s, out, a, b, n, blocks, threads);
  case 4: return launch_add<4>(s, out, a, b, n, blocks, threads);
  case 8:
  case 12: return launch_add<8>(s, out, a, b, n, blocks, threads); // 12 is a copy setting
  default: return (int)cudaErrorInvalidValue;
  }
}
