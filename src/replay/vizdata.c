/* tcuda_viz_file: what the `tcuda viz` page draws, computed here so that
 * the page stays small whatever the history's length (a 1M-entry snapshot
 * is ~75 MB; embedding it made a 100 MB page).
 *
 * Steps: step 0 is before the first trace entry, step i+1 after entry i.
 * The active bytes after each step are summed exactly, then kept per
 * bucket of steps as their minimum and maximum, so the global peak (and
 * every bucket's) survives downsampling. Allocations are listed one by one
 * up to a cap, the largest first kept; the page draws the rest as their
 * sum. Stacks are rendered once per distinct list and cut. */
#include "core/core.h"
#include "inspect/jsonwrite.h"
#include "pyval.h"
#include "readfile.h"
#include <stdlib.h>
#include <string.h>

#define NEVER INT64_MAX
#define MAX_FRAMES 16            /* per stack shown */
#define FRAME_TEXT 200           /* bytes per name or file name */
#define FRAMES_BUDGET (1u << 20) /* bytes of stack text in the whole document */
/* the other lists' caps, so that no snapshot makes a page of more than a
 * few MB: far above what real ones hold */
#define MAX_SEGLIFE 25000
#define MAX_SEGMENTS 20000
#define MAX_BLOCKS 50000

typedef struct {
  uint64_t addr, size;
  int64_t stream, start, end, freq; /* freq: step of free_requested, -1 none */
  const tc_pv *frames;
  int recorded;
} valc;

typedef struct {
  uint64_t addr, size;
  int64_t stream, start, end;
  int map; /* segment_map/unmap rather than segment_alloc/free */
} vseg;

/* an open-addressing map from a key (address or pointer) to an index */
typedef struct {
  uint64_t *key;
  uint32_t *val; /* UINT32_MAX: empty */
  size_t cap, used;
} umap;

static uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}
static int umap_grow(umap *m) {
  size_t cap = m->cap ? m->cap * 2 : 1024;
  uint64_t *k = malloc(cap * sizeof *k);
  uint32_t *v = malloc(cap * sizeof *v);
  if (!k || !v) {
    free(k);
    free(v);
    return 0;
  }
  memset(v, 0xff, cap * sizeof *v);
  for (size_t i = 0; i < m->cap; i++) {
    if (m->val[i] == UINT32_MAX) continue;
    size_t j = mix(m->key[i]) & (cap - 1);
    while (v[j] != UINT32_MAX) j = (j + 1) & (cap - 1);
    k[j] = m->key[i];
    v[j] = m->val[i];
  }
  free(m->key);
  free(m->val);
  m->key = k;
  m->val = v;
  m->cap = cap;
  return 1;
}
static size_t umap_slot(const umap *m, uint64_t key) {
  size_t j = mix(key) & (m->cap - 1);
  while (m->val[j] != UINT32_MAX && m->key[j] != key) j = (j + 1) & (m->cap - 1);
  return j;
}
static uint32_t umap_get(const umap *m, uint64_t key) { return m->cap ? m->val[umap_slot(m, key)] : UINT32_MAX; }
static int umap_put(umap *m, uint64_t key, uint32_t val) {
  if ((m->used + 1) * 2 > m->cap && !umap_grow(m)) return 0;
  size_t j = umap_slot(m, key);
  if (m->val[j] == UINT32_MAX) m->used++;
  m->key[j] = key;
  m->val[j] = val;
  return 1;
}
/* deletion with backward shift, so lookups need no tombstones */
static void umap_del(umap *m, uint64_t key) {
  if (!m->cap) return;
  size_t i = umap_slot(m, key);
  if (m->val[i] == UINT32_MAX) return;
  m->val[i] = UINT32_MAX;
  m->used--;
  for (size_t j = (i + 1) & (m->cap - 1); m->val[j] != UINT32_MAX; j = (j + 1) & (m->cap - 1)) {
    size_t h = mix(m->key[j]) & (m->cap - 1);
    if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
      m->key[i] = m->key[j];
      m->val[i] = m->val[j];
      m->val[j] = UINT32_MAX;
      i = j;
    }
  }
}
static void umap_free(umap *m) {
  free(m->key);
  free(m->val);
}

typedef struct {
  const char *F;
  const tcuda_viz_options_t *o;
  valc *a;
  size_t na, capa;
  vseg *s;
  size_t ns, caps;
  umap frames_map; /* frames list pointer -> index into the frames table */
  tc_sbuf frames;  /* the table's JSON items */
  size_t num_frames;
  int frames_full;
} vctx;

