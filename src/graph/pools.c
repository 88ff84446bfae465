/* Private pools for callers that manage captures themselves (torch's
 * beginAllocateToPool / endAllocateToPool / releasePool, which torch's
 * CUDAGraph and MemPool call on their allocator): the public face of the
 * allocator's pool routing that graph.c uses for tcuda's own graphs. */
#include "graph/pools.h"
#include "core/error.h"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* One routing in progress: the caller's filter, keyed by allocator and pool
 * so that end can free it once the allocator no longer calls it. */
typedef struct route {
  int (*fn)(void *user, struct CUstream_st *stream);
  void *user;
  tc_alloc *a;
  uint64_t id[2];
  struct route *next;
} route;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static route *g_routes;

static int route_filter(void *ctx, uint64_t stream) {
  route *r = (route *)ctx;
  return r->fn(r->user, (struct CUstream_st *)(uintptr_t)stream) != 0;
}

static tcuda_status check_pool(const char *F, const tcuda_graph_pool_t *pool) {
  TC_CHECK_ARG(F, pool != NULL, "pool");
  if (!pool->id[0] && !pool->id[1])
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: pool (0,0) is the default pool, not a private pool", F);
  return TCUDA_SUCCESS;
}

/* The allocator's message under func's name. */
static tcuda_status renamed(const char *F, tcuda_status s) {
  char msg[TC_ERRMSG_MAX];
  snprintf(msg, sizeof msg, "%s", tcuda_last_error());
  return tc_error(s, "%s: %s", F, msg);
}

tcuda_status tc_pools_begin(const char *F, tc_alloc *a, const tcuda_graph_pool_t *pool,
                            int (*filter)(void *user, struct CUstream_st *stream), void *user) {
  TC_CHECK_ARG(F, filter != NULL, "filter");
  tcuda_status s = check_pool(F, pool);
  if (s) return s;
  route *r = calloc(1, sizeof *r);
  if (!r) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  *r = (route){.fn = filter, .user = user, .a = a, .id = {pool->id[0], pool->id[1]}};
  pthread_mutex_lock(&g_mu);
  if ((s = tc_alloc_begin_allocate_to_pool(a, pool->id, route_filter, r))) {
    pthread_mutex_unlock(&g_mu);
    free(r);
    return renamed(F, s);
  }
  r->next = g_routes;
  g_routes = r;
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}

