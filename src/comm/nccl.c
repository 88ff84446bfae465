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

static tcuda_status nccl_fail(const char *func, const char *call, ncclResult_t r) {
  err_fn es = (err_fn)tc_nccl_sym("ncclGetErrorString");
  return tc_error(TCUDA_ERROR_NCCL, "%s: %s: NCCL Error %d: %s", func, call, (int)r, es ? es(r) : "unknown");
}

#define NCCL_FN(var, type, name)                                                                 \
  type var = (type)tc_nccl_sym(name);                                                           \
  if (!var) return tc_error(TCUDA_ERROR_NOT_AVAILABLE, "%s: NCCL is not available (%s not found in libnccl.so.2)", \
                            func, name)

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

static tcuda_status get_comms(const char *func, int n, const int *devs, ncclComm_t **out) {
  pthread_mutex_lock(&g_mu);
  for (clique *c = g_cliques; c; c = c->next)
    if (c->n == n && !memcmp(c->devs, devs, (size_t)n * sizeof *devs)) {
      *out = c->comms;
      pthread_mutex_unlock(&g_mu);
      return TCUDA_SUCCESS;
    }
  tcuda_status st = TCUDA_SUCCESS;
  ncclResult_t (*init_all)(ncclComm_t *, int, const int *) =
      (ncclResult_t(*)(ncclComm_t *, int, const int *))tc_nccl_sym("ncclCommInitAll");
  clique *c = calloc(1, sizeof *c);
  if (c) c->devs = malloc((size_t)n * sizeof *devs);
  if (c) c->comms = calloc((size_t)n, sizeof *c->comms);
  if (!init_all) {
    st = tc_error(TCUDA_ERROR_NOT_AVAILABLE, "%s: NCCL is not available (libnccl.so.2 not loaded)", func);
  } else if (!c || !c->devs || !c->comms) {
    st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  } else {
    ncclResult_t r = TC_FAULT(TC_FAULT_NCCL_INIT) ? ncclUnhandledCudaError : init_all(c->comms, n, devs);
    if (r != ncclSuccess) st = nccl_fail(func, "ncclCommInitAll", r);
  }
  if (st) {
    if (c) { free(c->devs); free(c->comms); free(c); }
    pthread_mutex_unlock(&g_mu);
    return st;
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

tcuda_status tc_nccl_broadcast_many(const char *func, int n, const int *devs, size_t nbuf, void *const *bufs,
                                    const size_t *sizes, const tcuda_stream_t *streams) {
  NCCL_FN(gstart, group_fn, "ncclGroupStart");
  NCCL_FN(gend, group_fn, "ncclGroupEnd");
  NCCL_FN(bcast, bcast_fn, "ncclBroadcast");
  ncclComm_t *comms;
  tcuda_status st = get_comms(func, n, devs, &comms);
  if (st) return st;
  ncclResult_t r = gstart();
  if (r != ncclSuccess) return nccl_fail(func, "ncclGroupStart", r);
  for (size_t b = 0; b < nbuf && !st; b++) {
    if (!sizes[b]) continue;
    for (int i = 0; i < n; i++) {
      int saved;
      st = tc_on_device_begin(func, devs[i], &saved);
      if (st) break;
      /* bytes: broadcast does not care about the type */
      r = bcast(bufs[b * (size_t)n + (size_t)i], bufs[b * (size_t)n + (size_t)i], sizes[b], ncclUint8, 0, comms[i],
                streams[i].handle);
      tc_on_device_end(saved);
      if (r != ncclSuccess) { st = nccl_fail(func, "ncclBroadcast", r); break; }
    }
  }
  r = gend();
  if (!st && r != ncclSuccess) st = nccl_fail(func, "ncclGroupEnd", r);
  return st;
}

tcuda_status tc_nccl_broadcast_bytes(const char *func, int n, const int *devs, void *const *bufs, size_t bytes,
                                     const tcuda_stream_t *streams) {
  return tc_nccl_broadcast_many(func, n, devs, 1, bufs, &bytes, streams);
}

tcuda_status tc_nccl_reduce(const char *func, int n, const int *devs, const void *const *send, void *recv, int root,
                            size_t count, DLDataType dt, const tcuda_stream_t *streams) {
  NCCL_FN(gstart, group_fn, "ncclGroupStart");
  NCCL_FN(gend, group_fn, "ncclGroupEnd");
  NCCL_FN(reduce, reduce_fn, "ncclReduce");
  int mult, ndt = tc_nccl_dtype(dt, &mult);
  if (ndt < 0) return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: Unconvertible NCCL type %s", func, tc_dtype_name(dt));
  ncclComm_t *comms;
  tcuda_status st = get_comms(func, n, devs, &comms);
  if (st) return st;
  ncclResult_t r = gstart();
  if (r != ncclSuccess) return nccl_fail(func, "ncclGroupStart", r);
  for (int i = 0; i < n; i++) {
    int saved;
    st = tc_on_device_begin(func, devs[i], &saved);
    if (st) break;
    r = reduce(send[i], i == root ? recv : NULL, count * (size_t)mult, (ncclDataType_t)ndt,
               (ncclRedOp_t)tc_nccl_sum_op(dt), root, comms[i], streams[i].handle);
    tc_on_device_end(saved);
    if (r != ncclSuccess) { st = nccl_fail(func, "ncclReduce", r); break; }
  }
  r = gend();
  if (!st && r != ncclSuccess) st = nccl_fail(func, "ncclGroupEnd", r);
  return st;
}

/* ---- multi-process communicators ---- */
struct tcuda_comm {
  ncclComm_t comm;
  int rank, nranks, device;
};

_Static_assert(sizeof(ncclUniqueId) == TCUDA_COMM_UNIQUE_ID_BYTES, "ncclUniqueId size");

tcuda_status tcuda_comm_unique_id(tcuda_comm_unique_id_t *id) {
  const char *func = "tcuda_comm_unique_id";
  TC_CHECK_ARG(func, id, "id");
  NCCL_FN(get, uid_fn, "ncclGetUniqueId");
  ncclUniqueId u;
  ncclResult_t r = get(&u);
  if (r != ncclSuccess) return nccl_fail(func, "ncclGetUniqueId", r);
  memcpy(id->internal, &u, sizeof u);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_comm_init_rank(int nranks, const tcuda_comm_unique_id_t *id, int rank, int device,
                                  tcuda_comm_t **out) {
  const char *func = "tcuda_comm_init_rank";
  TC_CHECK_ARG(func, out, "out");
  TC_CHECK_ARG(func, id, "id");
  if (nranks < 1) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: nranks %d must be >= 1", func, nranks);
  if (rank < 0 || rank >= nranks)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: rank %d out of range (nranks %d)", func, rank, nranks);
  tcuda_status st = tc_resolve_device(func, &device);
  if (st) return st;
  NCCL_FN(init, initrank_fn, "ncclCommInitRank");
  tcuda_comm_t *c = calloc(1, sizeof *c);
  if (!c) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  ncclUniqueId u;
  memcpy(&u, id->internal, sizeof u);
  int saved;
  st = tc_on_device_begin(func, device, &saved);
  if (st) { free(c); return st; }
  ncclResult_t r = TC_FAULT(TC_FAULT_NCCL_INIT) ? ncclUnhandledCudaError : init(&c->comm, nranks, u, rank);
  tc_on_device_end(saved);
  if (r != ncclSuccess) { free(c); return nccl_fail(func, "ncclCommInitRank", r); }
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  *out = c;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_comm_destroy(tcuda_comm_t *comm) {
  const char *func = "tcuda_comm_destroy";
  if (!comm) return TCUDA_SUCCESS;
  NCCL_FN(destroy, destroy_fn, "ncclCommDestroy");
  int saved;
  tcuda_status st = tc_on_device_begin(func, comm->device, &saved);
  if (st) return st;
  ncclResult_t r = destroy(comm->comm);
  tc_on_device_end(saved);
  free(comm);
  return r == ncclSuccess ? TCUDA_SUCCESS : nccl_fail(func, "ncclCommDestroy", r);
}

tcuda_status tcuda_comm_info(const tcuda_comm_t *comm, int *rank, int *nranks, int *device) {
  TC_CHECK_ARG("tcuda_comm_info", comm, "comm");
  if (rank) *rank = comm->rank;
  if (nranks) *nranks = comm->nranks;
  if (device) *device = comm->device;
  return TCUDA_SUCCESS;
}

/* A dense contiguous tensor on the communicator's device. */
static tcuda_status rank_tensor(const char *func, const char *what, const tcuda_comm_t *c, const DLTensor *dl,
                                tc_tensor *t) {
  tcuda_status st = tc_tensor_from_dl(func, what, (size_t)-1, dl, t);
  if (st) return st;
  if (!t->on_gpu || t->device != c->device)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s must be on the communicator's device cuda:%d", func, what,
                    c->device);
  if (!tc_tensor_contiguous(t))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: all inputs and outputs have to be contiguous (%s)", func, what);
  return TCUDA_SUCCESS;
}

static tcuda_status rank_stream(const char *func, const tcuda_comm_t *c, const tcuda_stream_t *s,
                                tcuda_stream_t *out) {
  if (!s) return tc_stream_current(func, c->device, out);
  if (s->device != c->device)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: stream is on device %d, the communicator on %d", func,
                    s->device, c->device);
  *out = *s;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_comm_broadcast_rank(tcuda_comm_t *comm, const tcuda_dltensor_t *tensor, int root,
                                       const tcuda_stream_t *stream) {
  const char *func = "tcuda_comm_broadcast_rank";
  TC_CHECK_ARG(func, comm, "comm");
  tc_tensor t;
  tcuda_status st = rank_tensor(func, "tensor", comm, (const DLTensor *)tensor, &t);
  if (st) return st;
  if (root < 0 || root >= comm->nranks) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: invalid root %d", func, root);
  tcuda_stream_t s;
  if ((st = rank_stream(func, comm, stream, &s))) return st;
  NCCL_FN(bcast, bcast_fn, "ncclBroadcast");
  int saved;
  if ((st = tc_on_device_begin(func, comm->device, &saved))) return st;
  size_t bytes = (size_t)(t.numel * t.elem_size);
  ncclResult_t r = bcast(t.data, t.data, bytes, ncclUint8, root, comm->comm, s.handle);
  tc_on_device_end(saved);
  return r == ncclSuccess ? TCUDA_SUCCESS : nccl_fail(func, "ncclBroadcast", r);
}

static tcuda_status rank_reduce(const char *func, tcuda_comm_t *comm, const DLTensor *send, const DLTensor *recv,
                                int root, const tcuda_stream_t *stream) {
  TC_CHECK_ARG(func, comm, "comm");
  tc_tensor s, r;
  tcuda_status st = rank_tensor(func, "send", comm, send, &s);
  if (st) return st;
  int needs_recv = root < 0 || comm->rank == root;
  if (root >= comm->nranks) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: invalid root %d", func, root);
  if (needs_recv) {
    if ((st = rank_tensor(func, "recv", comm, recv, &r))) return st;
    if (!tc_dtype_eq(r.dtype, s.dtype))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: all inputs and outputs must be of the same Tensor dtype", func);
    if (r.numel != s.numel)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: recv has %lld elements, send %lld", func,
                      (long long)r.numel, (long long)s.numel);
  }
  int mult, ndt = tc_nccl_dtype(s.dtype, &mult);
  if (ndt < 0) return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: Unconvertible NCCL type %s", func, tc_dtype_name(s.dtype));
  tcuda_stream_t strm;
  if ((st = rank_stream(func, comm, stream, &strm))) return st;
  int saved;
  if ((st = tc_on_device_begin(func, comm->device, &saved))) return st;
  ncclResult_t res;
  size_t count = (size_t)s.numel * (size_t)mult;
  if (root < 0) {
    allreduce_fn ar = (allreduce_fn)tc_nccl_sym("ncclAllReduce");
    res = ar ? ar(s.data, r.data, count, (ncclDataType_t)ndt, (ncclRedOp_t)tc_nccl_sum_op(s.dtype), comm->comm,
                  strm.handle)
             : ncclSystemError;
  } else {
    reduce_fn red = (reduce_fn)tc_nccl_sym("ncclReduce");
    res = red ? red(s.data, needs_recv ? r.data : NULL, count, (ncclDataType_t)ndt,
                    (ncclRedOp_t)tc_nccl_sum_op(s.dtype), root, comm->comm, strm.handle)
              : ncclSystemError;
  }
  tc_on_device_end(saved);
  return res == ncclSuccess ? TCUDA_SUCCESS : nccl_fail(func, root < 0 ? "ncclAllReduce" : "ncclReduce", res);
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
