/* bench_alloc: the caching allocator's hot paths, side by side with PyTorch's
 * C++ allocator (libc10_cuda, when built with BENCH_HAVE_C10) and with
 * cudaMallocAsync on a pool that never releases (threshold UINT64_MAX).
 *
 *   (a) alloc+free of a cached 4 KiB block, one thread       ns per pair
 *       (the allocators' trials interleaved)
 *   (b) 1000 live blocks, 512 B..8 MiB log-uniform, random
 *       replacement (free one, allocate one)                  ns per call,
 *       and ns per replacement (a free plus an alloc, info). The row's
 *       target says "per op"; measured, PyTorch's pair and mixed call are
 *       close while its replacement is far above its pair
 *       (docs/performance.md), so "op" reads as one call
 *   (c) 8 threads, default stream, 4 KiB pairs                wall ns per pair
 *   (d) 8 threads, one stream each, 4 KiB pairs               wall ns per pair
 *   (e) fragmentation on a fixed trace: peak reserved / peak allocated,
 *       each variant in a fresh child process (this binary, --frag VARIANT)
 *   (g) diagnostics for (a)-(d), tcuda only (info): the same pairs through
 *       tcuda_malloc_on with the device and default stream named (no
 *       current-device lookup), (a) once more at the end, the policy alone
 *       on the simulated device (no API layer, no CUDA), 1 and 8 threads,
 *       and the current-device lookup alone from 1 and 8 threads
 *   (f) cross-stream: 4 KiB allocated on stream A, used on stream B
 *       (record_stream), freed; the block waits for an event on B. For
 *       cudaMallocAsync the same safety is an event on B that A waits for
 *       before cudaFreeAsync                                    ns per round
 *   (h) churn: an RL fine-tuning loop (a rollout whose K/V caches grow,
 *       then a training step on it) that moves the layout through memory
 *       while the live total comes near its peak (alloc_churn.c)
 *                                                               ns per pair
 *   (i) policy:compact against tcuda's torch-identical policy: (a), (b)
 *       and (h), each variant in fresh child processes (--policy VARIANT),
 *       rounds alternating which goes first; and whether (h) made compact
 *       unmap and map pages. --churn-sim CONF runs (h) on the simulated
 *       device under the config CONF (no GPU needed)
 *   (j) thread_cache:16 against the default mode: (a), (c), (d) and the
 *       extra peak reserved of (b) and (h), in child processes
 *       (bench_alloc_tcache.h); --tcache-sim N runs (g)'s policy-alone
 *       pairs for both modes on the simulated device (no GPU needed)
 *
 * Prints RESULT lines (format: bench/run-gpu). BENCH_ALLOC_SCALE=0.1 runs
 * fewer iterations; BENCH_ALLOC_HOT_ONLY=1 skips (e), (i) and (j), so that
 * two builds can alternate many short runs. Without a GPU it prints SKIPPED and exits 0. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "tcuda.h"
#include "alloc/alloc.h" /* the policy on the simulated device, for (g) */
#include "alloc_churn.h"
#include "bench_util.h"
#include "mempool.h"
#ifdef BENCH_HAVE_C10
#include "c10_alloc_shim.h"
#endif

extern char **environ;

#define NTHREADS 8
#define SIZE_4K 4096
#define MIB (1024.0 * 1024.0)

static double g_scale = 1.0;

static long scaled(long n) {
  long v = (long)((double)n * g_scale);
  return v < 10 ? 10 : v;
}

/* Threads that start together: each runs fn(th_arg) and waits on `start`
 * before its timed loop; the result is the median over `trials` of wall
 * ns per operation (iters per thread, all threads). */
typedef struct th_arg {
  pthread_barrier_t *start;
  long iters;
  int index;
  const void *ctx;
} th_arg;

static volatile int g_failed; /* first failure stops a pattern, not the run */
static char g_fail_msg[512];
static void note_failure(const char *who, const char *msg);

static double run_threads(int n, int trials, void *(*fn)(void *), const void *ctx, long iters) {
  pthread_t th[NTHREADS];
  th_arg args[NTHREADS];
  pthread_barrier_t start;
  double trial[5];
  if (n > NTHREADS || trials > 5) return NAN;
  for (int t = 0; t < trials; t++) {
    pthread_barrier_init(&start, NULL, (unsigned)n + 1);
    for (int i = 0; i < n; i++) {
      args[i] = (th_arg){&start, iters, i, ctx};
      if (pthread_create(&th[i], NULL, fn, &args[i])) {
        note_failure("pthread_create", strerror(errno));
        return NAN; /* threads already started block forever; the run ends soon anyway */
      }
    }
    pthread_barrier_wait(&start);
    uint64_t t0 = now_ns();
    for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    trial[t] = (double)(now_ns() - t0) / (double)(iters * n);
    pthread_barrier_destroy(&start);
  }
  return g_failed ? NAN : median(trial, trials);
}

/* ------------------------------------------------------------------ */
/* The three allocators behind one interface. stream: a cudaStream_t or NULL
 * (legacy default stream). alloc returns 0 on success. */
typedef struct bench_alloc {
  const char *name;     /* column name in the RESULT line */
  int (*alloc)(void **p, size_t n, void *stream);
  void (*free)(void *p, void *stream);
  void (*trim)(void);   /* give cached memory back between patterns */
  int (*cross)(size_t n, void *alloc_stream, void *use_stream); /* (f): one round */
  int available;
  char why[256];        /* why unavailable */
} bench_alloc;


static void note_failure(const char *who, const char *msg) {
  if (!g_failed) {
    g_failed = 1;
    snprintf(g_fail_msg, sizeof g_fail_msg, "%s: %s", who, msg);
  }
}

/* tcuda */
/* A raw cudaStream_t on device 0 as tcuda's stream value. */
static tcuda_stream_t ext_stream(void *stream) {
  tcuda_stream_t s = {(struct CUstream_st *)stream, (int64_t)(intptr_t)stream, 0, 0};
  return s;
}
static int tcb_alloc(void **p, size_t n, void *stream) {
  tcuda_status s;
  if (!stream) {
    s = tcuda_malloc(p, n);
  } else {
    s = tcuda_malloc_on(p, n, 0, ext_stream(stream));
  }
  if (s != TCUDA_SUCCESS) {
    note_failure("tcuda_malloc", tcuda_last_error());
    return -1;
  }
  return 0;
}
static void tc_free(void *p, void *stream) {
  (void)stream;
  if (tcuda_free(p) != TCUDA_SUCCESS) note_failure("tcuda_free", tcuda_last_error());
}
static void tc_trim(void) { tcuda_empty_cache(); }
static int tc_cross(size_t n, void *alloc_stream, void *use_stream) {
  void *p;
  tcuda_status s = tcuda_malloc_on(&p, n, 0, ext_stream(alloc_stream));
  if (!s) {
    s = tcuda_record_stream(p, ext_stream(use_stream));
    tcuda_status f = tcuda_free(p);
    if (!s) s = f;
  }
  if (s) {
    note_failure("tcuda cross-stream round", tcuda_last_error());
    return -1;
  }
  return 0;
}

