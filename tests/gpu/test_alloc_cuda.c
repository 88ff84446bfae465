/* The caching allocator on a real GPU: cudaMalloc-backed memory that holds
 * data, PyTorch's stats, caching and empty_cache, streams and snapshots,
 * record_stream against real GPU work, bad pointers, the OOM message, the
 * memory fraction and expandable segments through the driver's VMM API.
 * Every test frees what it allocates and starts from an empty cache, so
 * counts are deltas from a clean state. */
#include "harness.h"
#include "stream_kernels.h"
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define CUR(x) ((x).current)

static tcuda_memory_stats_t stats(int dev) {
  tcuda_memory_stats_t s;
  memset(&s, 0, sizeof s);
  CHECK_OK(tcuda_memory_stats(dev, &s));
  return s;
}

static void clean_start(void) {
  tc_require_gpu();
  CHECK_OK(tcuda_set_device(0));
  CHECK_OK(tcuda_empty_cache());
  tcuda_memory_stats_t s = stats(0);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(CUR(s.allocation[TCUDA_STAT_ALL]), 0);
}

/* Fill with a pattern on the GPU and count mismatches back. */
static unsigned fill_check(void *p, size_t bytes, unsigned seed, cudaStream_t s) {
  size_t n = bytes / sizeof(unsigned);
  unsigned *dm = NULL, m = 0;
  CHECK(cudaMalloc((void **)&dm, sizeof *dm) == cudaSuccess);
  CHECK(cudaMemsetAsync(dm, 0, sizeof *dm, s) == cudaSuccess);
  CHECK(tct_fill((unsigned *)p, n, seed, s) == cudaSuccess);
  CHECK(tct_check((const unsigned *)p, n, seed, dm, s) == cudaSuccess);
  CHECK(cudaMemcpyAsync(&m, dm, sizeof m, cudaMemcpyDeviceToHost, s) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  cudaFree(dm);
  return m;
}

static void test_alloc_write_read(void) {
  clean_start();
  tcuda_memory_stats_t s0 = stats(0);
  void *p = NULL;
  CHECK_OK(tcuda_malloc(&p, 1000));
  CHECK(p != NULL);
  CHECK(cudaMemset(p, 0xAB, 1000) == cudaSuccess);
  unsigned char h[1000];
  CHECK(cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
  int bad = 0;
  for (size_t i = 0; i < sizeof h; i++) bad += h[i] != 0xAB;
  CHECK_EQ_INT(bad, 0);
  struct cudaPointerAttributes at;
  CHECK(cudaPointerGetAttributes(&at, p) == cudaSuccess);
  CHECK(at.type == cudaMemoryTypeDevice && at.device == 0);

  tcuda_memory_stats_t s = stats(0);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_SMALL_POOL]), 1024);
  CHECK_EQ_INT(CUR(s.requested_bytes[TCUDA_STAT_SMALL_POOL]), 1000);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_SMALL_POOL]), 2 * MiB);
  CHECK_EQ_INT(CUR(s.segment[TCUDA_STAT_SMALL_POOL]), 1);
  CHECK_EQ_INT(CUR(s.inactive_split_bytes[TCUDA_STAT_SMALL_POOL]), 2 * MiB - 1024);
  CHECK_EQ_INT(s.num_device_alloc - s0.num_device_alloc, 1);
  int64_t v = 0;
  CHECK_OK(tcuda_memory_allocated(0, &v));
  CHECK_EQ_INT(v, 1024);
  CHECK_OK(tcuda_memory_reserved(-1, &v));
  CHECK_EQ_INT(v, 2 * MiB);
  CHECK_OK(tcuda_memory_cached(0, &v));
  CHECK_EQ_INT(v, 2 * MiB);

  CHECK_OK(tcuda_free(p));
  s = stats(0);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 2 * MiB); /* cached */
  CHECK_OK(tcuda_max_memory_allocated(0, &v));
  CHECK(v >= 1024);
  size_t fr0 = 0, fr1 = 0, tot = 0;
  CHECK(cudaMemGetInfo(&fr0, &tot) == cudaSuccess);
  CHECK_OK(tcuda_empty_cache());
  CHECK(cudaMemGetInfo(&fr1, &tot) == cudaSuccess);
  CHECK(fr1 >= fr0 + 2 * MiB); /* really given back to CUDA */
  s = stats(0);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(s.num_device_free - s0.num_device_free, 1);
  CHECK_EQ_INT(s.num_sync_all_streams - s0.num_sync_all_streams, 1);
  CHECK_OK(tcuda_reset_peak_memory_stats(0));
  CHECK_OK(tcuda_max_memory_allocated(0, &v));
  CHECK_EQ_INT(v, 0);
}

