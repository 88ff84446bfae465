/* The allocator engine's slower paths on the simulated backend: oversize
 * rules, the malloc failure path (release one, flush all, retry, OOM),
 * memory fraction, garbage collection, record_stream events and expandable
 * segments. Expected numbers are worked out by hand from PyTorch's rules. */
#include "test_alloc_policy_util.h"
#include <math.h>

static void test_oversize_rules(void) {
  fx_setup("max_split_size_mb:20", TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t a = M(30 * MiB, 0);
  tcuda_memory_stats_t s = fx_stats();
  CHECK_STAT(s.oversize_segments, 1, 1, 1, 0);
  CHECK_STAT(s.oversize_allocations, 1, 1, 1, 0);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_ALL]), 0);
  F(a);
  CHECK_STAT(fx_stats().oversize_allocations, 0, 1, 1, 1);

  /* Below max_split: the cached 30 MiB block is refused; a new 20 MiB
   * segment (itself oversize) is split. */
  uint64_t b = M(5 * MiB, 0);
  s = fx_stats();
  CHECK(b != a);
  CHECK_EQ_INT(FX.seg_allocs, 2);
  CHECK_STAT(s.oversize_segments, 2, 2, 2, 0);
  CHECK_STAT(s.oversize_allocations, 0, 1, 1, 1);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_LARGE_POOL]), 1);

  /* At or above max_split: an oversize block within 20 MiB is used whole. */
  uint64_t c = M(25 * MiB, 0);
  s = fx_stats();
  CHECK_EQ_INT(c, a);
  CHECK_EQ_INT(FX.seg_allocs, 2);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_LARGE_POOL]), 35 * MiB);
  CHECK_EQ_INT(CUR(s.requested_bytes[TCUDA_STAT_LARGE_POOL]), 30 * MiB);
  CHECK_STAT(s.oversize_allocations, 1, 1, 2, 1);
  F(c);
  F(b);
  /* Free: {20 MiB (b merged back), 30 MiB}. A 10 MiB request meets the
   * 20 MiB block first, which is oversize: fail at once, no further search. */
  uint64_t d = M(10 * MiB, 0);
  CHECK_EQ_INT(FX.seg_allocs, 3);
  CHECK(d != a && d != b);
  F(d);
  fx_teardown();

  fx_setup("max_split_size_mb:20", TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t f = M(50 * MiB, 0);
  F(f);
  uint64_t g = M(24 * MiB, 0); /* 50 >= 24 + 20: too much slack, new segment */
  CHECK(g != f);
  CHECK_EQ_INT(FX.seg_allocs, 2);
  fx_teardown();

  fx_setup("max_split_size_mb:20,max_non_split_rounding_mb:30", TC_SIM_VA_ASCENDING, 0, 0);
  f = M(50 * MiB, 0);
  F(f);
  g = M(24 * MiB, 0); /* 50 < 24 + 30: reused whole */
  CHECK_EQ_INT(g, f);
  CHECK_EQ_INT(FX.seg_allocs, 1);
  CHECK_EQ_INT(CUR(fx_stats().allocated_bytes[TCUDA_STAT_ALL]), 50 * MiB);
  fx_teardown();
}

static void test_release_available_multi(void) {
  fx_setup("max_split_size_mb:20", TC_SIM_VA_ASCENDING, 100 * MiB, 0);
  uint64_t a = M(40 * MiB, 0), b = M(40 * MiB, 0);
  F(a);
  F(b);
  /* 60 MiB: no cached fit; cudaMalloc fails (80 + 60 > 100); no single
   * cached block >= 60, so oversize blocks go from the largest down until
   * 60 MiB are released; then the second cudaMalloc succeeds. */
  uint64_t c = M(60 * MiB, 0);
  tcuda_memory_stats_t s = fx_stats();
  CHECK(c != 0);
  CHECK_EQ_INT(FX.seg_allocs, 4);
  CHECK_EQ_INT(FX.seg_frees, 2);
  CHECK_EQ_INT(s.num_device_free, 2);
  CHECK_EQ_INT(s.num_alloc_retries, 0);
  CHECK_EQ_INT(s.num_sync_all_streams, 0);
  CHECK_EQ_INT(s.num_ooms, 0);
  CHECK_STAT(s.segment[TCUDA_STAT_ALL], 1, 2, 3, 2);
  CHECK_STAT(s.oversize_segments, 1, 2, 3, 2);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 60 * MiB);
  F(c);
  fx_teardown();
}

