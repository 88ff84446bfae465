/* The caching allocator under injected CUDA failures: cudaMalloc of a
 * segment (once: torch's flush-and-retry succeeds; always: the OOM error),
 * with live blocks around and with the lock released around cudaMalloc;
 * cuMemCreate and cuMemMap of expandable segments (a failure part way
 * through a map gives back the granules already mapped); the event recorded
 * for a record_stream free; one thread of eight whose every cudaMalloc
 * fails; and TCUDA_FAULT arming a fresh process. After each fault: the
 * allocator's self-check, stats recounted from the snapshot, the caller's
 * status and message, and nothing reserved once all is freed. */
#include "fault_util.h"
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_segment_alloc_once(void) {
  clean_start();
  tcuda_memory_stats_t s0 = stats_of(0);
  tc_fault_arm(TC_FAULT_SEGMENT_ALLOC, 1, 1);
  void *p = NULL;
  /* the first cudaMalloc fails; the retry after flushing the cache works */
  CHECK_OK(tcuda_malloc(&p, 3 * MiB));
  CHECK(p != NULL);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_SEGMENT_ALLOC), 1);
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_SEGMENT_ALLOC), 2);
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_alloc_retries - s0.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_sync_all_streams - s0.num_sync_all_streams, 1);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 0);
  CHECK_EQ_INT(s.num_device_alloc - s0.num_device_alloc, 1);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_LARGE_POOL]), 20 * MiB);
  CHECK(fill_and_check(p, 3 * MiB, 0x5a));
  CHECK_ALLOC(0, 1);
  CHECK_OK(tcuda_free(p));
  CHECK_ALLOC(0, 0);
  clean_end();
}

static void test_segment_alloc_always(void) {
  clean_start();
  void *w = NULL;
  CHECK_OK(tcuda_malloc(&w, 4096)); /* a cached small segment, for the flush to release */
  CHECK_OK(tcuda_free(w));
  tcuda_memory_stats_t s0 = stats_of(0);
  tc_fault_arm(TC_FAULT_SEGMENT_ALLOC, 1, TC_FAULT_FOREVER);
  void *p = (void *)1;
  CHECK_ERR(tcuda_malloc(&p, 50 * MiB), TCUDA_ERROR_OUT_OF_MEMORY,
            "tcuda_malloc: CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a total capacity of ");
  CHECK(strstr(tcuda_last_error(), "Of the allocated memory 0 bytes is allocated by tcuda"));
  CHECK(p == NULL);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_SEGMENT_ALLOC), 2); /* the call and its retry */
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 1);
  CHECK_EQ_INT(s.num_alloc_retries - s0.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_device_alloc - s0.num_device_alloc, 0);
  CHECK_EQ_INT(s.num_device_free - s0.num_device_free, 1); /* the flush released the cached segment */
  CHECK_EQ_INT(reserved_of(0), 0);
  CHECK_ALLOC(0, 0);
  /* the small pool fails the same way */
  CHECK_ERR(tcuda_malloc(&p, 1000), TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory. Tried to allocate 2.00 MiB");
  CHECK(p == NULL);
  CHECK_ALLOC(0, 0);
  CHECK(cudaGetLastError() == cudaSuccess);
  /* and works again once disarmed */
  tc_fault_reset();
  CHECK_OK(tcuda_malloc(&p, 50 * MiB));
  CHECK(fill_and_check(p, 50 * MiB, 0x17));
  CHECK_OK(tcuda_free(p));
  clean_end();
}

/* A failure among live blocks leaves them, and their data, alone. */
static void test_segment_alloc_nth_with_live_blocks(void) {
  clean_start();
  tc_fault_arm(TC_FAULT_SEGMENT_ALLOC, 3, 2); /* the third allocation and its retry */
  void *p1 = NULL, *p2 = NULL, *p3 = (void *)1;
  CHECK_OK(tcuda_malloc(&p1, 25 * MiB));
  CHECK_OK(tcuda_malloc(&p2, 25 * MiB));
  CHECK(fill_and_check(p1, 25 * MiB, 0x11));
  CHECK(fill_and_check(p2, 25 * MiB, 0x22));
  tcuda_memory_stats_t s0 = stats_of(0);
  CHECK_ERR(tcuda_malloc(&p3, 25 * MiB), TCUDA_ERROR_OUT_OF_MEMORY,
            "CUDA out of memory. Tried to allocate 26.00 MiB");
  /* the message counts what the live blocks hold */
  CHECK(strstr(tcuda_last_error(), "Of the allocated memory 52.00 MiB is allocated by tcuda, and 0 bytes is "
                                   "reserved by tcuda but unallocated"));
  CHECK(p3 == NULL);
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 1);
  CHECK_EQ_INT(s.num_device_free - s0.num_device_free, 0); /* live segments stay */
  CHECK_EQ_INT(CUR(s.segment[TCUDA_STAT_LARGE_POOL]), 2);
  CHECK_ALLOC(0, 2);
  CHECK(still(p1, 25 * MiB, 0x11));
  CHECK(still(p2, 25 * MiB, 0x22));
  CHECK_OK(tcuda_malloc(&p3, 25 * MiB)); /* the fifth cudaMalloc works */
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_SEGMENT_ALLOC), 5);
  CHECK_ALLOC(0, 3);
  CHECK_OK(tcuda_free(p1));
  CHECK_OK(tcuda_free(p2));
  CHECK_OK(tcuda_free(p3));
  clean_end();
}

