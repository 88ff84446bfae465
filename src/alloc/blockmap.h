/* The block map (blockmap.c): allocated blocks by address, in an
 * open-addressing hash table with linear probing. Lookups, puts and
 * deletes are static inline (the cached malloc/free path runs them); the
 * rebuild is in blockmap.c. */
#ifndef TC_ALLOC_BLOCKMAP_H
#define TC_ALLOC_BLOCKMAP_H
#include "alloc/types.h"
#include <stdint.h>

struct tc_slot {
  uint64_t key;
  tc_block *b;
};

static inline size_t ht_home(const tc_alloc *a, uint64_t key) {
  return (size_t)(((key >> 9) * 0x9E3779B97F4A7C15ull) >> (64 - a->ht_bits));
}

/* A deleted slot. Deletion leaves a tombstone instead of shifting the
 * cluster back: the shift's loop (a home computed per moved entry, exits
 * at random) was a large part of a mixed-size free+alloc. Keys are block
 * addresses, never 0 (empty) or 1. Puts reuse tombstones; ht_reserve
 * rebuilds the table when live entries and tombstones reach 70%, so a
 * probe always ends at an empty slot. */
#define HT_TOMB ((uint64_t)1)

/* The slot holding key, or SIZE_MAX. */
static inline size_t ht_slot(const tc_alloc *a, uint64_t key) {
  if (key <= HT_TOMB) return SIZE_MAX;
  size_t mask = a->ht_cap - 1, i = ht_home(a, key);
  for (;;) {
    uint64_t k = a->ht[i].key;
    if (k == key) return i;
    if (!k) return SIZE_MAX;
    i = (i + 1) & mask;
  }
}

static inline tc_block *ht_find(const tc_alloc *a, uint64_t key) {
  size_t i = ht_slot(a, key);
  return i == SIZE_MAX ? NULL : a->ht[i].b;
}

static inline void ht_put(tc_alloc *a, uint64_t key, tc_block *b) {
  size_t mask = a->ht_cap - 1, i = ht_home(a, key);
  while (a->ht[i].key > HT_TOMB) i = (i + 1) & mask;
  if (a->ht[i].key == HT_TOMB) a->ht_tombs--;
  a->ht[i].key = key;
  a->ht[i].b = b;
  a->ht_len++;
}

/* One more put would pass 70% of the slots in use or dead. */
static inline int ht_full(const tc_alloc *a) { return (a->ht_len + a->ht_tombs + 1) * 10 > a->ht_cap * 7; }

SLOW_PATH tcuda_status tc_ht_rebuild(tc_alloc *a);

/* Before a put. */
static inline tcuda_status ht_reserve(tc_alloc *a) { return ht_full(a) ? tc_ht_rebuild(a) : TCUDA_SUCCESS; }

/* Delete slot i's entry (found by ht_slot). A slot before an empty one
 * needs no tombstone: no probe passes through it. */
static inline void ht_del_at(tc_alloc *a, size_t i) {
  size_t mask = a->ht_cap - 1;
  if (!a->ht[(i + 1) & mask].key) {
    a->ht[i].key = 0;
  } else {
    a->ht[i].key = HT_TOMB;
    a->ht_tombs++;
  }
  a->ht[i].b = NULL;
  a->ht_len--;
}

#endif
