/* The public caching-allocator API: one tc_alloc per device on the CUDA
 * backend, made on first use with the config from the environment (or from
 * tcuda_allocator_set_config, if that came first).
 *
 * Allocators are keyed by the raw cudaStream_t, as torch orders free blocks
 * by it; snapshots report stream ids (tcuda_stream_t.id), so the handles
 * seen by malloc are remembered with their ids. */
#include "core/annotate.h"
#include "alloc/alloc.h"
#include "alloc/hooks.h"
#include "alloc/events.h"
#include "alloc/lock.h"
#include "alloc/pools.h"
#include "core/core.h"
#include "stream/stream.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(tc_alloc *) g_allocs[TC_MAX_DEVICES];
static atomic_int g_nmax; /* 1 + highest device with an allocator */
static tc_alloc_config g_cfg;
static int g_cfg_state; /* 0 not loaded, 1 loaded, -1 the environment's config is bad */
static tcuda_status g_cfg_status;
static char g_cfg_err[TC_ERRMSG_MAX];

/* Re-issue this thread's error with the public function's name in front. */
static tcuda_status prefixed(const char *func, tcuda_status s) {
  char buf[TC_ERRMSG_MAX];
  snprintf(buf, sizeof buf, "%s", tcuda_last_error());
  return tc_error(s, "%s: %s", func, buf);
}

/* Under g_mu. */
static void load_cfg_locked(void) {
  if (g_cfg_state) return;
  tcuda_status s = tc_alloc_config_from_env(&g_cfg);
  if (s) {
    g_cfg_state = -1;
    g_cfg_status = s;
    snprintf(g_cfg_err, sizeof g_cfg_err, "%s", tcuda_last_error());
    tc_alloc_config_default(&g_cfg);
  } else {
    g_cfg_state = 1;
  }
}

static int64_t stream_id_of(uint64_t handle);

/* thread_cache: a destroyed stream's cached blocks go back (stream.h). */
static void stream_destroyed(int device, uint64_t handle) {
  if (device < 0 || device >= TC_MAX_DEVICES) return;
  tc_alloc_stream_gone(atomic_load_explicit(&g_allocs[device], memory_order_acquire), handle);
}

static tcuda_status create_alloc(const char *func, int device, tc_alloc **out) {
  pthread_mutex_lock(&g_mu);
  tc_alloc *a = atomic_load(&g_allocs[device]);
  tcuda_status s = TCUDA_SUCCESS;
  if (!a) {
    load_cfg_locked();
    if (g_cfg_state < 0) {
      s = tc_error(g_cfg_status, "%s: %s", func, g_cfg_err);
    } else {
      tcuda_device_properties_t p = TCUDA_DEVICE_PROPERTIES_INIT;
      s = tcuda_get_device_properties(device, &p);
      if (s) s = prefixed(func, s);
      else if ((s = tc_alloc_create(device, tc_backend_cuda(), &g_cfg, p.total_memory, &a))) s = prefixed(func, s);
      else {
        tc_hooks_created(a, device, stream_id_of); /* layers above attach to it (hooks.h) */
        atomic_store(&tc_stream_destroy_hook, stream_destroyed);
        atomic_store_explicit(&g_allocs[device], a, memory_order_release);
        if (atomic_load(&g_nmax) < device + 1) atomic_store(&g_nmax, device + 1);
      }
    }
  }
  pthread_mutex_unlock(&g_mu);
  *out = a;
  return s;
}

/* The allocator of *device (-1: the current device, resolved in place). */
static tcuda_status get_alloc(const char *func, int *device, tc_alloc **out) {
  tcuda_status s = tc_resolve_device(func, device);
  if (s) return s;
  if (*device >= TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: device %d: the allocator supports devices below %d", func, *device,
                    TC_MAX_DEVICES);
  tc_alloc *a = atomic_load_explicit(&g_allocs[*device], memory_order_acquire);
  if (a) {
    *out = a;
    return TCUDA_SUCCESS;
  }
  return create_alloc(func, *device, out);
}

tcuda_status tc_alloc_of_device(const char *func, int *device, tc_alloc **out) { return get_alloc(func, device, out); }

/* ---- stream handle -> id, for snapshots ---- */

typedef struct {
  uint64_t handle;
  int64_t id;
} smap_ent;
static pthread_mutex_t g_smap_mu = PTHREAD_MUTEX_INITIALIZER;
static smap_ent *g_smap;
static size_t g_nsmap, g_capsmap;
static _Thread_local smap_ent tl_last;

