/* torch.cuda.current_blas_handle(): a cuBLAS handle per (thread, device)
 * from a per-device pool, bound to the current stream on every call, with a
 * workspace per (handle, stream) from the tcuda caching allocator. cuBLAS is
 * dlopen'ed on first use, so programs that never ask pay nothing at start. */
#include "blas/blas.h"
#include "core/core.h"
#include "stream/stream.h"
#include <cublas_v2.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct cublas_api {
  cublasStatus_t (*create)(cublasHandle_t *);
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
  cublasStatus_t (*set_workspace)(cublasHandle_t, void *, size_t);
  const char *(*status_name)(cublasStatus_t);
} cublas_api;

static cublas_api g_api;
static pthread_once_t g_api_once = PTHREAD_ONCE_INIT;
static int g_api_ok;

static void load_api(void) {
  g_api.create = (cublasStatus_t(*)(cublasHandle_t *))tc_cublas_sym("cublasCreate_v2");
  g_api.set_stream = (cublasStatus_t(*)(cublasHandle_t, cudaStream_t))tc_cublas_sym("cublasSetStream_v2");
  g_api.set_workspace = (cublasStatus_t(*)(cublasHandle_t, void *, size_t))tc_cublas_sym("cublasSetWorkspace_v2");
  g_api.status_name = (const char *(*)(cublasStatus_t))tc_cublas_sym("cublasGetStatusName");
  g_api_ok = g_api.create && g_api.set_stream && g_api.set_workspace && g_api.status_name;
}

static tcuda_status blas_error(cublasStatus_t st, const char *func, const char *call) {
  return tc_error(TCUDA_ERROR_CUBLAS, "%s: %s failed: %s", func, call, g_api.status_name(st));
}

tcuda_status tc_blas_workspace_size(const char *cfg, int major, int minor, size_t *bytes) {
  if (!cfg || !*cfg) {
    *bytes = (major == 9 && minor == 0) ? (size_t)4096 * 1024 * 8 : (size_t)4096 * 1024 * 2 + 16 * 1024 * 8;
    return TCUDA_SUCCESS;
  }
  size_t total = 0;
  const char *p = cfg;
  int pairs = 0;
  while (*p) {
    unsigned long long v[2];
    for (int i = 0; i < 2; i++) {
      if (*p != ':' || p[1] < '0' || p[1] > '9') goto bad;
      char *end;
      errno = 0;
      v[i] = strtoull(p + 1, &end, 10);
      if (errno) goto bad;
      p = end;
    }
    if (v[0] > (SIZE_MAX / 1024) || (v[1] && v[0] * 1024 > SIZE_MAX / v[1])) goto bad;
    size_t pair = (size_t)v[0] * 1024 * (size_t)v[1];
    if (pair > SIZE_MAX - total) /* each pair fits, the sum must too */
      return tc_error(TCUDA_ERROR_CONFIG, "CUBLAS_WORKSPACE_CONFIG: the workspaces of '%s' add up to more than 2^64 bytes",
                      cfg);
    total += pair;
    pairs++;
  }
  if (!pairs) goto bad;
  *bytes = total;
  return TCUDA_SUCCESS;
bad:
  return tc_error(TCUDA_ERROR_CONFIG,
                  "CUBLAS_WORKSPACE_CONFIG: expected ':SIZE_KiB:COUNT' repeated (e.g. ':4096:8'), got '%s'", cfg);
}

/* ---- the pool ---- */
typedef struct workspace { cublasHandle_t handle; cudaStream_t stream; void *ptr; } workspace;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static cublasHandle_t *g_free[TC_MAX_DEVICES];
static int g_nfree[TC_MAX_DEVICES], g_capfree[TC_MAX_DEVICES];
static workspace *g_ws;
static size_t g_nws, g_capws;
static pthread_key_t g_key;
static pthread_once_t g_key_once = PTHREAD_ONCE_INIT;

/* A thread's handles, one per device; returned to the pool at thread exit. */
static _Thread_local cublasHandle_t *tl_window;

static void return_window(void *p) {
  cublasHandle_t *w = p;
  pthread_mutex_lock(&g_mu);
  for (int d = 0; d < TC_MAX_DEVICES; d++) {
    if (!w[d]) continue;
    if (g_nfree[d] == g_capfree[d]) {
      int cap = g_capfree[d] ? g_capfree[d] * 2 : 8;
      cublasHandle_t *n = realloc(g_free[d], (size_t)cap * sizeof *n);
      if (!n) continue; /* leak the handle rather than fail at thread exit */
      g_free[d] = n;
      g_capfree[d] = cap;
    }
    g_free[d][g_nfree[d]++] = w[d];
  }
  pthread_mutex_unlock(&g_mu);
  free(w);
}
static void make_key(void) { pthread_key_create(&g_key, return_window); }

