/*
 * tcuda.h - torch.cuda's runtime layer for C.
 *
 * One header for everything: devices and lazy init, streams and events, the
 * caching allocator and its statistics, RNG, graphs, collectives, NVTX,
 * cuBLAS handles and IPC.
 *
 * Conventions (see README.md for the torch.cuda -> tcuda table):
 *  - Functions that can fail return tcuda_status; 0 (TCUDA_SUCCESS) is success.
 *    On failure, tcuda_last_error() holds a thread-local message naming the
 *    function, the argument and the value.
 *  - Queries that cannot fail return their value directly.
 *  - A `device` argument of -1 means "the current device" (torch's None).
 *  - Every function is thread-safe unless its comment says otherwise.
 *  - The library never prints, aborts or exits.
 *
 * CUDA handle types are declared through their opaque struct tags, so this
 * header needs no CUDA header: `struct CUstream_st *` *is* cudaStream_t.
 */
#ifndef TCUDA_H
#define TCUDA_H

#include <stddef.h>
#include <stdint.h>
#include "tcuda_version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define TCUDA_API __declspec(dllexport)
#else
#define TCUDA_API __attribute__((visibility("default")))
#endif

struct CUstream_st;   /* cudaStream_t  */
struct CUevent_st;    /* cudaEvent_t   */

/* ======================================================================
 * Status codes and errors
 * ====================================================================== */

/* X(name, value, description). One list generates the enum and the names. */
#define TCUDA_STATUS_LIST(X)                                                    \
  X(TCUDA_SUCCESS, 0, "success")                                                \
  X(TCUDA_ERROR_INVALID_ARGUMENT, 1, "invalid argument")                        \
  X(TCUDA_ERROR_INVALID_DEVICE, 2, "invalid device")                            \
  X(TCUDA_ERROR_NOT_AVAILABLE, 3, "CUDA not available")                         \
  X(TCUDA_ERROR_FORKED, 4, "CUDA used in a forked child")                       \
  X(TCUDA_ERROR_CUDA, 5, "CUDA runtime or driver error")                        \
  X(TCUDA_ERROR_OUT_OF_MEMORY, 6, "device out of memory")                       \
  X(TCUDA_ERROR_HOST_OUT_OF_MEMORY, 7, "host out of memory")                    \
  X(TCUDA_ERROR_INVALID_POINTER, 8, "unknown or already freed pointer")         \
  X(TCUDA_ERROR_CONFIG, 9, "bad configuration")                                 \
  X(TCUDA_ERROR_INVALID_STATE, 10, "operation not valid in the current state")  \
  X(TCUDA_ERROR_NOT_SUPPORTED, 11, "not supported")                             \
  X(TCUDA_ERROR_PARSE, 12, "malformed input")                                   \
  X(TCUDA_ERROR_IO, 13, "file or I/O error")                                    \
  X(TCUDA_ERROR_OVERFLOW, 14, "size overflow")                                  \
  X(TCUDA_ERROR_NCCL, 15, "NCCL error")                                         \
  X(TCUDA_ERROR_CUBLAS, 16, "cuBLAS error")                                     \
  X(TCUDA_ERROR_NOT_READY, 17, "work not complete")                             \
  X(TCUDA_ERROR_INTERNAL, 18, "internal error")

typedef enum tcuda_status {
#define TCUDA_X_ENUM(name, value, desc) name = value,
  TCUDA_STATUS_LIST(TCUDA_X_ENUM)
#undef TCUDA_X_ENUM
} tcuda_status;

/* "TCUDA_ERROR_INVALID_DEVICE", or "TCUDA_STATUS_UNKNOWN" for other values. */
TCUDA_API const char *tcuda_status_name(tcuda_status s);
/* One-line description of a status value. */
TCUDA_API const char *tcuda_status_string(tcuda_status s);
/* This thread's message for its last failed call ("" if none). Valid until
 * the thread's next failing tcuda call. */
TCUDA_API const char *tcuda_last_error(void);
/* This thread's last failure status (TCUDA_SUCCESS if none). */
TCUDA_API tcuda_status tcuda_last_status(void);
/* Forget this thread's last error. */
TCUDA_API void tcuda_clear_error(void);

/* Strings the library allocates for the caller (JSON, summaries) are freed
 * with this. NULL is fine. */
TCUDA_API void tcuda_string_free(char *s);

/* A byte count as the CLI's size options take it (--capacity, --max-input):
 * plain bytes in decimal or 0x hex, or a number with a unit, kB MB GB TB
 * (powers of 1000) or KiB MiB GiB TiB (powers of 1024), e.g. "80GiB" or
 * "1.5GB" (a whole number of bytes); more than 0. Errors:
 * TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_size_parse: size 'TEXT': why". */
TCUDA_API tcuda_status tcuda_size_parse(const char *text, uint64_t *bytes);

/* An input file read as every tcuda reader reads snapshots and traces: "-"
 * is standard input, gzip data (a .pickle.gz, by its magic bytes) comes back
 * decompressed, and at most max_bytes (0: 1 GiB) are taken from the file and
 * from its decompressed bytes alike. *data is NUL-terminated (*len excludes
 * the NUL); free it with tcuda_string_free. Errors: TCUDA_ERROR_IO (cannot
 * read, or over the cap), TCUDA_ERROR_PARSE (bad gzip data),
 * TCUDA_ERROR_HOST_OUT_OF_MEMORY. */
TCUDA_API tcuda_status tcuda_input_read(const char *path, uint64_t max_bytes, char **data, size_t *len);

/* ======================================================================
 * Version and build information
 * ====================================================================== */

/* TCUDA_VERSION_MAJOR*10000 + MINOR*100 + PATCH of the library in use. */
TCUDA_API int tcuda_version(void);
TCUDA_API const char *tcuda_version_string(void);
/* CUDA runtime version libtcuda was built with (e.g. 13000). */
TCUDA_API int tcuda_runtime_version(void);
/* Installed driver's CUDA version, or 0 when there is no driver. */
TCUDA_API int tcuda_driver_version(void);
/* NCCL version code (e.g. 22807), or 0 when libnccl cannot be loaded. */
TCUDA_API int tcuda_nccl_version(void);
/* torch.cuda.get_arch_list(): space-separated, e.g. "sm_80 sm_90 compute_90". */
TCUDA_API const char *tcuda_get_arch_list(void);
/* torch.cuda.get_gencode_flags(): nvcc -gencode flags of libtcuda's kernels. */
TCUDA_API const char *tcuda_get_gencode_flags(void);

/* ======================================================================
 * Initialisation and devices            (torch.cuda: is_available, init, ...)
 * ====================================================================== */

/* 1 if a CUDA driver and at least one GPU are present. Never an error. It
 * does not initialise tcuda, but like torch.cuda.is_available() it asks the
 * driver, after which a fork()ed child cannot use CUDA (it gets
 * TCUDA_ERROR_FORKED); in such a child it returns 0. */
TCUDA_API int tcuda_is_available(void);
/* Why CUDA is not available ("" when it is): e.g. "no CUDA driver
 * (cudaErrorInsufficientDriver)". */
TCUDA_API const char *tcuda_unavailable_reason(void);
/* Initialise tcuda's CUDA state. Idempotent; every call that needs CUDA
 * initialises on demand, so calling this is optional. Fails with
 * TCUDA_ERROR_NOT_AVAILABLE without a driver or GPU, and TCUDA_ERROR_FORKED
 * in a child forked after the parent's first successful CUDA call. */
TCUDA_API tcuda_status tcuda_init(void);
TCUDA_API int tcuda_is_initialized(void);
/* Number of visible GPUs (honours CUDA_VISIBLE_DEVICES); 0 without CUDA.
 * Cached once initialised. */
TCUDA_API int tcuda_device_count(void);

/* The calling thread's current device. */
TCUDA_API tcuda_status tcuda_current_device(int *device);
/* Set the calling thread's current device. Negative is a no-op. */
TCUDA_API tcuda_status tcuda_set_device(int device);

/* Device guard: torch.cuda.device(d) in C.
 *   tcuda_device_guard_t g;
 *   tcuda_device_guard_begin(&g, 1);  ... work on device 1 ...
 *   tcuda_device_guard_end(&g);        restores the previous device
 * A negative device makes the guard a no-op. Restoring never creates a CUDA
 * context on a device that had none (c10's MaybeExchangeDevice). */
typedef struct tcuda_device_guard {
  int prev_device; /* -1 when the guard did nothing */
  int device;
} tcuda_device_guard_t;
TCUDA_API tcuda_status tcuda_device_guard_begin(tcuda_device_guard_t *guard, int device);
TCUDA_API tcuda_status tcuda_device_guard_end(tcuda_device_guard_t *guard);
/* Make `device` current and return the previous one (c10 ExchangeDevice). */
TCUDA_API tcuda_status tcuda_device_exchange(int device, int *prev_device);
/* Like exchange, but if `device` has no active primary context, only record
 * it as the thread's target; the context is created by the next call that
 * needs it (c10 MaybeExchangeDevice). */
TCUDA_API tcuda_status tcuda_device_maybe_exchange(int device, int *prev_device);

/* Device owning a pointer. TCUDA_ERROR_INVALID_POINTER with "not a device
 * pointer" for host or unknown memory. */
TCUDA_API tcuda_status tcuda_device_of(const void *ptr, int *device);

typedef struct tcuda_device_properties {
  size_t struct_size;            /* set by caller: sizeof(tcuda_device_properties_t) */
  char name[256];
  int major, minor;              /* compute capability */
  size_t total_memory;           /* bytes */
  int multi_processor_count;
  int max_threads_per_multi_processor;
  int l2_cache_size;             /* bytes */
  int warp_size;
  int is_integrated;
  int is_multi_gpu_board;
  unsigned char uuid[16];
  char uuid_string[41];          /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
  int pci_domain_id, pci_bus_id, pci_device_id;
  char pci_bus_string[16];       /* "0000:1b:00.0" */
} tcuda_device_properties_t;
#define TCUDA_DEVICE_PROPERTIES_INIT {.struct_size = sizeof(tcuda_device_properties_t)}

TCUDA_API tcuda_status tcuda_get_device_properties(int device, tcuda_device_properties_t *props);
/* Writes the name, truncated to fit, always NUL-terminated. */
TCUDA_API tcuda_status tcuda_get_device_name(int device, char *buf, size_t buf_size);
TCUDA_API tcuda_status tcuda_get_device_capability(int device, int *major, int *minor);

/* Wait for all work on all streams of a device. */
TCUDA_API tcuda_status tcuda_synchronize(int device);
/* cudaMemGetInfo on a device: free and total bytes. */
TCUDA_API tcuda_status tcuda_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes);
TCUDA_API tcuda_status tcuda_can_device_access_peer(int device, int peer_device, int *can_access);

/* Launch libtcuda's own test kernel on a device and check its output:
 * proves the build's arch list runs on that GPU. */
TCUDA_API tcuda_status tcuda_device_selftest(int device);

/* ======================================================================
 * Streams                 (torch.cuda.Stream, current_stream, stream(...))
 * ====================================================================== */

/* A stream is a small value, as in c10: copy it freely. The pool streams
 * and the default stream are never destroyed. */
typedef struct tcuda_stream {
  struct CUstream_st *handle; /* the cudaStream_t; NULL is the legacy default stream */
  int64_t id;                 /* stable for the life of the process; 0 = default stream */
  int device;
  int priority;
} tcuda_stream_t;

/* Stream ids (int64_t, unique in the process, never reused):
 *   0                  the default stream (any device)
 *   bit0 = 1           a stream tcuda made:
 *     bits 1-4         type: level+1 (1..4) for a pool stream, 0xE for a
 *                      dedicated stream (tcuda_stream_create)
 *     bits 5-9         pool slot (0..31); 0 for dedicated streams
 *     bits 10-19       device
 *     bits 20-62       dedicated streams: a serial number
 *   otherwise          an external stream: the raw cudaStream_t value
 * On device 0 pool ids equal PyTorch's (slot<<5 | (level+1)<<1 | 1). */

