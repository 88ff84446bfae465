/* The caching allocator engine: PyTorch's DeviceCachingAllocator decisions
 * and statistics, in pure C over a tc_backend. This file holds the core:
 * sizes, malloc (split, garbage collection, the OOM retry), free,
 * empty_cache, create, destroy and the config. It is torch's policy; the
 * compact policy joins it at the hook points of compact.h. It is the top
 * layer: it calls the other parts and none of them calls it. alloc.h maps
 * the parts, types.h the data structures. Where the code says "torch", it
 * mirrors c10/cuda/CUDACachingAllocator.cpp (2.9-2.11) as described in
 * docs/allocator.md. */
#include "core/annotate.h"
#include "alloc/block.h"
#include "alloc/blockmap.h"
#include "alloc/compact.h"
#include "alloc/events.h"
#include "alloc/expandable.h"
#include "alloc/freeset.h"
#include "alloc/lock.h"
#include "alloc/pools.h"
#include "alloc/stats.h"
#include "alloc/tcache.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ONE_EB ((uint64_t)1 << 60)

/* ------------------------------------------------------------------ */
/* sizes                                                                */

static uint64_t next_division(uint64_t size, uint64_t divisions) {
  if (!(size & (size - 1))) return size;
  uint64_t floor2 = (uint64_t)1 << tc_log2_floor(size);
  uint64_t step = floor2 >> tc_log2_floor(divisions);
  if (step == 0) return floor2 << 1;
  uint64_t down = size & ~(step - 1);
  return down == size ? size : down + step;
}

static inline uint64_t round_size(const tc_alloc_config *cfg, uint64_t size) {
  if (size < TC_MIN_BLOCK_SIZE) return TC_MIN_BLOCK_SIZE;
  int idx = (int)tc_log2_floor(size) - 20; /* slots start at 1 MiB */
  if (idx < 0) idx = 0;
  if (idx > TC_ROUNDUP_SLOTS - 1) idx = TC_ROUNDUP_SLOTS - 1;
  uint64_t d = cfg->roundup_power2_divisions[idx];
  if (d > 1 && size > TC_MIN_BLOCK_SIZE * d) return next_division(size, d);
  return TC_MIN_BLOCK_SIZE * ((size + TC_MIN_BLOCK_SIZE - 1) / TC_MIN_BLOCK_SIZE);
}

uint64_t tc_alloc_round_size(const tc_alloc_config *cfg, uint64_t size) { return round_size(cfg, size); }

uint64_t tc_alloc_segment_size(const tc_alloc_config *cfg, uint64_t size) {
  if (size <= TC_SMALL_SIZE) return TC_SMALL_BUFFER;
  if (size < TC_MIN_LARGE_ALLOC) return cfg->large_segment_size;
  return TC_ROUND_LARGE * ((size + TC_ROUND_LARGE - 1) / TC_ROUND_LARGE);
}

/* torch's c10 format_size(), for the OOM message. */
static void format_size(char *out, size_t n, uint64_t v) {
  if (v <= 1024) snprintf(out, n, "%llu bytes", (unsigned long long)v);
  else if (v <= ((uint64_t)1 << 20)) snprintf(out, n, "%.2f KiB", (double)v / 1024.0);
  else if (v <= ((uint64_t)1 << 30)) snprintf(out, n, "%.2f MiB", (double)v / 1048576.0);
  else snprintf(out, n, "%.2f GiB", (double)v / 1073741824.0);
}

/* ------------------------------------------------------------------ */
/* malloc                                                               */

typedef struct params {
  uint64_t size, stream;
  tc_pool *pool;
  tc_block *block;
  int in_tree; /* block is still in pool->blocks (alloc_found_block takes it out) */
} params;

/* A request of orig bytes on stream, in its default pool. */
static inline void params_init(tc_alloc *a, params *p, uint64_t orig, uint64_t stream) {
  p->size = round_size(&a->cfg, orig);
  p->stream = stream;
  p->pool = tc_compact_route(a, &a->small, &a->large, p->size);
  p->block = NULL;
  p->in_tree = 0;
}

