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
  uint64_t free_peak_reserved; /* peak reserved bytes with no limit (res's when the table has none) */
  int have_min;       /* min_limit was found */
  uint64_t min_limit;
  int probes;         /* replays the search took */
  int scanned;        /* the search tried every grid limit below its answer */
  uint64_t bisected;  /* the bottom of the no-OOM range the bisection landed in: min_limit when
                         "no OOM" is monotone; limits between the two may run out */
  tcuda_status st;
  char err[512];
} tc_whatif_row;

/* The limit the history was recorded under, inferred from it (a snapshot
 * does not store it). Torch refuses a new segment of S bytes when the
 * reserved bytes R plus S pass the limit, so each OOM that the device had
 * room for (its device_free) bounds it from above (limit < R + S), and the
 * reserved bytes the history reached bound it from below. Garbage
 * collection frees once the reserved bytes pass threshold x limit, which
 * bounds it by max_reserved / threshold. Within the bounds, the grid limit
 * whose replay of torch's run makes the recorded OOMs and leaves the
 * fewest recorded segment frees unexplained is taken (the highest such):
 * a retry's flush and garbage collection happen at the limit. */
typedef struct tc_whatif_limit {
  int inferred;           /* limit holds the inferred limit */
  const char *how;        /* "ooms" or "garbage_collection" */
  uint64_t limit;         /* the one replayed */
  uint64_t low, high;     /* the bounds: the reserved bytes reached, and under the first OOM's */
  size_t ooms_used;       /* OOM entries that bounded it */
  size_t device_full;     /* OOM entries where the device itself had no room */
  size_t unexplained;     /* segment frees the replay under it still does not explain */
  char warning[320];      /* set when a limit was looked for and none could be inferred */
} tc_whatif_limit;

/* Infers the recorded limit (see tc_whatif_limit) and makes the replay of
 * torch's run (exact mode, on `capacity`) under it, leaving its result in
 * *ex and the inferred empty_cache calls in h's ops. */
tcuda_status tc_whatif_infer_limit(const char *func, tc_tsnap *h, uint64_t capacity, tc_whatif_limit *L,
                                   tc_tsrun_result *ex);

/* The smallest limit on the grid under which h runs under w->cfg with no
 * OOM, on a device of `capacity` bytes (0: TC_H200_CAPACITY). A bisection
 * between up_grid(peak_alloc) and up_grid(peak_reserved) (the whole device
 * when that fails) finds a limit that fits. "No OOM" need not be
 * monotone in the limit (a flush under it changes what follows; garbage
 * collection and policy:compact's budget act before it is reached), so
 * every grid limit below that answer is then tried from the lower bound
 * up (w->scanned) when it lies at most SCAN_MAX grid steps above it for a
 * limit-dependent config, SCAN_MAX_OTHER for the others (whatif.c): the
 * answer is then the lowest on the grid. Past that, the grid limits below
 * the answer are tried until two in a row fail. w->bisected keeps the
 * bottom of the range the bisection landed in (before the scan). Sets w->have_min and w->min_limit (have_min stays 0 when
 * even the whole device fails) and counts w->probes. */
tcuda_status tc_whatif_min_limit(const char *func, tc_tsnap *h, uint64_t capacity, tc_whatif_row *w,
                                 uint64_t peak_alloc, uint64_t peak_reserved);
/* Row w: its replay under o's capacity and memory_fraction into w->res
 * (with o->series_points, the series come from a second replay, so that
 * sampling them cannot change a figure), then (unless o->no_min_limit)
 * its min_limit, whose bounds come from a run without the fraction. The
 * status and message go to w->st, w->err. */
void tc_whatif_run_row(const char *func, tc_tsnap *h, const tcuda_whatif_options_t *o, tc_whatif_row *w);

/* The two recommendations, among rows[0] (the recorded config) and the
 * rows a PyTorch user can set (not policy:compact), none worse than
 * rows[0] on min_limit or on peak reserved:
 *   TC_WHATIF_FIT: the lowest min_limit; min_limits within 2 MiB of it
 *     are a tie, won by the lower peak reserved with no limit
 *     (free_peak_reserved, which rows[0] is compared on too);
 *   TC_WHATIF_HOLD: no OOM under the table's limit and the lowest peak
 *     reserved there, then the lowest min_limit.
 * Remaining ties: rows[0] (a change must gain something), then fewer
 * retries, fewer segment calls, the first row.
 * NULL when no row qualifies. */
enum { TC_WHATIF_FIT = 0, TC_WHATIF_HOLD = 1 };
const tc_whatif_row *tc_whatif_recommend(const tc_whatif_row *rows, size_t n, int goal);

/* base's settings with over's keys set over them (PYTORCH_CUDA_ALLOC_CONF
 * syntax; a list in brackets is one item) into out; 0 when it does not fit. */
int tc_whatif_merge_config(const char *base, const char *over, char *out, size_t n);

#endif
