/* The allocator engine's core rules on the simulated backend: rounding,
 * pools, segment sizes, best fit, split, merge and the stats after each
 * step. Every expected number is worked out by hand from PyTorch's rules
 * (docs/allocator.md). */
#include "test_alloc_policy_util.h"

static void test_round_size(void) {
  tc_alloc_config c;
  CHECK_OK(tc_alloc_config_parse(NULL, &c));
  static const uint64_t plain[][2] = {
      {1, 512},           {511, 512},           {512, 512},          {513, 1024},         {1000, 1024},
      {MiB - 1, MiB},     {MiB, MiB},           {MiB + 1, MiB + 512}, {10 * MiB - 1, 10 * MiB},
      {10 * MiB, 10 * MiB}, {10 * MiB + 1, 10 * MiB + 512}, {3000, 3072}};
  for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) CHECK_EQ_INT(tc_alloc_round_size(&c, plain[i][0]), plain[i][1]);

  CHECK_OK(tc_alloc_config_parse("roundup_power2_divisions:4", &c));
  CHECK_EQ_INT(tc_alloc_round_size(&c, 1200), 1536);            /* <= 512*4: plain */
  CHECK_EQ_INT(tc_alloc_round_size(&c, 2048), 2048);            /* not > 2048 */
  CHECK_EQ_INT(tc_alloc_round_size(&c, 2049), 2560);            /* step 2048/4 */
  CHECK_EQ_INT(tc_alloc_round_size(&c, 4096), 4096);            /* a power of 2 stays */
  CHECK_EQ_INT(tc_alloc_round_size(&c, MiB + 1), MiB + 256 * KiB);
  CHECK_EQ_INT(tc_alloc_round_size(&c, 5 * MiB + 1), 6 * MiB);
  CHECK_EQ_INT(tc_alloc_round_size(&c, 100 * MiB), 112 * MiB);

  /* [256:4,>:1]: slots 0..8 get 4 (the first key fills lower slots), '>'
   * fills 9..15 and leaves slot 8 (256-511 MiB) alone (docs/allocator.md). */
  CHECK_OK(tc_alloc_config_parse("roundup_power2_divisions:[256:4,>:1]", &c));
  CHECK_EQ_INT(tc_alloc_round_size(&c, 100 * MiB), 112 * MiB);
  CHECK_EQ_INT(tc_alloc_round_size(&c, 300 * MiB), 320 * MiB);
  CHECK_EQ_INT(tc_alloc_round_size(&c, 600 * MiB + 1), 600 * MiB + 512);

  CHECK_EQ_INT(tc_alloc_segment_size(&c, 512), 2 * MiB);
  CHECK_EQ_INT(tc_alloc_segment_size(&c, MiB), 2 * MiB);
  CHECK_EQ_INT(tc_alloc_segment_size(&c, MiB + 512), 20 * MiB);
  CHECK_EQ_INT(tc_alloc_segment_size(&c, 10 * MiB - 512), 20 * MiB);
  CHECK_EQ_INT(tc_alloc_segment_size(&c, 10 * MiB), 10 * MiB);
  CHECK_EQ_INT(tc_alloc_segment_size(&c, 10 * MiB + 512), 12 * MiB);
  /* large_segment_size_mb moves only the 1-10 MiB step */
  CHECK_OK(tc_alloc_config_parse("large_segment_size_mb:12", &c));
  CHECK_EQ_INT(tc_alloc_segment_size(&c, MiB), 2 * MiB);
  CHECK_EQ_INT(tc_alloc_segment_size(&c, MiB + 512), 12 * MiB);
  CHECK_EQ_INT(tc_alloc_segment_size(&c, 10 * MiB - 512), 12 * MiB);
  CHECK_EQ_INT(tc_alloc_segment_size(&c, 10 * MiB), 10 * MiB);
}

