/* tcuda_whatif_*: a PyTorch history replayed under its own config and
 * others, each row with its minimal memory limit.
 *
 * The history is loaded once. The limit it was recorded under is inferred
 * from it (whatif.h), and a first replay under the snapshot's own settings
 * and that limit, on torch's recorded addresses, infers the empty_cache
 * calls (torchsnap.h): neither depends on the limit the table is asked
 * for, so no row's min_limit does. Rows then replay in parallel threads,
 * each reading the same ops and writing only its own row. */
#include "core/core.h"
#include "explain.h"
#include "inspect/jsonwrite.h"
#include "whatif.h"
#include <math.h>
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
/* only with a limit (given, or inferred from the history): garbage
 * collection acts against the limit */
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
static uint64_t down_grid(uint64_t v) { return v / GRID * GRID; }

/* ---- the recorded limit ---- */

/* Bounds from the OOM entries: reserved bytes replayed from the segment
 * entries (a truncated history starts from its first entry's segments). */
static void bound_by_ooms(const tc_tsnap *h, tc_whatif_limit *L) {
  L->ooms_used = L->device_full = 0;
  uint64_t r = 0, max_r = 0, high = UINT64_MAX;
  for (size_t k = 0; k < h->num_segs; k++) r += h->segs[k].size;
  max_r = r;
  for (size_t i = 0; i < h->num_ops; i++) {
    const tc_tsop *op = &h->ops[i];
    switch (op->kind) {
    case HOP_SEG_ALLOC:
    case HOP_SEG_MAP:
      r += op->size;
      if (r > max_r) max_r = r;
      break;
    case HOP_SEG_FREE:
    case HOP_SEG_UNMAP:
      r -= op->size < r ? op->size : r;
      break;
    case HOP_OOM: {
      uint64_t rounded = tc_alloc_round_size(&h->cfg, op->size);
      /* expandable segments map pages: at most the rounded size is new */
      uint64_t need = h->cfg.expandable_segments ? up_grid(rounded) : tc_alloc_segment_size(&h->cfg, rounded);
      if (op->addr && need > op->addr) { /* device_free: the device itself had no room */
        L->device_full++;
        break;
      }
      L->ooms_used++;
      if (r + need - 1 < high) high = r + need - 1;
      break;
    }
    default:
      break;
    }
  }
  L->low = max_r;
  L->high = high;
}

/* How far the replay of torch's run under `limit` is from explaining the
 * recorded segment frees: empty_cache calls it had to infer, and places
 * it could not follow. */
static tcuda_status exact_run(const char *func, tc_tsnap *h, uint64_t capacity, uint64_t limit, tc_tsrun_result *ex,
                              size_t *score) {
  tc_tsrun_opts eo = {.exact = 1, .capacity = capacity, .limit = limit, .stop_at_oom = 0};
  tcuda_status s = tc_tsnap_run(func, h, &eo, ex);
  if (!s) *score = ex->inferred_empty + ex->diverged;
  return s;
}

#define CANDIDATES 64 /* replays spent choosing a limit within its bounds */

