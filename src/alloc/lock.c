/* The allocator's lock, and combining: under contention the lock holder
 * runs other threads' published requests (see below). */
#include "alloc/lock.h"
#include <sched.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static void lk_sleep(tc_lock *l) {
#ifdef __linux__
  syscall(SYS_futex, &l->w, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
#else
  (void)l;
  sched_yield();
#endif
}

void tc_lk_lock_slow(tc_lock *l) {
  for (int i = 0; i < 200; i++) {
    if (lk_try(l)) return;
    cpu_relax();
  }
  while (atomic_exchange_explicit(&l->w, 2, memory_order_acquire) != 0) lk_sleep(l);
}

/* ------------------------------------------------------------------ */
/* contended calls: combining                                           */

/* Under contention a plain lock moves the allocator's data (trees, stats,
 * hash table) to every new owner's core, and each call pays those misses:
 * eight threads went many times slower per call than one. Instead a
 * thread that finds the lock taken publishes its request in a slot, and
 * whoever holds the lock runs the published requests while the data is hot
 * in its cache. Only calls that need no backend work, no trace and no
 * capture are run for another thread (a cached malloc, a free without
 * record_stream); the rest, and anything that fails, goes back to its
 * caller, which takes the lock itself. Each request runs whole under the
 * lock, so every outcome is one of a serial order of the calls: the policy
 * is unchanged. */
#define TC_REQ_SPINS 4000 /* then the waiter blocks on the lock instead */
static _Thread_local int tl_slot = -1;
static atomic_int g_next_slot;

/* Under the lock: take the published requests and run them, a few rounds
 * while more come. The slots' lines are fetched together first, so their
 * transfers from the waiters' cores overlap. */
void tc_serve(tc_alloc *a) {
  for (int round = 0; round < 8; round++) {
    uint64_t m = atomic_exchange_explicit(&a->pending, 0, memory_order_acquire);
    if (!m) return;
    for (uint64_t t = m; t; t &= t - 1) __builtin_prefetch(&a->reqs[__builtin_ctzll(t)], 1);
    for (; m; m &= m - 1) {
      tc_req *r = &a->reqs[__builtin_ctzll(m)];
      r->outcome = a->run_req(a, r);
      atomic_store_explicit(&r->state, RQ_DONE, memory_order_release);
    }
  }
}

/* The lock was taken: publish the request and wait for a lock holder to
 * run it, or take the lock to run everyone's. Returns 1 when done (r->addr
 * for malloc), 0 when the caller must run the call under the lock itself. */
int tc_combine(tc_alloc *a, int op, uint64_t size, uint64_t stream, uint64_t addr, uint64_t *out) {
  if (!a->reqs) return 0;
  if (tl_slot < 0) tl_slot = atomic_fetch_add_explicit(&g_next_slot, 1, memory_order_relaxed) % TC_REQ_SLOTS;
  int i = tl_slot;
  uint64_t bit = (uint64_t)1 << i;
  tc_req *r = &a->reqs[i];
  int want = RQ_FREE;
  if (!atomic_compare_exchange_strong_explicit(&r->state, &want, RQ_OWNED, memory_order_acquire,
                                               memory_order_relaxed))
    return 0; /* another thread shares this slot right now */
  r->op = op;
  r->size = size;
  r->stream = stream;
  r->addr = addr;
  atomic_store_explicit(&r->state, RQ_PENDING, memory_order_relaxed);
  atomic_fetch_or_explicit(&a->pending, bit, memory_order_release); /* publishes the fields */
  int outcome = 0;
  for (int spins = 1;; spins++) {
    if (atomic_load_explicit(&r->state, memory_order_acquire) == RQ_DONE) {
      outcome = r->outcome;
      break;
    }
    /* the holder left before our bit was set: become the holder */
    if (lk_try(&a->mu)) {
      unlock_serving(a);
      continue;
    }
    if (spins > TC_REQ_SPINS) { /* the holder is slow (a cudaMalloc): block */
      lk_lock(&a->mu);
      if (atomic_load_explicit(&r->state, memory_order_acquire) == RQ_DONE) {
        outcome = r->outcome;
      } else { /* not taken yet, and nobody can take it while we hold the lock */
        atomic_fetch_and_explicit(&a->pending, ~bit, memory_order_relaxed);
        outcome = a->run_req(a, r);
      }
      unlock_serving(a);
      break;
    }
    cpu_relax();
  }
  if (outcome && out) *out = r->addr;
  atomic_store_explicit(&r->state, RQ_FREE, memory_order_release);
  return outcome;
}