HOT_INLINE int get_free_block(tc_alloc *a, params *p) {
  tc_pool *pool = p->pool;
  if (a->has_allowed && a->cfg.garbage_collection_threshold > 0) pool->gc_calls++;
  tc_block *nf = tc_compact_pick(a, pool, p->stream, p->size);
  if (nf) {
    p->block = nf;
    p->in_tree = 1;
    return 1;
  }
  tc_block *it = bs_lower_bound(&pool->blocks, p->stream, p->size, 0);
  if (!it || it->stream != p->stream) return 0;
  int grow = it->seg->expandable && !tc_compact_fixed_hits(a);
  if (grow) {
    if (vmm_segments(a)) {
      /* Best fit by the size a block can grow to, not its mapped size. */
#define EXP_SIZE(b) ((b)->size + ((b)->next && !(b)->next->mapped ? (b)->next->size : 0))
      tc_block *nx = bs_next(&pool->blocks, it);
      while (it->seg->expandable && nx && nx->stream == p->stream && EXP_SIZE(nx) < EXP_SIZE(it)) {
        it = nx;
        nx = bs_next(&pool->blocks, nx);
      }
#undef EXP_SIZE
    } else {
      do it = bs_next(&pool->blocks, it);
      while (it && it->seg->expandable && it->stream == p->stream);
      if (!it || it->stream != p->stream) return 0;
    }
  }
  uint64_t msp = a->cfg.max_split_size;
  if (p->size < msp && it->size >= msp) return 0;
  if (p->size >= msp && it->size >= p->size + a->cfg.max_non_split_rounding_size) return 0;
  p->block = it;
  if (grow) bs_erase(it);
  else p->in_tree = 1;
  return 1;
}

static tcuda_status garbage_collect(tc_alloc *a) {
  uint64_t thr = (uint64_t)(a->cfg.garbage_collection_threshold * (double)a->allowed_max);
  if (a->total_allocated <= thr) return TCUDA_SUCCESS;
  uint64_t target = a->total_allocated - thr, reclaimed = 0, total_age = 0;
  int count = 0;
  tc_pool *pool = &a->large;
  for (tc_block *b = tc_bs_first(&pool->blocks); b; b = bs_next(&pool->blocks, b)) {
    if (!is_split(b)) {
      total_age += (uint64_t)(int)(pool->gc_calls - b->gc_base);
      count++;
    }
  }
  if (!count) return TCUDA_SUCCESS;
  int freed = 1;
  while (reclaimed < target && freed && count > 0) {
    double age_thr = (double)total_age / count;
    freed = 0;
    tc_block *b = tc_bs_first(&pool->blocks);
    while (b) {
      tc_block *nx = bs_next(&pool->blocks, b);
      uint64_t age = (uint64_t)(int)(pool->gc_calls - b->gc_base);
      if (!is_split(b) && !b->seg->expandable && (double)age >= age_thr) {
        uint64_t sz = b->size;
        tcuda_status s = tc_release_block(a, b);
        if (s) return s;
        freed = 1;
        reclaimed += sz;
        total_age -= age;
        count--;
      }
      b = nx;
    }
  }
  return TCUDA_SUCCESS;
}

