/* Expandable segments (expandable_segments:True): per (pool, stream) a
 * reservation of address space larger than the device, whose pages are
 * mapped as blocks need them and unmapped when the cache is emptied.
 * torch's try_allocate_expandable_block, map_block and unmap_block.
 *
 * The compact policy (policy:compact) runs on the same segments with
 * 2 MiB pages in both pools, and gives free pages back anywhere in a
 * segment, not only on empty_cache: before a mapping would take reserved
 * memory past its budget (compact_trim). docs/allocator.md, "The compact
 * policy", has the design and its trade-offs. */
#include "alloc/expandable.h"
#include "alloc/block.h"
#include "alloc/freeset.h"
#include "alloc/pools.h"
#include "alloc/stats.h"
#include <stdlib.h>
#include <string.h>

static inline int allocatable(const tc_block *b) {
  return b && !b->allocated && b->event_count == 0 && b->nuses == 0;
}

static int has_space(const tc_block *b, uint64_t size) {
  uint64_t bytes = 0;
  while (bytes < size && allocatable(b)) {
    bytes += b->size;
    b = b->next;
  }
  return bytes >= size;
}

/* Returns 1 mapped, 0 device OOM, or an error status negated. */
static int map_block(tc_alloc *a, tc_block *to_map, uint64_t size, tcuda_status *err) {
  tc_seg *seg = to_map->seg;
  uint64_t off = to_map->addr - seg->addr;
  uint64_t begin = off / seg->page, end = (off + size + seg->page - 1) / seg->page;
  if (begin == end) return 0;
  tcuda_status s = reserve_blocks(a, 1);
  if (s) return *err = s, -1;
  uint64_t maddr = seg->addr + begin * seg->page, msize = (end - begin) * seg->page;
  s = a->be->map(a->be->ctx, a->device, maddr, msize);
  if (s == TCUDA_ERROR_OUT_OF_MEMORY) return 0;
  if (s) return *err = s, -1;
  memset(seg->pmap + begin, 1, end - begin);
  tc_pool *pool = to_map->pool;
  tree_erase(&pool->unmapped, to_map);
  to_map->mapped = 1;
  if (msize < to_map->size) {
    tc_block *rem = new_block(a, seg, to_map->addr + msize, to_map->size - msize);
    rem->mapped = 0;
    rem->prev = to_map;
    rem->next = to_map->next;
    if (rem->next) rem->next->prev = rem;
    to_map->next = rem;
    tree_insert(a, &pool->unmapped, rem);
    to_map->size = msize;
  }
  try_merge(a, to_map, to_map->prev, NULL);
  try_merge(a, to_map, to_map->next, NULL);
  pool_insert(a, pool, to_map);
  a->total_allocated += msize;
  arr_inc(a->st.reserved_bytes, pool->pidx, (int64_t)msize);
  a->st.num_device_alloc++;
  TRACE(a, TC_TRACE_SEGMENT_MAP, maddr, msize, to_map->stream);
  return 1;
}

/* The lowest address, in an existing (stream, pool) segment, where free plus
 * unmapped space fits `size`; a new VA reservation when none does. */
static tc_block *find_expandable_block(tc_alloc *a, tc_pool *pool, uint64_t stream, uint64_t size,
                                       tcuda_status *err) {
  for (tc_block *c = lower_bound(&pool->unmapped, stream, 0, 0); c && c->stream == stream; c = tree_next(c)) {
    const tc_block *cand = allocatable(c->prev) ? c->prev : c;
    if (has_space(cand, size)) return (tc_block *)cand;
  }
  tcuda_status s = reserve_blocks(a, 1);
  if (s) return *err = s, NULL;
  uint64_t page = pool->is_small || a->cfg.policy == TC_POLICY_COMPACT ? TC_SMALL_BUFFER : TC_LARGE_BUFFER;
  uint64_t total = a->total_memory;
  uint64_t npages = (total + total / 8 + page - 1) / page;
  if (!npages) npages = 1;
  tc_seg *seg = (tc_seg *)calloc(1, sizeof *seg);
  uint8_t *pmap = (uint8_t *)calloc(npages, 1);
  if (!seg || !pmap) {
    free(seg);
    free(pmap);
    return *err = host_oom(), NULL;
  }
  if ((s = tc_bs_reserve(&pool->blocks, stream, &seg->bs))) {
    free(seg);
    free(pmap);
    return *err = s, NULL;
  }
  uint64_t base = 0;
  s = a->be->va_reserve(a->be->ctx, a->device, page * npages, &base);
  if (s) {
    free(seg);
    free(pmap);
    return *err = s, NULL;
  }
  seg->pool = pool;
  seg->stream = stream;
  seg->addr = base;
  seg->size = page * npages;
  seg->expandable = 1;
  seg->page = page;
  seg->npages = npages;
  seg->pmap = pmap;
  tc_seg_link(a, seg);
  if (pool->owner) pool->owner->nsegs++;
  tc_block *b = new_block(a, seg, base, seg->size);
  b->mapped = 0;
  seg->head = b;
  tree_insert(a, &pool->unmapped, b);
  return b;
}

/* The compact policy's budget for reserved bytes: the bound,
 * max(1.10 x, + 4 MiB) over the highest allocated total seen, counting the
 * request about to be served. reset_peak_memory_stats does not lower it. */
