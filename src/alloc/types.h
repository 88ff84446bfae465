/* The caching allocator's types: the state its parts share, all owned by
 * one tc_alloc and guarded by its lock, and the attributes of the cached
 * malloc/free path. What each part offers the others is in its own header
 * beside its .c (alloc.h has the map). Where the code says "torch", it
 * mirrors c10/cuda/CUDACachingAllocator.cpp (2.9-2.11) as described in
 * docs/allocator.md.
 *
 * Data structures:
 *  - free blocks per pool ordered by (stream, size, addr), as std::set's
 *    lower_bound and in-order walks: per stream, 64 size buckets per power
 *    of two, each a small treap, found through a bitmap (a plain treap over
 *    thousands of free blocks spent most of a malloc in its descent):
 *    freeset.h;
 *  - unmapped expandable blocks in a second treap ordered by (stream, addr):
 *    freeset.h, expandable.h;
 *  - allocated blocks in an open-addressing hash map addr -> block:
 *    blockmap.h;
 *  - block structs recycled through a free list, so the hot path does not
 *    call malloc once the caches are warm: block.h;
 *  - under thread_cache:N, per-thread caches of freed small blocks, which
 *    stay allocated in all of the above: tcache.h. */
#ifndef TC_ALLOC_TYPES_H
#define TC_ALLOC_TYPES_H
#include "alloc/alloc.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* HOT_INLINE: the steps of a cached malloc, which the compiler left as
 * calls; inlined into tc_alloc_malloc they made the cached pair and the
 * mixed pattern faster, for a few KiB more code (docs/performance.md).
 * SLOW_PATH: rare work behind an inline test on that path, kept out of it.
 * LOCAL_CALL: a helper the cached path calls rather than inlines. Static
 * in a header, so each file has its own copy and the compiler knows which
 * registers it leaves alone: callers save fewer around the call than
 * around a call into another file. The parts' headers keep what the cached
 * path needs static inline, as the compiler inlined it when all was one
 * file, so the split into files adds no call to that path. */
#if defined(__GNUC__) || defined(__clang__)
#define HOT_INLINE static inline __attribute__((always_inline))
#define SLOW_PATH __attribute__((noinline))
#define LOCAL_CALL static __attribute__((noinline, unused))
#else
#define HOT_INLINE static inline
#define SLOW_PATH
#define LOCAL_CALL static
#endif

typedef struct tc_block tc_block;
typedef struct tc_seg tc_seg;
typedef struct tc_pool tc_pool;
typedef struct tc_ppool tc_ppool;
typedef struct tc_bstream tc_bstream; /* freeset.h */
typedef struct tc_slot tc_slot;       /* blockmap.h */
typedef struct tc_evq tc_evq;         /* events.h */
typedef struct tc_capture tc_capture; /* pools.h */
typedef struct tc_req tc_req;         /* lock.h */
typedef struct tc_tcache tc_tcache;   /* tcache.h */

/* thread_cache's event counts (tcache.h): blocks, bytes, requested bytes */
typedef struct tc_tccount {
  int64_t n, bytes, req;
} tc_tccount;

typedef struct tc_use {
  uint64_t stream;
  int device;
} tc_use;

struct tc_block {
  uint64_t addr, size, requested, stream;
  tc_block *prev, *next;  /* neighbours inside the segment */
  tc_block *tl, *tr, *tp; /* treap links */
  tc_pool *pool;
  tc_seg *seg;
  int64_t gc_base;
  uint32_t prio;
  int event_count;
  uint8_t allocated, mapped;
  uint8_t tcached; /* in a thread's cache (tcache.h): allocated, yet freed */
  uint8_t pidx; /* stats slot of its request: TCUDA_STAT_SMALL_POOL if <= 1 MiB, else LARGE */
  uint16_t bkt; /* size bucket, while in the free set */
  uint32_t nuses, capuses;
  tc_use *uses; /* inl or heap */
  tc_use inl[2];
  tc_tcache *tco; /* the thread cache that may take it back (tcache.h); NULL mostly */
};

typedef struct tc_tree {
  tc_block *root;
  int by_addr; /* 0: (size, addr), every block of one stream; 1: (stream, addr) */
} tc_tree;

/* A pool's free blocks, by stream (freeset.h). */
typedef struct tc_bset {
  tc_bstream **s; /* sorted by stream; entries live as long as the pool */
  size_t n, cap;
} tc_bset;

struct tc_pool {
  tc_bset blocks;
  tc_tree unmapped;
  int is_small;
  int pidx; /* TCUDA_STAT_SMALL_POOL or TCUDA_STAT_LARGE_POOL */
  int64_t gc_calls;
  tc_ppool *owner; /* the private pool holding this one; NULL for the default pools */
};

/* torch's PrivatePool: a CUDA graph's memory. Its blocks never serve
 * allocations outside it. use_count 0 means "freeable": its free segments go
 * at the next release_cached_blocks, and it goes when it has none left. */
struct tc_ppool {
  uint64_t id[2];
  int use_count;
  int no_split;   /* torch's MemPool(no_split=True): a found block is never split */
  int use_on_oom; /* torch's MemPool(use_on_oom=True): its free blocks are the default pools' last resort */
  tcuda_pool_allocator_t pa; /* pa.alloc non-NULL: segments come from it, not the backend */
  int64_t nsegs; /* torch's cudaMalloc_count (expandable: VA reservations) */
  tc_pool small, large;
  tc_ppool *next;
};

