/* The pure half of the comm layer: tensor checks, PyTorch's validation
 * messages, bucketing, chunk and shape arithmetic. No CUDA here, so CPU
 * tests exercise every rule. */
#include "comm/comm.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int64_t tc_dtype_size(DLDataType dt) {
  if (dt.lanes != 1) return 0;
  switch (dt.code) {
  case TC_DL_INT:
  case TC_DL_UINT:
    return (dt.bits == 8 || dt.bits == 16 || dt.bits == 32 || dt.bits == 64) ? dt.bits / 8 : 0;
  case TC_DL_FLOAT:
    return (dt.bits == 16 || dt.bits == 32 || dt.bits == 64) ? dt.bits / 8 : 0;
  case TC_DL_BFLOAT:
    return dt.bits == 16 ? 2 : 0;
  case TC_DL_COMPLEX:
    return (dt.bits == 32 || dt.bits == 64 || dt.bits == 128) ? dt.bits / 8 : 0;
  case TC_DL_BOOL:
    return dt.bits == 8 ? 1 : 0;
  default:
    /* fp8 formats (dlpack 1.1, codes 7..14): bytes to move, never summed */
    return (dt.code >= TC_DL_FLOAT8_FIRST && dt.code <= 14 && dt.bits == 8) ? 1 : 0;
  }
}

int tc_dtype_eq(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

DLDataType tc_dtype_real(DLDataType dt) {
  if (dt.code == TC_DL_COMPLEX) {
    dt.code = TC_DL_FLOAT;
    dt.bits /= 2;
  }
  return dt;
}

const char *tc_dtype_name(DLDataType dt) {
  switch (dt.code) {
  case TC_DL_INT:
    return dt.bits == 8 ? "Char" : dt.bits == 16 ? "Short" : dt.bits == 32 ? "Int" : "Long";
  case TC_DL_UINT:
    return dt.bits == 8 ? "Byte" : dt.bits == 16 ? "UInt16" : dt.bits == 32 ? "UInt32" : "UInt64";
  case TC_DL_FLOAT:
    return dt.bits == 16 ? "Half" : dt.bits == 32 ? "Float" : "Double";
  case TC_DL_BFLOAT: return "BFloat16";
  case TC_DL_COMPLEX:
    return dt.bits == 32 ? "ComplexHalf" : dt.bits == 64 ? "ComplexFloat" : "ComplexDouble";
  case TC_DL_BOOL: return "Bool";
  case 10: return "Float8_e4m3fn";
  case 11: return "Float8_e4m3fnuz";
  case 12: return "Float8_e5m2";
  case 13: return "Float8_e5m2fnuz";
  case 14: return "Float8_e8m0fnu";
  default: return "Float8";
  }
}

int tc_dtype_rank(DLDataType dt) {
  dt = tc_dtype_real(dt);
  switch (dt.code) {
  case TC_DL_INT: return dt.bits == 8 ? 1 : dt.bits == 16 ? 2 : dt.bits == 32 ? 3 : 4;
  case TC_DL_UINT: return dt.bits == 8 ? 0 : dt.bits == 16 ? 27 : dt.bits == 32 ? 28 : 29;
  case TC_DL_FLOAT: return dt.bits == 16 ? 5 : dt.bits == 32 ? 6 : 7;
  case TC_DL_BFLOAT: return 15;
  case TC_DL_BOOL: return 11;
  case 10: return 24;
  case 11: return 26;
  case 12: return 23;
  case 13: return 25;
  case 14: return 44;
  default: return 45 + dt.code; /* fp8 codes 7..9, which torch does not have */
  }
}

static const char *idx_name(char *buf, size_t size, const char *what, size_t index) {
  if (index == (size_t)-1) snprintf(buf, size, "%s", what);
  else snprintf(buf, size, "%s[%zu]", what, index);
  return buf;
}

tcuda_status tc_tensor_from_dl(const char *F, const char *what, size_t index, const DLTensor *t,
                               tc_tensor *out) {
  char nm[96];
  if (!t)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", F, idx_name(nm, sizeof nm, what, index));
  if (t->ndim < 0 || t->ndim > TC_COMM_MAX_DIMS)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s has ndim %d (tcuda supports 0 to %d)", F,
                    idx_name(nm, sizeof nm, what, index), (int)t->ndim, TC_COMM_MAX_DIMS);
  if (t->ndim > 0 && !t->shape)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s has ndim %d but shape is NULL", F,
                    idx_name(nm, sizeof nm, what, index), (int)t->ndim);
  int64_t es = tc_dtype_size(t->dtype);
  if (!es)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: %s has unsupported dtype (code %u, bits %u, lanes %u)", F,
                    idx_name(nm, sizeof nm, what, index), t->dtype.code, t->dtype.bits, t->dtype.lanes);
  int dt = (int)t->device.device_type;
  if (dt != TC_DL_CPU && dt != TC_DL_CUDA && dt != TC_DL_CUDA_HOST && dt != TC_DL_CUDA_MANAGED)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: %s has unsupported DLPack device type %d", F,
                    idx_name(nm, sizeof nm, what, index), dt);
  int on_gpu = dt == TC_DL_CUDA || dt == TC_DL_CUDA_MANAGED;
  if (on_gpu && t->device.device_id < 0)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: %s has device id %d", F,
                    idx_name(nm, sizeof nm, what, index), (int)t->device.device_id);
  int64_t numel = 1;
  for (int k = 0; k < t->ndim; k++) {
    if (t->shape[k] < 0)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s has negative size %lld at dim %d", F,
                      idx_name(nm, sizeof nm, what, index), (long long)t->shape[k], k);
    if (t->shape[k] && numel > INT64_MAX / es / t->shape[k])
      return tc_error(TCUDA_ERROR_OVERFLOW, "%s: %s is too large", F, idx_name(nm, sizeof nm, what, index));
    numel *= t->shape[k];
  }
  if (!t->data && numel > 0)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s has NULL data and %lld elements", F,
                    idx_name(nm, sizeof nm, what, index), (long long)numel);
  memset(out, 0, sizeof *out);
  out->data = (char *)t->data + t->byte_offset;
  out->ndim = t->ndim;
  for (int k = 0; k < t->ndim; k++) out->shape[k] = t->shape[k];
  if (t->strides)
    for (int k = 0; k < t->ndim; k++) out->strides[k] = t->strides[k];
  else
    tc_contiguous_strides(t->ndim, out->shape, out->strides);
  out->dtype = t->dtype;
  out->elem_size = es;
  out->numel = numel;
  out->dev_type = dt;
  out->on_gpu = on_gpu;
  out->device = on_gpu ? t->device.device_id : -1;
  return TCUDA_SUCCESS;
}

