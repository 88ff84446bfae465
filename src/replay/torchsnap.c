/* A PyTorch memory snapshot's history into replayable ops (torchsnap.h).
 *
 * The snapshot is untrusted: every field is checked for its type and range
 * and errors name the entry. Entries of actions this reader does not know
 * (newer torch versions add some) are skipped. */
#include "core/core.h"
#include "core/table.h"
#include "inspect/jsonwrite.h"
#include "pyval.h"
#include "readfile.h"
#include "torchsnap.h"
#include "trace.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((uint64_t)1 << 20)
#define MAX_TRACE_ENTRIES ((size_t)UINT32_MAX - 1) /* slots and request indexes are 32-bit */

/* ---- reading fields ---- */

typedef struct {
  uint64_t addr, size;
  uint16_t pool;
} pseg;

typedef struct {
  const char *func;
  tc_tsnap *h;
  pseg *psegs; /* segments of private pools, from the snapshot */
  size_t npsegs, cap_psegs;
  size_t cap_ops, cap_req, cap_frames, cap_flists, cap_segs, cap_blocks;
  tc_u64map flists;  /* frames list (its node's address) -> its index in frame_lists */
  tc_u64map live;    /* block address -> slot (pending frees live here too) */
  tc_u64map segseen; /* segment address -> 1: a segment entry for it was seen */
  tc_u64map blkseen; /* block address -> 1: an entry for it was seen */
  unsigned char *pending; /* slot -> free_requested seen, free_completed not yet */
  size_t cap_pending, cap_times;
  uint64_t now_us; /* the current entry's time_us */
  tc_pv_budget *budget; /* the input's work: the reader's, then the conversion's */
} conv;

static tcuda_status oom(const char *func) { return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func); }

static tcuda_status bad(const char *func, size_t i, const char *what) {
  return tc_error(TCUDA_ERROR_PARSE, "%s: device trace entry %zu: %s", func, i, what);
}

static int get_u64(const tc_pv *d, const char *key, uint64_t *out) {
  int64_t v;
  if (!tc_pv_as_int(tc_pv_get(d, key), &v) || v < 0) return 0;
  *out = (uint64_t)v;
  return 1;
}

static tcuda_status add_op(conv *c, tc_tsop op) {
  tc_tsnap *h = c->h;
  tcuda_status s = tc_pv_spend(c->func, c->budget, 1);
  if (s) return s;
  if (!tc_grow((void **)&h->ops, &c->cap_ops, h->num_ops + 1, sizeof *h->ops) ||
      !tc_grow((void **)&h->op_time_us, &c->cap_times, h->num_ops + 1, sizeof *h->op_time_us))
    return oom(c->func);
  h->op_time_us[h->num_ops] = h->t0_us && c->now_us >= h->t0_us ? c->now_us - h->t0_us : 0;
  h->ops[h->num_ops++] = op;
  return TCUDA_SUCCESS;
}

static tcuda_status new_slot(conv *c, uint32_t *slot) {
  tc_tsnap *h = c->h;
  if (!tc_grow((void **)&c->pending, &c->cap_pending, h->num_slots + 1, 1)) return oom(c->func);
  c->pending[h->num_slots] = 0;
  *slot = (uint32_t)h->num_slots++;
  return TCUDA_SUCCESS;
}

/* A segment or block of the starting state is rebuilt in every replay (an
 * allocation, a carve), so it costs this many units: a blocks list shared
 * through the memo by many segments must not make a block per reference
 * for 2 bytes each. A real one takes tens of bytes of file. */
#define SEED_WORK 64

static tcuda_status add_block(conv *c, tc_tsblock b) {
  tc_tsnap *h = c->h;
  tcuda_status s = tc_pv_spend(c->func, c->budget, SEED_WORK);
  if (s) return s;
  if (!tc_grow((void **)&h->blocks, &c->cap_blocks, h->num_blocks + 1, sizeof *h->blocks)) return oom(c->func);
  h->blocks[h->num_blocks++] = b;
  h->truncated = 1;
  return TCUDA_SUCCESS;
}

static tcuda_status add_seg(conv *c, tc_tsseg s) {
  tc_tsnap *h = c->h;
  tcuda_status st = tc_pv_spend(c->func, c->budget, SEED_WORK);
  if (st) return st;
  if (!tc_grow((void **)&h->segs, &c->cap_segs, h->num_segs + 1, sizeof *h->segs)) return oom(c->func);
  h->segs[h->num_segs++] = s;
  h->truncated = 1;
  return TCUDA_SUCCESS;
}

/* frames: [{name, filename, line}, ...], kept as an index to the list
 * (each distinct list once) when it is not empty. */