tcuda_status tc_whatif_infer_limit(const char *func, tc_tsnap *h, uint64_t capacity, tc_whatif_limit *L,
                                   tc_tsrun_result *ex) {
  memset(L, 0, sizeof *L);
  memset(ex, 0, sizeof *ex);
  uint64_t cap = capacity ? capacity : TC_H200_CAPACITY;
  double gc = h->cfg.garbage_collection_threshold;
  size_t score = 0;
  tcuda_status s;
  bound_by_ooms(h, L);
  int bounded = h->recorded_ooms && L->ooms_used && L->low <= L->high;
  if (h->recorded_ooms && !L->ooms_used)
    snprintf(L->warning, sizeof L->warning,
             "no limit could be inferred: at each of the %zu recorded OOMs the device itself had no room "
             "(device_free); give the device's size with --capacity",
             h->recorded_ooms);
  else if (h->recorded_ooms && !bounded)
    snprintf(L->warning, sizeof L->warning,
             "no limit could be inferred: the history reached %llu reserved bytes, yet an OOM shows a limit under "
             "%llu bytes; give it with --fraction",
             (unsigned long long)L->low, (unsigned long long)L->high + 1);
  int by_gc = 0;
  if (!bounded) { /* torch's run with no limit, and whether garbage collection shows one */
    if ((s = exact_run(func, h, capacity, 0, ex, &score))) return s;
    by_gc = gc > 0 && score && !h->recorded_ooms;
    if (!by_gc) return TCUDA_SUCCESS;
    L->high = UINT64_MAX;
  }
  /* Garbage collection frees once the reserved bytes pass threshold x
   * limit, so it ran under a limit below max_reserved / threshold. */
  if (gc > 0 && (double)L->low / gc < (double)L->high) L->high = (uint64_t)((double)L->low / gc);
  if (L->high >= cap) L->high = cap - 1;
  /* Within the bounds, the grid limit whose replay of torch's run makes the
   * recorded OOMs and explains the most recorded segment frees (the cache
   * flushes before a retry and garbage collection happen at the limit),
   * the highest such; at most CANDIDATES tried, evenly spread. */
  uint64_t lo = up_grid(L->low ? L->low : GRID), top = down_grid(L->high);
  if (top < lo) top = lo;
  uint64_t steps = (top - lo) / GRID + 1, stride = (steps + CANDIDATES - 1) / CANDIDATES;
  size_t best = SIZE_MAX;
  uint64_t best_at = 0;
  for (uint64_t at = lo; at <= top; at += stride * GRID) {
    tc_tsrun_result r;
    size_t sc = 0;
    if ((s = exact_run(func, h, capacity, at, &r, &sc))) return s;
    if (r.ooms != h->recorded_ooms) sc += (size_t)1 << 40; /* behind every limit that makes them */
    tc_tsrun_result_free(&r);
    if (sc <= best) {
      best = sc;
      best_at = at;
    }
  }
  if (by_gc && best >= score) return TCUDA_SUCCESS; /* no limit explains more than none */
  tc_tsrun_result_free(ex);
  memset(ex, 0, sizeof *ex);
  if ((s = exact_run(func, h, capacity, best_at, ex, &score))) return s;
  L->inferred = 1;
  L->how = by_gc ? "garbage_collection" : "ooms";
  L->limit = best_at;
  L->unexplained = score;
  return TCUDA_SUCCESS;
}

/* ---- min_limit ---- */

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

/* Behaviour that depends on the limit before the limit is reached: "no
 * OOM" need not be monotone in the limit. */
static int limit_dependent(const tc_alloc_config *cfg) {
  return cfg->garbage_collection_threshold > 0 || cfg->policy == TC_POLICY_COMPACT;
}

/* the scan below the bisection's answer: at most this many grid steps
 * above the lower bound (a probe is a replay) */
#define SCAN_MAX 256      /* limit-dependent configs: 512 MiB */
#define SCAN_MAX_OTHER 64 /* the others: 128 MiB */

