// Comm kernels: vectorised (16-byte) copies that also drive NVLink when a
// pointer is on a peer, a strided copy for non-contiguous layouts, and the
// sum of reduce_add's copy path.
#include "comm/kernels.h"
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>

namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ void copy_range(char *dst, const char *src, uint64_t bytes, uint64_t tid,
                                           uint64_t nt) {
  uintptr_t a = (uintptr_t)dst | (uintptr_t)src;
  uint64_t done = 0;
  if ((a & 15) == 0) {
    const uint4 *s = reinterpret_cast<const uint4 *>(src);
    uint4 *d = reinterpret_cast<uint4 *>(dst);
    uint64_t nv = bytes / 16, i = tid;
    // four loads in flight per thread: NVLink latency needs the parallelism
    for (; i + 3 * nt < nv; i += 4 * nt) {
      uint4 r0 = s[i], r1 = s[i + nt], r2 = s[i + 2 * nt], r3 = s[i + 3 * nt];
      d[i] = r0; d[i + nt] = r1; d[i + 2 * nt] = r2; d[i + 3 * nt] = r3;
    }
    for (; i < nv; i += nt) d[i] = s[i];
    done = nv * 16;
  } else if ((a & 3) == 0) {
    const uint32_t *s = reinterpret_cast<const uint32_t *>(src);
    uint32_t *d = reinterpret_cast<uint32_t *>(dst);
    uint64_t nv = bytes / 4;
    for (uint64_t i = tid; i < nv; i += nt) d[i] = s[i];
    done = nv * 4;
  }
  for (uint64_t i = done + tid; i < bytes; i += nt) dst[i] = src[i];
}

__global__ void k_copy(char *dst, const char *src, uint64_t bytes) {
  copy_range(dst, src, bytes, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, (uint64_t)gridDim.x * blockDim.x);
}

__global__ void k_multicopy(const tc_copy_item *items, size_t n) {
  for (size_t it = blockIdx.y; it < n; it += gridDim.y) {
    tc_copy_item c = items[it];
    copy_range(c.dst, c.src, c.bytes, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x,
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

template <typename T> struct Sum {
  // integers wrap like PyTorch's (two's complement) without signed overflow UB
  __device__ static T add(T a, T b) {
    return (T)((unsigned long long)a + (unsigned long long)b);
  }
};
template <> struct Sum<float> { __device__ static float add(float a, float b) { return a + b; } };
template <> struct Sum<double> { __device__ static double add(double a, double b) { return a + b; } };
template <> struct Sum<__half> {
  __device__ static __half add(__half a, __half b) { return __float2half(__half2float(a) + __half2float(b)); }
};
template <> struct Sum<__nv_bfloat16> {
  __device__ static __nv_bfloat16 add(__nv_bfloat16 a, __nv_bfloat16 b) {
    return __float2bfloat16(__bfloat162float(a) + __bfloat162float(b));
  }
};
struct Bool { unsigned char v; };
template <> struct Sum<Bool> {
  __device__ static Bool add(Bool a, Bool b) { return Bool{(unsigned char)((a.v | b.v) ? 1 : 0)}; }
};

template <typename T>
__global__ void k_add(T *out, const T *a, const T *b, uint64_t n, int vec) {
  const uint64_t nt = (uint64_t)gridDim.x * blockDim.x, tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t done = 0;
  if (vec) {
    constexpr int V = 16 / sizeof(T);
    uint64_t nv = n / V;
    for (uint64_t i = tid; i < nv; i += nt) {
      uint4 x = reinterpret_cast<const uint4 *>(a)[i];
      uint4 y = reinterpret_cast<const uint4 *>(b)[i];
      T *xe = reinterpret_cast<T *>(&x);
      const T *ye = reinterpret_cast<const T *>(&y);
#pragma unroll
      for (int j = 0; j < V; j++) xe[j] = Sum<T>::add(xe[j], ye[j]);
      reinterpret_cast<uint4 *>(out)[i] = x;
    }
    done = nv * V;
  }
  for (uint64_t i = done + tid; i < n; i += nt) out[i] = Sum<T>::add(a[i], b[i]);
}

int grid_for(uint64_t work_items, int blocks) {
  uint64_t g = (work_items + kThreads - 1) / kThreads;
  if (g < 1) g = 1;
  if (g > (uint64_t)blocks) g = (uint64_t)blocks;
  return (int)g;
}

template <typename T>
int launch_add(cudaStream_t s, void *out, const void *a, const void *b, size_t n, int blocks) {
  int vec = (((uintptr_t)out | (uintptr_t)a | (uintptr_t)b) & 15) == 0;
  k_add<T><<<grid_for(vec ? n / (16 / sizeof(T)) + 1 : n, blocks), kThreads, 0, s>>>(
      (T *)out, (const T *)a, (const T *)b, n, vec);
  return (int)cudaGetLastError();
}

} // namespace

extern "C" int tc_k_copy(struct CUstream_st *s, void *dst, const void *src, size_t bytes, int blocks) {
  if (!bytes) return 0;
  k_copy<<<grid_for(bytes / 64 + 1, blocks), kThreads, 0, s>>>((char *)dst, (const char *)src, bytes);
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
