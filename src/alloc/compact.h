/* The compact policy (compact.c): the hook points where it departs from
 * torch's policy. docs/allocator.md has the design. */
#ifndef TC_ALLOC_COMPACT_H
#define TC_ALLOC_COMPACT_H
#include "alloc/types.h"
#include <stdint.h>

/* The compact policy, before mapping for a rounded request of `size`. */
tcuda_status tc_compact_trim(tc_alloc *a, const tc_pool *pool, uint64_t size);
/* The compact policy's next fit: requests of at least TC_NEXT_FIT_MIN
 * bytes, once TC_NEXT_FIT_TRIMS trims have run at an unchanged budget. */
#define TC_NEXT_FIT_MIN ((uint64_t)4 << 20)
#define TC_NEXT_FIT_TRIMS 16
SLOW_PATH tc_block *tc_compact_next_fit(tc_alloc *a, const tc_pool *pool, uint64_t stream, uint64_t size);

#endif
