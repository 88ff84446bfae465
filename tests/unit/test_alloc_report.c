/* Reports: memory_summary() text, memory_stats() JSON and snapshot JSON.
 * The summary is checked byte for byte against PyTorch 2.11's own, printed
 * with the stats it was printed from (tests/data/torch/NAME.summary*.txt and
 * NAME.summary_stats.json), title line aside. */
#include "harness.h"
#include "alloc/alloc.h"
#include "inspect/report.h"

static char *read_data(const char *name) {
  const char *dir = getenv("TCUDA_TEST_DATA");
  char path[1024];
  snprintf(path, sizeof path, "%s/alloc/%s", dir ? dir : "tests/data", name);
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "cannot open %s\n", path); return NULL; }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = 0;
  fclose(f);
  return s;
}

/* The idx-th run of consecutive lines starting with '|' (a whole summary),
 * newline-terminated. Caller frees. */
static char *summary_block(const char *text, int idx) {
  const char *p = text;
  int cur = -1, in = 0;
  const char *start = NULL;
  while (*p) {
    const char *eol = strchr(p, '\n');
    const char *next = eol ? eol + 1 : p + strlen(p);
    int bar = *p == '|';
    if (bar && !in) { cur++; start = p; }
    if (!bar && in && cur == idx) break;
    in = bar;
    p = next;
    if (!*p && in && cur == idx) break;
  }
  if (cur < idx || !start) return NULL;
  size_t n = (size_t)(p - start);
  char *s = malloc(n + 1);
  memcpy(s, start, n);
  s[n] = 0;
  return s;
}

/* Replace the second line (the title) of a summary block. */
static char *with_title(const char *block, const char *title_line) {
  const char *l2 = strchr(block, '\n') + 1;
  const char *l3 = strchr(l2, '\n') + 1;
  size_t n = strlen(block) - (size_t)(l3 - l2) + strlen(title_line);
  char *s = malloc(n + 1);
  size_t a = (size_t)(l2 - block);
  memcpy(s, block, a);
  strcpy(s + a, title_line);
  strcat(s, l3);
  return s;
}

static void set3(tcuda_stat_t *arr, int field, int64_t all, int64_t large, int64_t small) {
  int64_t v[3] = {all, small, large}; /* StatType order: all, small, large */
  for (int i = 0; i < 3; i++) {
    int64_t *f = field == 0 ? &arr[i].current : field == 1 ? &arr[i].peak : field == 2 ? &arr[i].allocated
                                                                                      : &arr[i].freed;
    *f = v[i];
  }
}

static const char *TITLE0 =
    "|                   tcuda CUDA memory summary, device ID 0                  |\n";

static void test_title_centred_like_pytorch(void) {
  char *ex = read_data("../torch/fragmentation.summary.txt");
  CHECK(ex != NULL);
  if (!ex) return;
  char *blk = summary_block(ex, 0);
  CHECK(blk != NULL);
  const char *l2 = strchr(blk, '\n') + 1;
  size_t len = (size_t)(strchr(l2, '\n') - l2);
  CHECK_EQ_INT(len, strlen(TITLE0) - 1);
  /* left padding exceeds right padding by the same amount in both */
  const char *t = strstr(l2, "PyTorch");
  size_t left = (size_t)(t - l2) - 1, right = len - 1 - left - strlen("PyTorch CUDA memory summary, device ID 0") - 1;
  size_t tleft = strspn(TITLE0 + 1, " ");
  size_t tright = strlen(TITLE0) - 3 - tleft - strlen("tcuda CUDA memory summary, device ID 0");
  CHECK_EQ_INT((long long)left - (long long)right, (long long)tleft - (long long)tright);
  free(blk);
  free(ex);
}