static void test_large_cached_reuse(void) {
  clean_start();
  tcuda_memory_stats_t s0 = stats(0);
  void *p = NULL, *q = NULL;
  CHECK_OK(tcuda_malloc(&p, 100 * MiB + 3));
  CHECK_EQ_INT(fill_check(p, 100 * MiB, 11, 0), 0);
  CHECK_OK(tcuda_free(p));
  /* 100 MiB + 3 rounds to 100 MiB + 512 in a 102 MiB segment. 101 MiB + 1
   * leaves 1 MiB - 512: too little to split, so it gets the whole block. */
  CHECK_OK(tcuda_malloc(&q, 101 * MiB + 1));
  CHECK(q == p);
  tcuda_memory_stats_t s = stats(0);
  CHECK_EQ_INT(s.num_device_alloc - s0.num_device_alloc, 1);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_LARGE_POOL]), 102 * MiB);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_LARGE_POOL]), 102 * MiB);
  CHECK_EQ_INT(CUR(s.requested_bytes[TCUDA_STAT_LARGE_POOL]), 101 * MiB + 1);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_LARGE_POOL]), 0);
  CHECK_EQ_INT(fill_check(q, 101 * MiB, 12, 0), 0);
  CHECK_OK(tcuda_free(q));
  CHECK_OK(tcuda_empty_cache());
}

static void test_streams_and_snapshot(void) {
  clean_start();
  tcuda_stream_t s;
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s));
  void *p = NULL, *q = NULL;
  CHECK_OK(tcuda_malloc_on(&p, 5 * MiB, 0, s));
  CHECK_EQ_INT(fill_check(p, 5 * MiB, 3, (cudaStream_t)s.handle), 0);
  CHECK_OK(tcuda_free(p));
  CHECK_OK(tcuda_malloc(&q, 5 * MiB)); /* default stream: not the block freed on s */
  CHECK(q != p);
  tcuda_memory_stats_t st = stats(0);
  CHECK_EQ_INT(CUR(st.segment[TCUDA_STAT_LARGE_POOL]), 2);

  tcuda_snapshot_t *snap = NULL;
  CHECK_OK(tcuda_memory_snapshot(&snap));
  int seen_p = 0, seen_q = 0;
  for (size_t i = 0; i < snap->num_segments; i++) {
    const tcuda_segment_info_t *g = &snap->segments[i];
    if (i) CHECK(snap->segments[i - 1].address < g->address || snap->segments[i - 1].device < g->device);
    if (g->address == (uint64_t)(uintptr_t)p) {
      seen_p = 1;
      CHECK_EQ_INT(g->stream, s.id);
      CHECK_EQ_INT(g->total_size, 20 * MiB);
      CHECK_EQ_INT(g->allocated_size, 0);
      CHECK_EQ_INT(g->is_large, 1);
    }
    if (g->address == (uint64_t)(uintptr_t)q) {
      seen_q = 1;
      CHECK_EQ_INT(g->stream, 0);
      CHECK_EQ_INT(g->allocated_size, 5 * MiB);
      CHECK_EQ_INT(g->num_blocks, 2);
      CHECK_EQ_INT(g->blocks[0].state, TCUDA_BLOCK_ACTIVE_ALLOCATED);
      CHECK_EQ_INT(g->blocks[0].requested_size, 5 * MiB);
    }
  }
  CHECK(seen_p && seen_q);
  tcuda_snapshot_free(snap);
  char *j = NULL;
  CHECK_OK(tcuda_memory_snapshot_json(&j));
  CHECK(j && strstr(j, "\"stream\""));
  tcuda_string_free(j);
  CHECK_OK(tcuda_memory_stats_json(0, &j));
  CHECK(j && strstr(j, "\"allocation.all.current\": 1") );
  tcuda_string_free(j);
  CHECK_OK(tcuda_memory_summary(0, 0, &j));
  CHECK(j && strstr(j, "Allocated memory") && strstr(j, "from large pool"));
  tcuda_string_free(j);
  CHECK_OK(tcuda_free(q));
  CHECK_OK(tcuda_empty_cache());
  CHECK_OK(tcuda_stream_destroy(s));
}

