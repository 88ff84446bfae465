/* Events on a real GPU: lazy creation on the recording stream's device,
 * record/wait on the current stream, query before and after, timing against
 * a %globaltimer spin of known length, elapsed_time's checks, blocking sync,
 * the wrong-device error, IPC handles in one process, and racing records. */
#include "harness.h"
#include <stdlib.h>
#include "stream_kernels.h"
#include <pthread.h>
#include <time.h>

#define CU(call) CHECK((call) == cudaSuccess)

static tcuda_stream_t pool(int device) {
  tcuda_stream_t s = {0};
  CHECK_OK(tcuda_stream_from_pool(device, 0, &s));
  return s;
}

static double now_s(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void lazy_creation(void) {
  int n = tcuda_device_count();
  CHECK_OK(tcuda_set_device(0));
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &e));
  CHECK(tcuda_event_handle(e) == NULL);
  tcuda_stream_t s = pool(n - 1);
  CHECK_OK(tcuda_event_record(e, &s));
  CHECK(tcuda_event_handle(e) != NULL);
  CHECK_EQ_INT(tcuda_event_device(e), n - 1); /* the stream's device, not the current one */
  int d = -1;
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, 0);
  struct CUevent_st *h = tcuda_event_handle(e);
  CHECK_OK(tcuda_event_record(e, &s));
  CHECK(tcuda_event_handle(e) == h); /* made once */
  tcuda_event_destroy(e);             /* on its own device */
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, 0);
}

static void query_before_and_after(void) {
  tcuda_stream_t s = pool(0);
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &e));
  CU(tct_spin_us(100000, s.handle));
  CHECK_OK(tcuda_event_record(e, &s));
  int done = -1;
  CHECK_OK(tcuda_event_query(e, &done));
  CHECK_EQ_INT(done, 0);
  CHECK_EQ_INT(cudaGetLastError(), cudaSuccess);
  CHECK_OK(tcuda_event_synchronize(e));
  CHECK_OK(tcuda_event_query(e, &done));
  CHECK_EQ_INT(done, 1);
  tcuda_event_destroy(e);
}

/* record(NULL) and wait(NULL) use the current stream: recording behind a
 * busy current stream leaves the event pending, which the idle legacy
 * stream would not. */
static void null_stream_means_current(void) {
  CHECK_OK(tcuda_set_device(0));
  tcuda_stream_t s = pool(0), w = pool(0);
  CHECK_OK(tcuda_set_stream(s));
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &e));
  CU(tct_spin_us(100000, s.handle));
  CHECK_OK(tcuda_event_record(e, NULL));
  int done = -1;
  CHECK_OK(tcuda_event_query(e, &done));
  CHECK_EQ_INT(done, 0);
  CHECK_OK(tcuda_set_stream(w));
  CHECK_OK(tcuda_event_wait(e, NULL)); /* w now waits for s */
  CU(tct_spin_us(1, w.handle));
  CHECK_OK(tcuda_stream_query(w, &done));
  CHECK_EQ_INT(done, 0);
  CHECK_OK(tcuda_stream_synchronize(w));
  CHECK_OK(tcuda_event_query(e, &done));
  CHECK_EQ_INT(done, 1);
  tcuda_stream_t d;
  CHECK_OK(tcuda_default_stream(0, &d));
  CHECK_OK(tcuda_set_stream(d));
  tcuda_event_destroy(e);
}

static float timed_spin(tcuda_stream_t s, unsigned long long us) {
  tcuda_event_t *a, *b;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING, &a));
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING | TCUDA_EVENT_BLOCKING, &b));
  CHECK_OK(tcuda_event_record(a, &s));
  CU(tct_spin_us(us, s.handle));
  CHECK_OK(tcuda_event_record(b, &s));
  CHECK_OK(tcuda_event_synchronize(b));
  float ms = -1;
  CHECK_OK(tcuda_event_elapsed_time(a, b, &ms));
  tcuda_event_destroy(a);
  tcuda_event_destroy(b);
  return ms;
}

