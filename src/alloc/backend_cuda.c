/* The CUDA backend: the only allocator code that touches device memory.
 * cudaMalloc/cudaFree for segments, the driver's VMM calls (reached through
 * cudaGetDriverEntryPoint, so there is no link to libcuda) for expandable
 * segments, and pooled disable-timing events for record_stream. Every call
 * runs on the device it is given, under a device guard. */
#include "alloc/backend.h"
#include "core/core.h"
#include "core/fault.h"
#include <cuda.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define F "tcuda allocator"
#define TC_ALLOC_MAX_POOLED_DEVICES 64

/* ---- driver entry points ---- */

typedef CUresult (*pfn_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
typedef CUresult (*pfn_addr_free)(CUdeviceptr, size_t);
typedef CUresult (*pfn_create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                               unsigned long long);
typedef CUresult (*pfn_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
typedef CUresult (*pfn_set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
typedef CUresult (*pfn_unmap)(CUdeviceptr, size_t);
typedef CUresult (*pfn_release)(CUmemGenericAllocationHandle);
typedef CUresult (*pfn_retain)(CUmemGenericAllocationHandle *, void *);
typedef CUresult (*pfn_granularity)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);
typedef CUresult (*pfn_error_name)(CUresult, const char **);

static struct {
  pfn_reserve reserve;
  pfn_addr_free addr_free;
  pfn_create create;
  pfn_map map;
  pfn_set_access set_access;
  pfn_unmap unmap;
  pfn_release release;
  pfn_retain retain;
  pfn_granularity granularity;
  pfn_error_name error_name;
} drv;
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;

static void drv_load(void) {
  drv.reserve = (pfn_reserve)tc_driver_fn("cuMemAddressReserve");
  drv.addr_free = (pfn_addr_free)tc_driver_fn("cuMemAddressFree");
  drv.create = (pfn_create)tc_driver_fn("cuMemCreate");
  drv.map = (pfn_map)tc_driver_fn("cuMemMap");
  drv.set_access = (pfn_set_access)tc_driver_fn("cuMemSetAccess");
  drv.unmap = (pfn_unmap)tc_driver_fn("cuMemUnmap");
  drv.release = (pfn_release)tc_driver_fn("cuMemRelease");
  drv.retain = (pfn_retain)tc_driver_fn("cuMemRetainAllocationHandle");
  drv.granularity = (pfn_granularity)tc_driver_fn("cuMemGetAllocationGranularity");
  drv.error_name = (pfn_error_name)tc_driver_fn("cuGetErrorName");
}

static tcuda_status drv_ready(void) {
  pthread_once(&drv_once, drv_load);
  if (!drv.reserve || !drv.addr_free || !drv.create || !drv.map || !drv.set_access || !drv.unmap || !drv.release ||
      !drv.granularity)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED,
                    F ": expandable segments need the driver's virtual memory API (cuMemCreate), not found");
  return TCUDA_SUCCESS;
}

static tcuda_status drv_error(CUresult r, const char *call) {
  const char *name = NULL;
  if (!drv.error_name || drv.error_name(r, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_UNKNOWN";
  return tc_error(r == CUDA_ERROR_OUT_OF_MEMORY ? TCUDA_ERROR_OUT_OF_MEMORY : TCUDA_ERROR_CUDA,
                  F ": %s failed: %s (%d)", call, name, (int)r);
}

/* ---- device guard ---- */

/* Every backend call runs on its device and in the relaxed capture mode:
 * cudaMalloc and friends are "unsafe" under a global-mode graph capture on
 * any stream, and the allocator must still work then (PyTorch's
 * CUDAStreamCaptureModeGuard around cudaMalloc). */
typedef struct {
  tcuda_device_guard_t g;
  enum cudaStreamCaptureMode mode;
} on_dev;

static tcuda_status dev_begin(on_dev *d, int device) {
  tcuda_status s = tcuda_device_guard_begin(&d->g, device);
  if (s) return s;
  d->mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&d->mode) != cudaSuccess) {
    (void)cudaGetLastError();
    d->mode = cudaStreamCaptureModeRelaxed; /* nothing to restore */
  }
  return TCUDA_SUCCESS;
}
static void dev_end(on_dev *d) {
  if (cudaThreadExchangeStreamCaptureMode(&d->mode) != cudaSuccess) (void)cudaGetLastError();
  tcuda_device_guard_end(&d->g);
}

/* ---- segments ---- */

static tcuda_status cuda_segment_alloc(void *ctx, int device, uint64_t size, uint64_t *addr) {
  (void)ctx;
  on_dev d;
  tcuda_status s = dev_begin(&d, device);
  if (s) return s;
  void *p = NULL;
  cudaError_t e = TC_FAULT(TC_FAULT_SEGMENT_ALLOC) ? cudaErrorMemoryAllocation : cudaMalloc(&p, (size_t)size);
  dev_end(&d);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError(); /* forgive it, as torch does; the policy writes the OOM message */
    return TCUDA_ERROR_OUT_OF_MEMORY;
  }
  if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaMalloc");
  *addr = (uint64_t)(uintptr_t)p;
  return TCUDA_SUCCESS;
}

