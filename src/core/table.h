/* Cold-path containers: a growable array and a u64 -> u64 hash map.
 *
 * For readers, replays and bookkeeping off the allocation path; the
 * allocator's hot-path block map (src/alloc/blockmap.c) stays tuned on its
 * own. Neither sets an error message: callers name their function in it. */
#ifndef TC_TABLE_H
#define TC_TABLE_H
#include <stddef.h>
#include <stdint.h>

/* Make room for `need` elements of `elem` bytes at *p (capacity *cap
 * elements), doubling from 16. 1 on success; 0 when out of memory or when
 * the size would overflow, leaving *p and *cap as they were. */
int tc_grow(void **p, size_t *cap, size_t need, size_t elem);

/* Open addressing with linear probing and backward-shift deletion (no
 * tombstones), at most half full. Every key is allowed: 0 marks an empty
 * slot, so key 0 is kept beside the table. Zero-initialise to start. */
typedef struct tc_u64map {
  uint64_t *keys; /* cap keys then cap values, one allocation */
  size_t cap, n;  /* cap: 0 or a power of two; n counts key 0 too */
  int has_zero;
  uint64_t zero_val;
} tc_u64map;

/* The value of key, or NULL. The pointer is valid until the next put or
 * del. */
uint64_t *tc_u64map_get(tc_u64map *m, uint64_t key);
/* Insert or replace. 0 when out of memory, the map then unchanged. */
int tc_u64map_put(tc_u64map *m, uint64_t key, uint64_t val);
/* 1 when key was there (it is gone now), else 0. */
int tc_u64map_del(tc_u64map *m, uint64_t key);
void tc_u64map_free(tc_u64map *m);

/* Tests: from now, the first `ok` allocations here succeed and the ones
 * after fail, in this thread (ok < 0: none fail, the default). */
void tc_table_fail_after(long ok);

#endif