static void timing_accuracy(void) {
  tcuda_stream_t s = pool(0);
  (void)timed_spin(s, 100); /* warm up: module load, first launch */
  unsigned long long lens[] = {2000, 5000, 20000};
  for (size_t i = 0; i < 3; i++) {
    float ms = timed_spin(s, lens[i]), want = lens[i] / 1000.0f;
    printf("  spin %.1f ms -> elapsed %.4f ms\n", want, ms);
    CHECK(ms >= want * 0.99f); /* the kernel alone takes this long */
    /* plus launch overhead; compute-sanitizer's instrumented launches take
     * milliseconds, so only the lower bound holds under it */
    if (!getenv("TCUDA_UNDER_SANITIZER")) CHECK(ms <= want * 1.05f + 0.05f);
  }
}

static void elapsed_time_checks(void) {
  tcuda_stream_t s = pool(0);
  tcuda_event_t *a, *b, *plain;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING, &a));
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING, &b));
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &plain));
  float ms = -7;
  CHECK_OK(tcuda_event_record(a, &s));
  CHECK_OK(tcuda_event_record(plain, &s));
  CHECK_OK(tcuda_event_synchronize(a)); /* so only end can be pending below */
  /* 2: one not recorded */
  CHECK_ERR(tcuda_event_elapsed_time(a, b, &ms), TCUDA_ERROR_INVALID_STATE, "(end not recorded)");
  CHECK_ERR(tcuda_event_elapsed_time(b, a, &ms), TCUDA_ERROR_INVALID_STATE, "(start not recorded)");
  /* 1 before 2, even when recorded */
  CHECK_ERR(tcuda_event_elapsed_time(a, plain, &ms), TCUDA_ERROR_INVALID_ARGUMENT, "TCUDA_EVENT_TIMING (missing on end)");
  /* 3: both recorded, end still pending */
  CU(tct_spin_us(200000, s.handle));
  CHECK_OK(tcuda_event_record(b, &s));
  CHECK_ERR(tcuda_event_elapsed_time(a, b, &ms), TCUDA_ERROR_NOT_READY,
            "tcuda_event_elapsed_time: both events must be completed before calculating elapsed time (end still pending)");
  CHECK(ms == -7);
  CHECK_OK(tcuda_event_synchronize(b));
  CHECK_OK(tcuda_event_elapsed_time(a, b, &ms));
  CHECK(ms >= 199.0f);
  tcuda_event_destroy(a);
  tcuda_event_destroy(b);
  tcuda_event_destroy(plain);
}

/* With BLOCKING the waiting thread sleeps instead of spinning. */
static void blocking_sync(void) {
  tcuda_stream_t s = pool(0);
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_BLOCKING, &e));
  CU(tct_spin_us(300000, s.handle));
  CHECK_OK(tcuda_event_record(e, &s));
  double w0 = now_s(CLOCK_MONOTONIC), c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
  CHECK_OK(tcuda_event_synchronize(e));
  double wall = now_s(CLOCK_MONOTONIC) - w0, cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
  printf("  blocking synchronize: wall %.1f ms, thread cpu %.1f ms\n", wall * 1e3, cpu * 1e3);
  CHECK(wall >= 0.2);
  CHECK(cpu < 0.5 * wall);
  int done = -1;
  CHECK_OK(tcuda_event_query(e, &done));
  CHECK_EQ_INT(done, 1);
  tcuda_event_destroy(e);
}

static void wrong_device(void) {
  int n = tcuda_device_count();
  if (n < 2) { TC_SKIP_PART("the wrong-device error needs 2 GPUs"); return; }
  tcuda_stream_t s0 = pool(0), s1 = pool(1);
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &e));
  CHECK_OK(tcuda_event_record(e, &s0));
  CHECK_ERR(tcuda_event_record(e, &s1), TCUDA_ERROR_INVALID_DEVICE,
            "tcuda_event_record: event device 0 does not match recording stream's device 1");
  CHECK_ERR(tcuda_stream_record_event(s1, e, NULL), TCUDA_ERROR_INVALID_DEVICE,
            "event device 0 does not match recording stream's device 1");
  CHECK_EQ_INT(tcuda_event_device(e), 0);
  CHECK_OK(tcuda_event_wait(e, &s1)); /* any device may wait */
  CHECK_OK(tcuda_stream_synchronize(s1));
  tcuda_event_destroy(e);
}

