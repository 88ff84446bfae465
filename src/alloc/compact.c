/* The compact policy (policy:compact), tcuda's own: it runs on the
 * expandable-segment machinery (expandable.c) with 2 MiB pages in both
 * pools, and gives free pages back anywhere in a segment, not only on
 * empty_cache: before a mapping would take reserved memory past its budget
 * (tc_compact_trim). Once the layout churns it places large requests by
 * next fit. docs/compact.md has the design and its trade-offs. */
#include "alloc/compact.h"
#include "alloc/block.h"
#include "alloc/expandable.h"
#include "alloc/freeset.h"
#include "alloc/pools.h"
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* config                                                               */

void tc_compact_on_config(tc_alloc *a) {
  tc_compact *c = &a->compact;
  c->on = a->cfg.policy == TC_POLICY_COMPACT;
  c->vmm = a->cfg.expandable_segments || c->on;
  c->small_max = c->on ? 0 : TC_SMALL_SIZE;
  /* next fit is compact's alone, and earns its way back after any change */
  c->steady_trims = 0;
  c->next_fit_min = UINT64_MAX;
  a->cursor = NULL;
}

/* ------------------------------------------------------------------ */
/* the budget and the trim                                              */

/* The budget for reserved bytes: the bound docs/compact.md aims at,
 * max(1.10 x, + 4 MiB) over the highest allocated total seen, counting the
 * request about to be served. reset_peak_memory_stats does not lower it. */
static uint64_t compact_budget(tc_alloc *a, uint64_t size) {
  uint64_t hw = a->compact.hw;
  uint64_t peak = (uint64_t)a->st.allocated_bytes[TCUDA_STAT_ALL].peak;
  uint64_t now = (uint64_t)a->st.allocated_bytes[TCUDA_STAT_ALL].current + size;
  if (peak > hw) a->compact.hw = hw = peak;
  /* the request counts for this call only: one past a memory fraction's
   * limit fails, and must not raise every later call's budget past the
   * bound of what was really allocated */
  if (now > hw) hw = now;
  uint64_t tenth = hw / 10, floor = (uint64_t)4 << 20;
  return hw + (tenth > floor ? tenth : floor);
}

#define TRIM_ROUND 64

/* Up to TRIM_ROUND free blocks with whole pages in the default pools'
 * segments, from the highest address down, until their pages add up to
 * `want`; adds them to *found. From the top, because placement fills the
 * lowest addresses first: pages there are the ones the next requests
 * reuse, and giving back the largest blocks instead moved many times more
 * pages on a churn (docs/compact.md). Each segment ends in an unmapped
 * block, and a walk down from each unmapped block stops at the next one,
 * so every block is visited at most once. */
static size_t trim_pick(tc_alloc *a, tc_block **pick, uint64_t want, uint64_t *found) {
  size_t n = 0;
  tc_pool *pools[2] = {&a->large, &a->small};
  for (int k = 0; k < 2 && *found < want; k++) {
    for (tc_block *c = tree_last(&pools[k]->unmapped); c && *found < want && n < TRIM_ROUND; c = tree_prev(c)) {
      for (tc_block *b = c->prev; b && b->mapped && *found < want && n < TRIM_ROUND; b = b->prev) {
        if (!allocatable(b)) continue;
        tc_seg *seg = b->seg;
        uint64_t off = b->addr - seg->addr;
        uint64_t begin = (off + seg->page - 1) / seg->page, end = (off + b->size) / seg->page;
        if (begin >= end) continue;
        pick[n++] = b;
        *found += (end - begin) * seg->page;
      }
    }
  }
  return n;
}

/* Compact policy: before mapping for a request of `size` bytes (rounded)
 * into `pool`, unmap free whole pages of the default pools, highest
 * addresses first, until reserved plus its pages fits the budget and the
 * memory fraction's limit. A private pool keeps its pages: a captured graph
 * still addresses the blocks it freed. The device is synchronized once,
 * before the first unmap: a freed block may still be in use by kernels
 * queued on its stream, and that stream may have been destroyed since the
 * free (torch's expandable segments sync the segment's stream, but only on
 * empty_cache; a trim can come on any miss). */
