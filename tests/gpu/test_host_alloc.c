/* Pinned host cache on a real GPU: page-locked memory, and a block used by
 * a copy on another stream is not handed out again until that copy is done. */
#include "harness.h"
#include "stream_kernels.h"
#include <cuda_runtime_api.h>

static void pinned_and_reused(void) {
  CHECK_OK(tcuda_host_empty_cache());
  tcuda_host_memory_stats_t st0;
  CHECK_OK(tcuda_host_memory_stats(&st0));
  void *p = NULL;
  CHECK_OK(tcuda_host_alloc(&p, 3 << 20)); /* rounds to 4 MiB */
  struct cudaPointerAttributes a;
  CHECK(cudaPointerGetAttributes(&a, p) == cudaSuccess);
  CHECK(a.type == cudaMemoryTypeHost); /* page-locked, registered with CUDA */
  tcuda_host_memory_stats_t st;
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.reserved_bytes.current - st0.reserved_bytes.current, 4 << 20);
  CHECK_EQ_INT(st.num_host_alloc - st0.num_host_alloc, 1);
  CHECK(st.host_alloc_time.count >= 1);
  CHECK_OK(tcuda_host_free(p));
  void *q = NULL;
  CHECK_OK(tcuda_host_alloc(&q, 4 << 20));
  CHECK(q == p);
  CHECK_OK(tcuda_host_free(q));
}

static void cross_stream_copy_protects_block(void) {
  tcuda_stream_t s;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &s));
  size_t n = 1 << 20, bytes = n * sizeof(unsigned);
  unsigned *dev = NULL, *host = NULL, mism = 0, *dmism = NULL;
  CHECK(cudaMalloc((void **)&dev, bytes) == cudaSuccess);
  CHECK(cudaMalloc((void **)&dmism, sizeof *dmism) == cudaSuccess);
  CHECK_OK(tcuda_host_alloc((void **)&host, bytes));
  for (size_t i = 0; i < n; i++) host[i] = tct_pattern(i, 77);
  cudaStream_t cs = (cudaStream_t)s.handle;
  /* the copy starts only after a 300 ms spin, so it is still pending at free */
  CHECK(tct_spin_us(300000, cs) == cudaSuccess);
  CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, cs) == cudaSuccess);
  CHECK_OK(tcuda_host_record_stream(host, s));
  CHECK_OK(tcuda_host_free(host));
  void *again = NULL;
  CHECK_OK(tcuda_host_alloc(&again, bytes));
  CHECK(again != host); /* still in use by the pending copy */
  if (again != host && again) memset(again, 0xAB, bytes); /* scribbling here must not reach dev */
  CHECK(cudaMemsetAsync(dmism, 0, sizeof *dmism, cs) == cudaSuccess);
  CHECK(tct_check(dev, n, 77, dmism, cs) == cudaSuccess);
  CHECK(cudaMemcpyAsync(&mism, dmism, sizeof mism, cudaMemcpyDeviceToHost, cs) == cudaSuccess);
  CHECK(cudaStreamSynchronize(cs) == cudaSuccess);
  CHECK_EQ_INT(mism, 0);
  void *third = NULL;
  CHECK_OK(tcuda_host_alloc(&third, bytes)); /* copy done: the block comes back */
  CHECK(third == host);
  CHECK_OK(tcuda_host_free(third));
  CHECK_OK(tcuda_host_free(again));
  CHECK_OK(tcuda_host_empty_cache());
  tcuda_host_memory_stats_t st;
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.segment.current, 0);
  CHECK_EQ_INT(st.allocation.current, 0);
  cudaFree(dev);
  cudaFree(dmism);
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(pinned_and_reused), T(cross_stream_copy_protects_block)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