/* Flags for tcuda_stream_create (cudaStreamDefault / cudaStreamNonBlocking). */
enum {
  TCUDA_STREAM_DEFAULT = 0,      /* synchronises with the legacy default stream */
  TCUDA_STREAM_NON_BLOCKING = 1  /* does not (pool streams are created this way) */
};

/* torch.cuda.Stream.priority_range() on the current device: least is 0 and
 * greatest is max(-3, CUDA's greatest), the range PyTorch supports. Lower
 * numbers are higher priorities. */
TCUDA_API tcuda_status tcuda_stream_priority_range(int *least, int *greatest);

/* torch.cuda.Stream(device, priority): a stream from the device's pool.
 * Each device has 32 non-blocking streams per priority level, with
 * levels = min(4, size of the device's CUDA priority range); all are created
 * on the first request for that device and never destroyed. Requests get the
 * next stream round-robin, so the 33rd request at a level returns the 1st
 * stream again. level = clamp(-priority, 0, levels-1): positive priorities
 * fall back to 0, very negative ones to the highest level. */
TCUDA_API tcuda_status tcuda_stream_from_pool(int device, int priority, tcuda_stream_t *out);

/* A stream of the caller's own (no pool sharing), with CUDA's priority
 * clamped to the device's range and TCUDA_STREAM_* flags. Destroy it with
 * tcuda_stream_destroy. */
TCUDA_API tcuda_status tcuda_stream_create(int device, int priority, unsigned flags, tcuda_stream_t *out);
/* Destroy a stream from tcuda_stream_create (pending work still completes).
 * The default, pool and external streams cannot be destroyed; destroying a
 * stream twice is an error. If it is the calling thread's current stream on
 * its device, that becomes the default stream. */
TCUDA_API tcuda_status tcuda_stream_destroy(tcuda_stream_t stream);

/* torch.cuda.ExternalStream: wrap a cudaStream_t made elsewhere, on `device`.
 * Not validated and not owned: the caller keeps it alive and destroys it.
 * Its id is the pointer value; .priority is 0 (tcuda_stream_get_priority
 * asks CUDA). A NULL raw stream gives the default stream. */
TCUDA_API tcuda_status tcuda_stream_external(struct CUstream_st *raw, int device, tcuda_stream_t *out);

/* torch.cuda.default_stream(device): the legacy NULL stream (id 0). */
TCUDA_API tcuda_status tcuda_default_stream(int device, tcuda_stream_t *out);

/* torch.cuda.current_stream(device): the calling thread's current stream on
 * a device; the default stream until set. Fast (no lock, and no CUDA call
 * when the device is given). */
TCUDA_API tcuda_status tcuda_current_stream(int device, tcuda_stream_t *out);
/* torch.cuda.set_stream(s): make s.device the current device and s its
 * current stream, for the calling thread only. */
TCUDA_API tcuda_status tcuda_set_stream(tcuda_stream_t stream);

/* Stream guard: torch.cuda.stream(s) in C.
 *   tcuda_stream_guard_t g;
 *   tcuda_stream_guard_begin(&g, s);  ... work goes to s, on s.device ...
 *   tcuda_stream_guard_end(&g);        restores device and streams
 * Saves the current device and the current streams of that device and of
 * s.device; end restores all three. Guards nest. end on a guard that is not
 * active is a no-op. */
typedef struct tcuda_stream_guard {
  int active;
  int prev_device;
  tcuda_stream_t prev_stream;     /* current stream on prev_device */
  tcuda_stream_t prev_dst_stream; /* current stream on stream.device */
  tcuda_stream_t stream;
} tcuda_stream_guard_t;
TCUDA_API tcuda_status tcuda_stream_guard_begin(tcuda_stream_guard_t *guard, tcuda_stream_t stream);
TCUDA_API tcuda_status tcuda_stream_guard_end(tcuda_stream_guard_t *guard);

/* *done = 1 when all work submitted to the stream has finished, else 0. */
TCUDA_API tcuda_status tcuda_stream_query(tcuda_stream_t stream, int *done);
/* Block until all work submitted to the stream has finished. */
TCUDA_API tcuda_status tcuda_stream_synchronize(tcuda_stream_t stream);
/* CUDA's priority of the stream (cudaStreamGetPriority). */
TCUDA_API tcuda_status tcuda_stream_get_priority(tcuda_stream_t stream, int *priority);

typedef struct tcuda_event tcuda_event_t;

/* Future work on `stream` waits for `event` (cudaStreamWaitEvent); returns
 * at once. An event never recorded is a no-op. */
TCUDA_API tcuda_status tcuda_stream_wait_event(tcuda_stream_t stream, tcuda_event_t *event);
/* Future work on `stream` waits for the work submitted to `other` so far:
 * records an internal event on `other` and waits on it. */
TCUDA_API tcuda_status tcuda_stream_wait_stream(tcuda_stream_t stream, tcuda_stream_t other);
/* Record `event` on the stream, or, when event is NULL, a new event with
 * default flags that the caller destroys. *out (may be NULL when event is
 * given) receives the recorded event. */
TCUDA_API tcuda_status tcuda_stream_record_event(tcuda_stream_t stream, tcuda_event_t *event,
                                                 tcuda_event_t **out);

/* ======================================================================
 * Events                                               (torch.cuda.Event)
 * ====================================================================== */

/* Event flags; combine with |. */
enum {
  TCUDA_EVENT_DEFAULT = 0,
  TCUDA_EVENT_TIMING = 1,       /* enable_timing: needed by elapsed_time */
  TCUDA_EVENT_BLOCKING = 2,     /* synchronize blocks the thread instead of spinning */
  TCUDA_EVENT_INTERPROCESS = 4  /* shareable with ipc_handle; not with TIMING */
};

/* torch.cuda.Event(enable_timing, blocking, interprocess). Needs no GPU:
 * the CUDA event is made on the first record, on the recording stream's
 * device (or by tcuda_event_ipc_handle, on the current device). */
TCUDA_API tcuda_status tcuda_event_create(unsigned flags, tcuda_event_t **out);
/* Destroy the event on its own device. NULL is fine. */
TCUDA_API void tcuda_event_destroy(tcuda_event_t *event);

/* Record on `stream`, or on the current stream when stream is NULL. Once the
 * CUDA event exists, only streams on its device may record it. */
TCUDA_API tcuda_status tcuda_event_record(tcuda_event_t *event, const tcuda_stream_t *stream);
/* Future work on `stream` (NULL: current stream) waits for the event; any
 * device's stream may wait. No-op for an event never recorded. */
TCUDA_API tcuda_status tcuda_event_wait(tcuda_event_t *event, const tcuda_stream_t *stream);
/* *done = 1 when the recorded work has finished (also for an event never
 * recorded), else 0. */
TCUDA_API tcuda_status tcuda_event_query(tcuda_event_t *event, int *done);
/* Block until the recorded work has finished. No-op if never recorded. */
TCUDA_API tcuda_status tcuda_event_synchronize(tcuda_event_t *event);
/* Milliseconds from `start`'s record to `end`'s. Checked in PyTorch's order:
 * both have TCUDA_EVENT_TIMING (else INVALID_ARGUMENT), both were recorded
 * (else INVALID_STATE), both have completed (else NOT_READY). */
TCUDA_API tcuda_status tcuda_event_elapsed_time(tcuda_event_t *start, tcuda_event_t *end, float *ms);

/* Size of a CUDA IPC event handle (sizeof(cudaIpcEventHandle_t)). */
#define TCUDA_IPC_EVENT_HANDLE_SIZE 64
/* The event's 64-byte IPC handle, for another process. The event must have
 * TCUDA_EVENT_INTERPROCESS; it is created on the current device if needed. */
TCUDA_API tcuda_status tcuda_event_ipc_handle(tcuda_event_t *event,
                                              unsigned char handle[TCUDA_IPC_EVENT_HANDLE_SIZE]);
/* torch.cuda.Event.from_ipc_handle: open another process's event on
 * `device`. handle_size must be 64. The result can be waited on, queried and
 * synchronized; destroy it with tcuda_event_destroy. */
TCUDA_API tcuda_status tcuda_event_from_ipc_handle(int device, const void *handle, size_t handle_size,
                                                   tcuda_event_t **out);
/* The cudaEvent_t, or NULL while the event has not been created. */
TCUDA_API struct CUevent_st *tcuda_event_handle(const tcuda_event_t *event);
/* The device the event was created on, or -1 while not created. */
TCUDA_API int tcuda_event_device(const tcuda_event_t *event);
/* The TCUDA_EVENT_* flags it was created with. */
TCUDA_API unsigned tcuda_event_flags(const tcuda_event_t *event);

/* @@STREAMS@@ */

/* ======================================================================
 * Caching allocator        (torch.cuda memory management functions)
 * ====================================================================== */

/* One statistic, as in PyTorch's DeviceStats. */
typedef struct tcuda_stat {
  int64_t current, peak, allocated, freed;
} tcuda_stat_t;

/* Index into a stat array, as PyTorch's StatType. */
enum { TCUDA_STAT_ALL = 0, TCUDA_STAT_SMALL_POOL = 1, TCUDA_STAT_LARGE_POOL = 2, TCUDA_STAT_TYPES = 3 };

/* torch.cuda.memory_stats(): every key of PyTorch 2.11, same meaning.
 * tcuda_memory_stats_json() gives the dotted-key form ("allocation.all.current"). */
typedef struct tcuda_memory_stats {
  tcuda_stat_t allocation[TCUDA_STAT_TYPES];
  tcuda_stat_t segment[TCUDA_STAT_TYPES];
  tcuda_stat_t active[TCUDA_STAT_TYPES];
  tcuda_stat_t inactive_split[TCUDA_STAT_TYPES];
  tcuda_stat_t allocated_bytes[TCUDA_STAT_TYPES];
  tcuda_stat_t reserved_bytes[TCUDA_STAT_TYPES];
  tcuda_stat_t active_bytes[TCUDA_STAT_TYPES];
  tcuda_stat_t inactive_split_bytes[TCUDA_STAT_TYPES];
  tcuda_stat_t requested_bytes[TCUDA_STAT_TYPES];
  tcuda_stat_t oversize_allocations;
  tcuda_stat_t oversize_segments;
  int64_t num_alloc_retries;
  int64_t num_ooms;
  int64_t num_sync_all_streams;
  int64_t num_device_alloc;
  int64_t num_device_free;
  int64_t max_split_size; /* -1 when unset, as PyTorch reports */
} tcuda_memory_stats_t;

/* OOM observers (torch's attachOutOfMemoryObserver): fn runs on the thread
 * whose allocation ran out of device memory, after the cache flush and
 * retry failed, outside the allocator's locks (it may call tcuda, e.g.
 * take a snapshot or free memory; the failing call still fails). requested
 * is the size asked for; stats are the device's at that moment. *id is for
 * tcuda_oom_observer_remove. Up to 64 observers. */
TCUDA_API tcuda_status tcuda_oom_observer_add(void (*fn)(void *user, int device, size_t requested,
                                                         const tcuda_memory_stats_t *stats),
                                              void *user, int *id);
TCUDA_API tcuda_status tcuda_oom_observer_remove(int id);

/* Block states in a snapshot (PyTorch's strings in the JSON form). */
typedef enum tcuda_block_state {
  TCUDA_BLOCK_INACTIVE = 0,            /* "inactive" */
  TCUDA_BLOCK_ACTIVE_ALLOCATED = 1,    /* "active_allocated" */
  TCUDA_BLOCK_ACTIVE_PENDING_FREE = 2  /* "active_pending_free" */
} tcuda_block_state;

