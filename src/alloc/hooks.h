/* Allocator event hooks: the one way the layers above the allocator take
 * part in its work. src/alloc raises the events; the layers that want them
 * register here, so nothing in src/alloc names them.
 *
 *   oom   an allocation failed for good: internal hooks first, then the
 *         public observers (tcuda_oom_observer_add)
 *
 * Hooks run on the thread that raised the event. Internal hooks are never
 * removed (the public observers are, by id). */
#ifndef TC_ALLOC_HOOKS_H
#define TC_ALLOC_HOOKS_H
#include "tcuda.h"
#include <stddef.h>
#include <stdint.h>

typedef struct tc_alloc tc_alloc;

/* ---- registering (up to 8 of a kind; adding one twice is a no-op) ---- */
typedef void (*tc_oom_hook)(int device, size_t requested);
tcuda_status tc_hook_on_oom(tc_oom_hook fn);

/* ---- raising (api.c) ---- */
/* An allocation of `requested` bytes on `device` ran out of memory: the
 * internal hooks, then the public observers with a's stats (zeros when a is
 * NULL). Call outside every allocator lock. Keeps the thread's error status
 * and message. */
void tc_hooks_oom(tc_alloc *a, int device, size_t requested);

#endif
