/* CUDA graphs: torch's CUDAGraph (capture, replay, reset, pool, debug dump),
 * its allocator integration (private pools through the policy's
 * beginAllocateToPool), graph-safe RNG, torch.cuda.graph as a scope and
 * make_graphed_callables for C. Pools: docs/allocator.md; RNG under
 * capture: docs/rng.md. */
#include "alloc/alloc.h"
#include "core/annotate.h"
#include "rng/rng.h"
#include "stream/stream.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

#define GRAPH_MAGIC 0x48505247u /* "GRPH": catches use after destroy */

enum { G_EMPTY = 0, G_CAPTURING = 1, G_CAPTURED = 2 };

typedef struct gen_entry {
  tcuda_generator_t *gen;
  uint64_t inc; /* whole-graph offset increment of the last capture */
} gen_entry;

struct tcuda_graph {
  unsigned magic;
  pthread_mutex_t mu;
  int state;
  int device;
  tcuda_stream_t stream; /* the capture stream */
  _Atomic unsigned long long capture_id;
  atomic_int id_valid; /* capture_id is set: the allocator filter may match */
  uint64_t pool[2];
  cudaGraph_t graph;    /* kept only in debug mode */
  cudaGraphExec_t exec;
  size_t num_nodes;
  int any_rng; /* some increment is nonzero: replays need the prologue */
  gen_entry *gens;
  size_t ngens, capgens;
};

static atomic_int g_debug;
static _Atomic uint64_t g_graph_uid;  /* pools made by graphs: (uid, 0) */
static _Atomic uint64_t g_handle_uid; /* graph_pool_handle(): (0, uid) */

static tcuda_status check_graph(const char *F, const tcuda_graph_t *g) {
  TC_CHECK_ARG(F, g != NULL, "graph");
  if (g->magic != GRAPH_MAGIC)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: graph %p is not a live tcuda graph", F, (const void *)g);
  return TCUDA_SUCCESS;
}

/* ---- small public helpers ---- */

tcuda_status tcuda_graph_capture_mode_from_name(const char *name, tcuda_graph_capture_mode *out) {
  static const char *F = "tcuda_graph_capture_mode_from_name";
  TC_CHECK_ARG(F, name != NULL, "name");
  TC_CHECK_ARG(F, out != NULL, "out");
  if (!strcmp(name, "global")) *out = TCUDA_GRAPH_CAPTURE_GLOBAL;
  else if (!strcmp(name, "thread_local")) *out = TCUDA_GRAPH_CAPTURE_THREAD_LOCAL;
  else if (!strcmp(name, "relaxed")) *out = TCUDA_GRAPH_CAPTURE_RELAXED;
  else
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got %s", F,
                    name);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_graph_pool_handle(tcuda_graph_pool_t *out) {
  TC_CHECK_ARG("tcuda_graph_pool_handle", out != NULL, "out");
  out->id[0] = 0;
  out->id[1] = atomic_fetch_add(&g_handle_uid, 1) + 1;
  return TCUDA_SUCCESS;
}

void tcuda_graph_enable_debug_mode(void) { atomic_store(&g_debug, 1); }

tcuda_status tcuda_is_current_stream_capturing(int *capturing) {
  static const char *F = "tcuda_is_current_stream_capturing";
  TC_CHECK_ARG(F, capturing != NULL, "capturing");
  *capturing = 0;
  if (!tcuda_is_initialized()) return TCUDA_SUCCESS; /* torch: False before CUDA init */
  tcuda_stream_t st;
  tcuda_status s = tc_stream_current(F, -1, &st);
  if (s) return s;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(st.handle, &cs);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return tc_cuda_error(e, F, "cudaStreamIsCapturing");
  }
  *capturing = cs == cudaStreamCaptureStatusActive;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_graph_create(tcuda_graph_t **out) {
  static const char *F = "tcuda_graph_create";
  TC_CHECK_ARG(F, out != NULL, "out");
  *out = NULL;
  tcuda_graph_t *g = (tcuda_graph_t *)calloc(1, sizeof *g);
  if (!g || pthread_mutex_init(&g->mu, NULL)) {
    free(g);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  }
  g->magic = GRAPH_MAGIC;
  g->device = -1;
  *out = g;
  return TCUDA_SUCCESS;
}

/* ---- generators ----
 * The generator's state and its device words belong to the rng layer; a
 * graph keeps its list and goes through rng.h's graph hooks. */

