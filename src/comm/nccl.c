/* NCCL glue: every function through tc_nccl_sym (libtcuda does not link
 * NCCL), the communicator cache of the single-process collectives, and the
 * multi-process communicator API. */
#include "comm/comm_impl.h"
#include "stream/stream.h"
#include "core/fault.h"
#include <nccl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef const char *(*err_fn)(ncclResult_t);

static tcuda_status nccl_fail(const char *F, const char *call, ncclResult_t r) {
  err_fn es = (err_fn)tc_nccl_sym("ncclGetErrorString");
  return tc_error(TCUDA_ERROR_NCCL, "%s: %s: NCCL Error %d: %s", F, call, (int)r, es ? es(r) : "unknown");
}

#define NCCL_FN(var, type, name)                                                                 \
  type var = (type)tc_nccl_sym(name);                                                           \
  if (!var) return tc_error(TCUDA_ERROR_NOT_AVAILABLE, "%s: NCCL is not available (%s not found in libnccl.so.2)", \
                            F, name)

int tc_nccl_available(void) { return tc_nccl_sym("ncclCommInitAll") != NULL; }

int tc_nccl_dtype(DLDataType dt, int *mult) {
  *mult = 1;
  if (dt.code == TC_DL_COMPLEX) {
    *mult = 2;
    dt = tc_dtype_real(dt);
  }
  switch (dt.code) {
  case TC_DL_INT:
    return dt.bits == 8 ? ncclInt8 : dt.bits == 32 ? ncclInt32 : dt.bits == 64 ? ncclInt64 : -1;
  case TC_DL_UINT:
    return dt.bits == 8 ? ncclUint8 : dt.bits == 32 ? ncclUint32 : dt.bits == 64 ? ncclUint64 : -1;
  case TC_DL_BOOL: return ncclUint8;
  case TC_DL_FLOAT:
    return dt.bits == 16 ? ncclFloat16 : dt.bits == 32 ? ncclFloat32 : ncclFloat64;
  case TC_DL_BFLOAT:
    return tcuda_nccl_version() >= 21000 ? ncclBfloat16 : -1;
  default: return -1;
  }
}

int tc_nccl_sum_op(DLDataType dt) { return dt.code == TC_DL_BOOL ? ncclMax : ncclSum; }

/* ---- communicator cache: ordered device list -> one comm per device.
 * Never evicted: PyTorch stopped destroying them because destroy at exit
 * crashed, and a clique is cheap next to re-initialising. ---- */
typedef struct clique {
  struct clique *next;
  int n;
  int *devs;
  ncclComm_t *comms;
} clique;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static clique *g_cliques;

static tcuda_status get_comms(const char *F, int n, const int *devs, ncclComm_t **out) {
  pthread_mutex_lock(&g_mu);
  for (clique *c = g_cliques; c; c = c->next)
    if (c->n == n && !memcmp(c->devs, devs, (size_t)n * sizeof *devs)) {
      *out = c->comms;
      pthread_mutex_unlock(&g_mu);
      return TCUDA_SUCCESS;
    }
  tcuda_status s = TCUDA_SUCCESS;
  ncclResult_t (*init_all)(ncclComm_t *, int, const int *) =
      (ncclResult_t(*)(ncclComm_t *, int, const int *))tc_nccl_sym("ncclCommInitAll");
  clique *c = calloc(1, sizeof *c);
  if (c) c->devs = malloc((size_t)n * sizeof *devs);
  if (c) c->comms = calloc((size_t)n, sizeof *c->comms);
  if (!init_all) {
    s = tc_error(TCUDA_ERROR_NOT_AVAILABLE, "%s: NCCL is not available (libnccl.so.2 not loaded)", F);
  } else if (!c || !c->devs || !c->comms) {
    s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  } else {
    ncclResult_t r = TC_FAULT(TC_FAULT_NCCL_INIT) ? ncclUnhandledCudaError : init_all(c->comms, n, devs);
    if (r != ncclSuccess) s = nccl_fail(F, "ncclCommInitAll", r);
  }
  if (s) {
    if (c) { free(c->devs); free(c->comms); free(c); }
    pthread_mutex_unlock(&g_mu);
    return s;
  }
  memcpy(c->devs, devs, (size_t)n * sizeof *devs);
  c->n = n;
  c->next = g_cliques;
  g_cliques = c;
  *out = c->comms;
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}

