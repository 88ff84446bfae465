/* bench_frag's child: one allocator replays one trace on the GPU in a fresh
 * process, so its peaks are its own. Allocations go to the trace's stream
 * (side streams made here), frees to the block's stream, in trace order. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "tcuda.h"
#include "frag.h"
#include "mempool.h"
#ifdef BENCH_HAVE_C10
#include "c10_alloc_shim.h"
#endif

/* Child: one allocator replays one trace on the GPU. */
typedef struct gpu_alloc {
  int (*alloc)(void **p, size_t n, int stream); /* 0 ok, 1 out of memory, -1 failure */
  void (*free)(void *p, int stream);
  int (*empty)(void);
} gpu_alloc;

static char g_why[512];
static cudaStream_t g_streams[FRAG_MAX_STREAM + 1];

static int replay_gpu(const ftrace *t, const gpu_alloc *A, long long *ooms) {
  void **ptr = calloc(t->nslots ? t->nslots : 1, sizeof *ptr);
  uint16_t *pstream = calloc(t->nslots ? t->nslots : 1, sizeof *pstream);
  if (!ptr || !pstream) {
    snprintf(g_why, sizeof g_why, "out of host memory");
    free(ptr);
    free(pstream);
    return -1;
  }
  int rc = 0;
  for (size_t i = 0; i < t->n && !rc; i++) {
    const fop *o = &t->ops[i];
    if (o->kind == OP_ALLOC) {
      pstream[o->slot] = o->stream;
      if (o->size == 0) continue;
      int r = A->alloc(&ptr[o->slot], (size_t)o->size, o->stream);
      if (r > 0) {
        ptr[o->slot] = NULL;
        (*ooms)++;
      } else if (r < 0) {
        rc = -1;
      }
    } else if (o->kind == OP_FREE) {
      if (ptr[o->slot]) A->free(ptr[o->slot], pstream[o->slot]);
      ptr[o->slot] = NULL;
    } else if (A->empty()) {
      rc = -1;
    }
  }
  free(ptr);
  free(pstream);
  return rc;
}

/* tcuda */
static tcuda_stream_t g_tstreams[FRAG_MAX_STREAM + 1];
static int tc_alloc(void **p, size_t n, int stream) {
  tcuda_status s = tcuda_malloc_on(p, n, 0, g_tstreams[stream]);
  if (s == TCUDA_SUCCESS) return 0;
  if (s == TCUDA_ERROR_OUT_OF_MEMORY) return 1;
  snprintf(g_why, sizeof g_why, "tcuda_malloc_on(%zu): %s", n, tcuda_last_error());
  return -1;
}
static void tc_free(void *p, int stream) {
  (void)stream;
  if (tcuda_free(p) != TCUDA_SUCCESS && !g_why[0]) snprintf(g_why, sizeof g_why, "tcuda_free: %s", tcuda_last_error());
}
static int tc_empty(void) {
  if (tcuda_empty_cache() == TCUDA_SUCCESS) return 0;
  snprintf(g_why, sizeof g_why, "tcuda_empty_cache: %s", tcuda_last_error());
  return -1;
}

/* cudaMallocAsync on a private pool that keeps everything */
static cudaMemPool_t g_pool;
static int ma_alloc(void **p, size_t n, int stream) {
  cudaError_t e = cudaMallocFromPoolAsync(p, n, g_pool, g_streams[stream]);
  if (e == cudaSuccess) return 0;
  cudaGetLastError(); /* not sticky: the replay goes on */
  if (e == cudaErrorMemoryAllocation) return 1;
  snprintf(g_why, sizeof g_why, "cudaMallocFromPoolAsync(%zu): %s", n, cudaGetErrorString(e));
  return -1;
}
static void ma_free(void *p, int stream) {
  cudaError_t e = cudaFreeAsync(p, g_streams[stream]);
  if (e != cudaSuccess && !g_why[0]) snprintf(g_why, sizeof g_why, "cudaFreeAsync: %s", cudaGetErrorString(e));
}
static int ma_empty(void) {
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaMemPoolTrimTo(g_pool, 0);
  if (e == cudaSuccess) return 0;
  snprintf(g_why, sizeof g_why, "empty cache (cudaMemPoolTrimTo): %s", cudaGetErrorString(e));
  return -1;
}

#ifdef BENCH_HAVE_C10
static int c10_alloc_fn(void **p, size_t n, int stream) {
  *p = c10_raw_alloc(n, g_streams[stream]);
  if (*p) return 0;
  const char *m = c10_last_error();
  if (strstr(m, "out of memory")) return 1;
  snprintf(g_why, sizeof g_why, "%s", m);
  return -1;
}
static void c10_free_fn(void *p, int stream) {
  (void)stream;
  c10_raw_delete(p);
}
static int c10_empty_fn(void) {
  if (!c10_empty_cache()) return 0;
  snprintf(g_why, sizeof g_why, "%s", c10_last_error());
  return -1;
}
#endif

