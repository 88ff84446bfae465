/* torch.cuda.comm side by side: tcuda's collectives against a raw peer copy
 * (cudaMemcpyPeerAsync) in one run, on 2 GPUs; bench/comm_torch.py prints
 * the torch.cuda.comm numbers under the same metric names. 256 MiB float32
 * unless named otherwise; GB/s = the metric's bytes / wall time to
 * completion on both devices (median of 10 after 3 warm-ups). Each tcuda
 * metric is also printed for the NCCL engine (tcuda_comm_set_engine,
 * suffix _nccl_engine).
 * Prints RESULT lines (format: bench/run-gpu).
 *
 * Then (unless BENCH_COMM_SWEEP=0) a sweep of the peer-copy and reduce_add
 * engines the library chose its one path from (comm_sweep.h: the settings
 * P2P, REDUCE and the launch shape): broadcast and reduce_add of 256 MiB
 * float32 under each, verified on odd and misaligned small buffers and on
 * the whole 256 MiB result, one line each:
 *   SWEEP op=<op> variant=<name> gbs=<GB/s> ok=<0|1> settings="<settings>"
 * The variant "default" is the library itself (tcuda_comm_broadcast,
 * tcuda_comm_reduce_add); the others copy into preallocated buffers. */
#include "comm/comm.h"
#include "comm_sweep.h"
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
static double timeit_n(op_fn fn, void *ctx, int iters) {
  double t[64];
  if (iters > 64) iters = 64;
  for (int i = 0; i < WARM; i++) { fn(ctx); sync2(); }
  for (int i = 0; i < iters; i++) {
    double t0 = now();
    fn(ctx);
    sync2();
    t[i] = now() - t0;
  }
  qsort(t, (size_t)iters, sizeof *t, cmp);
  return t[iters / 2];
}
static double timeit(op_fn fn, void *ctx) { return timeit_n(fn, ctx, ITERS); }

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
/* Gather to the host, like for like. tcuda_comm_gather returns a block of
 * the pinned caching allocator, the same one call after call, while
 * torch.cuda.comm.gather(..., "cpu") allocates fresh pageable memory every
 * call. So beside that row (reused pinned output) tcuda also gathers into a
 * fresh malloc'd buffer each call, shown with plain device-to-host copies of
 * the same size into pinned and into pageable memory; and both libraries
 * gather into one pinned buffer the caller reuses (out=). */