static tcuda_status keep_frames(conv *c, size_t req, const tc_pv *frames) {
  tc_pv *const *it;
  size_t n;
  if (!tc_pv_as_seq(frames, &it, &n) || !n) return TCUDA_SUCCESS;
  tc_tsnap *h = c->h;
  tcuda_status st = tc_pv_spend(c->func, c->budget, 1);
  if (st) return st;
  uint64_t *known = tc_u64map_get(&c->flists, (uint64_t)(uintptr_t)frames);
  uint32_t list;
  if (known) {
    list = (uint32_t)*known;
    if (list == UINT32_MAX) return TCUDA_SUCCESS;
  } else {
    /* a list whose frames have neither name nor file name counts as none */
    size_t named = 0;
    for (size_t k = 0; k < n && k < TC_TSNAP_MAX_FRAMES && !named; k++)
      named = tc_pv_as_str(tc_pv_get(it[k], "name")) || tc_pv_as_str(tc_pv_get(it[k], "filename"));
    if (!named) return tc_u64map_put(&c->flists, (uint64_t)(uintptr_t)frames, UINT32_MAX) ? TCUDA_SUCCESS : oom(c->func);
    if (h->num_frame_lists >= UINT32_MAX - 1) return bad(c->func, req, "too many frame lists");
    if (!tc_grow((void **)&h->frame_lists, &c->cap_flists, h->num_frame_lists + 1, sizeof *h->frame_lists))
      return oom(c->func);
    size_t cap = c->cap_flists; /* frame_lib grows with frame_lists */
    unsigned char *nl = realloc(h->frame_lib, cap);
    if (!nl) return oom(c->func);
    h->frame_lib = nl;
    list = (uint32_t)h->num_frame_lists;
    h->frame_lists[list] = frames;
    h->frame_lib[list] = 0;
    h->num_frame_lists++;
    if (!tc_u64map_put(&c->flists, (uint64_t)(uintptr_t)frames, list)) return oom(c->func);
  }
  if (!tc_grow((void **)&h->frames_req, &c->cap_frames, h->num_frames + 1, sizeof *h->frames_req)) return oom(c->func);
  size_t cap2 = c->cap_frames; /* frames_list grows with frames_req */
  uint32_t *nf = realloc(h->frames_list, cap2 * sizeof *nf);
  if (!nf) return oom(c->func);
  h->frames_list = nf;
  h->frames_req[h->num_frames] = (uint32_t)req;
  h->frames_list[h->num_frames++] = list;
  return TCUDA_SUCCESS;
}

/* A frame's string cut to TC_TSNAP_FRAME_TEXT bytes at a character's
 * start (the readers keep only valid UTF-8), "..." marking a cut; *len is
 * its length, NUL bytes included (a Python string may hold them). */
typedef struct {
  char s[TC_TSNAP_FRAME_TEXT + 4];
  size_t len;
} frame_str;

static const frame_str *frame_text(const tc_pv *v, frame_str *out) {
  size_t n;
  const char *t = tc_pv_as_strn(v, &n);
  if (!t) return NULL;
  if (n <= TC_TSNAP_FRAME_TEXT) {
    memcpy(out->s, t, n);
    out->len = n;
  } else {
    n = TC_TSNAP_FRAME_TEXT;
    while (n && ((unsigned char)t[n] & 0xC0) == 0x80) n--;
    memcpy(out->s, t, n);
    memcpy(out->s + n, "...", 3);
    out->len = n + 3;
  }
  out->s[out->len] = 0;
  return out;
}

/* The string as a JSON literal, NUL bytes escaped rather than ending it. */
static void frame_json(tc_sbuf *b, const frame_str *f) {
  tc_sbuf_put(b, "\"", 1);
  for (size_t i = 0; f && i < f->len;) {
    char e[6];
    size_t used = 1;
    if (f->s[i]) tc_sbuf_put(b, e, tc_json_escape_char((const unsigned char *)f->s + i, e, &used));
    else tc_sbuf_put(b, "\\u0000", 6);
    i += used;
  }
  tc_sbuf_put(b, "\"", 1);
}

static int list_index(const tc_tsnap *h, size_t req) {
  size_t lo = 0, hi = h->num_frames;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (h->frames_req[mid] < req) lo = mid + 1;
    else hi = mid;
  }
  return lo < h->num_frames && h->frames_req[lo] == req ? (int)h->frames_list[lo] : -1;
}

tcuda_status tc_tsnap_spend(tc_tsnap *h, const char *what, uint64_t n) {
  if (n <= h->budget.limit - h->budget.used) {
    h->budget.used += n;
    return TCUDA_SUCCESS;
  }
  char who[400];
  snprintf(who, sizeof who, "%s: %s", h->where, what);
  return tc_pv_over_budget(who, &h->budget);
}

tcuda_status tc_tsnap_frames_json(tc_tsnap *h, size_t req, tc_sbuf *b) {
  size_t len0 = b->len;
  int li = list_index(h, req);
  tc_pv *const *it = NULL;
  size_t n = 0;
  if (li >= 0) tc_pv_as_seq(h->frame_lists[li], &it, &n);
  tc_sbuf_put(b, "[", 1);
  size_t shown = 0;
  for (size_t k = 0; k < n && shown < TC_TSNAP_MAX_FRAMES; k++) {
    frame_str nb, fb;
    const frame_str *name = frame_text(tc_pv_get(it[k], "name"), &nb);
    const frame_str *file = frame_text(tc_pv_get(it[k], "filename"), &fb);
    int64_t line = 0;
    tc_pv_as_int(tc_pv_get(it[k], "line"), &line);
    if (!name && !file) continue;
    if (shown++) tc_sbuf_puts(b, ", ");
    tc_sbuf_puts(b, "{\"name\": ");
    frame_json(b, name);
    tc_sbuf_puts(b, ", \"filename\": ");
    frame_json(b, file);
    tc_sbuf_puts(b, ", \"line\": ");
    tc_json_i64(b, line);
    tc_sbuf_put(b, "}", 1);
  }
  tc_sbuf_put(b, "]", 1);
  return tc_tsnap_spend(h, "stack frames", b->len - len0);
}

/* Library workspace tries that torch counted as OOMs though the program went
 * on: cuDNN's convolution and cuBLAS try a workspace and take a smaller one
 * when it fails. Their frames point there; with no frames (an autograd
 * thread) the tell is a smaller request right after, with no free between. */
