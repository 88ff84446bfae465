// Comm kernels: vectorised (16-byte) copies that also drive NVLink when a
// pointer is on a peer, a strided copy for non-contiguous layouts, and the
// sum of reduce_add. The bulk copy and sum bodies are in kernels.cuh; this
// file launches them in the library's one shape.
#include "comm/kernels.h"
#include "comm/kernels.cuh"

namespace {

__global__ void k_multicopy(const tc_copy_item *items, size_t n) {
  for (size_t it = blockIdx.y; it < n; it += gridDim.y) {
    tc_copy_item c = items[it];
    copy_range<4>(c.dst, c.src, c.bytes, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
               (uint64_t)gridDim.x * blockDim.x);
  }
}

template <typename T>
__global__ void k_strided(tc_strided_desc d) {
  const uint64_t nt = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (uint64_t)d.numel; i += nt) {
    int64_t rem = (int64_t)i, so = 0, dof = 0;
    for (int k = d.ndim - 1; k >= 0; k--) {
      int64_t c = rem % d.shape[k];
      rem /= d.shape[k];
      so += c * d.src_strides[k];
      dof += c * d.dst_strides[k];
    }
    reinterpret_cast<T *>(d.dst)[dof] = reinterpret_cast<const T *>(d.src)[so];
  }
}

struct alignas(16) v16 { uint4 v; };

// The sum keeps one 16-byte load of each input in flight per thread.
template <typename T>
int launch_add(cudaStream_t s, void *out, const void *a, const void *b, size_t n, int blocks) {
  int vec = (((uintptr_t)out | (uintptr_t)a | (uintptr_t)b) & 15) == 0;
  uint64_t work = vec ? n / (16 / sizeof(T)) + 1 : n;
  k_add<T, 1><<<grid_for(work, blocks), kThreads, 0, s>>>((T *)out, (const T *)a, (const T *)b, n, vec);
  return (int)cudaGetLastError();
}

} // namespace

// Four 16-byte loads in flight per thread.
extern "C" int tc_k_copy(struct CUstream_st *s, void *dst, const void *src, size_t bytes, int blocks) {
  if (!bytes) return 0;
  k_copy<4><<<grid_for(bytes / (16 * 4) + 1, blocks), kThreads, 0, s>>>((char *)dst, (const char *)src, bytes);
  return (int)cudaGetLastError();
}

extern "C" int tc_k_multicopy(struct CUstream_st *s, const tc_copy_item *items, size_t n, uint64_t max_bytes,
                              int blocks) {
  if (!n) return 0;
  // x: blocks per item (enough for its 16-byte words, four per thread);
  // y: items, striding when there are more than CUDA's y limit
  int gx = grid_for(max_bytes / 64 + 1, blocks);
  unsigned gy = n > 65535 ? 65535u : (unsigned)n;
  k_multicopy<<<dim3(gx, gy), kThreads, 0, s>>>(items, n);
  return (int)cudaGetLastError();
}

extern "C" int tc_k_strided(struct CUstream_st *s, const tc_strided_desc *d, int blocks) {
  if (d->numel <= 0) return 0;
  int g = grid_for((uint64_t)d->numel, blocks);
  switch (d->elem) {
  case 1: k_strided<uint8_t><<<g, kThreads, 0, s>>>(*d); break;
  case 2: k_strided<uint16_t><<<g, kThreads, 0, s>>>(*d); break;
  case 4: k_strided<uint32_t><<<g, kThreads, 0, s>>>(*d); break;
  case 8: k_strided<uint64_t><<<g, kThreads, 0, s>>>(*d); break;
  case 16: k_strided<v16><<<g, kThreads, 0, s>>>(*d); break;
  default: return (int)cudaErrorInvalidValue;
  }
  return (int)cudaGetLastError();
}

extern "C" int tc_k_add(struct CUstream_st *s, int kind, void *out, const void *a, const void *b, size_t n,
                        int blocks) {
  if (!n) return 0;
  switch (kind) {
  case TC_K_I8: return launch_add<int8_t>(s, out, a, b, n, blocks);
  case TC_K_U8: return launch_add<uint8_t>(s, out, a, b, n, blocks);
  case TC_K_I16: return launch_add<int16_t>(s, out, a, b, n, blocks);
  case TC_K_U16: return launch_add<uint16_t>(s, out, a, b, n, blocks);
  case TC_K_I32: return launch_add<int32_t>(s, out, a, b, n, blocks);
  case TC_K_U32: return launch_add<uint32_t>(s, out, a, b, n, blocks);
  case TC_K_I64: return launch_add<int64_t>(s, out, a, b, n, blocks);
  case TC_K_U64: return launch_add<uint64_t>(s, out, a, b, n, blocks);
  case TC_K_F16: return launch_add<__half>(s, out, a, b, n, blocks);
  case TC_K_BF16: return launch_add<__nv_bfloat16>(s, out, a, b, n, blocks);
  case TC_K_F32: return launch_add<float>(s, out, a, b, n, blocks);
  case TC_K_F64: return launch_add<double>(s, out, a, b, n, blocks);
  case TC_K_BOOL: return launch_add<Bool>(s, out, a, b, n, blocks);
  default: return (int)cudaErrorInvalidValue;
  }
}