/* torch's memory_stats() key, e.g. "active_bytes.large_pool.peak", into st. */
static int set_key(tcuda_memory_stats_t *st, const char *key, int64_t v) {
  static const char *const fam[] = {"allocation", "segment", "active", "inactive_split", "allocated_bytes",
                                    "reserved_bytes", "active_bytes", "inactive_split_bytes", "requested_bytes"};
  tcuda_stat_t *arr[] = {st->allocation, st->segment, st->active, st->inactive_split, st->allocated_bytes,
                         st->reserved_bytes, st->active_bytes, st->inactive_split_bytes, st->requested_bytes};
  static const char *const types[] = {"all", "small_pool", "large_pool"}; /* StatType order */
  static const char *const fields[] = {"current", "peak", "allocated", "freed"};
  char f[64], t[32], x[32];
  if (sscanf(key, "%63[a-z_].%31[a-z_].%31[a-z_]", f, t, x) == 3) {
    for (int i = 0; i < 9; i++)
      for (int j = 0; j < 3; j++)
        for (int k = 0; k < 4; k++)
          if (!strcmp(f, fam[i]) && !strcmp(t, types[j]) && !strcmp(x, fields[k])) {
            int64_t *d[] = {&arr[i][j].current, &arr[i][j].peak, &arr[i][j].allocated, &arr[i][j].freed};
            *d[k] = v;
            return 1;
          }
  }
  if (sscanf(key, "%63[a-z_].%31[a-z_]", f, x) == 2 && strchr(key, '.') == strrchr(key, '.')) {
    tcuda_stat_t *o = !strcmp(f, "oversize_allocations") ? &st->oversize_allocations
                      : !strcmp(f, "oversize_segments") ? &st->oversize_segments : NULL;
    for (int k = 0; o && k < 4; k++)
      if (!strcmp(x, fields[k])) {
        int64_t *d[] = {&o->current, &o->peak, &o->allocated, &o->freed};
        *d[k] = v;
        return 1;
      }
  }
  int64_t *sc = !strcmp(key, "num_alloc_retries") ? &st->num_alloc_retries : !strcmp(key, "num_ooms") ? &st->num_ooms
                : !strcmp(key, "num_sync_all_streams") ? &st->num_sync_all_streams
                : !strcmp(key, "num_device_alloc") ? &st->num_device_alloc
                : !strcmp(key, "num_device_free") ? &st->num_device_free
                : !strcmp(key, "max_split_size") ? &st->max_split_size : NULL;
  if (sc) *sc = v;
  return sc != NULL;
}

/* The summary text from the stats torch reported with it: both recorded
 * from torch 2.11 on the H200 after a trace ran (tests/data/torch,
 * scripts/record_torch_extra.py), so the layout is checked against torch's
 * own output for real values, title line aside. */
static void test_recorded_torch_summaries(void) {
  static const char *const names[] = {"boundary_sizes", "fragmentation", "large_mixed"};
  for (int i = 0; i < 3; i++) {
    char path[256];
    snprintf(path, sizeof path, "../torch/%s.summary_stats.json", names[i]);
    char *js = read_data(path);
    CHECK(js != NULL);
    if (!js) continue;
    tcuda_memory_stats_t st;
    memset(&st, 0, sizeof st);
    int keys = 0;
    for (char *p = js; (p = strchr(p, '"'));) {
      char key[96];
      long long v;
      if (sscanf(p, "\"%95[^\"]\": %lld", key, &v) == 2) {
        if (!set_key(&st, key, v)) {
          fprintf(stderr, "%s: unknown stats key %s\n", names[i], key);
          tc_failures++;
        }
        keys++;
      }
      p = strchr(p, '\n');
      if (!p) break;
    }
    CHECK(keys > 100);
    for (int abbr = 0; abbr < 2; abbr++) {
      snprintf(path, sizeof path, "../torch/%s.summary%s.txt", names[i], abbr ? "_abbrev" : "");
      char *ref = read_data(path);
      CHECK(ref != NULL);
      if (!ref) continue;
      char *want = with_title(ref, TITLE0);
      char *got = tc_report_summary(&st, 0, abbr);
      CHECK(got != NULL);
      if (got && strcmp(got, want)) {
        fprintf(stderr, "%s abbreviated=%d mismatch.\n--- got\n%s--- want\n%s", names[i], abbr, got, want);
        tc_failures++;
      }
      free(got);
      free(want);
      free(ref);
    }
    free(js);
  }
}