tcuda_status tc_tensors_from_dl(const char *F, const char *what, const DLTensor *const *ts, size_t n,
                                tc_tensor *out) {
  if (n && !ts) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", F, what);
  for (size_t i = 0; i < n; i++) {
    tcuda_status s = tc_tensor_from_dl(F, what, i, ts[i], &out[i]);
    if (s) return s;
  }
  return TCUDA_SUCCESS;
}

void tc_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int k = ndim - 1; k >= 0; k--) {
    strides[k] = s;
    s *= shape[k] > 1 ? shape[k] : 1;
  }
}

char *tc_shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
  size_t o = 0;
  o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "[");
  for (int k = 0; k < ndim; k++)
    o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "%s%lld", k ? ", " : "", (long long)shape[k]);
  snprintf(buf + o, o < size ? size - o : 0, "]");
  return buf;
}

char *tc_shape_x(char *buf, size_t size, int ndim, const int64_t *shape) {
  size_t o = 0;
  buf[0] = 0;
  for (int k = 0; k < ndim; k++)
    o += (size_t)snprintf(buf + o, o < size ? size - o : 0, "%s%lld", k ? "x" : "", (long long)shape[k]);
  return buf;
}

int tc_shape_eq(const tc_tensor *a, const tc_tensor *b) {
  if (a->ndim != b->ndim) return 0;
  for (int k = 0; k < a->ndim; k++)
    if (a->shape[k] != b->shape[k]) return 0;
  return 1;
}

