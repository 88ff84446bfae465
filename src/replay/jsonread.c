/* A JSON reader (RFC 8259) into the value tree (pyval.h), from untrusted
 * bytes. No recursion: open arrays and objects are marks on a value stack,
 * as in the unpickler, so depth costs no C stack.
 *
 * Integers that fit in int64 become INT, every other number FLOAT. Python's
 * json.dump writes NaN, Infinity and -Infinity for such floats, so those
 * are read too (as FLOAT); nothing else outside RFC 8259 is. Strings must be
 * valid UTF-8 without raw control characters; \u escapes must pair their
 * surrogates. Duplicate keys are all kept (tc_pv_get finds the last, as
 * Python does). A UTF-8 byte order mark at the start is skipped. */
#define _GNU_SOURCE /* strtod_l */
#include "pyval.h"
#include "core/error.h"
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct jr {
  const char *F;
  const unsigned char *d;
  size_t len, pos;
  tc_pv_build b; /* arena, node pool, value stack */
  size_t open[TC_PV_MAX_DEPTH]; /* stack heights at each open bracket */
  unsigned char obj[TC_PV_MAX_DEPTH];
  int depth;
  tc_pv *null_, *true_, *false_;
} jr;

static tcuda_status jerr(jr *r, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static tcuda_status jerr(jr *r, size_t at, const char *fmt, ...) {
  /* line and column (in characters) are only needed here: count them now */
  size_t line = 1, col = 1, i = 0;
  if (r->len >= 3 && !memcmp(r->d, "\xef\xbb\xbf", 3)) i = 3;
  for (; i < at && i < r->len; i++) {
    if (r->d[i] == '\n') line++, col = 1;
    else if ((r->d[i] & 0xc0) != 0x80) col++;
  }
  char what[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return tc_error(TCUDA_ERROR_PARSE, "%s: JSON line %zu column %zu: %s", r->F, line, col, what);
}

static tcuda_status oom(jr *r) {
  return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: host out of memory reading JSON", r->F);
}

/* the byte at `at` for a message: itself when printable ASCII */
static const char *shown(const jr *r, size_t at, char buf[8]) {
  if (at >= r->len) return "the end of the input";
  unsigned c = r->d[at];
  if (c > 0x20 && c < 0x7f) snprintf(buf, 8, "'%c'", c);
  else snprintf(buf, 8, "0x%02x", c);
  return buf;
}

static inline tc_pv *node(jr *r, tc_pv_kind kind) { return tc_pv_node(&r->b, kind); }

static inline tcuda_status push(jr *r, tc_pv *x) {
  tcuda_status s = tc_pv_spend(r->F, r->b.budget, 1);
  if (s) return s;
  return tc_pv_push(&r->b, x) ? TCUDA_SUCCESS : oom(r);
}

static void ws(jr *r) {
  while (r->pos < r->len) {
    unsigned char c = r->d[r->pos];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
    r->pos++;
  }
}

static int hex4(const unsigned char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = p[i], h = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (h < 0) return -1;
    v = v << 4 | h;
  }
  return v;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    o[0] = (char)(0xc0 | cp >> 6);
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | cp >> 12);
    o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | cp >> 18);
  o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
  o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* The string whose opening quote is at pos, pushed as a STR. */
static tcuda_status string(jr *r) {
  const unsigned char *d = r->d;
  size_t q = r->pos, start = q + 1, end = start;
  int escaped = 0;
  /* find the closing quote: escapes only shrink, so its span bounds the text */
  for (;;) {
    if (end >= r->len) return jerr(r, q, "the string is not terminated");
    unsigned char c = d[end];
    if (c == '"') break;
    if (c == '\\') {
      escaped = 1;
      end += 2;
      continue;
    }
    if (c < 0x20) return jerr(r, end, "control character 0x%02x in a string (it must be escaped)", c);
    end++;
  }
  if (end - start > UINT32_MAX - 1) return jerr(r, q, "a string of 4 GiB or more");
  tc_pv *v = node(r, TC_PV_STR);
  char *o = v ? tc_arena_alloc(r->b.ar, end - start + 1) : NULL; /* zeroed: NUL-terminated */
  if (!o) return oom(r);
  size_t n = 0, j = start;
  while (j < end) {
    size_t e = j;
    if (escaped) while (e < end && d[e] != '\\') e++;
    else e = end;
    size_t ok = tc_pv_utf8_valid(d + j, e - j);
    if (ok != e - j) return jerr(r, j + ok, "invalid UTF-8 in a string");
    memcpy(o + n, d + j, e - j);
    n += e - j;
    j = e;
    if (j >= end) break;
    /* an escape: the quote search put its second byte before end */
    unsigned char c = d[j + 1];
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *f = c ? strchr(from, c) : NULL;
    if (f) {
      o[n++] = to[f - from];
      j += 2;
      continue;
    }
    if (c != 'u') return jerr(r, j, "invalid escape '\\%c' in a string", c >= 0x20 && c < 0x7f ? c : '?');
    int cp = end - j >= 6 ? hex4(d + j + 2) : -1;
    if (cp < 0) return jerr(r, j, "a \\u escape needs four hex digits");
    if (cp >= 0xdc00 && cp <= 0xdfff) return jerr(r, j, "lone surrogate \\u%04x in a string", (unsigned)cp);
    if (cp >= 0xd800 && cp <= 0xdbff) {
      int lo = end - j >= 12 && d[j + 6] == '\\' && d[j + 7] == 'u' ? hex4(d + j + 8) : -1;
      if (lo < 0xdc00 || lo > 0xdfff) return jerr(r, j, "lone surrogate \\u%04x in a string", (unsigned)cp);
      cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      j += 6;
    }
    j += 6;
    n += put_utf8(o + n, (unsigned)cp);
  }
  v->u.s = o;
  v->n = (uint32_t)n;
  r->pos = end + 1;
  return push(r, v);
}

