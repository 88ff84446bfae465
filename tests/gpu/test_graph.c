/* CUDA graphs on a GPU: capture and replay of kernels and memcpys with
 * checked results, replay on other streams, multi-stream fork/join through
 * events, allocations during capture landing in the private pool (checked
 * with the snapshot), pool sharing, memory released after reset +
 * empty_cache, every error path, graph-safe RNG bit-equality with eager
 * draws (default and registered generators), the scope and capture_fn
 * helpers, OOM observers, and the DOT dump. */
#include "harness.h"
#include "stream_kernels.h"
#include <cuda_runtime_api.h>
#include <sys/stat.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static unsigned *g_mism; /* device counter for tct_check, outside the caching allocator */

static unsigned mismatches(const void *p, size_t n, unsigned seed, cudaStream_t st) {
  unsigned h = 0xFFFFFFFFu;
  CHECK(cudaMemsetAsync(g_mism, 0, sizeof *g_mism, st) == cudaSuccess);
  CHECK(tct_check((const unsigned *)p, n, seed, g_mism, st) == cudaSuccess);
  CHECK(cudaStreamSynchronize(st) == cudaSuccess);
  CHECK(cudaMemcpy(&h, g_mism, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
  return h;
}

static tcuda_stream_t new_stream(void) {
  tcuda_stream_t s;
  memset(&s, 0, sizeof s);
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s));
  return s;
}

/* Pool id of the snapshot segment holding p; 0 if none holds it. */
static int pool_of(const void *p, uint64_t id[2]) {
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tcuda_memory_snapshot(&s));
  int found = 0;
  uint64_t a = (uint64_t)(uintptr_t)p;
  for (size_t i = 0; s && i < s->num_segments && !found; i++) {
    const tcuda_segment_info_t *g = &s->segments[i];
    if (g->device == 0 && a >= g->address && a < g->address + g->total_size) {
      found = 1;
      id[0] = g->pool_id[0];
      id[1] = g->pool_id[1];
    }
  }
  tcuda_snapshot_free(s);
  return found;
}

static int segments_in_pool(const tcuda_graph_pool_t *pool) {
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tcuda_memory_snapshot(&s));
  int n = 0;
  for (size_t i = 0; s && i < s->num_segments; i++)
    n += s->segments[i].pool_id[0] == pool->id[0] && s->segments[i].pool_id[1] == pool->id[1];
  tcuda_snapshot_free(s);
  return n;
}

#define CHECK_POOL(ptr, a, b)                  \
  do {                                         \
    uint64_t id_[2] = {99, 99};                \
    CHECK(pool_of((ptr), id_));                \
    CHECK_EQ_INT(id_[0], (a));                 \
    CHECK_EQ_INT(id_[1], (b));                 \
  } while (0)