int tc_tensor_contiguous(const tc_tensor *t) {
  if (t->numel == 0) return 1;
  int64_t expect = 1;
  for (int k = t->ndim - 1; k >= 0; k--) {
    if (t->shape[k] == 1) continue;
    if (t->strides[k] != expect) return 0;
    expect *= t->shape[k];
  }
  return 1;
}

int tc_tensor_dense(const tc_tensor *t) {
  if (t->numel <= 1) return 1;
  int idx[TC_COMM_MAX_DIMS], m = 0;
  for (int k = 0; k < t->ndim; k++)
    if (t->shape[k] != 1) idx[m++] = k;
  /* insertion sort of the non-trivial dims by stride */
  for (int i = 1; i < m; i++)
    for (int j = i; j > 0 && t->strides[idx[j]] < t->strides[idx[j - 1]]; j--) {
      int x = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = x;
    }
  int64_t expect = 1;
  for (int i = 0; i < m; i++) {
    if (t->strides[idx[i]] != expect) return 0;
    expect *= t->shape[idx[i]];
  }
  return 1;
}

void tc_tensor_narrow(const tc_tensor *t, int dim, int64_t start, int64_t len, tc_tensor *out) {
  *out = *t;
  out->data = t->data + start * t->strides[dim] * t->elem_size;
  out->shape[dim] = len;
  out->numel = 1;
  for (int k = 0; k < t->ndim; k++) out->numel *= out->shape[k];
}

tcuda_status tc_wrap_dim(const char *F, int64_t dim, int ndim, int *out) {
  int64_t n = ndim > 0 ? ndim : 1;
  if (dim < -n || dim > n - 1)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)", F,
                    (long long)-n, (long long)(n - 1), (long long)dim);
  *out = (int)(dim < 0 ? dim + n : dim);
  return TCUDA_SUCCESS;
}

size_t tc_chunk_sizes(int64_t size, size_t n, int64_t *sizes) {
  int64_t split = (size + (int64_t)n - 1) / (int64_t)n;
  if (split == 0) { /* size 0: n empty chunks */
    for (size_t i = 0; i < n; i++) sizes[i] = 0;
    return n;
  }
  int64_t count = (size + split - 1) / split;
  if (count < 1) count = 1;
  for (int64_t i = 0; i < count; i++) sizes[i] = split;
  sizes[count - 1] = split - (split * count - size);
  return (size_t)count;
}

static char *sizes_str(char *buf, size_t size, const int64_t *v, size_t n) {
  size_t o = (size_t)snprintf(buf, size, "[");
  for (size_t i = 0; i < n && o < size; i++)
    o += (size_t)snprintf(buf + o, size - o, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (o < size) snprintf(buf + o, size - o, "]");
  return buf;
}

tcuda_status tc_check_split(const char *F, const int64_t *sizes, size_t n, int64_t size, int dim) {
  char b[512];
  int64_t sum = 0;
  for (size_t i = 0; i < n; i++) {
    if (sizes[i] < 0)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: split_with_sizes expects split_sizes have only non-negative entries, but got "
                      "split_sizes=%s", F, sizes_str(b, sizeof b, sizes, n));
    sum += sizes[i];
  }
  if (sum != size)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: split_with_sizes expects split_sizes to sum exactly to %lld (input tensor's size at "
                    "dimension %d), but got split_sizes=%s", F, (long long)size, dim,
                    sizes_str(b, sizeof b, sizes, n));
  return TCUDA_SUCCESS;
}

/* ---- bucketing ---- */
#define TC_MAX_KEYS 128
typedef struct {
  size_t head, tail, count;
  uint64_t size;
  int seen;
} tc_group;

static void emit(tc_group *g, size_t *next, size_t *bucket_of, size_t *nb) {
  for (size_t i = g->head; g->count && i != (size_t)-1; i = next[i]) bucket_of[i] = *nb;
  if (g->count) (*nb)++;
  g->head = g->tail = (size_t)-1;
  g->count = 0;
  g->size = 0;
}

