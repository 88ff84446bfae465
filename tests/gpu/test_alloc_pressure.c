/* The allocator on a real GPU under cross-stream use and memory pressure:
 * record_stream keeps a block from another stream while a kernel still
 * reads it (checked on the data), filling the device ends in a clean OOM
 * after which everything works again, garbage collection under a
 * memory fraction frees cached blocks before a retry is needed, and the
 * compact policy's trim waits for a destroyed stream's kernels before it
 * unmaps the pages they read. */
#include "harness.h"
#include "stream_kernels.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

static tcuda_memory_stats_t stats(void) {
  tcuda_memory_stats_t s;
  memset(&s, 0, sizeof s);
  CHECK_OK(tcuda_memory_stats(0, &s));
  return s;
}

static void record_stream_protects_data(void) {
  CHECK_OK(tcuda_set_device(0));
  CHECK_OK(tcuda_empty_cache());
  tcuda_stream_t a, b;
  CHECK_OK(tcuda_stream_create(0, 0, 0, &a));
  CHECK_OK(tcuda_stream_create(0, 0, 0, &b));
  size_t n = 4 * MiB / sizeof(unsigned);
  unsigned *p = NULL, *q = NULL, *mism = NULL, h = ~0u;
  CHECK_OK(tcuda_malloc_on((void **)&mism, sizeof *mism, 0, b));
  CHECK_OK(tcuda_malloc_on((void **)&p, n * sizeof *p, 0, a));
  CHECK(tct_fill(p, n, 11, a.handle) == cudaSuccess);
  CHECK(cudaStreamSynchronize(a.handle) == cudaSuccess);
  /* stream b reads p only after a 300 ms spin */
  CHECK(cudaMemsetAsync(mism, 0, sizeof *mism, b.handle) == cudaSuccess);
  CHECK(tct_spin_us(300000, b.handle) == cudaSuccess);
  CHECK(tct_check(p, n, 11, mism, b.handle) == cudaSuccess);
  CHECK_OK(tcuda_record_stream(p, b));
  CHECK_OK(tcuda_free(p));
  /* same size on stream a right away: must not be p; overwrite it at once */
  CHECK_OK(tcuda_malloc_on((void **)&q, n * sizeof *q, 0, a));
  /* compute-sanitizer runs kernels one at a time, so b's spin has ended and
   * p may be free again; what must hold there too is b's view of p below */
  if (!getenv("TCUDA_UNDER_SANITIZER")) CHECK(q != p);
  CHECK(tct_fill(q, n, 22, a.handle) == cudaSuccess);
  CHECK(cudaStreamSynchronize(a.handle) == cudaSuccess);
  CHECK(cudaMemcpyAsync(&h, mism, sizeof h, cudaMemcpyDeviceToHost, b.handle) == cudaSuccess);
  CHECK(cudaStreamSynchronize(b.handle) == cudaSuccess);
  CHECK_EQ_INT(h, 0); /* b's kernel saw p's data, untouched */
  CHECK_OK(tcuda_free(q));
  CHECK_OK(tcuda_free(mism));
  CHECK_OK(tcuda_empty_cache());
  CHECK_OK(tcuda_stream_destroy(a));
  CHECK_OK(tcuda_stream_destroy(b));
}

static void fill_device_until_oom(void) {
  CHECK_OK(tcuda_set_device(0));
  CHECK_OK(tcuda_empty_cache());
  tcuda_memory_stats_t s0 = stats();
  enum { MAXP = 1024 };
  static void *ptrs[MAXP];
  int n = 0;
  tcuda_status st = TCUDA_SUCCESS;
  while (n < MAXP && (st = tcuda_malloc(&ptrs[n], 2 * GiB)) == TCUDA_SUCCESS) n++;
  CHECK_EQ_INT(st, TCUDA_ERROR_OUT_OF_MEMORY);
  CHECK(strstr(tcuda_last_error(), "CUDA out of memory. Tried to allocate 2.00 GiB") != NULL);
  CHECK(strstr(tcuda_last_error(), "expandable_segments") != NULL);
  printf("  %d x 2 GiB before OOM\n", n);
  CHECK(n >= 8);
  tcuda_memory_stats_t s = stats();
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 1);
  CHECK_EQ_INT(s.num_alloc_retries - s0.num_alloc_retries, 1);
  CHECK_EQ_INT(s.allocated_bytes[TCUDA_STAT_ALL].current - s0.allocated_bytes[TCUDA_STAT_ALL].current,
               (int64_t)n * (int64_t)(2 * GiB));
  CHECK(cudaGetLastError() == cudaSuccess);
  for (int i = 0; i < n; i++) CHECK_OK(tcuda_free(ptrs[i]));
  s = stats();
  CHECK_EQ_INT(s.allocated_bytes[TCUDA_STAT_ALL].current, s0.allocated_bytes[TCUDA_STAT_ALL].current);
  CHECK_OK(tcuda_empty_cache());
  s = stats();
  CHECK_EQ_INT(s.reserved_bytes[TCUDA_STAT_ALL].current, s0.reserved_bytes[TCUDA_STAT_ALL].current);
  /* all of it can be used again */
  void *big = NULL;
  CHECK_OK(tcuda_malloc(&big, (size_t)n * 2 * GiB - 2 * GiB));
  CHECK(cudaMemset(big, 0x5a, 1 << 20) == cudaSuccess);
  CHECK_OK(tcuda_free(big));
  CHECK_OK(tcuda_empty_cache());
}