static void test_release_available_single(void) {
  fx_setup("max_split_size_mb:20", TC_SIM_VA_ASCENDING, 100 * MiB, 0);
  uint64_t x = M(70 * MiB, 0);
  F(x);
  uint64_t y = M(50 * MiB, 0); /* 70 >= 50 + 20: not reused; released instead */
  tcuda_memory_stats_t s = fx_stats();
  CHECK(y != 0);
  CHECK_EQ_INT(FX.seg_allocs, 3);
  CHECK_EQ_INT(s.num_device_free, 1);
  CHECK_EQ_INT(s.num_sync_all_streams, 0);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 50 * MiB);
  F(y);
  fx_teardown();
}

static void test_full_flush_retry(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 30 * MiB, 0);
  uint64_t a = M(12 * MiB, 0);
  F(a);
  uint64_t b = M(20 * MiB, 0); /* fails once, flushes the cached 12 MiB, retries */
  tcuda_memory_stats_t s = fx_stats();
  CHECK(b != 0);
  CHECK_EQ_INT(s.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_sync_all_streams, 1);
  CHECK_EQ_INT(s.num_device_free, 1);
  CHECK_EQ_INT(s.num_ooms, 0);
  CHECK_EQ_INT(FX.seg_allocs, 3);
  CHECK_STAT(s.segment[TCUDA_STAT_ALL], 1, 1, 2, 1);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 20 * MiB);
  F(b);
  fx_teardown();
}

static void test_oom(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 30 * MiB, 0);
  uint64_t a = M(20 * MiB, 0), x = 0;
  tcuda_memory_stats_t before = fx_stats();
  CHECK_ERR(tc_alloc_malloc(FX.a, 12 * MiB, 0, &x), TCUDA_ERROR_OUT_OF_MEMORY,
            "CUDA out of memory. Tried to allocate 12.00 MiB. GPU 0 has a total capacity of 30.00 MiB of which "
            "10.00 MiB is free. Of the allocated memory 20.00 MiB is allocated by tcuda, and 0 bytes is reserved "
            "by tcuda but unallocated.");
  CHECK(strstr(tcuda_last_error(), "expandable_segments:True"));
  tcuda_memory_stats_t s = fx_stats();
  CHECK_EQ_INT(s.num_ooms, 1);
  CHECK_EQ_INT(s.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_sync_all_streams, 1);
  s.num_ooms = before.num_ooms;
  s.num_alloc_retries = before.num_alloc_retries;
  s.num_sync_all_streams = before.num_sync_all_streams;
  CHECK(!memcmp(&s, &before, sizeof s)); /* nothing else moved */
  /* The message names the segment size tried, not the request. */
  CHECK_ERR(tc_alloc_malloc(FX.a, 3 * MiB, 0, &x), TCUDA_ERROR_OUT_OF_MEMORY, "Tried to allocate 20.00 MiB.");
  CHECK_EQ_INT(fx_stats().num_ooms, 2);
  F(a);
  fx_teardown();
}

