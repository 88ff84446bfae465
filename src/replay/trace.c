/* Trace parser (format in trace.h). */
#include "trace.h"
#include "core/error.h"
#include <stdlib.h>
#include <string.h>

/* Live ids -> slot, open addressing with backward-shift deletion. */
typedef struct {
  uint64_t id;
  size_t slot;
  uint32_t line;
  int used;
} id_entry;

typedef struct {
  id_entry *t;
  size_t cap, n; /* cap is a power of 2 */
} id_map;

static size_t id_hash(uint64_t id, size_t cap) {
  id ^= id >> 33;
  id *= 0xff51afd7ed558ccdULL;
  id ^= id >> 33;
  return (size_t)id & (cap - 1);
}

static int id_map_grow(id_map *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  id_entry *t = calloc(cap, sizeof *t);
  if (!t) return 0;
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->t[i].used) continue;
    size_t j = id_hash(m->t[i].id, cap);
    while (t[j].used) j = (j + 1) & (cap - 1);
    t[j] = m->t[i];
  }
  free(m->t);
  m->t = t;
  m->cap = cap;
  return 1;
}

static id_entry *id_map_find(id_map *m, uint64_t id) {
  if (!m->cap) return NULL;
  for (size_t j = id_hash(id, m->cap);; j = (j + 1) & (m->cap - 1)) {
    if (!m->t[j].used) return NULL;
    if (m->t[j].id == id) return &m->t[j];
  }
}

/* The caller has checked that id is absent. */
static int id_map_put(id_map *m, uint64_t id, size_t slot, uint32_t line) {
  if ((m->n + 1) * 2 > m->cap && !id_map_grow(m)) return 0;
  size_t j = id_hash(id, m->cap);
  while (m->t[j].used) j = (j + 1) & (m->cap - 1);
  m->t[j] = (id_entry){id, slot, line, 1};
  m->n++;
  return 1;
}

static void id_map_del(id_map *m, id_entry *e) {
  size_t mask = m->cap - 1, i = (size_t)(e - m->t), j = i;
  m->t[i].used = 0;
  for (;;) {
    j = (j + 1) & mask;
    if (!m->t[j].used) break;
    size_t home = id_hash(m->t[j].id, m->cap);
    /* move j back into the hole at i unless its home lies in (i, j] */
    if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
      m->t[i] = m->t[j];
      m->t[j].used = 0;
      i = j;
    }
  }
  m->n--;
}