tcuda_status tc_whatif_min_limit(const char *func, tc_tsnap *h, uint64_t capacity, tc_whatif_row *w,
                                 uint64_t peak_alloc, uint64_t peak_reserved) {
  uint64_t cap = capacity ? capacity : TC_H200_CAPACITY;
  uint64_t lo0 = up_grid(peak_alloc ? peak_alloc : 1), lo = lo0, hi = up_grid(peak_reserved);
  if (hi < lo) hi = lo;
  int ok = 0;
  tcuda_status s = probe(func, h, capacity, w, hi, &ok);
  if (!s && !ok) {
    hi = cap / GRID * GRID;
    if (!(s = probe(func, h, capacity, w, hi, &ok)) && !ok) return TCUDA_SUCCESS; /* fails even with the whole device */
  }
  /* smallest fitting limit in [lo, hi], hi known to fit */
  while (!s && lo < hi) {
    uint64_t mid = lo + (hi - lo) / GRID / 2 * GRID;
    if (!(s = probe(func, h, capacity, w, mid, &ok))) {
      if (ok) hi = mid;
      else lo = mid + GRID;
    }
  }
  if (s) return s;
  /* the grid limits below, until two in a row fail: the bottom of the
   * no-OOM range the bisection landed in */
  uint64_t fail_from = hi;
  while (!s && hi > lo0) {
    fail_from = hi;
    if ((s = probe(func, h, capacity, w, hi - GRID, &ok))) break;
    if (ok) {
      hi -= GRID;
      continue;
    }
    fail_from = hi - GRID;
    if (hi - GRID <= lo0) break;
    if ((s = probe(func, h, capacity, w, hi - 2 * GRID, &ok))) break;
    if (!ok) {
      fail_from = hi - 2 * GRID;
      break;
    }
    hi -= 2 * GRID;
  }
  if (s) return s;
  w->bisected = hi;
  if ((hi - lo0) / GRID <= (limit_dependent(&w->cfg) ? SCAN_MAX : SCAN_MAX_OTHER)) {
    /* every other grid limit from the lower bound up: the first that fits
     * is the lowest, whatever the shape of "no OOM" below */
    w->scanned = 1;
    for (uint64_t at = lo0; at < fail_from && !s; at += GRID) {
      if (!(s = probe(func, h, capacity, w, at, &ok)) && ok) {
        hi = at;
        break;
      }
    }
  }
  if (s) return s;
  w->have_min = 1;
  w->min_limit = hi;
  return TCUDA_SUCCESS;
}

