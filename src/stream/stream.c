/* Streams: per-device pools, dedicated and external streams, the default
 * stream, the per-thread current stream and the stream guard. Follows c10's
 * CUDAStream and torch.cuda.Stream. */
#include "stream.h"
#include "core/fault.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

_Thread_local tcuda_stream_t tc_tl_current_stream[TC_MAX_DEVICES];
void (*_Atomic tc_stream_destroy_hook)(int device, uint64_t handle);

/* ---- stream ids (layout in tcuda.h) ---- */
#define ID_NATIVE 1
#define ID_TYPE_SHIFT 1
#define ID_SLOT_SHIFT 5
#define ID_DEVICE_SHIFT 10
#define ID_SERIAL_SHIFT 20

static int64_t pool_id(int device, int level, unsigned slot) {
  return ((int64_t)device << ID_DEVICE_SHIFT) | ((int64_t)slot << ID_SLOT_SHIFT) |
         ((int64_t)(level + 1) << ID_TYPE_SHIFT) | ID_NATIVE;
}

static int id_type(int64_t id) { return (int)((id >> ID_TYPE_SHIFT) & 0xF); }

/* External ids are the pointer itself; tcuda's own ids are odd and never
 * equal their (aligned) handle. */
static int is_external(tcuda_stream_t s) {
  return s.id != 0 && (s.id == (int64_t)(intptr_t)s.handle || !(s.id & ID_NATIVE));
}

/* ---- device helpers ---- */

/* Devices below this skip the init and range checks on the hot paths
 * (current stream, pool get). 0 until CUDA is initialised, and reset in a
 * forked child so that it gets the FORKED error from the slow path. */
static atomic_int g_fast_ndev;
static atomic_int g_atfork_done;

static void fast_off_in_child(void) { atomic_store_explicit(&g_fast_ndev, 0, memory_order_relaxed); }

static void fast_on(void) {
  if (!atomic_exchange(&g_atfork_done, 1)) pthread_atfork(NULL, NULL, fast_off_in_child);
  int n = tc_device_count();
  atomic_store_explicit(&g_fast_ndev, n < TC_MAX_DEVICES ? n : TC_MAX_DEVICES, memory_order_relaxed);
}

static inline int fast_ok(int device) {
  return (unsigned)device < (unsigned)atomic_load_explicit(&g_fast_ndev, memory_order_relaxed);
}

static tcuda_status resolve(const char *F, int *device) {
  tcuda_status s = tc_resolve_device(F, device);
  if (s) return s;
  if (*device >= TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: device %d: tcuda streams support at most %d devices", F,
                    *device, TC_MAX_DEVICES);
  if (!atomic_load_explicit(&g_fast_ndev, memory_order_relaxed)) fast_on();
  return TCUDA_SUCCESS;
}

tcuda_status tc_stream_check(const char *F, const char *arg, tcuda_stream_t s) {
  if (fast_ok(s.device)) return TCUDA_SUCCESS;
  if (s.device < 0)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: %s.device is %d, not a device index", F, arg, s.device);
  int d = s.device;
  return resolve(F, &d);
}

tcuda_status tc_on_device_begin(const char *F, int device, int *saved) {
  *saved = -1;
  int cur;
  tcuda_status s = tcuda_current_device(&cur);
  if (s) return s;
  /* Same device: only a pending target has to become real for CUDA. */
  if (cur == device) return tc_apply_target_device(F);
  int prev;
  if ((s = tcuda_device_exchange(device, &prev))) return s;
  *saved = prev;
  return TCUDA_SUCCESS;
}

void tc_on_device_end(int saved) {
  if (saved < 0) return;
  int ignored;
  (void)tcuda_device_maybe_exchange(saved, &ignored); /* best effort, like c10's guard destructor */
}