/* Returns 1 found, 0 device OOM, -1 error (*err). */
static int alloc_block(tc_alloc *a, params *p, int is_retry, tcuda_status *err) {
  if (is_retry) a->st.num_alloc_retries++;
  uint64_t size = tc_alloc_segment_size(&a->cfg, p->size); /* only on a miss: not in params_init */
  /* a pool with its own allocator takes whole segments from it, as torch's */
  const tcuda_pool_allocator_t *own = tc_pool_allocator(p->pool);
  tcuda_status s = own ? TCUDA_SUCCESS : tc_compact_before_map(a, p->pool, p->size, &size);
  if (s) return *err = s, -1;
  if (a->has_allowed && a->total_allocated + size > a->allowed_max) {
    if (a->be->release_kept) a->be->release_kept(a->be->ctx, a->device);
    return 0;
  }
  if (vmm_segments(a) && !own) {
    uint64_t page = tc_compact_page(a, p->pool);
    int r = tc_try_allocate_expandable(a, p->pool, p->stream, p->size, page, &p->block, err);
    tc_compact_after_map(a, p->pool, p->size, r, p->block);
    return r;
  }
  tc_seg *seg = (tc_seg *)calloc(1, sizeof *seg);
  if (!seg) return *err = host_oom(), -1;
  if (own) seg->pa = *own; /* a copy: the lock may be dropped around the call */
  uint64_t addr = 0;
  s = tc_bs_reserve(&p->pool->blocks, p->stream, &seg->bs);
  if (s) {
    free(seg);
    return *err = s, -1;
  }
  if (a->cfg.release_lock_on_cudamalloc) {
    lk_unlock(&a->mu);
    s = tc_seg_alloc(a, &seg->pa, p->stream, size, &addr);
    lk_lock(&a->mu);
  } else {
    s = tc_seg_alloc(a, &seg->pa, p->stream, size, &addr);
  }
  if (!s) s = reserve_blocks(a, 4); /* others may have used ours while unlocked */
  if (s) {
    if (s != TCUDA_ERROR_OUT_OF_MEMORY && addr) tc_seg_free(a, &seg->pa, p->stream, addr, size);
    free(seg);
    if (s == TCUDA_ERROR_OUT_OF_MEMORY) return 0;
    return *err = s, -1;
  }
  seg->pool = p->pool;
  seg->stream = p->stream;
  seg->addr = addr;
  seg->size = size;
  tc_seg_link(a, seg);
  if (p->pool->owner) p->pool->owner->nsegs++;
  tc_block *b = new_block(a, seg, addr, size);
  seg->head = b;
  a->total_allocated += size;
  arr_inc(a->st.segment, p->pool->pidx, 1);
  arr_inc(a->st.reserved_bytes, p->pool->pidx, (int64_t)size);
  if (size >= a->cfg.max_split_size) st_inc(&a->st.oversize_segments, 1);
  a->st.num_device_alloc++;
  TRACE(a, TC_TRACE_SEGMENT_ALLOC, addr, size, p->stream);
  p->block = b;
  return 1;
}

/* Returns 1 released enough, 0 not, -1 error. */
static int release_available_cached_blocks(tc_alloc *a, const params *p, tcuda_status *err) {
  uint64_t msp = a->cfg.max_split_size;
  if (msp == UINT64_MAX) return 0;
  tc_bset *t = &p->pool->blocks;
  uint64_t key = p->size < msp ? msp : p->size;
  tc_block *it = bs_lower_bound(t, p->stream, key, 0);
  if (!it || it->stream != p->stream || it->seg->expandable) {
    if (it == tc_bs_first(t)) return 0;
    it = it ? tc_bs_prev(t, it) : tc_bs_last(t);
    uint64_t released = 0;
    while (released < key && it->size >= msp && it->stream == p->stream) {
      tc_block *cur = it, *pv = tc_bs_prev(t, cur);
      if (pv) it = pv;
      if (!cur->seg->expandable && !is_split(cur)) {
        uint64_t sz = cur->size;
        tcuda_status s = tc_release_block(a, cur);
        if (s) return *err = s, -1;
        released += sz;
      }
      if (!pv) break;
    }
    if (released < key) return 0;
  } else {
    if (is_split(it)) return 0; /* oversize blocks are never split */
    tcuda_status s = tc_release_block(a, it);
    if (s) return *err = s, -1;
  }
  return 1;
}

static tcuda_status release_cached_blocks(tc_alloc *a) {
  if (a->tc_ever) tc_tcache_flush(a, UINT64_MAX);
  tcuda_status s = tc_synchronize_and_free_events(a);
  if (!s) s = tc_release_blocks(a, &a->large);
  if (!s) s = tc_release_blocks(a, &a->small);
  if (!s && a->ppools) s = tc_release_freeable_pools(a);
  return s;
}

static int should_split(const tc_alloc *a, const tc_block *b, uint64_t size) {
  if (b->pool->owner && b->pool->owner->no_split) return 0;
  uint64_t rem = b->size - size;
  if (b->pool->is_small || vmm_segments(a)) return rem >= TC_MIN_BLOCK_SIZE;
  return size < a->cfg.max_split_size && rem > TC_SMALL_SIZE;
}

/* torch's alloc_found_block. The found block object keeps the low part, which
 * is what gets handed out; the new object is the remainder and carries the
 * old block's (stale) requested size, as torch's remainder does. */
