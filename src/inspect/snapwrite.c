/* The snapshot document as a pickle (protocol 4) or as JSON.
 *
 * The pickle uses only opcodes that the unpickler of torch's MemoryViz
 * viewer decodes: PROTO, EMPTY_DICT, EMPTY_LIST, MARK, SETITEMS,
 * APPENDS, BININT/BININT1/BININT2, LONG1, BINFLOAT, SHORT_BINUNICODE,
 * BINUNICODE, NEWTRUE/NEWFALSE, NONE, TUPLE2, BINPUT/LONG_BINPUT,
 * BINGET/LONG_BINGET, STOP. Stacks repeat a lot, so each distinct stack and
 * frame is written once and referenced through the memo afterwards.
 * Symbols are looked up here, at write time, never on the allocation path. */
#define _GNU_SOURCE
#include "history.h"
#include "core/error.h"
#include "core/table.h"
#include "jsonwrite.h"
#include "outfile.h"
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- emitter: one interface, two encodings ---- */

typedef struct {
  tc_sbuf b;
  int json;
  uint32_t memo;     /* next memo index (pickle) */
  int depth;
  int first[64];     /* json: no comma needed yet at this depth */
  int after_key;     /* json: the next value follows a key */
} em;

static void put_u8(em *e, uint8_t v) { tc_sbuf_put(&e->b, (const char *)&v, 1); }
static void put_le(em *e, uint64_t v, int n) {
  char c[8];
  for (int i = 0; i < n; i++) c[i] = (char)(v >> (8 * i));
  tc_sbuf_put(&e->b, c, (size_t)n);
}

/* json: the separator before a value or key */
static void sep(em *e) {
  if (!e->json) return;
  if (e->after_key) { e->after_key = 0; return; }
  if (e->depth > 0 && e->depth < 64) {
    if (!e->first[e->depth]) tc_sbuf_puts(&e->b, ", ");
    e->first[e->depth] = 0;
  }
}

static void open_(em *e, int dict) {
  sep(e);
  if (e->json) tc_sbuf_puts(&e->b, dict ? "{" : "[");
  else {
    put_u8(e, dict ? '}' : ']');
    put_u8(e, '(');
  }
  e->depth++;
  if (e->depth < 64) e->first[e->depth] = 1;
}
static void close_(em *e, int dict) {
  e->depth--;
  if (e->json) tc_sbuf_puts(&e->b, dict ? "}" : "]");
  else put_u8(e, dict ? 'u' : 'e');
}

/* Strings are UTF-8 for pickle's *UNICODE opcodes (the unpickler refuses
 * anything else); symbol and file names are bytes, so each byte that
 * starts no valid character becomes U+FFFD, as in the JSON. */
static void str(em *e, const char *s) {
  sep(e);
  if (e->json) { tc_json_str(&e->b, s); return; }
  size_t n = tc_utf8_fixed_len(s);
  if (n < 256) {
    put_u8(e, 0x8c); /* SHORT_BINUNICODE */
    put_u8(e, (uint8_t)n);
  } else {
    put_u8(e, 'X'); /* BINUNICODE */
    put_le(e, n, 4);
  }
  tc_sbuf_put_utf8(&e->b, s);
}
static void key(em *e, const char *k) {
  str(e, k);
  if (e->json) {
    tc_sbuf_puts(&e->b, ": ");
    e->after_key = 1;
  }
}

