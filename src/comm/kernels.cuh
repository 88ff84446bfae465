// Device code of the bulk copy and sum kernels, shared by kernels.cu (the
// library's launch shapes) and bench/comm_sweep.cu (the shapes bench_comm
// sweeps). Everything is in an anonymous namespace: each including file
// instantiates what it launches.
#ifndef TC_COMM_KERNELS_CUH
#define TC_COMM_KERNELS_CUH
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

namespace {

constexpr int kThreads = 512;

// U: 16-byte loads in flight per thread (NVLink latency needs the
// parallelism; how many pays off is measured by bench_comm's sweep).
template <int U>
__device__ __forceinline__ void copy_range(char *dst, const char *src, uint64_t bytes, uint64_t tid,
                                           uint64_t nt) {
  uintptr_t a = (uintptr_t)dst | (uintptr_t)src;
  if ((a & 15) && (((uintptr_t)dst ^ (uintptr_t)src) & 15) == 0) {
    // equally misaligned: a byte head, then the rest is 16-byte aligned
    uint64_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (head > bytes) head = bytes;
    if (tid < head) dst[tid] = src[tid];
    dst += head;
    src += head;
    bytes -= head;
    a = 0;
  }
  uint64_t done = 0;
  if ((a & 15) == 0) {
    const uint4 *s = reinterpret_cast<const uint4 *>(src);
    uint4 *d = reinterpret_cast<uint4 *>(dst);
    uint64_t nv = bytes / 16, i = tid;
    for (; i + (U - 1) * nt < nv; i += U * nt) {
      uint4 r[U];
#pragma unroll
      for (int k = 0; k < U; k++) r[k] = s[i + k * nt];
#pragma unroll
      for (int k = 0; k < U; k++) d[i + k * nt] = r[k];
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

// more registers per thread above 4 in flight: 512 threads at most
template <int U> constexpr int max_threads() { return U <= 4 ? 1024 : 512; }

template <int U>
__global__ void __launch_bounds__(max_threads<U>()) k_copy(char *dst, const char *src, uint64_t bytes) {
  copy_range<U>(dst, src, bytes, (uint64_t)blockIdx.x * blockDim.x + threadIdx.x, (uint64_t)gridDim.x * blockDim.x);
}

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

template <typename T, int U>
__global__ void __launch_bounds__(max_threads<U>()) k_add(T *out, const T *a, const T *b, uint64_t n, int vec) {
  const uint64_t nt = (uint64_t)gridDim.x * blockDim.x, tid = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint64_t done = 0;
  if (vec) {
    constexpr int V = 16 / sizeof(T);
    const uint4 *av = reinterpret_cast<const uint4 *>(a), *bv = reinterpret_cast<const uint4 *>(b);
    uint4 *ov = reinterpret_cast<uint4 *>(out);
    uint64_t nv = n / V, i = tid;
    // each element is read and written by one thread only, so out may alias a
    for (; i + (U - 1) * nt < nv; i += U * nt) {
      uint4 x[U], y[U];
#pragma unroll
      for (int k = 0; k < U; k++) {
        x[k] = av[i + k * nt];
        y[k] = bv[i + k * nt];
      }
#pragma unroll
      for (int k = 0; k < U; k++) {
        T *xe = reinterpret_cast<T *>(&x[k]);
        const T *ye = reinterpret_cast<const T *>(&y[k]);
#pragma unroll
        for (int j = 0; j < V; j++) xe[j] = Sum<T>::add(xe[j], ye[j]);
        ov[i + k * nt] = x[k];
      }
    }
    for (; i < nv; i += nt) {
      uint4 x = av[i], y = bv[i];
      T *xe = reinterpret_cast<T *>(&x);
      const T *ye = reinterpret_cast<const T *>(&y);
#pragma unroll
      for (int j = 0; j < V; j++) xe[j] = Sum<T>::add(xe[j], ye[j]);
      ov[i] = x;
    }
    done = nv * V;
  }
  for (uint64_t i = done + tid; i < n; i += nt) out[i] = Sum<T>::add(a[i], b[i]);
}

int grid_for(uint64_t work_items, int blocks, int threads = kThreads) {
  uint64_t g = (work_items + threads - 1) / threads;
  if (g < 1) g = 1;
  if (g > (uint64_t)blocks) g = (uint64_t)blocks;
  return (int)g;
}

} // namespace
#endif
