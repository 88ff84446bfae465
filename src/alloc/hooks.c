/* The allocator's event hooks (hooks.h): internal hooks that the layers
 * above register, and torch's attachOutOfMemoryObserver for C callers.
 * OOM hooks and observers run on the thread that hit the OOM, after the
 * allocator's lock is released, so they may call back into tcuda (stats,
 * snapshots, frees). */
#include "alloc/hooks.h"
#include "alloc/alloc.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define MAX_OBSERVERS 64
#define MAX_HOOKS 8

enum { HOOK_CREATED, HOOK_RECLAIM, HOOK_OOM, HOOK_KINDS };

/* Internal hooks, by kind. Slots fill in order and are never emptied, so a
 * raiser walks them with atomic loads up to the first empty one and takes
 * no lock. Stored as one function type, called as their own. */
typedef void (*any_fn)(void);
static _Atomic(any_fn) g_hooks[HOOK_KINDS][MAX_HOOKS];
_Atomic(tc_free_hook) tc_hooks_free_slot;

typedef struct observer {
  void (*fn)(void *user, int device, size_t requested, const tcuda_memory_stats_t *stats);
  void *user;
  int id; /* 0: slot free */
} observer;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* registration and the observers */
static observer g_obs[MAX_OBSERVERS];
static int g_next_id = 1;

static tcuda_status add_hook(const char *func, int kind, any_fn fn) {
  TC_CHECK_ARG(func, fn != NULL, "fn");
  pthread_mutex_lock(&g_mu);
  int k = 0;
  any_fn cur = NULL;
  while (k < MAX_HOOKS && (cur = atomic_load_explicit(&g_hooks[kind][k], memory_order_relaxed)) && cur != fn) k++;
  if (k < MAX_HOOKS && !cur) atomic_store_explicit(&g_hooks[kind][k], fn, memory_order_release);
  pthread_mutex_unlock(&g_mu);
  if (k == MAX_HOOKS) return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: %d hooks already", func, MAX_HOOKS);
  return TCUDA_SUCCESS;
}

/* The kind's k-th hook, NULL past the last. */
static any_fn hook_at(int kind, int k) {
  return k < MAX_HOOKS ? atomic_load_explicit(&g_hooks[kind][k], memory_order_acquire) : NULL;
}

tcuda_status tc_hook_on_created(tc_created_hook fn) {
  return add_hook("tc_hook_on_created", HOOK_CREATED, (any_fn)fn);
}

tcuda_status tc_hook_on_free(tc_free_hook fn) {
  TC_CHECK_ARG("tc_hook_on_free", fn != NULL, "fn");
  pthread_mutex_lock(&g_mu);
  tc_free_hook cur = atomic_load_explicit(&tc_hooks_free_slot, memory_order_relaxed);
  if (!cur) atomic_store_explicit(&tc_hooks_free_slot, fn, memory_order_release);
  pthread_mutex_unlock(&g_mu);
  if (cur && cur != fn) return tc_error(TCUDA_ERROR_INVALID_STATE, "tc_hook_on_free: another free hook is set");
  return TCUDA_SUCCESS;
}

tcuda_status tc_hook_on_reclaim(tc_reclaim_hook fn) {
  return add_hook("tc_hook_on_reclaim", HOOK_RECLAIM, (any_fn)fn);
}
tcuda_status tc_hook_on_oom(tc_oom_hook fn) { return add_hook("tc_hook_on_oom", HOOK_OOM, (any_fn)fn); }

void tc_hooks_created(tc_alloc *a, int device, int64_t (*stream_id)(uint64_t key)) {
  any_fn fn;
  for (int k = 0; (fn = hook_at(HOOK_CREATED, k)); k++) ((tc_created_hook)fn)(a, device, stream_id);
}

int tc_hooks_reclaim(void) {
  int freed = 0;
  any_fn fn;
  for (int k = 0; (fn = hook_at(HOOK_RECLAIM, k)); k++) freed += ((tc_reclaim_hook)fn)();
  return freed;
}

tcuda_status tcuda_oom_observer_add(void (*fn)(void *user, int device, size_t requested,
                                               const tcuda_memory_stats_t *stats),
                                    void *user, int *id) {
  static const char *F = "tcuda_oom_observer_add";
  TC_CHECK_ARG(F, fn != NULL, "fn");
  TC_CHECK_ARG(F, id != NULL, "id");
  pthread_mutex_lock(&g_mu);
  int k = 0;
  while (k < MAX_OBSERVERS && g_obs[k].id) k++;
  if (k < MAX_OBSERVERS) {
    g_obs[k] = (observer){fn, user, g_next_id++};
    *id = g_obs[k].id;
  }
  pthread_mutex_unlock(&g_mu);
  if (k == MAX_OBSERVERS)
    return tc_error(TCUDA_ERROR_INVALID_STATE, "%s: %d observers are registered already (the limit)", F,
                    MAX_OBSERVERS);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_oom_observer_remove(int id) {
  static const char *F = "tcuda_oom_observer_remove";
  pthread_mutex_lock(&g_mu);
  int k = 0;
  while (k < MAX_OBSERVERS && (id <= 0 || g_obs[k].id != id)) k++;
  if (k < MAX_OBSERVERS) memset(&g_obs[k], 0, sizeof g_obs[k]);
  pthread_mutex_unlock(&g_mu);
  if (k == MAX_OBSERVERS)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: id %d is not a registered OOM observer", F, id);
  return TCUDA_SUCCESS;
}

void tc_hooks_oom(tc_alloc *a, int device, size_t requested) {
  observer obs[MAX_OBSERVERS];
  int nobs = 0;
  /* Copy under the lock, call without it: an observer may remove itself. */
  pthread_mutex_lock(&g_mu);
  for (int k = 0; k < MAX_OBSERVERS; k++)
    if (g_obs[k].id) obs[nobs++] = g_obs[k];
  pthread_mutex_unlock(&g_mu);
  if (!nobs && !hook_at(HOOK_OOM, 0)) return;
  /* The caller's OOM message must survive whatever the observers call. */
  tcuda_status saved = tcuda_last_status();
  static _Thread_local char msg[TC_ERRMSG_MAX];
  snprintf(msg, sizeof msg, "%s", tcuda_last_error());
  any_fn fn;
  for (int k = 0; (fn = hook_at(HOOK_OOM, k)); k++) {
    const char *note = ((tc_oom_hook)fn)(device, requested);
    if (note && *note) { /* the message carries it from now on */
      size_t len = strlen(msg);
      snprintf(msg + len, sizeof msg - len, "%s", note);
      if (saved) tc_error(saved, "%s", msg);
    }
  }
  if (nobs) {
    tcuda_memory_stats_t st;
    memset(&st, 0, sizeof st);
    if (a) tc_alloc_get_stats(a, &st);
    for (int k = 0; k < nobs; k++) obs[k].fn(obs[k].user, device, requested, &st);
  }
  if (saved) tc_error(saved, "%s", msg);
  else tcuda_clear_error();
}
