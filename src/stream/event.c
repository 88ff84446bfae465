/* Events: lazy creation on the recording stream's device, timing, blocking
 * sync and IPC, plus the stream operations built on events. Follows
 * ATen's CUDAEvent and torch.cuda.Event. */
#include "stream.h"
#include "core/fault.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(cudaIpcEventHandle_t) == TCUDA_IPC_EVENT_HANDLE_SIZE, "IPC event handle size");

#define EVENT_FLAGS_ALL (TCUDA_EVENT_TIMING | TCUDA_EVENT_BLOCKING | TCUDA_EVENT_INTERPROCESS)

struct tcuda_event {
  unsigned flags;
  int device;                        /* valid once ev is set; -1 before */
  _Atomic(struct CUevent_st *) ev;   /* NULL until created; published with release */
  pthread_mutex_t mu;                /* serialises creation only */
};

static unsigned cuda_flags(unsigned f) {
  return ((f & TCUDA_EVENT_TIMING) ? 0u : (unsigned)cudaEventDisableTiming) |
         ((f & TCUDA_EVENT_BLOCKING) ? (unsigned)cudaEventBlockingSync : 0u) |
         ((f & TCUDA_EVENT_INTERPROCESS) ? (unsigned)cudaEventInterprocess : 0u);
}

static cudaEvent_t ev_get(const tcuda_event_t *e) {
  return atomic_load_explicit(&((tcuda_event_t *)e)->ev, memory_order_acquire);
}

static tcuda_event_t *event_alloc(unsigned flags) {
  tcuda_event_t *e = malloc(sizeof *e);
  if (!e) return NULL;
  e->flags = flags;
  e->device = -1;
  atomic_init(&e->ev, NULL);
  pthread_mutex_init(&e->mu, NULL);
  return e;
}

tcuda_status tcuda_event_create(unsigned flags, tcuda_event_t **out) {
  static const char *F = "tcuda_event_create";
  TC_CHECK_ARG(F, out, "out");
  if (flags & ~(unsigned)EVENT_FLAGS_ALL)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: flags 0x%x has unknown bits (valid: TCUDA_EVENT_TIMING, TCUDA_EVENT_BLOCKING, "
                    "TCUDA_EVENT_INTERPROCESS)",
                    F, flags);
  if ((flags & TCUDA_EVENT_INTERPROCESS) && (flags & TCUDA_EVENT_TIMING))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: flags 0x%x: TCUDA_EVENT_INTERPROCESS cannot be combined with TCUDA_EVENT_TIMING "
                    "(CUDA requires interprocess events to have timing disabled)",
                    F, flags);
  tcuda_event_t *e = event_alloc(flags);
  if (!e) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: no host memory for the event", F);
  *out = e;
  return TCUDA_SUCCESS;
}

void tcuda_event_destroy(tcuda_event_t *e) {
  if (!e) return;
  cudaEvent_t h = ev_get(e);
  /* Not in a child forked after init: its CUDA state is unusable. */
  if (h && tcuda_is_initialized()) {
    int saved;
    if (tc_on_device_begin("tcuda_event_destroy", e->device, &saved) == TCUDA_SUCCESS) {
      cudaEventDestroy(h);
      tc_on_device_end(saved);
    }
  }
  pthread_mutex_destroy(&e->mu);
  free(e);
}

/* Create the CUDA event on `device` if it does not exist yet. With
 * check_device, an existing event must be on `device` (recording). */
static tcuda_status ensure_created(const char *F, tcuda_event_t *e, int device, int check_device) {
  tcuda_status s = TCUDA_SUCCESS;
  if (!ev_get(e)) {
    pthread_mutex_lock(&e->mu);
    if (!atomic_load_explicit(&e->ev, memory_order_relaxed)) {
      int saved;
      if (!(s = tc_on_device_begin(F, device, &saved))) {
        cudaEvent_t h = NULL;
        cudaError_t err = cudaEventCreateWithFlags(&h, cuda_flags(e->flags));
        tc_on_device_end(saved);
        if (err != cudaSuccess) {
          s = tc_cuda_error(err, F, "cudaEventCreateWithFlags");
        } else {
          e->device = device;
          atomic_store_explicit(&e->ev, h, memory_order_release);
        }
      }
    }
    pthread_mutex_unlock(&e->mu);
    if (s) return s;
  }
  if (check_device && e->device != device)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: event device %d does not match recording stream's device %d",
                    F, e->device, device);
  return TCUDA_SUCCESS;
}