static void ipc_handle_in_process(void) {
  int n = tcuda_device_count();
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_INTERPROCESS, &e));
  CHECK_OK(tcuda_set_device(n - 1));
  unsigned char h[64], h2[64];
  memset(h, 0, sizeof h);
  CHECK_OK(tcuda_event_ipc_handle(e, h));
  CHECK(tcuda_event_handle(e) != NULL);
  CHECK_EQ_INT(tcuda_event_device(e), n - 1); /* made on the current device */
  int nonzero = 0;
  for (int i = 0; i < 64; i++) nonzero |= h[i];
  CHECK(nonzero);
  CHECK_OK(tcuda_event_ipc_handle(e, h2));
  CHECK(!memcmp(h, h2, 64));
  /* created, never recorded: query is done, record works on its device */
  int done = -1;
  CHECK_OK(tcuda_event_query(e, &done));
  CHECK_EQ_INT(done, 1);
  tcuda_stream_t s = pool(n - 1);
  CHECK_OK(tcuda_event_record(e, &s));
  CHECK_OK(tcuda_event_synchronize(e));
  tcuda_event_destroy(e);
  CHECK_OK(tcuda_set_device(0));
}

/* A handle that is not one: CUDA's error comes back, wrapped. */
static void junk_ipc_handle(void) {
  unsigned char junk[64];
  memset(junk, 0x5a, sizeof junk);
  tcuda_event_t *out = NULL;
  tcuda_status st = tcuda_event_from_ipc_handle(0, junk, 64, &out);
  CHECK(st != TCUDA_SUCCESS);
  CHECK(strstr(tcuda_last_error(), "tcuda_event_from_ipc_handle: cudaIpcOpenEventHandle failed") != NULL);
  CHECK(out == NULL);
}

/* Threads racing to record one fresh event: it is created exactly once. */
enum { RACERS = 8 };
static tcuda_event_t *g_ev;
static tcuda_stream_t g_streams[RACERS];
static tcuda_status g_rc[RACERS];
static struct CUevent_st *g_seen[RACERS];
static pthread_barrier_t g_bar;

static void *racer(void *arg) {
  int i = (int)(intptr_t)arg;
  pthread_barrier_wait(&g_bar);
  g_rc[i] = tcuda_event_record(g_ev, &g_streams[i]);
  g_seen[i] = tcuda_event_handle(g_ev);
  return NULL;
}

static void racing_first_record(void) {
  for (int round = 0; round < 20; round++) {
    CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &g_ev));
    for (int i = 0; i < RACERS; i++) g_streams[i] = pool(0);
    pthread_barrier_init(&g_bar, NULL, RACERS);
    pthread_t th[RACERS];
    for (int i = 0; i < RACERS; i++) pthread_create(&th[i], NULL, racer, (void *)(intptr_t)i);
    for (int i = 0; i < RACERS; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&g_bar);
    for (int i = 0; i < RACERS; i++) {
      CHECK_EQ_INT(g_rc[i], TCUDA_SUCCESS);
      CHECK(g_seen[i] == tcuda_event_handle(g_ev));
    }
    CHECK_OK(tcuda_event_synchronize(g_ev));
    tcuda_event_destroy(g_ev);
  }
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(lazy_creation),         T(query_before_and_after), T(null_stream_means_current),
                                  T(timing_accuracy),       T(elapsed_time_checks),    T(blocking_sync),
                                  T(wrong_device),          T(ipc_handle_in_process),  T(racing_first_record),
                                  T(junk_ipc_handle)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