static void *g_pinned, *g_pageable; /* BIG bytes each; g_pageable touched once */
static void host_out(ten *o, void *p) {
  mk(o, p, 0, (int64_t)(BIG / 4));
  o->t.device.device_type = (int)TC_DL_CPU;
}
static void gather_out_into(ctx_t *x, void *p, const char *what) {
  const DLTensor *in[2] = {&x->half0.t, &x->half1.t};
  ten o;
  host_out(&o, p);
  tcuda_status s = tcuda_comm_gather_out((const tcuda_dltensor_t *const *)in, 2, 0, (const tcuda_dltensor_t *)&o.t);
  if (s) die(what, s);
}
static void *host_malloc(void) {
  void *p = malloc(BIG);
  if (!p) { fprintf(stderr, "bench_comm: out of host memory\n"); exit(1); }
  return p;
}
static void op_gather_host_fresh(void *c) {
  void *p = host_malloc();
  gather_out_into(c, p, "gather_out to fresh pageable memory");
  free(p); /* a gather to the host is complete on return */
}
static void op_gather_out_pinned(void *c) { gather_out_into(c, g_pinned, "gather_out to pinned memory"); }
static void ref_d2h_pageable(void *c) {
  ctx_t *x = c;
  cudaMemcpyAsync(g_pageable, x->pa, BIG, cudaMemcpyDeviceToHost, 0);
}
static void ref_d2h_pageable_fresh(void *c) {
  ctx_t *x = c;
  void *p = host_malloc();
  cudaMemcpyAsync(p, x->pa, BIG, cudaMemcpyDeviceToHost, 0);
  cudaStreamSynchronize(0); /* the copy must be done before free */
  free(p);
}
static void result(const char *metric, double tc_gbs, const char *ref_name, double ref_gbs, const char *target);
/* The rows beside gather_to_host_256MiB_reused_pinned_out; no targets. */
static void gather_host_rows(ctx_t *x, double d2h_pinned) {
  double big = BIG / 1e9;
  g_pageable = host_malloc();
  memset(g_pageable, 0, BIG);
  double pageable = big / timeit(ref_d2h_pageable, x), fresh = big / timeit(ref_d2h_pageable_fresh, x);
  const char *m = "gather_to_host_256MiB_fresh_pageable_out";
  double v = big / timeit(op_gather_host_fresh, x);
  result(m, v, "cudaMemcpyAsync_D2H_pinned", d2h_pinned, "info");
  result(m, v, "cudaMemcpyAsync_D2H_pageable", pageable, "info");
  result(m, v, "cudaMemcpyAsync_D2H_pageable_fresh", fresh, "info");
  result("gather_out_to_host_256MiB_pinned", big / timeit(op_gather_out_pinned, x), "cudaMemcpyAsync_D2H_pinned",
         d2h_pinned, "info");
  free(g_pageable);
  g_pageable = NULL;
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
static void ref_d2h(void *c) { ctx_t *x = c; cudaMemcpyAsync(g_pinned, x->pa, BIG, cudaMemcpyDeviceToHost, 0); }

/* ---------------------------------------------------------------------
 * sweep
 * --------------------------------------------------------------------- */
typedef struct {
  ctx_t big;          /* a: patterned f32 on 0, b: on 1 */
  float *ha, *hb, *hsum;
  char *sa, *sb, *so; /* small scratch: 0, 1, 1 */
  float *sr;          /* small sum results: 0 */
  void *bdst, *rdst;  /* 256 MiB variant results: 1 (broadcast), 0 (reduce_add) */
} sweep_t;

static int g_lib; /* 1: the library's path (the public API); 0: g_opts */
static sw_opts g_opts;
static tcuda_status g_err;
static char g_errmsg[256];
static void note(tcuda_status s, const char *msg) {
  if (s && !g_err) {
    g_err = s;
    snprintf(g_errmsg, sizeof g_errmsg, "%s", msg);
  }
}
static void note_lib(tcuda_status s) { note(s, s ? tcuda_last_error() : ""); }
static void note_sw(tcuda_status s) { note(s, s ? sw_error() : ""); }

static tcuda_stream_t cur(int dev) {
  tcuda_stream_t s;
  memset(&s, 0, sizeof s);
  note_lib(tcuda_current_stream(dev, &s));
  return s;
}
/* A variant copy from device 0 to 1 placed as the library places a copy
 * between GPUs: on the source's current stream, fenced both ways against
 * the destination's. */
static void variant_copy(void *dst, const void *src, size_t bytes) {
  tcuda_stream_t ss = cur(0), ds = cur(1);
  note_lib(tcuda_stream_wait_stream(ss, ds));
  if (!g_err) note_sw(sw_p2p_copy(&g_opts, dst, 1, src, 0, bytes, ss));
  note_lib(tcuda_stream_wait_stream(ds, ss));
}

static void sw_broadcast(void *c) {
  sweep_t *w = c;
  if (g_err) return;
  if (!g_lib) {
    variant_copy(w->bdst, w->big.a.t.data, BIG);
    return;
  }
  DLManagedTensor *o[2] = {0};
  note_lib(tcuda_comm_broadcast((const tcuda_dltensor_t *)&w->big.a.t, (int[]){0, 1}, 2, o));
  drop(o[0]); drop(o[1]);
}
static void sw_reduce(void *c) {
  sweep_t *w = c;
  if (g_err) return;
  if (!g_lib) {
    note_sw(sw_reduce_f32(&g_opts, w->rdst, w->big.a.t.data, 0, w->big.b.t.data, 1, BIG / 4));
    return;
  }
  const DLTensor *in[2] = {&w->big.a.t, &w->big.b.t};
  DLManagedTensor *o = NULL;
  note_lib(tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)in, 2, 0, &o));
  drop(o);
}

static void *g_check; /* pinned, BIG bytes */
/* 1 when the n bytes at device pointer p equal want */
static int same_bytes(const void *p, const void *want, size_t n) {
  sync2();
  if (cudaMemcpy(g_check, p, n, cudaMemcpyDefault) != cudaSuccess) { cudaGetLastError(); return 0; }
  return memcmp(g_check, want, n) == 0;
}

static void fill(float *h, size_t n, int m, int k) {
  for (size_t i = 0; i < n; i++) h[i] = (float)((i % (size_t)m) * (size_t)k);
}

/* broadcast of n elements of dtype d from sa+off0 (device 0); 'out' case:
 * into so+off1 on device 1 (same misalignment: the head path) */
