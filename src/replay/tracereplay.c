/* Trace replay on a private allocator, on the simulated or the real device.
 *
 * The trace is parsed and validated in full first, so a bad line fails
 * before any memory is touched. Side streams are real CUDA streams on the
 * GPU (created on first use, as the trace format says) and distinct fake
 * keys in the simulation; the JSON prints the trace's stream numbers.
 *
 * The JSON goes to a sink as each checkpoint is taken, so memory follows
 * the allocator's state, not the length of the output; the string forms
 * use a sink that gathers it all. */
#include "alloc/alloc.h"
#include "backend_wrap.h"
#include "core/core.h"
#include "core/table.h"
#include "inspect/history.h"
#include "inspect/jsonwrite.h"
#include "inspect/report.h"
#include "readfile.h"
#include "trace.h"
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* every size the parser accepts is one tc_alloc_malloc takes (an OOM at
 * worst), so a parsed trace replays to the end */
_Static_assert(TC_TRACE_MAX_SIZE <= UINT64_MAX - TC_ROUND_LARGE, "trace sizes must not overflow the rounding");
#define TC_MAX_TRACE_DEVICES 64 /* device_traces slots a replay snapshot may name */

/* ---- the backend's hooks: log the segments cudaMalloc returns (GPU), or
 * place expandable reservations where torch's were (simulation) ---- */

typedef struct {
  uint64_t addr, size;
} rec_range;

typedef struct {
  FILE *log;
  int log_failed;
  tc_backend *sim;  /* with maps: the simulator that takes the bases */
  rec_range *maps;  /* recorded segment_map entries, in order */
  size_t nmaps, map_pos, cap_maps;
} rec_ctx;

static void rec_after_alloc(void *c, tcuda_status st, uint64_t addr, uint64_t size) {
  rec_ctx *r = c;
  if (st == TCUDA_SUCCESS && r->log &&
      fprintf(r->log, "0x%llx %llu\n", (unsigned long long)addr, (unsigned long long)size) < 0)
    r->log_failed = 1;
}
/* A new segment's first map is at its base, so the next recorded map is
 * where torch's reservation began. */
static tcuda_status rec_before_reserve(void *c, uint64_t size) {
  rec_ctx *r = c;
  (void)size;
  if (!r->sim) return TCUDA_SUCCESS;
  return tc_backend_sim_reserve_at(r->sim, r->map_pos < r->nmaps ? &r->maps[r->map_pos].addr : NULL,
                                   r->map_pos < r->nmaps);
}
static tcuda_status rec_before_map(void *c, uint64_t addr, uint64_t size) {
  rec_ctx *r = c;
  if (r->sim && r->map_pos < r->nmaps) {
    const rec_range *m = &r->maps[r->map_pos];
    if (m->addr != addr || m->size != size)
      return tc_error(TCUDA_ERROR_INVALID_STATE,
                      "replay diverged at map %zu: recorded 0x%llx (%llu bytes), the allocator mapped 0x%llx (%llu bytes)",
                      r->map_pos + 1, (unsigned long long)m->addr, (unsigned long long)m->size,
                      (unsigned long long)addr, (unsigned long long)size);
  }
  return TCUDA_SUCCESS;
}
static void rec_after_map(void *c, tcuda_status st, uint64_t addr, uint64_t size) {
  rec_ctx *r = c;
  (void)addr;
  (void)size;
  if (!st && r->sim && r->map_pos < r->nmaps) r->map_pos++;
}
static const tc_bwrap_hooks rec_hooks = {.after_alloc = rec_after_alloc, .before_reserve = rec_before_reserve,
                                         .before_map = rec_before_map, .after_map = rec_after_map};

/* File names and file contents are quoted in messages through this: control
 * bytes (terminal escapes) and bytes outside UTF-8 are shown as \xNN. */
typedef struct {
  char s[256];
} quoted;
static const char *q(quoted *b, const char *text) { return tc_printable(text, b->s, sizeof b->s); }

/* "ADDR SIZE" per line (decimal or 0x hex), '#' comments: the format of
 * addresses_file, here the recorded segment_map entries. */