size_t tc_take_tensors(int mode, const int *keys, const uint64_t *bytes, size_t n, uint64_t limit,
                       size_t *bucket_of) {
  tc_group g[TC_MAX_KEYS];
  int order[TC_MAX_KEYS], norder = 0;
  size_t *next = n ? malloc(n * sizeof *next) : NULL;
  if (n && !next) return (size_t)-1;
  for (int k = 0; k < TC_MAX_KEYS; k++) g[k] = (tc_group){(size_t)-1, (size_t)-1, 0, 0, 0};
  size_t nb = 0;
  for (size_t i = 0; i < n; i++) {
    int k = keys[i] < 0 ? 0 : keys[i] >= TC_MAX_KEYS ? TC_MAX_KEYS - 1 : keys[i];
    tc_group *gr = &g[k];
    if (!gr->seen) { gr->seen = 1; order[norder++] = k; }
    if (mode == TC_TAKE_PY && gr->size + bytes[i] > limit && gr->size > 0) emit(gr, next, bucket_of, &nb);
    next[i] = (size_t)-1;
    if (gr->count) next[gr->tail] = i;
    else gr->head = i;
    gr->tail = i;
    gr->count++;
    gr->size += bytes[i];
    if (mode == TC_TAKE_CPP && gr->size >= limit) emit(gr, next, bucket_of, &nb);
  }
  if (mode == TC_TAKE_CPP) {
    for (int k = 0; k < TC_MAX_KEYS; k++) emit(&g[k], next, bucket_of, &nb);
  } else {
    for (int j = 0; j < norder; j++) emit(&g[order[j]], next, bucket_of, &nb);
  }
  free(next);
  return nb;
}

/* ---- validation ---- */
static const char *dev_str(char *buf, size_t size, const tc_tensor *t) {
  if (t->on_gpu) snprintf(buf, size, "cuda:%d", t->device);
  else snprintf(buf, size, "cpu");
  return buf;
}

tcuda_status tc_check_device_list(const char *F, const int *devices, size_t n) {
  if (n && !devices) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: devices is NULL", F);
  for (size_t i = 0; i < n; i++)
    if (devices[i] < 0)
      return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: Expected non-negative device index, but got %d", F,
                      devices[i]);
  return TCUDA_SUCCESS;
}

tcuda_status tc_check_broadcast_out(const char *F, const tc_tensor *src, const tc_tensor *outs, size_t n) {
  char a[512], b[512], d[32];
  for (size_t i = 0; i < n; i++) {
    if (!outs[i].on_gpu)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: Expected all output tensors to be CUDA tensors, but output tensor at index %zu has "
                      "device '%s'", F, i, dev_str(d, sizeof d, &outs[i]));
    if (!tc_shape_eq(&outs[i], src))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: Expected all output tensors to have same shape as the source tensor %s, but output "
                      "tensor at index %zu has shape %s", F, tc_shape_str(a, sizeof a, src->ndim, src->shape),
                      i, tc_shape_str(b, sizeof b, outs[i].ndim, outs[i].shape));
    if (!tc_dtype_eq(outs[i].dtype, src->dtype))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: Expected all output tensors to have the same dtype as the source tensor %s, but output "
                      "tensor at index %zu has dtype %s (tcuda does not convert dtypes)", F,
                      tc_dtype_name(src->dtype), i, tc_dtype_name(outs[i].dtype));
  }
  return TCUDA_SUCCESS;
}

tcuda_status tc_check_broadcast_coalesced(const char *F, const tc_tensor *ts, size_t n, const int *devices,
                                          size_t ndev) {
  if (ndev == 0) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: devices is empty (devices[0] is the source)", F);
  tcuda_status s = tc_check_device_list(F, devices, ndev);
  if (s) return s;
  for (size_t i = 0; i < n; i++)
    if (!ts[i].on_gpu || ts[i].device != devices[0])
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: All tensors must be on devices[0]: %d", F, devices[0]);
  return TCUDA_SUCCESS;
}