static tcuda_status cuda_segment_free(void *ctx, int device, uint64_t addr, uint64_t size) {
  (void)ctx;
  (void)size;
  on_dev d;
  tcuda_status s = dev_begin(&d, device);
  if (s) return s;
  cudaError_t e = cudaFree((void *)(uintptr_t)addr);
  dev_end(&d);
  if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaFree");
  return TCUDA_SUCCESS;
}

/* ---- expandable segments (VMM) ---- */

static void mem_prop(CUmemAllocationProp *prop, int device) {
  memset(prop, 0, sizeof *prop);
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop->location.id = device;
  prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE; /* no IPC for expandable memory, as torch */
}

static tcuda_status cuda_va_reserve(void *ctx, int device, uint64_t size, uint64_t *addr) {
  (void)ctx;
  tcuda_status s = drv_ready();
  if (s) return s;
  on_dev d;
  if ((s = dev_begin(&d, device))) return s;
  CUdeviceptr p = 0;
  CUresult r = drv.reserve(&p, (size_t)size, 0, 0, 0);
  dev_end(&d);
  if (r != CUDA_SUCCESS) return drv_error(r, "cuMemAddressReserve");
  *addr = (uint64_t)p;
  return TCUDA_SUCCESS;
}

static tcuda_status cuda_va_release(void *ctx, int device, uint64_t addr, uint64_t size) {
  (void)ctx;
  tcuda_status s = drv_ready();
  if (s) return s;
  on_dev d;
  if ((s = dev_begin(&d, device))) return s;
  CUresult r = drv.addr_free((CUdeviceptr)addr, (size_t)size);
  dev_end(&d);
  return r == CUDA_SUCCESS ? TCUDA_SUCCESS : drv_error(r, "cuMemAddressFree");
}

/* Physical memory in handles of the device's minimum granularity (2 MiB on
 * current GPUs), so any page-aligned sub-range can be unmapped later. Each
 * handle is released right after mapping: the mapping keeps it alive, and
 * cuMemUnmap then gives the memory back. */
/* Pages unmap_keep unmapped, per device, each with the reference
 * cuMemRetainAllocationHandle gave: the next map calls take them before
 * creating new ones. */
static struct {
  CUmemGenericAllocationHandle *h;
  size_t n, cap;
} kept[TC_ALLOC_MAX_POOLED_DEVICES];
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

static int kept_pop(int device, CUmemGenericAllocationHandle *h) {
  if (device < 0 || device >= TC_ALLOC_MAX_POOLED_DEVICES) return 0;
  pthread_mutex_lock(&kept_mu);
  int got = kept[device].n > 0;
  if (got) *h = kept[device].h[--kept[device].n];
  pthread_mutex_unlock(&kept_mu);
  return got;
}

/* 0 when there is no room: the caller releases h. */
static int kept_push(int device, CUmemGenericAllocationHandle h) {
  if (device < 0 || device >= TC_ALLOC_MAX_POOLED_DEVICES) return 0;
  pthread_mutex_lock(&kept_mu);
  int ok = 1;
  if (kept[device].n == kept[device].cap) {
    size_t cap = kept[device].cap ? 2 * kept[device].cap : 64;
    CUmemGenericAllocationHandle *nh = (CUmemGenericAllocationHandle *)realloc(kept[device].h, cap * sizeof *nh);
    if (nh) {
      kept[device].h = nh;
      kept[device].cap = cap;
    } else {
      ok = 0;
    }
  }
  if (ok) kept[device].h[kept[device].n++] = h;
  pthread_mutex_unlock(&kept_mu);
  return ok;
}

