/* The allocator seen from outside: statistics and their resets, the memory
 * fraction and trace settings, the snapshot and the block lookup. Each
 * call takes the lock once; none is on the malloc/free path. The counters
 * themselves are updated by every part, through stats.h. */
#include "alloc/stats.h"
#include "alloc/blockmap.h"
#include "alloc/lock.h"
#include "alloc/tcache.h"
#include <stdlib.h>

/* ------------------------------------------------------------------ */
/* stats, fraction, trace                                               */

void tc_alloc_get_stats(tc_alloc *a, tcuda_memory_stats_t *out) {
  lk_lock(&a->mu);
  *out = a->st;
  tc_tcache_adjust(a, out); /* thread_cache: cached blocks are free to their users */
  lk_unlock(&a->mu);
}

#define NINE_ARRAYS(st, X)                                                                           \
  X((st).allocation) X((st).segment) X((st).active) X((st).inactive_split) X((st).allocated_bytes) \
      X((st).reserved_bytes) X((st).active_bytes) X((st).inactive_split_bytes) X((st).requested_bytes)

void tc_alloc_reset_peak(tc_alloc *a) {
  lk_lock(&a->mu);
#define PEAK(arr) for (int k = 0; k < TCUDA_STAT_TYPES; k++) arr[k].peak = arr[k].current;
  NINE_ARRAYS(a->st, PEAK)
#undef PEAK
  a->st.oversize_allocations.peak = a->st.oversize_allocations.current;
  a->st.oversize_segments.peak = a->st.oversize_segments.current;
  tc_tcache_reset_peak(a);
  lk_unlock(&a->mu);
}

void tc_alloc_reset_accumulated(tc_alloc *a) {
  lk_lock(&a->mu);
#define ACC(arr) for (int k = 0; k < TCUDA_STAT_TYPES; k++) arr[k].allocated = arr[k].freed = 0;
  NINE_ARRAYS(a->st, ACC)
#undef ACC
  a->st.oversize_allocations.allocated = a->st.oversize_allocations.freed = 0;
  a->st.oversize_segments.allocated = a->st.oversize_segments.freed = 0;
  a->st.num_alloc_retries = a->st.num_ooms = a->st.num_sync_all_streams = 0;
  a->st.num_device_alloc = a->st.num_device_free = 0;
  tc_tcache_reset_accumulated(a);
  lk_unlock(&a->mu);
}

tcuda_status tc_alloc_set_memory_fraction(tc_alloc *a, double fraction) {
  TC_CHECK_ARG("tc_alloc_set_memory_fraction", a != NULL, "allocator");
  if (!(fraction >= 0.0 && fraction <= 1.0))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "Invalid fraction value: %g. Allowed range: 0~1", fraction);
  lk_lock(&a->mu);
  /* torch 2.11: 1.0 means no limit at all, not a limit of totalGlobalMem. */
  a->has_allowed = fraction < 1.0;
  a->allowed_max = a->has_allowed ? (uint64_t)(fraction * (double)a->total_memory) : 0;
  lk_unlock(&a->mu);
  return TCUDA_SUCCESS;
}

double tc_alloc_get_memory_fraction(tc_alloc *a) {
  lk_lock(&a->mu);
  double f = a->has_allowed && a->total_memory ? (double)a->allowed_max / (double)a->total_memory : 1.0;
  lk_unlock(&a->mu);
  return f;
}

int tc_alloc_device(const tc_alloc *a) { return a->device; }

void tc_alloc_set_trace(tc_alloc *a, tc_trace_fn fn, void *ctx) {
  lk_lock(&a->mu);
  /* thread_cache: while a trace records, every call takes the lock path,
   * so the history sees each one; cached blocks go back before it starts */
  if (fn && a->tc_ever) tc_tcache_flush(a, UINT64_MAX);
  a->trace = fn;
  a->trace_ctx = ctx;
  tc_tcache_update(a);
  lk_unlock(&a->mu);
}

/* ------------------------------------------------------------------ */
/* snapshot, lookup                                                     */

static tcuda_block_state block_state(const tc_block *b) {
  if (b->allocated) return TCUDA_BLOCK_ACTIVE_ALLOCATED;
  if (b->event_count > 0 || b->nuses) return TCUDA_BLOCK_ACTIVE_PENDING_FREE;
  return TCUDA_BLOCK_INACTIVE;
}

static int seg_cmp(const void *x, const void *y) {
  uint64_t a = ((const tcuda_segment_info_t *)x)->address, b = ((const tcuda_segment_info_t *)y)->address;
  return a < b ? -1 : a > b;
}

void tc_snapshot_free(tcuda_snapshot_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->num_segments; i++) free(s->segments[i].blocks);
  free(s->segments);
  free(s);
}

