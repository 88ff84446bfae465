/* What holds the memory at the peaks and at the first OOM of a torch
 * history replayed under its own config, and the comparison of two
 * snapshots (tcuda_whatif_compare_files).
 *
 * Two replays: the first finds the ops at which the reserved and allocated
 * peaks were reached and the first request that failed; the second reads
 * the allocator's segments right after each of those ops. A live block is
 * traced to its request through its address (the latest alloc op there),
 * and the request to its stack frames, reduced to user frames as torch's
 * _memory_viz reduces them, and further past torch's own files. */
#include "explain.h"
#include "core/error.h"
#include "core/table.h"
#include "readfile.h"
#include <stdlib.h>
#include <string.h>

/* Frames torch's memory viewer leaves out (by function name and file
 * name), and torch's own files, past which the user's frames start. */
static const char *const OMIT_NAMES[] = {"unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
                                         "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_"};
static const char *const OMIT_FILES[] = {"core/boxing", "/Register", "/Redispatch", "pythonrun.c",
                                         "Modules/main.c", "Objects/call.c", "Objects/methodobject.c",
                                         "pycore_ceval.h", "ceval.c", "cpython/abstract.h"};
static const char *const TORCH_FILES[] = {"/torch/", "/c10/", "/aten/"};
static const char *const TORCH_NAMES[] = {"c10::", "at::", "torch::"};

enum { KEY_NONE = 0, KEY_BEFORE = 1, KEY_FIRST = 2 }; /* no stack recorded; alive before the window */

#define NO_OP SIZE_MAX

typedef struct {
  uint32_t key;
  uint64_t bytes, requested;
  size_t blocks;
} ex_group;

typedef struct {
  int have;
  size_t op;
  int64_t request;                  /* the request of that op; -1: none (a free, a segment op) */
  uint64_t reserved, allocated, requested, pending;
  uint64_t split_bytes, free_seg_bytes;
  size_t split_blocks, free_segs, blocks;
  ex_group *groups;                 /* by bytes, largest first */
  size_t num_groups;
} ex_instant;

typedef struct {
  const char *func;
  tc_tsnap *h;
  /* interned group keys: user frames joined by '\n' */
  char **keys;
  size_t num_keys, cap_keys;
  tc_u64map key_index;              /* string hash (probed) -> key id + 1 */
  int32_t *list_key;                /* per frame list: its key, -1 not known yet */
  tc_u64map owner;                  /* block address -> request + 1 */
  /* pass 1 */
  uint64_t best_r, best_a;
  size_t op_r, op_a, op_oom;
  int64_t oom_req;
  uint64_t peak_r, peak_a, ooms;
  /* pass 2 */
  int pass;
  ex_instant at_r, at_a, at_oom;
  tcuda_status err;
} ex;

static tcuda_status oom(const char *func) { return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func); }

/* ---- frames ---- */

static int contains(const char *s, size_t n, const char *lit) {
  size_t m = strlen(lit);
  for (size_t i = 0; i + m <= n; i++)
    if (!memcmp(s + i, lit, m)) return 1;
  return 0;
}

static int any_of(const char *s, size_t n, const char *const *lits, size_t k) {
  for (size_t i = 0; s && i < k; i++)
    if (contains(s, n, lits[i])) return 1;
  return 0;
}

static int starts_any(const char *s, size_t n, const char *const *lits, size_t k) {
  for (size_t i = 0; s && i < k; i++)
    if (n >= strlen(lits[i]) && !memcmp(s, lits[i], strlen(lits[i]))) return 1;
  return 0;
}

/* Appends s[0..n) cut to TC_TSNAP_FRAME_TEXT bytes at a character's start,
 * NUL bytes and newlines as '?' (the text is a C string and a key part). */
static void put_cut(tc_sbuf *b, const char *s, size_t n) {
  int cut = n > TC_TSNAP_FRAME_TEXT;
  if (cut) {
    n = TC_TSNAP_FRAME_TEXT;
    while (n && ((unsigned char)s[n] & 0xC0) == 0x80) n--;
  }
  for (size_t i = 0; i < n; i++) {
    char c = s[i] && s[i] != '\n' ? s[i] : '?';
    tc_sbuf_put(b, &c, 1);
  }
  if (cut) tc_sbuf_puts(b, "...");
}

