/* History context ids (tcuda_history_set_thread_context and the
 * retain/release hooks that torch's glue uses to attach the Python frames
 * it gathered): the ids entries carry, the balance of retains and releases
 * through ring eviction, resizing and stopping, and the refusals. CPU only
 * (simulated allocator attached to device 0's history). */
#include "test_alloc_policy_util.h"
#include "inspect/history.h"
#include <pthread.h>

#define MAXID 64
static int held[MAXID];
static int retains, releases;
static void *seen_user;

static void ret(void *user, uint64_t id) {
  seen_user = user;
  retains++;
  if (id < MAXID) held[id]++;
}
static void rel(void *user, uint64_t id) {
  seen_user = user;
  releases++;
  if (id < MAXID) held[id]--;
}

static int total_held(void) {
  int t = 0;
  for (int i = 0; i < MAXID; i++) t += held[i];
  return t;
}

static void test_ids_and_balance(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  memset(held, 0, sizeof held);
  retains = releases = 0;
  int marker;
  CHECK_OK(tcuda_history_set_context_hooks(ret, rel, &marker));
  CHECK_OK(tc_history_record("t", 0, 1, 4, 0)); /* a ring of 4 entries */
  tc_history_attach(FX.a, 0, NULL);
  CHECK_EQ_INT(tcuda_history_set_thread_context(7), 0);
  uint64_t p = M(1000, 0); /* segment_alloc + alloc, both tagged 7 */
  CHECK_EQ_INT(tcuda_history_set_thread_context(0), 7);
  uint64_t q = M(1000, 0); /* alloc, untagged */
  tcuda_history_entry_t *e = NULL;
  size_t n = 0;
  CHECK_OK(tc_history_entries("t", 0, &e, &n));
  CHECK_EQ_INT(n, 3);
  if (n == 3) {
    CHECK_EQ_INT(e[0].action, TCUDA_HISTORY_SEGMENT_ALLOC);
    CHECK_EQ_INT(e[0].context, 7);
    CHECK_EQ_INT(e[1].action, TCUDA_HISTORY_ALLOC);
    CHECK_EQ_INT(e[1].context, 7);
    CHECK_EQ_INT(e[2].context, 0);
  }
  tcuda_memory_history_free(e);
  CHECK(seen_user == &marker);
  CHECK_EQ_INT(held[7], 2); /* one retain per entry holding the id */
  CHECK_ERR(tcuda_history_set_context_hooks(NULL, NULL, NULL), TCUDA_ERROR_INVALID_STATE, "still hold");
  /* the ring drops its oldest entries: their ids are released */
  tcuda_history_set_thread_context(9);
  CHECK_OK(tc_alloc_free(FX.a, p)); /* free_requested, free_completed: 9 */
  CHECK_OK(tc_alloc_free(FX.a, q)); /* two more: the ring holds only these four */
  tcuda_history_set_thread_context(0);
  CHECK_EQ_INT(held[7], 0);
  CHECK_EQ_INT(held[9], 4);
  /* shrinking keeps the newest entries and releases the others */
  CHECK_OK(tc_history_record("t", 0, 1, 2, 0));
  CHECK_EQ_INT(held[9], 2);
  CHECK_EQ_INT(retains - releases, total_held());
  /* stopping releases everything */
  tcuda_history_set_thread_context(11);
  (void)M(5000, 0);
  tcuda_history_set_thread_context(0);
  CHECK(held[11] > 0);
  CHECK_OK(tc_history_record("t", 0, 0, 0, 0));
  CHECK_EQ_INT(total_held(), 0);
  CHECK_EQ_INT(retains, releases);
  /* with nothing held the hooks may change; NULL hooks make ids plain tags */
  CHECK_OK(tcuda_history_set_context_hooks(NULL, NULL, NULL));
  CHECK_OK(tc_history_record("t", 0, 1, 0, 0));
  tcuda_history_set_thread_context(3);
  (void)M(6000, 0);
  tcuda_history_set_thread_context(0);
  CHECK_OK(tc_history_entries("t", 0, &e, &n));
  CHECK(n >= 1 && e[n - 1].context == 3);
  tcuda_memory_history_free(e);
  CHECK_EQ_INT(retains, releases); /* no hooks: nothing was retained */
  CHECK_OK(tc_history_record("t", 0, 0, 0, 0));
  tc_history_detach(FX.a);
  fx_teardown();
}

static void test_errors(void) {
  CHECK_ERR(tcuda_history_set_context_hooks(ret, NULL, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "both");
  CHECK_ERR(tcuda_history_set_context_hooks(NULL, rel, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_history_set_context_hooks");
  /* the id is per thread: a fresh thread starts with none */
  CHECK_EQ_INT(tcuda_history_set_thread_context(5), 0);
  CHECK_EQ_INT(tcuda_history_set_thread_context(0), 5);
}

/* Another thread's id does not leak into this thread's entries. */
static void *tagged_alloc(void *arg) {
  tcuda_history_set_thread_context(42);
  *(uint64_t *)arg = M(3000, 0);
  return NULL;
}

static void test_per_thread(void) {
  fx_setup("", TC_SIM_VA_ASCENDING, 0, 0);
  CHECK_OK(tc_history_record("t", 0, 1, 0, 0));
  tc_history_attach(FX.a, 0, NULL);
  uint64_t theirs = 0;
  pthread_t th;
  CHECK(pthread_create(&th, NULL, tagged_alloc, &theirs) == 0);
  pthread_join(th, NULL);
  uint64_t mine = M(3000, 0);
  tcuda_history_entry_t *e = NULL;
  size_t n = 0;
  CHECK_OK(tc_history_entries("t", 0, &e, &n));
  int seen_theirs = 0, seen_mine = 0;
  for (size_t i = 0; i < n; i++)
    if (e[i].action == TCUDA_HISTORY_ALLOC) {
      if (e[i].addr == theirs) {
        seen_theirs = 1;
        CHECK_EQ_INT(e[i].context, 42);
      }
      if (e[i].addr == mine) {
        seen_mine = 1;
        CHECK_EQ_INT(e[i].context, 0);
      }
    }
  CHECK(seen_theirs && seen_mine);
  tcuda_memory_history_free(e);
  CHECK_OK(tc_history_record("t", 0, 0, 0, 0));
  tc_history_detach(FX.a);
  fx_teardown();
}

TC_MAIN(T(test_ids_and_balance), T(test_errors), T(test_per_thread))
