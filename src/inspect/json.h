/* A growable string for the reports and replay output. On host OOM the
 * buffer turns "failed" and later appends do nothing, so callers check once
 * at the end instead of after every append. */
#ifndef TC_JSON_H
#define TC_JSON_H
#include <stdarg.h>
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
  b->p = NULL;
  b->len = b->cap = 0;
  return p;
}

static inline void tc_sbuf_free(tc_sbuf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}
#endif
