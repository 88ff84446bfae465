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
 * done at 70. "No OOM" need not be monotone in the limit, and 70 is
 * within 64 grid steps of the lower bound 46, so every grid limit from 46
 * to 68 is tried: the 12 fail. 16 replays. */
static void min_limit_search(void) {
  tc_tsnap h;
  build(&h, FRAGMENTED, sizeof FRAGMENTED / sizeof *FRAGMENTED, 3);
  tc_whatif_row w;
  row_init(&w);
  CHECK_OK(tc_whatif_min_limit("test", &h, CAP, &w, 46 * MIB, 70 * MIB));
  CHECK_EQ_INT(w.have_min, 1);
  CHECK_EQ_INT(w.min_limit, 70 * MIB);
  CHECK_EQ_INT(w.probes, 16);
  CHECK_EQ_INT(w.scanned, 1);
  /* bounds off the grid round up to it, and the answer does not depend
   * on them: [45 MiB + 1, 69 MiB + 1] is [46, 70] on the grid */
  row_init(&w);
  CHECK_OK(tc_whatif_min_limit("test", &h, CAP, &w, 45 * MIB + 1, 69 * MIB + 1));
  CHECK_EQ_INT(w.min_limit, 70 * MIB);
  CHECK_EQ_INT(w.probes, 16);
  /* an upper bound too low (60 fails): the whole device (8 GiB) is probed
   * instead and fits, then the bisection over [46, 8192] narrows to 70 */
  row_init(&w);
  CHECK_OK(tc_whatif_min_limit("test", &h, CAP, &w, 46 * MIB, 60 * MIB));
  CHECK_EQ_INT(w.have_min, 1);
  CHECK_EQ_INT(w.min_limit, 70 * MIB);
}

/* FRAGMENTED ten times larger: min_limit 700 MiB, 120 grid steps above
 * the peak allocated 460 MiB, past the scan's 64: after the bisection the
 * limits below are tried until two in a row fail (698, 696). */