/* "file:line:name" of a frame, the file without its directories, as
 * torch's viewer prints frames. */
static void put_frame(tc_sbuf *b, const char *file, size_t fn, int64_t line, const char *name, size_t nn) {
  if (file) {
    size_t base = fn;
    while (base && file[base - 1] != '/') base--;
    put_cut(b, file + base, fn - base);
  }
  tc_sbuf_printf(b, ":%lld:", (long long)line);
  if (name) put_cut(b, name, nn);
}

/* The user frames of a list, at most max, joined by '\n', into b. Tiers:
 * frames outside the viewer's list and torch's files; else those outside
 * the viewer's list; else all. Bytes read are added to *read. */
static void user_frames(const tc_pv *list, size_t max, tc_sbuf *b, uint64_t *read) {
  tc_pv *const *it = NULL;
  size_t n = 0;
  tc_pv_as_seq(list, &it, &n);
  if (n > TC_EXPLAIN_SCAN) n = TC_EXPLAIN_SCAN;
  for (int tier = 0; tier < 3; tier++) {
    size_t shown = 0;
    for (size_t k = 0; k < n && shown < max; k++) {
      size_t nn = 0, fn = 0;
      const char *name = tc_pv_as_strn(tc_pv_get(it[k], "name"), &nn);
      const char *file = tc_pv_as_strn(tc_pv_get(it[k], "filename"), &fn);
      int64_t line = 0;
      tc_pv_as_int(tc_pv_get(it[k], "line"), &line);
      *read += nn + fn + 1;
      if (!name && !file) continue;
      if (tier < 2 && (any_of(name, nn, OMIT_NAMES, 8) || any_of(file, fn, OMIT_FILES, 10))) continue;
      if (tier < 1 && (any_of(file, fn, TORCH_FILES, 3) || starts_any(name, nn, TORCH_NAMES, 3))) continue;
      if (shown++) tc_sbuf_put(b, "\n", 1);
      put_frame(b, file, fn, line, name, nn);
    }
    if (shown) return;
  }
}

static int list_of(const tc_tsnap *h, size_t req) {
  size_t lo = 0, hi = h->num_frames;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (h->frames_req[mid] < req) lo = mid + 1;
    else hi = mid;
  }
  return lo < h->num_frames && h->frames_req[lo] == req ? (int)h->frames_list[lo] : -1;
}

static uint64_t str_hash(const char *s) {
  uint64_t x = 1469598103934665603ULL;
  for (; *s; s++) x = (x ^ (unsigned char)*s) * 1099511628211ULL;
  return x;
}

/* The key id of text (taken over: freed here when already known). */
static tcuda_status intern(ex *e, char *text, uint32_t *id) {
  uint64_t k = str_hash(text);
  for (;; k++) { /* probe past other texts of the same hash */
    uint64_t *v = tc_u64map_get(&e->key_index, k);
    if (!v) break;
    if (!strcmp(e->keys[*v - 1], text)) {
      free(text);
      *id = (uint32_t)(*v - 1);
      return TCUDA_SUCCESS;
    }
  }
  if (!tc_grow((void **)&e->keys, &e->cap_keys, e->num_keys + 1, sizeof *e->keys) ||
      !tc_u64map_put(&e->key_index, k, e->num_keys + 1)) {
    free(text);
    return oom(e->func);
  }
  e->keys[e->num_keys] = text;
  *id = (uint32_t)e->num_keys++;
  return TCUDA_SUCCESS;
}