static void gc_threshold_with_fraction(void) {
  CHECK_OK(tcuda_set_device(0));
  CHECK_OK(tcuda_empty_cache());
  char *old = NULL;
  CHECK_OK(tcuda_allocator_get_config(&old));
  tcuda_device_properties_t props = TCUDA_DEVICE_PROPERTIES_INIT;
  CHECK_OK(tcuda_get_device_properties(0, &props));
  /* cap = 8 GiB; GC when reserved > 4 GiB */
  double frac = (double)(8 * GiB) / (double)props.total_memory;
  CHECK_OK(tcuda_set_per_process_memory_fraction(frac, 0));

  for (int gc = 1; gc >= 0; gc--) {
    CHECK_OK(tcuda_allocator_set_config(gc ? "garbage_collection_threshold:0.5" : ""));
    tcuda_memory_stats_t s0 = stats();
    void *a = NULL, *b = NULL;
    CHECK_OK(tcuda_malloc(&a, 5 * GiB));
    CHECK_OK(tcuda_free(a)); /* cached: 5 GiB reserved, over the threshold */
    CHECK_OK(tcuda_malloc(&b, 6 * GiB)); /* 5 + 6 > 8: something must give */
    tcuda_memory_stats_t s = stats();
    CHECK_EQ_INT(s.num_device_free - s0.num_device_free, 1); /* the cached 5 GiB went back */
    /* GC frees it before the first attempt; without GC it takes the full
     * flush and a counted retry */
    CHECK_EQ_INT(s.num_alloc_retries - s0.num_alloc_retries, gc ? 0 : 1);
    CHECK_EQ_INT(s.num_sync_all_streams - s0.num_sync_all_streams, gc ? 0 : 1);
    CHECK_OK(tcuda_free(b));
    CHECK_OK(tcuda_empty_cache());
  }
  CHECK_OK(tcuda_set_per_process_memory_fraction(1.0, 0));
  CHECK_OK(tcuda_allocator_set_config(old));
  tcuda_string_free(old);
}

/* A block freed on a stream whose kernel still reads it, the stream then
 * destroyed (its queued work runs on): a trim that gives those pages back
 * must wait for that kernel, without naming the dead stream. */
static void compact_trim_after_stream_destroy(void) {
  CHECK_OK(tcuda_set_device(0));
  CHECK_OK(tcuda_empty_cache());
  char *old = NULL;
  CHECK_OK(tcuda_allocator_get_config(&old));
  CHECK_OK(tcuda_allocator_set_config("policy:compact"));
  CHECK_OK(tcuda_reset_peak_memory_stats(0));
  unsigned *mism = NULL, h = ~0u;
  CHECK(cudaMalloc((void **)&mism, sizeof *mism) == cudaSuccess); /* outside the allocator: never trimmed */
  CHECK(cudaMemset(mism, 0, sizeof *mism) == cudaSuccess);
  tcuda_stream_t s;
  CHECK_OK(tcuda_stream_create(0, 0, 0, &s));
  size_t n = 64 * MiB / sizeof(unsigned);
  unsigned *p = NULL, *q = NULL;
  CHECK_OK(tcuda_malloc_on((void **)&p, n * sizeof *p, 0, s));
  CHECK(tct_fill(p, n, 33, s.handle) == cudaSuccess);
  CHECK(tct_spin_us(300000, s.handle) == cudaSuccess);
  CHECK(tct_check(p, n, 33, mism, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_free(p)); /* its pages stay mapped, free */
  CHECK_OK(tcuda_stream_destroy(s));
  tcuda_memory_stats_t s0 = stats();
  /* 64 MiB more would pass the budget (1.1 x the 64 MiB peak): p's pages go back first */
  CHECK_OK(tcuda_malloc((void **)&q, n * sizeof *q));
  tcuda_memory_stats_t s1 = stats();
  CHECK(s1.num_device_free > s0.num_device_free);
  CHECK(cudaMemcpy(&h, mism, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK_EQ_INT(h, 0); /* the check kernel read p's pages intact */
  CHECK(cudaGetLastError() == cudaSuccess);
  CHECK_OK(tcuda_free(q));
  CHECK_OK(tcuda_empty_cache());
  CHECK(cudaFree(mism) == cudaSuccess);
  CHECK_OK(tcuda_allocator_set_config("policy:torch")); /* a config string sets only the keys it names */
  CHECK_OK(tcuda_allocator_set_config(old));
  tcuda_string_free(old);
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(compact_trim_after_stream_destroy), T(record_stream_protects_data),
                                  T(fill_device_until_oom), T(gc_threshold_with_fraction)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
