/* bench_history: the cost of allocation history on the cached 4 KiB
 * tcuda_malloc/tcuda_free pair: off (the hot path's one untaken branch),
 * on, and on with C stacks. The same three on the simulated engine
 * (tc_alloc on backend_sim, no GPU) come first, so the figures exist on any
 * machine. RESULT lines: see bench/run-gpu. BENCH_HISTORY_ITERS overrides
 * the iteration count. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tcuda.h"
#include "alloc/alloc.h"
#include "inspect/history.h"

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static long g_iters = 1000000;

/* best of 5 runs, ns per pair */
static double time_engine(tc_alloc *a) {
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    uint64_t p;
    double t0 = now_ns();
    for (long i = 0; i < g_iters; i++) {
      tc_alloc_malloc(a, 4096, 0, &p);
      tc_alloc_free(a, p);
    }
    double t = (now_ns() - t0) / g_iters;
    if (t < best) best = t;
  }
  return best;
}

static double time_public(void) {
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    void *p;
    double t0 = now_ns();
    for (long i = 0; i < g_iters; i++) {
      tcuda_malloc(&p, 4096);
      tcuda_free(p);
    }
    double t = (now_ns() - t0) / g_iters;
    if (t < best) best = t;
  }
  return best;
}

static void result(const char *metric, double v, double ref) {
  printf("RESULT name=history metric=%s tcuda=%.1f ref_name=history_off ref=%.1f unit=ns target=%s\n", metric, v, ref,
         !strcmp(metric, "off") || !strcmp(metric, "sim_off") ? "same_as_ref" : "report_only");
}

int main(void) {
  const char *it = getenv("BENCH_HISTORY_ITERS");
  if (it && atol(it) > 0) g_iters = atol(it);
  /* engine on the simulated device: ring of 1M entries so it wraps */
  tc_sim_options so = {0};
  so.capacity = 1ull << 34;
  tc_backend *be = NULL;
  tc_alloc *a = NULL;
  if (tc_backend_sim_create(&so, &be) || tc_alloc_create(0, be, NULL, so.capacity, &a)) {
    fprintf(stderr, "bench_history: %s\n", tcuda_last_error());
    return 1;
  }
  double off0 = time_engine(a);
  double off = time_engine(a);
  if (off0 < off) off = off0;
  tc_history *h = NULL;
  tc_history_create(1 << 20, 0, &h);
  tc_alloc_set_trace(a, tc_history_trace, h);
  double on = time_engine(a);
  tc_history_configure(h, 1 << 20, 1);
  long full = g_iters;
  g_iters = full / 100 > 1000 ? full / 100 : 1000; /* a backtrace costs microseconds */
  double stk = time_engine(a);
  g_iters = full;
  tc_alloc_set_trace(a, NULL, NULL);
  double off2 = time_engine(a);
  tc_history_destroy(h);
  tc_alloc_destroy(a);
  tc_backend_sim_destroy(be);
  result("sim_off", off2, off);
  result("sim_on", on, off);
  result("sim_on_stacks", stk, off);

  if (!tcuda_is_available()) {
    printf("SKIPPED: no GPU for the tcuda_malloc figures (%s)\n", tcuda_unavailable_reason());
    return 0;
  }
  void *w;
  tcuda_malloc(&w, 4096); /* create the allocator and cache the block */
  tcuda_free(w);
  double g_off = time_public();
  tcuda_memory_record_history(-1, 1, 1 << 20, 0);
  double g_on = time_public();
  tcuda_memory_record_history(-1, 1, 1 << 20, 1);
  g_iters = full / 100 > 1000 ? full / 100 : 1000;
  double g_stk = time_public();
  g_iters = full;
  tcuda_memory_record_history(-1, 0, 0, 0);
  double g_off2 = time_public();
  result("off", g_off2, g_off);
  result("on", g_on, g_off);
  result("on_stacks", g_stk, g_off);
  return 0;
}