static void test_record_stream(void) {
  clean_start();
  tcuda_stream_t side;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &side));
  void *p = NULL, *q = NULL, *r = NULL;
  CHECK_OK(tcuda_malloc(&p, 4096));
  CHECK(tct_spin_us(400000, (cudaStream_t)side.handle) == cudaSuccess); /* side busy for 0.4 s */
  CHECK_OK(tcuda_record_stream(p, side));
  CHECK_OK(tcuda_free(p));
  tcuda_memory_stats_t s = stats(0);
  CHECK_EQ_INT(CUR(s.allocation[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(CUR(s.active[TCUDA_STAT_ALL]), 1); /* pending free */
  CHECK_OK(tcuda_malloc(&q, 4096));
  CHECK(q != p); /* side has not reached the event yet */
  CHECK(cudaStreamSynchronize((cudaStream_t)side.handle) == cudaSuccess);
  CHECK_OK(tcuda_malloc(&r, 4096)); /* this malloc processes the event first */
  CHECK(r == p);
  s = stats(0);
  CHECK_EQ_INT(CUR(s.active[TCUDA_STAT_ALL]), 2);
  int x = 0;
  CHECK_ERR(tcuda_record_stream(&x, side), TCUDA_ERROR_INVALID_POINTER, "tcuda_record_stream: pointer");
  CHECK_OK(tcuda_free(q));
  CHECK_OK(tcuda_free(r));
  CHECK_OK(tcuda_empty_cache());
}

static void test_bad_pointers(void) {
  clean_start();
  int x = 0;
  CHECK_ERR(tcuda_free(&x), TCUDA_ERROR_INVALID_POINTER, "tcuda_free: pointer");
  void *p = NULL;
  CHECK_OK(tcuda_malloc(&p, 512));
  CHECK_ERR(tcuda_free((char *)p + 512), TCUDA_ERROR_INVALID_POINTER, "was not allocated");
  CHECK_OK(tcuda_free(p));
  tcuda_memory_stats_t before = stats(0);
  CHECK_ERR(tcuda_free(p), TCUDA_ERROR_INVALID_POINTER, "already freed");
  tcuda_memory_stats_t after = stats(0);
  CHECK(!memcmp(&before, &after, sizeof before));
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_OK(tcuda_empty_cache());
}

static void test_oom_message(void) {
  clean_start();
  tcuda_memory_stats_t s0 = stats(0);
  void *p = (void *)1;
  CHECK_ERR(tcuda_malloc(&p, 200 * GiB), TCUDA_ERROR_OUT_OF_MEMORY,
            "tcuda_malloc: CUDA out of memory. Tried to allocate 200.00 GiB. GPU 0 has a total capacity of ");
  CHECK(strstr(tcuda_last_error(), " is free. Of the allocated memory 0 bytes is allocated by tcuda"));
  CHECK(p == NULL);
  tcuda_memory_stats_t s = stats(0);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 1);
  CHECK_EQ_INT(s.num_alloc_retries - s0.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_sync_all_streams - s0.num_sync_all_streams, 1);
  CHECK(cudaGetLastError() == cudaSuccess); /* the failed cudaMalloc was forgiven */
  CHECK_OK(tcuda_malloc(&p, 64));           /* and the allocator still works */
  CHECK_OK(tcuda_free(p));
  CHECK_OK(tcuda_empty_cache());
}

static void test_memory_fraction(void) {
  clean_start();
  double f = 0;
  CHECK_OK(tcuda_get_per_process_memory_fraction(0, &f));
  CHECK(f == 1.0);
  CHECK_OK(tcuda_set_per_process_memory_fraction(0.001, 0));
  CHECK_OK(tcuda_get_per_process_memory_fraction(-1, &f));
  CHECK(fabs(f - 0.001) < 1e-9);
  tcuda_device_properties_t props = TCUDA_DEVICE_PROPERTIES_INIT;
  CHECK_OK(tcuda_get_device_properties(0, &props));
  uint64_t allowed = (uint64_t)(0.001 * (double)props.total_memory);
  void *p = NULL;
  uint64_t want = (allowed / (2 * MiB) + 2) * 2 * MiB; /* just past the cap */
  CHECK_ERR(tcuda_malloc(&p, want), TCUDA_ERROR_OUT_OF_MEMORY, " allowed; Of the allocated memory");
  CHECK_OK(tcuda_set_per_process_memory_fraction(1.0, 0));
  CHECK_OK(tcuda_malloc(&p, want));
  CHECK_OK(tcuda_free(p));
  CHECK_ERR(tcuda_set_per_process_memory_fraction(2.0, 0), TCUDA_ERROR_INVALID_ARGUMENT, "Invalid fraction value");
  CHECK_OK(tcuda_empty_cache());
}

static void test_expandable_segments(void) {
  clean_start();
  CHECK_OK(tcuda_allocator_set_config("expandable_segments:True"));
  tcuda_memory_stats_t s0 = stats(0);
  void *p = NULL, *q = NULL;
  CHECK_OK(tcuda_malloc(&p, 30 * MiB));
  tcuda_memory_stats_t s = stats(0);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_LARGE_POOL]), 40 * MiB); /* two 20 MiB pages */
  CHECK_EQ_INT(CUR(s.segment[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(s.num_device_alloc - s0.num_device_alloc, 1);
  CHECK_EQ_INT(fill_check(p, 30 * MiB, 5, 0), 0);
  CHECK_OK(tcuda_malloc(&q, 15 * MiB)); /* 10 MiB free tail + one more page */
  CHECK(q == (char *)p + 30 * MiB);
  s = stats(0);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_LARGE_POOL]), 60 * MiB);
  CHECK_EQ_INT(s.num_device_alloc - s0.num_device_alloc, 2);
  CHECK_EQ_INT(fill_check(q, 15 * MiB, 6, 0), 0);
  CHECK_EQ_INT(fill_check(p, 30 * MiB, 7, 0), 0);
  tcuda_snapshot_t *snap = NULL;
  CHECK_OK(tcuda_memory_snapshot(&snap));
  int seen = 0;
  for (size_t i = 0; i < snap->num_segments; i++)
    if (snap->segments[i].address == (uint64_t)(uintptr_t)p) {
      seen = 1;
      CHECK_EQ_INT(snap->segments[i].is_expandable, 1);
      CHECK_EQ_INT(snap->segments[i].total_size, 60 * MiB);
      CHECK_EQ_INT(snap->segments[i].allocated_size, 45 * MiB);
    }
  CHECK(seen);
  tcuda_snapshot_free(snap);
  CHECK_OK(tcuda_free(p));
  CHECK_OK(tcuda_free(q));
  size_t fr0 = 0, fr1 = 0, tot = 0;
  CHECK(cudaMemGetInfo(&fr0, &tot) == cudaSuccess);
  CHECK_OK(tcuda_empty_cache());
  CHECK(cudaMemGetInfo(&fr1, &tot) == cudaSuccess);
  CHECK(fr1 >= fr0 + 60 * MiB); /* unmapped pages went back */
  s = stats(0);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(s.num_device_free - s0.num_device_free, 1);
  CHECK_EQ_INT(CUR(s.segment[TCUDA_STAT_ALL]), 0);
  char *c = NULL;
  CHECK_OK(tcuda_allocator_get_config(&c));
  CHECK(c && strstr(c, "expandable_segments:True"));
  tcuda_string_free(c);
  CHECK_OK(tcuda_allocator_set_config("expandable_segments:False"));
  CHECK(cudaGetLastError() == cudaSuccess);
}