typedef struct tcuda_block_info {
  uint64_t address;
  uint64_t size;
  uint64_t requested_size;
  tcuda_block_state state;
} tcuda_block_info_t;

typedef struct tcuda_segment_info {
  int device;
  uint64_t address;
  uint64_t total_size, allocated_size, active_size, requested_size;
  int64_t stream;          /* stream id (tcuda_stream_t.id); replay uses the trace's number */
  int is_large;            /* segment_type "large" (1) or "small" (0) */
  uint64_t pool_id[2];     /* segment_pool_id; (0,0) is the default pool */
  int is_expandable;
  size_t num_blocks;
  tcuda_block_info_t *blocks;
} tcuda_segment_info_t;

/* torch.cuda.memory_snapshot(): segments sorted by address. */
typedef struct tcuda_snapshot {
  size_t num_segments;
  tcuda_segment_info_t *segments;
} tcuda_snapshot_t;

/* Device memory from the caching allocator (torch.cuda.caching_allocator_alloc
 * and friends). Sizes are rounded and served from cached segments exactly as
 * PyTorch 2.11 does, so memory_stats() and snapshots match torch's for the
 * same sequence of calls. Options come from TCUDA_ALLOC_CONF (else
 * PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF), read when a device's
 * allocator is first used, or from tcuda_allocator_set_config().
 *
 * Memory belongs to a stream: a freed block is reused only by allocations on
 * the same stream. Use tcuda_record_stream() when other streams still use it.
 * A size of 0 gives *ptr = NULL. Errors: TCUDA_ERROR_OUT_OF_MEMORY with
 * PyTorch's "CUDA out of memory. Tried to allocate ..." message (the cache is
 * flushed and the allocation retried first), TCUDA_ERROR_OVERFLOW for sizes
 * that overflow when rounded, TCUDA_ERROR_CONFIG for a bad option string.
 * On failure *ptr is NULL.
 *
 * Threads: any thread may allocate and free. Each device's allocator has one
 * lock; a thread that finds it taken hands a cached malloc or a plain free
 * to the thread holding it, which runs it at once (combining), so the
 * decisions are always those of some serial order of the calls. The current
 * device is read from the thread's CUDA context, so cudaSetDevice calls
 * made outside tcuda are honoured; a thread with no context yet is bound
 * to its device's primary context when that context already exists (what
 * the runtime's next call would do), never to a new one. */
TCUDA_API tcuda_status tcuda_malloc(void **ptr, size_t size);
/* On `device` (-1: current) for `stream`, which must be on that device. */
TCUDA_API tcuda_status tcuda_malloc_on(void **ptr, size_t size, int device, tcuda_stream_t stream);
/* NULL is fine. Anything not from tcuda_malloc*, or freed already, is
 * TCUDA_ERROR_INVALID_POINTER and changes nothing. */
TCUDA_API tcuda_status tcuda_free(void *ptr);
/* Tensor.record_stream: the block is not reused until the work queued on
 * `stream` up to now is done (checked at later allocations). `ptr` must be
 * the start of a live allocation. */
TCUDA_API tcuda_status tcuda_record_stream(void *ptr, tcuda_stream_t stream);
/* Give every cached, wholly free segment back to CUDA, on all devices (waits
 * for pending record_stream events first). */
TCUDA_API tcuda_status tcuda_empty_cache(void);

/* torch.cuda.memory_stats(device). */
TCUDA_API tcuda_status tcuda_memory_stats(int device, tcuda_memory_stats_t *out);
/* The same as JSON with PyTorch's dotted keys; free with tcuda_string_free. */
TCUDA_API tcuda_status tcuda_memory_stats_json(int device, char **json);
/* Bytes: allocated_bytes.all.current / .peak, reserved_bytes.all.current /
 * .peak; the *_cached names are torch's deprecated aliases of *_reserved. */
TCUDA_API tcuda_status tcuda_memory_allocated(int device, int64_t *bytes);
TCUDA_API tcuda_status tcuda_max_memory_allocated(int device, int64_t *bytes);
TCUDA_API tcuda_status tcuda_memory_reserved(int device, int64_t *bytes);
TCUDA_API tcuda_status tcuda_max_memory_reserved(int device, int64_t *bytes);
TCUDA_API tcuda_status tcuda_memory_cached(int device, int64_t *bytes);
TCUDA_API tcuda_status tcuda_max_memory_cached(int device, int64_t *bytes);
/* Peaks := current values, for every stat. */
TCUDA_API tcuda_status tcuda_reset_peak_memory_stats(int device);
/* allocated/freed totals and the counters (retries, ooms, ...) := 0. */
TCUDA_API tcuda_status tcuda_reset_accumulated_memory_stats(int device);
/* Deprecated in torch; like there, both reset every peak. */
TCUDA_API tcuda_status tcuda_reset_max_memory_allocated(int device);
TCUDA_API tcuda_status tcuda_reset_max_memory_cached(int device);

/* Cap this process's cached memory on a device at fraction * total memory:
 * past it, allocations fail with OOM without asking CUDA. 1.0 removes the
 * cap. Outside [0, 1]: "Invalid fraction value". */
TCUDA_API tcuda_status tcuda_set_per_process_memory_fraction(double fraction, int device);
TCUDA_API tcuda_status tcuda_get_per_process_memory_fraction(int device, double *fraction);

/* torch.cuda.memory_summary(device, abbreviated): free with tcuda_string_free. */
TCUDA_API tcuda_status tcuda_memory_summary(int device, int abbreviated, char **out);
/* torch.cuda.memory_snapshot(): the segments of every device that has used
 * the allocator, by device, then address. Free with tcuda_snapshot_free. */
TCUDA_API tcuda_status tcuda_memory_snapshot(tcuda_snapshot_t **out);
TCUDA_API void tcuda_snapshot_free(tcuda_snapshot_t *snapshot);
/* The snapshot's segments as a JSON array (torch's dict keys). */
TCUDA_API tcuda_status tcuda_memory_snapshot_json(char **out);

/* torch.cuda.memory._set_allocator_settings: apply "key:value,..." options
 * now, to every device. As in torch, max_split_size_mb,
 * roundup_power2_divisions and garbage_collection_threshold return to their
 * defaults unless given; other options keep their values. A bad string is
 * an error naming the key and changes nothing. */
TCUDA_API tcuda_status tcuda_allocator_set_config(const char *conf);
/* The effective options as a string that tcuda_allocator_set_config accepts,
 * e.g. "backend:native,max_non_split_rounding_mb:20,expandable_segments:False,
 * release_lock_on_cudamalloc:False". Free with tcuda_string_free. */
TCUDA_API tcuda_status tcuda_allocator_get_config(char **out);

/* @@ALLOCATOR@@ */

/* ======================================================================
 * Trace replay        (what-if runs of the caching allocator, tcuda replay)
 * ====================================================================== */

/* A trace is text, one operation per line; '#' starts a comment:
 *   a ID SIZE [STREAM]   allocate SIZE bytes as handle ID on STREAM
 *                        (0 = default stream, k > 0 = the k-th side stream,
 *                        created on first use)
 *   f ID                 free handle ID
 *   c                    checkpoint
 *   e                    empty_cache()
 *   r                    reset_peak_memory_stats()
 * IDs and sizes are decimal (or 0x hex); SIZE is at most 2^64 - 2 MiB - 1
 * (18446744073707454463: a larger one would overflow the allocator's
 * rounding and is a parse error). A request the allocator cannot
 * satisfy counts as an OOM (num_ooms) and the replay goes on; freeing that
 * handle later does nothing, like a Python script that caught the error. */
typedef struct tcuda_replay_options {
  size_t struct_size;         /* sizeof(tcuda_replay_options_t) */
  int simulate;               /* 1: simulated device (no GPU needed); 0: the real GPU */
  int va_mode;                /* simulate: 0 = model of the CUDA driver's placement, 1 = ascending */
  const char *addresses_file; /* simulate: recorded "ADDR SIZE" cudaMalloc results, used in order */
  uint64_t capacity;          /* simulate: device bytes; 0 = an H200's 150109880320 */
  const char *config;         /* allocator config, PYTORCH_CUDA_ALLOC_CONF syntax; NULL or ""
                                 = defaults (the environment is not read) */
  int device;                 /* real GPU: device index, -1 = current */
  double memory_fraction;     /* set_per_process_memory_fraction(); 0 = not set */
  const char *record_addresses; /* real GPU: write each segment cudaMalloc returned, in order,
                                   in the addresses_file format (for an exact --simulate rerun) */
  const char *history_path;   /* record the allocator's history and write a snapshot there at the
                                 end: JSON if the name ends in ".json", else a memory_viz pickle */
  const char *maps_file;      /* simulate, expandable segments: recorded "ADDR SIZE" per segment_map,
                                 in order (torch's segment_map trace entries). Each new VA reservation
                                 is placed at the next recorded map's address (where torch's segment
                                 began) and every map must be the recorded one */
  /* called for each request that runs out of memory, with its trace line and
     torch's OutOfMemoryError message ("CUDA out of memory. Tried to allocate
     ..."), before the replay goes on; NULL: none */
  void (*on_oom)(void *user, unsigned line, const char *message);
  void *on_oom_user;
  uint64_t max_input_bytes; /* the largest input file read (trace or snapshot); 0: 1 GiB */
  uint64_t work_budget;     /* snapshots: units of work allowed (docs/whatif.md); 0: a multiple of the input's size */
} tcuda_replay_options_t;
#define TCUDA_REPLAY_OPTIONS_INIT {.struct_size = sizeof(tcuda_replay_options_t), .device = -1}

/* Replay a trace on a fresh private allocator (stats start at zero; the
 * process's own allocator is not touched) and return, in *json_out, a JSON
 * array with one element per checkpoint:
 *   {"stats": {memory_stats() keys, dotted, sorted},
 *    "segments": [memory_snapshot() segments by address; "stream" is the
 *                 trace's stream number]}
 * Free *json_out with tcuda_string_free(). opt NULL means the defaults of
 * TCUDA_REPLAY_OPTIONS_INIT (the real GPU). Errors: TCUDA_ERROR_PARSE
 * "trace line N: ..." for a malformed line, a free of an unknown id or a
 * duplicate live id (checked before anything runs); TCUDA_ERROR_CONFIG for a
 * bad config; TCUDA_ERROR_IO for unreadable files; "replay diverged at
 * segment N" when recorded addresses do not fit, "replay diverged at map N"
 * when a map differs from maps_file. Nothing leaks on error and
 * *json_out is then NULL. The whole output is held in memory until the
 * end (one checkpoint's JSON holds every segment and block: a long trace
 * of many checkpoints makes hundreds of MB); tcuda_replay_file_to streams
 * it instead. */
TCUDA_API tcuda_status tcuda_replay_file(const char *trace_path, const tcuda_replay_options_t *opt,
                                         char **json_out);
/* The same for a trace held in memory (NUL-terminated), output likewise
 * held whole. */
TCUDA_API tcuda_status tcuda_replay_string(const char *trace, const tcuda_replay_options_t *opt,
                                           char **json_out);
/* tcuda_replay_file, streaming: the JSON goes to write_fn(user, bytes, n)
 * piece by piece as each checkpoint is taken, so memory stays bounded by
 * the allocator's state however long the output is. The pieces, joined,
 * are exactly the text tcuda_replay_file returns. write_fn returns
 * TCUDA_SUCCESS to go on; any other status stops the replay, and is
 * returned (message "tcuda_replay_file_to: the output callback returned
 * STATUS"). Errors are those of tcuda_replay_file; a bad trace, option or
 * file is found before anything is written. An error later leaves what was
 * written without the array's closing ']': never a complete document. */
TCUDA_API tcuda_status tcuda_replay_file_to(const char *trace_path, const tcuda_replay_options_t *opt,
                                            tcuda_status (*write_fn)(void *user, const char *bytes, size_t n),
                                            void *user);

