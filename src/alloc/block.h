/* Blocks and segments (block.c), the policy's lowest layer: block structs
 * recycled from slabs through a free list, the allocator's segment list,
 * torch's try_merge_blocks, free_block and release_block, and the cursor
 * (tc_alloc.cursor), a block pointer that merges and releases keep valid.
 * The struct recycling and the merge run on the cached path, so they are
 * inline. */
#ifndef TC_ALLOC_BLOCK_H
#define TC_ALLOC_BLOCK_H
#include "alloc/types.h"
#include "alloc/freeset.h"
#include "alloc/stats.h"
#include <stdlib.h>

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

/* Free, with no event pending and no stream use recorded: a block that may
 * be handed out, merged or unmapped. */
static inline int allocatable(const tc_block *b) {
  return b && !b->allocated && b->event_count == 0 && b->nuses == 0;
}

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
  if (a->cursor == src) a->cursor = dst; /* dst now covers src's range */
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

/* b leaves the allocator: its segment or reservation goes back. */
static inline void forget_block(tc_alloc *a, const tc_block *b) {
  if (a->cursor == b) a->cursor = NULL;
}

void tc_free_block(tc_alloc *a, tc_block *b);
/* torch's release_block: give one whole unsplit free segment back. */
tcuda_status tc_release_block(tc_alloc *a, tc_block *b);

/* The pool's own allocator (tcuda_pool_set_allocator), or NULL. */
static inline const tcuda_pool_allocator_t *tc_pool_allocator(const tc_pool *pool) {
  return pool->owner && pool->owner->pa.alloc ? &pool->owner->pa : NULL;
}
/* A whole segment: from pa when pa->alloc is set (NULL from it is
 * TCUDA_ERROR_OUT_OF_MEMORY, with no message), else the backend's
 * segment_alloc. pa is a copy the segment keeps (tc_seg.pa), taken under
 * the lock, so the lock may be dropped around the call. */
tcuda_status tc_seg_alloc(tc_alloc *a, const tcuda_pool_allocator_t *pa, uint64_t stream, uint64_t size,
                          uint64_t *addr);
/* Give a segment back where tc_seg_alloc took it from. */
tcuda_status tc_seg_free(tc_alloc *a, const tcuda_pool_allocator_t *pa, uint64_t stream, uint64_t addr,
                         uint64_t size);

#endif
