/* The device-memory backend the allocator's policy runs on, and its two
 * implementations.
 *
 * backend_cuda.c: cudaMalloc, cuMem* for expandable segments, events.
 * backend_sim.c:  a simulated address space with a capacity (replay,
 *                 tests, and benchmarks without a GPU).
 *
 * Addresses and stream keys are uint64_t so that both backends share one
 * policy code path; a stream key is the raw cudaStream_t value (0 = the
 * legacy default stream). */
#ifndef TC_ALLOC_BACKEND_H
#define TC_ALLOC_BACKEND_H
#include "tcuda.h"
#include "core/error.h"
#include <stddef.h>
#include <stdint.h>

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
  /* Waits for all work queued on the device, on any stream: the compact
   * policy's trim, which must not name a stream the program may have
   * destroyed since it freed a block there. */
  tcuda_status (*device_synchronize)(void *ctx, int device);
  /* Device free/total bytes, for the OOM message. */
  tcuda_status (*mem_info)(void *ctx, int device, uint64_t *free_bytes, uint64_t *total_bytes);
  /* Optional (NULL: use unmap). Unmap, keeping the physical pages for the
   * device's next map calls instead of releasing them, so that the compact
   * policy moves pages rather than releasing and creating them. */
  tcuda_status (*unmap_keep)(void *ctx, int device, uint64_t addr, uint64_t size);
  /* Release the pages unmap_keep kept that no map has taken. */
  void (*release_kept)(void *ctx, int device);
};

/* ---- backend_cuda.c ---- */
/* The CUDA backend (one shared instance; device is passed per call). */
const tc_backend *tc_backend_cuda(void);

/* ---- backend_sim.c ---- */
/* The simulated device's memory unless told otherwise: an H200's, as
 * cudaMemGetInfo reports it (replays, what-if and their tests use it). */
#define TC_H200_CAPACITY 150109880320ULL

typedef enum tc_sim_va { TC_SIM_VA_DRIVER = 0, TC_SIM_VA_ASCENDING = 1 } tc_sim_va;
typedef struct tc_sim_options {
  uint64_t capacity;          /* bytes; 0 means TC_H200_CAPACITY */
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
/* The next segment_alloc (which must ask for `size`) returns addr: a
 * recorded placement fed one at a time. TCUDA_ERROR_INVALID_STATE, with no
 * message, when the range overlaps a live segment or is misaligned. */
tcuda_status tc_backend_sim_place_next(tc_backend *be, uint64_t addr, uint64_t size);
/* Drops a placement that no segment_alloc took (the allocation failed). */
void tc_backend_sim_place_cancel(tc_backend *be);

#endif