static void i64(em *e, int64_t v) {
  sep(e);
  if (e->json) { tc_json_i64(&e->b, v); return; }
  if (v >= 0 && v < 256) { put_u8(e, 'K'); put_u8(e, (uint8_t)v); }
  else if (v >= 0 && v < 65536) { put_u8(e, 'M'); put_le(e, (uint64_t)v, 2); }
  else if (v >= INT32_MIN && v <= INT32_MAX) { put_u8(e, 'J'); put_le(e, (uint64_t)v, 4); }
  else {
    /* LONG1: minimal little-endian two's complement */
    int n = 8;
    while (n > 1) {
      int64_t hi = v >> (8 * (n - 1) - 1); /* bits that must be pure sign */
      if (hi != 0 && hi != -1) break;
      n--;
    }
    put_u8(e, 0x8a);
    put_u8(e, (uint8_t)n);
    put_le(e, (uint64_t)v, n);
  }
}
static void u64(em *e, uint64_t v) {
  if (v <= (uint64_t)INT64_MAX) { i64(e, (int64_t)v); return; }
  sep(e);
  if (e->json) { tc_json_u64(&e->b, v); return; }
  put_u8(e, 0x8a); /* 9 bytes: the sign byte is 0 */
  put_u8(e, 9);
  put_le(e, v, 8);
  put_u8(e, 0);
}
static void f64(em *e, double v) {
  sep(e);
  if (e->json) { tc_json_f64(&e->b, v); return; }
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  put_u8(e, 'G'); /* BINFLOAT: big-endian */
  for (int i = 7; i >= 0; i--) put_u8(e, (uint8_t)(bits >> (8 * i)));
}
static void boolean(em *e, int v) {
  sep(e);
  if (e->json) tc_json_bool(&e->b, v);
  else put_u8(e, v ? 0x88 : 0x89);
}
static void pair(em *e, uint64_t a, uint64_t b) {
  if (e->json) {
    open_(e, 0);
    u64(e, a);
    u64(e, b);
    close_(e, 0);
    return;
  }
  sep(e);
  u64(e, a);
  u64(e, b);
  put_u8(e, 0x86); /* TUPLE2 */
}
/* pickle: remember the object just opened; returns its memo index */
static uint32_t memo_put(em *e) {
  uint32_t id = e->memo++;
  if (id < 256) { put_u8(e, 'q'); put_u8(e, (uint8_t)id); }
  else { put_u8(e, 'r'); put_le(e, id, 4); }
  return id;
}
static void memo_get(em *e, uint32_t id) {
  sep(e);
  if (id < 256) { put_u8(e, 'h'); put_u8(e, (uint8_t)id); }
  else { put_u8(e, 'j'); put_le(e, id, 4); }
}

/* ---- stacks: symbolize each distinct pc once ---- */

typedef struct {
  void *pc;
  char name[192];
  char file[256];
  int64_t memo; /* pickle memo of its frame dict, -1 before written */
} frame_sym;

typedef struct {
  size_t at;     /* entry whose pcs this is (first seen) */
  uint8_t n;
  int64_t memo;  /* pickle memo of the frames list; -1 before */
  size_t json_off, json_len; /* json: the text written the first time */
  size_t next;   /* index+1 of the next stack with the same hash, 0: none */
} stack_ent;

typedef struct {
  frame_sym *f;
  size_t nf, capf;
  tc_u64map fh; /* pc -> index into f */
  stack_ent *s;
  size_t ns, caps;
  tc_u64map sh; /* stack_hash -> index+1 of the first stack with it */
  int oom;
} symtab;

static uint64_t mix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

static void symbolize(frame_sym *s) {
  Dl_info di;
  memset(&di, 0, sizeof di);
  if (dladdr(s->pc, &di) && di.dli_fname) {
    uintptr_t base = (uintptr_t)di.dli_fbase;
    if (di.dli_sname)
      snprintf(s->name, sizeof s->name, "%s+0x%lx", di.dli_sname,
               (unsigned long)((uintptr_t)s->pc - (uintptr_t)di.dli_saddr));
    else
      snprintf(s->name, sizeof s->name, "0x%lx", (unsigned long)((uintptr_t)s->pc - base));
    snprintf(s->file, sizeof s->file, "%s", di.dli_fname);
  } else {
    snprintf(s->name, sizeof s->name, "%p", s->pc);
    snprintf(s->file, sizeof s->file, "??");
  }
}

static frame_sym *sym_of(symtab *t, void *pc) {
  const uint64_t *at = tc_u64map_get(&t->fh, (uint64_t)(uintptr_t)pc);
  if (at) return &t->f[*at];
  if (!tc_grow((void **)&t->f, &t->capf, t->nf + 1, sizeof *t->f) ||
      !tc_u64map_put(&t->fh, (uint64_t)(uintptr_t)pc, t->nf)) {
    t->oom = 1;
    return NULL;
  }
  frame_sym *s = &t->f[t->nf++];
  s->pc = pc;
  s->memo = -1;
  symbolize(s);
  return s;
}

static uint64_t stack_hash(void *const *pcs, uint8_t n) {
  uint64_t h = n;
  for (uint8_t i = 0; i < n; i++) h = mix(h ^ (uint64_t)(uintptr_t)pcs[i]) + i;
  return h;
}

/* The stack entry for entry i of c (pcs compared by value: stacks whose
 * hashes collide are chained through next). */
