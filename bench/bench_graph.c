/* bench_graph: replaying a captured graph of 100 tiny kernels.
 *
 *   replay_launch_us  host cost of one tcuda_graph_replay vs cudaGraphLaunch of
 *                     the same cudaGraphExec_t   target: overhead <= 0.5 us
 *   replay_us         wall time per replay, GPU included (launches queued
 *                     back to back, then one synchronize)
 *   eager_us          the same 100 kernels launched one by one (informational)
 * The kernel is tcuda's own 1-thread kernel (two 8-byte stores), so each node
 * costs about what torch's add_ on a small tensor does. tcuda and raw CUDA
 * alternate in rounds; each side keeps its median round. The torch column
 * comes from graph_torch.py (torch.cuda.CUDAGraph.replay of 100 add_).
 * BENCH_GRAPH_ROUNDS sets the round count. Prints RESULT lines (bench/run-gpu). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "tcuda.h"
#include "rng/capture_kernels.h"

#define NODES 100
#define PER_ROUND 100

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void die(const char *what, const char *why) {
  fprintf(stderr, "bench_graph: %s: %s\n", what, why);
  exit(1);
}
#define TRY(call) do { if ((call) != TCUDA_SUCCESS) die(#call, tcuda_last_error()); } while (0)
#define CUTRY(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_)); } while (0)

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static uint64_t *g_buf;
static void queue_kernels(cudaStream_t st) {
  for (int i = 0; i < NODES; i++) CUTRY(tc_rng_set_philox_words(g_buf + 2 * i, g_buf + 2 * i + 1, i, i, st));
}

int main(void) {
  if (!tcuda_is_available()) {
    printf("SKIPPED bench_graph: no GPU (%s)\n", tcuda_unavailable_reason());
    return 0;
  }
  int rounds = 21;
  const char *r = getenv("BENCH_GRAPH_ROUNDS");
  if (r && atoi(r) > 0) rounds = atoi(r);
  tcuda_stream_t s;
  TRY(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s));
  tcuda_stream_guard_t gd;
  TRY(tcuda_stream_guard_begin(&gd, s));
  TRY(tcuda_malloc((void **)&g_buf, 2 * NODES * sizeof *g_buf));
  queue_kernels(s.handle); /* load the module before capture */
  CUTRY(cudaStreamSynchronize(s.handle));

  tcuda_graph_t *g;
  TRY(tcuda_graph_create(&g));
  TRY(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  queue_kernels(s.handle);
  TRY(tcuda_graph_capture_end(g));
  size_t nodes = 0;
  TRY(tcuda_graph_num_nodes(g, &nodes));
  if (nodes != NODES) die("capture", "wrong node count");
  cudaGraphExec_t exec = (cudaGraphExec_t)tcuda_graph_exec_handle(g);
  for (int i = 0; i < 50; i++) {
    TRY(tcuda_graph_replay(g, NULL));
    CUTRY(cudaGraphLaunch(exec, s.handle));
  }
  CUTRY(cudaStreamSynchronize(s.handle));

  double *lt = calloc(rounds, sizeof *lt), *lr = calloc(rounds, sizeof *lr);
  double *wt = calloc(rounds, sizeof *wt), *wr = calloc(rounds, sizeof *wr), *ee = calloc(rounds, sizeof *ee);
  for (int k = 0; k < rounds; k++) {
    for (int side = 0; side < 2; side++) {
      int tc = (k + side) % 2 == 0; /* alternate which goes first */
      double t0 = now_us();
      if (tc)
        for (int i = 0; i < PER_ROUND; i++) TRY(tcuda_graph_replay(g, NULL));
      else
        for (int i = 0; i < PER_ROUND; i++) CUTRY(cudaGraphLaunch(exec, s.handle));
      double t1 = now_us();
      CUTRY(cudaStreamSynchronize(s.handle));
      double t2 = now_us();
      (tc ? lt : lr)[k] = (t1 - t0) / PER_ROUND;
      (tc ? wt : wr)[k] = (t2 - t0) / PER_ROUND;
    }
    double t0 = now_us();
    for (int i = 0; i < 10; i++) queue_kernels(s.handle);
    CUTRY(cudaStreamSynchronize(s.handle));
    ee[k] = (now_us() - t0) / 10;
  }
  double mlt = median(lt, rounds), mlr = median(lr, rounds);
  printf("RESULT name=graph metric=replay_launch_us tcuda=%.3f ref_name=cudaGraphLaunch ref=%.3f unit=us "
         "target=<=ref+0.5\n", mlt, mlr);
  printf("RESULT name=graph metric=replay_us tcuda=%.2f ref_name=cudaGraphLaunch ref=%.2f unit=us "
         "target=<=ref+0.5\n", median(wt, rounds), median(wr, rounds));
  printf("RESULT name=graph metric=eager_us tcuda=%.2f ref_name=- ref=NA unit=us target=%d kernels launched one by "
         "one (info)\n", median(ee, rounds), NODES);
  printf("# replay overhead over cudaGraphLaunch: %.3f us per replay (%d rounds of %d)\n", mlt - mlr, rounds,
         PER_ROUND);
  TRY(tcuda_graph_destroy(g));
  TRY(tcuda_free(g_buf));
  TRY(tcuda_stream_guard_end(&gd));
  TRY(tcuda_stream_destroy(s));
  free(lt), free(lr), free(wt), free(wr), free(ee);
  return 0;
}
