/* bench_streams: the stream layer's hot paths on the GPU.
 *
 *   pool_get        tcuda_stream_from_pool(0, 0)          target <= 20 ns
 *   current_stream  tcuda_current_stream(0)               target <= 5 ns
 *   event_record    tcuda_event_record vs cudaEventRecord  target <= 1.10x raw
 *   event_query     tcuda_event_query vs cudaEventQuery    target <= 1.10x raw
 * plus informational lines (device -1 variants, the internal fast path,
 * stream query).
 *
 * The torch column is PyTorch's own C++ making the same calls
 * (c10::cuda::getStreamFromPool, getCurrentCUDAStream, CUDAEvent::record and
 * query, CUDAStream::query) through bench/c10_stream_shim.cpp, built when
 * torch is found at configure time (BENCH_HAVE_C10). The shim runs each loop
 * itself, so the torch column pays no C-to-C++ call per iteration, as the
 * other columns pay none. tcuda, raw CUDA and c10 alternate in rounds and
 * each keeps its best round, so drift and warm-up hit all alike.
 * streams_torch.py adds what the same calls cost from Python (torch.cuda),
 * as separate informational rows (metric suffix _from_python).
 * BENCH_STREAMS_ITERS scales the loop counts. Prints RESULT lines (format:
 * bench/run-gpu). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "tcuda.h"
#include "stream/stream.h"
#ifdef BENCH_HAVE_C10
#include "c10_stream_shim.h"
#endif

#define ROUNDS 7
#define NO_VALUE (-1.0) /* a column not measured */

static volatile int64_t g_sink;

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int die(const char *what) {
  fprintf(stderr, "bench_streams: %s: %s\n", what, tcuda_last_error());
  exit(1);
}

typedef double (*bench_fn)(long iters); /* returns ns per op */

static long g_scale = 1;
static tcuda_stream_t g_s;
static tcuda_event_t *g_ev;
static cudaEvent_t g_raw;

static double b_pool(long n) {
  tcuda_stream_t s;
  int64_t acc = 0;
  double t = now_ns();
  for (long i = 0; i < n; i++) {
    tcuda_stream_from_pool(0, 0, &s);
    acc += s.id;
  }
  t = now_ns() - t;
  g_sink = acc;
  return t / n;
}

static double b_pool_cur(long n) {
  tcuda_stream_t s;
  int64_t acc = 0;
  double t = now_ns();
  for (long i = 0; i < n; i++) {
    tcuda_stream_from_pool(-1, 0, &s);
    acc += s.id;
  }
  t = now_ns() - t;
  g_sink = acc;
  return t / n;
}

static double b_current(long n) {
  tcuda_stream_t s;
  int64_t acc = 0;
  double t = now_ns();
  for (long i = 0; i < n; i++) {
    tcuda_current_stream(0, &s);
    acc += (intptr_t)s.handle;
  }
  t = now_ns() - t;
  g_sink = acc;
  return t / n;
}

static double b_current_cur(long n) {
  tcuda_stream_t s;
  int64_t acc = 0;
  double t = now_ns();
  for (long i = 0; i < n; i++) {
    tcuda_current_stream(-1, &s);
    acc += (intptr_t)s.handle;
  }
  t = now_ns() - t;
  g_sink = acc;
  return t / n;
}

static double b_current_fast(long n) {
  int64_t acc = 0;
  double t = now_ns();
  for (long i = 0; i < n; i++) acc += (intptr_t)tc_current_stream_fast(0).handle;
  t = now_ns() - t;
  g_sink = acc;
  return t / n;
}

static double b_record(long n) {
  double t = now_ns();
  for (long i = 0; i < n; i++) tcuda_event_record(g_ev, &g_s);
  t = now_ns() - t;
  cudaStreamSynchronize(g_s.handle);
  return t / n;
}

