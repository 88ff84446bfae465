/* The allocator's hook registry (src/alloc/hooks.h) without a GPU: the
 * free hook takes pointers over before the allocator sees them, reclaim
 * hooks add up, OOM hooks' notes join the message, and registration
 * refuses what it cannot hold. History registers its hooks itself, when
 * it is loaded: nothing here registers them. */
#define _GNU_SOURCE
#include "harness.h"
#include "alloc/alloc.h"
#include "alloc/hooks.h"
#include <pthread.h>
#include <unistd.h>

static int g_taken;
static char g_mine[16];
static int take_mine(void *ptr) {
  if (ptr != (void *)g_mine) return 0;
  g_taken++;
  return 1;
}
static int other_free_hook(void *ptr) { return ptr != NULL; }

static void test_free_hook(void) {
  int x;
  CHECK_ERR(tcuda_free(g_mine), TCUDA_ERROR_INVALID_POINTER, "tcuda_free: pointer");
  CHECK_ERR(tc_hook_on_free(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "fn is NULL");
  CHECK_OK(tc_hook_on_free(take_mine));
  CHECK_OK(tc_hook_on_free(take_mine)); /* again: a no-op */
  CHECK_ERR(tc_hook_on_free(other_free_hook), TCUDA_ERROR_INVALID_STATE, "another free hook");
  CHECK_OK(tcuda_free(g_mine)); /* taken over: the allocator never sees it */
  CHECK_EQ_INT(g_taken, 1);
  CHECK_ERR(tcuda_free(&x), TCUDA_ERROR_INVALID_POINTER, "tcuda_free: pointer"); /* passed on */
  CHECK_EQ_INT(g_taken, 1);
  CHECK_OK(tcuda_free(NULL)); /* never reaches the hook */
  CHECK_EQ_INT(g_taken, 1);
}

static int g_r1, g_r2;
static int reclaim_two(void) { return g_r1++, 2; }
static int reclaim_none(void) { return g_r2++, 0; }

static void test_reclaim_hooks(void) {
  CHECK_EQ_INT(tc_hooks_reclaim(), 0);
  CHECK_OK(tc_hook_on_reclaim(reclaim_none));
  CHECK_EQ_INT(tc_hooks_reclaim(), 0);
  CHECK_OK(tc_hook_on_reclaim(reclaim_two));
  CHECK_OK(tc_hook_on_reclaim(reclaim_two));
  CHECK_EQ_INT(tc_hooks_reclaim(), 2); /* each hook once */
  CHECK_EQ_INT(g_r1, 1);
  CHECK_EQ_INT(g_r2, 2);
}

static tc_alloc *g_created_a;
static int g_created_dev = -1, g_created_calls;
static void on_created(tc_alloc *a, int device, int64_t (*stream_id)(uint64_t)) {
  (void)stream_id;
  g_created_a = a;
  g_created_dev = device;
  g_created_calls++;
}

static void test_created_hooks(void) {
  CHECK_ERR(tc_hook_on_created(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "fn is NULL");
  CHECK_OK(tc_hook_on_created(on_created));
  /* a real allocator: history's hook attaches to it too, and keeps it */
  tc_backend *be = NULL;
  tc_alloc *a = NULL;
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  CHECK_OK(tc_backend_sim_create(NULL, &be));
  CHECK_OK(tc_alloc_create(5, be, &cfg, 1ull << 34, &a));
  tc_hooks_created(a, 5, NULL);
  CHECK(g_created_a == a);
  CHECK_EQ_INT(g_created_dev, 5);
  CHECK_EQ_INT(g_created_calls, 1);
}

static const char *note_a(int d, size_t r) { return (void)d, (void)r, "; note a"; }
static const char *note_none(int d, size_t r) { return (void)d, (void)r, ""; }
static char g_seen_msg[512];
static void observer(void *user, int device, size_t requested, const tcuda_memory_stats_t *st) {
  (void)user, (void)device, (void)requested, (void)st;
  snprintf(g_seen_msg, sizeof g_seen_msg, "%s", tcuda_last_error());
  tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "observer's own error");
}

static void test_oom_notes(void) {
  unsetenv("TCUDA_OOM_SNAPSHOT");
  int id = 0;
  CHECK_OK(tc_hook_on_oom(note_none));
  CHECK_OK(tc_hook_on_oom(note_a));
  CHECK_OK(tcuda_oom_observer_add(observer, NULL, &id));
  tc_error(TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory (test)");
  tc_hooks_oom(NULL, 0, 100);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_ERROR_OUT_OF_MEMORY);
  CHECK(!strcmp(tcuda_last_error(), "CUDA out of memory (test); note a"));
  CHECK(!strcmp(g_seen_msg, "CUDA out of memory (test); note a")); /* observers see the notes */

  /* history's hook came first, registered when history was loaded (this
   * program names a history function, so the static library gives it) */
  CHECK(!strcmp(tcuda_history_action_name(TCUDA_HISTORY_OOM), "oom"));
  char path[] = "/tmp/tc_hooks_oom_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  setenv("TCUDA_OOM_SNAPSHOT", path, 1);
  tc_error(TCUDA_ERROR_OUT_OF_MEMORY, "CUDA out of memory (test)");
  tc_hooks_oom(NULL, 0, 100);
  char want[256];
  snprintf(want, sizeof want, "CUDA out of memory (test); memory snapshot written to %s; note a", path);
  CHECK(!strcmp(tcuda_last_error(), want));
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_ERROR_OUT_OF_MEMORY);
  CHECK(access(path, F_OK) == 0);
  unlink(path);
  unsetenv("TCUDA_OOM_SNAPSHOT");
  CHECK_OK(tcuda_oom_observer_remove(id));
}

/* Registration while another thread raises: raisers take no lock, so they
 * see each slot either empty or whole (the TSan build checks this). */
static int r0(void) { return 0; }
static int r1(void) { return 0; }
static int r2(void) { return 0; }
static int r3(void) { return 0; }
static int r4(void) { return 0; }
static int r5(void) { return 0; }
static int r6(void) { return 0; }
static void *register_some(void *arg) {
  (void)arg;
  tc_reclaim_hook fns[] = {r0, r1, r2, r3};
  for (int i = 0; i < 4; i++) CHECK_OK(tc_hook_on_reclaim(fns[i]));
  return NULL;
}

static void test_register_while_raising(void) {
  pthread_t t;
  CHECK_EQ_INT(pthread_create(&t, NULL, register_some, NULL), 0);
  int freed = 0;
  for (int i = 0; i < 20000; i++) freed += tc_hooks_reclaim();
  pthread_join(t, NULL);
  CHECK_EQ_INT(freed, 20000 * 2); /* reclaim_two, registered before, every time */
  /* 8 of a kind at most: two more fit, the next is refused */
  CHECK_OK(tc_hook_on_reclaim(r4));
  CHECK_OK(tc_hook_on_reclaim(r5));
  CHECK_ERR(tc_hook_on_reclaim(r6), TCUDA_ERROR_INVALID_STATE, "tc_hook_on_reclaim: 8 hooks already");
  CHECK_OK(tc_hook_on_reclaim(r5)); /* one it has: still a no-op */
  CHECK_EQ_INT(tc_hooks_reclaim(), 2);
}

TC_MAIN(T(test_free_hook), T(test_reclaim_hooks), T(test_created_hooks), T(test_oom_notes),
        T(test_register_while_raising))