/* One allocation on a fresh allocator per row: pool, segment size, split. */
static void test_boundaries(void) {
  static const struct {
    uint64_t req, rounded;
    int small;
    uint64_t seg;
    int split;
  } rows[] = {
      {1, 512, 1, 2 * MiB, 1},
      {511, 512, 1, 2 * MiB, 1},
      {512, 512, 1, 2 * MiB, 1},
      {513, 1024, 1, 2 * MiB, 1},
      {MiB - 1, MiB, 1, 2 * MiB, 1},
      {MiB, MiB, 1, 2 * MiB, 1},                   /* <= 1 MiB is small */
      {MiB + 1, MiB + 512, 0, 20 * MiB, 1},
      {10 * MiB - 513, 10 * MiB - 512, 0, 20 * MiB, 1},
      {10 * MiB - 1, 10 * MiB, 0, 10 * MiB, 0},
      {10 * MiB, 10 * MiB, 0, 10 * MiB, 0},
      {10 * MiB + 1, 10 * MiB + 512, 0, 12 * MiB, 1},
      {11 * MiB - 512, 11 * MiB - 512, 0, 12 * MiB, 1}, /* remainder 1 MiB + 512 > 1 MiB */
      {11 * MiB, 11 * MiB, 0, 12 * MiB, 0},             /* remainder exactly 1 MiB: kept */
      {19 * MiB + 1, 19 * MiB + 512, 0, 20 * MiB, 0},
      {64 * MiB, 64 * MiB, 0, 64 * MiB, 0},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
    uint64_t a = M(rows[i].req, 0);
    int p = rows[i].small ? TCUDA_STAT_SMALL_POOL : TCUDA_STAT_LARGE_POOL;
    int q = rows[i].small ? TCUDA_STAT_LARGE_POOL : TCUDA_STAT_SMALL_POOL;
    uint64_t handed = rows[i].split ? rows[i].rounded : rows[i].seg; /* 12.3: slack counts */
    tcuda_memory_stats_t s = fx_stats();
    if (CUR(s.segment[p]) != 1) fprintf(stderr, "row %zu (req %llu)\n", i, (unsigned long long)rows[i].req);
    CHECK_EQ_INT(CUR(s.segment[p]), 1);
    CHECK_EQ_INT(CUR(s.segment[q]), 0);
    CHECK_EQ_INT(CUR(s.reserved_bytes[p]), rows[i].seg);
    CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), rows[i].seg);
    CHECK_EQ_INT(CUR(s.allocated_bytes[p]), handed);
    CHECK_EQ_INT(CUR(s.active_bytes[p]), handed);
    CHECK_EQ_INT(CUR(s.requested_bytes[p]), rows[i].req);
    CHECK_EQ_INT(CUR(s.inactive_split[p]), rows[i].split);
    CHECK_EQ_INT(CUR(s.inactive_split_bytes[p]), rows[i].split ? rows[i].seg - rows[i].rounded : 0);
    CHECK_EQ_INT(s.num_device_alloc, 1);
    CHECK_EQ_INT(FX.seg_allocs, 1);
    uint64_t baddr = 0, bsize = 0, saddr = 0, ssize = 0;
    CHECK_OK(tc_alloc_block_info(FX.a, a, &baddr, &bsize, &saddr, &ssize));
    CHECK_EQ_INT(baddr, a);
    CHECK_EQ_INT(bsize, handed);
    CHECK_EQ_INT(saddr, a); /* the allocated part takes the low addresses */
    CHECK_EQ_INT(ssize, rows[i].seg);
    F(a);
    s = fx_stats();
    CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_ALL]), 0);
    CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_ALL]), 0);
    CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), rows[i].seg);
    CHECK_OK(tc_alloc_empty_cache(FX.a));
    s = fx_stats();
    CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 0);
    CHECK_EQ_INT(s.num_device_free, 1);
    CHECK_EQ_INT(tc_backend_sim_used(FX.sim), 0);
    fx_teardown();
  }
}

