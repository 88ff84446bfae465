/* Trace parser: accepted forms, slots, and every rejection with its line. */
#include "harness.h"
#include "replay/trace.h"

static tcuda_status parse(const char *s, tc_trace *t) { return tc_trace_parse(s, strlen(s), t); }

static void test_parse_ops_and_slots(void) {
  tc_trace t;
  CHECK_OK(parse("# header\n\na 1 1000\na 2 0x300000 2  # side stream\n\tf 1\r\nc\ne\nr\na 1 5 1\nf 2\nc", &t));
  CHECK_EQ_INT(t.num_ops, 9);
  CHECK_EQ_INT(t.num_slots, 3);
  CHECK_EQ_INT(t.num_checkpoints, 2);
  CHECK_EQ_INT(t.max_stream, 2);
  CHECK_EQ_INT(t.first_alloc_stream, 0);
  if (t.num_ops == 9) {
    CHECK(t.ops[0].kind == 'a' && t.ops[0].id == 1 && t.ops[0].size == 1000 && t.ops[0].stream == 0);
    CHECK_EQ_INT(t.ops[0].line, 3);
    CHECK(t.ops[1].size == 0x300000 && t.ops[1].stream == 2 && t.ops[1].slot == 1);
    CHECK(t.ops[2].kind == 'f' && t.ops[2].slot == 0 && t.ops[2].line == 5);
    CHECK(t.ops[3].kind == 'c' && t.ops[4].kind == 'e' && t.ops[5].kind == 'r');
    /* id 1 reused after its free: a new slot */
    CHECK(t.ops[6].kind == 'a' && t.ops[6].id == 1 && t.ops[6].slot == 2 && t.ops[6].stream == 1);
    CHECK(t.ops[7].kind == 'f' && t.ops[7].slot == 1);
  }
  tc_trace_free(&t);
  CHECK(t.ops == NULL && t.num_ops == 0);
  /* the largest size accepted: its rounding cannot overflow */
  CHECK_OK(parse("a 1 18446744073707454463\n", &t));
  CHECK(t.num_ops == 1 && t.ops[0].size == TC_TRACE_MAX_SIZE && TC_TRACE_MAX_SIZE == 18446744073707454463ull);
  tc_trace_free(&t);
}

static void test_empty_and_first_stream(void) {
  tc_trace t;
  CHECK_OK(tc_trace_parse("", 0, &t));
  CHECK_EQ_INT(t.num_ops, 0);
  CHECK_EQ_INT(t.first_alloc_stream, -1);
  tc_trace_free(&t);
  CHECK_OK(tc_trace_parse(NULL, 0, &t));
  tc_trace_free(&t);
  /* size-0 allocations never reach cudaMalloc, so they do not count */
  CHECK_OK(parse("a 1 0\na 2 512 3\n", &t));
  CHECK_EQ_INT(t.first_alloc_stream, 3);
  tc_trace_free(&t);
  /* not NUL-terminated: only len bytes are read */
  CHECK_OK(tc_trace_parse("a 1 5\nGARBAGE", 6, &t));
  CHECK_EQ_INT(t.num_ops, 1);
  tc_trace_free(&t);
}

static void test_many_ids(void) {
  /* enough live ids to grow the map several times, freed in a shuffled order */
  enum { N = 5000 };
  size_t cap = (size_t)N * 40;
  char *s = malloc(cap), *p = s;
  for (int i = 0; i < N; i++) p += sprintf(p, "a %d %d\n", i * 7919, i + 1);
  for (int i = 0; i < N; i++) p += sprintf(p, "f %d\n", ((i * 37) % N) * 7919);
  for (int i = 0; i < N; i++) p += sprintf(p, "a %d 1\n", i * 7919);
  tc_trace t;
  CHECK_OK(parse(s, &t));
  CHECK_EQ_INT(t.num_slots, 2 * N);
  if (t.num_ops == 3 * N) {
    int ok = 1;
    for (int i = 0; i < N; i++) ok &= t.ops[N + i].slot == (size_t)((i * 37) % N);
    CHECK(ok);
  }
  tc_trace_free(&t);
  free(s);
}

