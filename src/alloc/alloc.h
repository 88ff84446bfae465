/* The caching allocator's internal contract: tc_alloc_* (the policy) and
 * the process's per-device allocators (api.c). Event hooks: hooks.h.
 *
 * The policy is pure C: it includes no CUDA header and touches
 * device memory only through a tc_backend (backend.h). Its settings are a
 * tc_alloc_config (config.h). Both headers come with this one.
 *
 * A stream key is the raw cudaStream_t value (0 = legacy default stream);
 * PyTorch orders free blocks by it.
 *
 * ---- the module's map: each part, its header, what it holds ----
 * From the top down. A part's header includes only headers of parts below
 * it, and a .c file calls only parts below it; lock.c reaches malloc.c's
 * request runner through a function pointer set at creation.
 *
 *   api.c        alloc.h       the process's allocators, the public memory calls
 *   malloc.c     alloc.h       malloc, free, empty_cache, create, config: torch's
 *                              policy, joined by compact at compact.h's hook points
 *   compact.c    compact.h     policy:compact: the budget's trim, next fit
 *   pools.c      pools.h       pool pairs, graph private pools, captures
 *   events.c     events.h      record_stream's events
 *   expandable.c expandable.h  expandable segments: reservations mapped by page
 *   block.c      block.h       block structs, segments, merge, free_block
 *   freeset.c    freeset.h     free blocks by (stream, size, addr); the treap
 *   stats.c      stats.h       the counters every part records, the trace;
 *                              stats, resets, snapshot, block lookup (alloc.h)
 *   blockmap.c   blockmap.h    allocated blocks by address (hash table)
 *   tcache.c     tcache.h      thread_cache:N, per-thread caches of small blocks;
 *                              frees through tc_alloc.tc_release (malloc.c)
 *   lock.c       lock.h        the lock, combining of contended calls
 *   (none)       types.h       the shared types, hot-path attributes
 * and beside the policy:
 *   config.c     config.h      TCUDA_ALLOC_CONF and its key table
 *   backend_cuda.c, backend_sim.c  backend.h  the device: CUDA, or simulated
 *   hooks.c      hooks.h       events for the layers above
 *   host.c       host.h        the pinned host allocator
 */
#ifndef TC_ALLOC_H
#define TC_ALLOC_H
#include "tcuda.h"
#include "core/error.h"
#include "alloc/backend.h"
#include "alloc/config.h"
#include <stddef.h>
#include <stdint.h>

/* ---- the per-device caching allocator ---- */
typedef struct tc_alloc tc_alloc;

/* total_memory: the device's totalGlobalMem, for the memory fraction. */
tcuda_status tc_alloc_create(int device, const tc_backend *be, const tc_alloc_config *cfg,
                             uint64_t total_memory, tc_alloc **out);
/* Releases every segment through the backend, live blocks included. */
void tc_alloc_destroy(tc_alloc *a);

/* size 0 gives *addr = 0 and success, touching nothing (PyTorch). */
tcuda_status tc_alloc_malloc(tc_alloc *a, uint64_t size, uint64_t stream, uint64_t *addr);
/* Unknown or already-freed address: TCUDA_ERROR_INVALID_POINTER, nothing changed. */
tcuda_status tc_alloc_free(tc_alloc *a, uint64_t addr);
tcuda_status tc_alloc_record_stream(tc_alloc *a, uint64_t addr, uint64_t stream);
tcuda_status tc_alloc_empty_cache(tc_alloc *a);

void tc_alloc_get_stats(tc_alloc *a, tcuda_memory_stats_t *out);
void tc_alloc_reset_peak(tc_alloc *a);
void tc_alloc_reset_accumulated(tc_alloc *a);
tcuda_status tc_alloc_set_memory_fraction(tc_alloc *a, double fraction);
double tc_alloc_get_memory_fraction(tc_alloc *a);

/* Every segment and block, sorted by address; free with tc_snapshot_free. */
tcuda_status tc_alloc_snapshot(tc_alloc *a, tcuda_snapshot_t **out);
void tc_snapshot_free(tcuda_snapshot_t *s);

/* Block lookup for the public API and IPC: the block holding addr. */
tcuda_status tc_alloc_block_info(tc_alloc *a, uint64_t addr, uint64_t *block_addr, uint64_t *block_size,
                                 uint64_t *segment_addr, uint64_t *segment_size);

/* ---- sizes, the live config, ownership (malloc.c, stats.c) ---- */
/* PyTorch's round_size() under a config (512-rounding or power-2 divisions). */
uint64_t tc_alloc_round_size(const tc_alloc_config *cfg, uint64_t size);
/* PyTorch's get_allocation_size(): the segment size for a rounded size. */
uint64_t tc_alloc_segment_size(const tc_alloc_config *cfg, uint64_t rounded);