/* The text of the row whose label starts the line, e.g. "| Allocated memory". */
static const char *row(const char *summary, const char *label, int nth) {
  const char *p = summary;
  char key[64];
  snprintf(key, sizeof key, "\n| %s", label);
  for (int i = 0; i <= nth; i++) {
    p = strstr(p, key);
    if (!p) return "";
    p++;
  }
  return p;
}

static int row_is(const char *summary, const char *label, int nth, const char *cells) {
  const char *r = row(summary, label, nth);
  const char *c = strchr(r, '|');
  c = c ? strchr(c + 1, '|') : NULL;
  if (!c) return 0;
  size_t n = strlen(cells);
  if (strncmp(c + 1, cells, n)) {
    const char *eol = strchr(c, '\n');
    fprintf(stderr, "row '%s' #%d: got '%.*s', want '%s'\n", label, nth, (int)(eol - c - 1), c + 1, cells);
    return 0;
  }
  return 1;
}

static void test_size_units(void) {
  tcuda_memory_stats_t st;
  memset(&st, 0, sizeof st);
  /* current: the 768 KiB boundary; peak: one below; allocated: PiB;
   * freed: TiB with a sub-row far below the unit */
  set3(st.allocated_bytes, 0, 786432, 786432, 0);
  set3(st.allocated_bytes, 1, 786431, 786431, 0);
  set3(st.allocated_bytes, 2, (int64_t)1 << 60, (int64_t)1 << 60, 0);
  set3(st.allocated_bytes, 3, (int64_t)800 << 30, (int64_t)800 << 30, 1023);
  char *s = tc_report_summary(&st, 0, 0);
  CHECK(s != NULL);
  if (!s) return;
  CHECK(row_is(s, "Allocated memory", 0, "    768 KiB | 786431 B   |   1024 PiB |    800 GiB |"));
  CHECK(row_is(s, "      from small pool", 0, "      0 KiB |      0 B   |      0 PiB |      0 GiB |"));
  /* all-zero rows print "0 B" / "0  " */
  CHECK(row_is(s, "GPU reserved memory", 0, "      0 B   |      0 B   |      0 B   |      0 B   |"));
  CHECK(row_is(s, "Allocations", 0, "       0    |       0    |       0    |       0    |"));
  free(s);
  /* the unit is chosen before dividing: 768 TiB prints as TiB, and one
   * byte under 768 GiB prints as MiB */
  set3(st.reserved_bytes, 0, (int64_t)768 << 40, 0, 0);
  set3(st.reserved_bytes, 1, ((int64_t)768 << 30) - 1, 0, 0);
  s = tc_report_summary(&st, 0, 1);
  CHECK(s && row_is(s, "GPU reserved memory", 0, "    768 TiB | 786431 MiB |"));
  free(s);
}

static void test_count_units(void) {
  tcuda_memory_stats_t st;
  memset(&st, 0, sizeof st);
  set3(st.allocation, 0, 749999, 749999, 0);
  set3(st.allocation, 1, 750000, 0, 750000);
  set3(st.allocation, 2, 750000000, 1, 749999999);
  set3(st.allocation, 3, 123456789012LL, 123456789012LL, 0);
  st.oversize_segments.current = 750000;
  st.oversize_segments.peak = 999999999;
  char *s = tc_report_summary(&st, 0, 0);
  CHECK(s != NULL);
  if (!s) return;
  CHECK(row_is(s, "Allocations", 0, "  749999    |     750 K  |     750 M  |  123456 M  |"));
  CHECK(row_is(s, "      from large pool", 5, "  749999    |       0 K  |       0 M  |  123456 M  |"));
  CHECK(row_is(s, "      from small pool", 5, "       0    |     750 K  |     749 M  |       0 M  |"));
  CHECK(row_is(s, "Oversize GPU segments", 0, "     750 K  |     999 M  |       0    |       0    |"));
  free(s);
}

