/* Streams without a GPU: argument checks that come before CUDA, refusals to
 * destroy streams tcuda does not own, and every call that needs CUDA
 * failing cleanly. On a GPU machine the no-GPU cases are skipped; the gpu
 * suite (gpu.test_stream_*) covers them there. */
#include "harness.h"

static int no_cuda(void) { return !tcuda_is_available(); }

static tcuda_stream_t fake(struct CUstream_st *h, int64_t id, int device) {
  tcuda_stream_t s = {.handle = h, .id = id, .device = device, .priority = 0};
  return s;
}

static void null_out_pointers(void) {
  int a;
  CHECK_ERR(tcuda_stream_priority_range(NULL, &a), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_stream_priority_range: least is NULL");
  CHECK_ERR(tcuda_stream_priority_range(&a, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_stream_priority_range: greatest is NULL");
  CHECK_ERR(tcuda_stream_from_pool(0, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_stream_from_pool: out is NULL");
  CHECK_ERR(tcuda_stream_create(0, 0, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_stream_create: out is NULL");
  CHECK_ERR(tcuda_stream_external(NULL, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_stream_external: out is NULL");
  CHECK_ERR(tcuda_default_stream(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_default_stream: out is NULL");
  CHECK_ERR(tcuda_current_stream(-1, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_current_stream: out is NULL");
  tcuda_stream_t s = fake(NULL, 0, 0);
  CHECK_ERR(tcuda_stream_query(s, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_stream_query: done is NULL");
  CHECK_ERR(tcuda_stream_get_priority(s, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_stream_get_priority: priority is NULL");
  CHECK_ERR(tcuda_stream_guard_begin(NULL, s), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_stream_guard_begin: guard is NULL");
  CHECK_ERR(tcuda_stream_guard_end(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_stream_guard_end: guard is NULL");
  CHECK_ERR(tcuda_stream_wait_event(s, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_stream_wait_event: event is NULL");
  CHECK_ERR(tcuda_stream_record_event(s, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_stream_record_event: out is NULL (required when event is NULL)");
}

static void bad_create_flags(void) {
  tcuda_stream_t out = fake((struct CUstream_st *)0x5000, 77, 3);
  CHECK_ERR(tcuda_stream_create(0, 0, 2, &out), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_stream_create: flags 0x2 has unknown bits");
  CHECK_ERR(tcuda_stream_create(-1, -1, 0x80000001u, &out), TCUDA_ERROR_INVALID_ARGUMENT, "flags 0x80000001");
  CHECK(out.id == 77 && out.device == 3); /* untouched */
}

/* A stream value whose device is negative is refused before CUDA. */
static void negative_stream_device(void) {
  tcuda_stream_t bad = fake(NULL, 0, -1), ok = fake(NULL, 0, 0);
  int x = 5;
  CHECK_ERR(tcuda_set_stream(bad), TCUDA_ERROR_INVALID_DEVICE, "tcuda_set_stream: stream.device is -1");
  CHECK_ERR(tcuda_stream_query(bad, &x), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_query: stream.device is -1");
  CHECK_EQ_INT(x, 5);
  CHECK_ERR(tcuda_stream_synchronize(bad), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_synchronize: stream.device");
  CHECK_ERR(tcuda_stream_get_priority(bad, &x), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_get_priority");
  CHECK_EQ_INT(x, 5);
  tcuda_stream_guard_t g;
  g.active = 1;
  CHECK_ERR(tcuda_stream_guard_begin(&g, bad), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_guard_begin: stream.device");
  CHECK_EQ_INT(g.active, 0); /* a failed begin leaves nothing to end */
  CHECK_OK(tcuda_stream_guard_end(&g));
  bad.device = -7;
  CHECK_ERR(tcuda_stream_wait_stream(bad, ok), TCUDA_ERROR_INVALID_DEVICE,
            "tcuda_stream_wait_stream: stream.device is -7");
  CHECK_ERR(tcuda_stream_wait_stream(ok, bad), TCUDA_ERROR_INVALID_DEVICE,
            "tcuda_stream_wait_stream: other.device is -7");
  tcuda_event_t *ev = NULL, *got = (tcuda_event_t *)0x1;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &ev));
  CHECK_ERR(tcuda_stream_wait_event(bad, ev), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_wait_event: stream.device");
  CHECK_ERR(tcuda_stream_record_event(bad, ev, &got), TCUDA_ERROR_INVALID_DEVICE,
            "tcuda_stream_record_event: stream.device is -7");
  CHECK_ERR(tcuda_stream_record_event(bad, NULL, &got), TCUDA_ERROR_INVALID_DEVICE, "stream.device is -7");
  CHECK(got == (tcuda_event_t *)0x1);
  CHECK(tcuda_event_handle(ev) == NULL);
  tcuda_event_destroy(ev);
}

static void guard_end_without_begin_is_noop(void) {
  tcuda_stream_guard_t g;
  memset(&g, 0, sizeof g);
  CHECK_OK(tcuda_stream_guard_end(&g));
  CHECK_OK(tcuda_stream_guard_end(&g));
}

/* Only streams from tcuda_stream_create can be destroyed; decided from the
 * id alone, so no GPU is needed. */
static void destroy_refuses_streams_it_does_not_own(void) {
  CHECK_ERR(tcuda_stream_destroy(fake(NULL, 0, 0)), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_stream_destroy: cannot destroy the default stream");
  CHECK_ERR(tcuda_stream_destroy(fake((struct CUstream_st *)0x7f0000001000, 0x7f0000001000, 0)),
            TCUDA_ERROR_INVALID_ARGUMENT, "cannot destroy external stream 0x7f0000001000");
  /* pool ids: slot<<5 | (level+1)<<1 | 1, device above bit 10 */
  int64_t pool0 = (3 << 5) | (1 << 1) | 1, pool1 = ((int64_t)1 << 10) | (31 << 5) | (4 << 1) | 1;
  CHECK_ERR(tcuda_stream_destroy(fake((struct CUstream_st *)0x1000, pool0, 0)), TCUDA_ERROR_INVALID_ARGUMENT,
            "cannot destroy pool stream (id 99)");
  CHECK_ERR(tcuda_stream_destroy(fake((struct CUstream_st *)0x1000, pool1, 1)), TCUDA_ERROR_INVALID_ARGUMENT,
            "pool streams live as long as the process");
  /* a dedicated-looking id that was never created, and a nonsense odd id */
  int64_t ded = ((int64_t)99 << 20) | (0xE << 1) | 1;
  CHECK_ERR(tcuda_stream_destroy(fake((struct CUstream_st *)0x2000, ded, 0)), TCUDA_ERROR_INVALID_ARGUMENT,
            "is not a live stream from tcuda_stream_create");
  CHECK_ERR(tcuda_stream_destroy(fake(NULL, 1 | (5 << 1), 0)), TCUDA_ERROR_INVALID_ARGUMENT,
            "is not a live stream from tcuda_stream_create");
}

static void without_cuda_everything_says_not_available(void) {
  if (!no_cuda()) { TC_SKIP_PART("no-CUDA behaviour: a GPU is present"); return; }
  int least = 11, greatest = 12, x = 13;
  CHECK_ERR(tcuda_stream_priority_range(&least, &greatest), TCUDA_ERROR_NOT_AVAILABLE,
            "tcuda_stream_priority_range: CUDA is not available");
  CHECK(least == 11 && greatest == 12);
  tcuda_stream_t out = fake((struct CUstream_st *)0x5000, 42, 9);
  CHECK_ERR(tcuda_stream_from_pool(-1, 0, &out), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_from_pool: CUDA is not");
  CHECK_ERR(tcuda_stream_from_pool(0, -1, &out), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_from_pool");
  CHECK_ERR(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &out), TCUDA_ERROR_NOT_AVAILABLE,
            "tcuda_stream_create");
  CHECK_ERR(tcuda_stream_external((struct CUstream_st *)0x1000, 0, &out), TCUDA_ERROR_NOT_AVAILABLE,
            "tcuda_stream_external");
  CHECK_ERR(tcuda_default_stream(-1, &out), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_default_stream");
  CHECK_ERR(tcuda_current_stream(-1, &out), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_current_stream");
  CHECK_ERR(tcuda_current_stream(0, &out), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_current_stream");
  CHECK(out.id == 42 && out.device == 9 && out.handle == (struct CUstream_st *)0x5000); /* untouched */

  tcuda_stream_t s = fake(NULL, 0, 0), t = fake((struct CUstream_st *)0x1000, 0x1000, 0);
  CHECK_ERR(tcuda_set_stream(s), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_set_stream");
  tcuda_stream_guard_t g;
  CHECK_ERR(tcuda_stream_guard_begin(&g, t), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_guard_begin");
  CHECK_EQ_INT(g.active, 0);
  CHECK_OK(tcuda_stream_guard_end(&g));
  CHECK_ERR(tcuda_stream_query(s, &x), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_query");
  CHECK_EQ_INT(x, 13);
  CHECK_ERR(tcuda_stream_synchronize(t), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_synchronize");
  CHECK_ERR(tcuda_stream_get_priority(t, &x), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_get_priority");
  CHECK_ERR(tcuda_stream_wait_stream(s, t), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_wait_stream");
  tcuda_event_t *ev, *got = NULL;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING, &ev));
  CHECK_ERR(tcuda_stream_wait_event(s, ev), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_wait_event");
  CHECK_ERR(tcuda_stream_record_event(s, ev, &got), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_record_event");
  CHECK_ERR(tcuda_stream_record_event(s, NULL, &got), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_stream_record_event");
  CHECK(got == NULL);
  CHECK(tcuda_event_handle(ev) == NULL); /* still not created */
  tcuda_event_destroy(ev);
}

TC_MAIN(T(null_out_pointers), T(bad_create_flags), T(negative_stream_device), T(guard_end_without_begin_is_noop),
        T(destroy_refuses_streams_it_does_not_own), T(without_cuda_everything_says_not_available))