static tcuda_status priority_range_on(const char *F, int device, int *least, int *greatest) {
  int saved;
  tcuda_status s = tc_on_device_begin(F, device, &saved);
  if (s) return s;
  cudaError_t e = cudaDeviceGetStreamPriorityRange(least, greatest);
  tc_on_device_end(saved);
  if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaDeviceGetStreamPriorityRange");
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_stream_priority_range(int *least, int *greatest) {
  static const char *F = "tcuda_stream_priority_range";
  TC_CHECK_ARG(F, least, "least");
  TC_CHECK_ARG(F, greatest, "greatest");
  int device = -1, l, g;
  tcuda_status s = resolve(F, &device);
  if (s || (s = priority_range_on(F, device, &l, &g))) return s;
  const int lowest = -(TC_MAX_PRIORITY_LEVELS - 1);
  *least = l;
  *greatest = g > lowest ? g : lowest;
  return TCUDA_SUCCESS;
}

/* ---- pools ---- */

typedef struct pool {
  atomic_int ready;
  int levels;
  cudaStream_t streams[TC_MAX_PRIORITY_LEVELS][TC_STREAMS_PER_POOL];
  atomic_uint next[TC_MAX_PRIORITY_LEVELS];
} pool_t;

static pool_t g_pools[TC_MAX_DEVICES];
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;

/* All levels x 32 streams at once, as c10 does; on failure nothing stays. */
static tcuda_status pool_create(const char *F, int device, pool_t *p) {
  int saved, least, greatest;
  tcuda_status s = priority_range_on(F, device, &least, &greatest);
  if (s || (s = tc_on_device_begin(F, device, &saved))) return s;
  int levels = least - greatest + 1;
  if (levels > TC_MAX_PRIORITY_LEVELS) levels = TC_MAX_PRIORITY_LEVELS;
  if (levels < 1) levels = 1;
  int n = levels * TC_STREAMS_PER_POOL, made = 0;
  cudaError_t e = cudaSuccess;
  for (; made < n; made++) {
    int level = made / TC_STREAMS_PER_POOL, slot = made % TC_STREAMS_PER_POOL;
    e = TC_FAULT(TC_FAULT_STREAM_CREATE)
            ? cudaErrorMemoryAllocation
            : cudaStreamCreateWithPriority(&p->streams[level][slot], cudaStreamNonBlocking, -level);
    if (e != cudaSuccess) break;
  }
  if (e != cudaSuccess) {
    for (int i = 0; i < made; i++) {
      cudaStreamDestroy(p->streams[i / TC_STREAMS_PER_POOL][i % TC_STREAMS_PER_POOL]);
      p->streams[i / TC_STREAMS_PER_POOL][i % TC_STREAMS_PER_POOL] = NULL;
    }
    tc_on_device_end(saved);
    return tc_cuda_error(e, F, "cudaStreamCreateWithPriority");
  }
  p->levels = levels;
  atomic_store_explicit(&p->ready, 1, memory_order_release);
  tc_on_device_end(saved);
  return TCUDA_SUCCESS;
}

static tcuda_status pool_get(const char *F, int device, pool_t **out) {
  pool_t *p = &g_pools[device];
  if (!atomic_load_explicit(&p->ready, memory_order_acquire)) {
    pthread_mutex_lock(&g_pool_mu);
    tcuda_status s = atomic_load_explicit(&p->ready, memory_order_relaxed) ? TCUDA_SUCCESS
                                                                              : pool_create(F, device, p);
    pthread_mutex_unlock(&g_pool_mu);
    if (s) return s;
  }
  *out = p;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_stream_from_pool(int device, int priority, tcuda_stream_t *out) {
  static const char *F = "tcuda_stream_from_pool";
  TC_CHECK_ARG(F, out, "out");
  pool_t *p = fast_ok(device) ? &g_pools[device] : NULL;
  if (!p || !atomic_load_explicit(&p->ready, memory_order_acquire)) {
    tcuda_status s = resolve(F, &device);
    if (s || (s = pool_get(F, device, &p))) return s;
  }
  /* level = clamp(-priority, 0, levels-1), written to avoid negating INT_MIN */
  int level = 0;
  if (priority < 0) level = priority <= -(p->levels - 1) ? p->levels - 1 : -priority;
  unsigned slot = atomic_fetch_add_explicit(&p->next[level], 1, memory_order_relaxed) % TC_STREAMS_PER_POOL;
  out->handle = p->streams[level][slot];
  out->id = pool_id(device, level, slot);
  out->device = device;
  out->priority = -level;
  return TCUDA_SUCCESS;
}

/* ---- dedicated streams ---- */

typedef struct dedicated {
  int64_t id;
  cudaStream_t handle;
} dedicated_t;

static pthread_mutex_t g_ded_mu = PTHREAD_MUTEX_INITIALIZER;
static dedicated_t *g_ded;
static size_t g_ded_n, g_ded_cap;
static int64_t g_ded_serial; /* under g_ded_mu */

tcuda_status tcuda_stream_create(int device, int priority, unsigned flags, tcuda_stream_t *out) {
  static const char *F = "tcuda_stream_create";
  TC_CHECK_ARG(F, out, "out");
  if (flags & ~(unsigned)TCUDA_STREAM_NON_BLOCKING)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: flags 0x%x has unknown bits (valid: TCUDA_STREAM_DEFAULT, TCUDA_STREAM_NON_BLOCKING)", F,
                    flags);
  int least, greatest, saved;
  tcuda_status s = resolve(F, &device);
  if (s || (s = priority_range_on(F, device, &least, &greatest))) return s;
  if (priority > least) priority = least;
  if (priority < greatest) priority = greatest;

  pthread_mutex_lock(&g_ded_mu);
  if (g_ded_n == g_ded_cap) {
    size_t cap = g_ded_cap ? 2 * g_ded_cap : 16;
    dedicated_t *grown = realloc(g_ded, cap * sizeof *grown);
    if (!grown) {
      pthread_mutex_unlock(&g_ded_mu);
      return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: no host memory for the stream table", F);
    }
    g_ded = grown;
    g_ded_cap = cap;
  }
  cudaStream_t h = NULL;
  cudaError_t e = cudaErrorUnknown;
  if (!(s = tc_on_device_begin(F, device, &saved))) {
    e = TC_FAULT(TC_FAULT_STREAM_CREATE) ? cudaErrorMemoryAllocation
                                         : cudaStreamCreateWithPriority(&h, flags, priority);
    tc_on_device_end(saved);
  }
  if (!s && e == cudaSuccess) {
    int64_t id = (++g_ded_serial << ID_SERIAL_SHIFT) | ((int64_t)device << ID_DEVICE_SHIFT) |
                 ((int64_t)TC_STREAM_TYPE_DEDICATED << ID_TYPE_SHIFT) | ID_NATIVE;
    g_ded[g_ded_n++] = (dedicated_t){id, h};
    out->handle = h;
    out->id = id;
    out->device = device;
    out->priority = priority;
  }
  pthread_mutex_unlock(&g_ded_mu);
  if (s) return s;
  if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaStreamCreateWithPriority");
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_stream_destroy(tcuda_stream_t st) {
  static const char *F = "tcuda_stream_destroy";
  if (st.id == 0) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: cannot destroy the default stream", F);
  if (is_external(st))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: cannot destroy external stream %p: it belongs to the code that created it", F,
                    (void *)st.handle);
  int type = id_type(st.id);
  if (type >= 1 && type <= TC_MAX_PRIORITY_LEVELS)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: cannot destroy pool stream (id %lld): pool streams live as long as the process", F,
                    (long long)st.id);
  pthread_mutex_lock(&g_ded_mu);
  size_t i = 0;
  while (i < g_ded_n && !(g_ded[i].id == st.id && g_ded[i].handle == st.handle)) i++;
  if (type != TC_STREAM_TYPE_DEDICATED || i == g_ded_n) {
    pthread_mutex_unlock(&g_ded_mu);
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: stream (id %lld, handle %p) is not a live stream from tcuda_stream_create "
                    "(destroyed already?)",
                    F, (long long)st.id, (void *)st.handle);
  }
  void (*gone)(int, uint64_t) = atomic_load(&tc_stream_destroy_hook);
  if (gone) gone(st.device, (uint64_t)(uintptr_t)st.handle);
  cudaError_t e = cudaStreamDestroy(g_ded[i].handle);
  if (e == cudaSuccess) g_ded[i] = g_ded[--g_ded_n];
  pthread_mutex_unlock(&g_ded_mu);
  if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaStreamDestroy");
  if (st.device >= 0 && st.device < TC_MAX_DEVICES && tc_tl_current_stream[st.device].id == st.id)
    tc_tl_current_stream[st.device] = (tcuda_stream_t){0};
  return TCUDA_SUCCESS;
}

