/* The current stream: per thread and per device, starts at the default
 * stream, set_stream switches the device, guards nest and restore the
 * device and the streams of both devices. */
#include "harness.h"
#include "stream/stream.h"
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static int same(tcuda_stream_t a, tcuda_stream_t b) {
  return a.handle == b.handle && a.id == b.id && a.device == b.device && a.priority == b.priority;
}

static tcuda_stream_t cur(int device) {
  tcuda_stream_t s = {.id = -99};
  CHECK_OK(tcuda_current_stream(device, &s));
  return s;
}

static int cur_dev(void) {
  int d = -1;
  CHECK_OK(tcuda_current_device(&d));
  return d;
}

static tcuda_stream_t pool(int device) {
  tcuda_stream_t s = {0};
  CHECK_OK(tcuda_stream_from_pool(device, 0, &s));
  return s;
}

static tcuda_stream_t def(int device) {
  tcuda_stream_t s = {0};
  CHECK_OK(tcuda_default_stream(device, &s));
  return s;
}

static void starts_at_default(void) {
  int n = tcuda_device_count();
  for (int d = 0; d < n && d < TC_MAX_DEVICES; d++) {
    tcuda_stream_t s = cur(d);
    CHECK(same(s, def(d)));
    CHECK(same(tc_current_stream_fast(d), s));
  }
  CHECK(same(cur(-1), def(cur_dev())));
}

static void set_stream_sets_current(void) {
  CHECK_OK(tcuda_set_device(0));
  tcuda_stream_t s = pool(0);
  CHECK_OK(tcuda_set_stream(s));
  CHECK(same(cur(-1), s));
  CHECK(same(cur(0), s));
  CHECK(same(tc_current_stream_fast(0), s));
  tcuda_stream_t t = pool(0);
  CHECK_OK(tcuda_set_stream(t));
  CHECK(same(cur(0), t));
  CHECK_OK(tcuda_set_stream(def(0)));
  CHECK(same(cur(0), def(0)));
}

/* ---- per thread ---- */
static pthread_barrier_t g_bar;
static tcuda_stream_t g_x, g_y;
static int g_thread_failures;

static void *thread_a(void *arg) {
  (void)arg;
  /* a new thread starts at the default stream whatever the main thread set */
  tcuda_stream_t s;
  if (tcuda_current_stream(0, &s) || s.id != 0 || s.handle != NULL) g_thread_failures++;
  if (tcuda_set_stream(g_x)) g_thread_failures++;
  pthread_barrier_wait(&g_bar); /* 1: A has set X */
  pthread_barrier_wait(&g_bar); /* 2: main has set Y */
  if (tcuda_current_stream(0, &s) || !same(s, g_x)) g_thread_failures++;
  if (!same(tc_current_stream_fast(0), g_x)) g_thread_failures++;
  return NULL;
}

static void current_stream_is_per_thread(void) {
  CHECK_OK(tcuda_set_device(0));
  g_x = pool(0);
  g_y = pool(0);
  CHECK(g_x.id != g_y.id);
  tcuda_stream_t mine = pool(0);
  CHECK_OK(tcuda_set_stream(mine));
  pthread_barrier_init(&g_bar, NULL, 2);
  pthread_t th;
  pthread_create(&th, NULL, thread_a, NULL);
  pthread_barrier_wait(&g_bar); /* 1 */
  CHECK(same(cur(0), mine));    /* A's set_stream did not touch this thread */
  CHECK_OK(tcuda_set_stream(g_y));
  pthread_barrier_wait(&g_bar); /* 2 */
  pthread_join(th, NULL);
  CHECK(same(cur(0), g_y));
  CHECK_EQ_INT(g_thread_failures, 0);
  pthread_barrier_destroy(&g_bar);
  CHECK_OK(tcuda_set_stream(def(0)));
}