static stack_ent *stack_of(symtab *t, const tc_history_copy *c, size_t i) {
  void *const *pcs = c->pcs + i * TC_HISTORY_DEPTH;
  uint8_t n = c->e[i].nframes;
  uint64_t h = stack_hash(pcs, n);
  const uint64_t *head = tc_u64map_get(&t->sh, h);
  size_t first = head ? (size_t)*head : 0;
  for (size_t k = first; k; k = t->s[k - 1].next) {
    stack_ent *s = &t->s[k - 1];
    if (s->n == n && !memcmp(c->pcs + s->at * TC_HISTORY_DEPTH, pcs, n * sizeof *pcs)) return s;
  }
  if (!tc_grow((void **)&t->s, &t->caps, t->ns + 1, sizeof *t->s) || !tc_u64map_put(&t->sh, h, t->ns + 1)) {
    t->oom = 1;
    return NULL;
  }
  stack_ent *s = &t->s[t->ns++];
  *s = (stack_ent){.at = i, .n = n, .memo = -1, .next = first};
  return s;
}

static void symtab_free(symtab *t) {
  free(t->f);
  tc_u64map_free(&t->fh);
  free(t->s);
  tc_u64map_free(&t->sh);
}

static void frame_dict(em *e, symtab *t, void *pc) {
  frame_sym *f = sym_of(t, pc);
  if (!f) return;
  if (!e->json && f->memo >= 0) { memo_get(e, (uint32_t)f->memo); return; }
  sep(e);
  if (!e->json) {
    put_u8(e, '}');
    f->memo = memo_put(e);
    put_u8(e, '(');
  } else {
    tc_sbuf_puts(&e->b, "{");
  }
  e->depth++;
  if (e->depth < 64) e->first[e->depth] = 1;
  key(e, "filename");
  str(e, f->file);
  key(e, "line");
  i64(e, 0); /* no debug info is read: name+offset locates the code */
  key(e, "name");
  str(e, f->name);
  close_(e, 1);
}

/* "frames" of entry i (the key is written by the caller). */
static void frames_value(em *e, symtab *t, const tc_history_copy *c, size_t i) {
  if (!c || !c->pcs || !c->e[i].nframes) {
    open_(e, 0);
    close_(e, 0);
    return;
  }
  stack_ent *s = stack_of(t, c, i);
  if (!s) return;
  if (!e->json && s->memo >= 0) { memo_get(e, (uint32_t)s->memo); return; }
  if (e->json && s->json_len) {
    sep(e);
    tc_sbuf_reserve(&e->b, s->json_len);
    if (!e->b.failed) tc_sbuf_put(&e->b, e->b.p + s->json_off, s->json_len);
    return;
  }
  sep(e);
  size_t off = e->b.len;
  if (!e->json) {
    put_u8(e, ']');
    s->memo = memo_put(e);
    put_u8(e, '(');
  } else {
    tc_sbuf_puts(&e->b, "[");
  }
  e->depth++;
  if (e->depth < 64) e->first[e->depth] = 1;
  void *const *pcs = c->pcs + i * TC_HISTORY_DEPTH;
  for (uint8_t k = 0; k < c->e[i].nframes; k++) frame_dict(e, t, pcs[k]);
  close_(e, 0);
  s = stack_of(t, c, i); /* the table may have moved */
  if (s && e->json) {
    s->json_off = off;
    s->json_len = e->b.len - off;
  }
}

/* ---- the document ---- */

static const char *action_str(unsigned a) {
  static const char *const n[] = {"alloc",         "free_requested", "free_completed",
                                  "segment_alloc", "segment_free",   "segment_map",
                                  "segment_unmap", "snapshot",       "oom"};
  return a < sizeof n / sizeof *n ? n[a] : "unknown";
}

static const char *state_str(tcuda_block_state s) {
  switch (s) {
  case TCUDA_BLOCK_ACTIVE_ALLOCATED: return "active_allocated";
  case TCUDA_BLOCK_ACTIVE_PENDING_FREE: return "active_pending_free";
  default: return "inactive";
  }
}

/* For each device, addr -> the entry with the stack that allocated a live
 * block (as torch's blocks carry it): the kept stacks the copy brings, or
 * for a copy without them the latest alloc entry of the trace. */
typedef struct {
  uint64_t addr;
  size_t idx;
} live_ent;