/* Add gen to g's list (registering g with it). *added says whether it was
 * new. Under g->mu. */
static tcuda_status register_gen(const char *F, tcuda_graph_t *g, tcuda_generator_t *gen, int *added) {
  *added = 0;
  for (size_t i = 0; i < g->ngens; i++)
    if (g->gens[i].gen == gen) return TCUDA_SUCCESS;
  if (g->ngens == g->capgens) {
    size_t cap = g->capgens ? 2 * g->capgens : 4;
    gen_entry *n = (gen_entry *)realloc(g->gens, cap * sizeof *n);
    if (!n) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
    g->gens = n;
    g->capgens = cap;
  }
  tcuda_status s = tc_generator_register_graph(F, gen);
  if (!s) {
    g->gens[g->ngens++] = (gen_entry){gen, 0};
    *added = 1;
  }
  return s;
}

static void unregister_gen_at(tcuda_graph_t *g, size_t i) {
  tc_generator_unregister_graph(g->gens[i].gen);
  g->gens[i] = g->gens[--g->ngens];
}

tcuda_status tcuda_graph_register_generator(tcuda_graph_t *g, tcuda_generator_t *gen) {
  static const char *F = "tcuda_graph_register_generator";
  tcuda_status s = check_graph(F, g);
  if (s || (s = tc_generator_check(F, gen))) return s;
  pthread_mutex_lock(&g->mu);
  int added;
  if (g->state == G_CAPTURING)
    s = tc_error(TCUDA_ERROR_INVALID_STATE, "%s: Cannot register the state during capturing stage.", F);
  else
    s = register_gen(F, g, gen, &added);
  pthread_mutex_unlock(&g->mu);
  return s;
}

/* torch's capture_prologue for every registered generator, on the capture
 * stream before capture; all or none. */
static tcuda_status gens_prologue(const char *F, tcuda_graph_t *g, cudaStream_t stream) {
  for (size_t i = 0; i < g->ngens; i++) {
    tcuda_status s = tc_generator_capture_prologue(F, g->gens[i].gen, stream);
    if (s) {
      while (i-- > 0) (void)tc_generator_capture_epilogue(g->gens[i].gen);
      return s;
    }
  }
  return TCUDA_SUCCESS;
}

static void gens_epilogue(tcuda_graph_t *g, int keep) {
  g->any_rng = 0;
  for (size_t i = 0; i < g->ngens; i++) {
    uint64_t inc = tc_generator_capture_epilogue(g->gens[i].gen);
    g->gens[i].inc = keep ? inc : 0;
    g->any_rng |= g->gens[i].inc != 0;
  }
}

/* ---- capture ---- */

/* The allocator's filter: does `stream` belong to this graph's capture? */
static int capture_filter(void *ctx, uint64_t stream) {
  tcuda_graph_t *g = (tcuda_graph_t *)ctx;
  if (!atomic_load_explicit(&g->id_valid, memory_order_acquire)) return 0;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
#if CUDART_VERSION >= 13000
  cudaError_t e = cudaStreamGetCaptureInfo((cudaStream_t)(uintptr_t)stream, &cs, &id, NULL, NULL, NULL, NULL);
#else
  cudaError_t e = cudaStreamGetCaptureInfo((cudaStream_t)(uintptr_t)stream, &cs, &id, NULL, NULL, NULL);
#endif
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* e.g. the legacy stream while a blocking stream captures */
    return 0;
  }
  return cs == cudaStreamCaptureStatusActive && id == atomic_load_explicit(&g->capture_id, memory_order_relaxed);
}

static tcuda_status check_pool_token(const char *F, const tcuda_graph_pool_t *pool) {
  uint64_t a = pool->id[0], b = pool->id[1];
  if (a && b)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: pool (%llu,%llu) is not a pool token (both ids are set)", F,
                    (unsigned long long)a, (unsigned long long)b);
  if (!a && !b)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: pool (0,0) is the default pool; pass NULL for a new private pool",
                    F);
  if ((a && a > atomic_load(&g_graph_uid)) || (b && b > atomic_load(&g_handle_uid)))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: pool (%llu,%llu) was not made by tcuda_graph_pool_handle or tcuda_graph_pool", F,
                    (unsigned long long)a, (unsigned long long)b);
  return TCUDA_SUCCESS;
}

