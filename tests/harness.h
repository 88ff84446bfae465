/* Minimal test harness: CHECK macros, a test registry and CTest's skip code. */
#ifndef TC_HARNESS_H
#define TC_HARNESS_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "tcuda.h"

#define TC_SKIP_CODE 77 /* CTest SKIP_RETURN_CODE */

static int tc_failures;
static int tc_skips;

/* A part of a test that cannot run here (one GPU, no python3, ...): the
 * test reports SKIPPED (CTest's skip code) instead of passing over it,
 * unless something failed. */
#define TC_SKIP_PART(...)                                                           \
  do {                                                                              \
    printf("  SKIPPED part: ");                                                     \
    printf(__VA_ARGS__);                                                            \
    printf("\n");                                                                   \
    tc_skips++;                                                                     \
  } while (0)

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
      tc_failures++;                                                                \
    }                                                                               \
  } while (0)
#define CHECK_EQ_INT(a, b)                                                          \
  do {                                                                              \
    long long a_ = (long long)(a), b_ = (long long)(b);                             \
    if (a_ != b_) {                                                                 \
      fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, \
              #a, a_, #b, b_);                                                      \
      tc_failures++;                                                                \
    }                                                                               \
  } while (0)
#define CHECK_OK(call)                                                              \
  do {                                                                              \
    tcuda_status s_ = (call);                                                       \
    if (s_ != TCUDA_SUCCESS) {                                                      \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call,           \
              tcuda_status_name(s_), tcuda_last_error());                           \
      tc_failures++;                                                                \
    }                                                                               \
  } while (0)
/* The call fails with `status` and the message contains `substr`. */
#define CHECK_ERR(call, status, substr)                                             \
  do {                                                                              \
    tcuda_status s_ = (call);                                                       \
    if (s_ != (status)) {                                                           \
      fprintf(stderr, "%s:%d: %s -> %s, expected %s (%s)\n", __FILE__, __LINE__,     \
              #call, tcuda_status_name(s_), #status, tcuda_last_error());           \
      tc_failures++;                                                                \
    } else if (!strstr(tcuda_last_error(), (substr))) {                             \
      fprintf(stderr, "%s:%d: %s: message '%s' lacks '%s'\n", __FILE__, __LINE__,    \
              #call, tcuda_last_error(), (substr));                                 \
      tc_failures++;                                                                \
    }                                                                               \
  } while (0)

typedef void (*tc_test_fn)(void);
typedef struct { const char *name; tc_test_fn fn; } tc_test;

/* Run the listed tests (or the one named in argv[1]); exit code for CTest. */
static inline int tc_run(const tc_test *tests, size_t n, int argc, char **argv) {
  int ran = 0;
  for (size_t i = 0; i < n; i++) {
    if (argc > 1 && strcmp(argv[1], tests[i].name)) continue;
    int before = tc_failures, skips = tc_skips;
    tests[i].fn();
    printf("%s %s\n", tc_failures != before ? "FAIL" : tc_skips != skips ? "part" : "ok  ", tests[i].name);
    ran++;
  }
  if (!ran) { fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "(none)"); return 1; }
  if (tc_failures) return 1;
  if (tc_skips) {
    printf("SKIPPED: %d part(s) could not run here (the rest passed)\n", tc_skips);
    return TC_SKIP_CODE;
  }
  return 0;
}
#define TC_MAIN(...)                                                                \
  int main(int argc, char **argv) {                                                 \
    static const tc_test tests_[] = {__VA_ARGS__};                                  \
    return tc_run(tests_, sizeof tests_ / sizeof *tests_, argc, argv);              \
  }
#define T(fn) {#fn, fn}

/* GPU tests call this first: exit with CTest's skip code when there is no GPU. */
static inline void tc_require_gpu(void) {
  if (!tcuda_is_available()) {
    printf("SKIPPED: no CUDA device (%s)\n", tcuda_unavailable_reason());
    exit(TC_SKIP_CODE);
  }
}
#endif
