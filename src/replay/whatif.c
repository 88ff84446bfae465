/* tcuda_whatif_*: a PyTorch history replayed under its own config and
 * others, each row with its minimal memory limit.
 *
 * The history is loaded once; a first replay under the snapshot's own
 * settings, on torch's recorded addresses, infers the empty_cache calls
 * (torchsnap.h). Rows then replay in parallel threads, each reading the
 * same ops. min_limit is a bisection over the 2 MiB grid between the row's
 * peak allocated bytes (no smaller limit can hold them) and its peak
 * reserved bytes without a limit (a limit that large never binds), then
 * verified at the answer and 2 MiB below it; when garbage collection makes
 * "no OOM" non-monotone and the check below fails, the search goes on
 * under it. */
#include "core/core.h"
#include "explain.h"
#include "inspect/jsonwrite.h"
#include "whatif.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GRID TC_WHATIF_GRID
#define MAX_ROWS 256
/* Every row follows torch's recorded segment addresses while it asks for
 * the recorded segments (TC_TSRUN_FOLLOW): on the H200 this predicted
 * torch's min_limit where the driver model alone was 2 MiB low. */
#define FOLLOW TC_TSRUN_FOLLOW

/* ---- the default sweep ---- */

static const char *const SWEEP[] = {
    "",
    "expandable_segments:True",
    "max_split_size_mb:64",
    "max_split_size_mb:128",
    "max_split_size_mb:256",
    "max_split_size_mb:512",
    "roundup_power2_divisions:2",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:8",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "expandable_segments:True,roundup_power2_divisions:4",
    "max_split_size_mb:128,roundup_power2_divisions:4",
    "expandable_segments:True,max_split_size_mb:256",
    /* tcuda's own policy, for a PyTorch user who would put tcuda under
     * torch as its allocator (tcuda.torch); never the recommendation */
    "policy:compact",
};
/* only with a limit: garbage collection acts against the limit */
static const char *const SWEEP_LIMITED[] = {
    "garbage_collection_threshold:0.6",
    "garbage_collection_threshold:0.8",
    "garbage_collection_threshold:0.6,max_split_size_mb:128",
};

typedef tc_whatif_row row;

typedef struct job {
  const char *func;
  tc_tsnap *h;
  const tcuda_whatif_options_t *o;
  row *rows;
  size_t nrows;
  atomic_size_t next;
  size_t done; /* rows finished, under lock: progress is told one call at a time */
  pthread_mutex_t lock;
} job;

static uint64_t up_grid(uint64_t v) { return (v + GRID - 1) / GRID * GRID; }

/* Does the history run with no OOM under `limit`? */
static tcuda_status probe(const char *func, tc_tsnap *h, uint64_t capacity, row *w, uint64_t limit, int *ok) {
  tc_tsrun_opts o = {.cfg = &w->cfg, .exact = FOLLOW, .capacity = capacity, .limit = limit, .stop_at_oom = 1};
  tc_tsrun_result r;
  tcuda_status s = tc_tsnap_run(func, h, &o, &r);
  w->probes++;
  if (!s) *ok = r.first_oom < 0 && !r.start_oom;
  tc_tsrun_result_free(&r);
  return s;
}

tcuda_status tc_whatif_min_limit(const char *func, tc_tsnap *h, uint64_t capacity, tc_whatif_row *w,
                                 uint64_t peak_alloc, uint64_t peak_reserved) {
  uint64_t cap = capacity ? capacity : TC_H200_CAPACITY;
  uint64_t lo = up_grid(peak_alloc ? peak_alloc : 1), hi = up_grid(peak_reserved);
  if (hi < lo) hi = lo;
  int ok = 0;
  tcuda_status s = probe(func, h, capacity, w, hi, &ok);
  if (!s && !ok) {
    hi = cap / GRID * GRID;
    if (!(s = probe(func, h, capacity, w, hi, &ok)) && !ok) return TCUDA_SUCCESS; /* fails even with the whole device */
  }
  for (int round = 0; !s && round < 64; round++) {
    /* smallest fitting limit in [lo, hi], hi known to fit */
    while (!s && lo < hi) {
      uint64_t mid = lo + (hi - lo) / GRID / 2 * GRID;
      if (!(s = probe(func, h, capacity, w, mid, &ok))) {
        if (ok) hi = mid;
        else lo = mid + GRID;
      }
    }
    if (s) break;
    int below_ok = 0;
    if (hi > up_grid(peak_alloc ? peak_alloc : 1) && (s = probe(func, h, capacity, w, hi - GRID, &below_ok))) break;
    if (!below_ok) {
      w->have_min = 1;
      w->min_limit = hi;
      return TCUDA_SUCCESS;
    }
    lo = up_grid(peak_alloc ? peak_alloc : 1);
    hi -= GRID;
  }
  return s;
}

