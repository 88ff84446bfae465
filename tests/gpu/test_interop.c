/* The PyTorch/CuPy entry points on a real GPU: memory that holds data,
 * tcuda's stats and snapshot describing it, and reuse keyed by the raw
 * stream the framework passes (never across streams). */
#include "harness.h"
#include <cuda_runtime_api.h>

static int64_t allocated(void) {
  int64_t b = -1;
  CHECK_OK(tcuda_memory_allocated(0, &b));
  return b;
}

static void start(void) {
  tc_require_gpu();
  CHECK_OK(tcuda_set_device(0));
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(allocated(), 0);
}

/* Write through the pointer and read it back. */
static void roundtrip(void *p, size_t n, cudaStream_t s) {
  unsigned char host[4096], back[4096];
  if (n > sizeof host) n = sizeof host;
  for (size_t i = 0; i < n; i++) host[i] = (unsigned char)(i * 7 + 3);
  CHECK(cudaMemcpyAsync(p, host, n, cudaMemcpyHostToDevice, s) == cudaSuccess);
  CHECK(cudaMemcpyAsync(back, p, n, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(memcmp(host, back, n) == 0);
}

static void torch_entry_points(void) {
  start();
  tcuda_stream_t ts;
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &ts));
  cudaStream_t raw = (cudaStream_t)ts.handle;
  void *a = tcuda_torch_malloc(1000, 0, raw);
  CHECK(a != NULL);
  roundtrip(a, 1000, raw);
  CHECK_EQ_INT(allocated(), 1024); /* rounded as PyTorch: 512-byte multiples */

  /* The snapshot names the stream PyTorch passed. */
  tcuda_snapshot_t *snap = NULL;
  CHECK_OK(tcuda_memory_snapshot(&snap));
  int seen = 0;
  for (size_t i = 0; snap && i < snap->num_segments; i++)
    for (size_t b = 0; b < snap->segments[i].num_blocks; b++)
      if (snap->segments[i].blocks[b].address == (uint64_t)(uintptr_t)a) {
        seen = 1;
        CHECK(snap->segments[i].stream == ts.id || snap->segments[i].stream == (int64_t)(intptr_t)raw);
      }
  CHECK(seen);
  tcuda_snapshot_free(snap);

  tcuda_torch_free(a, 1000, 0, raw);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_SUCCESS);
  CHECK_EQ_INT(allocated(), 0);
  /* Same stream: the cached block comes back. Another stream: never. */
  void *b = tcuda_torch_malloc(1000, 0, raw);
  CHECK(b == a);
  void *c = tcuda_torch_malloc(1000, 0, NULL);
  CHECK(c != NULL && c != a);
  roundtrip(c, 1000, 0);
  tcuda_torch_free(c, 1000, 0, NULL);
  void *d = tcuda_torch_malloc(1000, 0, raw);
  CHECK(d != c && d != NULL);
  tcuda_torch_free(b, 1000, 0, raw);
  tcuda_torch_free(d, 1000, 0, raw);
  CHECK_EQ_INT(allocated(), 0);

  /* size 0: NULL without an error, as tcuda_malloc. */
  tcuda_clear_error();
  CHECK(tcuda_torch_malloc(0, 0, raw) == NULL);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_SUCCESS);
  /* Double free: an error, nothing changes. */
  tcuda_torch_free(d, 1000, 0, raw);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_ERROR_INVALID_POINTER);
  CHECK(strstr(tcuda_last_error(), "tcuda_torch_free") != NULL);
  /* An impossible size: OOM with PyTorch's message. */
  tcuda_clear_error();
  CHECK(tcuda_torch_malloc((ptrdiff_t)1 << 50, 0, raw) == NULL);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_ERROR_OUT_OF_MEMORY);
  CHECK(strstr(tcuda_last_error(), "tcuda_torch_malloc") != NULL);
  CHECK(strstr(tcuda_last_error(), "out of memory") != NULL);
  CHECK_OK(tcuda_synchronize(0));
  CHECK_OK(tcuda_empty_cache());
  CHECK_OK(tcuda_stream_destroy(ts));
}

static void cupy_entry_points(void) {
  start();
  tcuda_stream_t ts;
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &ts));
  /* param NULL: tcuda's current stream, here ts. */
  tcuda_stream_guard_t g;
  CHECK_OK(tcuda_stream_guard_begin(&g, ts));
  void *a = tcuda_cupy_malloc(NULL, 4096, 0);
  CHECK_OK(tcuda_stream_guard_end(&g));
  CHECK(a != NULL);
  roundtrip(a, 4096, (cudaStream_t)ts.handle);
  CHECK_EQ_INT(allocated(), 4096);
  tcuda_cupy_free(NULL, a, 0);
  /* The block belongs to ts: param = ts's handle gets it back, the default
   * stream (current again) does not. */
  void *b = tcuda_cupy_malloc(NULL, 4096, 0);
  CHECK(b != NULL && b != a);
  void *c = tcuda_cupy_malloc(ts.handle, 4096, 0);
  CHECK(c == a);
  tcuda_cupy_free(NULL, b, 0);
  tcuda_cupy_free(ts.handle, c, 0);
  CHECK_EQ_INT(allocated(), 0);
  tcuda_clear_error();
  CHECK(tcuda_cupy_malloc(NULL, 0, 0) == NULL);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_SUCCESS);
  CHECK_OK(tcuda_synchronize(0));
  CHECK_OK(tcuda_empty_cache());
  CHECK_OK(tcuda_stream_destroy(ts));
}

TC_MAIN(T(torch_entry_points), T(cupy_entry_points))
