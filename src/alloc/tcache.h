/* thread_cache:N (tcache.c): each thread keeps up to N freed small blocks
 * per device and serves them again without the device's lock.
 *
 * A cached block stays allocated in the device's books (hash table,
 * segments, the counters in tc_alloc.st): only the thread's cache and the
 * block's tco/tcached fields know it is free. So every invariant of the
 * lock path holds unchanged, and the memory cached is bounded by
 * N x threads x TC_TCACHE_MAX. What users see is corrected on read:
 * each cache counts its hits and puts under its own small lock, flushes
 * are counted under the device's lock, and tc_tcache_adjust merges them
 * into the statistics (docs/allocator.md, "Thread caches").
 *
 * Locks, in the order they nest: the registry's mutex (tcache.c: thread
 * exit, creation, allocator teardown), the device's lock, one cache's lock.
 * The owning thread takes only its cache's lock on a hit or a put.
 *
 * This part sits just above lock.h: it returns blocks to the pool through
 * tc_alloc.tc_release, which malloc.c sets (the lock path's free). */
#ifndef TC_ALLOC_TCACHE_H
#define TC_ALLOC_TCACHE_H
#include "alloc/lock.h"
#include <stdint.h>

/* Blocks up to torch's small-request limit are cached; a block serves only
 * a request that rounds to exactly its size, on its stream. */
#define TC_TCACHE_MAX TC_SMALL_SIZE
#define TC_TCACHE_MAX_N 256

/* One thread's cache for one allocator. */
struct tc_tcache {
  tc_lock lk;
  tc_alloc *a; /* NULL once the allocator is gone (under lk and the registry's mutex) */
  tc_tcache *next, *prev;   /* the allocator's list (under its lock) */
  tc_tcache *tnext;         /* the thread's list (registry's mutex) */
  tc_tcache *gnext, *gprev; /* every cache, for fork (registry's mutex) */
  /* the cached blocks, oldest first */
  tc_block *ent[TC_TCACHE_MAX_N];
  int n;
  /* the blocks this thread holds that may enter the cache: addr -> block,
   * open addressing, no tombstones */
  tc_block **map;
  size_t mcap, mlen;
  tc_tccount hits, puts; /* since creation */
};

/* ---- the hot path (malloc.c), in the order the calls meet them ---- */

/* This thread's cache for a, made on first use; NULL when the mode is off
 * for now (trace, capture) or the cache cannot be made. */
tc_tcache *tc_tcache_get(tc_alloc *a);
/* A cached block for a request of `size` bytes rounding to `rounded`, on
 * stream; 0 when none. */
int tc_tcache_take(tc_alloc *a, tc_tcache *c, uint64_t size, uint64_t rounded, uint64_t stream, uint64_t *addr);
/* The lock path just allocated b for this thread (device lock held): it
 * may come back through tc_tcache_put. */
void tc_tcache_track(tc_alloc *a, tc_tcache *c, tc_block *b);
/* Free addr into this thread's cache: 1 done, 0 the lock path must free
 * it (not this thread's, not cacheable now). May flush the oldest blocks. */
int tc_tcache_put(tc_alloc *a, uint64_t addr);

/* ---- the device's lock held ---- */

/* Return cached blocks to the pool: every thread's (stream UINT64_MAX) or
 * those of one stream. Returns how many went back. */
int tc_tcache_flush(tc_alloc *a, uint64_t stream);
/* The lock path frees or records a stream on b: it leaves its thread's map. */
void tc_tcache_forget(tc_alloc *a, tc_block *b);
/* Recompute whether caches serve (config, trace, captures); a change to
 * off flushes them. */
void tc_tcache_update(tc_alloc *a);
/* Users' view of the counters: cached blocks count as freed. */
void tc_tcache_adjust(tc_alloc *a, tcuda_memory_stats_t *st);
/* After reset_peak: the peaks restart from the users' current values. */
void tc_tcache_reset_peak(tc_alloc *a);
void tc_tcache_reset_accumulated(tc_alloc *a);
/* Hold every cache still, for a snapshot. */
void tc_tcache_lock_all(tc_alloc *a);
void tc_tcache_unlock_all(tc_alloc *a);
/* Blocks and bytes in caches now. */
void tc_tcache_cached(tc_alloc *a, int64_t *blocks, int64_t *bytes);

/* ---- teardown (no lock held) ---- */
void tc_tcache_detach_all(tc_alloc *a);

#endif