static tcuda_status reserve_handle(const char *F, int dev, cublasHandle_t *out) {
  if (!tl_window) {
    pthread_once(&g_key_once, make_key);
    tl_window = calloc(TC_MAX_DEVICES, sizeof *tl_window);
    if (!tl_window) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
    pthread_setspecific(g_key, tl_window);
  }
  if (tl_window[dev]) { *out = tl_window[dev]; return TCUDA_SUCCESS; }
  cublasHandle_t h = NULL;
  pthread_mutex_lock(&g_mu);
  if (g_nfree[dev]) h = g_free[dev][--g_nfree[dev]];
  pthread_mutex_unlock(&g_mu);
  if (!h) {
    cublasStatus_t st = g_api.create(&h); /* on the current device, which is dev */
    if (st != CUBLAS_STATUS_SUCCESS) return blas_error(st, F, "cublasCreate");
  }
  tl_window[dev] = h;
  *out = h;
  return TCUDA_SUCCESS;
}

/* The workspace of (handle, stream), allocated on first use. */
static tcuda_status workspace_for(const char *F, int dev, cublasHandle_t h, tcuda_stream_t s, void **ptr,
                                  size_t *size) {
  static size_t sizes[TC_MAX_DEVICES];
  if (!sizes[dev]) {
    int major = 0, minor = 0;
    tcuda_status st = tcuda_get_device_capability(dev, &major, &minor);
    if (st || (st = tc_blas_workspace_size(getenv("CUBLAS_WORKSPACE_CONFIG"), major, minor, &sizes[dev])))
      return st;
  }
  *size = sizes[dev];
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_nws; i++)
    if (g_ws[i].handle == h && g_ws[i].stream == (cudaStream_t)s.handle) {
      *ptr = g_ws[i].ptr;
      pthread_mutex_unlock(&g_mu);
      return TCUDA_SUCCESS;
    }
  pthread_mutex_unlock(&g_mu);
  void *p = NULL;
  tcuda_status st = tcuda_malloc_on(&p, *size, dev, s);
  if (st) return st;
  pthread_mutex_lock(&g_mu);
  if (g_nws == g_capws) {
    size_t cap = g_capws ? g_capws * 2 : 8;
    workspace *n = realloc(g_ws, cap * sizeof *n);
    if (!n) {
      pthread_mutex_unlock(&g_mu);
      tcuda_free(p);
      return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
    }
    g_ws = n;
    g_capws = cap;
  }
  g_ws[g_nws++] = (workspace){h, (cudaStream_t)s.handle, p};
  pthread_mutex_unlock(&g_mu);
  *ptr = p;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_current_blas_handle(struct cublasContext **out) {
  static const char *F = "tcuda_current_blas_handle";
  TC_CHECK_ARG(F, out, "handle");
  int dev = -1;
  tcuda_status st = tc_resolve_device(F, &dev);
  if (st) return st;
  if (dev >= TC_MAX_DEVICES)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: device %d is beyond the %d devices tcuda supports", F, dev,
                    TC_MAX_DEVICES);
  pthread_once(&g_api_once, load_api);
  if (!g_api_ok) return tc_error(TCUDA_ERROR_NOT_AVAILABLE, "%s: cannot load cuBLAS (libcublas.so)", F);
  if ((st = tc_apply_target_device(F))) return st; /* cuBLAS needs a live context */
  cublasHandle_t h = NULL;
  if ((st = reserve_handle(F, dev, &h))) return st;
  tcuda_stream_t s = tc_current_stream_fast(dev);
  cublasStatus_t cs = g_api.set_stream(h, (cudaStream_t)s.handle);
  if (cs != CUBLAS_STATUS_SUCCESS) return blas_error(cs, F, "cublasSetStream");
  void *ws = NULL;
  size_t size = 0;
  if ((st = workspace_for(F, dev, h, s, &ws, &size))) return st;
  cs = g_api.set_workspace(h, ws, size);
  if (cs != CUBLAS_STATUS_SUCCESS) return blas_error(cs, F, "cublasSetWorkspace");
  *out = h;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_blas_clear_workspaces(void) {
  pthread_mutex_lock(&g_mu);
  workspace *ws = g_ws;
  size_t n = g_nws;
  g_ws = NULL;
  g_nws = g_capws = 0;
  pthread_mutex_unlock(&g_mu);
  tcuda_status first = TCUDA_SUCCESS;
  for (size_t i = 0; i < n; i++) {
    tcuda_status st = tcuda_free(ws[i].ptr);
    if (st && !first) first = st;
  }
  free(ws);
  return first;
}
