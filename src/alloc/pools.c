/* The pools: a small/large pair per allocator, and CUDA graphs' private
 * pools (torch's PrivatePool, beginAllocateToPool & co.), which hold a
 * graph's memory and route a capture's allocations into it. */
#include "alloc/pools.h"
#include "alloc/block.h"
#include "alloc/expandable.h"
#include "alloc/freeset.h"
#include "alloc/lock.h"
#include "alloc/tcache.h"
#include <stdlib.h>
#include <string.h>

/* A small/large pool pair, empty; owner is the private pool or NULL. */
void tc_pools_init(tc_pool *small, tc_pool *large, tc_ppool *owner) {
  small->is_small = 1;
  small->pidx = TCUDA_STAT_SMALL_POOL;
  large->pidx = TCUDA_STAT_LARGE_POOL;
  small->unmapped.by_addr = large->unmapped.by_addr = 1;
  small->owner = large->owner = owner;
}

void tc_pools_destroy(tc_pool *small, tc_pool *large) {
  tc_bs_destroy(&small->blocks);
  tc_bs_destroy(&large->blocks);
}

void tc_ppool_free(tc_ppool *p) {
  tc_pools_destroy(&p->small, &p->large);
  tcuda_pool_allocator_t pa = p->pa;
  free(p);
  if (pa.alloc && pa.release) pa.release(pa.user);
}

/* torch's release_blocks: a pool's unsplit free segments go back whole;
 * free expandable blocks give back their whole pages, and a reservation
 * left with nothing mapped goes too. torch synchronizes each expandable
 * segment's stream before unmapping; here one device synchronization
 * does, because that stream may have been destroyed since its blocks
 * were freed, and a dead handle crashes the driver. Under a capture,
 * where a device synchronization is not allowed, torch's way stays. */
tcuda_status tc_release_blocks(tc_alloc *a, tc_pool *pool) {
  size_t n = 0, cap = 0;
  tc_block **to_unmap = NULL;
  tc_block *b = tc_bs_first(&pool->blocks);
  while (b) {
    tc_block *nx = bs_next(&pool->blocks, b);
    if (b->seg->expandable) {
      if (n == cap) {
        tc_block **nu = (tc_block **)tc_grow(to_unmap, &cap, sizeof *nu, 16);
        if (!nu) {
          free(to_unmap);
          return host_oom();
        }
        to_unmap = nu;
      }
      to_unmap[n++] = b;
    } else if (!is_split(b)) {
      tcuda_status s = tc_release_block(a, b);
      if (s) {
        free(to_unmap);
        return s;
      }
    }
    b = nx;
  }
  tcuda_status s = TCUDA_SUCCESS;
  int flags = TC_UNMAP_SYNC;
  if (n && !capturing(a)) {
    s = a->be->device_synchronize(a->be->ctx, a->device);
    flags = 0;
  }
  for (size_t i = 0; i < n && !s; i++) {
    s = tc_unmap_block(a, to_unmap[i], flags, UINT64_MAX);
    if (!s && !is_split(to_unmap[i]) && !to_unmap[i]->mapped) s = tc_release_expandable_segment(a, to_unmap[i]);
  }
  free(to_unmap);
  return s;
}

/* torch: freeable private pools give back their unsplit free segments, and
 * a pool with none left is erased. */
