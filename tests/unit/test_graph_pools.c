/* CUDA-graph private pools in the allocator engine, on the simulated
 * backend: routing by capture filter, isolation from the default pools,
 * use counts, release at empty_cache, sharing, stats and snapshot pool ids,
 * and the capture-time rules (no event processing, no full flush, deferred
 * cross-stream frees, no empty_cache). */
#include "test_alloc_policy_util.h"

/* The filter: a capture owns exactly the stream *ctx. */
static int calls;
static int filt(void *ctx, uint64_t stream) {
  calls++;
  return stream == *(const uint64_t *)ctx;
}

static uint64_t S7 = 7, S9 = 9;
static const uint64_t P1[2] = {1, 0}, P2[2] = {2, 0}, H1[2] = {0, 1};

/* The snapshot segment holding addr: its pool id and block state. */
static int seg_of(uint64_t addr, uint64_t pool[2], int *state, int *is_large) {
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tc_alloc_snapshot(FX.a, &s));
  int found = 0;
  for (size_t i = 0; s && i < s->num_segments && !found; i++) {
    tcuda_segment_info_t *g = &s->segments[i];
    if (addr < g->address || addr >= g->address + g->total_size) continue;
    found = 1;
    pool[0] = g->pool_id[0];
    pool[1] = g->pool_id[1];
    if (is_large) *is_large = g->is_large;
    for (size_t k = 0; k < g->num_blocks; k++)
      if (g->blocks[k].address == addr && state) *state = (int)g->blocks[k].state;
  }
  tc_snapshot_free(s);
  return found;
}

static void check_pool(uint64_t addr, uint64_t a, uint64_t b) {
  uint64_t p[2] = {99, 99};
  CHECK(seg_of(addr, p, NULL, NULL));
  CHECK_EQ_INT(p[0], a);
  CHECK_EQ_INT(p[1], b);
}

static void test_routing_snapshot_stats(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  CHECK_EQ_INT(tc_alloc_captures_underway(FX.a), 0);
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  CHECK_EQ_INT(tc_alloc_captures_underway(FX.a), 1);
  calls = 0;
  uint64_t p = M(1000, 7), q = M(1000, 0), big = M(30 * MiB, 7);
  CHECK(calls >= 3); /* every allocation asks the filter while capturing */
  check_pool(p, 1, 0);
  check_pool(q, 0, 0);
  check_pool(big, 1, 0);
  uint64_t pid[2];
  int large = -1;
  CHECK(seg_of(big, pid, NULL, &large));
  CHECK_EQ_INT(large, 1);
  /* Pool memory counts in the ordinary stats, by size class (torch). */
  tcuda_memory_stats_t st = fx_stats();
  CHECK_EQ_INT(CUR(st.allocation[TCUDA_STAT_ALL]), 3);
  CHECK_EQ_INT(CUR(st.segment[TCUDA_STAT_SMALL_POOL]), 2);
  CHECK_EQ_INT(CUR(st.segment[TCUDA_STAT_LARGE_POOL]), 1);
  CHECK_EQ_INT(CUR(st.reserved_bytes[TCUDA_STAT_ALL]), 4 * MiB + 30 * MiB);
  CHECK_EQ_INT(CUR(st.allocated_bytes[TCUDA_STAT_SMALL_POOL]), 2048);
  int uses = 0;
  int64_t segs = 0;
  CHECK_OK(tc_alloc_pool_info(FX.a, P1, &uses, &segs));
  CHECK_EQ_INT(uses, 1);
  CHECK_EQ_INT(segs, 2);
  /* Inside the pool, blocks are freed and reused normally. */
  F(p);
  CHECK_EQ_INT(M(1000, 7), p);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P1));
  CHECK_EQ_INT(tc_alloc_captures_underway(FX.a), 0);
  /* After the capture, stream 7 allocates from the default pool again, and
   * the pool's free memory is not handed out. */
  F(p);
  uint64_t r = M(1000, 7);
  CHECK(r != p);
  check_pool(r, 0, 0);
  CHECK_EQ_INT(fx_stats().segment[TCUDA_STAT_SMALL_POOL].current, 3);
  F(r);
  F(q);
  F(big);
  fx_teardown();
}

