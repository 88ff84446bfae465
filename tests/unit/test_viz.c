/* tcuda_viz_file: the data behind `tcuda viz`. The series keeps each
 * bucket's extremes (a one-entry spike survives 16 buckets over 1001
 * entries), the allocations listed are capped by the area they cover, bad
 * input is an error naming the field, and progress reaches the caller. */
#include "../harness.h"
#include <unistd.h>

#define SPIKE 1000000000ull

static char path[64];

/* A history written by hand: one allocation of 100 bytes kept to the end,
 * then 500 alloc/free pairs of 10 bytes, the 250th of SPIKE bytes. */
static int write_snapshot(const char *size_text) {
  snprintf(path, sizeof path, "/tmp/tcuda_test_viz_XXXXXX");
  int fd = mkstemp(path);
  if (fd < 0) return 0;
  FILE *f = fdopen(fd, "w");
  if (!f) return 0;
  fprintf(f,
          "{\"segments\": [{\"device\": 0, \"address\": 4096, \"total_size\": 2097152, \"stream\": 0,"
          " \"segment_type\": \"large\", \"blocks\": [{\"address\": 4096, \"size\": %s, \"requested_size\": 100,"
          " \"state\": \"active_allocated\"}, {\"size\": 2096640, \"state\": \"inactive\"}]}],"
          " \"device_traces\": [[{\"action\": \"segment_alloc\", \"addr\": 4096, \"size\": 2097152, \"stream\": 0},"
          " {\"action\": \"alloc\", \"addr\": 4096, \"size\": 100, \"stream\": 0}",
          size_text);
  for (int i = 0; i < 500; i++) {
    unsigned long long s = i == 250 ? SPIKE : 10;
    fprintf(f, ", {\"action\": \"alloc\", \"addr\": 8192, \"size\": %llu, \"stream\": 0}", s);
    fprintf(f, ", {\"action\": \"free_completed\", \"addr\": 8192, \"size\": %llu, \"stream\": 0}", s);
  }
  fprintf(f, "]], \"allocator_settings\": {\"max_split_size\": 0}}");
  return fclose(f) == 0;
}

/* the largest number in the JSON array after key */
static unsigned long long array_max(const char *doc, const char *key, size_t *count) {
  const char *p = strstr(doc, key);
  unsigned long long m = 0;
  *count = 0;
  if (!p) return 0;
  p += strlen(key);
  while (*p && *p != ']') {
    char *e;
    unsigned long long v = strtoull(p, &e, 10);
    if (e == p) break;
    if (v > m) m = v;
    (*count)++;
    p = *e == ',' ? e + 1 : e;
  }
  return m;
}

static int stages, trace_done;
static void on_progress(void *user, const char *stage, uint64_t done, uint64_t total) {
  (void)user;
  stages++;
  if (!strcmp(stage, "trace") && done == total && total) trace_done = 1;
}

static void extremes_survive(void) {
  CHECK(write_snapshot("512"));
  tcuda_viz_options_t o = TCUDA_VIZ_OPTIONS_INIT;
  o.buckets = 16;
  o.max_allocations = 2;
  o.progress = on_progress;
  char *doc = NULL;
  CHECK_OK(tcuda_viz_file(path, &o, &doc));
  if (!doc) return;
  size_t n;
  /* the exact peak: the kept block plus the spike, in one of 16 buckets */
  CHECK_EQ_INT(array_max(doc, "\"max\":[", &n), SPIKE + 100);
  CHECK_EQ_INT(n, 16);
  CHECK(strstr(doc, "\"peak\":1000000100,") != NULL);
  CHECK(strstr(doc, "\"min\":[0,") != NULL); /* before the first entry */
  CHECK(strstr(doc, "\"entries\":1002,") != NULL);
  /* 501 allocations, 2 listed: the spike and the long-lived one cover the most */
  CHECK(strstr(doc, "\"allocations\":501,") != NULL);
  CHECK(strstr(doc, "\"allocs\":[4096,100,0,2,-1,-1,1,-1,8192,1000000000,0,503,504,-1,1,-1]") != NULL);
  CHECK(trace_done && stages >= 4);
  tcuda_string_free(doc);
  unlink(path);
}

