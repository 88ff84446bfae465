/* The pools (pools.c): the small/large pair of each allocator and of each
 * CUDA graph's private pool, the captures that route allocations into a
 * private pool, and torch's release of a pool's cached memory. */
#ifndef TC_ALLOC_POOLS_H
#define TC_ALLOC_POOLS_H
#include "alloc/types.h"
#include <stdatomic.h>

/* torch's captures_underway entry. */
struct tc_capture {
  tc_ppool *pool;
  tc_capture_filter fn;
  void *ctx;
};

/* Whether some capture is routing into a private pool (torch's
 * captures_underway non-empty). Under the lock. */
static inline int capturing(const tc_alloc *a) { return atomic_load_explicit(&a->ncaps, memory_order_relaxed) != 0; }

/* A small/large pool pair, empty; owner is the private pool or NULL. */
void tc_pools_init(tc_pool *small, tc_pool *large, tc_ppool *owner);
void tc_pools_destroy(tc_pool *small, tc_pool *large);
/* torch's release_blocks: a pool's unsplit free segments and free pages. */
tcuda_status tc_release_blocks(tc_alloc *a, tc_pool *pool);
/* Freeable private pools give back what they can, and go when empty. */
tcuda_status tc_release_freeable_pools(tc_alloc *a);
/* Free a private pool's structure, its segments already gone; its
 * allocator's release runs last. */
void tc_ppool_free(tc_ppool *p);

#endif