static void progress(const vctx *c, const char *stage, uint64_t done, uint64_t total) {
  if (c->o->progress) c->o->progress(c->o->progress_user, stage, done, total);
}

static tcuda_status not_snap(const vctx *c, const char *what) {
  return tc_error(TCUDA_ERROR_PARSE, "%s: not a memory snapshot: %s", c->F, what);
}
static tcuda_status oom(const vctx *c) {
  return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", c->F);
}

/* a number where one belongs: int, or a float with no fraction in range */
static int num_u64(const tc_pv *v, uint64_t *out) {
  int64_t i;
  double d;
  if (v && v->kind == TC_PV_INT && tc_pv_as_int(v, &i)) {
    *out = (uint64_t)i;
    return 1;
  }
  if (v && v->kind == TC_PV_FLOAT && tc_pv_as_double(v, &d) && d == d && d >= -9.2e18 && d <= 1.8e19) {
    *out = d < 0 ? (uint64_t)(int64_t)d : (uint64_t)d;
    return 1;
  }
  return 0;
}
static tcuda_status need_num(vctx *c, const tc_pv *v, uint64_t *out, const char *fmt, size_t i, size_t j,
                             const char *key) {
  if (num_u64(v, out)) return TCUDA_SUCCESS;
  char w[160];
  snprintf(w, sizeof w, fmt, i, j, key);
  char m[200];
  snprintf(m, sizeof m, "%s is not a number", w);
  return not_snap(c, m);
}

static int push_alloc(vctx *c, valc a) {
  if (c->na == c->capa) {
    size_t cap = c->capa ? c->capa * 2 : 1024;
    valc *n = realloc(c->a, cap * sizeof *n);
    if (!n) return 0;
    c->a = n;
    c->capa = cap;
  }
  c->a[c->na++] = a;
  return c->na < UINT32_MAX;
}
static int push_seg(vctx *c, vseg s) {
  if (c->ns == c->caps) {
    size_t cap = c->caps ? c->caps * 2 : 256;
    vseg *n = realloc(c->s, cap * sizeof *n);
    if (!n) return 0;
    c->s = n;
    c->caps = cap;
  }
  c->s[c->ns++] = s;
  return c->ns < UINT32_MAX;
}

/* text of a STR (cut at max bytes on a character's start), else "" */
static void put_text(tc_sbuf *b, const tc_pv *v, size_t max) {
  size_t n = 0;
  const char *s = tc_pv_as_strn(v, &n);
  if (!s) return;
  size_t k = 0;
  while (k < n && k < max && s[k]) {
    int l = tc_utf8_len((const unsigned char *)s + k);
    if (l <= 0 || k + (size_t)l > max) break;
    k += (size_t)l;
  }
  tc_sbuf_put(b, s, k);
  if (k < n && s[k]) tc_sbuf_puts(b, "...");
}

/* The frames table's index for a stack (a list of frame dicts), adding it
 * once; -1 for none, or once the table is full. */
static int64_t frames_index(vctx *c, const tc_pv *fr) {
  tc_pv *const *items;
  size_t n;
  if (!fr || !tc_pv_as_seq(fr, &items, &n) || !n) return -1;
  uint32_t k = umap_get(&c->frames_map, (uint64_t)(uintptr_t)fr);
  if (k != UINT32_MAX) return k;
  if (c->frames_full) return -1;
  tc_sbuf t = {0};
  for (size_t i = 0; i < n && i < MAX_FRAMES; i++) {
    if (!items[i] || items[i]->kind != TC_PV_DICT) continue;
    if (t.len) tc_sbuf_puts(&t, "\n");
    tc_sbuf_puts(&t, "  ");
    put_text(&t, tc_pv_get(items[i], "name"), FRAME_TEXT);
    tc_sbuf_puts(&t, "  ");
    put_text(&t, tc_pv_get(items[i], "filename"), FRAME_TEXT);
    int64_t line;
    if (tc_pv_as_int(tc_pv_get(items[i], "line"), &line) && line) tc_sbuf_printf(&t, ":%lld", (long long)line);
  }
  if (n > MAX_FRAMES) tc_sbuf_printf(&t, "\n  ... %zu more", n - MAX_FRAMES);
  if (t.failed) {
    tc_sbuf_free(&t);
    return -1;
  }
  if (c->frames.len + t.len > FRAMES_BUDGET) {
    c->frames_full = 1;
    tc_sbuf_free(&t);
    return -1;
  }
  if (c->num_frames) tc_sbuf_puts(&c->frames, ",");
  tc_json_str(&c->frames, t.p ? t.p : "");
  tc_sbuf_free(&t);
  if (!umap_put(&c->frames_map, (uint64_t)(uintptr_t)fr, (uint32_t)c->num_frames)) {
    c->frames.failed = 1;
    return -1;
  }
  return (int64_t)c->num_frames++;
}

