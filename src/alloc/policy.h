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
#include "alloc/block.h"
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

#endif
