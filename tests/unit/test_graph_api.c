/* CUDA graph API paths that need no GPU (argument checks, states before a
 * capture, pool tokens, capture modes), and the OOM observer registry.
 * Runs with or without a GPU: where CUDA matters the test branches. */
#include "harness.h"
#include "alloc/alloc.h"
#include "alloc/hooks.h"

static void test_create_destroy(void) {
  tcuda_graph_t *g = NULL;
  CHECK_ERR(tcuda_graph_create(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_graph_create: out is NULL");
  CHECK_OK(tcuda_graph_create(&g));
  CHECK(g != NULL);
  CHECK_OK(tcuda_graph_destroy(NULL));
  CHECK_OK(tcuda_graph_reset(g)); /* empty: a no-op */
  CHECK_OK(tcuda_graph_destroy(g));
}

static void test_null_graph(void) {
  tcuda_graph_pool_t p;
  size_t n;
  CHECK_ERR(tcuda_graph_capture_begin(NULL, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_graph_capture_begin: graph is NULL");
  CHECK_ERR(tcuda_graph_capture_end(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_graph_capture_end: graph is NULL");
  CHECK_ERR(tcuda_graph_replay(NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_graph_replay: graph is NULL");
  CHECK_ERR(tcuda_graph_reset(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_graph_reset: graph is NULL");
  CHECK_ERR(tcuda_graph_pool(NULL, &p), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_graph_pool: graph is NULL");
  CHECK_ERR(tcuda_graph_num_nodes(NULL, &n), TCUDA_ERROR_INVALID_ARGUMENT, "graph is NULL");
  CHECK_ERR(tcuda_graph_debug_dump(NULL, "/tmp/x.dot"), TCUDA_ERROR_INVALID_ARGUMENT, "graph is NULL");
  CHECK_ERR(tcuda_graph_register_generator(NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "graph is NULL");
  CHECK(tcuda_graph_exec_handle(NULL) == NULL);
}

static void test_before_capture(void) {
  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  tcuda_graph_pool_t p = {{7, 7}};
  size_t n = 99;
  CHECK_ERR(tcuda_graph_replay(g, NULL), TCUDA_ERROR_INVALID_STATE,
            "Called CUDAGraph::replay without a preceding successful capture.");
  CHECK_ERR(tcuda_graph_pool(g, &p), TCUDA_ERROR_INVALID_STATE, "CUDAGraph::pool without a preceding");
  CHECK_EQ_INT(p.id[0], 7); /* untouched */
  CHECK_ERR(tcuda_graph_num_nodes(g, &n), TCUDA_ERROR_INVALID_STATE, "num_nodes without");
  CHECK_EQ_INT(n, 99);
  CHECK_ERR(tcuda_graph_debug_dump(g, "/tmp/tcuda_unit.dot"), TCUDA_ERROR_INVALID_STATE, "debug_dump without");
  CHECK_ERR(tcuda_graph_debug_dump(g, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "path is NULL");
  CHECK_ERR(tcuda_graph_capture_end(g), TCUDA_ERROR_INVALID_STATE, "capture_end() called before capture_begin().");
  CHECK_ERR(tcuda_graph_pool(g, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_ERR(tcuda_graph_num_nodes(g, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "num_nodes is NULL");
  CHECK_ERR(tcuda_graph_register_generator(g, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "generator is NULL");
  CHECK(tcuda_graph_exec_handle(g) == NULL);
  CHECK_OK(tcuda_graph_destroy(g));
}

static void test_modes(void) {
  tcuda_graph_capture_mode m = TCUDA_GRAPH_CAPTURE_RELAXED;
  CHECK_OK(tcuda_graph_capture_mode_from_name("global", &m));
  CHECK_EQ_INT(m, TCUDA_GRAPH_CAPTURE_GLOBAL);
  CHECK_OK(tcuda_graph_capture_mode_from_name("thread_local", &m));
  CHECK_EQ_INT(m, TCUDA_GRAPH_CAPTURE_THREAD_LOCAL);
  CHECK_OK(tcuda_graph_capture_mode_from_name("relaxed", &m));
  CHECK_EQ_INT(m, TCUDA_GRAPH_CAPTURE_RELAXED);
  CHECK_ERR(tcuda_graph_capture_mode_from_name("Global", &m), TCUDA_ERROR_INVALID_ARGUMENT,
            "Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got Global");
  CHECK_EQ_INT(m, TCUDA_GRAPH_CAPTURE_RELAXED);
  CHECK_ERR(tcuda_graph_capture_mode_from_name(NULL, &m), TCUDA_ERROR_INVALID_ARGUMENT, "name is NULL");
  CHECK_ERR(tcuda_graph_capture_mode_from_name("global", NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  /* Checked before anything touches CUDA. */
  CHECK_ERR(tcuda_graph_capture_begin(g, NULL, (tcuda_graph_capture_mode)7), TCUDA_ERROR_INVALID_ARGUMENT,
            "Unknown capture error mode. Expected `global`, `thread_local`, or `relaxed`, got 7");
  CHECK_ERR(tcuda_graph_replay(g, NULL), TCUDA_ERROR_INVALID_STATE, "without a preceding successful capture");
  CHECK_OK(tcuda_graph_destroy(g));
}

static void test_pool_tokens(void) {
  tcuda_graph_pool_t a, b;
  CHECK_ERR(tcuda_graph_pool_handle(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_OK(tcuda_graph_pool_handle(&a));
  CHECK_OK(tcuda_graph_pool_handle(&b));
  CHECK_EQ_INT(a.id[0], 0);
  CHECK_EQ_INT(b.id[0], 0);
  CHECK(a.id[1] >= 1);
  CHECK_EQ_INT(b.id[1], a.id[1] + 1);
  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  tcuda_graph_pool_t both = {{1, 1}}, zero = {{0, 0}}, forged = {{0, 1ull << 40}}, forged2 = {{1ull << 40, 0}};
  CHECK_ERR(tcuda_graph_capture_begin(g, &both, TCUDA_GRAPH_CAPTURE_GLOBAL), TCUDA_ERROR_INVALID_ARGUMENT,
            "both ids are set");
  CHECK_ERR(tcuda_graph_capture_begin(g, &zero, TCUDA_GRAPH_CAPTURE_GLOBAL), TCUDA_ERROR_INVALID_ARGUMENT,
            "is the default pool");
  CHECK_ERR(tcuda_graph_capture_begin(g, &forged, TCUDA_GRAPH_CAPTURE_GLOBAL), TCUDA_ERROR_INVALID_ARGUMENT,
            "was not made by tcuda_graph_pool_handle");
  CHECK_ERR(tcuda_graph_capture_begin(g, &forged2, TCUDA_GRAPH_CAPTURE_GLOBAL), TCUDA_ERROR_INVALID_ARGUMENT,
            "was not made by");
  CHECK_OK(tcuda_graph_destroy(g));
}

static void test_without_gpu(void) {
  int c = 5;
  CHECK_ERR(tcuda_is_current_stream_capturing(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "capturing is NULL");
  if (tcuda_is_available()) return; /* the GPU test covers these with a GPU */
  CHECK_OK(tcuda_is_current_stream_capturing(&c));
  CHECK_EQ_INT(c, 0);
  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  CHECK_ERR(tcuda_graph_capture_begin(g, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL), TCUDA_ERROR_NOT_AVAILABLE, "");
  CHECK_ERR(tcuda_graph_replay(g, NULL), TCUDA_ERROR_INVALID_STATE, "without a preceding successful capture");
  tcuda_graph_capture_scope_t sc;
  CHECK(tcuda_graph_capture_scope_begin(&sc, g, NULL, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL) != TCUDA_SUCCESS);
  CHECK_EQ_INT(sc.active, 0);
  CHECK_OK(tcuda_graph_destroy(g));
}

static tcuda_status nop_fn(void *u, tcuda_stream_t s) {
  (void)u, (void)s;
  return TCUDA_SUCCESS;
}

static void test_capture_fn_and_scope_args(void) {
  tcuda_graph_t *out = (tcuda_graph_t *)&out;
  CHECK_ERR(tcuda_graph_capture_fn(NULL, NULL, NULL, 3, &out), TCUDA_ERROR_INVALID_ARGUMENT, "fn is NULL");
  CHECK(out == NULL);
  CHECK_ERR(tcuda_graph_capture_fn(nop_fn, NULL, NULL, 3, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_ERR(tcuda_graph_capture_fn(nop_fn, NULL, NULL, -1, &out), TCUDA_ERROR_INVALID_ARGUMENT,
            "num_warmup_iters -1 is negative");
  tcuda_graph_pool_t zero = {{0, 0}};
  CHECK_ERR(tcuda_graph_capture_fn(nop_fn, NULL, &zero, 3, &out), TCUDA_ERROR_INVALID_ARGUMENT, "default pool");
  tcuda_graph_capture_scope_t sc;
  tcuda_graph_t *g;
  CHECK_OK(tcuda_graph_create(&g));
  CHECK_ERR(tcuda_graph_capture_scope_begin(NULL, g, NULL, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL),
            TCUDA_ERROR_INVALID_ARGUMENT, "scope is NULL");
  CHECK_ERR(tcuda_graph_capture_scope_begin(&sc, NULL, NULL, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL),
            TCUDA_ERROR_INVALID_ARGUMENT, "graph is NULL");
  CHECK_EQ_INT(sc.active, 0);
  CHECK_ERR(tcuda_graph_capture_scope_begin(&sc, g, NULL, NULL, (tcuda_graph_capture_mode)-1),
            TCUDA_ERROR_INVALID_ARGUMENT, "Unknown capture error mode");
  CHECK_ERR(tcuda_graph_capture_scope_begin(&sc, g, &zero, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL),
            TCUDA_ERROR_INVALID_ARGUMENT, "default pool");
  CHECK_ERR(tcuda_graph_capture_scope_end(&sc), TCUDA_ERROR_INVALID_STATE, "not active");
  CHECK_ERR(tcuda_graph_capture_scope_end(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "scope is NULL");
  CHECK_OK(tcuda_graph_destroy(g));
}

/* ---- OOM observers ---- */

typedef struct seen {
  int calls, device, order;
  size_t requested;
  int stats_given;
} seen;
static int g_order;
static void obs(void *user, int device, size_t requested, const tcuda_memory_stats_t *st) {
  seen *s = (seen *)user;
  s->calls++;
  s->device = device;
  s->requested = requested;
  s->stats_given = st != NULL;
  s->order = ++g_order;
  tcuda_clear_error(); /* observers may clobber the error; the notifier restores it */
}
static int self_id;
static void self_removing(void *user, int device, size_t requested, const tcuda_memory_stats_t *st) {
  (void)device, (void)requested, (void)st;
  ++*(int *)user;
  CHECK_OK(tcuda_oom_observer_remove(self_id));
}
static int hook_calls, hook_order;
static size_t hook_req;
static const char *hook(int device, size_t requested) {
  (void)device;
  hook_calls++;
  hook_req = requested;
  hook_order = ++g_order;
  return NULL; /* nothing to add to the OOM message */
}
static void nop_obs(void *u, int d, size_t r, const tcuda_memory_stats_t *s) { (void)u, (void)d, (void)r, (void)s; }

static void test_oom_observers(void) {
  int id1 = -1, id2 = -1;
  seen s1 = {0}, s2 = {0};
  CHECK_ERR(tcuda_oom_observer_add(NULL, &s1, &id1), TCUDA_ERROR_INVALID_ARGUMENT, "fn is NULL");
  CHECK_ERR(tcuda_oom_observer_add(obs, &s1, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "id is NULL");
  CHECK_EQ_INT(id1, -1);
  CHECK_OK(tcuda_oom_observer_add(obs, &s1, &id1));
  CHECK_OK(tcuda_oom_observer_add(obs, &s2, &id2));
  CHECK(id1 > 0 && id2 > 0 && id1 != id2);
  CHECK_ERR(tc_hook_on_oom(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "fn is NULL");
  CHECK_OK(tc_hook_on_oom(hook));
  CHECK_OK(tc_hook_on_oom(hook)); /* once only */

  tc_error(TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory. Tried to allocate 1 byte (test)");
  tc_hooks_oom(NULL, 0, 12345);
  CHECK_EQ_INT(s1.calls, 1);
  CHECK_EQ_INT(s2.calls, 1);
  CHECK_EQ_INT(hook_calls, 1);
  CHECK_EQ_INT(s1.requested, 12345);
  CHECK_EQ_INT(hook_req, 12345);
  CHECK_EQ_INT(s1.device, 0);
  CHECK(s1.stats_given);
  CHECK(hook_order < s1.order); /* internal hooks first */
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_ERROR_OUT_OF_MEMORY); /* the caller's error survives */
  CHECK(strstr(tcuda_last_error(), "Tried to allocate 1 byte (test)") != NULL);

  CHECK_OK(tcuda_oom_observer_remove(id1));
  CHECK_ERR(tcuda_oom_observer_remove(id1), TCUDA_ERROR_INVALID_ARGUMENT, "is not a registered OOM observer");
  CHECK_ERR(tcuda_oom_observer_remove(0), TCUDA_ERROR_INVALID_ARGUMENT, "id 0");
  CHECK_ERR(tcuda_oom_observer_remove(-4), TCUDA_ERROR_INVALID_ARGUMENT, "id -4");
  tcuda_clear_error();
  tc_hooks_oom(NULL, 1, 7);
  CHECK_EQ_INT(s1.calls, 1);
  CHECK_EQ_INT(s2.calls, 2);
  CHECK_EQ_INT(s2.device, 1);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_SUCCESS);

  /* An observer may remove itself while being called. */
  int selfcalls = 0;
  CHECK_OK(tcuda_oom_observer_add(self_removing, &selfcalls, &self_id));
  tc_hooks_oom(NULL, 0, 1);
  tc_hooks_oom(NULL, 0, 1);
  CHECK_EQ_INT(selfcalls, 1);
  CHECK_OK(tcuda_oom_observer_remove(id2));

  /* The registry is bounded; a full one refuses and keeps what it has. */
  int ids[64], n = 0, extra = -1;
  while (n < 64 && tcuda_oom_observer_add(nop_obs, NULL, &ids[n]) == TCUDA_SUCCESS) n++;
  CHECK_EQ_INT(n, 64);
  CHECK_ERR(tcuda_oom_observer_add(nop_obs, NULL, &extra), TCUDA_ERROR_INVALID_STATE, "the limit");
  CHECK_EQ_INT(extra, -1);
  for (int i = 0; i < n; i++) CHECK_OK(tcuda_oom_observer_remove(ids[i]));
  CHECK_OK(tcuda_oom_observer_add(nop_obs, NULL, &extra));
  CHECK_OK(tcuda_oom_observer_remove(extra));
}

TC_MAIN(T(test_create_destroy), T(test_null_graph), T(test_before_capture), T(test_modes), T(test_pool_tokens),
        T(test_without_gpu), T(test_capture_fn_and_scope_args), T(test_oom_observers))