/* The group key of request req (-1: a block alive before the window). */
static tcuda_status key_of(ex *e, int64_t req, uint32_t *id) {
  if (req < 0) { *id = KEY_BEFORE; return TCUDA_SUCCESS; }
  int li = list_of(e->h, (size_t)req);
  if (li < 0) { *id = KEY_NONE; return TCUDA_SUCCESS; }
  if (e->list_key[li] >= 0) { *id = (uint32_t)e->list_key[li]; return TCUDA_SUCCESS; }
  tc_sbuf b = {0};
  uint64_t read = 0;
  user_frames(e->h->frame_lists[li], TC_EXPLAIN_KEY_FRAMES, &b, &read);
  tcuda_status s = tc_tsnap_spend(e->h, "stack frames", read + b.len);
  if (s) { tc_sbuf_free(&b); return s; }
  if (!b.len) { /* frames without a name or file */
    tc_sbuf_free(&b);
    e->list_key[li] = KEY_NONE;
    *id = KEY_NONE;
    return TCUDA_SUCCESS;
  }
  char *text = tc_sbuf_take(&b);
  if (!text) return oom(e->func);
  if ((s = intern(e, text, id))) return s;
  e->list_key[li] = (int32_t)*id;
  return TCUDA_SUCCESS;
}

/* ---- the replays ---- */

static int by_bytes(const void *x, const void *y) {
  const ex_group *a = x, *b = y;
  if (a->bytes != b->bytes) return a->bytes < b->bytes ? 1 : -1;
  return a->key < b->key ? -1 : a->key > b->key;
}

static tcuda_status capture(ex *e, tc_alloc *a, size_t op, size_t req, ex_instant *in) {
  tcuda_snapshot_t *snap = NULL;
  tcuda_status s = tc_alloc_snapshot(a, &snap);
  if (s) return s;
  const tc_tsop *o = &e->h->ops[op];
  in->have = 1;
  in->op = op;
  in->request = o->kind == HOP_ALLOC || o->kind == HOP_OOM ? (int64_t)req : -1;
  size_t nb = 0;
  for (size_t i = 0; i < snap->num_segments; i++) nb += snap->segments[i].num_blocks;
  s = tc_tsnap_spend(e->h, "the blocks explained", nb + snap->num_segments);
  uint32_t *kid = s ? NULL : malloc((nb ? nb : 1) * sizeof *kid);
  if (!s && !kid) s = oom(e->func);
  size_t j = 0;
  for (size_t i = 0; i < snap->num_segments && !s; i++) {
    const tcuda_segment_info_t *sg = &snap->segments[i];
    int live = 0;
    in->reserved += sg->total_size;
    for (size_t k = 0; k < sg->num_blocks; k++) live |= sg->blocks[k].state != TCUDA_BLOCK_INACTIVE;
    if (!live) {
      in->free_segs++;
      in->free_seg_bytes += sg->total_size;
    }
    for (size_t k = 0; k < sg->num_blocks && !s; k++) {
      const tcuda_block_info_t *bl = &sg->blocks[k];
      if (bl->state == TCUDA_BLOCK_ACTIVE_PENDING_FREE) in->pending += bl->size;
      if (bl->state == TCUDA_BLOCK_INACTIVE && live) {
        in->split_blocks++;
        in->split_bytes += bl->size;
      }
      if (bl->state != TCUDA_BLOCK_ACTIVE_ALLOCATED) continue;
      uint64_t *r = tc_u64map_get(&e->owner, bl->address);
      s = key_of(e, r ? (int64_t)*r - 1 : -1, &kid[j++]);
    }
  }
  ex_group *g = NULL;
  if (!s && !(g = calloc(e->num_keys, sizeof *g))) s = oom(e->func);
  j = 0;
  for (size_t i = 0; i < snap->num_segments && !s; i++) {
    const tcuda_segment_info_t *sg = &snap->segments[i];
    for (size_t k = 0; k < sg->num_blocks; k++) {
      const tcuda_block_info_t *bl = &sg->blocks[k];
      if (bl->state != TCUDA_BLOCK_ACTIVE_ALLOCATED) continue;
      ex_group *x = &g[kid[j++]];
      x->bytes += bl->size;
      x->requested += bl->requested_size;
      x->blocks++;
      in->allocated += bl->size;
      in->requested += bl->requested_size;
      in->blocks++;
    }
  }
  if (!s) {
    size_t n = 0;
    for (size_t k = 0; k < e->num_keys; k++)
      if (g[k].blocks) {
        g[k].key = (uint32_t)k;
        g[n++] = g[k];
      }
    qsort(g, n, sizeof *g, by_bytes);
    in->groups = g;
    in->num_groups = n;
    g = NULL;
  }
  free(g);
  free(kid);
  tc_snapshot_free(snap);
  return s;
}

