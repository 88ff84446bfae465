/* thread_cache:N: per-thread caches of freed small blocks (tcache.h says
 * what they keep and which locks guard what). */
#include "alloc/tcache.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* The registry: every cache, each thread's caches, and teardown. Taken at
 * a cache's creation, at thread exit and when an allocator goes, never on
 * a hit or a put. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_key_t g_key;
static int g_key_ok;
static tc_tcache *g_all;
static _Thread_local tc_tcache *tl_head;
static _Thread_local struct {
  tc_alloc *a;
  tc_tcache *c;
} tl_last;

static void thread_exit(void *head);

/* fork: the child has one thread; caches of the others keep their blocks
 * (they go back at the next flush), and a lock one of them held must not
 * stay held. */
static void fork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void fork_child(void) {
  for (tc_tcache *c = g_all; c; c = c->gnext) atomic_store_explicit(&c->lk.w, 0, memory_order_relaxed);
  pthread_mutex_unlock(&g_mu);
}

static void init_once(void) {
  g_key_ok = pthread_key_create(&g_key, thread_exit) == 0;
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ------------------------------------------------------------------ */
/* the map of blocks this thread may take back (owner, or the device's
 * lock and the cache's)                                                */

static inline size_t map_home(const tc_tcache *c, uint64_t addr) {
  return (size_t)(((addr >> 9) * 0x9E3779B97F4A7C15ull) >> 20) & (c->mcap - 1);
}

static int map_grow(tc_tcache *c) {
  size_t cap = c->mcap ? 2 * c->mcap : 64;
  tc_block **m = (tc_block **)calloc(cap, sizeof *m), **old = c->map;
  if (!m) return 0;
  size_t ocap = c->mcap;
  c->map = m;
  c->mcap = cap;
  for (size_t i = 0; i < ocap; i++)
    if (old[i]) {
      size_t j = map_home(c, old[i]->addr);
      while (m[j]) j = (j + 1) & (cap - 1);
      m[j] = old[i];
    }
  free(old);
  return 1;
}

static int map_put(tc_tcache *c, tc_block *b) {
  if ((c->mlen + 1) * 4 > c->mcap * 3 && !map_grow(c)) return 0;
  size_t j = map_home(c, b->addr);
  while (c->map[j]) j = (j + 1) & (c->mcap - 1);
  c->map[j] = b;
  c->mlen++;
  return 1;
}

/* Remove and return the block at addr, or NULL (backward-shift delete). */
static tc_block *map_take(tc_tcache *c, uint64_t addr) {
  if (!c->mlen) return NULL;
  size_t m = c->mcap - 1, j = map_home(c, addr);
  while (c->map[j] && c->map[j]->addr != addr) j = (j + 1) & m;
  tc_block *b = c->map[j];
  if (!b) return NULL;
  c->map[j] = NULL;
  c->mlen--;
  for (size_t k = (j + 1) & m; c->map[k]; k = (k + 1) & m) {
    size_t h = map_home(c, c->map[k]->addr);
    /* the entry at k may move to the hole at j if its home is not in (j, k] */
    if ((k > j && (h <= j || h > k)) || (k < j && h <= j && h > k)) {
      c->map[j] = c->map[k];
      c->map[k] = NULL;
      j = k;
    }
  }
  return b;
}

/* ------------------------------------------------------------------ */
/* creation, thread exit, teardown                                      */

static void count(tc_tccount *t, int64_t n, int64_t bytes, int64_t req) {
  t->n += n;
  t->bytes += bytes;
  t->req += req;
}

/* Device lock held: return b, which left its cache, to the pool. */
static void release(tc_alloc *a, tc_block *b) {
  count(&a->tc_flushed, 1, (int64_t)b->size, (int64_t)b->requested);
  b->tco = NULL;
  a->tc_release(a, b);
}

/* Device lock held: c's blocks on `stream` (all: UINT64_MAX) go back. */
static int flush_one(tc_alloc *a, tc_tcache *c, uint64_t stream) {
  tc_block *out[TC_TCACHE_MAX_N];
  int k = 0, j = 0;
  lk_lock(&c->lk);
  for (int i = 0; i < c->n; i++) {
    tc_block *b = c->ent[i];
    if (stream == UINT64_MAX || b->stream == stream) {
      b->tcached = 0;
      out[k++] = b;
    } else {
      c->ent[j++] = b;
    }
  }
  c->n = j;
  lk_unlock(&c->lk);
  for (int i = 0; i < k; i++) release(a, out[i]);
  return k;
}

static void thread_exit(void *head) {
  pthread_mutex_lock(&g_mu);
  for (tc_tcache *c = (tc_tcache *)head, *nx; c; c = nx) {
    nx = c->tnext;
    tc_alloc *a = c->a; /* written only under g_mu */
    if (a) {
      lk_lock(&a->mu);
      flush_one(a, c, UINT64_MAX);
      lk_lock(&c->lk);
      for (size_t i = 0; i < c->mcap; i++)
        if (c->map[i]) c->map[i]->tco = NULL; /* their frees take the lock path */
      count(&a->tc_gone_hits, c->hits.n, c->hits.bytes, c->hits.req);
      count(&a->tc_gone_puts, c->puts.n, c->puts.bytes, c->puts.req);
      lk_unlock(&c->lk);
      if (c->prev) c->prev->next = c->next;
      else a->tcs = c->next;
      if (c->next) c->next->prev = c->prev;
      lk_unlock(&a->mu);
    }
    if (c->gprev) c->gprev->gnext = c->gnext;
    else g_all = c->gnext;
    if (c->gnext) c->gnext->gprev = c->gprev;
    free(c->map);
    free(c);
  }
  tl_head = NULL;
  tl_last.a = NULL;
  tl_last.c = NULL;
  pthread_mutex_unlock(&g_mu);
}

static SLOW_PATH tc_tcache *get_slow(tc_alloc *a) {
  pthread_once(&g_once, init_once);
  if (!g_key_ok) return NULL;
  pthread_mutex_lock(&g_mu);
  tc_tcache *found = NULL, **pp = &tl_head;
  while (*pp) { /* caches of allocators that are gone are dropped here */
    tc_tcache *c = *pp;
    if (c->a == a) found = c;
    if (c->a) {
      pp = &c->tnext;
      continue;
    }
    *pp = c->tnext;
    if (c->gprev) c->gprev->gnext = c->gnext;
    else g_all = c->gnext;
    if (c->gnext) c->gnext->gprev = c->gprev;
    free(c->map);
    free(c);
  }
  /* on lines of its own: its owner writes it on every hit and put */
  size_t sz = (sizeof *found + 63) & ~(size_t)63;
  if (!found && (found = (tc_tcache *)aligned_alloc(64, sz)) != NULL) {
    memset(found, 0, sz);
    found->a = a;
    found->tnext = tl_head;
    tl_head = found;
    found->gnext = g_all;
    if (g_all) g_all->gprev = found;
    g_all = found;
    lk_lock(&a->mu);
    found->next = a->tcs;
    if (a->tcs) a->tcs->prev = found;
    a->tcs = found;
    a->tc_ever = 1;
    lk_unlock(&a->mu);
  }
  (void)pthread_setspecific(g_key, tl_head);
  pthread_mutex_unlock(&g_mu);
  if (found) {
    tl_last.a = a;
    tl_last.c = found;
  }
  return found;
}

tc_tcache *tc_tcache_get(tc_alloc *a) {
  if (__builtin_expect(tl_last.a == a, 1)) return tl_last.c;
  return get_slow(a);
}

void tc_tcache_detach_all(tc_alloc *a) {
  if (!a->tc_ever) return;
  pthread_mutex_lock(&g_mu);
  for (tc_tcache *c = a->tcs; c; c = c->next) {
    lk_lock(&c->lk);
    c->a = NULL; /* its thread drops it at its next slow lookup or exit */
    c->n = 0;
    if (c->map) memset(c->map, 0, c->mcap * sizeof *c->map);
    c->mlen = 0;
    lk_unlock(&c->lk);
  }
  a->tcs = NULL;
  pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------------ */
/* hits and puts: the owner, its cache's lock only                      */

/* c was made for an allocator since gone, at a's address: look again. */
static int stale(tc_alloc *a, tc_tcache *c) {
  if (__builtin_expect(c->a == a, 1)) return 0;
  lk_unlock(&c->lk);
  tl_last.a = NULL;
  return 1;
}

int tc_tcache_take(tc_alloc *a, tc_tcache *c, uint64_t size, uint64_t rounded, uint64_t stream, uint64_t *addr) {
  lk_lock(&c->lk);
  if (stale(a, c)) return 0;
  if (!atomic_load_explicit(&a->tc_serve, memory_order_relaxed)) {
    lk_unlock(&c->lk);
    return 0;
  }
  for (int i = c->n; i-- > 0;) {
    tc_block *b = c->ent[i];
    if (b->size != rounded || b->stream != stream) continue;
    if (!map_put(c, b)) break;
    memmove(&c->ent[i], &c->ent[i + 1], (size_t)(c->n - 1 - i) * sizeof *c->ent);
    c->n--;
    b->tcached = 0;
    b->requested = size;
    count(&c->hits, 1, (int64_t)b->size, (int64_t)size);
    lk_unlock(&c->lk);
    *addr = b->addr;
    return 1;
  }
  lk_unlock(&c->lk);
  return 0;
}

void tc_tcache_track(tc_alloc *a, tc_tcache *c, tc_block *b) {
  if (b->size > TC_TCACHE_MAX || b->pidx != TCUDA_STAT_SMALL_POOL || b->pool->owner || b->nuses ||
      !atomic_load_explicit(&a->tc_serve, memory_order_relaxed))
    return;
  lk_lock(&c->lk);
  if (c->a == a && map_put(c, b)) b->tco = c;
  lk_unlock(&c->lk);
}

int tc_tcache_put(tc_alloc *a, uint64_t addr) {
  if (tl_last.a != a) return 0; /* no cache yet: this thread took nothing from a in the mode */
  tc_tcache *c = tl_last.c;
  lk_lock(&c->lk);
  if (stale(a, c)) return 0;
  int serve = atomic_load_explicit(&a->tc_serve, memory_order_relaxed);
  tc_block *b = serve ? map_take(c, addr) : NULL;
  if (!b) {
    lk_unlock(&c->lk);
    return 0;
  }
  tc_block *out[TC_TCACHE_MAX_N];
  int k = 0;
  if (c->n >= serve) { /* full: the older half goes back in one visit to the pool */
    k = c->n - serve / 2;
    for (int i = 0; i < k; i++) {
      out[i] = c->ent[i];
      out[i]->tcached = 0;
    }
    memmove(&c->ent[0], &c->ent[k], (size_t)(c->n - k) * sizeof *c->ent);
    c->n -= k;
  }
  c->ent[c->n++] = b;
  b->tcached = 1;
  count(&c->puts, 1, (int64_t)b->size, (int64_t)b->requested);
  lk_unlock(&c->lk);
  if (k) {
    lk_lock(&a->mu);
    for (int i = 0; i < k; i++) release(a, out[i]);
    unlock_serving(a);
  }
  return 1;
}

/* ------------------------------------------------------------------ */
/* the device's lock held                                               */

int tc_tcache_flush(tc_alloc *a, uint64_t stream) {
  int n = 0;
  for (tc_tcache *c = a->tcs; c; c = c->next) n += flush_one(a, c, stream);
  return n;
}

void tc_tcache_forget(tc_alloc *a, tc_block *b) {
  (void)a;
  tc_tcache *c = b->tco;
  if (!c) return;
  lk_lock(&c->lk);
  (void)map_take(c, b->addr);
  lk_unlock(&c->lk);
  b->tco = NULL;
}

void tc_tcache_update(tc_alloc *a) {
  int serve = a->tc_n > 0 && !a->trace && atomic_load_explicit(&a->ncaps, memory_order_relaxed) == 0 ? a->tc_n : 0;
  atomic_store_explicit(&a->tc_gate, a->tc_n > 0 ? 1 : (uint64_t)1 << 60, memory_order_relaxed);
  atomic_store_explicit(&a->tc_serve, serve, memory_order_relaxed);
  if (!serve) tc_tcache_flush(a, UINT64_MAX);
  if (a->tc_n) return;
  /* off for good: frees take the plain path, which does not look at maps */
  for (tc_tcache *c = a->tcs; c; c = c->next) {
    lk_lock(&c->lk);
    for (size_t i = 0; i < c->mcap; i++)
      if (c->map[i]) {
        c->map[i]->tco = NULL;
        c->map[i] = NULL;
      }
    c->mlen = 0;
    lk_unlock(&c->lk);
  }
}

static void sums(tc_alloc *a, tc_tccount *h, tc_tccount *p) {
  *h = a->tc_gone_hits;
  *p = a->tc_gone_puts;
  for (tc_tcache *c = a->tcs; c; c = c->next) {
    lk_lock(&c->lk);
    count(h, c->hits.n, c->hits.bytes, c->hits.req);
    count(p, c->puts.n, c->puts.bytes, c->puts.req);
    lk_unlock(&c->lk);
  }
}

/* A block in a cache was freed by its user: current = device - puts +
 * hits + flushed (each flushed block was counted once as a put), and the
 * totals since the last reset follow the same events. Peaks are the
 * device's, which count cached blocks: they may exceed the users' true
 * peak by the bytes cached. */
static void adjust(tcuda_stat_t *s, int64_t h, int64_t p, int64_t f, const int64_t base[3]) {
  s->current += h - p + f;
  s->allocated += h - base[0];
  s->freed += (p - base[1]) - (f - base[2]);
  if (s->peak < s->current) s->peak = s->current;
}

void tc_tcache_adjust(tc_alloc *a, tcuda_memory_stats_t *st) {
  if (!a->tc_ever) return;
  tc_tccount h, p, f = a->tc_flushed;
  sums(a, &h, &p);
  const tc_tccount *b = a->tc_base;
  const int64_t bn[3] = {b[0].n, b[1].n, b[2].n}, bb[3] = {b[0].bytes, b[1].bytes, b[2].bytes},
                br[3] = {b[0].req, b[1].req, b[2].req};
  static const int slots[] = {TCUDA_STAT_ALL, TCUDA_STAT_SMALL_POOL};
  for (int k = 0; k < 2; k++) {
    int i = slots[k];
    adjust(&st->allocation[i], h.n, p.n, f.n, bn);
    adjust(&st->active[i], h.n, p.n, f.n, bn);
    adjust(&st->allocated_bytes[i], h.bytes, p.bytes, f.bytes, bb);
    adjust(&st->active_bytes[i], h.bytes, p.bytes, f.bytes, bb);
    adjust(&st->requested_bytes[i], h.req, p.req, f.req, br);
  }
}

void tc_tcache_reset_peak(tc_alloc *a) {
  if (!a->tc_ever) return;
  tcuda_memory_stats_t u = a->st;
  tc_tcache_adjust(a, &u);
  static const int slots[] = {TCUDA_STAT_ALL, TCUDA_STAT_SMALL_POOL};
  for (int k = 0; k < 2; k++) {
    int i = slots[k];
    a->st.allocation[i].peak = u.allocation[i].current;
    a->st.active[i].peak = u.active[i].current;
    a->st.allocated_bytes[i].peak = u.allocated_bytes[i].current;
    a->st.active_bytes[i].peak = u.active_bytes[i].current;
    a->st.requested_bytes[i].peak = u.requested_bytes[i].current;
  }
}

void tc_tcache_reset_accumulated(tc_alloc *a) {
  if (!a->tc_ever) return;
  sums(a, &a->tc_base[0], &a->tc_base[1]);
  a->tc_base[2] = a->tc_flushed;
}

void tc_tcache_lock_all(tc_alloc *a) {
  for (tc_tcache *c = a->tcs; c; c = c->next) lk_lock(&c->lk);
}

void tc_tcache_unlock_all(tc_alloc *a) {
  for (tc_tcache *c = a->tcs; c; c = c->next) lk_unlock(&c->lk);
}

void tc_tcache_cached(tc_alloc *a, int64_t *blocks, int64_t *bytes) {
  *blocks = *bytes = 0;
  for (tc_tcache *c = a->tcs; c; c = c->next) {
    lk_lock(&c->lk);
    for (int i = 0; i < c->n; i++) {
      ++*blocks;
      *bytes += (int64_t)c->ent[i]->size;
    }
    lk_unlock(&c->lk);
  }
}
