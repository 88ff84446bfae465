/* The free set (freeset.c): per pool, the free blocks ordered by (stream,
 * size, addr) as torch's std::set, in size buckets of treaps behind a
 * bitmap; and the treap itself, which also orders a pool's unmapped
 * expandable blocks by (stream, addr). What the cached malloc/free path
 * runs is static inline here; the walks backwards, set growth and the self
 * check are in freeset.c. */
#ifndef TC_ALLOC_FREESET_H
#define TC_ALLOC_FREESET_H
#include "alloc/types.h"

/* Free blocks of one stream in one pool: 64 buckets per power of two,
 * bucket k holding sizes s with s - 1 in [2^(8+k/64) * (64 + k%64) / 64,
 * the next bucket's start), so buckets follow size order. Up to 64 KiB a
 * bucket holds one size. Counting from s - 1 puts a whole 2 MiB segment in
 * the bucket of its remainders after a split under 16 KiB, which keeps the
 * hot split and merge in place. 64 rather than 16 per power of two: more
 * buckets hold one block, and those skip the treap (faster on mixed sizes,
 * for 28 KiB of roots per stream and pool).
 * 56 powers of two, so the summary still fits one word. */
#define BS_SUB 64
#define BS_NB ((64 - 8) * BS_SUB)
#define BS_W ((BS_NB + 63) / 64)
_Static_assert(BS_W <= 64, "the summary is one word");
struct tc_bstream {
  uint64_t stream;
  uint64_t summary;    /* bit w: bits[w] != 0 */
  uint64_t bits[BS_W]; /* bit k: root[k] != NULL */
  tc_block *root[BS_NB];
};

/* ------------------------------------------------------------------ */
/* the treap                                                            */


static inline uint32_t next_prio(tc_alloc *a) {
  uint64_t x = a->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  a->rng = x;
  return (uint32_t)(x >> 32);
}

/* x < key. A size-ordered tree is one bucket of one stream's free set, so
 * its blocks share a stream. Branches, not a branch-free compare and child
 * select: with those the next node's load waited for the compare, and the
 * mixed pattern got slower. */
static inline int key_less(const tc_tree *t, const tc_block *x, uint64_t stream, uint64_t size, uint64_t addr) {
  if (t->by_addr) return x->stream != stream ? x->stream < stream : x->addr < addr;
  if (x->size != size) return x->size < size;
  return x->addr < addr;
}

static inline void rotate_up(tc_tree *t, tc_block *x) {
  tc_block *p = x->tp, *g = p->tp;
  if (p->tl == x) {
    p->tl = x->tr;
    if (x->tr) x->tr->tp = p;
    x->tr = p;
  } else {
    p->tr = x->tl;
    if (x->tl) x->tl->tp = p;
    x->tl = p;
  }
  p->tp = x;
  x->tp = g;
  if (!g) t->root = x;
  else if (g->tl == p) g->tl = x;
  else g->tr = x;
}

static inline void tree_insert(tc_alloc *a, tc_tree *t, tc_block *b) {
  b->tl = b->tr = NULL;
  b->prio = next_prio(a);
  tc_block *cur = t->root, *parent = NULL;
  int left = 0;
  while (cur) {
    parent = cur;
    left = !key_less(t, cur, b->stream, b->size, b->addr); /* b < cur: keys are unique */
    cur = left ? cur->tl : cur->tr;
  }
  b->tp = parent;
  if (!parent) t->root = b;
  else if (left) parent->tl = b;
  else parent->tr = b;
  while (b->tp && b->tp->prio > b->prio) rotate_up(t, b);
}

/* Rotate b down while it has two children, then splice it out: its one
 * child (or none) takes its place, which keeps the heap order. */
LOCAL_CALL void tree_erase(tc_tree *t, tc_block *b) {
  while (b->tl && b->tr) rotate_up(t, b->tl->prio < b->tr->prio ? b->tl : b->tr);
  tc_block *c = b->tl ? b->tl : b->tr, *p = b->tp;
  if (c) c->tp = p;
  if (!p) t->root = c;
  else if (p->tl == b) p->tl = c;
  else p->tr = c;
  b->tl = b->tr = b->tp = NULL;
}

