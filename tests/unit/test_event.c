/* Events without a GPU: flags, lazy creation (an event never recorded needs
 * no CUDA), elapsed_time's checks in PyTorch's order, IPC handle validation,
 * and calls that need CUDA failing cleanly and leaving the event untouched. */
#include "harness.h"

static int no_cuda(void) { return !tcuda_is_available(); }

static void create_flags(void) {
  tcuda_event_t *e = (tcuda_event_t *)0x1;
  CHECK_ERR(tcuda_event_create(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_event_create: out is NULL");
  CHECK_ERR(tcuda_event_create(8, &e), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_event_create: flags 0x8 has unknown bits");
  CHECK_ERR(tcuda_event_create(0x80000001u, &e), TCUDA_ERROR_INVALID_ARGUMENT, "flags 0x80000001 has unknown bits");
  CHECK_ERR(tcuda_event_create(TCUDA_EVENT_INTERPROCESS | TCUDA_EVENT_TIMING, &e), TCUDA_ERROR_INVALID_ARGUMENT,
            "TCUDA_EVENT_INTERPROCESS cannot be combined with TCUDA_EVENT_TIMING");
  CHECK(strstr(tcuda_last_error(), "timing disabled") != NULL); /* says why */
  CHECK_ERR(tcuda_event_create(TCUDA_EVENT_INTERPROCESS | TCUDA_EVENT_TIMING | TCUDA_EVENT_BLOCKING, &e),
            TCUDA_ERROR_INVALID_ARGUMENT, "flags 0x7");
  CHECK(e == (tcuda_event_t *)0x1); /* untouched on failure */

  /* every valid combination: no CUDA needed, nothing created yet */
  for (unsigned f = 0; f < 8; f++) {
    if ((f & TCUDA_EVENT_INTERPROCESS) && (f & TCUDA_EVENT_TIMING)) continue;
    tcuda_event_t *ev = NULL;
    CHECK_OK(tcuda_event_create(f, &ev));
    CHECK(ev != NULL);
    CHECK_EQ_INT(tcuda_event_flags(ev), f);
    CHECK(tcuda_event_handle(ev) == NULL);
    CHECK_EQ_INT(tcuda_event_device(ev), -1);
    tcuda_event_destroy(ev);
  }
  tcuda_event_destroy(NULL); /* documented as fine */
  CHECK(tcuda_event_handle(NULL) == NULL);
  CHECK_EQ_INT(tcuda_event_device(NULL), -1);
}

static void null_arguments(void) {
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING, &e));
  int done;
  float ms;
  unsigned char h[64];
  tcuda_stream_t s = {.handle = NULL, .id = 0, .device = 0, .priority = 0};
  CHECK_ERR(tcuda_event_record(NULL, &s), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_event_record: event is NULL");
  CHECK_ERR(tcuda_event_wait(NULL, &s), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_event_wait: event is NULL");
  CHECK_ERR(tcuda_event_query(NULL, &done), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_event_query: event is NULL");
  CHECK_ERR(tcuda_event_query(e, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_event_query: done is NULL");
  CHECK_ERR(tcuda_event_synchronize(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_event_synchronize: event is NULL");
  CHECK_ERR(tcuda_event_elapsed_time(NULL, e, &ms), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_event_elapsed_time: start is NULL");
  CHECK_ERR(tcuda_event_elapsed_time(e, NULL, &ms), TCUDA_ERROR_INVALID_ARGUMENT, "end is NULL");
  CHECK_ERR(tcuda_event_elapsed_time(e, e, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "ms is NULL");
  CHECK_ERR(tcuda_event_ipc_handle(NULL, h), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_event_ipc_handle: event is NULL");
  CHECK_ERR(tcuda_event_ipc_handle(e, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_event_ipc_handle: handle is NULL");
  tcuda_event_t *out = (tcuda_event_t *)0x1;
  CHECK_ERR(tcuda_event_from_ipc_handle(0, NULL, 64, &out), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_event_from_ipc_handle: handle is NULL");
  CHECK_ERR(tcuda_event_from_ipc_handle(0, h, 64, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK(out == (tcuda_event_t *)0x1);
  tcuda_event_destroy(e);
}

/* PyTorch: query() on an event never recorded is True; wait and
 * synchronize do nothing. None of it needs CUDA. */
static void never_recorded_event(void) {
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_BLOCKING, &e));
  int done = -1;
  CHECK_OK(tcuda_event_query(e, &done));
  CHECK_EQ_INT(done, 1);
  CHECK_OK(tcuda_event_synchronize(e));
  CHECK_OK(tcuda_event_wait(e, NULL));
  tcuda_stream_t s = {.handle = NULL, .id = 0, .device = 0, .priority = 0};
  CHECK_OK(tcuda_event_wait(e, &s));
  CHECK(tcuda_event_handle(e) == NULL);
  tcuda_event_destroy(e);
}

static void record_on_negative_device(void) {
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(0, &e));
  tcuda_stream_t s = {.handle = NULL, .id = 0, .device = -2, .priority = 0};
  CHECK_ERR(tcuda_event_record(e, &s), TCUDA_ERROR_INVALID_DEVICE, "tcuda_event_record: stream.device is -2");
  CHECK(tcuda_event_handle(e) == NULL);
  tcuda_event_destroy(e);
}

/* Check 1 (timing) wins over check 2 (recorded); each names the culprit. */
static void elapsed_time_check_order(void) {
  tcuda_event_t *t1, *t2, *plain;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING, &t1));
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING | TCUDA_EVENT_BLOCKING, &t2));
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &plain));
  float ms = -42.0f;
  CHECK_ERR(tcuda_event_elapsed_time(plain, t2, &ms), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_event_elapsed_time: both events must be created with TCUDA_EVENT_TIMING (missing on start)");
  CHECK_ERR(tcuda_event_elapsed_time(t1, plain, &ms), TCUDA_ERROR_INVALID_ARGUMENT, "(missing on end)");
  CHECK_ERR(tcuda_event_elapsed_time(plain, plain, &ms), TCUDA_ERROR_INVALID_ARGUMENT, "(missing on start and end)");
  CHECK_ERR(tcuda_event_elapsed_time(t1, t2, &ms), TCUDA_ERROR_INVALID_STATE,
            "both events must be recorded before calculating elapsed time (start and end not recorded)");
  CHECK(ms == -42.0f);
  tcuda_event_destroy(t1);
  tcuda_event_destroy(t2);
  tcuda_event_destroy(plain);
}

static void ipc_handle_validation(void) {
  unsigned char h[65];
  memset(h, 0xab, sizeof h);
  tcuda_event_t *out = (tcuda_event_t *)0x1;
  CHECK_ERR(tcuda_event_from_ipc_handle(0, h, 63, &out), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_event_from_ipc_handle: cudaIpcEventHandle_t expects byte-like object of size 64, but got 63");
  CHECK_ERR(tcuda_event_from_ipc_handle(0, h, 65, &out), TCUDA_ERROR_INVALID_ARGUMENT, "size 64, but got 65");
  CHECK_ERR(tcuda_event_from_ipc_handle(-1, h, 0, &out), TCUDA_ERROR_INVALID_ARGUMENT, "size 64, but got 0");
  CHECK(out == (tcuda_event_t *)0x1);
  CHECK_EQ_INT(TCUDA_IPC_EVENT_HANDLE_SIZE, 64);

  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_BLOCKING, &e));
  CHECK_ERR(tcuda_event_ipc_handle(e, h), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_event_ipc_handle: event flags 0x2 lack TCUDA_EVENT_INTERPROCESS");
  CHECK(tcuda_event_handle(e) == NULL);
  CHECK(h[0] == 0xab);
  tcuda_event_destroy(e);
}

static void without_cuda_event_calls_fail_cleanly(void) {
  if (!no_cuda()) { TC_SKIP_PART("no-CUDA behaviour: a GPU is present"); return; }
  tcuda_event_t *e, *ipc, *out = (tcuda_event_t *)0x1;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING, &e));
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_INTERPROCESS, &ipc));
  tcuda_stream_t s = {.handle = NULL, .id = 0, .device = 0, .priority = 0};
  CHECK_ERR(tcuda_event_record(e, NULL), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_event_record: CUDA is not available");
  CHECK_ERR(tcuda_event_record(e, &s), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_event_record");
  CHECK(tcuda_event_handle(e) == NULL);
  CHECK_EQ_INT(tcuda_event_device(e), -1);
  /* still "never recorded" */
  float ms = 1.5f;
  CHECK_ERR(tcuda_event_elapsed_time(e, e, &ms), TCUDA_ERROR_INVALID_STATE, "must be recorded");
  CHECK(ms == 1.5f);
  unsigned char h[64];
  memset(h, 0xcd, sizeof h);
  CHECK_ERR(tcuda_event_ipc_handle(ipc, h), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_event_ipc_handle");
  CHECK(h[0] == 0xcd && h[63] == 0xcd);
  CHECK(tcuda_event_handle(ipc) == NULL);
  CHECK_ERR(tcuda_event_from_ipc_handle(0, h, 64, &out), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_event_from_ipc_handle");
  CHECK(out == (tcuda_event_t *)0x1);
  tcuda_event_destroy(e);
  tcuda_event_destroy(ipc);
}

TC_MAIN(T(create_flags), T(null_arguments), T(never_recorded_event), T(record_on_negative_device),
        T(elapsed_time_check_order), T(ipc_handle_validation), T(without_cuda_event_calls_fail_cleanly))
