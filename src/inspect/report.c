/* Reports: pure functions of a stats struct or a snapshot.
 *
 * The summary reproduces torch.cuda.memory_summary() character for
 * character, title aside; the stats JSON has memory_stats()'s dotted keys
 * in its (sorted) order. */
#include "report.h"
#include "core/error.h"
#include "jsonwrite.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TC_SUMMARY_WIDTH 75

/* Python's // for the divisions below (values are never negative in
 * practice, but a corrupted stat must still print like Python would). */
static int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b) != 0 && ((a < 0) != (b < 0))) q--;
  return q;
}

/* _format_size: the unit comes from ref (the "all" row's value), so the
 * sub-rows share the unit of their row. ref is divided as a float, v as an
 * integer. */
static void fmt_size(char *out, size_t n, int64_t v, int64_t ref) {
  static const char *const units[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
  const char *unit = units[0];
  double r = (double)ref;
  for (int i = 1; i < 6; i++) {
    if (r < 768.0 * 1024.0) break;
    unit = units[i];
    v = floordiv(v, 1024);
    r /= 1024.0;
  }
  snprintf(out, n, "%6lld %s", (long long)v, unit);
}

/* _format_count: same scheme, powers of 1000, threshold 750000. */
static void fmt_count(char *out, size_t n, int64_t v, int64_t ref) {
  static const char *const units[] = {" ", "K", "M"};
  const char *unit = units[0];
  double r = (double)ref;
  for (int i = 1; i < 3; i++) {
    if (r < 750.0 * 1000.0) break;
    unit = units[i];
    v = floordiv(v, 1000);
    r /= 1000.0;
  }
  snprintf(out, n, "%7lld %s ", (long long)v, unit);
}

typedef void (*fmt_fn)(char *, size_t, int64_t, int64_t);

static void line_rule(tc_sbuf *b, char c) {
  char s[TC_SUMMARY_WIDTH + 3];
  s[0] = '|';
  memset(s + 1, c, TC_SUMMARY_WIDTH);
  s[TC_SUMMARY_WIDTH + 1] = '|';
  s[TC_SUMMARY_WIDTH + 2] = '\n';
  tc_sbuf_put(b, s, sizeof s);
}

static void stat_row(tc_sbuf *b, const char *name, const tcuda_stat_t *st, const tcuda_stat_t *ref, fmt_fn f) {
  char c[4][64];
  f(c[0], sizeof c[0], st->current, ref->current);
  f(c[1], sizeof c[1], st->peak, ref->peak);
  f(c[2], sizeof c[2], st->allocated, ref->allocated);
  f(c[3], sizeof c[3], st->freed, ref->freed);
  tc_sbuf_printf(b, "| %-21s | %s | %s | %s | %s |\n", name, c[0], c[1], c[2], c[3]);
}

char *tc_report_summary(const tcuda_memory_stats_t *st, int device, int abbreviated) {
  return tc_report_summary_tc(st, device, abbreviated, 0);
}

char *tc_report_summary_tc(const tcuda_memory_stats_t *st, int device, int abbreviated, int thread_cache) {
  if (!st) return NULL;
  const struct {
    const tcuda_stat_t *arr;
    const char *name;
    fmt_fn f;
  } rows[] = {
      {st->allocated_bytes, "Allocated memory", fmt_size},
      {st->active_bytes, "Active memory", fmt_size},
      {st->requested_bytes, "Requested memory", fmt_size},
      {st->reserved_bytes, "GPU reserved memory", fmt_size},
      {st->inactive_split_bytes, "Non-releasable memory", fmt_size},
      {st->allocation, "Allocations", fmt_count},
      {st->active, "Active allocs", fmt_count},
      {st->segment, "GPU reserved segments", fmt_count},
      {st->inactive_split, "Non-releasable allocs", fmt_count},
  };
  tc_sbuf b = {0};
  line_rule(&b, '=');
  /* PyTorch pads its 40-character title 18 left / 17 right; tcuda's title
   * is 2 characters shorter, so one more space goes on each side. */
  tc_sbuf_printf(&b, "| %17s tcuda CUDA memory summary, device ID %-18d |\n", "", device);
  if (thread_cache) { /* docs/allocator.md, "Thread caches" */
    char note[TC_SUMMARY_WIDTH];
    snprintf(note, sizeof note, "thread_cache:%d: peak usage may exceed the true peak by the bytes cached",
             thread_cache);
    tc_sbuf_printf(&b, "| %-73s |\n", note);
  }
  line_rule(&b, '-');
  tc_sbuf_printf(&b, "|  %9s CUDA OOMs: %-12lld | %6s cudaMalloc retries: %-8lld  |\n", "",
                 (long long)st->num_ooms, "", (long long)st->num_alloc_retries);
  line_rule(&b, '=');
  tc_sbuf_puts(&b, "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n");
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const tcuda_stat_t *all = &rows[i].arr[TCUDA_STAT_ALL];
    line_rule(&b, '-');
    stat_row(&b, rows[i].name, all, all, rows[i].f);
    if (!abbreviated) {
      stat_row(&b, "      from large pool", &rows[i].arr[TCUDA_STAT_LARGE_POOL], all, rows[i].f);
      stat_row(&b, "      from small pool", &rows[i].arr[TCUDA_STAT_SMALL_POOL], all, rows[i].f);
    }
  }
  line_rule(&b, '-');
  stat_row(&b, "Oversize allocations", &st->oversize_allocations, &st->oversize_allocations, fmt_count);
  line_rule(&b, '-');
  stat_row(&b, "Oversize GPU segments", &st->oversize_segments, &st->oversize_segments, fmt_count);
  line_rule(&b, '=');
  char *out = tc_sbuf_take(&b);
  if (!out) tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "memory summary: out of host memory");
  return out;
}

