/* The one string buffer and JSON writer of the library and the CLI: the
 * snapshot document (snapwrite.c), the reports (report.c), replay's output
 * (tracereplay.c) and `tcuda info --json` (tools/) all escape and print values
 * here, so their JSON cannot drift apart. Header-only, but for
 * tc_utf8_len (src/core/error.c), which the CLI gets from the static
 * library it links.
 *
 * Text is emitted as valid UTF-8 whatever the input (symbol and file
 * names, argv[0] and environment values are bytes): valid characters are
 * kept, and each byte that starts no valid character becomes U+FFFD, so
 * json.loads and pickle's decoder always read the result.
 *
 * tc_sbuf is a growable string. On host OOM the buffer turns "failed" and
 * later appends do nothing, so callers check once at the end instead of
 * after every append. */
#ifndef TC_JSON_H
#define TC_JSON_H
#include "core/error.h"
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tc_sbuf {
  char *p;
  size_t len, cap;
  int failed;
} tc_sbuf;

static inline int tc_sbuf_reserve(tc_sbuf *b, size_t extra) {
  if (b->failed) return 0;
  if (b->len + extra + 1 <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char *np = (char *)realloc(b->p, cap);
  if (!np) { b->failed = 1; return 0; }
  b->p = np;
  b->cap = cap;
  return 1;
}

static inline void tc_sbuf_put(tc_sbuf *b, const char *s, size_t n) {
  if (!tc_sbuf_reserve(b, n)) return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

static inline void tc_sbuf_puts(tc_sbuf *b, const char *s) { tc_sbuf_put(b, s, strlen(s)); }

static inline void tc_sbuf_printf(tc_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void tc_sbuf_printf(tc_sbuf *b, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) { b->failed = 1; return; }
  if ((size_t)n < sizeof tmp) { tc_sbuf_put(b, tmp, (size_t)n); return; }
  if (!tc_sbuf_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* The finished string (caller frees), or NULL after a failure. */
static inline char *tc_sbuf_take(tc_sbuf *b) {
  if (b->failed || !tc_sbuf_reserve(b, 0)) {
    free(b->p);
    b->p = NULL;
    return NULL;
  }
  char *p = b->p;
  p[b->len] = 0; /* an empty buffer was never terminated by a put */
  b->p = NULL;
  b->len = b->cap = 0;
  return p;
}

static inline void tc_sbuf_free(tc_sbuf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

/* ---- UTF-8 ---- */

#define TC_UTF8_REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */

/* The bytes that stand for the text at p (NUL-terminated) up to one
 * character: *used of them (at least 1) are consumed, and out receives the
 * character itself or U+FFFD for a byte that starts none. Returns how many
 * bytes went to out (1-4). */
static inline size_t tc_utf8_char(const unsigned char *p, char out[4], size_t *used) {
  int n = tc_utf8_len(p);
  if (n <= 0) {
    memcpy(out, TC_UTF8_REPLACEMENT, 3);
    *used = 1;
    return 3;
  }
  memcpy(out, p, (size_t)n);
  *used = (size_t)n;
  return (size_t)n;
}

/* s as valid UTF-8 (see tc_utf8_char), appended to b. */
static inline void tc_sbuf_put_utf8(tc_sbuf *b, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  while (*p) {
    const unsigned char *run = p;
    while (*p && *p < 0x80) p++;
    if (p > run) tc_sbuf_put(b, (const char *)run, (size_t)(p - run));
    if (!*p) break;
    char c[4];
    size_t used;
    tc_sbuf_put(b, c, tc_utf8_char(p, c, &used));
    p += used;
  }
}

/* The length of what tc_sbuf_put_utf8 appends for s. */
static inline size_t tc_utf8_fixed_len(const char *s) {
  size_t len = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p;) {
    if (*p < 0x80) { len++; p++; continue; }
    char c[4];
    size_t used;
    len += tc_utf8_char(p, c, &used);
    p += used;
  }
  return len;
}

/* ---- JSON values ---- */

/* An ASCII string byte written as it is: not '"', not '\\', not a control
 * byte. Bytes from 0x80 up are UTF-8 (see tc_json_escape_char). */
static inline int tc_json_plain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

/* The escape of one ASCII byte inside a string literal: itself when plain,
 * a backslash before '"' and '\\', \u00xx (lowercase hex) for control
 * bytes. Writes at most 6 bytes to out; returns how many. */
static inline size_t tc_json_escape_byte(unsigned char c, char out[6]) {
  static const char hex[] = "0123456789abcdef";
  if (c >= 0x20 && c != '"' && c != '\\') { out[0] = (char)c; return 1; }
  if (c == '"' || c == '\\') { out[0] = '\\'; out[1] = (char)c; return 2; }
  memcpy(out, "\\u00", 4);
  out[4] = hex[c >> 4];
  out[5] = hex[c & 15];
  return 6;
}

/* The JSON for the character at p (NUL-terminated) inside a string
 * literal: an escaped ASCII byte, a valid UTF-8 character as it is, or
 * U+FFFD for a byte that starts none. *used bytes of p are consumed;
 * returns how many bytes went to out. */
static inline size_t tc_json_escape_char(const unsigned char *p, char out[6], size_t *used) {
  if (*p < 0x80) {
    *used = 1;
    return tc_json_escape_byte(*p, out);
  }
  return tc_utf8_char(p, out, used);
}

/* s as a JSON string literal, quotes included. */
static inline void tc_json_str(tc_sbuf *b, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  tc_sbuf_put(b, "\"", 1);
  while (*p) {
    const unsigned char *run = p;
    while (*p && tc_json_plain(*p)) p++;
    if (p > run) tc_sbuf_put(b, (const char *)run, (size_t)(p - run));
    if (!*p) break;
    char e[6];
    size_t used;
    tc_sbuf_put(b, e, tc_json_escape_char(p, e, &used));
    p += used;
  }
  tc_sbuf_put(b, "\"", 1);
}

static inline void tc_json_i64(tc_sbuf *b, int64_t v) { tc_sbuf_printf(b, "%lld", (long long)v); }
static inline void tc_json_u64(tc_sbuf *b, uint64_t v) { tc_sbuf_printf(b, "%llu", (unsigned long long)v); }
/* %.17g reads back as the same double. A NaN or infinity would print as C
 * spells it, which JSON lacks; the only double written today
 * (garbage_collection_threshold) is checked to lie in (0, 1). */
static inline void tc_json_f64(tc_sbuf *b, double v) { tc_sbuf_printf(b, "%.17g", v); }
static inline void tc_json_bool(tc_sbuf *b, int v) { tc_sbuf_puts(b, v ? "true" : "false"); }
#endif