/* release_lock_on_cudamalloc: the lock is dropped around cudaMalloc, and
 * the failure comes back with it retaken. */
static void test_segment_alloc_unlocked(void) {
  clean_start();
  CHECK_OK(tcuda_allocator_set_config("release_lock_on_cudamalloc:True"));
  tc_fault_arm(TC_FAULT_SEGMENT_ALLOC, 1, TC_FAULT_FOREVER);
  void *p = (void *)1;
  CHECK_ERR(tcuda_malloc(&p, 4 * MiB), TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory. Tried to allocate 20.00 MiB");
  CHECK(p == NULL);
  CHECK_ALLOC(0, 0);
  tc_fault_arm(TC_FAULT_SEGMENT_ALLOC, 1, 1);
  CHECK_OK(tcuda_malloc(&p, 4 * MiB)); /* fails once, the retry works */
  CHECK_ALLOC(0, 1);
  CHECK_OK(tcuda_free(p));
  CHECK_OK(tcuda_allocator_set_config("release_lock_on_cudamalloc:False"));
  clean_end();
}

/* ---- expandable segments ---- */

static void expandable_on(void) {
  CHECK_OK(tcuda_allocator_set_config("expandable_segments:True"));
  /* once without faults, so the driver's VMM paths have run before the
   * device's free memory is taken as the baseline */
  void *w = NULL;
  CHECK_OK(tcuda_malloc(&w, 30 * MiB));
  CHECK(fill_and_check(w, 30 * MiB, 0)); /* and the memset and copy the tests use */
  CHECK_OK(tcuda_free(w));
  CHECK_OK(tcuda_empty_cache());
}

static void expandable_off(void) { CHECK_OK(tcuda_allocator_set_config("expandable_segments:False")); }

/* Mapping 30 MiB takes two 20 MiB pages, made of 2 MiB granules (the
 * minimum granularity of current GPUs), so the 9th cuMemCreate is inside
 * the first map call: the 8 granules mapped before it must be unmapped. */
static void test_mem_create_once(void) {
  clean_start();
  expandable_on();
  size_t free0 = device_free();
  tcuda_memory_stats_t s0 = stats_of(0);
  tc_fault_arm(TC_FAULT_MEM_CREATE, 9, 1);
  void *p = NULL;
  CHECK_OK(tcuda_malloc(&p, 30 * MiB)); /* OOM, flush, retry */
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_MEM_CREATE), 1);
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_alloc_retries - s0.num_alloc_retries, 1);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 0);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_LARGE_POOL]), 40 * MiB);
  CHECK(fill_and_check(p, 30 * MiB, 0x33));
  CHECK_ALLOC(0, 1);
  CHECK_OK(tcuda_free(p));
  CHECK_OK(tcuda_empty_cache());
  CHECK(device_free() + 8 * MiB >= free0); /* the granules of the failed map went back */
  expandable_off();
  clean_end();
}

static void test_mem_create_always(void) {
  clean_start();
  expandable_on();
  size_t free0 = device_free();
  tcuda_memory_stats_t s0 = stats_of(0);
  tc_fault_arm(TC_FAULT_MEM_CREATE, 5, TC_FAULT_FOREVER);
  void *p = (void *)1;
  CHECK_ERR(tcuda_malloc(&p, 30 * MiB), TCUDA_ERROR_OUT_OF_MEMORY,
            "tcuda_malloc: CUDA out of memory. Tried to allocate 30.00 MiB");
  CHECK(p == NULL);
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 1);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 0); /* nothing stays mapped */
  CHECK_ALLOC(0, 0);
  CHECK(device_free() + 8 * MiB >= free0);
  tc_fault_reset();
  CHECK_OK(tcuda_malloc(&p, 30 * MiB)); /* the reserved address range is used again */
  CHECK(fill_and_check(p, 30 * MiB, 0x44));
  CHECK_ALLOC(0, 1);
  CHECK_OK(tcuda_free(p));
  expandable_off();
  clean_end();
}