static tcuda_status load_maps(const char *func, const char *path, rec_ctx *r) {
  quoted qp, ql;
  FILE *f = fopen(path, "r");
  if (!f) return tc_error(TCUDA_ERROR_IO, "%s: cannot open maps_file '%s': %s", func, q(&qp, path), strerror(errno));
  char line[512];
  size_t lineno = 0;
  tcuda_status st = TCUDA_SUCCESS;
  while (!st && fgets(line, sizeof line, f)) {
    lineno++;
    line[strcspn(line, "#\r\n")] = 0;
    char *p = line, *end;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) continue;
    unsigned long long v[2];
    int ok = 1;
    for (int k = 0; k < 2 && ok; k++) {
      while (*p == ' ' || *p == '\t') p++;
      errno = 0;
      v[k] = (*p >= '0' && *p <= '9') ? strtoull(p, &end, p[0] == '0' && (p[1] == 'x' || p[1] == 'X') ? 16 : 10) : 0;
      ok = *p >= '0' && *p <= '9' && !errno && end != p;
      if (ok) p = end;
    }
    while (*p == ' ' || *p == '\t') p++;
    if (!ok || *p || !v[1] || v[0] + v[1] < v[0]) {
      st = tc_error(TCUDA_ERROR_PARSE, "%s: maps_file %s:%zu: expected 'ADDR SIZE', got '%s'", func, q(&qp, path),
                    lineno, q(&ql, line));
    } else if (!tc_grow((void **)&r->maps, &r->cap_maps, r->nmaps + 1, sizeof *r->maps)) {
      st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
    }
    if (!st) r->maps[r->nmaps++] = (rec_range){v[0], v[1]};
  }
  if (!st && ferror(f)) st = tc_error(TCUDA_ERROR_IO, "%s: error reading maps_file '%s'", func, q(&qp, path));
  fclose(f);
  return st;
}

/* ---- replay ---- */

typedef tcuda_status (*tc_replay_sink)(void *user, const char *bytes, size_t n);

typedef struct {
  const char *func;
  const tcuda_replay_options_t *opt;
  const tc_trace *tr;
  int simulate, device;
  tc_backend *sim;     /* owned (simulate) */
  tc_bwrap wrap;       /* GPU with record_addresses, or sim with maps_file */
  rec_ctx rec;
  tc_alloc *a;
  tc_history *hist;    /* history_path: the recorder on a */
  uint64_t *keys;      /* stream number -> stream key */
  unsigned char *made; /* stream number -> key is valid */
  uint64_t *addr;      /* slot -> address (0: nothing to free) */
  tc_replay_sink write;
  void *user;
  int sink_failed;     /* the sink refused: its status goes back as it is */
  int guard_on;
  tcuda_device_guard_t guard;
} replay;

static int64_t map_stream(void *ctx, int64_t key) {
  const replay *r = ctx;
  for (uint32_t k = 0; k <= r->tr->max_stream; k++)
    if (r->made[k] && (int64_t)r->keys[k] == key) return k;
  return key;
}

static tcuda_status emit(replay *r, const char *p, size_t n) {
  tcuda_status s = r->write(r->user, p, n);
  if (!s) return TCUDA_SUCCESS;
  r->sink_failed = 1;
  if (s == TCUDA_ERROR_HOST_OUT_OF_MEMORY) return tc_error(s, "%s: out of host memory", r->func);
  return tc_error(s, "%s: the output callback returned %s", r->func, tcuda_status_name(s));
}

/* One element of the array; the '[' opens it with the first (an error
 * before any checkpoint then leaves no output at all). */
static tcuda_status checkpoint(replay *r, int first) {
  tcuda_memory_stats_t st;
  tc_alloc_get_stats(r->a, &st);
  tcuda_snapshot_t *snap = NULL;
  tcuda_status s = tc_alloc_snapshot(r->a, &snap);
  if (s) return s;
  char *sj = tc_report_stats_json(&st);
  char *gj = tc_report_snapshot_json(snap, map_stream, r);
  tc_snapshot_free(snap);
  if (!sj || !gj) {
    free(sj);
    free(gj);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", r->func);
  }
  const char *head = first ? "[\n{\"stats\": " : ",\n{\"stats\": ";
  const char *mid = ", \"segments\": ";
  if (!(s = emit(r, head, strlen(head))) && !(s = emit(r, sj, strlen(sj))) && !(s = emit(r, mid, strlen(mid))) &&
      !(s = emit(r, gj, strlen(gj))))
    s = emit(r, "}", 1);
  free(sj);
  free(gj);
  return s;
}

static tcuda_status stream_key(replay *r, uint32_t k, uint64_t *key) {
  if (r->made[k]) { *key = r->keys[k]; return TCUDA_SUCCESS; }
  if (r->simulate) {
    /* distinct, ascending with k, like pointers from successive creations */
    r->keys[k] = 0x7f0000000000ULL + (uint64_t)k * 0x1000;
  } else {
    cudaStream_t s = NULL;
    cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e != cudaSuccess) return tc_cuda_error(e, r->func, "cudaStreamCreateWithFlags");
    r->keys[k] = (uint64_t)(uintptr_t)s;
  }
  r->made[k] = 1;
  *key = r->keys[k];
  return TCUDA_SUCCESS;
}

