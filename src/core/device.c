/* Current device per thread, guards, properties and device queries.
 *
 * Like c10 on CUDA 12+, cudaSetDevice creates a primary context eagerly, so a
 * thread keeps a pending "target" device: restoring a device that has no
 * context only records it, and the context is made when work needs it. */
#include "core.h"
#include <cuda.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static _Thread_local int tl_target = -1;

/* A driver entry point looked up once (NULL when the driver lacks it). */
typedef struct {
  _Atomic(void *) fn;
  atomic_int looked;
} lazy_fn;

static void *lazy_driver_fn(lazy_fn *l, const char *name) {
  void *fn = atomic_load_explicit(&l->fn, memory_order_acquire);
  if (!fn && !atomic_load_explicit(&l->looked, memory_order_acquire)) {
    fn = tc_driver_fn(name); /* racing threads store the same pointer */
    atomic_store_explicit(&l->fn, fn, memory_order_release);
    atomic_store_explicit(&l->looked, 1, memory_order_release);
  }
  return fn;
}

typedef CUresult (*pfn_primary_state)(CUdevice, unsigned int *, int *);

static int has_primary_context(int device) {
  static lazy_fn l;
  pfn_primary_state fn = (pfn_primary_state)lazy_driver_fn(&l, "cuDevicePrimaryCtxGetState");
  if (!fn) return 1; /* unknown: behave like plain cudaSetDevice */
  unsigned int flags = 0;
  int active = 0;
  if (fn((CUdevice)device, &flags, &active) != CUDA_SUCCESS) return 1;
  return active;
}

void *tc_driver_fn(const char *name) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return fn;
}

/* cudaGetDevice is most of a cached malloc's cost (docs/performance.md).
 * The thread's current context is a cheap driver read, and a context
 * belongs to one device for life, so the answer is remembered per context:
 * a cudaSetDevice made outside tcuda switches the context and misses this
 * cache.
 *
 * A thread that has made no CUDA call has no context, so there is nothing
 * to key on, and cudaGetDevice there is far slower still, worse with more
 * such threads (docs/performance.md). tcuda's own calls on a cache hit make
 * no CUDA call, so such a thread would pay that forever. When the device's
 * primary context already exists, the thread is bound to it, as the
 * runtime's next call on that device would do anyway; no context is ever
 * created here. */
typedef CUresult (*pfn_ctx_current)(CUcontext *);
static lazy_fn g_ctx_current;
static _Thread_local CUcontext tl_ctx;
static _Thread_local int tl_ctx_device;

static tcuda_status get_device(const char *func, int *out) {
  if (tl_target >= 0) { *out = tl_target; return TCUDA_SUCCESS; }
  pfn_ctx_current fn = (pfn_ctx_current)lazy_driver_fn(&g_ctx_current, "cuCtxGetCurrent");
  CUcontext c = NULL;
  if (fn && fn(&c) != CUDA_SUCCESS) c = NULL;
  if (c && c == tl_ctx) { *out = tl_ctx_device; return TCUDA_SUCCESS; }
  TC_CUDA_TRY(func, cudaGetDevice(out));
  if (!c && fn && has_primary_context(*out)) {
    if (cudaSetDevice(*out) != cudaSuccess) (void)cudaGetLastError(); /* stay unbound */
    else if (fn(&c) != CUDA_SUCCESS) c = NULL;
  }
  if (c) { /* still no context: nothing to key on, ask again next time */
    tl_ctx = c;
    tl_ctx_device = *out;
  }
  return TCUDA_SUCCESS;
}

static tcuda_status set_device_now(const char *func, int d) {
  tl_target = -1;
  int cur = -1;
  TC_CUDA_TRY(func, cudaGetDevice(&cur));
  if (cur != d) TC_CUDA_TRY(func, cudaSetDevice(d));
  return TCUDA_SUCCESS;
}

tcuda_status tc_apply_target_device(const char *func) {
  if (tl_target < 0) return TCUDA_SUCCESS;
  return set_device_now(func, tl_target);
}

static tcuda_status check_range(const char *func, int d) {
  int n = tc_device_count();
  if (d < 0 || d >= n)
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: device %d out of range (%d device%s)", func, d, n,
                    n == 1 ? "" : "s");
  return TCUDA_SUCCESS;
}

tcuda_status tc_resolve_device(const char *func, int *device) {
  tcuda_status s = tc_lazy_init(func);
  if (s) return s;
  if (*device == -1) return get_device(func, device);
  return check_range(func, *device);
}

