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

/* A pool's own allocator (torch's MemPool(allocator=...)): a stand-in
 * device heap at a fixed base, counting its calls. */
static struct {
  int allocs, frees, releases, fail;
  uint64_t next, freed_bytes;
  struct CUstream_st *last_stream;
} OWN;

static void *own_alloc(void *user, size_t size, int device, struct CUstream_st *stream) {
  CHECK(user == &OWN);
  CHECK_EQ_INT(device, 0);
  if (OWN.fail) return NULL;
  OWN.allocs++;
  OWN.last_stream = stream;
  uint64_t at = OWN.next;
  OWN.next += (size + (1 << 21) - 1) & ~(uint64_t)((1 << 21) - 1);
  return (void *)(uintptr_t)at;
}

static void own_free(void *user, void *ptr, size_t size, int device, struct CUstream_st *stream) {
  (void)ptr, (void)device;
  CHECK(user == &OWN);
  CHECK_EQ_INT(OWN.releases, 0); /* release comes after the last free */
  OWN.frees++;
  OWN.freed_bytes += size;
  OWN.last_stream = stream;
}

static void own_release(void *user) {
  CHECK(user == &OWN);
  OWN.releases++;
}

static const tcuda_pool_allocator_t OWN_PA = {own_alloc, own_free, own_release, &OWN};

static int is_own(uint64_t addr) { return addr >= 0x600000000000ull && addr < 0x600100000000ull; }

/* torch's test_mempool_with_allocator: three 1 MiB tensors in the pool take
 * two 2 MiB segments from the pool's allocator, on the allocating stream;
 * the default pool never calls it; the pool's memory goes back through it
 * when the pool is released and the cache emptied, and release comes last. */
