/* whatif.c's parts on small histories built here: the min_limit search,
 * a row under a memory fraction, a history no limit on the device holds,
 * and the recommendation. Every expected figure is worked out below from
 * torch's caching allocator rules (docs/allocator.md):
 *   - a request over 10 MiB gets a segment of its size rounded up to 2 MiB;
 *   - a free block is reused by best fit and split when more than 1 MiB
 *     would remain;
 *   - under a limit, a new segment that would take the reserved bytes past
 *     it first makes the allocator release cached segments that are wholly
 *     free (never a split one), then the request is an OOM if it still
 *     does not fit.
 * The device is 8 GiB, so that every 2 MiB-multiple limit is an exact
 * fraction of it. */
#include "harness.h"
#include "replay/whatif.h"

#define MIB ((uint64_t)1 << 20)
#define CAP ((uint64_t)8 << 30)

static tc_tsop OPS[16];

static void build(tc_tsnap *h, const tc_tsop *ops, size_t n, uint32_t slots) {
  memset(h, 0, sizeof *h);
  memcpy(OPS, ops, n * sizeof *ops);
  h->ops = OPS;
  h->num_ops = n;
  h->num_slots = slots;
  for (size_t i = 0; i < n; i++) h->num_requests += ops[i].kind == HOP_ALLOC || ops[i].kind == HOP_OOM;
  tc_alloc_config_default(&h->cfg);
}

static void row_init(tc_whatif_row *w) {
  memset(w, 0, sizeof *w);
  tc_alloc_config_default(&w->cfg);
}

#define ALLOC(k, mib) {.kind = HOP_ALLOC, .slot = (k), .size = (mib) * MIB}
#define FREE(k) {.kind = HOP_FREE, .slot = (k)}

/* a: 40 MiB, freed; b: 16 MiB takes a's cached segment and splits it (24
 * MiB stay free there); c: 30 MiB fits no free block, so a new segment.
 * No limit: reserved 40 + 30 = 70 MiB, allocated at most b + c = 46 MiB.
 * Under a limit L < 70 MiB, c would take reserved to 70: the only cached
 * segment is split (b lives in it), nothing can be released, c is an OOM.
 * So min_limit is 70 MiB. */
static const tc_tsop FRAGMENTED[] = {ALLOC(0, 40), FREE(0), ALLOC(1, 16), ALLOC(2, 30), FREE(1), FREE(2)};

/* The search on FRAGMENTED: probe 70 (the unlimited peak reserved): fits.
 * Bisection over [46, 70] in 2 MiB steps, mid = lo + half the steps
 * (rounded down): 58 fails (lo 60), 64 fails (lo 66), 68 fails (lo 70),
 * done at 70. 70 is above the lower bound 46, so 68 is checked again: it
 * fails. 5 replays. */
static void min_limit_search(void) {
  tc_tsnap h;
  build(&h, FRAGMENTED, sizeof FRAGMENTED / sizeof *FRAGMENTED, 3);
  tc_whatif_row w;
  row_init(&w);
  CHECK_OK(tc_whatif_min_limit("test", &h, CAP, &w, 46 * MIB, 70 * MIB));
  CHECK_EQ_INT(w.have_min, 1);
  CHECK_EQ_INT(w.min_limit, 70 * MIB);
  CHECK_EQ_INT(w.probes, 5);
  /* bounds off the grid round up to it, and the answer does not depend
   * on them: [45 MiB + 1, 69 MiB + 1] is [46, 70] on the grid */
  row_init(&w);
  CHECK_OK(tc_whatif_min_limit("test", &h, CAP, &w, 45 * MIB + 1, 69 * MIB + 1));
  CHECK_EQ_INT(w.min_limit, 70 * MIB);
  CHECK_EQ_INT(w.probes, 5);
  /* an upper bound too low (60 fails): the whole device (8 GiB) is probed
   * instead and fits, then the bisection over [46, 8192] narrows to 70 */
  row_init(&w);
  CHECK_OK(tc_whatif_min_limit("test", &h, CAP, &w, 46 * MIB, 60 * MIB));
  CHECK_EQ_INT(w.have_min, 1);
  CHECK_EQ_INT(w.min_limit, 70 * MIB);
}