/* Every field of every stat through malloc(1), free, empty_cache, resets. */
static void test_stats_full_cycle(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  enum { A = TCUDA_STAT_ALL, S = TCUDA_STAT_SMALL_POOL, L = TCUDA_STAT_LARGE_POOL };
  const int64_t rem = (int64_t)(2 * MiB - 512);
  uint64_t a = M(1, 0);
  tcuda_memory_stats_t s = fx_stats();
  for (int k = A; k <= S; k++) {
    CHECK_STAT(s.allocation[k], 1, 1, 1, 0);
    CHECK_STAT(s.segment[k], 1, 1, 1, 0);
    CHECK_STAT(s.active[k], 1, 1, 1, 0);
    CHECK_STAT(s.allocated_bytes[k], 512, 512, 512, 0);
    CHECK_STAT(s.reserved_bytes[k], 2 * MiB, 2 * MiB, 2 * MiB, 0);
    CHECK_STAT(s.active_bytes[k], 512, 512, 512, 0);
    CHECK_STAT(s.requested_bytes[k], 1, 1, 1, 0);
    CHECK_STAT(s.inactive_split[k], 1, 1, 1, 0);
    CHECK_STAT(s.inactive_split_bytes[k], rem, rem, rem, 0);
  }
  CHECK_STAT(s.allocation[L], 0, 0, 0, 0);
  CHECK_STAT(s.reserved_bytes[L], 0, 0, 0, 0);
  CHECK_STAT(s.oversize_allocations, 0, 0, 0, 0);
  CHECK_STAT(s.oversize_segments, 0, 0, 0, 0);
  CHECK_EQ_INT(s.num_device_alloc, 1);
  CHECK_EQ_INT(s.num_device_free, 0);
  CHECK_EQ_INT(s.max_split_size, -1);

  F(a);
  s = fx_stats();
  for (int k = A; k <= S; k++) {
    CHECK_STAT(s.allocation[k], 0, 1, 1, 1);
    CHECK_STAT(s.active[k], 0, 1, 1, 1);
    CHECK_STAT(s.allocated_bytes[k], 0, 512, 512, 512);
    CHECK_STAT(s.active_bytes[k], 0, 512, 512, 512);
    CHECK_STAT(s.requested_bytes[k], 0, 1, 1, 1);
    CHECK_STAT(s.inactive_split[k], 0, 1, 1, 1);
    CHECK_STAT(s.inactive_split_bytes[k], 0, rem, rem, rem);
    CHECK_STAT(s.segment[k], 1, 1, 1, 0);
    CHECK_STAT(s.reserved_bytes[k], 2 * MiB, 2 * MiB, 2 * MiB, 0);
  }

  CHECK_OK(tc_alloc_empty_cache(FX.a));
  s = fx_stats();
  for (int k = A; k <= S; k++) {
    CHECK_STAT(s.segment[k], 0, 1, 1, 1);
    CHECK_STAT(s.reserved_bytes[k], 0, 2 * MiB, 2 * MiB, 2 * MiB);
  }
  CHECK_EQ_INT(s.num_device_free, 1);
  CHECK_EQ_INT(s.num_sync_all_streams, 1);
  CHECK_EQ_INT(FX.seg_frees, 1);

  tc_alloc_reset_peak(FX.a);
  s = fx_stats();
  CHECK_STAT(s.reserved_bytes[A], 0, 0, 2 * MiB, 2 * MiB);
  CHECK_STAT(s.allocation[S], 0, 0, 1, 1);
  tc_alloc_reset_accumulated(FX.a);
  s = fx_stats();
  CHECK_STAT(s.reserved_bytes[A], 0, 0, 0, 0);
  CHECK_STAT(s.inactive_split_bytes[S], 0, 0, 0, 0);
  CHECK_EQ_INT(s.num_device_alloc, 0);
  CHECK_EQ_INT(s.num_device_free, 0);
  CHECK_EQ_INT(s.num_sync_all_streams, 0);
  CHECK_EQ_INT(s.max_split_size, -1); /* not a counter: survives */

  /* Peaks follow the new current after the reset. */
  uint64_t b = M(3000, 0);
  s = fx_stats();
  CHECK_STAT(s.allocated_bytes[A], 3072, 3072, 3072, 0);
  CHECK_STAT(s.requested_bytes[A], 3000, 3000, 3000, 0);
  F(b);
  fx_teardown();
}