static void test_memory_fraction(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 100 * MiB);
  CHECK(tc_alloc_get_memory_fraction(FX.a) == 1.0);
  CHECK_OK(tc_alloc_set_memory_fraction(FX.a, 0.5));
  CHECK(fabs(tc_alloc_get_memory_fraction(FX.a) - 0.5) < 1e-12);
  uint64_t a = M(40 * MiB, 0), x = 0;
  CHECK_EQ_INT(FX.seg_allocs, 1);
  /* 40 + 12 > 50: refused before any device call, even on the retry. */
  CHECK_ERR(tc_alloc_malloc(FX.a, 12 * MiB, 0, &x), TCUDA_ERROR_OUT_OF_MEMORY, "50.00 MiB allowed; Of the");
  CHECK_EQ_INT(FX.seg_allocs, 1);
  tcuda_memory_stats_t s = fx_stats();
  CHECK_EQ_INT(s.num_ooms, 1);
  CHECK_EQ_INT(s.num_alloc_retries, 1);

  CHECK_ERR(tc_alloc_set_memory_fraction(FX.a, -0.1), TCUDA_ERROR_INVALID_ARGUMENT, "Invalid fraction value");
  CHECK_ERR(tc_alloc_set_memory_fraction(FX.a, 1.5), TCUDA_ERROR_INVALID_ARGUMENT, "Invalid fraction value");
  CHECK_ERR(tc_alloc_set_memory_fraction(FX.a, NAN), TCUDA_ERROR_INVALID_ARGUMENT, "Invalid fraction value");
  CHECK(fabs(tc_alloc_get_memory_fraction(FX.a) - 0.5) < 1e-12);

  CHECK_OK(tc_alloc_set_memory_fraction(FX.a, 1.0)); /* no limit at all */
  CHECK(tc_alloc_get_memory_fraction(FX.a) == 1.0);
  uint64_t b = M(12 * MiB, 0);
  uint64_t c = M(80 * MiB, 0); /* past total_memory: 1.0 is not a cap */
  CHECK_EQ_INT(FX.seg_allocs, 3);

  CHECK_OK(tc_alloc_set_memory_fraction(FX.a, 0.0));
  CHECK(tc_alloc_get_memory_fraction(FX.a) == 0.0);
  CHECK_ERR(tc_alloc_malloc(FX.a, 512, 0, &x), TCUDA_ERROR_OUT_OF_MEMORY, "0 bytes allowed; ");
  CHECK_EQ_INT(FX.seg_allocs, 3);
  F(a);
  F(b);
  F(c);
  fx_teardown();
}

static void gc_sequence(void) {
  uint64_t a = M(12 * MiB, 0);
  F(a);
  uint64_t b = M(14 * MiB, 0);
  F(b);
  uint64_t c = M(16 * MiB, 0);
  F(c);
  M(18 * MiB, 0);
}

static void test_garbage_collection(void) {
  /* allowed 80 MiB, threshold 40 MiB. Cached 12/14/16 MiB freed after the
   * 1st/2nd/3rd pool search, so at the 4th their ages are 3/2/1 (mean 2):
   * the two oldest go; 16 MiB stays. */
  fx_setup("garbage_collection_threshold:0.5", TC_SIM_VA_ASCENDING, 0, 100 * MiB);
  CHECK_OK(tc_alloc_set_memory_fraction(FX.a, 0.8));
  gc_sequence();
  tcuda_memory_stats_t s = fx_stats();
  CHECK_EQ_INT(FX.seg_frees, 2);
  CHECK_EQ_INT(s.num_device_free, 2);
  CHECK_EQ_INT(s.num_sync_all_streams, 0);
  CHECK_EQ_INT(CUR(s.segment[TCUDA_STAT_ALL]), 2);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 34 * MiB);
  fx_teardown();

  /* No memory fraction: no garbage collection. */
  fx_setup("garbage_collection_threshold:0.5", TC_SIM_VA_ASCENDING, 0, 100 * MiB);
  gc_sequence();
  CHECK_EQ_INT(FX.seg_frees, 0);
  CHECK_EQ_INT(CUR(fx_stats().segment[TCUDA_STAT_ALL]), 4);
  fx_teardown();

  /* Under the threshold: nothing collected (total 42 MiB <= 0.9 * 80). */
  fx_setup("garbage_collection_threshold:0.9", TC_SIM_VA_ASCENDING, 0, 100 * MiB);
  CHECK_OK(tc_alloc_set_memory_fraction(FX.a, 0.8));
  gc_sequence();
  CHECK_EQ_INT(FX.seg_frees, 0);
  fx_teardown();
}

static tcuda_block_state state_of(uint64_t addr) {
  tcuda_snapshot_t *s = NULL;
  tcuda_block_state st = (tcuda_block_state)-1;
  CHECK_OK(tc_alloc_snapshot(FX.a, &s));
  for (size_t i = 0; i < s->num_segments; i++)
    for (size_t k = 0; k < s->segments[i].num_blocks; k++)
      if (s->segments[i].blocks[k].address == addr) st = s->segments[i].blocks[k].state;
  tc_snapshot_free(s);
  return st;
}

