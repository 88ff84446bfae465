/* The caching allocator's internal contract.
 *
 * The policy (policy.c) is pure C: it includes no CUDA header and touches
 * device memory only through a tc_backend. Two backends implement it:
 * backend_cuda.c (cudaMalloc, cuMem* for expandable segments, events) and
 * backend_sim.c (a simulated address space with a capacity).
 *
 * Addresses and stream keys are uint64_t so that the simulated backend and
 * the CUDA backend share one code path. A stream key is the raw cudaStream_t
 * value (0 = legacy default stream); PyTorch orders free blocks by it.
 */
#ifndef TC_ALLOC_H
#define TC_ALLOC_H
#include "tcuda.h"
#include "core/error.h"
#include <stdint.h>

/* ---- PyTorch's constants (allocator-and-rng.md section 1) ---- */
#define TC_MIN_BLOCK_SIZE ((uint64_t)512)
#define TC_SMALL_SIZE ((uint64_t)1 << 20)
#define TC_SMALL_BUFFER ((uint64_t)2 << 20)
#define TC_LARGE_BUFFER ((uint64_t)20 << 20)
#define TC_MIN_LARGE_ALLOC ((uint64_t)10 << 20)
#define TC_ROUND_LARGE ((uint64_t)2 << 20)
#define TC_ROUNDUP_SLOTS 16

/* ---- configuration (TCUDA_ALLOC_CONF, PyTorch's key:value,key:value) ---- */
typedef struct tc_alloc_config {
  uint64_t max_split_size;               /* UINT64_MAX when unset */
  uint64_t max_non_split_rounding_size;  /* default TC_LARGE_BUFFER */
  unsigned roundup_power2_divisions[TC_ROUNDUP_SLOTS]; /* 0 = plain 512 rounding */
  double garbage_collection_threshold;   /* 0 = off */
  int expandable_segments;
  int release_lock_on_cudamalloc;
  char text[512];                        /* the string it was parsed from */
} tc_alloc_config;

void tc_alloc_config_default(tc_alloc_config *cfg);
/* Parse `conf` over the defaults. NULL or "" gives the defaults. A malformed
 * value or unknown key fails with TCUDA_ERROR_CONFIG and a message naming
 * the key; *cfg is then unchanged. */
tcuda_status tc_alloc_config_parse(const char *conf, tc_alloc_config *cfg);
/* The environment's config: TCUDA_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF. */
tcuda_status tc_alloc_config_from_env(tc_alloc_config *cfg);

/* ---- backend ---- */
typedef struct tc_backend tc_backend;
struct tc_backend {
  const char *name; /* "cuda" or "sim" */
  void *ctx;
  /* Reserve a whole segment (cudaMalloc). Fails with TCUDA_ERROR_OUT_OF_MEMORY
   * when the device is full; must not leave an error message in that case
   * that the policy would expose (the policy writes the OOM message). */
  tcuda_status (*segment_alloc)(void *ctx, int device, uint64_t size, uint64_t *addr);
  tcuda_status (*segment_free)(void *ctx, int device, uint64_t addr, uint64_t size);
  /* Expandable segments: reserve address space, then map/unmap pages in it. */
  tcuda_status (*va_reserve)(void *ctx, int device, uint64_t size, uint64_t *addr);
  tcuda_status (*va_release)(void *ctx, int device, uint64_t addr, uint64_t size);
  tcuda_status (*map)(void *ctx, int device, uint64_t addr, uint64_t size);
  tcuda_status (*unmap)(void *ctx, int device, uint64_t addr, uint64_t size);
  /* Events for cross-stream frees (record_stream). */
  tcuda_status (*event_record)(void *ctx, int device, uint64_t stream, void **event);
  int (*event_query)(void *ctx, void *event); /* 1 complete, 0 pending, <0 error */
  tcuda_status (*event_synchronize)(void *ctx, void *event);
  void (*event_release)(void *ctx, void *event);
  tcuda_status (*stream_synchronize)(void *ctx, int device, uint64_t stream);
  /* Device free/total bytes, for the OOM message. */
  tcuda_status (*mem_info)(void *ctx, int device, uint64_t *free_bytes, uint64_t *total_bytes);
};

/* The CUDA backend (one shared instance; device is passed per call). */
const tc_backend *tc_backend_cuda(void);