/* 12.2: free_block applies the NET change of inactive_split. */
static void test_inactive_split_net(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  const int64_t seg = (int64_t)(2 * MiB);
  uint64_t a = M(512, 0), b = M(512, 0), c = M(512, 0);
  CHECK_EQ_INT(b, a + 512);
  CHECK_EQ_INT(c, a + 1024);
  tcuda_memory_stats_t s = fx_stats();
  /* a split the fresh segment (+1, +rem); b and c shrank the remainder. */
  CHECK_STAT(s.inactive_split[TCUDA_STAT_SMALL_POOL], 1, 1, 1, 0);
  CHECK_STAT(s.inactive_split_bytes[TCUDA_STAT_SMALL_POOL], seg - 1536, seg - 512, seg - 512, 1024);

  F(b); /* no free neighbour: +1 block, +512 */
  s = fx_stats();
  CHECK_STAT(s.inactive_split[TCUDA_STAT_SMALL_POOL], 2, 2, 2, 0);
  CHECK_STAT(s.inactive_split_bytes[TCUDA_STAT_SMALL_POOL], seg - 1024, seg - 512, seg, 1024);

  F(a); /* absorbs b (-1, -512), still split (+1, +1024): net 0 blocks, +512 */
  s = fx_stats();
  CHECK_STAT(s.inactive_split[TCUDA_STAT_SMALL_POOL], 2, 2, 2, 0);
  CHECK_STAT(s.inactive_split_bytes[TCUDA_STAT_SMALL_POOL], seg - 512, seg - 512, seg + 512, 1024);

  F(c); /* absorbs both neighbours, segment whole again: -2, -(2 MiB - 512) */
  s = fx_stats();
  CHECK_STAT(s.inactive_split[TCUDA_STAT_SMALL_POOL], 0, 2, 2, 2);
  CHECK_STAT(s.inactive_split_bytes[TCUDA_STAT_SMALL_POOL], 0, seg - 512, seg + 512, seg + 512);
  CHECK_STAT(s.inactive_split[TCUDA_STAT_ALL], 0, 2, 2, 2);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_LARGE_POOL]), 0);
  fx_teardown();
}

static void test_best_fit_ties_ascending(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t x1 = M(12 * MiB, 0), x2 = M(12 * MiB, 0), y = M(14 * MiB, 0);
  CHECK(x1 < x2);
  F(x2);
  F(x1);
  F(y);
  /* 11 MiB + 1 rounds to 11 MiB + 512: the smallest fit is 12 MiB, the tie
   * goes to the lower address; the 1 MiB - 512 remainder is not split off. */
  uint64_t z = M(11 * MiB + 1, 0);
  CHECK_EQ_INT(z, x1);
  CHECK_EQ_INT(CUR(fx_stats().allocated_bytes[TCUDA_STAT_ALL]), 12 * MiB);
  uint64_t w = M(11 * MiB + 1, 0);
  CHECK_EQ_INT(w, x2);
  uint64_t v = M(11 * MiB + 1, 0); /* now only the 14 MiB block: split */
  CHECK_EQ_INT(v, y);
  tcuda_memory_stats_t s = fx_stats();
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_ALL]), 24 * MiB + 11 * MiB + 512);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_LARGE_POOL]), 1);
  CHECK_EQ_INT(CUR(s.inactive_split_bytes[TCUDA_STAT_LARGE_POOL]), 3 * MiB - 512);
  CHECK_EQ_INT(FX.seg_allocs, 3);
  F(z);
  F(w);
  F(v);
  fx_teardown();
}