/* The stream argument: *sp checked, or the current stream when NULL. */
static tcuda_status stream_arg(const char *F, const tcuda_stream_t *sp, tcuda_stream_t *out) {
  if (!sp) return tc_stream_current(F, -1, out);
  tcuda_status s = tc_stream_check(F, "stream", *sp);
  if (s) return s;
  *out = *sp;
  return TCUDA_SUCCESS;
}

/* Stream handles that mean "the current device's" stream. */
static int names_current_device(cudaStream_t h) {
  return !h || h == cudaStreamLegacy || h == cudaStreamPerThread;
}

static tcuda_status record_on(const char *F, tcuda_event_t *e, tcuda_stream_t st) {
  /* Hot path: a created event on a non-default stream of its own device. A
   * non-null stream names its context, so no device switch is needed; the
   * legacy default stream (NULL) means "the current device's" and does. */
  cudaEvent_t h = ev_get(e);
  if (h && !names_current_device(st.handle) && e->device == st.device) {
    cudaError_t err = TC_FAULT(TC_FAULT_EVENT_RECORD) ? cudaErrorInvalidResourceHandle : cudaEventRecord(h, st.handle);
    return err == cudaSuccess ? TCUDA_SUCCESS : tc_cuda_error(err, F, "cudaEventRecord");
  }
  int saved;
  tcuda_status s = ensure_created(F, e, st.device, 1);
  if (s || (s = tc_on_device_begin(F, st.device, &saved))) return s;
  cudaError_t err =
      TC_FAULT(TC_FAULT_EVENT_RECORD) ? cudaErrorInvalidResourceHandle : cudaEventRecord(ev_get(e), st.handle);
  tc_on_device_end(saved);
  if (err != cudaSuccess) return tc_cuda_error(err, F, "cudaEventRecord");
  return TCUDA_SUCCESS;
}

/* cudaStreamWaitEvent under the waiting stream's device (c10's block());
 * a real stream handle names its context, so no switch is needed. */