/* ---- external and default streams ---- */

tcuda_status tcuda_stream_external(struct CUstream_st *raw, int device, tcuda_stream_t *out) {
  static const char *F = "tcuda_stream_external";
  TC_CHECK_ARG(F, out, "out");
  tcuda_status s = resolve(F, &device);
  if (s) return s;
  *out = (tcuda_stream_t){.handle = raw, .id = (int64_t)(intptr_t)raw, .device = device, .priority = 0};
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_default_stream(int device, tcuda_stream_t *out) {
  static const char *F = "tcuda_default_stream";
  TC_CHECK_ARG(F, out, "out");
  tcuda_status s = resolve(F, &device);
  if (s) return s;
  *out = (tcuda_stream_t){.handle = NULL, .id = 0, .device = device, .priority = 0};
  return TCUDA_SUCCESS;
}

/* ---- current stream and guard ---- */

tcuda_status tc_stream_current(const char *F, int device, tcuda_stream_t *out) {
  tcuda_status s = resolve(F, &device);
  if (s) return s;
  *out = tc_current_stream_fast(device);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_current_stream(int device, tcuda_stream_t *out) {
  if (out && fast_ok(device)) {
    *out = tc_current_stream_fast(device);
    return TCUDA_SUCCESS;
  }
  TC_CHECK_ARG("tcuda_current_stream", out, "out");
  return tc_stream_current("tcuda_current_stream", device, out);
}

tcuda_status tcuda_set_stream(tcuda_stream_t st) {
  static const char *F = "tcuda_set_stream";
  tcuda_status s = tc_stream_check(F, "stream", st);
  if (s || (s = tcuda_set_device(st.device))) return s;
  tc_tl_current_stream[st.device] = st;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_stream_guard_begin(tcuda_stream_guard_t *g, tcuda_stream_t st) {
  static const char *F = "tcuda_stream_guard_begin";
  TC_CHECK_ARG(F, g, "guard");
  g->active = 0;
  int cur = -1;
  tcuda_status s = tc_stream_check(F, "stream", st);
  if (s || (s = resolve(F, &cur))) return s;
  g->prev_device = cur;
  g->prev_stream = tc_current_stream_fast(cur);
  g->prev_dst_stream = tc_current_stream_fast(st.device);
  g->stream = st;
  if (cur != st.device) {
    int prev;
    if ((s = tcuda_device_exchange(st.device, &prev))) return s;
  }
  tc_tl_current_stream[st.device] = st;
  g->active = 1;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_stream_guard_end(tcuda_stream_guard_t *g) {
  TC_CHECK_ARG("tcuda_stream_guard_end", g, "guard");
  if (!g->active) return TCUDA_SUCCESS;
  g->active = 0;
  /* Destination first, then the original device, as torch.cuda.stream's exit. */
  tc_tl_current_stream[g->stream.device] = g->prev_dst_stream;
  tc_tl_current_stream[g->prev_device] = g->prev_stream;
  int ignored;
  return tcuda_device_maybe_exchange(g->prev_device, &ignored);
}

/* ---- operations ---- */

tcuda_status tcuda_stream_query(tcuda_stream_t st, int *done) {
  static const char *F = "tcuda_stream_query";
  TC_CHECK_ARG(F, done, "done");
  int saved;
  tcuda_status s = tc_stream_check(F, "stream", st);
  if (s || (s = tc_on_device_begin(F, st.device, &saved))) return s;
  cudaError_t e = cudaStreamQuery(st.handle); /* the NULL stream is per device: hence the switch */
  tc_on_device_end(saved);
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    *done = 0;
    return TCUDA_SUCCESS;
  }
  if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaStreamQuery");
  *done = 1;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_stream_synchronize(tcuda_stream_t st) {
  static const char *F = "tcuda_stream_synchronize";
  int saved;
  tcuda_status s = tc_stream_check(F, "stream", st);
  if (s || (s = tc_on_device_begin(F, st.device, &saved))) return s;
  cudaError_t e = cudaStreamSynchronize(st.handle);
  tc_on_device_end(saved);
  if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaStreamSynchronize");
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_stream_get_priority(tcuda_stream_t st, int *priority) {
  static const char *F = "tcuda_stream_get_priority";
  TC_CHECK_ARG(F, priority, "priority");
  int saved, p = 0;
  tcuda_status s = tc_stream_check(F, "stream", st);
  if (s || (s = tc_on_device_begin(F, st.device, &saved))) return s;
  cudaError_t e = cudaStreamGetPriority(st.handle, &p);
  tc_on_device_end(saved);
  if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaStreamGetPriority");
  *priority = p;
  return TCUDA_SUCCESS;
}