static void test_header_counters_and_device(void) {
  tcuda_memory_stats_t st;
  memset(&st, 0, sizeof st);
  st.num_ooms = 123;
  st.num_alloc_retries = 45678;
  char *s = tc_report_summary(&st, 7, 1);
  CHECK(s != NULL);
  if (!s) return;
  CHECK(strstr(s, "|            CUDA OOMs: 123          |        cudaMalloc retries: 45678     |\n") != NULL);
  CHECK(strstr(s, "|                   tcuda CUDA memory summary, device ID 7                  |\n") != NULL);
  /* abbreviated has no sub-rows; every line is 77 characters */
  CHECK(strstr(s, "from large pool") == NULL);
  for (const char *p = s; *p;) {
    const char *eol = strchr(p, '\n');
    CHECK(eol != NULL);
    if (!eol) break;
    CHECK_EQ_INT(eol - p, 77);
    p = eol + 1;
  }
  free(s);
  CHECK(tc_report_summary(NULL, 0, 0) == NULL);
}

/* Value of "key": N in a flat JSON object; -999 if absent. */
static long long json_int(const char *js, const char *key) {
  char k[96];
  snprintf(k, sizeof k, "\"%s\": ", key);
  const char *p = strstr(js, k);
  return p ? strtoll(p + strlen(k), NULL, 10) : -999;
}

static void test_stats_json_keys_and_values(void) {
  tcuda_memory_stats_t st;
  memset(&st, 0, sizeof st);
  /* distinct values everywhere, so a swapped field shows */
  int64_t *all = (int64_t *)&st;
  for (size_t i = 0; i < sizeof st / sizeof(int64_t); i++) all[i] = 1000 + (int64_t)i;
  st.max_split_size = -1;
  char *js = tc_report_stats_json(&st);
  CHECK(js != NULL);
  char *keys = read_data("memory_stats_keys.txt");
  CHECK(keys != NULL);
  if (!js || !keys) { free(js); free(keys); return; }
  /* same keys, same order, nothing extra */
  const char *p = js;
  int n = 0;
  for (char *line = strtok(keys, "\n"); line; line = strtok(NULL, "\n")) {
    char k[96];
    snprintf(k, sizeof k, "\"%s\": ", line);
    const char *q = strstr(p, k);
    if (!q) { fprintf(stderr, "key %s missing or out of order\n", line); tc_failures++; continue; }
    p = q + strlen(k);
    n++;
  }
  CHECK_EQ_INT(n, 122);
  int colons = 0;
  for (const char *c = js; *c; c++) colons += *c == ':';
  CHECK_EQ_INT(colons, 122);
  CHECK(js[0] == '{' && js[strlen(js) - 1] == '}');
  CHECK_EQ_INT(json_int(js, "allocation.all.current"), st.allocation[TCUDA_STAT_ALL].current);
  CHECK_EQ_INT(json_int(js, "allocation.small_pool.peak"), st.allocation[TCUDA_STAT_SMALL_POOL].peak);
  CHECK_EQ_INT(json_int(js, "segment.large_pool.freed"), st.segment[TCUDA_STAT_LARGE_POOL].freed);
  CHECK_EQ_INT(json_int(js, "inactive_split_bytes.large_pool.allocated"),
               st.inactive_split_bytes[TCUDA_STAT_LARGE_POOL].allocated);
  CHECK_EQ_INT(json_int(js, "requested_bytes.small_pool.current"), st.requested_bytes[TCUDA_STAT_SMALL_POOL].current);
  CHECK_EQ_INT(json_int(js, "reserved_bytes.all.peak"), st.reserved_bytes[TCUDA_STAT_ALL].peak);
  CHECK_EQ_INT(json_int(js, "active_bytes.large_pool.current"), st.active_bytes[TCUDA_STAT_LARGE_POOL].current);
  CHECK_EQ_INT(json_int(js, "allocated_bytes.small_pool.freed"), st.allocated_bytes[TCUDA_STAT_SMALL_POOL].freed);
  CHECK_EQ_INT(json_int(js, "active.small_pool.allocated"), st.active[TCUDA_STAT_SMALL_POOL].allocated);
  CHECK_EQ_INT(json_int(js, "inactive_split.all.current"), st.inactive_split[TCUDA_STAT_ALL].current);
  CHECK_EQ_INT(json_int(js, "oversize_allocations.peak"), st.oversize_allocations.peak);
  CHECK_EQ_INT(json_int(js, "oversize_segments.freed"), st.oversize_segments.freed);
  CHECK_EQ_INT(json_int(js, "num_alloc_retries"), st.num_alloc_retries);
  CHECK_EQ_INT(json_int(js, "num_ooms"), st.num_ooms);
  CHECK_EQ_INT(json_int(js, "num_sync_all_streams"), st.num_sync_all_streams);
  CHECK_EQ_INT(json_int(js, "num_device_alloc"), st.num_device_alloc);
  CHECK_EQ_INT(json_int(js, "num_device_free"), st.num_device_free);
  CHECK_EQ_INT(json_int(js, "max_split_size"), -1);
  free(js);
  free(keys);
  CHECK(tc_report_stats_json(NULL) == NULL);
}