typedef ncclResult_t (*group_fn)(void);
typedef ncclResult_t (*uid_fn)(ncclUniqueId *);
typedef ncclResult_t (*initrank_fn)(ncclComm_t *, int, ncclUniqueId, int);
typedef ncclResult_t (*destroy_fn)(ncclComm_t);
typedef ncclResult_t (*bcast_fn)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
typedef ncclResult_t (*reduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
                                  cudaStream_t);
typedef ncclResult_t (*allreduce_fn)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                     cudaStream_t);

tcuda_status tc_nccl_broadcast_many(const char *F, int n, const int *devs, size_t nbuf, void *const *bufs,
                                    const size_t *sizes, const tcuda_stream_t *streams) {
  NCCL_FN(gstart, group_fn, "ncclGroupStart");
  NCCL_FN(gend, group_fn, "ncclGroupEnd");
  NCCL_FN(bcast, bcast_fn, "ncclBroadcast");
  ncclComm_t *comms;
  tcuda_status s = get_comms(F, n, devs, &comms);
  if (s) return s;
  ncclResult_t r = gstart();
  if (r != ncclSuccess) return nccl_fail(F, "ncclGroupStart", r);
  for (size_t b = 0; b < nbuf && !s; b++) {
    if (!sizes[b]) continue;
    for (int i = 0; i < n; i++) {
      int saved;
      s = tc_on_device_begin(F, devs[i], &saved);
      if (s) break;
      /* bytes: broadcast does not care about the type */
      r = bcast(bufs[b * (size_t)n + (size_t)i], bufs[b * (size_t)n + (size_t)i], sizes[b], ncclUint8, 0, comms[i],
                streams[i].handle);
      tc_on_device_end(saved);
      if (r != ncclSuccess) { s = nccl_fail(F, "ncclBroadcast", r); break; }
    }
  }
  r = gend();
  if (!s && r != ncclSuccess) s = nccl_fail(F, "ncclGroupEnd", r);
  return s;
}

tcuda_status tc_nccl_broadcast_bytes(const char *F, int n, const int *devs, void *const *bufs, size_t bytes,
                                     const tcuda_stream_t *streams) {
  return tc_nccl_broadcast_many(F, n, devs, 1, bufs, &bytes, streams);
}

tcuda_status tc_nccl_reduce(const char *F, int n, const int *devs, const void *const *send, void *recv, int root,
                            size_t count, DLDataType dt, const tcuda_stream_t *streams) {
  NCCL_FN(gstart, group_fn, "ncclGroupStart");
  NCCL_FN(gend, group_fn, "ncclGroupEnd");
  NCCL_FN(reduce, reduce_fn, "ncclReduce");
  int mult, ndt = tc_nccl_dtype(dt, &mult);
  if (ndt < 0) return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: Unconvertible NCCL type %s", F, tc_dtype_name(dt));
  ncclComm_t *comms;
  tcuda_status s = get_comms(F, n, devs, &comms);
  if (s) return s;
  ncclResult_t r = gstart();
  if (r != ncclSuccess) return nccl_fail(F, "ncclGroupStart", r);
  for (int i = 0; i < n; i++) {
    int saved;
    s = tc_on_device_begin(F, devs[i], &saved);
    if (s) break;
    r = reduce(send[i], i == root ? recv : NULL, count * (size_t)mult, (ncclDataType_t)ndt,
               (ncclRedOp_t)tc_nccl_sum_op(dt), root, comms[i], streams[i].handle);
    tc_on_device_end(saved);
    if (r != ncclSuccess) { s = nccl_fail(F, "ncclReduce", r); break; }
  }
  r = gend();
  if (!s && r != ncclSuccess) s = nccl_fail(F, "ncclGroupEnd", r);
  return s;
}

