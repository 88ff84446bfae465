/* The value tree's arena and its accessors. The readers are unpickle.c and
 * jsonread.c; pyparse.c picks one. */
#include "pyval.h"
#include "core/error.h"
#include <stdlib.h>
#include <string.h>

/* ---- arena: chunks from calloc (so memory comes zeroed), bumped, freed
 * together. Chunks double in size up to a cap, so a big document costs few
 * calls to the system allocator. */

#define ARENA_FIRST ((size_t)64 << 10)
#define ARENA_MAX ((size_t)32 << 20)

typedef struct chunk {
  struct chunk *next;
  size_t pad_; /* keeps the data that follows 16-byte aligned */
} chunk;

struct tc_arena {
  unsigned char *cur, *end; /* free part of the newest normal chunk */
  chunk *chunks;
  size_t next_size;
};

tc_arena *tc_arena_create(void) {
  tc_arena *ar = calloc(1, sizeof *ar);
  if (ar) ar->next_size = ARENA_FIRST;
  return ar;
}

void tc_arena_destroy(tc_arena *ar) {
  if (!ar) return;
  for (chunk *c = ar->chunks, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  free(ar);
}

static void *chunk_new(tc_arena *ar, size_t size) {
  _Static_assert(sizeof(chunk) % 16 == 0, "chunk header keeps 16-byte alignment");
  if (size > SIZE_MAX - sizeof(chunk)) return NULL;
  chunk *c = calloc(1, sizeof(chunk) + size);
  if (!c) return NULL;
  c->next = ar->chunks;
  ar->chunks = c;
  return c + 1;
}

void *tc_arena_alloc(tc_arena *ar, size_t n) {
  if (n > SIZE_MAX / 2) return NULL;
  n = n ? (n + 15) & ~(size_t)15 : 16;
  if ((size_t)(ar->end - ar->cur) >= n) {
    void *p = ar->cur;
    ar->cur += n;
    return p;
  }
  /* a big block gets a chunk of its own, leaving the current one in use */
  if (n > ar->next_size / 4) return chunk_new(ar, n);
  unsigned char *p = chunk_new(ar, ar->next_size);
  if (!p) return NULL;
  ar->cur = p + n;
  ar->end = p + ar->next_size;
  if (ar->next_size < ARENA_MAX) ar->next_size *= 2;
  return p;
}

/* ---- UTF-8 ---- */

size_t tc_pv_utf8_valid(const unsigned char *p, size_t n) {
  size_t i = 0;
  while (i < n) {
    /* ASCII runs, eight bytes at a time */
    while (i + 8 <= n) {
      uint64_t w;
      memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    unsigned c = p[i];
    if (c < 0x80) { i++; continue; }
    size_t k;
    unsigned lo = 0x80, hi = 0xbf; /* the range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) k = 2;
    else if (c >= 0xe0 && c <= 0xef) {
      k = 3;
      if (c == 0xe0) lo = 0xa0;      /* overlong */
      else if (c == 0xed) hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
      k = 4;
      if (c == 0xf0) lo = 0x90;      /* overlong */
      else if (c == 0xf4) hi = 0x8f; /* past U+10FFFF */
    } else return i;
    if (n - i < k || p[i + 1] < lo || p[i + 1] > hi) return i;
    for (size_t j = 2; j < k; j++)
      if ((p[i + j] & 0xc0) != 0x80) return i;
    i += k;
  }
  return n;
}

/* ---- sniffing ---- */

int tc_pv_stack_grow(tc_pv_build *b) {
  size_t cap = b->scap ? b->scap * 2 : 256;
  tc_pv **s = realloc(b->stack, cap * sizeof *s);
  if (!s) return 0;
  b->stack = s;
  b->scap = cap;
  return 1;
}

/* ---- accessors ---- */

const tc_pv *tc_pv_get(const tc_pv *v, const char *key) {
  if (!v || v->kind != TC_PV_DICT || !key) return NULL;
  size_t kn = strlen(key);
  for (size_t i = v->n; i-- > 0;) { /* from the end: the last duplicate wins */
    const tc_pv *k = v->u.items[2 * i];
    if (k->kind == TC_PV_STR && k->n == kn && !memcmp(k->u.s, key, kn)) return v->u.items[2 * i + 1];
  }
  return NULL;
}

int tc_pv_as_int(const tc_pv *v, int64_t *out) {
  if (!v || (v->kind != TC_PV_INT && v->kind != TC_PV_BOOL)) return 0;
  *out = v->u.i;
  return 1;
}

int tc_pv_as_double(const tc_pv *v, double *out) {
  if (!v) return 0;
  if (v->kind == TC_PV_FLOAT) *out = v->u.f;
  else if (v->kind == TC_PV_INT || v->kind == TC_PV_BOOL) *out = (double)v->u.i;
  else return 0;
  return 1;
}

const char *tc_pv_as_str(const tc_pv *v) { return v && v->kind == TC_PV_STR ? v->u.s : NULL; }

int tc_pv_as_seq(const tc_pv *v, tc_pv *const **items, size_t *n) {
  if (!v || (v->kind != TC_PV_LIST && v->kind != TC_PV_TUPLE)) return 0;
  *items = v->u.items;
  *n = v->n;
  return 1;
}
