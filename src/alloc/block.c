/* The policy's lowest layer: block structs (slabs and their free list),
 * segments (the allocator's list and address range), and torch's
 * free_block and release_block, which malloc.c, events.c, pools.c and
 * expandable.c all use. It calls no part above it (alloc.h has the map). */
#include "alloc/block.h"
#include <stdatomic.h>
#include <stdlib.h>

tcuda_status tc_add_slabs(tc_alloc *a, size_t n) {
  while (a->nfree < n) {
    if (a->nslabs == a->capslabs) {
      void **ns = (void **)tc_grow(a->slabs, &a->capslabs, sizeof *ns, 16);
      if (!ns) return host_oom();
      a->slabs = ns;
    }
    tc_block *slab = (tc_block *)malloc(TC_SLAB_BLOCKS * sizeof *slab);
    if (!slab) return host_oom();
    a->slabs[a->nslabs++] = slab;
    for (size_t i = 0; i < TC_SLAB_BLOCKS; i++) {
      /* new_block leaves these alone: a struct comes back to the free list
       * with them clear (tcache.h clears them before a block is freed) */
      slab[i].tco = NULL;
      slab[i].tcached = 0;
      slab[i].next = a->freelist;
      a->freelist = &slab[i];
    }
    a->nfree += TC_SLAB_BLOCKS;
  }
  return TCUDA_SUCCESS;
}

void tc_seg_link(tc_alloc *a, tc_seg *s) {
  if (s->addr < atomic_load_explicit(&a->va_lo, memory_order_relaxed))
    atomic_store_explicit(&a->va_lo, s->addr, memory_order_relaxed);
  if (s->addr + s->size > atomic_load_explicit(&a->va_hi, memory_order_relaxed))
    atomic_store_explicit(&a->va_hi, s->addr + s->size, memory_order_relaxed);
  s->lprev = NULL;
  s->lnext = a->segs;
  if (a->segs) a->segs->lprev = s;
  a->segs = s;
}

void tc_seg_unlink_free(tc_alloc *a, tc_seg *s) {
  if (s->lprev) s->lprev->lnext = s->lnext;
  else a->segs = s->lnext;
  if (s->lnext) s->lnext->lprev = s->lprev;
  free(s->pmap);
  free(s);
}

/* torch's free_block: merge, back into the free set, net inactive_split. */
void tc_free_block(tc_alloc *a, tc_block *b) {
  tc_pool *pool = b->pool;
  TRACE(a, TC_TRACE_FREE_COMPLETED, b->addr, b->requested, b->stream);
  uint64_t orig_size = b->size, req = b->requested;
  int64_t net_n = 0, net_b = 0;
  tc_block *cand[2] = {b->prev, b->next}, *victim = NULL;
  for (int k = 0; k < 2; k++) {
    uint64_t sub = try_merge(a, b, cand[k], &victim);
    if (sub) {
      net_n -= 1;
      net_b -= (int64_t)sub;
    }
  }
  if (victim) {
    b->gc_base = pool->gc_calls;
    bs_move(a, victim, b, 0);
    del_block(a, victim);
  } else {
    pool_insert(a, pool, b);
  }
  if (is_split(b)) {
    net_n += 1;
    net_b += (int64_t)b->size;
  }
  int p = b->pidx;
  if (!b->seg->expandable) {
    if (net_n > 0) arr_inc(a->st.inactive_split, p, net_n);
    else if (net_n < 0) arr_dec(a->st.inactive_split, p, -net_n);
    if (net_b > 0) arr_inc(a->st.inactive_split_bytes, p, net_b);
    else if (net_b < 0) arr_dec(a->st.inactive_split_bytes, p, -net_b);
  }
  arr_dec(a->st.active, p, 1);
  arr_dec(a->st.active_bytes, p, (int64_t)orig_size);
  arr_dec(a->st.requested_bytes, p, (int64_t)req);
}

/* torch's release_block: cudaFree one whole unsplit segment. */
tcuda_status tc_release_block(tc_alloc *a, tc_block *b) {
  tc_pool *pool = b->pool;
  tcuda_status s = tc_seg_free(a, &b->seg->pa, b->seg->stream, b->addr, b->size);
  if (s) return s;
  if (pool->owner) pool->owner->nsegs--;
  a->st.num_device_free++;
  TRACE(a, TC_TRACE_SEGMENT_FREE, b->addr, b->size, b->stream);
  a->total_allocated -= b->size;
  arr_dec(a->st.segment, pool->pidx, 1);
  arr_dec(a->st.reserved_bytes, pool->pidx, (int64_t)b->size);
  if (b->size >= a->cfg.max_split_size) st_dec(&a->st.oversize_segments, 1);
  bs_erase(b);
  forget_block(a, b);
  tc_seg_unlink_free(a, b->seg);
  del_block(a, b);
  return TCUDA_SUCCESS;
}

tcuda_status tc_seg_alloc(tc_alloc *a, const tcuda_pool_allocator_t *pa, uint64_t stream, uint64_t size,
                          uint64_t *addr) {
  if (!pa->alloc) return a->be->segment_alloc(a->be->ctx, a->device, size, addr);
  void *ptr = pa->alloc(pa->user, (size_t)size, a->device, (struct CUstream_st *)(uintptr_t)stream);
  if (!ptr) return TCUDA_ERROR_OUT_OF_MEMORY;
  *addr = (uint64_t)(uintptr_t)ptr;
  return TCUDA_SUCCESS;
}

tcuda_status tc_seg_free(tc_alloc *a, const tcuda_pool_allocator_t *pa, uint64_t stream, uint64_t addr,
                         uint64_t size) {
  if (!pa->alloc) return a->be->segment_free(a->be->ctx, a->device, addr, size);
  pa->free(pa->user, (void *)(uintptr_t)addr, (size_t)size, a->device, (struct CUstream_st *)(uintptr_t)stream);
  return TCUDA_SUCCESS;
}