/* nw takes old's place in the tree (links and priority). The caller has
 * checked that nw's key sorts between old's neighbours, so the order holds
 * without a single rotation: a split or merge then costs O(1) tree work. */
static inline void tree_replace(tc_tree *t, tc_block *old, tc_block *nw) {
  nw->tl = old->tl;
  nw->tr = old->tr;
  nw->tp = old->tp;
  nw->prio = old->prio;
  if (nw->tl) nw->tl->tp = nw;
  if (nw->tr) nw->tr->tp = nw;
  if (!nw->tp) t->root = nw;
  else if (nw->tp->tl == old) nw->tp->tl = nw;
  else nw->tp->tr = nw;
  old->tl = old->tr = old->tp = NULL;
}

/* First element >= key, or NULL (end). */
static inline tc_block *lower_bound(const tc_tree *t, uint64_t stream, uint64_t size, uint64_t addr) {
  tc_block *cur = t->root, *res = NULL;
  while (cur) {
    if (key_less(t, cur, stream, size, addr)) cur = cur->tr;
    else {
      res = cur;
      cur = cur->tl;
    }
  }
  return res;
}

static inline tc_block *tree_first(const tc_tree *t) {
  tc_block *b = t->root;
  if (b) while (b->tl) b = b->tl;
  return b;
}

static inline tc_block *tree_last(const tc_tree *t) {
  tc_block *b = t->root;
  if (b) while (b->tr) b = b->tr;
  return b;
}

static inline tc_block *tree_next(tc_block *b) {
  if (b->tr) {
    b = b->tr;
    while (b->tl) b = b->tl;
    return b;
  }
  while (b->tp && b->tp->tr == b) b = b->tp;
  return b->tp;
}

static inline tc_block *tree_prev(tc_block *b) {
  if (b->tl) {
    b = b->tl;
    while (b->tr) b = b->tr;
    return b;
  }
  while (b->tp && b->tp->tl == b) b = b->tp;
  return b->tp;
}

static inline unsigned bs_bucket(uint64_t size) {
  if (size < TC_MIN_BLOCK_SIZE) return 0;
  uint64_t v = size - 1;
  unsigned k = tc_log2_floor(v); /* >= 8 */
  return (k - 8) * BS_SUB + (unsigned)((v >> (k - 6)) & (BS_SUB - 1)); /* 6 = log2(BS_SUB) */
}