/* cuMemMap failing is a hard error, not OOM: no retry, the error names the
 * call, and the granules mapped before it are unmapped. */
static void test_mem_map_error(void) {
  clean_start();
  expandable_on();
  size_t free0 = device_free();
  tcuda_memory_stats_t s0 = stats_of(0);
  tc_fault_arm(TC_FAULT_MEM_MAP, 5, 1);
  void *p = (void *)1;
  CHECK_ERR(tcuda_malloc(&p, 30 * MiB), TCUDA_ERROR_CUDA,
            "tcuda_malloc: tcuda allocator: cuMemMap failed: CUDA_ERROR_INVALID_VALUE");
  CHECK(p == NULL);
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_MEM_MAP), 5);
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_alloc_retries - s0.num_alloc_retries, 0);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 0);
  CHECK_EQ_INT(s.num_device_alloc - s0.num_device_alloc, 0);
  CHECK_EQ_INT(reserved_of(0), 0);
  CHECK_ALLOC(0, 0);
  CHECK(device_free() + 8 * MiB >= free0);
  CHECK_OK(tcuda_malloc(&p, 30 * MiB)); /* the point fired once */
  CHECK(fill_and_check(p, 30 * MiB, 0x55));
  CHECK_ALLOC(0, 1);
  CHECK_OK(tcuda_free(p));
  expandable_off();
  clean_end();
}

/* ---- the event of a record_stream free ---- */

static void test_alloc_event_record(void) {
  clean_start();
  tcuda_stream_t s1, s2;
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s1));
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s2));
  void *p = NULL, *q = NULL;
  CHECK_OK(tcuda_malloc(&p, 4096));
  CHECK_OK(tcuda_record_stream(p, s1));
  CHECK_OK(tcuda_record_stream(p, s2));
  /* the second of the two events fails: the first is taken back, and the
   * block stays allocated (all or nothing) */
  tc_fault_arm(TC_FAULT_ALLOC_EVENT, 2, 1);
  CHECK_ERR(tcuda_free(p), TCUDA_ERROR_CUDA,
            "tcuda_free: tcuda allocator: cudaEventRecord failed: cudaErrorInvalidResourceHandle");
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_ALLOC_EVENT), 1);
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(CUR(s.allocation[TCUDA_STAT_ALL]), 1);
  CHECK_EQ_INT(CUR(s.active[TCUDA_STAT_ALL]), 1);
  CHECK_ALLOC(0, 1);
  /* freeing again works: both events recorded, the block pending */
  CHECK_OK(tcuda_free(p));
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_ALLOC_EVENT), 4);
  s = stats_of(0);
  CHECK_EQ_INT(CUR(s.allocation[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(CUR(s.active[TCUDA_STAT_ALL]), 1);
  CHECK_ALLOC(0, 0);
  CHECK_OK(tcuda_stream_synchronize(s1));
  CHECK_OK(tcuda_stream_synchronize(s2));
  CHECK_OK(tcuda_malloc(&q, 4096)); /* the events are done: the block is reused */
  CHECK(q == p);
  CHECK_ALLOC(0, 1);
  CHECK_OK(tcuda_free(q));
  CHECK_OK(tcuda_stream_destroy(s1));
  CHECK_OK(tcuda_stream_destroy(s2));
  clean_end();
}

/* ---- eight threads, one of which cannot get device memory ---- */

enum { NTHREADS = 8, ROUNDS = 200, HELD = 4 };
typedef struct {
  int id;
  tcuda_stream_t stream;
  int ok, oom, wrong;
  char first_wrong[256];
} worker;

static pthread_barrier_t g_bar;
static const size_t g_sizes[] = {512, 4096, 1 << 20, 3 << 20, 12 << 20};

static void note_wrong(worker *w, const char *what) {
  if (!w->wrong++) snprintf(w->first_wrong, sizeof w->first_wrong, "%s: %s", what, tcuda_last_error());
}

/* Each thread allocates on its own stream, so thread 0 never finds a cached
 * block and every one of its calls asks cudaMalloc, which fails for it
 * alone (a thread arm): the outcome of each call is known in advance. */
static void *work(void *arg) {
  worker *w = (worker *)arg;
  if (tcuda_set_device(0)) note_wrong(w, "set_device");
  if (w->id == 0) tc_fault_arm_thread(TC_FAULT_SEGMENT_ALLOC, 1, TC_FAULT_FOREVER);
  pthread_barrier_wait(&g_bar);
  void *held[HELD] = {0};
  for (int r = 0; r < ROUNDS; r++) {
    int k = r % HELD;
    if (held[k] && tcuda_free(held[k])) note_wrong(w, "free");
    held[k] = NULL;
    void *p = (void *)1;
    tcuda_status s = tcuda_malloc_on(&p, g_sizes[(size_t)(r + w->id) % (sizeof g_sizes / sizeof *g_sizes)], 0,
                                     w->stream);
    if (w->id == 0) {
      if (s == TCUDA_ERROR_OUT_OF_MEMORY && !p && strstr(tcuda_last_error(), "tcuda_malloc_on: CUDA out of memory"))
        w->oom++;
      else
        note_wrong(w, "thread 0's malloc did not fail with OOM");
    } else if (s == TCUDA_SUCCESS && p) {
      held[k] = p;
      w->ok++;
    } else {
      note_wrong(w, "malloc");
    }
  }
  for (int k = 0; k < HELD; k++)
    if (held[k] && tcuda_free(held[k])) note_wrong(w, "free");
  return NULL;
}

static void test_threads_one_failing(void) {
  clean_start();
  tcuda_memory_stats_t s0 = stats_of(0);
  worker w[NTHREADS];
  pthread_t t[NTHREADS];
  CHECK(pthread_barrier_init(&g_bar, NULL, NTHREADS) == 0);
  for (int i = 0; i < NTHREADS; i++) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].id = i;
    CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &w[i].stream));
  }
  for (int i = 0; i < NTHREADS; i++) CHECK(pthread_create(&t[i], NULL, work, &w[i]) == 0);
  for (int i = 0; i < NTHREADS; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&g_bar);
  for (int i = 0; i < NTHREADS; i++) {
    if (w[i].wrong) fprintf(stderr, "thread %d: %d wrong, first: %s\n", i, w[i].wrong, w[i].first_wrong);
    CHECK_EQ_INT(w[i].wrong, 0);
    CHECK_EQ_INT(w[i].ok, i == 0 ? 0 : ROUNDS);
    CHECK_EQ_INT(w[i].oom, i == 0 ? ROUNDS : 0);
  }
  /* each of thread 0's calls asked twice (the call and the retry after the
   * flush); no other thread's cudaMalloc failed */
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_SEGMENT_ALLOC), 2 * ROUNDS);
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, ROUNDS);
  CHECK_ALLOC(0, 0);
  for (int i = 0; i < NTHREADS; i++) CHECK_OK(tcuda_stream_destroy(w[i].stream));
  clean_end();
}

