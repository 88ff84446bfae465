/* Out-of-memory observers: torch's attachOutOfMemoryObserver for C callers,
 * plus internal hooks for other tcuda layers (snapshot-on-OOM). Observers
 * run on the thread that hit the OOM, after the allocator's lock is
 * released, so they may call back into tcuda (stats, snapshots, frees). */
#include "alloc/alloc.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define MAX_OBSERVERS 64
#define MAX_HOOKS 8

typedef struct observer {
  void (*fn)(void *user, int device, size_t requested, const tcuda_memory_stats_t *stats);
  void *user;
  int id; /* 0: slot free */
} observer;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static observer g_obs[MAX_OBSERVERS];
static int g_next_id = 1;
static void (*g_hooks[MAX_HOOKS])(int, size_t);

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

tcuda_status tc_oom_internal_hook(void (*fn)(int device, size_t requested)) {
  TC_CHECK_ARG("tc_oom_internal_hook", fn != NULL, "fn");
  pthread_mutex_lock(&g_mu);
  int k = 0, free_slot = -1;
  for (; k < MAX_HOOKS && g_hooks[k] != fn; k++)
    if (!g_hooks[k] && free_slot < 0) free_slot = k;
  int ok = k < MAX_HOOKS || free_slot >= 0;
  if (k == MAX_HOOKS && free_slot >= 0) g_hooks[free_slot] = fn;
  pthread_mutex_unlock(&g_mu);
  if (!ok) return tc_error(TCUDA_ERROR_INVALID_STATE, "tc_oom_internal_hook: %d hooks already", MAX_HOOKS);
  return TCUDA_SUCCESS;
}

void tc_oom_notify(int device, size_t requested) {
  observer obs[MAX_OBSERVERS];
  void (*hooks[MAX_HOOKS])(int, size_t);
  int nobs = 0, nhooks = 0;
  /* Copy under the lock, call without it: an observer may remove itself. */
  pthread_mutex_lock(&g_mu);
  for (int k = 0; k < MAX_HOOKS; k++)
    if (g_hooks[k]) hooks[nhooks++] = g_hooks[k];
  for (int k = 0; k < MAX_OBSERVERS; k++)
    if (g_obs[k].id) obs[nobs++] = g_obs[k];
  pthread_mutex_unlock(&g_mu);
  if (!nobs && !nhooks) return;
  /* The caller's OOM message must survive whatever the observers call. */
  tcuda_status saved = tcuda_last_status();
  static _Thread_local char msg[TC_ERRMSG_MAX];
  snprintf(msg, sizeof msg, "%s", tcuda_last_error());
  for (int k = 0; k < nhooks; k++) hooks[k](device, requested);
  if (nobs) {
    tcuda_memory_stats_t st;
    tc_alloc *a = NULL;
    int d = device;
    memset(&st, 0, sizeof st);
    if (!tc_alloc_of_device("tc_oom_notify", &d, &a) && a) tc_alloc_get_stats(a, &st);
    for (int k = 0; k < nobs; k++) obs[k].fn(obs[k].user, device, requested, &st);
  }
  if (saved) tc_error(saved, "%s", msg);
  else tcuda_clear_error();
}