struct tc_seg {
  tc_seg *lnext, *lprev;
  tc_block *head;
  tc_pool *pool;
  tc_bstream *bs; /* where its free blocks go */
  uint64_t stream, addr, size; /* cudaMalloc range, or the VA reservation */
  int expandable;
  uint64_t page, npages; /* expandable: handle size and count */
  uint8_t *pmap;         /* expandable: 1 per mapped page */
  tcuda_pool_allocator_t pa; /* pa.alloc set: from its pool's own allocator (tc_seg_alloc) */
};

/* compact.c's state. compact.h's hook points read it; only compact.c
 * writes it. The settings derived from the config are set in one place,
 * tc_compact_on_config, so that each hook point costs a compare. */
typedef struct tc_compact {
  int on;  /* policy:compact */
  int vmm; /* segments are VA reservations mapped by page: expandable segments, or compact */
  /* rounded requests up to this go to a small pool: TC_SMALL_SIZE, or 0
   * under compact, whose one pool shares pages between all sizes */
  uint64_t small_max;
  /* next fit serves requests from this size; UINT64_MAX until trims at an
   * unchanged budget have earned it (docs/compact.md) */
  uint64_t next_fit_min;
  uint64_t hw;      /* the highest allocated total seen: the budget's base */
  uint64_t trim_hw; /* hw at the last trim that gave pages back */
  int steady_trims; /* trims at an unchanged hw, up to TC_NEXT_FIT_TRIMS */
} tc_compact;

/* The allocator's lock (lock.h): a futex word, 0 free, 1 held, 2 held
 * with sleepers. pthread's mutex bookkeeping (owner, user count) was a
 * visible share of the cached pair. */
typedef struct { atomic_int w; } tc_lock;

struct tc_alloc {
  /* Alone on its line: waiters read it while the holder writes the fields
   * below, which would otherwise bounce between their cores. */
  _Alignas(64) tc_lock mu;
  _Alignas(64) int device;
  /* malloc sizes from this take the rare branch: 1 << 60 (refused), or 1
   * under thread_cache, whose path starts there; free tests it too */
  _Atomic uint64_t tc_gate;
  const tc_backend *be;
  tc_alloc_config cfg;
  uint64_t total_memory;
  int has_allowed;
  uint64_t allowed_max;
  uint64_t total_allocated;
  tc_compact compact;
  tcuda_memory_stats_t st;
  tc_pool small, large;
  tc_slot *ht; /* blockmap.h */
  size_t ht_cap, ht_len, ht_tombs;
  unsigned ht_bits;
  tc_block *freelist; /* block.h */
  size_t nfree;
  /* a block pointer that merges move to the block covering its range and
   * releases clear (block.h), so it never dangles: compact.c's next-fit
   * rover, a default-pool block or NULL */
  tc_block *cursor;
  void **slabs;
  size_t nslabs, capslabs;
  tc_seg *segs;
  /* lowest and highest address any segment ever covered: a lock-free
   * "not mine" for tcuda_free's search across devices */
  _Atomic uint64_t va_lo, va_hi;
  tc_evq *evq; /* events.h; sorted by stream */
  size_t nevq, capevq;
  uint64_t rng;
  tc_trace_fn trace;
  void *trace_ctx;
  /* CUDA graphs (pools.h). ncaps is read without the lock only as a hint. */
  tc_ppool *ppools;
  tc_capture *caps;
  size_t capcaps;
  atomic_int ncaps;
  tc_block **deferred; /* freed during capture while other streams used them */
  size_t ndeferred, capdeferred;
  /* thread_cache (tcache.h): the caches, under the lock; tc_serve is
   * thread_cache's N while caches may serve (no trace, no capture), else 0 */
  tc_tcache *tcs;
  int tc_n, tc_ever;
  atomic_int tc_serve;
  atomic_uint tc_div0; /* roundup_power2_divisions' first slot, for rounding without the lock */
  tc_tccount tc_flushed, tc_gone_hits, tc_gone_puts; /* flushes; caches of exited threads */
  tc_tccount tc_base[3];                             /* hits, puts, flushed at the last reset */
  void (*tc_release)(tc_alloc *a, tc_block *b);      /* malloc.c: the lock path's free */
  /* combining (lock.h) */
  tc_req *reqs;
  /* runs one published request (malloc.c's cached malloc or plain free);
   * set at creation, so lock.c needs no name from the layer above it */
  int (*run_req)(tc_alloc *a, tc_req *r);
  _Alignas(64) _Atomic uint64_t pending; /* bit i: slot i holds a published request */
};

/* ------------------------------------------------------------------ */
/* helpers of every part                                                */

static inline tcuda_status host_oom(void) {
  return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "tcuda allocator: out of host memory");
}

/* arr with room for twice *cap elements (first when empty), or NULL with
 * arr and *cap unchanged. */
static inline void *tc_grow(void *arr, size_t *cap, size_t elem, size_t first) {
  size_t n = *cap ? 2 * *cap : first;
  void *p = realloc(arr, n * elem);
  if (p) *cap = n;
  return p;
}

#endif