static tcuda_status cuda_map(void *ctx, int device, uint64_t addr, uint64_t size) {
  (void)ctx;
  tcuda_status s = drv_ready();
  if (s) return s;
  on_dev d;
  if ((s = dev_begin(&d, device))) return s;
  CUmemAllocationProp prop;
  mem_prop(&prop, device);
  size_t gran = 0;
  CUresult r = drv.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) {
    dev_end(&d);
    return drv_error(r, "cuMemGetAllocationGranularity");
  }
  if (!gran || size % gran || addr % gran) {
    dev_end(&d);
    return tc_error(TCUDA_ERROR_INTERNAL, F ": map of %llu bytes at 0x%llx is not a multiple of the %zu-byte granularity",
                    (unsigned long long)size, (unsigned long long)addr, gran);
  }
  uint64_t done = 0;
  const char *call = NULL;
  for (; done < size; done += gran) {
    CUmemGenericAllocationHandle h = 0;
    if (kept_pop(device, &h)) r = CUDA_SUCCESS;
    else r = TC_FAULT(TC_FAULT_MEM_CREATE) ? CUDA_ERROR_OUT_OF_MEMORY : drv.create(&h, gran, &prop, 0);
    if (r != CUDA_SUCCESS) {
      call = "cuMemCreate";
      break;
    }
    r = TC_FAULT(TC_FAULT_MEM_MAP) ? CUDA_ERROR_INVALID_VALUE : drv.map((CUdeviceptr)(addr + done), gran, 0, h, 0);
    drv.release(h);
    if (r != CUDA_SUCCESS) {
      call = "cuMemMap";
      break;
    }
  }
  if (!call) {
    CUmemAccessDesc desc;
    memset(&desc, 0, sizeof desc);
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = device;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = drv.set_access((CUdeviceptr)addr, (size_t)size, &desc, 1);
    if (r != CUDA_SUCCESS) call = "cuMemSetAccess";
    else done = size;
  }
  if (call) { /* all or nothing */
    CUresult failed = r;
    for (uint64_t off = 0; off < done; off += gran) drv.unmap((CUdeviceptr)(addr + off), gran);
    dev_end(&d);
    if (failed == CUDA_ERROR_OUT_OF_MEMORY) return TCUDA_ERROR_OUT_OF_MEMORY; /* the policy reports it */
    return drv_error(failed, call);
  }
  dev_end(&d);
  return TCUDA_SUCCESS;
}

/* Unmap page by page; keep: hold each page's physical handle for the
 * device's next map calls (unmap_keep) instead of letting it go. */
static tcuda_status unmap_pages(int device, uint64_t addr, uint64_t size, int keep) {
  tcuda_status s = drv_ready();
  if (s) return s;
  on_dev d;
  if ((s = dev_begin(&d, device))) return s;
  CUmemAllocationProp prop;
  mem_prop(&prop, device);
  size_t gran = 0;
  CUresult r = drv.granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  for (uint64_t off = 0; r == CUDA_SUCCESS && off < size; off += gran) {
    CUmemGenericAllocationHandle h = 0;
    int held = keep && drv.retain && drv.retain(&h, (void *)(uintptr_t)(addr + off)) == CUDA_SUCCESS;
    r = drv.unmap((CUdeviceptr)(addr + off), gran);
    if (held && (r != CUDA_SUCCESS || !kept_push(device, h))) drv.release(h);
  }
  dev_end(&d);
  return r == CUDA_SUCCESS ? TCUDA_SUCCESS : drv_error(r, "cuMemUnmap");
}

static tcuda_status cuda_unmap(void *ctx, int device, uint64_t addr, uint64_t size) {
  (void)ctx;
  return unmap_pages(device, addr, size, 0);
}

static tcuda_status cuda_unmap_keep(void *ctx, int device, uint64_t addr, uint64_t size) {
  (void)ctx;
  return unmap_pages(device, addr, size, 1);
}

static void cuda_release_kept(void *ctx, int device) {
  (void)ctx;
  CUmemGenericAllocationHandle h;
  while (kept_pop(device, &h)) drv.release(h);
}

/* ---- events ---- */

typedef struct cuda_event {
  cudaEvent_t ev;
  int device;
  struct cuda_event *next;
} cuda_event;

/* Pooled per device: cudaEventCreate is slow and serialises across threads. */
static pthread_mutex_t ev_mu = PTHREAD_MUTEX_INITIALIZER;
static cuda_event *ev_free[TC_ALLOC_MAX_POOLED_DEVICES];