static tcuda_status capture_begin_locked(const char *F, tcuda_graph_t *g, const tcuda_graph_pool_t *pool,
                                         tcuda_graph_capture_mode mode) {
  enum cudaStreamCaptureMode cmode;
  switch (mode) {
  case TCUDA_GRAPH_CAPTURE_GLOBAL: cmode = cudaStreamCaptureModeGlobal; break;
  case TCUDA_GRAPH_CAPTURE_THREAD_LOCAL: cmode = cudaStreamCaptureModeThreadLocal; break;
  case TCUDA_GRAPH_CAPTURE_RELAXED: cmode = cudaStreamCaptureModeRelaxed; break;
  default:
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got %d", F,
                    (int)mode);
  }
  tcuda_status s;
  if (pool && (s = check_pool_token(F, pool))) return s;
  if (g->state != G_EMPTY)
    return tc_error(TCUDA_ERROR_INVALID_STATE,
                    "%s: This CUDAGraph instance already owns a captured graph. To capture a new graph, create a new "
                    "instance.%s", F, g->state == G_CAPTURING ? " (its capture is still under way)" : "");
  int dev = -1;
  tcuda_stream_t st;
  if ((s = tc_stream_current(F, dev, &st))) return s;
  dev = st.device;
  if (st.id == 0)
    return tc_error(TCUDA_ERROR_INVALID_STATE,
                    "%s: CUDA graphs must be captured on a non-default stream. (However, after capture, it's ok to "
                    "replay them on the default stream.)", F);
  for (size_t i = 0; i < g->ngens; i++) {
    int gdev = tcuda_generator_device(g->gens[i].gen);
    if (gdev != dev)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: registered generator %p is on device %d, the capture on %d",
                      F, (void *)g->gens[i].gen, gdev, dev);
  }
  tc_alloc *a;
  if ((s = tc_alloc_of_device(F, &dev, &a))) return s;
  tcuda_generator_t *defgen;
  if ((s = tc_default_generator(F, dev, &defgen))) return s;

  /* Checks done; from here every failure undoes what came before. */
  int saved;
  if ((s = tc_on_device_begin(F, dev, &saved))) return s;
  int added = 0;
  uint64_t id[2] = {0, 0};
  if ((s = register_gen(F, g, defgen, &added))) goto out;
  if ((s = gens_prologue(F, g, st.handle))) goto unregister;
  if (pool) {
    id[0] = pool->id[0];
    id[1] = pool->id[1];
  } else {
    id[0] = atomic_fetch_add(&g_graph_uid, 1) + 1;
  }
  atomic_store(&g->id_valid, 0);
  /* Before BeginCapture, as torch: a free racing with the start must not
   * record an event into the capture. */
  if ((s = tc_alloc_begin_allocate_to_pool(a, id, capture_filter, g))) {
    char msg[TC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", tcuda_last_error());
    s = tc_error(s, "%s: %s", F, msg);
    goto epilogue;
  }
  cudaError_t e = cudaStreamBeginCapture(st.handle, cmode);
  unsigned long long cid = 0;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (e == cudaSuccess) {
#if CUDART_VERSION >= 13000
    e = cudaStreamGetCaptureInfo(st.handle, &cs, &cid, NULL, NULL, NULL, NULL);
#else
    e = cudaStreamGetCaptureInfo(st.handle, &cs, &cid, NULL, NULL, NULL);
#endif
    if (e != cudaSuccess) {
      cudaGraph_t junk = NULL;
      (void)cudaGetLastError();
      if (cudaStreamEndCapture(st.handle, &junk) == cudaSuccess && junk) cudaGraphDestroy(junk);
      (void)cudaGetLastError();
      s = tc_cuda_error(e, F, "cudaStreamGetCaptureInfo");
    }
  } else {
    (void)cudaGetLastError();
    s = tc_cuda_error(e, F, "cudaStreamBeginCapture");
  }
  if (s) {
    (void)tc_alloc_end_allocate_to_pool(a, id);
    (void)tc_alloc_release_pool(a, id);
    goto epilogue;
  }
  atomic_store_explicit(&g->capture_id, cid, memory_order_relaxed);
  atomic_store_explicit(&g->id_valid, 1, memory_order_release);
  g->pool[0] = id[0];
  g->pool[1] = id[1];
  g->device = dev;
  g->stream = st;
  g->state = G_CAPTURING;
  goto out;
epilogue:
  gens_epilogue(g, 0);
unregister:
  if (added) unregister_gen_at(g, g->ngens - 1);
out:
  tc_on_device_end(saved);
  return s;
}