/* With the driver's address model a later segment can sit lower, and then
 * it wins the tie although it was allocated last. */
static void test_best_fit_ties_driver(void) {
  fx_setup(NULL, TC_SIM_VA_DRIVER, 0, 0);
  uint64_t a1 = M(12 * MiB, 0), a2 = M(12 * MiB, 0), a3 = M(12 * MiB, 0);
  CHECK(a3 < a1 && a1 < a2);
  F(a1);
  F(a3);
  CHECK_EQ_INT(M(11 * MiB + 1, 0), a3);
  CHECK_EQ_INT(M(11 * MiB + 1, 0), a1);
  fx_teardown();
}

static void test_smallest_fit_wins(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t big = M(30 * MiB, 0), small = M(14 * MiB, 0);
  F(big);
  F(small);
  CHECK_EQ_INT(M(13 * MiB, 0), small); /* 14 MiB fits best although 30 MiB is lower */
  CHECK_EQ_INT(M(13 * MiB, 0), big);   /* split: 17 MiB remains */
  CHECK_EQ_INT(FX.seg_allocs, 2);
  fx_teardown();
}

static void test_streams_never_share(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t a = M(512, 7);
  F(a);
  uint64_t b = M(512, 9); /* stream 7's free 2 MiB block is not for stream 9 */
  CHECK_EQ_INT(FX.seg_allocs, 2);
  CHECK(b != a);
  uint64_t c = M(512, 7);
  CHECK_EQ_INT(c, a);
  uint64_t d = M(600 * KiB, 3); /* stream 3 is below both: lower_bound must stop */
  CHECK_EQ_INT(FX.seg_allocs, 3);
  tcuda_snapshot_t *snap = NULL;
  CHECK_OK(tc_alloc_snapshot(FX.a, &snap));
  CHECK_EQ_INT(snap->num_segments, 3);
  for (size_t i = 0; i < snap->num_segments; i++) {
    const tcuda_segment_info_t *g = &snap->segments[i];
    int64_t want = g->address == a ? 7 : g->address == b ? 9 : 3;
    CHECK_EQ_INT(g->stream, want);
    if (i) CHECK(snap->segments[i - 1].address < g->address);
  }
  tc_snapshot_free(snap);
  F(b);
  F(c);
  F(d);
  fx_teardown();
}

static void test_split_thresholds(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t a = M(MiB + 1, 0); /* makes a 20 MiB segment */
  F(a);                       /* back to one unsplit 20 MiB block */
  CHECK_EQ_INT(CUR(fx_stats().inactive_split[TCUDA_STAT_ALL]), 0);
  uint64_t b = M(19 * MiB - 512, 0); /* remainder 1 MiB + 512 > 1 MiB: split */
  tcuda_memory_stats_t s = fx_stats();
  CHECK_EQ_INT(b, a);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_LARGE_POOL]), 19 * MiB - 512);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_LARGE_POOL]), 1);
  CHECK_EQ_INT(CUR(s.inactive_split_bytes[TCUDA_STAT_LARGE_POOL]), MiB + 512);
  F(b);
  uint64_t c = M(19 * MiB, 0); /* remainder exactly 1 MiB: the whole 20 MiB */
  s = fx_stats();
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_LARGE_POOL]), 20 * MiB);
  CHECK_EQ_INT(CUR(s.active_bytes[TCUDA_STAT_LARGE_POOL]), 20 * MiB);
  CHECK_EQ_INT(CUR(s.requested_bytes[TCUDA_STAT_LARGE_POOL]), 19 * MiB);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_LARGE_POOL]), 0);
  F(c);
  CHECK_EQ_INT(FX.seg_allocs, 1);

  /* Small pool: a remainder of exactly 512 is still split off. */
  uint64_t d1 = M(MiB, 0), d2 = M(MiB - 512, 0);
  s = fx_stats();
  CHECK_EQ_INT(d2, d1 + MiB);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_SMALL_POOL]), 1);
  CHECK_EQ_INT(CUR(s.inactive_split_bytes[TCUDA_STAT_SMALL_POOL]), 512);
  uint64_t d3 = M(512, 0); /* takes the 512 block whole: -1 block */
  s = fx_stats();
  CHECK_EQ_INT(d3, d1 + 2 * MiB - 512);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_SMALL_POOL]), 0);
  CHECK_EQ_INT(CUR(s.inactive_split_bytes[TCUDA_STAT_SMALL_POOL]), 0);
  CHECK_EQ_INT(FX.seg_allocs, 2);
  F(d1);
  F(d2);
  F(d3);
  fx_teardown();
}