void tc_whatif_run_row(const char *func, tc_tsnap *h, const tcuda_whatif_options_t *o, tc_whatif_row *w) {
  tc_tsrun_opts ro = {.cfg = &w->cfg, .exact = FOLLOW, .capacity = o->capacity,
                     .fraction = o->memory_fraction, .series_points = o->series_points};
  tcuda_status s = tc_tsnap_run(func, h, &ro, &w->res);
  uint64_t pa = w->res.peak_allocated, pr = w->res.peak_reserved;
  if (!s && !o->no_min_limit) {
    if (o->memory_fraction > 0) { /* the bounds come from a run with no limit */
      tc_tsrun_opts free_run = {.cfg = &w->cfg, .exact = FOLLOW, .capacity = o->capacity};
      tc_tsrun_result r;
      if (!(s = tc_tsnap_run(func, h, &free_run, &r))) {
        pa = r.peak_allocated;
        pr = r.peak_reserved;
        tc_tsrun_result_free(&r);
      }
    }
    /* thread_cache:N's peak allocated counts the blocks its cache holds,
     * which an OOM flushes: a limit up to N blocks of 1 MiB lower may fit */
    uint64_t cached = (uint64_t)w->cfg.thread_cache * TC_SMALL_SIZE;
    pa = pa > cached ? pa - cached : 0;
    if (!s) s = tc_whatif_min_limit(func, h, o->capacity, w, pa, pr);
  }
  w->st = s;
  if (s) snprintf(w->err, sizeof w->err, "%s", tcuda_last_error());
}

static void *worker(void *arg) {
  job *j = arg;
  for (;;) {
    size_t k = atomic_fetch_add(&j->next, 1);
    if (k >= j->nrows) break;
    tc_whatif_run_row(j->func, j->h, j->o, &j->rows[k]);
    if (j->o->progress) {
      pthread_mutex_lock(&j->lock);
      j->o->progress(j->o->progress_user, "replay", ++j->done + 1, j->nrows + 1);
      pthread_mutex_unlock(&j->lock);
    }
  }
  return NULL;
}

/* ---- the document ---- */

static void put_series(tc_sbuf *b, const tc_tsrun_result *r) {
  tc_sbuf_puts(b, ", \"series\": {\"t_ms\": [");
  for (int i = 0; i < r->series_n; i++) tc_sbuf_printf(b, "%s%.3f", i ? ", " : "", r->series_t[i]);
  tc_sbuf_puts(b, "], \"reserved\": [");
  for (int i = 0; i < r->series_n; i++) tc_sbuf_printf(b, "%s%llu", i ? ", " : "", (unsigned long long)r->series_reserved[i]);
  tc_sbuf_puts(b, "], \"allocated\": [");
  for (int i = 0; i < r->series_n; i++) tc_sbuf_printf(b, "%s%llu", i ? ", " : "", (unsigned long long)r->series_allocated[i]);
  tc_sbuf_puts(b, "], \"reserved_min\": [");
  for (int i = 0; i < r->series_n; i++)
    tc_sbuf_printf(b, "%s%llu", i ? ", " : "", (unsigned long long)r->series_reserved_min[i]);
  tc_sbuf_puts(b, "], \"allocated_min\": [");
  for (int i = 0; i < r->series_n; i++)
    tc_sbuf_printf(b, "%s%llu", i ? ", " : "", (unsigned long long)r->series_allocated_min[i]);
  tc_sbuf_puts(b, "]}");
}

static tcuda_status is_library_request(tc_tsnap *h, size_t req, int *lib) {
  *lib = 1;
  if (req < h->num_requests && (h->ops[h->req_op[req]].flags & HOP_F_ADAPTIVE)) return TCUDA_SUCCESS;
  return tc_tsnap_request_library(h, req, lib);
}