tcuda_status tcuda_graph_capture_begin(tcuda_graph_t *g, const tcuda_graph_pool_t *pool,
                                       tcuda_graph_capture_mode mode) {
  static const char *F = "tcuda_graph_capture_begin";
  tcuda_status s = check_graph(F, g);
  if (s) return s;
  TC_ANNOTATE_BEGIN("tcuda_graph_capture_begin");
  pthread_mutex_lock(&g->mu);
  s = capture_begin_locked(F, g, pool, mode);
  pthread_mutex_unlock(&g->mu);
  TC_ANNOTATE_END();
  return s;
}

/* Stop routing into the pool and end capture mode on the generators; the
 * pool use is dropped too unless the capture is kept. */
static void capture_teardown(tcuda_graph_t *g, int keep) {
  int dev = g->device;
  tc_alloc *a;
  atomic_store(&g->id_valid, 0);
  if (!tc_alloc_of_device("capture_end", &dev, &a)) {
    (void)tc_alloc_end_allocate_to_pool(a, g->pool);
    if (!keep) (void)tc_alloc_release_pool(a, g->pool);
  }
  gens_epilogue(g, keep);
  if (!keep) {
    g->pool[0] = g->pool[1] = 0;
    g->state = G_EMPTY;
  }
}

static tcuda_status capture_end_locked(const char *F, tcuda_graph_t *g) {
  if (g->state != G_CAPTURING)
    return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: capture_end() called before capture_begin().", F);
  tcuda_stream_t cur;
  tcuda_status s = tc_stream_current(F, -1, &cur);
  if (s) return s;
  if (cur.device != g->device || cur.handle != g->stream.handle)
    return tc_error(TCUDA_ERROR_INVALID_STATE,
                    "%s: Capture must end on the same stream it began on. (began on stream id %lld of device %d; the "
                    "current stream is id %lld of device %d)", F, (long long)g->stream.id, g->device,
                    (long long)cur.id, cur.device);
  int saved;
  if ((s = tc_on_device_begin(F, g->device, &saved))) return s;
  cudaGraph_t graph = NULL;
  cudaError_t e = cudaStreamEndCapture(g->stream.handle, &graph);
  if (e != cudaSuccess || !graph) {
    (void)cudaGetLastError();
    if (graph) cudaGraphDestroy(graph);
    capture_teardown(g, 0);
    tc_on_device_end(saved);
    if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaStreamEndCapture");
    return tc_error(TCUDA_ERROR_CUDA, "%s: Invalid capture.", F);
  }
  size_t n = 0;
  e = cudaGraphGetNodes(graph, NULL, &n);
  cudaGraphExec_t exec = NULL;
  if (e == cudaSuccess)
    e = cudaGraphInstantiateWithFlags(&exec, graph,
                                      cudaGraphInstantiateFlagAutoFreeOnLaunch | cudaGraphInstantiateFlagUseNodePriority);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    cudaGraphDestroy(graph);
    capture_teardown(g, 0);
    tc_on_device_end(saved);
    return tc_cuda_error(e, F, "cudaGraphInstantiateWithFlags");
  }
  capture_teardown(g, 1);
  if (atomic_load(&g_debug)) {
    g->graph = graph;
  } else {
    cudaGraphDestroy(graph);
  }
  tc_on_device_end(saved);
  g->exec = exec;
  g->num_nodes = n;
  g->state = G_CAPTURED;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_graph_capture_end(tcuda_graph_t *g) {
  static const char *F = "tcuda_graph_capture_end";
  tcuda_status s = check_graph(F, g);
  if (s) return s;
  TC_ANNOTATE_BEGIN("tcuda_graph_capture_end");
  pthread_mutex_lock(&g->mu);
  s = capture_end_locked(F, g);
  pthread_mutex_unlock(&g->mu);
  TC_ANNOTATE_END();
  return s;
}

/* ---- replay ---- */

