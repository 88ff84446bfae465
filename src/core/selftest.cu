// A tiny kernel `tcuda info` launches to prove libtcuda's own device code
// runs on each GPU (the arch list matches the hardware).
#include <cuda_runtime.h>

__global__ void tc_selftest_kernel(unsigned *out, unsigned v) {
  out[threadIdx.x] = v ^ threadIdx.x;
}

extern "C" cudaError_t tc_selftest_launch(unsigned *out, unsigned v, cudaStream_t s) {
  tc_selftest_kernel<<<1, 32, 0, s>>>(out, v);
  return cudaGetLastError();
}