static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale;
static void c_locale_init(void) { c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0); }

/* '.' as the decimal point whatever the process's locale */
static double to_double(const char *s) {
  pthread_once(&c_locale_once, c_locale_init);
  return c_locale ? strtod_l(s, NULL, c_locale) : strtod(s, NULL);
}

static int digit(const jr *r) { return r->pos < r->len && r->d[r->pos] >= '0' && r->d[r->pos] <= '9'; }

static tcuda_status number(jr *r) {
  size_t st = r->pos;
  int neg = 0, is_float = 0, over = 0;
  if (r->d[r->pos] == '-') {
    neg = 1;
    r->pos++;
  }
  if (!digit(r)) return jerr(r, st, "invalid number");
  uint64_t mag = 0;
  if (r->d[r->pos] == '0') r->pos++; /* no leading zeros: what follows is not part of it */
  else
    for (; digit(r); r->pos++) {
      unsigned dg = r->d[r->pos] - '0';
      if (mag > (UINT64_MAX - dg) / 10) over = 1;
      else mag = mag * 10 + dg;
    }
  if (r->pos < r->len && r->d[r->pos] == '.') {
    is_float = 1;
    r->pos++;
    if (!digit(r)) return jerr(r, r->pos, "a digit must follow the decimal point");
    while (digit(r)) r->pos++;
  }
  if (r->pos < r->len && (r->d[r->pos] == 'e' || r->d[r->pos] == 'E')) {
    is_float = 1;
    r->pos++;
    if (r->pos < r->len && (r->d[r->pos] == '+' || r->d[r->pos] == '-')) r->pos++;
    if (!digit(r)) return jerr(r, r->pos, "a digit must follow the exponent mark");
    while (digit(r)) r->pos++;
  }
  const uint64_t lim = (uint64_t)INT64_MAX + (neg ? 1 : 0);
  if (!is_float && !over && mag <= lim) {
    tc_pv *v = node(r, TC_PV_INT);
    if (v) v->u.i = !neg ? (int64_t)mag : mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    return push(r, v);
  }
  size_t n = r->pos - st;
  char small[128], *buf = n < sizeof small ? small : malloc(n + 1);
  if (!buf) return oom(r);
  memcpy(buf, r->d + st, n);
  buf[n] = 0;
  tc_pv *v = node(r, TC_PV_FLOAT);
  if (v) v->u.f = to_double(buf); /* out of range: +-inf or 0, as Python's float() */
  if (buf != small) free(buf);
  return push(r, v);
}

/* true, false, null, NaN, Infinity, -Infinity */
static tcuda_status literal(jr *r) {
  static const struct { const char *w; tc_pv_kind k; int i; double f; } lits[] = {
      {"true", TC_PV_BOOL, 1, 0}, {"false", TC_PV_BOOL, 0, 0}, {"null", TC_PV_NONE, 0, 0},
      {"NaN", TC_PV_FLOAT, 0, NAN}, {"Infinity", TC_PV_FLOAT, 0, INFINITY}, {"-Infinity", TC_PV_FLOAT, 0, -INFINITY},
  };
  for (size_t i = 0; i < sizeof lits / sizeof *lits; i++) {
    size_t n = strlen(lits[i].w);
    if (r->len - r->pos < n || memcmp(r->d + r->pos, lits[i].w, n)) continue;
    r->pos += n;
    tc_pv **shared = i == 0 ? &r->true_ : i == 1 ? &r->false_ : i == 2 ? &r->null_ : NULL;
    if (shared && *shared) return push(r, *shared);
    tc_pv *v = node(r, lits[i].k);
    if (!v) return oom(r);
    if (lits[i].k == TC_PV_FLOAT) v->u.f = lits[i].f;
    else v->u.i = lits[i].i;
    if (shared) *shared = v;
    return push(r, v);
  }
  char b[8];
  return jerr(r, r->pos, "unexpected %s where a value is expected", shown(r, r->pos, b));
}