/* An engine failure on a trace op: name the line, keep the status. */
static tcuda_status op_error(tcuda_status s, uint32_t line) {
  char msg[TC_ERRMSG_MAX - 64];
  snprintf(msg, sizeof msg, "%s", tcuda_last_error());
  return tc_error(s, "trace line %u: %s", line, msg);
}

static tcuda_status run_ops(replay *r) {
  int first = 1;
  for (size_t i = 0; i < r->tr->num_ops; i++) {
    const tc_trace_op *op = &r->tr->ops[i];
    tcuda_status s = TCUDA_SUCCESS;
    switch (op->kind) {
    case 'a': {
      uint64_t key = 0, p = 0;
      if ((s = stream_key(r, op->stream, &key))) return s;
      s = tc_alloc_malloc(r->a, op->size, key, &p);
      if (s == TCUDA_ERROR_OUT_OF_MEMORY) {
        /* counted in num_ooms; the handle stays empty */
        if (r->opt->on_oom) r->opt->on_oom(r->opt->on_oom_user, op->line, tcuda_last_error());
        tcuda_clear_error();
        s = TCUDA_SUCCESS;
        p = 0;
      }
      r->addr[op->slot] = p;
      break;
    }
    case 'f':
      if (r->addr[op->slot]) s = tc_alloc_free(r->a, r->addr[op->slot]);
      r->addr[op->slot] = 0;
      break;
    case 'c':
      s = checkpoint(r, first);
      first = 0;
      break;
    case 'e': s = tc_alloc_empty_cache(r->a); break;
    case 'r': tc_alloc_reset_peak(r->a); break;
    }
    if (s) return r->sink_failed ? s : op_error(s, op->line);
  }
  return TCUDA_SUCCESS;
}

/* The snapshot at the end of a replay, with the whole history, written to
 * path (JSON if it ends in ".json", else a memory_viz pickle). Streams go
 * through map (NULL: as they are). Shared with snapshot replays. */
tcuda_status tc_replay_write_history(const char *func, tc_alloc *a, tc_history *hist, int device,
                                     const tc_alloc_config *cfg, const char *conf_text, const char *path,
                                     int64_t (*map)(void *, int64_t), void *ctx) {
  tcuda_snapshot_t *snap = NULL;
  tcuda_status s = tc_alloc_snapshot(a, &snap); /* adds the "snapshot" entry, as torch */
  if (s) return s;
  tc_history_copy traces[TC_MAX_TRACE_DEVICES];
  memset(traces, 0, sizeof traces);
  int dev = device >= 0 && device < TC_MAX_TRACE_DEVICES ? device : 0;
  if ((s = tc_history_copy_take(hist, &traces[dev]))) {
    tc_snapshot_free(snap);
    return s;
  }
  for (size_t i = 0; i < snap->num_segments; i++) snap->segments[i].device = dev;
  tc_snapshot_doc doc = {.snap = snap, .num_devices = dev + 1, .traces = traces, .cfg = cfg,
                         .conf_text = conf_text ? conf_text : "", .seg_stream = map,
                         .trace_stream = map, .stream_ctx = ctx};
  size_t n = strlen(path);
  int json = n >= 5 && !strcmp(path + n - 5, ".json");
  s = tc_snapshot_doc_write(func, &doc, path, json);
  tc_history_copy_free(&traces[dev]);
  tc_snapshot_free(snap);
  return s;
}

static void replay_cleanup(replay *r) {
  if (r->a) tc_alloc_destroy(r->a);
  tc_history_destroy(r->hist);
  if (r->sim) tc_backend_sim_destroy(r->sim);
  if (!r->simulate && r->made) {
    for (uint32_t k = 1; k <= r->tr->max_stream; k++)
      if (r->made[k]) cudaStreamDestroy((cudaStream_t)(uintptr_t)r->keys[k]);
  }
  if (r->rec.log) fclose(r->rec.log);
  free(r->rec.maps);
  if (r->guard_on) tcuda_device_guard_end(&r->guard);
  free(r->keys);
  free(r->made);
  free(r->addr);
}