/* (g): device 0's default stream named explicitly */
static tcuda_stream_t g_def;
static int tc_alloc_explicit(void **p, size_t n, void *stream) {
  (void)stream;
  if (tcuda_malloc_on(p, n, 0, g_def) != TCUDA_SUCCESS) {
    note_failure("tcuda_malloc_on", tcuda_last_error());
    return -1;
  }
  return 0;
}

/* (g): the policy alone, on the simulated device */
static tc_alloc *g_sim;
static void *sim_main(void *v) {
  th_arg *a = v;
  uint64_t p, stream = *(const int *)a->ctx ? (uint64_t)(a->index + 1) : 0; /* own stream, or all on 0 */
  pthread_barrier_wait(a->start);
  for (long i = 0; i < a->iters; i++) {
    if (tc_alloc_malloc(g_sim, SIZE_4K, stream, &p) || tc_alloc_free(g_sim, p)) {
      note_failure("sim", tcuda_last_error());
      break;
    }
  }
  return NULL;
}
/* wall ns per pair over all threads; own_streams: 0 one shared stream, else one each */
static double sim_threads(int nthreads, int own_streams, long iters) {
  return run_threads(nthreads, 3, sim_main, &own_streams, iters);
}

/* (g): the current-device lookup alone, per call, wall over all threads */
static void *dev_main(void *v) {
  th_arg *a = v;
  int d = -1;
  pthread_barrier_wait(a->start);
  for (long i = 0; i < a->iters; i++)
    if (tcuda_current_device(&d) != TCUDA_SUCCESS) {
      note_failure("tcuda_current_device", tcuda_last_error());
      break;
    }
  return NULL;
}
static double device_lookup(int nthreads, long iters) { return run_threads(nthreads, 1, dev_main, NULL, iters); }

static void info(const char *metric, double v) {
  printf("RESULT name=alloc metric=%s tcuda=%.4g ref_name=- ref=NA unit=ns target=info\n", metric, v);
}

/* cudaMallocAsync on a private pool that keeps everything */
static cudaMemPool_t g_pool;
static int ma_alloc(void **p, size_t n, void *stream) {
  cudaError_t e = cudaMallocFromPoolAsync(p, n, g_pool, (cudaStream_t)stream);
  if (e != cudaSuccess) {
    note_failure("cudaMallocFromPoolAsync", cudaGetErrorString(e));
    return -1;
  }
  return 0;
}
static void ma_free(void *p, void *stream) {
  cudaError_t e = cudaFreeAsync(p, (cudaStream_t)stream);
  if (e != cudaSuccess) note_failure("cudaFreeAsync", cudaGetErrorString(e));
}
static cudaEvent_t g_ma_event;
static int ma_cross(size_t n, void *alloc_stream, void *use_stream) {
  void *p;
  if (ma_alloc(&p, n, alloc_stream)) return -1;
  cudaError_t e = cudaEventRecord(g_ma_event, (cudaStream_t)use_stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)alloc_stream, g_ma_event, 0);
  if (e != cudaSuccess) {
    note_failure("cudaEventRecord/cudaStreamWaitEvent", cudaGetErrorString(e));
    return -1;
  }
  ma_free(p, alloc_stream);
  return g_failed ? -1 : 0;
}
static void ma_trim(void) {
  cudaDeviceSynchronize();
  cudaMemPoolTrimTo(g_pool, 0);
}

#ifdef BENCH_HAVE_C10
static int c10_alloc_fn(void **p, size_t n, void *stream) {
  *p = c10_raw_alloc(n, stream);
  if (!*p) {
    note_failure("torch", c10_last_error());
    return -1;
  }
  return 0;
}
static void c10_free_fn(void *p, void *stream) {
  (void)stream;
  c10_raw_delete(p);
}
static void c10_trim(void) { c10_empty_cache(); }
static int c10_cross(size_t n, void *alloc_stream, void *use_stream) {
  if (c10_cross_stream_round(n, alloc_stream, use_stream)) {
    note_failure("torch cross-stream round", c10_last_error());
    return -1;
  }
  return 0;
}
#endif

enum { A_TCUDA = 0, A_TORCH = 1, A_ASYNC = 2, A_COUNT = 3 };
static bench_alloc g_allocs[A_COUNT] = {
    {"tcuda", tcb_alloc, tc_free, tc_trim, tc_cross, 0, ""},
#ifdef BENCH_HAVE_C10
    {"torch", c10_alloc_fn, c10_free_fn, c10_trim, c10_cross, 0, ""},
#else
    {"torch", NULL, NULL, NULL, NULL, 0, "not built with PyTorch's c10 (torch not found at configure time)"},
#endif
    {"cudaMallocAsync", ma_alloc, ma_free, ma_trim, ma_cross, 0, ""},
};

/* ------------------------------------------------------------------ */
static void trim_all(void) {
  for (int i = 0; i < A_COUNT; i++)
    if (g_allocs[i].available && g_allocs[i].trim) g_allocs[i].trim();
}

/* (a) one thread, cached 4 KiB pairs */
static int pairs_once(const bench_alloc *A, void *stream, long iters) {
  void *p;
  for (long i = 0; i < iters; i++) {
    if (A->alloc(&p, SIZE_4K, stream)) return -1;
    A->free(p, stream);
  }
  return 0;
}

static double pattern_pairs(const bench_alloc *A, void *stream, long iters) {
  if (pairs_once(A, stream, 1000)) return NAN;
  double trial[5];
  for (int t = 0; t < 5; t++) {
    uint64_t t0 = now_ns();
    if (pairs_once(A, stream, iters)) return NAN;
    trial[t] = (double)(now_ns() - t0) / (double)iters;
  }
  return g_failed ? NAN : median(trial, 5);
}

/* Trials of the allocators take turns, median of 7 each: single-thread
 * figures on the GPU host drift a lot within one run (docs/performance.md),
 * so one allocator's trials must not all land in one good or bad stretch. ok[i] says which allocators start (warmed up
 * by the caller); turn(i, iters, ctx) runs one trial, 0 on success. */
typedef int (*turn_fn)(int i, long iters, void *ctx);
static void take_turns(const char *label, int ok[A_COUNT], turn_fn turn, void *ctx, long iters, double out[A_COUNT]) {
  double trial[A_COUNT][7];
  for (int t = 0; t < 7; t++)
    for (int i = 0; i < A_COUNT; i++) {
      if (!ok[i]) continue;
      g_failed = 0;
      uint64_t t0 = now_ns();
      ok[i] = !turn(i, iters, ctx) && !g_failed;
      trial[i][t] = (double)(now_ns() - t0) / (double)iters;
      if (!ok[i]) fprintf(stderr, "bench_alloc: %s on %s failed: %s\n", label, g_allocs[i].name, g_fail_msg);
    }
  for (int i = 0; i < A_COUNT; i++) out[i] = ok[i] ? median(trial[i], 7) : NAN;
  g_failed = 0;
}