static tcuda_status on_op(void *user, tc_alloc *a, size_t op, size_t req, uint64_t addr) {
  ex *e = user;
  if (addr && !tc_u64map_put(&e->owner, addr, (uint64_t)req + 1)) return oom(e->func);
  if (e->pass == 1) {
    tcuda_memory_stats_t st;
    tc_alloc_get_stats(a, &st);
    /* the state after an op, not the stats' peak: a request torch refused
       that fits here is given back within its op, and is no holder */
    uint64_t pr = (uint64_t)st.reserved_bytes[TCUDA_STAT_ALL].current;
    uint64_t pa = (uint64_t)st.allocated_bytes[TCUDA_STAT_ALL].current;
    if (e->op_r == NO_OP || pr > e->best_r) { e->best_r = pr; e->op_r = op; }
    if (e->op_a == NO_OP || pa > e->best_a) { e->best_a = pa; e->op_a = op; }
    /* the first request that failed here, or that torch refused (an oom
       entry fits when the replay runs without torch's limit) */
    if (e->op_oom == NO_OP && (e->oom_req >= 0 || e->h->ops[op].kind == HOP_OOM)) {
      e->op_oom = op;
      e->oom_req = (int64_t)req;
    }
    return TCUDA_SUCCESS;
  }
  tcuda_status s = TCUDA_SUCCESS;
  if (op == e->op_r) s = capture(e, a, op, req, &e->at_r);
  if (!s && op == e->op_a) s = capture(e, a, op, req, &e->at_a);
  if (!s && op == e->op_oom) s = capture(e, a, op, req, &e->at_oom);
  return s;
}

static void on_oom(void *user, unsigned request, const char *message) {
  ex *e = user;
  (void)message;
  if (e->pass == 1 && e->oom_req < 0) e->oom_req = request;
}

static void ex_free(ex *e) {
  for (size_t i = 0; i < e->num_keys; i++) free(e->keys[i]);
  free(e->keys);
  tc_u64map_free(&e->key_index);
  tc_u64map_free(&e->owner);
  free(e->list_key);
  free(e->at_r.groups);
  free(e->at_a.groups);
  free(e->at_oom.groups);
}

static tcuda_status analyse(const char *func, tc_tsnap *h, uint64_t capacity, double fraction, uint64_t limit,
                            ex *e) {
  memset(e, 0, sizeof *e);
  e->func = func;
  e->h = h;
  e->op_r = e->op_a = e->op_oom = NO_OP;
  e->oom_req = -1;
  e->list_key = malloc((h->num_frame_lists ? h->num_frame_lists : 1) * sizeof *e->list_key);
  if (!e->list_key) return oom(func);
  for (size_t i = 0; i < h->num_frame_lists; i++) e->list_key[i] = -1;
  char *none = strdup(""), *before = strdup("");
  tcuda_status s = none && before ? TCUDA_SUCCESS : oom(func);
  if (!s) { /* KEY_NONE and KEY_BEFORE: texts no frame list gives (two distinct empty slots) */
    if (!tc_grow((void **)&e->keys, &e->cap_keys, 2, sizeof *e->keys)) s = oom(func);
    else {
      e->keys[0] = none;
      e->keys[1] = before;
      e->num_keys = 2;
      none = before = NULL;
    }
  }
  free(none);
  free(before);
  tc_tsrun_result r;
  for (int pass = 1; pass <= 2 && !s; pass++) {
    e->pass = pass;
    tc_u64map_free(&e->owner);
    memset(&e->owner, 0, sizeof e->owner);
    tc_tsrun_opts o = {.exact = 1, .capacity = capacity, .fraction = fraction, .limit = limit,
                       .on_op = on_op, .op_user = e, .on_oom = on_oom, .oom_user = e};
    if (!(s = tc_tsnap_run(func, h, &o, &r))) {
      if (pass == 1) {
        e->peak_r = r.peak_reserved;
        e->peak_a = r.peak_allocated;
        e->ooms = r.ooms;
      }
      tc_tsrun_result_free(&r);
    }
  }
  return s;
}