/* @@REPLAY@@ */

/* ======================================================================
 * What-if on PyTorch memory snapshots (tcuda whatif, tcuda replay --simulate)
 * ====================================================================== */

/* A snapshot is the file torch.cuda.memory._dump_snapshot() writes (a
 * pickle) or the same document as JSON, told apart by its content. Pickles
 * are read by a restricted reader: plain data only (dict, list, tuple,
 * str, bytes, int, float, bool, None); any opcode that would build another
 * object or call anything (GLOBAL, REDUCE, BUILD, ...) is refused with an
 * error naming it and its offset. Nothing is executed and no Python is
 * needed. docs/whatif.md says what a replay reproduces exactly.
 *
 * Replay one device's history (opt->device; -1 = 0) on the simulated device
 * (opt->simulate must be 1) and stream JSON to write_fn as
 * tcuda_replay_file_to does: one element per "snapshot" entry of the
 * history, then one for its end. opt->config NULL or "": the snapshot's own
 * allocator_settings, with segments where torch placed them (torch's run,
 * reproduced); otherwise that config, its segments placed by the driver
 * model, except that while it asks for the same segments as torch did they
 * go where torch's went (as the driver gives a process the same addresses
 * for the same calls; docs/whatif.md).
 * capacity (0: an H200's) and memory_fraction are the device's memory and
 * set_per_process_memory_fraction. history_path writes a snapshot of the
 * replay itself. addresses_file, maps_file, record_addresses and va_mode
 * do not apply (an error). When the history's start was lost (torch's ring
 * buffer was full), the state at its first entry is rebuilt from the
 * snapshot's segments; counters that add up from the start (*.allocated,
 * *.freed, num_*) are then null, and peaks are those of the window. A
 * request that fails is an OOM in the stats, not an error; opt->on_oom is
 * called for it with its position among the history's requests (alloc and
 * oom entries, from 0) in place of a trace line. The output counts against
 * opt->work_budget (a unit per byte): past it the replay stops with an
 * error naming the file and the limit, the array left unclosed. */
TCUDA_API tcuda_status tcuda_replay_snapshot_to(const char *snapshot_path, const tcuda_replay_options_t *opt,
                                                tcuda_status (*write_fn)(void *user, const char *bytes, size_t n),
                                                void *user);

/* Progress of a long call, for a caller that shows it (the library never
 * prints): stage names the work ("read", "parse", "trace", "replay"), done
 * of total its units (total 0: not known). */
typedef void (*tcuda_progress_fn)(void *user, const char *stage, uint64_t done, uint64_t total);

typedef struct tcuda_whatif_options {
  size_t struct_size;            /* sizeof(tcuda_whatif_options_t) */
  const char *const *configs;    /* rows after the recorded config, PYTORCH_CUDA_ALLOC_CONF syntax;
                                    NULL with num_configs 0: the default sweep */
  size_t num_configs;
  uint64_t capacity;             /* device bytes; 0: an H200's 150109880320 */
  double memory_fraction;        /* set_per_process_memory_fraction for every row; 0: none */
  int device;                    /* whose history; -1: 0 */
  int threads;                   /* rows replayed at once; 0: one per CPU */
  int series_points;             /* > 0: each row gets "series": at up to this many points of the
                                    history's time, reserved and allocated bytes, the maxima
                                    since the previous point ("reserved", "allocated") and the
                                    minima ("reserved_min", "allocated_min"), for charts */
  int no_min_limit;              /* 1: skip the min_limit search (null) */
  uint64_t max_input_bytes;      /* tcuda_whatif_file: the largest file read; 0: 1 GiB */
  uint64_t work_budget;          /* units of work allowed (docs/whatif.md); 0: a multiple of the input's size */
  tcuda_progress_fn progress;    /* NULL, or told of the rows done ("replay", done of total); it may be
                                    called from any worker thread, one call at a time */
  void *progress_user;
} tcuda_whatif_options_t;
#define TCUDA_WHATIF_OPTIONS_INIT {.struct_size = sizeof(tcuda_whatif_options_t), .device = -1}

/* What would other configs, or a limit, do to this history? Replays the
 * snapshot under its own config (the first row, "source": "recorded") and
 * under each of opt->configs (or the default sweep) and returns, in
 * *json_out, {"snapshot": {...}, "configs": [rows], "recommended": {...}
 * or null, "notes": [...]}. A row gives config, source, peak_reserved,
 * peak_allocated, ratio, peak_segments, segment_calls, retries, ooms,
 * first_oom ({request, size, frames} or null), min_limit (the smallest
 * per-process limit, on the 2 MiB grid, under which the history has no
 * OOM) and depends_on_adaptive. docs/whatif.md describes each. Errors: a
 * file that is no snapshot (TCUDA_ERROR_PARSE, naming what and where), a
 * bad config (TCUDA_ERROR_CONFIG, naming it), bad options. */
TCUDA_API tcuda_status tcuda_whatif_file(const char *snapshot_path, const tcuda_whatif_options_t *opt,
                                         char **json_out);
/* The same for a snapshot held in memory (len bytes, pickle or JSON). */
TCUDA_API tcuda_status tcuda_whatif_buffer(const void *data, size_t len, const tcuda_whatif_options_t *opt,
                                           char **json_out);

/* Before and after a change: each snapshot replayed under its own config
 * (opt's capacity, memory_fraction, device, max_input_bytes and
 * work_budget; configs must be empty) and, in *json_out, {"before": {...},
 * "after": {...}, "change": {...}, "holders_at_peak_reserved": [...],
 * "before_explain": {...}, "after_explain": {...}}: peaks, their ratio,
 * OOM counts and what holds the memory at each peak, side by side
 * (docs/whatif.md, "What holds the memory"). Errors name the argument ("before" or
 * "after") and the file. */
TCUDA_API tcuda_status tcuda_whatif_compare_files(const char *before_path, const char *after_path,
                                                  const tcuda_whatif_options_t *opt, char **json_out);

/* @@WHATIF@@ */

typedef struct tcuda_viz_options {
  size_t struct_size;            /* sizeof(tcuda_viz_options_t) */
  int device;                    /* whose history; -1: the first device with a trace */
  int buckets;                   /* series buckets (min and max per bucket); 0: 16384; 16~65536 */
  size_t max_allocations;        /* allocations listed one by one, those covering the most bytes
                                    times entries; 0: 20000 */
  uint64_t max_input_bytes;      /* the largest file read; 0: 1 GiB */
  uint64_t work_budget;          /* units of work allowed (as tcuda_whatif_options_t's); 0: the default */
  tcuda_progress_fn progress;    /* NULL, or told of the stages "read", "parse", "trace" */
  void *progress_user;
} tcuda_viz_options_t;
#define TCUDA_VIZ_OPTIONS_INIT {.struct_size = sizeof(tcuda_viz_options_t), .device = -1}

/* The data `tcuda viz` draws, from a memory snapshot file (pickle or JSON),
 * bounded in size whatever the history's length, as one JSON document
 * ("format": "tcuda-viz/1"): the trace's counts, "peak" and "final" active
 * bytes, "series" (the active bytes per bucket of entries: "lo" its first
 * step, "min" and "max"; the exact peak survives), "allocs" (the
 * allocations covering the most of the chart, flat, fields in
 * "alloc_fields"; "allocations" counts them all), "seglife" (segment
 * lifetimes, fields in "seg_fields"), the snapshot's own "segments",
 * "settings" and the distinct stacks ("frames"). docs/whatif.md (section
 * 8) gives the rules. Errors: TCUDA_ERROR_PARSE naming the part that is
 * not a memory snapshot, TCUDA_ERROR_IO, bad options. Free with
 * tcuda_string_free. */
TCUDA_API tcuda_status tcuda_viz_file(const char *snapshot_path, const tcuda_viz_options_t *opt, char **json_out);

/* ======================================================================
 * Memory history and snapshots (torch.cuda.memory._record_memory_history)
 * ====================================================================== */

/* PyTorch's TraceEntry actions; the names are torch's strings. */
typedef enum tcuda_history_action {
  TCUDA_HISTORY_ALLOC = 0,          /* "alloc": size = the unrounded request */
  TCUDA_HISTORY_FREE_REQUESTED = 1, /* "free_requested": size = requested_size */
  TCUDA_HISTORY_FREE_COMPLETED = 2, /* "free_completed": the block is reusable */
  TCUDA_HISTORY_SEGMENT_ALLOC = 3,  /* "segment_alloc": cudaMalloc of size bytes */
  TCUDA_HISTORY_SEGMENT_FREE = 4,   /* "segment_free" */
  TCUDA_HISTORY_SEGMENT_MAP = 5,    /* "segment_map": expandable segment pages mapped */
  TCUDA_HISTORY_SEGMENT_UNMAP = 6,  /* "segment_unmap" */
  TCUDA_HISTORY_SNAPSHOT = 7,       /* "snapshot": size = total active bytes */
  TCUDA_HISTORY_OOM = 8             /* "oom": addr = device free bytes, size = rounded request */
} tcuda_history_action;

/* "alloc", "free_requested", ...; "unknown" for other values. */
TCUDA_API const char *tcuda_history_action_name(tcuda_history_action action);

typedef struct tcuda_history_entry {
  tcuda_history_action action;
  uint64_t addr;      /* block or segment address; OOM: free device bytes */
  uint64_t size;      /* per action, as above */
  int64_t stream;     /* stream id (tcuda_stream_t.id) */
  int64_t time_us;    /* microseconds since the Unix epoch, as torch */
  size_t num_frames;  /* C stack frames recorded (0 without stacks) */
  uint64_t context;   /* the recording thread's context id (tcuda_history_set_thread_context); 0: none */
} tcuda_history_entry_t;

/* Start (enabled 1) or stop (0) recording the allocator history of `device`
 * (-1: current). Entries go to a ring buffer of max_entries (0: no limit,
 * torch's default): when full, the oldest entry is dropped. stacks keeps C
 * call stacks (backtrace(); symbolized only when a snapshot is written) by
 * torch's context rules: 0 none; 1 ("all") each entry its own; 2 ("alloc")
 * allocations and OOMs their own, a block's frees its allocation stack, a
 * segment's free or unmap the segment's; 3 ("state") no entry, only live
 * blocks. With 1-3 a live block shows its allocation stack in snapshots
 * even once the ring dropped that entry; "snapshot" entries have none.
 * Calling it again while enabled changes max_entries (keeping the newest
 * entries) and stacks. Stopping discards the history, as torch does.
 * Without history the allocator's cost is one untaken branch. */
TCUDA_API tcuda_status tcuda_memory_record_history(int device, int enabled, size_t max_entries, int stacks);
/* A copy of the device's history, oldest first (*count 0 and *entries NULL
 * when not recording). Free with tcuda_memory_history_free. */
TCUDA_API tcuda_status tcuda_memory_history(int device, tcuda_history_entry_t **entries, size_t *count);
TCUDA_API void tcuda_memory_history_free(tcuda_history_entry_t *entries);

/* torch.cuda.memory._dump_snapshot(path): {"segments", "device_traces",
 * "allocator_settings"} of every device, as a pickle that torch's
 * memory_viz page, torch.cuda._memory_viz and `tcuda viz` open. Writing
 * adds a "snapshot" entry to each recording device's history, as in torch.
 * A failed write leaves no partial file at path. */
TCUDA_API tcuda_status tcuda_memory_snapshot_dump(const char *path);
/* The same document as JSON (frames included). */
TCUDA_API tcuda_status tcuda_memory_snapshot_dump_json(const char *path);

/* memory_summary() text for any stats (e.g. a replay's), for `device`'s
 * title. Free with tcuda_string_free. */
