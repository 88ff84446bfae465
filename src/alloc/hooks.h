/* Allocator event hooks: the one way the layers above the allocator take
 * part in its work. src/alloc raises the events; the layers that want them
 * register here, so nothing in src/alloc names them.
 *
 *   created  a device's public allocator was made (history attaches to it)
 *   free     tcuda_free may take the pointer over (IPC parks an exported
 *            block that a consumer still uses)
 *   reclaim  an allocation ran out of memory: the hooks free what they can
 *            and, if any did, the allocation is tried once more (IPC frees
 *            parked blocks that consumers released)
 *   oom      an allocation failed for good: internal hooks first (history
 *            writes a snapshot and names it in the OOM message), then the
 *            public observers (tcuda_oom_observer_add)
 *
 * Hooks run on the thread that raised the event, outside the allocator's
 * lock; raising takes no lock on the malloc and free paths. Internal hooks
 * are never removed (the public observers are, by id). */
#ifndef TC_ALLOC_HOOKS_H
#define TC_ALLOC_HOOKS_H
#include "tcuda.h"
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tc_alloc tc_alloc;

/* ---- registering (up to 8 of a kind; adding one twice is a no-op) ---- */
/* Called once per device, under the lock of api.c's allocator registry
 * (so it must not ask that registry for an allocator). stream_id maps a
 * stream key to its tcuda_stream_t.id. */
typedef void (*tc_created_hook)(tc_alloc *a, int device, int64_t (*stream_id)(uint64_t key));
tcuda_status tc_hook_on_created(tc_created_hook fn);
/* 1: the hook took ptr, and the allocator does not see this free. One
 * free hook at most: a pointer has one owner. */
typedef int (*tc_free_hook)(void *ptr);
tcuda_status tc_hook_on_free(tc_free_hook fn);
/* Returns how many blocks it freed. */
typedef int (*tc_reclaim_hook)(void);
tcuda_status tc_hook_on_reclaim(tc_reclaim_hook fn);
/* Returns text for the end of the OOM message ("; memory snapshot written
 * to PATH"), or NULL or "". */
typedef const char *(*tc_oom_hook)(int device, size_t requested);
tcuda_status tc_hook_on_oom(tc_oom_hook fn);

/* ---- raising (api.c) ---- */
void tc_hooks_created(tc_alloc *a, int device, int64_t (*stream_id)(uint64_t key));
/* Every free asks the free hook: one atomic load of a slot that only
 * tc_hook_on_free writes. */
extern _Atomic(tc_free_hook) tc_hooks_free_slot;
static inline int tc_hooks_free(void *ptr) {
  tc_free_hook fn = atomic_load_explicit(&tc_hooks_free_slot, memory_order_acquire);
  return fn && fn(ptr);
}
/* The reclaim hooks; how many blocks they freed in all. */
int tc_hooks_reclaim(void);
/* An allocation of `requested` bytes on `device` ran out of memory: the
 * internal hooks, then the public observers with a's stats (zeros when a is
 * NULL). Call outside every allocator lock. Keeps the thread's error status
 * and message, with the hooks' notes appended to it. */
void tc_hooks_oom(tc_alloc *a, int device, size_t requested);

#endif