/* a: 10 MiB, b: 20 MiB, both freed (two whole free segments); c: 30 MiB
 * fits neither, so a new segment: no limit, reserved 60 MiB, allocated at
 * most 30 MiB. Under L >= 30 MiB, c first releases the cached segments,
 * then fits: min_limit is the lower bound itself, 30 MiB. Search: 60 fits;
 * over [30, 60]: 44, 36, 32, 30 all fit; 30 is the lower bound, so no check
 * below. 5 replays. */
static void min_limit_at_lower_bound(void) {
  static const tc_tsop ops[] = {ALLOC(0, 10), ALLOC(1, 20), FREE(0), FREE(1), ALLOC(2, 30), FREE(2)};
  tc_tsnap h;
  build(&h, ops, sizeof ops / sizeof *ops, 3);
  tc_whatif_row w;
  row_init(&w);
  tcuda_whatif_options_t o = TCUDA_WHATIF_OPTIONS_INIT;
  o.capacity = CAP;
  tc_whatif_run_row("test", &h, &o, &w);
  CHECK_OK(w.st);
  CHECK_EQ_INT(w.res.peak_reserved, 60 * MIB);
  CHECK_EQ_INT(w.res.peak_allocated, 30 * MIB);
  CHECK_EQ_INT(w.res.segment_calls, 3);
  CHECK_EQ_INT(w.res.first_oom, -1);
  CHECK_EQ_INT(w.have_min, 1);
  CHECK_EQ_INT(w.min_limit, 30 * MIB);
  CHECK_EQ_INT(w.probes, 5);
}

/* FRAGMENTED under memory_fraction 60 MiB / 8 GiB: the row's own figures
 * are those under the limit (c, request 2, is an OOM of 30 MiB; peaks are
 * a's 40 MiB), but its min_limit's bounds come from a run without the
 * limit (46 and 70 MiB), so the search is the 5 replays above. Bounds from
 * the limited run (40 and 40) would fail at 40 and search the whole
 * device, with more replays. */
static void row_under_fraction(void) {
  tc_tsnap h;
  build(&h, FRAGMENTED, sizeof FRAGMENTED / sizeof *FRAGMENTED, 3);
  tc_whatif_row w;
  row_init(&w);
  tcuda_whatif_options_t o = TCUDA_WHATIF_OPTIONS_INIT;
  o.capacity = CAP;
  o.memory_fraction = (double)(60 * MIB) / (double)CAP;
  tc_whatif_run_row("test", &h, &o, &w);
  CHECK_OK(w.st);
  CHECK_EQ_INT(w.res.first_oom, 2);
  CHECK_EQ_INT(w.res.first_oom_size, 30 * MIB);
  CHECK_EQ_INT(w.res.ooms, 1);
  CHECK_EQ_INT(w.res.peak_reserved, 40 * MIB);
  CHECK_EQ_INT(w.res.peak_allocated, 40 * MIB);
  CHECK_EQ_INT(w.have_min, 1);
  CHECK_EQ_INT(w.min_limit, 70 * MIB);
  CHECK_EQ_INT(w.probes, 5);
  /* the same row with no_min_limit: no search */
  tc_tsrun_result_free(&w.res);
  row_init(&w);
  o.no_min_limit = 1;
  tc_whatif_run_row("test", &h, &o, &w);
  CHECK_OK(w.st);
  CHECK_EQ_INT(w.have_min, 0);
  CHECK_EQ_INT(w.probes, 0);
  tc_tsrun_result_free(&w.res);
}

/* FRAGMENTED on a 66 MiB device: c needs 70 MiB reserved, more than the
 * device, so even without a limit c is an OOM (peaks 40 MiB). The search
 * probes 40 MiB (both bounds): fails; then the whole device, 66 MiB:
 * fails. No min_limit, after 2 replays. */
static void no_limit_fits_the_device(void) {
  tc_tsnap h;
  build(&h, FRAGMENTED, sizeof FRAGMENTED / sizeof *FRAGMENTED, 3);
  tc_whatif_row w;
  row_init(&w);
  tcuda_whatif_options_t o = TCUDA_WHATIF_OPTIONS_INIT;
  o.capacity = 66 * MIB;
  tc_whatif_run_row("test", &h, &o, &w);
  CHECK_OK(w.st);
  CHECK_EQ_INT(w.res.first_oom, 2);
  CHECK_EQ_INT(w.res.peak_reserved, 40 * MIB);
  CHECK_EQ_INT(w.have_min, 0);
  CHECK_EQ_INT(w.probes, 2);
  tc_tsrun_result_free(&w.res);
}