static int library_text(const frame_str *f) {
  static const char *marks[] = {"cudnn", "cuDNN", "cublas", "cuBLAS", "orkspace", "_conv_forward", "convolution"};
  for (size_t k = 0; f && k < sizeof marks / sizeof *marks; k++) {
    size_t m = strlen(marks[k]);
    for (size_t i = 0; i + m <= f->len; i++)
      if (!memcmp(f->s + i, marks[k], m)) return 1;
  }
  return 0;
}

tcuda_status tc_tsnap_request_library(tc_tsnap *h, size_t req, int *lib) {
  int li = list_index(h, req);
  *lib = 0;
  if (li < 0) return TCUDA_SUCCESS;
  if (!h->frame_lib[li]) {
    tc_pv *const *it = NULL;
    size_t n = 0, read = 0;
    int found = 0;
    tc_pv_as_seq(h->frame_lists[li], &it, &n);
    for (size_t k = 0; k < n && k < TC_TSNAP_MAX_FRAMES && !found; k++) {
      frame_str nb, fb;
      const frame_str *name = frame_text(tc_pv_get(it[k], "name"), &nb);
      const frame_str *file = frame_text(tc_pv_get(it[k], "filename"), &fb);
      read += (name ? name->len : 0) + (file ? file->len : 0) + 1;
      found = library_text(name) || library_text(file);
    }
    tcuda_status s = tc_tsnap_spend(h, "stack frames", read);
    if (s) return s;
    h->frame_lib[li] = (unsigned char)(found ? 2 : 1);
  }
  *lib = h->frame_lib[li] == 2;
  return TCUDA_SUCCESS;
}

static tcuda_status read_entry(conv *c, size_t i, tc_pv *const *ents, size_t n, size_t *skip) {
  tc_tsnap *h = c->h;
  const tc_pv *e = ents[i];
  if (!e || e->kind != TC_PV_DICT) return bad(c->func, i, "not a dict");
  size_t actn = 0;
  const char *act = tc_pv_as_strn(tc_pv_get(e, "action"), &actn);
  if (!act) return bad(c->func, i, "no 'action' string");
  if (strlen(act) != actn) act = "?"; /* a NUL inside: an action no one knows, as for torch */
  uint64_t addr = 0, size = 0, stream = 0;
  int64_t sv = 0;
  int is_oom = !strcmp(act, "oom");
  if (!get_u64(e, is_oom ? "device_free" : "addr", &addr) && !(is_oom && get_u64(e, "addr", &addr)))
    return bad(c->func, i, is_oom ? "no 'device_free' integer >= 0" : "no 'addr' integer >= 0");
  if (!get_u64(e, "size", &size)) return bad(c->func, i, "no 'size' integer >= 0");
  if (tc_pv_get(e, "stream") && !tc_pv_as_int(tc_pv_get(e, "stream"), &sv))
    return bad(c->func, i, "'stream' is not an integer");
  stream = (uint64_t)sv;
  int64_t t = 0;
  if (tc_pv_as_int(tc_pv_get(e, "time_us"), &t) && t > 0) {
    if (!h->t0_us) h->t0_us = (uint64_t)t;
    h->t1_us = (uint64_t)t;
    c->now_us = (uint64_t)t;
  }
  tcuda_status s = TCUDA_SUCCESS;
  uint64_t *p;
  if (!strcmp(act, "alloc") || is_oom) {
    if (h->num_requests >= MAX_TRACE_ENTRIES) return bad(c->func, i, "too many requests");
    if (!is_oom && !addr) return bad(c->func, i, "an 'alloc' at address 0");
    if (!is_oom && size > TC_TRACE_MAX_SIZE) return bad(c->func, i, "an 'alloc' size over 2^64 - 2 MiB - 1");
    if (is_oom && size > TC_TRACE_MAX_SIZE) size = TC_TRACE_MAX_SIZE;
    if (!tc_grow((void **)&h->req_op, &c->cap_req, h->num_requests + 1, sizeof *h->req_op)) return oom(c->func);
    h->req_op[h->num_requests] = (uint32_t)h->num_ops;
    if ((s = keep_frames(c, h->num_requests, tc_pv_get(e, "frames")))) return s;
    h->num_requests++;
    tc_tsop op = {.kind = is_oom ? HOP_OOM : HOP_ALLOC, .slot = HOP_NO_SLOT, .stream = stream, .addr = addr, .size = size};
    if (!is_oom) {
      if ((p = tc_u64map_get(&c->live, addr))) tc_u64map_del(&c->live, addr); /* a lost free: forget the old block */
      if ((s = new_slot(c, &op.slot))) return s;
      if (!tc_u64map_put(&c->live, addr, op.slot) || !tc_u64map_put(&c->blkseen, addr, 1)) return oom(c->func);
    } else {
      h->recorded_ooms++;
      int has = h->num_frames && h->frames_req[h->num_frames - 1] == h->num_requests - 1, lib = 0;
      if (has && (s = tc_tsnap_request_library(h, h->num_requests - 1, &lib))) return s;
      if (!lib && !has) {
        /* no frames: a smaller request next, before any free */
        for (size_t k = i + 1; k < n && k < i + 64; k++) {
          const tc_pv *a2 = tc_pv_get(ents[k], "action");
          size_t a2n = 0;
          uint64_t s2;
          if (!tc_pv_as_strn(a2, &a2n) || (a2n >= 4 && !memcmp(a2->u.s, "free", 4))) break;
          if ((tc_pv_is_str(a2, "alloc") || tc_pv_is_str(a2, "oom")) && get_u64(ents[k], "size", &s2)) {
            lib = s2 < size;
            break;
          }
        }
      }
      if (lib) {
        op.flags |= HOP_F_ADAPTIVE;
        h->adaptive_ooms++;
      }
    }
    return add_op(c, op);
  }
  if (!strcmp(act, "free_requested") || !strcmp(act, "free_completed")) {
    int req = act[5] == 'r';
    uint32_t slot;
    p = tc_u64map_get(&c->live, addr);
    if (!p) {
      /* a block from before the window */
      if (tc_u64map_get(&c->blkseen, addr) || !addr) return TCUDA_SUCCESS; /* a second free: ignore */
      if ((s = new_slot(c, &slot))) return s;
      if (!tc_u64map_put(&c->blkseen, addr, 1)) return oom(c->func);
      if ((s = add_block(c, (tc_tsblock){.addr = addr, .requested = size, .slot = slot, .pending = !req}))) return s;
      if (req) {
        if (!tc_u64map_put(&c->live, addr, slot)) return oom(c->func);
        p = tc_u64map_get(&c->live, addr);
      } else {
        c->pending[slot] = 1;
        return add_op(c, (tc_tsop){.kind = HOP_FREE_DONE, .slot = slot, .stream = stream, .addr = addr, .size = size});
      }
    }
    slot = (uint32_t)*p;
    if (req) {
      if (c->pending[slot]) return TCUDA_SUCCESS; /* requested twice */
      const tc_pv *nx = i + 1 < n ? ents[i + 1] : NULL;
      uint64_t naddr = 0;
      if (nx && tc_pv_is_str(tc_pv_get(nx, "action"), "free_completed") && get_u64(nx, "addr", &naddr) &&
          naddr == addr) {
        *skip = 1;
        tc_u64map_del(&c->live, addr);
        return add_op(c, (tc_tsop){.kind = HOP_FREE, .slot = slot, .stream = stream, .addr = addr, .size = size});
      }
      c->pending[slot] = 1;
      return add_op(c, (tc_tsop){.kind = HOP_FREE_REQ, .slot = slot, .stream = stream, .addr = addr, .size = size});
    }
    tc_u64map_del(&c->live, addr);
    if (!c->pending[slot]) /* completed with no request: a plain free */
      return add_op(c, (tc_tsop){.kind = HOP_FREE, .slot = slot, .stream = stream, .addr = addr, .size = size});
    c->pending[slot] = 0;
    return add_op(c, (tc_tsop){.kind = HOP_FREE_DONE, .slot = slot, .stream = stream, .addr = addr, .size = size});
  }
  static const struct {
    const char *name;
    uint8_t kind;
  } segs[] = {{"segment_alloc", HOP_SEG_ALLOC}, {"segment_free", HOP_SEG_FREE},
              {"segment_map", HOP_SEG_MAP},     {"segment_unmap", HOP_SEG_UNMAP}};
  for (size_t k = 0; k < 4; k++) {
    if (strcmp(act, segs[k].name)) continue;
    if (!addr || !size || addr + size < addr) return bad(c->func, i, "a segment entry with a bad address or size");
    if (!tc_u64map_get(&c->segseen, addr)) {
      if (!tc_u64map_put(&c->segseen, addr, 1)) return oom(c->func);
      /* a non-expandable segment freed before any allocation of it in the
       * window existed when the window began */
      if (segs[k].kind == HOP_SEG_FREE &&
          (s = add_seg(c, (tc_tsseg){.addr = addr, .size = size, .stream = stream, .small = size == 2 * MIB})))
        return s;
    }
    return add_op(c, (tc_tsop){.kind = segs[k].kind, .slot = HOP_NO_SLOT, .stream = stream, .addr = addr, .size = size});
  }
  if (!strcmp(act, "snapshot")) return add_op(c, (tc_tsop){.kind = HOP_SNAPSHOT, .slot = HOP_NO_SLOT});
  return TCUDA_SUCCESS; /* an action this reader does not know */
}

