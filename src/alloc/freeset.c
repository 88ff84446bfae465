/* The free-block sets: per pool, the free blocks ordered by (stream, size,
 * addr) as torch's std::set, in size buckets of treaps behind a bitmap; and
 * the treap itself, which also orders a pool's unmapped expandable blocks by
 * (stream, addr). What the cached malloc/free path calls is in freeset.h;
 * the walks, set growth and the self check are here. */
#include "alloc/freeset.h"
#include "alloc/lock.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* free-block sets                                                      */

tcuda_status tc_bs_reserve(tc_bset *set, uint64_t stream, tc_bstream **out) {
  size_t i = bs_find(set, stream);
  if (i < set->n && set->s[i]->stream == stream) {
    *out = set->s[i];
    return TCUDA_SUCCESS;
  }
  if (set->n == set->cap) {
    tc_bstream **ns = (tc_bstream **)tc_grow(set->s, &set->cap, sizeof *ns, 4);
    if (!ns) return host_oom();
    set->s = ns;
  }
  tc_bstream *e = (tc_bstream *)calloc(1, sizeof *e);
  if (!e) return host_oom();
  e->stream = stream;
  memmove(&set->s[i + 1], &set->s[i], (set->n - i) * sizeof *set->s);
  set->s[i] = e;
  set->n++;
  *out = e;
  return TCUDA_SUCCESS;
}

void tc_bs_destroy(tc_bset *set) {
  for (size_t i = 0; i < set->n; i++) free(set->s[i]);
  free(set->s);
  memset(set, 0, sizeof *set);
}

/* Last non-empty bucket <= k, or -1. */
static int bs_bucket_at_or_before(const tc_bstream *e, int k) {
  if (k < 0) return -1;
  unsigned w = (unsigned)k >> 6;
  uint64_t m = e->bits[w] & (~(uint64_t)0 >> (63 - (k & 63)));
  if (m) return (int)(w * 64 + 63 - (unsigned)__builtin_clzll(m));
  uint64_t sm = e->summary & (((uint64_t)1 << w) - 1);
  if (!sm) return -1;
  w = 63 - (unsigned)__builtin_clzll(sm);
  return (int)(w * 64 + 63 - (unsigned)__builtin_clzll(e->bits[w]));
}

/* The largest block up to stream index si, bucket k (earlier streams from
 * their last bucket). */
static tc_block *bs_max_upto(const tc_bset *set, ptrdiff_t si, int k) {
  for (; si >= 0; si--, k = BS_NB - 1) {
    const tc_bstream *e = set->s[si];
    int j = bs_bucket_at_or_before(e, k);
    if (j >= 0) {
      tc_tree t = {e->root[j], 0};
      return tree_last(&t);
    }
  }
  return NULL;
}

tc_block *tc_bs_first(const tc_bset *set) { return bs_min_from(set, 0, 0); }
tc_block *tc_bs_last(const tc_bset *set) { return bs_max_upto(set, (ptrdiff_t)set->n - 1, BS_NB - 1); }

tc_block *tc_bs_prev(const tc_bset *set, tc_block *b) {
  tc_block *p = tree_prev(b);
  if (p) return p;
  return bs_max_upto(set, (ptrdiff_t)bs_find(set, b->stream), (int)b->bkt - 1);
}

/* ------------------------------------------------------------------ */
/* self check                                                           */

/* Test hook: the free sets against the segments. Every free, mapped block
 * with no pending event must sit in its pool's set, in the right bucket,
 * findable by its key, and the walk must be strictly ordered; bucket bits
 * must match the roots. Returns 0, or 1 with *why set. */
static int bs_check_pool(tc_alloc *a, tc_pool *pool, char *why, size_t n) {
  size_t walked = 0, expected = 0;
  const tc_block *prev = NULL;
  for (tc_block *b = tc_bs_first(&pool->blocks); b; b = bs_next(&pool->blocks, b), walked++) {
    if (b->allocated || !b->mapped || b->event_count || b->pool != pool) {
      snprintf(why, n, "free set holds block %#llx that is allocated, unmapped, pending or of another pool",
               (unsigned long long)b->addr);
      return 1;
    }
    if (b->bkt != bs_bucket(b->size) || b->seg->bs->stream != b->stream) {
      snprintf(why, n, "block %#llx of %llu bytes in bucket %u, expected %u", (unsigned long long)b->addr,
               (unsigned long long)b->size, b->bkt, bs_bucket(b->size));
      return 1;
    }
    tc_tree t = {NULL, 0};
    if (prev && (prev->stream > b->stream ||
                 (prev->stream == b->stream && !key_less(&t, prev, b->stream, b->size, b->addr)))) {
      snprintf(why, n, "free set out of order at block %#llx", (unsigned long long)b->addr);
      return 1;
    }
    if (bs_lower_bound(&pool->blocks, b->stream, b->size, b->addr) != b) {
      snprintf(why, n, "block %#llx is not found by its own key", (unsigned long long)b->addr);
      return 1;
    }
    prev = b;
  }
  for (tc_seg *g = a->segs; g; g = g->lnext)
    if (g->pool == pool)
      for (const tc_block *b = g->head; b; b = b->next)
        if (!b->allocated && b->mapped && !b->event_count && !b->nuses) expected++;
  for (size_t i = 0; i < pool->blocks.n; i++) {
    const tc_bstream *e = pool->blocks.s[i];
    if (i && pool->blocks.s[i - 1]->stream >= e->stream) {
      snprintf(why, n, "stream entries out of order");
      return 1;
    }
    for (unsigned k = 0; k < BS_NB; k++) {
      int bit = (int)((e->bits[k >> 6] >> (k & 63)) & 1), sum = (int)((e->summary >> (k >> 6)) & 1);
      if (bit != (e->root[k] != NULL) || (bit && !sum)) {
        snprintf(why, n, "stream %llu bucket %u: bit %d, summary %d, root %p", (unsigned long long)e->stream, k,
                 bit, sum, (void *)e->root[k]);
        return 1;
      }
    }
    for (unsigned w = 0; w < BS_W; w++)
      if ((int)((e->summary >> w) & 1) != (e->bits[w] != 0)) {
        snprintf(why, n, "stream %llu: summary bit %u wrong", (unsigned long long)e->stream, w);
        return 1;
      }
  }
  if (walked != expected) {
    snprintf(why, n, "free set holds %zu blocks, the segments have %zu free", walked, expected);
    return 1;
  }
  return 0;
}

int tc_alloc_self_check(tc_alloc *a, char *why, size_t n) {
  lk_lock(&a->mu);
  int bad = bs_check_pool(a, &a->small, why, n) || bs_check_pool(a, &a->large, why, n);
  for (tc_ppool *p = a->ppools; p && !bad; p = p->next)
    bad = bs_check_pool(a, &p->small, why, n) || bs_check_pool(a, &p->large, why, n);
  lk_unlock(&a->mu);
  return bad;
}
