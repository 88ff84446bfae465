/* Cold-path containers (table.h). */
#include "table.h"
#include <stdlib.h>
#include <string.h>

static _Thread_local long fail_after = -1;

void tc_table_fail_after(long ok) { fail_after = ok; }

static int may_allocate(void) {
  if (fail_after < 0) return 1;
  if (!fail_after) return 0;
  fail_after--;
  return 1;
}

int tc_grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 1;
  if (!elem || need > SIZE_MAX / elem) return 0;
  size_t c = *cap ? *cap : 16;
  while (c < need) c = c > SIZE_MAX / 2 ? need : c * 2;
  if (c > SIZE_MAX / elem) c = need;
  void *n = may_allocate() ? realloc(*p, c * elem) : NULL;
  if (!n) return 0;
  *p = n;
  *cap = c;
  return 1;
}

/* murmur3's 64-bit finalizer: addresses differ in their middle bits */
static size_t slot_of(uint64_t k, size_t cap) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k & (cap - 1);
}

static int rehash(tc_u64map *m, size_t ncap) {
  if (ncap > SIZE_MAX / (2 * sizeof(uint64_t))) return 0;
  uint64_t *t = may_allocate() ? calloc(2 * ncap, sizeof *t) : NULL;
  if (!t) return 0;
  for (size_t i = 0; i < m->cap; i++) {
    uint64_t k = m->keys[i];
    if (!k) continue;
    size_t j = slot_of(k, ncap);
    while (t[j]) j = (j + 1) & (ncap - 1);
    t[j] = k;
    t[ncap + j] = m->keys[m->cap + i];
  }
  free(m->keys);
  m->keys = t;
  m->cap = ncap;
  return 1;
}

uint64_t *tc_u64map_get(tc_u64map *m, uint64_t key) {
  if (!key) return m->has_zero ? &m->zero_val : NULL;
  if (!m->cap) return NULL;
  for (size_t j = slot_of(key, m->cap);; j = (j + 1) & (m->cap - 1)) {
    if (!m->keys[j]) return NULL;
    if (m->keys[j] == key) return &m->keys[m->cap + j];
  }
}

int tc_u64map_put(tc_u64map *m, uint64_t key, uint64_t val) {
  uint64_t *v = tc_u64map_get(m, key);
  if (v) {
    *v = val;
    return 1;
  }
  if (!key) {
    m->has_zero = 1;
    m->zero_val = val;
    m->n++;
    return 1;
  }
  size_t in_table = m->n - (size_t)m->has_zero;
  if ((in_table + 1) * 2 > m->cap && !rehash(m, m->cap ? m->cap * 2 : 16)) return 0;
  size_t j = slot_of(key, m->cap);
  while (m->keys[j]) j = (j + 1) & (m->cap - 1);
  m->keys[j] = key;
  m->keys[m->cap + j] = val;
  m->n++;
  return 1;
}

int tc_u64map_del(tc_u64map *m, uint64_t key) {
  if (!key) {
    if (!m->has_zero) return 0;
    m->has_zero = 0;
    m->n--;
    return 1;
  }
  if (!m->cap) return 0;
  size_t mask = m->cap - 1, hole = slot_of(key, m->cap);
  while (m->keys[hole] && m->keys[hole] != key) hole = (hole + 1) & mask;
  if (!m->keys[hole]) return 0;
  /* pull later entries of the chain back into the hole, unless their home
   * lies cyclically in (hole, i]: then they are still reachable */
  for (size_t i = (hole + 1) & mask; m->keys[i]; i = (i + 1) & mask) {
    size_t home = slot_of(m->keys[i], m->cap);
    int reachable = hole < i ? (home > hole && home <= i) : (home > hole || home <= i);
    if (reachable) continue;
    m->keys[hole] = m->keys[i];
    m->keys[m->cap + hole] = m->keys[m->cap + i];
    hole = i;
  }
  m->keys[hole] = 0;
  m->n--;
  return 1;
}

void tc_u64map_free(tc_u64map *m) {
  free(m->keys);
  memset(m, 0, sizeof *m);
}