/* The simulated backend. */
typedef enum tc_sim_va { TC_SIM_VA_DRIVER = 0, TC_SIM_VA_ASCENDING = 1 } tc_sim_va;
typedef struct tc_sim_options {
  uint64_t capacity;          /* bytes; 0 means the H200's 150109880320 */
  tc_sim_va va;
  const char *addresses_path; /* optional: recorded "ADDR SIZE" lines, replayed in order */
  int streams_before_first_malloc; /* driver model: initial layout variant */
} tc_sim_options;
tcuda_status tc_backend_sim_create(const tc_sim_options *opt, tc_backend **out);
void tc_backend_sim_destroy(tc_backend *be);
/* Events recorded so far complete (the sim's "GPU" catches up). */
void tc_backend_sim_complete_events(tc_backend *be);
/* Bytes currently reserved on the simulated device. */
uint64_t tc_backend_sim_used(const tc_backend *be);
/* Expandable segments: the next va_reserve calls return these bases, in
 * order (then the sim's own). A base overlapping a live reservation fails
 * with "replay diverged at reservation N". Replaces an earlier list. */
tcuda_status tc_backend_sim_reserve_at(tc_backend *be, const uint64_t *bases, size_t n);

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

/* ---- engine additions (policy.c, config.c) ---- */
/* Like tc_alloc_config_parse, with `source` naming where the string came
 * from in error messages ("PYTORCH_CUDA_ALLOC_CONF: max_split_size_mb: ..."). */
tcuda_status tc_alloc_config_parse_named(const char *source, const char *conf, tc_alloc_config *cfg);
/* torch's runtime route (_set_allocator_settings): max_split_size,
 * roundup_power2_divisions and garbage_collection_threshold go back to their
 * defaults, the other keys keep *cfg's values, then `conf` is applied. On
 * error *cfg is unchanged. */
tcuda_status tc_alloc_config_update(const char *source, const char *conf, tc_alloc_config *cfg);
/* PyTorch's round_size() under a config (512-rounding or power-2 divisions). */
uint64_t tc_alloc_round_size(const tc_alloc_config *cfg, uint64_t size);
/* PyTorch's get_allocation_size(): the segment size for a rounded size. */
uint64_t tc_alloc_segment_size(uint64_t rounded);

/* Replace the live config (torch's settings are global and read per call).
 * The max_split_size stat keeps the value from creation, as in torch. */
void tc_alloc_set_config(tc_alloc *a, const tc_alloc_config *cfg);
void tc_alloc_get_config(tc_alloc *a, tc_alloc_config *out);
int tc_alloc_device(const tc_alloc *a);
/* Tests: 1 (and *why) when the free-block index disagrees with the
 * segments; see policy.c. */
int tc_alloc_self_check(tc_alloc *a, char *why, size_t n);
/* Free addr if this allocator handed it out: returns 1 and sets *status;
 * returns 0, with no message and nothing changed, if addr is not its own. */
int tc_alloc_free_if_owned(tc_alloc *a, uint64_t addr, tcuda_status *status);
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
/* Number of captures routing allocations now (lock-free hint). */
int tc_alloc_captures_underway(tc_alloc *a);

/* ---- the process's per-device allocators (api.c) ---- */
/* The allocator of *device (-1: current, resolved in place), made on first
 * use; errors name func. */
tcuda_status tc_alloc_of_device(const char *func, int *device, tc_alloc **out);

/* ---- out-of-memory observers (oom.c) ---- */
/* Tell the observers (public and internal) that an allocation of
 * `requested` bytes on `device` ran out of memory. Call outside every
 * allocator lock. Keeps the thread's error status and message. */
void tc_oom_notify(int device, size_t requested);
/* Internal hooks (e.g. snapshot-on-OOM), called before public observers.
 * Up to 8; adding one twice is a no-op. */
tcuda_status tc_oom_internal_hook(void (*fn)(int device, size_t requested));

/* IPC hooks in api.c (set by src/ipc.c): free_hook returns 1 when it parked
 * ptr (an exported block a consumer still uses); oom_hook frees released
 * parked blocks and returns how many, so the allocation can be retried. */
extern int (*_Atomic tc_alloc_free_hook)(void *ptr);
extern int (*_Atomic tc_alloc_oom_hook)(void);

#endif