static int check_bcast_small(sweep_t *w, DLDataType d, int64_t n, size_t off0, int use_out, size_t off1) {
  size_t es = d.bits / 8, bytes = (size_t)n * es;
  ten t, o;
  mk(&t, w->sa + off0, 0, n);
  t.t.dtype = d;
  if (cudaMemcpy(w->sa + off0, (char *)w->ha + 3, bytes, cudaMemcpyHostToDevice) != cudaSuccess) return 0;
  if (use_out || !g_lib) cudaMemset(w->so, 0, bytes + off1 + 64);
  sync2(); /* the library's pool streams do not wait for the legacy stream */
  DLManagedTensor *outs[2] = {0};
  const void *res;
  if (!g_lib) {
    res = w->so + (use_out ? off1 : 0);
    variant_copy((void *)res, w->sa + off0, bytes);
  } else if (use_out) {
    mk(&o, w->so + off1, 1, n);
    o.t.dtype = d;
    const DLTensor *ol[1] = {&o.t};
    note_lib(tcuda_comm_broadcast_out((const tcuda_dltensor_t *)&t.t, (const tcuda_dltensor_t *const *)ol, 1));
    res = w->so + off1;
  } else {
    note_lib(tcuda_comm_broadcast((const tcuda_dltensor_t *)&t.t, (int[]){0, 1}, 2, outs));
    res = outs[1] ? outs[1]->dl_tensor.data : NULL;
  }
  int ok = !g_err && res && same_bytes(res, (char *)w->ha + 3, bytes);
  if (ok && (use_out || !g_lib)) { /* nothing written past the end */
    char z[64] = {0};
    ok = same_bytes((const char *)res + bytes, z, sizeof z);
  }
  drop(outs[0]);
  drop(outs[1]);
  return ok;
}

/* reduce_add of n f32 at sa+off (device 0) and sb (device 1) into 0 */
static int check_reduce_small(sweep_t *w, int64_t n, size_t off) {
  ten a, b;
  size_t bytes = (size_t)n * 4;
  mk(&a, w->sa + off, 0, n);
  mk(&b, w->sb, 1, n);
  if (cudaMemcpy(w->sa + off, w->ha + 5, bytes, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(w->sb, w->hb + 5, bytes, cudaMemcpyHostToDevice) != cudaSuccess)
    return 0;
  cudaMemset(w->sr, 0, bytes);
  sync2();
  const void *res;
  DLManagedTensor *o = NULL;
  if (!g_lib) {
    note_sw(sw_reduce_f32(&g_opts, w->sr, (const float *)(w->sa + off), 0, (const float *)w->sb, 1, (size_t)n));
    res = w->sr;
  } else {
    const DLTensor *in[2] = {&a.t, &b.t};
    note_lib(tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)in, 2, 0, &o));
    res = o ? o->dl_tensor.data : NULL;
  }
  int ok = !g_err && res && same_bytes(res, w->hsum + 5, bytes);
  drop(o);
  return ok;
}

static int verify_broadcast(sweep_t *w) {
  const DLDataType F = {TC_DL_FLOAT, 32, 1}, U8 = {TC_DL_UINT, 8, 1};
  int ok = check_bcast_small(w, F, 262147, 0, 0, 0);      /* odd length, > the split threshold */
  ok = ok && check_bcast_small(w, U8, 1000003, 1, 0, 0);  /* misaligned source: byte path */
  ok = ok && check_bcast_small(w, F, 262147, 4, 1, 4);    /* equally misaligned ends: head path */
  ok = ok && check_bcast_small(w, U8, 777, 3, 0, 0);      /* tiny */
  if (!g_lib) {
    cudaMemset(w->bdst, 0, BIG);
    sync2();
    variant_copy(w->bdst, w->big.a.t.data, BIG);
    return ok && !g_err && same_bytes(w->bdst, w->ha, BIG);
  }
  DLManagedTensor *o[2] = {0};
  note_lib(tcuda_comm_broadcast((const tcuda_dltensor_t *)&w->big.a.t, (int[]){0, 1}, 2, o));
  ok = ok && !g_err && o[1] && same_bytes(o[1]->dl_tensor.data, w->ha, BIG);
  drop(o[0]);
  drop(o[1]);
  return ok;
}