TCUDA_API tcuda_status tcuda_memory_stats_summary(const tcuda_memory_stats_t *stats, int device, int abbreviated,
                                                  char **out);

/* Snapshot on OOM: with TCUDA_OOM_SNAPSHOT=path in the environment, an
 * allocation that fails with TCUDA_ERROR_OUT_OF_MEMORY first writes
 * tcuda_memory_snapshot_dump(path), and the error message ends with
 * "; memory snapshot written to PATH" (or says why it could not be). */

/* Context ids: tag history entries with data of your own (torch's glue
 * attaches the Python frames it gathered before calling the allocator).
 * Every entry the calling thread records from now on carries `context`
 * (0: none) in tcuda_history_entry_t.context. Returns the previous id. */
TCUDA_API uint64_t tcuda_history_set_thread_context(uint64_t context);
/* Lifetime of context ids: retain(user, id) runs when an entry takes an id,
 * release(user, id) when that entry leaves the history (the ring is full,
 * max_entries shrinks, or recording stops). Both run under the allocator's
 * lock: they must not call tcuda nor wait for anything that may be waiting
 * for the allocator (a Python GIL). Both NULL: ids are plain tags. Set them
 * before recording: while entries hold retained ids, changing them is
 * TCUDA_ERROR_INVALID_STATE. An id read from tcuda_memory_history may be
 * released by the time it is used: look it up, do not assume it is alive. */
TCUDA_API tcuda_status tcuda_history_set_context_hooks(void (*retain)(void *user, uint64_t context),
                                                       void (*release)(void *user, uint64_t context), void *user);

/* @@HISTORY@@ */

/* ======================================================================
 * Pinned host memory     (PyTorch's caching host allocator, host_memory_stats)
 * ====================================================================== */

/* A timing statistic in microseconds (PyTorch's DurationStat). */
typedef struct tcuda_duration_stat {
  int64_t total, max, min, count;
  double avg;
} tcuda_duration_stat_t;

/* torch.cuda.host_memory_stats(). allocation/allocated_bytes count blocks
 * handed out (they drop when a freed block becomes reusable); segment and
 * reserved_bytes count page-locked blocks obtained from CUDA. The peak is
 * exact (PyTorch approximates it by summing per-size peaks). */
typedef struct tcuda_host_memory_stats {
  tcuda_stat_t allocation;
  tcuda_stat_t segment;
  tcuda_stat_t allocated_bytes;
  tcuda_stat_t reserved_bytes;
  tcuda_duration_stat_t host_alloc_time; /* time in cudaHostAlloc */
  tcuda_duration_stat_t host_free_time;  /* time in cudaFreeHost */
  int64_t num_host_alloc;
  int64_t num_host_free;
} tcuda_host_memory_stats_t;

/* Page-locked host memory from the cache. Sizes round up to a power of two;
 * size 0 gives NULL. */
TCUDA_API tcuda_status tcuda_host_alloc(void **ptr, size_t size);
/* Return a block to the cache. It is handed out again only after the work
 * queued so far on every stream named with tcuda_host_record_stream is done.
 * NULL is fine; an unknown or already-freed pointer is an error. */
TCUDA_API tcuda_status tcuda_host_free(void *ptr);
/* Note that `ptr` (the start of a live block) is used by work on `stream`. */
TCUDA_API tcuda_status tcuda_host_record_stream(void *ptr, tcuda_stream_t stream);
/* Give every reusable cached block back to CUDA. */
TCUDA_API tcuda_status tcuda_host_empty_cache(void);
TCUDA_API tcuda_status tcuda_host_memory_stats(tcuda_host_memory_stats_t *out);
/* torch.cuda.reset_peak_host_memory_stats() / reset_accumulated_host_memory_stats(). */
TCUDA_API tcuda_status tcuda_host_reset_peak_memory_stats(void);
TCUDA_API tcuda_status tcuda_host_reset_accumulated_memory_stats(void);

/* ======================================================================
 * CUDA graphs (torch.cuda.CUDAGraph)
 * ====================================================================== */

/* A graph captures the CUDA work queued on a stream and replays it with one
 * launch. Usage (torch.cuda.graph's steps, in C):
 *   tcuda_graph_t *g;  tcuda_graph_create(&g);
 *   tcuda_graph_capture_scope_t sc;
 *   tcuda_graph_capture_scope_begin(&sc, g, NULL, NULL, TCUDA_GRAPH_CAPTURE_GLOBAL);
 *   ... queue kernels on the current stream (a side stream now) ...
 *   tcuda_graph_capture_scope_end(&sc);
 *   tcuda_graph_replay(g, NULL);  (as often as wanted, on any stream)
 *   tcuda_graph_destroy(g);
 * Replays reuse the addresses the capture saw: inputs and outputs are
 * "static" buffers the caller fills and reads between replays.
 *
 * Memory: tcuda_malloc* calls made during a capture, on the capturing stream
 * or on streams joined into the capture (an event recorded on the capturing
 * stream and waited on by the other one), are served from the graph's
 * private pool. Its memory is never handed to allocations outside the pool
 * while the graph lives, so replays can write to it safely even after the
 * captured code tcuda_free'd it. Snapshots show the pool as pool_id; stats
 * count it as torch does. reset/destroy release the graph's use of the
 * pool; the next tcuda_empty_cache returns its free segments to CUDA.
 * While a capture is under way on a device, tcuda_empty_cache fails with
 * TCUDA_ERROR_INVALID_STATE (it would synchronize), and frees of blocks used
 * on other streams are deferred until no capture is under way.
 *
 * RNG: fills (tcuda_rand_*) captured with the default generator of the
 * capture device, or with a generator passed to
 * tcuda_graph_register_generator, draw fresh numbers on every replay,
 * continuing the generator's offset exactly as the same fills run eagerly
 * would (torch's graph-safe Philox). */
typedef struct tcuda_graph tcuda_graph_t;
typedef struct tcuda_generator tcuda_generator_t;
struct CUgraphExec_st; /* cudaGraphExec_t */

/* A memory pool token (torch's graph_pool_handle() or graph.pool()), the
 * segment_pool_id of snapshots: (uid, 0) for a pool a graph made, (0, uid)
 * for tcuda_graph_pool_handle(). */
typedef struct tcuda_graph_pool {
  uint64_t id[2];
} tcuda_graph_pool_t;

/* cudaStreamCaptureMode: which CUDA calls made during the capture are
 * refused (and break the capture). GLOBAL: unsafe calls from any thread;
 * THREAD_LOCAL: from this thread; RELAXED: none. Keep GLOBAL unless you
 * know why not. */
typedef enum tcuda_graph_capture_mode {
  TCUDA_GRAPH_CAPTURE_GLOBAL = 0,
  TCUDA_GRAPH_CAPTURE_THREAD_LOCAL = 1,
  TCUDA_GRAPH_CAPTURE_RELAXED = 2
} tcuda_graph_capture_mode;

/* torch's capture_error_mode strings: "global", "thread_local", "relaxed". */
TCUDA_API tcuda_status tcuda_graph_capture_mode_from_name(const char *name, tcuda_graph_capture_mode *out);

/* An empty graph (no GPU needed). */
TCUDA_API tcuda_status tcuda_graph_create(tcuda_graph_t **out);
/* reset, then free the graph; a capture still under way is ended and
 * discarded. NULL is fine. */
TCUDA_API tcuda_status tcuda_graph_destroy(tcuda_graph_t *graph);

/* capture_begin(pool, capture_error_mode): start capturing the calling
 * thread's current stream of the current device, which must not be the
 * default stream. pool NULL: a new private pool; otherwise share the pool
 * of tcuda_graph_pool_handle() or of another graph's tcuda_graph_pool().
 * A graph that holds a capture (or is capturing) refuses: reset it or make
 * a new one. Registered generators must be on the capture device. */
TCUDA_API tcuda_status tcuda_graph_capture_begin(tcuda_graph_t *graph, const tcuda_graph_pool_t *pool,
                                                 tcuda_graph_capture_mode mode);
/* capture_end(): must run with the capture stream current (the stream
 * capture_begin saw). Instantiates with auto-free-on-launch and node
 * priorities, as torch. A capture of 0 nodes succeeds (see num_nodes). If
 * CUDA rejects the capture (an unsafe call invalidated it, a side stream was
 * not joined back), the error names the cause and the graph is empty again. */
TCUDA_API tcuda_status tcuda_graph_capture_end(tcuda_graph_t *graph);
/* replay(): launch the captured work on `stream` (NULL: the current stream
 * of the capture device); it must be on the capture device. Before a
 * finished capture: TCUDA_ERROR_INVALID_STATE. Returns once queued. */
TCUDA_API tcuda_status tcuda_graph_replay(tcuda_graph_t *graph, const tcuda_stream_t *stream);
/* reset(): drop the captured graph and release its pool; the graph can
 * capture again. No-op on an empty graph; refused while capturing. */
TCUDA_API tcuda_status tcuda_graph_reset(tcuda_graph_t *graph);
/* pool(): this graph's pool token, to share with a later capture. Needs a
 * finished capture. */
TCUDA_API tcuda_status tcuda_graph_pool(const tcuda_graph_t *graph, tcuda_graph_pool_t *out);
/* Nodes in the captured graph (0 for an empty capture, which torch only
 * warns about). Needs a finished capture. */
TCUDA_API tcuda_status tcuda_graph_num_nodes(const tcuda_graph_t *graph, size_t *num_nodes);
/* The instantiated cudaGraphExec_t (torch's raw_cuda_graph_exec), or NULL
 * before a finished capture. tcuda owns it. */
TCUDA_API struct CUgraphExec_st *tcuda_graph_exec_handle(const tcuda_graph_t *graph);

/* enable_debug_mode(): process-wide, as torch: graphs whose capture ends
 * from now on keep their cudaGraph_t, for tcuda_graph_debug_dump. */
TCUDA_API void tcuda_graph_enable_debug_mode(void);
/* debug_dump(path): write the graph as Graphviz DOT (cudaGraphDebugDotPrint,
 * verbose). Needs debug mode at capture end; otherwise an error saying so.
 * Unlike torch the graph is kept, so it can be dumped again. */
TCUDA_API tcuda_status tcuda_graph_debug_dump(tcuda_graph_t *graph, const char *path);

/* register_generator_state: captures of this graph use `gen` graph-safely.
 * The default generator of the capture device is registered by
 * capture_begin. Not while the graph is capturing. The generator cannot be
 * destroyed while a graph holds it (destroy the graph first). */
TCUDA_API tcuda_status tcuda_graph_register_generator(tcuda_graph_t *graph, tcuda_generator_t *gen);

/* graph_pool_handle(): a new pool token to share between captures. */
TCUDA_API tcuda_status tcuda_graph_pool_handle(tcuda_graph_pool_t *out);
/* is_current_stream_capturing(): 1 if the current stream of the current
 * device is capturing. 0 without CUDA or before tcuda is initialised. */
TCUDA_API tcuda_status tcuda_is_current_stream_capturing(int *capturing);

/* torch.cuda.graph(g, pool, stream, capture_error_mode) as a scope:
 * scope_begin synchronizes the device, empties the cache, makes `stream`
 * current (NULL: a side stream tcuda keeps per device, as torch's shared
 * one) and begins the capture; scope_end ends it and restores the streams
 * and device, also when capture_end fails. */
typedef struct tcuda_graph_capture_scope {
  tcuda_graph_t *graph;
  tcuda_stream_guard_t guard;
  int active;
} tcuda_graph_capture_scope_t;
TCUDA_API tcuda_status tcuda_graph_capture_scope_begin(tcuda_graph_capture_scope_t *scope, tcuda_graph_t *graph,
                                                       const tcuda_graph_pool_t *pool, const tcuda_stream_t *stream,
                                                       tcuda_graph_capture_mode mode);
TCUDA_API tcuda_status tcuda_graph_capture_scope_end(tcuda_graph_capture_scope_t *scope);

