/* Internal glue between the comm layer's files: NCCL (nccl.c) and the
 * engines (comm.c). Includes CUDA. */
#ifndef TC_COMM_IMPL_H
#define TC_COMM_IMPL_H
#include "comm/comm.h"
#include "core/core.h"

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
tcuda_status tc_nccl_broadcast_bytes(const char *func, int n, const int *devs, void *const *bufs, size_t bytes,
                                     const struct tcuda_stream *streams);
/* Several broadcasts (one per bucket) in one NCCL group. bufs is
 * [nbuf][n], sizes[nbuf]. */
tcuda_status tc_nccl_broadcast_many(const char *func, int n, const int *devs, size_t nbuf, void *const *bufs,
                                    const size_t *sizes, const struct tcuda_stream *streams);
/* Reduce count elements of dt from send[i] into recv on rank root. */
tcuda_status tc_nccl_reduce(const char *func, int n, const int *devs, const void *const *send, void *recv, int root,
                            size_t count, DLDataType dt, const struct tcuda_stream *streams);
#endif
