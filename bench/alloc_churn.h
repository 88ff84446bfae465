/* bench_alloc's churn workload (h): an RL fine-tuning loop whose layout
 * moves through memory while the live total stays near its peak, so that a
 * policy keeping reserved memory near the peak allocated must unmap and map
 * pages. In its own file to keep bench_alloc.c small (alloc_churn.c). */
#ifndef BENCH_ALLOC_CHURN_H
#define BENCH_ALLOC_CHURN_H
#include <stddef.h>

#include "tcuda.h"

typedef struct churn_allocator {
  int (*alloc)(void **p, size_t n); /* 0 on success */
  int (*free)(void *p);             /* 0 on success */
  int (*stats)(tcuda_memory_stats_t *out); /* 0 on success */
} churn_allocator;

/* `warm` steps, then `trials` (at most 5) timed runs of `steps` steps: the
 * median ns per alloc+free pair, or NAN when a call failed (the allocator's
 * own note says why). *s0 and *s1: the stats before and after the timed
 * runs. Blocks are all freed at the end, except after a failure. */
double churn_timed(const churn_allocator *A, long warm, int trials, long steps, tcuda_memory_stats_t *s0,
                   tcuda_memory_stats_t *s1);

/* The same on the simulated device (the policy alone, no CUDA) under the
 * allocator config `conf`: prints one CHURN-SIM line with the maps and
 * unmaps of the timed steps; 0 on success. */
int churn_sim(const char *conf, long warm, long steps);

#endif
