/* Stream operations on a real GPU: query before and after work finishes,
 * synchronize, and cross-stream ordering with wait_stream / wait_event,
 * proved by a slow producer kernel and a dependent copy on another stream. */
#include "harness.h"
#include "stream_kernels.h"

#define CU(call) CHECK((call) == cudaSuccess)
#define N ((size_t)1 << 20)

static tcuda_stream_t pool(void) {
  tcuda_stream_t s = {0};
  CHECK_OK(tcuda_stream_from_pool(0, 0, &s));
  return s;
}

static void query_before_and_after(void) {
  CHECK_OK(tcuda_set_device(0));
  tcuda_stream_t s = pool();
  int done = -1;
  CHECK_OK(tcuda_stream_query(s, &done));
  CHECK_EQ_INT(done, 1); /* nothing submitted yet */
  CU(tct_spin_us(100000, s.handle));
  CHECK_OK(tcuda_stream_query(s, &done));
  CHECK_EQ_INT(done, 0);
  CHECK_EQ_INT(cudaGetLastError(), cudaSuccess); /* NotReady left no error behind */
  CHECK_OK(tcuda_stream_synchronize(s));
  CHECK_OK(tcuda_stream_query(s, &done));
  CHECK_EQ_INT(done, 1);

  /* the default stream too */
  tcuda_stream_t d;
  CHECK_OK(tcuda_default_stream(0, &d));
  CU(tct_spin_us(100000, NULL));
  CHECK_OK(tcuda_stream_query(d, &done));
  CHECK_EQ_INT(done, 0);
  CHECK_OK(tcuda_stream_synchronize(d));
  CHECK_OK(tcuda_stream_query(d, &done));
  CHECK_EQ_INT(done, 1);
}

typedef enum { NO_WAIT, WAIT_STREAM, WAIT_STREAM_REUSE, WAIT_EVENT, RECORD_AND_WAIT } how_t;

/* Producer A: 100 ms spin, then fill buf. Consumer B: copy buf -> dst.
 * Returns the number of wrong words in dst. */
static unsigned run_pair(how_t how, unsigned seed) {
  tcuda_stream_t a = pool(), b = pool();
  CHECK(a.handle != b.handle);
  unsigned *buf = NULL, *dst = NULL, *bad = NULL, hbad = ~0u;
  CU(cudaMalloc((void **)&buf, N * sizeof *buf));
  CU(cudaMalloc((void **)&dst, N * sizeof *dst));
  CU(cudaMalloc((void **)&bad, sizeof *bad));
  CU(cudaMemset(buf, 0, N * sizeof *buf));
  CU(cudaMemset(dst, 0, N * sizeof *dst));
  CU(cudaMemset(bad, 0, sizeof *bad));
  CU(cudaDeviceSynchronize());

  CU(tct_spin_us(100000, a.handle));
  CU(tct_fill(buf, N, seed, a.handle));
  tcuda_event_t *ev = NULL;
  if (how == WAIT_STREAM || how == WAIT_STREAM_REUSE) CHECK_OK(tcuda_stream_wait_stream(b, a));
  if (how == WAIT_STREAM_REUSE) /* wait_stream's pooled event, re-recorded on idle streams */
    for (int i = 0; i < 3; i++) CHECK_OK(tcuda_stream_wait_stream(pool(), pool()));
  if (how == WAIT_EVENT) {
    CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &ev));
    CHECK_OK(tcuda_event_record(ev, &a));
    CHECK_OK(tcuda_stream_wait_event(b, ev));
  }
  if (how == RECORD_AND_WAIT) {
    CHECK_OK(tcuda_stream_record_event(a, NULL, &ev));
    CHECK(ev != NULL && tcuda_event_handle(ev) != NULL);
    CHECK_EQ_INT(tcuda_event_flags(ev), TCUDA_EVENT_DEFAULT);
    CHECK_OK(tcuda_event_wait(ev, &b));
  }
  CU(cudaMemcpyAsync(dst, buf, N * sizeof *buf, cudaMemcpyDeviceToDevice, b.handle));
  int done = -1;
  CHECK_OK(tcuda_stream_query(b, &done));
  if (how != NO_WAIT) CHECK_EQ_INT(done, 0); /* B is held back by A's spin */
  CU(tct_check(dst, N, seed, bad, b.handle));
  CHECK_OK(tcuda_stream_synchronize(b));
  CU(cudaMemcpy(&hbad, bad, sizeof hbad, cudaMemcpyDeviceToHost));
  CHECK_OK(tcuda_stream_synchronize(a));
  tcuda_event_destroy(ev);
  CU(cudaFree(buf));
  CU(cudaFree(dst));
  CU(cudaFree(bad));
  return hbad;
}

static void wait_stream_orders_work(void) {
  CHECK_EQ_INT(run_pair(WAIT_STREAM, 0x1234u), 0);
  CHECK_EQ_INT(run_pair(WAIT_STREAM_REUSE, 0x4321u), 0); /* a later record leaves the wait alone */
  /* Control: without the wait, B copies before A has written (the test
   * above could not fail otherwise). */
  CHECK(run_pair(NO_WAIT, 0x1234u) > 0);
}

static void wait_event_orders_work(void) {
  CHECK_EQ_INT(run_pair(WAIT_EVENT, 0xbeefu), 0);
  CHECK_EQ_INT(run_pair(RECORD_AND_WAIT, 0xcafeu), 0);
}

static void record_event_variants(void) {
  tcuda_stream_t s = pool();
  tcuda_event_t *mine, *out = NULL;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_TIMING, &mine));
  CHECK_OK(tcuda_stream_record_event(s, mine, &out));
  CHECK(out == mine);
  CHECK_OK(tcuda_stream_record_event(s, mine, NULL));
  CHECK_EQ_INT(tcuda_event_device(mine), 0);
  int done = -1;
  CHECK_OK(tcuda_stream_synchronize(s));
  CHECK_OK(tcuda_event_query(mine, &done));
  CHECK_EQ_INT(done, 1);
  tcuda_event_destroy(mine);
}

static void wait_stream_across_devices(void) {
  int n = tcuda_device_count();
  if (n < 2) { TC_SKIP_PART("cross-device wait needs 2 GPUs"); return; }
  tcuda_stream_t a, b;
  CHECK_OK(tcuda_stream_from_pool(1, 0, &a));
  CHECK_OK(tcuda_stream_from_pool(0, 0, &b));
  CHECK_OK(tcuda_set_device(1));
  CU(tct_spin_us(100000, a.handle));
  CHECK_OK(tcuda_set_device(0));
  CHECK_OK(tcuda_stream_wait_stream(b, a));
  int d = -1, done = -1;
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, 0); /* the device switches inside were undone */
  CU(tct_spin_us(1, b.handle));
  CHECK_OK(tcuda_stream_query(b, &done));
  CHECK_EQ_INT(done, 0);
  CHECK_OK(tcuda_stream_synchronize(b));
  CHECK_OK(tcuda_stream_query(a, &done));
  CHECK_EQ_INT(done, 1); /* b finished, so a had */
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(query_before_and_after), T(wait_stream_orders_work), T(wait_event_orders_work),
                                  T(record_event_variants), T(wait_stream_across_devices)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