static const char *const ACTIONS[] = {"alloc",         "free_requested", "free_completed",
                                      "segment_alloc", "segment_free",   "segment_map",
                                      "segment_unmap", "snapshot",       "oom"};
enum { A_ALLOC, A_FREQ, A_FREE, A_SEG_ALLOC, A_SEG_FREE, A_SEG_MAP, A_SEG_UNMAP, A_SNAP, A_OOM, A_NUM };

/* The snapshot's shape, as the page checked it before: numbers must be
 * numbers, so that no string reaches the page where a size belongs. */
static tcuda_status check_segments(vctx *c, tc_pv *const *segs, size_t ns) {
  for (size_t i = 0; i < ns; i++) {
    char w[96];
    const tc_pv *g = segs[i];
    if (!g || g->kind != TC_PV_DICT) {
      snprintf(w, sizeof w, "segments[%zu] is not a dict", i);
      return not_snap(c, w);
    }
    static const char *const keys[] = {"device", "address", "total_size", "stream"};
    uint64_t v;
    tcuda_status s;
    for (int k = 0; k < 4; k++)
      if ((s = need_num(c, tc_pv_get(g, keys[k]), &v, "segments[%zu]%.0zu.%s", i, 0, keys[k]))) return s;
    tc_pv *const *bl;
    size_t nb;
    if (!tc_pv_as_seq(tc_pv_get(g, "blocks"), &bl, &nb)) {
      snprintf(w, sizeof w, "segments[%zu].blocks is not a list", i);
      return not_snap(c, w);
    }
    for (size_t j = 0; j < nb; j++) {
      if (!bl[j] || bl[j]->kind != TC_PV_DICT) {
        snprintf(w, sizeof w, "segments[%zu].blocks[%zu] is not a dict", i, j);
        return not_snap(c, w);
      }
      if ((s = need_num(c, tc_pv_get(bl[j], "size"), &v, "segments[%zu].blocks[%zu].%s", i, j, "size"))) return s;
      static const char *const opt[] = {"requested_size", "address"};
      for (int k = 0; k < 2; k++)
        if (tc_pv_get(bl[j], opt[k]) &&
            (s = need_num(c, tc_pv_get(bl[j], opt[k]), &v, "segments[%zu].blocks[%zu].%s", i, j, opt[k])))
          return s;
      if (!tc_pv_as_str(tc_pv_get(bl[j], "state"))) {
        snprintf(w, sizeof w, "segments[%zu].blocks[%zu].state is not a string", i, j);
        return not_snap(c, w);
      }
    }
  }
  return TCUDA_SUCCESS;
}

static tcuda_status check_trace(vctx *c, size_t d, tc_pv *const *ev, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char w[96];
    if (!ev[i] || ev[i]->kind != TC_PV_DICT || !tc_pv_as_str(tc_pv_get(ev[i], "action"))) {
      snprintf(w, sizeof w, "device_traces[%zu][%zu] has no action", d, i);
      return not_snap(c, w);
    }
    static const char *const keys[] = {"addr", "size", "stream"};
    uint64_t v;
    tcuda_status s;
    for (int k = 0; k < 3; k++)
      if (tc_pv_get(ev[i], keys[k]) &&
          (s = need_num(c, tc_pv_get(ev[i], keys[k]), &v, "device_traces[%zu][%zu].%s", d, i, keys[k])))
        return s;
    const tc_pv *fr = tc_pv_get(ev[i], "frames");
    if (fr && fr->kind != TC_PV_LIST && fr->kind != TC_PV_TUPLE) {
      snprintf(w, sizeof w, "device_traces[%zu][%zu].frames is not a list", d, i);
      return not_snap(c, w);
    }
  }
  return TCUDA_SUCCESS;
}

static uint64_t getu(const tc_pv *d, const char *k) {
  uint64_t v = 0;
  num_u64(tc_pv_get(d, k), &v);
  return v;
}

/* allocator_settings as [key, text] pairs: a dict value as its true
 * entries "k:v", joined */