static tcuda_status check_options(const char *func, const tcuda_replay_options_t *o) {
  quoted qp;
  if (o->struct_size < sizeof(tcuda_replay_options_t))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: opt->struct_size %zu is not sizeof(tcuda_replay_options_t) (%zu)",
                    func, o->struct_size, sizeof(tcuda_replay_options_t));
  if (o->simulate != 0 && o->simulate != 1)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: simulate %d is not 0 or 1", func, o->simulate);
  if (o->va_mode != 0 && o->va_mode != 1)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: va_mode %d is not 0 (driver) or 1 (ascending)", func,
                    o->va_mode);
  if (!(o->memory_fraction >= 0.0 && o->memory_fraction <= 1.0))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: memory_fraction %g out of range (0~1)", func,
                    o->memory_fraction);
  if (o->history_path && !*o->history_path)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: history_path is empty", func);
  if (o->maps_file && !o->simulate)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: maps_file '%s' applies only with simulate = 1", func,
                    q(&qp, o->maps_file));
  if (o->simulate && o->record_addresses)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: record_addresses '%s' needs the real GPU (simulate is 1)", func, q(&qp, o->record_addresses));
  if (!o->simulate && (o->addresses_file || o->capacity || o->va_mode))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: addresses_file, capacity and va_mode apply only with simulate = 1", func);
  return TCUDA_SUCCESS;
}

static tcuda_status replay_run(const char *func, const tc_trace *tr, const tcuda_replay_options_t *o,
                               tc_replay_sink sink, void *user) {
  replay r;
  memset(&r, 0, sizeof r);
  r.func = func;
  r.opt = o;
  r.tr = tr;
  r.write = sink;
  r.user = user;
  r.simulate = o->simulate;
  r.device = o->simulate ? 0 : o->device;
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  char src[64];
  snprintf(src, sizeof src, "%s: config", func);
  tcuda_status s = tc_alloc_config_parse_named(src, o->config, &cfg);
  if (s) return s;
  r.keys = calloc((size_t)tr->max_stream + 1, sizeof *r.keys);
  r.made = calloc((size_t)tr->max_stream + 1, 1);
  r.addr = calloc(tr->num_slots ? tr->num_slots : 1, sizeof *r.addr);
  if (!r.keys || !r.made || !r.addr) {
    replay_cleanup(&r);
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  }
  r.keys[0] = 0;
  r.made[0] = 1;

  const tc_backend *be = NULL;
  uint64_t total = 0;
  if (o->simulate) {
    tc_sim_options so = {0};
    so.capacity = o->capacity ? o->capacity : TC_H200_CAPACITY;
    so.va = o->va_mode ? TC_SIM_VA_ASCENDING : TC_SIM_VA_DRIVER;
    so.addresses_path = o->addresses_file;
    /* the driver's initial layout differs when streams exist before the
     * first cudaMalloc, which is what happens when the trace's first
     * allocation is on a side stream */
    so.streams_before_first_malloc = tr->first_alloc_stream > 0;
    if ((s = tc_backend_sim_create(&so, &r.sim))) { replay_cleanup(&r); return s; }
    be = r.sim;
    total = so.capacity;
    if (o->maps_file) {
      r.rec.sim = r.sim;
      if ((s = load_maps(func, o->maps_file, &r.rec))) { replay_cleanup(&r); return s; }
      tc_bwrap_init(&r.wrap, r.sim, &rec_hooks, &r.rec);
      be = &r.wrap.be;
    }
  } else {
    if ((s = tc_lazy_init(func)) || (s = tc_resolve_device(func, &r.device))) { replay_cleanup(&r); return s; }
    if ((s = tcuda_device_guard_begin(&r.guard, r.device))) { replay_cleanup(&r); return s; }
    r.guard_on = 1;
    tcuda_device_properties_t p = TCUDA_DEVICE_PROPERTIES_INIT;
    if ((s = tcuda_get_device_properties(r.device, &p))) { replay_cleanup(&r); return s; }
    total = p.total_memory;
    be = tc_backend_cuda();
    if (o->record_addresses) {
      r.rec.log = fopen(o->record_addresses, "w");
      if (!r.rec.log) {
        quoted qp;
        s = tc_error(TCUDA_ERROR_IO, "%s: cannot write record_addresses '%s': %s", func, q(&qp, o->record_addresses),
                     strerror(errno));
        replay_cleanup(&r);
        return s;
      }
      tc_bwrap_init(&r.wrap, be, &rec_hooks, &r.rec);
      be = &r.wrap.be;
    }
  }
  if ((s = tc_alloc_create(r.device, be, &cfg, total, &r.a))) { replay_cleanup(&r); return s; }
  if (o->history_path) {
    if ((s = tc_history_create(0, 0, &r.hist))) { replay_cleanup(&r); return s; }
    tc_alloc_set_trace(r.a, tc_history_trace, r.hist);
  }
  if (o->memory_fraction > 0 && (s = tc_alloc_set_memory_fraction(r.a, o->memory_fraction))) {
    replay_cleanup(&r);
    return s;
  }
  s = run_ops(&r);
  if (!s && o->history_path)
    s = tc_replay_write_history(func, r.a, r.hist, r.device, &cfg, o->config, o->history_path, map_stream, &r);
  if (!s) {
    /* give the memory back before reporting, so a failure there shows */
    tc_alloc_destroy(r.a);
    r.a = NULL;
    if (r.rec.log) {
      int bad = r.rec.log_failed | (fclose(r.rec.log) != 0);
      r.rec.log = NULL;
      quoted qp;
      if (bad)
        s = tc_error(TCUDA_ERROR_IO, "%s: writing record_addresses '%s' failed", func, q(&qp, o->record_addresses));
    }
  }
  /* the array closes only when everything succeeded: output cut short by
   * a later error is never a complete document */
  if (!s) s = tr->num_checkpoints ? emit(&r, "\n]\n", 3) : emit(&r, "[]\n", 3);
  replay_cleanup(&r);
  return s;
}

