// The few c10 CUDA allocator entry points bench_alloc needs, behind a C ABI.
// Exceptions must not cross into C: each entry point catches and records.
#include "c10_alloc_shim.h"

#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdio>
#include <exception>
#include <string>

// libtorch_cuda registers this hook when it loads; with libc10_cuda alone
// the default throws from a noexcept path (the DataPtr deleter calls
// MaybeSetDevice) and the process aborts. Exported by libc10_cuda, not
// declared in its headers.
namespace c10::cuda::_internal {
C10_CUDA_API void setHasPrimaryContext(bool (*func)(DeviceIndex));
}

namespace {
thread_local std::string g_err;
// The bench has made device 0's context before torch is used.
bool has_primary_context(c10::DeviceIndex) { return true; }
namespace cca = c10::cuda::CUDACachingAllocator;

int fail(const char *what, const std::exception &e) {
  g_err = std::string(what) + ": " + e.what();
  // c10 messages carry a long C++ backtrace; the first line is the message.
  auto nl = g_err.find('\n');
  if (nl != std::string::npos) g_err.resize(nl);
  return -1;
}
}  // namespace

extern "C" {

int c10_init(int ndev) {
  try {
    c10::cuda::_internal::setHasPrimaryContext(has_primary_context);
    cca::init(ndev);
    return 0;
  } catch (const std::exception &e) {
    return fail("c10_init", e);
  }
}

void *c10_raw_alloc(size_t size, void *stream) {
  try {
    return cca::raw_alloc_with_stream(size, static_cast<cudaStream_t>(stream));
  } catch (const std::exception &e) {
    fail("c10_raw_alloc", e);
    return nullptr;
  }
}

void c10_raw_delete(void *ptr) {
  try {
    cca::raw_delete(ptr);
  } catch (const std::exception &e) {
    fail("c10_raw_delete", e);
  }
}

int c10_cross_stream_round(size_t size, void *alloc_stream, void *use_stream) {
  try {
    auto a = c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(alloc_stream), 0);
    auto u = c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(use_stream), 0);
    // not CUDAStreamGuard: its inline guard implementation needs cudart
    // symbols that the shim does not link
    auto prev = c10::cuda::getCurrentCUDAStream(0);
    c10::cuda::setCurrentCUDAStream(a);
    {
      c10::DataPtr p = cca::get()->allocate(size);
      cca::recordStream(p, u);
    }  // p's deleter frees it here, with an event on u
    c10::cuda::setCurrentCUDAStream(prev);
    return 0;
  } catch (const std::exception &e) {
    return fail("c10_cross_stream_round", e);
  }
}

int c10_stats(int device, c10_shim_stats *out) {
  try {
    auto st = cca::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const size_t all = 0;  // StatType::AGGREGATE
    out->allocated_current = st.allocated_bytes[all].current;
    out->allocated_peak = st.allocated_bytes[all].peak;
    out->reserved_current = st.reserved_bytes[all].current;
    out->reserved_peak = st.reserved_bytes[all].peak;
    out->segment_current = st.segment[all].current;
    out->num_device_alloc = st.num_device_alloc;
    out->num_device_free = st.num_device_free;
    return 0;
  } catch (const std::exception &e) {
    return fail("c10_stats", e);
  }
}

int c10_empty_cache(void) {
  try {
    cca::emptyCache();
    return 0;
  } catch (const std::exception &e) {
    return fail("c10_empty_cache", e);
  }
}

int c10_reset_peak(int device) {
  try {
    cca::resetPeakStats(static_cast<c10::DeviceIndex>(device));
    return 0;
  } catch (const std::exception &e) {
    return fail("c10_reset_peak", e);
  }
}

int c10_set_settings(const char *conf) {
  try {
    c10::CachingAllocator::setAllocatorSettings(conf ? conf : "");
    return 0;
  } catch (const std::exception &e) {
    return fail("c10_set_settings", e);
  }
}

const char *c10_last_error(void) { return g_err.c_str(); }

}  // extern "C"

#ifdef C10_SHIM_TRY_MAIN
// Configure-time link check only (try_compile); never run.
int main(int argc, char **) {
  if (argc > 100) {
    c10_shim_stats s;
    c10_init(1);
    c10_raw_delete(c10_raw_alloc(1, nullptr));
    c10_cross_stream_round(1, nullptr, nullptr);
    c10_stats(0, &s);
    c10_empty_cache();
    c10_reset_peak(0);
    c10_set_settings("");
    std::puts(c10_last_error());
  }
  return 0;
}
#endif