static void put_scalar(tc_sbuf *t, const tc_pv *v) {
  double d;
  if (!v || v->kind == TC_PV_NONE) tc_sbuf_puts(t, "null");
  else if (v->kind == TC_PV_BOOL) tc_sbuf_puts(t, v->u.i ? "true" : "false");
  else if (v->kind == TC_PV_INT) tc_sbuf_printf(t, "%lld", (long long)v->u.i);
  else if (v->kind == TC_PV_FLOAT && tc_pv_as_double(v, &d)) tc_sbuf_printf(t, "%g", d);
  else if (v->kind == TC_PV_STR) put_text(t, v, 400);
  else tc_sbuf_puts(t, "(...)");
}
static int truthy(const tc_pv *v) {
  if (!v) return 0;
  switch (v->kind) {
  case TC_PV_NONE: return 0;
  case TC_PV_BOOL:
  case TC_PV_INT: return v->u.i != 0;
  case TC_PV_FLOAT: return v->u.f != 0;
  default: return v->n != 0;
  }
}
static void put_settings(tc_sbuf *b, const tc_pv *st) {
  tc_sbuf_puts(b, "[");
  if (st && st->kind == TC_PV_DICT) {
    for (uint32_t i = 0; i < st->n && i < 256; i++) {
      tc_sbuf t = {0};
      const tc_pv *k = st->u.items[2 * i], *v = st->u.items[2 * i + 1];
      tc_sbuf_puts(b, i ? ",[" : "[");
      put_scalar(&t, k);
      tc_json_str(b, t.p ? t.p : "");
      tc_sbuf_free(&t);
      if (v && v->kind == TC_PV_DICT) {
        for (uint32_t j = 0; j < v->n && j < 256; j++) {
          if (!truthy(v->u.items[2 * j + 1])) continue;
          if (t.len) tc_sbuf_puts(&t, ", ");
          put_scalar(&t, v->u.items[2 * j]);
          tc_sbuf_puts(&t, ":");
          put_scalar(&t, v->u.items[2 * j + 1]);
        }
        if (!t.len) tc_sbuf_puts(&t, "(default)");
      } else {
        put_scalar(&t, v);
      }
      tc_sbuf_puts(b, ",");
      tc_json_str(b, t.p ? t.p : "");
      tc_sbuf_free(&t);
      tc_sbuf_puts(b, "]");
    }
  }
  tc_sbuf_puts(b, "]");
}

/* kept first: the most area on the chart (bytes times steps alive), then
 * the larger */
typedef struct {
  double area;
  uint64_t size;
  uint32_t i;
} keyrec;
static int cmp_keep(const void *x, const void *y) {
  const keyrec *p = x, *q = y;
  if (p->area != q->area) return p->area > q->area ? -1 : 1;
  if (p->size != q->size) return p->size > q->size ? -1 : 1;
  return p->i < q->i ? -1 : 1;
}
/* keyrec by .size, here an address */
static int cmp_addr(const void *x, const void *y) {
  const keyrec *p = x, *q = y;
  return p->size < q->size ? -1 : p->size > q->size;
}
static int cmp_u32(const void *x, const void *y) {
  uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
  return a < b ? -1 : a > b;
}