/* ---- TCUDA_FAULT in the environment of a test build ---- */

static int env_child(void) {
  if (tc_fault_env_error()) return 1;
  if (tcuda_set_device(0)) return 2;
  void *p = (void *)1;
  if (tcuda_malloc(&p, MiB) != TCUDA_ERROR_OUT_OF_MEMORY || p) return 3;
  if (!strstr(tcuda_last_error(), "CUDA out of memory")) return 4;
  if (tc_fault_fired(TC_FAULT_SEGMENT_ALLOC) != 2) return 5;
  tc_fault_reset();
  if (tcuda_malloc(&p, MiB) || tcuda_free(p)) return 6;
  return 0;
}

static void test_environment_arms(void) {
  tc_require_gpu();
  fflush(stdout);
  /* this process read TCUDA_FAULT long ago: setting it now arms the child only */
  setenv("TCUDA_FAULT", "segment_alloc:1:-1", 1);
  pid_t pid = fork();
  if (pid == 0) { /* exec: a child forked after CUDA init cannot use CUDA */
    execl("/proc/self/exe", "fault_test_alloc", "--env-child", (char *)NULL);
    _exit(127);
  }
  unsetenv("TCUDA_FAULT");
  int st = 0;
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK_EQ_INT(WEXITSTATUS(st), 0);
  clean_start(); /* this process is not armed */
  void *p = NULL;
  CHECK_OK(tcuda_malloc(&p, MiB));
  CHECK_OK(tcuda_free(p));
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_SEGMENT_ALLOC), 0);
  clean_end();
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "--env-child")) return env_child();
  tc_require_gpu();
  static const tc_test tests[] = {T(test_segment_alloc_once),   T(test_segment_alloc_always),
                                  T(test_segment_alloc_nth_with_live_blocks), T(test_segment_alloc_unlocked),
                                  T(test_mem_create_once),      T(test_mem_create_always),
                                  T(test_mem_map_error),        T(test_alloc_event_record),
                                  T(test_threads_one_failing),  T(test_environment_arms)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