tcuda_status tcuda_current_device(int *device) {
  TC_CHECK_ARG("tcuda_current_device", device, "device");
  tcuda_status s = tc_lazy_init("tcuda_current_device");
  if (s) return s;
  return get_device("tcuda_current_device", device);
}

tcuda_status tcuda_set_device(int device) {
  if (device < 0) return TCUDA_SUCCESS; /* torch: negative is a no-op */
  tcuda_status s = tc_lazy_init("tcuda_set_device");
  if (s || (s = check_range("tcuda_set_device", device))) return s;
  return set_device_now("tcuda_set_device", device);
}

static tcuda_status exchange(const char *F, int device, int *prev_device) {
  tcuda_status s = tc_lazy_init(F);
  if (s || (s = check_range(F, device))) return s;
  int cur = tl_target;
  tl_target = -1;
  if (cur < 0) TC_CUDA_TRY(F, cudaGetDevice(&cur));
  if (cur != device) TC_CUDA_TRY(F, cudaSetDevice(device));
  *prev_device = cur;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_device_exchange(int device, int *prev_device) {
  TC_CHECK_ARG("tcuda_device_exchange", prev_device, "prev_device");
  return exchange("tcuda_device_exchange", device, prev_device);
}

tcuda_status tcuda_device_maybe_exchange(int device, int *prev_device) {
  static const char *F = "tcuda_device_maybe_exchange";
  TC_CHECK_ARG(F, prev_device, "prev_device");
  tcuda_status s = tc_lazy_init(F);
  if (s || (s = check_range(F, device))) return s;
  int cur;
  if ((s = get_device(F, &cur))) return s;
  *prev_device = cur;
  if (cur == device) return TCUDA_SUCCESS;
  if (has_primary_context(device)) return set_device_now(F, device);
  tl_target = device;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_device_guard_begin(tcuda_device_guard_t *g, int device) {
  TC_CHECK_ARG("tcuda_device_guard_begin", g, "guard");
  g->prev_device = -1;
  g->device = device;
  if (device < 0) return TCUDA_SUCCESS;
  int prev;
  tcuda_status s = exchange("tcuda_device_guard_begin", device, &prev);
  if (s) return s;
  g->prev_device = prev;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_device_guard_end(tcuda_device_guard_t *g) {
  TC_CHECK_ARG("tcuda_device_guard_end", g, "guard");
  if (g->prev_device < 0) return TCUDA_SUCCESS;
  int ignored;
  int prev = g->prev_device;
  g->prev_device = -1;
  return tcuda_device_maybe_exchange(prev, &ignored);
}

tcuda_status tcuda_device_of(const void *ptr, int *device) {
  static const char *F = "tcuda_device_of";
  TC_CHECK_ARG(F, ptr, "ptr");
  TC_CHECK_ARG(F, device, "device");
  tcuda_status s = tc_lazy_init(F);
  if (s) return s;
  struct cudaPointerAttributes a;
  cudaError_t e = cudaPointerGetAttributes(&a, ptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: %p is not a device pointer (%s)", F, ptr,
                    cudaGetErrorName(e));
  }
  if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: %p is not a device pointer", F, ptr);
  *device = a.device;
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_get_device_properties(int device, tcuda_device_properties_t *p) {
  static const char *F = "tcuda_get_device_properties";
  TC_CHECK_ARG(F, p, "props");
  if (p->struct_size < sizeof *p)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                    "%s: props->struct_size is %zu, expected %zu (use TCUDA_DEVICE_PROPERTIES_INIT)", F,
                    p->struct_size, sizeof *p);
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  struct cudaDeviceProp d;
  TC_CUDA_TRY(F, cudaGetDeviceProperties(&d, device));
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  snprintf(p->name, sizeof p->name, "%s", d.name);
  p->major = d.major;
  p->minor = d.minor;
  p->total_memory = d.totalGlobalMem;
  p->multi_processor_count = d.multiProcessorCount;
  p->max_threads_per_multi_processor = d.maxThreadsPerMultiProcessor;
  p->l2_cache_size = d.l2CacheSize;
  p->warp_size = d.warpSize;
  p->is_integrated = d.integrated;
  p->is_multi_gpu_board = d.isMultiGpuBoard;
  memcpy(p->uuid, d.uuid.bytes, 16);
  const unsigned char *u = p->uuid;
  snprintf(p->uuid_string, sizeof p->uuid_string,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2],
           u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  p->pci_domain_id = d.pciDomainID;
  p->pci_bus_id = d.pciBusID;
  p->pci_device_id = d.pciDeviceID;
  snprintf(p->pci_bus_string, sizeof p->pci_bus_string, "%04x:%02x:%02x.0", (unsigned)d.pciDomainID & 0xffff,
           (unsigned)d.pciBusID & 0xff, (unsigned)d.pciDeviceID & 0xff);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_get_device_name(int device, char *buf, size_t n) {
  static const char *F = "tcuda_get_device_name";
  TC_CHECK_ARG(F, buf, "buf");
  if (n == 0) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: buf_size is 0", F);
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  char name[256];
  struct cudaDeviceProp d;
  TC_CUDA_TRY(F, cudaGetDeviceProperties(&d, device));
  snprintf(name, sizeof name, "%s", d.name);
  snprintf(buf, n, "%s", name);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_get_device_capability(int device, int *major, int *minor) {
  static const char *F = "tcuda_get_device_capability";
  TC_CHECK_ARG(F, major, "major");
  TC_CHECK_ARG(F, minor, "minor");
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  TC_CUDA_TRY(F, cudaDeviceGetAttribute(major, cudaDevAttrComputeCapabilityMajor, device));
  TC_CUDA_TRY(F, cudaDeviceGetAttribute(minor, cudaDevAttrComputeCapabilityMinor, device));
  return TCUDA_SUCCESS;
}

/* Run body with `device` current, then restore. */
#define WITH_DEVICE(F, device, body)                                   \
  do {                                                                 \
    tcuda_device_guard_t g_;                                           \
    tcuda_status s_ = tcuda_device_guard_begin(&g_, device);           \
    if (s_) return s_;                                                 \
    cudaError_t e_ = (body);                                           \
    tcuda_device_guard_end(&g_);                                       \
    if (e_ != cudaSuccess) return tc_cuda_error(e_, F, #body);         \
  } while (0)

tcuda_status tcuda_synchronize(int device) {
  static const char *F = "tcuda_synchronize";
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  WITH_DEVICE(F, device, cudaDeviceSynchronize());
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_mem_get_info(int device, size_t *free_bytes, size_t *total_bytes) {
  static const char *F = "tcuda_mem_get_info";
  TC_CHECK_ARG(F, free_bytes, "free_bytes");
  TC_CHECK_ARG(F, total_bytes, "total_bytes");
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  WITH_DEVICE(F, device, cudaMemGetInfo(free_bytes, total_bytes));
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_can_device_access_peer(int device, int peer, int *can) {
  static const char *F = "tcuda_can_device_access_peer";
  TC_CHECK_ARG(F, can, "can_access");
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  if (peer < 0 || peer >= tc_device_count())
    return tc_error(TCUDA_ERROR_INVALID_DEVICE, "%s: peer_device %d out of range (%d devices)", F, peer,
                    tc_device_count());
  TC_CUDA_TRY(F, cudaDeviceCanAccessPeer(can, device, peer));
  return TCUDA_SUCCESS;
}

extern cudaError_t tc_selftest_launch(unsigned *out, unsigned v, cudaStream_t s);

tcuda_status tcuda_device_selftest(int device) {
  static const char *F = "tcuda_device_selftest";
  tcuda_status s = tc_resolve_device(F, &device);
  if (s) return s;
  tcuda_device_guard_t g;
  if ((s = tcuda_device_guard_begin(&g, device))) return s;
  unsigned *d = NULL, h[32];
  cudaError_t e = cudaMalloc((void **)&d, sizeof h);
  const char *call = "cudaMalloc";
  if (e == cudaSuccess) { e = tc_selftest_launch(d, 0x5eedu, 0); call = "tc_selftest_kernel launch"; }
  if (e == cudaSuccess) { e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost); call = "cudaMemcpy"; }
  if (d) cudaFree(d);
  tcuda_device_guard_end(&g);
  if (e != cudaSuccess) return tc_cuda_error(e, F, call);
  for (unsigned i = 0; i < 32; i++)
    if (h[i] != (0x5eedu ^ i))
      return tc_error(TCUDA_ERROR_INTERNAL, "%s: device %d returned wrong data at %u", F, device, i);
  return TCUDA_SUCCESS;
}
