/* torch.cuda.comm over DLPack tensors: the engines. Validation and
 * bucketing are pure (plan.c); this file allocates, moves and sums.
 *
 * Engine choice (see tcuda.h): NCCL where PyTorch would use it, except
 * two-GPU transfers with peer access: a bulk copy goes by a copy engine
 * (faster on NVLink than any SM-kernel copy bench_comm's sweep tried),
 * reduce_add's sum is a kernel on the destination that reads the peer over
 * NVLink (one pass: faster than copy-then-add), many small tensors go in
 * one push kernel.
 * Everything else goes through copy_view, which mirrors PyTorch's copy_:
 * cross-device work on the source's current stream, fenced both ways
 * against the destination's stream. */
#include "comm/comm_impl.h"
#include "comm/kernels.h"
#include "core/annotate.h"
#include "stream/stream.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------
 * memory: device caching allocator, pinned host caching allocator
 * --------------------------------------------------------------------- */
static tcuda_status dev_alloc(const char *func, void **p, size_t bytes, int dev, tcuda_stream_t s) {
  (void)func;
  *p = NULL;
  if (!bytes) return TCUDA_SUCCESS;
  return tcuda_malloc_on(p, bytes, dev, s);
}
static void dev_free(void *p) {
  if (p) (void)tcuda_free(p);
}

/* An allocation shared by outputs (coalesced buckets): freed with the last. */
typedef struct tc_buf {
  atomic_int refs;
  void *ptr;
  int host;
} tc_buf;

static tc_buf *buf_new(void *ptr, int host) {
  tc_buf *b = malloc(sizeof *b);
  if (!b) return NULL;
  atomic_init(&b->refs, 1);
  b->ptr = ptr;
  b->host = host;
  return b;
}
static void buf_unref(tc_buf *b) {
  if (!b || atomic_fetch_sub(&b->refs, 1) != 1) return;
  if (b->host) (void)tcuda_host_free(b->ptr);
  else dev_free(b->ptr);
  free(b);
}
/* Wrap a fresh allocation; on failure the memory is freed here. */
static tcuda_status buf_wrap(const char *func, void *ptr, int host, tc_buf **out) {
  *out = buf_new(ptr, host);
  if (*out) return TCUDA_SUCCESS;
  if (host) (void)tcuda_host_free(ptr);
  else dev_free(ptr);
  return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
}

typedef struct tc_mt {
  DLManagedTensor m;
  tc_buf *buf; /* NULL: a view of a caller's tensor */
  int64_t dims[2 * TC_COMM_MAX_DIMS];
} tc_mt;

static void mt_delete(DLManagedTensor *m) {
  tc_mt *t = (tc_mt *)m->manager_ctx;
  buf_unref(t->buf);
  free(t);
}

static DLManagedTensor *mt_make(const tc_tensor *t, tc_buf *buf) {
  tc_mt *x = calloc(1, sizeof *x);
  if (!x) return NULL;
  memcpy(x->dims, t->shape, (size_t)t->ndim * sizeof(int64_t));
  memcpy(x->dims + t->ndim, t->strides, (size_t)t->ndim * sizeof(int64_t));
  DLTensor *d = &x->m.dl_tensor;
  d->data = t->data;
  d->device.device_type = t->dev_type;
  d->device.device_id = t->on_gpu ? t->device : 0;
  d->ndim = t->ndim;
  d->dtype = t->dtype;
  d->shape = x->dims;
  d->strides = x->dims + t->ndim;
  d->byte_offset = 0;
  x->m.manager_ctx = x;
  x->m.deleter = mt_delete;
  if (buf) atomic_fetch_add(&buf->refs, 1);
  x->buf = buf;
  return &x->m;
}

static tcuda_status mt_out(const char *func, const tc_tensor *t, tc_buf *buf, DLManagedTensor **slot) {
  *slot = mt_make(t, buf);
  return *slot ? TCUDA_SUCCESS : tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
}

static void release_all(DLManagedTensor **out, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (out[i]) {
      out[i]->deleter(out[i]);
      out[i] = NULL;
    }
}

/* A contiguous tensor shaped like t at data on a device (-1: host). */
static tc_tensor contig_like(const tc_tensor *t, void *data, int device) {
  tc_tensor c = *t;
  c.data = data;
  tc_contiguous_strides(t->ndim, t->shape, c.strides);
  c.on_gpu = device >= 0;
  c.device = device;
  c.dev_type = device >= 0 ? TC_DL_CUDA : TC_DL_CPU;
  return c;
}

/* ---------------------------------------------------------------------
 * devices, streams, peers, options
 * --------------------------------------------------------------------- */
static tcuda_status check_device(const char *func, const char *what, int dev) {
  int n = tc_device_count();
  if (dev < 0 || dev >= n || dev >= TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: %s %d out of range (%d devices)", func, what, dev, n);
  return TCUDA_SUCCESS;
}

static tcuda_status check_tensor_devices(const char *func, const char *what, const tc_tensor *ts, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (ts[i].on_gpu) {
      tcuda_status st = check_device(func, what, ts[i].device);
      if (st) return st;
    }
  return TCUDA_SUCCESS;
}

static tcuda_stream_t cur(int dev) { return tc_current_stream_fast(dev); }
static int same_stream(tcuda_stream_t a, tcuda_stream_t b) { return a.device == b.device && a.handle == b.handle; }

/* Later work on `waiter` waits for work queued on `other` so far. */
static tcuda_status wait_stream(tcuda_stream_t waiter, tcuda_stream_t other) {
  if (same_stream(waiter, other)) return TCUDA_SUCCESS;
  return tcuda_stream_wait_stream(waiter, other);
}

static atomic_int g_sms[TC_MAX_DEVICES];
static int sm_count(int dev) {
  int n = atomic_load_explicit(&g_sms[dev], memory_order_relaxed);
  if (!n) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n <= 0) {
      (void)cudaGetLastError();
      n = 32;
    }
    atomic_store_explicit(&g_sms[dev], n, memory_order_relaxed);
  }
  return n;
}
/* Enough 512-thread blocks to fill the device (4 per SM). */
static int blocks_for(int dev) { return sm_count(dev) * 4; }

static pthread_mutex_t g_peer_mu = PTHREAD_MUTEX_INITIALIZER;
static signed char g_peer[TC_MAX_DEVICES][TC_MAX_DEVICES]; /* 0 unknown, 1 enabled, -1 not possible */

static atomic_int g_peer_off; /* tc_comm_test_peer_off */
void tc_comm_test_peer_off(int off) { atomic_store_explicit(&g_peer_off, off, memory_order_relaxed); }

/* 1 when kernels on `dev` can touch `peer`'s memory (access enabled once). */
static int peer_ok(int dev, int peer) {
  if (dev == peer) return 1;
  if (atomic_load_explicit(&g_peer_off, memory_order_relaxed)) return 0;
  pthread_mutex_lock(&g_peer_mu);
  int v = g_peer[dev][peer];
  if (!v) {
    int can = 0, saved;
    v = -1;
    if (cudaDeviceCanAccessPeer(&can, dev, peer) == cudaSuccess && can &&
        !tc_on_device_begin("tcuda_comm", dev, &saved)) {
      cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
      if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled) v = 1;
      else (void)cudaGetLastError();
      tc_on_device_end(saved);
    }
    g_peer[dev][peer] = (signed char)v;
  }
  pthread_mutex_unlock(&g_peer_mu);
  return v > 0;
}

enum { ENG_AUTO = TCUDA_COMM_ENGINE_AUTO, ENG_NCCL = TCUDA_COMM_ENGINE_NCCL, ENG_COPY = TCUDA_COMM_ENGINE_COPY };
static atomic_int g_engine = ENG_AUTO; /* tcuda_comm_set_engine */