static void min_limit_far_above_the_bound(void) {
  static const tc_tsop big[] = {ALLOC(0, 400), FREE(0), ALLOC(1, 160), ALLOC(2, 300), FREE(1), FREE(2)};
  tc_tsnap h;
  build(&h, big, sizeof big / sizeof *big, 3);
  tc_whatif_row w;
  row_init(&w);
  CHECK_OK(tc_whatif_min_limit("test", &h, CAP, &w, 460 * MIB, 700 * MIB));
  CHECK_EQ_INT(w.have_min, 1);
  CHECK_EQ_INT(w.min_limit, 700 * MIB);
  CHECK_EQ_INT(w.scanned, 0);
  CHECK(w.probes <= 12); /* 700, a bisection of 120 steps (7), then 698 and 696 */
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
 * limit (46 and 70 MiB), so the search is the 16 replays above. Bounds from
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
  CHECK_EQ_INT(w.probes, 16);
  CHECK_EQ_INT(w.free_peak_reserved, 70 * MIB); /* from the run without the limit */
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

static tc_whatif_row mk(const char *config, int have_min, uint64_t min_mib, uint64_t free_peak_mib,
                        uint64_t peak_mib, uint64_t ooms) {
  tc_whatif_row w;
  memset(&w, 0, sizeof w);
  snprintf(w.config, sizeof w.config, "%s", config);
  w.have_min = have_min;
  w.min_limit = min_mib * MIB;
  w.free_peak_reserved = free_peak_mib * MIB;
  w.res.peak_reserved = peak_mib * MIB;
  w.res.ooms = ooms;
  w.res.first_oom = ooms ? 0 : -1;
  return w;
}

/* The two recommendations (whatif.h): never policy:compact, never a row
 * worse than the recorded one on min_limit or peak reserved; to fit, the
 * lowest min_limit with ties within 2 MiB won by the lower peak reserved;
 * to hold less, the lowest peak reserved with no OOM. */
static void recommendation(void) {
  tc_whatif_row rows[] = {
      mk("", 1, 100, 200, 200, 0),                          /* 0: recorded */
      mk("expandable_segments:True", 1, 80, 150, 100, 0),   /* 1: holds the least with no OOM */
      mk("max_split_size_mb:64", 1, 79, 300, 300, 0),       /* 2: lowest min_limit, but holds more than 0 */
      mk("roundup_power2_divisions:4", 1, 81, 120, 120, 0), /* 3: within 2 MiB of 1, lower peak: the fit */
      mk("policy:compact", 1, 50, 50, 50, 0),               /* 4: lowest of all, not a torch setting */
      mk("garbage_collection_threshold:0.6", 0, 0, 90, 90, 0), /* 5: no min_limit: worse than 0 */
      mk("max_split_size_mb:128", 1, 90, 110, 110, 1),      /* 6: an OOM under the table's limit */
  };
  size_t n = sizeof rows / sizeof *rows;
  CHECK(tc_whatif_recommend(rows, n, TC_WHATIF_FIT) == &rows[3]);
  CHECK(tc_whatif_recommend(rows, n, TC_WHATIF_HOLD) == &rows[1]);
  CHECK(tc_whatif_recommend(rows, 3, TC_WHATIF_FIT) == &rows[1]); /* 2 holds more than the recorded row */
  CHECK(tc_whatif_recommend(rows, 1, TC_WHATIF_FIT) == &rows[0]); /* the recorded row itself */
  CHECK(tc_whatif_recommend(rows, 0, TC_WHATIF_FIT) == NULL);
  /* a full tie with the recorded row: it stays, whatever the retries */
  tc_whatif_row r1[] = {mk("", 1, 100, 200, 200, 0), mk("garbage_collection_threshold:0.8", 1, 100, 200, 200, 0)};
  r1[0].res.retries = 4;
  CHECK(tc_whatif_recommend(r1, 2, TC_WHATIF_FIT) == &r1[0]);
  CHECK(tc_whatif_recommend(r1, 2, TC_WHATIF_HOLD) == &r1[0]);
  /* the recorded config has no min_limit and runs out under the table's
   * limit: any row that fits is better (its peak there says nothing) */
  tc_whatif_row r2[] = {mk("", 0, 0, 200, 90, 3), mk("max_split_size_mb:64", 1, 79, 300, 95, 0),
                        mk("expandable_segments:True", 1, 80, 150, 100, 0)};
  CHECK(tc_whatif_recommend(r2, 3, TC_WHATIF_HOLD) == &r2[1]);
  /* to fit, peaks are those without a limit: 1 holds more than the recorded row there */
  CHECK(tc_whatif_recommend(r2, 3, TC_WHATIF_FIT) == &r2[2]);
}

/* Configs merged as a user would set them: the recorded keys kept unless
 * the new ones set them; a bracketed list is one item. */
static void merge_config(void) {
  char out[128];
  CHECK(tc_whatif_merge_config("max_split_size_mb:128,garbage_collection_threshold:0.6", "expandable_segments:True",
                               out, sizeof out));
  CHECK(!strcmp(out, "max_split_size_mb:128,garbage_collection_threshold:0.6,expandable_segments:True"));
  CHECK(tc_whatif_merge_config("roundup_power2_divisions:[256:1,512:2],max_split_size_mb:128", "max_split_size_mb:64",
                               out, sizeof out));
  CHECK(!strcmp(out, "roundup_power2_divisions:[256:1,512:2],max_split_size_mb:64"));
  CHECK(tc_whatif_merge_config("", "max_split_size_mb:64", out, sizeof out));
  CHECK(!strcmp(out, "max_split_size_mb:64"));
  CHECK(!tc_whatif_merge_config("max_split_size_mb:128", "expandable_segments:True", out, 10));
}

/* The recorded limit from an OOM: a 40 MiB segment holds a, then torch
 * refuses a 30 MiB request (a new 30 MiB segment) with the device mostly
 * free. So the limit is at least 40 MiB (reached) and under 70 MiB
 * (40 + 30 would have fitted); every grid limit in [40, 68] replays the
 * OOM, and the highest is taken. With device_free under 30 MiB the device
 * itself was full: no limit, and a warning. */
static void infer_limit(void) {
  static const tc_tsop ops[] = {{.kind = HOP_SEG_ALLOC, .addr = 0, .size = 40 * MIB}, ALLOC(0, 40),
                                {.kind = HOP_OOM, .size = 30 * MIB, .addr = 4 * CAP / 5}, FREE(0)};
  tc_tsnap h;
  build(&h, ops, sizeof ops / sizeof *ops, 1);
  h.recorded_ooms = 1;
  tc_whatif_limit L;
  tc_tsrun_result ex;
  CHECK_OK(tc_whatif_infer_limit("test", &h, CAP, &L, &ex));
  CHECK_EQ_INT(L.inferred, 1);
  CHECK_EQ_INT(L.low, 40 * MIB);
  CHECK_EQ_INT(L.high, 70 * MIB - 1);
  CHECK_EQ_INT(L.limit, 68 * MIB);
  CHECK_EQ_INT(ex.ooms, 1);
  tc_tsrun_result_free(&ex);
  OPS[2].addr = 20 * MIB;
  CHECK_OK(tc_whatif_infer_limit("test", &h, CAP, &L, &ex));
  CHECK_EQ_INT(L.inferred, 0);
  CHECK_EQ_INT(L.device_full, 1);
  CHECK(strstr(L.warning, "no limit could be inferred") != NULL);
  tc_tsrun_result_free(&ex);
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

TC_MAIN(T(min_limit_search), T(min_limit_far_above_the_bound), T(min_limit_at_lower_bound), T(row_under_fraction),
        T(no_limit_fits_the_device), T(recommendation), T(merge_config), T(infer_limit), T(series_extremes))