/* torch's replay_prologue for the generators the graph draws from. */
static tcuda_status gens_replay_prologue(const char *F, tcuda_graph_t *g, cudaStream_t stream) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  cudaError_t e = cudaStreamIsCapturing(stream, &cs);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return tc_cuda_error(e, F, "cudaStreamIsCapturing");
  }
  if (cs != cudaStreamCaptureStatusNone)
    return tc_error(TCUDA_ERROR_INVALID_STATE,
                    "%s: Cannot prepare for replay during capturing stage (the graph draws random numbers, so its "
                    "replay cannot be captured)", F);
  for (size_t i = 0; i < g->ngens; i++) {
    if (!g->gens[i].inc) continue;
    tcuda_status s = tc_generator_replay_prologue(F, g->gens[i].gen, g->gens[i].inc, stream);
    if (s) return s;
  }
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_graph_replay(tcuda_graph_t *g, const tcuda_stream_t *stream) {
  static const char *F = "tcuda_graph_replay";
  tcuda_status s = check_graph(F, g);
  if (s) return s;
  pthread_mutex_lock(&g->mu);
  if (g->state != G_CAPTURED) {
    pthread_mutex_unlock(&g->mu);
    return tc_error(TCUDA_ERROR_INVALID_STATE,
                    "%s: Called CUDAGraph::replay without a preceding successful capture.%s", F,
                    g->state == G_CAPTURING ? " (the capture is still under way)" : "");
  }
  tcuda_stream_t st;
  if (stream) {
    if (stream->device != g->device)
      s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: stream is on device %d but the graph was captured on device %d",
                   F, stream->device, g->device);
    else
      s = tc_stream_check(F, "stream", *stream);
    st = *stream;
  } else {
    st = tc_current_stream_fast(g->device);
  }
  int saved = -1;
  if (!s) s = tc_on_device_begin(F, g->device, &saved);
  if (!s) {
    if (g->any_rng) s = gens_replay_prologue(F, g, st.handle);
    if (!s) {
      cudaError_t e = cudaGraphLaunch(g->exec, st.handle);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        s = tc_cuda_error(e, F, "cudaGraphLaunch");
      }
    }
    tc_on_device_end(saved);
  }
  pthread_mutex_unlock(&g->mu);
  return s;
}

/* ---- reset, destroy, queries ---- */

/* Drop the captured graph and the pool use. Under g->mu; state CAPTURED. */
static tcuda_status drop_capture(const char *F, tcuda_graph_t *g) {
  int dev = g->device, saved = -1;
  tc_alloc *a;
  tcuda_status s = tc_alloc_of_device(F, &dev, &a);
  /* cuBLAS workspaces made during the capture hold pool memory (torch
   * clears them here too). */
  tcuda_status sb = tcuda_blas_clear_workspaces();
  if (!s) s = tc_alloc_release_pool(a, g->pool);
  if (sb && !s) s = sb;
  if (tc_on_device_begin(F, g->device, &saved) == TCUDA_SUCCESS) {
    if (g->graph) cudaGraphDestroy(g->graph);
    if (g->exec) cudaGraphExecDestroy(g->exec);
    (void)cudaGetLastError();
    tc_on_device_end(saved);
  }
  g->graph = NULL;
  g->exec = NULL;
  g->num_nodes = 0;
  g->pool[0] = g->pool[1] = 0;
  g->any_rng = 0;
  for (size_t i = 0; i < g->ngens; i++) g->gens[i].inc = 0;
  g->state = G_EMPTY;
  return s;
}

tcuda_status tcuda_graph_reset(tcuda_graph_t *g) {
  static const char *F = "tcuda_graph_reset";
  tcuda_status s = check_graph(F, g);
  if (s) return s;
  pthread_mutex_lock(&g->mu);
  if (g->state == G_CAPTURING)
    s = tc_error(TCUDA_ERROR_INVALID_STATE, "%s: the graph is capturing; end the capture first", F);
  else if (g->state == G_CAPTURED)
    s = drop_capture(F, g);
  pthread_mutex_unlock(&g->mu);
  return s;
}