tcuda_status tcuda_comm_set_engine(tcuda_comm_engine engine) {
  if (engine != TCUDA_COMM_ENGINE_AUTO && engine != TCUDA_COMM_ENGINE_NCCL && engine != TCUDA_COMM_ENGINE_COPY)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "tcuda_comm_set_engine: engine %d is not a tcuda_comm_engine (AUTO, NCCL or COPY)", (int)engine);
  atomic_store_explicit(&g_engine, (int)engine, memory_order_relaxed);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_comm_get_engine(tcuda_comm_engine *engine) {
  TC_CHECK_ARG("tcuda_comm_get_engine", engine, "engine");
  *engine = (tcuda_comm_engine)atomic_load_explicit(&g_engine, memory_order_relaxed);
  return TCUDA_SUCCESS;
}

static int engine_now(void) { return atomic_load_explicit(&g_engine, memory_order_relaxed); }

/* PyTorch's nccl::is_available: CUDA, dense and contiguous, unique devices. */
static int nccl_shape_ok(const tc_tensor *const *ts, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!ts[i]->on_gpu || !tc_tensor_contiguous(ts[i])) return 0;
    for (size_t j = 0; j < i; j++)
      if (ts[j]->device == ts[i]->device) return 0;
  }
  return 1;
}

/* ---------------------------------------------------------------------
 * copies
 * --------------------------------------------------------------------- */
typedef struct {
  int n;
  int64_t es;
  int64_t shape[TC_COMM_MAX_DIMS], sd[TC_COMM_MAX_DIMS], ss[TC_COMM_MAX_DIMS];
} tc_layout;

/* Drop size-1 dims and merge dims contiguous in both layouts. */
static void coalesce(const tc_tensor *dst, const tc_tensor *src, tc_layout *l) {
  l->n = 0;
  l->es = dst->elem_size;
  for (int k = 0; k < dst->ndim; k++) {
    int64_t sz = dst->shape[k];
    if (sz == 1) continue;
    int m = l->n;
    if (m && l->sd[m - 1] == dst->strides[k] * sz && l->ss[m - 1] == src->strides[k] * sz) {
      l->shape[m - 1] *= sz;
      l->sd[m - 1] = dst->strides[k];
      l->ss[m - 1] = src->strides[k];
    } else {
      l->shape[m] = sz;
      l->sd[m] = dst->strides[k];
      l->ss[m] = src->strides[k];
      l->n++;
    }
  }
  if (!l->n) {
    l->n = 1;
    l->shape[0] = 1;
    l->sd[0] = l->ss[0] = 1;
  }
}

static int same_dense(const tc_tensor *a, const tc_tensor *b) {
  if (!tc_tensor_dense(a) || !tc_tensor_dense(b)) return 0;
  for (int k = 0; k < a->ndim; k++)
    if (a->shape[k] != 1 && a->strides[k] != b->strides[k]) return 0;
  for (int k = 0; k < a->ndim; k++)
    if (a->strides[k] < 0) return 0;
  return 1;
}

static tcuda_status launch_strided(const char *func, tcuda_stream_t s, char *dst, const char *src, const tc_layout *l0,
                                   int64_t numel) {
  tc_layout l = *l0;
  int last = l.n - 1;
  /* widen elements along a contiguous inner dim: 16-byte moves where possible */
  if (l.sd[last] == 1 && l.ss[last] == 1) {
    for (int64_t w = 16; w > l.es; w /= 2) {
      int ok = (l.shape[last] * l.es) % w == 0 && (((uintptr_t)dst | (uintptr_t)src) % (uintptr_t)w) == 0;
      for (int k = 0; ok && k < last; k++) ok = (l.sd[k] * l.es) % w == 0 && (l.ss[k] * l.es) % w == 0;
      if (!ok) continue;
      for (int k = 0; k < last; k++) {
        l.sd[k] = l.sd[k] * l.es / w;
        l.ss[k] = l.ss[k] * l.es / w;
      }
      numel = numel / l.shape[last] * (l.shape[last] * l.es / w);
      l.shape[last] = l.shape[last] * l.es / w;
      l.es = w;
      break;
    }
  }
  tc_strided_desc d;
  memset(&d, 0, sizeof d);
  d.dst = dst;
  d.src = src;
  d.ndim = l.n;
  d.elem = (int)l.es;
  d.numel = numel;
  for (int k = 0; k < l.n; k++) {
    d.shape[k] = l.shape[k];
    d.dst_strides[k] = l.sd[k];
    d.src_strides[k] = l.ss[k];
  }
  int saved;
  tcuda_status st = tc_on_device_begin(func, s.device, &saved);
  if (st) return st;
  int e = tc_k_strided(s.handle, &d, blocks_for(s.device));
  tc_on_device_end(saved);
  return e ? tc_cuda_error((cudaError_t)e, func, "tc_k_strided") : TCUDA_SUCCESS;
}

/* One GPU-to-GPU copy by a copy engine, on stream s (of either end). */
static tcuda_status p2p_copy(const char *func, char *dst, int ddev, const char *src, int sdev, size_t bytes,
                             tcuda_stream_t s) {
  int saved;
  tcuda_status st = tc_on_device_begin(func, s.device, &saved);
  if (st) return st;
  cudaError_t e = cudaMemcpyPeerAsync(dst, ddev, src, sdev, bytes, s.handle);
  tc_on_device_end(saved);
  return e ? tc_cuda_error(e, func, "cudaMemcpyPeerAsync") : TCUDA_SUCCESS;
}

/* Bytes between any two places, run on stream s (on a GPU of the pair). */
static tcuda_status copy_bytes(const char *func, void *dst, int ddev, const void *src, int sdev, size_t bytes,
                               tcuda_stream_t s) {
  if (!bytes) return TCUDA_SUCCESS;
  if (ddev >= 0 && sdev >= 0 && ddev != sdev) return p2p_copy(func, dst, ddev, src, sdev, bytes, s);
  int saved, e;
  const char *call;
  tcuda_status st = tc_on_device_begin(func, s.device, &saved);
  if (st) return st;
  if (ddev >= 0 && sdev >= 0) {
    call = "tc_k_copy";
    e = tc_k_copy(s.handle, dst, src, bytes, blocks_for(s.device));
  } else {
    call = "cudaMemcpyAsync";
    e = (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s.handle);
  }
  tc_on_device_end(saved);
  return e ? tc_cuda_error((cudaError_t)e, func, call) : TCUDA_SUCCESS;
}

