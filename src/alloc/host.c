/* Pinned host memory from a cache, as PyTorch's CachingHostAllocator:
 * sizes round up to a power of two, one free list per size (no splitting),
 * and a freed block used on other streams waits for events recorded on those
 * streams before it is handed out again. One mutex: host allocations are
 * rare next to device ones, and every call here may touch CUDA anyway.
 *
 * Stats: "allocation"/"allocated_bytes" count blocks handed out (they drop
 * when a block becomes reusable); "segment"/"reserved_bytes" count the
 * cudaHostAlloc'ed blocks. PyTorch sums per-size-bucket peaks for the
 * former; we track the exact peak. */
#include "host.h"
#include "core/core.h"
#include "core/table.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBUCKETS 64

typedef struct hblock {
  void *ptr;
  size_t size;
  int allocated;
  int event_count;
  tcuda_stream_t *streams; /* streams used besides the allocating one */
  int nstreams, capstreams;
  struct hblock *next_free; /* LIFO free list of its bucket */
} hblock;

typedef struct pending { void *event; hblock *block; } pending;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static tc_u64map g_table; /* ptr -> hblock */
static size_t g_nblocks;
static hblock *g_free[NBUCKETS];
static pending *g_events; /* FIFO ring */
static size_t g_ev_head, g_ev_len, g_ev_cap;
static tcuda_host_memory_stats_t g_stats;

/* ---- the CUDA backend ---- */
static tcuda_status cuda_alloc(void *ctx, size_t size, void **ptr) {
  cudaError_t e = cudaHostAlloc(ptr, size, cudaHostAllocDefault);
  if (e == cudaSuccess) return TCUDA_SUCCESS;
  (void)cudaGetLastError();
  if (e == cudaErrorMemoryAllocation)
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "tcuda_host_alloc: cudaHostAlloc of %zu bytes failed: %s",
                    size, cudaGetErrorName(e));
  return tc_cuda_error(e, "tcuda_host_alloc", "cudaHostAlloc");
}
static void cuda_free(void *ctx, void *ptr) {
  if (cudaFreeHost(ptr) != cudaSuccess) (void)cudaGetLastError();
}
static tcuda_status cuda_record(void *ctx, tcuda_stream_t s, void **event) {
  static const char *F = "tcuda_host_free";
  tcuda_device_guard_t g;
  tcuda_status st = tcuda_device_guard_begin(&g, s.device);
  if (st) return st;
  cudaEvent_t ev = NULL;
  cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventRecord(ev, (cudaStream_t)s.handle);
  tcuda_device_guard_end(&g);
  if (e != cudaSuccess) {
    if (ev) cudaEventDestroy(ev);
    return tc_cuda_error(e, F, "cudaEventRecord");
  }
  *event = ev;
  return TCUDA_SUCCESS;
}
static int cuda_query(void *ctx, void *event) {
  cudaError_t e = cudaEventQuery((cudaEvent_t)event);
  if (e == cudaSuccess) return 1;
  (void)cudaGetLastError();
  return e == cudaErrorNotReady ? 0 : -1;
}
static void cuda_release(void *ctx, void *event) { cudaEventDestroy((cudaEvent_t)event); }

static const tc_host_backend cuda_backend = {NULL, cuda_alloc, cuda_free, cuda_record, cuda_query, cuda_release};
static tc_host_backend g_be = {NULL, cuda_alloc, cuda_free, cuda_record, cuda_query, cuda_release};
static int g_custom_backend;

tcuda_status tc_host_set_backend(const tc_host_backend *be) {
  pthread_mutex_lock(&g_mu);
  if (g_nblocks) {
    pthread_mutex_unlock(&g_mu);
    return tc_error(TCUDA_ERROR_INVALID_STATE, "tc_host_set_backend: the cache holds %zu blocks", g_nblocks);
  }
  g_be = be ? *be : cuda_backend;
  g_custom_backend = be != NULL;
  memset(&g_stats, 0, sizeof g_stats);
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}

/* ---- helpers (g_mu held) ---- */
static void stat_inc(tcuda_stat_t *s, int64_t v) {
  s->current += v;
  s->allocated += v;
  if (s->current > s->peak) s->peak = s->current;
}
static void stat_dec(tcuda_stat_t *s, int64_t v) {
  s->current -= v;
  s->freed += v;
}
static void duration_add(tcuda_duration_stat_t *d, int64_t us) {
  int fresh = d->count == 0 || (d->min == 0 && d->max == 0); /* first sample since a peak reset */
  d->total += us;
  d->count++;
  if (us > d->max) d->max = us;
  if (fresh) { d->min = us; return; }
  if (us < d->min) d->min = us;
}
static int64_t now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}
static unsigned bucket_of(size_t pow2) { return (unsigned)__builtin_ctzll(pow2); }
static hblock *find_block(const void *ptr) {
  const uint64_t *v = tc_u64map_get(&g_table, (uint64_t)(uintptr_t)ptr);
  return v ? (hblock *)(uintptr_t)*v : NULL;
}