static void test_capture_replay(void) {
  tcuda_stream_t s = new_stream();
  tcuda_stream_guard_t gd;
  CHECK_OK(tcuda_stream_guard_begin(&gd, s));
  size_t n = MiB;
  unsigned *a = NULL, *b = NULL, *h = NULL;
  CHECK_OK(tcuda_malloc((void **)&a, n * 4));
  CHECK_OK(tcuda_malloc((void **)&b, n * 4));
  CHECK_OK(tcuda_host_alloc((void **)&h, n * 4));
  memset(h, 0, n * 4);
  CHECK(cudaMemsetAsync(a, 0, n * 4, s.handle) == cudaSuccess);
  CHECK(cudaMemsetAsync(b, 0, n * 4, s.handle) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s.handle) == cudaSuccess);

  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  int cap = -1;
  CHECK_OK(tcuda_is_current_stream_capturing(&cap));
  CHECK_EQ_INT(cap, 0);
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK_OK(tcuda_is_current_stream_capturing(&cap));
  CHECK_EQ_INT(cap, 1);
  CHECK(tct_fill(a, n, 11, s.handle) == cudaSuccess);
  CHECK(cudaMemcpyAsync(b, a, n * 4, cudaMemcpyDeviceToDevice, s.handle) == cudaSuccess);
  CHECK(cudaMemcpyAsync(h, b, n * 4, cudaMemcpyDeviceToHost, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_capture_end(g));
  CHECK_OK(tcuda_is_current_stream_capturing(&cap));
  CHECK_EQ_INT(cap, 0);
  size_t nodes = 0;
  CHECK_OK(tcuda_graph_num_nodes(g, &nodes));
  CHECK_EQ_INT(nodes, 3);
  CHECK(tcuda_graph_exec_handle(g) != NULL);
  /* Capturing ran nothing. */
  CHECK_EQ_INT(mismatches(b, n, 11, s.handle), n);
  CHECK_EQ_INT(h[12345], 0);

  CHECK_OK(tcuda_graph_replay(g, NULL));
  CHECK(cudaStreamSynchronize(s.handle) == cudaSuccess);
  CHECK_EQ_INT(mismatches(a, n, 11, s.handle), 0);
  CHECK_EQ_INT(mismatches(b, n, 11, s.handle), 0);
  CHECK_EQ_INT(h[12345], tct_pattern(12345, 11));
  CHECK_EQ_INT(h[n - 1], tct_pattern(n - 1, 11));

  /* Any stream replays it, the default stream included. */
  tcuda_stream_t d, other = new_stream();
  CHECK_OK(tcuda_default_stream(0, &d));
  CHECK(cudaMemsetAsync(b, 0, n * 4, s.handle) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_replay(g, &d));
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK_EQ_INT(mismatches(b, n, 11, s.handle), 0);
  CHECK(cudaMemsetAsync(b, 0, n * 4, s.handle) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_replay(g, &other));
  CHECK(cudaStreamSynchronize(other.handle) == cudaSuccess);
  CHECK_EQ_INT(mismatches(b, n, 11, s.handle), 0);

  CHECK_OK(tcuda_graph_destroy(g));
  CHECK_OK(tcuda_stream_guard_end(&gd));
  CHECK_OK(tcuda_free(a));
  CHECK_OK(tcuda_free(b));
  CHECK_OK(tcuda_host_free(h));
  CHECK_OK(tcuda_stream_destroy(s));
  CHECK_OK(tcuda_stream_destroy(other));
}

static void test_fork_join_side_pool(void) {
  tcuda_stream_t s1 = new_stream(), s2 = new_stream();
  tcuda_stream_guard_t gd;
  CHECK_OK(tcuda_stream_guard_begin(&gd, s1));
  size_t n = 256 * 1024;
  unsigned *a = NULL, *c = NULL;
  CHECK_OK(tcuda_malloc((void **)&a, n * 4));
  CHECK_OK(tcuda_malloc((void **)&c, n * 4));
  tcuda_event_t *e1, *e2;
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &e1));
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &e2));
  CHECK_OK(tcuda_event_record(e1, &s1)); /* create the CUDA events before capture */
  CHECK_OK(tcuda_event_record(e2, &s2));
  CHECK(cudaDeviceSynchronize() == cudaSuccess);

  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK(tct_fill(a, n, 21, s1.handle) == cudaSuccess);
  CHECK_OK(tcuda_event_record(e1, &s1)); /* fork: s2 joins the capture */
  CHECK_OK(tcuda_event_wait(e1, &s2));
  void *tmp = NULL;
  CHECK_OK(tcuda_malloc_on(&tmp, n * 4, 0, s2)); /* a side stream of the capture: the pool */
  CHECK(tct_fill((unsigned *)tmp, n, 22, s2.handle) == cudaSuccess);
  CHECK(cudaMemcpyAsync(c, tmp, n * 4, cudaMemcpyDeviceToDevice, s2.handle) == cudaSuccess);
  CHECK_OK(tcuda_free(tmp)); /* freed inside the capture: it stays in the pool */
  CHECK_OK(tcuda_event_record(e2, &s2)); /* join */
  CHECK_OK(tcuda_event_wait(e2, &s1));
  CHECK_OK(tcuda_graph_capture_end(g));
  size_t nodes = 0;
  CHECK_OK(tcuda_graph_num_nodes(g, &nodes));
  CHECK(nodes >= 3);

  tcuda_graph_pool_t pool;
  CHECK_OK(tcuda_graph_pool(g, &pool));
  CHECK(pool.id[0] >= 1);
  CHECK_EQ_INT(pool.id[1], 0);
  CHECK_POOL(tmp, pool.id[0], 0);
  /* After the capture, the side stream allocates outside the pool and never
   * gets tmp, which the replays still write. */
  void *t2 = NULL;
  CHECK_OK(tcuda_malloc_on(&t2, n * 4, 0, s2));
  CHECK(t2 != tmp);
  CHECK_POOL(t2, 0, 0);

  CHECK_OK(tcuda_graph_replay(g, NULL));
  CHECK(cudaStreamSynchronize(s1.handle) == cudaSuccess);
  CHECK_EQ_INT(mismatches(a, n, 21, s1.handle), 0);
  CHECK_EQ_INT(mismatches(c, n, 22, s1.handle), 0);

  CHECK_OK(tcuda_free(t2));
  CHECK_OK(tcuda_graph_destroy(g));
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(segments_in_pool(&pool), 0);
  CHECK_OK(tcuda_stream_guard_end(&gd));
  tcuda_event_destroy(e1);
  tcuda_event_destroy(e2);
  CHECK_OK(tcuda_free(a));
  CHECK_OK(tcuda_free(c));
  CHECK_OK(tcuda_stream_destroy(s1));
  CHECK_OK(tcuda_stream_destroy(s2));
}

