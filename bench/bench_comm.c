/* torch.cuda.comm side by side: tcuda's collectives against a raw peer copy
 * (cudaMemcpyPeerAsync) in one run, on 2 GPUs; bench/comm_torch.py prints
 * the torch.cuda.comm numbers under the same metric names. 256 MiB float32
 * unless named otherwise; GB/s = the metric's bytes / wall time to
 * completion on both devices (median of 10 after 3 warm-ups). Each tcuda
 * metric is also printed for TCUDA_COMM_ENGINE=nccl (suffix _nccl_engine).
 * Prints RESULT lines (format: bench/run-gpu). */
#include "comm/comm.h"
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MiB (1024.0 * 1024.0)
enum { WARM = 3, ITERS = 10 };
static const size_t BIG = (size_t)256 << 20;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}
static void sync2(void) { tcuda_synchronize(0); tcuda_synchronize(1); }
static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static void die(const char *what, tcuda_status s) {
  fprintf(stderr, "bench_comm: %s: %s (%s)\n", what, tcuda_status_name(s), tcuda_last_error());
  exit(1);
}
static void *dmalloc(int dev, size_t bytes) {
  tcuda_device_guard_t g;
  void *p = NULL;
  tcuda_device_guard_begin(&g, dev);
  if (cudaMalloc(&p, bytes) != cudaSuccess) { fprintf(stderr, "cudaMalloc failed\n"); exit(1); }
  cudaMemset(p, 1, bytes);
  tcuda_device_guard_end(&g);
  return p;
}
typedef struct { DLTensor t; int64_t shape[1]; } ten;
static void mk(ten *x, void *p, int dev, int64_t n) {
  memset(x, 0, sizeof *x);
  x->t.data = p;
  x->t.device.device_type = (int)TC_DL_CUDA;
  x->t.device.device_id = dev;
  x->t.ndim = 1;
  x->t.dtype = (DLDataType){TC_DL_FLOAT, 32, 1};
  x->shape[0] = n;
  x->t.shape = x->shape;
}
static void drop(DLManagedTensor *m) { if (m) m->deleter(m); }

typedef void (*op_fn)(void *ctx);
/* median seconds of fn over ITERS, each synchronised on both GPUs */
static double timeit(op_fn fn, void *ctx) {
  double t[ITERS];
  for (int i = 0; i < WARM; i++) { fn(ctx); sync2(); }
  for (int i = 0; i < ITERS; i++) {
    double t0 = now();
    fn(ctx);
    sync2();
    t[i] = now() - t0;
  }
  qsort(t, ITERS, sizeof *t, cmp);
  return t[ITERS / 2];
}

typedef struct {
  ten a, b, half0, half1;
  void *pa, *pb;
  const DLTensor *many[1000];
  ten small[1000];
} ctx_t;

static void op_broadcast(void *c) {
  ctx_t *x = c;
  DLManagedTensor *o[2];
  tcuda_status s = tcuda_comm_broadcast((const tcuda_dltensor_t *)&x->a.t, (int[]){0, 1}, 2, o);
  if (s) die("broadcast", s);
  drop(o[0]); drop(o[1]);
}
static void op_reduce(void *c) {
  ctx_t *x = c;
  const DLTensor *in[2] = {&x->a.t, &x->b.t};
  DLManagedTensor *o;
  tcuda_status s = tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)in, 2, 0, &o);
  if (s) die("reduce_add", s);
  drop(o);
}
static void op_scatter(void *c) {
  ctx_t *x = c;
  DLManagedTensor *o[2];
  size_t n;
  tcuda_status s = tcuda_comm_scatter((const tcuda_dltensor_t *)&x->a.t, (int[]){0, 1}, 2, NULL, 0, 0, NULL, o, &n);
  if (s) die("scatter", s);
  drop(o[0]); drop(o[1]);
}
static void op_gather(void *c) {
  ctx_t *x = c;
  const DLTensor *in[2] = {&x->half0.t, &x->half1.t};
  DLManagedTensor *o;
  tcuda_status s = tcuda_comm_gather((const tcuda_dltensor_t *const *)in, 2, 0, 0, &o);
  if (s) die("gather", s);
  drop(o);
}
static void op_gather_host(void *c) {
  ctx_t *x = c;
  const DLTensor *in[2] = {&x->half0.t, &x->half1.t};
  DLManagedTensor *o;
  tcuda_status s = tcuda_comm_gather((const tcuda_dltensor_t *const *)in, 2, 0, TCUDA_COMM_HOST, &o);
  if (s) die("gather to host", s);
  drop(o);
}
static void op_coalesced(void *c) {
  ctx_t *x = c;
  static DLManagedTensor *o[2000];
  tcuda_status s = tcuda_comm_broadcast_coalesced((const tcuda_dltensor_t *const *)x->many, 1000, (int[]){0, 1}, 2,
                                                  TCUDA_COMM_BUFFER_SIZE_DEFAULT, o);
  if (s) die("broadcast_coalesced", s);
  for (int i = 0; i < 2000; i++) drop(o[i]);
}