static void test_release_and_empty_cache(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  uint64_t p = M(1000, 7), big = M(30 * MiB, 7);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P1));
  F(p);
  /* In use (count 1): empty_cache keeps the pool's free segment. */
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(FX.seg_frees, 0);
  CHECK_EQ_INT(CUR(fx_stats().reserved_bytes[TCUDA_STAT_ALL]), 2 * MiB + 30 * MiB);
  CHECK_OK(tc_alloc_release_pool(FX.a, P1));
  int uses = -1;
  int64_t segs = -1;
  CHECK_OK(tc_alloc_pool_info(FX.a, P1, &uses, &segs));
  CHECK_EQ_INT(uses, 0);
  CHECK_EQ_INT(segs, 2); /* freeable, nothing freed before the next empty_cache */
  CHECK_EQ_INT(FX.seg_frees, 0);
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(FX.seg_frees, 1); /* the free small segment; big is still live */
  CHECK_OK(tc_alloc_pool_info(FX.a, P1, &uses, &segs));
  CHECK_EQ_INT(segs, 1);
  /* A live block of a released pool goes back to that pool when freed. */
  F(big);
  check_pool(big, 1, 0);
  CHECK_EQ_INT(M(30 * MiB, 7) != big, 1); /* the default pool cannot take it */
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_ERR(tc_alloc_pool_info(FX.a, P1, &uses, &segs), TCUDA_ERROR_INVALID_ARGUMENT, "no private pool (1,0)");
  CHECK_EQ_INT(FX.seg_frees, 2);
  CHECK_EQ_INT(CUR(fx_stats().reserved_bytes[TCUDA_STAT_ALL]), 30 * MiB); /* the default-pool block above */
  fx_teardown();
}

static void test_sharing(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  /* Two captures into one handle pool (0,1): both count as uses. Free
   * blocks stay keyed by stream inside the pool, as in torch. */
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, H1, filt, &S7));
  uint64_t a = M(4 * MiB, 7);
  F(a);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, H1));
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, H1, filt, &S9));
  uint64_t b = M(4 * MiB, 9);
  check_pool(b, 0, 1);
  F(b);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, H1));
  int uses = 0;
  CHECK_OK(tc_alloc_pool_info(FX.a, H1, &uses, NULL));
  CHECK_EQ_INT(uses, 2);
  CHECK_OK(tc_alloc_release_pool(FX.a, H1));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(FX.seg_frees, 0); /* the other graph still uses it */
  CHECK_OK(tc_alloc_release_pool(FX.a, H1));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(FX.seg_frees, 2); /* one 20 MiB segment per stream */
  CHECK_EQ_INT(CUR(fx_stats().reserved_bytes[TCUDA_STAT_ALL]), 0);
  CHECK_ERR(tc_alloc_pool_info(FX.a, H1, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "no private pool");
  /* A freeable pool that is captured into again comes back to life. */
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P2, filt, &S7));
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P2));
  CHECK_OK(tc_alloc_release_pool(FX.a, P2));
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P2, filt, &S7));
  CHECK_OK(tc_alloc_pool_info(FX.a, P2, &uses, NULL));
  CHECK_EQ_INT(uses, 1);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P2));
  fx_teardown();
}

static void test_two_captures(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P2, filt, &S9));
  CHECK_EQ_INT(tc_alloc_captures_underway(FX.a), 2);
  uint64_t a = M(1000, 7), b = M(1000, 9), c = M(1000, 3);
  check_pool(a, 1, 0);
  check_pool(b, 2, 0);
  check_pool(c, 0, 0);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P1)); /* the first of two: the second stays */
  uint64_t d = M(1000, 9), e = M(1000, 7);
  check_pool(d, 2, 0);
  check_pool(e, 0, 0);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P2));
  F(a), F(b), F(c), F(d), F(e);
  fx_teardown();
}

