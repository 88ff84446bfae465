/* Expandable segments (expandable.c): per (pool, stream) a reservation of
 * address space mapped page by page, torch's expandable_segments:True; the
 * compact policy runs on them too. */
#ifndef TC_ALLOC_EXPANDABLE_H
#define TC_ALLOC_EXPANDABLE_H
#include "alloc/types.h"
#include <stdint.h>

/* torch's try_allocate_expandable_block: 1 found (*out, out of the free
 * set), 0 device OOM, -1 error (*err). page: the page size of a
 * reservation made now (the pool's own keep theirs). */
int tc_try_allocate_expandable(tc_alloc *a, tc_pool *pool, uint64_t stream, uint64_t size, uint64_t page,
                               tc_block **out, tcuda_status *err);
/* flags: TC_UNMAP_SYNC synchronizes the segment's stream first (else the
 * caller did); TC_UNMAP_KEEP keeps the pages for the next map (the
 * caller then calls the backend's release_kept). */
enum { TC_UNMAP_SYNC = 1, TC_UNMAP_KEEP = 2 };
/* At most `most` bytes (rounded up to pages), the block's highest pages. */
tcuda_status tc_unmap_block(tc_alloc *a, tc_block *b, int flags, uint64_t most);
/* Give back a reservation that has nothing mapped (b: its one block). */
tcuda_status tc_release_expandable_segment(tc_alloc *a, tc_block *b);

#endif
