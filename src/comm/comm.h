/* Internal API of the comm layer. The pure parts (tensor description,
 * validation with PyTorch's messages, bucketing, chunk and shape
 * arithmetic) are plain C in plan.c, so CPU tests call them directly. */
#ifndef TC_COMM_H
#define TC_COMM_H
#include "comm/dlpack_compat.h"
#include "core/error.h"
#include <stddef.h>
#include <stdint.h>

/* TensorIterator's limit in PyTorch; DLTensors with more dims are refused. */
#define TC_COMM_MAX_DIMS 25

/* A DLTensor, checked and normalised: strides filled in, byte_offset
 * folded into data, sizes in elements. */
typedef struct tc_tensor {
  char *data;
  int ndim;
  int64_t shape[TC_COMM_MAX_DIMS];
  int64_t strides[TC_COMM_MAX_DIMS];
  DLDataType dtype;
  int64_t elem_size; /* bytes */
  int64_t numel;
  int dev_type;      /* TC_DL_* */
  int on_gpu;        /* CUDA or CUDA-managed memory */
  int device;        /* CUDA device id, -1 for host memory */
} tc_tensor;

/* Bytes per element (lanes must be 1), or 0 for a dtype comm does not move. */
int64_t tc_dtype_size(DLDataType dt);
/* PyTorch's ScalarType name ("Float", "BFloat16", ...). */
const char *tc_dtype_name(DLDataType dt);
/* complex -> its real type (what PyTorch's _handle_complex views it as). */
DLDataType tc_dtype_real(DLDataType dt);
/* Position in c10's ScalarType enum of the real type: the key by which
 * take_tensors groups and orders its leftover buckets. */
int tc_dtype_rank(DLDataType dt);
int tc_dtype_eq(DLDataType a, DLDataType b);

/* Check and normalise t; errors name F and "what[index]" (or "what"
 * when index is (size_t)-1). */
tcuda_status tc_tensor_from_dl(const char *F, const char *what, size_t index, const DLTensor *t,
                               tc_tensor *out);
/* Same, for a list: NULL list or entry is an error. */
tcuda_status tc_tensors_from_dl(const char *F, const char *what, const DLTensor *const *ts, size_t n,
                                tc_tensor *out);

/* "[2, 3]" (PyTorch's IntArrayRef printing) into buf; returns buf. */
char *tc_shape_str(char *buf, size_t size, int ndim, const int64_t *shape);
/* "2x3" (reduce_add's message format); returns buf. */
char *tc_shape_x(char *buf, size_t size, int ndim, const int64_t *shape);
int tc_shape_eq(const tc_tensor *a, const tc_tensor *b);
/* PyTorch's is_contiguous (size-1 dims ignored, empty is contiguous). */
int tc_tensor_contiguous(const tc_tensor *t);
/* Non-overlapping and dense: a permutation of a contiguous layout, so its
 * numel elements fill [data, data + numel*elem_size). */
int tc_tensor_dense(const tc_tensor *t);
/* Contiguous strides for a shape. */
void tc_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* View of t narrowed along dim to [start, start+len). */
void tc_tensor_narrow(const tc_tensor *t, int dim, int64_t start, int64_t len, tc_tensor *out);

/* maybe_wrap_dim: dim in [-max(ndim,1), max(ndim,1)); error otherwise with
 * PyTorch's "Dimension out of range" message. */
tcuda_status tc_wrap_dim(const char *F, int64_t dim, int ndim, int *out);

/* torch.chunk(n) along a dim of size `size`: writes the chunk sizes, returns
 * how many (may be fewer than n, at least 1). sizes has room for n. */
size_t tc_chunk_sizes(int64_t size, size_t n, int64_t *sizes);
/* split_with_sizes checks: entries >= 0 and summing to size. */
tcuda_status tc_check_split(const char *F, const int64_t *sizes, size_t n, int64_t size, int dim);

/* Bucketing. keys[i] is the type key (tc_dtype_rank), bytes[i] the size.
 * TC_TAKE_CPP: PyTorch's C++ take_tensors (broadcast_coalesced),
 * non-fine-grained (add, then emit the type's group once it is >= limit;
 * leftovers in key order). TC_TAKE_PY: PyTorch's Python _take_tensors
 * (reduce_add_coalesced; emit the group before adding a tensor that would
 * push it over the limit, unless empty; leftovers in order of the key's
 * first appearance).
 * bucket_of[i] receives the bucket of tensor i; buckets are numbered in
 * the order they are emitted and keep input order inside. Returns the
 * bucket count, or (size_t)-1 when out of memory. */
enum { TC_TAKE_CPP = 0, TC_TAKE_PY = 1 };
size_t tc_take_tensors(int mode, const int *keys, const uint64_t *bytes, size_t n, uint64_t limit,
                       size_t *bucket_of);

/* ---- per-operation validation (pure; devices are range-checked later,
 * after CUDA is initialised) ---- */
tcuda_status tc_check_device_list(const char *F, const int *devices, size_t n);
tcuda_status tc_check_broadcast_out(const char *F, const tc_tensor *src, const tc_tensor *outs, size_t n);
tcuda_status tc_check_broadcast_coalesced(const char *F, const tc_tensor *ts, size_t n, const int *devices,
                                          size_t ndev);
/* *root receives the index PyTorch reduces into (the last input on
 * destination). */
tcuda_status tc_check_reduce_add(const char *F, const tc_tensor *in, size_t n, int destination, size_t *root);
/* inputs are [ngpus][ntensors] row-major. */
tcuda_status tc_check_reduce_add_coalesced(const char *F, const tc_tensor *in, size_t ngpus, size_t ntensors,
                                           int destination);
/* Chunks the scatter makes: sizes (room for ndev) and count; dim wrapped. */
tcuda_status tc_plan_scatter(const char *F, const tc_tensor *src, size_t ndev, const int64_t *chunk_sizes,
                             size_t nchunk_sizes, int64_t dim, int *wdim, int64_t *sizes, size_t *nchunks);
tcuda_status tc_plan_scatter_out(const char *F, const tc_tensor *src, const tc_tensor *outs, size_t n,
                                 int64_t dim, int *wdim);
/* stream_devices[i] < -1 means "no stream given at i". */
tcuda_status tc_check_scatter_stream(const char *F, size_t i, int stream_device, int device);
/* Output shape of a gather: writes shape (ndim of the first input). */
tcuda_status tc_plan_gather(const char *F, const tc_tensor *ts, size_t n, int64_t dim, int *wdim,
                            int64_t *shape);

/* Tests: off = 1 makes the engines treat every pair of distinct GPUs as
 * without peer access, so that machines with it also run the paths of
 * those without (copy engines and staging instead of peer kernels). */
void tc_comm_test_peer_off(int off);
#endif