HOT_INLINE tc_block *alloc_found_block(tc_alloc *a, params *p, uint64_t orig_size, int split) {
  tc_block *b = p->block;
  tc_pool *pool = p->pool;
  /* by request size, which under the torch policy is also the pool's */
  int pidx = p->size <= TC_SMALL_SIZE ? TCUDA_STAT_SMALL_POOL : TCUDA_STAT_LARGE_POOL, exp = b->seg->expandable;
  int already_split = is_split(b);
  if (split) {
    tc_block *rem = new_block(a, b->seg, b->addr + p->size, b->size - p->size);
    rem->requested = b->requested;
    rem->prev = b;
    rem->next = b->next;
    if (rem->next) rem->next->prev = rem;
    b->next = rem;
    b->size = p->size;
    /* the remainder takes b's place in the free set (in place when it can) */
    if (p->in_tree) {
      rem->gc_base = pool->gc_calls;
      bs_move(a, b, rem, 1);
      p->in_tree = 0;
    } else {
      pool_insert(a, pool, rem);
    }
    if (!exp) {
      if (already_split) {
        arr_dec(a->st.inactive_split_bytes, pidx, (int64_t)b->size);
      } else {
        arr_inc(a->st.inactive_split_bytes, pidx, (int64_t)rem->size);
        arr_inc(a->st.inactive_split, pidx, 1);
      }
    }
  } else if (already_split && !exp) {
    arr_dec(a->st.inactive_split_bytes, pidx, (int64_t)b->size);
    arr_dec(a->st.inactive_split, pidx, 1);
  }
  if (p->in_tree) bs_erase(b);
  b->allocated = 1;
  b->pidx = (uint8_t)pidx;
  b->requested = orig_size;
  ht_put(a, b->addr, b);
  TRACE(a, TC_TRACE_ALLOC, b->addr, orig_size, b->stream);
  arr_inc(a->st.allocation, pidx, 1);
  arr_inc(a->st.allocated_bytes, pidx, (int64_t)b->size);
  arr_inc(a->st.active, pidx, 1);
  arr_inc(a->st.active_bytes, pidx, (int64_t)b->size);
  arr_inc(a->st.requested_bytes, pidx, (int64_t)orig_size);
  if (b->size >= a->cfg.max_split_size) st_inc(&a->st.oversize_allocations, 1);
  return b;
}

static tcuda_status oom(tc_alloc *a, const params *p) {
  uint64_t dfree = 0, dtotal = 0;
  if (a->be->mem_info(a->be->ctx, a->device, &dfree, &dtotal)) {
    dfree = 0;
    dtotal = a->total_memory;
  }
  TRACE(a, TC_TRACE_OOM, dfree, p->size, p->stream);
  a->st.num_ooms++;
  char tried[32], total[32], freeb[32], allowed[48] = "", alloc[32], unalloc[32];
  format_size(tried, sizeof tried, tc_alloc_segment_size(&a->cfg, p->size));
  format_size(total, sizeof total, dtotal);
  format_size(freeb, sizeof freeb, dfree);
  if (a->has_allowed) {
    format_size(allowed, sizeof allowed, a->allowed_max);
    strcat(allowed, " allowed; ");
  }
  int64_t ab = a->st.allocated_bytes[TCUDA_STAT_ALL].current, rb = a->st.reserved_bytes[TCUDA_STAT_ALL].current;
  format_size(alloc, sizeof alloc, (uint64_t)ab);
  format_size(unalloc, sizeof unalloc, (uint64_t)(rb - ab));
  const char *advice = tc_compact_oom_advice(a);
  if (!advice)
    advice = "If reserved but unallocated memory is large try setting "
             "TCUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
             "for Memory Management  (https://docs.pytorch.org/docs/stable/notes/"
             "cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)";
  return tc_error(TCUDA_ERROR_OUT_OF_MEMORY,
                  "CUDA out of memory. Tried to allocate %s. GPU %d has a total capacity of %s of which %s is free. "
                  "%sOf the allocated memory %s is allocated by tcuda, and %s is reserved by tcuda but unallocated. %s",
                  tried, a->device, total, freeb, allowed, alloc, unalloc, advice);
}

/* torch's get_pool: a stream some capture's filter claims allocates from
 * that capture's private pool (latest capture first). */
