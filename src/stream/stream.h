/* Internal API of the stream layer for the layers above it (allocator, rng,
 * graphs). Includes CUDA. */
#ifndef TC_STREAM_H
#define TC_STREAM_H
#include "core/core.h"

/* Streams support device indices below this (the current-stream table and
 * the pools are fixed arrays, so the hot paths need no lock). */
#define TC_MAX_DEVICES 64

/* Stream id layout (documented in tcuda.h). */
#define TC_STREAM_TYPE_DEDICATED 0xE
#define TC_STREAMS_PER_POOL 32
#define TC_MAX_PRIORITY_LEVELS 4

/* The calling thread's current stream per device. Zero means "default
 * stream", which is why readers patch in the device. */
extern _Thread_local tcuda_stream_t tc_tl_current_stream[TC_MAX_DEVICES];

/* Called by tcuda_stream_destroy before the stream goes, with its device
 * and handle; set by the allocator (its thread caches hold blocks per
 * stream), NULL until then. */
extern void (*_Atomic tc_stream_destroy_hook)(int device, uint64_t handle);

/* Current stream of `device` for this thread. The caller guarantees
 * 0 <= device < min(device count, TC_MAX_DEVICES). No lock, no CUDA call. */
static inline tcuda_stream_t tc_current_stream_fast(int device) {
  tcuda_stream_t s = tc_tl_current_stream[device];
  s.device = device;
  return s;
}

/* Check a stream value passed in by a user: device in range and known to
 * the stream layer. Initialises CUDA. Errors name func and arg. */
tcuda_status tc_stream_check(const char *func, const char *arg, tcuda_stream_t s);

/* The current stream of `device` (-1: current device), range-checked;
 * errors name func. */
tcuda_status tc_stream_current(const char *func, int device, tcuda_stream_t *out);

/* Run CUDA work on `device`: makes it current only when it is not already
 * (a pending target device becomes real). tc_on_device_end restores. */
tcuda_status tc_on_device_begin(const char *func, int device, int *saved);
void tc_on_device_end(int saved);

#endif