/* 12.5: remainders and merged blocks keep stale requested sizes. */
static void test_snapshot_stale_requested(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t a = M(1000, 5);
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tc_alloc_snapshot(FX.a, &s));
  CHECK_EQ_INT(s->num_segments, 1);
  tcuda_segment_info_t *g = &s->segments[0];
  CHECK_EQ_INT(g->address, a);
  CHECK_EQ_INT(g->total_size, 2 * MiB);
  CHECK_EQ_INT(g->allocated_size, 1024);
  CHECK_EQ_INT(g->active_size, 1024);
  CHECK_EQ_INT(g->requested_size, 1000);
  CHECK_EQ_INT(g->stream, 5);
  CHECK_EQ_INT(g->is_large, 0);
  CHECK_EQ_INT(g->is_expandable, 0);
  CHECK_EQ_INT(g->num_blocks, 2);
  CHECK_EQ_INT(g->blocks[0].state, TCUDA_BLOCK_ACTIVE_ALLOCATED);
  CHECK_EQ_INT(g->blocks[0].requested_size, 1000);
  CHECK_EQ_INT(g->blocks[1].address, a + 1024);
  CHECK_EQ_INT(g->blocks[1].size, 2 * MiB - 1024);
  CHECK_EQ_INT(g->blocks[1].requested_size, 0); /* fresh segment's remainder */
  CHECK_EQ_INT(g->blocks[1].state, TCUDA_BLOCK_INACTIVE);
  tc_snapshot_free(s);

  F(a);
  CHECK_OK(tc_alloc_snapshot(FX.a, &s));
  g = &s->segments[0];
  CHECK_EQ_INT(g->num_blocks, 1);
  CHECK_EQ_INT(g->blocks[0].requested_size, 1000); /* the freed block's value survives the merge */
  CHECK_EQ_INT(g->requested_size, 0);              /* only active blocks count */
  tc_snapshot_free(s);

  uint64_t b = M(700, 5);
  CHECK_EQ_INT(b, a);
  CHECK_OK(tc_alloc_snapshot(FX.a, &s));
  g = &s->segments[0];
  CHECK_EQ_INT(g->num_blocks, 2);
  CHECK_EQ_INT(g->blocks[0].requested_size, 700);
  CHECK_EQ_INT(g->blocks[1].requested_size, 1000); /* cut from the stale block */
  tc_snapshot_free(s);
  F(b);
  fx_teardown();
}