__attribute__((format(printf, 1, 2))) static int child_na(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("FRAG NA ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  return 0;
}

int frag_child_main(const char *kind, const char *config, const char *path) {
  unsetenv("TCUDA_ALLOC_CONF");
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF");
  const char *to = getenv("BENCH_FRAG_CHILD_TIMEOUT");
  alarm(to && atoi(to) > 0 ? (unsigned)atoi(to) : 150);
  ftrace t;
  char err[512];
  if (frag_trace_parse(path, &t, err, sizeof err)) return child_na("%s", err);
  cudaError_t e = cudaSetDevice(0);
  if (e == cudaSuccess) e = cudaFree(NULL); /* the context, before any allocator */
  if (e != cudaSuccess) return child_na("CUDA: %s", cudaGetErrorString(e));
  g_streams[0] = NULL;
  for (int i = 1; i < t.nstreams; i++)
    if ((e = cudaStreamCreateWithFlags(&g_streams[i], cudaStreamNonBlocking)) != cudaSuccess)
      return child_na("cudaStreamCreate: %s", cudaGetErrorString(e));
  long long ooms = 0, reserved = -1, allocated = -1;
  if (!strcmp(kind, "tcuda")) {
    if (*config && tcuda_allocator_set_config(config) != TCUDA_SUCCESS)
      return child_na("tcuda_allocator_set_config: %s", tcuda_last_error());
    if (tcuda_init() != TCUDA_SUCCESS) return child_na("tcuda_init: %s", tcuda_last_error());
    if (tcuda_default_stream(0, &g_tstreams[0]) != TCUDA_SUCCESS)
      return child_na("tcuda_default_stream: %s", tcuda_last_error());
    for (int i = 1; i < t.nstreams; i++)
      if (tcuda_stream_external(g_streams[i], 0, &g_tstreams[i]) != TCUDA_SUCCESS)
        return child_na("tcuda_stream_external: %s", tcuda_last_error());
    gpu_alloc A = {tc_alloc, tc_free, tc_empty};
    if (replay_gpu(&t, &A, &ooms) || g_why[0]) return child_na("%s", g_why);
    tcuda_memory_stats_t st;
    if (tcuda_memory_stats(0, &st) != TCUDA_SUCCESS) return child_na("tcuda_memory_stats: %s", tcuda_last_error());
    reserved = st.reserved_bytes[TCUDA_STAT_ALL].peak;
    allocated = st.allocated_bytes[TCUDA_STAT_ALL].peak;
  } else if (!strcmp(kind, "async")) {
    char why[256];
    if (bench_make_pool(&g_pool, why, sizeof why)) return child_na("%s", why);
    gpu_alloc A = {ma_alloc, ma_free, ma_empty};
    if (replay_gpu(&t, &A, &ooms) || g_why[0]) return child_na("%s", g_why);
    if ((e = cudaDeviceSynchronize()) != cudaSuccess) return child_na("cudaDeviceSynchronize: %s", cudaGetErrorString(e));
    uint64_t rh = 0, uh = 0;
    if ((e = cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrReservedMemHigh, &rh)) != cudaSuccess ||
        (e = cudaMemPoolGetAttribute(g_pool, cudaMemPoolAttrUsedMemHigh, &uh)) != cudaSuccess)
      return child_na("cudaMemPoolGetAttribute: %s", cudaGetErrorString(e));
    reserved = (long long)rh;
    allocated = (long long)uh;
  } else if (!strcmp(kind, "torch")) {
#ifdef BENCH_HAVE_C10
    int ndev = 0;
    cudaGetDeviceCount(&ndev);
    if (*config && c10_set_settings(config)) return child_na("%s", c10_last_error());
    if (c10_init(ndev)) return child_na("%s", c10_last_error());
    gpu_alloc A = {c10_alloc_fn, c10_free_fn, c10_empty_fn};
    if (replay_gpu(&t, &A, &ooms) || g_why[0]) return child_na("%s", g_why);
    c10_shim_stats st;
    if (c10_stats(0, &st)) return child_na("%s", c10_last_error());
    reserved = st.reserved_peak;
    allocated = st.allocated_peak;
#else
    return child_na("%s", "not built with PyTorch's c10");
#endif
  } else {
    return child_na("unknown allocator %s", kind);
  }
  frag_trace_free(&t);
  printf("FRAG %lld %lld %lld\n", reserved, allocated, ooms);
  return 0;
}
