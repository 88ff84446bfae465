/* comm's engines: peer access, raw byte copies (a copy engine between
 * GPUs), the launches of kernels.cu (strided and batched copies, sums) and
 * reduce_add's sum of flat buffers, by NCCL or by tcuda's sum kernel.
 * copy.c builds on these; nothing here calls copy.c. */
#include "comm/comm_impl.h"
#include "comm/kernels.h"
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

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
int tc_comm_blocks_for(int dev) { return sm_count(dev) * 4; }

static pthread_mutex_t g_peer_mu = PTHREAD_MUTEX_INITIALIZER;
static signed char g_peer[TC_MAX_DEVICES][TC_MAX_DEVICES]; /* 0 unknown, 1 enabled, -1 not possible */

static atomic_int g_peer_off; /* tc_comm_test_peer_off */
void tc_comm_test_peer_off(int off) { atomic_store_explicit(&g_peer_off, off, memory_order_relaxed); }

/* 1 when kernels on `dev` can touch `peer`'s memory (access enabled once). */
int tc_comm_peer_ok(int dev, int peer) {
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

tcuda_status tc_comm_launch_strided(const char *F, tcuda_stream_t strm, char *dst, const char *src,
                                    const tc_layout *l0, int64_t numel) {
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
  tcuda_status s = tc_on_device_begin(F, strm.device, &saved);
  if (s) return s;
  int e = tc_k_strided(strm.handle, &d, tc_comm_blocks_for(strm.device));
  tc_on_device_end(saved);
  return e ? tc_cuda_error((cudaError_t)e, F, "tc_k_strided") : TCUDA_SUCCESS;
}

/* Several contiguous byte copies in one kernel launch on stream strm: the
 * descriptor table goes up through pinned memory. */
tcuda_status tc_comm_multicopy(const char *F, const tc_copy_item *items, size_t n, tcuda_stream_t strm) {
  if (!n) return TCUDA_SUCCESS;
  size_t tb = n * sizeof *items;
  uint64_t maxb = 0;
  for (size_t i = 0; i < n; i++)
    if (items[i].bytes > maxb) maxb = items[i].bytes;
  void *h = NULL, *d = NULL;
  tcuda_status s = tcuda_host_alloc(&h, tb);
  if (s) return s;
  memcpy(h, items, tb);
  s = tc_comm_dev_alloc(F, &d, tb, strm.device, strm);
  int saved;
  if (!s && !(s = tc_on_device_begin(F, strm.device, &saved))) {
    cudaError_t e = cudaMemcpyAsync(d, h, tb, cudaMemcpyHostToDevice, strm.handle);
    int ke = e ? 0 : tc_k_multicopy(strm.handle, (const tc_copy_item *)d, n, maxb, tc_comm_blocks_for(strm.device));
    tc_on_device_end(saved);
    if (e) s = tc_cuda_error(e, F, "cudaMemcpyAsync");
    else if (ke) s = tc_cuda_error((cudaError_t)ke, F, "tc_k_multicopy");
  }
  if (!s) s = tcuda_host_record_stream(h, strm);
  (void)tcuda_host_free(h);
  tc_comm_dev_free(d);
  return s;
}

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

/* out = a + b, n elements of kind, on stream strm (any of them may be on a
 * peer of strm.device). */
static tcuda_status add_on(const char *F, tcuda_stream_t strm, int kind, void *out, const void *a, const void *b,
                           size_t n) {
  int saved;
  tcuda_status s = tc_on_device_begin(F, strm.device, &saved);
  if (s) return s;
  int e = tc_k_add(strm.handle, kind, out, a, b, n, tc_comm_blocks_for(strm.device));
  tc_on_device_end(saved);
  return e ? tc_cuda_error((cudaError_t)e, F, "tc_k_add") : TCUDA_SUCCESS;
}

/* Sum contiguous buffers ptrs[i] (on devs[i], count elements each) into
 * result on devs[root]. nccl_ok: PyTorch would use NCCL here. */
tcuda_status tc_comm_reduce_flat(const char *F, int engine, size_t n, const int *devs, const void *const *ptrs,
                                 size_t root, size_t count, DLDataType dt, void *result, int nccl_ok) {
  int dest = devs[root];
  tcuda_stream_t ds = tc_comm_cur(dest);
  int64_t mult;
  int kind = add_kind(dt, &mult);
  if (kind < 0) return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: cannot sum dtype %s", F, tc_dtype_name(dt));
  int ndt_mult, ndt = tc_nccl_dtype(dt, &ndt_mult);
  int all_peer = 1;
  for (size_t i = 0; i < n; i++)
    if (devs[i] != dest && !tc_comm_peer_ok(dest, devs[i])) all_peer = 0;
  int use_nccl = nccl_ok && ndt >= 0 && engine != TCUDA_COMM_ENGINE_COPY && tc_nccl_available() &&
                 (engine == TCUDA_COMM_ENGINE_NCCL || n != 2 || !all_peer);
  tcuda_status s = TCUDA_SUCCESS;
  if (use_nccl) {
    tcuda_stream_t streams[TC_MAX_DEVICES];
    for (size_t i = 0; i < n; i++) streams[i] = tc_comm_cur(devs[i]);
    return tc_nccl_reduce(F, (int)n, devs, ptrs, result, (int)root, count, dt, streams);
  }
  /* PyTorch's copy path: result = root + other0, then += each other, in
   * the dtype, on the destination's current stream */
  size_t es = (size_t)tc_dtype_size(dt), aes = es / (size_t)mult, nadd = count * (size_t)mult;
  const void *acc = ptrs[root];
  for (size_t i = 0; i < n && !s; i++) {
    if (i == root) continue;
    int od = devs[i];
    tcuda_stream_t os = tc_comm_cur(od);
    void *tmp = NULL;
    const char *b = ptrs[i];
    if (od != dest && !tc_comm_peer_ok(dest, od)) {
      /* no peer access: peer copy into a buffer on the destination, then
       * a local add */
      s = tc_comm_dev_alloc(F, &tmp, count * es, dest, ds);
      if (!s) s = tc_comm_wait(os, ds);
      if (!s) s = tc_comm_copy_bytes(F, tmp, dest, b, od, nadd * aes, os);
      if (!s) s = tc_comm_wait(ds, os);
      if (!s) s = add_on(F, ds, kind, result, acc, tmp, nadd);
    } else {
      /* one pass on the destination, reading the peer over NVLink */
      if (od != dest) s = tc_comm_wait(ds, os);
      if (!s) s = add_on(F, ds, kind, result, acc, b, nadd);
      /* the other device may reuse its input only after the read */
      if (!s && od != dest) s = tc_comm_wait(os, ds);
    }
    tc_comm_dev_free(tmp);
    acc = result;
  }
  return s;
}

/* ---- raw byte copies: a copy engine between GPUs, a kernel on one ---- */

/* One GPU-to-GPU copy by a copy engine, on stream strm (of either end). */
static tcuda_status p2p_copy(const char *F, char *dst, int ddev, const char *src, int sdev, size_t bytes,
                             tcuda_stream_t strm) {
  int saved;
  tcuda_status s = tc_on_device_begin(F, strm.device, &saved);
  if (s) return s;
  cudaError_t e = cudaMemcpyPeerAsync(dst, ddev, src, sdev, bytes, strm.handle);
  tc_on_device_end(saved);
  return e ? tc_cuda_error(e, F, "cudaMemcpyPeerAsync") : TCUDA_SUCCESS;
}

/* Bytes between any two places, run on stream strm (on a GPU of the pair). */
tcuda_status tc_comm_copy_bytes(const char *F, void *dst, int ddev, const void *src, int sdev, size_t bytes,
                                tcuda_stream_t strm) {
  if (!bytes) return TCUDA_SUCCESS;
  if (ddev >= 0 && sdev >= 0 && ddev != sdev) return p2p_copy(F, dst, ddev, src, sdev, bytes, strm);
  int saved, e;
  const char *call;
  tcuda_status s = tc_on_device_begin(F, strm.device, &saved);
  if (s) return s;
  if (ddev >= 0 && sdev >= 0) {
    call = "tc_k_copy";
    e = tc_k_copy(strm.handle, dst, src, bytes, tc_comm_blocks_for(strm.device));
  } else {
    call = "cudaMemcpyAsync";
    e = (int)cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, strm.handle);
  }
  tc_on_device_end(saved);
  return e ? tc_cuda_error((cudaError_t)e, F, call) : TCUDA_SUCCESS;
}