static void test_bad_pointers(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t a = M(4096, 0);
  tcuda_memory_stats_t before = fx_stats(), after;
  CHECK_ERR(tc_alloc_free(FX.a, 0x1234), TCUDA_ERROR_INVALID_POINTER, "0x1234");
  CHECK_ERR(tc_alloc_free(FX.a, a + 512), TCUDA_ERROR_INVALID_POINTER, "not an allocation");
  CHECK_ERR(tc_alloc_record_stream(FX.a, 0xdead000, 3), TCUDA_ERROR_INVALID_POINTER, "0xdead000");
  after = fx_stats();
  CHECK(!memcmp(&before, &after, sizeof before));
  F(a);
  before = fx_stats();
  CHECK_ERR(tc_alloc_free(FX.a, a), TCUDA_ERROR_INVALID_POINTER, "already freed");
  after = fx_stats();
  CHECK(!memcmp(&before, &after, sizeof before));
  CHECK_OK(tc_alloc_free(FX.a, 0)); /* free(NULL) */
  tcuda_status st = TCUDA_SUCCESS;
  CHECK_EQ_INT(tc_alloc_free_if_owned(FX.a, a, &st), 0);
  uint64_t b = M(4096, 0);
  CHECK_EQ_INT(tc_alloc_free_if_owned(FX.a, b, &st), 1);
  CHECK_EQ_INT(st, TCUDA_SUCCESS);
  CHECK_EQ_INT(CUR(fx_stats().allocation[TCUDA_STAT_ALL]), 0);
  uint64_t x = 0;
  CHECK_ERR(tc_alloc_block_info(FX.a, b, &x, NULL, NULL, NULL), TCUDA_ERROR_INVALID_POINTER, "not inside");
  CHECK_ERR(tc_alloc_malloc(FX.a, 1, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "addr");
  fx_teardown();
}

static void test_zero_and_huge_sizes(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t a = 77;
  CHECK_OK(tc_alloc_malloc(FX.a, 0, 0, &a));
  CHECK_EQ_INT(a, 0);
  CHECK_ERR(tc_alloc_malloc(FX.a, UINT64_MAX, 0, &a), TCUDA_ERROR_OVERFLOW, "overflows");
  CHECK_ERR(tc_alloc_malloc(FX.a, UINT64_MAX - MiB, 0, &a), TCUDA_ERROR_OVERFLOW, "overflows");
  CHECK_ERR(tc_alloc_malloc(FX.a, (uint64_t)1 << 60, 0, &a), TCUDA_ERROR_OUT_OF_MEMORY, "more than 1EB");
  tcuda_memory_stats_t s = fx_stats(), zero;
  memset(&zero, 0, sizeof zero);
  zero.max_split_size = -1;
  CHECK(!memcmp(&s, &zero, sizeof s));
  CHECK_EQ_INT(FX.seg_allocs, 0);
  fx_teardown();
}

static void test_max_split_stat(void) {
  fx_setup("max_split_size_mb:100", TC_SIM_VA_ASCENDING, 0, 0);
  CHECK_EQ_INT(fx_stats().max_split_size, 100 * MiB);
  tc_alloc_config c;
  CHECK_OK(tc_alloc_config_parse("max_split_size_mb:200", &c));
  tc_alloc_set_config(FX.a, &c);
  CHECK_EQ_INT(fx_stats().max_split_size, 100 * MiB); /* copied at construction only */
  tc_alloc_config got;
  tc_alloc_get_config(FX.a, &got);
  CHECK_EQ_INT(got.max_split_size, 200 * MiB);
  CHECK_EQ_INT(tc_alloc_device(FX.a), 0);
  fx_teardown();
}

/* Best fit against a brute-force oracle, in every size bucket: sizes from
 * 512 B to 2^50 on a very large simulated device, two streams. Each malloc
 * must take exactly the block that the lowest (size, address) among the
 * snapshot's free blocks of its stream and pool names (a new segment when
 * none fits), and the free sets must pass their self check after every
 * call. Every third request asks for a free block's own size, or 512 bytes
 * less or more, so bucket edges are hit. */
static uint64_t bf_rng = 0x9E3779B97F4A7C15ull;
static uint64_t bf_next(void) {
  bf_rng ^= bf_rng << 13;
  bf_rng ^= bf_rng >> 7;
  bf_rng ^= bf_rng << 17;
  return bf_rng;
}

/* The free block a malloc of `rounded` bytes on `stream` must take: its
 * address (0: none fits), and in *any_size some free block's size (0: none). */
static uint64_t bf_oracle(uint64_t rounded, uint64_t stream, uint64_t *any_size) {
  tcuda_snapshot_t *snap = NULL;
  CHECK_OK(tc_alloc_snapshot(FX.a, &snap));
  if (!snap) return 0;
  int large = rounded > TC_SMALL_SIZE;
  uint64_t best = 0, best_size = 0, nfree = 0, pick = bf_next();
  *any_size = 0;
  for (size_t i = 0; i < snap->num_segments; i++) {
    const tcuda_segment_info_t *g = &snap->segments[i];
    for (size_t j = 0; j < g->num_blocks; j++) {
      const tcuda_block_info_t *b = &g->blocks[j];
      if (b->state != TCUDA_BLOCK_INACTIVE) continue;
      if (pick % ++nfree == 0) *any_size = b->size; /* one free block, uniformly */
      if ((uint64_t)g->stream != stream || g->is_large != large || b->size < rounded) continue;
      if (!best || b->size < best_size || (b->size == best_size && b->address < best)) {
        best = b->address;
        best_size = b->size;
      }
    }
  }
  tc_snapshot_free(snap);
  return best;
}

static void test_best_fit_every_bucket(void) {
  const uint64_t cap = (uint64_t)1 << 58;
  fx_setup(NULL, TC_SIM_VA_ASCENDING, cap, cap);
  const uint64_t streams[2] = {0, 0x7f0000001000ull};
  enum { LIVE = 48 };
  uint64_t live[LIVE] = {0}, free_size = 0;
  int nlive = 0, checked = 0, hits = 0;
  char why[256];
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  for (int op = 0; op < 3000 && !tc_failures; op++) {
    if (nlive < LIVE && (nlive == 0 || bf_next() % 3)) {
      uint64_t size;
      unsigned how = (unsigned)(bf_next() % 6);
      if (free_size && how < 2) size = free_size + (how ? 512 : 0);
      else if (free_size > 512 && how == 2) size = free_size - 512;
      else size = (uint64_t)512 << (bf_next() % 42) >> (bf_next() % 8); /* 4 B .. 2^50 */
      size += bf_next() % 512;
      uint64_t stream = streams[bf_next() & 1], rounded = tc_alloc_round_size(&cfg, size);
      uint64_t want = bf_oracle(rounded, stream, &free_size);
      int segs = FX.seg_allocs;
      uint64_t got = M(size, stream);
      if (want) {
        CHECK_EQ_INT(got, want);
        CHECK_EQ_INT(FX.seg_allocs, segs);
        hits++;
      } else {
        CHECK_EQ_INT(FX.seg_allocs, segs + 1);
      }
      live[nlive++] = got;
      checked++;
    } else {
      int k = (int)(bf_next() % (uint64_t)nlive);
      F(live[k]);
      live[k] = live[--nlive];
    }
    if (tc_alloc_self_check(FX.a, why, sizeof why)) {
      fprintf(stderr, "free sets after op %d: %s\n", op, why);
      tc_failures++;
    }
  }
  CHECK(checked > 1000);
  CHECK(hits > 500); /* most mallocs were served from the cache, so the oracle was tested */
  while (nlive) F(live[--nlive]);
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(CUR(fx_stats().reserved_bytes[TCUDA_STAT_ALL]), 0);
  fx_teardown();
}

TC_MAIN(T(test_round_size), T(test_boundaries), T(test_stats_full_cycle), T(test_inactive_split_net),
        T(test_best_fit_ties_ascending), T(test_best_fit_ties_driver), T(test_smallest_fit_wins),
        T(test_streams_never_share), T(test_split_thresholds), T(test_snapshot_stale_requested),
        T(test_bad_pointers), T(test_zero_and_huge_sizes), T(test_max_split_stat),
        T(test_best_fit_every_bucket))
