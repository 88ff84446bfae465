/* torch.cuda.comm over DLPack tensors: the public calls. Each checks its
 * arguments (the pure checks are in plan.c), picks the engine and drives
 * the copies (copy.c), kernels and sums (kernel.c) or NCCL (nccl.c) into
 * output tensors (tensor.c).
 *
 * Engine choice (see tcuda.h): NCCL where PyTorch would use it, except
 * two-GPU transfers with peer access: a bulk copy goes by a copy engine
 * (faster on NVLink than any SM-kernel copy bench_comm's sweep tried),
 * reduce_add's sum is a kernel on the destination that reads the peer over
 * NVLink (one pass: faster than copy-then-add), many small tensors go in
 * one push kernel.
 * Everything else goes through tc_comm_copy_view (copy.c), which mirrors
 * PyTorch's copy_: cross-device work on the source's current stream,
 * fenced both ways against the destination's stream. */
#include "comm/comm_impl.h"
#include "core/annotate.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static tcuda_status check_device(const char *F, const char *what, int dev) {
  int n = tc_device_count();
  if (dev < 0 || dev >= n || dev >= TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: %s %d out of range (%d devices)", F, what, dev, n);
  return TCUDA_SUCCESS;
}

static tcuda_status check_tensor_devices(const char *F, const char *what, const tc_tensor *ts, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (ts[i].on_gpu) {
      tcuda_status s = check_device(F, what, ts[i].device);
      if (s) return s;
    }
  return TCUDA_SUCCESS;
}

static atomic_int g_engine = TCUDA_COMM_ENGINE_AUTO; /* tcuda_comm_set_engine */

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
 * broadcast
 * --------------------------------------------------------------------- */
static tcuda_status broadcast_impl(const char *F, int engine, const tc_tensor *src, const int *devices, size_t n,
                                   DLManagedTensor **out) {
  size_t bytes = (size_t)(src->numel * src->elem_size);
  tc_tensor *outs = calloc(n ? n : 1, sizeof *outs);
  int *devs = malloc((n + 1) * sizeof *devs);
  void **bufs = malloc((n + 1) * sizeof *bufs);
  tcuda_stream_t *streams = malloc((n + 1) * sizeof *streams);
  tcuda_status s = TCUDA_SUCCESS;
  if (!outs || !devs || !bufs || !streams) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  size_t nnew = 0;
  /* [source, new outputs...] is the list PyTorch checks for NCCL */
  int unique = src->on_gpu && tc_tensor_contiguous(src);
  if (!s && src->on_gpu) {
    devs[0] = src->device;
    bufs[0] = src->data;
    streams[0] = tc_comm_cur(src->device);
  }
  for (size_t i = 0; i < n && !s; i++) {
    if (src->on_gpu && devices[i] == src->device) {
      s = tc_comm_out(F, src, NULL, &out[i]);
      continue;
    }
    int d = devices[i];
    void *p = NULL;
    tc_buf *b = NULL;
    s = tc_comm_dev_alloc(F, &p, bytes, d, tc_comm_cur(d));
    if (!s) s = tc_comm_buf_wrap(F, p, 0, &b);
    if (s) break;
    outs[i] = tc_comm_contig_like(src, p, d);
    s = tc_comm_out(F, &outs[i], b, &out[i]);
    tc_comm_buf_unref(b);
    for (size_t j = 0; j < nnew; j++)
      if (devs[j + 1] == d) unique = 0;
    devs[nnew + 1] = d;
    bufs[nnew + 1] = p;
    streams[nnew + 1] = tc_comm_cur(d);
    nnew++;
  }
  if (!s && nnew && bytes) {
    int all_peer = src->on_gpu;
    for (size_t j = 1; j <= nnew && all_peer; j++)
      if (!tc_comm_peer_ok(src->device, devs[j])) all_peer = 0;
    int use_nccl = unique && engine != TCUDA_COMM_ENGINE_COPY && tc_nccl_available() &&
                   (engine == TCUDA_COMM_ENGINE_NCCL || nnew != 1 || !all_peer);
    if (use_nccl) {
      s = tc_nccl_broadcast_bytes(F, (int)nnew + 1, devs, bufs, bytes, streams);
    } else {
      for (size_t i = 0; i < n && !s; i++) {
        if (src->on_gpu && devices[i] == src->device) continue;
        tcuda_stream_t ss = src->on_gpu ? tc_comm_cur(src->device) : tc_comm_cur(devices[i]);
        s = tc_comm_copy_view(F, &outs[i], tc_comm_cur(devices[i]), src, ss);
      }
    }
  }
  if (s) tc_comm_release_all(out, n);
  free(outs);
  free(devs);
  free(bufs);
  free(streams);
  return s;
}

