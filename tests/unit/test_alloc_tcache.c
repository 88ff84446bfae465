/* thread_cache:N (src/alloc/tcache.h) on the simulated backend: hits and
 * the users' statistics, each flush trigger (each test fails without its
 * flush), record_stream, and 16 threads under load with readers, OOMs and
 * threads that exit mid-run, checked against a recount at every phase. */
#include "test_alloc_policy_util.h"
#include "../alloc_check.h"
#include "inspect/report.h"
#include "replay/whatif.h"
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

/* State of the block at addr in a snapshot: -1 when no block starts there. */
static int block_state_at(tc_alloc *a, uint64_t addr) {
  tcuda_snapshot_t *s = NULL;
  CHECK_OK(tc_alloc_snapshot(a, &s));
  int st = -1;
  for (size_t i = 0; s && i < s->num_segments; i++)
    for (size_t j = 0; j < s->segments[i].num_blocks; j++)
      if (s->segments[i].blocks[j].address == addr) st = (int)s->segments[i].blocks[j].state;
  tc_snapshot_free(s);
  return st;
}

/* Every stat and the books agree once the caches are empty. */
static void check_books(tc_alloc *a, const tc_backend *be, const char *conf, const tc_check_handle *live, int n,
                        int totals_reset) {
  tc_alloc_config cfg;
  CHECK_OK(tc_alloc_config_parse(conf, &cfg));
  tc_check_result r = {{0}, 0};
  tc_check_alloc(&r, a, be, &cfg, live, n, totals_reset);
  if (r.failed) printf("  invariants: %s\n", r.why);
  CHECK(!r.failed);
}

static void test_hit_and_stats(void) {
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  uint64_t p = M(4000, 0);
  F(p);
  /* the block is free to its user, allocated in the device's books */
  CHECK_EQ_INT(block_state_at(FX.a, p), TCUDA_BLOCK_ACTIVE_ALLOCATED);
  tcuda_memory_stats_t s = fx_stats();
  CHECK_STAT(s.allocated_bytes[TCUDA_STAT_ALL], 0, 4096, 4096, 4096);
  CHECK_STAT(s.requested_bytes[TCUDA_STAT_SMALL_POOL], 0, 4000, 4000, 4000);
  CHECK_STAT(s.allocation[TCUDA_STAT_ALL], 0, 1, 1, 1);
  uint64_t q = M(3900, 0); /* rounds to 4096 on the same stream: the cached block */
  CHECK_EQ_INT(q, p);
  CHECK_EQ_INT(FX.seg_allocs, 1);
  s = fx_stats();
  CHECK_STAT(s.allocated_bytes[TCUDA_STAT_ALL], 4096, 4096, 8192, 4096);
  CHECK_STAT(s.requested_bytes[TCUDA_STAT_ALL], 3900, 4000, 7900, 4000);
  CHECK_STAT(s.active[TCUDA_STAT_SMALL_POOL], 1, 1, 2, 1);
  uint64_t r = M(4096, 5); /* another stream: not the cached block */
  CHECK(r != p);
  F(q);
  F(r);
  CHECK_ERR(tc_alloc_free(FX.a, q), TCUDA_ERROR_INVALID_POINTER, "already freed");
  CHECK_ERR(tc_alloc_block_info(FX.a, q, NULL, NULL, NULL, NULL), TCUDA_ERROR_INVALID_POINTER, "not inside a live");
  CHECK_ERR(tc_alloc_record_stream(FX.a, q, 9), TCUDA_ERROR_INVALID_POINTER, "not a live allocation");
  s = fx_stats();
  CHECK_STAT(s.allocated_bytes[TCUDA_STAT_ALL], 0, 8192, 12288, 12288);
  /* the peak counts the reused block at its first request (4000, not
   * 3900): peaks may exceed the users' by what caches hold */
  CHECK_STAT(s.requested_bytes[TCUDA_STAT_ALL], 0, 8096, 11996, 11996);
  tc_alloc_reset_peak(FX.a); /* restarts from the users' current, not the books' */
  s = fx_stats();
  CHECK_EQ_INT(s.allocated_bytes[TCUDA_STAT_ALL].peak, 0);
  CHECK_EQ_INT(s.requested_bytes[TCUDA_STAT_SMALL_POOL].peak, 0);
  CHECK_EQ_INT(s.reserved_bytes[TCUDA_STAT_ALL].peak, 4 * MiB); /* streams 0 and 5 */
  tc_alloc_reset_accumulated(FX.a);
  s = fx_stats();
  CHECK_EQ_INT(s.allocation[TCUDA_STAT_ALL].allocated, 0);
  CHECK_EQ_INT(s.allocation[TCUDA_STAT_ALL].freed, 0);
  CHECK_EQ_INT(CUR(s.allocation[TCUDA_STAT_ALL]), 0);
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  s = fx_stats();
  CHECK_EQ_INT(s.allocation[TCUDA_STAT_ALL].freed, 0); /* the flush is no user's free */
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 0);
  check_books(FX.a, FX.sim, "thread_cache:4", NULL, 0, 1);
  fx_teardown();
}