tcuda_status tcuda_graph_destroy(tcuda_graph_t *g) {
  static const char *F = "tcuda_graph_destroy";
  if (!g) return TCUDA_SUCCESS;
  tcuda_status s = check_graph(F, g);
  if (s) return s;
  pthread_mutex_lock(&g->mu);
  if (g->state == G_CAPTURING) { /* discard the capture under way */
    int saved = -1;
    if (tc_on_device_begin(F, g->device, &saved) == TCUDA_SUCCESS) {
      cudaGraph_t junk = NULL;
      if (cudaStreamEndCapture(g->stream.handle, &junk) == cudaSuccess && junk) cudaGraphDestroy(junk);
      (void)cudaGetLastError();
      tc_on_device_end(saved);
    }
    capture_teardown(g, 0);
  } else if (g->state == G_CAPTURED) {
    s = drop_capture(F, g);
  }
  while (g->ngens) unregister_gen_at(g, g->ngens - 1);
  free(g->gens);
  g->magic = 0;
  pthread_mutex_unlock(&g->mu);
  pthread_mutex_destroy(&g->mu);
  free(g);
  return s;
}

static tcuda_status captured(const char *F, const tcuda_graph_t *g, const char *what) {
  if (g->state != G_CAPTURED)
    return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: Called CUDAGraph::%s without a preceding successful capture.", F,
                    what);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_graph_pool(const tcuda_graph_t *g, tcuda_graph_pool_t *out) {
  static const char *F = "tcuda_graph_pool";
  tcuda_status s = check_graph(F, g);
  if (s) return s;
  TC_CHECK_ARG(F, out != NULL, "out");
  pthread_mutex_lock((pthread_mutex_t *)&g->mu);
  if (!(s = captured(F, g, "pool"))) {
    out->id[0] = g->pool[0];
    out->id[1] = g->pool[1];
  }
  pthread_mutex_unlock((pthread_mutex_t *)&g->mu);
  return s;
}

tcuda_status tcuda_graph_num_nodes(const tcuda_graph_t *g, size_t *n) {
  static const char *F = "tcuda_graph_num_nodes";
  tcuda_status s = check_graph(F, g);
  if (s) return s;
  TC_CHECK_ARG(F, n != NULL, "num_nodes");
  pthread_mutex_lock((pthread_mutex_t *)&g->mu);
  if (!(s = captured(F, g, "num_nodes"))) *n = g->num_nodes;
  pthread_mutex_unlock((pthread_mutex_t *)&g->mu);
  return s;
}

struct CUgraphExec_st *tcuda_graph_exec_handle(const tcuda_graph_t *g) {
  if (!g || g->magic != GRAPH_MAGIC) return NULL;
  pthread_mutex_lock((pthread_mutex_t *)&g->mu);
  cudaGraphExec_t e = g->state == G_CAPTURED ? g->exec : NULL;
  pthread_mutex_unlock((pthread_mutex_t *)&g->mu);
  return e;
}

tcuda_status tcuda_graph_debug_dump(tcuda_graph_t *g, const char *path) {
  static const char *F = "tcuda_graph_debug_dump";
  tcuda_status s = check_graph(F, g);
  if (s) return s;
  TC_CHECK_ARG(F, path != NULL, "path");
  pthread_mutex_lock(&g->mu);
  if ((s = captured(F, g, "debug_dump"))) goto out;
  if (!g->graph) {
    s = tc_error(TCUDA_ERROR_INVALID_STATE,
                 "%s: CUDA Graphs debug not enabled, set with tcuda_graph_enable_debug_mode() before capture_end", F);
    goto out;
  }
  FILE *f = fopen(path, "w"); /* CUDA's own error would not say why */
  if (!f) {
    s = tc_error(TCUDA_ERROR_IO, "%s: cannot write %s: %s", F, path, strerror(errno));
    goto out;
  }
  fclose(f);
  cudaError_t e = cudaGraphDebugDotPrint(g->graph, path, cudaGraphDebugDotFlagsVerbose);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    s = tc_cuda_error(e, F, "cudaGraphDebugDotPrint");
  }
out:
  pthread_mutex_unlock(&g->mu);
  return s;
}

/* ---- torch.cuda.graph as a scope ---- */

static tcuda_stream_t g_side[TC_MAX_DEVICES];
static pthread_mutex_t g_side_mu = PTHREAD_MUTEX_INITIALIZER;

