/* Trace parser (format in trace.h). */
#include "trace.h"
#include "core/error.h"
#include "core/table.h"
#include <stdlib.h>
#include <string.h>

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

static tcuda_status parse_line(const char *s, size_t n, uint32_t line, tc_trace *tr, size_t *cap, tc_u64map *live) {
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
    const uint64_t *at = tc_u64map_get(live, op.id); /* live id -> index of its 'a' op */
    if (at)
      return PERR("trace line %u: id %llu is already live (allocated at line %u)", line,
                  (unsigned long long)op.id, tr->ops[*at].line);
    op.slot = tr->num_slots;
    if (!tc_u64map_put(live, op.id, tr->num_ops))
      return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "trace line %u: out of host memory", line);
    tr->num_slots++;
    if (op.stream > tr->max_stream) tr->max_stream = op.stream;
    if (op.size && tr->first_alloc_stream < 0) tr->first_alloc_stream = (int)op.stream;
    break;
  }
  case 'f': {
    if (nf != 2) return PERR("trace line %u: expected 'f ID'", line);
    if (!parse_u64(f[1], &op.id)) return bad_number(line, "id", f[1]);
    const uint64_t *at = tc_u64map_get(live, op.id);
    if (!at) return PERR("trace line %u: free of unknown id %llu", line, (unsigned long long)op.id);
    op.slot = tr->ops[*at].slot;
    tc_u64map_del(live, op.id);
    break;
  }
  default:
    if (nf != 1) return PERR("trace line %u: '%c' takes no arguments", line, op.kind);
    if (op.kind == 'c') tr->num_checkpoints++;
  }
  if (!tc_grow((void **)&tr->ops, cap, tr->num_ops + 1, sizeof *tr->ops))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "trace line %u: out of host memory", line);
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
  tc_u64map live = {0};
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
  tc_u64map_free(&live);
  if (st) {
    tc_trace_free(&tr);
    return st;
  }
  *out = tr;
  return TCUDA_SUCCESS;
}