/* Off (the default): the same calls hand the block back to the pool. */
static void test_off_unchanged(void) {
  fx_setup("", TC_SIM_VA_DRIVER, 0, 0);
  uint64_t p = M(4000, 0);
  F(p);
  CHECK_EQ_INT(block_state_at(FX.a, p), TCUDA_BLOCK_INACTIVE);
  fx_teardown();
}

/* Larger blocks and record_stream blocks never enter a cache. */
static void test_not_cached(void) {
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  uint64_t big = M(2 * MiB, 0), p = M(4096, 0);
  F(big);
  CHECK_EQ_INT(block_state_at(FX.a, big), TCUDA_BLOCK_INACTIVE);
  CHECK_OK(tc_alloc_record_stream(FX.a, p, 9));
  F(p);
  CHECK_EQ_INT(block_state_at(FX.a, p), TCUDA_BLOCK_ACTIVE_PENDING_FREE);
  tc_backend_sim_complete_events(FX.sim);
  uint64_t q = M(4096, 0); /* the lock path processes the event, then reuses the block */
  CHECK_EQ_INT(q, p);
  F(q); /* no stream recorded this time: cached */
  CHECK_EQ_INT(block_state_at(FX.a, q), TCUDA_BLOCK_ACTIVE_ALLOCATED);
  fx_teardown();
}

static void test_flush_empty_cache(void) {
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  F(M(4096, 0));
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  CHECK_EQ_INT(CUR(fx_stats().reserved_bytes[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(tc_backend_sim_used(FX.sim), 0);
  fx_teardown();
}

/* The device is full of cached 512 KiB blocks; a 1 MiB request is served
 * by flushing them, before any segment is released. */
static void test_flush_oom_first(void) {
  fx_setup("thread_cache:8", TC_SIM_VA_DRIVER, 4 * MiB, 0);
  uint64_t p[8];
  for (int i = 0; i < 8; i++) p[i] = M(512 * KiB, 0);
  for (int i = 0; i < 8; i++) F(p[i]);
  uint64_t q = M(MiB, 0);
  CHECK(q != 0);
  tcuda_memory_stats_t s = fx_stats();
  CHECK_EQ_INT(s.num_device_free, 0);
  CHECK_EQ_INT(s.num_alloc_retries, 0);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_ALL]), (int64_t)MiB);
  F(q);
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  check_books(FX.a, FX.sim, "thread_cache:8", NULL, 0, 0);
  fx_teardown();
}

static void *alloc_free_exit(void *v) {
  uint64_t *addr = (uint64_t *)v;
  if (tc_alloc_malloc(FX.a, 8192, 3, addr) || tc_alloc_free(FX.a, *addr)) *addr = 0;
  return NULL;
}

static void test_flush_thread_exit(void) {
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  uint64_t addr = 0;
  pthread_t t;
  CHECK_EQ_INT(pthread_create(&t, NULL, alloc_free_exit, &addr), 0);
  pthread_join(t, NULL);
  CHECK(addr != 0);
  CHECK_EQ_INT(block_state_at(FX.a, addr), TCUDA_BLOCK_INACTIVE);
  check_books(FX.a, FX.sim, "thread_cache:4", NULL, 0, 0);
  fx_teardown();
}