/* make_graphed_callables for C: fn queues its work on `stream` (also the
 * current stream while it runs) and returns TCUDA_SUCCESS or an error. */
typedef tcuda_status (*tcuda_graph_fn)(void *user_data, tcuda_stream_t stream);
/* Run fn num_warmup_iters times (torch: 3) on a fresh side stream of the
 * current device, synchronize, capture one more call into a new graph with
 * the given pool (NULL: its own) in GLOBAL mode, and return that graph in
 * *out. Replaying it redoes fn's kernels. The rules fn must keep:
 *  - static addresses: it reads inputs from, and writes outputs to, buffers
 *    whose addresses stay the same (the caller owns them and copies new
 *    inputs in before each replay);
 *  - no host synchronisation (no stream/device synchronize, no synchronous
 *    cudaMemcpy, no event query) and no host-side decisions on GPU results:
 *    the replay only redoes the GPU work;
 *  - no allocation beyond the pool: memory it takes with tcuda_malloc comes
 *    from the graph's pool; cudaMalloc/cudaFree directly are not allowed.
 * If fn fails during warm-up or capture, its status is returned (message
 * prefixed), the capture is discarded and *out is NULL. */
TCUDA_API tcuda_status tcuda_graph_capture_fn(tcuda_graph_fn fn, void *user_data, const tcuda_graph_pool_t *pool,
                                              int num_warmup_iters, tcuda_graph_t **out);

/* Private pools for captures and pools the caller manages itself (torch's
 * CUDAGraph and MemPool call these through tcuda's torch glue). Pool ids are
 * the caller's: any pair but (0,0); keep them apart from
 * tcuda_graph_pool_handle's (0, uid) and tcuda's graphs' (uid, 0) if both
 * are used. device -1: current.
 * begin: from now on, allocations on `device` whose stream filter(user,
 * stream) accepts come from the pool (made on first use; one use more).
 * filter runs under the allocator's lock on the allocating thread: it must
 * not call tcuda; `user` must stay valid until end. While any pool is being
 * allocated to on a device, tcuda_empty_cache refuses as during a capture.
 * end: stop routing (the use stays). release: one use less; at 0 the pool's
 * free segments go at the next tcuda_empty_cache and the pool when it has
 * none left. retain: one use more (made if new), no routing. use_count: 0
 * for a pool that does not exist. */
TCUDA_API tcuda_status tcuda_pool_begin_allocate(int device, const tcuda_graph_pool_t *pool,
                                                 int (*filter)(void *user, struct CUstream_st *stream), void *user);
TCUDA_API tcuda_status tcuda_pool_end_allocate(int device, const tcuda_graph_pool_t *pool);
TCUDA_API tcuda_status tcuda_pool_release(int device, const tcuda_graph_pool_t *pool);
TCUDA_API tcuda_status tcuda_pool_retain(int device, const tcuda_graph_pool_t *pool);
TCUDA_API tcuda_status tcuda_pool_use_count(int device, const tcuda_graph_pool_t *pool, int *use_count);
/* From now on the pool's blocks are never split: each allocation takes a
 * whole free block or a segment of its own, with the segment sizes of the
 * default pools (torch's MemPool(no_split=True)). The pool must exist
 * (tcuda_pool_retain makes it): TCUDA_ERROR_INVALID_ARGUMENT otherwise.
 * There is no way back, as in torch. */
TCUDA_API tcuda_status tcuda_pool_set_no_split(int device, const tcuda_graph_pool_t *pool);
/* use nonzero: while the pool is in use (use count above 0), a request on
 * the default pools that would fail with TCUDA_ERROR_OUT_OF_MEMORY, after
 * every retry, takes a free block of this pool instead (never a new
 * segment there; torch's MemPool(use_on_oom=True)). 0 turns it off. The
 * pool must exist: TCUDA_ERROR_INVALID_ARGUMENT otherwise. */
TCUDA_API tcuda_status tcuda_pool_set_use_on_oom(int device, const tcuda_graph_pool_t *pool, int use);
/* Where a pool's segments come from instead of cudaMalloc (torch's
 * MemPool(allocator=...), ncclMemAlloc for example). alloc returns a
 * device pointer of `size` bytes or NULL (an out-of-memory error then);
 * free gets it back with the size and stream alloc saw. Both run under the
 * allocator's lock, as cudaMalloc does (alloc without it under
 * release_lock_on_cudamalloc), and must not call tcuda. release, if not
 * NULL, runs once the pool is gone, after its last free: the place to drop
 * `user`. Such a pool never uses expandable segments, and its segments
 * are sized as cudaMalloc'd ones. Set once, while the pool exists and
 * has no segments (TCUDA_ERROR_INVALID_STATE otherwise); not under
 * policy:compact, which maps its own pages (TCUDA_ERROR_NOT_SUPPORTED). */
typedef struct tcuda_pool_allocator {
  void *(*alloc)(void *user, size_t size, int device, struct CUstream_st *stream);
  void (*free)(void *user, void *ptr, size_t size, int device, struct CUstream_st *stream);
  void (*release)(void *user);
  void *user;
} tcuda_pool_allocator_t;
TCUDA_API tcuda_status tcuda_pool_set_allocator(int device, const tcuda_graph_pool_t *pool,
                                                const tcuda_pool_allocator_t *allocator);
/* The free segments of `device`'s private pools whose use count is 0 go
 * back to CUDA now (torch's emptyCache(pool) after MemPool's last use);
 * unlike tcuda_empty_cache, the default pools keep their cache. Refused
 * (TCUDA_ERROR_INVALID_STATE) while a capture or pool routing is under way
 * on the device. */
TCUDA_API tcuda_status tcuda_pool_empty_unused(int device);

/* ======================================================================
 * Collectives (torch.cuda.comm)
 * ====================================================================== */

/* Tensors are DLPack tensors, so tensors from PyTorch, CuPy or JAX pass
 * straight through. DLTensor is an untagged struct in dlpack v0.6, so it
 * cannot be forward-declared: include <dlpack/dlpack.h> (any version)
 * BEFORE tcuda.h and tcuda_dltensor_t is DLTensor itself; otherwise it is
 * an opaque type and you pass (const tcuda_dltensor_t *)&your_dltensor.
 * DLManagedTensor has a tag in every version.
 *
 * Inputs: DLPack's kDLCUDA or kDLCUDAManaged (GPU), kDLCPU or kDLCUDAHost
 * (host) tensors of 0 to 25 dims, any strides, dtypes int8..64, uint8..64,
 * float16/32/64, bfloat16, bool, complex32/64/128 and the 8-bit float
 * formats (moved, never summed); lanes 1.
 *
 * Outputs are DLManagedTensors the caller releases with their deleter
 * (m->deleter(m)). New memory comes from the caching allocator on the
 * output's device and on that device's current stream (scatter: the stream
 * given for it), and the deleter gives it back there. Some outputs VIEW an
 * input instead, exactly where PyTorch returns the input itself: then the
 * deleter frees only the descriptor and the input must outlive the view.
 *
 * Work is queued on the devices' current streams and the calls return
 * without waiting (except gathers to the host). Like PyTorch's copy_, a
 * copy between two GPUs runs on the source device's current stream with a
 * two-way barrier against the destination's stream.
 *
 * Engines: when PyTorch would use NCCL (CUDA tensors, dense and contiguous,
 * on unique devices) tcuda uses NCCL, except that a transfer between
 * exactly two GPUs with peer access goes its own way, which is faster: a
 * bulk copy by a copy engine, reduce_add's sum by one kernel on the
 * destination reading the peer over NVLink, many small tensors by one push
 * kernel. Other cases use peer copies and tcuda's sum kernel.
 * tcuda_comm_set_engine overrides the choice. NCCL communicators are
 * cached per ordered device list (ncclCommInitAll) and never destroyed, as
 * in PyTorch, whose destroy-at-exit crashed.
 *
 * Differences from PyTorch: complex tensors keep their dtype (PyTorch
 * returns the view_as_real form; the bytes are the same); dtypes are never
 * converted (a mismatch is an error); new outputs are contiguous except
 * scatter's, which keep a dense chunk's strides (memory_format=Preserve);
 * bool sums are logical or on every engine; 16-bit integers broadcast and
 * sum (PyTorch's NCCL path refuses them). */
struct DLManagedTensor;
#ifdef DLPACK_DLPACK_H_
typedef DLTensor tcuda_dltensor_t;
#else
typedef struct tcuda_dltensor_opaque tcuda_dltensor_t;
#endif

/* broadcast_coalesced / reduce_add_coalesced's default bucket size (10 MiB). */
#define TCUDA_COMM_BUFFER_SIZE_DEFAULT ((size_t)10485760)
/* gather's destination for host memory (PyTorch's destination=-1/"cpu";
 * here -1 keeps tcuda's meaning, the current device). */
#define TCUDA_COMM_HOST (-2)

/* The engine of the collectives below (broadcast to gather_out; the
 * *_rank calls are always NCCL). AUTO: the choice described above (the
 * default); NCCL: NCCL wherever PyTorch would use it, two peer GPUs
 * included; COPY: never NCCL, peer copies and tcuda's sum kernel only.
 * NCCL falls back to the copy paths where libnccl.so.2 does not load. */
typedef enum tcuda_comm_engine {
  TCUDA_COMM_ENGINE_AUTO = 0,
  TCUDA_COMM_ENGINE_NCCL = 1,
  TCUDA_COMM_ENGINE_COPY = 2
} tcuda_comm_engine;
/* Set the engine for the whole process (no GPU needed); a call already
 * running keeps the engine it started with. Another value is
 * TCUDA_ERROR_INVALID_ARGUMENT. */
TCUDA_API tcuda_status tcuda_comm_set_engine(tcuda_comm_engine engine);
/* The engine in effect (TCUDA_COMM_ENGINE_AUTO until set). */
TCUDA_API tcuda_status tcuda_comm_get_engine(tcuda_comm_engine *engine);

/* torch.cuda.comm.broadcast(tensor, devices): out[i] is a copy on
 * devices[i] (n entries; 0 is fine). A slot whose device is the source's
 * own gets a view of the source. The source may be on the host. Devices
 * must be >= 0 and < device count. */
TCUDA_API tcuda_status tcuda_comm_broadcast(const tcuda_dltensor_t *tensor, const int *devices, size_t ndevices,
                                            struct DLManagedTensor **out);
/* broadcast(tensor, out=...): copy into nout existing GPU tensors of the
 * same shape and dtype (any strides). */
TCUDA_API tcuda_status tcuda_comm_broadcast_out(const tcuda_dltensor_t *tensor, const tcuda_dltensor_t *const *out,
                                                size_t nout);
/* broadcast_coalesced(tensors, devices, buffer_size): every tensor must be
 * on devices[0]. out is [ndevices][ntensors] row-major: row 0 views the
 * inputs; row i holds contiguous copies on devices[i], in input order.
 * Tensors are bucketed as PyTorch does (grouped by dtype, a bucket emitted
 * once it reaches buffer_size bytes); a row's tensors of one bucket share
 * one allocation, freed when the last of them is released. */
TCUDA_API tcuda_status tcuda_comm_broadcast_coalesced(const tcuda_dltensor_t *const *tensors, size_t ntensors,
                                                      const int *devices, size_t ndevices, size_t buffer_size,
                                                      struct DLManagedTensor **out);
/* reduce_add(inputs, destination): elementwise sum in the inputs' dtype,
 * on `destination` (-1: current device), which must hold one of the inputs.
 * With one input, *out views it. */
TCUDA_API tcuda_status tcuda_comm_reduce_add(const tcuda_dltensor_t *const *inputs, size_t ninputs, int destination,
                                             struct DLManagedTensor **out);