static tc_pool *capture_pool(tc_alloc *a, uint64_t size, uint64_t stream) {
  for (size_t i = (size_t)atomic_load_explicit(&a->ncaps, memory_order_relaxed); i-- > 0;)
    if (a->caps[i].fn(a->caps[i].ctx, stream))
      return tc_compact_route(a, &a->caps[i].pool->small, &a->caps[i].pool->large, size);
  return NULL;
}

/* torch's last resort before an OOM: a free block of a use_on_oom pool
 * (one still in use), never a new segment there. 1 found (*p moved). */
static int oom_pool_block(tc_alloc *a, params *p) {
  if (p->pool->owner) return 0; /* a request routed to a pool just fails */
  for (tc_ppool *pp = a->ppools; pp; pp = pp->next) {
    if (!pp->use_on_oom || pp->use_count <= 0) continue;
    params q = *p;
    q.pool = tc_compact_route(a, &pp->small, &pp->large, p->size);
    q.block = NULL;
    q.in_tree = 0;
    if (get_free_block(a, &q)) {
      *p = q;
      return 1;
    }
  }
  return 0;
}

/* No cached block fits: garbage collection, a new segment, then the OOM
 * retries. SUCCESS with p->block set, or the error. */
static SLOW_PATH tcuda_status malloc_miss(tc_alloc *a, params *p, int cap) {
  tcuda_status s = TCUDA_SUCCESS;
  if (a->has_allowed && a->cfg.garbage_collection_threshold > 0 && (s = garbage_collect(a))) return s;
  int r = alloc_block(a, p, 0, &s);
  if (r == 0 && a->tc_ever && tc_tcache_flush(a, UINT64_MAX) > 0) { /* before anything is released */
    p->block = NULL;
    p->in_tree = 0;
    r = get_free_block(a, p) ? 1 : alloc_block(a, p, 0, &s);
  }
  if (r == 0) {
    r = release_available_cached_blocks(a, p, &s);
    if (r > 0) r = alloc_block(a, p, 0, &s);
  }
  if (r == 0 && !cap) { /* the full flush synchronizes: not while capturing */
    TC_ANNOTATE_BEGIN("tcuda: allocator OOM retry (release cached blocks)");
    tcuda_status rs = release_cached_blocks(a);
    if (!rs) r = alloc_block(a, p, 1, &s);
    TC_ANNOTATE_END();
    if (rs) return rs;
  }
  if (r == 0 && a->ppools) r = oom_pool_block(a, p);
  if (r < 0) return s;
  if (r == 0) return oom(a, p);
  return TCUDA_SUCCESS;
}

/* The block itself, for thread_cache's miss path, which tracks it. */
HOT_INLINE tcuda_status malloc_block(tc_alloc *a, uint64_t orig, uint64_t stream, tc_block **out) {
  int cap = capturing(a);
  tcuda_status s = reserve_blocks(a, 4);
  if (!s) s = ht_reserve(a);
  if (!s && !cap) s = process_events(a); /* querying events recorded under capture is illegal */
  if (s) return s;
  params p;
  params_init(a, &p, orig, stream);
  if (cap) {
    tc_pool *pp = capture_pool(a, p.size, stream);
    if (pp) p.pool = pp;
  }
  if (!get_free_block(a, &p) && (s = malloc_miss(a, &p, cap))) return s;
  *out = alloc_found_block(a, &p, orig, should_split(a, p.block, p.size));
  return TCUDA_SUCCESS;
}

HOT_INLINE tcuda_status malloc_locked(tc_alloc *a, uint64_t orig, uint64_t stream, uint64_t *addr) {
  tc_block *b;
  tcuda_status s = malloc_block(a, orig, stream, &b);
  if (!s) *addr = b->addr;
  return s;
}

/* ------------------------------------------------------------------ */
/* contended calls: the requests lock.c's combining runs for other threads */

static tcuda_status free_found(tc_alloc *a, tc_block *b, size_t slot);

/* A cached malloc or a plain free; 0 when it needs the full path. Never
 * sets an error (it may run in another thread). */