void tc_whatif_run_row(const char *func, tc_tsnap *h, const tcuda_whatif_options_t *o, tc_whatif_row *w) {
  tc_tsrun_opts ro = {.cfg = &w->cfg, .exact = FOLLOW, .capacity = o->capacity, .fraction = o->memory_fraction};
  tcuda_status s = tc_tsnap_run(func, h, &ro, &w->res);
  if (!s && o->series_points > 0) {
    /* the chart's series restart the peaks at each point, which a policy
     * may read (policy:compact's budget): they come from their own replay */
    tc_tsrun_opts so = ro;
    so.series_points = o->series_points;
    tc_tsrun_result r;
    if (!(s = tc_tsnap_run(func, h, &so, &r))) {
      w->res.series_n = r.series_n;
      w->res.series_t = r.series_t;
      w->res.series_reserved = r.series_reserved;
      w->res.series_allocated = r.series_allocated;
      w->res.series_reserved_min = r.series_reserved_min;
      w->res.series_allocated_min = r.series_allocated_min;
    }
  }
  uint64_t pa = w->res.peak_allocated, pr = w->res.peak_reserved;
  if (!s && o->memory_fraction > 0) { /* min_limit's bounds come from a run with no limit */
    tc_tsrun_opts free_run = {.cfg = &w->cfg, .exact = FOLLOW, .capacity = o->capacity};
    tc_tsrun_result r;
    if (!(s = tc_tsnap_run(func, h, &free_run, &r))) {
      pa = r.peak_allocated;
      pr = r.peak_reserved;
      tc_tsrun_result_free(&r);
    }
  }
  w->free_peak_reserved = pr;
  if (!s && !o->no_min_limit) {
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
  tc_sbuf_printf(b, ", \"peak_reserved\": %llu, \"peak_allocated\": %llu, \"peak_reserved_no_limit\": %llu, \"ratio\": ",
                 (unsigned long long)r->peak_reserved, (unsigned long long)r->peak_allocated,
                 (unsigned long long)w->free_peak_reserved);
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
  tc_sbuf_puts(b, ", \"min_limit_bisected\": ");
  if (w->have_min) tc_json_u64(b, w->bisected);
  else tc_sbuf_puts(b, "null");
  tc_sbuf_printf(b, ", \"min_limit_replays\": %d, \"min_limit_scanned\": %s, \"depends_on_adaptive\": %s", w->probes,
                 w->scanned ? "true" : "false", adaptive ? "true" : "false");
  if (r->series_n) put_series(b, r);
  tc_sbuf_puts(b, "}");
  return s;
}

/* the peak reserved bytes a goal compares */
static uint64_t peak_of(const row *w, int goal) { return goal == TC_WHATIF_FIT ? w->free_peak_reserved : w->res.peak_reserved; }
static int table_oom(const row *w) { return w->res.ooms || w->res.first_oom >= 0; }

/* Is w no worse than the recorded row r0 on both counts? (The peak under
 * the table's limit says nothing for a recorded row that ran out there.) */
static int no_worse(const row *w, const row *r0, int goal) {
  if (r0->have_min && (!w->have_min || w->min_limit > r0->min_limit)) return 0;
  if ((goal == TC_WHATIF_FIT || !table_oom(r0)) && peak_of(w, goal) > peak_of(r0, goal)) return 0;
  return 1;
}

/* a before b on the remaining ties */
static int fewer_calls(const row *a, const row *b) {
  if (a->res.retries != b->res.retries) return a->res.retries < b->res.retries;
  return a->res.segment_calls < b->res.segment_calls;
}

static int candidate(const row *w, const row *r0, int goal) {
  if (w->cfg.policy != TC_POLICY_TORCH || !strncmp(w->config, "policy:", 7) || !no_worse(w, r0, goal)) return 0;
  return goal == TC_WHATIF_FIT ? w->have_min : !table_oom(w);
}

const tc_whatif_row *tc_whatif_recommend(const tc_whatif_row *rows, size_t n, int goal) {
  if (!n) return NULL;
  const row *r0 = &rows[0], *best = NULL;
  uint64_t floor = UINT64_MAX;
  for (size_t i = 0; i < n; i++) /* the lowest min_limit among the candidates */
    if (goal == TC_WHATIF_FIT && candidate(&rows[i], r0, goal) && rows[i].min_limit < floor) floor = rows[i].min_limit;
  for (size_t i = 0; i < n; i++) {
    const row *w = &rows[i];
    if (!candidate(w, r0, goal)) continue;
    if (goal == TC_WHATIF_FIT && w->min_limit > floor + GRID) continue; /* within 2 MiB: a tie */
    uint64_t wm = w->have_min ? w->min_limit : UINT64_MAX, bm = best && best->have_min ? best->min_limit : UINT64_MAX;
    if (!best || peak_of(w, goal) < peak_of(best, goal) ||
        (peak_of(w, goal) == peak_of(best, goal) &&
         (wm < bm || (wm == bm && best != r0 && (w == r0 || fewer_calls(w, best))))))
      best = w; /* on a full tie the recorded settings stay: a change must gain something */
  }
  return best;
}

/* the items of a config: split at commas outside brackets */
static size_t config_items(const char *c, const char *item[], size_t len[], size_t max) {
  size_t n = 0;
  while (*c && n < max) {
    const char *e = c;
    int depth = 0;
    while (*e && (depth || *e != ',')) {
      depth += *e == '[';
      depth -= *e == ']' && depth;
      e++;
    }
    if (e > c) {
      item[n] = c;
      len[n++] = (size_t)(e - c);
    }
    c = *e ? e + 1 : e;
  }
  return n;
}

static size_t key_len(const char *item, size_t len) {
  const char *colon = memchr(item, ':', len);
  return colon ? (size_t)(colon - item) : len;
}

int tc_whatif_merge_config(const char *base, const char *over, char *out, size_t n) {
  const char *bi[64], *oi[64];
  size_t bl[64], ol[64];
  size_t nb = config_items(base, bi, bl, 64), no = config_items(over, oi, ol, 64), at = 0;
  out[0] = 0;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < (pass ? no : nb); i++) {
      const char *it = pass ? oi[i] : bi[i];
      size_t il = pass ? ol[i] : bl[i], kl = key_len(it, il);
      int replaced = 0;
      for (size_t j = 0; !pass && j < no; j++)
        replaced |= key_len(oi[j], ol[j]) == kl && !strncmp(oi[j], it, kl);
      if (replaced) continue;
      int w = snprintf(out + at, n - at, "%s%.*s", at ? "," : "", (int)il, it);
      if (w < 0 || (size_t)w >= n - at) return 0;
      at += (size_t)w;
    }
  }
  return 1;
}

