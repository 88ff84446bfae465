/* Expandable segments (expandable_segments:True): per (pool, stream) a
 * reservation of address space larger than the device, whose pages are
 * mapped as blocks need them and unmapped when the cache is emptied.
 * torch's try_allocate_expandable_block, map_block and unmap_block.
 * The compact policy (compact.c) runs on the same segments. */
#include "alloc/expandable.h"
#include "alloc/block.h"
#include "alloc/freeset.h"
#include "alloc/stats.h"
#include <stdlib.h>
#include <string.h>

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
                                       uint64_t page, tcuda_status *err) {
  for (tc_block *c = lower_bound(&pool->unmapped, stream, 0, 0); c && c->stream == stream; c = tree_next(c)) {
    const tc_block *cand = allocatable(c->prev) ? c->prev : c;
    if (has_space(cand, size)) return (tc_block *)cand;
  }
  tcuda_status s = reserve_blocks(a, 1);
  if (s) return *err = s, NULL;
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

int tc_try_allocate_expandable(tc_alloc *a, tc_pool *pool, uint64_t stream, uint64_t size, uint64_t page,
                               tc_block **out, tcuda_status *err) {
  tcuda_status s = TCUDA_SUCCESS;
  tc_block *c = find_expandable_block(a, pool, stream, size, page, &s);
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
  forget_block(a, b);
  tree_erase(&b->pool->unmapped, b);
  tc_seg_unlink_free(a, seg);
  del_block(a, b);
  return TCUDA_SUCCESS;
}