/* Replace the live config (torch's settings are global and read per call).
 * The max_split_size stat keeps the value from creation, as in torch. */
void tc_alloc_set_config(tc_alloc *a, const tc_alloc_config *cfg);
void tc_alloc_get_config(tc_alloc *a, tc_alloc_config *out);
int tc_alloc_device(const tc_alloc *a);
/* Tests: 1 (and *why) when the free-block index disagrees with the
 * segments; see freeset.c. */
int tc_alloc_self_check(tc_alloc *a, char *why, size_t n);
/* Free addr if this allocator handed it out: returns 1 and sets *status;
 * returns 0, with no message and nothing changed, if addr is not its own. */
int tc_alloc_free_if_owned(tc_alloc *a, uint64_t addr, tcuda_status *status);
/* thread_cache: stream is being destroyed; blocks cached for it go back. */
void tc_alloc_stream_gone(tc_alloc *a, uint64_t stream);
/* record_stream with a stream that lives on another device. */
tcuda_status tc_alloc_record_stream_on(tc_alloc *a, uint64_t addr, uint64_t stream, int stream_device);

/* Optional trace of PyTorch's TraceEntry actions, called under the
 * allocator's lock (keep it short; do not call back into the allocator).
 * addr/size as in torch: alloc = unrounded request, free_* = requested
 * size, segment_* = segment or mapped size, oom: addr = device free bytes,
 * size = rounded request, snapshot: size = total active bytes. */
typedef enum tc_trace_action {
  TC_TRACE_ALLOC, TC_TRACE_FREE_REQUESTED, TC_TRACE_FREE_COMPLETED, TC_TRACE_SEGMENT_ALLOC,
  TC_TRACE_SEGMENT_FREE, TC_TRACE_SEGMENT_MAP, TC_TRACE_SEGMENT_UNMAP, TC_TRACE_SNAPSHOT, TC_TRACE_OOM
} tc_trace_action;
typedef void (*tc_trace_fn)(void *ctx, tc_trace_action action, uint64_t addr, uint64_t size, uint64_t stream);
void tc_alloc_set_trace(tc_alloc *a, tc_trace_fn fn, void *ctx);

/* ---- CUDA graph private pools (torch's beginAllocateToPool & co.) ----
 * Pool ids: (uid, 0) for a pool a graph made, (0, uid) for a
 * graph_pool_handle(); (0, 0) is the default pool and is refused. */
/* Does `stream` belong to the capture? Called under the allocator's lock
 * for each allocation while the capture is registered; must not call back
 * into the allocator. */
typedef int (*tc_capture_filter)(void *ctx, uint64_t stream);
/* Route allocations on streams the filter accepts into the pool `id`,
 * creating it or adding one use. "already recording" if id is routed now. */
tcuda_status tc_alloc_begin_allocate_to_pool(tc_alloc *a, const uint64_t id[2], tc_capture_filter fn, void *ctx);
/* Stop routing into `id` (its use count stays). */
tcuda_status tc_alloc_end_allocate_to_pool(tc_alloc *a, const uint64_t id[2]);
/* One use less; at 0 the pool's free segments go at the next empty_cache
 * (or OOM flush), and the pool when it has no segments left. */
tcuda_status tc_alloc_release_pool(tc_alloc *a, const uint64_t id[2]);
/* A pool's use count and segment count; INVALID_ARGUMENT when it does not
 * exist (never made, or erased). */
tcuda_status tc_alloc_pool_info(tc_alloc *a, const uint64_t id[2], int *use_count, int64_t *segments);
/* Blocks of pool `id` are never split from now on (torch's setNoSplit);
 * INVALID_ARGUMENT when the pool does not exist. */
tcuda_status tc_alloc_set_pool_no_split(tc_alloc *a, const uint64_t id[2]);
/* Pool `id`'s segments come from *pa from now on (tcuda_pool_set_allocator's
 * rules); INVALID_ARGUMENT when the pool does not exist, INVALID_STATE when
 * it has segments or an allocator already, NOT_SUPPORTED under compact. */
tcuda_status tc_alloc_set_pool_allocator(tc_alloc *a, const uint64_t id[2], const tcuda_pool_allocator_t *pa);
/* Whether pool `id`'s free blocks serve default-pool requests that would
 * otherwise fail with OOM (torch's setUseOnOOM), while the pool is in use;
 * INVALID_ARGUMENT when the pool does not exist. */
tcuda_status tc_alloc_set_pool_use_on_oom(tc_alloc *a, const uint64_t id[2], int use);
/* Number of captures routing allocations now (lock-free hint). */
int tc_alloc_captures_underway(tc_alloc *a);

/* ---- the process's per-device allocators (api.c) ---- */
/* The allocator of *device (-1: current, resolved in place), made on first
 * use; errors name func. */
tcuda_status tc_alloc_of_device(const char *func, int *device, tc_alloc **out);


#endif
