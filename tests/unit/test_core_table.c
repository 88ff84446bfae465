/* src/core/table.h: the cold-path u64 map and growth helper, checked
 * against a plain list (the oracle), including allocation failures. */
#include "harness.h"
#include "core/table.h"

/* the reference: keys and values in a list, searched linearly */
typedef struct {
  uint64_t k[4096], v[4096];
  size_t n;
} ref;

static uint64_t *ref_get(ref *r, uint64_t k) {
  for (size_t i = 0; i < r->n; i++)
    if (r->k[i] == k) return &r->v[i];
  return NULL;
}
static void ref_put(ref *r, uint64_t k, uint64_t v) {
  uint64_t *p = ref_get(r, k);
  if (p) *p = v;
  else r->k[r->n] = k, r->v[r->n++] = v;
}
static int ref_del(ref *r, uint64_t k) {
  uint64_t *p = ref_get(r, k);
  if (!p) return 0;
  size_t i = (size_t)(p - r->v);
  r->k[i] = r->k[--r->n];
  r->v[i] = r->v[r->n];
  return 1;
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* every key the reference holds is in the map with its value, and the
 * counts agree */
static int same(tc_u64map *m, ref *r) {
  if (m->n != r->n) return 0;
  for (size_t i = 0; i < r->n; i++) {
    uint64_t *v = tc_u64map_get(m, r->k[i]);
    if (!v || *v != r->v[i]) return 0;
  }
  return 1;
}

static void map_empty(void) {
  tc_u64map m = {0};
  CHECK(tc_u64map_get(&m, 1) == NULL);
  CHECK(tc_u64map_get(&m, 0) == NULL);
  CHECK_EQ_INT(tc_u64map_del(&m, 7), 0);
  CHECK_EQ_INT(tc_u64map_del(&m, 0), 0);
  tc_u64map_free(&m);
  CHECK_EQ_INT(m.cap, 0);
}

/* 0 marks an empty slot inside the table, so key 0 must still behave as a
 * key like any other */
static void map_key_zero(void) {
  tc_u64map m = {0};
  CHECK(tc_u64map_put(&m, 0, 5));
  CHECK(tc_u64map_put(&m, 3, 6));
  CHECK_EQ_INT(m.n, 2);
  CHECK(tc_u64map_get(&m, 0) && *tc_u64map_get(&m, 0) == 5);
  CHECK(tc_u64map_put(&m, 0, 9));
  CHECK_EQ_INT(m.n, 2);
  CHECK(*tc_u64map_get(&m, 0) == 9);
  CHECK_EQ_INT(tc_u64map_del(&m, 0), 1);
  CHECK(tc_u64map_get(&m, 0) == NULL);
  CHECK(tc_u64map_get(&m, 3) && *tc_u64map_get(&m, 3) == 6);
  CHECK_EQ_INT(m.n, 1);
  tc_u64map_free(&m);
}

/* Random puts, replacements and deletes against the reference. Keys come
 * from small pools (dense, 2 MiB-aligned addresses, and any 64-bit value)
 * so that chains form, wrap around the table's end, and deletions must
 * shift entries back across them. */
static void map_random_against_reference(void) {
  static ref r;
  tc_u64map m = {0};
  r.n = 0;
  int ok = 1;
  for (int i = 0; i < 200000 && ok; i++) {
    uint64_t x = next(), k;
    switch (x % 3) {
    case 0: k = x >> 40 & 1023; break;
    case 1: k = 0x7f0000000000ULL + (x >> 32 & 1023) * (2u << 20); break;
    default: k = x & 0xffffffffffff0000ULL; if ((x >> 20) % 4) k = 12345; break;
    }
    if (r.n >= 4000 || x >> 62 == 0) {
      ok = tc_u64map_del(&m, k) == ref_del(&r, k);
    } else {
      ok = tc_u64map_put(&m, k, x);
      ref_put(&r, k, x);
    }
    if (ok && i % 1000 == 0) ok = same(&m, &r);
  }
  CHECK(ok);
  CHECK(same(&m, &r));
  CHECK(m.cap >= 2 * (m.n - (size_t)m.has_zero)); /* at most half full */
  /* delete everything: nothing left behind */
  while (r.n) {
    uint64_t k = r.k[0];
    CHECK_EQ_INT(tc_u64map_del(&m, k), 1);
    ref_del(&r, k);
  }
  CHECK_EQ_INT(m.n, 0);
  for (size_t i = 0; i < m.cap; i++) CHECK(m.keys[i] == 0);
  tc_u64map_free(&m);
}

/* A put that must grow the table and cannot leaves the map as it was, and
 * usable; puts that need no new memory still work meanwhile. */
static void map_growth_failure(void) {
  tc_u64map m = {0};
  tc_table_fail_after(0);
  CHECK_EQ_INT(tc_u64map_put(&m, 42, 1), 0); /* the first table cannot be made */
  CHECK_EQ_INT(m.n, 0);
  CHECK(tc_u64map_get(&m, 42) == NULL);
  CHECK(tc_u64map_put(&m, 0, 7)); /* key 0 needs no table */
  tc_table_fail_after(-1);
  /* fill to the growth point: 16 slots hold 8 keys at most half full */
  for (uint64_t k = 1; k <= 8; k++) CHECK(tc_u64map_put(&m, k * 4096, k));
  CHECK_EQ_INT(m.cap, 16);
  tc_table_fail_after(0);
  CHECK_EQ_INT(tc_u64map_put(&m, 9 * 4096, 9), 0);
  CHECK_EQ_INT(m.cap, 16);
  CHECK_EQ_INT(m.n, 9); /* key 0 and the 8 */
  CHECK(tc_u64map_get(&m, 9 * 4096) == NULL);
  for (uint64_t k = 1; k <= 8; k++) CHECK(tc_u64map_get(&m, k * 4096) && *tc_u64map_get(&m, k * 4096) == k);
  CHECK(tc_u64map_put(&m, 3 * 4096, 33)); /* a replacement needs no memory */
  CHECK_EQ_INT(tc_u64map_del(&m, 2 * 4096), 1);
  CHECK(tc_u64map_put(&m, 9 * 4096, 9)); /* room again after the delete */
  tc_table_fail_after(-1);
  CHECK(tc_u64map_put(&m, 10 * 4096, 10));
  CHECK_EQ_INT(m.cap, 32);
  CHECK(*tc_u64map_get(&m, 3 * 4096) == 33);
  CHECK(*tc_u64map_get(&m, 9 * 4096) == 9);
  CHECK(*tc_u64map_get(&m, 0) == 7);
  CHECK(tc_u64map_get(&m, 2 * 4096) == NULL);
  tc_u64map_free(&m);
}

static void grow_sizes(void) {
  int *p = NULL;
  size_t cap = 0;
  CHECK(tc_grow((void **)&p, &cap, 1, sizeof *p));
  CHECK_EQ_INT(cap, 16); /* the first capacity */
  for (int i = 0; i < 16; i++) p[i] = i;
  CHECK(tc_grow((void **)&p, &cap, 16, sizeof *p));
  CHECK_EQ_INT(cap, 16); /* enough already */
  CHECK(tc_grow((void **)&p, &cap, 17, sizeof *p));
  CHECK_EQ_INT(cap, 32); /* doubled */
  CHECK(tc_grow((void **)&p, &cap, 100, sizeof *p));
  CHECK_EQ_INT(cap, 128); /* doubled until it holds 100 */
  int kept = 1;
  for (int i = 0; i < 16; i++) kept &= p[i] == i;
  CHECK(kept);
  free(p);
}

/* Failures leave the array and its capacity as they were. */
static void grow_failures(void) {
  int *p = NULL;
  size_t cap = 0;
  CHECK(tc_grow((void **)&p, &cap, 10, sizeof *p));
  for (int i = 0; i < 10; i++) p[i] = 100 + i;
  int *before = p;
  tc_table_fail_after(0);
  CHECK(tc_grow((void **)&p, &cap, 16, sizeof *p)); /* fits: no allocation */
  CHECK_EQ_INT(tc_grow((void **)&p, &cap, 17, sizeof *p), 0);
  CHECK(p == before);
  CHECK_EQ_INT(cap, 16);
  tc_table_fail_after(-1);
  /* sizes whose byte count overflows fail without allocating */
  CHECK_EQ_INT(tc_grow((void **)&p, &cap, SIZE_MAX / sizeof *p + 1, sizeof *p), 0);
  CHECK_EQ_INT(tc_grow((void **)&p, &cap, SIZE_MAX, 2), 0);
  CHECK_EQ_INT(tc_grow((void **)&p, &cap, 17, 0), 0);
  CHECK(p == before);
  CHECK_EQ_INT(cap, 16);
  int kept = 1;
  for (int i = 0; i < 10; i++) kept &= p[i] == 100 + i;
  CHECK(kept);
  /* after one success the next allocation fails */
  tc_table_fail_after(1);
  CHECK(tc_grow((void **)&p, &cap, 17, sizeof *p));
  CHECK_EQ_INT(tc_grow((void **)&p, &cap, 33, sizeof *p), 0);
  CHECK_EQ_INT(cap, 32);
  tc_table_fail_after(-1);
  free(p);
}

TC_MAIN(T(map_empty), T(map_key_zero), T(map_random_against_reference), T(map_growth_failure), T(grow_sizes),
        T(grow_failures))