static void bad_input(void) {
  char *doc = (char *)1;
  tcuda_viz_options_t o = TCUDA_VIZ_OPTIONS_INIT;
  CHECK_ERR(tcuda_viz_file("x", &o, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "json_out");
  CHECK_ERR(tcuda_viz_file(NULL, &o, &doc), TCUDA_ERROR_INVALID_ARGUMENT, "snapshot_path");
  CHECK(doc == NULL);
  o.buckets = 8;
  CHECK_ERR(tcuda_viz_file("x", &o, &doc), TCUDA_ERROR_INVALID_ARGUMENT, "buckets");
  o = (tcuda_viz_options_t)TCUDA_VIZ_OPTIONS_INIT;
  o.struct_size = 8;
  CHECK_ERR(tcuda_viz_file("x", &o, &doc), TCUDA_ERROR_INVALID_ARGUMENT, "struct_size");
  o = (tcuda_viz_options_t)TCUDA_VIZ_OPTIONS_INIT;
  o.device = -2;
  CHECK_ERR(tcuda_viz_file("x", &o, &doc), TCUDA_ERROR_INVALID_ARGUMENT, "device");
  CHECK_ERR(tcuda_viz_file("/nonexistent/s.pickle", NULL, &doc), TCUDA_ERROR_IO, "/nonexistent/s.pickle");
  /* a string where a size belongs is named */
  CHECK(write_snapshot("\"512\""));
  CHECK_ERR(tcuda_viz_file(path, NULL, &doc), TCUDA_ERROR_PARSE, "segments[0].blocks[0].size is not a number");
  CHECK(doc == NULL);
  unlink(path);
}

/* Lists with no bound in a hostile (or strange) file stay capped: 100000
 * segments, each made by the trace, and 100000 more made and freed. The
 * document stays a few MB and is made in linear time. */
static void caps(void) {
  snprintf(path, sizeof path, "/tmp/tcuda_test_viz_XXXXXX");
  int fd = mkstemp(path);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  CHECK(f != NULL);
  if (!f) return;
  enum { N = 100000 };
  const unsigned long long SEG = 2 << 20;
  fputs("{\"segments\": [", f);
  for (int i = 0; i < N; i++)
    fprintf(f,
            "%s{\"device\": 0, \"address\": %llu, \"total_size\": %llu, \"stream\": 0, \"blocks\":"
            " [{\"size\": %llu, \"state\": \"inactive\"}]}",
            i ? ", " : "", (i + 1) * SEG, SEG, SEG);
  fputs("], \"device_traces\": [[", f);
  for (int i = 0; i < N; i++) {
    unsigned long long churn = (unsigned long long)(N + 1 + i) * SEG;
    fprintf(f, "%s{\"action\": \"segment_alloc\", \"addr\": %llu, \"size\": %llu}", i ? ", " : "", (i + 1) * SEG, SEG);
    fprintf(f, ", {\"action\": \"segment_alloc\", \"addr\": %llu, \"size\": %llu}", churn, SEG);
    fprintf(f, ", {\"action\": \"segment_free\", \"addr\": %llu, \"size\": %llu}", churn, SEG);
  }
  fputs("]]}", f);
  CHECK(fclose(f) == 0);
  char *doc = NULL;
  CHECK_OK(tcuda_viz_file(path, NULL, &doc));
  if (doc) {
    CHECK(strlen(doc) < 5000000);
    CHECK(strstr(doc, "\"seglife_total\":200000,") != NULL);
    CHECK(strstr(doc, "\"segments_total\":100000,\"blocks_total\":100000,") != NULL);
    size_t n = 0;
    for (const char *p = strstr(doc, "\"seglife\":["); p && *p != ']'; p++) n += *p == ',';
    CHECK_EQ_INT(n + 1, 25000 * 6); /* six fields each */
  }
  tcuda_string_free(doc);
  unlink(path);
}

TC_MAIN(T(extremes_survive), T(bad_input), T(caps))