tcuda_status tc_check_reduce_add(const char *F, const tc_tensor *in, size_t n, int destination, size_t *root) {
  char a[512], b[512];
  if (n == 0) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: reduce_add expects at least one input", F);
  size_t r = (size_t)-1;
  for (size_t i = 0; i < n; i++) {
    if (!in[i].on_gpu)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: reduce_add expects all inputs to be on GPUs", F);
    if (in[i].device == destination) r = i;
    if (!tc_shape_eq(&in[i], &in[0]))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: input %zu has invalid size: got %s, but expected %s", F,
                      i, tc_shape_x(a, sizeof a, in[i].ndim, in[i].shape),
                      tc_shape_x(b, sizeof b, in[0].ndim, in[0].shape));
    if (!tc_dtype_eq(in[i].dtype, in[0].dtype))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: all inputs and outputs must be of the same Tensor dtype (input %zu is %s, input 0 is %s)",
                      F, i, tc_dtype_name(in[i].dtype), tc_dtype_name(in[0].dtype));
  }
  if (r == (size_t)-1)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: reduce_add expects destination to be on the same GPU with one of the tensors", F);
  if (root) *root = r;
  return TCUDA_SUCCESS;
}

tcuda_status tc_check_reduce_add_coalesced(const char *F, const tc_tensor *in, size_t ngpus, size_t ntensors,
                                           int destination) {
  char a[512], b[512];
  if (!ngpus || !ntensors) return TCUDA_SUCCESS;
  int found = 0;
  for (size_t g = 0; g < ngpus; g++) {
    const tc_tensor *row = in + g * ntensors;
    for (size_t i = 0; i < ntensors; i++) {
      const tc_tensor *t = &row[i], *ref = &in[i];
      if (!t->on_gpu)
        return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: reduce_add expects all inputs to be on GPUs", F);
      if (t->device != row[0].device)
        return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                        "%s: Expected all tensors to be on the same device, but found at least two devices, "
                        "cuda:%d and cuda:%d! (inputs[%zu])", F, row[0].device, t->device, g);
      if (!tc_shape_eq(t, ref))
        return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: inputs[%zu][%zu] has invalid size: got %s, but expected %s",
                        F, g, i, tc_shape_x(a, sizeof a, t->ndim, t->shape),
                        tc_shape_x(b, sizeof b, ref->ndim, ref->shape));
      if (!tc_dtype_eq(t->dtype, ref->dtype))
        return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                        "%s: all inputs and outputs must be of the same Tensor dtype (inputs[%zu][%zu] is %s, "
                        "inputs[0][%zu] is %s)", F, g, i, tc_dtype_name(t->dtype), i, tc_dtype_name(ref->dtype));
    }
    if (row[0].device == destination) found = 1;
  }
  if (!found)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: reduce_add expects destination to be on the same GPU with one of the tensors", F);
  return TCUDA_SUCCESS;
}

tcuda_status tc_plan_scatter(const char *F, const tc_tensor *src, size_t ndev, const int64_t *chunk_sizes,
                             size_t nchunk_sizes, int64_t dim, int *wdim, int64_t *sizes, size_t *nchunks) {
  if (ndev == 0) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: Expected at least one device to scatter to", F);
  if (chunk_sizes && nchunk_sizes != ndev)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: Expected devices and chunk_sizes to be of same length, but got len(devices) = %zu and "
                    "len(chunk_sizes) = %zu", F, ndev, nchunk_sizes);
  tcuda_status s = tc_wrap_dim(F, dim, src->ndim, wdim);
  if (s) return s;
  if (src->ndim == 0)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s expects at least a 1-dimensional tensor", F,
                    chunk_sizes ? "split_with_sizes" : "chunk");
  if (chunk_sizes) {
    s = tc_check_split(F, chunk_sizes, ndev, src->shape[*wdim], *wdim);
    if (s) return s;
    memcpy(sizes, chunk_sizes, ndev * sizeof *sizes);
    *nchunks = ndev;
  } else {
    *nchunks = tc_chunk_sizes(src->shape[*wdim], ndev, sizes);
  }
  return TCUDA_SUCCESS;
}