/* reduce_add_coalesced(inputs, destination, buffer_size): inputs is
 * [ngpus][ntensors] row-major, one row per GPU (all of a row on one
 * device); out[ntensors] are the sums on destination, bucketed as
 * PyTorch's Python _take_tensors. With one row, out views the inputs. */
TCUDA_API tcuda_status tcuda_comm_reduce_add_coalesced(const tcuda_dltensor_t *const *inputs, size_t ngpus,
                                                       size_t ntensors, int destination, size_t buffer_size,
                                                       struct DLManagedTensor **out);
/* scatter(tensor, devices, chunk_sizes, dim, streams): split along dim
 * (chunk_sizes: nchunk_sizes sizes, or NULL for torch.chunk(ndevices),
 * which may make fewer chunks) and copy chunk i to devices[i]; *nout
 * receives the number of chunks, out needs room for ndevices. A chunk
 * already on its device is a view. streams (NULL, or ndevices entries, each
 * NULL or a stream on devices[i]) carry the copies, as PyTorch's per-device
 * streams do. The source may be on the host. */
TCUDA_API tcuda_status tcuda_comm_scatter(const tcuda_dltensor_t *tensor, const int *devices, size_t ndevices,
                                          const int64_t *chunk_sizes, size_t nchunk_sizes, int64_t dim,
                                          const tcuda_stream_t *const *streams, struct DLManagedTensor **out,
                                          size_t *nout);
/* scatter(tensor, dim, streams, out=...): chunk sizes come from the nout
 * GPU outputs' sizes along dim. */
TCUDA_API tcuda_status tcuda_comm_scatter_out(const tcuda_dltensor_t *tensor, const tcuda_dltensor_t *const *out,
                                              size_t nout, int64_t dim, const tcuda_stream_t *const *streams);
/* gather(tensors, dim, destination): concatenate GPU tensors along dim on
 * `destination`: a device, -1 for the current device, or TCUDA_COMM_HOST.
 * A host result is page-locked memory from the pinned caching allocator
 * (DLPack kDLCPU; the copies run at PCIe/C2C speed) and the call waits for
 * it, as PyTorch's gather to the CPU does. */
TCUDA_API tcuda_status tcuda_comm_gather(const tcuda_dltensor_t *const *tensors, size_t ntensors, int64_t dim,
                                         int destination, struct DLManagedTensor **out);
/* gather(tensors, dim, out=...): into an existing tensor (GPU or host, any
 * strides). A host out waits for completion; pageable host memory is
 * filled through pinned staging. */
TCUDA_API tcuda_status tcuda_comm_gather_out(const tcuda_dltensor_t *const *tensors, size_t ntensors, int64_t dim,
                                             const tcuda_dltensor_t *out);

/* Beyond one process (torch.cuda.nccl.unique_id / init_rank): NCCL's own
 * bootstrap. One process makes an id, hands its bytes to the others (pipe,
 * file, MPI...), and every rank calls tcuda_comm_init_rank with it. Works
 * across hosts wherever NCCL reaches (see docs/comm-multinode.md). */
#define TCUDA_COMM_UNIQUE_ID_BYTES 128
typedef struct tcuda_comm_unique_id {
  unsigned char internal[TCUDA_COMM_UNIQUE_ID_BYTES]; /* ncclUniqueId */
} tcuda_comm_unique_id_t;
typedef struct tcuda_comm tcuda_comm_t;

TCUDA_API tcuda_status tcuda_comm_unique_id(tcuda_comm_unique_id_t *id);
/* Join a communicator of nranks ranks as `rank`, on `device` (-1: current).
 * Blocks until all ranks have joined. */
TCUDA_API tcuda_status tcuda_comm_init_rank(int nranks, const tcuda_comm_unique_id_t *id, int rank, int device,
                                            tcuda_comm_t **out);
/* Destroy a communicator from tcuda_comm_init_rank (NULL is fine). */
TCUDA_API tcuda_status tcuda_comm_destroy(tcuda_comm_t *comm);
/* This rank, the rank count and the device. Any out pointer may be NULL. */
TCUDA_API tcuda_status tcuda_comm_info(const tcuda_comm_t *comm, int *rank, int *nranks, int *device);
/* In-place broadcast of a dense contiguous tensor on the communicator's
 * device from rank `root` to all ranks, on `stream` (NULL: the device's
 * current stream). Shapes and dtypes must agree across ranks. */
TCUDA_API tcuda_status tcuda_comm_broadcast_rank(tcuda_comm_t *comm, const tcuda_dltensor_t *tensor, int root,
                                                 const tcuda_stream_t *stream);
/* Sum `send` over all ranks into `recv` on rank `root` (recv is ignored,
 * and may be NULL, elsewhere; recv may be send). */
TCUDA_API tcuda_status tcuda_comm_reduce_rank(tcuda_comm_t *comm, const tcuda_dltensor_t *send,
                                              const tcuda_dltensor_t *recv, int root, const tcuda_stream_t *stream);
/* Sum over all ranks into `recv` on every rank (recv may be send). */
TCUDA_API tcuda_status tcuda_comm_all_reduce_rank(tcuda_comm_t *comm, const tcuda_dltensor_t *send,
                                                  const tcuda_dltensor_t *recv, const tcuda_stream_t *stream);

/* ======================================================================
 * cuBLAS handles                       (torch.cuda.current_blas_handle)
 * ====================================================================== */

struct cublasContext; /* cublasHandle_t */

/* The calling thread's cuBLAS handle for the current device, bound to the
 * current stream, with a workspace from the caching allocator sized by
 * CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" repeated; PyTorch's default).
 * Handles come from a per-device pool; a thread keeps its own and returns
 * it to the pool when it exits. Call it again after changing the current
 * stream. cuBLAS is loaded on the first call. A malformed
 * CUBLAS_WORKSPACE_CONFIG is TCUDA_ERROR_CONFIG (PyTorch only warns). */
TCUDA_API tcuda_status tcuda_current_blas_handle(struct cublasContext **handle);
/* Free every cuBLAS workspace back to the caching allocator. */
TCUDA_API tcuda_status tcuda_blas_clear_workspaces(void);

/* ======================================================================
 * Interop: PyTorch and CuPy allocators
 * ====================================================================== */

/* Entry points that route a framework's device memory through tcuda's
 * caching allocator, so that tcuda's stats, summary and snapshot describe
 * it. They cannot return a status: a failed malloc returns NULL and leaves
 * the reason in tcuda_last_error(); a failed free (a pointer tcuda does not
 * own) changes nothing and leaves it there too. Frees go by pointer only.
 * docs/python.md shows both in use (the tcuda Python package does the
 * wiring: tcuda.interop.use_in_torch(), tcuda.interop.use_in_cupy()).
 *
 * PyTorch: torch.cuda.memory.CUDAPluggableAllocator(path_to_libtcuda,
 * "tcuda_torch_malloc", "tcuda_torch_free"), then
 * torch.cuda.memory.change_current_allocator(it) before the first CUDA
 * allocation. size is PyTorch's ssize_t (ptrdiff_t has its ABI on every
 * platform CUDA supports); a negative size is an error. Memory belongs to
 * `stream`, the raw cudaStream_t PyTorch passes (its current stream; NULL is
 * the default stream), so a freed block is reused only on that stream, as
 * with PyTorch's own allocator. PyTorch does not forward
 * Tensor.record_stream() to pluggable allocators. */
TCUDA_API void *tcuda_torch_malloc(ptrdiff_t size, int device, struct CUstream_st *stream);
TCUDA_API void tcuda_torch_free(void *ptr, ptrdiff_t size, int device, struct CUstream_st *stream);

/* CuPy: cupy.cuda.memory.CFunctionAllocator(param, malloc, free, owner)
 * with these two (CuPy's malloc_func_type and free_func_type). param NULL:
 * memory belongs to tcuda's current stream of `device` (the default stream
 * unless tcuda_set_stream changed it); otherwise param is the cudaStream_t,
 * on that device, that every allocation belongs to. */
TCUDA_API void *tcuda_cupy_malloc(void *param, size_t size, int device);
TCUDA_API void tcuda_cupy_free(void *param, void *ptr, int device);

/* ======================================================================
 * Sharing memory between processes           (CUDA IPC, ipc_collect)
 * ====================================================================== */

#define TCUDA_IPC_HANDLE_VERSION 2

/* What a producer sends to a consumer process (plain bytes: write it to a
 * pipe, a socket or a file as it is). */
typedef struct tcuda_ipc_handle {
  uint32_t magic;
  uint32_t version;
  int32_t device;
  int32_t producer_pid;
  unsigned char mem_handle[64];   /* cudaIpcMemHandle_t of the block's whole segment */
  unsigned char event_handle[64]; /* interprocess event after the producer's queued work */
  uint64_t offset;                /* of the pointer within the segment */
  uint64_t size;                  /* bytes from the pointer to the end of its block */
  char ref_name[48];              /* shared-memory file with the reference slots */
  uint64_t ref_slot;
  uint64_t token;                 /* random, also in the slot: binds the handle to its slot */
} tcuda_ipc_handle_t;

/* Export a tcuda allocation (any pointer inside a live block) to another
 * process. The handle's event is recorded on the current stream, so the
 * consumer sees the work queued so far. While a consumer may use the block,
 * a tcuda_free of it parks the block instead of reusing it. Blocks in
 * expandable segments cannot be shared (TCUDA_ERROR_NOT_SUPPORTED). */
TCUDA_API tcuda_status tcuda_ipc_export(void *ptr, tcuda_ipc_handle_t *handle);
/* Consumer: open the memory (segments are opened once per process), make
 * the current stream wait for the producer's event, and return the pointer.
 * A handle can be imported once: a second import, here or in another
 * process, is TCUDA_ERROR_INVALID_STATE. A handle is untrusted input: its
 * reference file must belong to this user and have its full size, its slot
 * must hold the handle's token, and offset + size must lie inside the
 * opened allocation; otherwise TCUDA_ERROR_INVALID_ARGUMENT names what is
 * wrong and nothing is opened or claimed. */
TCUDA_API tcuda_status tcuda_ipc_import(const tcuda_ipc_handle_t *handle, void **ptr);
/* Consumer: synchronise the current stream, release the memory and tell
 * the producer it may reuse the block. */
TCUDA_API tcuda_status tcuda_ipc_close(void *ptr);
/* torch.cuda.ipc_collect(): free parked blocks whose consumer closed them
 * or has died, and drop the shared-memory file once nothing uses it. The
 * allocator also runs it before giving up with out-of-memory. */
TCUDA_API tcuda_status tcuda_ipc_collect(void);

/* ======================================================================
 * NVTX ranges                                        (torch.cuda.nvtx)
 * ====================================================================== */

/* Push a range; returns its zero-based depth on this thread, or a negative
 * value on error (msg NULL). Ranges show up in Nsight Systems. */
TCUDA_API int tcuda_nvtx_range_push(const char *msg);
/* Pop this thread's innermost range; returns the depth of the range ended,
 * or a negative value when no range is open. */
TCUDA_API int tcuda_nvtx_range_pop(void);
TCUDA_API tcuda_status tcuda_nvtx_mark(const char *msg);
/* Id ranges: may start and end on different threads. Ending an id that is
 * not open is an error. */
TCUDA_API tcuda_status tcuda_nvtx_range_start(const char *msg, uint64_t *id);
TCUDA_API tcuda_status tcuda_nvtx_range_end(uint64_t id);
/* Set TCUDA_NVTX=1 to have tcuda annotate its own long operations
 * (empty_cache, collectives, graph capture, the OOM retry path). */

/* ======================================================================
 * Random number generation     (torch.cuda: manual_seed, get_rng_state, ...)
 * ====================================================================== */

/* Element types of device buffers, as torch's dtypes. Shared by every part
 * of tcuda that takes a typed buffer (RNG fills, collectives); each function
 * says which ones it accepts. Values are stable. */