typedef struct docctx {
  const tcuda_whatif_options_t *o; /* the table's options (a fraction for an inferred limit) */
  const char *limit_source;        /* "given", "inferred" or NULL */
  const tc_whatif_limit *lim;
  int window_peak;                 /* truncated: -1 unknown, 0 the window does not hold the peak */
} docctx;

static void put_limit(tc_sbuf *b, const tc_whatif_limit *L) {
  tc_sbuf_puts(b, ", \"recorded_limit\": ");
  if (L->inferred) {
    tc_sbuf_printf(b, "{\"limit\": %llu, \"low\": %llu, \"high\": %llu, \"how\": \"%s\", \"ooms_used\": %zu, "
                      "\"device_full_ooms\": %zu, \"unexplained_frees\": %zu}",
                   (unsigned long long)L->limit, (unsigned long long)L->low, (unsigned long long)L->high, L->how,
                   L->ooms_used, L->device_full, L->unexplained);
  } else {
    tc_sbuf_puts(b, "null");
  }
  tc_sbuf_puts(b, ", \"limit_warning\": ");
  if (L->warning[0]) tc_json_str(b, L->warning);
  else tc_sbuf_puts(b, "null");
}

/* One recommendation, or null. */
static void put_advice(tc_sbuf *b, const row *rows, const row *best, int goal) {
  if (!best) {
    tc_sbuf_puts(b, "null");
    return;
  }
  const row *r0 = &rows[0];
  char line[600];
  snprintf(line, sizeof line, "PYTORCH_CUDA_ALLOC_CONF=%s", best->config);
  tc_sbuf_printf(b, "{\"goal\": \"%s\", \"config\": ", goal == TC_WHATIF_FIT ? "fit" : "hold");
  tc_json_str(b, best->config);
  tc_sbuf_puts(b, ", \"setting\": ");
  tc_json_str(b, line);
  tc_sbuf_printf(b, ", \"is_recorded\": %s, \"min_limit\": ", best == r0 ? "true" : "false");
  if (best->have_min) tc_json_u64(b, best->min_limit);
  else tc_sbuf_puts(b, "null");
  tc_sbuf_printf(b, ", \"peak_reserved\": %llu, \"peak_reserved_no_limit\": %llu",
                 (unsigned long long)best->res.peak_reserved, (unsigned long long)best->free_peak_reserved);
  /* against the recorded row: its min_limit, or its peak reserved when it ran with no OOM */
  int have = goal == TC_WHATIF_FIT ? r0->have_min : !r0->res.ooms && r0->res.first_oom < 0;
  uint64_t was = goal == TC_WHATIF_FIT ? r0->min_limit : r0->res.peak_reserved;
  uint64_t now = goal == TC_WHATIF_FIT ? best->min_limit : best->res.peak_reserved;
  if (have) {
    int64_t save = (int64_t)was - (int64_t)now;
    tc_sbuf_printf(b, ", \"saving_bytes\": %lld, \"saving_percent\": %.2f}", (long long)save,
                   was ? 100.0 * (double)save / (double)was : 0.0);
  } else {
    tc_sbuf_puts(b, ", \"saving_bytes\": null, \"saving_percent\": null}");
  }
}