static void test_rejections(void) {
  static const struct {
    const char *text, *msg;
  } bad[] = {
      {"a 1 10\nx 3\n", "trace line 2: unknown op 'x'"},
      {"alloc 1 10\n", "trace line 1: unknown op 'alloc'"},
      {"\n\na 1\n", "trace line 3: expected 'a ID SIZE [STREAM]'"},
      {"a 1 2 3 4\n", "trace line 1: expected 'a ID SIZE [STREAM]'"},
      {"a 1 2 3 4 5 6\n", "trace line 1: too many fields"},
      {"a x 10\n", "trace line 1: bad id 'x'"},
      {"a 1 -5\n", "trace line 1: bad size '-5'"},
      {"a 1 18446744073709551616\n", "trace line 1: bad size '18446744073709551616'"},
      {"a 1 18446744073709551615\n", "trace line 1: size 18446744073709551615 out of range (at most 18446744073707454463"},
      {"a 1 0xffffffffffe00000\n", "trace line 1: size 18446744073707454464 out of range"},
      {"a 1 0x\n", "trace line 1: bad size '0x'"},
      {"a 1 10 s\n", "trace line 1: bad stream 's'"},
      {"a 1 10 1025\n", "trace line 1: stream 1025 out of range"},
      {"a 1 10\na 1 20\n", "trace line 2: id 1 is already live (allocated at line 1)"},
      {"a 1 10\nf 2\n", "trace line 2: free of unknown id 2"},
      {"a 1 10\nf 1\nf 1\n", "trace line 3: free of unknown id 1"},
      {"f\n", "trace line 1: expected 'f ID'"},
      {"f 1 2\n", "trace line 1: expected 'f ID'"},
      {"c 1\n", "trace line 1: 'c' takes no arguments"},
      {"e now\n", "trace line 1: 'e' takes no arguments"},
      {"r 0\n", "trace line 1: 'r' takes no arguments"},
      /* quoted input is shown, not sent: control bytes (terminal escapes)
       * and bytes outside UTF-8 as \xNN, valid UTF-8 as it is, long
       * fields cut with "..." */
      {"a 1 \033[2J\n", "trace line 1: bad size '\\x1b[2J'"},
      {"\033]0;pwned\007 1\n", "trace line 1: unknown op '\\x1b]0;pwned\\x07'"},
      {"a 1 10\xc3\xa9\n", "trace line 1: bad size '10\xc3\xa9'"},
      {"a 1 \xff\x9b\n", "trace line 1: bad size '\\xff\\x9b'"},
      {"a 1 2 \xc2\x9b" "31m\n", "trace line 1: bad stream '\\xc2\\x9b31m'"},
      {"a 1 1234567890123456789012345678901234567890123456789012345678901234567890x\n",
       "trace line 1: bad size '123456789012345678901234567890123456789012345678901234567890...'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    tc_trace t;
    t.num_ops = 99;
    CHECK_ERR(parse(bad[i].text, &t), TCUDA_ERROR_PARSE, bad[i].msg);
    CHECK(!strpbrk(tcuda_last_error(), "\033\007"));
    CHECK(t.ops == NULL && t.num_ops == 0);
  }
  tc_trace t;
  CHECK_ERR(tc_trace_parse("a 1 1\n\0a", 9, &t), TCUDA_ERROR_PARSE, "trace line 2: NUL byte");
  CHECK_ERR(tc_trace_parse("c\nc # x\0y\n", 11, &t), TCUDA_ERROR_PARSE, "trace line 2: NUL byte");
  CHECK_ERR(tc_trace_parse("a", 1, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_ERR(tc_trace_parse(NULL, 3, &t), TCUDA_ERROR_INVALID_ARGUMENT, "text is NULL");
}

TC_MAIN(T(test_parse_ops_and_slots), T(test_empty_and_first_stream), T(test_many_ids), T(test_rejections))