tcuda_status tcuda_graph_capture_scope_begin(tcuda_graph_capture_scope_t *sc, tcuda_graph_t *g,
                                             const tcuda_graph_pool_t *pool, const tcuda_stream_t *stream,
                                             tcuda_graph_capture_mode mode) {
  static const char *F = "tcuda_graph_capture_scope_begin";
  TC_CHECK_ARG(F, sc != NULL, "scope");
  memset(sc, 0, sizeof *sc);
  tcuda_status s = check_graph(F, g);
  if (s) return s;
  if ((unsigned)mode > TCUDA_GRAPH_CAPTURE_RELAXED)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got %d", F,
                    (int)mode);
  if (pool && (s = check_pool_token(F, pool))) return s;
  int dev = -1;
  if ((s = tc_resolve_device(F, &dev))) return s;
  tcuda_stream_t st;
  if (stream) {
    if ((s = tc_stream_check(F, "stream", *stream))) return s;
    st = *stream;
  } else {
    if (dev >= TC_MAX_DEVICES)
      return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: device %d is beyond tcuda's limit", F, dev);
    pthread_mutex_lock(&g_side_mu);
    if (!g_side[dev].handle) s = tcuda_stream_from_pool(dev, 0, &g_side[dev]);
    st = g_side[dev];
    pthread_mutex_unlock(&g_side_mu);
    if (s) return s;
  }
  /* torch.cuda.graph.__enter__: synchronize, empty the cache, then capture. */
  if ((s = tcuda_synchronize(st.device)) || (s = tcuda_empty_cache())) return s;
  if ((s = tcuda_stream_guard_begin(&sc->guard, st))) return s;
  if ((s = tcuda_graph_capture_begin(g, pool, mode))) {
    char msg[TC_ERRMSG_MAX];
    snprintf(msg, sizeof msg, "%s", tcuda_last_error());
    (void)tcuda_stream_guard_end(&sc->guard);
    return tc_error(s, "%s", msg);
  }
  sc->graph = g;
  sc->active = 1;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_graph_capture_scope_end(tcuda_graph_capture_scope_t *sc) {
  static const char *F = "tcuda_graph_capture_scope_end";
  TC_CHECK_ARG(F, sc != NULL, "scope");
  if (!sc->active) return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: the scope is not active", F);
  sc->active = 0;
  tcuda_status s = tcuda_graph_capture_end(sc->graph);
  char msg[TC_ERRMSG_MAX];
  if (s) snprintf(msg, sizeof msg, "%s", tcuda_last_error());
  (void)tcuda_stream_guard_end(&sc->guard);
  return s ? tc_error(s, "%s", msg) : TCUDA_SUCCESS;
}

/* ---- make_graphed_callables ---- */

tcuda_status tcuda_graph_capture_fn(tcuda_graph_fn fn, void *user, const tcuda_graph_pool_t *pool, int warmups,
                                    tcuda_graph_t **out) {
  static const char *F = "tcuda_graph_capture_fn";
  TC_CHECK_ARG(F, out != NULL, "out");
  *out = NULL;
  TC_CHECK_ARG(F, fn != NULL, "fn");
  if (warmups < 0) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: num_warmup_iters %d is negative", F, warmups);
  tcuda_status s;
  if (pool && (s = check_pool_token(F, pool))) return s;
  int dev = -1;
  tcuda_stream_t side;
  if ((s = tc_resolve_device(F, &dev)) || (s = tcuda_stream_from_pool(dev, 0, &side))) return s;
  tcuda_graph_t *g;
  if ((s = tcuda_graph_create(&g))) return s;
  tcuda_stream_guard_t guard;
  if ((s = tcuda_synchronize(dev)) || (s = tcuda_stream_guard_begin(&guard, side))) {
    tcuda_graph_destroy(g);
    return s;
  }
  char msg[TC_ERRMSG_MAX];
  const char *stage = "warm-up";
  for (int i = 0; i < warmups && !s; i++)
    if ((s = fn(user, side))) snprintf(msg, sizeof msg, "%s", tcuda_last_error());
  if (!s && (s = tcuda_synchronize(dev))) snprintf(msg, sizeof msg, "%s", tcuda_last_error());
  if (!s) {
    stage = "capture";
    if ((s = tcuda_graph_capture_begin(g, pool, TCUDA_GRAPH_CAPTURE_GLOBAL)) ||
        (s = fn(user, side)) || (s = tcuda_graph_capture_end(g)))
      snprintf(msg, sizeof msg, "%s", tcuda_last_error());
  }
  (void)tcuda_stream_guard_end(&guard);
  if (s) {
    tcuda_graph_destroy(g); /* discards a capture still under way */
    return tc_error(s, "%s: %s failed: %s", F, stage, msg);
  }
  *out = g;
  return TCUDA_SUCCESS;
}