/* an object's key and its ':' */
static tcuda_status key(jr *r) {
  ws(r);
  char b[8];
  if (r->pos >= r->len || r->d[r->pos] != '"')
    return jerr(r, r->pos, "expected a string key, found %s", shown(r, r->pos, b));
  tcuda_status s = string(r);
  if (s) return s;
  ws(r);
  if (r->pos >= r->len || r->d[r->pos] != ':') return jerr(r, r->pos, "expected ':', found %s", shown(r, r->pos, b));
  r->pos++;
  return TCUDA_SUCCESS;
}

/* the innermost array or object is complete: it replaces its items on the stack */
static tcuda_status close_(jr *r) {
  int obj = r->obj[--r->depth];
  size_t base = r->open[r->depth], k = r->b.sn - base, per = obj ? 2 : 1;
  if (k / per > UINT32_MAX) return jerr(r, r->pos, "a container of 2^32 items or more");
  tc_pv *v = node(r, obj ? TC_PV_DICT : TC_PV_LIST);
  if (!v || (obj && !tc_pv_track_dict(&r->b, v))) return oom(r);
  if (k) {
    v->u.items = obj ? tc_pv_dict_items(r->b.ar, k) : tc_arena_alloc(r->b.ar, k * sizeof *v->u.items);
    if (!v->u.items) return oom(r);
    memcpy(v->u.items, r->b.stack + base, k * sizeof *v->u.items);
  }
  v->n = (uint32_t)(k / per);
  r->b.sn = base;
  return push(r, v);
}

static tcuda_status run(jr *r, tc_pv **out) {
  tcuda_status s;
  char b[8];
  if (r->len >= 3 && !memcmp(r->d, "\xef\xbb\xbf", 3)) r->pos = 3;
  for (;;) {
    /* a value */
    ws(r);
    if (r->pos >= r->len) return jerr(r, r->pos, "the input ends where a value is expected");
    unsigned char c = r->d[r->pos];
    if (c == '{' || c == '[') {
      if (r->depth == TC_PV_MAX_DEPTH) return jerr(r, r->pos, "nesting deeper than %d levels", TC_PV_MAX_DEPTH);
      r->open[r->depth] = r->b.sn;
      r->obj[r->depth++] = c == '{';
      r->pos++;
      ws(r);
      if (r->pos < r->len && r->d[r->pos] == (c == '{' ? '}' : ']')) {
        r->pos++;
        if ((s = close_(r))) return s;
      } else {
        if (c == '{' && (s = key(r))) return s;
        continue;
      }
    } else if (c == '"') {
      if ((s = string(r))) return s;
    } else if (c == '-' && r->pos + 1 < r->len && r->d[r->pos + 1] == 'I') {
      if ((s = literal(r))) return s;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      if ((s = number(r))) return s;
    } else if ((s = literal(r))) return s;
    /* after a value: the separator or the end of its container */
    for (;;) {
      ws(r);
      if (!r->depth) {
        if (r->pos != r->len) return jerr(r, r->pos, "unexpected %s after the JSON value", shown(r, r->pos, b));
        *out = r->b.stack[0];
        return tc_pv_index_dicts(r->F, &r->b);
      }
      int obj = r->obj[r->depth - 1];
      if (r->pos >= r->len) return jerr(r, r->pos, "the input ends inside an %s", obj ? "object" : "array");
      c = r->d[r->pos];
      if (c == ',') {
        r->pos++;
        if (obj && (s = key(r))) return s;
        break;
      }
      if (c != (obj ? '}' : ']'))
        return jerr(r, r->pos, "expected ',' or '%c', found %s", obj ? '}' : ']', shown(r, r->pos, b));
      r->pos++;
      if ((s = close_(r))) return s;
    }
  }
}

tcuda_status tc_pv_json(const char *func, const void *data, size_t len, tc_pv_budget *budget, tc_arena *ar,
                        tc_pv **out) {
  const char *F = func ? func : "tc_pv_json";
  tcuda_status s = tc_pv_entry_check(F, data, len, ar, out);
  if (s) return s;
  jr *r = calloc(1, sizeof *r);
  if (!r) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: host out of memory reading JSON", F);
  r->F = F;
  r->d = data;
  r->len = len;
  tc_pv_budget own;
  tc_pv *top = NULL;
  s = tc_pv_build_start(&r->b, ar, budget, &own, len) ? TCUDA_SUCCESS : oom(r);
  if (!s) s = run(r, &top);
  if (!s) *out = top;
  tc_pv_build_free(&r->b);
  free(r);
  return s;
}