tcuda_status tc_plan_scatter_out(const char *F, const tc_tensor *src, const tc_tensor *outs, size_t n,
                                 int64_t dim, int *wdim) {
  char a[512], b[512], d[32];
  if (n == 0)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: Expected at least one output tensor to scatter to", F);
  tcuda_status s = tc_wrap_dim(F, dim, src->ndim, wdim);
  if (s) return s;
  if (src->ndim == 0)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: split_with_sizes expects at least a 1-dimensional tensor",
                    F);
  int w = *wdim;
  int64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    const tc_tensor *o = &outs[i];
    if (!o->on_gpu)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: Expected all output tensors to be CUDA tensors, but output tensor at index %zu has "
                      "device '%s'", F, i, dev_str(d, sizeof d, o));
    int ok = o->ndim == src->ndim;
    for (int k = 0; ok && k < o->ndim; k++)
      if (k != w && o->shape[k] != src->shape[k]) ok = 0;
    if (!ok)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: Output tensor at index %zu has incorrect shape: %s. Expected same shape except for "
                      "scatter dim %d as the source tensor: %s", F, i, tc_shape_str(a, sizeof a, o->ndim, o->shape),
                      w, tc_shape_str(b, sizeof b, src->ndim, src->shape));
    if (!tc_dtype_eq(o->dtype, src->dtype))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: Output tensor at index %zu has dtype %s but the source tensor is %s (tcuda does not "
                      "convert dtypes)", F, i, tc_dtype_name(o->dtype), tc_dtype_name(src->dtype));
    total += o->shape[w];
  }
  if (total != src->shape[w])
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: Total size for output tensors along scatter dim %d does not match the source tensor size at "
                    "dim %d. Expected %lld, but got total size %lld", F, w, w, (long long)src->shape[w],
                    (long long)total);
  return TCUDA_SUCCESS;
}

tcuda_status tc_check_scatter_stream(const char *F, size_t i, int stream_device, int device) {
  if (stream_device != device)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: Expected the device associated with the stream at index %zu (was %d) to match the device "
                    "supplied at that index (expected %d)", F, i, stream_device, device);
  return TCUDA_SUCCESS;
}

tcuda_status tc_plan_gather(const char *F, const tc_tensor *ts, size_t n, int64_t dim, int *wdim,
                            int64_t *shape) {
  char a[512], b[512], d[32];
  if (n == 0) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: Expected at least one tensor to gather from", F);
  tcuda_status s = tc_wrap_dim(F, dim, ts[0].ndim, wdim);
  if (s) return s;
  if (ts[0].ndim == 0)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: dimension specified as %d but tensor has no dimensions", F,
                    *wdim);
  int w = *wdim, nd = ts[0].ndim;
  int64_t expect[TC_COMM_MAX_DIMS], total = 0;
  memcpy(expect, ts[0].shape, (size_t)nd * sizeof *expect);
  for (size_t i = 0; i < n; i++) {
    const tc_tensor *t = &ts[i];
    if (!t->on_gpu)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: Expected all input tensors to be CUDA tensors, but tensor at index %zu has device %s", F,
                      i, dev_str(d, sizeof d, t));
    if (t->ndim != nd)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: Expected all input tensors to have the same number of dimensions, but tensor at index %zu "
                      "has %d dimensions, (expected %d)", F, i, t->ndim, nd);
    expect[w] = t->shape[w];
    for (int k = 0; k < nd; k++)
      if (expect[k] != t->shape[k])
        return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: Input tensor at index %zu has invalid shape %s, but expected %s",
                        F, i, tc_shape_str(a, sizeof a, nd, t->shape), tc_shape_str(b, sizeof b, nd, expect));
    if (!tc_dtype_eq(t->dtype, ts[0].dtype))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: Input tensor at index %zu has dtype %s but tensor 0 has %s (tcuda does not convert dtypes)",
                      F, i, tc_dtype_name(t->dtype), tc_dtype_name(ts[0].dtype));
    total += t->shape[w];
  }
  memcpy(shape, ts[0].shape, (size_t)nd * sizeof *shape);
  shape[w] = total;
  return TCUDA_SUCCESS;
}