static void *thread_body(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  void *live[16] = {0};
  int errors = 0;
  tcuda_stream_t s;
  if (tcuda_stream_from_pool(0, 0, &s) || tcuda_set_stream(s)) errors++;
  for (int i = 0; i < 4000; i++) {
    seed = seed * 1103515245u + 12345u;
    int k = (seed >> 8) % 16;
    if (live[k]) {
      errors += tcuda_free(live[k]) != TCUDA_SUCCESS;
      live[k] = NULL;
    } else {
      size_t sz = (size_t)1 << ((seed >> 16) % 24);
      errors += tcuda_malloc(&live[k], sz) != TCUDA_SUCCESS;
    }
  }
  for (int k = 0; k < 16; k++)
    if (live[k]) errors += tcuda_free(live[k]) != TCUDA_SUCCESS;
  return (void *)(uintptr_t)errors;
}

static void test_threads(void) {
  clean_start();
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, thread_body, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < 4; i++) {
    void *r = NULL;
    pthread_join(th[i], &r);
    CHECK_EQ_INT((uintptr_t)r, 0);
  }
  tcuda_memory_stats_t s = stats(0);
  CHECK_EQ_INT(CUR(s.allocation[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_ALL]), 0);
  CHECK(s.allocation[TCUDA_STAT_ALL].allocated > 4000);
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(CUR(stats(0).reserved_bytes[TCUDA_STAT_ALL]), 0);
}

