/* comm's copies, PyTorch's copy_ between any two places: host and GPU by
 * cudaMemcpy*, GPU to GPU by a copy engine (cudaMemcpyPeerAsync), layouts
 * that are not flat by the strided kernel (kernel.c) or through contiguous
 * staging. */
#include "comm/comm_impl.h"
#include "comm/kernels.h"
#include <stdlib.h>
#include <string.h>

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

static tcuda_status memcpy2d(const char *F, tcuda_stream_t strm, const tc_layout *l, void *dst, const void *src) {
  int saved;
  tcuda_status s = tc_on_device_begin(F, strm.device, &saved);
  if (s) return s;
  cudaError_t e = cudaMemcpy2DAsync(dst, (size_t)(l->sd[0] * l->es), src, (size_t)(l->ss[0] * l->es),
                                    (size_t)(l->shape[1] * l->es), (size_t)l->shape[0], cudaMemcpyDefault, strm.handle);
  tc_on_device_end(saved);
  return e ? tc_cuda_error(e, F, "cudaMemcpy2DAsync") : TCUDA_SUCCESS;
}

/* dst = src (same shape and dtype), PyTorch copy_ style. ds is the stream
 * of dst's device that owns the result, ss the current stream of src's
 * device. Host destinations are complete on return only when pinned
 * staging was needed; callers that promise completion synchronise. */
tcuda_status tc_comm_copy_view(const char *F, const tc_tensor *dst, tcuda_stream_t ds, const tc_tensor *src,
                               tcuda_stream_t ss) {
  if (!dst->numel) return TCUDA_SUCCESS;
  tc_layout l;
  coalesce(dst, src, &l);
  int flat = same_dense(dst, src) || (l.n == 1 && l.sd[0] == 1 && l.ss[0] == 1);
  int two_d = !flat && l.n == 2 && l.sd[1] == 1 && l.ss[1] == 1 && l.sd[0] >= l.shape[1] && l.ss[0] >= l.shape[1];
  size_t bytes = (size_t)(dst->numel * dst->elem_size);
  tcuda_status s = TCUDA_SUCCESS;

  if (dst->on_gpu && src->on_gpu) {
    int cross = dst->device != src->device;
    tcuda_stream_t w = cross ? ss : ds;
    if (cross && (s = tc_comm_wait(ss, ds))) return s;
    if (flat) {
      s = tc_comm_copy_bytes(F, dst->data, dst->device, src->data, src->device, bytes, w);
    } else if (two_d && !cross) {
      s = memcpy2d(F, w, &l, dst->data, src->data);
    } else if (!cross || tc_comm_peer_ok(w.device, dst->device)) {
      s = tc_comm_launch_strided(F, w, dst->data, src->data, &l, dst->numel);
    } else {
      /* no peer access: contiguous on the source, peer copy, unpack */
      void *ts = NULL, *td = NULL;
      s = tc_comm_dev_alloc(F, &ts, bytes, src->device, ss);
      if (!s) s = tc_comm_dev_alloc(F, &td, bytes, dst->device, ds);
      tc_tensor cs = tc_comm_contig_like(src, ts, src->device), cd = tc_comm_contig_like(dst, td, dst->device);
      if (!s) s = tc_comm_copy_view(F, &cs, ss, src, ss);
      if (!s) s = tc_comm_copy_bytes(F, td, dst->device, ts, src->device, bytes, ss);
      if (!s) s = tc_comm_wait(ds, ss);
      if (!s) s = tc_comm_copy_view(F, dst, ds, &cd, ds);
      tc_comm_dev_free(ts);
      tc_comm_dev_free(td);
    }
    if (cross) {
      tcuda_status s2 = tc_comm_wait(ds, ss);
      if (!s) s = s2;
    }
    return s;
  }

  if (dst->on_gpu) { /* host -> GPU, on the destination's stream */
    if (flat) return tc_comm_copy_bytes(F, dst->data, dst->device, src->data, -1, bytes, ds);
    if (two_d) return memcpy2d(F, ds, &l, dst->data, src->data);
    char *h = malloc(bytes);
    void *td = NULL;
    if (!h) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
    tc_tensor ch = tc_comm_contig_like(src, h, -1), cd;
    tc_layout lh;
    coalesce(&ch, src, &lh);
    host_strided(h, lh.sd, src->data, lh.ss, lh.shape, lh.n, lh.es, src->numel);
    s = tc_comm_dev_alloc(F, &td, bytes, dst->device, ds);
    /* a pageable source is staged by CUDA before cudaMemcpyAsync returns */
    if (!s) s = tc_comm_copy_bytes(F, td, dst->device, h, -1, bytes, ds);
    cd = tc_comm_contig_like(dst, td, dst->device);
    if (!s) s = tc_comm_copy_view(F, dst, ds, &cd, ds);
    tc_comm_dev_free(td);
    free(h);
    return s;
  }

  if (src->on_gpu) { /* GPU -> host, on the source's stream */
    if (two_d) return memcpy2d(F, ss, &l, dst->data, src->data);
    if (flat && host_is_pinned(dst->data))
      return tc_comm_copy_bytes(F, dst->data, -1, src->data, src->device, bytes, ss);
    void *td = NULL, *h = NULL;
    const char *from = src->data;
    if (!flat && !tc_tensor_contiguous(src)) {
      tc_tensor cd;
      if ((s = tc_comm_dev_alloc(F, &td, bytes, src->device, ss))) return s;
      cd = tc_comm_contig_like(src, td, src->device);
      if ((s = tc_comm_copy_view(F, &cd, ss, src, ss))) { tc_comm_dev_free(td); return s; }
      from = td;
    }
    s = tcuda_host_alloc(&h, bytes);
    if (!s) s = tc_comm_copy_bytes(F, h, -1, from, src->device, bytes, ss);
    if (!s) s = tc_comm_sync(F, ss);
    if (!s) {
      if (flat) memcpy(dst->data, h, bytes);
      else {
        tc_tensor ch = tc_comm_contig_like(src, h, -1);
        tc_layout lh;
        coalesce(dst, &ch, &lh);
        host_strided(dst->data, lh.sd, h, lh.ss, lh.shape, lh.n, lh.es, dst->numel);
      }
    }
    if (h) (void)tcuda_host_free(h);
    tc_comm_dev_free(td);
    return s;
  }
  /* host -> host */
  host_strided(dst->data, l.sd, src->data, l.ss, l.shape, l.n, l.es, dst->numel);
  return TCUDA_SUCCESS;
}