static pthread_barrier_t fork_bar;
static void *cache_then_wait(void *v) {
  uint64_t *addr = (uint64_t *)v;
  if (tc_alloc_malloc(FX.a, 8192, 0, addr) || tc_alloc_free(FX.a, *addr)) *addr = 0;
  pthread_barrier_wait(&fork_bar); /* main forks now */
  pthread_barrier_wait(&fork_bar);
  return NULL;
}

/* fork: the child has no thread to flush another thread's cache, yet its
 * empty_cache returns that cache's blocks. */
static void test_fork_child_flushes(void) {
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  uint64_t addr = 0;
  pthread_t t;
  pthread_barrier_init(&fork_bar, NULL, 2);
  CHECK_EQ_INT(pthread_create(&t, NULL, cache_then_wait, &addr), 0);
  pthread_barrier_wait(&fork_bar);
  CHECK(addr != 0);
  pid_t pid = fork();
  if (pid == 0) {
    int ok = block_state_at(FX.a, addr) == TCUDA_BLOCK_ACTIVE_ALLOCATED && !tc_alloc_empty_cache(FX.a) &&
             tc_backend_sim_used(FX.sim) == 0;
    _exit(ok ? 0 : 1);
  }
  int st = -1;
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  pthread_barrier_wait(&fork_bar);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&fork_bar);
  fx_teardown();
}

static void test_flush_stream_gone(void) {
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  uint64_t p = M(4096, 7), q = M(4096, 0);
  F(p);
  F(q);
  tc_alloc_stream_gone(FX.a, 7);
  CHECK_EQ_INT(block_state_at(FX.a, p), TCUDA_BLOCK_INACTIVE);
  CHECK_EQ_INT(block_state_at(FX.a, q), TCUDA_BLOCK_ACTIVE_ALLOCATED);
  fx_teardown();
}

static int capture_all(void *ctx, uint64_t stream) {
  (void)ctx;
  return stream == 11;
}

static void test_flush_capture(void) {
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  uint64_t p = M(4096, 11);
  F(p);
  const uint64_t id[2] = {0, 1};
  CHECK_OK(tc_alloc_begin_allocate_to_pool(FX.a, id, capture_all, NULL));
  CHECK_EQ_INT(block_state_at(FX.a, p), TCUDA_BLOCK_INACTIVE);
  uint64_t q = M(4096, 11); /* from the private pool, never from a cache */
  int64_t segs = 0;
  int uses = 0;
  CHECK_OK(tc_alloc_pool_info(FX.a, id, &uses, &segs));
  CHECK_EQ_INT(segs, 1);
  F(q);
  CHECK_EQ_INT(block_state_at(FX.a, q), TCUDA_BLOCK_INACTIVE);
  CHECK_OK(tc_alloc_end_allocate_to_pool(FX.a, id));
  CHECK_OK(tc_alloc_release_pool(FX.a, id));
  fx_teardown();
}

static int n_trace;
static void count_trace(void *ctx, tc_trace_action act, uint64_t addr, uint64_t size, uint64_t stream) {
  (void)ctx, (void)addr, (void)size, (void)stream;
  if (act == TC_TRACE_ALLOC || act == TC_TRACE_FREE_REQUESTED) n_trace++;
}

/* While a trace records (history), every call takes the lock path. */
static void test_trace_bypasses(void) {
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  uint64_t p = M(4096, 0);
  F(p);
  n_trace = 0;
  tc_alloc_set_trace(FX.a, count_trace, NULL);
  CHECK_EQ_INT(block_state_at(FX.a, p), TCUDA_BLOCK_INACTIVE);
  CHECK_EQ_INT(n_trace, 0); /* the flush before it is no event of the history */
  for (int i = 0; i < 3; i++) F(M(4096, 0));
  CHECK_EQ_INT(n_trace, 6);
  tc_alloc_set_trace(FX.a, NULL, NULL);
  F(M(4096, 0));
  CHECK_EQ_INT(n_trace, 6);
  fx_teardown();
}