/* references */
static void *g_peer_dst;
static void ref_peer_full(void *c) { ctx_t *x = c; cudaMemcpyPeerAsync(g_peer_dst, 1, x->pa, 0, BIG, 0); }
static void ref_peer_half(void *c) { ctx_t *x = c; cudaMemcpyPeerAsync(g_peer_dst, 1, x->pa, 0, BIG / 2, 0); }
static void ref_peer_many(void *c) {
  ctx_t *x = c;
  for (int i = 0; i < 1000; i++)
    cudaMemcpyPeerAsync((char *)g_peer_dst + (size_t)i * 65536, 1, x->small[i].t.data, 0, 65536, 0);
}
static void *g_pinned;
static void ref_d2h(void *c) { ctx_t *x = c; cudaMemcpyAsync(g_pinned, x->pa, BIG, cudaMemcpyDeviceToHost, 0); }

static void result(const char *metric, double tc_gbs, const char *ref_name, double ref_gbs, const char *target) {
  printf("RESULT name=comm metric=%s tcuda=%.1f ref_name=%s ref=%.1f unit=GB/s target=%s\n", metric, tc_gbs, ref_name,
         ref_gbs, target);
}

int main(void) {
  if (tcuda_device_count() < 2) {
    fprintf(stderr, "bench_comm: needs 2 GPUs, found %d; nothing measured\n", tcuda_device_count());
    return 0;
  }
  ctx_t *x = calloc(1, sizeof *x);
  int64_t n = (int64_t)(BIG / 4);
  x->pa = dmalloc(0, BIG);
  x->pb = dmalloc(1, BIG);
  mk(&x->a, x->pa, 0, n);
  mk(&x->b, x->pb, 1, n);
  mk(&x->half0, x->pa, 0, n / 2);
  mk(&x->half1, x->pb, 1, n / 2);
  char *smallbuf = dmalloc(0, (size_t)1000 * 65536);
  for (int i = 0; i < 1000; i++) {
    mk(&x->small[i], smallbuf + (size_t)i * 65536, 0, 16384);
    x->many[i] = &x->small[i].t;
  }
  g_peer_dst = dmalloc(1, BIG);
  cudaMallocHost(&g_pinned, BIG);
  {
    tcuda_device_guard_t g;
    tcuda_device_guard_begin(&g, 0);
    cudaDeviceEnablePeerAccess(1, 0);
    cudaGetLastError();
    tcuda_device_guard_end(&g);
  }
  double big = BIG / 1e9, many = 1000.0 * 65536 / 1e9;
  double peer = big / timeit(ref_peer_full, x), peer_half = big / timeit(ref_peer_half, x);
  double peer_many = many / timeit(ref_peer_many, x), d2h = big / timeit(ref_d2h, x);
  for (int eng = 0; eng < 2; eng++) {
    if (eng) setenv("TCUDA_COMM_ENGINE", "nccl", 1);
    const char *sfx = eng ? "_nccl_engine" : "";
    char m[96];
    snprintf(m, sizeof m, "broadcast_256MiB%s", sfx);
    result(m, big / timeit(op_broadcast, x), "cudaMemcpyPeerAsync", peer, eng ? "info" : ">=385GB/s(torch_349)");
    snprintf(m, sizeof m, "reduce_add_256MiB%s", sfx);
    result(m, big / timeit(op_reduce, x), "cudaMemcpyPeerAsync", peer, eng ? "info" : ">=385GB/s(torch_354)");
    snprintf(m, sizeof m, "scatter_256MiB_total%s", sfx);
    result(m, big / timeit(op_scatter, x), "cudaMemcpyPeerAsync_half", peer_half, eng ? "info" : ">=torch(752)");
    snprintf(m, sizeof m, "gather_256MiB_total%s", sfx);
    result(m, big / timeit(op_gather, x), "cudaMemcpyPeerAsync_half", peer_half, eng ? "info" : ">=torch(637)");
    snprintf(m, sizeof m, "broadcast_coalesced_1000x64KiB%s", sfx);
    result(m, many / timeit(op_coalesced, x), "cudaMemcpyPeerAsync_x1000", peer_many, eng ? "info" : ">=87GB/s(10x_torch_8.7)");
    snprintf(m, sizeof m, "gather_to_host_256MiB%s", sfx);
    result(m, big / timeit(op_gather_host, x), "cudaMemcpyAsync_D2H_pinned", d2h, eng ? "info" : ">=21GB/s(20x_torch_1.05)");
  }
  unsetenv("TCUDA_COMM_ENGINE");
  setenv("TCUDA_COMM_P2P", "ce", 1);
  result("broadcast_256MiB_copy_engines", big / timeit(op_broadcast, x), "cudaMemcpyPeerAsync", peer, "info");
  result("scatter_256MiB_total_copy_engines", big / timeit(op_scatter, x), "cudaMemcpyPeerAsync_half", peer_half, "info");
  return 0;
}