static tcuda_status replay_text(const char *func, const char *text, size_t len, const tcuda_replay_options_t *opt,
                                tc_replay_sink sink, void *user) {
  tcuda_replay_options_t def = TCUDA_REPLAY_OPTIONS_INIT;
  const tcuda_replay_options_t *o = opt ? opt : &def;
  tcuda_status s = check_options(func, o);
  if (s) return s;
  tc_trace tr;
  if ((s = tc_trace_parse(text, len, &tr))) return s;
  s = replay_run(func, &tr, o, sink, user);
  tc_trace_free(&tr);
  return s;
}

/* The sink of the string forms: the whole output in one buffer. */
static tcuda_status gather(void *user, const char *p, size_t n) {
  tc_sbuf *b = user;
  tc_sbuf_put(b, p, n);
  return b->failed ? TCUDA_ERROR_HOST_OUT_OF_MEMORY : TCUDA_SUCCESS;
}

static tcuda_status gathered(const char *func, tcuda_status s, tc_sbuf *b, char **json_out) {
  if (!s && !(*json_out = tc_sbuf_take(b)))
    s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  tc_sbuf_free(b);
  return s;
}

/* The trace file's text into b (the trace is input: it is held whole),
 * at most the options' max_input_bytes. */
static tcuda_status read_trace(const char *func, const char *trace_path, const tcuda_replay_options_t *opt,
                               tc_sbuf *b) {
  char where[320];
  uint64_t cap = opt && opt->struct_size >= sizeof *opt ? opt->max_input_bytes : 0;
  char *data;
  size_t len;
  tcuda_status s = tc_read_file(tc_read_where(func, trace_path, where, sizeof where), trace_path, cap, &data, &len);
  if (s) return s;
  *b = (tc_sbuf){.p = data, .len = len, .cap = len + 1};
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_replay_string(const char *trace, const tcuda_replay_options_t *opt, char **json_out) {
  static const char *F = "tcuda_replay_string";
  TC_CHECK_ARG(F, json_out, "json_out");
  *json_out = NULL;
  TC_CHECK_ARG(F, trace, "trace");
  tc_sbuf out = {0};
  return gathered(F, replay_text(F, trace, strlen(trace), opt, gather, &out), &out, json_out);
}

tcuda_status tcuda_replay_file(const char *trace_path, const tcuda_replay_options_t *opt, char **json_out) {
  static const char *F = "tcuda_replay_file";
  TC_CHECK_ARG(F, json_out, "json_out");
  *json_out = NULL;
  TC_CHECK_ARG(F, trace_path, "trace_path");
  tc_sbuf text = {0}, out = {0};
  tcuda_status s = read_trace(F, trace_path, opt, &text);
  if (s) return s;
  s = replay_text(F, text.p ? text.p : "", text.len, opt, gather, &out);
  tc_sbuf_free(&text);
  return gathered(F, s, &out, json_out);
}

tcuda_status tcuda_replay_file_to(const char *trace_path, const tcuda_replay_options_t *opt,
                                  tcuda_status (*write_fn)(void *user, const char *bytes, size_t n), void *user) {
  static const char *F = "tcuda_replay_file_to";
  TC_CHECK_ARG(F, trace_path, "trace_path");
  TC_CHECK_ARG(F, write_fn, "write_fn");
  tc_sbuf text = {0};
  tcuda_status s = read_trace(F, trace_path, opt, &text);
  if (s) return s;
  s = replay_text(F, text.p ? text.p : "", text.len, opt, write_fn, user);
  tc_sbuf_free(&text);
  return s;
}