static void test_errors_change_nothing(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  const uint64_t zero[2] = {0, 0};
  CHECK_ERR(tc_alloc_begin_allocate_to_pool(FX.a, zero, filt, &S7), TCUDA_ERROR_INVALID_ARGUMENT, "default pool");
  CHECK_ERR(tc_alloc_begin_allocate_to_pool(FX.a, NULL, filt, &S7), TCUDA_ERROR_INVALID_ARGUMENT, "mempool_id is NULL");
  CHECK_ERR(tc_alloc_begin_allocate_to_pool(FX.a, P1, NULL, &S7), TCUDA_ERROR_INVALID_ARGUMENT, "filter");
  CHECK_ERR(tc_alloc_begin_allocate_to_pool(NULL, P1, filt, &S7), TCUDA_ERROR_INVALID_ARGUMENT, "allocator");
  CHECK_EQ_INT(tc_alloc_captures_underway(FX.a), 0);
  CHECK_ERR(tc_alloc_pool_info(FX.a, P1, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "no private pool");
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  CHECK_ERR(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S9), TCUDA_ERROR_INVALID_STATE,
            "already recording to mempool_id (1,0)");
  int uses = 0;
  CHECK_OK(tc_alloc_pool_info(FX.a, P1, &uses, NULL));
  CHECK_EQ_INT(uses, 1);
  CHECK_EQ_INT(tc_alloc_captures_underway(FX.a), 1);
  CHECK_ERR(tc_alloc_end_allocate_to_pool(FX.a, P2), TCUDA_ERROR_INVALID_STATE,
            "not currently recording to mempool_id (2,0)");
  CHECK_ERR(tc_alloc_end_allocate_to_pool(FX.a, zero), TCUDA_ERROR_INVALID_ARGUMENT, "default pool");
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P1));
  CHECK_ERR(tc_alloc_end_allocate_to_pool(FX.a, P1), TCUDA_ERROR_INVALID_STATE, "not currently recording");
  CHECK_ERR(tc_alloc_release_pool(FX.a, P2), TCUDA_ERROR_INVALID_STATE, "not a pool of this device");
  CHECK_OK(tc_alloc_release_pool(FX.a, P1));
  CHECK_ERR(tc_alloc_release_pool(FX.a, P1), TCUDA_ERROR_INVALID_STATE, "already released");
  CHECK_ERR(tc_alloc_release_pool(FX.a, zero), TCUDA_ERROR_INVALID_ARGUMENT, "default pool");
  CHECK_ERR(tc_alloc_pool_info(FX.a, zero, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "default pool");
  fx_teardown();
}

