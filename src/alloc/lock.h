/* The allocator's lock (lock.c): a futex word taken inline, and combining
 * of contended calls, where the lock holder runs the requests that other
 * threads publish (lock.c says why). The holder runs them through
 * tc_alloc.run_req, which malloc.c sets, so this part names nothing above
 * it. */
#ifndef TC_ALLOC_LOCK_H
#define TC_ALLOC_LOCK_H
#include "alloc/types.h"
#include <stdatomic.h>
#include <stdint.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static inline int lk_try(tc_lock *l) {
  int z = 0;
  return atomic_load_explicit(&l->w, memory_order_relaxed) == 0 &&
         atomic_compare_exchange_strong_explicit(&l->w, &z, 1, memory_order_acquire, memory_order_relaxed);
}

void tc_lk_lock_slow(tc_lock *l);

static inline void lk_lock(tc_lock *l) {
  if (!lk_try(l)) tc_lk_lock_slow(l);
}

static inline void lk_unlock(tc_lock *l) {
  if (atomic_exchange_explicit(&l->w, 0, memory_order_release) == 2) {
#ifdef __linux__
    syscall(SYS_futex, &l->w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#endif
  }
}

/* A published request: one slot per thread (threads share slots modulo
 * TC_REQ_SLOTS). */
#define TC_REQ_SLOTS 64
enum { RQ_FREE, RQ_OWNED, RQ_PENDING, RQ_DONE };
enum { OP_MALLOC, OP_FREE };

struct tc_req {
  _Alignas(64) atomic_int state;
  int op, outcome; /* outcome 1: done; 0: the caller must take the lock */
  uint64_t size, stream, addr;
};

void tc_serve(tc_alloc *a);
int tc_combine(tc_alloc *a, int op, uint64_t size, uint64_t stream, uint64_t addr, uint64_t *out);

static inline void unlock_serving(tc_alloc *a) {
  if (atomic_load_explicit(&a->pending, memory_order_relaxed)) tc_serve(a);
  lk_unlock(&a->mu);
}

/* Take the lock, or have the current holder run the request: 1 when it
 * was run for us (done), 0 with the lock held. */
static inline int lock_or_combine(tc_alloc *a, int op, uint64_t size, uint64_t stream, uint64_t addr,
                                  uint64_t *out) {
  if (lk_try(&a->mu)) return 0;
  if (tc_combine(a, op, size, stream, addr, out)) return 1;
  lk_lock(&a->mu);
  return 0;
}

#endif