/* ---- the document ---- */

static int stacks_recorded(const tc_tsnap *h) {
  for (size_t i = 0; i < h->num_frames; i++) {
    size_t req = h->frames_req[i];
    if (req < h->num_requests && h->ops[h->req_op[req]].kind == HOP_ALLOC) return 1;
  }
  return 0;
}

static void put_key(tc_sbuf *b, const ex *e, uint32_t key) {
  tc_sbuf_put(b, "[", 1);
  const char *p = e->keys[key];
  for (int first = 1; key >= KEY_FIRST && *p; first = 0) {
    const char *q = strchr(p, '\n');
    size_t n = q ? (size_t)(q - p) : strlen(p);
    char *one = strndup(p, n);
    if (!first) tc_sbuf_puts(b, ", ");
    if (one) tc_json_str(b, one);
    else tc_sbuf_puts(b, "\"\"");
    free(one);
    p += n + (q != NULL);
  }
  tc_sbuf_put(b, "]", 1);
}

static const char *key_kind(uint32_t key) {
  return key == KEY_NONE ? "none" : key == KEY_BEFORE ? "before_window" : "recorded";
}

static double share(uint64_t x, uint64_t of) { return of ? (double)x / (double)of : 0.0; }

static void put_instant(tc_sbuf *b, const ex *e, const ex_instant *in) {
  const tc_tsnap *h = e->h;
  tc_sbuf_puts(b, "{\"request\": ");
  if (in->request >= 0) tc_json_i64(b, in->request);
  else tc_sbuf_puts(b, "null");
  tc_sbuf_printf(b, ", \"op\": %zu, \"time_ms\": %.3f", in->op,
                 in->op < h->num_ops ? (double)h->op_time_us[in->op] / 1000.0 : 0.0);
  uint64_t cached = in->reserved - in->allocated - in->pending;
  tc_sbuf_printf(b, ", \"reserved\": %llu, \"allocated\": %llu, \"requested\": %llu, \"blocks\": %zu, "
                    "\"pending_free\": %llu, \"cached_free\": %llu, \"cached_share\": %.6f, "
                    "\"inactive_split\": {\"bytes\": %llu, \"blocks\": %zu, \"share\": %.6f}, "
                    "\"free_segments\": {\"bytes\": %llu, \"segments\": %zu, \"share\": %.6f},\n    \"holders\": [",
                 (unsigned long long)in->reserved, (unsigned long long)in->allocated,
                 (unsigned long long)in->requested, in->blocks, (unsigned long long)in->pending,
                 (unsigned long long)cached, share(cached, in->reserved), (unsigned long long)in->split_bytes,
                 in->split_blocks, share(in->split_bytes, in->reserved), (unsigned long long)in->free_seg_bytes,
                 in->free_segs, share(in->free_seg_bytes, in->reserved));
  for (size_t i = 0; i < in->num_groups; i++) {
    const ex_group *g = &in->groups[i];
    tc_sbuf_puts(b, i ? ",\n     {\"stack\": \"" : "\n     {\"stack\": \"");
    tc_sbuf_puts(b, key_kind(g->key));
    tc_sbuf_puts(b, "\", \"frames\": ");
    put_key(b, e, g->key);
    tc_sbuf_printf(b, ", \"bytes\": %llu, \"requested\": %llu, \"blocks\": %zu, \"share\": %.6f}",
                   (unsigned long long)g->bytes, (unsigned long long)g->requested, g->blocks,
                   share(g->bytes, in->reserved));
  }
  tc_sbuf_puts(b, "]}");
}

#define HOW_TO_RECORD                                                                                          \
  "no allocation in this snapshot has a stack: record them with "                                              \
  "torch.cuda.memory._record_memory_history(max_entries=1000000, stacks=\"python\") (or stacks=\"all\", or " \
  "context=\"all\") before the allocations you care about"

