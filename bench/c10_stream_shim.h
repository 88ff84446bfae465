/* C view of PyTorch's C++ stream and event calls (libc10_cuda), for
 * bench_streams' torch column. Built only when a torch install is found at
 * configure time (BENCH_HAVE_C10).
 *
 * Each timing function runs its whole loop of n calls inside the shim and
 * returns nanoseconds per call, so no C-to-C++ call enters the timed region.
 * A negative return (or -1 from c10s_init) means a C++ exception, whose text
 * c10s_last_error() then holds. */
#ifndef BENCH_C10_STREAM_SHIM_H
#define BENCH_C10_STREAM_SHIM_H
#ifdef __cplusplus
extern "C" {
#endif

/* Registers the primary-context hook libtorch_cuda would register, takes a
 * pool stream on `device` and records one event on it (so query and record
 * find the CUDA event made), then waits for it. Call once, before the rest. */
int c10s_init(int device);
/* c10::cuda::getStreamFromPool(priority 0, device); device -1: current. */
double c10s_pool_get(int device, long n);
/* c10::cuda::getCurrentCUDAStream(device); device -1: current. */
double c10s_current_stream(int device, long n);
/* CUDAEvent::record(stream) on init's stream; waits for the stream after. */
double c10s_event_record(long n);
/* CUDAEvent::query() on the event (complete once the stream is idle). */
double c10s_event_query(long n);
/* CUDAStream::query() on init's stream. */
double c10s_stream_query(long n);
/* Waits for init's stream. */
int c10s_synchronize(void);
const char *c10s_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