static int pairs_turn(int i, long iters, void *ctx) { return pairs_once(&g_allocs[i], ctx, iters); }

static void pairs_interleaved(long iters, double out[]) {
  int ok[A_COUNT];
  for (int i = 0; i < A_COUNT; i++) {
    g_failed = 0;
    ok[i] = g_allocs[i].available && !pairs_once(&g_allocs[i], NULL, 1000) && !g_failed;
  }
  take_turns("(a) 4KiB pair", ok, pairs_turn, NULL, iters, out);
  trim_all();
}

/* (b) mixed sizes, random replacement among 1000 live blocks */
#define MIX_LIVE 1000
typedef struct mix_seq {
  size_t *size;
  uint32_t *slot;
  long n;
} mix_seq;

static int mix_seq_make(mix_seq *m, long n) {
  m->n = n + MIX_LIVE;
  m->size = malloc(sizeof *m->size * (size_t)m->n);
  m->slot = malloc(sizeof *m->slot * (size_t)m->n);
  if (!m->size || !m->slot) return -1;
  uint64_t s = 42;
  const double lo = log(512.0), hi = log(8.0 * 1024 * 1024);
  for (long i = 0; i < m->n; i++) {
    m->size[i] = (size_t)exp(lo + (hi - lo) * rng_unit(&s));
    m->slot[i] = (uint32_t)(rng_next(&s) % MIX_LIVE);
  }
  return 0;
}

/* One allocator's run of (b): its 1000 live blocks and its place in the
 * sequence, so that trials of the allocators can take turns. */
typedef struct mix_run {
  void *live[MIX_LIVE];
  long k;
} mix_run;

static int mix_start(const bench_alloc *A, const mix_seq *m, mix_run *r, long warm) {
  r->k = 0;
  for (int i = 0; i < MIX_LIVE; i++, r->k++)
    if (A->alloc(&r->live[i], m->size[r->k], NULL)) {
      while (i-- > 0) A->free(r->live[i], NULL);
      return -1;
    }
  for (long i = 0; i < warm; i++, r->k++) {
    uint32_t j = m->slot[r->k];
    A->free(r->live[j], NULL);
    if (A->alloc(&r->live[j], m->size[r->k], NULL)) return -1; /* leaves live[j] stale: the run is over */
  }
  return 0;
}

static int mix_step(const bench_alloc *A, const mix_seq *m, mix_run *r, long iters) {
  for (long i = 0; i < iters; i++, r->k++) {
    uint32_t j = m->slot[r->k];
    A->free(r->live[j], NULL);
    if (A->alloc(&r->live[j], m->size[r->k], NULL)) return -1;
  }
  return 0;
}

/* (c), (d) threads */
typedef struct {
  const bench_alloc *A;
  void *const *streams; /* NULL: every thread on the default stream */
} threads_ctx;

static void *thread_main(void *v) {
  th_arg *a = v;
  const threads_ctx *c = a->ctx;
  void *p, *stream = c->streams ? c->streams[a->index] : NULL;
  for (int i = 0; i < 100; i++) {
    if (c->A->alloc(&p, SIZE_4K, stream)) break;
    c->A->free(p, stream);
  }
  pthread_barrier_wait(a->start);
  for (long i = 0; i < a->iters && !g_failed; i++) {
    if (c->A->alloc(&p, SIZE_4K, stream)) break;
    c->A->free(p, stream);
  }
  return NULL;
}

static double pattern_threads(const bench_alloc *A, void *const *streams, long iters) {
  threads_ctx c = {A, streams};
  return run_threads(NTHREADS, 3, thread_main, &c, iters);
}

/* (f) cross-stream record_stream rounds; streams[0] allocates, streams[1]
 * uses. Each round waits on the driver (an event record, then a query), whose
 * cost drifts within a run, so these trials take turns too. */
static int cross_turn(int i, long iters, void *ctx) {
  void *const *streams = ctx;
  for (long n = 0; n < iters; n++)
    if (g_allocs[i].cross(SIZE_4K, streams[0], streams[1])) return -1;
  return 0;
}

static void cross_interleaved(void *const *streams, long iters, double out[A_COUNT]) {
  int ok[A_COUNT];
  for (int i = 0; i < A_COUNT; i++) {
    g_failed = 0;
    ok[i] = g_allocs[i].available && g_allocs[i].cross && !cross_turn(i, 200, (void *)streams) && !g_failed;
    if (g_allocs[i].available && g_allocs[i].cross && !ok[i])
      fprintf(stderr, "bench_alloc: (f) cross-stream on %s failed: %s\n", g_allocs[i].name, g_fail_msg);
  }
  take_turns("(f) cross-stream", ok, cross_turn, (void *)streams, iters, out);
  cudaDeviceSynchronize();
  trim_all();
}

/* ------------------------------------------------------------------ */
/* (e) the fragmenting trace: a transformer-like training loop with a
 * different sequence length every step, the case that grows caches. Ops are
 * generated, not stored, so every variant replays the identical sequence. */
#define FRAG_MAX_LIVE 4096

typedef struct frag_ctx {
  const bench_alloc *A;
  void *ptr[FRAG_MAX_LIVE];
  int top;       /* stack of live step-local blocks */
} frag_ctx;

static int frag_push(frag_ctx *c, size_t n) {
  if (c->top >= FRAG_MAX_LIVE) return -1;
  if (c->A->alloc(&c->ptr[c->top], n, NULL)) return -1;
  c->top++;
  return 0;
}

