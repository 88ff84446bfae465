/* comm's memory and output tensors: allocations from the caching
 * allocators, shared by the outputs of one bucket, handed out as
 * DLManagedTensors. */
#include "comm/comm_impl.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

tcuda_status tc_comm_dev_alloc(const char *F, void **p, size_t bytes, int dev, tcuda_stream_t strm) {
  (void)F;
  *p = NULL;
  if (!bytes) return TCUDA_SUCCESS;
  return tcuda_malloc_on(p, bytes, dev, strm);
}
void tc_comm_dev_free(void *p) {
  if (p) (void)tcuda_free(p);
}

struct tc_buf {
  atomic_int refs;
  void *ptr;
  int host;
};

static tc_buf *buf_new(void *ptr, int host) {
  tc_buf *b = malloc(sizeof *b);
  if (!b) return NULL;
  atomic_init(&b->refs, 1);
  b->ptr = ptr;
  b->host = host;
  return b;
}
void tc_comm_buf_unref(tc_buf *b) {
  if (!b || atomic_fetch_sub(&b->refs, 1) != 1) return;
  if (b->host) (void)tcuda_host_free(b->ptr);
  else tc_comm_dev_free(b->ptr);
  free(b);
}
/* Wrap a fresh allocation; on failure the memory is freed here. */
tcuda_status tc_comm_buf_wrap(const char *F, void *ptr, int host, tc_buf **out) {
  *out = buf_new(ptr, host);
  if (*out) return TCUDA_SUCCESS;
  if (host) (void)tcuda_host_free(ptr);
  else tc_comm_dev_free(ptr);
  return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
}

typedef struct tc_mt {
  DLManagedTensor m;
  tc_buf *buf; /* NULL: a view of a caller's tensor */
  int64_t dims[2 * TC_COMM_MAX_DIMS];
} tc_mt;

static void mt_delete(DLManagedTensor *m) {
  tc_mt *t = (tc_mt *)m->manager_ctx;
  tc_comm_buf_unref(t->buf);
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

tcuda_status tc_comm_out(const char *F, const tc_tensor *t, tc_buf *buf, DLManagedTensor **slot) {
  *slot = mt_make(t, buf);
  return *slot ? TCUDA_SUCCESS : tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
}

void tc_comm_release_all(DLManagedTensor **out, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (out[i]) {
      out[i]->deleter(out[i]);
      out[i] = NULL;
    }
}

/* A contiguous tensor shaped like t at data on a device (-1: host). */
tc_tensor tc_comm_contig_like(const tc_tensor *t, void *data, int device) {
  tc_tensor c = *t;
  c.data = data;
  tc_contiguous_strides(t->ndim, t->shape, c.strides);
  c.on_gpu = device >= 0;
  c.device = device;
  c.dev_type = device >= 0 ? TC_DL_CUDA : TC_DL_CPU;
  return c;
}