static uint64_t compact_budget(tc_alloc *a, uint64_t size) {
  uint64_t hw = a->compact_hw;
  uint64_t peak = (uint64_t)a->st.allocated_bytes[TCUDA_STAT_ALL].peak;
  uint64_t now = (uint64_t)a->st.allocated_bytes[TCUDA_STAT_ALL].current + size;
  if (peak > hw) a->compact_hw = hw = peak;
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
 * pages on a churn (docs/allocator.md). Each segment ends in an unmapped
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
    if (a->compact_hw == a->trim_hw && a->steady_trims < TC_NEXT_FIT_TRIMS) a->steady_trims++;
    a->trim_hw = a->compact_hw;
  }
  return TCUDA_SUCCESS;
}

#define NEXT_FIT_WALK 16

/* Next fit: the first free mapped block that fits, walking by address
 * from the rover, wrapping once at the segment's end; a walk that finds
 * none leaves the rover where it stopped, so the next one goes on from
 * there. Caches grown by copy free their blocks in the order they were
 * made; next fit then keeps the free space in one run that moves through
 * the segment like a ring, where best fit leaves holes each slightly too
 * small for the next, larger copy (docs/allocator.md). */
tc_block *tc_compact_next_fit(tc_alloc *a, const tc_pool *pool, uint64_t stream, uint64_t size) {
  tc_block *r = a->rover, *b = r;
  if (!r || r->pool != pool || r->stream != stream) return NULL;
  int wrapped = 0;
  uint64_t msp = a->cfg.max_split_size, cap = size >= msp ? size + a->cfg.max_non_split_rounding_size : msp;
  for (int i = 0; i < NEXT_FIT_WALK; i++) {
    if (b->mapped && allocatable(b) && b->size >= size && b->size < cap) return b; /* max_split_size's rules too */
    if (!(b = b->next)) {
      if (wrapped) return NULL;
      wrapped = 1;
      b = r->seg->head;
    }
    if (b == r) return NULL;
  }
  a->rover = b;
  return NULL;
}

int tc_try_allocate_expandable(tc_alloc *a, tc_pool *pool, uint64_t stream, uint64_t size, tc_block **out,
                                   tcuda_status *err) {
  tcuda_status s = TCUDA_SUCCESS;
  tc_block *c = find_expandable_block(a, pool, stream, size, &s);
  if (!c) return *err = s, -1;
  if (!c->mapped) {
    int r = map_block(a, c, c->size < size ? c->size : size, err);
    if (r <= 0) return r;
  }
  while (c->size < size) {
    tc_block *nc = c->next;
    if (!nc || nc->mapped || !allocatable(nc)) return 0; /* cannot happen: has_space checked */
    uint64_t rem = size - c->size;
    int r = map_block(a, nc, rem < nc->size ? rem : nc->size, err);
    if (r <= 0) return r;
    c = nc;
  }
  bs_erase(c);
  *out = c;
  return 1;
}

/* torch's unmap_block: give back the whole pages inside a free block. */
tcuda_status tc_unmap_block(tc_alloc *a, tc_block *b, int flags, uint64_t most) {
  tc_seg *seg = b->seg;
  uint64_t off = b->addr - seg->addr;
  uint64_t begin = (off + seg->page - 1) / seg->page, end = (off + b->size) / seg->page;
  if (begin >= end) return TCUDA_SUCCESS;
  uint64_t cap = most / seg->page + (most % seg->page != 0); /* the top pages: low addresses are placed first */
  if (end - begin > cap) begin = end - cap;
  tcuda_status s = reserve_blocks(a, 2);
  if (s) return s;
  if ((flags & TC_UNMAP_SYNC) && (s = a->be->stream_synchronize(a->be->ctx, a->device, seg->stream))) return s;
  uint64_t uaddr = seg->addr + begin * seg->page, usize = (end - begin) * seg->page;
  if ((flags & TC_UNMAP_KEEP) && a->be->unmap_keep) s = a->be->unmap_keep(a->be->ctx, a->device, uaddr, usize);
  else s = a->be->unmap(a->be->ctx, a->device, uaddr, usize);
  if (s) return s;
  memset(seg->pmap + begin, 0, end - begin);
  tc_pool *pool = b->pool;
  bs_erase(b);
  uint64_t before = uaddr - b->addr, after = b->size - before - usize;
  if (before) {
    tc_block *bf = new_block(a, seg, b->addr, before);
    bf->prev = b->prev;
    bf->next = b;
    if (bf->prev) bf->prev->next = bf;
    else seg->head = bf;
    b->prev = bf;
    pool_insert(a, pool, bf);
  }
  if (after) {
    tc_block *af = new_block(a, seg, uaddr + usize, after);
    af->prev = b;
    af->next = b->next;
    if (af->next) af->next->prev = af;
    b->next = af;
    pool_insert(a, pool, af);
  }
  b->addr = uaddr;
  b->size = usize;
  b->mapped = 0;
  try_merge(a, b, b->prev, NULL);
  try_merge(a, b, b->next, NULL);
  tree_insert(a, &pool->unmapped, b);
  a->total_allocated -= usize;
  arr_dec(a->st.reserved_bytes, pool->pidx, (int64_t)usize);
  a->st.num_device_free++;
  TRACE(a, TC_TRACE_SEGMENT_UNMAP, uaddr, usize, b->stream);
  return TCUDA_SUCCESS;
}

tcuda_status tc_release_expandable_segment(tc_alloc *a, tc_block *b) {
  tc_seg *seg = b->seg;
  tcuda_status s = a->be->va_release(a->be->ctx, a->device, seg->addr, seg->size);
  if (s) return s;
  if (b->pool->owner) b->pool->owner->nsegs--;
  if (a->rover == b) a->rover = NULL;
  tree_erase(&b->pool->unmapped, b);
  tc_seg_unlink_free(a, seg);
  del_block(a, b);
  return TCUDA_SUCCESS;
}