static void test_record_stream_events(void) {
  fx_setup(NULL, TC_SIM_VA_ASCENDING, 0, 0);
  uint64_t x = M(512, 0), y = M(512, 0);
  CHECK_OK(tc_alloc_record_stream(FX.a, x, 5));
  CHECK_OK(tc_alloc_record_stream(FX.a, x, 5)); /* a set: once */
  CHECK_OK(tc_alloc_record_stream(FX.a, x, 0)); /* the allocation stream: ignored */
  CHECK_EQ_INT(state_of(x), TCUDA_BLOCK_ACTIVE_ALLOCATED);
  F(x);
  tcuda_memory_stats_t s = fx_stats();
  CHECK_EQ_INT(CUR(s.allocation[TCUDA_STAT_ALL]), 1);     /* at free() */
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_ALL]), 512);
  CHECK_EQ_INT(CUR(s.active[TCUDA_STAT_ALL]), 2);         /* at free_block() */
  CHECK_EQ_INT(CUR(s.requested_bytes[TCUDA_STAT_ALL]), 1024);
  CHECK_EQ_INT(state_of(x), TCUDA_BLOCK_ACTIVE_PENDING_FREE);
  CHECK_ERR(tc_alloc_free(FX.a, x), TCUDA_ERROR_INVALID_POINTER, "already freed");

  uint64_t z = M(512, 0); /* event pending: x is not reused */
  CHECK_EQ_INT(z, x + 1024);
  CHECK_EQ_INT(CUR(fx_stats().active[TCUDA_STAT_ALL]), 3);
  tc_backend_sim_complete_events(FX.sim);
  CHECK_EQ_INT(state_of(x), TCUDA_BLOCK_ACTIVE_PENDING_FREE); /* only malloc processes events */
  uint64_t w = M(512, 0); /* processes the event first: x is free, and the best fit */
  CHECK_EQ_INT(w, x);
  s = fx_stats();
  CHECK_EQ_INT(CUR(s.active[TCUDA_STAT_ALL]), 3);
  CHECK_STAT(s.active[TCUDA_STAT_ALL], 3, 3, 4, 1);

  /* Two streams: two events, one free_block when both are done. */
  uint64_t u = M(512, 0);
  CHECK_OK(tc_alloc_record_stream(FX.a, u, 5));
  CHECK_OK(tc_alloc_record_stream(FX.a, u, 6));
  F(u);
  tc_backend_sim_complete_events(FX.sim);
  uint64_t t = M(512, 0);
  CHECK_EQ_INT(t, u);
  CHECK_STAT(fx_stats().active[TCUDA_STAT_ALL], 4, 4, 6, 2);

  /* empty_cache synchronizes pending events, then frees whole segments. */
  uint64_t v = M(512, 8);
  CHECK_OK(tc_alloc_record_stream(FX.a, v, 9));
  F(v);
  CHECK_EQ_INT(state_of(v), TCUDA_BLOCK_ACTIVE_PENDING_FREE);
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  s = fx_stats();
  CHECK_EQ_INT(s.num_sync_all_streams, 1);
  CHECK_EQ_INT(FX.seg_frees, 1); /* v's segment; the stream-0 one is in use */
  CHECK_EQ_INT(CUR(s.segment[TCUDA_STAT_ALL]), 1);
  CHECK_EQ_INT(CUR(s.active[TCUDA_STAT_ALL]), 4);
  F(y);
  F(z);
  F(w);
  F(t);
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(tc_backend_sim_used(FX.sim), 0);
  fx_teardown();
}

