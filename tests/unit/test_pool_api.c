/* The public private-pool calls (tcuda_pool_*: what torch's CUDAGraph and
 * MemPool reach through tcuda's torch glue) on the simulated backend:
 * routing by the caller's filter with raw streams, use counts through
 * retain/release, memory back at empty_cache, and the errors. */
#include "test_alloc_policy_util.h"
#include "graph/pools.h"

static const char *FN = "test";
static int filter_calls;

/* The caller's filter: claims the raw stream held in *user. */
static int claims(void *user, struct CUstream_st *stream) {
  filter_calls++;
  return stream == *(struct CUstream_st **)user;
}

static uint64_t pool_of(uint64_t addr) {
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tc_alloc_snapshot(FX.a, &s));
  uint64_t id = 999;
  for (size_t i = 0; s && i < s->num_segments; i++)
    if (addr >= s->segments[i].address && addr < s->segments[i].address + s->segments[i].total_size)
      id = s->segments[i].pool_id[0] * 1000 + s->segments[i].pool_id[1];
  tc_snapshot_free(s);
  return id;
}

static void test_route_and_counts(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  struct CUstream_st *side = (struct CUstream_st *)(uintptr_t)0x7000;
  tcuda_graph_pool_t p = {{0, 3}}; /* a graph_pool_handle()-style id */
  int n = -1;
  CHECK_OK(tc_pools_use_count(FN, FX.a, &p, &n));
  CHECK_EQ_INT(n, 0); /* not made yet */
  CHECK_OK(tc_pools_retain(FN, FX.a, &p)); /* MemPool(): made, one use */
  CHECK_OK(tc_pools_use_count(FN, FX.a, &p, &n));
  CHECK_EQ_INT(n, 1);
  CHECK_OK(tc_pools_begin(FN, FX.a, &p, claims, &side)); /* use_mem_pool: one more */
  CHECK_OK(tc_pools_use_count(FN, FX.a, &p, &n));
  CHECK_EQ_INT(n, 2);
  filter_calls = 0;
  uint64_t in = M(4096, 0x7000), out = M(4096, 0x8000);
  CHECK(filter_calls >= 2);
  CHECK_EQ_INT(pool_of(in), 3);   /* the claimed stream allocates from the pool */
  CHECK_EQ_INT(pool_of(out), 0);  /* others from the default pool */
  CHECK_ERR(tc_pools_begin(FN, FX.a, &p, claims, &side), TCUDA_ERROR_INVALID_STATE, "already recording");
  CHECK_ERR(tc_pools_retain(FN, FX.a, &p), TCUDA_ERROR_INVALID_STATE, "already recording");
  CHECK_OK(tc_pools_end(FN, FX.a, &p));
  filter_calls = 0;
  uint64_t after = M(4096, 0x7000);
  CHECK_EQ_INT(filter_calls, 0); /* ended: the filter is not called */
  CHECK_EQ_INT(pool_of(after), 0);
  CHECK_OK(tc_pools_release(FN, FX.a, &p)); /* use_mem_pool's exit */
  CHECK_OK(tc_pools_release(FN, FX.a, &p)); /* ~MemPool */
  CHECK_OK(tc_pools_use_count(FN, FX.a, &p, &n));
  CHECK_EQ_INT(n, 0);
  /* the pool's memory comes back once its blocks are freed and the cache emptied */
  int frees0 = FX.seg_frees;
  CHECK_OK(tc_alloc_free(FX.a, in));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK(FX.seg_frees > frees0);
  CHECK_EQ_INT(pool_of(out), 0);
  CHECK_ERR(tc_alloc_pool_info(FX.a, p.id, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "no private pool");
  CHECK_OK(tc_alloc_free(FX.a, out));
  CHECK_OK(tc_alloc_free(FX.a, after));
  fx_teardown();
}

static void test_shared_between_two_routings(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  struct CUstream_st *s1 = (struct CUstream_st *)(uintptr_t)0x100;
  tcuda_graph_pool_t g = {{5, 0}};
  CHECK_OK(tc_pools_begin(FN, FX.a, &g, claims, &s1)); /* graph 1 captures */
  uint64_t a = M(1 << 20, 0x100);
  CHECK_OK(tc_alloc_free(FX.a, a)); /* freed during the capture: stays in the pool */
  CHECK_OK(tc_pools_end(FN, FX.a, &g));
  CHECK_OK(tc_pools_begin(FN, FX.a, &g, claims, &s1)); /* graph 2 shares the pool */
  uint64_t b = M(1 << 20, 0x100);
  CHECK(b == a); /* reuses graph 1's freed block */
  CHECK_EQ_INT(pool_of(b), 5000);
  CHECK_OK(tc_pools_end(FN, FX.a, &g));
  int n = 0;
  CHECK_OK(tc_pools_use_count(FN, FX.a, &g, &n));
  CHECK_EQ_INT(n, 2);
  CHECK_OK(tc_alloc_free(FX.a, b));
  CHECK_OK(tc_pools_release(FN, FX.a, &g));
  CHECK_OK(tc_pools_release(FN, FX.a, &g));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(fx_stats().reserved_bytes[TCUDA_STAT_ALL].current, 0);
  fx_teardown();
}

static void test_errors(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  tcuda_graph_pool_t zero = {{0, 0}}, p = {{0, 9}};
  int n;
  CHECK_ERR(tc_pools_begin(FN, FX.a, &zero, claims, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "default pool");
  CHECK_ERR(tc_pools_begin(FN, FX.a, NULL, claims, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "pool");
  CHECK_ERR(tc_pools_begin(FN, FX.a, &p, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "filter");
  CHECK_ERR(tc_pools_end(FN, FX.a, &p), TCUDA_ERROR_INVALID_STATE, "test: ");
  CHECK_ERR(tc_pools_release(FN, FX.a, &p), TCUDA_ERROR_INVALID_STATE, "test: ");
  CHECK_ERR(tc_pools_use_count(FN, FX.a, &p, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "use_count");
  CHECK_OK(tc_pools_use_count(FN, FX.a, &p, &n));
  CHECK_EQ_INT(n, 0);
  fx_teardown();
}

/* Segments and blocks of private pool (0,id1): counts, and whether every
 * segment holds one block. */
static void pool_shape(uint64_t id1, int *segs, int *blocks, int *one_each) {
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tc_alloc_snapshot(FX.a, &s));
  *segs = *blocks = 0;
  *one_each = 1;
  for (size_t i = 0; s && i < s->num_segments; i++) {
    if (s->segments[i].pool_id[0] != 0 || s->segments[i].pool_id[1] != id1) continue;
    (*segs)++;
    *blocks += (int)s->segments[i].num_blocks;
    if (s->segments[i].num_blocks != 1) *one_each = 0;
  }
  tc_snapshot_free(s);
}

/* torch's test_mempool_no_split: two 4 MiB tensors in each of two pools. The
 * plain pool splits its 20 MiB segment (one segment: 4 + 4 + 12 MiB); the
 * no_split pool gives each request a whole segment, one block each. */
static void test_no_split(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  struct CUstream_st *st = (struct CUstream_st *)(uintptr_t)0x300;
  tcuda_graph_pool_t split = {{0, 21}}, nosplit = {{0, 22}};
  CHECK_ERR(tc_pools_set_no_split(FN, FX.a, &nosplit), TCUDA_ERROR_INVALID_ARGUMENT, "no private pool");
  CHECK_OK(tc_pools_retain(FN, FX.a, &split));
  CHECK_OK(tc_pools_retain(FN, FX.a, &nosplit));
  CHECK_OK(tc_pools_set_no_split(FN, FX.a, &nosplit));
  uint64_t got[4];
  for (int i = 0; i < 4; i++) {
    tcuda_graph_pool_t *p = i % 2 ? &nosplit : &split;
    CHECK_OK(tc_pools_begin(FN, FX.a, p, claims, &st));
    got[i] = M(4 << 20, 0x300);
    CHECK_OK(tc_pools_end(FN, FX.a, p));
  }
  int segs, blocks, one;
  pool_shape(21, &segs, &blocks, &one);
  CHECK_EQ_INT(segs, 1);
  CHECK_EQ_INT(blocks, 3);
  pool_shape(22, &segs, &blocks, &one);
  CHECK_EQ_INT(segs, 2);
  CHECK_EQ_INT(blocks, 2);
  CHECK(one);
  /* a freed whole block serves a smaller request whole: still one block */
  CHECK_OK(tc_alloc_free(FX.a, got[1]));
  CHECK_OK(tc_pools_begin(FN, FX.a, &nosplit, claims, &st));
  uint64_t again = M(2 << 20, 0x300);
  CHECK_OK(tc_pools_end(FN, FX.a, &nosplit));
  CHECK(again == got[1]);
  pool_shape(22, &segs, &blocks, &one);
  CHECK_EQ_INT(segs, 2);
  CHECK(one);
  /* 4 + 4 MiB in the plain pool, two whole 20 MiB segments in the other */
  CHECK_EQ_INT(CUR(fx_stats().allocated_bytes[TCUDA_STAT_ALL]), (int64_t)(4 + 4 + 20 + 20) << 20);
  CHECK_OK(tc_alloc_free(FX.a, again));
  CHECK_OK(tc_alloc_free(FX.a, got[0]));
  CHECK_OK(tc_alloc_free(FX.a, got[2]));
  CHECK_OK(tc_alloc_free(FX.a, got[3]));
  CHECK_OK(tc_pools_release(FN, FX.a, &split));
  CHECK_OK(tc_pools_release(FN, FX.a, &nosplit));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  fx_teardown();
}

/* Without a GPU the public calls fail cleanly, naming themselves. */
static void test_public_without_gpu(void) {
  if (tcuda_is_available()) {
    TC_SKIP_PART("a GPU is present: the no-GPU errors are not reachable");
    return;
  }
  tcuda_graph_pool_t p = {{0, 1}};
  int n = 7;
  CHECK_ERR(tcuda_pool_begin_allocate(-1, &p, claims, NULL), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_begin_allocate");
  CHECK_ERR(tcuda_pool_end_allocate(0, &p), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_end_allocate");
  CHECK_ERR(tcuda_pool_release(0, &p), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_release");
  CHECK_ERR(tcuda_pool_retain(0, &p), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_retain");
  CHECK_ERR(tcuda_pool_use_count(0, &p, &n), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_use_count");
  CHECK_ERR(tcuda_pool_set_no_split(0, &p), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_set_no_split");
  CHECK_EQ_INT(n, 0);
  CHECK_ERR(tcuda_pool_empty_unused(-1), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_empty_unused");
}

TC_MAIN(T(test_route_and_counts), T(test_shared_between_two_routings), T(test_errors), T(test_no_split),
        T(test_public_without_gpu))