tcuda_status tcuda_comm_broadcast(const tcuda_dltensor_t *tensor, const int *devices, size_t ndevices,
                                  DLManagedTensor **out) {
  const char *F = "tcuda_comm_broadcast";
  tc_tensor src;
  int engine = engine_now();
  tcuda_status s = tc_tensor_from_dl(F, "tensor", (size_t)-1, (const DLTensor *)tensor, &src);
  if (s) return s;
  if (ndevices && !out) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", F);
  if ((s = tc_check_device_list(F, devices, ndevices))) return s;
  if (!ndevices) return TCUDA_SUCCESS;
  if ((s = tc_lazy_init(F))) return s;
  if ((s = check_tensor_devices(F, "tensor device", &src, 1))) return s;
  for (size_t i = 0; i < ndevices; i++)
    if ((s = check_device(F, "device", devices[i]))) return s;
  for (size_t i = 0; i < ndevices; i++) out[i] = NULL;
  TC_ANNOTATE_BEGIN(F);
  s = broadcast_impl(F, engine, &src, devices, ndevices, out);
  TC_ANNOTATE_END();
  return s;
}

tcuda_status tcuda_comm_broadcast_out(const tcuda_dltensor_t *tensor, const tcuda_dltensor_t *const *out, size_t nout) {
  const char *F = "tcuda_comm_broadcast_out";
  tc_tensor src, *outs = NULL;
  int engine = engine_now();
  tcuda_status s = tc_tensor_from_dl(F, "tensor", (size_t)-1, (const DLTensor *)tensor, &src);
  if (s) return s;
  if (nout && !(outs = malloc(nout * sizeof *outs)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  s = tc_tensors_from_dl(F, "out", (const DLTensor *const *)out, nout, outs);
  if (!s) s = tc_check_broadcast_out(F, &src, outs, nout);
  if (!s && nout) s = tc_lazy_init(F);
  if (!s && nout) s = check_tensor_devices(F, "tensor device", &src, 1);
  if (!s && nout) s = check_tensor_devices(F, "output device", outs, nout);
  if (s || !nout) { free(outs); return s; }
  TC_ANNOTATE_BEGIN(F);
  size_t bytes = (size_t)(src.numel * src.elem_size);
  const tc_tensor **list = malloc((nout + 1) * sizeof *list);
  int *devs = malloc((nout + 1) * sizeof *devs);
  void **bufs = malloc((nout + 1) * sizeof *bufs);
  tcuda_stream_t *streams = malloc((nout + 1) * sizeof *streams);
  if (!list || !devs || !bufs || !streams) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  if (!s) {
    list[0] = &src;
    for (size_t i = 0; i < nout; i++) list[i + 1] = &outs[i];
    int nccl_ok = nccl_shape_ok(list, nout + 1);
    int all_peer = 1;
    for (size_t i = 0; i < nout && nccl_ok; i++)
      if (!tc_comm_peer_ok(src.device, outs[i].device)) all_peer = 0;
    if (nccl_ok && bytes && engine != TCUDA_COMM_ENGINE_COPY && tc_nccl_available() &&
        (engine == TCUDA_COMM_ENGINE_NCCL || nout != 1 || !all_peer)) {
      for (size_t i = 0; i <= nout; i++) {
        devs[i] = list[i]->device;
        bufs[i] = list[i]->data;
        streams[i] = tc_comm_cur(devs[i]);
      }
      s = tc_nccl_broadcast_bytes(F, (int)nout + 1, devs, bufs, bytes, streams);
    } else {
      for (size_t i = 0; i < nout && !s; i++) {
        tcuda_stream_t ds = tc_comm_cur(outs[i].device);
        s = tc_comm_copy_view(F, &outs[i], ds, &src, src.on_gpu ? tc_comm_cur(src.device) : ds);
      }
    }
  }
  free(list);
  free(devs);
  free(bufs);
  free(streams);
  free(outs);
  TC_ANNOTATE_END();
  return s;
}

/* ---------------------------------------------------------------------
 * broadcast_coalesced
 * --------------------------------------------------------------------- */
static size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

static tcuda_status coalesced_impl(const char *F, int engine, const tc_tensor *ts, size_t n,
                                   const int *devices, size_t ndev, size_t buffer_size, DLManagedTensor **out) {
  tcuda_status s = TCUDA_SUCCESS;
  for (size_t i = 0; i < n && !s; i++) s = tc_comm_out(F, &ts[i], NULL, &out[i]);
  if (s || ndev == 1 || !n) return s;

  int src_dev = devices[0];
  int *keys = malloc(n * sizeof *keys);
  uint64_t *bytes = malloc(n * sizeof *bytes);
  size_t *bucket = malloc(n * sizeof *bucket), *offset = malloc(n * sizeof *offset);
  if (!keys || !bytes || !bucket || !offset) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  size_t nb = 0;
  if (!s) {
    for (size_t i = 0; i < n; i++) {
      keys[i] = tc_dtype_rank(ts[i].dtype);
      bytes[i] = (uint64_t)(ts[i].numel * ts[i].elem_size);
    }
    nb = tc_take_tensors(TC_TAKE_CPP, keys, bytes, n, buffer_size, bucket);
    if (nb == (size_t)-1) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  }
  size_t *bsize = s ? NULL : calloc(nb ? nb : 1, sizeof *bsize);
  if (!s && !bsize) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  if (!s) /* 16-byte aligned slots inside each bucket: vector copies */
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
  int push = ndev == 2 && devices[1] != src_dev && engine != TCUDA_COMM_ENGINE_NCCL && all_contig &&
             tc_comm_peer_ok(src_dev, devices[1]);
  int use_nccl = !push && unique && engine != TCUDA_COMM_ENGINE_COPY && tc_nccl_available();

  /* bufs[b][d]: the bucket's buffer on devices[d]; d = 0 is the packed
   * source (only when packing) */
  void **bufs = s ? NULL : calloc(nb * ndev + 1, sizeof *bufs);
  tc_buf **owners = s ? NULL : calloc(nb * ndev + 1, sizeof *owners);
  if (!s && (!bufs || !owners)) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  tcuda_stream_t ss = tc_comm_cur(src_dev);
  for (size_t b = 0; b < nb && !s; b++)
    for (size_t d = push ? 1 : 0; d < ndev && !s; d++) {
      s = tc_comm_dev_alloc(F, &bufs[b * ndev + d], bsize[b], devices[d], tc_comm_cur(devices[d]));
      if (!s && d) s = tc_comm_buf_wrap(F, bufs[b * ndev + d], 0, &owners[b * ndev + d]);
    }
  /* outputs: contiguous views into the bucket buffers */
  for (size_t d = 1; d < ndev && !s; d++)
    for (size_t i = 0; i < n && !s; i++) {
      size_t k = bucket[i] * ndev + d;
      tc_tensor v = tc_comm_contig_like(&ts[i], (char *)bufs[k] + offset[i], devices[d]);
      s = tc_comm_out(F, &v, owners[k], &out[d * n + i]);
    }
  tc_copy_item *items = s ? NULL : malloc(n * sizeof *items);
  if (!s && !items) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  if (!s && push) {
    tcuda_stream_t ds = tc_comm_cur(devices[1]);
    for (size_t i = 0; i < n; i++)
      items[i] = (tc_copy_item){ts[i].data, (char *)bufs[bucket[i] * ndev + 1] + offset[i], bytes[i]};
    s = tc_comm_wait(ss, ds);
    if (!s) s = tc_comm_multicopy(F, items, n, ss);
    tcuda_status s2 = tc_comm_wait(ds, ss);
    if (!s) s = s2;
  } else if (!s) {
    /* pack every bucket on the source: contiguous tensors in one launch */
    size_t ni = 0;
    for (size_t i = 0; i < n && !s; i++) {
      char *dst = (char *)bufs[bucket[i] * ndev] + offset[i];
      if (tc_tensor_contiguous(&ts[i])) items[ni++] = (tc_copy_item){ts[i].data, dst, bytes[i]};
      else {
        tc_tensor c = tc_comm_contig_like(&ts[i], dst, src_dev);
        s = tc_comm_copy_view(F, &c, ss, &ts[i], ss);
      }
    }
    if (!s) s = tc_comm_multicopy(F, items, ni, ss);
    if (!s && use_nccl) {
      tcuda_stream_t streams[TC_MAX_DEVICES];
      for (size_t d = 0; d < ndev; d++) streams[d] = tc_comm_cur(devices[d]);
      s = tc_nccl_broadcast_many(F, (int)ndev, devices, nb, bufs, bsize, streams);
    } else {
      for (size_t d = 1; d < ndev && !s; d++) {
        tcuda_stream_t ds = tc_comm_cur(devices[d]);
        int cross = devices[d] != src_dev;
        if (cross && (s = tc_comm_wait(ss, ds))) break;
        tcuda_stream_t w = cross ? ss : ds;
        for (size_t b = 0; b < nb && !s; b++)
          s = tc_comm_copy_bytes(F, bufs[b * ndev + d], devices[d], bufs[b * ndev], src_dev, bsize[b], w);
        if (cross) {
          tcuda_status s2 = tc_comm_wait(ds, ss);
          if (!s) s = s2;
        }
      }
    }
  }
  /* the packed source buffers were used on the source's stream only */
  for (size_t b = 0; bufs && !push && b < nb; b++) tc_comm_dev_free(bufs[b * ndev]);
  for (size_t k = 0; owners && k < nb * ndev; k++) tc_comm_buf_unref(owners[k]);
  free(items);
  free(bufs);
  free(owners);
  free(bsize);
  free(keys);
  free(bytes);
  free(bucket);
  free(offset);
  return s;
}

tcuda_status tcuda_comm_broadcast_coalesced(const tcuda_dltensor_t *const *tensors, size_t ntensors,
                                            const int *devices, size_t ndevices, size_t buffer_size,
                                            DLManagedTensor **out) {
  const char *F = "tcuda_comm_broadcast_coalesced";
  int engine = engine_now();
  tc_tensor *ts = NULL;
  tcuda_status s = TCUDA_SUCCESS;
  if (ntensors && !(ts = malloc(ntensors * sizeof *ts)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  s = tc_tensors_from_dl(F, "tensors", (const DLTensor *const *)tensors, ntensors, ts);
  if (!s) s = tc_check_broadcast_coalesced(F, ts, ntensors, devices, ndevices);
  if (!s && ntensors && !out) s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", F);
  if (!s && ndevices > TC_MAX_DEVICES)
    s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %zu devices (at most %d)", F, ndevices, TC_MAX_DEVICES);
  if (!s) s = tc_lazy_init(F);
  for (size_t i = 0; i < ndevices && !s; i++) s = check_device(F, "device", devices[i]);
  if (!s && ntensors) {
    memset(out, 0, ndevices * ntensors * sizeof *out);
    TC_ANNOTATE_BEGIN(F);
    s = coalesced_impl(F, engine, ts, ntensors, devices, ndevices, buffer_size, out);
    if (s) tc_comm_release_all(out, ndevices * ntensors);
    TC_ANNOTATE_END();
  }
  free(ts);
  return s;
}

/* ---------------------------------------------------------------------
 * reduce_add
 * --------------------------------------------------------------------- */
/* Contiguous copies of the non-contiguous inputs, each on its own device. */
static tcuda_status contiguous_inputs(const char *F, const tc_tensor *in, size_t n, const void **ptrs,
                                      void **tmps) {
  tcuda_status s = TCUDA_SUCCESS;
  for (size_t i = 0; i < n && !s; i++) {
    tmps[i] = NULL;
    ptrs[i] = in[i].data;
    if (tc_tensor_contiguous(&in[i])) continue;
    tcuda_stream_t strm = tc_comm_cur(in[i].device);
    s = tc_comm_dev_alloc(F, &tmps[i], (size_t)(in[i].numel * in[i].elem_size), in[i].device, strm);
    tc_tensor c = tc_comm_contig_like(&in[i], tmps[i], in[i].device);
    if (!s) s = tc_comm_copy_view(F, &c, strm, &in[i], strm);
    ptrs[i] = tmps[i];
  }
  return s;
}

tcuda_status tcuda_comm_reduce_add(const tcuda_dltensor_t *const *inputs, size_t ninputs, int destination,
                                   DLManagedTensor **out) {
  const char *F = "tcuda_comm_reduce_add";
  TC_CHECK_ARG(F, out, "out");
  int engine = engine_now();
  tc_tensor *in = NULL;
  size_t root = 0;
  tcuda_status s = TCUDA_SUCCESS;
  if (ninputs && !(in = malloc(ninputs * sizeof *in)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  s = tc_tensors_from_dl(F, "inputs", (const DLTensor *const *)inputs, ninputs, in);
  if (!s && ninputs > TC_MAX_DEVICES)
    s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %zu inputs (at most %d)", F, ninputs, TC_MAX_DEVICES);
  if (!s && destination < -1)
    s = tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: destination %d is not a device (-1 is the current one)", F,
                 destination);
  if (!s && destination == -1) s = tcuda_current_device(&destination);
  if (!s) s = tc_check_reduce_add(F, in, ninputs, destination, &root);
  if (!s) s = tc_lazy_init(F);
  if (!s) s = check_tensor_devices(F, "input device", in, ninputs);
  if (s) { free(in); return s; }
  *out = NULL;
  if (ninputs == 1) {
    s = tc_comm_out(F, &in[0], NULL, out);
    free(in);
    return s;
  }
  TC_ANNOTATE_BEGIN(F);
  const tc_tensor **list = malloc(ninputs * sizeof *list);
  const void **ptrs = malloc(ninputs * sizeof *ptrs);
  void **tmps = calloc(ninputs, sizeof *tmps);
  int *devs = malloc(ninputs * sizeof *devs);
  void *res = NULL;
  tc_buf *b = NULL;
  if (!list || !ptrs || !tmps || !devs) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  if (!s) {
    for (size_t i = 0; i < ninputs; i++) {
      list[i] = &in[i];
      devs[i] = in[i].device;
    }
    int nccl_ok = nccl_shape_ok(list, ninputs);
    s = tc_comm_dev_alloc(F, &res, (size_t)(in[0].numel * in[0].elem_size), destination, tc_comm_cur(destination));
    if (!s) s = tc_comm_buf_wrap(F, res, 0, &b);
    if (!s) s = contiguous_inputs(F, in, ninputs, ptrs, tmps);
    if (!s && in[0].numel)
      s = tc_comm_reduce_flat(F, engine, ninputs, devs, ptrs, root, (size_t)in[0].numel, in[0].dtype, res, nccl_ok);
    tc_tensor r = tc_comm_contig_like(&in[0], res, destination);
    if (!s) s = tc_comm_out(F, &r, b, out);
    for (size_t i = 0; i < ninputs; i++) tc_comm_dev_free(tmps[i]);
  }
  tc_comm_buf_unref(b);
  free(list);
  free(ptrs);
  free(tmps);
  free(devs);
  free(in);
  TC_ANNOTATE_END();
  return s;
}

tcuda_status tcuda_comm_reduce_add_coalesced(const tcuda_dltensor_t *const *inputs, size_t ngpus, size_t ntensors,
                                             int destination, size_t buffer_size, DLManagedTensor **out) {
  const char *F = "tcuda_comm_reduce_add_coalesced";
  int engine = engine_now();
  size_t total = ngpus * ntensors;
  if (ngpus && total / ngpus != ntensors) return tc_error(TCUDA_ERROR_OVERFLOW, "%s: ngpus * ntensors overflows", F);
  if (total && !out) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: out is NULL", F);
  if (ngpus > TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %zu GPUs (at most %d)", F, ngpus, TC_MAX_DEVICES);
  if (destination < -1)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: destination %d is not a device (-1 is the current one)", F,
                    destination);
  tc_tensor *in = total ? malloc(total * sizeof *in) : NULL;
  if (total && !in) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  tcuda_status s = tc_tensors_from_dl(F, "inputs", (const DLTensor *const *)inputs, total, in);
  if (!s && total && destination == -1) s = tcuda_current_device(&destination);
  if (!s) s = tc_check_reduce_add_coalesced(F, in, ngpus, ntensors, destination);
  if (!s && total) s = tc_lazy_init(F);
  if (!s) s = check_tensor_devices(F, "input device", in, total);
  if (s || !total) { free(in); return s; }
  memset(out, 0, ntensors * sizeof *out);
  if (ngpus == 1) { /* reduce_add of one input returns it: views */
    for (size_t i = 0; i < ntensors && !s; i++) s = tc_comm_out(F, &in[i], NULL, &out[i]);
    if (s) tc_comm_release_all(out, ntensors);
    free(in);
    return s;
  }
  TC_ANNOTATE_BEGIN(F);
  int *keys = malloc(ntensors * sizeof *keys);
  uint64_t *bytes = malloc(ntensors * sizeof *bytes);
  size_t *bucket = malloc(ntensors * sizeof *bucket), *offset = malloc(ntensors * sizeof *offset);
  tc_copy_item *items = malloc(ntensors * sizeof *items);
  if (!keys || !bytes || !bucket || !offset || !items)
    s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  size_t nb = 0, root = 0;
  int devs[TC_MAX_DEVICES];
  const tc_tensor *heads[TC_MAX_DEVICES];
  for (size_t g = 0; g < ngpus; g++) {
    devs[g] = in[g * ntensors].device;
    heads[g] = &in[g * ntensors];
    if (devs[g] == destination) root = g;
  }
  if (!s) {
    for (size_t i = 0; i < ntensors; i++) {
      keys[i] = tc_dtype_rank(in[i].dtype);
      bytes[i] = (uint64_t)(in[i].numel * in[i].elem_size);
    }
    nb = tc_take_tensors(TC_TAKE_PY, keys, bytes, ntensors, buffer_size, bucket);
    if (nb == (size_t)-1) s = tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  }
  int nccl_ok = nccl_shape_ok(heads, ngpus);
  for (size_t b = 0; b < nb && !s; b++) {
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
    for (size_t g = 0; g < ngpus && !s; g++) {
      const tc_tensor *row = in + g * ntensors;
      if (members == 1 && tc_tensor_contiguous(&row[first])) {
        ptrs[g] = row[first].data;
        continue;
      }
      tcuda_stream_t strm = tc_comm_cur(devs[g]);
      s = tc_comm_dev_alloc(F, &flat[g], count * es, devs[g], strm);
      size_t ni = 0;
      for (size_t i = 0; i < ntensors && !s; i++) {
        if (bucket[i] != b) continue;
        char *dst = (char *)flat[g] + offset[i] * es;
        if (tc_tensor_contiguous(&row[i])) items[ni++] = (tc_copy_item){row[i].data, dst, bytes[i]};
        else {
          tc_tensor c = tc_comm_contig_like(&row[i], dst, devs[g]);
          s = tc_comm_copy_view(F, &c, strm, &row[i], strm);
        }
      }
      if (!s) s = tc_comm_multicopy(F, items, ni, strm);
      ptrs[g] = flat[g];
    }
    void *res = NULL;
    tc_buf *owner = NULL;
    if (!s) s = tc_comm_dev_alloc(F, &res, count * es, destination, tc_comm_cur(destination));
    if (!s) s = tc_comm_buf_wrap(F, res, 0, &owner);
    if (!s && count) s = tc_comm_reduce_flat(F, engine, ngpus, devs, ptrs, root, count, dt, res, nccl_ok);
    for (size_t i = 0; i < ntensors && !s; i++) {
      if (bucket[i] != b) continue;
      tc_tensor v = tc_comm_contig_like(&in[i], (char *)res + offset[i] * es, destination);
      s = tc_comm_out(F, &v, owner, &out[i]);
    }
    tc_comm_buf_unref(owner);
    for (size_t g = 0; g < ngpus; g++) tc_comm_dev_free(flat[g]);
  }
  if (s) tc_comm_release_all(out, ntensors);
  free(keys);
  free(bytes);
  free(bucket);
  free(offset);
  free(items);
  free(in);
  TC_ANNOTATE_END();
  return s;
}

/* ---------------------------------------------------------------------
 * scatter
 * --------------------------------------------------------------------- */
static tcuda_status check_user_stream(const char *F, const tcuda_stream_t *const *streams, size_t i, int device) {
  if (!streams || !streams[i]) return TCUDA_SUCCESS;
  return tc_check_scatter_stream(F, i, streams[i]->device, device);
}

tcuda_status tcuda_comm_scatter(const tcuda_dltensor_t *tensor, const int *devices, size_t ndevices,
                                const int64_t *chunk_sizes, size_t nchunk_sizes, int64_t dim,
                                const tcuda_stream_t *const *streams, DLManagedTensor **out, size_t *nout) {
  const char *F = "tcuda_comm_scatter";
  tc_tensor src;
  int wdim;
  size_t nchunks = 0;
  TC_CHECK_ARG(F, out, "out");
  TC_CHECK_ARG(F, nout, "nout");
  tcuda_status s = tc_tensor_from_dl(F, "tensor", (size_t)-1, (const DLTensor *)tensor, &src);
  if (s) return s;
  if (ndevices && !devices) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: devices is NULL", F);
  int64_t *sizes = malloc((ndevices ? ndevices : 1) * sizeof *sizes);
  if (!sizes) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  s = tc_plan_scatter(F, &src, ndevices, chunk_sizes, nchunk_sizes, dim, &wdim, sizes, &nchunks);
  for (size_t i = 0; i < nchunks && !s; i++) {
    if (src.on_gpu && devices[i] == src.device) continue;
    s = check_user_stream(F, streams, i, devices[i]);
    if (!s && devices[i] < 0)
      s = tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: Expected non-negative device index, but got %d", F, devices[i]);
  }
  if (!s) s = tc_lazy_init(F);
  if (!s) s = check_tensor_devices(F, "tensor device", &src, 1);
  for (size_t i = 0; i < nchunks && !s; i++) {
    s = check_device(F, "device", devices[i]);
    if (!s && streams && streams[i] && !(src.on_gpu && devices[i] == src.device))
      s = tc_stream_check(F, "streams[i]", *streams[i]);
  }
  if (s) { free(sizes); return s; }
  TC_ANNOTATE_BEGIN(F);
  memset(out, 0, nchunks * sizeof *out);
  int64_t start = 0;
  for (size_t i = 0; i < nchunks && !s; i++) {
    tc_tensor chunk;
    tc_tensor_narrow(&src, wdim, start, sizes[i], &chunk);
    start += sizes[i];
    int d = devices[i];
    if (src.on_gpu && d == src.device) {
      s = tc_comm_out(F, &chunk, NULL, &out[i]);
      continue;
    }
    tcuda_stream_t ds = streams && streams[i] ? *streams[i] : tc_comm_cur(d);
    /* memory_format=Preserve: a dense chunk keeps its strides */
    tc_tensor dst = chunk;
    if (!tc_tensor_dense(&chunk)) tc_contiguous_strides(chunk.ndim, chunk.shape, dst.strides);
    void *p = NULL;
    tc_buf *b = NULL;
    s = tc_comm_dev_alloc(F, &p, (size_t)(chunk.numel * chunk.elem_size), d, ds);
    if (!s) s = tc_comm_buf_wrap(F, p, 0, &b);
    if (s) break;
    dst.data = p;
    dst.on_gpu = 1;
    dst.device = d;
    dst.dev_type = TC_DL_CUDA;
    s = tc_comm_copy_view(F, &dst, ds, &chunk, src.on_gpu ? tc_comm_cur(src.device) : ds);
    if (!s) s = tc_comm_out(F, &dst, b, &out[i]);
    tc_comm_buf_unref(b);
  }
  if (s) tc_comm_release_all(out, nchunks);
  else *nout = nchunks;
  free(sizes);
  TC_ANNOTATE_END();
  return s;
}

tcuda_status tcuda_comm_scatter_out(const tcuda_dltensor_t *tensor, const tcuda_dltensor_t *const *out, size_t nout,
                                    int64_t dim, const tcuda_stream_t *const *streams) {
  const char *F = "tcuda_comm_scatter_out";
  tc_tensor src, *outs = NULL;
  int wdim;
  tcuda_status s = tc_tensor_from_dl(F, "tensor", (size_t)-1, (const DLTensor *)tensor, &src);
  if (s) return s;
  if (nout && !(outs = malloc(nout * sizeof *outs)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  s = tc_tensors_from_dl(F, "out", (const DLTensor *const *)out, nout, outs);
  if (!s) s = tc_plan_scatter_out(F, &src, outs, nout, dim, &wdim);
  for (size_t i = 0; i < nout && !s; i++) s = check_user_stream(F, streams, i, outs[i].device);
  if (!s) s = tc_lazy_init(F);
  if (!s) s = check_tensor_devices(F, "tensor device", &src, 1);
  if (!s) s = check_tensor_devices(F, "output device", outs, nout);
  for (size_t i = 0; i < nout && !s; i++)
    if (streams && streams[i]) s = tc_stream_check(F, "streams[i]", *streams[i]);
  if (s) { free(outs); return s; }
  TC_ANNOTATE_BEGIN(F);
  int64_t start = 0;
  for (size_t i = 0; i < nout && !s; i++) {
    tc_tensor chunk;
    tc_tensor_narrow(&src, wdim, start, outs[i].shape[wdim], &chunk);
    start += outs[i].shape[wdim];
    tcuda_stream_t ds = streams && streams[i] ? *streams[i] : tc_comm_cur(outs[i].device);
    s = tc_comm_copy_view(F, &outs[i], ds, &chunk, src.on_gpu ? tc_comm_cur(src.device) : ds);
  }
  free(outs);
  TC_ANNOTATE_END();
  return s;
}

/* ---------------------------------------------------------------------
 * gather
 * --------------------------------------------------------------------- */
static tcuda_status gather_into(const char *F, const tc_tensor *ts, size_t n, int wdim, const tc_tensor *res) {
  tcuda_status s = TCUDA_SUCCESS;
  int64_t start = 0;
  for (size_t i = 0; i < n && !s; i++) {
    tc_tensor slice;
    tc_tensor_narrow(res, wdim, start, ts[i].shape[wdim], &slice);
    start += ts[i].shape[wdim];
    tcuda_stream_t ss = tc_comm_cur(ts[i].device);
    s = tc_comm_copy_view(F, &slice, res->on_gpu ? tc_comm_cur(res->device) : ss, &ts[i], ss);
  }
  /* a host result is complete on return, as PyTorch's blocking copy */
  for (size_t i = 0; i < n && !s && !res->on_gpu; i++) {
    int dup = 0;
    for (size_t j = 0; j < i; j++)
      if (ts[j].device == ts[i].device) dup = 1;
    if (!dup) s = tc_comm_sync(F, tc_comm_cur(ts[i].device));
  }
  return s;
}

static tcuda_status gather_prepare(const char *F, const tcuda_dltensor_t *const *tensors, size_t n, int64_t dim,
                                   tc_tensor **ts, int *wdim, int64_t *shape) {
  *ts = NULL;
  if (n && !(*ts = malloc(n * sizeof **ts)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  tcuda_status s = tc_tensors_from_dl(F, "tensors", (const DLTensor *const *)tensors, n, *ts);
  if (!s) s = tc_plan_gather(F, *ts, n, dim, wdim, shape);
  if (s) { free(*ts); *ts = NULL; }
  return s;
}

tcuda_status tcuda_comm_gather(const tcuda_dltensor_t *const *tensors, size_t ntensors, int64_t dim, int destination,
                               DLManagedTensor **out) {
  const char *F = "tcuda_comm_gather";
  TC_CHECK_ARG(F, out, "out");
  tc_tensor *ts;
  int wdim;
  int64_t shape[TC_COMM_MAX_DIMS];
  if (destination < TCUDA_COMM_HOST)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE,
                    "%s: destination %d is not a device (-1: current device, TCUDA_COMM_HOST: host)", F, destination);
  tcuda_status s = gather_prepare(F, tensors, ntensors, dim, &ts, &wdim, shape);
  if (s) return s;
  s = tc_lazy_init(F);
  if (!s && destination == -1) s = tcuda_current_device(&destination);
  if (!s && destination >= 0) s = check_device(F, "destination", destination);
  if (!s) s = check_tensor_devices(F, "input device", ts, ntensors);
  if (s) { free(ts); return s; }
  *out = NULL;
  TC_ANNOTATE_BEGIN(F);
  tc_tensor res = ts[0];
  memcpy(res.shape, shape, sizeof shape);
  res.numel = 1;
  for (int k = 0; k < res.ndim; k++) res.numel *= shape[k];
  size_t bytes = (size_t)(res.numel * res.elem_size);
  int host = destination == TCUDA_COMM_HOST;
  void *p = NULL;
  tc_buf *b = NULL;
  s = host ? tcuda_host_alloc(&p, bytes) : tc_comm_dev_alloc(F, &p, bytes, destination, tc_comm_cur(destination));
  if (!s) s = tc_comm_buf_wrap(F, p, host, &b);
  if (!s) {
    res = tc_comm_contig_like(&res, p, host ? -1 : destination);
    s = gather_into(F, ts, ntensors, wdim, &res);
  }
  if (!s) s = tc_comm_out(F, &res, b, out);
  tc_comm_buf_unref(b);
  free(ts);
  TC_ANNOTATE_END();
  return s;
}

tcuda_status tcuda_comm_gather_out(const tcuda_dltensor_t *const *tensors, size_t ntensors, int64_t dim,
                                   const tcuda_dltensor_t *out) {
  const char *F = "tcuda_comm_gather_out";
  tc_tensor *ts, res;
  int wdim;
  int64_t shape[TC_COMM_MAX_DIMS];
  char a[512], b[512];
  tcuda_status s = gather_prepare(F, tensors, ntensors, dim, &ts, &wdim, shape);
  if (s) return s;
  s = tc_tensor_from_dl(F, "out", (size_t)-1, (const DLTensor *)out, &res);
  if (!s) {
    int ok = res.ndim == ts[0].ndim;
    for (int k = 0; ok && k < res.ndim; k++) ok = res.shape[k] == shape[k];
    if (!ok)
      s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: Expected out tensor to have shape %s, but got %s", F,
                   tc_shape_str(a, sizeof a, ts[0].ndim, shape), tc_shape_str(b, sizeof b, res.ndim, res.shape));
    else if (!tc_dtype_eq(res.dtype, ts[0].dtype))
      s = tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: out has dtype %s but the inputs are %s (tcuda does not convert "
                   "dtypes)", F, tc_dtype_name(res.dtype), tc_dtype_name(ts[0].dtype));
  }
  if (!s) s = tc_lazy_init(F);
  if (!s) s = check_tensor_devices(F, "input device", ts, ntensors);
  if (!s) s = check_tensor_devices(F, "out device", &res, 1);
  if (!s) {
    TC_ANNOTATE_BEGIN(F);
    s = gather_into(F, ts, ntensors, wdim, &res);
    TC_ANNOTATE_END();
  }
  free(ts);
  return s;
}
