/* Fault injection for tests: make chosen CUDA and NCCL calls fail on purpose,
 * so that the error paths above them run on a real GPU.
 *
 * Compiled in only by the CMake option TCUDA_FAULT_INJECTION (test builds),
 * which defines the macro of that name. Without it TC_FAULT(point) is the
 * constant 0, so `TC_FAULT(p) ? err : call()` is just `call()`, and nothing
 * else here exists: a release build has no hook and reads no TCUDA_FAULT.
 *
 * A hooked call that must fail is not made; the site returns the error the
 * real failure gives, listed per point below, so the caller takes the path
 * a real failure would. Internal: tests include it from src/. */
#ifndef TC_FAULT_H
#define TC_FAULT_H

typedef enum tc_fault_point {
  TC_FAULT_SEGMENT_ALLOC,     /* cudaMalloc of a segment (alloc/backend_cuda.c): cudaErrorMemoryAllocation */
  TC_FAULT_MEM_CREATE,        /* cuMemCreate of one granule of an expandable segment: CUDA_ERROR_OUT_OF_MEMORY */
  TC_FAULT_MEM_MAP,           /* cuMemMap of that granule: CUDA_ERROR_INVALID_VALUE (a hard error, not OOM) */
  TC_FAULT_ALLOC_EVENT,       /* the allocator's cudaEventRecord for record_stream frees:
                                 cudaErrorInvalidResourceHandle */
  TC_FAULT_EVENT_RECORD,      /* cudaEventRecord of tcuda_event_record and tcuda_stream_record_event
                                 (stream/event.c): cudaErrorInvalidResourceHandle */
  TC_FAULT_STREAM_CREATE,     /* cudaStreamCreateWithPriority, pools and tcuda_stream_create (stream/stream.c):
                                 cudaErrorMemoryAllocation */
  TC_FAULT_NCCL_INIT,         /* ncclCommInitAll and ncclCommInitRank (comm/nccl.c): ncclUnhandledCudaError */
  TC_FAULT_NPOINTS
} tc_fault_point;

#ifdef TCUDA_FAULT_INJECTION
#include "tcuda.h"

/* count for "every hit from nth on" */
#define TC_FAULT_FOREVER (-1L)

/* Arm `point` process-wide: counting from now, hits nth .. nth+count-1 fail
 * (nth 1: the next one; count TC_FAULT_FOREVER: all from nth on). Every
 * thread's hits count. nth < 1 or count 0 disarms. Resets the point's hit
 * and fired counters. Arm while no other thread passes the point: the
 * counting itself is exact under any number of threads. */
void tc_fault_arm(tc_fault_point point, long nth, long count);
/* The same for the calling thread's hits only; other threads are not
 * affected and do not advance its count. Independent of tc_fault_arm. */
void tc_fault_arm_thread(tc_fault_point point, long nth, long count);
/* Disarm every point, process-wide and for the calling thread, and zero
 * the counters. */
void tc_fault_reset(void);

/* At a hooked call: count the hit; 1 when this call must fail. */
int tc_fault_hit(tc_fault_point point);
/* Hits of `point` by any thread, and failures injected there (by either
 * kind of arm), since its last tc_fault_arm or tc_fault_reset. */
long tc_fault_hits(tc_fault_point point);
long tc_fault_fired(tc_fault_point point);

/* "segment_alloc", "mem_create", ...; NULL for a bad point. */
const char *tc_fault_point_name(tc_fault_point point);
/* Arm from text: "point:nth[:count]" items joined by ',', e.g.
 * "segment_alloc:3" (the third fails) or "event_record:1:-1" (all fail).
 * All or nothing: a bad item arms nothing and fails with
 * TCUDA_ERROR_INVALID_ARGUMENT, the message starting with `source`. */
tcuda_status tc_fault_arm_spec(const char *source, const char *spec);
/* Test builds read TCUDA_FAULT once, at the first use of anything here,
 * as tc_fault_arm_spec("TCUDA_FAULT", ...) (arms made later by calls win).
 * NULL when it was absent or good, else why it armed nothing. */
const char *tc_fault_env_error(void);

#define TC_FAULT(point) __builtin_expect(tc_fault_hit(point), 0)
#else
#define TC_FAULT(point) 0
#endif

#endif
