/* tcuda_replay_options_t.on_oom: each simulated request that runs out of
 * memory is reported with its trace line and torch's OutOfMemoryError text,
 * the replay goes on, and it succeeds. */
#include "harness.h"

typedef struct {
  int calls;
  unsigned lines[4];
  char first[1024];
} seen;

static void on_oom(void *user, unsigned line, const char *message) {
  seen *s = user;
  if (s->calls < 4) s->lines[s->calls] = line;
  if (!s->calls) snprintf(s->first, sizeof s->first, "%s", message);
  s->calls++;
}

static void test_on_oom_reports_each_request(void) {
  /* 8 MiB device: 1000 B takes a 2 MiB small segment; each 3 MiB request
   * needs a 20 MiB large segment and fails */
  const char *trace = "a 1 1000\n# comment\na 2 3145728\nf 2\na 3 3145728\nc\n";
  tcuda_replay_options_t o = TCUDA_REPLAY_OPTIONS_INIT;
  o.simulate = 1;
  o.capacity = 8 << 20;
  seen s = {0};
  o.on_oom = on_oom;
  o.on_oom_user = &s;
  char *json = NULL;
  CHECK_OK(tcuda_replay_string(trace, &o, &json));
  CHECK(json && strstr(json, "\"num_ooms\": 2"));
  CHECK_EQ_INT(s.calls, 2);
  CHECK_EQ_INT(s.lines[0], 3);
  CHECK_EQ_INT(s.lines[1], 5);
  CHECK(strstr(s.first, "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 8.00 MiB "
                        "of which 6.00 MiB is free.") == s.first);
  CHECK_EQ_INT(tcuda_last_status(), TCUDA_SUCCESS); /* the OOM is not left as this thread's error */
  tcuda_string_free(json);

  /* without the callback: the same replay, silently */
  o.on_oom = NULL;
  CHECK_OK(tcuda_replay_string(trace, &o, &json));
  CHECK(json && strstr(json, "\"num_ooms\": 2"));
  tcuda_string_free(json);
}

int main(int argc, char **argv) {
  static const tc_test tests[] = {T(test_on_oom_reports_each_request)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