static tcuda_status put_explain(tc_sbuf *b, ex *e) {
  tc_tsnap *h = e->h;
  int have = stacks_recorded(h);
  tc_sbuf_printf(b, "{\"stacks_recorded\": %s, \"how_to_record\": ", have ? "true" : "false");
  if (have) tc_sbuf_puts(b, "null");
  else tc_json_str(b, HOW_TO_RECORD);
  tc_sbuf_printf(b, ", \"key_frames\": %d,\n  \"peak_reserved\": ", TC_EXPLAIN_KEY_FRAMES);
  if (e->at_r.have) put_instant(b, e, &e->at_r);
  else tc_sbuf_puts(b, "null");
  tc_sbuf_puts(b, ",\n  \"peak_allocated\": ");
  if (e->at_a.have) put_instant(b, e, &e->at_a);
  else tc_sbuf_puts(b, "null");
  tc_sbuf_puts(b, ",\n  \"first_oom\": ");
  if (!e->at_oom.have) {
    tc_sbuf_puts(b, "null}");
    return TCUDA_SUCCESS;
  }
  const tc_tsop *o = &h->ops[e->at_oom.op];
  tc_sbuf_printf(b, "{\"size\": %llu, \"survived_by_library\": %s, \"stack\": ", (unsigned long long)o->size,
                 o->kind == HOP_OOM && (o->flags & HOP_F_ADAPTIVE) ? "true" : "false");
  int li = list_of(h, (size_t)e->oom_req);
  tc_sbuf_put(b, "[", 1);
  if (li >= 0) {
    tc_sbuf f = {0};
    uint64_t read = 0;
    user_frames(h->frame_lists[li], TC_EXPLAIN_OOM_FRAMES, &f, &read);
    tcuda_status s = tc_tsnap_spend(h, "stack frames", read + 2 * f.len);
    if (s) { tc_sbuf_free(&f); return s; }
    char *text = tc_sbuf_take(&f);
    for (char *p = text, *q; p && *p; p = q ? q + 1 : p + strlen(p)) {
      if ((q = strchr(p, '\n'))) *q = 0;
      if (p != text) tc_sbuf_puts(b, ", ");
      tc_json_str(b, p);
    }
    free(text);
  }
  tc_sbuf_puts(b, "], \"state\": ");
  put_instant(b, e, &e->at_oom);
  tc_sbuf_puts(b, "}}");
  return TCUDA_SUCCESS;
}

tcuda_status tc_explain_json(const char *func, tc_tsnap *h, uint64_t capacity, double fraction, uint64_t limit,
                             tc_sbuf *b) {
  ex e;
  tcuda_status s = analyse(func, h, capacity, fraction, limit, &e);
  if (!s) s = put_explain(b, &e);
  ex_free(&e);
  return s;
}

/* ---- tcuda_whatif_compare_files ---- */

typedef struct {
  tc_tsnap h;
  int loaded;
  ex e;
  int analysed;
} side;

static void put_side(tc_sbuf *b, const char *arg, const char *path, side *x) {
  tc_sbuf_printf(b, "{\"argument\": \"%s\", \"path\": ", arg);
  tc_json_str(b, path);
  tc_sbuf_printf(b, ", \"device\": %d, \"entries\": %zu, \"requests\": %zu, \"recorded_config\": ", x->h.device,
                 x->h.num_entries, x->h.num_requests);
  tc_json_str(b, x->h.conf_text);
  tc_sbuf_printf(b, ", \"peak_reserved\": %llu, \"peak_allocated\": %llu, \"ratio\": ",
                 (unsigned long long)x->e.peak_r, (unsigned long long)x->e.peak_a);
  if (x->e.peak_a) tc_sbuf_printf(b, "%.6f", (double)x->e.peak_r / (double)x->e.peak_a);
  else tc_sbuf_puts(b, "null");
  tc_sbuf_printf(b, ", \"recorded_ooms\": %zu, \"ooms\": %llu, \"truncated\": %s}", x->h.recorded_ooms,
                 (unsigned long long)x->e.ooms, x->h.truncated ? "true" : "false");
}

