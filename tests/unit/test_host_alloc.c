/* Pinned host cache bookkeeping on a fake backend: rounding, reuse, the
 * event rule for blocks used on other streams, stats and bad input. */
#include "harness.h"
#include "alloc/host.h"

static int n_alloc, n_free, n_events_live, fail_next_alloc;
static int completed_upto; /* events with id <= this are complete */
static int next_event_id;

static tcuda_status fake_alloc(void *ctx, size_t size, void **p) {
  if (fail_next_alloc) { fail_next_alloc = 0; return TCUDA_ERROR_HOST_OUT_OF_MEMORY; }
  *p = malloc(size);
  n_alloc++;
  return TCUDA_SUCCESS;
}
static void fake_free(void *ctx, void *p) { free(p); n_free++; }
static tcuda_status fake_record(void *ctx, tcuda_stream_t s, void **ev) {
  int *e = malloc(sizeof *e);
  *e = ++next_event_id;
  *ev = e;
  n_events_live++;
  return TCUDA_SUCCESS;
}
static int fake_query(void *ctx, void *ev) { return *(int *)ev <= completed_upto; }
static void fake_release(void *ctx, void *ev) { free(ev); n_events_live--; }

static const tc_host_backend fake = {NULL, fake_alloc, fake_free, fake_record, fake_query, fake_release};

static void reset(void) {
  CHECK_OK(tcuda_host_empty_cache());
  CHECK_OK(tc_host_set_backend(&fake));
  n_alloc = n_free = 0;
  completed_upto = next_event_id = 0;
}

static void rounding_and_reuse(void) {
  reset();
  void *a, *b, *c;
  CHECK_OK(tcuda_host_alloc(&a, 1000));
  CHECK_OK(tcuda_host_alloc(&b, 1024)); /* same bucket, different block */
  CHECK(a != b);
  tcuda_host_memory_stats_t st;
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.allocation.current, 2);
  CHECK_EQ_INT(st.allocated_bytes.current, 2048); /* 1000 rounds to 1024 */
  CHECK_EQ_INT(st.segment.current, 2);
  CHECK_EQ_INT(st.reserved_bytes.current, 2048);
  CHECK_EQ_INT(st.num_host_alloc, 2);
  CHECK_EQ_INT(st.host_alloc_time.count, 2);
  CHECK_OK(tcuda_host_free(a));
  CHECK_OK(tcuda_host_alloc(&c, 513)); /* reuses a's 1024 block */
  CHECK(c == a);
  CHECK_EQ_INT(n_alloc, 2);
  CHECK_OK(tcuda_host_alloc(&c, 1025)); /* next bucket: new block */
  CHECK_EQ_INT(n_alloc, 3);
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.allocation.current, 3);
  CHECK_EQ_INT(st.allocation.peak, 3);
  CHECK_EQ_INT(st.allocation.allocated, 4); /* a, b, a again, c */
  CHECK_EQ_INT(st.allocation.freed, 1);
  CHECK_EQ_INT(st.allocated_bytes.current, 1024 + 1024 + 2048);
  void *z = (void *)1;
  CHECK_OK(tcuda_host_alloc(&z, 0));
  CHECK(z == NULL);
  CHECK_OK(tcuda_host_free(a));
  CHECK_OK(tcuda_host_free(b));
  CHECK_OK(tcuda_host_free(c));
  CHECK_OK(tcuda_host_empty_cache());
  CHECK_EQ_INT(n_free, 3);
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.segment.current, 0);
  CHECK_EQ_INT(st.reserved_bytes.current, 0);
  CHECK_EQ_INT(st.reserved_bytes.freed, 4096);
  CHECK_EQ_INT(st.num_host_free, 3);
  CHECK_EQ_INT(st.allocation.current, 0);
}