static int frag_run(const bench_alloc *A) {
  static frag_ctx c;
  memset(&c, 0, sizeof c);
  c.A = A;
  uint64_t s = 7;
  const double lo = log(256.0 * 1024), hi = log(48.0 * 1024 * 1024);
  /* parameters and optimizer state: live for the whole run */
  enum { NPARAM = 40 };
  void *params[2 * NPARAM];
  for (int i = 0; i < NPARAM; i++) {
    if (A->alloc(&params[2 * i], (size_t)exp(lo + (hi - lo) * rng_unit(&s)), NULL)) return -1;
    if (A->alloc(&params[2 * i + 1], 4096 + rng_next(&s) % 61440, NULL)) return -1;
  }
  void *cache = NULL; /* a buffer that outlives ten steps, then grows */
  for (int step = 0; step < 120; step++) {
    size_t L = 128 + rng_next(&s) % 1921;
    if (step % 10 == 0) {
      if (cache) A->free(cache, NULL);
      if (A->alloc(&cache, (size_t)(step / 10 + 1) * 3 * 1024 * 1024 + 4096, NULL)) return -1;
    }
    int base = c.top;
    for (int layer = 0; layer < 12; layer++) {
      if (frag_push(&c, L * 4096 * 2)) return -1;          /* attention input */
      void *tmp;
      if (A->alloc(&tmp, L * L * 2 * 8, NULL)) return -1;  /* scores: temporary */
      if (frag_push(&c, L * 4096 * 2)) return -1;          /* attention output */
      A->free(tmp, NULL);
      if (frag_push(&c, L * 16384 * 2)) return -1;         /* MLP hidden */
      if (frag_push(&c, 512 + rng_next(&s) % 8192)) return -1; /* small stats */
    }
    /* backward: release activations newest first, with short-lived grads */
    while (c.top > base) {
      void *g;
      size_t gn = 1024 + rng_next(&s) % (2u << 20);
      if (A->alloc(&g, gn, NULL)) return -1;
      A->free(c.ptr[--c.top], NULL);
      A->free(g, NULL);
    }
  }
  if (cache) A->free(cache, NULL);
  for (int i = 0; i < 2 * NPARAM; i++) A->free(params[i], NULL);
  return g_failed ? -1 : 0;
}

/* --frag-trace FILE: the loop above as a replay trace (tests/data/torch/README.md),
 * for bench_frag's table; no GPU needed. */
static FILE *g_trace_out;
static uintptr_t g_trace_id;
static int trace_alloc(void **p, size_t n, void *stream) {
  (void)stream;
  *p = (void *)++g_trace_id;
  fprintf(g_trace_out, "a %lu %zu\n", (unsigned long)g_trace_id, n);
  return 0;
}
static void trace_free(void *p, void *stream) {
  (void)stream;
  fprintf(g_trace_out, "f %lu\n", (unsigned long)(uintptr_t)p);
}
static int frag_trace(const char *path) {
  bench_alloc rec = {"trace", trace_alloc, trace_free, NULL, NULL, 1, ""};
  g_trace_out = fopen(path, "w");
  if (!g_trace_out) {
    fprintf(stderr, "bench_alloc: %s: %s\n", path, strerror(errno));
    return 1;
  }
  fprintf(g_trace_out, "# bench_alloc's fragmentation loop (frag_run), written by bench_alloc --frag-trace\n");
  int rc = frag_run(&rec);
  if (fclose(g_trace_out) || rc) {
    fprintf(stderr, "bench_alloc: %s: could not write the trace\n", path);
    return 1;
  }
  return 0;
}

/* Child: one variant, fresh process, prints "FRAG <peak_reserved> <peak_allocated>"
 * or "FRAG NA <reason>". */
static int frag_child(const char *variant) {
  unsetenv("TCUDA_ALLOC_CONF");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF"); /* torch 2.11 reads this one first */
  int64_t reserved = -1, allocated = -1;
  if (!strcmp(variant, "tcuda") || !strcmp(variant, "tcuda-expandable")) {
    if (!strcmp(variant, "tcuda-expandable") &&
        tcuda_allocator_set_config("expandable_segments:True") != TCUDA_SUCCESS) {
      printf("FRAG NA tcuda_allocator_set_config: %s\n", tcuda_last_error());
      return 0;
    }
    g_allocs[A_TCUDA].available = 1;
    if (frag_run(&g_allocs[A_TCUDA])) {
      printf("FRAG NA %s\n", g_fail_msg);
      return 0;
    }
    tcuda_memory_stats_t st;
    if (tcuda_memory_stats(0, &st) != TCUDA_SUCCESS) {
      printf("FRAG NA tcuda_memory_stats: %s\n", tcuda_last_error());
      return 0;
    }
    reserved = st.reserved_bytes[TCUDA_STAT_ALL].peak;
    allocated = st.allocated_bytes[TCUDA_STAT_ALL].peak;
  } else if (!strcmp(variant, "torch") || !strcmp(variant, "torch-expandable")) {
#ifdef BENCH_HAVE_C10
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    if (!strcmp(variant, "torch-expandable") && c10_set_settings("expandable_segments:True")) {
      printf("FRAG NA %s\n", c10_last_error());
      return 0;
    }
    if (c10_init(ndev)) {
      printf("FRAG NA %s\n", c10_last_error());
      return 0;
    }
    g_allocs[A_TORCH].available = 1;
    if (frag_run(&g_allocs[A_TORCH])) {
      printf("FRAG NA %s\n", g_fail_msg);
      return 0;
    }
    c10_shim_stats st;
    if (c10_stats(0, &st)) {
      printf("FRAG NA %s\n", c10_last_error());
      return 0;
    }
    reserved = st.reserved_peak;
    allocated = st.allocated_peak;
#else
    printf("FRAG NA not built with c10\n");
    return 0;
#endif
  } else if (!strcmp(variant, "cudaMallocAsync")) {
    char why[256];
    if (bench_make_pool(&g_pool, why, sizeof why)) {
      printf("FRAG NA %s\n", why);
      return 0;
    }
    if (frag_run(&g_allocs[A_ASYNC])) {
      printf("FRAG NA %s\n", g_fail_msg);
      return 0;
    }
    cudaDeviceSynchronize();
    uint64_t rh = 0, uh = 0;
    cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrReservedMemHigh, &rh);
    cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrUsedMemHigh, &uh);
    reserved = (int64_t)rh;
    allocated = (int64_t)uh;
  } else {
    printf("FRAG NA unknown variant %s\n", variant);
    return 2;
  }
  printf("FRAG %lld %lld\n", (long long)reserved, (long long)allocated);
  return 0;
}

/* Parent side: run this binary as `self MODE VARIANT` and collect its
 * stdout in buf (the child's stderr stays ours). 0 when it ran; -1 with
 * *why set when it could not start. *status is waitpid's. */