static void test_own_allocator(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  memset(&OWN, 0, sizeof OWN);
  OWN.next = 0x600000000000ull;
  struct CUstream_st *st = (struct CUstream_st *)(uintptr_t)0x500;
  tcuda_graph_pool_t p = {{0, 31}};
  CHECK_ERR(tc_pools_set_allocator(FN, FX.a, &p, &OWN_PA), TCUDA_ERROR_INVALID_ARGUMENT, "no private pool");
  CHECK_OK(tc_pools_retain(FN, FX.a, &p));
  tcuda_pool_allocator_t bad = OWN_PA;
  bad.free = NULL;
  CHECK_ERR(tc_pools_set_allocator(FN, FX.a, &p, &bad), TCUDA_ERROR_INVALID_ARGUMENT, "allocator->free");
  CHECK_ERR(tc_pools_set_allocator(FN, FX.a, &p, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "allocator");
  CHECK_OK(tc_pools_set_allocator(FN, FX.a, &p, &OWN_PA));
  CHECK_ERR(tc_pools_set_allocator(FN, FX.a, &p, &OWN_PA), TCUDA_ERROR_INVALID_STATE, "has an allocator already");
  int seg0 = FX.seg_allocs;
  uint64_t x[3];
  CHECK_OK(tc_pools_begin(FN, FX.a, &p, claims, &st));
  for (int i = 0; i < 3; i++) {
    x[i] = M(1 * MiB, 0x500);
    CHECK(is_own(x[i]));
    CHECK_EQ_INT(OWN.allocs, i < 2 ? 1 : 2); /* 1 + 1 MiB share a 2 MiB segment */
  }
  CHECK_OK(tc_pools_end(FN, FX.a, &p));
  CHECK_OK(tc_pools_release(FN, FX.a, &p)); /* use_mem_pool's exit */
  CHECK(OWN.last_stream == st);
  CHECK_EQ_INT(FX.seg_allocs, seg0); /* nothing from the device's cudaMalloc */
  uint64_t plain = M(1 * MiB, 0x500);
  CHECK(!is_own(plain));
  CHECK_EQ_INT(pool_of(plain), 0);
  CHECK_EQ_INT(OWN.allocs, 2);
  CHECK_EQ_INT(pool_of(x[2]), 31);
  tcuda_graph_pool_t q = {{0, 32}};
  CHECK_OK(tc_pools_retain(FN, FX.a, &q));
  CHECK_OK(tc_pools_begin(FN, FX.a, &q, claims, &st));
  (void)M(512, 0x500);
  CHECK_OK(tc_pools_end(FN, FX.a, &q));
  CHECK_ERR(tc_pools_set_allocator(FN, FX.a, &q, &OWN_PA), TCUDA_ERROR_INVALID_STATE, "has segments already");
  /* the pool goes (MemPool's destructor) with a tensor alive: nothing freed yet */
  CHECK_OK(tc_pools_release(FN, FX.a, &p));
  CHECK_OK(tc_alloc_free(FX.a, x[0]));
  CHECK_OK(tc_alloc_free(FX.a, x[1]));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(OWN.frees, 1); /* the first segment, now free */
  CHECK_EQ_INT(OWN.releases, 0);
  CHECK_OK(tc_alloc_free(FX.a, x[2]));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(OWN.frees, 2);
  CHECK_EQ_INT((int64_t)OWN.freed_bytes, (int64_t)(4 * MiB));
  CHECK(OWN.last_stream == st);
  CHECK_EQ_INT(OWN.releases, 1); /* the pool is gone: its allocator may go */
  CHECK_OK(tc_alloc_free(FX.a, plain));
  fx_teardown();
}

/* A fresh allocator under conf, and pool p with the stand-in allocator,
 * routing stream 0x500 into it (begun, not ended). */
static struct CUstream_st *const OWN_STREAM = (struct CUstream_st *)(uintptr_t)0x500;
static void own_setup(const char *conf, tcuda_graph_pool_t *p) {
  fx_setup(conf, TC_SIM_VA_ASCENDING, 0, 0);
  memset(&OWN, 0, sizeof OWN);
  OWN.next = 0x600000000000ull;
  CHECK_OK(tc_pools_retain(FN, FX.a, p));
  CHECK_OK(tc_pools_set_allocator(FN, FX.a, p, &OWN_PA));
  CHECK_OK(tc_pools_begin(FN, FX.a, p, claims, (void *)&OWN_STREAM));
}

/* NULL from the pool's allocator is an out-of-memory error for that
 * request; a pool destroyed with its allocator's segments gives them back. */
static void test_own_allocator_oom_and_teardown(void) {
  tcuda_graph_pool_t p = {{0, 33}};
  own_setup("", &p);
  OWN.fail = 1;
  uint64_t addr = 0;
  CHECK_ERR(tc_alloc_malloc(FX.a, 8 * MiB, 0x500, &addr), TCUDA_ERROR_OUT_OF_MEMORY, "out of memory");
  OWN.fail = 0;
  uint64_t y = M(8 * MiB, 0x500);
  CHECK(is_own(y));
  CHECK_OK(tc_pools_end(FN, FX.a, &p));
  fx_teardown(); /* y still allocated: the allocator's teardown returns it */
  CHECK_EQ_INT(OWN.frees, 1);
  CHECK_EQ_INT((int64_t)OWN.freed_bytes, (int64_t)(20 * MiB));
  CHECK_EQ_INT(OWN.releases, 1);
}

/* torch's test_mempool_expandable: with expandable segments on, the pool
 * with its own allocator gets a plain segment and the default pool an
 * expandable one. Under policy:compact, which maps its own pages, a pool
 * allocator is refused. */
static void test_own_allocator_expandable(void) {
  tcuda_graph_pool_t p = {{0, 34}};
  own_setup("expandable_segments:True", &p);
  uint64_t in = M(1 * MiB, 0x500);
  CHECK_OK(tc_pools_end(FN, FX.a, &p));
  CHECK_OK(tc_pools_release(FN, FX.a, &p));
  uint64_t out = M(1 * MiB, 0x500);
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tc_alloc_snapshot(FX.a, &s));
  CHECK_EQ_INT((int64_t)s->num_segments, 2);
  int expandable = 0;
  for (size_t i = 0; i < s->num_segments; i++) {
    int mine = in >= s->segments[i].address && in < s->segments[i].address + s->segments[i].total_size;
    CHECK_EQ_INT(s->segments[i].is_expandable, !mine);
    expandable += s->segments[i].is_expandable;
  }
  CHECK_EQ_INT(expandable, 1);
  tc_snapshot_free(s);
  CHECK_OK(tc_alloc_free(FX.a, in));
  CHECK_OK(tc_alloc_free(FX.a, out));
  CHECK_OK(tc_pools_release(FN, FX.a, &p));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(OWN.frees, 1);
  fx_teardown();

  fx_setup("policy:compact", TC_SIM_VA_ASCENDING, 0, 0);
  CHECK_OK(tc_pools_retain(FN, FX.a, &p));
  CHECK_ERR(tc_pools_set_allocator(FN, FX.a, &p, &OWN_PA), TCUDA_ERROR_NOT_SUPPORTED, "policy:compact");
  CHECK_OK(tc_pools_release(FN, FX.a, &p));
  fx_teardown();
}

/* One allocation routed to pool p on stream 0x600, as use_mem_pool does. */
static uint64_t in_pool(tcuda_graph_pool_t *p, uint64_t size) {
  struct CUstream_st *st = (struct CUstream_st *)(uintptr_t)0x600;
  CHECK_OK(tc_pools_begin(FN, FX.a, p, claims, &st));
  uint64_t x = M(size, 0x600);
  CHECK_OK(tc_pools_end(FN, FX.a, p));
  CHECK_OK(tc_pools_release(FN, FX.a, p));
  return x;
}

/* torch's test_mempool_limited_memory_with_allocator, on an 80 MiB device:
 * once the device is full, a default-pool request takes a free block of
 * the use_on_oom pool, never of the other pool, and never a new segment
 * there; a pool's own requests and a pool no longer in use get no such
 * help (test_deleted_mempool_not_used_on_oom). */