static void cross_stream_waits_for_events(void) {
  reset();
  tcuda_stream_t s1 = {(struct CUstream_st *)0x10, 0x10, 0, 0}, s2 = {(struct CUstream_st *)0x20, 0x20, 0, 0};
  void *a, *b;
  CHECK_OK(tcuda_host_alloc(&a, 4096));
  CHECK_OK(tcuda_host_record_stream(a, s1));
  CHECK_OK(tcuda_host_record_stream(a, s2));
  CHECK_OK(tcuda_host_record_stream(a, s1)); /* duplicates count once */
  CHECK_OK(tcuda_host_free(a));
  CHECK_EQ_INT(n_events_live, 2);
  tcuda_host_memory_stats_t st;
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.allocation.current, 1); /* still pending */
  CHECK_OK(tcuda_host_alloc(&b, 4096));
  CHECK(b != a); /* events not complete: a is not reused */
  completed_upto = 1; /* first event done, second not */
  void *c;
  CHECK_OK(tcuda_host_alloc(&c, 4096));
  CHECK(c != a);
  CHECK_EQ_INT(n_events_live, 1);
  completed_upto = 2;
  CHECK_OK(tcuda_host_free(c)); /* c had no streams: reusable at once */
  void *d;
  CHECK_OK(tcuda_host_alloc(&d, 4096)); /* processes events; LIFO gives a (freed last) */
  CHECK(d == a);
  CHECK_EQ_INT(n_events_live, 0);
  /* a free after empty_cache of a pending block: empty_cache frees only reusable ones */
  CHECK_OK(tcuda_host_record_stream(d, s1));
  CHECK_OK(tcuda_host_free(d));
  CHECK_OK(tcuda_host_empty_cache()); /* event 3 not complete: d stays */
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.segment.current, 2); /* b (live) and d (pending) */
  completed_upto = 100;
  CHECK_OK(tcuda_host_free(b));
  CHECK_OK(tcuda_host_empty_cache());
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.segment.current, 0);
}

static void bad_input(void) {
  reset();
  CHECK_ERR(tcuda_host_alloc(NULL, 8), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_host_alloc: ptr is NULL");
  void *p;
  CHECK_ERR(tcuda_host_alloc(&p, (size_t)1 << 63), TCUDA_ERROR_OVERFLOW, "too large");
  int x;
  CHECK_ERR(tcuda_host_free(&x), TCUDA_ERROR_INVALID_POINTER, "is not a tcuda host allocation");
  CHECK_OK(tcuda_host_free(NULL));
  CHECK_OK(tcuda_host_alloc(&p, 64));
  CHECK_OK(tcuda_host_free(p));
  CHECK_ERR(tcuda_host_free(p), TCUDA_ERROR_INVALID_POINTER, "was already freed");
  tcuda_stream_t s = {0};
  CHECK_ERR(tcuda_host_record_stream(p, s), TCUDA_ERROR_INVALID_POINTER, "not a live tcuda host allocation");
  CHECK_ERR(tcuda_host_record_stream((char *)p + 8, s), TCUDA_ERROR_INVALID_POINTER, "not a live");
  CHECK_ERR(tcuda_host_record_stream(NULL, s), TCUDA_ERROR_INVALID_ARGUMENT, "ptr is NULL");
  CHECK_ERR(tcuda_host_memory_stats(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  /* a failing backend allocation leaves the stats untouched */
  tcuda_host_memory_stats_t before, after;
  CHECK_OK(tcuda_host_memory_stats(&before));
  fail_next_alloc = 1;
  CHECK(tcuda_host_alloc(&p, 1 << 20) == TCUDA_ERROR_HOST_OUT_OF_MEMORY);
  CHECK_OK(tcuda_host_memory_stats(&after));
  CHECK(!memcmp(&before, &after, sizeof before));
  /* the backend cannot change while blocks exist */
  CHECK_OK(tcuda_host_alloc(&p, 8));
  CHECK_ERR(tc_host_set_backend(&fake), TCUDA_ERROR_INVALID_STATE, "holds 2 blocks");
  CHECK_OK(tcuda_host_free(p));
  CHECK_OK(tcuda_host_empty_cache());
}

static void resets(void) {
  reset();
  void *a, *b;
  CHECK_OK(tcuda_host_alloc(&a, 100));
  CHECK_OK(tcuda_host_alloc(&b, 100));
  CHECK_OK(tcuda_host_free(b));
  tcuda_host_memory_stats_t st;
  CHECK_OK(tcuda_host_reset_peak_memory_stats());
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.allocation.peak, 1);
  CHECK_EQ_INT(st.allocation.allocated, 2);
  CHECK_OK(tcuda_host_reset_accumulated_memory_stats());
  CHECK_OK(tcuda_host_memory_stats(&st));
  CHECK_EQ_INT(st.allocation.allocated, 0);
  CHECK_EQ_INT(st.allocation.freed, 0);
  CHECK_EQ_INT(st.allocation.current, 1);
  CHECK_EQ_INT(st.num_host_alloc, 0);
  CHECK_EQ_INT(st.host_alloc_time.count, 0);
  CHECK_OK(tcuda_host_free(a));
  CHECK_OK(tcuda_host_empty_cache());
  CHECK_OK(tc_host_set_backend(NULL));
  if (!tcuda_is_available()) {
    void *p;
    CHECK_ERR(tcuda_host_alloc(&p, 8), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_host_alloc: CUDA is not available");
  }
}

TC_MAIN(T(rounding_and_reuse), T(cross_stream_waits_for_events), T(bad_input), T(resets))
