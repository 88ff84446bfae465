/* Lazy initialisation, fork guard, device count. */
#include "core.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_initialized;
static atomic_int g_bad_fork;
static int g_device_count;
static char g_unavailable[256];

static atomic_int g_driver_touched;

static void on_fork_child(void) {
  /* Once the parent has initialised the driver (any successful device
   * query does), the child cannot use CUDA: give it a clear error rather
   * than CUDA's obscure one. */
  if (atomic_load(&g_driver_touched)) atomic_store(&g_bad_fork, 1);
}

/* Called after a CUDA call that initialised the driver. */
static void note_driver_touched(void) {
  if (atomic_exchange(&g_driver_touched, 1)) return;
  pthread_atfork(NULL, NULL, on_fork_child);
}

static const char *fork_message =
    "cannot re-initialise CUDA in a forked child; CUDA was initialised in the parent before fork(). "
    "Fork before the first CUDA call, or start a new process (exec/spawn)";

tcuda_status tc_cuda_error(cudaError_t err, const char *func, const char *call) {
  tcuda_status s = err == cudaErrorMemoryAllocation ? TCUDA_ERROR_OUT_OF_MEMORY
                 : err == cudaErrorNotReady          ? TCUDA_ERROR_NOT_READY
                 : err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice
                     ? TCUDA_ERROR_NOT_AVAILABLE
                     : TCUDA_ERROR_CUDA;
  return tc_error(s, "%s: %s failed: %s (%s)", func, call, cudaGetErrorName(err),
                  cudaGetErrorString(err));
}

static const char *describe_unavailable(cudaError_t e) {
#ifdef TCUDA_NO_CUDA
  return "tcuda was built without CUDA";
#endif
  switch (e) {
  case cudaErrorInsufficientDriver: return "no CUDA driver, or the driver is older than the runtime";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected";
  case cudaErrorInitializationError: return "the CUDA driver failed to initialise";
  default: return "CUDA initialisation failed";
  }
}

/* Into g_unavailable, under g_init_mu: why, and CUDA's name for it. */
static void unavailable_text(cudaError_t e) {
#ifdef TCUDA_NO_CUDA
  snprintf(g_unavailable, sizeof g_unavailable, "%s", describe_unavailable(e));
#else
  snprintf(g_unavailable, sizeof g_unavailable, "%s (%s)", describe_unavailable(e), cudaGetErrorName(e));
#endif
}

tcuda_status tc_lazy_init(const char *func) {
  if (atomic_load_explicit(&g_bad_fork, memory_order_relaxed))
    return tc_error(TCUDA_ERROR_FORKED, "%s: %s", func, fork_message);
  if (atomic_load_explicit(&g_initialized, memory_order_acquire)) return TCUDA_SUCCESS;

  pthread_mutex_lock(&g_init_mu);
  tcuda_status st = TCUDA_SUCCESS;
  if (!atomic_load(&g_initialized)) {
    /* Same default as PyTorch: load kernels on first use. */
    setenv("CUDA_MODULE_LOADING", "LAZY", 0);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      if (e == cudaSuccess) e = cudaErrorNoDevice;
      (void)cudaGetLastError();
      unavailable_text(e);
      st = tc_error(TCUDA_ERROR_NOT_AVAILABLE, "%s: CUDA is not available: %s", func, g_unavailable);
    } else {
      note_driver_touched();
      g_device_count = n;
      g_unavailable[0] = 0;
      atomic_store_explicit(&g_initialized, 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&g_init_mu);
  return st;
}

tcuda_status tcuda_init(void) { return tc_lazy_init("tcuda_init"); }
int tcuda_is_initialized(void) { return atomic_load(&g_initialized) && !atomic_load(&g_bad_fork); }
int tc_device_count(void) { return atomic_load(&g_initialized) ? g_device_count : 0; }

int tcuda_device_count(void) {
  if (atomic_load(&g_bad_fork)) return 0;
  if (atomic_load(&g_initialized)) return g_device_count;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (n > 0) note_driver_touched();
  return n;
}

int tcuda_is_available(void) { return tcuda_device_count() > 0; }

const char *tcuda_unavailable_reason(void) {
  if (atomic_load(&g_bad_fork)) return fork_message;
  if (atomic_load(&g_initialized)) return "";
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) { note_driver_touched(); return ""; }
  if (e == cudaSuccess) e = cudaErrorNoDevice;
  (void)cudaGetLastError();
  pthread_mutex_lock(&g_init_mu);
  unavailable_text(e);
  pthread_mutex_unlock(&g_init_mu);
  return g_unavailable;
}