static void test_expandable_segments(void) {
  /* total 1 GiB: the large pool reserves 20 MiB * ceil(1.125 GiB / 20 MiB). */
  fx_setup("expandable_segments:True", TC_SIM_VA_ASCENDING, 0, GiB);
  uint64_t a = M(MiB + 1, 0);
  tcuda_memory_stats_t s = fx_stats();
  CHECK_EQ_INT(FX.reserves, 1);
  CHECK_EQ_INT(FX.maps, 1);
  CHECK_EQ_INT(FX.last_map_size, 20 * MiB);
  CHECK_EQ_INT(FX.seg_allocs, 0);
  CHECK_STAT(s.segment[TCUDA_STAT_ALL], 0, 0, 0, 0); /* map/unmap leave segment alone */
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_LARGE_POOL]), 20 * MiB);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_LARGE_POOL]), MiB + 512);
  CHECK_EQ_INT(CUR(s.inactive_split[TCUDA_STAT_ALL]), 0); /* expandable: excluded */
  CHECK_EQ_INT(s.num_device_alloc, 1);

  /* 30 MiB: the free 19 MiB - 512 tail plus only the shortfall mapped
   * (one 20 MiB page, not two), one contiguous range = one device alloc. */
  uint64_t b = M(30 * MiB, 0);
  s = fx_stats();
  CHECK_EQ_INT(b, a + MiB + 512);
  CHECK_EQ_INT(FX.maps, 2);
  CHECK_EQ_INT(FX.last_map_size, 20 * MiB);
  CHECK_EQ_INT(FX.reserves, 1);
  CHECK_EQ_INT(s.num_device_alloc, 2);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 40 * MiB);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_ALL]), 31 * MiB + 512);
  CHECK_EQ_INT(tc_backend_sim_used(FX.sim), 40 * MiB);

  tcuda_snapshot_t *snap = NULL;
  CHECK_OK(tc_alloc_snapshot(FX.a, &snap));
  CHECK_EQ_INT(snap->num_segments, 1);
  tcuda_segment_info_t *g = &snap->segments[0];
  CHECK_EQ_INT(g->address, a);
  CHECK_EQ_INT(g->total_size, 40 * MiB);
  CHECK_EQ_INT(g->is_expandable, 1);
  CHECK_EQ_INT(g->is_large, 1);
  CHECK_EQ_INT(g->num_blocks, 3);
  CHECK_EQ_INT(g->blocks[2].size, 9 * MiB - 512);
  CHECK_EQ_INT(g->blocks[2].state, TCUDA_BLOCK_INACTIVE);
  tc_snapshot_free(snap);

  F(a);
  F(b);
  s = fx_stats();
  CHECK_STAT(s.inactive_split[TCUDA_STAT_ALL], 0, 0, 0, 0);
  CHECK_STAT(s.inactive_split_bytes[TCUDA_STAT_ALL], 0, 0, 0, 0);
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  s = fx_stats();
  CHECK_EQ_INT(FX.unmaps, 1);
  CHECK_EQ_INT(FX.last_unmap_size, 40 * MiB);
  CHECK_EQ_INT(FX.releases, 1); /* wholly unmapped: the VA goes back */
  CHECK_EQ_INT(s.num_device_free, 1);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 0);
  CHECK_STAT(s.segment[TCUDA_STAT_ALL], 0, 0, 0, 0);
  CHECK_EQ_INT(tc_backend_sim_used(FX.sim), 0);

  /* Small pool: 2 MiB pages; a separate reservation per (stream, pool). */
  uint64_t c = M(512, 0), d = M(512, 4);
  s = fx_stats();
  CHECK_EQ_INT(FX.reserves, 3);
  CHECK_EQ_INT(FX.last_map_size, 2 * MiB);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_SMALL_POOL]), 4 * MiB);
  CHECK(c != d);
  F(c);
  F(d);
  fx_teardown();
}

/* Expandable segments turned off at runtime: expandable blocks are skipped. */
static void test_expandable_turned_off(void) {
  fx_setup("expandable_segments:True", TC_SIM_VA_ASCENDING, 0, GiB);
  uint64_t a = M(4 * MiB, 0);
  F(a); /* a free mapped 20 MiB expandable block */
  tc_alloc_config c;
  CHECK_OK(tc_alloc_config_parse(NULL, &c));
  tc_alloc_set_config(FX.a, &c);
  uint64_t b = M(4 * MiB, 0);
  CHECK_EQ_INT(FX.seg_allocs, 1); /* a plain cudaMalloc segment instead */
  CHECK_EQ_INT(CUR(fx_stats().segment[TCUDA_STAT_ALL]), 1);
  F(b);
  fx_teardown();
}

TC_MAIN(T(test_oversize_rules), T(test_release_available_multi), T(test_release_available_single),
        T(test_full_flush_retry), T(test_oom), T(test_memory_fraction), T(test_garbage_collection),
        T(test_record_stream_events), T(test_expandable_segments), T(test_expandable_turned_off))