static void test_capture_time_rules(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  /* empty_cache is refused during a capture and releases nothing. */
  uint64_t x = M(4 * MiB, 0);
  F(x);
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  CHECK_ERR(tc_alloc_empty_cache(FX.a), TCUDA_ERROR_INVALID_STATE, "capture is under way");
  CHECK_EQ_INT(FX.seg_frees, 0);
  CHECK_EQ_INT(fx_stats().num_sync_all_streams, 0);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P1));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(FX.seg_frees, 1);

  /* Events are not processed while capturing: a block waiting for another
   * stream stays unavailable until the capture is over. */
  x = M(4 * MiB, 0);
  CHECK_OK(tc_alloc_record_stream(FX.a, x, 5));
  F(x);
  tc_backend_sim_complete_events(FX.sim);
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  uint64_t y = M(4 * MiB, 0);
  CHECK(y != x);
  F(y);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P1));
  CHECK_EQ_INT(M(4 * MiB, 0), x); /* processed now; best fit takes x (lower address) */
  F(x);

  /* A free of a block used on another stream is deferred: no event is
   * recorded during the capture, the block stays pending. */
  x = M(4 * MiB, 0);
  CHECK_OK(tc_alloc_record_stream(FX.a, x, 5));
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  int64_t before = CUR(fx_stats().allocation[TCUDA_STAT_ALL]);
  F(x);
  CHECK_EQ_INT(CUR(fx_stats().allocation[TCUDA_STAT_ALL]), before - 1);
  CHECK_EQ_INT(CUR(fx_stats().active[TCUDA_STAT_ALL]), before); /* still active: pending */
  uint64_t pid[2];
  int state = -1;
  CHECK(seg_of(x, pid, &state, NULL));
  CHECK_EQ_INT(state, TCUDA_BLOCK_ACTIVE_PENDING_FREE);
  tc_backend_sim_complete_events(FX.sim); /* no event exists yet to complete */
  y = M(4 * MiB, 0);
  CHECK(y != x);
  CHECK_ERR(tc_alloc_free(FX.a, x), TCUDA_ERROR_INVALID_POINTER, "already freed"); /* double free still caught */
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P1));
  uint64_t z = M(4 * MiB, 0); /* events recorded now; pending */
  CHECK(z != x);
  tc_backend_sim_complete_events(FX.sim);
  F(z);
  CHECK_EQ_INT(M(4 * MiB, 0), x);
  CHECK_EQ_INT(CUR(fx_stats().active[TCUDA_STAT_ALL]), 2);
  F(x);
  F(y);
  CHECK_OK(tc_alloc_release_pool(FX.a, P1));

  /* The deferred free also resolves through empty_cache. */
  x = M(4 * MiB, 0);
  CHECK_OK(tc_alloc_record_stream(FX.a, x, 5));
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P2, filt, &S7));
  F(x);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P2));
  CHECK_OK(tc_alloc_release_pool(FX.a, P2));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(CUR(fx_stats().active[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(CUR(fx_stats().reserved_bytes[TCUDA_STAT_ALL]), 0);
  fx_teardown();
}

static void test_no_full_flush_while_capturing(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 64 * MiB, 64 * MiB);
  uint64_t x = M(40 * MiB, 0);
  F(x); /* 40 MiB cached in the default pool */
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  uint64_t y = 1;
  CHECK_ERR(tc_alloc_malloc(FX.a, 40 * MiB, 7, &y), TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory");
  tcuda_memory_stats_t st = fx_stats();
  CHECK_EQ_INT(st.num_alloc_retries, 0);
  CHECK_EQ_INT(st.num_ooms, 1);
  CHECK_EQ_INT(CUR(st.reserved_bytes[TCUDA_STAT_ALL]), 40 * MiB); /* the cache was not flushed */
  CHECK_EQ_INT(FX.seg_frees, 0);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P1));
  y = M(40 * MiB, 7); /* outside the capture the flush makes room */
  CHECK_EQ_INT(fx_stats().num_alloc_retries, 1);
  CHECK_EQ_INT(FX.seg_frees, 1);
  F(y);
  CHECK_OK(tc_alloc_release_pool(FX.a, P1));
  fx_teardown();
}

static void test_expandable(void) {
  fx_setup("expandable_segments:True", TC_SIM_VA_ASCENDING, 0, 0);
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  uint64_t a = M(1000, 7), b = M(1000, 0);
  check_pool(a, 1, 0);
  check_pool(b, 0, 0);
  int64_t segs = 0;
  CHECK_OK(tc_alloc_pool_info(FX.a, P1, NULL, &segs));
  CHECK_EQ_INT(segs, 1);
  CHECK_EQ_INT(FX.reserves, 2); /* one reservation per pool */
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, P1));
  F(a);
  F(b);
  CHECK_OK(tc_alloc_release_pool(FX.a, P1));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_ERR(tc_alloc_pool_info(FX.a, P1, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "no private pool");
  CHECK_EQ_INT(CUR(fx_stats().reserved_bytes[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(FX.releases, 2);
  fx_teardown();
}

/* Destroying an allocator with pools, captures and deferred frees leaks
 * nothing (run under ASan in CI). */
static void test_destroy_with_pools(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t x = M(1000, 0);
  CHECK_OK(tc_alloc_record_stream(FX.a, x, 5));
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, P1, filt, &S7));
  (void)M(1000, 7);
  F(x);
  fx_teardown();
}

TC_MAIN(T(test_routing_snapshot_stats), T(test_release_and_empty_cache), T(test_sharing), T(test_two_captures),
        T(test_errors_change_nothing), T(test_capture_time_rules), T(test_no_full_flush_while_capturing),
        T(test_expandable), T(test_destroy_with_pools))