tcuda_status tc_pools_end(const char *F, tc_alloc *a, const tcuda_graph_pool_t *pool) {
  tcuda_status s = check_pool(F, pool);
  if (s) return s;
  pthread_mutex_lock(&g_mu);
  if ((s = tc_alloc_end_allocate_to_pool(a, pool->id))) {
    pthread_mutex_unlock(&g_mu);
    return renamed(F, s);
  }
  /* the allocator calls this route's filter no more */
  for (route **pp = &g_routes; *pp; pp = &(*pp)->next) {
    route *r = *pp;
    if (r->a == a && r->id[0] == pool->id[0] && r->id[1] == pool->id[1]) {
      *pp = r->next;
      free(r);
      break;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}

tcuda_status tc_pools_release(const char *F, tc_alloc *a, const tcuda_graph_pool_t *pool) {
  tcuda_status s = check_pool(F, pool);
  if (s) return s;
  return (s = tc_alloc_release_pool(a, pool->id)) ? renamed(F, s) : TCUDA_SUCCESS;
}

static int never(void *ctx, uint64_t stream) {
  (void)ctx, (void)stream;
  return 0;
}

tcuda_status tc_pools_retain(const char *F, tc_alloc *a, const tcuda_graph_pool_t *pool) {
  tcuda_status s = check_pool(F, pool);
  if (s) return s;
  /* begin adds the use (making the pool); end stops the routing it began.
   * Under g_mu, so no begin of the same pool runs between the two. */
  pthread_mutex_lock(&g_mu);
  if (!(s = tc_alloc_begin_allocate_to_pool(a, pool->id, never, NULL))) s = tc_alloc_end_allocate_to_pool(a, pool->id);
  pthread_mutex_unlock(&g_mu);
  return s ? renamed(F, s) : TCUDA_SUCCESS;
}

tcuda_status tc_pools_use_count(const char *F, tc_alloc *a, const tcuda_graph_pool_t *pool, int *use_count) {
  TC_CHECK_ARG(F, use_count != NULL, "use_count");
  *use_count = 0;
  tcuda_status s = check_pool(F, pool);
  if (s) return s;
  int64_t segs = 0;
  if (tc_alloc_pool_info(a, pool->id, use_count, &segs)) { /* never made, or gone */
    tcuda_clear_error();
    *use_count = 0;
  }
  return TCUDA_SUCCESS;
}

tcuda_status tc_pools_set_no_split(const char *F, tc_alloc *a, const tcuda_graph_pool_t *pool) {
  tcuda_status s = check_pool(F, pool);
  if (s) return s;
  return (s = tc_alloc_set_pool_no_split(a, pool->id)) ? renamed(F, s) : TCUDA_SUCCESS;
}

tcuda_status tc_pools_set_use_on_oom(const char *F, tc_alloc *a, const tcuda_graph_pool_t *pool, int use) {
  tcuda_status s = check_pool(F, pool);
  if (s) return s;
  return (s = tc_alloc_set_pool_use_on_oom(a, pool->id, use)) ? renamed(F, s) : TCUDA_SUCCESS;
}

tcuda_status tc_pools_set_allocator(const char *F, tc_alloc *a, const tcuda_graph_pool_t *pool,
                                    const tcuda_pool_allocator_t *allocator) {
  TC_CHECK_ARG(F, allocator != NULL, "allocator");
  TC_CHECK_ARG(F, allocator->alloc != NULL, "allocator->alloc");
  TC_CHECK_ARG(F, allocator->free != NULL, "allocator->free");
  tcuda_status s = check_pool(F, pool);
  if (s) return s;
  return (s = tc_alloc_set_pool_allocator(a, pool->id, allocator)) ? renamed(F, s) : TCUDA_SUCCESS;
}

/* ---- public: resolve the device's allocator ---- */

#define ON_DEVICE(F, device, call)                     \
  do {                                                 \
    tc_alloc *a_;                                      \
    tcuda_status s_ = tc_alloc_of_device(F, &device, &a_); \
    if (s_) return s_;                                 \
    return call;                                       \
  } while (0)

tcuda_status tcuda_pool_begin_allocate(int device, const tcuda_graph_pool_t *pool,
                                       int (*filter)(void *user, struct CUstream_st *stream), void *user) {
  static const char *F = "tcuda_pool_begin_allocate";
  ON_DEVICE(F, device, tc_pools_begin(F, a_, pool, filter, user));
}

tcuda_status tcuda_pool_end_allocate(int device, const tcuda_graph_pool_t *pool) {
  static const char *F = "tcuda_pool_end_allocate";
  ON_DEVICE(F, device, tc_pools_end(F, a_, pool));
}

tcuda_status tcuda_pool_release(int device, const tcuda_graph_pool_t *pool) {
  static const char *F = "tcuda_pool_release";
  ON_DEVICE(F, device, tc_pools_release(F, a_, pool));
}

tcuda_status tcuda_pool_retain(int device, const tcuda_graph_pool_t *pool) {
  static const char *F = "tcuda_pool_retain";
  ON_DEVICE(F, device, tc_pools_retain(F, a_, pool));
}

tcuda_status tcuda_pool_use_count(int device, const tcuda_graph_pool_t *pool, int *use_count) {
  static const char *F = "tcuda_pool_use_count";
  if (use_count) *use_count = 0;
  ON_DEVICE(F, device, tc_pools_use_count(F, a_, pool, use_count));
}

tcuda_status tcuda_pool_set_no_split(int device, const tcuda_graph_pool_t *pool) {
  static const char *F = "tcuda_pool_set_no_split";
  ON_DEVICE(F, device, tc_pools_set_no_split(F, a_, pool));
}

tcuda_status tcuda_pool_set_allocator(int device, const tcuda_graph_pool_t *pool,
                                      const tcuda_pool_allocator_t *allocator) {
  static const char *F = "tcuda_pool_set_allocator";
  ON_DEVICE(F, device, tc_pools_set_allocator(F, a_, pool, allocator));
}

tcuda_status tcuda_pool_set_use_on_oom(int device, const tcuda_graph_pool_t *pool, int use) {
  static const char *F = "tcuda_pool_set_use_on_oom";
  ON_DEVICE(F, device, tc_pools_set_use_on_oom(F, a_, pool, use));
}
