/* The public private-pool calls (tcuda_pool_*) on a given allocator: the
 * public functions resolve the device's allocator and call these; tests
 * call them on simulated allocators. Errors name func. */
#ifndef TC_GRAPH_POOLS_H
#define TC_GRAPH_POOLS_H
#include "alloc/alloc.h"

tcuda_status tc_pools_begin(const char *func, tc_alloc *a, const tcuda_graph_pool_t *pool,
                            int (*filter)(void *user, struct CUstream_st *stream), void *user);
tcuda_status tc_pools_end(const char *func, tc_alloc *a, const tcuda_graph_pool_t *pool);
tcuda_status tc_pools_release(const char *func, tc_alloc *a, const tcuda_graph_pool_t *pool);
tcuda_status tc_pools_retain(const char *func, tc_alloc *a, const tcuda_graph_pool_t *pool);
tcuda_status tc_pools_use_count(const char *func, tc_alloc *a, const tcuda_graph_pool_t *pool, int *use_count);
tcuda_status tc_pools_set_no_split(const char *func, tc_alloc *a, const tcuda_graph_pool_t *pool);
tcuda_status tc_pools_set_use_on_oom(const char *func, tc_alloc *a, const tcuda_graph_pool_t *pool, int use);
tcuda_status tc_pools_set_allocator(const char *func, tc_alloc *a, const tcuda_graph_pool_t *pool,
                                    const tcuda_pool_allocator_t *allocator);

#endif