static double b_record_raw(long n) {
  double t = now_ns();
  for (long i = 0; i < n; i++) cudaEventRecord(g_raw, g_s.handle);
  t = now_ns() - t;
  cudaStreamSynchronize(g_s.handle);
  return t / n;
}

static double b_query(long n) {
  int done, acc = 0;
  double t = now_ns();
  for (long i = 0; i < n; i++) {
    tcuda_event_query(g_ev, &done);
    acc += done;
  }
  t = now_ns() - t;
  g_sink = acc;
  return t / n;
}

static double b_query_raw(long n) {
  int acc = 0;
  double t = now_ns();
  for (long i = 0; i < n; i++) acc += cudaEventQuery(g_raw) == cudaSuccess;
  t = now_ns() - t;
  g_sink = acc;
  return t / n;
}

static double b_squery(long n) {
  int done, acc = 0;
  double t = now_ns();
  for (long i = 0; i < n; i++) {
    tcuda_stream_query(g_s, &done);
    acc += done;
  }
  t = now_ns() - t;
  g_sink = acc;
  return t / n;
}

static double b_squery_raw(long n) {
  int acc = 0;
  double t = now_ns();
  for (long i = 0; i < n; i++) acc += cudaStreamQuery(g_s.handle) == cudaSuccess;
  t = now_ns() - t;
  g_sink = acc;
  return t / n;
}

/* ---- the torch column: PyTorch's C++ through the shim ---- */
#ifdef BENCH_HAVE_C10
static int g_c10; /* 1 while the shim works */
static double c_pool(long n) { return c10s_pool_get(0, n); }
static double c_pool_cur(long n) { return c10s_pool_get(-1, n); }
static double c_current(long n) { return c10s_current_stream(0, n); }
static double c_current_cur(long n) { return c10s_current_stream(-1, n); }
static double c_record(long n) { return c10s_event_record(n); }
static double c_query(long n) { return c10s_event_query(n); }
static double c_squery(long n) { return c10s_stream_query(n); }
#define C10(fn) (g_c10 ? (fn) : NULL)
#else
#define C10(fn) NULL
#endif

/* The shim returns a negative time for a C++ exception: report it once and
 * drop the column for the rest of the run. */
static double c10_checked(double v) {
#ifdef BENCH_HAVE_C10
  if (v < 0) {
    printf("bench_streams: torch C++ column dropped: %s\n", c10s_last_error());
    g_c10 = 0;
    return NO_VALUE;
  }
#endif
  return v;
}

/* Best-of-rounds for up to three functions (tcuda, raw CUDA, c10; NULL for
 * one not measured, whose best stays NO_VALUE), alternating within each
 * round. Round -1 warms up on a tenth of the iterations and is not kept. */
static void measure(long iters, bench_fn tc, bench_fn raw, bench_fn c10, double best[3]) {
  bench_fn fn[3] = {tc, raw, c10};
  iters *= g_scale;
  for (int k = 0; k < 3; k++) best[k] = NO_VALUE;
  for (int r = -1; r < ROUNDS; r++)
    for (int k = 0; k < 3; k++) {
      if (!fn[k]) continue;
      double x = fn[k](r < 0 ? iters / 10 + 1 : iters);
      if (k == 2 && c10_checked(x) < 0) {
        fn[k] = NULL;
        best[k] = NO_VALUE;
      } else if (r >= 0 && (best[k] < 0 || x < best[k])) {
        best[k] = x;
      }
    }
}

static void cell(double v) {
  if (v < 0)
    printf(" %12s", "-");
  else
    printf(" %12.2f", v);
}

static void row(const char *label, const double v[3]) {
  printf("%-36s", label);
  for (int k = 0; k < 3; k++) cell(v[k]);
  printf("\n");
}

/* One RESULT line per reference measured (raw CUDA, then c10, which fills
 * the torch column), a line with ref=NA when none was. The target rides on
 * the first line, so a relative target is judged against raw CUDA. */