tcuda_status tc_alloc_snapshot(tc_alloc *a, tcuda_snapshot_t **out) {
  TC_CHECK_ARG("tc_alloc_snapshot", a != NULL, "allocator");
  TC_CHECK_ARG("tc_alloc_snapshot", out != NULL, "out");
  *out = NULL;
  tcuda_snapshot_t *s = (tcuda_snapshot_t *)calloc(1, sizeof *s);
  if (!s) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "tc_alloc_snapshot: out of host memory");
  lk_lock(&a->mu);
  tc_tcache_lock_all(a); /* a cache hit writes its block's requested size */
  /* Count the reported segments: one per contiguous mapped run. */
  size_t nseg = 0;
  for (tc_seg *g = a->segs; g; g = g->lnext)
    for (tc_block *b = g->head; b; b = b->next)
      if (b->mapped && (!b->prev || !b->prev->mapped)) nseg++;
  s->segments = (tcuda_segment_info_t *)calloc(nseg ? nseg : 1, sizeof *s->segments);
  int fail = !s->segments;
  uint64_t total_active = 0;
  for (tc_seg *g = a->segs; g && !fail; g = g->lnext) {
    for (tc_block *h = g->head; h && !fail; h = h->next) {
      if (!h->mapped || (h->prev && h->prev->mapped)) continue;
      tcuda_segment_info_t *si = &s->segments[s->num_segments++];
      si->device = a->device;
      si->address = h->addr;
      si->stream = (int64_t)g->stream;
      si->is_large = !g->pool->is_small;
      if (g->pool->owner) {
        si->pool_id[0] = g->pool->owner->id[0];
        si->pool_id[1] = g->pool->owner->id[1];
      }
      si->is_expandable = g->expandable;
      size_t nb = 0;
      for (tc_block *b = h; b && b->mapped; b = b->next) nb++;
      si->blocks = (tcuda_block_info_t *)calloc(nb, sizeof *si->blocks);
      if (!si->blocks) {
        fail = 1;
        break;
      }
      for (tc_block *b = h; b && b->mapped; b = b->next) {
        tcuda_block_info_t *bi = &si->blocks[si->num_blocks++];
        bi->address = b->addr;
        bi->size = b->size;
        bi->requested_size = b->requested;
        bi->state = block_state(b);
        si->total_size += b->size;
        if (b->allocated) si->allocated_size += b->size;
        if (bi->state != TCUDA_BLOCK_INACTIVE) {
          si->active_size += b->size;
          si->requested_size += b->requested;
        }
      }
      total_active += si->active_size;
    }
  }
  if (!fail) TRACE(a, TC_TRACE_SNAPSHOT, 0, total_active, 0);
  tc_tcache_unlock_all(a);
  lk_unlock(&a->mu);
  if (fail) {
    tc_snapshot_free(s);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "tc_alloc_snapshot: out of host memory");
  }
  qsort(s->segments, s->num_segments, sizeof *s->segments, seg_cmp);
  *out = s;
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_block_info(tc_alloc *a, uint64_t addr, uint64_t *block_addr, uint64_t *block_size,
                                 uint64_t *segment_addr, uint64_t *segment_size) {
  TC_CHECK_ARG("tc_alloc_block_info", a != NULL, "allocator");
  lk_lock(&a->mu);
  tc_block *b = ht_find(a, addr);
  if (!b) { /* an interior pointer: find its segment */
    for (tc_seg *g = a->segs; g && !b; g = g->lnext) {
      if (addr < g->addr || addr - g->addr >= g->size) continue;
      for (tc_block *x = g->head; x; x = x->next)
        if (addr >= x->addr && addr - x->addr < x->size) {
          if (x->allocated) b = x;
          break;
        }
    }
  }
  if (b && a->tc_ever) { /* freed into a thread cache: no live allocation */
    tc_tcache_lock_all(a);
    if (b->tcached) b = NULL;
    tc_tcache_unlock_all(a);
  }
  if (!b) {
    lk_unlock(&a->mu);
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "pointer 0x%llx is not inside a live allocation of device %d",
                    (unsigned long long)addr, a->device);
  }
  /* The segment is the contiguous mapped run holding the block. */
  tc_block *lo = b, *hi = b;
  while (lo->prev && lo->prev->mapped) lo = lo->prev;
  uint64_t end = hi->addr + hi->size;
  while (hi->next && hi->next->mapped) {
    hi = hi->next;
    end = hi->addr + hi->size;
  }
  if (block_addr) *block_addr = b->addr;
  if (block_size) *block_size = b->size;
  if (segment_addr) *segment_addr = lo->addr;
  if (segment_size) *segment_size = end - lo->addr;
  lk_unlock(&a->mu);
  return TCUDA_SUCCESS;
}