/* ---- memory_stats() as JSON ---- */

typedef struct {
  char key[48];
  int64_t value;
} kv;

static int kv_cmp(const void *a, const void *b) { return strcmp(((const kv *)a)->key, ((const kv *)b)->key); }

static void add_stat(kv *t, size_t *n, const char *prefix, const tcuda_stat_t *s) {
  const char *names[4] = {"current", "peak", "allocated", "freed"};
  const int64_t vals[4] = {s->current, s->peak, s->allocated, s->freed};
  for (int i = 0; i < 4; i++) {
    snprintf(t[*n].key, sizeof t[*n].key, "%s.%s", prefix, names[i]);
    t[(*n)++].value = vals[i];
  }
}

static void add_array(kv *t, size_t *n, const char *name, const tcuda_stat_t *arr) {
  static const char *const pools[TCUDA_STAT_TYPES] = {"all", "small_pool", "large_pool"};
  char prefix[40];
  for (int p = 0; p < TCUDA_STAT_TYPES; p++) {
    snprintf(prefix, sizeof prefix, "%s.%s", name, pools[p]);
    add_stat(t, n, prefix, &arr[p]);
  }
}

#define TC_NUM_STAT_KEYS (9 * 12 + 2 * 4 + 6)

static void add_scalar(kv *t, size_t *n, const char *name, int64_t v) {
  snprintf(t[*n].key, sizeof t[*n].key, "%s", name);
  t[(*n)++].value = v;
}

/* Counters that add up from the allocator's creation: unknown when a
 * replay starts inside a history whose beginning was lost. */
static int cumulative(const char *key) {
  size_t n = strlen(key);
  return !strncmp(key, "num_", 4) || (n > 10 && !strcmp(key + n - 10, ".allocated")) ||
         (n > 6 && !strcmp(key + n - 6, ".freed"));
}

char *tc_report_stats_json(const tcuda_memory_stats_t *st) { return tc_report_stats_json_window(st, 0); }