/* First index whose stream is >= stream. */
static inline size_t bs_find(const tc_bset *set, uint64_t stream) {
  if (set->n == 1) return set->s[0]->stream < stream; /* one stream: the common case */
  size_t lo = 0, hi = set->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (set->s[mid]->stream < stream) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The stream's entry, made if new: the one set operation that can fail,
 * so it runs when a segment is made, before anything changes. */
tcuda_status tc_bs_reserve(tc_bset *set, uint64_t stream, tc_bstream **out);
void tc_bs_destroy(tc_bset *set);

/* Most buckets hold a block or two: the empty and single cases skip the
 * treap code. */
static inline void bs_insert(tc_alloc *a, tc_block *b) {
  tc_bstream *e = b->seg->bs;
  unsigned k = bs_bucket(b->size);
  b->bkt = (uint16_t)k;
  if (!e->root[k]) {
    b->tl = b->tr = b->tp = NULL;
    b->prio = next_prio(a);
    e->root[k] = b;
    e->bits[k >> 6] |= (uint64_t)1 << (k & 63);
    e->summary |= (uint64_t)1 << (k >> 6);
    return;
  }
  tc_tree t = {e->root[k], 0};
  tree_insert(a, &t, b);
  e->root[k] = t.root;
}

static inline void bs_erase(tc_block *b) {
  tc_bstream *e = b->seg->bs;
  unsigned k = b->bkt;
  if (e->root[k] == b && !b->tl && !b->tr) {
    e->root[k] = NULL;
  } else {
    tc_tree t = {e->root[k], 0};
    tree_erase(&t, b);
    e->root[k] = t.root;
  }
  if (!e->root[k]) {
    e->bits[k >> 6] &= ~((uint64_t)1 << (k & 63));
    if (!e->bits[k >> 6]) e->summary &= ~((uint64_t)1 << (k >> 6));
  }
}

/* First non-empty bucket >= k, or BS_NB. */
static inline unsigned bs_bucket_at_or_after(const tc_bstream *e, unsigned k) {
  if (k >= BS_NB) return BS_NB;
  unsigned w = k >> 6;
  uint64_t m = e->bits[w] & (~(uint64_t)0 << (k & 63));
  if (m) return w * 64 + (unsigned)__builtin_ctzll(m);
  uint64_t sm = w + 1 < 64 ? e->summary & (~(uint64_t)0 << (w + 1)) : 0;
  if (!sm) return BS_NB;
  w = (unsigned)__builtin_ctzll(sm);
  return w * 64 + (unsigned)__builtin_ctzll(e->bits[w]);
}

/* The smallest block from stream index si, bucket k on (later streams from
 * their first bucket). */
static inline tc_block *bs_min_from(const tc_bset *set, size_t si, unsigned k) {
  for (; si < set->n; si++, k = 0) {
    const tc_bstream *e = set->s[si];
    unsigned j = bs_bucket_at_or_after(e, k);
    if (j < BS_NB) {
      tc_tree t = {e->root[j], 0};
      return tree_first(&t);
    }
  }
  return NULL;
}

static inline tc_block *bs_next(const tc_bset *set, tc_block *b) {
  tc_block *n = tree_next(b); /* inside b's bucket */
  if (n) return n;
  return bs_min_from(set, bs_find(set, b->stream), b->bkt + 1u);
}

tc_block *tc_bs_first(const tc_bset *set);
tc_block *tc_bs_last(const tc_bset *set);
tc_block *tc_bs_prev(const tc_bset *set, tc_block *b);

/* First block >= (stream, size, addr), or NULL. */
static inline tc_block *bs_lower_bound(const tc_bset *set, uint64_t stream, uint64_t size, uint64_t addr) {
  size_t si = bs_find(set, stream);
  if (si < set->n && set->s[si]->stream == stream) {
    const tc_bstream *e = set->s[si];
    unsigned k = bs_bucket(size);
    if (e->root[k]) {
      tc_tree t = {e->root[k], 0};
      tc_block *r = lower_bound(&t, stream, size, addr);
      if (r) return r;
    }
    return bs_min_from(set, si, k + 1);
  }
  return bs_min_from(set, si, 0);
}

/* nw (not in the set) takes the place of old (in it): in place when nw
 * sorts in old's bucket between old's neighbours there, so a split or a
 * merge costs no tree work; else old out and nw in. below: the caller knows
 * nw sorts below old (a split's remainder), so only that side is checked;
 * else it sorts above (a merge). */
static inline void bs_move(tc_alloc *a, tc_block *old, tc_block *nw, int below) {
  tc_bstream *e = old->seg->bs;
  unsigned k = old->bkt;
  if (bs_bucket(nw->size) == k) {
    tc_tree t = {e->root[k], 0};
    tc_block *nb = below ? tree_prev(old) : tree_next(old);
    if (!nb || (below ? key_less(&t, nb, nw->stream, nw->size, nw->addr)
                      : !key_less(&t, nb, nw->stream, nw->size, nw->addr))) {
      tree_replace(&t, old, nw);
      e->root[k] = t.root;
      nw->bkt = (uint16_t)k;
      return;
    }
  }
  bs_erase(old);
  bs_insert(a, nw);
}

/* torch's insert_into_blocks: the GC age starts now. */
static inline void pool_insert(tc_alloc *a, tc_pool *p, tc_block *b) {
  b->gc_base = p->gc_calls;
  bs_insert(a, b);
}

#endif