static tcuda_status block_on(const char *F, cudaEvent_t h, tcuda_stream_t st) {
  int saved = -1;
  if (names_current_device(st.handle)) {
    tcuda_status s = tc_on_device_begin(F, st.device, &saved);
    if (s) return s;
  }
  cudaError_t err = cudaStreamWaitEvent(st.handle, h, 0);
  tc_on_device_end(saved);
  if (err != cudaSuccess) return tc_cuda_error(err, F, "cudaStreamWaitEvent");
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_event_record(tcuda_event_t *e, const tcuda_stream_t *sp) {
  static const char *F = "tcuda_event_record";
  TC_CHECK_ARG(F, e, "event");
  tcuda_stream_t st;
  tcuda_status s = stream_arg(F, sp, &st);
  if (s) return s;
  return record_on(F, e, st);
}

tcuda_status tcuda_event_wait(tcuda_event_t *e, const tcuda_stream_t *sp) {
  static const char *F = "tcuda_event_wait";
  TC_CHECK_ARG(F, e, "event");
  cudaEvent_t h = ev_get(e);
  if (!h) return TCUDA_SUCCESS; /* never recorded: nothing to wait for */
  tcuda_stream_t st;
  tcuda_status s = stream_arg(F, sp, &st);
  if (s) return s;
  return block_on(F, h, st);
}

/* 1 done, 0 pending; CUDA errors other than NotReady are errors. */
static tcuda_status query(const char *F, const tcuda_event_t *e, int *done) {
  cudaEvent_t h = ev_get(e);
  if (!h) {
    *done = 1;
    return TCUDA_SUCCESS;
  }
  cudaError_t err = cudaEventQuery(h);
  if (err == cudaErrorNotReady) {
    (void)cudaGetLastError();
    *done = 0;
    return TCUDA_SUCCESS;
  }
  if (err != cudaSuccess) return tc_cuda_error(err, F, "cudaEventQuery");
  *done = 1;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_event_query(tcuda_event_t *e, int *done) {
  static const char *F = "tcuda_event_query";
  TC_CHECK_ARG(F, e, "event");
  TC_CHECK_ARG(F, done, "done");
  return query(F, e, done);
}

tcuda_status tcuda_event_synchronize(tcuda_event_t *e) {
  static const char *F = "tcuda_event_synchronize";
  TC_CHECK_ARG(F, e, "event");
  cudaEvent_t h = ev_get(e);
  if (!h) return TCUDA_SUCCESS;
  cudaError_t err = cudaEventSynchronize(h);
  if (err != cudaSuccess) return tc_cuda_error(err, F, "cudaEventSynchronize");
  return TCUDA_SUCCESS;
}

static const char *which(int bad_start, int bad_end) {
  return bad_start && bad_end ? "start and end" : bad_start ? "start" : "end";
}

tcuda_status tcuda_event_elapsed_time(tcuda_event_t *start, tcuda_event_t *end, float *ms) {
  static const char *F = "tcuda_event_elapsed_time";
  TC_CHECK_ARG(F, start, "start");
  TC_CHECK_ARG(F, end, "end");
  TC_CHECK_ARG(F, ms, "ms");
  /* PyTorch's order: timing, then recorded, then completed. */
  int a = !(start->flags & TCUDA_EVENT_TIMING), b = !(end->flags & TCUDA_EVENT_TIMING);
  if (a || b)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: both events must be created with TCUDA_EVENT_TIMING (missing on %s)", F, which(a, b));
  a = !ev_get(start);
  b = !ev_get(end);
  if (a || b)
    return tc_error(TCUDA_ERROR_INVALID_STATE,
                    "%s: both events must be recorded before calculating elapsed time (%s not recorded)", F,
                    which(a, b));
  int da, db;
  tcuda_status s = query(F, start, &da);
  if (s || (s = query(F, end, &db))) return s;
  if (!da || !db)
    return tc_error(TCUDA_ERROR_NOT_READY,
                    "%s: both events must be completed before calculating elapsed time (%s still pending)", F,
                    which(!da, !db));
  int saved;
  if ((s = tc_on_device_begin(F, start->device, &saved))) return s;
  float t = 0;
  cudaError_t err = cudaEventElapsedTime(&t, ev_get(start), ev_get(end));
  tc_on_device_end(saved);
  if (err != cudaSuccess) return tc_cuda_error(err, F, "cudaEventElapsedTime");
  *ms = t;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_event_ipc_handle(tcuda_event_t *e, unsigned char handle[TCUDA_IPC_EVENT_HANDLE_SIZE]) {
  static const char *F = "tcuda_event_ipc_handle";
  TC_CHECK_ARG(F, e, "event");
  TC_CHECK_ARG(F, handle, "handle");
  if (!(e->flags & TCUDA_EVENT_INTERPROCESS))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: event flags 0x%x lack TCUDA_EVENT_INTERPROCESS; only interprocess events can be shared",
                    F, e->flags);
  tcuda_status s;
  if (!ev_get(e)) {
    int device = -1; /* an unrecorded event is made on the current device */
    if ((s = tc_resolve_device(F, &device)) || (s = ensure_created(F, e, device, 0))) return s;
  }
  cudaIpcEventHandle_t h;
  cudaError_t err = cudaIpcGetEventHandle(&h, ev_get(e));
  if (err != cudaSuccess) return tc_cuda_error(err, F, "cudaIpcGetEventHandle");
  memcpy(handle, &h, sizeof h);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_event_from_ipc_handle(int device, const void *handle, size_t handle_size, tcuda_event_t **out) {
  static const char *F = "tcuda_event_from_ipc_handle";
  TC_CHECK_ARG(F, handle, "handle");
  TC_CHECK_ARG(F, out, "out");
  if (handle_size != sizeof(cudaIpcEventHandle_t))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: cudaIpcEventHandle_t expects byte-like object of size %zu, but got %zu", F,
                    sizeof(cudaIpcEventHandle_t), handle_size);
  int saved;
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  cudaIpcEventHandle_t h;
  memcpy(&h, handle, sizeof h);
  tcuda_event_t *e = event_alloc(TCUDA_EVENT_INTERPROCESS);
  if (!e) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: no host memory for the event", F);
  if ((s = tc_on_device_begin(F, device, &saved))) {
    tcuda_event_destroy(e);
    return s;
  }
  cudaEvent_t ev = NULL;
  cudaError_t err = cudaIpcOpenEventHandle(&ev, h);
  tc_on_device_end(saved);
  if (err != cudaSuccess) {
    tcuda_event_destroy(e);
    return tc_cuda_error(err, F, "cudaIpcOpenEventHandle");
  }
  e->device = device;
  atomic_store_explicit(&e->ev, ev, memory_order_release);
  *out = e;
  return TCUDA_SUCCESS;
}

struct CUevent_st *tcuda_event_handle(const tcuda_event_t *e) { return e ? ev_get(e) : NULL; }

int tcuda_event_device(const tcuda_event_t *e) { return e && ev_get(e) ? e->device : -1; }

unsigned tcuda_event_flags(const tcuda_event_t *e) { return e ? e->flags : 0u; }

/* ---- stream operations built on events ---- */

tcuda_status tcuda_stream_wait_event(tcuda_stream_t st, tcuda_event_t *e) {
  static const char *F = "tcuda_stream_wait_event";
  TC_CHECK_ARG(F, e, "event");
  tcuda_status s = tc_stream_check(F, "stream", st);
  if (s) return s;
  cudaEvent_t h = ev_get(e);
  return h ? block_on(F, h, st) : TCUDA_SUCCESS;
}

/* wait_stream's events, a few per device: an event goes back to the pool
 * as soon as the wait is enqueued, since a wait uses the state the event
 * had then and later records do not change it. Creating and destroying one
 * per call, with the device switches, cost more host time than the rest of
 * a cross-device copy's bookkeeping. */
#define WAIT_POOL 8
static pthread_mutex_t g_wait_mu = PTHREAD_MUTEX_INITIALIZER;
static cudaEvent_t g_wait_ev[TC_MAX_DEVICES][WAIT_POOL];
static int g_wait_n[TC_MAX_DEVICES];

static tcuda_status wait_event_get(const char *F, int device, cudaEvent_t *out) {
  *out = NULL;
  pthread_mutex_lock(&g_wait_mu);
  if (g_wait_n[device] > 0) *out = g_wait_ev[device][--g_wait_n[device]];
  pthread_mutex_unlock(&g_wait_mu);
  if (*out) return TCUDA_SUCCESS;
  int saved;
  tcuda_status s = tc_on_device_begin(F, device, &saved);
  if (s) return s;
  cudaError_t err = cudaEventCreateWithFlags(out, cudaEventDisableTiming);
  tc_on_device_end(saved);
  return err == cudaSuccess ? TCUDA_SUCCESS : tc_cuda_error(err, F, "cudaEventCreateWithFlags");
}

static void wait_event_put(int device, cudaEvent_t h) {
  pthread_mutex_lock(&g_wait_mu);
  if (g_wait_n[device] < WAIT_POOL) {
    g_wait_ev[device][g_wait_n[device]++] = h;
    h = NULL;
  }
  pthread_mutex_unlock(&g_wait_mu);
  if (h) cudaEventDestroy(h); /* CUDA keeps it alive until the wait resolves */
}

tcuda_status tcuda_stream_wait_stream(tcuda_stream_t st, tcuda_stream_t other) {
  static const char *F = "tcuda_stream_wait_stream";
  int saved = -1;
  if (other.device < 0 && st.device >= 0) return tc_stream_check(F, "other", other); /* before CUDA */
  tcuda_status s = tc_stream_check(F, "stream", st);
  if (s || (s = tc_stream_check(F, "other", other))) return s;
  /* checked: both devices are below TC_MAX_DEVICES, which sizes the pool */
  /* A timing-free event, as Stream.wait_stream's record_event(). */
  cudaEvent_t h = NULL;
  if ((s = wait_event_get(F, other.device, &h))) return s;
  /* a real stream handle names its context: no device switch */
  if (names_current_device(other.handle) && (s = tc_on_device_begin(F, other.device, &saved))) {
    wait_event_put(other.device, h);
    return s;
  }
  cudaError_t err = cudaEventRecord(h, other.handle);
  tc_on_device_end(saved);
  s = err == cudaSuccess ? block_on(F, h, st) : tc_cuda_error(err, F, "cudaEventRecord");
  wait_event_put(other.device, h);
  return s;
}

tcuda_status tcuda_stream_record_event(tcuda_stream_t st, tcuda_event_t *event, tcuda_event_t **out) {
  static const char *F = "tcuda_stream_record_event";
  if (!event && !out)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: out is NULL (required when event is NULL)", F);
  tcuda_status s = tc_stream_check(F, "stream", st);
  if (s) return s;
  tcuda_event_t *e = event;
  if (!e && (s = tcuda_event_create(TCUDA_EVENT_DEFAULT, &e))) return s;
  if ((s = record_on(F, e, st))) {
    if (!event) tcuda_event_destroy(e);
    return s;
  }
  if (out) *out = e;
  return TCUDA_SUCCESS;
}