/* ---- allocator_settings -> a config string ---- */

/* One key of allocator_settings, as torch reports it, appended to the
 * config string b. */
static tcuda_status read_setting(const char *func, const tc_config_key *d, const tc_pv *val, tc_sbuf *b,
                                 const char **sep) {
  int64_t v;
  double x;
  switch (d->kind) {
  case TC_KEY_MB: /* bytes; unset is -1 or SIZE_MAX, neither a positive int64 */
    if (!tc_pv_as_int(val, &v) || v <= 0) return TCUDA_SUCCESS;
    if (v % (int64_t)MIB)
      return tc_error(TCUDA_ERROR_PARSE, "%s: allocator_settings: %s %lld is not a whole number of MiB", func,
                      d->snapshot_key, (long long)v);
    tc_sbuf_printf(b, "%s%s:%lld", *sep, d->key, (long long)(v / (int64_t)MIB));
    break;
  case TC_KEY_FRACTION:
    if (!tc_pv_as_double(val, &x) || x == 0.0) return TCUDA_SUCCESS;
    tc_sbuf_printf(b, "%s%s:%.17g", *sep, d->key, x);
    break;
  case TC_KEY_BOOL:
    if (!tc_pv_as_int(val, &v) || !v) return TCUDA_SUCCESS;
    tc_sbuf_printf(b, "%s%s:True", *sep, d->key);
    break;
  case TC_KEY_DIVISIONS:
    /* {"1": d, "2": d, ... "32768": d} by MiB interval start; torch also
     * accepts a plain number in older versions */
    if (val && val->kind == TC_PV_DICT) {
      int64_t div[TC_ROUNDUP_SLOTS] = {0};
      int any = 0;
      for (uint32_t k = 0; k < val->n; k++) {
        size_t keyn = 0;
        const char *key = tc_pv_as_strn(val->u.items[2 * k], &keyn);
        int64_t dv;
        char *end = NULL;
        errno = 0;
        unsigned long mb = key ? strtoul(key, &end, 10) : 0;
        if (!key || errno || end != key + keyn || !mb || (mb & (mb - 1)) || !tc_pv_as_int(val->u.items[2 * k + 1], &dv) ||
            dv < 0 || dv > (1 << 30))
          return tc_error(TCUDA_ERROR_PARSE, "%s: allocator_settings: %s has a bad entry", func, d->snapshot_key);
        int slot = 0;
        while ((1ul << slot) < mb) slot++;
        if (slot < TC_ROUNDUP_SLOTS) {
          div[slot] = dv;
          any |= dv != 0;
        }
      }
      if (!any) return TCUDA_SUCCESS;
      tc_sbuf_printf(b, "%s%s:[", *sep, d->key);
      for (int k = 0; k < TC_ROUNDUP_SLOTS; k++) tc_sbuf_printf(b, "%s%u:%lld", k ? "," : "", 1u << k, (long long)div[k]);
      tc_sbuf_put(b, "]", 1);
    } else if (tc_pv_as_int(val, &v) && v > 0) {
      tc_sbuf_printf(b, "%s%s:%lld", *sep, d->key, (long long)v);
    } else {
      return TCUDA_SUCCESS;
    }
    break;
  default: /* torch reports no such key */
    return TCUDA_SUCCESS;
  }
  *sep = ",";
  return TCUDA_SUCCESS;
}