static void put_ratio(tc_sbuf *b, uint64_t after, uint64_t before) {
  if (before) tc_sbuf_printf(b, "%.6f", (double)after / (double)before);
  else tc_sbuf_puts(b, "null");
}

/* The holders at peak reserved of both sides, matched by their frames. */
static tcuda_status put_side_by_side(tc_sbuf *b, side *x, side *y) {
  const ex_instant *a = &x->e.at_r, *c = &y->e.at_r;
  size_t n = a->num_groups + c->num_groups;
  int64_t *match = malloc((n ? n : 1) * sizeof *match); /* y's group i: x's group, -1 none */
  unsigned char *used = calloc(a->num_groups ? a->num_groups : 1, 1);
  if (!match || !used) {
    free(match);
    free(used);
    return oom("tcuda_whatif_compare_files");
  }
  for (size_t i = 0; i < c->num_groups; i++) {
    match[i] = -1;
    uint32_t ky = c->groups[i].key;
    for (size_t k = 0; k < a->num_groups; k++) {
      uint32_t kx = a->groups[k].key;
      int same = kx < KEY_FIRST || ky < KEY_FIRST ? kx == ky : !strcmp(x->e.keys[kx], y->e.keys[ky]);
      if (!used[k] && same) {
        match[i] = (int64_t)k;
        used[k] = 1;
        break;
      }
    }
  }
  tc_sbuf_puts(b, "[");
  const char *sep = "\n   ";
  /* before's holders in their order, each with its match, then after's new ones */
  for (size_t k = 0; k < a->num_groups; k++) {
    const ex_group *g = &a->groups[k], *h = NULL;
    for (size_t i = 0; i < c->num_groups; i++)
      if (match[i] == (int64_t)k) h = &c->groups[i];
    tc_sbuf_printf(b, "%s{\"stack\": \"%s\", \"frames\": ", sep, key_kind(g->key));
    put_key(b, &x->e, g->key);
    tc_sbuf_printf(b, ", \"before_bytes\": %llu, \"after_bytes\": %llu, \"before_blocks\": %zu, \"after_blocks\": %zu}",
                   (unsigned long long)g->bytes, (unsigned long long)(h ? h->bytes : 0), g->blocks,
                   h ? h->blocks : 0);
    sep = ",\n   ";
  }
  for (size_t i = 0; i < c->num_groups; i++) {
    if (match[i] >= 0) continue;
    const ex_group *h = &c->groups[i];
    tc_sbuf_printf(b, "%s{\"stack\": \"%s\", \"frames\": ", sep, key_kind(h->key));
    put_key(b, &y->e, h->key);
    tc_sbuf_printf(b, ", \"before_bytes\": 0, \"after_bytes\": %llu, \"before_blocks\": 0, \"after_blocks\": %zu}",
                   (unsigned long long)h->bytes, h->blocks);
    sep = ",\n   ";
  }
  tc_sbuf_puts(b, "]");
  free(match);
  free(used);
  return TCUDA_SUCCESS;
}

/* A message that names the argument: "F: before: <the loader's message>". */
static tcuda_status name_argument(const char *F, const char *arg, tcuda_status s) {
  const char *m = tcuda_last_error();
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", m ? m : "");
  /* the loader's message starts "F: PATH: ": keep it after the argument's name */
  size_t fl = strlen(F);
  const char *rest = !strncmp(copy, F, fl) && copy[fl] == ':' ? copy + fl + 2 : copy;
  return tc_error(s, "%s: %s: %s", F, arg, rest);
}

