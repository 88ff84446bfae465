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

/* ---- the readers' shared state ---- */

int tc_pv_stack_grow(tc_pv_build *b) {
  size_t cap = b->scap ? b->scap * 2 : 256;
  tc_pv **s = realloc(b->stack, cap * sizeof *s);
  if (!s) return 0;
  b->stack = s;
  b->scap = cap;
  return 1;
}

tcuda_status tc_pv_entry_check(const char *F, const void *data, size_t len, tc_arena *ar, tc_pv **out) {
  TC_CHECK_ARG(F, out, "out");
  *out = NULL;
  TC_CHECK_ARG(F, ar, "ar");
  TC_CHECK_ARG(F, data || !len, "data");
  return TCUDA_SUCCESS;
}

int tc_pv_build_start(tc_pv_build *b, tc_arena *ar, tc_pv_budget *budget, tc_pv_budget *own, size_t len) {
  b->ar = ar;
  if (!budget) tc_pv_budget_init(budget = own, 0, len);
  b->budget = budget;
  return tc_pv_stack_grow(b);
}

void tc_pv_build_free(tc_pv_build *b) {
  free(b->stack);
  free(b->dicts);
  b->stack = NULL;
  b->dicts = NULL;
  b->sn = b->scap = b->nd = b->dcap = 0;
}

/* ---- the work budget ---- */

void tc_pv_budget_init(tc_pv_budget *b, uint64_t user, size_t len) {
  b->used = 0;
  if (user) {
    b->limit = user;
    return;
  }
  uint64_t per = (uint64_t)len > (UINT64_MAX - TC_PV_WORK_MIN) / TC_PV_WORK_PER_BYTE
                     ? UINT64_MAX - TC_PV_WORK_MIN
                     : (uint64_t)len * TC_PV_WORK_PER_BYTE;
  b->limit = per + TC_PV_WORK_MIN;
}

tcuda_status tc_pv_over_budget(const char *func, const tc_pv_budget *b) {
  return tc_error(TCUDA_ERROR_PARSE,
                  "%s: the input needs more work than its budget of %llu units (values, blocks and bytes made; "
                  "work_budget, --work-budget raises it)",
                  func, (unsigned long long)b->limit);
}

/* ---- dict indexes: each dict's STR keys sorted by their bytes, searched
 * by bisection. Sorting, not hashing, so that no choice of keys in a
 * hostile file can make a lookup slow. */

typedef struct dict_index {
  uint32_t n;     /* indexed pairs */
  uint32_t at[];  /* pair numbers, by key (bytes, then length), then by pair number */
} dict_index;

tc_pv **tc_pv_dict_items(tc_arena *ar, size_t slots) {
  if (slots > SIZE_MAX / sizeof(tc_pv *) - 1) return NULL;
  tc_pv **a = tc_arena_alloc(ar, (slots + 1) * sizeof *a);
  return a ? a + 1 : NULL;
}

static dict_index *index_of(const tc_pv *d) {
  dict_index *x;
  memcpy(&x, (void *const *)d->u.items - 1, sizeof x);
  return x;
}

int tc_pv_track_dict(tc_pv_build *b, tc_pv *d) {
  if (!d) return 0;
  if (b->nd == b->dcap) {
    size_t cap = b->dcap ? b->dcap * 2 : 64;
    tc_pv **a = realloc(b->dicts, cap * sizeof *a);
    if (!a) return 0;
    b->dicts = a;
    b->dcap = cap;
  }
  b->dicts[b->nd++] = d;
  return 1;
}

static int keycmp(const char *a, size_t an, const char *b, size_t bn) {
  int c = memcmp(a, b, an < bn ? an : bn);
  return c ? c : an < bn ? -1 : an > bn;
}

typedef struct {
  const char *s;
  uint32_t n, at;
} key_ref;

static int cmp_key_ref(const void *pa, const void *pb) {
  const key_ref *a = pa, *b = pb;
  int c = keycmp(a->s, a->n, b->s, b->n);
  return c ? c : a->at < b->at ? -1 : a->at > b->at;
}

tcuda_status tc_pv_index_dicts(const char *func, tc_pv_build *b) {
  tcuda_status s = TCUDA_SUCCESS;
  key_ref *tmp = NULL;
  size_t tcap = 0;
  for (size_t i = 0; i < b->nd && !s; i++) {
    tc_pv *d = b->dicts[i];
    if (d->n <= TC_PV_INDEX_MIN) continue;
    if ((s = tc_pv_spend(func, b->budget, d->n))) break;
    if (d->n > tcap) {
      key_ref *t = realloc(tmp, (size_t)d->n * sizeof *t);
      if (!t) goto oom;
      tmp = t;
      tcap = d->n;
    }
    uint32_t k = 0;
    for (uint32_t p = 0; p < d->n; p++) {
      const tc_pv *key = d->u.items[2 * p];
      if (key->kind == TC_PV_STR) tmp[k++] = (key_ref){key->u.s, key->n, p};
    }
    qsort(tmp, k, sizeof *tmp, cmp_key_ref);
    dict_index *x = tc_arena_alloc(b->ar, sizeof *x + (size_t)k * sizeof x->at[0]);
    if (!x) goto oom;
    x->n = k;
    for (uint32_t j = 0; j < k; j++) x->at[j] = tmp[j].at;
    memcpy((void **)d->u.items - 1, &x, sizeof x);
  }
  free(tmp);
  free(b->dicts);
  b->dicts = NULL;
  b->nd = b->dcap = 0;
  return s;
oom:
  free(tmp);
  return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: host out of memory indexing the input's dicts", func);
}

/* ---- accessors ---- */

const tc_pv *tc_pv_get(const tc_pv *v, const char *key) {
  if (!v || v->kind != TC_PV_DICT || !key) return NULL;
  size_t kn = strlen(key);
  const dict_index *x = v->n > TC_PV_INDEX_MIN ? index_of(v) : NULL;
  if (x) { /* the last of the equal keys: the last pair that has it */
    size_t lo = 0, hi = x->n;
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      const tc_pv *k = v->u.items[2 * (size_t)x->at[mid]];
      if (keycmp(k->u.s, k->n, key, kn) <= 0) lo = mid + 1;
      else hi = mid;
    }
    if (!lo) return NULL;
    const tc_pv *k = v->u.items[2 * (size_t)x->at[lo - 1]];
    return !keycmp(k->u.s, k->n, key, kn) ? v->u.items[2 * (size_t)x->at[lo - 1] + 1] : NULL;
  }
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

const char *tc_pv_as_strn(const tc_pv *v, size_t *n) {
  if (!v || v->kind != TC_PV_STR) return NULL;
  *n = v->n;
  return v->u.s;
}

int tc_pv_is_str(const tc_pv *v, const char *lit) {
  size_t n = strlen(lit);
  return v && v->kind == TC_PV_STR && v->n == n && !memcmp(v->u.s, lit, n);
}

int tc_pv_as_seq(const tc_pv *v, tc_pv *const **items, size_t *n) {
  if (!v || (v->kind != TC_PV_LIST && v->kind != TC_PV_TUPLE)) return 0;
  *items = v->u.items;
  *n = v->n;
  return 1;
}