static void note_stream(uint64_t handle, int64_t id) {
  if (!handle || (tl_last.handle == handle && tl_last.id == id)) return;
  pthread_mutex_lock(&g_smap_mu);
  size_t i = 0;
  while (i < g_nsmap && g_smap[i].handle != handle) i++;
  if (i < g_nsmap) {
    g_smap[i].id = id; /* a destroyed stream's handle may come back */
  } else {
    if (g_nsmap == g_capsmap) {
      size_t cap = g_capsmap ? 2 * g_capsmap : 16;
      smap_ent *n = (smap_ent *)realloc(g_smap, cap * sizeof *n);
      if (n) {
        g_smap = n;
        g_capsmap = cap;
      }
    }
    if (g_nsmap < g_capsmap) g_smap[g_nsmap++] = (smap_ent){handle, id};
  }
  pthread_mutex_unlock(&g_smap_mu);
  tl_last = (smap_ent){handle, id};
}

static int64_t stream_id_of(uint64_t handle) {
  if (!handle) return 0;
  int64_t id = (int64_t)handle; /* external streams: the id is the handle */
  pthread_mutex_lock(&g_smap_mu);
  for (size_t i = 0; i < g_nsmap; i++)
    if (g_smap[i].handle == handle) id = g_smap[i].id;
  pthread_mutex_unlock(&g_smap_mu);
  return id;
}

/* ---- malloc / free ---- */

static tcuda_status do_malloc(const char *func, tc_alloc *a, size_t size, tcuda_stream_t st, void **ptr) {
  uint64_t addr = 0, key = (uint64_t)(uintptr_t)st.handle;
  tcuda_status s = tc_alloc_malloc(a, size, key, &addr);
  /* blocks that layers above hold back may be free now (hooks.h) */
  if (s == TCUDA_ERROR_OUT_OF_MEMORY && tc_hooks_reclaim() > 0) s = tc_alloc_malloc(a, size, key, &addr);
  if (s) {
    *ptr = NULL;
    s = prefixed(func, s);
    /* torch's OOM observers run on the real OOM path, not for >1 EB requests.
     * A hook may add to the message (TCUDA_OOM_SNAPSHOT names its file). */
    if (s == TCUDA_ERROR_OUT_OF_MEMORY && (uint64_t)size < ((uint64_t)1 << 60))
      tc_hooks_oom(a, tc_alloc_device(a), size);
    return s;
  }
  note_stream(key, st.id);
  *ptr = (void *)(uintptr_t)addr;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_malloc(void **ptr, size_t size) {
  static const char *F = "tcuda_malloc";
  TC_CHECK_ARG(F, ptr != NULL, "ptr");
  int dev = -1;
  tc_alloc *a;
  tcuda_status s = get_alloc(F, &dev, &a);
  if (s) {
    *ptr = NULL;
    return s;
  }
  return do_malloc(F, a, size, tc_current_stream_fast(dev), ptr);
}

tcuda_status tcuda_malloc_on(void **ptr, size_t size, int device, tcuda_stream_t stream) {
  static const char *F = "tcuda_malloc_on";
  TC_CHECK_ARG(F, ptr != NULL, "ptr");
  *ptr = NULL;
  tc_alloc *a;
  tcuda_status s = get_alloc(F, &device, &a);
  if (s || (s = tc_stream_check(F, "stream", stream))) return s;
  if (stream.device != device)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: stream is on device %d, not on device %d", F, stream.device,
                    device);
  return do_malloc(F, a, size, stream, ptr);
}

tcuda_status tcuda_free(void *ptr) {
  static const char *F = "tcuda_free";
  if (!ptr) return TCUDA_SUCCESS;
  if (tc_hooks_free(ptr)) return TCUDA_SUCCESS; /* taken over by a layer above (hooks.h) */
  int n = atomic_load_explicit(&g_nmax, memory_order_acquire);
  for (int d = 0; d < n; d++) {
    tc_alloc *a = atomic_load_explicit(&g_allocs[d], memory_order_acquire);
    tcuda_status s;
    if (a && tc_alloc_free_if_owned(a, (uint64_t)(uintptr_t)ptr, &s)) return s ? prefixed(F, s) : TCUDA_SUCCESS;
  }
  return tc_error(TCUDA_ERROR_INVALID_POINTER,
                  "%s: pointer %p was not allocated by tcuda's caching allocator, or was already freed", F, ptr);
}