static int verify_reduce(sweep_t *w) {
  int ok = check_reduce_small(w, 262147, 0);  /* odd length */
  ok = ok && check_reduce_small(w, 262147, 4); /* misaligned input: scalar path */
  ok = ok && check_reduce_small(w, 1001, 0);   /* tiny */
  if (!g_lib) {
    cudaMemset(w->rdst, 0, BIG);
    sync2();
    note_sw(sw_reduce_f32(&g_opts, w->rdst, w->big.a.t.data, 0, w->big.b.t.data, 1, BIG / 4));
    return ok && !g_err && same_bytes(w->rdst, w->hsum, BIG);
  }
  const DLTensor *in[2] = {&w->big.a.t, &w->big.b.t};
  DLManagedTensor *o = NULL;
  note_lib(tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)in, 2, 0, &o));
  ok = ok && !g_err && o && same_bytes(o->dl_tensor.data, w->hsum, BIG);
  drop(o);
  return ok;
}

/* settings "": the library; otherwise a variant (comm_sweep.h) */
static void sweep_one(sweep_t *w, const char *op, const char *name, const char *settings) {
  int bc = !strcmp(op, "broadcast");
  g_err = 0;
  g_errmsg[0] = 0;
  g_lib = !*settings;
  if (!g_lib && sw_parse(settings, &g_opts)) note(TCUDA_ERROR_INVALID_ARGUMENT, sw_error());
  double t = timeit_n(bc ? sw_broadcast : sw_reduce, w, 20);
  int ok = !g_err && (bc ? verify_broadcast(w) : verify_reduce(w));
  printf("SWEEP op=%s variant=%s gbs=%.1f ok=%d settings=\"%s\"%s%s%s\n", op, name, g_err ? 0.0 : BIG / 1e9 / t, ok,
         settings, g_err ? " error=\"" : "", g_err ? g_errmsg : "", g_err ? "\"" : "");
  fflush(stdout);
  cudaGetLastError();
}

