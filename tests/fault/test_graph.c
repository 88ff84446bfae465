/* CUDA graphs under injected failures. An allocation that runs out of
 * memory inside a capture on a side stream: the caller gets the OOM, the
 * allocator neither synchronizes nor flushes its cache under capture (that
 * would break the capture) and asks cudaMalloc once; the CUDA capture
 * itself stays valid and ends, or, through tcuda_graph_capture_fn, is
 * discarded with the error; the private pool is released and its segments
 * go at the next empty_cache; later captures work. Also a record_stream
 * free deferred by a capture whose event fails once recorded after it. */
#include "fault_util.h"

/* While a graph holds the capture device's default generator, the
 * generator keeps two live allocations (its seed and offset words, as
 * torch's register_graph): counts of live allocations add them. */
enum { GEN_WORDS = 2 };

/* Segments of device 0 in pool (a, b); (0, 0) counts every private one. */
static int segments_in(uint64_t a, uint64_t b) {
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tcuda_memory_snapshot(&s));
  int n = 0;
  for (size_t i = 0; s && i < s->num_segments; i++) {
    const tcuda_segment_info_t *g = &s->segments[i];
    if (g->device != 0) continue;
    if (a || b) n += g->pool_id[0] == a && g->pool_id[1] == b;
    else n += g->pool_id[0] || g->pool_id[1];
  }
  tcuda_snapshot_free(s);
  return n;
}

static int capturing_now(void) {
  int cap = -1;
  CHECK_OK(tcuda_is_current_stream_capturing(&cap));
  return cap;
}

static int64_t current_stream_id(void) {
  tcuda_stream_t cur;
  memset(&cur, 0, sizeof cur);
  CHECK_OK(tcuda_current_stream(0, &cur));
  return cur.id;
}

typedef struct {
  int calls, arm_in_capture;
} fnctx;

/* make_graphed_callables' fn: a small scratch block and a large one, both
 * freed before it returns; when asked, the large one's cudaMalloc fails
 * from the capture on. */
static tcuda_status alloc_fn(void *user, tcuda_stream_t s) {
  fnctx *c = (fnctx *)user;
  c->calls++;
  int cap = 0;
  void *a = NULL, *b = NULL;
  tcuda_status st = tcuda_is_current_stream_capturing(&cap);
  if (st || (st = tcuda_malloc(&a, 64 << 10))) return st;
  if (cudaMemsetAsync(a, 1, 64 << 10, s.handle) != cudaSuccess) {
    tcuda_free(a);
    return TCUDA_ERROR_CUDA;
  }
  if (cap && c->arm_in_capture) tc_fault_arm(TC_FAULT_SEGMENT_ALLOC, 1, TC_FAULT_FOREVER);
  st = tcuda_malloc(&b, 64 * MiB);
  if (!st) {
    if (cudaMemsetAsync(b, 2, 64 * MiB, s.handle) != cudaSuccess) st = TCUDA_ERROR_CUDA;
    tcuda_status sb = tcuda_free(b);
    if (!st) st = sb;
  }
  tcuda_status sa = tcuda_free(a); /* a success leaves the OOM message in place */
  return st ? st : sa;
}

static void test_oom_in_capture_fn(void) {
  clean_start();
  tcuda_memory_stats_t s0 = stats_of(0);
  fnctx c = {0, 1};
  tcuda_graph_t *g = (tcuda_graph_t *)&g;
  CHECK_ERR(tcuda_graph_capture_fn(alloc_fn, &c, NULL, 2, &g), TCUDA_ERROR_OUT_OF_MEMORY,
            "tcuda_graph_capture_fn: capture failed: tcuda_malloc: CUDA out of memory. Tried to allocate 64.00 MiB");
  CHECK(g == NULL);
  CHECK_EQ_INT(c.calls, 3); /* two warm-ups, then the capture */
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_SEGMENT_ALLOC), 1); /* no retry under capture */
  tc_fault_reset();
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 1);
  CHECK_EQ_INT(s.num_alloc_retries - s0.num_alloc_retries, 0);
  CHECK_EQ_INT(s.num_sync_all_streams - s0.num_sync_all_streams, 0);
  CHECK_EQ_INT(capturing_now(), 0);
  CHECK_EQ_INT(current_stream_id(), 0); /* the side stream is no longer current */
  CHECK_ALLOC(0, 0);
  CHECK_EQ_INT(segments_in(0, 0), 1); /* the scratch block's segment, free, in the released pool */
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(segments_in(0, 0), 0);
  CHECK_EQ_INT(reserved_of(0), 0);

  /* the next capture works */
  fnctx ok = {0, 0};
  CHECK_OK(tcuda_graph_capture_fn(alloc_fn, &ok, NULL, 1, &g));
  CHECK(g != NULL);
  size_t nodes = 0;
  CHECK_OK(tcuda_graph_num_nodes(g, &nodes));
  CHECK(nodes >= 2); /* the two memsets */
  tcuda_graph_pool_t pool;
  CHECK_OK(tcuda_graph_pool(g, &pool));
  CHECK_EQ_INT(segments_in(pool.id[0], pool.id[1]), 2);
  CHECK_OK(tcuda_graph_replay(g, NULL));
  CHECK_OK(tcuda_synchronize(0));
  CHECK_ALLOC(0, GEN_WORDS);
  CHECK_OK(tcuda_graph_destroy(g));
  CHECK_ALLOC(0, 0);
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(segments_in(pool.id[0], pool.id[1]), 0);
  clean_end();
}