/* set_config turns the mode off and on; blocks tracked before still free. */
static void test_config_toggle(void) {
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  uint64_t p = M(4096, 0), q = M(4096, 0);
  F(p);
  tc_alloc_config off, on;
  CHECK_OK(tc_alloc_config_parse("", &off));
  CHECK_OK(tc_alloc_config_parse("thread_cache:2", &on));
  tc_alloc_set_config(FX.a, &off);
  CHECK_EQ_INT(block_state_at(FX.a, p), TCUDA_BLOCK_INACTIVE);
  F(q);
  CHECK(block_state_at(FX.a, q) != TCUDA_BLOCK_ACTIVE_ALLOCATED); /* merged with p's block */
  tc_alloc_set_config(FX.a, &on);
  uint64_t r = M(8192, 0);
  F(r);
  CHECK_EQ_INT(block_state_at(FX.a, r), TCUDA_BLOCK_ACTIVE_ALLOCATED);
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  check_books(FX.a, FX.sim, "thread_cache:2", NULL, 0, 0);
  fx_teardown();
  /* a new allocator, maybe at the old one's address: this thread's cache
   * of the old one is not used */
  fx_setup("thread_cache:4", TC_SIM_VA_DRIVER, 0, 0);
  F(M(4096, 0));
  CHECK_EQ_INT(CUR(fx_stats().allocation[TCUDA_STAT_ALL]), 0);
  CHECK_OK(tc_alloc_empty_cache(FX.a));
  check_books(FX.a, FX.sim, "thread_cache:4", NULL, 0, 0);
  fx_teardown();
}

/* memory_summary's header says that peaks may run ahead in the mode. */
static void test_summary_header(void) {
  tcuda_memory_stats_t st;
  memset(&st, 0, sizeof st);
  char *on = tc_report_summary_tc(&st, 0, 0, 16), *off = tc_report_summary_tc(&st, 0, 0, 0);
  CHECK(on && strstr(on, "thread_cache:16: peak usage may exceed the true peak by the bytes cached"));
  CHECK(off && !strstr(off, "thread_cache"));
  CHECK(on && off && strlen(on) == strlen(off) + 78); /* one more line of the same width */
  free(on);
  free(off);
}

/* The simulated form in the what-if replay: 8 blocks of 1 MiB (four 2 MiB
 * small segments) freed, then 20 MiB (a 20 MiB segment). Default: peaks
 * 28 MiB reserved and 20 MiB allocated; under a limit of 20 MiB the free
 * small segments are released first, so min_limit is 20 MiB. Under
 * thread_cache:8 the 8 blocks stay cached: peak allocated 28 MiB (the
 * books'), and the search, which starts 8 MiB lower, still finds 20 MiB:
 * the OOM path flushes the cache, then releases the segments. */
static void test_whatif_row(void) {
  static tc_tsop ops[17];
  for (uint32_t k = 0; k < 8; k++) {
    ops[k] = (tc_tsop){.kind = HOP_ALLOC, .slot = k, .size = MiB};
    ops[8 + k] = (tc_tsop){.kind = HOP_FREE, .slot = k};
  }
  ops[16] = (tc_tsop){.kind = HOP_ALLOC, .slot = 8, .size = 20 * MiB};
  tc_tsnap h;
  memset(&h, 0, sizeof h);
  h.ops = ops;
  h.num_ops = 17;
  h.num_slots = 9;
  h.num_requests = 9;
  tc_alloc_config_default(&h.cfg);
  const char *confs[2] = {"", "thread_cache:8"};
  const uint64_t peak_alloc[2] = {20 * MiB, 28 * MiB};
  for (int v = 0; v < 2; v++) {
    tc_whatif_row w;
    memset(&w, 0, sizeof w);
    CHECK_OK(tc_alloc_config_parse(confs[v], &w.cfg));
    tcuda_whatif_options_t o = TCUDA_WHATIF_OPTIONS_INIT;
    o.capacity = 8 * GiB;
    tc_whatif_run_row("test", &h, &o, &w);
    CHECK_OK(w.st);
    CHECK_EQ_INT(w.res.peak_reserved, 28 * MiB);
    CHECK_EQ_INT(w.res.peak_allocated, peak_alloc[v]);
    CHECK_EQ_INT(w.have_min, 1);
    CHECK_EQ_INT(w.min_limit, 20 * MiB);
    tc_tsrun_result_free(&w.res);
  }
}

