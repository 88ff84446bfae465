/* One backend adaptor for both replays (tracereplay.c, snapreplay.c).
 *
 * It forwards every callback of src/alloc/backend.h to an inner backend
 * (the simulator or CUDA), and calls the replay's hooks around those that
 * place memory, so that a replay can follow recorded addresses, log the
 * ones it got, or see segments go. The optional callbacks (unmap_keep,
 * release_kept) are offered only when the inner backend has them, so the
 * allocator sees the inner backend's own abilities. */
#ifndef TC_REPLAY_BACKEND_WRAP_H
#define TC_REPLAY_BACKEND_WRAP_H
#include "alloc/backend.h"

/* Every hook is optional; `user` is the replay's. */
typedef struct tc_bwrap_hooks {
  /* Before a segment_alloc (e.g. tc_backend_sim_place_next); an error
   * fails the call. After it, with its status (addr set on success). */
  tcuda_status (*before_alloc)(void *user, uint64_t size);
  void (*after_alloc)(void *user, tcuda_status st, uint64_t addr, uint64_t size);
  /* Before a va_reserve (e.g. tc_backend_sim_reserve_at). */
  tcuda_status (*before_reserve)(void *user, uint64_t size);
  /* Before and after a map. */
  tcuda_status (*before_map)(void *user, uint64_t addr, uint64_t size);
  void (*after_map)(void *user, tcuda_status st, uint64_t addr, uint64_t size);
  /* Before memory goes back: segment_free, unmap and unmap_keep. */
  void (*before_release)(void *user, uint64_t addr, uint64_t size);
  /* Events of the replay's own, completing where a recording says: with
   * event_record set, the four event calls go here instead (a NULL
   * event_release does nothing). */
  tcuda_status (*event_record)(void *user, uint64_t stream, void **event);
  int (*event_query)(void *user, void *event);
  tcuda_status (*event_synchronize)(void *user, void *event);
  void (*event_release)(void *user, void *event);
} tc_bwrap_hooks;

typedef struct tc_bwrap {
  tc_backend be; /* what the allocator is given */
  const tc_backend *inner;
  tc_bwrap_hooks hooks;
  void *user;
} tc_bwrap;

/* Set w up over inner; w must stay where it is while w->be is in use.
 * hooks may be NULL (plain forwarding). */
void tc_bwrap_init(tc_bwrap *w, const tc_backend *inner, const tc_bwrap_hooks *hooks, void *user);

#endif