static void test_oom_in_manual_capture(void) {
  clean_start();
  tcuda_stream_t side;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &side));
  tcuda_stream_guard_t gd;
  CHECK_OK(tcuda_stream_guard_begin(&gd, side));
  tcuda_graph_t *g = NULL;
  CHECK_OK(tcuda_graph_create(&g));
  tcuda_memory_stats_t s0 = stats_of(0);
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  void *a = NULL, *b = (void *)1;
  CHECK_OK(tcuda_malloc(&a, 64 << 10)); /* from the capture's private pool */
  CHECK(cudaMemsetAsync(a, 3, 64 << 10, side.handle) == cudaSuccess);
  tc_fault_arm(TC_FAULT_SEGMENT_ALLOC, 1, TC_FAULT_FOREVER);
  CHECK_ERR(tcuda_malloc(&b, 64 * MiB), TCUDA_ERROR_OUT_OF_MEMORY,
            "tcuda_malloc: CUDA out of memory. Tried to allocate 64.00 MiB");
  CHECK(b == NULL);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_SEGMENT_ALLOC), 1);
  CHECK_EQ_INT(capturing_now(), 1); /* the capture survived the failed allocation */
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 1);
  CHECK_EQ_INT(s.num_alloc_retries - s0.num_alloc_retries, 0);
  CHECK_EQ_INT(s.num_sync_all_streams - s0.num_sync_all_streams, 0);
  CHECK_ALLOC(0, 1 + GEN_WORDS);
  tc_fault_reset();
  CHECK_OK(tcuda_free(a));
  CHECK_OK(tcuda_graph_capture_end(g));
  CHECK_EQ_INT(capturing_now(), 0);
  size_t nodes = 0;
  CHECK_OK(tcuda_graph_num_nodes(g, &nodes));
  CHECK(nodes >= 1); /* the memset */
  tcuda_graph_pool_t pool;
  CHECK_OK(tcuda_graph_pool(g, &pool));
  CHECK_EQ_INT(segments_in(pool.id[0], pool.id[1]), 1); /* a's; the failed call made none */
  CHECK_OK(tcuda_graph_replay(g, NULL));
  CHECK_OK(tcuda_stream_synchronize(side));
  CHECK_ALLOC(0, GEN_WORDS);

  /* a second capture on the same stream, into the same pool, allocates */
  tcuda_graph_t *g2 = NULL;
  CHECK_OK(tcuda_graph_create(&g2));
  CHECK_OK(tcuda_graph_capture_begin(g2, &pool, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK_OK(tcuda_malloc(&b, 64 * MiB));
  CHECK(cudaMemsetAsync(b, 4, 64 * MiB, side.handle) == cudaSuccess);
  CHECK_OK(tcuda_free(b));
  CHECK_OK(tcuda_graph_capture_end(g2));
  CHECK_EQ_INT(segments_in(pool.id[0], pool.id[1]), 2);
  CHECK_OK(tcuda_graph_replay(g2, NULL));
  CHECK_OK(tcuda_stream_synchronize(side));
  CHECK_OK(tcuda_stream_guard_end(&gd));
  CHECK_OK(tcuda_graph_destroy(g));
  CHECK_OK(tcuda_graph_destroy(g2));
  CHECK_ALLOC(0, 0);
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(segments_in(pool.id[0], pool.id[1]), 0);
  clean_end();
}

/* A block used on another stream and freed during a capture waits for the
 * capture to end before its event is recorded. That record fails once: the
 * call that tried it says so, the block stays pending, the next call
 * records it. */
static void test_deferred_event_fails(void) {
  clean_start();
  tcuda_stream_t side, other;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &side));
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &other));
  void *p = NULL, *q = (void *)1;
  CHECK_OK(tcuda_malloc(&p, 4096));
  CHECK_OK(tcuda_record_stream(p, other));
  tcuda_stream_guard_t gd;
  CHECK_OK(tcuda_stream_guard_begin(&gd, side));
  tcuda_graph_t *g = NULL;
  CHECK_OK(tcuda_graph_create(&g));
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  tc_fault_arm(TC_FAULT_ALLOC_EVENT, 1, 1);
  CHECK_OK(tcuda_free(p)); /* deferred: no event under capture */
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_ALLOC_EVENT), 0);
  CHECK_OK(tcuda_graph_capture_end(g));
  CHECK_OK(tcuda_stream_guard_end(&gd));
  CHECK_OK(tcuda_graph_destroy(g)); /* its generator words go too */
  CHECK_ALLOC(0, 0);
  CHECK_EQ_INT(CUR(stats_of(0).active[TCUDA_STAT_ALL]), 1); /* p, pending */
  CHECK_ERR(tcuda_malloc(&q, 4096), TCUDA_ERROR_CUDA,
            "tcuda_malloc: tcuda allocator: cudaEventRecord failed: cudaErrorInvalidResourceHandle");
  CHECK(q == NULL);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_ALLOC_EVENT), 1);
  CHECK_ALLOC(0, 0);
  CHECK_EQ_INT(CUR(stats_of(0).active[TCUDA_STAT_ALL]), 1); /* still pending, still tracked */
  CHECK_OK(tcuda_malloc(&q, 4096)); /* records the deferred event, then allocates */
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_ALLOC_EVENT), 2);
  CHECK_ALLOC(0, 1);
  CHECK_OK(tcuda_free(q));
  CHECK_OK(tcuda_stream_synchronize(other));
  CHECK_OK(tcuda_stream_destroy(other));
  clean_end();
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(test_oom_in_capture_fn), T(test_oom_in_manual_capture),
                                  T(test_deferred_event_fails)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