/* The row's JSON; the frames shown are spent from the snapshot's budget. */
static tcuda_status put_row(tc_sbuf *b, tc_tsnap *h, const row *w) {
  tcuda_status s = TCUDA_SUCCESS;
  const tc_tsrun_result *r = &w->res;
  tc_sbuf_puts(b, "{\"config\": ");
  tc_json_str(b, w->config);
  tc_sbuf_puts(b, ", \"source\": ");
  tc_json_str(b, w->source);
  tc_sbuf_printf(b, ", \"peak_reserved\": %llu, \"peak_allocated\": %llu, \"ratio\": ",
                 (unsigned long long)r->peak_reserved, (unsigned long long)r->peak_allocated);
  if (r->peak_allocated) tc_sbuf_printf(b, "%.4f", (double)r->peak_reserved / (double)r->peak_allocated);
  else tc_sbuf_puts(b, "null");
  tc_sbuf_printf(b, ", \"peak_segments\": %llu, \"segment_calls\": %llu, \"retries\": %llu, \"ooms\": %llu",
                 (unsigned long long)r->peak_segments, (unsigned long long)r->segment_calls,
                 (unsigned long long)r->retries, (unsigned long long)r->ooms);
  tc_sbuf_puts(b, ", \"first_oom\": ");
  if (r->first_oom >= 0) {
    tc_sbuf_printf(b, "{\"request\": %lld, \"size\": %llu, \"frames\": ", (long long)r->first_oom,
                   (unsigned long long)r->first_oom_size);
    if ((s = tc_tsnap_frames_json(h, (size_t)r->first_oom, b))) return s;
    tc_sbuf_put(b, "}", 1);
  } else {
    tc_sbuf_puts(b, "null");
  }
  tc_sbuf_puts(b, ", \"min_limit\": ");
  if (w->have_min) tc_json_u64(b, w->min_limit);
  else tc_sbuf_puts(b, "null");
  int adaptive = h->adaptive_ooms > 0;
  if (!adaptive && r->first_oom >= 0 && (s = is_library_request(h, (size_t)r->first_oom, &adaptive))) return s;
  tc_sbuf_printf(b, ", \"min_limit_replays\": %d, \"depends_on_adaptive\": %s", w->probes, adaptive ? "true" : "false");
  if (r->series_n) put_series(b, r);
  tc_sbuf_puts(b, "}");
  return s;
}

const tc_whatif_row *tc_whatif_recommend(const tc_whatif_row *rows, size_t n) {
  const row *best = NULL;
  for (size_t i = 0; i < n; i++) {
    const row *w = &rows[i];
    if (!w->have_min || !strncmp(w->config, "policy:", 7)) continue;
    if (!best || w->min_limit < best->min_limit ||
        (w->min_limit == best->min_limit &&
         (w->res.retries < best->res.retries ||
          (w->res.retries == best->res.retries && w->res.segment_calls < best->res.segment_calls))))
      best = w;
  }
  return best;
}