static int table_insert(hblock *b) {
  if (!tc_u64map_put(&g_table, (uint64_t)(uintptr_t)b->ptr, (uint64_t)(uintptr_t)b)) return -1;
  g_nblocks++;
  return 0;
}

static void table_remove(hblock *b) {
  tc_u64map_del(&g_table, (uint64_t)(uintptr_t)b->ptr);
  g_nblocks--;
}

static void make_reusable(hblock *b) {
  unsigned k = bucket_of(b->size);
  b->next_free = g_free[k];
  g_free[k] = b;
  stat_dec(&g_stats.allocation, 1);
  stat_dec(&g_stats.allocated_bytes, (int64_t)b->size);
}

/* Oldest events first; stop at the first one not complete (PyTorch). */
static void process_events(void) {
  while (g_ev_len) {
    pending *p = &g_events[g_ev_head];
    if (g_be.query(g_be.ctx, p->event) == 0) break;
    /* an error counts as complete: the stream is dead, nothing can still use it */
    g_be.release(g_be.ctx, p->event);
    hblock *b = p->block;
    g_ev_head = (g_ev_head + 1) % g_ev_cap;
    g_ev_len--;
    if (--b->event_count == 0) make_reusable(b);
  }
}

static int events_push(void *ev, hblock *b) {
  if (g_ev_len == g_ev_cap) {
    size_t cap = g_ev_cap ? g_ev_cap * 2 : 64;
    pending *n = malloc(cap * sizeof *n);
    if (!n) return -1;
    for (size_t i = 0; i < g_ev_len; i++) n[i] = g_events[(g_ev_head + i) % g_ev_cap];
    free(g_events);
    g_events = n;
    g_ev_cap = cap;
    g_ev_head = 0;
  }
  g_events[(g_ev_head + g_ev_len) % g_ev_cap] = (pending){ev, b};
  g_ev_len++;
  return 0;
}

