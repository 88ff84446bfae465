/* Pinned host caching allocator (PyTorch's CachingHostAllocator): the
 * bookkeeping is plain C over a small backend, so CPU tests can swap in a
 * fake one. */
#ifndef TC_HOST_H
#define TC_HOST_H
#include "tcuda.h"

typedef struct tc_host_backend {
  void *ctx;
  tcuda_status (*alloc)(void *ctx, size_t size, void **ptr); /* page-locked memory */
  void (*free)(void *ctx, void *ptr);
  /* Record an event on stream; *event receives an opaque handle. */
  tcuda_status (*record)(void *ctx, tcuda_stream_t stream, void **event);
  int (*query)(void *ctx, void *event); /* 1 complete, 0 not yet, <0 error */
  void (*release)(void *ctx, void *event);
} tc_host_backend;

/* Replace the backend (tests only). Fails if the cache holds any block. */
tcuda_status tc_host_set_backend(const tc_host_backend *be);
#endif