char *tc_report_stats_json_window(const tcuda_memory_stats_t *st, int window) {
  if (!st) return NULL;
  kv t[TC_NUM_STAT_KEYS];
  size_t n = 0;
  add_array(t, &n, "allocation", st->allocation);
  add_array(t, &n, "segment", st->segment);
  add_array(t, &n, "active", st->active);
  add_array(t, &n, "inactive_split", st->inactive_split);
  add_array(t, &n, "allocated_bytes", st->allocated_bytes);
  add_array(t, &n, "reserved_bytes", st->reserved_bytes);
  add_array(t, &n, "active_bytes", st->active_bytes);
  add_array(t, &n, "inactive_split_bytes", st->inactive_split_bytes);
  add_array(t, &n, "requested_bytes", st->requested_bytes);
  add_stat(t, &n, "oversize_allocations", &st->oversize_allocations);
  add_stat(t, &n, "oversize_segments", &st->oversize_segments);
  add_scalar(t, &n, "num_alloc_retries", st->num_alloc_retries);
  add_scalar(t, &n, "num_ooms", st->num_ooms);
  add_scalar(t, &n, "num_sync_all_streams", st->num_sync_all_streams);
  add_scalar(t, &n, "num_device_alloc", st->num_device_alloc);
  add_scalar(t, &n, "num_device_free", st->num_device_free);
  add_scalar(t, &n, "max_split_size", st->max_split_size);
  /* memory_stats() sorts its (key, value) list; keys are unique and ASCII,
   * so strcmp order is Python's order. */
  qsort(t, n, sizeof *t, kv_cmp);
  tc_sbuf b = {0};
  tc_sbuf_puts(&b, "{");
  for (size_t i = 0; i < n; i++) {
    if (i) tc_sbuf_puts(&b, ", ");
    tc_json_str(&b, t[i].key);
    tc_sbuf_puts(&b, ": ");
    if (window && cumulative(t[i].key)) tc_sbuf_puts(&b, "null");
    else tc_json_i64(&b, t[i].value);
  }
  tc_sbuf_puts(&b, "}");
  char *out = tc_sbuf_take(&b);
  if (!out) tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "memory stats: out of host memory");
  return out;
}

/* ---- snapshot segments as JSON ---- */

static const char *state_name(tcuda_block_state s) {
  switch (s) {
  case TCUDA_BLOCK_INACTIVE: return "inactive";
  case TCUDA_BLOCK_ACTIVE_ALLOCATED: return "active_allocated";
  case TCUDA_BLOCK_ACTIVE_PENDING_FREE: return "active_pending_free";
  }
  return "unknown";
}

/* One format string per object: its keys and string values are fixed ASCII
 * literals that need no escaping, and the numbers are printed as
 * tc_json_i64/u64 print them. */
char *tc_report_snapshot_json(const tcuda_snapshot_t *s, int64_t (*stream_map)(void *, int64_t), void *ctx) {
  if (!s) return NULL;
  tc_sbuf b = {0};
  tc_sbuf_puts(&b, "[");
  for (size_t i = 0; i < s->num_segments; i++) {
    const tcuda_segment_info_t *g = &s->segments[i];
    int64_t stream = stream_map ? stream_map(ctx, g->stream) : g->stream;
    tc_sbuf_printf(&b,
                   "%s{\"device\": %d, \"address\": %llu, \"total_size\": %llu, \"allocated_size\": %llu, "
                   "\"active_size\": %llu, \"requested_size\": %llu, \"stream\": %lld, \"segment_type\": \"%s\", "
                   "\"segment_pool_id\": [%llu, %llu], \"is_expandable\": %s, \"blocks\": [",
                   i ? ", " : "", g->device, (unsigned long long)g->address, (unsigned long long)g->total_size,
                   (unsigned long long)g->allocated_size, (unsigned long long)g->active_size,
                   (unsigned long long)g->requested_size, (long long)stream, g->is_large ? "large" : "small",
                   (unsigned long long)g->pool_id[0], (unsigned long long)g->pool_id[1],
                   g->is_expandable ? "true" : "false");
    for (size_t j = 0; j < g->num_blocks; j++) {
      const tcuda_block_info_t *k = &g->blocks[j];
      tc_sbuf_printf(&b, "%s{\"address\": %llu, \"size\": %llu, \"requested_size\": %llu, \"state\": \"%s\"}",
                     j ? ", " : "", (unsigned long long)k->address, (unsigned long long)k->size,
                     (unsigned long long)k->requested_size, state_name(k->state));
    }
    tc_sbuf_puts(&b, "]}");
  }
  tc_sbuf_puts(&b, "]");
  char *out = tc_sbuf_take(&b);
  if (!out) tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "memory snapshot: out of host memory");
  return out;
}
