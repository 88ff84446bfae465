/* Internal glue between the comm layer's files: the public calls (api.c)
 * use the output tensors (tensor.c), the copies (copy.c), the kernel
 * engine (kernel.c) and NCCL (nccl.c). Includes CUDA. */
#ifndef TC_COMM_IMPL_H
#define TC_COMM_IMPL_H
#include "comm/comm.h"
#include "comm/kernels.h"
#include "core/core.h"
#include "stream/stream.h"

/* ---- streams (shared) ---- */

static inline tcuda_stream_t tc_comm_cur(int dev) { return tc_current_stream_fast(dev); }
/* Later work on `waiter` waits for work queued on `other` so far. */
static inline tcuda_status tc_comm_wait(tcuda_stream_t waiter, tcuda_stream_t other) {
  if (waiter.device == other.device && waiter.handle == other.handle) return TCUDA_SUCCESS;
  return tcuda_stream_wait_stream(waiter, other);
}
static inline tcuda_status tc_comm_sync(const char *F, tcuda_stream_t strm) {
  (void)F;
  return tcuda_stream_synchronize(strm);
}

/* ---- tensor.c: memory and output tensors ---- */

/* Device memory from the caching allocator on dev, for stream strm (NULL for
 * 0 bytes); freed by tc_comm_dev_free (NULL is fine). */
tcuda_status tc_comm_dev_alloc(const char *F, void **p, size_t bytes, int dev, tcuda_stream_t strm);
void tc_comm_dev_free(void *p);

/* An allocation shared by outputs (coalesced buckets): freed with the last. */
typedef struct tc_buf tc_buf;
/* Wrap a fresh allocation (host: from tcuda_host_alloc); on failure the
 * memory is freed here. */
tcuda_status tc_comm_buf_wrap(const char *F, void *ptr, int host, tc_buf **out);
/* Drop a reference (NULL is fine). */
void tc_comm_buf_unref(tc_buf *b);

/* *slot = a DLManagedTensor describing t, holding a reference to buf (NULL:
 * a view of a caller's tensor). */
tcuda_status tc_comm_out(const char *F, const tc_tensor *t, tc_buf *buf, DLManagedTensor **slot);
/* Release out[0..n) and set them to NULL. */
void tc_comm_release_all(DLManagedTensor **out, size_t n);
/* A contiguous tensor shaped like t at data on a device (-1: host). */
tc_tensor tc_comm_contig_like(const tc_tensor *t, void *data, int device);

/* ---- copy.c: copies ---- */

/* dst = src (same shape and dtype), PyTorch copy_ style. ds is the stream
 * of dst's device that owns the result, ss the current stream of src's
 * device. Host destinations are complete on return only when pinned
 * staging was needed; callers that promise completion synchronise. */
tcuda_status tc_comm_copy_view(const char *F, const tc_tensor *dst, tcuda_stream_t ds, const tc_tensor *src,
                               tcuda_stream_t ss);

/* ---- kernel.c: the engines (copy.c builds on these) ---- */

/* A copy's layout after coalescing: n dims, element size es, the shape and
 * the destination's and source's strides (in elements). */
typedef struct {
  int n;
  int64_t es;
  int64_t shape[TC_COMM_MAX_DIMS], sd[TC_COMM_MAX_DIMS], ss[TC_COMM_MAX_DIMS];
} tc_layout;

/* Enough 512-thread blocks to fill the device (4 per SM). */
int tc_comm_blocks_for(int dev);
/* 1 when kernels on `dev` can touch `peer`'s memory (access enabled once). */
int tc_comm_peer_ok(int dev, int peer);
/* The strided copy of numel elements laid out as l, on stream strm. */
tcuda_status tc_comm_launch_strided(const char *F, tcuda_stream_t strm, char *dst, const char *src, const tc_layout *l,
                                    int64_t numel);
/* Bytes between any two places (device -1: host), run on stream strm (on a
 * GPU of the pair). */
tcuda_status tc_comm_copy_bytes(const char *F, void *dst, int ddev, const void *src, int sdev, size_t bytes,
                                tcuda_stream_t strm);
/* Several contiguous byte copies in one kernel launch on stream strm. */
tcuda_status tc_comm_multicopy(const char *F, const tc_copy_item *items, size_t n, tcuda_stream_t strm);
/* Sum contiguous buffers ptrs[i] (on devs[i], count elements each) into
 * result on devs[root], by NCCL or tcuda's kernel as engine
 * (TCUDA_COMM_ENGINE_*) says. nccl_ok: PyTorch would use NCCL here. */
tcuda_status tc_comm_reduce_flat(const char *F, int engine, size_t n, const int *devs, const void *const *ptrs,
                                 size_t root, size_t count, DLDataType dt, void *result, int nccl_ok);

/* ---- nccl.c: NCCL ---- */

/* NCCL data type for a dtype: *mult is how many NCCL elements one element
 * is (2 for complex, viewed as real). -1 when NCCL cannot sum it (16-bit
 * integers, fp8). */
int tc_nccl_dtype(DLDataType dt, int *mult);
/* ncclRedOp for a sum of dt: ncclSum, or ncclMax for bool (a sum would
 * leave 2 in a bool byte; max is logical or). */
int tc_nccl_sum_op(DLDataType dt);
/* 1 if libnccl.so.2 can be loaded. */
int tc_nccl_available(void);

/* Broadcast `bytes` from bufs[0] (on devs[0]) to bufs[1..n) over the
 * cached communicator of devs (ordered), on streams[i]. */
tcuda_status tc_nccl_broadcast_bytes(const char *F, int n, const int *devs, void *const *bufs, size_t bytes,
                                     const struct tcuda_stream *streams);
/* Several broadcasts (one per bucket) in one NCCL group. bufs is
 * [nbuf][n], sizes[nbuf]. */
tcuda_status tc_nccl_broadcast_many(const char *F, int n, const int *devs, size_t nbuf, void *const *bufs,
                                    const size_t *sizes, const struct tcuda_stream *streams);
/* Reduce count elements of dt from send[i] into recv on rank root. */
tcuda_status tc_nccl_reduce(const char *F, int n, const int *devs, const void *const *send, void *recv, int root,
                            size_t count, DLDataType dt, const struct tcuda_stream *streams);
#endif