typedef enum tcuda_dtype {
  TCUDA_FLOAT32 = 0,
  TCUDA_FLOAT64 = 1,
  TCUDA_FLOAT16 = 2,
  TCUDA_BFLOAT16 = 3,
  TCUDA_INT8 = 4,
  TCUDA_INT16 = 5,
  TCUDA_INT32 = 6,
  TCUDA_INT64 = 7,
  TCUDA_UINT8 = 8,
  TCUDA_BOOL = 9,        /* one byte, 0 or 1 */
  TCUDA_UINT16 = 10,
  TCUDA_UINT32 = 11,
  TCUDA_UINT64 = 12,
  TCUDA_COMPLEX32 = 13,  /* torch.complex32 (chalf): two float16 */
  TCUDA_COMPLEX64 = 14,  /* two float32 */
  TCUDA_COMPLEX128 = 15, /* two float64 */
  TCUDA_FLOAT8_E4M3FN = 16,
  TCUDA_FLOAT8_E5M2 = 17,
  TCUDA_DTYPE_COUNT
} tcuda_dtype;

/* Bytes per element; 0 for a value that is not a tcuda_dtype. */
TCUDA_API size_t tcuda_dtype_size(tcuda_dtype dtype);
/* torch's name without "torch.": "float32", "bfloat16", "complex64", ...;
 * "unknown" for a value that is not a tcuda_dtype. */
TCUDA_API const char *tcuda_dtype_name(tcuda_dtype dtype);
/* Parse a name: the canonical ones above, torch's aliases ("float", "double",
 * "half", "long", "int", "short", "cfloat", "cdouble", "chalf"), and an
 * optional "torch." prefix. */
TCUDA_API tcuda_status tcuda_dtype_from_name(const char *name, tcuda_dtype *out);

/* Each device has a default generator (torch.cuda.default_generators[d]);
 * users can make their own. A generator is Philox4x32-10 with torch's state:
 * a 64-bit seed and a 64-bit offset, a multiple of 4, that each fill advances
 * exactly as torch's kernels do. The same seed and offset give the same bits
 * as torch on the same GPU model (the launch shape depends on the SM count
 * and threads per SM). */
typedef struct tcuda_generator tcuda_generator_t;

/* Size of a state from get_rng_state: uint64 seed, then int64 offset, both
 * little-endian (torch.cuda.get_rng_state()'s 16 bytes). */
#define TCUDA_RNG_STATE_SIZE 16

/* The default generator of a device (-1: current). It is created on first
 * use with a nondeterministic seed (53 bits from the OS, as torch), so until
 * tcuda_manual_seed its numbers differ from run to run. Never destroyed. */
TCUDA_API tcuda_status tcuda_default_generator(int device, tcuda_generator_t **out);
/* torch.cuda.Generator(device).manual_seed(seed): a new generator with
 * offset 0. Destroy it with tcuda_generator_destroy. */
TCUDA_API tcuda_status tcuda_generator_create(int device, uint64_t seed, tcuda_generator_t **out);
/* NULL is fine. A default generator cannot be destroyed (error). Work
 * already launched with the generator is not affected. */
TCUDA_API tcuda_status tcuda_generator_destroy(tcuda_generator_t *gen);
/* Device the generator belongs to, or -1 for NULL. */
TCUDA_API int tcuda_generator_device(const tcuda_generator_t *gen);
/* Generator.get_state(): 16 bytes as described at TCUDA_RNG_STATE_SIZE. */
TCUDA_API tcuda_status tcuda_generator_get_state(tcuda_generator_t *gen,
                                                 uint8_t state[TCUDA_RNG_STATE_SIZE]);
/* Generator.set_state(): size 16 (seed, offset) or 8 (seed only; offset 0).
 * The offset must be a multiple of 4. On error nothing changes. */
TCUDA_API tcuda_status tcuda_generator_set_state(tcuda_generator_t *gen, const void *state, size_t size);
/* Generator.manual_seed(seed): seed, and offset 0. */
TCUDA_API tcuda_status tcuda_generator_manual_seed(tcuda_generator_t *gen, uint64_t seed);
/* Generator.seed(): a nondeterministic 53-bit seed, offset 0; *seed (may be
 * NULL) receives it. */
TCUDA_API tcuda_status tcuda_generator_seed(tcuda_generator_t *gen, uint64_t *seed);
/* Generator.initial_seed(): the current seed. */
TCUDA_API tcuda_status tcuda_generator_initial_seed(tcuda_generator_t *gen, uint64_t *seed);
/* Generator.get_offset() / set_offset(): the Philox offset (multiple of 4). */
TCUDA_API tcuda_status tcuda_generator_get_offset(tcuda_generator_t *gen, uint64_t *offset);
TCUDA_API tcuda_status tcuda_generator_set_offset(tcuda_generator_t *gen, uint64_t offset);

/* torch.cuda.get_rng_state(device) / set_rng_state(state, device), on the
 * default generator of `device` (-1: current). set accepts 16 or 8 bytes as
 * tcuda_generator_set_state. */
TCUDA_API tcuda_status tcuda_get_rng_state(int device, uint8_t state[TCUDA_RNG_STATE_SIZE]);
TCUDA_API tcuda_status tcuda_set_rng_state(int device, const void *state, size_t size);
/* get_rng_state_all(): device d's state at out + 16*d, for every device;
 * size must be at least 16 * tcuda_device_count(). */
TCUDA_API tcuda_status tcuda_get_rng_state_all(uint8_t *out, size_t size);
/* set_rng_state_all(states): size = 16*k for 1 <= k <= device count; the
 * k states go to devices 0..k-1. All are checked before any is set. */
TCUDA_API tcuda_status tcuda_set_rng_state_all(const void *states, size_t size);
/* torch.cuda.manual_seed / manual_seed_all / seed / seed_all. Without CUDA
 * they do nothing and succeed ("silently ignored", as torch). seed_all seeds
 * device 0 nondeterministically and gives every device that same seed. */
TCUDA_API tcuda_status tcuda_manual_seed(uint64_t seed);
TCUDA_API tcuda_status tcuda_manual_seed_all(uint64_t seed);
TCUDA_API tcuda_status tcuda_seed(void);
TCUDA_API tcuda_status tcuda_seed_all(void);
/* torch.cuda.initial_seed(), for `device` (-1: current). */
TCUDA_API tcuda_status tcuda_initial_seed(int device, uint64_t *seed);

/* Fill functions: the values torch's in-place ops write into a contiguous
 * CUDA tensor of n elements at `buf`, for the same generator state, and the
 * same offset advance.
 *  - gen NULL: the default generator of buf's device. A generator must be on
 *    buf's device.
 *  - stream NULL: the calling thread's current stream of that device; a given
 *    stream must be on buf's device. Returns once the work is queued.
 *  - buf must be device (or managed) memory of at least n elements; it needs
 *    no alignment beyond the dtype's. NULL is accepted only when n is 0.
 *  - n = 0 does nothing (no offset advance). Any n is supported: as torch,
 *    buffers over 2^31-1 bytes are filled in halves (recursively), each half
 *    with its own draw after one for the whole.
 *  - Checks are torch's, with its conditions, made before anything changes.
 * The generator's lock is held while the kernels are queued, so concurrent
 * fills with one generator get disjoint offsets. */

/* tensor.uniform_(from, to), torch.rand (0, 1). float32, float64, float16,
 * bfloat16, and complex64/complex128 (real and imaginary parts, 2n values).
 * from <= to, both in the dtype's range, to - from finite. */
TCUDA_API tcuda_status tcuda_rand_uniform(tcuda_generator_t *gen, void *buf, size_t n, tcuda_dtype dtype,
                                          double from, double to, const tcuda_stream_t *stream);
/* tensor.normal_(mean, std), torch.randn (0, 1). Same dtypes as uniform
 * (complex: std/sqrt(2) per part). std >= 0. */
TCUDA_API tcuda_status tcuda_rand_normal(tcuda_generator_t *gen, void *buf, size_t n, tcuda_dtype dtype,
                                         double mean, double std, const tcuda_stream_t *stream);
/* tensor.random_(): integers in [0, 2^63) for int64, [0, max] for other
 * integer types, 0/1 for bool, [0, 2^mantissa_digits] for floating types
 * (2^24 for float32, 2^53 for float64, 2^11 for float16, 2^8 for bfloat16).
 * int8/16/32/64, uint8, bool, float16/32/64, bfloat16. */
TCUDA_API tcuda_status tcuda_rand_random(tcuda_generator_t *gen, void *buf, size_t n, tcuda_dtype dtype,
                                         const tcuda_stream_t *stream);
/* tensor.random_(low, high), torch.randint(low, high): [low, high), low < high,
 * in the dtype's range. Every integer type, bool and the floating types (for
 * which, as torch, low/high move inwards to values the dtype represents). */
TCUDA_API tcuda_status tcuda_rand_randint(tcuda_generator_t *gen, void *buf, size_t n, tcuda_dtype dtype,
                                          int64_t low, int64_t high, const tcuda_stream_t *stream);
/* tensor.random_(from): [from, max of the dtype] (2^mantissa_digits for
 * floating types). from = INT64_MIN means all 64 bits (int64, float64,
 * float32 and bfloat16 only). */
TCUDA_API tcuda_status tcuda_rand_random_from(tcuda_generator_t *gen, void *buf, size_t n, tcuda_dtype dtype,
                                              int64_t from, const tcuda_stream_t *stream);

/* Host fills: the bytes the fills above write, computed on the CPU, with no
 * GPU. The values depend on the launch geometry, which torch derives from
 * the device: a grid of min(blocks needed, sm_count * (max_threads_per_sm
 * / 256)) blocks of 256 threads. Give the device's (an H200: 132 SMs, 2048
 * threads per SM) and the result equals its fill at the same seed and
 * offset, byte for byte. */
typedef enum tcuda_rand_kind {
  TCUDA_RAND_UNIFORM = 0,    /* tcuda_rand_uniform(from, to) */
  TCUDA_RAND_NORMAL = 1,     /* tcuda_rand_normal(mean, std): no host fill (see below) */
  TCUDA_RAND_RANDOM = 2,     /* tcuda_rand_random() */
  TCUDA_RAND_RANDINT = 3,    /* tcuda_rand_randint(low, high) */
  TCUDA_RAND_RANDOM_FROM = 4 /* tcuda_rand_random_from(low) */
} tcuda_rand_kind;
/* One fill's arguments: the fields its kind names; the others are unused. */
typedef struct tcuda_rand_request {
  tcuda_rand_kind kind;
  tcuda_dtype dtype;
  double from, to;    /* UNIFORM */
  double mean, std;   /* NORMAL */
  int64_t low, high;  /* RANDINT: [low, high); RANDOM_FROM: from = low */
} tcuda_rand_request_t;
#define TCUDA_RAND_REQUEST_INIT {.kind = TCUDA_RAND_UNIFORM, .dtype = TCUDA_FLOAT32, .to = 1, .std = 1}

/* Fill n elements of host memory at buf as the request's GPU fill does for a
 * generator at (seed, *offset) on a device of sm_count SMs (1..2^20) with
 * max_threads_per_sm threads each (256..2^20), and advance *offset as that
 * fill advances the generator. Same dtypes, checks and 32-bit split as the
 * GPU fill; buf needs no alignment; n = 0 only checks the arguments (buf may
 * be NULL). TCUDA_ERROR_NOT_SUPPORTED for TCUDA_RAND_NORMAL with n > 0:
 * normals come from the GPU's own sincosf and logf, which the host does not
 * reproduce bit for bit. On error *offset and buf are unchanged. */
TCUDA_API tcuda_status tcuda_rand_fill_host(const tcuda_rand_request_t *req, uint64_t seed, uint64_t *offset,
                                            int sm_count, int max_threads_per_sm, void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* TCUDA_H */