/* ------------------------------------------------------------------ */
/* 16 threads                                                           */

#define NT 16
#define LIVE 48
#define PHASES 3
#define OPS 6000

typedef struct {
  int id, ops, errors, ooms;
  uint64_t seed;
  uint64_t addr[LIVE], size[LIVE];
} worker_t;

static tc_backend *SIM;
static tc_alloc *A;
static worker_t W[NT];
static pthread_barrier_t bar;
static atomic_int g_stop;

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void *worker(void *arg) {
  worker_t *w = (worker_t *)arg;
  /* a quarter of the threads leave early, their caches full */
  int ops = w->id % 4 == 1 ? w->ops / 5 : w->ops;
  for (int op = 0; op < ops; op++) {
    uint64_t r = rnd(&w->seed);
    int k = (int)(r % LIVE);
    uint64_t stream = (r >> 8) % 3 == 0 ? 300 + (uint64_t)w->id : (r >> 12) % 2;
    if (w->addr[k]) {
      if ((r >> 20) % 16 == 0 && tc_alloc_record_stream(A, w->addr[k], 50)) w->errors++;
      if (tc_alloc_free(A, w->addr[k])) {
        printf("  free: %s\n", tcuda_last_error());
        w->errors++;
      }
      w->addr[k] = 0;
    } else {
      uint64_t sz = (r >> 24) % 8 == 0 ? 1 + (r >> 32) % (6 * MiB) : 1 + (r >> 32) % (256 * KiB);
      tcuda_status s = tc_alloc_malloc(A, sz, stream, &w->addr[k]);
      if (s == TCUDA_ERROR_OUT_OF_MEMORY) w->ooms++;
      else if (s) {
        printf("  malloc: %s\n", tcuda_last_error());
        w->errors++;
      }
      else w->size[k] = sz;
    }
    if ((r >> 44) % 1024 == 0) tc_backend_sim_complete_events(SIM);
    if ((r >> 54) % 2048 == 0 && tc_alloc_empty_cache(A)) w->errors++;
    if (op == ops / 2 && w->id % 4 != 1) {
      pthread_barrier_wait(&bar); /* main checks the live set */
      pthread_barrier_wait(&bar);
    }
  }
  if (w->id % 4 == 1) { /* left early: still counts at the barrier */
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
  }
  return NULL;
}

/* A reader during the churn: the users' view is consistent at every read. */
static void *reader(void *arg) {
  int *bad = (int *)arg;
  while (!atomic_load(&g_stop)) {
    tcuda_memory_stats_t s;
    tc_alloc_get_stats(A, &s);
    for (int p = 0; p < TCUDA_STAT_TYPES; p++) {
      const tcuda_stat_t *x = &s.allocated_bytes[p], *n = &s.allocation[p];
      if (x->current < 0 || x->current != x->allocated - x->freed || x->peak < x->current) ++*bad;
      if (n->current < 0 || n->current > NT * LIVE || n->current != n->allocated - n->freed) ++*bad;
      if (s.requested_bytes[p].current > s.active_bytes[p].current || x->current > s.active_bytes[p].current) ++*bad;
    }
  }
  return NULL;
}

/* The handles the workers hold: count, bytes, requested bytes. */
static int live_set(tc_check_handle *h, int64_t *bytes, int64_t *req) {
  int n = 0;
  *bytes = *req = 0;
  for (int i = 0; i < NT; i++)
    for (int k = 0; k < LIVE; k++)
      if (W[i].addr[k]) {
        uint64_t ba = 0, bs = 0;
        CHECK_OK(tc_alloc_block_info(A, W[i].addr[k], &ba, &bs, NULL, NULL));
        h[n].addr = W[i].addr[k];
        h[n++].size = W[i].size[k];
        *bytes += (int64_t)bs;
        *req += (int64_t)W[i].size[k];
      }
  return n;
}

