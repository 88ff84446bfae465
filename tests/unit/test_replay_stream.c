/* tcuda_replay_file_to: the streamed pieces join to exactly what
 * tcuda_replay_file returns (every trace in tests/data), a callback's error
 * stops the replay and comes back, nothing is written for a bad trace, and
 * output cut short by a later error is never a closed array. CPU only. */
#define _GNU_SOURCE
#include "harness.h"
#include <glob.h>
#include <unistd.h>

typedef struct {
  char *p;
  size_t len, cap;
  size_t calls;
  size_t fail_at; /* the call (1-based) that fails; 0: none */
  tcuda_status fail_with;
} sink;

static tcuda_status collect(void *user, const char *bytes, size_t n) {
  sink *k = user;
  k->calls++;
  if (k->fail_at && k->calls >= k->fail_at) return k->fail_with;
  if (k->len + n + 1 > k->cap) {
    size_t cap = k->cap ? k->cap : 4096;
    while (cap < k->len + n + 1) cap *= 2;
    char *p = realloc(k->p, cap);
    if (!p) return TCUDA_ERROR_HOST_OUT_OF_MEMORY;
    k->p = p;
    k->cap = cap;
  }
  memcpy(k->p + k->len, bytes, n);
  k->len += n;
  k->p[k->len] = 0;
  return TCUDA_SUCCESS;
}

static tcuda_replay_options_t sim_options(void) {
  tcuda_replay_options_t o = TCUDA_REPLAY_OPTIONS_INIT;
  o.simulate = 1;
  return o;
}

static char *write_temp(const char *text) {
  static char path[64];
  snprintf(path, sizeof path, "/tmp/tc_stream_XXXXXX");
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return path;
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
  return path;
}

static void test_same_bytes_as_the_string_form(void) {
  const char *data = getenv("TCUDA_TEST_DATA");
  if (!data) {
    TC_SKIP_PART("TCUDA_TEST_DATA is not set");
    return;
  }
  char pat[512];
  glob_t g;
  snprintf(pat, sizeof pat, "%s/torch/*.trace", data);
  CHECK_EQ_INT(glob(pat, 0, NULL, &g), 0);
  snprintf(pat, sizeof pat, "%s/replay/*.trace", data);
  CHECK_EQ_INT(glob(pat, GLOB_APPEND, NULL, &g), 0);
  CHECK(g.gl_pathc > 10);
  tcuda_replay_options_t o = sim_options();
  for (size_t i = 0; i < g.gl_pathc; i++) {
    char *whole = NULL;
    CHECK_OK(tcuda_replay_file(g.gl_pathv[i], &o, &whole));
    sink k = {0};
    CHECK_OK(tcuda_replay_file_to(g.gl_pathv[i], &o, collect, &k));
    if (!whole || !k.p || strcmp(whole, k.p)) {
      fprintf(stderr, "%s: the streamed output differs\n", g.gl_pathv[i]);
      tc_failures++;
    }
    /* streamed: pieces per checkpoint, not one string at the end */
    CHECK(k.calls > 4);
    tcuda_string_free(whole);
    free(k.p);
  }
  globfree(&g);
}

static void test_shapes(void) {
  tcuda_replay_options_t o = sim_options();
  /* no checkpoint: the empty array, as the string form */
  char *path = write_temp("a 1 100\nf 1\n");
  sink k = {0};
  CHECK_OK(tcuda_replay_file_to(path, &o, collect, &k));
  CHECK(k.p && !strcmp(k.p, "[]\n"));
  free(k.p);
  unlink(path);
  path = write_temp("a 1 100\nc\nc\n");
  memset(&k, 0, sizeof k);
  CHECK_OK(tcuda_replay_file_to(path, &o, collect, &k));
  CHECK(k.p && !strncmp(k.p, "[\n{\"stats\": {", 13) && strstr(k.p, "},\n{\"stats\": {") &&
        !strcmp(k.p + k.len - 4, "}\n]\n"));
  free(k.p);
  unlink(path);
}

static void test_errors(void) {
  tcuda_replay_options_t o = sim_options();
  char *path = write_temp("a 1 100\nc\na 2 200\nc\nc\n");
  char keep[64];
  snprintf(keep, sizeof keep, "%s", path);
  /* the callback's status stops the replay at once and comes back */
  sink k = {.fail_at = 2, .fail_with = TCUDA_ERROR_IO};
  CHECK_ERR(tcuda_replay_file_to(keep, &o, collect, &k), TCUDA_ERROR_IO,
            "tcuda_replay_file_to: the output callback returned TCUDA_ERROR_IO");
  CHECK_EQ_INT(k.calls, 2);
  free(k.p);
  /* a failure after output began: what was written is not closed */
  o.history_path = "/nonexistent-dir/h.pickle";
  memset(&k, 0, sizeof k);
  CHECK_ERR(tcuda_replay_file_to(keep, &o, collect, &k), TCUDA_ERROR_IO, "/nonexistent-dir/h.pickle");
  CHECK(k.p && k.len > 3 && k.p[k.len - 1] == '}' && !strstr(k.p, "]\n"));
  free(k.p);
  o.history_path = NULL;
  unlink(keep);
  /* a bad trace, option or file: nothing written */
  path = write_temp("a 1 100\nc\nf 9\n");
  memset(&k, 0, sizeof k);
  CHECK_ERR(tcuda_replay_file_to(path, &o, collect, &k), TCUDA_ERROR_PARSE, "trace line 3: free of unknown id 9");
  CHECK_EQ_INT(k.calls, 0);
  o.memory_fraction = 2;
  CHECK_ERR(tcuda_replay_file_to(path, &o, collect, &k), TCUDA_ERROR_INVALID_ARGUMENT, "memory_fraction 2");
  o.memory_fraction = 0;
  CHECK_EQ_INT(k.calls, 0);
  unlink(path);
  CHECK_ERR(tcuda_replay_file_to("/nonexistent-dir/t.trace", &o, collect, &k), TCUDA_ERROR_IO,
            "tcuda_replay_file_to: /nonexistent-dir/t.trace: cannot open: ");
  CHECK_EQ_INT(k.calls, 0);
  CHECK_ERR(tcuda_replay_file_to(NULL, &o, collect, &k), TCUDA_ERROR_INVALID_ARGUMENT, "trace_path is NULL");
  CHECK_ERR(tcuda_replay_file_to("x", &o, NULL, &k), TCUDA_ERROR_INVALID_ARGUMENT, "write_fn is NULL");
}

TC_MAIN(T(test_same_bytes_as_the_string_form), T(test_shapes), T(test_errors))