tcuda_status tcuda_record_stream(void *ptr, tcuda_stream_t stream) {
  static const char *F = "tcuda_record_stream";
  TC_CHECK_ARG(F, ptr != NULL, "ptr");
  tcuda_status s = tc_stream_check(F, "stream", stream);
  if (s) return s;
  int n = atomic_load_explicit(&g_nmax, memory_order_acquire);
  for (int d = 0; d < n; d++) {
    tc_alloc *a = atomic_load_explicit(&g_allocs[d], memory_order_acquire);
    if (!a) continue;
    s = tc_alloc_record_stream_on(a, (uint64_t)(uintptr_t)ptr, (uint64_t)(uintptr_t)stream.handle, stream.device);
    if (s != TCUDA_ERROR_INVALID_POINTER) return s ? prefixed(F, s) : TCUDA_SUCCESS;
  }
  return tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: pointer %p is not a live allocation of tcuda's caching allocator",
                  F, ptr);
}

tcuda_status tcuda_empty_cache(void) {
  static const char *F = "tcuda_empty_cache";
  int n = atomic_load_explicit(&g_nmax, memory_order_acquire);
  /* allocators but no CUDA: a child forked after init, which must not cudaFree */
  if (n && !tcuda_is_initialized()) return tc_lazy_init(F);
  tcuda_status first = TCUDA_SUCCESS;
  TC_ANNOTATE_BEGIN("tcuda_empty_cache");
  for (int d = 0; d < n; d++) {
    tc_alloc *a = atomic_load_explicit(&g_allocs[d], memory_order_acquire);
    if (!a) continue;
    tcuda_status s = tc_alloc_empty_cache(a);
    if (s && !first) first = prefixed(F, s);
  }
  TC_ANNOTATE_END();
  return first;
}

/* torch's emptyCache(pool) after its last releasePool: the private pools no
 * longer in use give back their free segments; the default pools keep their
 * cache (tcuda_empty_cache would flush it too). */
tcuda_status tcuda_pool_empty_unused(int device) {
  static const char *F = "tcuda_pool_empty_unused";
  tc_alloc *a;
  tcuda_status s = get_alloc(F, &device, &a);
  if (s) return s;
  lk_lock(&a->mu);
  if (capturing(a))
    s = tc_error(TCUDA_ERROR_INVALID_STATE, "%s: not while a capture or pool routing is under way on device %d", F,
                 device);
  else if (!(s = tc_synchronize_and_free_events(a)))
    s = tc_release_freeable_pools(a);
  lk_unlock(&a->mu);
  return s && s != TCUDA_ERROR_INVALID_STATE ? prefixed(F, s) : s;
}

/* ---- stats ---- */