static void test_private_pool_release(void) {
  tcuda_stream_t s = new_stream();
  tcuda_stream_guard_t gd;
  CHECK_OK(tcuda_stream_guard_begin(&gd, s));
  CHECK_OK(tcuda_empty_cache());
  int64_t reserved0 = 0, allocated0 = 0, r1 = 0, a1 = 0;
  CHECK_OK(tcuda_memory_reserved(0, &reserved0));
  CHECK_OK(tcuda_memory_allocated(0, &allocated0));

  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  void *p = NULL, *q = NULL;
  CHECK_OK(tcuda_malloc(&p, 1000));
  CHECK_OK(tcuda_malloc(&q, 30 * MiB));
  CHECK(tct_fill((unsigned *)q, 30 * MiB / 4, 5, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_free(p));
  CHECK_ERR(tcuda_empty_cache(), TCUDA_ERROR_INVALID_STATE, "capture is under way");
  CHECK_OK(tcuda_graph_capture_end(g));

  tcuda_graph_pool_t pool;
  CHECK_OK(tcuda_graph_pool(g, &pool));
  CHECK_POOL(p, pool.id[0], pool.id[1]);
  CHECK_POOL(q, pool.id[0], pool.id[1]);
  CHECK_EQ_INT(segments_in_pool(&pool), 2);
  /* Pool memory is counted as torch counts it (2 x 512 B RNG words of the
   * default generator come from the default pool). */
  CHECK_OK(tcuda_memory_reserved(0, &r1));
  CHECK_OK(tcuda_memory_allocated(0, &a1));
  CHECK(r1 >= reserved0 + (int64_t)(2 * MiB + 30 * MiB));
  CHECK_EQ_INT(a1, allocated0 + (int64_t)(30 * MiB) + 1024);

  void *r = NULL;
  CHECK_OK(tcuda_malloc(&r, 1000)); /* same stream, no capture: never p */
  CHECK(r != p);
  CHECK_POOL(r, 0, 0);

  CHECK_OK(tcuda_graph_replay(g, NULL));
  CHECK(cudaStreamSynchronize(s.handle) == cudaSuccess);
  CHECK_EQ_INT(mismatches(q, 30 * MiB / 4, 5, s.handle), 0);

  CHECK_OK(tcuda_graph_reset(g));
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(segments_in_pool(&pool), 1); /* q is still allocated */
  CHECK_OK(tcuda_free(q));
  CHECK_OK(tcuda_free(r));
  CHECK_OK(tcuda_graph_destroy(g));
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(segments_in_pool(&pool), 0);
  int64_t r2 = 0;
  CHECK_OK(tcuda_memory_reserved(0, &r2));
  CHECK_EQ_INT(r2, reserved0);
  CHECK_OK(tcuda_stream_guard_end(&gd));
  CHECK_OK(tcuda_stream_destroy(s));
}

static void test_pool_sharing(void) {
  tcuda_stream_t s = new_stream();
  tcuda_stream_guard_t gd;
  CHECK_OK(tcuda_stream_guard_begin(&gd, s));
  tcuda_graph_pool_t h, p1, p2;
  CHECK_OK(tcuda_graph_pool_handle(&h));
  tcuda_graph_t *g1, *g2;
  CHECK_OK(tcuda_graph_create(&g1));
  CHECK_OK(tcuda_graph_create(&g2));
  void *x1 = NULL, *x2 = NULL;
  CHECK_OK(tcuda_graph_capture_begin(g1, &h, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK_OK(tcuda_malloc(&x1, 4 * MiB));
  CHECK(tct_fill((unsigned *)x1, MiB, 1, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_capture_end(g1));
  CHECK_OK(tcuda_graph_pool(g1, &p1));
  CHECK_EQ_INT(p1.id[0], 0);
  CHECK_EQ_INT(p1.id[1], h.id[1]);
  /* A second graph shares the first one's pool. */
  CHECK_OK(tcuda_graph_capture_begin(g2, &p1, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK_OK(tcuda_malloc(&x2, 4 * MiB));
  CHECK(tct_fill((unsigned *)x2, MiB, 2, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_capture_end(g2));
  CHECK_OK(tcuda_graph_pool(g2, &p2));
  CHECK(p2.id[0] == h.id[0] && p2.id[1] == h.id[1]);
  CHECK_POOL(x2, 0, h.id[1]);
  CHECK_EQ_INT(segments_in_pool(&h), 1); /* x2 split the same 20 MiB segment */
  CHECK_OK(tcuda_graph_replay(g1, NULL));
  CHECK_OK(tcuda_graph_replay(g2, NULL));
  CHECK_EQ_INT(mismatches(x1, MiB, 1, s.handle), 0);
  CHECK_EQ_INT(mismatches(x2, MiB, 2, s.handle), 0);
  CHECK_OK(tcuda_free(x1));
  CHECK_OK(tcuda_free(x2));
  CHECK_OK(tcuda_graph_reset(g1));
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(segments_in_pool(&h), 1); /* g2 still uses it */
  CHECK_OK(tcuda_graph_reset(g2));
  CHECK_OK(tcuda_empty_cache());
  CHECK_EQ_INT(segments_in_pool(&h), 0);
  CHECK_OK(tcuda_graph_destroy(g1));
  CHECK_OK(tcuda_graph_destroy(g2));
  CHECK_OK(tcuda_stream_guard_end(&gd));
  CHECK_OK(tcuda_stream_destroy(s));
}

static void test_errors(void) {
  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  tcuda_stream_t cur;
  CHECK_OK(tcuda_current_stream(0, &cur));
  CHECK_EQ_INT(cur.id, 0);
  CHECK_ERR(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL), TCUDA_ERROR_INVALID_STATE,
            "CUDA graphs must be captured on a non-default stream. (However, after capture, it's ok to replay them "
            "on the default stream.)");
  CHECK_ERR(tcuda_graph_replay(g, NULL), TCUDA_ERROR_INVALID_STATE, "without a preceding successful capture");

  tcuda_stream_t s = new_stream(), s2 = new_stream();
  tcuda_stream_guard_t gd, gd2;
  CHECK_OK(tcuda_stream_guard_begin(&gd, s));
  tcuda_generator_t *ug;
  CHECK_OK(tcuda_generator_create(0, 5, &ug));
  float *buf = NULL;
  CHECK_OK(tcuda_malloc((void **)&buf, 4096));

  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK_ERR(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL), TCUDA_ERROR_INVALID_STATE,
            "This CUDAGraph instance already owns a captured graph.");
  CHECK_ERR(tcuda_graph_reset(g), TCUDA_ERROR_INVALID_STATE, "end the capture first");
  CHECK_ERR(tcuda_graph_register_generator(g, ug), TCUDA_ERROR_INVALID_STATE, "during capturing stage");
  CHECK_ERR(tcuda_empty_cache(), TCUDA_ERROR_INVALID_STATE, "capture is under way");
  CHECK_ERR(tcuda_graph_replay(g, NULL), TCUDA_ERROR_INVALID_STATE, "still under way");
  /* A generator not registered with the graph cannot draw in it. */
  CHECK_ERR(tcuda_rand_uniform(ug, buf, 1024, TCUDA_FLOAT32, 0, 1, NULL), TCUDA_ERROR_INVALID_STATE,
            "not in capture mode");
  CHECK_OK(tcuda_stream_guard_begin(&gd2, s2));
  CHECK_ERR(tcuda_graph_capture_end(g), TCUDA_ERROR_INVALID_STATE,
            "Capture must end on the same stream it began on.");
  CHECK_OK(tcuda_stream_guard_end(&gd2));
  CHECK_OK(tcuda_graph_capture_end(g)); /* still capturing: the refusals changed nothing */
  size_t nodes = 99;
  CHECK_OK(tcuda_graph_num_nodes(g, &nodes));
  CHECK_EQ_INT(nodes, 0); /* an empty capture is fine */
  CHECK_OK(tcuda_graph_replay(g, NULL));
  CHECK(cudaStreamSynchronize(s.handle) == cudaSuccess);
  CHECK_ERR(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL), TCUDA_ERROR_INVALID_STATE,
            "already owns a captured graph");
  CHECK_ERR(tcuda_graph_debug_dump(g, "/tmp/tcuda_graph_nodebug.dot"), TCUDA_ERROR_INVALID_STATE,
            "CUDA Graphs debug not enabled");
  if (tcuda_device_count() > 1) {
    tcuda_stream_t o;
    CHECK_OK(tcuda_stream_from_pool(1, 0, &o));
    CHECK_ERR(tcuda_graph_replay(g, &o), TCUDA_ERROR_INVALID_ARGUMENT, "captured on device 0");
  }

  /* CUDA invalidates a capture when an unsafe call is made: capture_end
   * reports it and the graph is empty and usable again. */
  CHECK_OK(tcuda_graph_reset(g));
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK(tct_fill((unsigned *)buf, 1024, 3, s.handle) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s.handle) != cudaSuccess);
  (void)cudaGetLastError();
  CHECK_ERR(tcuda_graph_capture_end(g), TCUDA_ERROR_CUDA, "cudaStreamEndCapture");
  CHECK_ERR(tcuda_graph_replay(g, NULL), TCUDA_ERROR_INVALID_STATE, "without a preceding successful capture");
  int cap = -1;
  CHECK_OK(tcuda_is_current_stream_capturing(&cap));
  CHECK_EQ_INT(cap, 0);
  CHECK_OK(tcuda_empty_cache()); /* no capture left under way in the allocator */
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_RELAXED));
  CHECK(tct_fill((unsigned *)buf, 1024, 3, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_capture_end(g));
  CHECK_OK(tcuda_graph_replay(g, NULL));
  CHECK_EQ_INT(mismatches(buf, 1024, 3, s.handle), 0);

  /* A registered generator outlives nothing: destroy is refused until the
   * graph goes. */
  CHECK_OK(tcuda_graph_register_generator(g, ug));
  CHECK_OK(tcuda_graph_register_generator(g, ug)); /* idempotent */
  CHECK_ERR(tcuda_generator_destroy(ug), TCUDA_ERROR_INVALID_STATE, "registered with 1 CUDA graph");
  CHECK_OK(tcuda_graph_destroy(g));
  CHECK_OK(tcuda_generator_destroy(ug));

  /* Destroying a graph in the middle of its capture ends and discards it. */
  CHECK_OK(tcuda_graph_create(&g));
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK(tct_fill((unsigned *)buf, 1024, 4, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_destroy(g));
  CHECK_OK(tcuda_is_current_stream_capturing(&cap));
  CHECK_EQ_INT(cap, 0);
  CHECK_OK(tcuda_empty_cache());

  CHECK_OK(tcuda_free(buf));
  CHECK_OK(tcuda_stream_guard_end(&gd));
  CHECK_OK(tcuda_stream_destroy(s));
  CHECK_OK(tcuda_stream_destroy(s2));
}

/* Eager draws vs one captured draw replayed: bit-equal, same offsets. */
static void rng_case(tcuda_generator_t *gen, int reg) {
  tcuda_generator_t *eff = gen;
  if (!eff) CHECK_OK(tcuda_default_generator(0, &eff));
  tcuda_stream_t s = new_stream();
  tcuda_stream_guard_t gd;
  CHECK_OK(tcuda_stream_guard_begin(&gd, s));
  const size_t N = 1000003, M = 4099;
  float *e[3], *en[3], *r[3], *rn[3], *buf, *bufn;
  for (int i = 0; i < 3; i++) {
    CHECK_OK(tcuda_malloc((void **)&e[i], N * 4));
    CHECK_OK(tcuda_malloc((void **)&r[i], N * 4));
    CHECK_OK(tcuda_malloc((void **)&en[i], M * 4));
    CHECK_OK(tcuda_malloc((void **)&rn[i], M * 4));
  }
  CHECK_OK(tcuda_malloc((void **)&buf, N * 4));
  CHECK_OK(tcuda_malloc((void **)&bufn, M * 4));

  CHECK_OK(tcuda_generator_manual_seed(eff, 1234));
  CHECK_OK(tcuda_generator_set_offset(eff, 40));
  for (int i = 0; i < 3; i++) {
    CHECK_OK(tcuda_rand_uniform(gen, e[i], N, TCUDA_FLOAT32, 0, 1, NULL));
    CHECK_OK(tcuda_rand_normal(gen, en[i], M, TCUDA_FLOAT32, 0, 1, NULL));
  }
  uint64_t off_eager = 0, off = 0;
  CHECK_OK(tcuda_generator_get_offset(eff, &off_eager));
  CHECK(off_eager > 40);

  CHECK_OK(tcuda_generator_manual_seed(eff, 1234));
  CHECK_OK(tcuda_generator_set_offset(eff, 40));
  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  if (reg) CHECK_OK(tcuda_graph_register_generator(g, gen));
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK_OK(tcuda_rand_uniform(gen, buf, N, TCUDA_FLOAT32, 0, 1, NULL));
  CHECK_OK(tcuda_rand_normal(gen, bufn, M, TCUDA_FLOAT32, 0, 1, NULL));
  CHECK_ERR(tcuda_generator_get_offset(eff, &off), TCUDA_ERROR_INVALID_STATE, "capturing");
  CHECK_OK(tcuda_graph_capture_end(g));
  CHECK_OK(tcuda_generator_get_offset(eff, &off));
  CHECK_EQ_INT(off, 40); /* capturing draws nothing on the host */
  for (int i = 0; i < 3; i++) {
    CHECK_OK(tcuda_graph_replay(g, NULL));
    CHECK(cudaMemcpyAsync(r[i], buf, N * 4, cudaMemcpyDeviceToDevice, s.handle) == cudaSuccess);
    CHECK(cudaMemcpyAsync(rn[i], bufn, M * 4, cudaMemcpyDeviceToDevice, s.handle) == cudaSuccess);
  }
  CHECK(cudaStreamSynchronize(s.handle) == cudaSuccess);
  CHECK_OK(tcuda_generator_get_offset(eff, &off));
  CHECK_EQ_INT(off, off_eager);
  float *he = malloc(N * 4), *hr = malloc(N * 4), *h0 = malloc(N * 4);
  CHECK(cudaMemcpy(h0, e[0], N * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
  for (int i = 0; i < 3; i++) {
    CHECK(cudaMemcpy(he, e[i], N * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(cudaMemcpy(hr, r[i], N * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(he, hr, N * 4) == 0);
    if (i) CHECK(memcmp(he, h0, N * 4) != 0); /* fresh numbers each replay */
    CHECK(cudaMemcpy(he, en[i], M * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(cudaMemcpy(hr, rn[i], M * 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(he, hr, M * 4) == 0);
  }
  free(he);
  free(hr);
  free(h0);
  CHECK_OK(tcuda_graph_destroy(g));
  for (int i = 0; i < 3; i++) {
    CHECK_OK(tcuda_free(e[i]));
    CHECK_OK(tcuda_free(r[i]));
    CHECK_OK(tcuda_free(en[i]));
    CHECK_OK(tcuda_free(rn[i]));
  }
  CHECK_OK(tcuda_free(buf));
  CHECK_OK(tcuda_free(bufn));
  CHECK_OK(tcuda_stream_guard_end(&gd));
  CHECK_OK(tcuda_stream_destroy(s));
}

static void test_rng_default_generator(void) { rng_case(NULL, 0); }

static void test_rng_user_generator(void) {
  tcuda_generator_t *ug;
  CHECK_OK(tcuda_generator_create(0, 99, &ug));
  rng_case(ug, 1);
  CHECK_OK(tcuda_generator_destroy(ug));
}

typedef struct fnctx {
  unsigned *in, *out;
  size_t n;
  int calls, fail_at, stream_ok;
} fnctx;

static tcuda_status copy_fn(void *u, tcuda_stream_t s) {
  fnctx *c = (fnctx *)u;
  if (++c->calls == c->fail_at) return tcuda_set_device(9999); /* a real tcuda error */
  tcuda_stream_t cur;
  tcuda_status st = tcuda_current_stream(s.device, &cur);
  if (st) return st;
  c->stream_ok &= cur.handle == s.handle && cur.id != 0;
  void *tmp = NULL; /* scratch from the graph's pool */
  if ((st = tcuda_malloc(&tmp, c->n * 4))) return st;
  if (cudaMemcpyAsync(tmp, c->in, c->n * 4, cudaMemcpyDeviceToDevice, s.handle) != cudaSuccess ||
      cudaMemcpyAsync(c->out, tmp, c->n * 4, cudaMemcpyDeviceToDevice, s.handle) != cudaSuccess)
    c->stream_ok = 0;
  return tcuda_free(tmp);
}

static void test_scope_and_capture_fn(void) {
  size_t n = 64 * 1024;
  unsigned *a = NULL, *in = NULL, *out = NULL;
  CHECK_OK(tcuda_malloc((void **)&a, n * 4));
  CHECK_OK(tcuda_malloc((void **)&in, n * 4));
  CHECK_OK(tcuda_malloc((void **)&out, n * 4));
  tcuda_stream_t cur;

  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  tcuda_graph_capture_scope_t sc;
  CHECK_OK(tcuda_graph_capture_scope_begin(&sc, g, NULL, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK_EQ_INT(sc.active, 1);
  CHECK_OK(tcuda_current_stream(0, &cur));
  CHECK(cur.id != 0); /* a side stream */
  int cap = 0;
  CHECK_OK(tcuda_is_current_stream_capturing(&cap));
  CHECK_EQ_INT(cap, 1);
  CHECK(tct_fill(a, n, 31, cur.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_capture_scope_end(&sc));
  CHECK_ERR(tcuda_graph_capture_scope_end(&sc), TCUDA_ERROR_INVALID_STATE, "not active");
  CHECK_OK(tcuda_current_stream(0, &cur));
  CHECK_EQ_INT(cur.id, 0); /* restored */
  CHECK_OK(tcuda_graph_replay(g, NULL)); /* on the default stream */
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK_EQ_INT(mismatches(a, n, 31, NULL), 0);
  /* A scope on a graph that refuses to capture leaves nothing behind. */
  CHECK_ERR(tcuda_graph_capture_scope_begin(&sc, g, NULL, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL),
            TCUDA_ERROR_INVALID_STATE, "already owns");
  CHECK_EQ_INT(sc.active, 0);
  CHECK_OK(tcuda_current_stream(0, &cur));
  CHECK_EQ_INT(cur.id, 0);
  CHECK_OK(tcuda_graph_destroy(g));

  /* make_graphed_callables: warm-ups, then one capture; static in/out. */
  fnctx c = {in, out, n, 0, 0, 1};
  CHECK_OK(tcuda_graph_capture_fn(copy_fn, &c, NULL, 3, &g));
  CHECK_EQ_INT(c.calls, 4);
  CHECK(c.stream_ok);
  CHECK_OK(tcuda_current_stream(0, &cur));
  CHECK_EQ_INT(cur.id, 0);
  for (unsigned seed = 41; seed < 44; seed++) {
    CHECK(tct_fill(in, n, seed, NULL) == cudaSuccess);
    CHECK_OK(tcuda_graph_replay(g, NULL));
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK_EQ_INT(mismatches(out, n, seed, NULL), 0);
  }
  tcuda_graph_pool_t pool;
  CHECK_OK(tcuda_graph_pool(g, &pool));
  CHECK(segments_in_pool(&pool) >= 1); /* fn's scratch */
  CHECK_OK(tcuda_graph_destroy(g));

  /* fn failing in warm-up, then in the capture: nothing is left. */
  tcuda_graph_t *bad = (tcuda_graph_t *)&bad;
  fnctx f1 = {in, out, n, 0, 2, 1};
  CHECK_ERR(tcuda_graph_capture_fn(copy_fn, &f1, NULL, 3, &bad), TCUDA_ERROR_INVALID_DEVICE, "warm-up failed");
  CHECK(bad == NULL);
  fnctx f2 = {in, out, n, 0, 4, 1};
  CHECK_ERR(tcuda_graph_capture_fn(copy_fn, &f2, NULL, 3, &bad), TCUDA_ERROR_INVALID_DEVICE, "capture failed");
  CHECK(bad == NULL);
  CHECK_OK(tcuda_current_stream(0, &cur));
  CHECK_EQ_INT(cur.id, 0);
  CHECK_OK(tcuda_empty_cache()); /* no capture left under way */

  CHECK_OK(tcuda_free(a));
  CHECK_OK(tcuda_free(in));
  CHECK_OK(tcuda_free(out));
}

typedef struct oomseen {
  int calls, device;
  size_t requested;
  int64_t num_ooms;
} oomseen;
static void on_oom(void *u, int device, size_t requested, const tcuda_memory_stats_t *st) {
  oomseen *o = (oomseen *)u;
  o->calls++;
  o->device = device;
  o->requested = requested;
  o->num_ooms = st->num_ooms;
}

static void test_oom_observer(void) {
  oomseen o = {0};
  int id;
  CHECK_OK(tcuda_oom_observer_add(on_oom, &o, &id));
  int64_t before = 0;
  tcuda_memory_stats_t st;
  CHECK_OK(tcuda_memory_stats(0, &st));
  before = st.num_ooms;
  void *p = (void *)1;
  size_t huge = (size_t)1 << 50;
  CHECK_ERR(tcuda_malloc(&p, huge), TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory. Tried to allocate");
  CHECK(p == NULL);
  CHECK_EQ_INT(o.calls, 1);
  CHECK_EQ_INT(o.device, 0);
  CHECK_EQ_INT(o.requested, huge);
  CHECK_EQ_INT(o.num_ooms, before + 1);
  CHECK_ERR(tcuda_malloc(&p, (size_t)1 << 61), TCUDA_ERROR_OUT_OF_MEMORY, "more than 1EB");
  CHECK_EQ_INT(o.calls, 1); /* torch does not notify for > 1 EB */
  CHECK_OK(tcuda_oom_observer_remove(id));
  CHECK_ERR(tcuda_malloc(&p, huge), TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory");
  CHECK_EQ_INT(o.calls, 1);
}

/* Last: debug mode is process-wide. */
static void test_debug_dump(void) {
  tcuda_graph_enable_debug_mode();
  tcuda_stream_t s = new_stream();
  tcuda_stream_guard_t gd;
  CHECK_OK(tcuda_stream_guard_begin(&gd, s));
  unsigned *a = NULL;
  CHECK_OK(tcuda_malloc((void **)&a, 4096));
  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  CHECK_OK(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL));
  CHECK(tct_fill(a, 1024, 7, s.handle) == cudaSuccess);
  CHECK(cudaMemsetAsync(a, 0, 16, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_capture_end(g));
  char path[128];
  snprintf(path, sizeof path, "/tmp/tcuda_graph_test_%d.dot", (int)getpid());
  for (int k = 0; k < 2; k++) { /* the graph is kept: dumps repeat */
    unlink(path);
    CHECK_OK(tcuda_graph_debug_dump(g, path));
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size > 0);
    FILE *f = fopen(path, "r");
    char text[4096] = {0};
    if (f) {
      size_t got = fread(text, 1, sizeof text - 1, f);
      text[got] = 0;
      fclose(f);
    }
    CHECK(strstr(text, "digraph") != NULL);
  }
  unlink(path);
  CHECK_ERR(tcuda_graph_debug_dump(g, "/nonexistent-dir-tcuda/g.dot"), TCUDA_ERROR_IO, "cannot write");
  CHECK_OK(tcuda_graph_replay(g, NULL));
  CHECK(cudaStreamSynchronize(s.handle) == cudaSuccess);
  CHECK_OK(tcuda_graph_destroy(g));
  CHECK_OK(tcuda_free(a));
  CHECK_OK(tcuda_stream_guard_end(&gd));
  CHECK_OK(tcuda_stream_destroy(s));
}

int main(int argc, char **argv) {
  tc_require_gpu();
  if (cudaMalloc((void **)&g_mism, sizeof *g_mism) != cudaSuccess) return 1;
  static const tc_test tests[] = {T(test_capture_replay), T(test_fork_join_side_pool), T(test_private_pool_release),
                                  T(test_pool_sharing), T(test_errors), T(test_rng_default_generator),
                                  T(test_rng_user_generator), T(test_scope_and_capture_fn), T(test_oom_observer),
                                  T(test_debug_dump)};
  int rc = tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
  cudaFree(g_mism);
  return rc;
}
