/* Streams and events under injected CUDA failures: a stream pool whose
 * creation fails part way (the streams made are destroyed, *out is not
 * written, the next call builds the pool), a dedicated stream that cannot
 * be made, and tcuda_event_record / tcuda_stream_record_event failing on
 * both of record's paths. The allocator is checked after each, and the
 * allocator's own event point is shown to be a separate one. */
#include "fault_util.h"

/* Runs first: device 0's pool is made by the first tcuda_stream_from_pool. */
static void test_pool_creation_fails(void) {
  clean_start();
  int least = 0, greatest = 0;
  CHECK_OK(tcuda_stream_priority_range(&least, &greatest));
  long per_pool = (long)(least - greatest + 1) * 32; /* every level's 32 streams, made at once */
  tc_fault_arm(TC_FAULT_STREAM_CREATE, 5, 1);
  tcuda_stream_t s, before;
  memset(&s, 0x7f, sizeof s);
  before = s;
  tcuda_status st = tcuda_stream_from_pool(0, 0, &s);
  if (tc_fault_hits(TC_FAULT_STREAM_CREATE) == 0) {
    TC_SKIP_PART("device 0's stream pool existed already (run this test first, alone)");
    CHECK_OK(st);
    clean_end();
    return;
  }
  CHECK_EQ_INT(st, TCUDA_ERROR_OUT_OF_MEMORY);
  CHECK(strstr(tcuda_last_error(),
               "tcuda_stream_from_pool: cudaStreamCreateWithPriority failed: cudaErrorMemoryAllocation"));
  CHECK(!memcmp(&s, &before, sizeof s)); /* not written */
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_STREAM_CREATE), 5); /* stopped at the failure */
  CHECK_OK(tcuda_stream_from_pool(0, 0, &s));
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_STREAM_CREATE), 5 + per_pool); /* the whole pool, anew */
  CHECK(s.handle != NULL && s.id != 0 && s.device == 0);
  void *p = NULL;
  CHECK_OK(tcuda_malloc_on(&p, MiB, 0, s));
  CHECK(cudaMemsetAsync(p, 0x66, MiB, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_stream_synchronize(s));
  CHECK(still(p, MiB, 0x66));
  CHECK_ALLOC(0, 1);
  CHECK_OK(tcuda_free(p));
  clean_end();
}

static void test_dedicated_stream_fails(void) {
  clean_start();
  tc_fault_arm(TC_FAULT_STREAM_CREATE, 1, 1);
  tcuda_stream_t s, before;
  memset(&s, 0x7f, sizeof s);
  before = s;
  CHECK_ERR(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s), TCUDA_ERROR_OUT_OF_MEMORY,
            "tcuda_stream_create: cudaStreamCreateWithPriority failed: cudaErrorMemoryAllocation");
  CHECK(!memcmp(&s, &before, sizeof s));
  /* the stream table took nothing: the next streams are made, used, destroyed */
  tcuda_stream_t a, b;
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &a));
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_DEFAULT, &b));
  CHECK(a.id != b.id && a.handle != b.handle);
  void *p = NULL;
  CHECK_OK(tcuda_malloc_on(&p, 3 * MiB, 0, a));
  CHECK(cudaMemsetAsync(p, 0x77, 3 * MiB, a.handle) == cudaSuccess);
  CHECK_OK(tcuda_stream_synchronize(a));
  CHECK(still(p, 3 * MiB, 0x77));
  CHECK_ALLOC(0, 1);
  CHECK_OK(tcuda_free(p));
  CHECK_OK(tcuda_stream_destroy(a));
  CHECK_OK(tcuda_stream_destroy(b));
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_STREAM_CREATE), 1);
  clean_end();
}

static void test_event_record_fails(void) {
  clean_start();
  tcuda_stream_t s;
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s));
  tcuda_event_t *e = NULL;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &e));
  /* first record: creates the CUDA event on the stream's device, then
   * records (the slow path) */
  tc_fault_arm(TC_FAULT_EVENT_RECORD, 1, 1);
  CHECK_ERR(tcuda_event_record(e, &s), TCUDA_ERROR_CUDA,
            "tcuda_event_record: cudaEventRecord failed: cudaErrorInvalidResourceHandle");
  int done = 0;
  CHECK_OK(tcuda_event_query(e, &done));
  CHECK_EQ_INT(done, 1); /* recorded nothing: nothing to wait for */
  CHECK_OK(tcuda_event_record(e, &s));
  CHECK_OK(tcuda_event_synchronize(e));
  /* a created event on its own device's stream: the hot path */
  tc_fault_arm(TC_FAULT_EVENT_RECORD, 1, 1);
  CHECK_ERR(tcuda_event_record(e, &s), TCUDA_ERROR_CUDA, "tcuda_event_record: cudaEventRecord failed");
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_EVENT_RECORD), 1);
  CHECK_OK(tcuda_event_record(e, &s));
  CHECK_OK(tcuda_event_synchronize(e));
  CHECK_OK(tcuda_stream_wait_event(s, e));
  /* stream_record_event making its own event: it is destroyed again and
   * *out is not written */
  tcuda_event_t *made = (tcuda_event_t *)&made;
  tc_fault_arm(TC_FAULT_EVENT_RECORD, 1, 1);
  CHECK_ERR(tcuda_stream_record_event(s, NULL, &made), TCUDA_ERROR_CUDA,
            "tcuda_stream_record_event: cudaEventRecord failed");
  CHECK(made == (tcuda_event_t *)&made);
  CHECK_OK(tcuda_stream_record_event(s, NULL, &made));
  CHECK_OK(tcuda_event_synchronize(made));
  tcuda_event_destroy(made);
  tcuda_event_destroy(e);
  CHECK_OK(tcuda_stream_destroy(s));
  CHECK(cudaGetLastError() == cudaSuccess);
  clean_end();
}

/* tcuda_event_record's point does not reach the allocator's events, and
 * the allocator's point does not reach tcuda_event_record. */
static void test_event_points_apart(void) {
  clean_start();
  tcuda_stream_t s;
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s));
  tc_fault_arm(TC_FAULT_EVENT_RECORD, 1, TC_FAULT_FOREVER);
  void *p = NULL;
  CHECK_OK(tcuda_malloc(&p, 4096));
  CHECK_OK(tcuda_record_stream(p, s));
  CHECK_OK(tcuda_free(p)); /* records the allocator's event */
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_EVENT_RECORD), 0);
  CHECK_ALLOC(0, 0);
  tc_fault_reset();
  tc_fault_arm(TC_FAULT_ALLOC_EVENT, 1, TC_FAULT_FOREVER);
  tcuda_event_t *e = NULL;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &e));
  CHECK_OK(tcuda_event_record(e, &s));
  CHECK_OK(tcuda_event_synchronize(e));
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_ALLOC_EVENT), 0);
  tcuda_event_destroy(e);
  CHECK_OK(tcuda_stream_synchronize(s));
  CHECK_OK(tcuda_stream_destroy(s));
  clean_end();
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(test_pool_creation_fails), T(test_dedicated_stream_fails),
                                  T(test_event_record_fails), T(test_event_points_apart)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