static tcuda_status document(const char *F, tc_tsnap *h, const tcuda_whatif_options_t *o, const row *rows, size_t n,
                             const tc_tsrun_result *exact, char **out) {
  tcuda_status s = TCUDA_SUCCESS;
  tc_sbuf b = {0};
  uint64_t cap = o->capacity ? o->capacity : TC_H200_CAPACITY;
  tc_sbuf_printf(&b, "{\"snapshot\": {\"device\": %d, \"devices\": %d, \"entries\": %zu, \"requests\": %zu, ",
                 h->device, h->num_devices, h->num_entries, h->num_requests);
  tc_sbuf_printf(&b, "\"truncated\": %s, \"capacity\": %llu, \"fraction\": ", h->truncated ? "true" : "false",
                 (unsigned long long)cap);
  if (o->memory_fraction > 0) tc_sbuf_printf(&b, "%.17g, \"limit\": %llu", o->memory_fraction,
                                             (unsigned long long)(uint64_t)(o->memory_fraction * (double)cap));
  else tc_sbuf_puts(&b, "null, \"limit\": null");
  tc_sbuf_puts(&b, ", \"recorded_config\": ");
  tc_json_str(&b, h->conf_text);
  tc_sbuf_printf(&b, ", \"recorded_ooms\": %zu, \"adaptive_ooms\": %zu, \"inferred_empty_cache\": %zu, "
                     "\"replay_diverged\": %zu, \"private_pools\": %s, \"duration_ms\": %.3f},\n \"configs\": [",
                 h->recorded_ooms, h->adaptive_ooms, exact->inferred_empty, exact->diverged,
                 h->has_private_pools ? "true" : "false",
                 h->t1_us > h->t0_us ? (double)(h->t1_us - h->t0_us) / 1000.0 : 0.0);
  for (size_t i = 0; i < n && !s; i++) {
    tc_sbuf_puts(&b, i ? ",\n  " : "\n  ");
    s = put_row(&b, h, &rows[i]);
  }
  if (s) {
    tc_sbuf_free(&b);
    return s;
  }
  tc_sbuf_puts(&b, "],\n \"recommended\": ");
  const row *best = tc_whatif_recommend(rows, n);
  if (best && rows[0].have_min) {
    int64_t save = (int64_t)rows[0].min_limit - (int64_t)best->min_limit;
    tc_sbuf_puts(&b, "{\"config\": ");
    tc_json_str(&b, best->config);
    tc_sbuf_printf(&b, ", \"min_limit\": %llu, \"saving_bytes\": %lld, \"saving_percent\": %.2f}",
                   (unsigned long long)best->min_limit, (long long)save,
                   rows[0].min_limit ? 100.0 * (double)save / (double)rows[0].min_limit : 0.0);
  } else {
    tc_sbuf_puts(&b, "null");
  }
  tc_sbuf_puts(&b, ",\n \"notes\": [");
  const char *sep = "";
#define NOTE(text)                                                                                                   \
  do {                                                                                                               \
    tc_sbuf_puts(&b, sep);                                                                                           \
    tc_json_str(&b, text);                                                                                           \
    sep = ", ";                                                                                                      \
  } while (0)
  NOTE("after a row's first OOM its figures describe the history going on as if that request had not been made: "
       "what the program did after an OOM is not in the history");
  if (h->truncated)
    NOTE("the history's start was lost (torch's ring buffer was full): the state at its first entry was rebuilt "
         "from the snapshot's segments; peaks and counts are those of the window");
  if (h->adaptive_ooms)
    NOTE("the history holds OOMs that a library survived by taking a smaller workspace (cuDNN, cuBLAS): under a "
         "limit such a library adapts, so predictions are exact only up to the first request it would have "
         "retried smaller");
  if (exact->diverged)
    NOTE("the replay under the recorded config could not follow torch's segment placement everywhere: "
         "its figures are those of the driver model from there on");
  if (h->has_private_pools)
    NOTE("CUDA graph private pools are replayed as the default pool of their stream");
#undef NOTE
  tc_sbuf_puts(&b, "],\n \"explain\": ");
  if ((s = tc_explain_json(F, h, cap, o->memory_fraction, 0, &b))) {
    tc_sbuf_free(&b);
    return s;
  }
  tc_sbuf_puts(&b, "}\n");
  if (!(*out = tc_sbuf_take(&b))) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  return TCUDA_SUCCESS;
}

/* ---- entry points ---- */

static tcuda_status check_whatif_options(const char *F, const tcuda_whatif_options_t *o) {
  if (o->struct_size < sizeof(tcuda_whatif_options_t))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: opt->struct_size %zu is not sizeof(tcuda_whatif_options_t) (%zu)", F, o->struct_size,
                    sizeof(tcuda_whatif_options_t));
  if (!(o->memory_fraction >= 0.0 && o->memory_fraction <= 1.0))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: memory_fraction %g out of range (0~1)", F, o->memory_fraction);
  if (o->num_configs && !o->configs)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: configs is NULL with num_configs %zu", F, o->num_configs);
  if (o->num_configs > MAX_ROWS - 1)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: num_configs %zu is over %d", F, o->num_configs, MAX_ROWS - 1);
  if (o->threads < 0 || o->threads > 256)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: threads %d out of range (0~256)", F, o->threads);
  if (o->series_points < 0 || o->series_points > 100000)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: series_points %d out of range (0~100000)", F,
                    o->series_points);
  if (o->device < -1) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: device %d is negative", F, o->device);
  if (o->capacity && o->capacity < GRID)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: capacity %llu is under 2 MiB", F,
                    (unsigned long long)o->capacity);
  return TCUDA_SUCCESS;
}

static tcuda_status add_row(const char *F, row *rows, size_t *n, const char *conf, const char *source) {
  row *w = &rows[*n];
  memset(w, 0, sizeof *w);
  if (strlen(conf) >= sizeof w->config)
    return tc_error(TCUDA_ERROR_CONFIG, "%s: config %zu is too long (%zu bytes)", F, *n, strlen(conf));
  snprintf(w->config, sizeof w->config, "%s", conf);
  w->source = source;
  char src[96];
  snprintf(src, sizeof src, "%s: configs[%zu]", F, *n ? *n - 1 : 0);
  tc_alloc_config_default(&w->cfg);
  tcuda_status s = tc_alloc_config_parse_named(src, conf, &w->cfg);
  if (!s) (*n)++;
  return s;
}