static void test_second_device(void) {
  clean_start();
  if (tcuda_device_count() < 2) {
    TC_SKIP_PART("second-device checks need 2 GPUs");
    return;
  }
  tcuda_stream_t d1;
  CHECK_OK(tcuda_default_stream(1, &d1));
  void *p = NULL;
  CHECK_ERR(tcuda_malloc_on(&p, 64, 0, d1), TCUDA_ERROR_INVALID_ARGUMENT, "stream is on device 1, not on device 0");
  CHECK_OK(tcuda_malloc_on(&p, MiB, 1, d1));
  struct cudaPointerAttributes at;
  CHECK(cudaPointerGetAttributes(&at, p) == cudaSuccess);
  CHECK_EQ_INT(at.device, 1);
  CHECK_EQ_INT(CUR(stats(1).allocated_bytes[TCUDA_STAT_ALL]), MiB);
  CHECK_EQ_INT(CUR(stats(0).allocated_bytes[TCUDA_STAT_ALL]), 0);
  int cur = -1;
  CHECK_OK(tcuda_current_device(&cur));
  CHECK_EQ_INT(cur, 0); /* the allocator's device guard restored it */
  CHECK_OK(tcuda_free(p)); /* found on device 1 */
  CHECK_EQ_INT(CUR(stats(1).allocated_bytes[TCUDA_STAT_ALL]), 0);
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(CUR(stats(1).reserved_bytes[TCUDA_STAT_ALL]), 0);
}

TC_MAIN(T(test_alloc_write_read), T(test_large_cached_reuse), T(test_streams_and_snapshot), T(test_record_stream),
        T(test_bad_pointers), T(test_oom_message), T(test_memory_fraction), T(test_expandable_segments),
        T(test_threads), T(test_second_device))