tcuda_status tc_release_freeable_pools(tc_alloc *a) {
  tc_ppool **pp = &a->ppools;
  while (*pp) {
    tc_ppool *p = *pp;
    if (p->use_count > 0) {
      pp = &p->next;
      continue;
    }
    tcuda_status s = tc_release_blocks(a, &p->small);
    if (!s) s = tc_release_blocks(a, &p->large);
    if (s) return s;
    if (p->nsegs == 0) {
      *pp = p->next;
      tc_ppool_free(p);
    } else {
      pp = &p->next;
    }
  }
  return TCUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* CUDA graph private pools (torch's beginAllocateToPool & co.)          */

static tc_ppool *find_ppool(tc_alloc *a, const uint64_t id[2]) {
  for (tc_ppool *p = a->ppools; p; p = p->next)
    if (p->id[0] == id[0] && p->id[1] == id[1]) return p;
  return NULL;
}

static tcuda_status check_pool_id(const char *F, const uint64_t id[2]) {
  if (!id) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: mempool_id is NULL", F);
  if (!id[0] && !id[1])
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: mempool_id (0,0) is the default pool, not a private pool", F);
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_begin_allocate_to_pool(tc_alloc *a, const uint64_t id[2], tc_capture_filter fn, void *ctx) {
  static const char *F = "tc_alloc_begin_allocate_to_pool";
  TC_CHECK_ARG(F, a != NULL, "allocator");
  TC_CHECK_ARG(F, fn != NULL, "filter");
  tcuda_status s = check_pool_id(F, id);
  if (s) return s;
  lk_lock(&a->mu);
  size_t n = (size_t)atomic_load_explicit(&a->ncaps, memory_order_relaxed);
  for (size_t i = 0; i < n; i++)
    if (a->caps[i].pool->id[0] == id[0] && a->caps[i].pool->id[1] == id[1]) {
      lk_unlock(&a->mu);
      return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: already recording to mempool_id (%llu,%llu)", F,
                      (unsigned long long)id[0], (unsigned long long)id[1]);
    }
  if (n == a->capcaps) {
    tc_capture *nc = (tc_capture *)tc_grow(a->caps, &a->capcaps, sizeof *nc, 4);
    if (!nc) {
      lk_unlock(&a->mu);
      return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
    }
    a->caps = nc;
  }
  tc_ppool *p = find_ppool(a, id);
  if (!p) {
    if (!(p = (tc_ppool *)calloc(1, sizeof *p))) {
      lk_unlock(&a->mu);
      return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
    }
    p->id[0] = id[0];
    p->id[1] = id[1];
    tc_pools_init(&p->small, &p->large, p);
    p->next = a->ppools;
    a->ppools = p;
  }
  /* A freeable pool (use_count 0) comes back to life: torch asserts here. */
  p->use_count++;
  a->caps[n] = (tc_capture){p, fn, ctx};
  atomic_store_explicit(&a->ncaps, (int)n + 1, memory_order_relaxed);
  tc_tcache_update(a); /* thread_cache: caches go back and stop serving during the capture */
  lk_unlock(&a->mu);
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_end_allocate_to_pool(tc_alloc *a, const uint64_t id[2]) {
  static const char *F = "tc_alloc_end_allocate_to_pool";
  TC_CHECK_ARG(F, a != NULL, "allocator");
  tcuda_status s = check_pool_id(F, id);
  if (s) return s;
  lk_lock(&a->mu);
  size_t n = (size_t)atomic_load_explicit(&a->ncaps, memory_order_relaxed), i = 0;
  while (i < n && !(a->caps[i].pool->id[0] == id[0] && a->caps[i].pool->id[1] == id[1])) i++;
  if (i == n) {
    lk_unlock(&a->mu);
    return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: not currently recording to mempool_id (%llu,%llu)", F,
                    (unsigned long long)id[0], (unsigned long long)id[1]);
  }
  memmove(&a->caps[i], &a->caps[i + 1], (n - i - 1) * sizeof *a->caps);
  atomic_store_explicit(&a->ncaps, (int)n - 1, memory_order_relaxed);
  tc_tcache_update(a);
  lk_unlock(&a->mu);
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_release_pool(tc_alloc *a, const uint64_t id[2]) {
  static const char *F = "tc_alloc_release_pool";
  TC_CHECK_ARG(F, a != NULL, "allocator");
  tcuda_status s = check_pool_id(F, id);
  if (s) return s;
  lk_lock(&a->mu);
  tc_ppool *p = find_ppool(a, id);
  if (!p || p->use_count <= 0)
    s = tc_error(TCUDA_ERROR_INVALID_STATE, "%s: mempool_id (%llu,%llu) is %s", F, (unsigned long long)id[0],
                 (unsigned long long)id[1], p ? "not in use (already released)" : "not a pool of this device");
  else
    p->use_count--; /* at 0 it is freeable: the next release_cached_blocks frees it */
  lk_unlock(&a->mu);
  return s;
}

/* The existing pool `id`, with the lock held; NULL, unlocked and with the
 * error in *s (naming F), when the id is bad or there is no such pool. */
static tc_ppool *lock_existing(tc_alloc *a, const char *F, const uint64_t id[2], tcuda_status *s) {
  if ((*s = check_pool_id(F, id))) return NULL;
  lk_lock(&a->mu);
  tc_ppool *p = find_ppool(a, id);
  if (!p) {
    lk_unlock(&a->mu);
    *s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: no private pool (%llu,%llu) on device %d", F,
                  (unsigned long long)id[0], (unsigned long long)id[1], a->device);
  }
  return p;
}

tcuda_status tc_alloc_pool_info(tc_alloc *a, const uint64_t id[2], int *use_count, int64_t *segments) {
  static const char *F = "tc_alloc_pool_info";
  TC_CHECK_ARG(F, a != NULL, "allocator");
  tcuda_status s;
  tc_ppool *p = lock_existing(a, F, id, &s);
  if (!p) return s;
  if (use_count) *use_count = p->use_count;
  if (segments) *segments = p->nsegs;
  lk_unlock(&a->mu);
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_set_pool_allocator(tc_alloc *a, const uint64_t id[2], const tcuda_pool_allocator_t *pa) {
  static const char *F = "tc_alloc_set_pool_allocator";
  TC_CHECK_ARG(F, a != NULL, "allocator");
  TC_CHECK_ARG(F, pa != NULL, "pool allocator");
  TC_CHECK_ARG(F, pa->alloc != NULL, "pool allocator's alloc");
  TC_CHECK_ARG(F, pa->free != NULL, "pool allocator's free");
  tcuda_status s;
  tc_ppool *p = lock_existing(a, F, id, &s);
  if (!p) return s;
  if (a->compact.on)
    s = tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: policy:compact maps its own pages; a pool with its own "
                 "allocator needs policy:torch", F);
  else if (p->pa.alloc || p->nsegs)
    s = tc_error(TCUDA_ERROR_INVALID_STATE, "%s: pool (%llu,%llu) has %s already", F, (unsigned long long)id[0],
                 (unsigned long long)id[1], p->pa.alloc ? "an allocator" : "segments");
  else
    p->pa = *pa;
  lk_unlock(&a->mu);
  return s;
}

tcuda_status tc_alloc_set_pool_use_on_oom(tc_alloc *a, const uint64_t id[2], int use) {
  static const char *F = "tc_alloc_set_pool_use_on_oom";
  TC_CHECK_ARG(F, a != NULL, "allocator");
  tcuda_status s;
  tc_ppool *p = lock_existing(a, F, id, &s);
  if (!p) return s;
  p->use_on_oom = use != 0;
  lk_unlock(&a->mu);
  return TCUDA_SUCCESS;
}

tcuda_status tc_alloc_set_pool_no_split(tc_alloc *a, const uint64_t id[2]) {
  static const char *F = "tc_alloc_set_pool_no_split";
  TC_CHECK_ARG(F, a != NULL, "allocator");
  tcuda_status s;
  tc_ppool *p = lock_existing(a, F, id, &s);
  if (!p) return s;
  p->no_split = 1;
  lk_unlock(&a->mu);
  return TCUDA_SUCCESS;
}

int tc_alloc_captures_underway(tc_alloc *a) { return atomic_load_explicit(&a->ncaps, memory_order_relaxed); }
