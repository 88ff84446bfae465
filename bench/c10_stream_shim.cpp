// PyTorch's C++ stream and event calls behind a C ABI, for bench_streams.
// The loops live here so that the C side times only C++ calls; exceptions
// must not cross into C: each entry point catches and records.
#include "c10_stream_shim.h"

// torch 2.10 moved CUDAEvent into c10; ATen's header now only includes it
// (plus cuBLAS/cuSPARSE headers this shim has no use for).
#if __has_include(<c10/cuda/CUDAEvent.h>)
#include <c10/cuda/CUDAEvent.h>
using TorchEvent = c10::cuda::CUDAEvent;
#else
#include <ATen/cuda/CUDAEvent.h>
using TorchEvent = at::cuda::CUDAEvent;
#endif
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <cuda.h>
#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

// Exported by libc10_cuda, not declared in its headers (see c10_alloc_shim.cpp).
namespace c10::cuda::_internal {
C10_CUDA_API void setHasPrimaryContext(bool (*func)(DeviceIndex));
}

namespace {
thread_local std::string g_err;
std::optional<c10::cuda::CUDAStream> g_stream;
// Never destroyed: at exit the CUDA runtime may be gone before static
// destructors run, and ~CUDAEvent would warn.
TorchEvent *g_event;
volatile int64_t g_sink;

using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int *, int *);
PrimaryCtxGetState g_get_state;

// What libtorch_cuda registers: check the index, then ask the driver through
// a dlsym'd pointer. Every CUDAGuard's destructor calls it, CUDAEvent::record
// included, so a stub returning true would flatter torch's column.
bool has_primary_context(c10::DeviceIndex device) {
  TORCH_CHECK(device >= 0 && device < c10::cuda::device_count(), "hasPrimaryContext: bad device index ",
              static_cast<int>(device));
  unsigned int flags = 0;
  int active = 0;
  CUresult r = g_get_state(static_cast<CUdevice>(device), &flags, &active);
  TORCH_CHECK(r == CUDA_SUCCESS, "cuDevicePrimaryCtxGetState failed: ", static_cast<int>(r));
  return active == 1;
}

double now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int fail(const char *what, const std::exception &e) {
  g_err = std::string(what) + ": " + e.what();
  // c10 messages carry a long C++ backtrace; the first line is the message.
  auto nl = g_err.find('\n');
  if (nl != std::string::npos) g_err.resize(nl);
  return -1;
}

void need_init() {
  if (!g_stream || !g_event) throw std::runtime_error("c10s_init has not succeeded");
}
}  // namespace

extern "C" {

int c10s_init(int device) {
  try {
    if (g_stream && g_event) return 0;
    // cudart has loaded the driver already; this only finds it.
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) throw std::runtime_error(std::string("dlopen libcuda.so.1: ") + dlerror());
    g_get_state = reinterpret_cast<PrimaryCtxGetState>(dlsym(lib, "cuDevicePrimaryCtxGetState"));
    if (!g_get_state) throw std::runtime_error("libcuda.so.1 has no cuDevicePrimaryCtxGetState");
    c10::cuda::_internal::setHasPrimaryContext(has_primary_context);

    const int priority = 0;  // torch.cuda.Stream()'s default
    g_stream.emplace(c10::cuda::getStreamFromPool(priority, static_cast<c10::DeviceIndex>(device)));
    g_event = new TorchEvent();  // torch.cuda.Event()'s flags: timing off
    g_event->record(*g_stream);
    g_stream->synchronize();
    return 0;
  } catch (const std::exception &e) {
    delete g_event;
    g_event = nullptr;
    g_stream.reset();
    return fail("c10s_init", e);
  }
}

double c10s_pool_get(int device, long n) {
  try {
    const int priority = 0;
    const auto dev = static_cast<c10::DeviceIndex>(device);
    int64_t acc = 0;
    double t = now_ns();
    for (long i = 0; i < n; i++) acc += c10::cuda::getStreamFromPool(priority, dev).id();
    t = now_ns() - t;
    g_sink = acc;
    return t / n;
  } catch (const std::exception &e) {
    return fail("c10s_pool_get", e);
  }
}

double c10s_current_stream(int device, long n) {
  try {
    const auto dev = static_cast<c10::DeviceIndex>(device);
    int64_t acc = 0;
    double t = now_ns();
    for (long i = 0; i < n; i++) acc += c10::cuda::getCurrentCUDAStream(dev).id();
    t = now_ns() - t;
    g_sink = acc;
    return t / n;
  } catch (const std::exception &e) {
    return fail("c10s_current_stream", e);
  }
}

double c10s_event_record(long n) {
  try {
    need_init();
    const c10::cuda::CUDAStream &s = *g_stream;
    TorchEvent &ev = *g_event;
    double t = now_ns();
    for (long i = 0; i < n; i++) ev.record(s);
    t = now_ns() - t;
    s.synchronize();
    return t / n;
  } catch (const std::exception &e) {
    return fail("c10s_event_record", e);
  }
}

double c10s_event_query(long n) {
  try {
    need_init();
    const TorchEvent &ev = *g_event;
    int64_t acc = 0;
    double t = now_ns();
    for (long i = 0; i < n; i++) acc += ev.query();
    t = now_ns() - t;
    g_sink = acc;
    return t / n;
  } catch (const std::exception &e) {
    return fail("c10s_event_query", e);
  }
}

double c10s_stream_query(long n) {
  try {
    need_init();
    const c10::cuda::CUDAStream &s = *g_stream;
    int64_t acc = 0;
    double t = now_ns();
    for (long i = 0; i < n; i++) acc += s.query();
    t = now_ns() - t;
    g_sink = acc;
    return t / n;
  } catch (const std::exception &e) {
    return fail("c10s_stream_query", e);
  }
}

int c10s_synchronize(void) {
  try {
    need_init();
    g_stream->synchronize();
    return 0;
  } catch (const std::exception &e) {
    return fail("c10s_synchronize", e);
  }
}

const char *c10s_last_error(void) { return g_err.c_str(); }

}  // extern "C"

#ifdef C10_SHIM_TRY_MAIN
// Configure-time link check only (try_compile); never run.
int main(int argc, char **) {
  if (argc > 100) {
    c10s_init(0);
    double t = c10s_pool_get(0, 1) + c10s_current_stream(0, 1) + c10s_event_record(1) + c10s_event_query(1) +
               c10s_stream_query(1);
    c10s_synchronize();
    std::printf("%g %s\n", t, c10s_last_error());
  }
  return 0;
}
#endif