static tcuda_status document(const char *F, tc_tsnap *h, const docctx *dc, const row *rows, size_t n,
                             const tc_tsrun_result *exact, char **out) {
  const tcuda_whatif_options_t *o = dc->o;
  tcuda_status s = TCUDA_SUCCESS;
  tc_sbuf b = {0};
  uint64_t cap = o->capacity ? o->capacity : TC_H200_CAPACITY;
  tc_sbuf_printf(&b, "{\"snapshot\": {\"device\": %d, \"devices\": %d, \"entries\": %zu, \"requests\": %zu, ",
                 h->device, h->num_devices, h->num_entries, h->num_requests);
  tc_sbuf_printf(&b, "\"truncated\": %s, \"window_holds_peak\": %s, \"capacity\": %llu, \"fraction\": ",
                 h->truncated ? "true" : "false", !h->truncated ? "null" : dc->window_peak ? "null" : "false",
                 (unsigned long long)cap);
  if (o->memory_fraction > 0) {
    char num[40];
    for (int prec = 1; prec <= 17; prec++) { /* the shortest form that reads back */
      snprintf(num, sizeof num, "%.*g", prec, o->memory_fraction);
      if (strtod(num, NULL) == o->memory_fraction) break;
    }
    tc_sbuf_printf(&b, "%s, \"limit\": %llu", num, (unsigned long long)(uint64_t)(o->memory_fraction * (double)cap));
  } else {
    tc_sbuf_puts(&b, "null, \"limit\": null");
  }
  tc_sbuf_puts(&b, ", \"limit_source\": ");
  if (dc->limit_source) tc_json_str(&b, dc->limit_source);
  else tc_sbuf_puts(&b, "null");
  put_limit(&b, dc->lim);
  tc_sbuf_puts(&b, ", \"recorded_config\": ");
  tc_json_str(&b, h->conf_text);
  tc_sbuf_printf(&b, ", \"recorded_ooms\": %zu, \"adaptive_ooms\": %zu, \"inferred_empty_cache\": %zu, "
                     "\"replay_diverged\": %zu, \"private_pools\": %s, \"min_limit_lower_bound\": %s, \"duration_ms\": %.3f},\n \"configs\": [",
                 h->recorded_ooms, h->adaptive_ooms, exact->inferred_empty, exact->diverged,
                 h->has_private_pools ? "true" : "false", h->recorded_ooms > h->adaptive_ooms ? "true" : "false",
                 h->t1_us > h->t0_us ? (double)(h->t1_us - h->t0_us) / 1000.0 : 0.0);
  for (size_t i = 0; i < n && !s; i++) {
    tc_sbuf_puts(&b, i ? ",\n  " : "\n  ");
    s = put_row(&b, h, &rows[i]);
  }
  if (s) {
    tc_sbuf_free(&b);
    return s;
  }
  /* a truncated history: the other configs start from a layout rebuilt
   * from the live blocks, not torch's, so their peak reserved bytes rest
   * on the lost prefix; with the peak outside the window, min_limit too */
  const char *withheld = NULL;
  const row *fit = tc_whatif_recommend(rows, n, TC_WHATIF_FIT), *hold = tc_whatif_recommend(rows, n, TC_WHATIF_HOLD);
  if (h->truncated && !dc->window_peak) {
    withheld = "the history was truncated and its window does not hold the peak: what fits or is held at the peak "
               "is in the lost prefix";
    fit = hold = NULL;
  } else if (h->truncated) {
    withheld = "the history was truncated: the other configs' peak reserved bytes rest on a layout rebuilt for the "
               "window's start, not torch's, so the advice to hold less memory is withheld; the advice to fit under "
               "a limit holds for the window only";
    hold = NULL;
  }
  tc_sbuf_puts(&b, "],\n \"recommended\": ");
  put_advice(&b, rows, fit, TC_WHATIF_FIT);
  tc_sbuf_puts(&b, ",\n \"recommended_reserved\": ");
  put_advice(&b, rows, hold, TC_WHATIF_HOLD);
  tc_sbuf_puts(&b, ",\n \"recommendation_withheld\": ");
  if (withheld) tc_json_str(&b, withheld);
  else tc_sbuf_puts(&b, "null");
  tc_sbuf_puts(&b, ",\n \"notes\": [");
  const char *sep = "";
#define NOTE(text)                                                                                                   \
  do {                                                                                                               \
    tc_sbuf_puts(&b, sep);                                                                                           \
    tc_json_str(&b, text);                                                                                           \
    sep = ", ";                                                                                                      \
  } while (0)
  const tc_whatif_limit *L = dc->lim;
  char text[900];
  if (L->inferred) {
    snprintf(text, sizeof text,
             "the recorded limit was inferred from the history (a snapshot does not store it): %llu bytes. %s; "
             "within them, the replay of torch's run under %llu bytes makes the recorded OOMs (%zu) and leaves "
             "%zu recorded segment free%s unexplained%s",
             (unsigned long long)L->limit, "", (unsigned long long)L->limit, h->recorded_ooms, L->unexplained,
             L->unexplained == 1 ? "" : "s",
             dc->limit_source && !strcmp(dc->limit_source, "inferred") ? "; the table runs under it" : "");
    char bounds[400];
    if (!strcmp(L->how, "ooms"))
      snprintf(bounds, sizeof bounds,
               "The history reached %llu reserved bytes, and %zu OOM%s that the device had room for could not "
               "have happened under %llu bytes or more",
               (unsigned long long)L->low, L->ooms_used, L->ooms_used == 1 ? "" : "s",
               (unsigned long long)L->high + 1);
    else
      snprintf(bounds, sizeof bounds,
               "The history reached %llu reserved bytes, and garbage collection (threshold %g) freed segments, "
               "which it does only under a limit below %llu bytes",
               (unsigned long long)L->low, h->cfg.garbage_collection_threshold, (unsigned long long)L->high + 1);
    char *mark = strstr(text, ". ; ");
    if (mark) {
      char rest[900];
      snprintf(rest, sizeof rest, "%s", mark + 4);
      snprintf(mark, sizeof text - (size_t)(mark - text), ". %s; %s", bounds, rest);
    }
    NOTE(text);
  }
  if (L->warning[0]) NOTE(L->warning);
  if (L->inferred && exact->ooms != h->recorded_ooms) {
    snprintf(text, sizeof text, "the replay of torch's run under the inferred limit has %llu OOM%s, torch had %zu",
             (unsigned long long)exact->ooms, exact->ooms == 1 ? "" : "s", h->recorded_ooms);
    NOTE(text);
  }
  NOTE("after a row's first OOM its figures describe the history going on as if that request had not been made: "
       "what the program did after an OOM is not in the history");
  if (h->recorded_ooms > h->adaptive_ooms) {
    size_t lost = h->recorded_ooms - h->adaptive_ooms;
    snprintf(text, sizeof text,
             "%zu of torch's OOMs %s not survived by a library: what the program would have allocated after %s is "
             "not in the history, so each min_limit is a lower bound for the whole program",
             lost, lost == 1 ? "was" : "were", lost == 1 ? "it" : "them");
    NOTE(text);
  }
  if (h->truncated)
    NOTE(dc->window_peak
             ? "the history's start was lost (torch's ring buffer was full): the state at its first entry was "
               "rebuilt from the snapshot's segments; peaks and counts are those of the window"
             : "the history's start was lost (torch's ring buffer was full) and the window does not hold the peak: "
               "its highest allocated bytes are those live at its first entry, so the peak lies in the lost part");
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

/* A sweep row: the recorded settings with the item set over them (what a
 * user would set), once; torch's defaults ("") stay a row of their own. */
static tcuda_status add_sweep_row(const char *F, tc_tsnap *h, row *rows, size_t *n, const char *item) {
  char merged[512];
  if (!strncmp(item, "policy:", 7)) return add_row(F, rows, n, item, "sweep"); /* tcuda's own, as it is */
  if (*item && !tc_whatif_merge_config(h->conf_text, item, merged, sizeof merged))
    return tc_error(TCUDA_ERROR_CONFIG, "%s: the recorded settings with '%s' make too long a config", F, item);
  const char *conf = *item ? merged : "";
  for (size_t i = 1; i < *n; i++)
    if (!strcmp(rows[i].config, conf)) return TCUDA_SUCCESS;
  return add_row(F, rows, n, conf, "sweep");
}

/* Does the window of a truncated history hold its peak? Not when its
 * highest allocated bytes are those live at its first entry. */
static int window_holds_peak(const tc_tsnap *h, const row *r0) {
  uint64_t live = 0;
  for (size_t k = 0; k < h->num_blocks; k++)
    if (!h->blocks[k].pending) live += h->blocks[k].size;
  return r0->res.peak_allocated > live ? -1 : 0;
}

static tcuda_status whatif(const char *F, tc_tsnap *h, const tcuda_whatif_options_t *o, char **json_out) {
  row *rows = calloc(MAX_ROWS, sizeof *rows);
  if (!rows) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  size_t n = 0;
  tcuda_status s = TCUDA_SUCCESS;
  uint64_t cap = o->capacity ? o->capacity : TC_H200_CAPACITY;
  /* torch's run, under the limit it was recorded with: it infers the
   * empty_cache calls, the same whatever the table is asked for */
  tc_whatif_limit lim;
  tc_tsrun_result ex = {0};
  s = tc_whatif_infer_limit(F, h, o->capacity, &lim, &ex);
  tcuda_whatif_options_t to = *o; /* the table's limit: the one given, or the inferred one */
  docctx dc = {.o = &to, .lim = &lim, .window_peak = -1};
  if (o->memory_fraction > 0) {
    dc.limit_source = "given";
  } else if (lim.inferred && lim.limit < cap) { /* a device smaller than it binds first */
    to.memory_fraction = tc_tsnap_limit_fraction(lim.limit, cap);
    dc.limit_source = "inferred";
  }
  /* the recorded row */
  memset(&rows[0], 0, sizeof rows[0]);
  snprintf(rows[0].config, sizeof rows[0].config, "%s", h->conf_text);
  rows[0].source = "recorded";
  rows[0].cfg = h->cfg;
  n = 1;
  if (s) {
  } else if (o->num_configs) {
    for (size_t i = 0; i < o->num_configs && !s; i++) {
      if (!o->configs[i]) s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: configs[%zu] is NULL", F, i);
      else s = add_row(F, rows, &n, o->configs[i], "given");
    }
  } else {
    for (size_t i = 0; i < sizeof SWEEP / sizeof *SWEEP && !s; i++) s = add_sweep_row(F, h, rows, &n, SWEEP[i]);
    for (size_t i = 0; to.memory_fraction > 0 && i < sizeof SWEEP_LIMITED / sizeof *SWEEP_LIMITED && !s; i++)
      s = add_sweep_row(F, h, rows, &n, SWEEP_LIMITED[i]);
  }
  /* torch's run was replayed first (tc_whatif_infer_limit); then the rows */
  if (!s && o->progress) o->progress(o->progress_user, "replay", 0, n + 1);
  if (!s) {
    job j = {.func = F, .h = h, .o = &to, .rows = rows, .nrows = n};
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
  if (!s && h->truncated) dc.window_peak = window_holds_peak(h, &rows[0]);
  if (!s) s = document(F, h, &dc, rows, n, &ex, json_out);
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