tcuda_status tc_compact_trim(tc_alloc *a, const tc_pool *pool, uint64_t size) {
  if (pool->owner || capturing(a)) return TCUDA_SUCCESS; /* no sync under capture */
  uint64_t need = (size + TC_SMALL_BUFFER - 1) / TC_SMALL_BUFFER * TC_SMALL_BUFFER;
  uint64_t budget = compact_budget(a, size);
  if (a->has_allowed && a->allowed_max < budget) budget = a->allowed_max;
  if (a->total_allocated + need <= budget) return TCUDA_SUCCESS;
  uint64_t excess = a->total_allocated + need - budget, found = 0, given = 0;
  size_t n = TRIM_ROUND;
  int synced = 0;
  /* in rounds: an unmap changes the free set, so each round picks afresh */
  while (n == TRIM_ROUND && found < excess) {
    tc_block *pick[TRIM_ROUND];
    n = trim_pick(a, pick, excess, &found);
    for (size_t i = 0; i < n && given < excess; i++) {
      if (!synced) {
        tcuda_status s = a->be->device_synchronize(a->be->ctx, a->device);
        if (s) return s;
        synced = 1;
      }
      /* one unmap's splits and merges touch only that block's neighbours,
       * never another pick: two free mapped blocks are never adjacent */
      uint64_t before = a->total_allocated;
      tcuda_status s = tc_unmap_block(a, pick[i], TC_UNMAP_KEEP, excess - given);
      if (s) return s;
      given += before - a->total_allocated;
    }
  }
  /* a trim while the budget's base stays put: the layout itself churns */
  if (given) {
    tc_compact *c = &a->compact;
    if (c->hw == c->trim_hw && c->steady_trims < TC_NEXT_FIT_TRIMS && ++c->steady_trims == TC_NEXT_FIT_TRIMS)
      c->next_fit_min = TC_NEXT_FIT_MIN;
    c->trim_hw = c->hw;
  }
  return TCUDA_SUCCESS;
}

/* ------------------------------------------------------------------ */
/* next fit                                                             */

#define NEXT_FIT_WALK 16

/* Next fit: the first free mapped block that fits, walking by address
 * from the rover (tc_alloc.cursor), wrapping once at the segment's end; a walk that finds
 * none leaves the rover where it stopped, so the next one goes on from
 * there. Caches grown by copy free their blocks in the order they were
 * made; next fit then keeps the free space in one run that moves through
 * the segment like a ring, where best fit leaves holes each slightly too
 * small for the next, larger copy (docs/compact.md). */
tc_block *tc_compact_next_fit(tc_alloc *a, const tc_pool *pool, uint64_t stream, uint64_t size) {
  tc_block *r = a->cursor, *b = r;
  if (!r || r->pool != pool || r->stream != stream) return NULL;
  int wrapped = 0;
  uint64_t msp = a->cfg.max_split_size, cap = size >= msp ? size + a->cfg.max_non_split_rounding_size : msp;
  for (int i = 0; i < NEXT_FIT_WALK; i++) {
    if (b->mapped && allocatable(b) && b->size >= size && b->size < cap) { /* max_split_size's rules too */
      a->cursor = b;
      return b;
    }
    if (!(b = b->next)) {
      if (wrapped) return NULL;
      wrapped = 1;
      b = r->seg->head;
    }
    if (b == r) return NULL;
  }
  a->cursor = b;
  return NULL;
}

/* ------------------------------------------------------------------ */
/* after a miss, and out of memory                                      */

void tc_compact_mapped(tc_alloc *a, const tc_pool *pool, uint64_t size, int r, tc_block *b) {
  /* pages the trim kept and the mapping did not take go back now, so
   * that reserved_bytes stays the physical memory held */
  if (a->be->release_kept) a->be->release_kept(a->be->ctx, a->device);
  /* a large miss seeds the rover: next fit goes on after it */
  if (r == 1 && size >= TC_NEXT_FIT_MIN && !pool->owner) a->cursor = b;
}

/* Under compact the OOM sequence has already given back every free page it
 * may (outside a capture), so torch's advice would mislead. */
const char *tc_compact_oom_advice(const tc_alloc *a) {
  if (!a->compact.on) return NULL;
  return "The compact policy gives free pages back before an OOM (outside a graph capture), so "
         "the live blocks themselves do not fit.  See docs/allocator.md (The compact policy)";
}
