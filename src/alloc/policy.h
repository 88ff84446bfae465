/* The caching allocator's parts, grouped by file: what each offers the
 * others (the types they share are in types.h). The files call each other
 * in layers, without a cycle: malloc.c (the entry points) over pools.c,
 * events.c, expandable.c and stats.c; those over block.c (blocks,
 * segments, free_block), freeset.c, blockmap.c and lock.c. lock.c runs
 * other threads' requests through tc_alloc.run_req. */
#ifndef TC_ALLOC_POLICY_H
#define TC_ALLOC_POLICY_H
#include "alloc/types.h"
#include "alloc/freeset.h"
#include "alloc/blockmap.h"
#include "alloc/lock.h"
#include "alloc/stats.h"
#include "alloc/events.h"
#include "alloc/pools.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Segments are VA reservations mapped page by page: expandable segments,
 * or the compact policy, which is built on them. */
static inline int vmm_segments(const tc_alloc *a) {
  return a->cfg.expandable_segments || a->cfg.policy == TC_POLICY_COMPACT;
}

/* ------------------------------------------------------------------ */
/* expandable.c: expandable segments                                    */

int tc_try_allocate_expandable(tc_alloc *a, tc_pool *pool, uint64_t stream, uint64_t size, tc_block **out,
                               tcuda_status *err);
/* flags: TC_UNMAP_SYNC synchronizes the segment's stream first (else the
 * caller did); TC_UNMAP_KEEP keeps the pages for the next map (the
 * caller then calls the backend's release_kept). */
enum { TC_UNMAP_SYNC = 1, TC_UNMAP_KEEP = 2 };
/* At most `most` bytes (rounded up to pages), the block's highest pages. */
tcuda_status tc_unmap_block(tc_alloc *a, tc_block *b, int flags, uint64_t most);
tcuda_status tc_release_expandable_segment(tc_alloc *a, tc_block *b);
/* The compact policy, before mapping for a rounded request of `size`. */
tcuda_status tc_compact_trim(tc_alloc *a, const tc_pool *pool, uint64_t size);
/* The compact policy's next fit: requests of at least TC_NEXT_FIT_MIN
 * bytes, once TC_NEXT_FIT_TRIMS trims have run at an unchanged budget. */
#define TC_NEXT_FIT_MIN ((uint64_t)4 << 20)
#define TC_NEXT_FIT_TRIMS 16
SLOW_PATH tc_block *tc_compact_next_fit(tc_alloc *a, const tc_pool *pool, uint64_t stream, uint64_t size);

/* ------------------------------------------------------------------ */
/* block.c: block structs, segments, merges (the lowest layer)          */

#define TC_SLAB_BLOCKS 256 /* block structs per slab */

SLOW_PATH tcuda_status tc_add_slabs(tc_alloc *a, size_t n);

/* At least n block structs on the free list. Here, in ht_reserve and in
 * process_events the test is inline, so a warm malloc makes no call; the
 * work behind it is SLOW_PATH, as inlined into the malloc it slowed the
 * cached pair down. */
static inline tcuda_status reserve_blocks(tc_alloc *a, size_t n) {
  return a->nfree >= n ? TCUDA_SUCCESS : tc_add_slabs(a, n);
}

/* Callers reserve first, so this cannot fail. */
static inline tc_block *new_block(tc_alloc *a, tc_seg *seg, uint64_t addr, uint64_t size) {
  tc_block *b = a->freelist;
  a->freelist = b->next;
  a->nfree--;
  /* every field by hand: a memset of the whole struct showed in profiles */
  b->addr = addr;
  b->size = size;
  b->requested = 0;
  b->stream = seg->stream;
  b->prev = b->next = NULL;
  b->tl = b->tr = b->tp = NULL;
  b->pool = seg->pool;
  b->seg = seg;
  b->gc_base = 0;
  b->prio = 0;
  b->event_count = 0;
  b->allocated = 0;
  b->mapped = 1;
  b->pidx = (uint8_t)seg->pool->pidx;
  b->bkt = 0;
  b->nuses = 0;
  b->capuses = 2;
  b->uses = b->inl;
  return b;
}

static inline void del_block(tc_alloc *a, tc_block *b) {
  if (b->uses != b->inl) free(b->uses);
  b->next = a->freelist;
  a->freelist = b;
  a->nfree++;
}

void tc_seg_link(tc_alloc *a, tc_seg *s);
void tc_seg_unlink_free(tc_alloc *a, tc_seg *s);

static inline int is_split(const tc_block *b) { return b->prev || b->next; }

/* torch's try_merge_blocks: dst absorbs src; returns the size absorbed.
 * With victim, the first absorbed block of the free tree is left there as
 * *victim, for tc_free_block to hand its tree node to dst. */
static inline uint64_t try_merge(tc_alloc *a, tc_block *dst, tc_block *src, tc_block **victim) {
  if (!src || src->allocated || src->event_count > 0 || src->nuses || dst->mapped != src->mapped) return 0;
  if (dst->prev == src) {
    dst->addr = src->addr;
    dst->prev = src->prev;
    if (dst->prev) dst->prev->next = dst;
    else dst->seg->head = dst;
  } else {
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  if (a->rover == src) a->rover = dst; /* dst now covers src's range */
  uint64_t sub = src->size;
  dst->size += sub;
  if (victim && src->mapped && !*victim) {
    *victim = src;
  } else {
    if (src->mapped) bs_erase(src);
    else tree_erase(&src->pool->unmapped, src);
    del_block(a, src);
  }
  return sub;
}

void tc_free_block(tc_alloc *a, tc_block *b);
/* torch's release_block: give one whole unsplit free segment back. */
tcuda_status tc_release_block(tc_alloc *a, tc_block *b);
#endif