static int live_cmp(const void *a, const void *b) {
  const live_ent *x = a, *y = b;
  return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static live_ent *live_allocs(const tc_history_copy *c, size_t *n, int *oom) {
  *n = 0;
  /* the kept stacks of live blocks where the copy has them, else the trace's allocs */
  size_t lo = c && c->live_kept ? c->n : 0, hi = c ? (c->live_kept ? c->n + c->nlive : c->n) : 0;
  if (!c || !c->pcs || lo == hi) return NULL;
  size_t cnt = 0;
  for (size_t i = lo; i < hi; i++) cnt += c->e[i].action == TC_TRACE_ALLOC;
  live_ent *v = malloc((cnt ? cnt : 1) * sizeof *v);
  if (!v) { *oom = 1; return NULL; }
  size_t k = 0;
  for (size_t i = lo; i < hi; i++)
    if (c->e[i].action == TC_TRACE_ALLOC) v[k++] = (live_ent){c->e[i].addr, i};
  qsort(v, k, sizeof *v, live_cmp);
  *n = k;
  return v;
}

static long find_live(const live_ent *v, size_t n, uint64_t addr) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (v[mid].addr <= addr) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0 || v[lo - 1].addr != addr) return -1;
  /* the latest of equal addresses: scan the run for the largest idx */
  size_t best = lo - 1;
  for (size_t j = lo - 1; j > 0 && v[j - 1].addr == addr; j--)
    if (v[j - 1].idx > v[best].idx) best = j - 1;
  return (long)v[best].idx;
}

static void settings(em *e, const tc_snapshot_doc *d) {
  tc_alloc_config def;
  tc_alloc_config_default(&def);
  const tc_alloc_config *c = d->cfg ? d->cfg : &def;
  open_(e, 1);
  key(e, "PYTORCH_CUDA_ALLOC_CONF");
  str(e, d->conf_text ? d->conf_text : "");
  /* the keys torch reports, in its order (TC_ALLOC_CONFIG_KEYS) */
  const tc_config_key *k;
  for (int pos = 1; (k = tc_alloc_config_snapshot_key(pos)); pos++) {
    key(e, k->snapshot_key);
    if (k->kind == TC_KEY_FRACTION) {
      f64(e, tc_alloc_config_real(c, k));
    } else if (k->kind == TC_KEY_BOOL) {
      boolean(e, (int)tc_alloc_config_int(c, k, 0));
    } else if (k->kind != TC_KEY_DIVISIONS) {
      i64(e, tc_alloc_config_int(c, k, 0));
    } else {
      open_(e, 1); /* {"1": n, "2": n, ... "32768": n}: interval start in MB */
      for (int x = 0; x < TC_ROUNDUP_SLOTS; x++) {
        char kb[16];
        snprintf(kb, sizeof kb, "%u", 1u << x);
        key(e, kb);
        i64(e, tc_alloc_config_int(c, k, x));
      }
      close_(e, 1);
    }
  }
  close_(e, 1);
}