static void sweep(void) {
  sweep_t *w = calloc(1, sizeof *w);
  size_t n = BIG / 4;
  w->ha = malloc(BIG);
  w->hb = malloc(BIG);
  w->hsum = malloc(BIG);
  if (!w->ha || !w->hb || !w->hsum || cudaMallocHost(&g_check, BIG) != cudaSuccess) {
    fprintf(stderr, "bench_comm: sweep: out of host memory\n");
    return;
  }
  fill(w->ha, n, 1021, 1);
  fill(w->hb, n, 1019, 2);
  for (size_t i = 0; i < n; i++) w->hsum[i] = w->ha[i] + w->hb[i];
  void *pa = dmalloc(0, BIG), *pb = dmalloc(1, BIG);
  cudaMemcpy(pa, w->ha, BIG, cudaMemcpyHostToDevice);
  cudaMemcpy(pb, w->hb, BIG, cudaMemcpyHostToDevice);
  sync2();
  mk(&w->big.a, pa, 0, (int64_t)n);
  mk(&w->big.b, pb, 1, (int64_t)n);
  size_t sm = (size_t)8 << 20;
  w->sa = dmalloc(0, sm);
  w->sb = dmalloc(1, sm);
  w->so = dmalloc(1, sm);
  w->sr = dmalloc(0, sm);
  w->bdst = dmalloc(1, BIG);
  w->rdst = dmalloc(0, BIG);

  char name[64], set[192];
  /* broadcast: push kernel shapes, pull, push+pull, copy engines, CE+kernel */
  static const int shapes[][2] = {{1, 256}, {2, 256}, {4, 256}, {8, 256}, {1, 512}, {2, 512}, {4, 512}, {1, 1024}, {2, 1024}};
  sweep_one(w, "broadcast", "default", "");
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    snprintf(name, sizeof name, "push.b%d.t%d.u4", shapes[i][0], shapes[i][1]);
    snprintf(set, sizeof set, "P2P=kernel BLOCKS_PER_SM=%d THREADS=%d UNROLL=4", shapes[i][0], shapes[i][1]);
    sweep_one(w, "broadcast", name, set);
  }
  static const int unr[][3] = {{4, 512, 1}, {4, 512, 2}, {4, 512, 8}, {4, 512, 12}, {2, 512, 8}, {2, 512, 12},
                               {1, 512, 8}, {1, 512, 12}, {8, 256, 8}};
  for (size_t i = 0; i < sizeof unr / sizeof *unr; i++) {
    snprintf(name, sizeof name, "push.b%d.t%d.u%d", unr[i][0], unr[i][1], unr[i][2]);
    snprintf(set, sizeof set, "P2P=kernel BLOCKS_PER_SM=%d THREADS=%d UNROLL=%d", unr[i][0], unr[i][1], unr[i][2]);
    sweep_one(w, "broadcast", name, set);
  }
  static const int pulls[][3] = {{1, 512, 4}, {2, 512, 4}, {4, 512, 4}, {1, 512, 8}, {2, 512, 8},
                                 {4, 512, 8}, {1, 512, 12}, {2, 1024, 4}, {4, 256, 8}};
  for (size_t i = 0; i < sizeof pulls / sizeof *pulls; i++) {
    snprintf(name, sizeof name, "pull.b%d.t%d.u%d", pulls[i][0], pulls[i][1], pulls[i][2]);
    snprintf(set, sizeof set, "P2P=pull BLOCKS_PER_SM=%d THREADS=%d UNROLL=%d", pulls[i][0], pulls[i][1], pulls[i][2]);
    sweep_one(w, "broadcast", name, set);
  }
  static const int splits[] = {50, 30, 70};
  for (size_t i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "pushpull.s%d", splits[i]);
    snprintf(set, sizeof set, "P2P=pushpull SPLIT=%d", splits[i]);
    sweep_one(w, "broadcast", name, set);
    snprintf(name, sizeof name, "pushpull.s%d.b2.u8", splits[i]);
    snprintf(set, sizeof set, "P2P=pushpull SPLIT=%d BLOCKS_PER_SM=2 UNROLL=8", splits[i]);
    sweep_one(w, "broadcast", name, set);
  }
  static const char *const ces[] = {"ce", "ce2", "ce4", "cex2", "cex4"};
  for (size_t i = 0; i < 5; i++) {
    snprintf(set, sizeof set, "P2P=%s", ces[i]);
    sweep_one(w, "broadcast", ces[i], set);
  }
  static const int cesplits[] = {50, 30, 70, 85};
  for (size_t i = 0; i < 4; i++) {
    snprintf(name, sizeof name, "cekernel.s%d", cesplits[i]);
    snprintf(set, sizeof set, "P2P=cekernel SPLIT=%d", cesplits[i]);
    sweep_one(w, "broadcast", name, set);
    snprintf(name, sizeof name, "cepull.s%d", cesplits[i]);
    snprintf(set, sizeof set, "P2P=cepull SPLIT=%d", cesplits[i]);
    sweep_one(w, "broadcast", name, set);
  }
  sweep_one(w, "broadcast", "default.again", "");

  /* reduce_add: fused pull-add shapes, push-add, both, copy then add, pipelined */
  static const int fused[][3] = {{4, 512, 1}, {4, 512, 2}, {4, 512, 4}, {4, 512, 8}, {2, 512, 4}, {2, 512, 8},
                                 {1, 512, 8}, {1, 1024, 4}, {2, 1024, 2}, {2, 1024, 4}, {8, 256, 2}, {4, 256, 4}};
  sweep_one(w, "reduce_add", "default", "");
  for (size_t i = 0; i < sizeof fused / sizeof *fused; i++) {
    snprintf(name, sizeof name, "fused.b%d.t%d.u%d", fused[i][0], fused[i][1], fused[i][2]);
    snprintf(set, sizeof set, "REDUCE=fused BLOCKS_PER_SM=%d THREADS=%d UNROLL=%d", fused[i][0], fused[i][1], fused[i][2]);
    sweep_one(w, "reduce_add", name, set);
  }
  static const int push[][3] = {{4, 512, 1}, {4, 512, 4}, {2, 512, 4}, {2, 512, 8}, {1, 512, 8}, {1, 1024, 4}};
  for (size_t i = 0; i < sizeof push / sizeof *push; i++) {
    snprintf(name, sizeof name, "push.b%d.t%d.u%d", push[i][0], push[i][1], push[i][2]);
    snprintf(set, sizeof set, "REDUCE=push BLOCKS_PER_SM=%d THREADS=%d UNROLL=%d", push[i][0], push[i][1], push[i][2]);
    sweep_one(w, "reduce_add", name, set);
  }
  for (size_t i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "mix.s%d.u4", splits[i]);
    snprintf(set, sizeof set, "REDUCE=mix SPLIT=%d UNROLL=4", splits[i]);
    sweep_one(w, "reduce_add", name, set);
    snprintf(name, sizeof name, "mix.s%d.b2.u8", splits[i]);
    snprintf(set, sizeof set, "REDUCE=mix SPLIT=%d BLOCKS_PER_SM=2 UNROLL=8", splits[i]);
    sweep_one(w, "reduce_add", name, set);
  }
  static const char *const copies[] = {"kernel", "ce", "cex2", "pull"};
  for (size_t i = 0; i < 4; i++) {
    snprintf(name, sizeof name, "copy.%s", copies[i]);
    snprintf(set, sizeof set, "REDUCE=copy P2P=%s", copies[i]);
    sweep_one(w, "reduce_add", name, set);
  }
  static const struct { const char *p2p; int chunks; const char *extra; } pipes[] = {
      {"kernel", 8, " BLOCKS_PER_SM=2 UNROLL=8"}, {"ce", 8, ""}, {"ce", 16, ""}, {"ce", 32, ""}, {"ce", 64, ""},
      {"cekernel", 8, ""}};
  for (size_t i = 0; i < sizeof pipes / sizeof *pipes; i++) {
    snprintf(name, sizeof name, "pipe.%s.c%d%s", pipes[i].p2p, pipes[i].chunks, *pipes[i].extra ? ".b2.u8" : "");
    if (!strcmp(pipes[i].p2p, "pull")) snprintf(name, sizeof name, "pipe.pull.c%d.u8", pipes[i].chunks);
    snprintf(set, sizeof set, "REDUCE=pipe P2P=%s CHUNKS=%d%s", pipes[i].p2p, pipes[i].chunks, pipes[i].extra);
    sweep_one(w, "reduce_add", name, set);
  }
  sweep_one(w, "reduce_add", "default.again", "");
  cudaFree(pa);
  cudaFree(pb);
  cudaFree(w->sa);
  cudaFree(w->sb);
  cudaFree(w->so);
  cudaFree(w->sr);
  cudaFree(w->bdst);
  cudaFree(w->rdst);
  cudaFreeHost(g_check);
  free(w->ha);
  free(w->hb);
  free(w->hsum);
  free(w);
}