/* ---- public API ---- */
tcuda_status tcuda_host_alloc(void **ptr, size_t size) {
  static const char *F = "tcuda_host_alloc";
  TC_CHECK_ARG(F, ptr, "ptr");
  *ptr = NULL;
  if (size == 0) return TCUDA_SUCCESS; /* PyTorch: no block for 0 bytes */
  if (size > ((size_t)1 << 62))
    return tc_error(TCUDA_ERROR_OVERFLOW, "%s: size %zu is too large to round to a power of two", F, size);
  tcuda_status s;
  if (!g_custom_backend && (s = tc_lazy_init(F))) return s;
  size_t rounded = size <= 1 ? 1 : (size_t)1 << (64 - __builtin_clzll(size - 1));
  unsigned k = bucket_of(rounded);

  pthread_mutex_lock(&g_mu);
  process_events();
  hblock *b = g_free[k];
  if (b) {
    g_free[k] = b->next_free;
    b->allocated = 1;
    stat_inc(&g_stats.allocation, 1);
    stat_inc(&g_stats.allocated_bytes, (int64_t)rounded);
    *ptr = b->ptr;
    pthread_mutex_unlock(&g_mu);
    return TCUDA_SUCCESS;
  }
  pthread_mutex_unlock(&g_mu);

  /* Slow path outside the lock: cudaHostAlloc can take milliseconds. */
  b = calloc(1, sizeof *b);
  if (!b) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  int64_t t0 = now_us();
  if ((s = g_be.alloc(g_be.ctx, rounded, &b->ptr))) { free(b); return s; }
  int64_t dt = now_us() - t0;
  b->size = rounded;
  b->allocated = 1;

  pthread_mutex_lock(&g_mu);
  if (table_insert(b)) {
    pthread_mutex_unlock(&g_mu);
    g_be.free(g_be.ctx, b->ptr);
    free(b);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  }
  duration_add(&g_stats.host_alloc_time, dt);
  stat_inc(&g_stats.segment, 1);
  stat_inc(&g_stats.reserved_bytes, (int64_t)rounded);
  g_stats.num_host_alloc++;
  stat_inc(&g_stats.allocation, 1);
  stat_inc(&g_stats.allocated_bytes, (int64_t)rounded);
  *ptr = b->ptr;
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_host_record_stream(void *ptr, tcuda_stream_t stream) {
  static const char *F = "tcuda_host_record_stream";
  TC_CHECK_ARG(F, ptr, "ptr");
  pthread_mutex_lock(&g_mu);
  hblock *b = find_block(ptr);
  if (!b || !b->allocated) {
    pthread_mutex_unlock(&g_mu);
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: %p is not a live tcuda host allocation", F, ptr);
  }
  for (int i = 0; i < b->nstreams; i++)
    if (b->streams[i].handle == stream.handle && b->streams[i].device == stream.device) {
      pthread_mutex_unlock(&g_mu);
      return TCUDA_SUCCESS;
    }
  if (b->nstreams == b->capstreams) {
    int cap = b->capstreams ? b->capstreams * 2 : 4;
    tcuda_stream_t *n = realloc(b->streams, (size_t)cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&g_mu);
      return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
    }
    b->streams = n;
    b->capstreams = cap;
  }
  b->streams[b->nstreams++] = stream;
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_host_free(void *ptr) {
  static const char *F = "tcuda_host_free";
  if (!ptr) return TCUDA_SUCCESS; /* like free(NULL) */
  pthread_mutex_lock(&g_mu);
  hblock *b = find_block(ptr);
  if (!b) {
    pthread_mutex_unlock(&g_mu);
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: %p is not a tcuda host allocation", F, ptr);
  }
  if (!b->allocated) {
    pthread_mutex_unlock(&g_mu);
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: %p was already freed", F, ptr);
  }
  tcuda_status s = TCUDA_SUCCESS;
  b->allocated = 0;
  int recorded = 0;
  for (int i = 0; i < b->nstreams; i++) {
    void *ev = NULL;
    if ((s = g_be.record(g_be.ctx, b->streams[i], &ev))) break;
    if (events_push(ev, b)) {
      g_be.release(g_be.ctx, ev);
      s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
      break;
    }
    recorded++;
  }
  if (s && recorded == 0) {
    /* nothing queued: keep the block allocated so the caller can retry */
    b->allocated = 1;
    pthread_mutex_unlock(&g_mu);
    return s;
  }
  b->nstreams = 0;
  b->event_count += recorded;
  if (b->event_count == 0) make_reusable(b);
  pthread_mutex_unlock(&g_mu);
  return s; /* a partial failure still frees; the block waits on what was recorded */
}

tcuda_status tcuda_host_empty_cache(void) {
  pthread_mutex_lock(&g_mu);
  process_events();
  hblock *victims = NULL;
  for (int k = 0; k < NBUCKETS; k++) {
    for (hblock *b = g_free[k], *n; b; b = n) {
      n = b->next_free;
      table_remove(b);
      b->next_free = victims;
      victims = b;
    }
    g_free[k] = NULL;
  }
  pthread_mutex_unlock(&g_mu);
  for (hblock *b = victims, *n; b; b = n) {
    n = b->next_free;
    int64_t t0 = now_us();
    g_be.free(g_be.ctx, b->ptr);
    int64_t dt = now_us() - t0;
    pthread_mutex_lock(&g_mu);
    duration_add(&g_stats.host_free_time, dt);
    stat_dec(&g_stats.segment, 1);
    stat_dec(&g_stats.reserved_bytes, (int64_t)b->size);
    g_stats.num_host_free++;
    pthread_mutex_unlock(&g_mu);
    free(b->streams);
    free(b);
  }
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_host_memory_stats(tcuda_host_memory_stats_t *out) {
  TC_CHECK_ARG("tcuda_host_memory_stats", out, "out");
  pthread_mutex_lock(&g_mu);
  *out = g_stats;
  pthread_mutex_unlock(&g_mu);
  tcuda_duration_stat_t *d[2] = {&out->host_alloc_time, &out->host_free_time};
  for (int i = 0; i < 2; i++) d[i]->avg = d[i]->count ? (double)d[i]->total / d[i]->count : 0;
  return TCUDA_SUCCESS;
}

static void reset_acc(tcuda_stat_t *s) { s->allocated = s->freed = 0; }
static void reset_peak(tcuda_stat_t *s) { s->peak = s->current; }

tcuda_status tcuda_host_reset_accumulated_memory_stats(void) {
  pthread_mutex_lock(&g_mu);
  tcuda_stat_t *all[4] = {&g_stats.allocation, &g_stats.segment, &g_stats.allocated_bytes, &g_stats.reserved_bytes};
  for (int i = 0; i < 4; i++) reset_acc(all[i]);
  memset(&g_stats.host_alloc_time, 0, sizeof g_stats.host_alloc_time);
  memset(&g_stats.host_free_time, 0, sizeof g_stats.host_free_time);
  g_stats.num_host_alloc = g_stats.num_host_free = 0;
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_host_reset_peak_memory_stats(void) {
  pthread_mutex_lock(&g_mu);
  tcuda_stat_t *all[4] = {&g_stats.allocation, &g_stats.segment, &g_stats.allocated_bytes, &g_stats.reserved_bytes};
  for (int i = 0; i < 4; i++) reset_peak(all[i]);
  /* PyTorch's DurationStat peak reset: max/min restart from the next sample */
  g_stats.host_alloc_time.max = g_stats.host_alloc_time.min = 0;
  g_stats.host_free_time.max = g_stats.host_free_time.min = 0;
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}