static tcuda_status stats_of(const char *func, int device, tcuda_memory_stats_t *st) {
  tc_alloc *a;
  tcuda_status s = get_alloc(func, &device, &a);
  if (s) return s;
  tc_alloc_get_stats(a, st);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_memory_stats(int device, tcuda_memory_stats_t *out) {
  TC_CHECK_ARG("tcuda_memory_stats", out != NULL, "out");
  return stats_of("tcuda_memory_stats", device, out);
}


#define STAT_QUERY(name, expr)                                   \
  tcuda_status name(int device, int64_t *bytes) {                \
    TC_CHECK_ARG(#name, bytes != NULL, "bytes");                 \
    tcuda_memory_stats_t st;                                     \
    tcuda_status s = stats_of(#name, device, &st);               \
    if (!s) *bytes = (expr);                                     \
    return s;                                                    \
  }
STAT_QUERY(tcuda_memory_allocated, st.allocated_bytes[TCUDA_STAT_ALL].current)
STAT_QUERY(tcuda_max_memory_allocated, st.allocated_bytes[TCUDA_STAT_ALL].peak)
STAT_QUERY(tcuda_memory_reserved, st.reserved_bytes[TCUDA_STAT_ALL].current)
STAT_QUERY(tcuda_max_memory_reserved, st.reserved_bytes[TCUDA_STAT_ALL].peak)
STAT_QUERY(tcuda_memory_cached, st.reserved_bytes[TCUDA_STAT_ALL].current)
STAT_QUERY(tcuda_max_memory_cached, st.reserved_bytes[TCUDA_STAT_ALL].peak)

static tcuda_status reset(const char *func, int device, int peak) {
  tc_alloc *a;
  tcuda_status s = get_alloc(func, &device, &a);
  if (s) return s;
  if (peak) tc_alloc_reset_peak(a);
  else tc_alloc_reset_accumulated(a);
  return TCUDA_SUCCESS;
}
tcuda_status tcuda_reset_peak_memory_stats(int device) { return reset("tcuda_reset_peak_memory_stats", device, 1); }
tcuda_status tcuda_reset_accumulated_memory_stats(int device) {
  return reset("tcuda_reset_accumulated_memory_stats", device, 0);
}
/* torch: both are deprecated aliases that reset every peak. */
tcuda_status tcuda_reset_max_memory_allocated(int device) {
  return reset("tcuda_reset_max_memory_allocated", device, 1);
}
tcuda_status tcuda_reset_max_memory_cached(int device) { return reset("tcuda_reset_max_memory_cached", device, 1); }

tcuda_status tcuda_set_per_process_memory_fraction(double fraction, int device) {
  static const char *F = "tcuda_set_per_process_memory_fraction";
  if (!(fraction >= 0.0 && fraction <= 1.0))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: Invalid fraction value: %g. Allowed range: 0~1", F, fraction);
  tc_alloc *a;
  tcuda_status s = get_alloc(F, &device, &a);
  if (s) return s;
  s = tc_alloc_set_memory_fraction(a, fraction);
  return s ? prefixed(F, s) : TCUDA_SUCCESS;
}

tcuda_status tcuda_get_per_process_memory_fraction(int device, double *fraction) {
  static const char *F = "tcuda_get_per_process_memory_fraction";
  TC_CHECK_ARG(F, fraction != NULL, "fraction");
  tc_alloc *a;
  tcuda_status s = get_alloc(F, &device, &a);
  if (s) return s;
  *fraction = tc_alloc_get_memory_fraction(a);
  return TCUDA_SUCCESS;
}


/* ---- snapshots ---- */

void tcuda_snapshot_free(tcuda_snapshot_t *s) { tc_snapshot_free(s); }

tcuda_status tcuda_memory_snapshot(tcuda_snapshot_t **out) {
  static const char *F = "tcuda_memory_snapshot";
  TC_CHECK_ARG(F, out != NULL, "out");
  *out = NULL;
  tcuda_snapshot_t *all = (tcuda_snapshot_t *)calloc(1, sizeof *all);
  if (!all) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  int n = atomic_load_explicit(&g_nmax, memory_order_acquire);
  for (int d = 0; d < n; d++) { /* by device, each sorted by address, as torch */
    tc_alloc *a = atomic_load_explicit(&g_allocs[d], memory_order_acquire);
    if (!a) continue;
    tcuda_snapshot_t *one = NULL;
    tcuda_status s = tc_alloc_snapshot(a, &one);
    tcuda_segment_info_t *segs = NULL;
    if (!s && one->num_segments &&
        !(segs = (tcuda_segment_info_t *)realloc(all->segments,
                                                 (all->num_segments + one->num_segments) * sizeof *segs))) {
      tc_snapshot_free(one);
      s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "out of host memory");
    }
    if (s) {
      tc_snapshot_free(all);
      return prefixed(F, s);
    }
    if (segs) {
      all->segments = segs;
      for (size_t i = 0; i < one->num_segments; i++) {
        segs[all->num_segments] = one->segments[i];
        segs[all->num_segments].stream = stream_id_of((uint64_t)one->segments[i].stream);
        all->num_segments++;
      }
    }
    free(one->segments); /* the blocks moved to `all` */
    free(one);
  }
  *out = all;
  return TCUDA_SUCCESS;
}


/* ---- options ---- */

tcuda_status tcuda_allocator_set_config(const char *conf) {
  static const char *F = "tcuda_allocator_set_config";
  TC_CHECK_ARG(F, conf != NULL, "conf");
  pthread_mutex_lock(&g_mu);
  load_cfg_locked(); /* a bad environment config is replaced, not merged */
  tc_alloc_config tmp = g_cfg;
  tcuda_status s = tc_alloc_config_update(F, conf, &tmp);
  if (!s) {
    g_cfg = tmp;
    g_cfg_state = 1;
    for (int d = 0; d < TC_MAX_DEVICES; d++) {
      tc_alloc *a = atomic_load(&g_allocs[d]);
      if (a) tc_alloc_set_config(a, &g_cfg);
    }
  }
  pthread_mutex_unlock(&g_mu);
  return s;
}

tcuda_status tcuda_allocator_get_config(char **out) {
  static const char *F = "tcuda_allocator_get_config";
  TC_CHECK_ARG(F, out != NULL, "out");
  char buf[1024];
  pthread_mutex_lock(&g_mu);
  load_cfg_locked();
  tcuda_status s = TCUDA_SUCCESS;
  if (g_cfg_state < 0) s = tc_error(g_cfg_status, "%s: %s", F, g_cfg_err);
  else tc_alloc_config_format(&g_cfg, buf, sizeof buf);
  pthread_mutex_unlock(&g_mu);
  if (s) return s;
  if (!(*out = strdup(buf))) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  return TCUDA_SUCCESS;
}
