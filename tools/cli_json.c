/* The small JSON reader the subcommands read the library's documents back
 * with (cli_json.h): the library writes them, so the input is trusted to
 * be JSON, but a malformed one still fails cleanly. */
#include "cli_json.h"
#include <stdlib.h>
#include <string.h>

typedef struct { const char *p; int depth; } jrd;

void jv_free(jv *v) {
  for (size_t i = 0; i < v->n; i++) {
    jv_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->text);
}

static void skip_ws(jrd *r) { while (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r') r->p++; }

static unsigned hex4(const char *p, int *ok) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else { *ok = 0; return 0; }
  }
  return v;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 63)); o[2] = (char)(0x80 | (cp & 63));
    return 3;
  }
  o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 63));
  o[2] = (char)(0x80 | (cp >> 6 & 63)); o[3] = (char)(0x80 | (cp & 63));
  return 4;
}

/* A string at r->p (the opening quote), decoded; NULL if malformed. */
static char *read_string(jrd *r) {
  const char *p = r->p + 1, *q = p;
  while (*q && *q != '"') q += *q == '\\' && q[1] ? 2 : 1;
  if (*q != '"') return NULL;
  char *out = malloc((size_t)(q - p) + 1), *o = out; /* decoding never lengthens */
  if (!out) return NULL;
  int ok = 1;
  while (ok && p < q) {
    if (*p != '\\') { *o++ = *p++; continue; }
    char e = p[1];
    p += 2;
    switch (e) {
    case 'n': *o++ = '\n'; break;
    case 't': *o++ = '\t'; break;
    case 'r': *o++ = '\r'; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'u': {
      if (q - p < 4) { ok = 0; break; }
      unsigned cp = hex4(p, &ok);
      p += 4;
      if (cp >= 0xd800 && cp < 0xdc00 && q - p >= 6 && p[0] == '\\' && p[1] == 'u') {
        unsigned lo = hex4(p + 2, &ok);
        if (lo >= 0xdc00 && lo < 0xe000) { cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00); p += 6; }
      }
      if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd; /* a lone surrogate */
      o += put_utf8(o, cp);
      break;
    }
    default: *o++ = e; /* \" \\ \/ */
    }
  }
  if (!ok) { free(out); return NULL; }
  *o = 0;
  r->p = q + 1;
  return out;
}

static int read_value(jrd *r, jv *v);

static int read_items(jrd *r, jv *v, char close) {
  size_t cap = 0;
  r->p++;
  skip_ws(r);
  if (*r->p == close) { r->p++; return 1; }
  for (;;) {
    if (v->n == cap) {
      cap = cap ? cap * 2 : 8;
      jv *ni = realloc(v->items, cap * sizeof *ni);
      if (!ni) return 0;
      v->items = ni;
      if (close == '}') {
        char **nk = realloc(v->keys, cap * sizeof *nk);
        if (!nk) return 0;
        v->keys = nk;
      }
    }
    jv *it = &v->items[v->n];
    memset(it, 0, sizeof *it);
    if (close == '}') {
      skip_ws(r);
      char *k = *r->p == '"' ? read_string(r) : NULL;
      if (!k) return 0;
      v->keys[v->n] = k;
      skip_ws(r);
      if (*r->p++ != ':') { v->n++; return 0; }
    }
    v->n++;
    if (!read_value(r, it)) return 0;
    skip_ws(r);
    if (*r->p == ',') { r->p++; continue; }
    if (*r->p == close) { r->p++; return 1; }
    return 0;
  }
}

static int read_value(jrd *r, jv *v) {
  skip_ws(r);
  memset(v, 0, sizeof *v);
  char c = *r->p;
  if (c == '{' || c == '[') {
    if (++r->depth > 64) return 0;
    v->kind = c == '{' ? 'o' : 'a';
    int ok = read_items(r, v, c == '{' ? '}' : ']');
    r->depth--;
    return ok;
  }
  if (c == '"') {
    v->kind = 's';
    return (v->text = read_string(r)) != NULL;
  }
  if (c == '-' || (c >= '0' && c <= '9')) {
    const char *q = r->p;
    while (*q && strchr("+-.eE0123456789", *q)) q++;
    v->kind = 'n';
    if (!(v->text = strndup(r->p, (size_t)(q - r->p)))) return 0;
    r->p = q;
    return 1;
  }
  static const struct { const char *w; char k; } lits[] = {{"true", 't'}, {"false", 'f'}, {"null", 'z'}};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(lits[i].w);
    if (!strncmp(r->p, lits[i].w, n)) { r->p += n; v->kind = lits[i].k; return 1; }
  }
  return 0;
}

int jv_parse(const char *text, jv *v) {
  jrd r = {text, 0};
  return read_value(&r, v);
}

const jv *jv_get(const jv *o, const char *key) {
  if (!o || o->kind != 'o') return NULL;
  for (size_t i = 0; i < o->n; i++)
    if (!strcmp(o->keys[i], key)) return &o->items[i];
  return NULL;
}
int jv_is_num(const jv *v) { return v && v->kind == 'n'; }
double jv_num(const jv *v) { return jv_is_num(v) ? strtod(v->text, NULL) : 0; }
unsigned long long jv_u64(const jv *v) { return jv_is_num(v) && v->text[0] != '-' ? strtoull(v->text, NULL, 10) : 0; }
long long jv_i64(const jv *v) { return jv_is_num(v) ? strtoll(v->text, NULL, 10) : 0; }
const char *jv_str(const jv *v) { return v && v->kind == 's' ? v->text : ""; }
