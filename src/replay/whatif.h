/* whatif.c's parts, for its unit tests (tests/unit/test_whatif.c): one
 * row's replay, its min_limit search and the recommendation among rows. */
#ifndef TC_WHATIF_H
#define TC_WHATIF_H
#include "torchsnap.h"

#define TC_WHATIF_GRID ((uint64_t)2 << 20) /* min_limit's step */

typedef struct tc_whatif_row {
  char config[512];
  const char *source;
  tc_alloc_config cfg;
  tc_tsrun_result res;
  int have_min;       /* min_limit was found */
  uint64_t min_limit;
  int probes;         /* replays the search took */
  tcuda_status st;
  char err[512];
} tc_whatif_row;

/* The smallest limit on the grid under which h runs under w->cfg with no
 * OOM, on a device of `capacity` bytes (0: TC_H200_CAPACITY): a bisection
 * between up_grid(peak_alloc) and up_grid(peak_reserved) (the whole device
 * when that fails), checked 2 MiB below the answer and searched on below
 * when that fits too. Sets w->have_min and w->min_limit (have_min stays 0
 * when even the whole device fails) and counts w->probes. */
tcuda_status tc_whatif_min_limit(const char *func, tc_tsnap *h, uint64_t capacity, tc_whatif_row *w,
                                 uint64_t peak_alloc, uint64_t peak_reserved);
/* Row w: its replay under o's capacity and memory_fraction into w->res,
 * then (unless o->no_min_limit) its min_limit, whose bounds come from a
 * run without the fraction. The status and message go to w->st, w->err. */
void tc_whatif_run_row(const char *func, tc_tsnap *h, const tcuda_whatif_options_t *o, tc_whatif_row *w);
/* Among the rows a PyTorch user can set (not "policy:..."), with a
 * min_limit: the lowest min_limit, then the fewest retries, then the
 * fewest segment calls, then the first. NULL when none. */
const tc_whatif_row *tc_whatif_recommend(const tc_whatif_row *rows, size_t n);

#endif