/* The keys in the order of the snapshot's allocator_settings (the config
 * table's positions), those tcuda ignores left out. */
static tcuda_status read_settings(const char *func, const tc_pv *set, tc_tsnap *h) {
  if (set && set->kind != TC_PV_DICT)
    return tc_error(TCUDA_ERROR_PARSE, "%s: 'allocator_settings' is not a dict", func);
  tc_sbuf b = {0};
  tc_sbuf_put(&b, "", 0); /* "" when nothing is set */
  const char *sep = "";
  for (int pos = 1; pos <= (int)tc_alloc_config_nkeys; pos++) {
    const tc_config_key *d = tc_alloc_config_snapshot_key(pos);
    if (!d || d->field == TC_KEY_IGNORED) continue;
    tcuda_status s = read_setting(func, d, tc_pv_get(set, d->snapshot_key), &b, &sep);
    if (s) {
      tc_sbuf_free(&b);
      return s;
    }
  }
  char *text = tc_sbuf_take(&b);
  if (!text) return oom(func);
  if (strlen(text) >= sizeof h->conf_text) {
    free(text);
    return tc_error(TCUDA_ERROR_PARSE, "%s: allocator_settings make too long a config", func);
  }
  snprintf(h->conf_text, sizeof h->conf_text, "%s", text);
  free(text);
  char src[160];
  snprintf(src, sizeof src, "%s: the snapshot's allocator_settings", func);
  tc_alloc_config_default(&h->cfg);
  return tc_alloc_config_parse_named(src, h->conf_text, &h->cfg);
}

/* ---- the final segments: what was live before the window ---- */

static int cmp_block(const void *a, const void *b) {
  const tc_tsblock *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}