static int run_fast(tc_alloc *a, tc_req *r) {
  if (a->trace || capturing(a) || a->tc_n) return 0; /* thread_cache: its own path (tcache.h) */
  if (r->op == OP_FREE) {
    size_t slot = ht_slot(a, r->addr);
    if (slot == SIZE_MAX || a->ht[slot].b->nuses) return 0;
    return free_found(a, a->ht[slot].b, slot) == TCUDA_SUCCESS;
  }
  if (a->has_allowed && a->cfg.garbage_collection_threshold > 0) return 0; /* get_free_block counts GC calls */
  /* nothing here may set an error message: it would land in the lock
   * holder's thread. So no growth and no pending events on this path. */
  if (a->nfree < 4 || ht_full(a) || a->nevq || a->ndeferred) return 0;
  params p;
  params_init(a, &p, r->size, r->stream);
  if (!get_free_block(a, &p)) return 0;
  r->addr = alloc_found_block(a, &p, r->size, should_split(a, p.block, p.size))->addr;
  return 1;
}

/* ------------------------------------------------------------------ */
/* thread_cache: this thread's cache first, then the lock (tcache.h)    */

/* round_size for a cacheable size, without the lock: the config's first
 * divisions slot is mirrored in tc_div0. */
static uint64_t round_unlocked(const tc_alloc *a, uint64_t size) {
  if (size < TC_MIN_BLOCK_SIZE) return TC_MIN_BLOCK_SIZE;
  uint64_t d = atomic_load_explicit(&a->tc_div0, memory_order_relaxed);
  if (d > 1 && size > TC_MIN_BLOCK_SIZE * d) return next_division(size, d);
  return TC_MIN_BLOCK_SIZE * ((size + TC_MIN_BLOCK_SIZE - 1) / TC_MIN_BLOCK_SIZE);
}

static SLOW_PATH tcuda_status malloc_tcache(tc_alloc *a, uint64_t size, uint64_t stream, uint64_t *addr) {
  tc_tcache *c = NULL;
  if (size <= TC_TCACHE_MAX && (c = tc_tcache_get(a)) != NULL) {
    uint64_t rs = round_unlocked(a, size);
    if (rs <= TC_TCACHE_MAX && tc_tcache_take(a, c, size, rs, stream, addr)) return TCUDA_SUCCESS;
  }
  lk_lock(&a->mu);
  tc_block *b;
  tcuda_status s = malloc_block(a, size, stream, &b);
  if (!s) {
    *addr = b->addr;
    if (c) tc_tcache_track(a, c, b);
  }
  unlock_serving(a);
  return s;
}

/* The lock path's free of a block the caches may know. */
static SLOW_PATH int free_tcache(tc_alloc *a, uint64_t addr, tcuda_status *status) {
  if (tc_tcache_put(a, addr)) {
    *status = TCUDA_SUCCESS;
    return 1;
  }
  lk_lock(&a->mu);
  size_t slot = ht_slot(a, addr);
  tc_block *b = slot == SIZE_MAX ? NULL : a->ht[slot].b;
  if (b && b->tcached) b = NULL; /* freed already: in a thread cache */
  if (b) {
    tc_tcache_forget(a, b);
    *status = free_found(a, b, slot);
  }
  unlock_serving(a);
  return b != NULL;
}

/* A flushed block: allocated in the books, free for its user. */
static void release_flushed(tc_alloc *a, tc_block *b) {
  size_t slot = ht_slot(a, b->addr);
  if (slot != SIZE_MAX) (void)free_found(a, b, slot); /* no uses: it cannot fail */
}

void tc_alloc_stream_gone(tc_alloc *a, uint64_t stream) {
  if (!a || !a->tc_ever) return;
  lk_lock(&a->mu);
  tc_tcache_flush(a, stream);
  unlock_serving(a);
}