static int run_child(const char *self, const char *mode, const char *variant, char *buf, size_t n, int *status,
                     char *why, size_t why_len) {
  int fds[2];
  buf[0] = 0;
  *status = 0;
  if (pipe(fds)) {
    snprintf(why, why_len, "pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  char *argv[] = {(char *)self, (char *)mode, (char *)variant, NULL};
  pid_t pid;
  int rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc) {
    close(fds[0]);
    snprintf(why, why_len, "posix_spawn: %s", strerror(rc));
    return -1;
  }
  size_t len = 0;
  ssize_t r;
  char sink[512];
  /* read to the end even past a full buffer, so the child never blocks on the pipe */
  while ((r = len < n - 1 ? read(fds[0], buf + len, n - 1 - len) : read(fds[0], sink, sizeof sink)) > 0)
    if (len < n - 1) len += (size_t)r;
  buf[len] = 0;
  close(fds[0]);
  waitpid(pid, status, 0);
  return 0;
}

static void child_died(char *why, size_t why_len, int st) {
  if (WIFSIGNALED(st))
    snprintf(why, why_len, "child killed by signal %d without a result", WTERMSIG(st));
  else
    snprintf(why, why_len, "child exited %d without a result", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* One (e) variant in a child; returns the ratio, or NAN with *why set. */
static double frag_variant(const char *self, const char *variant, char *why, size_t why_len,
                           long long *res_out, long long *alloc_out) {
  char buf[4096];
  int st;
  if (run_child(self, "--frag", variant, buf, sizeof buf, &st, why, why_len)) return NAN;
  char *line = strstr(buf, "FRAG ");
  if (!line) {
    child_died(why, why_len, st);
    return NAN;
  }
  char *nl = strchr(line, '\n');
  if (nl) *nl = 0;
  long long res, al;
  if (sscanf(line, "FRAG %lld %lld", &res, &al) == 2 && al > 0) {
    *res_out = res;
    *alloc_out = al;
    return (double)res / (double)al;
  }
  snprintf(why, why_len, "%s", line + 5);
  return NAN;
}

/* ------------------------------------------------------------------ */
static void fmt(char *buf, size_t n, double v) {
  if (isnan(v))
    snprintf(buf, n, "NA");
  else
    snprintf(buf, n, "%.4g", v);
}

/* One RESULT line per reference that ran; a line with ref=NA when none did. */
static void report(const char *metric, const double v[A_COUNT], const char *unit, const char *target) {
  char tv[32], rv[32];
  fmt(tv, sizeof tv, v[A_TCUDA]);
  int printed = 0;
  for (int r = A_TORCH; r < A_COUNT; r++) {
    if (!g_allocs[r].available) continue;
    fmt(rv, sizeof rv, v[r]);
    printf("RESULT name=alloc metric=%s tcuda=%s ref_name=%s ref=%s unit=%s target=%s\n", metric, tv,
           g_allocs[r].name, rv, unit, target);
    printed = 1;
  }
  if (!printed) printf("RESULT name=alloc metric=%s tcuda=%s ref_name=- ref=NA unit=%s target=%s\n", metric, tv, unit, target);
  fflush(stdout);
}

static void run_all(const char *label, double out[A_COUNT], double (*fn)(const bench_alloc *, void *), void *arg) {
  for (int i = 0; i < A_COUNT; i++) {
    out[i] = NAN;
    if (!g_allocs[i].available) continue;
    g_failed = 0;
    out[i] = fn(&g_allocs[i], arg);
    if (g_failed) fprintf(stderr, "bench_alloc: %s on %s failed: %s\n", label, g_allocs[i].name, g_fail_msg);
    g_failed = 0;
    trim_all();
  }
}

static long g_iters_pair, g_iters_mix_warm, g_iters_mix, g_iters_thr;
static long g_ch_warm, g_ch_steps; /* (h): warm-up steps, steps per timed trial */
static mix_seq g_mix;

/* (b): each allocator keeps its own live set between its turns. */
static mix_run g_mix_run[A_COUNT];
static int mix_turn(int i, long iters, void *ctx) {
  (void)ctx;
  return mix_step(&g_allocs[i], &g_mix, &g_mix_run[i], iters);
}

static void mixed_interleaved(double out[A_COUNT]) {
  int ok[A_COUNT];
  tcuda_memory_stats_t s0, s1;
  int counted = tcuda_memory_stats(0, &s0) == TCUDA_SUCCESS;
  for (int i = 0; i < A_COUNT; i++) {
    g_failed = 0;
    ok[i] = g_allocs[i].available && !mix_start(&g_allocs[i], &g_mix, &g_mix_run[i], g_iters_mix_warm) && !g_failed;
    if (g_allocs[i].available && !ok[i])
      fprintf(stderr, "bench_alloc: (b) mixed on %s failed: %s\n", g_allocs[i].name, g_fail_msg);
  }
  take_turns("(b) mixed", ok, mix_turn, NULL, g_iters_mix, out);
  /* is it the cache or cudaMalloc that we time? (before the frees below) */
  if (counted && !isnan(out[A_TCUDA]) && tcuda_memory_stats(0, &s1) == TCUDA_SUCCESS)
    printf("bench_alloc: tcuda mixed: %lld cudaMalloc and %lld cudaFree calls in warm-up and timing\n",
           (long long)(s1.num_device_alloc - s0.num_device_alloc), (long long)(s1.num_device_free - s0.num_device_free));
  for (int i = 0; i < A_COUNT; i++)
    if (!isnan(out[i]))
      for (int j = 0; j < MIX_LIVE; j++) g_allocs[i].free(g_mix_run[i].live[j], NULL);
  g_failed = 0;
  trim_all();
}
static double do_threads(const bench_alloc *A, void *arg) { return pattern_threads(A, (void *const *)arg, g_iters_thr); }
static long g_iters_cross;

/* ------------------------------------------------------------------ */
/* (i) policy:compact against the torch-identical policy: (a), (b) and (h).
 * The policy is a process-wide setting, so each variant runs in a fresh
 * child (this binary --policy torch|compact) that prints
 *   POLICY pair NS
 *   POLICY mixed NS MAPS UNMAPS
 *   POLICY churn NS MAPS UNMAPS UNMAPPED_BYTES PEAK_RESERVED PEAK_ALLOCATED
 * or POLICY NA REASON; maps and unmaps are counted over the timed part. */

static int tc_stats0(tcuda_memory_stats_t *st) {
  if (tcuda_memory_stats(0, st) == TCUDA_SUCCESS) return 0;
  note_failure("tcuda_memory_stats", tcuda_last_error());
  return -1;
}
static int churn_tc_alloc(void **p, size_t n) { return tcb_alloc(p, n, NULL); }
static int churn_tc_free(void *p) {
  if (tcuda_free(p) == TCUDA_SUCCESS) return 0;
  note_failure("tcuda_free", tcuda_last_error());
  return -1;
}

static double mixed_timed(const bench_alloc *A, tcuda_memory_stats_t *s0, tcuda_memory_stats_t *s1) {
  static mix_run r;
  double trial[5];
  if (tc_stats0(s0) || mix_start(A, &g_mix, &r, g_iters_mix_warm)) return NAN;
  for (int t = 0; t < 5; t++) {
    uint64_t t0 = now_ns();
    if (mix_step(A, &g_mix, &r, g_iters_mix)) return NAN;
    trial[t] = (double)(now_ns() - t0) / (double)g_iters_mix;
  }
  if (tc_stats0(s1)) return NAN;
  for (int j = 0; j < MIX_LIVE; j++) A->free(r.live[j], NULL);
  return g_failed ? NAN : median(trial, 5);
}

static int policy_child(const char *variant) {
  unsetenv("TCUDA_ALLOC_CONF");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF");
  alarm(60); /* a hung child must not hold up the whole run */
  if (tcuda_device_count() < 1) {
    printf("POLICY NA no CUDA device (%s)\n", tcuda_unavailable_reason());
    return 0;
  }
  if (!strcmp(variant, "compact")) {
    if (tcuda_allocator_set_config("policy:compact") != TCUDA_SUCCESS) {
      printf("POLICY NA tcuda_allocator_set_config(\"policy:compact\"): %s\n", tcuda_last_error());
      return 0;
    }
  } else if (strcmp(variant, "torch")) {
    printf("POLICY NA unknown variant %s\n", variant);
    return 2;
  }
  if (tcuda_init() != TCUDA_SUCCESS) {
    printf("POLICY NA tcuda_init: %s\n", tcuda_last_error());
    return 0;
  }
  if (mix_seq_make(&g_mix, g_iters_mix_warm + 5 * g_iters_mix)) {
    printf("POLICY NA host out of memory\n");
    return 0;
  }
  bench_alloc *A = &g_allocs[A_TCUDA];
  A->available = 1;
  {
    volatile uint64_t sink = 0;
    for (uint64_t t0 = now_ns(); now_ns() - t0 < 100000000ull;) sink += t0;
  }
  tcuda_memory_stats_t s0, s1;
  memset(&s0, 0, sizeof s0);
  memset(&s1, 0, sizeof s1);
  /* Each pattern's peak allocated is larger than the one before, so the
   * budget that compact derives from the peak so far is each one's own. */
  double ns = pattern_pairs(A, NULL, g_iters_pair);
  if (isnan(ns)) fprintf(stderr, "bench_alloc: pair under policy:%s failed: %s\n", variant, g_fail_msg);
  printf("POLICY pair %.6g\n", ns);
  g_failed = 0;
  tcuda_empty_cache();
  ns = mixed_timed(A, &s0, &s1);
  if (isnan(ns)) fprintf(stderr, "bench_alloc: mixed under policy:%s failed: %s\n", variant, g_fail_msg);
  printf("POLICY mixed %.6g %lld %lld\n", ns, (long long)(s1.num_device_alloc - s0.num_device_alloc),
         (long long)(s1.num_device_free - s0.num_device_free));
  g_failed = 0;
  tcuda_empty_cache();
  tcuda_reset_peak_memory_stats(0); /* the churn's peaks are its own */
  memset(&s0, 0, sizeof s0);
  memset(&s1, 0, sizeof s1);
  churn_allocator ca = {churn_tc_alloc, churn_tc_free, tc_stats0};
  ns = churn_timed(&ca, g_ch_warm, 5, g_ch_steps, &s0, &s1);
  if (isnan(ns)) fprintf(stderr, "bench_alloc: churn under policy:%s failed: %s\n", variant, g_fail_msg);
  printf("POLICY churn %.6g %lld %lld %lld %lld %lld\n", ns, (long long)(s1.num_device_alloc - s0.num_device_alloc),
         (long long)(s1.num_device_free - s0.num_device_free),
         (long long)(s1.reserved_bytes[TCUDA_STAT_ALL].freed - s0.reserved_bytes[TCUDA_STAT_ALL].freed),
         (long long)s1.reserved_bytes[TCUDA_STAT_ALL].peak, (long long)s1.allocated_bytes[TCUDA_STAT_ALL].peak);
  return 0;
}

enum { P_CHURN, P_PAIR, P_MIXED, P_COUNT };
typedef struct policy_res {
  double ns[P_COUNT];
  long long ch_maps, ch_unmaps, ch_unmapped, ch_peak_res, ch_peak_alloc, mix_maps, mix_unmaps;
} policy_res;

/* One child; 0 with *out filled, -1 with *why set. */
static int policy_variant(const char *self, const char *variant, policy_res *out, char *why, size_t why_len) {
  char buf[4096];
  int st, got = 0;
  for (int p = 0; p < P_COUNT; p++) out->ns[p] = NAN;
  if (run_child(self, "--policy", variant, buf, sizeof buf, &st, why, why_len)) return -1;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    if (!strncmp(line, "POLICY NA ", 10)) {
      snprintf(why, why_len, "%s", line + 10);
      return -1;
    }
    got |= (sscanf(line, "POLICY churn %lf %lld %lld %lld %lld %lld", &out->ns[P_CHURN], &out->ch_maps,
                   &out->ch_unmaps, &out->ch_unmapped, &out->ch_peak_res, &out->ch_peak_alloc) == 6) << P_CHURN;
    got |= (sscanf(line, "POLICY pair %lf", &out->ns[P_PAIR]) == 1) << P_PAIR;
    got |= (sscanf(line, "POLICY mixed %lf %lld %lld", &out->ns[P_MIXED], &out->mix_maps, &out->mix_unmaps) == 3)
           << P_MIXED;
  }
  if (got != (1 << P_COUNT) - 1) {
    child_died(why, why_len, st);
    return -1;
  }
  return 0;
}

/* Median over the rounds; NA if any round failed, so a failure is not hidden. */
static double rounds_median(const policy_res *r, int n, int p) {
  double v[16];
  if (n < 1) return NAN;
  for (int i = 0; i < n; i++) {
    if (isnan(r[i].ns[p])) return NAN;
    v[i] = r[i].ns[p];
  }
  return median(v, n);
}

static void policy_row(const char *metric, double v, double ref, const char *unit, const char *target) {
  char tv[32], rv[32];
  fmt(tv, sizeof tv, v);
  fmt(rv, sizeof rv, ref);
  printf("RESULT name=alloc metric=%s tcuda=%s ref_name=tcuda-torch-policy ref=%s unit=%s target=%s\n", metric, tv, rv,
         unit, target);
}

/* Rounds alternate which variant goes first, against the host's drift; each
 * figure is the median over the rounds of each child's median trial. */
static void policy_compare(const char *self) {
  enum { MAX_ROUNDS = 15 };
  static const char *names[2] = {"compact", "torch"};
  int rounds = 5;
  const char *e = getenv("BENCH_ALLOC_POLICY_ROUNDS");
  if (e && atoi(e) >= 1) rounds = atoi(e) < MAX_ROUNDS ? atoi(e) : MAX_ROUNDS;
  policy_res r[2][MAX_ROUNDS];
  int n[2] = {0, 0}, dead[2] = {0, 0}, children = 0;
  char why[2][512] = {"", ""};
  uint64_t t0 = now_ns();
  for (int k = 0; k < rounds; k++) {
    if (k > 0 && now_ns() - t0 > 90000000000ull) { /* within run-gpu's time for the whole binary */
      printf("bench_alloc: policy comparison: stopped after %d rounds (over 90 s)\n", k);
      break;
    }
    for (int j = 0; j < 2; j++) {
      int v = k % 2 ? 1 - j : j;
      if (dead[v] || (v == 1 && dead[0] && n[1] >= 1)) continue; /* compact NA: one reference run is enough */
      children++;
      if (policy_variant(self, names[v], &r[v][n[v]], why[v], sizeof why[v]))
        dead[v] = 1;
      else
        n[v]++;
    }
  }
  for (int v = 0; v < 2; v++) {
    if (dead[v]) printf("bench_alloc: policy:%s: NA (%s)\n", names[v], why[v]);
    for (int i = 0; i < n[v]; i++)
      printf("bench_alloc: policy:%s round %d: pair %.4g ns, mixed %.4g ns (%lld maps, %lld unmaps), churn %.4g ns "
             "(%lld maps, %lld unmaps of %.1f MiB in its timed steps)\n",
             names[v], i, r[v][i].ns[P_PAIR], r[v][i].ns[P_MIXED], r[v][i].mix_maps, r[v][i].mix_unmaps,
             r[v][i].ns[P_CHURN], r[v][i].ch_maps, r[v][i].ch_unmaps, (double)r[v][i].ch_unmapped / MIB);
  }
  /* a compact child that failed after some rounds must not pass on the others */
  double c[P_COUNT], t[P_COUNT];
  for (int p = 0; p < P_COUNT; p++) {
    c[p] = dead[0] ? NAN : rounds_median(r[0], n[0], p);
    t[p] = rounds_median(r[1], n[1], p);
  }
  policy_row("compact_pair_ns", c[P_PAIR], t[P_PAIR], "ns", "<=ref*1.2 (4 KiB alloc+free, cached)");
  policy_row("compact_mixed_ns", c[P_MIXED], t[P_MIXED], "ns", "<=ref*1.2 (one free + one alloc, 1000 live)");
  policy_row("compact_churn_ns", c[P_CHURN], t[P_CHURN], "ns", "<=ref*1.2 (per alloc+free pair)");

  /* the churn must make compact give pages back: the fewest over the rounds */
  double unmaps = NAN, maps = NAN, peak_res = NAN, t_unmaps = NAN, t_maps = NAN, t_res = NAN, t_alloc = NAN;
  for (int i = 0; i < n[0] && !dead[0]; i++) {
    if (isnan(unmaps) || r[0][i].ch_unmaps < unmaps) unmaps = (double)r[0][i].ch_unmaps;
    if (isnan(maps) || r[0][i].ch_maps < maps) maps = (double)r[0][i].ch_maps;
    if (isnan(peak_res) || r[0][i].ch_peak_res / MIB > peak_res) peak_res = (double)r[0][i].ch_peak_res / MIB;
  }
  for (int i = 0; i < n[1]; i++) {
    if (isnan(t_unmaps) || r[1][i].ch_unmaps > t_unmaps) t_unmaps = (double)r[1][i].ch_unmaps;
    if (isnan(t_maps) || r[1][i].ch_maps > t_maps) t_maps = (double)r[1][i].ch_maps;
    if (isnan(t_res) || r[1][i].ch_peak_res / MIB > t_res) t_res = (double)r[1][i].ch_peak_res / MIB;
    if (isnan(t_alloc) || r[1][i].ch_peak_alloc / MIB > t_alloc) t_alloc = (double)r[1][i].ch_peak_alloc / MIB;
  }
  policy_row("compact_churn_unmaps", unmaps, t_unmaps, "count",
             ">0 (pages given back in the timed steps; fewest over the rounds)");
  policy_row("compact_churn_maps", maps, t_maps, "count", ">0 (pages mapped again in the timed steps)");
  if (!isnan(unmaps) && (unmaps <= 0 || maps <= 0))
    printf("bench_alloc: FAILURE: under policy:compact the churn benchmark %s in its timed steps; it does not test "
           "giving pages back\n", unmaps <= 0 ? "unmapped nothing" : "mapped nothing");
  char target[160];
  if (isnan(t_alloc))
    snprintf(target, sizeof target, "info (no torch-policy peak allocated)");
  else
    snprintf(target, sizeof target, "<=%.1f (max(1.10 P, P + 4 MiB), P = torch policy's peak allocated %.1f MiB)",
             fmax(1.10 * t_alloc, t_alloc + 4.0), t_alloc);
  policy_row("compact_churn_peak_reserved", peak_res, t_res, "MiB", target);
  printf("bench_alloc: policy comparison: %d child processes, %.1f s\n", children, (double)(now_ns() - t0) * 1e-9);
  fflush(stdout);
}

#include "bench_alloc_tcache.h" /* (j) */

int main(int argc, char **argv) {
  const char *sc = getenv("BENCH_ALLOC_SCALE");
  if (sc && atof(sc) > 0) g_scale = atof(sc);
  g_ch_warm = 4;
  g_ch_steps = g_scale >= 1.0 / 12 ? (long)(6 * g_scale + 0.5) : 1; /* per trial, 5 trials */
  if (argc >= 3 && !strcmp(argv[1], "--frag")) return frag_child(argv[2]);
  if (argc >= 3 && !strcmp(argv[1], "--frag-trace")) return frag_trace(argv[2]);
  if (argc >= 3 && !strcmp(argv[1], "--churn-sim")) return churn_sim(argv[2], g_ch_warm, g_ch_steps);
  if (argc >= 3 && !strcmp(argv[1], "--policy")) {
    g_iters_pair = scaled(100000);
    g_iters_mix_warm = scaled(20000);
    g_iters_mix = scaled(20000);
    return policy_child(argv[2]);
  }
  if (argc >= 3 && !strcmp(argv[1], "--tcache-sim")) return tcache_sim(argv[2]);
  if (argc >= 3 && !strcmp(argv[1], "--tcache")) {
    g_iters_pair = scaled(100000);
    g_iters_thr = scaled(20000);
    g_iters_mix_warm = scaled(20000);
    g_iters_mix = scaled(20000);
    return tcache_child(argv[2]);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);

  if (tcuda_device_count() < 1) {
    printf("SKIPPED bench_alloc: no CUDA device (%s)\n", tcuda_unavailable_reason());
    return 0;
  }
  if (tcuda_init() != TCUDA_SUCCESS) {
    printf("SKIPPED bench_alloc: tcuda_init: %s\n", tcuda_last_error());
    return 0;
  }
  char name[256] = "";
  tcuda_get_device_name(0, name, sizeof name);
  printf("bench_alloc: device 0 = %s, scale %.3g\n", name, g_scale);

  g_allocs[A_TCUDA].available = 1;
#ifdef BENCH_HAVE_C10
  {
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    if (c10_init(ndev) == 0) {
      g_allocs[A_TORCH].available = 1;
    } else {
      snprintf(g_allocs[A_TORCH].why, sizeof g_allocs[A_TORCH].why, "%s", c10_last_error());
    }
  }
#endif
  if (bench_make_pool(&g_pool, g_allocs[A_ASYNC].why, sizeof g_allocs[A_ASYNC].why) == 0) g_allocs[A_ASYNC].available = 1;
  for (int i = 0; i < A_COUNT; i++)
    if (!g_allocs[i].available) printf("bench_alloc: %s column unavailable: %s\n", g_allocs[i].name, g_allocs[i].why);

  g_iters_pair = scaled(200000);
  g_iters_mix_warm = scaled(20000);
  g_iters_mix = scaled(40000); /* per trial, 7 trials */
  g_iters_thr = scaled(20000);
  g_iters_cross = scaled(20000);
  if (mix_seq_make(&g_mix, g_iters_mix_warm + 7 * g_iters_mix)) {
    printf("SKIPPED bench_alloc: host out of memory\n");
    return 0;
  }

  double a[A_COUNT], b[A_COUNT], c[A_COUNT], d[A_COUNT];
  char target[128];

  /* busy work first, so no column is timed on an idle core's clock */
  {
    volatile uint64_t sink = 0;
    for (uint64_t t0 = now_ns(); now_ns() - t0 < 300000000ull;) sink += t0;
  }
  pairs_interleaved(g_iters_pair, a);
  report("pair_4KiB_cached_1thr", a, "ns", "<=100");

  mixed_interleaved(b);
  {
    double per_call[A_COUNT];
    for (int i = 0; i < A_COUNT; i++) per_call[i] = b[i] / 2;
    report("mixed_1000live_per_call", per_call, "ns", "<=150 (per op: a free or an alloc)");
  }
  report("mixed_1000live_replace", b, "ns", "info (one free + one alloc)");

  run_all("(c) 8 threads default stream", c, do_threads, NULL);
  snprintf(target, sizeof target, "<=%.4g (tcuda 1-thread pair)", a[A_TCUDA]);
  report("pair_4KiB_8thr_default_stream", c, "ns", target);

  cudaStream_t streams[NTHREADS];
  int have_streams = 1;
  for (int i = 0; i < NTHREADS; i++)
    if (cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking) != cudaSuccess) have_streams = 0;
  if (have_streams) {
    run_all("(d) 8 threads 8 streams", d, do_threads, streams);
    report("pair_4KiB_8thr_8streams", d, "ns", target);
  } else {
    fprintf(stderr, "bench_alloc: cudaStreamCreate failed; (d) and (f) skipped\n");
  }

  /* (g) where the time goes: API layer vs policy, lookup vs none */
  if (tcuda_default_stream(0, &g_def) == TCUDA_SUCCESS) {
    bench_alloc ex = g_allocs[A_TCUDA];
    ex.alloc = tc_alloc_explicit;
    g_failed = 0;
    info("diag_pair_1thr_malloc_on_default_stream", pattern_pairs(&ex, NULL, g_iters_pair));
    info("diag_pair_8thr_malloc_on_default_stream", pattern_threads(&ex, NULL, g_iters_thr));
    trim_all();
  }
  /* (a) again, after everything above: is the first pattern's figure the
   * path's cost or the moment it ran at? */
  g_failed = 0;
  info("diag_pair_1thr_tcuda_malloc_again", pattern_pairs(&g_allocs[A_TCUDA], NULL, g_iters_pair));
  trim_all();
  g_failed = 0;
  info("diag_current_device_1thr", device_lookup(1, g_iters_pair));
  info("diag_current_device_8thr", device_lookup(NTHREADS, g_iters_pair / 4));
  {
    tc_sim_options so;
    memset(&so, 0, sizeof so);
    so.capacity = (uint64_t)1 << 36;
    tc_backend *be = NULL;
    if (tc_backend_sim_create(&so, &be) == TCUDA_SUCCESS && tc_alloc_create(0, be, NULL, so.capacity, &g_sim) == TCUDA_SUCCESS) {
      g_failed = 0;
      info("diag_sim_pair_1thr", sim_threads(1, 0, g_iters_pair));
      info("diag_sim_pair_8thr_one_stream", sim_threads(NTHREADS, 0, g_iters_thr * 4));
      info("diag_sim_pair_8thr_8streams", sim_threads(NTHREADS, 1, g_iters_thr * 4));
      tc_alloc_destroy(g_sim);
      tc_backend_sim_destroy(be);
    }
  }

  char self[4096];
  ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (self_len <= 0) {
    snprintf(self, sizeof self, "%s", argv[0]);
  } else {
    self[self_len] = 0;
  }
  /* BENCH_ALLOC_HOT_ONLY=1: the hot-path rows only, for old-against-new runs */
  const char *hot_only = getenv("BENCH_ALLOC_HOT_ONLY");
  if (!hot_only || strcmp(hot_only, "1") != 0) {
  /* (e) fragmentation, each variant in its own process */
  {
    const char *variants[] = {"tcuda", "tcuda-expandable", "torch", "torch-expandable", "cudaMallocAsync"};
    double fr[5];
    for (int i = 0; i < 5; i++) {
      char why[512];
      long long res = 0, al = 0;
      fr[i] = NAN;
      if ((i == 2 || i == 3) && !g_allocs[A_TORCH].available) continue;
      if (i == 4 && !g_allocs[A_ASYNC].available) continue;
      fr[i] = frag_variant(self, variants[i], why, sizeof why, &res, &al);
      if (isnan(fr[i]))
        printf("bench_alloc: fragmentation %s: NA (%s)\n", variants[i], why);
      else
        printf("bench_alloc: fragmentation %s: peak reserved %lld, peak allocated %lld, ratio %.4f\n",
               variants[i], res, al, fr[i]);
    }
    double e1[A_COUNT] = {fr[0], fr[2], fr[4]};
    report("frag_peak_reserved_over_allocated", e1, "ratio", "<=torch*1.001 (same policy as PyTorch)");
    double e2[A_COUNT] = {fr[1], fr[3], fr[4]};
    report("frag_expandable_peak_reserved_over_allocated", e2, "ratio", "<=torch*1.001");
  }

  /* (i) policy:compact against the torch-identical policy, in child processes */
  policy_compare(self);
  /* (j) thread_cache:N against the default mode, in child processes */
  tcache_compare(self);

  }

  /* (f) last: a failure inside torch's C++ may end the process */
  if (have_streams) {
    if (cudaEventCreateWithFlags(&g_ma_event, cudaEventDisableTiming) != cudaSuccess)
      g_allocs[A_ASYNC].cross = NULL;
    double f[A_COUNT];
    cross_interleaved((void *const *)streams, g_iters_cross, f);
    report("cross_stream_record_4KiB", f, "ns", "<=torch (alloc on A, record_stream B, free)");
  }

  /* The allocator's books must balance once everything is freed. */
  tcuda_memory_stats_t st;
  if (tcuda_memory_stats(0, &st) == TCUDA_SUCCESS) {
    int64_t cur = st.allocated_bytes[TCUDA_STAT_ALL].current;
    printf("bench_alloc: tcuda allocated_bytes.all.current after all frees = %lld%s\n", (long long)cur,
           cur ? "  <-- LEAK or stats bug" : "");
  }
  return 0;
}