static void guards_nest_and_restore(void) {
  CHECK_OK(tcuda_set_device(0));
  tcuda_stream_t orig = pool(0), s1 = pool(0), s2 = pool(0);
  CHECK_OK(tcuda_set_stream(orig));
  tcuda_stream_guard_t g1, g2, g3;
  CHECK_OK(tcuda_stream_guard_begin(&g1, s1));
  CHECK(same(cur(-1), s1));
  CHECK_OK(tcuda_stream_guard_begin(&g2, s2));
  CHECK(same(cur(-1), s2));
  CHECK_OK(tcuda_stream_guard_begin(&g3, def(0)));
  CHECK(same(cur(-1), def(0)));
  CHECK_OK(tcuda_stream_guard_end(&g3));
  CHECK(same(cur(-1), s2));
  /* a set_stream inside a guard is undone by its end */
  CHECK_OK(tcuda_set_stream(pool(0)));
  CHECK_OK(tcuda_stream_guard_end(&g2));
  CHECK(same(cur(-1), s1));
  CHECK_OK(tcuda_stream_guard_end(&g1));
  CHECK(same(cur(-1), orig));
  CHECK_OK(tcuda_stream_guard_end(&g1)); /* second end: no-op */
  CHECK(same(cur(-1), orig));
  CHECK_EQ_INT(cur_dev(), 0);
  CHECK_OK(tcuda_set_stream(def(0)));
}

static void two_devices(void) {
  int n = tcuda_device_count();
  if (n < 2) { TC_SKIP_PART("cross-device cases need 2 GPUs"); return; }
  CHECK_OK(tcuda_set_device(0));
  tcuda_stream_t a0 = pool(0), c1 = pool(1), s1 = pool(1);
  /* set_stream makes the stream's device current, as torch.cuda.set_stream */
  CHECK_OK(tcuda_set_stream(c1));
  CHECK_EQ_INT(cur_dev(), 1);
  CHECK(same(cur(1), c1));
  CHECK(same(cur(0), def(0))); /* device 0's entry untouched */
  CHECK_OK(tcuda_set_stream(a0));
  CHECK_EQ_INT(cur_dev(), 0);
  CHECK(same(cur(1), c1));

  /* guard onto device 1 from device 0 saves and restores both devices */
  tcuda_stream_guard_t g;
  CHECK_OK(tcuda_stream_guard_begin(&g, s1));
  CHECK_EQ_INT(cur_dev(), 1);
  CHECK(same(cur(-1), s1));
  CHECK(same(cur(0), a0));
  CHECK_OK(tcuda_set_device(0)); /* user moves inside the guard */
  CHECK_OK(tcuda_stream_guard_end(&g));
  CHECK_EQ_INT(cur_dev(), 0);
  CHECK(same(cur(0), a0));
  CHECK(same(cur(1), c1));

  /* work under the guard goes to s1 on device 1 */
  CHECK_OK(tcuda_stream_guard_begin(&g, s1));
  tcuda_stream_t s = cur(-1);
  CHECK_EQ_INT(s.device, 1);
  CHECK_OK(tcuda_stream_synchronize(s));
  CHECK_OK(tcuda_stream_guard_end(&g));
  CHECK_OK(tcuda_set_stream(def(1)));
  CHECK_OK(tcuda_set_stream(def(0)));
}

/* The hot paths skip the init check, but a child forked after init must
 * still get the FORKED error rather than a stream it cannot use. */
static void forked_child_gets_forked_error(void) {
  tcuda_stream_t s;
  CHECK_OK(tcuda_current_stream(0, &s)); /* hot path enabled in the parent */
  CHECK_OK(tcuda_stream_from_pool(0, 0, &s));
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 0;
    if (tcuda_current_stream(0, &s) != TCUDA_ERROR_FORKED) rc |= 1;
    if (!strstr(tcuda_last_error(), "tcuda_current_stream: cannot re-initialise CUDA in a forked child")) rc |= 2;
    if (tcuda_stream_from_pool(0, 0, &s) != TCUDA_ERROR_FORKED) rc |= 4;
    _exit(rc);
  }
  int status = -1;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK_EQ_INT(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(starts_at_default), T(set_stream_sets_current), T(current_stream_is_per_thread),
                                  T(guards_nest_and_restore), T(two_devices),
                                  T(forked_child_gets_forked_error)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