static tcuda_status build(vctx *c, const tc_pv *root, tc_sbuf *b) {
  const tcuda_viz_options_t *o = c->o;
  if (!root || root->kind != TC_PV_DICT) return not_snap(c, "the top level is not a dict");
  tc_pv *const *segs, *const *traces = NULL;
  size_t nsegs, ntr = 0;
  if (!tc_pv_as_seq(tc_pv_get(root, "segments"), &segs, &nsegs)) return not_snap(c, "no \"segments\" list");
  const tc_pv *tv = tc_pv_get(root, "device_traces");
  if (tv && !tc_pv_as_seq(tv, &traces, &ntr)) return not_snap(c, "\"device_traces\" is not a list");
  const tc_pv *settings = tc_pv_get(root, "allocator_settings");
  if (settings && settings->kind != TC_PV_DICT && settings->kind != TC_PV_NONE)
    return not_snap(c, "\"allocator_settings\" is not a dict");
  tcuda_status s = check_segments(c, segs, nsegs);
  for (size_t d = 0; d < ntr && !s; d++) {
    tc_pv *const *ev;
    size_t n;
    if (!tc_pv_as_seq(traces[d], &ev, &n)) {
      char w[64];
      snprintf(w, sizeof w, "device_traces[%zu] is not a list", d);
      return not_snap(c, w);
    }
    s = check_trace(c, d, ev, n);
  }
  if (s) return s;

  /* the device: as asked, else the first with entries, else the first segment's */
  int64_t dev = o->device;
  if (dev < 0) {
    dev = 0;
    size_t n = 0;
    tc_pv *const *ev;
    int found = 0;
    for (size_t d = 0; d < ntr && !found; d++)
      if (tc_pv_as_seq(traces[d], &ev, &n) && n) {
        dev = (int64_t)d;
        found = 1;
      }
    if (!found && nsegs) dev = (int64_t)getu(segs[0], "device");
  }
  tc_pv *const *ev = NULL;
  size_t nev = 0;
  if ((size_t)dev < ntr) tc_pv_as_seq(traces[dev], &ev, &nev);
  if (nev > ((size_t)1 << 28)) return not_snap(c, "the trace is longer than 2^28 entries");

  /* the trace, in one pass */
  uint64_t counts[A_NUM] = {0};
  umap live = {0}, lseg = {0};
  for (size_t i = 0; i < nev && !s; i++) {
    if ((i & 0xffff) == 0) progress(c, "trace", i, nev);
    const tc_pv *e = ev[i];
    const tc_pv *act = tc_pv_get(e, "action");
    int k = 0;
    while (k < A_NUM && !tc_pv_is_str(act, ACTIONS[k])) k++;
    if (k == A_NUM) continue;
    counts[k]++;
    uint64_t addr = getu(e, "addr"), size = getu(e, "size"), stream = getu(e, "stream");
    int64_t step = (int64_t)i + 1;
    uint32_t at;
    switch (k) {
    case A_ALLOC:
      if ((at = umap_get(&live, addr)) != UINT32_MAX) c->a[at].end = step; /* a missed free: end it here */
      if (!push_alloc(c, (valc){addr, size, (int64_t)stream, step, NEVER, -1, tc_pv_get(e, "frames"), 1}) ||
          !umap_put(&live, addr, (uint32_t)(c->na - 1)))
        s = oom(c);
      break;
    case A_FREQ:
      if ((at = umap_get(&live, addr)) != UINT32_MAX) c->a[at].freq = step;
      break;
    case A_FREE:
      if ((at = umap_get(&live, addr)) != UINT32_MAX) {
        c->a[at].end = step;
        umap_del(&live, addr);
      } else if (!push_alloc(c, (valc){addr, size, (int64_t)stream, 0, step, -1, tc_pv_get(e, "frames"), 0})) {
        s = oom(c);
      }
      break;
    case A_SEG_ALLOC:
    case A_SEG_MAP:
      if ((at = umap_get(&lseg, addr)) != UINT32_MAX) c->s[at].end = step;
      if (!push_seg(c, (vseg){addr, size, (int64_t)stream, step, NEVER, k == A_SEG_MAP}) ||
          !umap_put(&lseg, addr, (uint32_t)(c->ns - 1)))
        s = oom(c);
      break;
    case A_SEG_FREE:
    case A_SEG_UNMAP:
      if ((at = umap_get(&lseg, addr)) != UINT32_MAX) {
        c->s[at].end = step;
        umap_del(&lseg, addr);
      } else if (!push_seg(c, (vseg){addr, size, (int64_t)stream, 0, step, k == A_SEG_UNMAP})) {
        s = oom(c);
      }
      break;
    default: break;
    }
  }
  progress(c, "trace", nev, nev);

  /* the device's segments: blocks live at the end without a recorded
   * alloc, and segments without a recorded segment_alloc, were there
   * before the trace */
  /* the trace's segments live at the end, by address, to tell which of
   * the snapshot's it made */
  size_t nlive = 0;
  keyrec *lv = malloc((c->ns ? c->ns : 1) * sizeof *lv);
  if (!lv) s = oom(c);
  for (size_t j = 0; j < c->ns && !s; j++)
    if (c->s[j].end == NEVER) lv[nlive++] = (keyrec){0, c->s[j].addr, (uint32_t)j};
  if (!s) qsort(lv, nlive, sizeof *lv, cmp_addr);
  for (size_t i = 0; i < nsegs && !s; i++) {
    const tc_pv *g = segs[i];
    if ((int64_t)getu(g, "device") != dev) continue;
    uint64_t base = getu(g, "address"), total = getu(g, "total_size");
    /* the last live one starting below the segment's end: it overlaps
       when it ends past the segment's start */
    size_t lo = 0, hi = nlive;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (lv[mid].size < base + total) lo = mid + 1;
      else hi = mid;
    }
    const vseg *prev = lo ? &c->s[lv[lo - 1].i] : NULL;
    int covered = prev && prev->addr + prev->size > base;
    if (!covered && !push_seg(c, (vseg){base, total, (int64_t)getu(g, "stream"), 0, NEVER, 0})) s = oom(c);
    tc_pv *const *bl;
    size_t nb;
    tc_pv_as_seq(tc_pv_get(g, "blocks"), &bl, &nb);
    uint64_t a = base;
    for (size_t j = 0; j < nb && !s; j++) {
      uint64_t ba = tc_pv_get(bl[j], "address") ? getu(bl[j], "address") : a, sz = getu(bl[j], "size");
      if (!tc_pv_is_str(tc_pv_get(bl[j], "state"), "inactive") && umap_get(&live, ba) == UINT32_MAX) {
        uint64_t rq = getu(bl[j], "requested_size");
        if (!push_alloc(
                c, (valc){ba, rq ? rq : sz, (int64_t)getu(g, "stream"), 0, NEVER, -1, tc_pv_get(bl[j], "frames"), 0}))
          s = oom(c);
      }
      a += sz;
    }
  }
  free(lv);
  umap_free(&live);
  umap_free(&lseg);
  if (s) return s;

  /* active bytes after each step, exactly; then per bucket min and max */
  size_t nsteps = nev + 1;
  /* unsigned: a hostile file's sizes may wrap, never overflow a signed sum */
  uint64_t *delta = calloc(nsteps + 1, sizeof *delta);
  if (!delta) return oom(c);
  for (size_t i = 0; i < c->na; i++) {
    delta[c->a[i].start] += c->a[i].size;
    if (c->a[i].end != NEVER) delta[c->a[i].end] -= c->a[i].size;
  }
  size_t nb = (size_t)(o->buckets ? o->buckets : 16384);
  if (nb > nsteps) nb = nsteps;
  uint64_t urun = 0;
  int64_t run = 0, peak = 0;
  size_t peak_step = 0;
  tc_sbuf lo = {0}, mn = {0}, mx = {0};
  for (size_t k = 0, i = 0; k < nb; k++) {
    size_t end = (size_t)((unsigned __int128)(k + 1) * nsteps / nb);
    int64_t bmin = INT64_MAX, bmax = INT64_MIN;
    tc_sbuf_printf(&lo, "%s%zu", k ? "," : "", i);
    for (; i < end; i++) {
      urun += delta[i];
      run = (int64_t)urun;
      if (run < bmin) bmin = run;
      if (run > bmax) bmax = run;
      if (run > peak) {
        peak = run;
        peak_step = i;
      }
    }
    tc_sbuf_printf(&mn, "%s%lld", k ? "," : "", (long long)bmin);
    tc_sbuf_printf(&mx, "%s%lld", k ? "," : "", (long long)bmax);
  }
  free(delta);

  tc_sbuf_printf(b, "{\"format\":\"tcuda-viz/1\",\"device\":%lld,\"devices\":%zu,\"entries\":%zu,\"counts\":{",
                 (long long)dev, ntr, nev);
  for (int k = 0; k < A_NUM; k++)
    tc_sbuf_printf(b, "%s\"%s\":%llu", k ? "," : "", ACTIONS[k], (unsigned long long)counts[k]);
  tc_sbuf_printf(b, "},\"peak\":%lld,\"peak_step\":%zu,\"final\":%lld,\"series\":{\"steps\":%zu,\"lo\":[",
                 (long long)peak, peak_step, (long long)run, nsteps);
  tc_sbuf_put(b, lo.p ? lo.p : "", lo.len);
  tc_sbuf_puts(b, "],\"min\":[");
  tc_sbuf_put(b, mn.p ? mn.p : "", mn.len);
  tc_sbuf_puts(b, "],\"max\":[");
  tc_sbuf_put(b, mx.p ? mx.p : "", mx.len);
  tc_sbuf_puts(b, "]}");
  int bad = lo.failed || mn.failed || mx.failed;
  tc_sbuf_free(&lo);
  tc_sbuf_free(&mn);
  tc_sbuf_free(&mx);
  if (bad) return oom(c);

  /* the allocations kept: all, or those covering the most of the chart */
  size_t keep = o->max_allocations ? o->max_allocations : 20000;
  uint32_t *idx = malloc((c->na ? c->na : 1) * sizeof *idx);
  if (!idx) return oom(c);
  for (size_t i = 0; i < c->na; i++) idx[i] = (uint32_t)i;
  if (c->na > keep) {
    keyrec *kr = malloc(c->na * sizeof *kr);
    if (!kr) {
      free(idx);
      return oom(c);
    }
    for (size_t i = 0; i < c->na; i++) {
      const valc *a = &c->a[i];
      kr[i] = (keyrec){(double)a->size * (double)((a->end == NEVER ? (int64_t)nsteps : a->end) - a->start), a->size,
                       (uint32_t)i};
    }
    qsort(kr, c->na, sizeof *kr, cmp_keep);
    for (size_t i = 0; i < keep; i++) idx[i] = kr[i].i;
    free(kr);
    qsort(idx, keep, sizeof *idx, cmp_u32);
  } else {
    keep = c->na;
  }
  tc_sbuf_printf(b,
                 ",\"allocations\":%zu,\"alloc_fields\":[\"addr\",\"size\",\"stream\",\"start\",\"end\","
                 "\"free_requested\",\"recorded\",\"frames\"],\"allocs\":[",
                 c->na);
  for (size_t j = 0; j < keep; j++) {
    const valc *a = &c->a[idx[j]];
    tc_sbuf_printf(b, "%s%llu,%llu,%lld,%lld,%lld,%lld,%d,%lld", j ? "," : "", (unsigned long long)a->addr,
                   (unsigned long long)a->size, (long long)a->stream, (long long)a->start,
                   (long long)(a->end == NEVER ? -1 : a->end), (long long)a->freq, a->recorded,
                   (long long)frames_index(c, a->frames));
  }
  free(idx);
  tc_sbuf_puts(b, "],\"seg_fields\":[\"addr\",\"size\",\"stream\",\"start\",\"end\",\"expandable\"],\"seglife\":[");
  /* a history that maps and unmaps without end keeps the segments that
     cover the most of it */
  size_t nseg = c->ns < MAX_SEGLIFE ? c->ns : MAX_SEGLIFE;
  uint32_t *sidx = malloc((c->ns ? c->ns : 1) * sizeof *sidx);
  keyrec *sk = c->ns > MAX_SEGLIFE ? malloc(c->ns * sizeof *sk) : NULL;
  if (!sidx || (c->ns > MAX_SEGLIFE && !sk)) {
    free(sidx);
    free(sk);
    return oom(c);
  }
  for (size_t j = 0; j < c->ns; j++) sidx[j] = (uint32_t)j;
  if (sk) {
    for (size_t j = 0; j < c->ns; j++) {
      const vseg *g = &c->s[j];
      sk[j] = (keyrec){(double)g->size * (double)((g->end == NEVER ? (int64_t)nsteps : g->end) - g->start), g->size,
                       (uint32_t)j};
    }
    qsort(sk, c->ns, sizeof *sk, cmp_keep);
    for (size_t j = 0; j < nseg; j++) sidx[j] = sk[j].i;
    free(sk);
    qsort(sidx, nseg, sizeof *sidx, cmp_u32);
  }
  for (size_t j = 0; j < nseg; j++) {
    const vseg *g = &c->s[sidx[j]];
    tc_sbuf_printf(b, "%s%llu,%llu,%lld,%lld,%lld,%d", j ? "," : "", (unsigned long long)g->addr,
                   (unsigned long long)g->size, (long long)g->stream, (long long)g->start,
                   (long long)(g->end == NEVER ? -1 : g->end), g->map);
  }
  free(sidx);
  tc_sbuf_printf(b, "],\"seglife_total\":%zu", c->ns);
  /* the snapshot's segments at its end, as recorded */
  tc_sbuf_puts(b, ",\"segments\":[");
  int first = 1;
  size_t segs_out = 0, segs_all = 0, blocks_out = 0, blocks_all = 0;
  for (size_t i = 0; i < nsegs; i++) {
    const tc_pv *g = segs[i];
    if ((int64_t)getu(g, "device") != dev) continue;
    segs_all++;
    tc_pv *const *bl0;
    size_t nbl0;
    tc_pv_as_seq(tc_pv_get(g, "blocks"), &bl0, &nbl0);
    blocks_all += nbl0;
    if (segs_out == MAX_SEGMENTS) continue; /* counted, not listed */
    segs_out++;
    uint64_t a = getu(g, "address");
    tc_sbuf_printf(b, "%s{\"address\":%llu,\"total_size\":%llu,\"stream\":%lld,\"segment_type\":", first ? "" : ",",
                   (unsigned long long)a, (unsigned long long)getu(g, "total_size"), (long long)getu(g, "stream"));
    first = 0;
    tc_sbuf t = {0};
    put_text(&t, tc_pv_get(g, "segment_type"), 64);
    tc_json_str(b, t.p ? t.p : "");
    tc_sbuf_free(&t);
    tc_sbuf_printf(b, ",\"is_expandable\":%s,\"blocks\":[", truthy(tc_pv_get(g, "is_expandable")) ? "true" : "false");
    tc_pv *const *bl;
    size_t nbl;
    tc_pv_as_seq(tc_pv_get(g, "blocks"), &bl, &nbl);
    for (size_t j = 0; j < nbl && blocks_out < MAX_BLOCKS; j++, blocks_out++) {
      uint64_t ba = tc_pv_get(bl[j], "address") ? getu(bl[j], "address") : a, sz = getu(bl[j], "size");
      const tc_pv *rq = tc_pv_get(bl[j], "requested_size");
      tc_sbuf_printf(b, "%s[%llu,%llu,%llu,", j ? "," : "", (unsigned long long)ba, (unsigned long long)sz,
                     (unsigned long long)(rq ? getu(bl[j], "requested_size") : 0));
      put_text(&t, tc_pv_get(bl[j], "state"), 64);
      tc_json_str(b, t.p ? t.p : "");
      tc_sbuf_free(&t);
      tc_sbuf_printf(b, ",%lld]", (long long)frames_index(c, tc_pv_get(bl[j], "frames")));
      a += sz;
    }
    tc_sbuf_puts(b, "]}");
  }
  tc_sbuf_printf(b, "],\"segments_total\":%zu,\"blocks_total\":%zu,\"settings\":", segs_all, blocks_all);
  put_settings(b, settings);
  tc_sbuf_printf(b, ",\"frames_cut\":%s,\"frames\":[", c->frames_full ? "true" : "false");
  tc_sbuf_put(b, c->frames.p ? c->frames.p : "", c->frames.len);
  tc_sbuf_puts(b, "]}");
  if (b->failed || c->frames.failed) return oom(c);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_viz_file(const char *snapshot_path, const tcuda_viz_options_t *opt, char **json_out) {
  static const char *F0 = "tcuda_viz_file";
  TC_CHECK_ARG(F0, json_out, "json_out");
  *json_out = NULL;
  TC_CHECK_ARG(F0, snapshot_path, "snapshot_path");
  tcuda_viz_options_t def = TCUDA_VIZ_OPTIONS_INIT;
  const tcuda_viz_options_t *o = opt ? opt : &def;
  if (o->struct_size < sizeof(tcuda_viz_options_t))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: opt->struct_size %zu is not sizeof(tcuda_viz_options_t) (%zu)",
                    F0, o->struct_size, sizeof(tcuda_viz_options_t));
  if (o->device < -1 || o->device > 1023)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: device %d out of range (-1~1023)", F0, o->device);
  if (o->buckets && (o->buckets < 16 || o->buckets > 65536))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: buckets %d out of range (16~65536, or 0)", F0, o->buckets);
  if (o->max_allocations > 1000000)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: max_allocations %zu is over 1000000", F0, o->max_allocations);
  char where[320];
  tc_read_where(F0, snapshot_path, where, sizeof where);
  vctx c = {.F = where, .o = o};
  progress(&c, "read", 0, 0);
  char *data;
  size_t len;
  tcuda_status s = tc_read_file(where, snapshot_path, o->max_input_bytes, &data, &len);
  if (s) return s;
  progress(&c, "parse", 0, len);
  tc_arena *ar = tc_arena_create();
  if (!ar) {
    free(data);
    return oom(&c);
  }
  tc_pv_budget bud;
  tc_pv_budget_init(&bud, o->work_budget, len);
  tc_pv *root = NULL;
  s = tc_pv_parse(where, data, len, &bud, ar, &root);
  free(data);
  progress(&c, "parse", len, len);
  tc_sbuf b = {0};
  if (!s) s = build(&c, root, &b);
  free(c.a);
  free(c.s);
  umap_free(&c.frames_map);
  tc_sbuf_free(&c.frames);
  tc_arena_destroy(ar);
  if (s) {
    tc_sbuf_free(&b);
    return s;
  }
  if (!(*json_out = tc_sbuf_take(&b))) return oom(&c);
  return TCUDA_SUCCESS;
}