static void check_users_view(void) {
  static tc_check_handle h[NT * LIVE];
  int64_t bytes, req;
  int n = live_set(h, &bytes, &req);
  tcuda_memory_stats_t s;
  tc_alloc_get_stats(A, &s);
  CHECK_EQ_INT(CUR(s.allocation[TCUDA_STAT_ALL]), n);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_ALL]), bytes);
  CHECK_EQ_INT(CUR(s.allocated_bytes[TCUDA_STAT_SMALL_POOL]) + CUR(s.allocated_bytes[TCUDA_STAT_LARGE_POOL]), bytes);
  CHECK(CUR(s.requested_bytes[TCUDA_STAT_ALL]) >= req); /* plus record_stream blocks pending */
}

static void run_stress(const char *conf) {
  tc_sim_options o = {0, TC_SIM_VA_DRIVER, NULL, 0};
  CHECK_OK(tc_backend_sim_create(&o, &SIM));
  tc_alloc_config cfg;
  CHECK_OK(tc_alloc_config_parse(conf, &cfg));
  CHECK_OK(tc_alloc_create(0, SIM, &cfg, 8 * GiB, &A));
  CHECK_OK(tc_alloc_set_memory_fraction(A, 0.04)); /* ~330 MiB: OOMs now and then */
  memset(W, 0, sizeof W);
  int total_ooms = 0;
  for (int ph = 0; ph < PHASES; ph++) {
    pthread_barrier_init(&bar, NULL, NT + 1);
    atomic_store(&g_stop, 0);
    int bad = 0;
    pthread_t th[NT], rd;
    pthread_create(&rd, NULL, reader, &bad);
    for (int i = 0; i < NT; i++) { /* the handles stay; new threads free the old ones */
      W[i].id = i + ph;
      W[i].ops = OPS;
      W[i].seed = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1 + 100 * ph);
      pthread_create(&th[i], NULL, worker, &W[i]);
    }
    pthread_barrier_wait(&bar);
    check_users_view(); /* threads mid-run, caches full */
    pthread_barrier_wait(&bar);
    for (int i = 0; i < NT; i++) {
      pthread_join(th[i], NULL);
      CHECK_EQ_INT(W[i].errors, 0);
      total_ooms += W[i].ooms;
    }
    atomic_store(&g_stop, 1);
    pthread_join(rd, NULL);
    CHECK_EQ_INT(bad, 0);
    pthread_barrier_destroy(&bar);
    /* every thread exited: their caches went back, so the books and the
     * users' view are the same, and both equal the recount */
    check_users_view();
    static tc_check_handle h[NT * LIVE];
    int64_t bytes, req;
    int n = live_set(h, &bytes, &req);
    check_books(A, SIM, conf, h, n, 0);
  }
  printf("  %s: %d OOMs\n", conf, total_ooms);
  CHECK(total_ooms > 0);
  for (int i = 0; i < NT; i++)
    for (int k = 0; k < LIVE; k++)
      if (W[i].addr[k]) CHECK_OK(tc_alloc_free(A, W[i].addr[k]));
  CHECK_OK(tc_alloc_empty_cache(A));
  tcuda_memory_stats_t s;
  tc_alloc_get_stats(A, &s);
  for (int p = 0; p < TCUDA_STAT_TYPES; p++) {
    CHECK_EQ_INT(CUR(s.allocated_bytes[p]), 0);
    CHECK_EQ_INT(CUR(s.requested_bytes[p]), 0);
    CHECK_EQ_INT(CUR(s.reserved_bytes[p]), 0);
  }
  CHECK_EQ_INT(tc_backend_sim_used(SIM), 0);
  tc_alloc_destroy(A);
  tc_backend_sim_destroy(SIM);
}

static void test_stress(void) { run_stress("thread_cache:8"); }
static void test_stress_expandable(void) { run_stress("thread_cache:32,expandable_segments:True"); }
static void test_stress_compact(void) { run_stress("thread_cache:4,policy:compact"); }

TC_MAIN(T(test_hit_and_stats), T(test_off_unchanged), T(test_not_cached), T(test_flush_empty_cache),
        T(test_flush_oom_first), T(test_flush_thread_exit), T(test_fork_child_flushes), T(test_flush_stream_gone), T(test_flush_capture),
        T(test_trace_bypasses), T(test_config_toggle), T(test_summary_header), T(test_whatif_row), T(test_stress),
        T(test_stress_expandable), T(test_stress_compact))
