/* What every part records as it changes the allocator: torch's statistics
 * counters (each part counts its own changes, as torch's do) and the trace
 * of torch's TraceEntry actions. stats.c reads and resets the counters. */
#ifndef TC_ALLOC_STATS_H
#define TC_ALLOC_STATS_H
#include "alloc/types.h"
#include <stdint.h>

/* torch's Stat: peak follows current; allocated and freed accumulate. */
static inline void st_inc(tcuda_stat_t *s, int64_t n) {
  s->current += n;
  if (s->current > s->peak) s->peak = s->current;
  s->allocated += n;
}
static inline void st_dec(tcuda_stat_t *s, int64_t n) {
  s->current -= n;
  s->freed += n;
}
/* A stat array: the all-pools slot and the pool's own. */
static inline void arr_inc(tcuda_stat_t *arr, int pidx, int64_t n) {
  st_inc(&arr[TCUDA_STAT_ALL], n);
  st_inc(&arr[pidx], n);
}
static inline void arr_dec(tcuda_stat_t *arr, int pidx, int64_t n) {
  st_dec(&arr[TCUDA_STAT_ALL], n);
  st_dec(&arr[pidx], n);
}

/* Called under the lock when set (alloc.h: tc_alloc_set_trace). */
#define TRACE(a, act, addr, size, stream)                                     \
  do {                                                                        \
    if ((a)->trace) (a)->trace((a)->trace_ctx, (act), (addr), (size), (stream)); \
  } while (0)

#endif
