/* The allocator's hook registry (src/alloc/hooks.h) without a GPU: the
 * free hook takes pointers over before the allocator sees them, reclaim
 * hooks add up, and registration refuses what it cannot hold. */
#include "harness.h"
#include "alloc/alloc.h"
#include "alloc/hooks.h"

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

TC_MAIN(T(test_free_hook), T(test_reclaim_hooks))
