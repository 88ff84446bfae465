// Kernels for stream/event tests: a spin of known length and a data
// pattern that a dependent stream can check.
#include "stream_kernels.h"

__device__ static unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void tct_spin_kernel(unsigned long long ns) {
  unsigned long long start = now_ns();
  while (now_ns() - start < ns) {
  }
}

__global__ void tct_wait_flag_kernel(const volatile unsigned *flag, unsigned long long ns) {
  unsigned long long start = now_ns();
  while (*flag == 0 && now_ns() - start < ns) {
  }
}

__global__ void tct_fill_kernel(unsigned *p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = tct_pattern(i, seed);
}

__global__ void tct_check_kernel(const unsigned *p, size_t n, unsigned seed, unsigned *bad) {
  unsigned mine = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    mine += p[i] != tct_pattern(i, seed);
  if (mine) atomicAdd(bad, mine);
}

static unsigned blocks_for(size_t n) {
  size_t b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

extern "C" cudaError_t tct_spin_us(unsigned long long us, cudaStream_t s) {
  tct_spin_kernel<<<1, 1, 0, s>>>(us * 1000ull);
  return cudaGetLastError();
}

extern "C" cudaError_t tct_wait_flag(const volatile unsigned *flag, unsigned long long timeout_us, cudaStream_t s) {
  tct_wait_flag_kernel<<<1, 1, 0, s>>>(flag, timeout_us * 1000ull);
  return cudaGetLastError();
}

extern "C" cudaError_t tct_fill(unsigned *p, size_t n, unsigned seed, cudaStream_t s) {
  tct_fill_kernel<<<blocks_for(n), 256, 0, s>>>(p, n, seed);
  return cudaGetLastError();
}

extern "C" cudaError_t tct_check(const unsigned *p, size_t n, unsigned seed, unsigned *mismatches, cudaStream_t s) {
  tct_check_kernel<<<blocks_for(n), 256, 0, s>>>(p, n, seed, mismatches);
  return cudaGetLastError();
}