static int cmp_seg(const void *a, const void *b) {
  const tc_tsseg *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* A segment of a CUDA graph's private pool: the window's allocations that
 * land in it were routed there. */
static tcuda_status add_pool_segment(conv *c, uint64_t addr, uint64_t size, uint64_t p0, uint64_t p1) {
  tc_tsnap *h = c->h;
  size_t k = 0;
  while (k < h->num_pools && !(h->pool_ids[k][0] == p0 && h->pool_ids[k][1] == p1)) k++;
  if (k == h->num_pools) {
    if (h->num_pools >= 1024) return TCUDA_SUCCESS;
    void *np = realloc(h->pool_ids, (h->num_pools + 1) * sizeof *h->pool_ids);
    if (!np) return oom(c->func);
    h->pool_ids = np;
    h->pool_ids[h->num_pools][0] = p0;
    h->pool_ids[h->num_pools][1] = p1;
    h->num_pools++;
  }
  if (!tc_grow((void **)&c->psegs, &c->cap_psegs, c->npsegs + 1, sizeof *c->psegs)) return oom(c->func);
  c->psegs[c->npsegs++] = (pseg){addr, size, (uint16_t)(k + 1)};
  h->has_private_pools = 1;
  return TCUDA_SUCCESS;
}

static int cmp_pseg(const void *a, const void *b) {
  const pseg *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The segments are disjoint (check_segments), so an address lies in at
 * most one: the last that starts at or below it. */
static void route_pools(conv *c) {
  tc_tsnap *h = c->h;
  if (!c->npsegs) return;
  qsort(c->psegs, c->npsegs, sizeof *c->psegs, cmp_pseg);
  unsigned char seen[1025] = {0};
  for (size_t i = 0; i < h->num_ops; i++) {
    tc_tsop *op = &h->ops[i];
    if (op->kind != HOP_ALLOC) continue;
    size_t lo = 0, hi = c->npsegs;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      if (c->psegs[mid].addr <= op->addr) lo = mid + 1;
      else hi = mid;
    }
    const pseg *p = lo ? &c->psegs[lo - 1] : NULL;
    if (p && op->addr - p->addr < p->size) {
      op->pool = p->pool;
      if (!seen[op->pool]) op->flags |= HOP_F_CAPTURE;
      seen[op->pool] = 1;
    }
  }
}

typedef struct {
  uint64_t addr, size;
} span;
static int cmp_span(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The device's segments must be disjoint: checked on all of them before
 * any block is read, since a segment named again (or overlapping another)
 * would bring its blocks in again. */
static tcuda_status check_segments(conv *c, tc_pv *const *it, size_t n) {
  span *v = malloc((n ? n : 1) * sizeof *v);
  if (!v) return oom(c->func);
  size_t m = 0;
  tcuda_status s = TCUDA_SUCCESS;
  for (size_t i = 0; i < n && !s; i++) {
    const tc_pv *sg = it[i];
    int64_t dev = 0;
    uint64_t addr = 0, size = 0;
    if (!sg || sg->kind != TC_PV_DICT || !get_u64(sg, "address", &addr) || !get_u64(sg, "total_size", &size) ||
        !addr || !size || addr + size < addr)
      s = tc_error(TCUDA_ERROR_PARSE, "%s: segment %zu: needs 'address' and 'total_size' integers > 0", c->func, i);
    tc_pv_as_int(tc_pv_get(sg, "device"), &dev);
    if (!s && dev == c->h->device) v[m++] = (span){addr, size};
  }
  if (!s && m) qsort(v, m, sizeof *v, cmp_span);
  for (size_t i = 1; i < m && !s; i++) {
    if (v[i].addr == v[i - 1].addr)
      s = tc_error(TCUDA_ERROR_PARSE, "%s: the segment at 0x%llx (%llu bytes) is listed twice", c->func,
                   (unsigned long long)v[i].addr, (unsigned long long)v[i].size);
    else if (v[i].addr - v[i - 1].addr < v[i - 1].size)
      s = tc_error(TCUDA_ERROR_PARSE, "%s: the segment at 0x%llx (%llu bytes) overlaps the segment at 0x%llx (%llu bytes)",
                   c->func, (unsigned long long)v[i].addr, (unsigned long long)v[i].size,
                   (unsigned long long)v[i - 1].addr, (unsigned long long)v[i - 1].size);
  }
  free(v);
  return s;
}

static tcuda_status read_segments(conv *c, const tc_pv *segs) {
  tc_tsnap *h = c->h;
  tc_pv *const *it;
  size_t n;
  if (!segs) return TCUDA_SUCCESS;
  if (!tc_pv_as_seq(segs, &it, &n)) return tc_error(TCUDA_ERROR_PARSE, "%s: 'segments' is not a list", c->func);
  tcuda_status cs = check_segments(c, it, n);
  if (cs) return cs;
  for (size_t i = 0; i < n; i++) {
    const tc_pv *sg = it[i];
    int64_t dev = 0;
    uint64_t addr = 0, size = 0;
    get_u64(sg, "address", &addr);
    get_u64(sg, "total_size", &size);
    tc_pv_as_int(tc_pv_get(sg, "device"), &dev);
    if (dev != h->device) continue;
    const tc_pv *pid = tc_pv_get(sg, "segment_pool_id");
    tc_pv *const *pi;
    size_t pn;
    int64_t p0 = 0, p1 = 0;
    if (tc_pv_as_seq(pid, &pi, &pn) && pn == 2 && tc_pv_as_int(pi[0], &p0) && tc_pv_as_int(pi[1], &p1) && (p0 || p1)) {
      tcuda_status s = add_pool_segment(c, addr, size, (uint64_t)p0, (uint64_t)p1);
      if (s) return s;
    }
    if (tc_u64map_get(&c->segseen, addr)) continue; /* the window made or freed it */
    int64_t stream = 0, exp = 0;
    tc_pv_as_int(tc_pv_get(sg, "stream"), &stream);
    tc_pv_as_int(tc_pv_get(sg, "is_expandable"), &exp);
    const tc_pv *type = tc_pv_get(sg, "segment_type");
    tcuda_status s = add_seg(c, (tc_tsseg){.addr = addr, .size = size, .stream = (uint64_t)stream,
                                          .small = tc_pv_as_str(type) ? tc_pv_is_str(type, "small") : size == 2 * MIB,
                                          .expandable = exp != 0});
    if (s) return s;
    tc_pv *const *bl;
    size_t bn;
    if (!tc_pv_as_seq(tc_pv_get(sg, "blocks"), &bl, &bn)) continue;
    uint64_t at = addr, prev = 0;
    for (size_t k = 0; k < bn; k++) {
      /* each reference read, kept or not: one list can be every segment's */
      if ((s = tc_pv_spend(c->func, c->budget, 1))) return s;
      uint64_t bsz = 0, rq = 0, baddr = at;
      get_u64(bl[k], "size", &bsz);
      get_u64(bl[k], "requested_size", &rq);
      get_u64(bl[k], "address", &baddr);
      const tc_pv *state = tc_pv_get(bl[k], "state");
      int pending = tc_pv_is_str(state, "active_pending_free");
      /* torch lists a segment's blocks in address order, each inside it */
      if (baddr < addr || baddr - addr >= size || bsz > size - (baddr - addr))
        return tc_error(TCUDA_ERROR_PARSE, "%s: the block at 0x%llx (%llu bytes) lies outside its segment at 0x%llx (%llu bytes)",
                        c->func, (unsigned long long)baddr, (unsigned long long)bsz, (unsigned long long)addr,
                        (unsigned long long)size);
      if (k && baddr == prev)
        return tc_error(TCUDA_ERROR_PARSE, "%s: the block at 0x%llx (%llu bytes) is listed twice", c->func,
                        (unsigned long long)baddr, (unsigned long long)bsz);
      if (k && baddr < at)
        return tc_error(TCUDA_ERROR_PARSE, "%s: the block at 0x%llx (%llu bytes) overlaps the block at 0x%llx", c->func,
                        (unsigned long long)baddr, (unsigned long long)bsz, (unsigned long long)prev);
      prev = baddr;
      at = baddr + bsz;
      if ((!pending && !tc_pv_is_str(state, "active_allocated")) || !bsz || tc_u64map_get(&c->blkseen, baddr)) continue;
      uint32_t slot;
      if ((s = new_slot(c, &slot))) return s;
      if ((s = add_block(c, (tc_tsblock){.addr = baddr, .size = bsz, .requested = rq, .slot = HOP_NO_SLOT,
                                        .pending = pending})))
        return s;
    }
  }
  return TCUDA_SUCCESS;
}

typedef struct {
  uint64_t addr;
  size_t op;
} alloc_at;
static int cmp_alloc_at(const void *a, const void *b) {
  const alloc_at *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Blocks into their segments, with sizes estimated for those the window
 * frees (their entries give only the requested size). A block ends at the
 * rounded request, unless what lies between there and the next thing known
 * to be there is too small to be a free block of its pool (torch then gave
 * it to the block). The next thing known is the next live block, the
 * segment's end, or an allocation the window makes there while the block is
 * still live. */
static void place_blocks(tc_tsnap *h) {
  if (h->num_segs) qsort(h->segs, h->num_segs, sizeof *h->segs, cmp_seg);
  if (h->num_blocks) qsort(h->blocks, h->num_blocks, sizeof *h->blocks, cmp_block);
  /* allocations of the window by address, and when each slot is freed */
  size_t na = 0;
  alloc_at *al = malloc((h->num_ops ? h->num_ops : 1) * sizeof *al);
  size_t *freed_at = malloc((h->num_slots ? h->num_slots : 1) * sizeof *freed_at);
  if (al && freed_at) {
    for (size_t i = 0; i < h->num_slots; i++) freed_at[i] = SIZE_MAX;
    for (size_t i = 0; i < h->num_ops; i++) {
      const tc_tsop *op = &h->ops[i];
      if (op->kind == HOP_ALLOC) al[na++] = (alloc_at){op->addr, i};
      else if ((op->kind == HOP_FREE || op->kind == HOP_FREE_REQ || op->kind == HOP_FREE_DONE) &&
               op->slot < h->num_slots && freed_at[op->slot] == SIZE_MAX)
        freed_at[op->slot] = i;
    }
    if (na) qsort(al, na, sizeof *al, cmp_alloc_at);
  } else {
    na = 0;
  }
  size_t b = 0, out = 0;
  for (size_t s = 0; s < h->num_segs; s++) {
    tc_tsseg *sg = &h->segs[s];
    while (b < h->num_blocks && h->blocks[b].addr < sg->addr) b++; /* outside every segment: dropped */
    sg->first_block = out;
    while (b < h->num_blocks && h->blocks[b].addr < sg->addr + sg->size) {
      tc_tsblock bk = h->blocks[b++];
      uint64_t seg_end = sg->addr + sg->size;
      uint64_t end = b < h->num_blocks && h->blocks[b].addr < seg_end ? h->blocks[b].addr : seg_end;
      if (!bk.size && na && freed_at && bk.slot < h->num_slots) {
        /* the first allocation above it, made while it lives */
        size_t lo = 0, hi = na;
        while (lo < hi) {
          size_t mid = lo + (hi - lo) / 2;
          if (al[mid].addr <= bk.addr) lo = mid + 1;
          else hi = mid;
        }
        for (size_t k = lo, seen = 0; k < na && al[k].addr < end && seen < 256; k++, seen++) {
          if (al[k].op < freed_at[bk.slot]) {
            end = al[k].addr;
            break;
          }
        }
      }
      if (!bk.size) {
        uint64_t r = tc_alloc_round_size(&h->cfg, bk.requested ? bk.requested : 1);
        uint64_t room = end - bk.addr;
        uint64_t rest = room > r ? room - r : 0;
        int split = sg->small ? rest >= TC_MIN_BLOCK_SIZE : rest > TC_SMALL_SIZE;
        bk.size = split ? r : room;
      }
      if (bk.addr + bk.size > seg_end) bk.size = seg_end - bk.addr;
      h->blocks[out++] = bk;
    }
    sg->num_blocks = out - sg->first_block;
  }
  h->num_blocks = out;
  free(al);
  free(freed_at);
}

/* ---- loading ---- */

/* The streams the replay's record_stream frees wait on, one per slot.
 * They are values the file never names: a fixed reserved one could be
 * written in a file (stream -15), and a block on its own waiting stream
 * would be freed at once. The allocator completes pending frees at its
 * next malloc (or flush) stream by stream in ascending order, FIFO within
 * one, and a free's merges, so the inactive_split figures, depend on that
 * order. So the streams ascend in torch's free_completed order, and a free
 * requested right after one that torch completed just before it shares
 * that one's stream (a FIFO run, keeping the streams few). Frees torch
 * never completed wait on the highest value. Of the top span values at
 * most `named` are named: a bitmap of those finds the free ones. */
tcuda_status tc_tsnap_event_streams(const char *func, const tc_tsnap *h, uint64_t **out) {
  const uint64_t top = UINT64_MAX - 14;
  size_t named = h->num_ops + h->num_segs, ndone = 0, nslots = h->num_slots ? h->num_slots : 1;
  for (size_t i = 0; i < h->num_ops; i++) ndone += h->ops[i].kind == HOP_FREE_DONE;
  size_t span = named + ndone + 1;
  unsigned char *used = calloc(span / 8 + 1, 1);
  uint64_t *vals = malloc((ndone + 1) * sizeof *vals), *st = malloc(nslots * sizeof *st);
  size_t *rank = malloc(nslots * sizeof *rank);
  *out = NULL;
  if (!used || !vals || !st || !rank) {
    free(used);
    free(vals);
    free(st);
    free(rank);
    return oom(func);
  }
  for (size_t i = 0; i < named; i++) {
    uint64_t v = i < h->num_ops ? h->ops[i].stream : h->segs[i - h->num_ops].stream;
    if (v <= top && top - v < span) used[(top - v) / 8] |= (unsigned char)(1u << ((top - v) % 8));
  }
  for (size_t k = 0, d = 0; k <= ndone; k++, d++) { /* vals[0] is the highest */
    while (used[d / 8] & (1u << (d % 8))) d++;
    vals[k] = top - d;
  }
  for (size_t k = 0; k < nslots; k++) {
    rank[k] = SIZE_MAX;
    st[k] = vals[0];
  }
  size_t n = 0;
  for (size_t i = 0; i < h->num_ops; i++)
    if (h->ops[i].kind == HOP_FREE_DONE && h->ops[i].slot < h->num_slots && rank[h->ops[i].slot] == SIZE_MAX)
      rank[h->ops[i].slot] = n++;
  /* the requests in the replay's order: the starting state's, then the ops' */
  size_t prev = SIZE_MAX;
  uint64_t prev_v = 0;
  for (size_t i = 0; i < h->num_blocks + h->num_ops; i++) {
    uint32_t slot;
    if (i < h->num_blocks) {
      if (!h->blocks[i].pending) continue;
      slot = h->blocks[i].slot;
    } else {
      if (h->ops[i - h->num_blocks].kind != HOP_FREE_REQ) continue;
      slot = h->ops[i - h->num_blocks].slot;
    }
    if (slot >= h->num_slots) continue;
    size_t rk = rank[slot];
    if (rk != SIZE_MAX) st[slot] = prev != SIZE_MAX && rk == prev + 1 ? prev_v : vals[n - rk];
    prev = rk;
    prev_v = st[slot];
  }
  free(used);
  free(vals);
  free(rank);
  *out = st;
  return TCUDA_SUCCESS;
}

void tc_tsnap_free(tc_tsnap *h) {
  if (!h) return;
  free(h->frames_req);
  free(h->frames_list);
  free(h->frame_lists);
  free(h->frame_lib);
  tc_arena_destroy(h->arena);
  free(h->ops);
  free(h->req_op);
  free(h->op_time_us);
  free(h->segs);
  free(h->blocks);
  free(h->pool_ids);
  memset(h, 0, sizeof *h);
}

tcuda_status tc_tsnap_load(const char *func, const void *data, size_t len, int device, const tc_tsnap_limits *lim,
                           tc_tsnap *h) {
  memset(h, 0, sizeof *h);
  if (device < 0) device = 0;
  tc_arena *ar = tc_arena_create();
  if (!ar) return oom(func);
  tc_pv *root = NULL;
  tc_pv_budget_init(&h->budget, lim ? lim->work_budget : 0, len);
  snprintf(h->where, sizeof h->where, "%s", func);
  tcuda_status s = tc_pv_parse(func, data, len, &h->budget, ar, &root);
  conv c = {.func = func, .h = h, .budget = &h->budget};
  h->device = device;
  tc_pv *const *traces = NULL, *const *ents = NULL;
  size_t ntr = 0, n = 0;
  if (!s && (!root || root->kind != TC_PV_DICT))
    s = tc_error(TCUDA_ERROR_PARSE, "%s: the snapshot is not a dict (torch.cuda.memory._snapshot() returns one)", func);
  if (!s && !tc_pv_as_seq(tc_pv_get(root, "device_traces"), &traces, &ntr))
    s = tc_error(TCUDA_ERROR_PARSE,
                 "%s: the snapshot has no 'device_traces' list: record it after "
                 "torch.cuda.memory._record_memory_history()",
                 func);
  if (!s) {
    h->num_devices = (int)(ntr > 1024 ? 1024 : ntr);
    if ((size_t)device >= ntr)
      s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: device %d: the snapshot has traces for %zu device%s", func,
                   device, ntr, ntr == 1 ? "" : "s");
  }
  if (!s && !tc_pv_as_seq(traces[device], &ents, &n))
    s = tc_error(TCUDA_ERROR_PARSE, "%s: device_traces[%d] is not a list", func, device);
  if (!s && n > MAX_TRACE_ENTRIES) s = tc_error(TCUDA_ERROR_PARSE, "%s: device_traces[%d] is too long", func, device);
  if (!s) s = read_settings(func, tc_pv_get(root, "allocator_settings"), h);
  for (size_t i = 0; !s && i < n; i++) {
    size_t skip = 0;
    s = read_entry(&c, i, ents, n, &skip);
    i += skip;
  }
  h->num_entries = n;
  if (!s) s = read_segments(&c, tc_pv_get(root, "segments"));
  if (!s) {
    route_pools(&c);
    place_blocks(h);
  }
  tc_u64map_free(&c.flists);
  tc_u64map_free(&c.live);
  tc_u64map_free(&c.segseen);
  tc_u64map_free(&c.blkseen);
  free(c.pending);
  free(c.psegs);
  if (!s && h->num_frames) h->arena = ar; /* the frame lists live there */
  else tc_arena_destroy(ar);
  if (s) tc_tsnap_free(h);
  return s;
}

tcuda_status tc_tsnap_load_file(const char *func, const char *path, int device, const tc_tsnap_limits *lim,
                                tc_tsnap *h) {
  memset(h, 0, sizeof *h);
  char where[320];
  tc_read_where(func, path, where, sizeof where);
  char *data;
  size_t len;
  tcuda_status s = tc_read_file(where, path, lim ? lim->max_input : 0, &data, &len);
  if (s) return s;
  s = tc_tsnap_load(where, data, len, device, lim, h);
  free(data);
  return s;
}
