/* fork() after CUDA init: the child cannot use CUDA, and every tcuda call
 * that would reach it fails with TCUDA_ERROR_FORKED and a message saying
 * why, without crashing; the parent's allocator (live blocks, cached
 * segments, a record_stream free) is untouched by anything the child did. */
#include "fault_util.h"
#include <sys/wait.h>
#include <unistd.h>

#define FORK_MSG "cannot re-initialise CUDA in a forked child"

static void *g_live;     /* allocated in the parent before the fork */
static tcuda_stream_t g_stream;
static tcuda_event_t *g_event;

/* 0 when the call failed with FORKED and a message naming func. */
static int forked_error(tcuda_status s, const char *func) {
  if (s != TCUDA_ERROR_FORKED) {
    fprintf(stderr, "child: %s -> %s (%s), expected TCUDA_ERROR_FORKED\n", func, tcuda_status_name(s),
            tcuda_last_error());
    return 1;
  }
  if (!strstr(tcuda_last_error(), func) || !strstr(tcuda_last_error(), FORK_MSG)) {
    fprintf(stderr, "child: %s: message '%s'\n", func, tcuda_last_error());
    return 1;
  }
  return 0;
}

/* The child's exit code: the number of calls that did not fail cleanly. */
static int child_calls(void) {
  int bad = 0;
  bad += forked_error(tcuda_init(), "tcuda_init");
  void *p = (void *)1;
  bad += forked_error(tcuda_malloc(&p, 1024), "tcuda_malloc");
  bad += p != NULL;
  p = (void *)1;
  bad += forked_error(tcuda_malloc_on(&p, 1024, 0, g_stream), "tcuda_malloc_on");
  bad += p != NULL;
  tcuda_memory_stats_t st;
  bad += forked_error(tcuda_memory_stats(0, &st), "tcuda_memory_stats");
  bad += forked_error(tcuda_empty_cache(), "tcuda_empty_cache");
  bad += forked_error(tcuda_record_stream(g_live, g_stream), "tcuda_record_stream");
  tcuda_stream_t s;
  bad += forked_error(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s), "tcuda_stream_create");
  bad += forked_error(tcuda_stream_from_pool(0, 0, &s), "tcuda_stream_from_pool");
  bad += forked_error(tcuda_stream_synchronize(g_stream), "tcuda_stream_synchronize");
  bad += forked_error(tcuda_event_record(g_event, &g_stream), "tcuda_event_record");
  bad += forked_error(tcuda_synchronize(0), "tcuda_synchronize");
  bad += tcuda_is_initialized() != 0;
  bad += tcuda_is_available() != 0;
  bad += tcuda_device_count() != 0;
  bad += strstr(tcuda_unavailable_reason(), "forked child") == NULL;
  /* A free of the parent's pointer changes only the child's copy of the
   * books (no CUDA call): either outcome is clean, neither reaches the
   * parent. */
  tcuda_status fs = tcuda_free(g_live);
  bad += fs != TCUDA_SUCCESS && fs != TCUDA_ERROR_FORKED;
  tcuda_event_destroy(g_event); /* must not call CUDA here either */
  return bad > 100 ? 100 : bad;
}

static void test_fork_after_init(void) {
  clean_start();
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &g_stream));
  CHECK_OK(tcuda_event_create(TCUDA_EVENT_DEFAULT, &g_event));
  CHECK_OK(tcuda_event_record(g_event, &g_stream));
  void *cached = NULL, *pending = NULL;
  CHECK_OK(tcuda_malloc(&g_live, 3 * MiB));
  CHECK(fill_and_check(g_live, 3 * MiB, 0x3c));
  CHECK_OK(tcuda_malloc(&cached, 4096));
  CHECK_OK(tcuda_free(cached)); /* a cached segment the child must not cudaFree */
  CHECK_OK(tcuda_malloc(&pending, 4096));
  CHECK_OK(tcuda_record_stream(pending, g_stream));
  CHECK_OK(tcuda_free(pending)); /* an event in the allocator's queue */
  tcuda_memory_stats_t before = stats_of(0);

  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) _exit(child_calls()); /* _exit: no atexit handler runs CUDA code */
  int st = 0;
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st)); /* no crash */
  CHECK_EQ_INT(WEXITSTATUS(st), 0);

  /* the parent goes on as if nothing happened */
  tcuda_memory_stats_t after = stats_of(0);
  CHECK(!memcmp(&before, &after, sizeof before));
  CHECK_ALLOC(0, 1);
  CHECK(still(g_live, 3 * MiB, 0x3c));
  CHECK_OK(tcuda_event_synchronize(g_event));
  CHECK_OK(tcuda_stream_synchronize(g_stream));
  void *p = NULL;
  CHECK_OK(tcuda_malloc(&p, 4096));
  CHECK_OK(tcuda_free(p));
  CHECK_OK(tcuda_free(g_live));
  tcuda_event_destroy(g_event);
  CHECK_OK(tcuda_stream_destroy(g_stream));
  clean_end();
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(test_fork_after_init)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