static void result(const char *metric, const double v[3], const char *raw_name, const char *target) {
  int printed = 0;
  if (v[1] >= 0) {
    printf("RESULT name=streams metric=%s tcuda=%.2f ref_name=%s ref=%.2f unit=ns target=%s\n", metric, v[0], raw_name,
           v[1], target);
    printed = 1;
  }
  if (v[2] >= 0) {
    printf("RESULT name=streams metric=%s tcuda=%.2f ref_name=c10 ref=%.2f unit=ns", metric, v[0], v[2]);
    if (printed)
      printf("\n");
    else
      printf(" target=%s\n", target);
    printed = 1;
  }
  if (!printed)
    printf("RESULT name=streams metric=%s tcuda=%.2f ref_name=- ref=NA unit=ns target=%s\n", metric, v[0], target);
  fflush(stdout);
}

int main(void) {
  if (!tcuda_is_available()) {
    printf("SKIPPED bench_streams: no GPU (%s)\n", tcuda_unavailable_reason());
    return 0;
  }
  const char *sc = getenv("BENCH_STREAMS_ITERS");
  if (sc && atol(sc) > 0) g_scale = atol(sc);
  if (tcuda_set_device(0)) die("tcuda_set_device");
  if (tcuda_stream_from_pool(0, 0, &g_s)) die("tcuda_stream_from_pool");
  if (tcuda_event_create(TCUDA_EVENT_DEFAULT, &g_ev)) die("tcuda_event_create");
  if (tcuda_event_record(g_ev, &g_s)) die("tcuda_event_record");
  if (cudaEventCreateWithFlags(&g_raw, cudaEventDisableTiming) != cudaSuccess) die("cudaEventCreateWithFlags");
  if (tcuda_stream_synchronize(g_s)) die("tcuda_stream_synchronize");

#ifdef BENCH_HAVE_C10
  if (c10s_init(0) == 0)
    g_c10 = 1;
  else
    printf("bench_streams: torch C++ column unavailable: %s\n", c10s_last_error());
#else
  printf("bench_streams: torch C++ column unavailable: not built with PyTorch's c10 (torch not found at configure "
         "time)\n");
#endif

  double v[3];
  printf("%-36s %12s %12s %12s\n", "operation (ns per call)", "tcuda", "raw CUDA", "torch C++");
  measure(2000000, b_pool, NULL, C10(c_pool), v);
  row("stream_from_pool(0, 0)", v);
  result("pool_get", v, NULL, "<=20");
  measure(2000000, b_pool_cur, NULL, C10(c_pool_cur), v);
  row("stream_from_pool(-1, 0)", v);
  result("pool_get_current_device", v, NULL, "informational");

  measure(5000000, b_current, NULL, C10(c_current), v);
  row("current_stream(0)", v);
  result("current_stream", v, NULL, "<=5");
  measure(5000000, b_current_cur, NULL, C10(c_current_cur), v);
  row("current_stream(-1)", v);
  result("current_stream_current_device", v, NULL, "informational");
  measure(5000000, b_current_fast, NULL, NULL, v);
  row("tc_current_stream_fast(0) (internal)", v);
  result("current_stream_internal", v, NULL, "informational");

  measure(100000, b_record, b_record_raw, C10(c_record), v);
  row("event_record", v);
  result("event_record", v, "cudaEventRecord", "<=ref*1.10");

  if (tcuda_stream_synchronize(g_s)) die("tcuda_stream_synchronize");
#ifdef BENCH_HAVE_C10
  if (g_c10 && c10s_synchronize()) c10_checked(-1);
#endif
  measure(1000000, b_query, b_query_raw, C10(c_query), v);
  row("event_query (complete)", v);
  result("event_query", v, "cudaEventQuery", "<=ref*1.10");

  measure(1000000, b_squery, b_squery_raw, C10(c_squery), v);
  row("stream_query (idle)", v);
  result("stream_query", v, "cudaStreamQuery", "informational");

  tcuda_event_destroy(g_ev);
  cudaEventDestroy(g_raw);
  return 0;
}
