/* Allocator entry points for PyTorch (CUDAPluggableAllocator) and CuPy
 * (CFunctionAllocator). Thin on purpose: all policy and stats live in the
 * public allocator API, so tcuda's reports describe the framework's memory.
 * Their signatures are fixed by the frameworks and have no status, so the
 * error stays in tcuda_last_error(), re-issued under the caller's name. */
#include "core/error.h"
#include <stdio.h>

static void *fail(const char *func) {
  char buf[TC_ERRMSG_MAX];
  tcuda_status s = tcuda_last_status();
  snprintf(buf, sizeof buf, "%s", tcuda_last_error());
  tc_error(s, "%s: %s", func, buf);
  return NULL;
}

/* A raw handle as a tcuda stream value, exactly as tcuda_stream_external
 * makes it (id = handle, NULL = default stream), minus its device lookup:
 * tcuda_malloc_on checks the device once. The frameworks always name the
 * device; -1 is resolved only for C callers. */
static tcuda_status wrap(struct CUstream_st *raw, int *device, tcuda_stream_t *out) {
  if (*device == -1) {
    tcuda_status s = tcuda_current_device(device);
    if (s) return s;
  }
  *out = (tcuda_stream_t){.handle = raw, .id = (int64_t)(intptr_t)raw, .device = *device, .priority = 0};
  return TCUDA_SUCCESS;
}

void *tcuda_torch_malloc(ptrdiff_t size, int device, struct CUstream_st *stream) {
  static const char *F = "tcuda_torch_malloc";
  if (size < 0) {
    tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: size %td is negative", F, size);
    return NULL;
  }
  tcuda_stream_t st;
  void *p = NULL;
  if (wrap(stream, &device, &st) || tcuda_malloc_on(&p, (size_t)size, device, st)) return fail(F);
  return p;
}

void tcuda_torch_free(void *ptr, ptrdiff_t size, int device, struct CUstream_st *stream) {
  (void)size, (void)device, (void)stream; /* the allocator knows them from ptr */
  if (tcuda_free(ptr)) fail("tcuda_torch_free");
}

void *tcuda_cupy_malloc(void *param, size_t size, int device) {
  static const char *F = "tcuda_cupy_malloc";
  tcuda_stream_t st;
  void *p = NULL;
  tcuda_status s = param ? wrap((struct CUstream_st *)param, &device, &st) : tcuda_current_stream(device, &st);
  if (s || tcuda_malloc_on(&p, size, st.device, st)) return fail(F);
  return p;
}

void tcuda_cupy_free(void *param, void *ptr, int device) {
  (void)param, (void)device;
  if (tcuda_free(ptr)) fail("tcuda_cupy_free");
}