static void host_strided(char *dst, const int64_t *sd, const char *src, const int64_t *ss, const int64_t *shape,
                         int n, int64_t es, int64_t numel) {
  int64_t idx[TC_COMM_MAX_DIMS] = {0};
  for (int64_t i = 0; i < numel; i++) {
    int64_t od = 0, os = 0;
    for (int k = 0; k < n; k++) {
      od += idx[k] * sd[k];
      os += idx[k] * ss[k];
    }
    memcpy(dst + od * es, src + os * es, (size_t)es);
    for (int k = n - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}

static int host_is_pinned(const void *p) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return a.type == cudaMemoryTypeHost;
}

static tcuda_status memcpy2d(const char *func, tcuda_stream_t s, const tc_layout *l, void *dst, const void *src) {
  int saved;
  tcuda_status st = tc_on_device_begin(func, s.device, &saved);
  if (st) return st;
  cudaError_t e = cudaMemcpy2DAsync(dst, (size_t)(l->sd[0] * l->es), src, (size_t)(l->ss[0] * l->es),
                                    (size_t)(l->shape[1] * l->es), (size_t)l->shape[0], cudaMemcpyDefault, s.handle);
  tc_on_device_end(saved);
  return e ? tc_cuda_error(e, func, "cudaMemcpy2DAsync") : TCUDA_SUCCESS;
}

static tcuda_status sync_stream(const char *func, tcuda_stream_t s) { (void)func; return tcuda_stream_synchronize(s); }

/* dst = src (same shape and dtype), PyTorch copy_ style. ds is the stream
 * of dst's device that owns the result, ss the current stream of src's
 * device. Host destinations are complete on return only when pinned
 * staging was needed; callers that promise completion synchronise. */
static tcuda_status copy_view(const char *func, const tc_tensor *dst, tcuda_stream_t ds, const tc_tensor *src,
                              tcuda_stream_t ss) {
  if (!dst->numel) return TCUDA_SUCCESS;
  tc_layout l;
  coalesce(dst, src, &l);
  int flat = same_dense(dst, src) || (l.n == 1 && l.sd[0] == 1 && l.ss[0] == 1);
  int two_d = !flat && l.n == 2 && l.sd[1] == 1 && l.ss[1] == 1 && l.sd[0] >= l.shape[1] && l.ss[0] >= l.shape[1];
  size_t bytes = (size_t)(dst->numel * dst->elem_size);
  tcuda_status st = TCUDA_SUCCESS;

  if (dst->on_gpu && src->on_gpu) {
    int cross = dst->device != src->device;
    tcuda_stream_t w = cross ? ss : ds;
    if (cross && (st = wait_stream(ss, ds))) return st;
    if (flat) {
      st = copy_bytes(func, dst->data, dst->device, src->data, src->device, bytes, w);
    } else if (two_d && !cross) {
      st = memcpy2d(func, w, &l, dst->data, src->data);
    } else if (!cross || peer_ok(w.device, dst->device)) {
      st = launch_strided(func, w, dst->data, src->data, &l, dst->numel);
    } else {
      /* no peer access: contiguous on the source, peer copy, unpack */
      void *ts = NULL, *td = NULL;
      st = dev_alloc(func, &ts, bytes, src->device, ss);
      if (!st) st = dev_alloc(func, &td, bytes, dst->device, ds);
      tc_tensor cs = contig_like(src, ts, src->device), cd = contig_like(dst, td, dst->device);
      if (!st) st = copy_view(func, &cs, ss, src, ss);
      if (!st) st = copy_bytes(func, td, dst->device, ts, src->device, bytes, ss);
      if (!st) st = wait_stream(ds, ss);
      if (!st) st = copy_view(func, dst, ds, &cd, ds);
      dev_free(ts);
      dev_free(td);
    }
    if (cross) {
      tcuda_status s2 = wait_stream(ds, ss);
      if (!st) st = s2;
    }
    return st;
  }

  if (dst->on_gpu) { /* host -> GPU, on the destination's stream */
    if (flat) return copy_bytes(func, dst->data, dst->device, src->data, -1, bytes, ds);
    if (two_d) return memcpy2d(func, ds, &l, dst->data, src->data);
    char *h = malloc(bytes);
    void *td = NULL;
    if (!h) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
    tc_tensor ch = contig_like(src, h, -1), cd;
    tc_layout lh;
    coalesce(&ch, src, &lh);
    host_strided(h, lh.sd, src->data, lh.ss, lh.shape, lh.n, lh.es, src->numel);
    st = dev_alloc(func, &td, bytes, dst->device, ds);
    /* a pageable source is staged by CUDA before cudaMemcpyAsync returns */
    if (!st) st = copy_bytes(func, td, dst->device, h, -1, bytes, ds);
    cd = contig_like(dst, td, dst->device);
    if (!st) st = copy_view(func, dst, ds, &cd, ds);
    dev_free(td);
    free(h);
    return st;
  }

  if (src->on_gpu) { /* GPU -> host, on the source's stream */
    if (two_d) return memcpy2d(func, ss, &l, dst->data, src->data);
    if (flat && host_is_pinned(dst->data)) return copy_bytes(func, dst->data, -1, src->data, src->device, bytes, ss);
    void *td = NULL, *h = NULL;
    const char *from = src->data;
    if (!flat && !tc_tensor_contiguous(src)) {
      tc_tensor cd;
      if ((st = dev_alloc(func, &td, bytes, src->device, ss))) return st;
      cd = contig_like(src, td, src->device);
      if ((st = copy_view(func, &cd, ss, src, ss))) { dev_free(td); return st; }
      from = td;
    }
    st = tcuda_host_alloc(&h, bytes);
    if (!st) st = copy_bytes(func, h, -1, from, src->device, bytes, ss);
    if (!st) st = sync_stream(func, ss);
    if (!st) {
      if (flat) memcpy(dst->data, h, bytes);
      else {
        tc_tensor ch = contig_like(src, h, -1);
        tc_layout lh;
        coalesce(dst, &ch, &lh);
        host_strided(dst->data, lh.sd, h, lh.ss, lh.shape, lh.n, lh.es, dst->numel);
      }
    }
    if (h) (void)tcuda_host_free(h);
    dev_free(td);
    return st;
  }
  /* host -> host */
  host_strided(dst->data, l.sd, src->data, l.ss, l.shape, l.n, l.es, dst->numel);
  return TCUDA_SUCCESS;
}

/* Several contiguous byte copies in one kernel launch on stream s: the
 * descriptor table goes up through pinned memory. */
static tcuda_status multicopy(const char *func, const tc_copy_item *items, size_t n, tcuda_stream_t s) {
  if (!n) return TCUDA_SUCCESS;
  size_t tb = n * sizeof *items;
  uint64_t maxb = 0;
  for (size_t i = 0; i < n; i++)
    if (items[i].bytes > maxb) maxb = items[i].bytes;
  void *h = NULL, *d = NULL;
  tcuda_status st = tcuda_host_alloc(&h, tb);
  if (st) return st;
  memcpy(h, items, tb);
  st = dev_alloc(func, &d, tb, s.device, s);
  int saved;
  if (!st && !(st = tc_on_device_begin(func, s.device, &saved))) {
    cudaError_t e = cudaMemcpyAsync(d, h, tb, cudaMemcpyHostToDevice, s.handle);
    int ke = e ? 0 : tc_k_multicopy(s.handle, (const tc_copy_item *)d, n, maxb, blocks_for(s.device));
    tc_on_device_end(saved);
    if (e) st = tc_cuda_error(e, func, "cudaMemcpyAsync");
    else if (ke) st = tc_cuda_error((cudaError_t)ke, func, "tc_k_multicopy");
  }
  if (!st) st = tcuda_host_record_stream(h, s);
  (void)tcuda_host_free(h);
  dev_free(d);
  return st;
}

/* ---------------------------------------------------------------------
 * sums
 * --------------------------------------------------------------------- */
static int add_kind(DLDataType dt, int64_t *mult) {
  *mult = 1;
  if (dt.code == TC_DL_COMPLEX) {
    *mult = 2;
    dt = tc_dtype_real(dt);
  }
  switch (dt.code) {
  case TC_DL_INT:
    return dt.bits == 8 ? TC_K_I8 : dt.bits == 16 ? TC_K_I16 : dt.bits == 32 ? TC_K_I32 : TC_K_I64;
  case TC_DL_UINT:
    return dt.bits == 8 ? TC_K_U8 : dt.bits == 16 ? TC_K_U16 : dt.bits == 32 ? TC_K_U32 : TC_K_U64;
  case TC_DL_FLOAT: return dt.bits == 16 ? TC_K_F16 : dt.bits == 32 ? TC_K_F32 : TC_K_F64;
  case TC_DL_BFLOAT: return TC_K_BF16;
  case TC_DL_BOOL: return TC_K_BOOL;
  default: return -1;
  }
}

/* out = a + b, n elements of kind, on stream s (any of them may be on a
 * peer of s.device). */
static tcuda_status add_on(const char *func, tcuda_stream_t s, int kind, void *out, const void *a, const void *b,
                           size_t n) {
  int saved;
  tcuda_status st = tc_on_device_begin(func, s.device, &saved);
  if (st) return st;
  int e = tc_k_add(s.handle, kind, out, a, b, n, blocks_for(s.device));
  tc_on_device_end(saved);
  return e ? tc_cuda_error((cudaError_t)e, func, "tc_k_add") : TCUDA_SUCCESS;
}

/* Sum contiguous buffers ptrs[i] (on devs[i], count elements each) into
 * result on devs[root]. nccl_ok: PyTorch would use NCCL here. */
static tcuda_status reduce_flat(const char *func, int engine, size_t n, const int *devs, const void *const *ptrs,
                                size_t root, size_t count, DLDataType dt, void *result, int nccl_ok) {
  int dest = devs[root];
  tcuda_stream_t ds = cur(dest);
  int64_t mult;
  int kind = add_kind(dt, &mult);
  if (kind < 0) return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: cannot sum dtype %s", func, tc_dtype_name(dt));
  int ndt_mult, ndt = tc_nccl_dtype(dt, &ndt_mult);
  int all_peer = 1;
  for (size_t i = 0; i < n; i++)
    if (devs[i] != dest && !peer_ok(dest, devs[i])) all_peer = 0;
  int use_nccl = nccl_ok && ndt >= 0 && engine != ENG_COPY && tc_nccl_available() &&
                 (engine == ENG_NCCL || n != 2 || !all_peer);
  tcuda_status st = TCUDA_SUCCESS;
  if (use_nccl) {
    tcuda_stream_t streams[TC_MAX_DEVICES];
    for (size_t i = 0; i < n; i++) streams[i] = cur(devs[i]);
    return tc_nccl_reduce(func, (int)n, devs, ptrs, result, (int)root, count, dt, streams);
  }
  /* PyTorch's copy path: result = root + other0, then += each other, in
   * the dtype, on the destination's current stream */
  size_t es = (size_t)tc_dtype_size(dt), aes = es / (size_t)mult, nadd = count * (size_t)mult;
  const void *acc = ptrs[root];
  for (size_t i = 0; i < n && !st; i++) {
    if (i == root) continue;
    int od = devs[i];
    tcuda_stream_t os = cur(od);
    void *tmp = NULL;
    const char *b = ptrs[i];
    if (od != dest && !peer_ok(dest, od)) {
      /* no peer access: peer copy into a buffer on the destination, then
       * a local add */
      st = dev_alloc(func, &tmp, count * es, dest, ds);
      if (!st) st = wait_stream(os, ds);
      if (!st) st = copy_bytes(func, tmp, dest, b, od, nadd * aes, os);
      if (!st) st = wait_stream(ds, os);
      if (!st) st = add_on(func, ds, kind, result, acc, tmp, nadd);
    } else {
      /* one pass on the destination, reading the peer over NVLink */
      if (od != dest) st = wait_stream(ds, os);
      if (!st) st = add_on(func, ds, kind, result, acc, b, nadd);
      /* the other device may reuse its input only after the read */
      if (!st && od != dest) st = wait_stream(os, ds);
    }
    dev_free(tmp);
    acc = result;
  }
  return st;
}

/* ---------------------------------------------------------------------
 * broadcast
 * --------------------------------------------------------------------- */
static tcuda_status broadcast_impl(const char *func, int engine, const tc_tensor *src, const int *devices, size_t n,
                                   DLManagedTensor **out) {
  size_t bytes = (size_t)(src->numel * src->elem_size);
  tc_tensor *outs = calloc(n ? n : 1, sizeof *outs);
  int *devs = malloc((n + 1) * sizeof *devs);
  void **bufs = malloc((n + 1) * sizeof *bufs);
  tcuda_stream_t *streams = malloc((n + 1) * sizeof *streams);
  tcuda_status st = TCUDA_SUCCESS;
  if (!outs || !devs || !bufs || !streams) st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  size_t nnew = 0;
  /* [source, new outputs...] is the list PyTorch checks for NCCL */
  int unique = src->on_gpu && tc_tensor_contiguous(src);
  if (!st && src->on_gpu) {
    devs[0] = src->device;
    bufs[0] = src->data;
    streams[0] = cur(src->device);
  }
  for (size_t i = 0; i < n && !st; i++) {
    if (src->on_gpu && devices[i] == src->device) {
      st = mt_out(func, src, NULL, &out[i]);
      continue;
    }
    int d = devices[i];
    void *p = NULL;
    tc_buf *b = NULL;
    st = dev_alloc(func, &p, bytes, d, cur(d));
    if (!st) st = buf_wrap(func, p, 0, &b);
    if (st) break;
    outs[i] = contig_like(src, p, d);
    st = mt_out(func, &outs[i], b, &out[i]);
    buf_unref(b);
    for (size_t j = 0; j < nnew; j++)
      if (devs[j + 1] == d) unique = 0;
    devs[nnew + 1] = d;
    bufs[nnew + 1] = p;
    streams[nnew + 1] = cur(d);
    nnew++;
  }
  if (!st && nnew && bytes) {
    int all_peer = src->on_gpu;
    for (size_t j = 1; j <= nnew && all_peer; j++)
      if (!peer_ok(src->device, devs[j])) all_peer = 0;
    int use_nccl = unique && engine != ENG_COPY && tc_nccl_available() &&
                   (engine == ENG_NCCL || nnew != 1 || !all_peer);
    if (use_nccl) {
      st = tc_nccl_broadcast_bytes(func, (int)nnew + 1, devs, bufs, bytes, streams);
    } else {
      for (size_t i = 0; i < n && !st; i++) {
        if (src->on_gpu && devices[i] == src->device) continue;
        tcuda_stream_t ss = src->on_gpu ? cur(src->device) : cur(devices[i]);
        st = copy_view(func, &outs[i], cur(devices[i]), src, ss);
      }
    }
  }
  if (st) release_all(out, n);
  free(outs);
  free(devs);
  free(bufs);
  free(streams);
  return st;
}

tcuda_status tcuda_comm_broadcast(const tcuda_dltensor_t *tensor, const int *devices, size_t ndevices,
                                  DLManagedTensor **out) {
  const char *func = "tcuda_comm_broadcast";
  tc_tensor src;
  int engine = engine_now();
  tcuda_status st = tc_tensor_from_dl(func, "tensor", (size_t)-1, (const DLTensor *)tensor, &src);
  if (st) return st;
  if (ndevices && !out) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", func);
  if ((st = tc_check_device_list(func, devices, ndevices))) return st;
  if (!ndevices) return TCUDA_SUCCESS;
  if ((st = tc_lazy_init(func))) return st;
  if ((st = check_tensor_devices(func, "tensor device", &src, 1))) return st;
  for (size_t i = 0; i < ndevices; i++)
    if ((st = check_device(func, "device", devices[i]))) return st;
  for (size_t i = 0; i < ndevices; i++) out[i] = NULL;
  TC_ANNOTATE_BEGIN(func);
  st = broadcast_impl(func, engine, &src, devices, ndevices, out);
  TC_ANNOTATE_END();
  return st;
}

tcuda_status tcuda_comm_broadcast_out(const tcuda_dltensor_t *tensor, const tcuda_dltensor_t *const *out, size_t nout) {
  const char *func = "tcuda_comm_broadcast_out";
  tc_tensor src, *outs = NULL;
  int engine = engine_now();
  tcuda_status st = tc_tensor_from_dl(func, "tensor", (size_t)-1, (const DLTensor *)tensor, &src);
  if (st) return st;
  if (nout && !(outs = malloc(nout * sizeof *outs)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  st = tc_tensors_from_dl(func, "out", (const DLTensor *const *)out, nout, outs);
  if (!st) st = tc_check_broadcast_out(func, &src, outs, nout);
  if (!st && nout) st = tc_lazy_init(func);
  if (!st && nout) st = check_tensor_devices(func, "tensor device", &src, 1);
  if (!st && nout) st = check_tensor_devices(func, "output device", outs, nout);
  if (st || !nout) { free(outs); return st; }
  TC_ANNOTATE_BEGIN(func);
  size_t bytes = (size_t)(src.numel * src.elem_size);
  const tc_tensor **list = malloc((nout + 1) * sizeof *list);
  int *devs = malloc((nout + 1) * sizeof *devs);
  void **bufs = malloc((nout + 1) * sizeof *bufs);
  tcuda_stream_t *streams = malloc((nout + 1) * sizeof *streams);
  if (!list || !devs || !bufs || !streams) st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  if (!st) {
    list[0] = &src;
    for (size_t i = 0; i < nout; i++) list[i + 1] = &outs[i];
    int nccl_ok = nccl_shape_ok(list, nout + 1);
    int all_peer = 1;
    for (size_t i = 0; i < nout && nccl_ok; i++)
      if (!peer_ok(src.device, outs[i].device)) all_peer = 0;
    if (nccl_ok && bytes && engine != ENG_COPY && tc_nccl_available() &&
        (engine == ENG_NCCL || nout != 1 || !all_peer)) {
      for (size_t i = 0; i <= nout; i++) {
        devs[i] = list[i]->device;
        bufs[i] = list[i]->data;
        streams[i] = cur(devs[i]);
      }
      st = tc_nccl_broadcast_bytes(func, (int)nout + 1, devs, bufs, bytes, streams);
    } else {
      for (size_t i = 0; i < nout && !st; i++) {
        tcuda_stream_t ds = cur(outs[i].device);
        st = copy_view(func, &outs[i], ds, &src, src.on_gpu ? cur(src.device) : ds);
      }
    }
  }
  free(list);
  free(devs);
  free(bufs);
  free(streams);
  free(outs);
  TC_ANNOTATE_END();
  return st;
}

/* ---------------------------------------------------------------------
 * broadcast_coalesced
 * --------------------------------------------------------------------- */
static size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

static tcuda_status coalesced_impl(const char *func, int engine, const tc_tensor *ts, size_t n,
                                   const int *devices, size_t ndev, size_t buffer_size, DLManagedTensor **out) {
  tcuda_status st = TCUDA_SUCCESS;
  for (size_t i = 0; i < n && !st; i++) st = mt_out(func, &ts[i], NULL, &out[i]);
  if (st || ndev == 1 || !n) return st;

  int src_dev = devices[0];
  int *keys = malloc(n * sizeof *keys);
  uint64_t *bytes = malloc(n * sizeof *bytes);
  size_t *bucket = malloc(n * sizeof *bucket), *offset = malloc(n * sizeof *offset);
  if (!keys || !bytes || !bucket || !offset) st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  size_t nb = 0;
  if (!st) {
    for (size_t i = 0; i < n; i++) {
      keys[i] = tc_dtype_rank(ts[i].dtype);
      bytes[i] = (uint64_t)(ts[i].numel * ts[i].elem_size);
    }
    nb = tc_take_tensors(TC_TAKE_CPP, keys, bytes, n, buffer_size, bucket);
    if (nb == (size_t)-1) st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  }
  size_t *bsize = st ? NULL : calloc(nb ? nb : 1, sizeof *bsize);
  if (!st && !bsize) st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  if (!st) /* 16-byte aligned slots inside each bucket: vector copies */
    for (size_t i = 0; i < n; i++) {
      offset[i] = bsize[bucket[i]];
      bsize[bucket[i]] = align16(bsize[bucket[i]] + bytes[i]);
    }
  /* engine: one push kernel for a single peer destination; NCCL on
   * unique devices; else pack once and copy per destination */
  int unique = 1;
  for (size_t i = 0; i < ndev; i++)
    for (size_t j = 0; j < i; j++)
      if (devices[i] == devices[j]) unique = 0;
  int all_contig = 1;
  for (size_t i = 0; i < n; i++)
    if (!tc_tensor_contiguous(&ts[i])) all_contig = 0;
  int push = ndev == 2 && devices[1] != src_dev && engine != ENG_NCCL && all_contig &&
             peer_ok(src_dev, devices[1]);
  int use_nccl = !push && unique && engine != ENG_COPY && tc_nccl_available();

  /* bufs[b][d]: the bucket's buffer on devices[d]; d = 0 is the packed
   * source (only when packing) */
  void **bufs = st ? NULL : calloc(nb * ndev + 1, sizeof *bufs);
  tc_buf **owners = st ? NULL : calloc(nb * ndev + 1, sizeof *owners);
  if (!st && (!bufs || !owners)) st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  tcuda_stream_t ss = cur(src_dev);
  for (size_t b = 0; b < nb && !st; b++)
    for (size_t d = push ? 1 : 0; d < ndev && !st; d++) {
      st = dev_alloc(func, &bufs[b * ndev + d], bsize[b], devices[d], cur(devices[d]));
      if (!st && d) st = buf_wrap(func, bufs[b * ndev + d], 0, &owners[b * ndev + d]);
    }
  /* outputs: contiguous views into the bucket buffers */
  for (size_t d = 1; d < ndev && !st; d++)
    for (size_t i = 0; i < n && !st; i++) {
      size_t k = bucket[i] * ndev + d;
      tc_tensor v = contig_like(&ts[i], (char *)bufs[k] + offset[i], devices[d]);
      st = mt_out(func, &v, owners[k], &out[d * n + i]);
    }
  tc_copy_item *items = st ? NULL : malloc(n * sizeof *items);
  if (!st && !items) st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  if (!st && push) {
    tcuda_stream_t ds = cur(devices[1]);
    for (size_t i = 0; i < n; i++)
      items[i] = (tc_copy_item){ts[i].data, (char *)bufs[bucket[i] * ndev + 1] + offset[i], bytes[i]};
    st = wait_stream(ss, ds);
    if (!st) st = multicopy(func, items, n, ss);
    tcuda_status s2 = wait_stream(ds, ss);
    if (!st) st = s2;
  } else if (!st) {
    /* pack every bucket on the source: contiguous tensors in one launch */
    size_t ni = 0;
    for (size_t i = 0; i < n && !st; i++) {
      char *dst = (char *)bufs[bucket[i] * ndev] + offset[i];
      if (tc_tensor_contiguous(&ts[i])) items[ni++] = (tc_copy_item){ts[i].data, dst, bytes[i]};
      else {
        tc_tensor c = contig_like(&ts[i], dst, src_dev);
        st = copy_view(func, &c, ss, &ts[i], ss);
      }
    }
    if (!st) st = multicopy(func, items, ni, ss);
    if (!st && use_nccl) {
      tcuda_stream_t streams[TC_MAX_DEVICES];
      for (size_t d = 0; d < ndev; d++) streams[d] = cur(devices[d]);
      st = tc_nccl_broadcast_many(func, (int)ndev, devices, nb, bufs, bsize, streams);
    } else {
      for (size_t d = 1; d < ndev && !st; d++) {
        tcuda_stream_t ds = cur(devices[d]);
        int cross = devices[d] != src_dev;
        if (cross && (st = wait_stream(ss, ds))) break;
        tcuda_stream_t w = cross ? ss : ds;
        for (size_t b = 0; b < nb && !st; b++)
          st = copy_bytes(func, bufs[b * ndev + d], devices[d], bufs[b * ndev], src_dev, bsize[b], w);
        if (cross) {
          tcuda_status s2 = wait_stream(ds, ss);
          if (!st) st = s2;
        }
      }
    }
  }
  /* the packed source buffers were used on the source's stream only */
  for (size_t b = 0; bufs && !push && b < nb; b++) dev_free(bufs[b * ndev]);
  for (size_t k = 0; owners && k < nb * ndev; k++) buf_unref(owners[k]);
  free(items);
  free(bufs);
  free(owners);
  free(bsize);
  free(keys);
  free(bytes);
  free(bucket);
  free(offset);
  return st;
}

tcuda_status tcuda_comm_broadcast_coalesced(const tcuda_dltensor_t *const *tensors, size_t ntensors,
                                            const int *devices, size_t ndevices, size_t buffer_size,
                                            DLManagedTensor **out) {
  const char *func = "tcuda_comm_broadcast_coalesced";
  int engine = engine_now();
  tc_tensor *ts = NULL;
  tcuda_status st = TCUDA_SUCCESS;
  if (ntensors && !(ts = malloc(ntensors * sizeof *ts)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  st = tc_tensors_from_dl(func, "tensors", (const DLTensor *const *)tensors, ntensors, ts);
  if (!st) st = tc_check_broadcast_coalesced(func, ts, ntensors, devices, ndevices);
  if (!st && ntensors && !out) st = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", func);
  if (!st && ndevices > TC_MAX_DEVICES)
    st = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %zu devices (at most %d)", func, ndevices, TC_MAX_DEVICES);
  if (!st) st = tc_lazy_init(func);
  for (size_t i = 0; i < ndevices && !st; i++) st = check_device(func, "device", devices[i]);
  if (!st && ntensors) {
    memset(out, 0, ndevices * ntensors * sizeof *out);
    TC_ANNOTATE_BEGIN(func);
    st = coalesced_impl(func, engine, ts, ntensors, devices, ndevices, buffer_size, out);
    if (st) release_all(out, ndevices * ntensors);
    TC_ANNOTATE_END();
  }
  free(ts);
  return st;
}

/* ---------------------------------------------------------------------
 * reduce_add
 * --------------------------------------------------------------------- */
/* Contiguous copies of the non-contiguous inputs, each on its own device. */
static tcuda_status contiguous_inputs(const char *func, const tc_tensor *in, size_t n, const void **ptrs,
                                      void **tmps) {
  tcuda_status st = TCUDA_SUCCESS;
  for (size_t i = 0; i < n && !st; i++) {
    tmps[i] = NULL;
    ptrs[i] = in[i].data;
    if (tc_tensor_contiguous(&in[i])) continue;
    tcuda_stream_t s = cur(in[i].device);
    st = dev_alloc(func, &tmps[i], (size_t)(in[i].numel * in[i].elem_size), in[i].device, s);
    tc_tensor c = contig_like(&in[i], tmps[i], in[i].device);
    if (!st) st = copy_view(func, &c, s, &in[i], s);
    ptrs[i] = tmps[i];
  }
  return st;
}

tcuda_status tcuda_comm_reduce_add(const tcuda_dltensor_t *const *inputs, size_t ninputs, int destination,
                                   DLManagedTensor **out) {
  const char *func = "tcuda_comm_reduce_add";
  TC_CHECK_ARG(func, out, "out");
  int engine = engine_now();
  tc_tensor *in = NULL;
  size_t root = 0;
  tcuda_status st = TCUDA_SUCCESS;
  if (ninputs && !(in = malloc(ninputs * sizeof *in)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  st = tc_tensors_from_dl(func, "inputs", (const DLTensor *const *)inputs, ninputs, in);
  if (!st && ninputs > TC_MAX_DEVICES)
    st = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %zu inputs (at most %d)", func, ninputs, TC_MAX_DEVICES);
  if (!st && destination < -1)
    st = tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: destination %d is not a device (-1 is the current one)", func,
                  destination);
  if (!st && destination == -1) st = tcuda_current_device(&destination);
  if (!st) st = tc_check_reduce_add(func, in, ninputs, destination, &root);
  if (!st) st = tc_lazy_init(func);
  if (!st) st = check_tensor_devices(func, "input device", in, ninputs);
  if (st) { free(in); return st; }
  *out = NULL;
  if (ninputs == 1) {
    st = mt_out(func, &in[0], NULL, out);
    free(in);
    return st;
  }
  TC_ANNOTATE_BEGIN(func);
  const tc_tensor **list = malloc(ninputs * sizeof *list);
  const void **ptrs = malloc(ninputs * sizeof *ptrs);
  void **tmps = calloc(ninputs, sizeof *tmps);
  int *devs = malloc(ninputs * sizeof *devs);
  void *res = NULL;
  tc_buf *b = NULL;
  if (!list || !ptrs || !tmps || !devs) st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  if (!st) {
    for (size_t i = 0; i < ninputs; i++) {
      list[i] = &in[i];
      devs[i] = in[i].device;
    }
    int nccl_ok = nccl_shape_ok(list, ninputs);
    st = dev_alloc(func, &res, (size_t)(in[0].numel * in[0].elem_size), destination, cur(destination));
    if (!st) st = buf_wrap(func, res, 0, &b);
    if (!st) st = contiguous_inputs(func, in, ninputs, ptrs, tmps);
    if (!st && in[0].numel)
      st = reduce_flat(func, engine, ninputs, devs, ptrs, root, (size_t)in[0].numel, in[0].dtype, res, nccl_ok);
    tc_tensor r = contig_like(&in[0], res, destination);
    if (!st) st = mt_out(func, &r, b, out);
    for (size_t i = 0; i < ninputs; i++) dev_free(tmps[i]);
  }
  buf_unref(b);
  free(list);
  free(ptrs);
  free(tmps);
  free(devs);
  free(in);
  TC_ANNOTATE_END();
  return st;
}

tcuda_status tcuda_comm_reduce_add_coalesced(const tcuda_dltensor_t *const *inputs, size_t ngpus, size_t ntensors,
                                             int destination, size_t buffer_size, DLManagedTensor **out) {
  const char *func = "tcuda_comm_reduce_add_coalesced";
  int engine = engine_now();
  size_t total = ngpus * ntensors;
  if (ngpus && total / ngpus != ntensors) return tc_error(TCUDA_ERROR_OVERFLOW, "%s: ngpus * ntensors overflows", func);
  if (total && !out) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", func);
  if (ngpus > TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %zu GPUs (at most %d)", func, ngpus, TC_MAX_DEVICES);
  if (destination < -1)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: destination %d is not a device (-1 is the current one)", func,
                    destination);
  tc_tensor *in = total ? malloc(total * sizeof *in) : NULL;
  if (total && !in) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  tcuda_status st = tc_tensors_from_dl(func, "inputs", (const DLTensor *const *)inputs, total, in);
  if (!st && total && destination == -1) st = tcuda_current_device(&destination);
  if (!st) st = tc_check_reduce_add_coalesced(func, in, ngpus, ntensors, destination);
  if (!st && total) st = tc_lazy_init(func);
  if (!st) st = check_tensor_devices(func, "input device", in, total);
  if (st || !total) { free(in); return st; }
  memset(out, 0, ntensors * sizeof *out);
  if (ngpus == 1) { /* reduce_add of one input returns it: views */
    for (size_t i = 0; i < ntensors && !st; i++) st = mt_out(func, &in[i], NULL, &out[i]);
    if (st) release_all(out, ntensors);
    free(in);
    return st;
  }
  TC_ANNOTATE_BEGIN(func);
  int *keys = malloc(ntensors * sizeof *keys);
  uint64_t *bytes = malloc(ntensors * sizeof *bytes);
  size_t *bucket = malloc(ntensors * sizeof *bucket), *offset = malloc(ntensors * sizeof *offset);
  tc_copy_item *items = malloc(ntensors * sizeof *items);
  if (!keys || !bytes || !bucket || !offset || !items)
    st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  size_t nb = 0, root = 0;
  int devs[TC_MAX_DEVICES];
  const tc_tensor *heads[TC_MAX_DEVICES];
  for (size_t g = 0; g < ngpus; g++) {
    devs[g] = in[g * ntensors].device;
    heads[g] = &in[g * ntensors];
    if (devs[g] == destination) root = g;
  }
  if (!st) {
    for (size_t i = 0; i < ntensors; i++) {
      keys[i] = tc_dtype_rank(in[i].dtype);
      bytes[i] = (uint64_t)(in[i].numel * in[i].elem_size);
    }
    nb = tc_take_tensors(TC_TAKE_PY, keys, bytes, ntensors, buffer_size, bucket);
    if (nb == (size_t)-1) st = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  }
  int nccl_ok = nccl_shape_ok(heads, ngpus);
  for (size_t b = 0; b < nb && !st; b++) {
    /* flatten the bucket on each GPU (PyTorch's _flatten_dense_tensors:
     * no padding; a single contiguous tensor is used as is) */
    size_t count = 0, first = (size_t)-1, members = 0;
    DLDataType dt = {0, 0, 0};
    for (size_t i = 0; i < ntensors; i++)
      if (bucket[i] == b) {
        offset[i] = count;
        count += (size_t)in[i].numel;
        if (first == (size_t)-1) first = i;
        dt = in[i].dtype;
        members++;
      }
    size_t es = (size_t)tc_dtype_size(dt);
    const void *ptrs[TC_MAX_DEVICES];
    void *flat[TC_MAX_DEVICES] = {0};
    for (size_t g = 0; g < ngpus && !st; g++) {
      const tc_tensor *row = in + g * ntensors;
      if (members == 1 && tc_tensor_contiguous(&row[first])) {
        ptrs[g] = row[first].data;
        continue;
      }
      tcuda_stream_t s = cur(devs[g]);
      st = dev_alloc(func, &flat[g], count * es, devs[g], s);
      size_t ni = 0;
      for (size_t i = 0; i < ntensors && !st; i++) {
        if (bucket[i] != b) continue;
        char *dst = (char *)flat[g] + offset[i] * es;
        if (tc_tensor_contiguous(&row[i])) items[ni++] = (tc_copy_item){row[i].data, dst, bytes[i]};
        else {
          tc_tensor c = contig_like(&row[i], dst, devs[g]);
          st = copy_view(func, &c, s, &row[i], s);
        }
      }
      if (!st) st = multicopy(func, items, ni, s);
      ptrs[g] = flat[g];
    }
    void *res = NULL;
    tc_buf *owner = NULL;
    if (!st) st = dev_alloc(func, &res, count * es, destination, cur(destination));
    if (!st) st = buf_wrap(func, res, 0, &owner);
    if (!st && count) st = reduce_flat(func, engine, ngpus, devs, ptrs, root, count, dt, res, nccl_ok);
    for (size_t i = 0; i < ntensors && !st; i++) {
      if (bucket[i] != b) continue;
      tc_tensor v = contig_like(&in[i], (char *)res + offset[i] * es, destination);
      st = mt_out(func, &v, owner, &out[i]);
    }
    buf_unref(owner);
    for (size_t g = 0; g < ngpus; g++) dev_free(flat[g]);
  }
  if (st) release_all(out, ntensors);
  free(keys);
  free(bytes);
  free(bucket);
  free(offset);
  free(items);
  free(in);
  TC_ANNOTATE_END();
  return st;
}

/* ---------------------------------------------------------------------
 * scatter
 * --------------------------------------------------------------------- */
static tcuda_status check_user_stream(const char *func, const tcuda_stream_t *const *streams, size_t i, int device) {
  if (!streams || !streams[i]) return TCUDA_SUCCESS;
  return tc_check_scatter_stream(func, i, streams[i]->device, device);
}

tcuda_status tcuda_comm_scatter(const tcuda_dltensor_t *tensor, const int *devices, size_t ndevices,
                                const int64_t *chunk_sizes, size_t nchunk_sizes, int64_t dim,
                                const tcuda_stream_t *const *streams, DLManagedTensor **out, size_t *nout) {
  const char *func = "tcuda_comm_scatter";
  tc_tensor src;
  int wdim;
  size_t nchunks = 0;
  TC_CHECK_ARG(func, out, "out");
  TC_CHECK_ARG(func, nout, "nout");
  tcuda_status st = tc_tensor_from_dl(func, "tensor", (size_t)-1, (const DLTensor *)tensor, &src);
  if (st) return st;
  if (ndevices && !devices) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: devices is NULL", func);
  int64_t *sizes = malloc((ndevices ? ndevices : 1) * sizeof *sizes);
  if (!sizes) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  st = tc_plan_scatter(func, &src, ndevices, chunk_sizes, nchunk_sizes, dim, &wdim, sizes, &nchunks);
  for (size_t i = 0; i < nchunks && !st; i++) {
    if (src.on_gpu && devices[i] == src.device) continue;
    st = check_user_stream(func, streams, i, devices[i]);
    if (!st && devices[i] < 0)
      st = tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: Expected non-negative device index, but got %d", func, devices[i]);
  }
  if (!st) st = tc_lazy_init(func);
  if (!st) st = check_tensor_devices(func, "tensor device", &src, 1);
  for (size_t i = 0; i < nchunks && !st; i++) {
    st = check_device(func, "device", devices[i]);
    if (!st && streams && streams[i] && !(src.on_gpu && devices[i] == src.device))
      st = tc_stream_check(func, "streams[i]", *streams[i]);
  }
  if (st) { free(sizes); return st; }
  TC_ANNOTATE_BEGIN(func);
  memset(out, 0, nchunks * sizeof *out);
  int64_t start = 0;
  for (size_t i = 0; i < nchunks && !st; i++) {
    tc_tensor chunk;
    tc_tensor_narrow(&src, wdim, start, sizes[i], &chunk);
    start += sizes[i];
    int d = devices[i];
    if (src.on_gpu && d == src.device) {
      st = mt_out(func, &chunk, NULL, &out[i]);
      continue;
    }
    tcuda_stream_t ds = streams && streams[i] ? *streams[i] : cur(d);
    /* memory_format=Preserve: a dense chunk keeps its strides */
    tc_tensor dst = chunk;
    if (!tc_tensor_dense(&chunk)) tc_contiguous_strides(chunk.ndim, chunk.shape, dst.strides);
    void *p = NULL;
    tc_buf *b = NULL;
    st = dev_alloc(func, &p, (size_t)(chunk.numel * chunk.elem_size), d, ds);
    if (!st) st = buf_wrap(func, p, 0, &b);
    if (st) break;
    dst.data = p;
    dst.on_gpu = 1;
    dst.device = d;
    dst.dev_type = TC_DL_CUDA;
    st = copy_view(func, &dst, ds, &chunk, src.on_gpu ? cur(src.device) : ds);
    if (!st) st = mt_out(func, &dst, b, &out[i]);
    buf_unref(b);
  }
  if (st) release_all(out, nchunks);
  else *nout = nchunks;
  free(sizes);
  TC_ANNOTATE_END();
  return st;
}

tcuda_status tcuda_comm_scatter_out(const tcuda_dltensor_t *tensor, const tcuda_dltensor_t *const *out, size_t nout,
                                    int64_t dim, const tcuda_stream_t *const *streams) {
  const char *func = "tcuda_comm_scatter_out";
  tc_tensor src, *outs = NULL;
  int wdim;
  tcuda_status st = tc_tensor_from_dl(func, "tensor", (size_t)-1, (const DLTensor *)tensor, &src);
  if (st) return st;
  if (nout && !(outs = malloc(nout * sizeof *outs)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  st = tc_tensors_from_dl(func, "out", (const DLTensor *const *)out, nout, outs);
  if (!st) st = tc_plan_scatter_out(func, &src, outs, nout, dim, &wdim);
  for (size_t i = 0; i < nout && !st; i++) st = check_user_stream(func, streams, i, outs[i].device);
  if (!st) st = tc_lazy_init(func);
  if (!st) st = check_tensor_devices(func, "tensor device", &src, 1);
  if (!st) st = check_tensor_devices(func, "output device", outs, nout);
  for (size_t i = 0; i < nout && !st; i++)
    if (streams && streams[i]) st = tc_stream_check(func, "streams[i]", *streams[i]);
  if (st) { free(outs); return st; }
  TC_ANNOTATE_BEGIN(func);
  int64_t start = 0;
  for (size_t i = 0; i < nout && !st; i++) {
    tc_tensor chunk;
    tc_tensor_narrow(&src, wdim, start, outs[i].shape[wdim], &chunk);
    start += outs[i].shape[wdim];
    tcuda_stream_t ds = streams && streams[i] ? *streams[i] : cur(outs[i].device);
    st = copy_view(func, &outs[i], ds, &chunk, src.on_gpu ? cur(src.device) : ds);
  }
  free(outs);
  TC_ANNOTATE_END();
  return st;
}

/* ---------------------------------------------------------------------
 * gather
 * --------------------------------------------------------------------- */
static tcuda_status gather_into(const char *func, const tc_tensor *ts, size_t n, int wdim, const tc_tensor *res) {
  tcuda_status st = TCUDA_SUCCESS;
  int64_t start = 0;
  for (size_t i = 0; i < n && !st; i++) {
    tc_tensor slice;
    tc_tensor_narrow(res, wdim, start, ts[i].shape[wdim], &slice);
    start += ts[i].shape[wdim];
    tcuda_stream_t ss = cur(ts[i].device);
    st = copy_view(func, &slice, res->on_gpu ? cur(res->device) : ss, &ts[i], ss);
  }
  /* a host result is complete on return, as PyTorch's blocking copy */
  for (size_t i = 0; i < n && !st && !res->on_gpu; i++) {
    int dup = 0;
    for (size_t j = 0; j < i; j++)
      if (ts[j].device == ts[i].device) dup = 1;
    if (!dup) st = sync_stream(func, cur(ts[i].device));
  }
  return st;
}

static tcuda_status gather_prepare(const char *func, const tcuda_dltensor_t *const *tensors, size_t n, int64_t dim,
                                   tc_tensor **ts, int *wdim, int64_t *shape) {
  *ts = NULL;
  if (n && !(*ts = malloc(n * sizeof **ts)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", func);
  tcuda_status st = tc_tensors_from_dl(func, "tensors", (const DLTensor *const *)tensors, n, *ts);
  if (!st) st = tc_plan_gather(func, *ts, n, dim, wdim, shape);
  if (st) { free(*ts); *ts = NULL; }
  return st;
}

tcuda_status tcuda_comm_gather(const tcuda_dltensor_t *const *tensors, size_t ntensors, int64_t dim, int destination,
                               DLManagedTensor **out) {
  const char *func = "tcuda_comm_gather";
  TC_CHECK_ARG(func, out, "out");
  tc_tensor *ts;
  int wdim;
  int64_t shape[TC_COMM_MAX_DIMS];
  if (destination < TCUDA_COMM_HOST)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE,
                    "%s: destination %d is not a device (-1: current device, TCUDA_COMM_HOST: host)", func, destination);
  tcuda_status st = gather_prepare(func, tensors, ntensors, dim, &ts, &wdim, shape);
  if (st) return st;
  st = tc_lazy_init(func);
  if (!st && destination == -1) st = tcuda_current_device(&destination);
  if (!st && destination >= 0) st = check_device(func, "destination", destination);
  if (!st) st = check_tensor_devices(func, "input device", ts, ntensors);
  if (st) { free(ts); return st; }
  *out = NULL;
  TC_ANNOTATE_BEGIN(func);
  tc_tensor res = ts[0];
  memcpy(res.shape, shape, sizeof shape);
  res.numel = 1;
  for (int k = 0; k < res.ndim; k++) res.numel *= shape[k];
  size_t bytes = (size_t)(res.numel * res.elem_size);
  int host = destination == TCUDA_COMM_HOST;
  void *p = NULL;
  tc_buf *b = NULL;
  st = host ? tcuda_host_alloc(&p, bytes) : dev_alloc(func, &p, bytes, destination, cur(destination));
  if (!st) st = buf_wrap(func, p, host, &b);
  if (!st) {
    res = contig_like(&res, p, host ? -1 : destination);
    st = gather_into(func, ts, ntensors, wdim, &res);
  }
  if (!st) st = mt_out(func, &res, b, out);
  buf_unref(b);
  free(ts);
  TC_ANNOTATE_END();
  return st;
}

tcuda_status tcuda_comm_gather_out(const tcuda_dltensor_t *const *tensors, size_t ntensors, int64_t dim,
                                   const tcuda_dltensor_t *out) {
  const char *func = "tcuda_comm_gather_out";
  tc_tensor *ts, res;
  int wdim;
  int64_t shape[TC_COMM_MAX_DIMS];
  char a[512], b[512];
  tcuda_status st = gather_prepare(func, tensors, ntensors, dim, &ts, &wdim, shape);
  if (st) return st;
  st = tc_tensor_from_dl(func, "out", (size_t)-1, (const DLTensor *)out, &res);
  if (!st) {
    int ok = res.ndim == ts[0].ndim;
    for (int k = 0; ok && k < res.ndim; k++) ok = res.shape[k] == shape[k];
    if (!ok)
      st = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: Expected out tensor to have shape %s, but got %s", func,
                    tc_shape_str(a, sizeof a, ts[0].ndim, shape), tc_shape_str(b, sizeof b, res.ndim, res.shape));
    else if (!tc_dtype_eq(res.dtype, ts[0].dtype))
      st = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: out has dtype %s but the inputs are %s (tcuda does not convert "
                    "dtypes)", func, tc_dtype_name(res.dtype), tc_dtype_name(ts[0].dtype));
  }
  if (!st) st = tc_lazy_init(func);
  if (!st) st = check_tensor_devices(func, "input device", ts, ntensors);
  if (!st) st = check_tensor_devices(func, "out device", &res, 1);
  if (!st) {
    TC_ANNOTATE_BEGIN(func);
    st = gather_into(func, ts, ntensors, wdim, &res);
    TC_ANNOTATE_END();
  }
  free(ts);
  return st;
}