/* ---- multi-process communicators ---- */
struct tcuda_comm {
  ncclComm_t comm;
  int rank, nranks, device;
};

_Static_assert(sizeof(ncclUniqueId) == TCUDA_COMM_UNIQUE_ID_BYTES, "ncclUniqueId size");

tcuda_status tcuda_comm_unique_id(tcuda_comm_unique_id_t *id) {
  const char *F = "tcuda_comm_unique_id";
  TC_CHECK_ARG(F, id, "id");
  NCCL_FN(get, uid_fn, "ncclGetUniqueId");
  ncclUniqueId u;
  ncclResult_t r = get(&u);
  if (r != ncclSuccess) return nccl_fail(F, "ncclGetUniqueId", r);
  memcpy(id->internal, &u, sizeof u);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_comm_init_rank(int nranks, const tcuda_comm_unique_id_t *id, int rank, int device,
                                  tcuda_comm_t **out) {
  const char *F = "tcuda_comm_init_rank";
  TC_CHECK_ARG(F, out, "out");
  TC_CHECK_ARG(F, id, "id");
  if (nranks < 1) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: nranks %d must be >= 1", F, nranks);
  if (rank < 0 || rank >= nranks)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: rank %d out of range (nranks %d)", F, rank, nranks);
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  NCCL_FN(init, initrank_fn, "ncclCommInitRank");
  tcuda_comm_t *c = calloc(1, sizeof *c);
  if (!c) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  ncclUniqueId u;
  memcpy(&u, id->internal, sizeof u);
  int saved;
  s = tc_on_device_begin(F, device, &saved);
  if (s) { free(c); return s; }
  ncclResult_t r = TC_FAULT(TC_FAULT_NCCL_INIT) ? ncclUnhandledCudaError : init(&c->comm, nranks, u, rank);
  tc_on_device_end(saved);
  if (r != ncclSuccess) { free(c); return nccl_fail(F, "ncclCommInitRank", r); }
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  *out = c;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_comm_destroy(tcuda_comm_t *comm) {
  const char *F = "tcuda_comm_destroy";
  if (!comm) return TCUDA_SUCCESS;
  NCCL_FN(destroy, destroy_fn, "ncclCommDestroy");
  int saved;
  tcuda_status s = tc_on_device_begin(F, comm->device, &saved);
  if (s) return s;
  ncclResult_t r = destroy(comm->comm);
  tc_on_device_end(saved);
  free(comm);
  return r == ncclSuccess ? TCUDA_SUCCESS : nccl_fail(F, "ncclCommDestroy", r);
}

tcuda_status tcuda_comm_info(const tcuda_comm_t *comm, int *rank, int *nranks, int *device) {
  TC_CHECK_ARG("tcuda_comm_info", comm, "comm");
  if (rank) *rank = comm->rank;
  if (nranks) *nranks = comm->nranks;
  if (device) *device = comm->device;
  return TCUDA_SUCCESS;
}

/* A dense contiguous tensor on the communicator's device. */
static tcuda_status rank_tensor(const char *F, const char *what, const tcuda_comm_t *c, const DLTensor *dl,
                                tc_tensor *t) {
  tcuda_status s = tc_tensor_from_dl(F, what, (size_t)-1, dl, t);
  if (s) return s;
  if (!t->on_gpu || t->device != c->device)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s must be on the communicator's device cuda:%d", F, what,
                    c->device);
  if (!tc_tensor_contiguous(t))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: all inputs and outputs have to be contiguous (%s)", F, what);
  return TCUDA_SUCCESS;
}

static tcuda_status rank_stream(const char *F, const tcuda_comm_t *c, const tcuda_stream_t *given,
                                tcuda_stream_t *out) {
  if (!given) return tc_stream_current(F, c->device, out);
  if (given->device != c->device)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: stream is on device %d, the communicator on %d", F,
                    given->device, c->device);
  *out = *given;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_comm_broadcast_rank(tcuda_comm_t *comm, const tcuda_dltensor_t *tensor, int root,
                                       const tcuda_stream_t *stream) {
  const char *F = "tcuda_comm_broadcast_rank";
  TC_CHECK_ARG(F, comm, "comm");
  tc_tensor t;
  tcuda_status s = rank_tensor(F, "tensor", comm, (const DLTensor *)tensor, &t);
  if (s) return s;
  if (root < 0 || root >= comm->nranks) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: invalid root %d", F, root);
  tcuda_stream_t strm;
  if ((s = rank_stream(F, comm, stream, &strm))) return s;
  NCCL_FN(bcast, bcast_fn, "ncclBroadcast");
  int saved;
  if ((s = tc_on_device_begin(F, comm->device, &saved))) return s;
  size_t bytes = (size_t)(t.numel * t.elem_size);
  ncclResult_t r = bcast(t.data, t.data, bytes, ncclUint8, root, comm->comm, strm.handle);
  tc_on_device_end(saved);
  return r == ncclSuccess ? TCUDA_SUCCESS : nccl_fail(F, "ncclBroadcast", r);
}

static tcuda_status rank_reduce(const char *F, tcuda_comm_t *comm, const DLTensor *send, const DLTensor *recv,
                                int root, const tcuda_stream_t *stream) {
  TC_CHECK_ARG(F, comm, "comm");
  tc_tensor snd, rcv;
  tcuda_status s = rank_tensor(F, "send", comm, send, &snd);
  if (s) return s;
  int needs_recv = root < 0 || comm->rank == root;
  if (root >= comm->nranks) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: invalid root %d", F, root);
  if (needs_recv) {
    if ((s = rank_tensor(F, "recv", comm, recv, &rcv))) return s;
    if (!tc_dtype_eq(rcv.dtype, snd.dtype))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: all inputs and outputs must be of the same Tensor dtype", F);
    if (rcv.numel != snd.numel)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: recv has %lld elements, send %lld", F,
                      (long long)rcv.numel, (long long)snd.numel);
  }
  int mult, ndt = tc_nccl_dtype(snd.dtype, &mult);
  if (ndt < 0)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: Unconvertible NCCL type %s", F, tc_dtype_name(snd.dtype));
  tcuda_stream_t strm;
  if ((s = rank_stream(F, comm, stream, &strm))) return s;
  int saved;
  if ((s = tc_on_device_begin(F, comm->device, &saved))) return s;
  ncclResult_t res;
  size_t count = (size_t)snd.numel * (size_t)mult;
  if (root < 0) {
    allreduce_fn ar = (allreduce_fn)tc_nccl_sym("ncclAllReduce");
    res = ar ? ar(snd.data, rcv.data, count, (ncclDataType_t)ndt, (ncclRedOp_t)tc_nccl_sum_op(snd.dtype), comm->comm,
                  strm.handle)
             : ncclSystemError;
  } else {
    reduce_fn red = (reduce_fn)tc_nccl_sym("ncclReduce");
    res = red ? red(snd.data, needs_recv ? rcv.data : NULL, count, (ncclDataType_t)ndt,
                    (ncclRedOp_t)tc_nccl_sum_op(snd.dtype), root, comm->comm, strm.handle)
              : ncclSystemError;
  }
  tc_on_device_end(saved);
  return res == ncclSuccess ? TCUDA_SUCCESS : nccl_fail(F, root < 0 ? "ncclAllReduce" : "ncclReduce", res);
}

tcuda_status tcuda_comm_reduce_rank(tcuda_comm_t *comm, const tcuda_dltensor_t *send, const tcuda_dltensor_t *recv,
                                    int root, const tcuda_stream_t *stream) {
  if (root < 0)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_comm_reduce_rank: invalid root %d", root);
  return rank_reduce("tcuda_comm_reduce_rank", comm, (const DLTensor *)send, (const DLTensor *)recv, root, stream);
}

tcuda_status tcuda_comm_all_reduce_rank(tcuda_comm_t *comm, const tcuda_dltensor_t *send,
                                        const tcuda_dltensor_t *recv, const tcuda_stream_t *stream) {
  return rank_reduce("tcuda_comm_all_reduce_rank", comm, (const DLTensor *)send, (const DLTensor *)recv, -1, stream);
}
