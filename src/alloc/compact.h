/* The compact policy (compact.c): the points where malloc.c departs from
 * torch's policy, in the order a malloc meets them. Under policy:torch
 * each is a compare that goes torch's way. The state they read is
 * tc_compact (types.h). docs/compact.md has the design. */
#ifndef TC_ALLOC_COMPACT_H
#define TC_ALLOC_COMPACT_H
#include "alloc/types.h"
#include <stdint.h>

/* Next fit serves requests of at least TC_NEXT_FIT_MIN bytes, once
 * TC_NEXT_FIT_TRIMS trims have run at an unchanged budget. */
#define TC_NEXT_FIT_MIN ((uint64_t)4 << 20)
#define TC_NEXT_FIT_TRIMS 16

/* ---- config ---- */

/* The config changed, or the allocator is new: the derived settings are
 * set again, and next fit, compact's alone, earns its way back. */
void tc_compact_on_config(tc_alloc *a);

/* Segments are VA reservations mapped page by page: expandable segments,
 * or the compact policy, which is built on them. */
static inline int vmm_segments(const tc_alloc *a) { return a->compact.vmm; }

/* ---- where a request goes ---- */

/* The pool of a pair that a rounded request takes: torch's small pool up
 * to 1 MiB; compact's one pool holds all sizes, so that small and large
 * blocks share partial pages. */
HOT_INLINE tc_pool *tc_compact_route(const tc_alloc *a, tc_pool *small, tc_pool *large, uint64_t size) {
  return size <= a->compact.small_max ? small : large;
}

/* ---- a hit ---- */

SLOW_PATH tc_block *tc_compact_next_fit(tc_alloc *a, const tc_pool *pool, uint64_t stream, uint64_t size);

/* Before best fit: the block next fit picks for a large request in a
 * default pool, once earned; NULL: best fit, as torch. Expected not to
 * pick, so that best fit stays the straight path. */
HOT_INLINE tc_block *tc_compact_pick(tc_alloc *a, const tc_pool *pool, uint64_t stream, uint64_t size) {
  if (__builtin_expect(size < a->compact.next_fit_min || pool->owner, 1)) return NULL;
  return tc_compact_next_fit(a, pool, stream, size);
}

/* A hit in an expandable segment: torch grows the block into the unmapped
 * pages after it. Every block compact caches is fully mapped, so its hits
 * take plain best fit, as in fixed segments. */
static inline int tc_compact_fixed_hits(const tc_alloc *a) { return a->compact.on; }

/* ---- a miss ---- */

tcuda_status tc_compact_trim(tc_alloc *a, const tc_pool *pool, uint64_t size);

/* Before a miss maps memory for a rounded request of `size`: *bytes, the
 * memory it will take, becomes the request rounded up to whole 2 MiB pages
 * (not torch's segment size), and free pages elsewhere go back first so
 * that reserved memory stays within the budget. */
static inline tcuda_status tc_compact_before_map(tc_alloc *a, const tc_pool *pool, uint64_t size, uint64_t *bytes) {
  if (!a->compact.on) return TCUDA_SUCCESS;
  *bytes = (size + TC_SMALL_BUFFER - 1) / TC_SMALL_BUFFER * TC_SMALL_BUFFER;
  return tc_compact_trim(a, pool, size);
}

/* The page size of a reservation made now: torch's 2 MiB in the small pool
 * and large_segment_size (20 MiB) in the large one; compact's pages are
 * 2 MiB in both. */
static inline uint64_t tc_compact_page(const tc_alloc *a, const tc_pool *pool) {
  return pool->is_small || a->compact.on ? TC_SMALL_BUFFER : a->cfg.large_segment_size;
}

void tc_compact_mapped(tc_alloc *a, const tc_pool *pool, uint64_t size, int r, tc_block *b);

/* After a miss mapped memory for a rounded request of `size` (r: 1 mapped
 * b, 0 device OOM, -1 error). */
static inline void tc_compact_after_map(tc_alloc *a, const tc_pool *pool, uint64_t size, int r, tc_block *b) {
  if (a->compact.on) tc_compact_mapped(a, pool, size, r, b);
}

/* ---- out of memory ---- */

/* The advice that ends the OOM message: compact's, or NULL for torch's. */
const char *tc_compact_oom_advice(const tc_alloc *a);

#endif