static int64_t double_stream(void *ctx, int64_t s) {
  (void)ctx;
  return s * 2;
}

static void test_snapshot_json(void) {
  tcuda_block_info_t b0[2] = {{4096, 1024, 1000, TCUDA_BLOCK_ACTIVE_ALLOCATED},
                              {5120, 2048, 7, TCUDA_BLOCK_INACTIVE}};
  tcuda_block_info_t b1[1] = {{1u << 30, 20u << 20, 3u << 20, TCUDA_BLOCK_ACTIVE_PENDING_FREE}};
  tcuda_segment_info_t segs[2] = {
      {0, 4096, 3072, 1024, 1024, 1000, 0, 0, {0, 0}, 0, 2, b0},
      {1, 1u << 30, 20u << 20, 0, 20u << 20, 3u << 20, 3, 1, {5, 0}, 1, 1, b1},
  };
  tcuda_snapshot_t snap = {2, segs};
  char *js = tc_report_snapshot_json(&snap, double_stream, NULL);
  const char *want =
      "[{\"device\": 0, \"address\": 4096, \"total_size\": 3072, \"allocated_size\": 1024, \"active_size\": 1024, "
      "\"requested_size\": 1000, \"stream\": 0, \"segment_type\": \"small\", \"segment_pool_id\": [0, 0], "
      "\"is_expandable\": false, \"blocks\": [{\"address\": 4096, \"size\": 1024, \"requested_size\": 1000, "
      "\"state\": \"active_allocated\"}, {\"address\": 5120, \"size\": 2048, \"requested_size\": 7, \"state\": "
      "\"inactive\"}]}, {\"device\": 1, \"address\": 1073741824, \"total_size\": 20971520, \"allocated_size\": 0, "
      "\"active_size\": 20971520, \"requested_size\": 3145728, \"stream\": 6, \"segment_type\": \"large\", "
      "\"segment_pool_id\": [5, 0], \"is_expandable\": true, \"blocks\": [{\"address\": 1073741824, \"size\": "
      "20971520, \"requested_size\": 3145728, \"state\": \"active_pending_free\"}]}]";
  CHECK(js && !strcmp(js, want));
  if (js && strcmp(js, want)) fprintf(stderr, "got  %s\nwant %s\n", js, want);
  free(js);
  /* without a map the raw stream value shows */
  js = tc_report_snapshot_json(&snap, NULL, NULL);
  CHECK(js && strstr(js, "\"stream\": 3,"));
  free(js);
  tcuda_snapshot_t empty = {0, NULL};
  js = tc_report_snapshot_json(&empty, NULL, NULL);
  CHECK(js && !strcmp(js, "[]"));
  free(js);
  CHECK(tc_report_snapshot_json(NULL, NULL, NULL) == NULL);
}

TC_MAIN(T(test_title_centred_like_pytorch), T(test_recorded_torch_summaries), T(test_size_units),
        T(test_count_units), T(test_header_counters_and_device), T(test_stats_json_keys_and_values),
        T(test_snapshot_json))