typedef struct {
  const char *s;
  size_t n;
} tok;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* Decimal, or hex with 0x. */
static int parse_u64(tok t, uint64_t *out) {
  uint64_t v = 0;
  size_t i = 0;
  int base = 10;
  if (t.n > 2 && t.s[0] == '0' && (t.s[1] == 'x' || t.s[1] == 'X')) { base = 16; i = 2; }
  if (i == t.n) return 0;
  for (; i < t.n; i++) {
    char c = t.s[i];
    unsigned d;
    if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
    else if (base == 16 && c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
    else if (base == 16 && c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
    else return 0;
    if (v > (UINT64_MAX - d) / (uint64_t)base) return 0;
    v = v * (uint64_t)base + d;
  }
  *out = v;
  return 1;
}

void tc_trace_free(tc_trace *t) {
  if (!t) return;
  free(t->ops);
  memset(t, 0, sizeof *t);
}

#define PERR(...) tc_error(TCUDA_ERROR_PARSE, __VA_ARGS__)

/* A field as it may be quoted in a message: the trace is untrusted text,
 * so control bytes (terminal escapes) and bytes outside UTF-8 are shown as
 * \xNN, and a long field is cut with "...". Fields hold no NUL (the line
 * was checked). */
static const char *shown(tok t, char out[64]) {
  char in[128];
  size_t n = t.n < sizeof in - 1 ? t.n : sizeof in - 1;
  memcpy(in, t.s, n);
  in[n] = 0;
  return tc_printable(in, out, 64);
}

static tcuda_status bad_number(uint32_t line, const char *what, tok t) {
  char q[64];
  return PERR("trace line %u: bad %s '%s' (expected a non-negative integer)", line, what, shown(t, q));
}

static tcuda_status parse_line(const char *s, size_t n, uint32_t line, tc_trace *tr, size_t *cap, id_map *live) {
  tok f[5];
  int nf = 0;
  /* a NUL anywhere, comments included: not a text trace (and a C string
   * copy of it would silently end there) */
  if (memchr(s, 0, n)) return PERR("trace line %u: NUL byte", line);
  for (size_t i = 0; i < n;) {
    if (s[i] == '#') break;
    if (is_space(s[i])) { i++; continue; }
    size_t b = i;
    while (i < n && !is_space(s[i]) && s[i] != '#') i++;
    if (nf == 5) return PERR("trace line %u: too many fields", line);
    f[nf++] = (tok){s + b, i - b};
  }
  if (!nf) return TCUDA_SUCCESS;
  if (f[0].n != 1 || !strchr("afcer", f[0].s[0])) {
    char q[64];
    return PERR("trace line %u: unknown op '%s' (expected a, f, c, e or r)", line, shown(f[0], q));
  }
  tc_trace_op op = {0};
  op.kind = f[0].s[0];
  op.line = line;
  switch (op.kind) {
  case 'a': {
    if (nf < 3 || nf > 4) return PERR("trace line %u: expected 'a ID SIZE [STREAM]'", line);
    uint64_t st = 0;
    if (!parse_u64(f[1], &op.id)) return bad_number(line, "id", f[1]);
    if (!parse_u64(f[2], &op.size)) return bad_number(line, "size", f[2]);
    if (op.size > TC_TRACE_MAX_SIZE)
      return PERR("trace line %u: size %llu out of range (at most %llu, 2^64 - 2 MiB - 1: larger sizes overflow "
                  "the allocator's rounding)",
                  line, (unsigned long long)op.size, (unsigned long long)TC_TRACE_MAX_SIZE);
    if (nf == 4 && !parse_u64(f[3], &st)) return bad_number(line, "stream", f[3]);
    if (st > TC_TRACE_MAX_STREAM)
      return PERR("trace line %u: stream %llu out of range (at most %d)", line, (unsigned long long)st,
                  TC_TRACE_MAX_STREAM);
    op.stream = (uint32_t)st;
    id_entry *e = id_map_find(live, op.id);
    if (e)
      return PERR("trace line %u: id %llu is already live (allocated at line %u)", line,
                  (unsigned long long)op.id, e->line);
    op.slot = tr->num_slots;
    if (!id_map_put(live, op.id, op.slot, line))
      return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "trace line %u: out of host memory", line);
    tr->num_slots++;
    if (op.stream > tr->max_stream) tr->max_stream = op.stream;
    if (op.size && tr->first_alloc_stream < 0) tr->first_alloc_stream = (int)op.stream;
    break;
  }
  case 'f': {
    if (nf != 2) return PERR("trace line %u: expected 'f ID'", line);
    if (!parse_u64(f[1], &op.id)) return bad_number(line, "id", f[1]);
    id_entry *e = id_map_find(live, op.id);
    if (!e) return PERR("trace line %u: free of unknown id %llu", line, (unsigned long long)op.id);
    op.slot = e->slot;
    id_map_del(live, e);
    break;
  }
  default:
    if (nf != 1) return PERR("trace line %u: '%c' takes no arguments", line, op.kind);
    if (op.kind == 'c') tr->num_checkpoints++;
  }
  if (tr->num_ops == *cap) {
    size_t nc = *cap ? *cap * 2 : 256;
    tc_trace_op *no = realloc(tr->ops, nc * sizeof *no);
    if (!no) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "trace line %u: out of host memory", line);
    tr->ops = no;
    *cap = nc;
  }
  tr->ops[tr->num_ops++] = op;
  return TCUDA_SUCCESS;
}

tcuda_status tc_trace_parse(const char *text, size_t len, tc_trace *out) {
  TC_CHECK_ARG("tc_trace_parse", out, "out");
  memset(out, 0, sizeof *out);
  TC_CHECK_ARG("tc_trace_parse", text || !len, "text");
  tc_trace tr = {0};
  tr.first_alloc_stream = -1;
  size_t cap = 0;
  id_map live = {0};
  tcuda_status st = TCUDA_SUCCESS;
  uint32_t line = 0;
  for (size_t i = 0; i < len;) {
    const char *nl = memchr(text + i, '\n', len - i);
    size_t end = nl ? (size_t)(nl - text) : len;
    if (line == UINT32_MAX) { st = PERR("trace: more than %u lines", UINT32_MAX - 1); break; }
    line++;
    st = parse_line(text + i, end - i, line, &tr, &cap, &live);
    if (st) break;
    i = end + 1;
  }
  free(live.t);
  if (st) {
    tc_trace_free(&tr);
    return st;
  }
  *out = tr;
  return TCUDA_SUCCESS;
}