tcuda_status tcuda_whatif_compare_files(const char *before_path, const char *after_path,
                                        const tcuda_whatif_options_t *opt, char **json_out) {
  static const char *F = "tcuda_whatif_compare_files";
  TC_CHECK_ARG(F, json_out, "json_out");
  *json_out = NULL;
  TC_CHECK_ARG(F, before_path, "before_path");
  TC_CHECK_ARG(F, after_path, "after_path");
  tcuda_whatif_options_t def = TCUDA_WHATIF_OPTIONS_INIT;
  const tcuda_whatif_options_t *o = opt ? opt : &def;
  if (o->struct_size < sizeof(tcuda_whatif_options_t))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: opt->struct_size %zu is not sizeof(tcuda_whatif_options_t) (%zu)", F, o->struct_size,
                    sizeof(tcuda_whatif_options_t));
  if (!(o->memory_fraction >= 0.0 && o->memory_fraction <= 1.0))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: memory_fraction %g out of range (0~1)", F, o->memory_fraction);
  if (o->device < -1) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: device %d is negative", F, o->device);
  if (o->capacity && o->capacity < ((uint64_t)2 << 20))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: capacity %llu is under 2 MiB", F,
                    (unsigned long long)o->capacity);
  if (o->num_configs)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: configs do not apply: a comparison replays each snapshot under its own config", F);
  side sd[2];
  memset(sd, 0, sizeof sd);
  const char *paths[2] = {before_path, after_path}, *args[2] = {"before", "after"};
  tc_tsnap_limits lim = {o->max_input_bytes, o->work_budget};
  tcuda_status s = TCUDA_SUCCESS;
  for (int i = 0; i < 2 && !s; i++) {
    if ((s = tc_tsnap_load_file(F, paths[i], o->device, &lim, &sd[i].h))) {
      s = name_argument(F, args[i], s);
      break;
    }
    sd[i].loaded = 1;
  }
  if (!s && o->device < 0 && sd[0].h.num_devices != sd[1].h.num_devices)
    s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                 "%s: after: the snapshots record different devices (before %d, after %d): pick one with device",
                 F, sd[0].h.num_devices, sd[1].h.num_devices);
  for (int i = 0; i < 2 && !s; i++) {
    sd[i].analysed = 1;
    if ((s = analyse(F, &sd[i].h, o->capacity, o->memory_fraction, 0, &sd[i].e))) s = name_argument(F, args[i], s);
  }
  tc_sbuf b = {0};
  if (!s) {
    tc_sbuf_puts(&b, "{\"before\": ");
    put_side(&b, "before", before_path, &sd[0]);
    tc_sbuf_puts(&b, ",\n \"after\": ");
    put_side(&b, "after", after_path, &sd[1]);
    tc_sbuf_printf(&b, ",\n \"change\": {\"peak_reserved\": %lld, \"peak_allocated\": %lld, \"peak_reserved_ratio\": ",
                   (long long)(sd[1].e.peak_r - sd[0].e.peak_r), (long long)(sd[1].e.peak_a - sd[0].e.peak_a));
    put_ratio(&b, sd[1].e.peak_r, sd[0].e.peak_r);
    tc_sbuf_puts(&b, ", \"peak_allocated_ratio\": ");
    put_ratio(&b, sd[1].e.peak_a, sd[0].e.peak_a);
    tc_sbuf_printf(&b, ", \"recorded_ooms\": %lld, \"ooms\": %lld}", (long long)sd[1].h.recorded_ooms - (long long)sd[0].h.recorded_ooms,
                   (long long)sd[1].e.ooms - (long long)sd[0].e.ooms);
    tc_sbuf_puts(&b, ",\n \"holders_at_peak_reserved\": ");
    s = put_side_by_side(&b, &sd[0], &sd[1]);
  }
  for (int i = 0; i < 2 && !s; i++) {
    tc_sbuf_printf(&b, ",\n \"%s_explain\": ", args[i]);
    if ((s = put_explain(&b, &sd[i].e))) s = name_argument(F, args[i], s);
  }
  if (!s) {
    tc_sbuf_puts(&b, "}\n");
    if (!(*json_out = tc_sbuf_take(&b))) s = oom(F);
  }
  tc_sbuf_free(&b);
  for (int i = 0; i < 2; i++) {
    if (sd[i].analysed) ex_free(&sd[i].e);
    if (sd[i].loaded) tc_tsnap_free(&sd[i].h);
  }
  return s;
}
