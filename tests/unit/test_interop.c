/* PyTorch/CuPy allocator entry points without a GPU: every failure is a NULL
 * pointer (or a no-op free) with the caller's name in tcuda_last_error(). */
#include "harness.h"

static void check_msg(tcuda_status st, const char *sub) {
  CHECK_EQ_INT(tcuda_last_status(), st);
  if (!strstr(tcuda_last_error(), sub)) {
    fprintf(stderr, "message '%s' lacks '%s'\n", tcuda_last_error(), sub);
    tc_failures++;
  }
}

static void torch_negative_size(void) {
  tcuda_clear_error();
  CHECK(tcuda_torch_malloc(-1, 0, NULL) == NULL);
  check_msg(TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_torch_malloc: size -1 is negative");
}

static void free_null_is_fine(void) {
  tcuda_clear_error();
  tcuda_torch_free(NULL, 0, 0, NULL);
  tcuda_cupy_free(NULL, NULL, 0);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_SUCCESS);
}

static void free_unknown_pointer(void) {
  static char junk[16];
  tcuda_clear_error();
  tcuda_torch_free(junk, 16, 0, NULL);
  check_msg(TCUDA_ERROR_INVALID_POINTER, "tcuda_torch_free: tcuda_free: pointer");
  tcuda_clear_error();
  tcuda_cupy_free(NULL, junk, 0);
  check_msg(TCUDA_ERROR_INVALID_POINTER, "tcuda_cupy_free: tcuda_free: pointer");
}

/* Without a GPU, malloc fails with the reason; with one, a bad device does. */
static void malloc_errors(void) {
  int n = tcuda_device_count();
  tcuda_clear_error();
  CHECK(tcuda_torch_malloc(256, n + 3, NULL) == NULL);
  check_msg(n ? TCUDA_ERROR_INVALID_DEVICE : TCUDA_ERROR_NOT_AVAILABLE, "tcuda_torch_malloc: ");
  CHECK(tcuda_cupy_malloc(NULL, 256, n + 3) == NULL);
  check_msg(n ? TCUDA_ERROR_INVALID_DEVICE : TCUDA_ERROR_NOT_AVAILABLE, "tcuda_cupy_malloc: ");
  CHECK(tcuda_cupy_malloc((void *)0x1000, 256, n + 3) == NULL);
  check_msg(n ? TCUDA_ERROR_INVALID_DEVICE : TCUDA_ERROR_NOT_AVAILABLE, "tcuda_cupy_malloc: ");
  CHECK(tcuda_cupy_malloc(NULL, 256, -5) == NULL);
  CHECK(tcuda_last_status() != TCUDA_SUCCESS);
  if (!n) {
    CHECK(tcuda_torch_malloc(256, 0, NULL) == NULL);
    check_msg(TCUDA_ERROR_NOT_AVAILABLE, "tcuda_torch_malloc: tcuda_malloc_on: ");
    CHECK(tcuda_cupy_malloc(NULL, 256, -1) == NULL);
    check_msg(TCUDA_ERROR_NOT_AVAILABLE, "tcuda_cupy_malloc: ");
  }
}

TC_MAIN(T(torch_negative_size), T(free_null_is_fine), T(free_unknown_pointer), T(malloc_errors))