static tcuda_status cuda_event_record(void *ctx, int device, uint64_t stream, void **event) {
  (void)ctx;
  cuda_event *e = NULL;
  if (device >= 0 && device < TC_ALLOC_MAX_POOLED_DEVICES) {
    pthread_mutex_lock(&ev_mu);
    e = ev_free[device];
    if (e) ev_free[device] = e->next;
    pthread_mutex_unlock(&ev_mu);
  }
  on_dev d;
  tcuda_status s = dev_begin(&d, device);
  if (s) goto fail;
  if (!e) {
    e = (cuda_event *)calloc(1, sizeof *e);
    if (!e) {
      dev_end(&d);
      return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, F ": out of host memory");
    }
    e->device = device;
    cudaError_t ce = cudaEventCreateWithFlags(&e->ev, cudaEventDisableTiming);
    if (ce != cudaSuccess) {
      dev_end(&d);
      free(e);
      return tc_cuda_error(ce, F, "cudaEventCreateWithFlags");
    }
  }
  cudaError_t ce = TC_FAULT(TC_FAULT_ALLOC_EVENT) ? cudaErrorInvalidResourceHandle
                                                  : cudaEventRecord(e->ev, (cudaStream_t)(uintptr_t)stream);
  dev_end(&d);
  if (ce != cudaSuccess) {
    s = tc_cuda_error(ce, F, "cudaEventRecord");
    goto fail;
  }
  *event = e;
  return TCUDA_SUCCESS;
fail:
  if (e) {
    pthread_mutex_lock(&ev_mu);
    e->next = ev_free[e->device];
    ev_free[e->device] = e;
    pthread_mutex_unlock(&ev_mu);
  }
  return s;
}

static int cuda_event_query(void *ctx, void *event) {
  (void)ctx;
  cudaError_t e = cudaEventQuery(((cuda_event *)event)->ev);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return 0;
  }
  tc_cuda_error(e, F, "cudaEventQuery");
  return -1;
}

static tcuda_status cuda_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  cudaError_t e = cudaEventSynchronize(((cuda_event *)event)->ev);
  return e == cudaSuccess ? TCUDA_SUCCESS : tc_cuda_error(e, F, "cudaEventSynchronize");
}

static void cuda_event_release(void *ctx, void *event) {
  (void)ctx;
  cuda_event *e = (cuda_event *)event;
  if (e->device < 0 || e->device >= TC_ALLOC_MAX_POOLED_DEVICES) {
    cudaEventDestroy(e->ev);
    free(e);
    return;
  }
  pthread_mutex_lock(&ev_mu);
  e->next = ev_free[e->device];
  ev_free[e->device] = e;
  pthread_mutex_unlock(&ev_mu);
}

static tcuda_status cuda_stream_synchronize(void *ctx, int device, uint64_t stream) {
  (void)ctx;
  on_dev d;
  tcuda_status s = dev_begin(&d, device);
  if (s) return s;
  cudaError_t e = cudaStreamSynchronize((cudaStream_t)(uintptr_t)stream);
  dev_end(&d);
  return e == cudaSuccess ? TCUDA_SUCCESS : tc_cuda_error(e, F, "cudaStreamSynchronize");
}

static tcuda_status cuda_device_synchronize(void *ctx, int device) {
  (void)ctx;
  on_dev d;
  tcuda_status s = dev_begin(&d, device);
  if (s) return s;
  cudaError_t e = cudaDeviceSynchronize();
  dev_end(&d);
  return e == cudaSuccess ? TCUDA_SUCCESS : tc_cuda_error(e, F, "cudaDeviceSynchronize");
}

static tcuda_status cuda_mem_info(void *ctx, int device, uint64_t *free_bytes, uint64_t *total_bytes) {
  (void)ctx;
  on_dev d;
  tcuda_status s = dev_begin(&d, device);
  if (s) return s;
  size_t fr = 0, tot = 0;
  cudaError_t e = cudaMemGetInfo(&fr, &tot);
  dev_end(&d);
  if (e != cudaSuccess) return tc_cuda_error(e, F, "cudaMemGetInfo");
  *free_bytes = fr;
  *total_bytes = tot;
  return TCUDA_SUCCESS;
}

static const tc_backend cuda_backend = {
    "cuda",          NULL,          cuda_segment_alloc, cuda_segment_free, cuda_va_reserve,
    cuda_va_release, cuda_map,      cuda_unmap,         cuda_event_record, cuda_event_query,
    cuda_event_synchronize, cuda_event_release, cuda_stream_synchronize, cuda_device_synchronize,
    cuda_mem_info,          cuda_unmap_keep,    cuda_release_kept};

const tc_backend *tc_backend_cuda(void) { return &cuda_backend; }