tcuda_status tc_alloc_malloc(tc_alloc *a, uint64_t size, uint64_t stream, uint64_t *addr) {
  TC_CHECK_ARG("tc_alloc_malloc", a != NULL, "allocator");
  TC_CHECK_ARG("tc_alloc_malloc", addr != NULL, "addr");
  if (size == 0) {
    *addr = 0;
    return TCUDA_SUCCESS;
  }
  if (size > UINT64_MAX - TC_ROUND_LARGE)
    return tc_error(TCUDA_ERROR_OVERFLOW, "size %llu overflows when rounded up", (unsigned long long)size);
  if (size >= atomic_load_explicit(&a->tc_gate, memory_order_relaxed)) { /* ONE_EB, or thread_cache's 1 */
    if (size >= ONE_EB)
      return tc_error(TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory. Tried to allocate more than 1EB memory.");
    return malloc_tcache(a, size, stream, addr);
  }
  if (lock_or_combine(a, OP_MALLOC, size, stream, 0, addr)) return TCUDA_SUCCESS;
  tcuda_status s = malloc_locked(a, size, stream, addr);
  unlock_serving(a);
  return s;
}

/* ------------------------------------------------------------------ */
/* free, empty_cache                                                    */

/* b sits in hash slot `slot`. */
static tcuda_status free_found(tc_alloc *a, tc_block *b, size_t slot) {
  if (b->nuses && capturing(a)) {
    /* An event recorded now could be captured into a graph, and querying
     * one is illegal: wait until no capture is under way. */
    if (a->ndeferred == a->capdeferred) {
      tc_block **n = (tc_block **)tc_grow(a->deferred, &a->capdeferred, sizeof *n, 8);
      if (!n) return host_oom();
      a->deferred = n;
    }
    a->deferred[a->ndeferred++] = b;
  } else if (b->nuses) {
    tcuda_status s = tc_insert_events(a, b);
    if (s) return s;
  }
  ht_del_at(a, slot);
  b->allocated = 0;
  arr_dec(a->st.allocation, b->pidx, 1);
  arr_dec(a->st.allocated_bytes, b->pidx, (int64_t)b->size);
  TRACE(a, TC_TRACE_FREE_REQUESTED, b->addr, b->requested, b->stream);
  if (b->size >= a->cfg.max_split_size) st_dec(&a->st.oversize_allocations, 1);
  if (!b->event_count && !b->nuses) tc_free_block(a, b);
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_free(tc_alloc *a, uint64_t addr) {
  TC_CHECK_ARG("tc_alloc_free", a != NULL, "allocator");
  if (!addr) return TCUDA_SUCCESS; /* free(NULL), as torch's raw_delete */
  tcuda_status s;
  if (tc_alloc_free_if_owned(a, addr, &s)) return s;
  return tc_error(TCUDA_ERROR_INVALID_POINTER,
                  "pointer 0x%llx is not an allocation of device %d's allocator (never allocated, or already freed)",
                  (unsigned long long)addr, a->device);
}

int tc_alloc_free_if_owned(tc_alloc *a, uint64_t addr, tcuda_status *status) {
  /* Outside every range this allocator ever had: not its pointer. A free
   * racing with the segment's creation cannot happen (the pointer is not
   * handed out before seg_link). */
  if (addr < atomic_load_explicit(&a->va_lo, memory_order_relaxed) ||
      addr >= atomic_load_explicit(&a->va_hi, memory_order_relaxed))
    return 0;
  if (atomic_load_explicit(&a->tc_gate, memory_order_relaxed) < ONE_EB) return free_tcache(a, addr, status);
  if (lock_or_combine(a, OP_FREE, 0, 0, addr, NULL)) {
    *status = TCUDA_SUCCESS;
    return 1;
  }
  size_t slot = ht_slot(a, addr);
  tc_block *b = slot == SIZE_MAX ? NULL : a->ht[slot].b;
  if (b) *status = free_found(a, b, slot);
  unlock_serving(a);
  return b != NULL;
}

tcuda_status tc_alloc_empty_cache(tc_alloc *a) {
  TC_CHECK_ARG("tc_alloc_empty_cache", a != NULL, "allocator");
  lk_lock(&a->mu);
  tcuda_status s = capturing(a) ? tc_error(TCUDA_ERROR_INVALID_STATE,
                                           "empty_cache: not allowed while a CUDA graph capture is under way on "
                                           "device %d (it synchronizes and frees memory)", a->device)
                                : release_cached_blocks(a);
  lk_unlock(&a->mu);
  return s;
}

/* ------------------------------------------------------------------ */
/* create / destroy, the config                                         */

tcuda_status tc_alloc_create(int device, const tc_backend *be, const tc_alloc_config *cfg, uint64_t total_memory,
                             tc_alloc **out) {
  TC_CHECK_ARG("tc_alloc_create", be != NULL, "backend");
  TC_CHECK_ARG("tc_alloc_create", out != NULL, "out");
  *out = NULL;
  /* cache-line aligned, for the lock's and the pending mask's lines */
  size_t asz = (sizeof(tc_alloc) + 63) & ~(size_t)63;
  tc_alloc *a = (tc_alloc *)aligned_alloc(64, asz);
  if (!a) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "tc_alloc_create: out of host memory");
  memset(a, 0, asz);
  a->ht_bits = 10;
  a->ht_cap = (size_t)1 << a->ht_bits;
  a->ht = (tc_slot *)calloc(a->ht_cap, sizeof *a->ht);
  if (!a->ht) {
    free(a->ht);
    free(a);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "tc_alloc_create: out of host memory");
  }
  a->device = device;
  a->be = be;
  if (cfg) a->cfg = *cfg;
  else tc_alloc_config_default(&a->cfg);
  a->total_memory = total_memory;
  tc_pools_init(&a->small, &a->large, NULL);
  tc_compact_on_config(a);
  a->rng = 0x2545F4914F6CDD1Dull ^ ((uint64_t)(uintptr_t)a << 1);
  atomic_store(&a->va_lo, UINT64_MAX);
  /* without the slots every call simply takes the lock */
  a->run_req = run_fast;
  a->tc_release = release_flushed;
  a->tc_n = a->cfg.thread_cache;
  atomic_store(&a->tc_div0, a->cfg.roundup_power2_divisions[0]);
  tc_tcache_update(a);
  a->reqs = (tc_req *)aligned_alloc(_Alignof(tc_req), TC_REQ_SLOTS * sizeof(tc_req));
  if (a->reqs)
    for (int i = 0; i < TC_REQ_SLOTS; i++) atomic_init(&a->reqs[i].state, RQ_FREE);
  a->st.max_split_size = (int64_t)a->cfg.max_split_size; /* SIZE_MAX reads -1, as torch */
  if (reserve_blocks(a, TC_SLAB_BLOCKS)) {
    tc_alloc_destroy(a);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "tc_alloc_create: out of host memory");
  }
  *out = a;
  return TCUDA_SUCCESS;
}