static tc_whatif_row mk(const char *config, int have_min, uint64_t min_mib, uint64_t retries, uint64_t calls) {
  tc_whatif_row w;
  memset(&w, 0, sizeof w);
  snprintf(w.config, sizeof w.config, "%s", config);
  w.have_min = have_min;
  w.min_limit = min_mib * MIB;
  w.res.retries = retries;
  w.res.segment_calls = calls;
  return w;
}

/* Lowest min_limit first, then fewest retries, then fewest segment calls,
 * then the first such row; rows with no min_limit and tcuda's own policies
 * never. */
static void recommendation(void) {
  tc_whatif_row rows[] = {
      mk("", 1, 100, 0, 3),                          /* 0: recorded */
      mk("expandable_segments:True", 1, 80, 2, 10),  /* 1 */
      mk("max_split_size_mb:64", 1, 80, 1, 20),      /* 2: fewer retries than 1 */
      mk("roundup_power2_divisions:4", 1, 80, 1, 5), /* 3: as 2, fewer segment calls: the pick */
      mk("policy:compact", 1, 50, 0, 1),             /* 4: lowest, but not a torch setting */
      mk("garbage_collection_threshold:0.6", 0, 10, 0, 1), /* 5: no min_limit */
      mk("max_split_size_mb:128", 1, 80, 1, 5),      /* 6: ties 3, comes later */
  };
  size_t n = sizeof rows / sizeof *rows;
  CHECK(tc_whatif_recommend(rows, n) == &rows[3]);
  CHECK(tc_whatif_recommend(rows, 3) == &rows[2]);
  CHECK(tc_whatif_recommend(rows, 2) == &rows[1]);
  CHECK(tc_whatif_recommend(rows, 1) == &rows[0]); /* the recorded row itself */
  CHECK(tc_whatif_recommend(rows, 0) == NULL);
  CHECK(tc_whatif_recommend(&rows[4], 2) == NULL); /* only compact and a row with no min_limit */
}

/* FRAGMENTED's series in 2 points of 3 ops each. Ops 0-2: reserved 40
 * MiB throughout; allocated 40, 0, 16. Ops 3-5: reserved 70 (c's segment;
 * nothing is released without a limit); allocated 46, 30, 0. Each point
 * keeps its span's maximum and minimum. */
static void series_extremes(void) {
  static uint64_t times[6];
  tc_tsnap h;
  build(&h, FRAGMENTED, sizeof FRAGMENTED / sizeof *FRAGMENTED, 3);
  h.op_time_us = times;
  tc_whatif_row w;
  row_init(&w);
  tcuda_whatif_options_t o = TCUDA_WHATIF_OPTIONS_INIT;
  o.capacity = CAP;
  o.series_points = 2;
  o.no_min_limit = 1;
  tc_whatif_run_row("test", &h, &o, &w);
  CHECK_OK(w.st);
  CHECK_EQ_INT(w.res.series_n, 2);
  if (w.res.series_n == 2) {
    CHECK_EQ_INT(w.res.series_reserved[0], 40 * MIB);
    CHECK_EQ_INT(w.res.series_reserved_min[0], 40 * MIB);
    CHECK_EQ_INT(w.res.series_allocated[0], 40 * MIB);
    CHECK_EQ_INT(w.res.series_allocated_min[0], 0);
    CHECK_EQ_INT(w.res.series_reserved[1], 70 * MIB);
    CHECK_EQ_INT(w.res.series_reserved_min[1], 70 * MIB);
    CHECK_EQ_INT(w.res.series_allocated[1], 46 * MIB);
    CHECK_EQ_INT(w.res.series_allocated_min[1], 0);
  }
  tc_tsrun_result_free(&w.res);
}

TC_MAIN(T(min_limit_search), T(min_limit_at_lower_bound), T(row_under_fraction), T(no_limit_fits_the_device),
        T(recommendation), T(series_extremes))