static void result(const char *metric, double tc_gbs, const char *ref_name, double ref_gbs, const char *target) {
  printf("RESULT name=comm metric=%s tcuda=%.1f ref_name=%s ref=%.1f unit=GB/s target=%s\n", metric, tc_gbs, ref_name,
         ref_gbs, target);
}

int main(void) {
  tcuda_status s;
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
    if (eng && (s = tcuda_comm_set_engine(TCUDA_COMM_ENGINE_NCCL))) die("set_engine", s);
    const char *sfx = eng ? "_nccl_engine" : "";
    char m[96];
    snprintf(m, sizeof m, "broadcast_256MiB%s", sfx);
    result(m, big / timeit(op_broadcast, x), "cudaMemcpyPeerAsync", peer, eng ? "info" : ">=385GB/s");
    snprintf(m, sizeof m, "reduce_add_256MiB%s", sfx);
    result(m, big / timeit(op_reduce, x), "cudaMemcpyPeerAsync", peer, eng ? "info" : ">=385GB/s");
    snprintf(m, sizeof m, "scatter_256MiB_total%s", sfx);
    result(m, big / timeit(op_scatter, x), "cudaMemcpyPeerAsync_half", peer_half, eng ? "info" : ">=torch");
    snprintf(m, sizeof m, "gather_256MiB_total%s", sfx);
    result(m, big / timeit(op_gather, x), "cudaMemcpyPeerAsync_half", peer_half, eng ? "info" : ">=torch");
    snprintf(m, sizeof m, "broadcast_coalesced_1000x64KiB%s", sfx);
    result(m, many / timeit(op_coalesced, x), "cudaMemcpyPeerAsync_x1000", peer_many, eng ? "info" : ">=torch*5");
    snprintf(m, sizeof m, "gather_to_host_256MiB_reused_pinned_out%s", sfx);
    result(m, big / timeit(op_gather_host, x), "cudaMemcpyAsync_D2H_pinned", d2h, eng ? "info" : ">=torch*20");
    if (!eng) gather_host_rows(x, d2h);
  }
  if ((s = tcuda_comm_set_engine(TCUDA_COMM_ENGINE_AUTO))) die("set_engine", s);
  const char *sw = getenv("BENCH_COMM_SWEEP");
  if (!sw || strcmp(sw, "0")) sweep();
  return 0;
}