static void test_use_on_oom(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 80 * MiB, 0);
  tcuda_graph_pool_t keep = {{0, 41}}, use = {{0, 42}};
  uint64_t addr = 0;
  CHECK_ERR(tc_pools_set_use_on_oom(FN, FX.a, &use, 1), TCUDA_ERROR_INVALID_ARGUMENT, "no private pool");
  CHECK_OK(tc_pools_retain(FN, FX.a, &keep));
  CHECK_OK(tc_pools_retain(FN, FX.a, &use));
  CHECK_OK(tc_pools_set_use_on_oom(FN, FX.a, &use, 1));
  uint64_t a = in_pool(&keep, 40 * MiB), b = in_pool(&use, 40 * MiB);
  CHECK_ERR(tc_alloc_malloc(FX.a, 40 * MiB, 0x600, &addr), TCUDA_ERROR_OUT_OF_MEMORY, "out of memory");
  CHECK_OK(tc_alloc_free(FX.a, a));
  CHECK_OK(tc_alloc_free(FX.a, b));
  int64_t ooms = fx_stats().num_ooms;
  uint64_t c = M(30 * MiB, 0x600); /* from the use_on_oom pool's free block */
  CHECK(c == b);
  CHECK_EQ_INT(pool_of(c), 42);
  CHECK_EQ_INT(fx_stats().num_ooms, ooms); /* no OOM was counted */
  CHECK_ERR(tc_alloc_malloc(FX.a, 30 * MiB, 0x600, &addr), TCUDA_ERROR_OUT_OF_MEMORY, "out of memory");
  CHECK_OK(tc_alloc_free(FX.a, c));
  uint64_t e = in_pool(&use, 20 * MiB); /* the pool still serves its own */
  CHECK(e == c);
  CHECK_OK(tc_alloc_free(FX.a, e));
  /* off again: no help */
  CHECK_OK(tc_pools_set_use_on_oom(FN, FX.a, &use, 0));
  CHECK_ERR(tc_alloc_malloc(FX.a, 30 * MiB, 0x600, &addr), TCUDA_ERROR_OUT_OF_MEMORY, "out of memory");
  /* on, but the pool released (a deleted MemPool): no help either */
  CHECK_OK(tc_pools_set_use_on_oom(FN, FX.a, &use, 1));
  CHECK_OK(tc_pools_release(FN, FX.a, &use));
  CHECK_OK(tc_pools_release(FN, FX.a, &keep));
  fx_teardown();

  /* a pool released while a tensor keeps its segment (a deleted MemPool):
   * its free remainder is not used */
  fx_setup("", TC_SIM_VA_ASCENDING, 80 * MiB, 0);
  CHECK_OK(tc_pools_retain(FN, FX.a, &keep));
  CHECK_OK(tc_pools_retain(FN, FX.a, &use));
  CHECK_OK(tc_pools_set_use_on_oom(FN, FX.a, &use, 1));
  a = in_pool(&keep, 40 * MiB);
  b = in_pool(&use, 40 * MiB);
  CHECK_OK(tc_alloc_free(FX.a, b));
  uint64_t live = in_pool(&use, 10 * MiB); /* 10 live, 30 free in the same segment */
  CHECK(live == b);
  CHECK_OK(tc_pools_release(FN, FX.a, &use)); /* ~MemPool */
  CHECK_ERR(tc_alloc_malloc(FX.a, 30 * MiB, 0x600, &addr), TCUDA_ERROR_OUT_OF_MEMORY, "out of memory");
  /* a request routed to a pool gets no help from another */
  tcuda_graph_pool_t other = {{0, 43}};
  CHECK_OK(tc_pools_retain(FN, FX.a, &other));
  CHECK_OK(tc_pools_retain(FN, FX.a, &use)); /* in use again: default requests are helped */
  struct CUstream_st *st = (struct CUstream_st *)(uintptr_t)0x600;
  CHECK_OK(tc_pools_begin(FN, FX.a, &other, claims, &st));
  CHECK_ERR(tc_alloc_malloc(FX.a, 30 * MiB, 0x600, &addr), TCUDA_ERROR_OUT_OF_MEMORY, "out of memory");
  CHECK_OK(tc_pools_end(FN, FX.a, &other));
  uint64_t g = M(30 * MiB, 0x600);
  CHECK(g == live + 10 * MiB);
  CHECK_OK(tc_alloc_free(FX.a, g));
  CHECK_OK(tc_alloc_free(FX.a, live));
  CHECK_OK(tc_alloc_free(FX.a, a));
  CHECK_OK(tc_pools_release(FN, FX.a, &other));
  CHECK_OK(tc_pools_release(FN, FX.a, &other));
  CHECK_OK(tc_pools_release(FN, FX.a, &use));
  CHECK_OK(tc_pools_release(FN, FX.a, &keep));
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
  CHECK_ERR(tcuda_pool_set_use_on_oom(0, &p, 1), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_set_use_on_oom");
  CHECK_ERR(tcuda_pool_set_allocator(0, &p, &OWN_PA), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_set_allocator");
  CHECK_EQ_INT(n, 0);
  CHECK_ERR(tcuda_pool_empty_unused(-1), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_pool_empty_unused");
}

TC_MAIN(T(test_route_and_counts), T(test_shared_between_two_routings), T(test_errors), T(test_no_split),
        T(test_own_allocator), T(test_own_allocator_oom_and_teardown), T(test_own_allocator_expandable), T(test_use_on_oom),
        T(test_public_without_gpu))