void tc_alloc_destroy(tc_alloc *a) {
  if (!a) return;
  tc_tcache_detach_all(a);
  for (size_t i = 0; i < a->nevq; i++) {
    tc_evq *q = &a->evq[i];
    for (size_t k = 0; k < q->len; k++) a->be->event_release(a->be->ctx, q->q[(q->head + k) & (q->cap - 1)].ev);
    free(q->q);
  }
  free(a->evq);
  free(a->deferred);
  free(a->caps);
  /* segments before the pools: a pool's own allocator takes its segments back */
  while (a->segs) {
    tc_seg *g = a->segs;
    if (!g->expandable) {
      tc_seg_free(a, &g->pa, g->stream, g->addr, g->size);
    } else {
      for (uint64_t i = 0; i < g->npages;) {
        if (!g->pmap[i]) {
          i++;
          continue;
        }
        uint64_t j = i;
        while (j < g->npages && g->pmap[j]) j++;
        a->be->unmap(a->be->ctx, a->device, g->addr + i * g->page, (j - i) * g->page);
        i = j;
      }
      a->be->va_release(a->be->ctx, a->device, g->addr, g->size);
    }
    for (tc_block *b = g->head; b; b = b->next)
      if (b->uses != b->inl) free(b->uses);
    tc_seg_unlink_free(a, g);
  }
  while (a->ppools) {
    tc_ppool *p = a->ppools;
    a->ppools = p->next;
    tc_ppool_free(p);
  }
  tc_pools_destroy(&a->small, &a->large);
  for (size_t i = 0; i < a->nslabs; i++) free(a->slabs[i]);
  free(a->slabs);
  free(a->ht);
  free(a->reqs);
  free(a);
}

void tc_alloc_set_config(tc_alloc *a, const tc_alloc_config *cfg) {
  lk_lock(&a->mu);
  a->cfg = *cfg;
  tc_compact_on_config(a);
  a->tc_n = cfg->thread_cache;
  atomic_store_explicit(&a->tc_div0, cfg->roundup_power2_divisions[0], memory_order_relaxed);
  tc_tcache_update(a);
  lk_unlock(&a->mu);
}

void tc_alloc_get_config(tc_alloc *a, tc_alloc_config *out) {
  lk_lock(&a->mu);
  *out = a->cfg;
  lk_unlock(&a->mu);
}