static tcuda_status whatif(const char *F, tc_tsnap *h, const tcuda_whatif_options_t *o, char **json_out) {
  row *rows = calloc(MAX_ROWS, sizeof *rows);
  if (!rows) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  size_t n = 0;
  tcuda_status s = TCUDA_SUCCESS;
  /* the recorded row */
  memset(&rows[0], 0, sizeof rows[0]);
  snprintf(rows[0].config, sizeof rows[0].config, "%s", h->conf_text);
  rows[0].source = "recorded";
  rows[0].cfg = h->cfg;
  n = 1;
  if (o->num_configs) {
    for (size_t i = 0; i < o->num_configs && !s; i++) {
      if (!o->configs[i]) s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: configs[%zu] is NULL", F, i);
      else s = add_row(F, rows, &n, o->configs[i], "given");
    }
  } else {
    for (size_t i = 0; i < sizeof SWEEP / sizeof *SWEEP && !s; i++) s = add_row(F, rows, &n, SWEEP[i], "sweep");
    for (size_t i = 0; o->memory_fraction > 0 && i < sizeof SWEEP_LIMITED / sizeof *SWEEP_LIMITED && !s; i++)
      s = add_row(F, rows, &n, SWEEP_LIMITED[i], "sweep");
  }
  /* the first replay: torch's run, which infers the empty_cache calls */
  tc_tsrun_result ex = {0};
  if (!s && o->progress) o->progress(o->progress_user, "replay", 0, n + 1); /* the first replay, then the rows */
  if (!s) {
    tc_tsrun_opts eo = {.exact = 1, .capacity = o->capacity, .fraction = o->memory_fraction};
    s = tc_tsnap_run(F, h, &eo, &ex);
  }
  if (!s) {
    job j = {.func = F, .h = h, .o = o, .rows = rows, .nrows = n};
    atomic_init(&j.next, 0);
    pthread_mutex_init(&j.lock, NULL);
    if (o->progress) o->progress(o->progress_user, "replay", 1, n + 1);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = o->threads ? o->threads : (int)(cpus > 0 ? cpus : 1);
    if ((size_t)nt > n) nt = (int)n;
    pthread_t th[256];
    int started = 0;
    for (int t = 1; t < nt; t++)
      if (!pthread_create(&th[started], NULL, worker, &j)) started++;
    worker(&j);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    pthread_mutex_destroy(&j.lock);
    for (size_t i = 0; i < n && !s; i++)
      if (rows[i].st) s = tc_error(rows[i].st, "%s", rows[i].err);
  }
  if (!s) s = document(F, h, o, rows, n, &ex, json_out);
  tc_tsrun_result_free(&ex);
  for (size_t i = 0; i < n; i++) tc_tsrun_result_free(&rows[i].res);
  free(rows);
  return s;
}

tcuda_status tcuda_whatif_file(const char *snapshot_path, const tcuda_whatif_options_t *opt, char **json_out) {
  static const char *F = "tcuda_whatif_file";
  TC_CHECK_ARG(F, json_out, "json_out");
  *json_out = NULL;
  TC_CHECK_ARG(F, snapshot_path, "snapshot_path");
  tcuda_whatif_options_t def = TCUDA_WHATIF_OPTIONS_INIT;
  const tcuda_whatif_options_t *o = opt ? opt : &def;
  tcuda_status s = check_whatif_options(F, o);
  if (s) return s;
  tc_tsnap h;
  tc_tsnap_limits lim = {o->max_input_bytes, o->work_budget};
  if (o->progress) o->progress(o->progress_user, "read", 0, 0);
  if ((s = tc_tsnap_load_file(F, snapshot_path, o->device, &lim, &h))) return s;
  s = whatif(F, &h, o, json_out);
  tc_tsnap_free(&h);
  return s;
}

tcuda_status tcuda_whatif_buffer(const void *data, size_t len, const tcuda_whatif_options_t *opt, char **json_out) {
  static const char *F = "tcuda_whatif_buffer";
  TC_CHECK_ARG(F, json_out, "json_out");
  *json_out = NULL;
  TC_CHECK_ARG(F, data || !len, "data");
  tcuda_whatif_options_t def = TCUDA_WHATIF_OPTIONS_INIT;
  const tcuda_whatif_options_t *o = opt ? opt : &def;
  tcuda_status s = check_whatif_options(F, o);
  if (s) return s;
  tc_tsnap h;
  tc_tsnap_limits lim = {o->max_input_bytes, o->work_budget};
  if ((s = tc_tsnap_load(F, data ? data : "", len, o->device, &lim, &h))) return s;
  s = whatif(F, &h, o, json_out);
  tc_tsnap_free(&h);
  return s;
}
