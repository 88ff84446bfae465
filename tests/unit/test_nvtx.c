/* NVTX wrappers: depth bookkeeping per thread and every error path. Works
 * with no profiler attached (NVTX calls are then no-ops). */
#include "harness.h"
#include <pthread.h>

static void depth_per_thread(void) {
  CHECK_EQ_INT(tcuda_nvtx_range_push("a"), 0);
  CHECK_EQ_INT(tcuda_nvtx_range_push("b"), 1);
  CHECK_EQ_INT(tcuda_nvtx_range_push("c"), 2);
  CHECK_EQ_INT(tcuda_nvtx_range_pop(), 2);
  CHECK_EQ_INT(tcuda_nvtx_range_pop(), 1);
  CHECK_EQ_INT(tcuda_nvtx_range_push("b2"), 1);
  CHECK_EQ_INT(tcuda_nvtx_range_pop(), 1);
  CHECK_EQ_INT(tcuda_nvtx_range_pop(), 0);
  CHECK(tcuda_nvtx_range_pop() < 0);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_ERROR_INVALID_STATE);
  CHECK(strstr(tcuda_last_error(), "no range is open") != NULL);
}

static void *other_thread(void *arg) {
  int *r = arg;
  r[0] = tcuda_nvtx_range_push("t"); /* its own depth starts at 0 */
  r[1] = tcuda_nvtx_range_pop();
  r[2] = tcuda_nvtx_range_pop(); /* nothing open on this thread */
  return NULL;
}

static void threads_have_own_depth(void) {
  CHECK_EQ_INT(tcuda_nvtx_range_push("main"), 0);
  int r[3] = {9, 9, 9};
  pthread_t t;
  pthread_create(&t, NULL, other_thread, r);
  pthread_join(t, NULL);
  CHECK_EQ_INT(r[0], 0);
  CHECK_EQ_INT(r[1], 0);
  CHECK(r[2] < 0);
  CHECK_EQ_INT(tcuda_nvtx_range_pop(), 0);
}

static void null_messages(void) {
  CHECK(tcuda_nvtx_range_push(NULL) < 0);
  CHECK(strstr(tcuda_last_error(), "tcuda_nvtx_range_push: msg is NULL") != NULL);
  CHECK(tcuda_nvtx_range_pop() < 0); /* the failed push opened nothing */
  CHECK_ERR(tcuda_nvtx_mark(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_nvtx_mark: msg is NULL");
  CHECK_OK(tcuda_nvtx_mark("hello"));
  uint64_t id;
  CHECK_ERR(tcuda_nvtx_range_start(NULL, &id), TCUDA_ERROR_INVALID_ARGUMENT, "msg is NULL");
  CHECK_ERR(tcuda_nvtx_range_start("x", NULL), TCUDA_ERROR_INVALID_ARGUMENT, "id is NULL");
}

typedef struct { uint64_t id; tcuda_status st; } end_arg;
static void *end_elsewhere(void *p) {
  end_arg *a = p;
  a->st = tcuda_nvtx_range_end(a->id);
  return NULL;
}

static void id_ranges_cross_threads(void) {
  uint64_t a, b;
  CHECK_OK(tcuda_nvtx_range_start("a", &a));
  CHECK_OK(tcuda_nvtx_range_start("b", &b));
  CHECK(a != b);
  /* end `a` on another thread */
  end_arg arg = {a, TCUDA_ERROR_INTERNAL};
  pthread_t t;
  pthread_create(&t, NULL, end_elsewhere, &arg);
  pthread_join(t, NULL);
  CHECK_EQ_INT(arg.st, TCUDA_SUCCESS);
  CHECK_ERR(tcuda_nvtx_range_end(a), TCUDA_ERROR_INVALID_ARGUMENT, "is not an open range"); /* twice */
  CHECK_ERR(tcuda_nvtx_range_end(12345678), TCUDA_ERROR_INVALID_ARGUMENT, "id 12345678");
  CHECK_OK(tcuda_nvtx_range_end(b));
}

#include "core/annotate.h"
#include <stdlib.h>

/* TCUDA_NVTX=1 turns tcuda's own ranges on; they must not disturb the
 * user's push/pop depth. */
static void library_annotations(void) {
  setenv("TCUDA_NVTX", "0", 1);
  CHECK_EQ_INT(tc_annotate_check(), 0);
  setenv("TCUDA_NVTX", "1", 1);
  CHECK_EQ_INT(tc_annotate_check(), 1);
  CHECK_EQ_INT(tcuda_nvtx_range_push("user"), 0);
  {
    TC_ANNOTATE_BEGIN("tcuda: inner");
    CHECK(tc_ann_on_);
    TC_ANNOTATE_END();
  }
  CHECK_OK(tcuda_empty_cache()); /* annotated; no allocators here, so nothing else */
  CHECK_EQ_INT(tcuda_nvtx_range_pop(), 0);
  unsetenv("TCUDA_NVTX");
  CHECK_EQ_INT(tc_annotate_check(), 0);
}

TC_MAIN(T(library_annotations), T(depth_per_thread), T(threads_have_own_depth), T(null_messages), T(id_ranges_cross_threads))