static void document(em *e, symtab *t, const tc_snapshot_doc *d) {
  if (!e->json) {
    put_u8(e, 0x80); /* PROTO 4 */
    put_u8(e, 4);
  }
  open_(e, 1);
  key(e, "segments");
  open_(e, 0);
  const tcuda_snapshot_t *s = d->snap;
  int cur_dev = -1;
  live_ent *live = NULL;
  size_t nlive = 0;
  for (size_t i = 0; s && i < s->num_segments && !t->oom; i++) {
    const tcuda_segment_info_t *g = &s->segments[i];
    const tc_history_copy *tr =
        g->device >= 0 && g->device < d->num_devices && d->traces ? &d->traces[g->device] : NULL;
    if (g->device != cur_dev) {
      free(live);
      live = live_allocs(tr, &nlive, &t->oom);
      cur_dev = g->device;
    }
    open_(e, 1);
    key(e, "device");
    i64(e, g->device);
    key(e, "address");
    u64(e, g->address);
    key(e, "total_size");
    u64(e, g->total_size);
    key(e, "allocated_size");
    u64(e, g->allocated_size);
    key(e, "active_size");
    u64(e, g->active_size);
    key(e, "requested_size");
    u64(e, g->requested_size);
    key(e, "stream");
    i64(e, d->seg_stream ? d->seg_stream(d->stream_ctx, g->stream) : g->stream);
    key(e, "segment_type");
    str(e, g->is_large ? "large" : "small");
    key(e, "segment_pool_id");
    pair(e, g->pool_id[0], g->pool_id[1]);
    key(e, "is_expandable");
    boolean(e, g->is_expandable);
    key(e, "frames");
    open_(e, 0);
    close_(e, 0);
    key(e, "blocks");
    open_(e, 0);
    for (size_t j = 0; j < g->num_blocks; j++) {
      const tcuda_block_info_t *b = &g->blocks[j];
      open_(e, 1);
      key(e, "address");
      u64(e, b->address);
      key(e, "size");
      u64(e, b->size);
      key(e, "requested_size");
      u64(e, b->requested_size);
      key(e, "state");
      str(e, state_str(b->state));
      key(e, "frames");
      long at = b->state != TCUDA_BLOCK_INACTIVE ? find_live(live, nlive, b->address) : -1;
      if (at >= 0) frames_value(e, t, tr, (size_t)at);
      else frames_value(e, t, NULL, 0);
      close_(e, 1);
    }
    close_(e, 0);
    close_(e, 1);
  }
  free(live);
  close_(e, 0);

  key(e, "device_traces");
  open_(e, 0);
  for (int dev = 0; dev < d->num_devices && !t->oom; dev++) {
    const tc_history_copy *c = d->traces ? &d->traces[dev] : NULL;
    open_(e, 0);
    for (size_t i = 0; c && i < c->n && !t->oom; i++) {
      const tc_history_entry *x = &c->e[i];
      open_(e, 1);
      key(e, "action");
      str(e, action_str(x->action));
      if (x->action == TC_TRACE_OOM) key(e, "device_free");
      else key(e, "addr");
      u64(e, x->addr);
      key(e, "size");
      u64(e, x->size);
      key(e, "stream");
      i64(e, d->trace_stream ? d->trace_stream(d->stream_ctx, (int64_t)x->stream) : (int64_t)x->stream);
      key(e, "time_us");
      i64(e, x->time_us);
      /* torch 2.11's defaults: no torch.compile region, no _set_memory_metadata */
      key(e, "compile_context");
      str(e, "N/A");
      key(e, "user_metadata");
      str(e, "");
      /* torch writes "frames" on a trace entry only when it carries a
       * context (src/inspect/history.c: entry_stack says which do) */
      if (x->framed) {
        key(e, "frames");
        frames_value(e, t, c, i);
      }
      close_(e, 1);
    }
    close_(e, 0);
  }
  close_(e, 0);

  key(e, "allocator_settings");
  settings(e, d);
  key(e, "external_annotations"); /* torch's profiler annotations: tcuda records none */
  open_(e, 0);
  close_(e, 0);
  close_(e, 1);
  if (e->json) tc_sbuf_puts(&e->b, "\n");
  else put_u8(e, '.'); /* STOP */
}

tcuda_status tc_snapshot_doc_encode(const char *func, const tc_snapshot_doc *doc, int json, char **out,
                                    size_t *len) {
  *out = NULL;
  *len = 0;
  em e;
  memset(&e, 0, sizeof e);
  e.json = json;
  symtab t;
  memset(&t, 0, sizeof t);
  document(&e, &t, doc);
  int oom = t.oom || e.b.failed;
  symtab_free(&t);
  size_t n = e.b.len;
  char *p = oom ? NULL : tc_sbuf_take(&e.b);
  if (!p) {
    tc_sbuf_free(&e.b);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory writing the snapshot", func);
  }
  *out = p;
  *len = n;
  return TCUDA_SUCCESS;
}

tcuda_status tc_snapshot_doc_write(const char *func, const tc_snapshot_doc *doc, const char *path, int json) {
  if (!path || !*path)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: path is %s", func, path ? "empty" : "NULL");
  char *buf;
  size_t len;
  tcuda_status s = tc_snapshot_doc_encode(func, doc, json, &buf, &len);
  if (s) return s;
  /* a temporary beside the target, renamed when complete: a failed write
   * never leaves a truncated snapshot under the requested name */
  char shown[256]; /* the name as it may be quoted: no terminal escapes */
  tc_printable(path, shown, sizeof shown);
  tc_outfile o;
  if (tc_outfile_open(&o, path) != 0) {
    s = tc_error(errno == ENOMEM ? TCUDA_ERROR_HOST_OUT_OF_MEMORY : TCUDA_ERROR_IO, "%s: cannot write '%s': %s", func,
                 shown, strerror(errno));
  } else {
    if (len) fwrite(buf, 1, len, o.f);
    if (tc_outfile_commit(&o) != 0)
      s = tc_error(TCUDA_ERROR_IO, "%s: writing '%s' failed: %s", func, shown, strerror(errno ? errno : EIO));
  }
  free(buf);
  return s;
}
