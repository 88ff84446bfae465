// tcuda as torch's CUDA caching allocator (tcuda.torch.install()).
//
// A c10::cuda::CUDACachingAllocator::CUDAAllocator whose every virtual
// delegates to libtcuda's public C API (include/tcuda.h), so that torch's own
// memory API (memory_stats, snapshots, graphs, MemPool, OOM errors) works on
// tcuda's allocator, and tcuda's Python stats describe the same instance.
// Built by tcuda/torch.py against the installed torch with
// torch.utils.cpp_extension at first use; written for torch 2.11's
// interface (docs/python.md, "tcuda under torch").
//
// Locks: torch calls the allocator with the GIL held. Anything that needs
// the GIL (gathering Python frames) happens here, before libtcuda takes its
// allocator lock; the callbacks libtcuda makes under that lock (history
// context retain/release, pool filters) take only this file's own mutexes.
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <cstdio>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "tcuda.h"

namespace tcuda_glue {

namespace CCA = c10::cuda::CUDACachingAllocator;
namespace CDA = c10::CachingDeviceAllocator;
using c10::DeviceIndex;
using c10::MempoolId_t;

const char* kName = "tcuda";

std::string last_error() {
  const char* m = tcuda_last_error();
  return m && *m ? std::string(m) : std::string(tcuda_status_name(tcuda_last_status()));
}

// Any failure but OOM: torch's RuntimeError with tcuda's message.
void check(tcuda_status s, const char* what) {
  if (s == TCUDA_SUCCESS) return;
  if (s == TCUDA_ERROR_OUT_OF_MEMORY) TORCH_CHECK_WITH(OutOfMemoryError, false, last_error());
  std::string m = last_error(); // names the tcuda_* function already, unless empty
  if (m.compare(0, 6, "tcuda_") == 0) TORCH_CHECK(false, "tcuda: ", m);
  TORCH_CHECK(false, "tcuda: ", what, ": ", m);
}

[[noreturn]] void refuse(const char* what, const char* why) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "tcuda's allocator (tcuda.torch) does not support ", what, ": ", why,
                              ". See docs/python.md, \"tcuda under torch\".");
  throw 0; // not reached
}

// A raw cudaStream_t as a tcuda stream value, as include/tcuda.h defines
// external streams: id = the handle, NULL = the default stream (id 0).
inline tcuda_stream_t wrap(cudaStream_t raw, int device) {
  tcuda_stream_t s;
  s.handle = reinterpret_cast<struct CUstream_st*>(raw);
  s.id = static_cast<int64_t>(reinterpret_cast<intptr_t>(raw));
  s.device = device;
  s.priority = 0;
  return s;
}

// Whether torch splits a fresh segment of seg bytes for a request of req
// bytes at its start: the small pool (2 MiB segments) splits whenever
// anything is left, the large pool when more than 1 MiB is.
inline bool splits_fresh_segment(uint64_t seg, uint64_t req) {
  uint64_t r = (req + 511) / 512 * 512;
  if (r >= seg) return false;
  return seg <= (uint64_t{2} << 20) ? true : seg - r > (uint64_t{1} << 20);
}

// ---- history contexts: torch's GatheredContext, kept by id ----

struct CtxRec {
  std::shared_ptr<c10::GatheredContext> ctx;
  std::string compile_context = "N/A"; // torch's value outside a compiled region
  std::string user_metadata;
  bool in_trace = false; // torch keeps these frames on trace entries too, not only on the block
  int64_t refs = 0;
};

// Never destroyed: torch frees tensors during interpreter exit, after this
// file's static objects would be gone.
struct CtxTable {
  std::mutex mu;
  std::unordered_map<uint64_t, CtxRec> map;
  uint64_t next = 1;
};
CtxTable& ctxs() {
  static CtxTable* t = new CtxTable;
  return *t;
}

void ctx_retain(void*, uint64_t id) {
  CtxTable& t = ctxs();
  std::lock_guard<std::mutex> l(t.mu);
  auto it = t.map.find(id);
  if (it != t.map.end()) it->second.refs++;
}

void ctx_release(void*, uint64_t id) {
  std::shared_ptr<c10::GatheredContext> dying; // destroyed after the unlock
  CtxTable& t = ctxs();
  {
    std::lock_guard<std::mutex> l(t.mu);
    auto it = t.map.find(id);
    if (it == t.map.end()) return;
    if (--it->second.refs > 0) return;
    dying = std::move(it->second.ctx);
    t.map.erase(it);
  }
}

uint64_t ctx_new(std::shared_ptr<c10::GatheredContext> ctx, bool in_trace, std::string compile_context,
                 std::string user_md) {
  CtxTable& t = ctxs();
  std::lock_guard<std::mutex> l(t.mu);
  uint64_t id = t.next++;
  CtxRec& r = t.map[id];
  r.ctx = std::move(ctx);
  r.in_trace = in_trace;
  r.compile_context = std::move(compile_context);
  r.user_metadata = std::move(user_md);
  r.refs = 1; // the caller's
  return id;
}

CtxRec ctx_get(uint64_t id) {
  CtxTable& t = ctxs();
  std::lock_guard<std::mutex> l(t.mu);
  auto it = t.map.find(id);
  return it == t.map.end() ? CtxRec{} : it->second;
}

// Sets the thread's history context for one allocator call, then restores it.
struct ThreadContext {
  uint64_t prev;
  explicit ThreadContext(uint64_t id) : prev(tcuda_history_set_thread_context(id)) {}
  ~ThreadContext() { tcuda_history_set_thread_context(prev); }
};

thread_local std::vector<std::string> t_compile_context;

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Annotation {
  DeviceIndex device;
  int64_t time_us;
  std::vector<std::pair<std::string, std::string>> md;
};

// ---- the allocator ----

void raw_deleter_fn(void* ptr);

class TcudaAllocator : public CCA::CUDAAllocator {
 public:
  // history state (torch's recordHistory)
  std::mutex hist_mu;
  std::atomic<bool> history{false};
  std::atomic<CDA::CreateContextFn> recorder{nullptr};
  std::atomic<int> when{0};
  std::vector<std::string> skip_actions;
  size_t max_entries = 0;
  std::string user_metadata;
  std::deque<Annotation> annotations;
  std::unordered_map<void*, uint64_t> live; // block -> context of its allocation (STATE and up)
  std::atomic<size_t> live_n{0};              // live.size(), read without the lock

  std::mutex obs_mu;
  std::vector<CCA::OutOfMemoryObserver> observers;

  // sizes of blocks allocated while torch's profiler watched, for the
  // negative report at their free (libtcuda has no size-of-pointer query)
  std::mutex prof_mu;
  std::unordered_map<void*, int64_t> prof_sizes;
  std::atomic<size_t> prof_n{0};

  // torch.cuda.caching_allocator_enable(False): plain cudaMalloc/cudaFree,
  // outside tcuda and its stats, as torch's uncached mode
  std::atomic<bool> caching{true};
  std::mutex unc_mu;
  std::unordered_map<void*, int> uncached; // pointer -> device
  std::atomic<size_t> unc_n{0};

  void* malloc_uncached(size_t n, int device) {
    c10::cuda::CUDAGuard g(static_cast<DeviceIndex>(device));
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, n);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate ", n,
                       " bytes with the caching allocator disabled (torch.cuda.caching_allocator_enable(False)): "
                       "cudaMalloc failed on GPU ", device);
    }
    C10_CUDA_CHECK(e);
    std::lock_guard<std::mutex> l(unc_mu);
    uncached[p] = device;
    unc_n.store(uncached.size(), std::memory_order_relaxed);
    return p;
  }

  // true when p was an uncached allocation (now freed)
  bool free_uncached(void* p) {
    int device = -1;
    {
      std::lock_guard<std::mutex> l(unc_mu);
      auto it = uncached.find(p);
      if (it == uncached.end()) return false;
      device = it->second;
      uncached.erase(it);
      unc_n.store(uncached.size(), std::memory_order_relaxed);
    }
    c10::cuda::CUDAGuard g(static_cast<DeviceIndex>(device));
    cudaError_t e = cudaFree(p);
    if (e != cudaSuccess) (void)cudaGetLastError(); // a deleter cannot throw; the memory is gone either way
    return true;
  }

  std::mutex route_mu;
  std::map<std::pair<int, MempoolId_t>, std::unique_ptr<std::function<bool(cudaStream_t)>>> routes;
  std::map<MempoolId_t, int> pool_device; // where each pool in use lives (emptyCache(pool) names no device)
  std::pair<MempoolId_t, int> last_released{{0, 0}, -1}; // MemPool's destructor: releasePool, then emptyCache

  // MemPool(allocator=...): the other torch allocator a pool's segments come
  // from, kept alive until tcuda releases the pool after its last segment.
  struct PoolAllocator {
    std::shared_ptr<CUDAAllocator> alloc;
  };

  // The context for an allocator call, gathered before tcuda takes its lock
  // (torch's recorder takes the GIL); 0 when history wants none.
  // fallback: the context a free shows when none is gathered (torch's
  // "alloc": a block's frees show its allocation's).
  uint64_t gather(CDA::RecordContext level, std::shared_ptr<c10::GatheredContext> fallback = nullptr) {
    if (!history.load(std::memory_order_relaxed)) return 0;
    std::shared_ptr<c10::GatheredContext> ctx;
    auto fn = recorder.load();
    int w = when.load();
    if (fn && w >= static_cast<int>(level)) ctx = fn();
    if (!ctx) ctx = std::move(fallback);
    // as torch: an allocation's frames go on its trace entry from "alloc" up
    // (on the block from "state" up); a free's are gathered only for "all"
    bool in_trace = w >= static_cast<int>(CDA::RecordContext::ALLOC);
    std::string cc = t_compile_context.empty() ? std::string() : t_compile_context.back();
    bool has_cc = !cc.empty();
    std::string md;
    {
      std::lock_guard<std::mutex> l(hist_mu);
      md = user_metadata;
    }
    if (!ctx && !has_cc && md.empty()) return 0;
    return ctx_new(std::move(ctx), in_trace, has_cc ? std::move(cc) : std::string("N/A"), std::move(md));
  }

  void* malloc_on(size_t n, int device, cudaStream_t stream) {
    if (n == 0) return nullptr;
    if (C10_UNLIKELY(!caching.load(std::memory_order_relaxed))) return malloc_uncached(n, device);
    uint64_t ctx = gather(CDA::RecordContext::STATE);
    void* p = nullptr;
    tcuda_status s;
    {
      ThreadContext tc(ctx);
      s = tcuda_malloc_on(&p, n, device, wrap(stream, device));
    }
    if (s == TCUDA_SUCCESS && p) {
      if (ctx) {
        std::lock_guard<std::mutex> l(hist_mu);
        auto old = live.find(p);
        if (old != live.end()) { // a block freed without our deleter: forget its context
          uint64_t o = old->second;
          old->second = ctx;
          ctx = o;
        } else {
          live.emplace(p, ctx);
          live_n.store(live.size(), std::memory_order_relaxed);
          ctx = 0;
        }
      }
      if (ctx) ctx_release(nullptr, ctx);
      if (C10_UNLIKELY(c10::memoryProfilingEnabled())) {
        {
          std::lock_guard<std::mutex> l(prof_mu);
          prof_sizes[p] = static_cast<int64_t>(n);
          prof_n.store(prof_sizes.size(), std::memory_order_relaxed);
        }
        report(p, static_cast<int64_t>(n), device);
      }
      return p;
    }
    if (ctx) ctx_release(nullptr, ctx);
    if (s == TCUDA_SUCCESS) // a nonzero request never gives torch NULL
      TORCH_CHECK(false, "tcuda: tcuda_malloc_on returned no memory for ", n, " bytes");
    if (s == TCUDA_ERROR_OUT_OF_MEMORY) {
      // torch's shape: the message starts "CUDA out of memory. Tried to allocate"
      std::string msg = last_error();
      static const std::string pre = "tcuda_malloc_on: ";
      if (msg.compare(0, pre.size(), pre) == 0) msg.erase(0, pre.size());
      int64_t allocated = 0, reserved = 0;
      (void)tcuda_memory_allocated(device, &allocated);
      (void)tcuda_memory_reserved(device, &reserved);
      c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(n), static_cast<size_t>(allocated),
                                       static_cast<size_t>(reserved), c10::Device(c10::kCUDA, device));
      TORCH_CHECK_WITH(OutOfMemoryError, false, msg);
    }
    check(s, "tcuda_malloc_on");
    return nullptr;
  }

  void report(void* p, int64_t delta, int device) {
    int64_t allocated = 0, reserved = 0;
    (void)tcuda_memory_allocated(device, &allocated);
    (void)tcuda_memory_reserved(device, &reserved);
    c10::reportMemoryUsageToProfiler(p, delta, static_cast<size_t>(allocated), static_cast<size_t>(reserved),
                                     c10::Device(c10::kCUDA, device));
  }

  // Returns false (with tcuda's error kept) when tcuda does not own ptr.
  bool free_ptr(void* p) {
    if (!p) return true;
    if (C10_UNLIKELY(unc_n.load(std::memory_order_relaxed)) && free_uncached(p)) return true;
    uint64_t ctx = 0, block_ctx = 0;
    int device = -1;
    int64_t prof_size = 0;
    // blocks allocated while history was on keep their context until freed
    if (live_n.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> l(hist_mu);
      auto it = live.find(p);
      if (it != live.end()) {
        block_ctx = it->second;
        live.erase(it);
        live_n.store(live.size(), std::memory_order_relaxed);
      }
    }
    if (history.load(std::memory_order_relaxed))
      ctx = gather(CDA::RecordContext::ALL, block_ctx ? ctx_get(block_ctx).ctx : nullptr);
    if (C10_UNLIKELY(prof_n.load(std::memory_order_relaxed))) {
      std::lock_guard<std::mutex> l(prof_mu);
      auto it = prof_sizes.find(p);
      if (it != prof_sizes.end()) {
        prof_size = it->second;
        prof_sizes.erase(it);
        prof_n.store(prof_sizes.size(), std::memory_order_relaxed);
      }
    }
    if (C10_UNLIKELY(prof_size)) (void)tcuda_device_of(p, &device);
    tcuda_status s;
    {
      ThreadContext tc(ctx);
      s = tcuda_free(p);
    }
    if (ctx) ctx_release(nullptr, ctx);
    if (block_ctx) ctx_release(nullptr, block_ctx);
    if (C10_UNLIKELY(prof_size) && device >= 0 && s == TCUDA_SUCCESS) report(p, -prof_size, device);
    return s == TCUDA_SUCCESS;
  }

  // ---- c10::Allocator ----
  c10::DataPtr allocate(size_t n) override {
    DeviceIndex device = -1;
    C10_CUDA_CHECK(c10::cuda::GetDevice(&device));
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(device).stream();
    void* p = malloc_on(n, device, stream);
    return {p, p, &raw_deleter_fn, c10::Device(c10::kCUDA, device)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &raw_deleter_fn; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    C10_CUDA_CHECK(cudaMemcpy(dest, src, count, cudaMemcpyDeviceToDevice));
  }

  // ---- c10::DeviceAllocator ----
  bool initialized() override { return true; }
  void emptyCache(MempoolId_t mempool_id) override {
    // as torch's emptyCache: the segment frees it records carry the
    // caller's context under "all" and the user metadata always
    uint64_t ctx = gather(CDA::RecordContext::ALL);
    ThreadContext tc(ctx);
    struct Release {
      uint64_t id;
      ~Release() {
        if (id) ctx_release(nullptr, id);
      }
    } release{ctx};
    if (mempool_id.first != 0 || mempool_id.second != 0) {
      // MemPool's destructor, after its last releasePool: the unused pools'
      // free segments go, the default cache stays. A destructor must not
      // throw; a refusal (a capture under way) leaves them for a later
      // empty_cache or OOM flush.
      int device = -1;
      {
        std::lock_guard<std::mutex> l(route_mu);
        auto it = pool_device.find(mempool_id);
        if (it != pool_device.end()) device = it->second;
        else if (last_released.first == mempool_id) device = last_released.second;
      }
      if (device < 0) {
        DeviceIndex cur = -1;
        if (c10::cuda::GetDevice(&cur) == cudaSuccess) device = cur;
      }
      if (device >= 0 && tcuda_pool_empty_unused(device)) tcuda_clear_error();
      return;
    }
    // torch skips the default cache while a capture or use_mem_pool is under
    // way and does not raise; libtcuda refuses that device (INVALID_STATE)
    // and still empties the others
    tcuda_status s = tcuda_empty_cache();
    if (s == TCUDA_ERROR_INVALID_STATE) tcuda_clear_error();
    else check(s, "tcuda_empty_cache");
  }
  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream stream) override {
    if (!ptr.get() || ptr.get_deleter() != &raw_deleter_fn) return; // not ours (as torch's own skips)
    check(tcuda_record_stream(ptr.get(), wrap(stream.stream(), stream.device_index())), "tcuda_record_stream");
  }
  CDA::DeviceStats getDeviceStats(DeviceIndex device) override {
    tcuda_memory_stats_t m;
    check(tcuda_memory_stats(device, &m), "tcuda_memory_stats");
    CDA::DeviceStats d;
    auto arr = [](c10::CachingAllocator::StatArray& to, const tcuda_stat_t* from) {
      for (int i = 0; i < TCUDA_STAT_TYPES; i++) one(to[i], from[i]);
    };
    arr(d.allocation, m.allocation);
    arr(d.segment, m.segment);
    arr(d.active, m.active);
    arr(d.inactive_split, m.inactive_split);
    arr(d.allocated_bytes, m.allocated_bytes);
    arr(d.reserved_bytes, m.reserved_bytes);
    arr(d.active_bytes, m.active_bytes);
    arr(d.inactive_split_bytes, m.inactive_split_bytes);
    arr(d.requested_bytes, m.requested_bytes);
    one(d.oversize_allocations, m.oversize_allocations);
    one(d.oversize_segments, m.oversize_segments);
    d.num_alloc_retries = m.num_alloc_retries;
    d.num_ooms = m.num_ooms;
    d.num_sync_all_streams = m.num_sync_all_streams;
    d.num_device_alloc = m.num_device_alloc;
    d.num_device_free = m.num_device_free;
    d.max_split_size = m.max_split_size;
    return d;
  }
  static void one(c10::CachingAllocator::Stat& to, const tcuda_stat_t& from) {
    to.current = from.current;
    to.peak = from.peak;
    to.allocated = from.allocated;
    to.freed = from.freed;
  }
  void resetAccumulatedStats(DeviceIndex device) override {
    check(tcuda_reset_accumulated_memory_stats(device), "tcuda_reset_accumulated_memory_stats");
  }
  void resetPeakStats(DeviceIndex device) override {
    check(tcuda_reset_peak_memory_stats(device), "tcuda_reset_peak_memory_stats");
  }

  // ---- CUDAAllocator ----
  void* raw_alloc(size_t nbytes) override {
    DeviceIndex device = -1;
    C10_CUDA_CHECK(c10::cuda::GetDevice(&device));
    return malloc_on(nbytes, device, c10::cuda::getCurrentCUDAStream(device).stream());
  }
  void* raw_alloc_with_stream(size_t nbytes, cudaStream_t stream) override {
    DeviceIndex device = -1;
    C10_CUDA_CHECK(c10::cuda::GetDevice(&device));
    return malloc_on(nbytes, device, stream);
  }
  void raw_delete(void* ptr) override {
    if (!free_ptr(ptr)) TORCH_CHECK(false, "tcuda: ", last_error());
  }
  void init(int) override {}
  double getMemoryFraction(DeviceIndex device) override {
    double f = 1.0;
    check(tcuda_get_per_process_memory_fraction(device, &f), "tcuda_get_per_process_memory_fraction");
    return f;
  }
  void setMemoryFraction(double fraction, DeviceIndex device) override {
    check(tcuda_set_per_process_memory_fraction(fraction, device), "tcuda_set_per_process_memory_fraction");
  }
  std::vector<CCA::StreamSegmentSize> getExpandableSegmentSizes(DeviceIndex) override {
    return {}; // tcuda does not report its expandable segments per stream
  }
  void enable(bool value) override { caching.store(value); }
  bool isEnabled() const override { return caching.load(); }

  // Walks tcuda's snapshot; fn(segment) for each segment of `device` (-1: all).
  template <typename F>
  void each_segment(int device, F fn) {
    tcuda_snapshot_t* s = nullptr;
    check(tcuda_memory_snapshot(&s), "tcuda_memory_snapshot");
    std::unique_ptr<tcuda_snapshot_t, void (*)(tcuda_snapshot_t*)> hold(s, tcuda_snapshot_free);
    for (size_t i = 0; i < s->num_segments; i++)
      if (device < 0 || s->segments[i].device == device) fn(s->segments[i]);
  }

  void cacheInfo(DeviceIndex device, size_t* largestBlock) override {
    // as torch's: start from the device's free memory when the caller gives 0
    if (*largestBlock == 0) {
      size_t free_b = 0, total = 0;
      check(tcuda_mem_get_info(device, &free_b, &total), "tcuda_mem_get_info");
      *largestBlock = free_b;
    }
    each_segment(device, [&](const tcuda_segment_info_t& g) {
      for (size_t j = 0; j < g.num_blocks; j++)
        if (g.blocks[j].state == TCUDA_BLOCK_INACTIVE && g.blocks[j].size > *largestBlock)
          *largestBlock = g.blocks[j].size;
    });
  }
  void* getBaseAllocation(void* ptr, size_t* size) override {
    uint64_t a = reinterpret_cast<uint64_t>(ptr);
    void* base = nullptr;
    each_segment(-1, [&](const tcuda_segment_info_t& g) {
      if (!base && a >= g.address && a < g.address + g.total_size) {
        base = reinterpret_cast<void*>(g.address);
        if (size) *size = g.total_size;
      }
    });
    TORCH_CHECK(base, "tcuda: getBaseAllocation: ", ptr, " is not in any of tcuda's segments");
    return base;
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    recordStream(ptr, c10::cuda::CUDAStream(stream));
  }

  CCA::SnapshotInfo snapshot(MempoolId_t mempool_id, bool include_traces) override {
    CCA::SnapshotInfo out;
    // the history first, as torch: taking the snapshot adds its "snapshot"
    // entry, which shows only in the next snapshot's history
    if (include_traces) traces(out);
    bool any_pool = mempool_id.first == 0 && mempool_id.second == 0;
    std::unordered_map<uint64_t, uint64_t> live_copy;
    {
      std::lock_guard<std::mutex> l(hist_mu);
      for (auto& kv : live) live_copy.emplace(reinterpret_cast<uint64_t>(kv.first), kv.second);
    }
    each_segment(-1, [&](const tcuda_segment_info_t& g) {
      if (!any_pool && (g.pool_id[0] != mempool_id.first || g.pool_id[1] != mempool_id.second)) return;
      CDA::SegmentInfo si;
      si.device = static_cast<DeviceIndex>(g.device);
      si.address = g.address;
      si.total_size = g.total_size;
      si.requested_size = g.requested_size;
      si.allocated_size = g.allocated_size;
      si.active_size = g.active_size;
      si.stream = reinterpret_cast<void*>(static_cast<intptr_t>(g.stream));
      si.is_large = g.is_large != 0;
      si.is_expandable = g.is_expandable != 0;
      si.owner_private_pool_id = {g.pool_id[0], g.pool_id[1]};
      for (size_t j = 0; j < g.num_blocks; j++) {
        const tcuda_block_info_t& b = g.blocks[j];
        CDA::BlockInfo bi;
        bi.size = b.size;
        bi.requested_size = b.requested_size;
        bi.allocated = b.state == TCUDA_BLOCK_ACTIVE_ALLOCATED;
        bi.active = b.state != TCUDA_BLOCK_INACTIVE;
        if (bi.active) {
          auto it = live_copy.find(b.address);
          if (it != live_copy.end()) bi.context_when_allocated = ctx_get(it->second).ctx;
        }
        si.blocks.push_back(std::move(bi));
      }
      out.segments.push_back(std::move(si));
    });
    config(out.config_metadata);
    return out;
  }

  void traces(CCA::SnapshotInfo& out) {
    int n = tcuda_device_count();
    std::vector<std::string> skip;
    std::deque<Annotation> ann;
    {
      std::lock_guard<std::mutex> l(hist_mu);
      skip = skip_actions;
      ann = annotations;
    }
    auto skipped = [&](const char* name) {
      for (auto& s : skip)
        if (s == name) return true;
      return false;
    };
    for (int d = 0; d < n; d++) {
      std::vector<CDA::TraceEntry> dev;
      tcuda_history_entry_t* e = nullptr;
      size_t count = 0;
      check(tcuda_memory_history(d, &e, &count), "tcuda_memory_history");
      std::unique_ptr<tcuda_history_entry_t, void (*)(tcuda_history_entry_t*)> hold(e, tcuda_memory_history_free);
      // each segment's allocation context, for its free: torch keeps it on
      // the segment's first block object, which a split moves to the tail
      // and a later merge deletes, so only a segment never split shows it
      // (history.c's entry_stack has the same rule)
      struct Seg {
        uint64_t ctx, size;
        bool whole, split;
      };
      std::unordered_map<uint64_t, Seg> segs;
      for (size_t i = 0; i < count; i++) {
        const tcuda_history_entry_t& x = e[i];
        const char* name = tcuda_history_action_name(x.action);
        if (x.action == TCUDA_HISTORY_SEGMENT_ALLOC || x.action == TCUDA_HISTORY_SEGMENT_MAP)
          segs[x.addr] = Seg{x.context, x.size, x.action == TCUDA_HISTORY_SEGMENT_ALLOC, false};
        if (x.action == TCUDA_HISTORY_ALLOC) {
          auto it = segs.find(x.addr);
          if (it != segs.end() && it->second.whole) it->second.split |= splits_fresh_segment(it->second.size, x.size);
        }
        CtxRec r = x.context ? ctx_get(x.context) : CtxRec{};
        if (x.action == TCUDA_HISTORY_SEGMENT_FREE || x.action == TCUDA_HISTORY_SEGMENT_UNMAP) {
          auto it = segs.find(x.addr);
          if (!r.ctx && it != segs.end() && it->second.ctx && !it->second.split) {
            CtxRec made = ctx_get(it->second.ctx);
            r.ctx = made.ctx;
            if (!x.context) r.in_trace = made.in_trace;
          }
          if (it != segs.end() && x.action == TCUDA_HISTORY_SEGMENT_FREE) segs.erase(it);
        }
        if (skipped(name)) continue;
        bool keep = r.in_trace;
        CDA::TraceEntry te(static_cast<CDA::TraceEntry::Action>(x.action), static_cast<DeviceIndex>(d), x.addr,
                           x.size, reinterpret_cast<void*>(static_cast<intptr_t>(x.stream)), MempoolId_t{0, 0}, 0,
                           keep ? r.ctx : nullptr, r.compile_context, r.user_metadata);
        te.time_.t_ = static_cast<time_t>(x.time_us);
        dev.push_back(std::move(te));
      }
      out.device_traces.push_back(std::move(dev));
    }
    for (auto& a : ann) {
      CDA::AnnotationEntry ae(a.device, 0);
      ae.time_.t_ = static_cast<time_t>(a.time_us);
      for (auto& kv : a.md) ae.recordUserMetadata(kv.first, kv.second);
      out.external_annotations.push_back(std::move(ae));
    }
  }

  // allocator_settings: tcuda's effective options in torch's fields
  void config(CCA::AllocatorConfigInfo& c) {
    c.garbage_collection_threshold = 0;
    c.max_split_size = std::numeric_limits<size_t>::max();
    c.pinned_num_register_threads = 1;
    c.expandable_segments = false;
    c.release_lock_on_malloc = false;
    c.pinned_use_host_register = false;
    c.graph_capture_record_stream_reuse = false;
    c.roundup_power2_divisions.assign(16, 0);
    char* text = nullptr;
    if (tcuda_allocator_get_config(&text) != TCUDA_SUCCESS) {
      tcuda_clear_error();
      return;
    }
    std::string conf(text);
    tcuda_string_free(text);
    c.last_allocator_settings = conf;
    size_t pos = 0;
    while (pos <= conf.size()) {
      size_t end = conf.find(',', pos);
      if (end == std::string::npos) end = conf.size();
      std::string kv = conf.substr(pos, end - pos);
      pos = end + 1;
      size_t colon = kv.find(':');
      if (colon == std::string::npos) continue;
      std::string k = kv.substr(0, colon), v = kv.substr(colon + 1);
      try {
        if (k == "max_split_size_mb") c.max_split_size = static_cast<size_t>(std::stoull(v)) << 20;
        else if (k == "garbage_collection_threshold") c.garbage_collection_threshold = std::stod(v);
        else if (k == "expandable_segments") c.expandable_segments = v == "True" || v == "true" || v == "1";
        else if (k == "release_lock_on_cudamalloc") c.release_lock_on_malloc = v == "True" || v == "true";
        else if (k == "pinned_use_cuda_host_register") c.pinned_use_host_register = v == "True" || v == "true";
        else if (k == "pinned_num_register_threads") c.pinned_num_register_threads = std::stoull(v);
        else if (k == "roundup_power2_divisions" && !v.empty() && v[0] != '[')
          c.roundup_power2_divisions.assign(16, std::stoull(v));
      } catch (const std::exception&) {
        // a value torch's fields cannot hold stays at its default
      }
    }
  }

  // ---- pools (CUDAGraph, MemPool) ----
  static int route_filter(void* user, struct CUstream_st* stream) {
    try {
      return (*static_cast<std::function<bool(cudaStream_t)>*>(user))(reinterpret_cast<cudaStream_t>(stream)) ? 1
                                                                                                                : 0;
    } catch (...) {
      return 0;
    }
  }
  static tcuda_graph_pool_t pool_of(MempoolId_t id) {
    tcuda_graph_pool_t p;
    p.id[0] = id.first;
    p.id[1] = id.second;
    return p;
  }
  void beginAllocateToPool(DeviceIndex device, MempoolId_t id, std::function<bool(cudaStream_t)> filter) override {
    auto fn = std::make_unique<std::function<bool(cudaStream_t)>>(std::move(filter));
    tcuda_graph_pool_t p = pool_of(id);
    std::lock_guard<std::mutex> l(route_mu);
    check(tcuda_pool_begin_allocate(device, &p, route_filter, fn.get()), "tcuda_pool_begin_allocate");
    routes[{device, id}] = std::move(fn);
    pool_device[id] = device;
  }
  void endAllocateToPool(DeviceIndex device, MempoolId_t id) override {
    tcuda_graph_pool_t p = pool_of(id);
    std::lock_guard<std::mutex> l(route_mu);
    check(tcuda_pool_end_allocate(device, &p), "tcuda_pool_end_allocate");
    routes.erase({device, id}); // tcuda calls the filter no more
  }
  void releasePool(DeviceIndex device, MempoolId_t id) override {
    tcuda_graph_pool_t p = pool_of(id);
    check(tcuda_pool_release(device, &p), "tcuda_pool_release");
    int n = 1;
    if (tcuda_pool_use_count(device, &p, &n)) tcuda_clear_error();
    if (n == 0) { // forget the pool, but keep it for the emptyCache that may follow
      std::lock_guard<std::mutex> l(route_mu);
      pool_device.erase(id);
      last_released = {id, device};
    }
  }
  int getPoolUseCount(DeviceIndex device, MempoolId_t id) override {
    tcuda_graph_pool_t p = pool_of(id);
    int n = 0;
    check(tcuda_pool_use_count(device, &p, &n), "tcuda_pool_use_count");
    return n;
  }
  // tcuda's pool allocator calls: the other allocator's raw calls, which
  // remember each pointer's size and stream for raw_delete (torch's
  // CUDAPluggableAllocator does). Nothing may throw into C.
  static void* pool_alloc_alloc(void* user, size_t size, int, struct CUstream_st* stream) {
    try {
      return static_cast<PoolAllocator*>(user)->alloc->raw_alloc_with_stream(size, reinterpret_cast<cudaStream_t>(stream));
    } catch (...) {
      return nullptr;
    }
  }
  static void pool_alloc_free(void* user, void* ptr, size_t, int, struct CUstream_st*) {
    try {
      static_cast<PoolAllocator*>(user)->alloc->raw_delete(ptr);
    } catch (...) {
    }
  }
  static void pool_alloc_release(void* user) { delete static_cast<PoolAllocator*>(user); }

  // torch calls this from MemPool's constructor only, once per pool id; a
  // second allocator for the same pool is refused by tcuda itself.
  void createOrIncrefPool(DeviceIndex device, MempoolId_t id, std::shared_ptr<CUDAAllocator> allocator) override {
    tcuda_graph_pool_t p = pool_of(id);
    check(tcuda_pool_retain(device, &p), "tcuda_pool_retain");
    if (allocator && allocator.get() != this) {
      auto* holder = new PoolAllocator{allocator};
      tcuda_pool_allocator_t pa{pool_alloc_alloc, pool_alloc_free, pool_alloc_release, holder};
      tcuda_status s = tcuda_pool_set_allocator(device, &p, &pa);
      if (s != TCUDA_SUCCESS) {
        std::string msg = last_error();
        delete holder;
        (void)tcuda_pool_release(device, &p); // undo the retain above
        if (s == TCUDA_ERROR_NOT_SUPPORTED) refuse("torch.cuda.MemPool(allocator=...)", msg.c_str());
        TORCH_CHECK(false, "tcuda: ", msg);
      }
    }
    std::lock_guard<std::mutex> l(route_mu);
    pool_device[id] = device;
  }
  void setUseOnOOM(DeviceIndex device, MempoolId_t id, bool use) override {
    tcuda_graph_pool_t p = pool_of(id);
    check(tcuda_pool_set_use_on_oom(device, &p, use ? 1 : 0), "tcuda_pool_set_use_on_oom");
  }
  void setNoSplit(DeviceIndex device, MempoolId_t id) override {
    tcuda_graph_pool_t p = pool_of(id);
    check(tcuda_pool_set_no_split(device, &p), "tcuda_pool_set_no_split");
  }
  bool checkPoolLiveAllocations(DeviceIndex device, MempoolId_t id,
                                const std::unordered_set<void*>& expected) override {
    size_t found = 0;
    bool ok = true;
    each_segment(device, [&](const tcuda_segment_info_t& g) {
      if (g.pool_id[0] != id.first || g.pool_id[1] != id.second) return;
      for (size_t j = 0; j < g.num_blocks; j++)
        if (g.blocks[j].state == TCUDA_BLOCK_ACTIVE_ALLOCATED) {
          found++;
          if (!expected.count(reinterpret_cast<void*>(g.blocks[j].address))) ok = false;
        }
    });
    return ok && found == expected.size();
  }

  // ---- what tcuda cannot do ----
  CCA::ShareableHandle shareIpcHandle(void*) override {
    refuse("sharing CUDA tensors between processes (shareIpcHandle)",
           "torch's handle format is its own allocator's; use tcuda_ipc_export from C");
  }
  std::shared_ptr<void> getIpcDevPtr(std::string) override {
    refuse("opening CUDA tensors of another process (getIpcDevPtr)",
           "torch's handle format is its own allocator's; use tcuda_ipc_import from C");
  }
  std::shared_ptr<CCA::AllocatorState> getCheckpointState(DeviceIndex, MempoolId_t) override {
    refuse("getCheckpointState (cudagraph trees' pool checkpoints)",
           "it copies torch's own allocator's block structures, which tcuda does not have");
  }
  CCA::CheckpointDelta setCheckpointPoolState(DeviceIndex, std::shared_ptr<CCA::AllocatorState>) override {
    refuse("setCheckpointPoolState (cudagraph trees' pool checkpoints)",
           "it restores torch's own allocator's block structures, which tcuda does not have");
  }
  void attachAllocatorTraceTracker(CCA::AllocatorTraceTracker) override {
    // Accepted and never called: tcuda's trace hook is not public. Its one
    // user in torch, NCCL's optional buffer registration
    // (TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK), then registers only
    // the segments it finds in snapshot() when its communicator starts.
  }

  // ---- history ----
  bool isHistoryEnabled() override { return history.load(); }
  void recordHistory(bool enabled, CDA::CreateContextFn context_recorder, size_t alloc_trace_max_entries,
                     CDA::RecordContext when_, bool clearHistory, const std::vector<std::string>& skip) override {
    int n = tcuda_device_count();
    {
      std::lock_guard<std::mutex> l(hist_mu);
      skip_actions = skip;
      max_entries = alloc_trace_max_entries;
      if (clearHistory || !enabled) annotations.clear();
    }
    // torch's default is sys.maxsize: no limit, which is tcuda's 0
    size_t max = alloc_trace_max_entries > (size_t{1} << 40) ? 0 : alloc_trace_max_entries;
    for (int d = 0; d < n; d++) {
      if (clearHistory || !enabled) check(tcuda_memory_record_history(d, 0, 0, 0), "tcuda_memory_record_history");
      if (enabled) check(tcuda_memory_record_history(d, 1, max, 0), "tcuda_memory_record_history");
    }
    recorder.store(enabled ? context_recorder : nullptr);
    when.store(enabled ? static_cast<int>(when_) : 0);
    history.store(enabled);
  }
  void recordAnnotation(const std::vector<std::pair<std::string, std::string>>& md) override {
    if (!history.load()) return;
    DeviceIndex device = 0;
    (void)c10::cuda::GetDevice(&device);
    std::lock_guard<std::mutex> l(hist_mu);
    if (max_entries && annotations.size() >= max_entries) annotations.pop_front();
    annotations.push_back({device, now_us(), md});
  }
  void pushCompileContext(std::string& md) override {
    if (history.load()) t_compile_context.push_back(md);
  }
  void popCompileContext() override {
    if (!t_compile_context.empty()) t_compile_context.pop_back();
  }
  void setUserMetadata(const std::string& metadata) override {
    std::lock_guard<std::mutex> l(hist_mu);
    user_metadata = metadata;
  }
  std::string getUserMetadata() override {
    std::lock_guard<std::mutex> l(hist_mu);
    return user_metadata;
  }

  // ---- OOM observers ----
  void attachOutOfMemoryObserver(CCA::OutOfMemoryObserver observer) override {
    std::lock_guard<std::mutex> l(obs_mu);
    observers.push_back(std::move(observer));
  }
  static void on_oom(void* user, int device, size_t requested, const tcuda_memory_stats_t* stats) {
    auto* self = static_cast<TcudaAllocator*>(user);
    std::vector<CCA::OutOfMemoryObserver> obs;
    {
      std::lock_guard<std::mutex> l(self->obs_mu);
      obs = self->observers;
    }
    if (obs.empty()) return;
    // torch's arguments: the request, the limit (the fraction's, if set,
    // else the device's memory) and the device's free memory
    size_t free_b = 0, total = 0;
    if (tcuda_mem_get_info(device, &free_b, &total)) tcuda_clear_error();
    double fraction = 1.0;
    if (tcuda_get_per_process_memory_fraction(device, &fraction)) tcuda_clear_error();
    size_t limit = fraction < 1.0 ? static_cast<size_t>(fraction * static_cast<double>(total)) : total;
    (void)stats;
    for (auto& o : obs) {
      try {
        o(device, requested, limit, free_b);
      } catch (...) {
        // an observer's failure must not replace the OOM the caller gets
      }
    }
  }

  // ---- devices ----
  void enablePeerAccess(DeviceIndex dev, DeviceIndex dev_to_access) override {
    c10::cuda::CUDAGuard g(dev);
    cudaError_t err = cudaDeviceEnablePeerAccess(dev_to_access, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();
    else C10_CUDA_CHECK(err);
  }
  cudaError_t memcpyAsync(void* dst, int dstDevice, const void* src, int srcDevice, size_t count,
                          cudaStream_t stream, bool p2p_enabled) override {
    // expandable segments are cuMemMap memory: across devices without peer
    // access they need the peer copy
    if (p2p_enabled || dstDevice == srcDevice)
      return cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, stream);
    return cudaMemcpyPeerAsync(dst, dstDevice, src, srcDevice, count, stream);
  }
  std::string name() override { return kName; }
};

// Never destroyed, as torch's own allocator: torch may call it during exit.
TcudaAllocator* g_alloc = nullptr;

void raw_deleter_fn(void* ptr) {
  // A deleter cannot throw: a failed free keeps tcuda's error for
  // tcuda_last_error() and changes nothing.
  if (g_alloc) (void)g_alloc->free_ptr(ptr);
}

// ---- installation ----

bool installed() {
  return g_alloc && CCA::allocator.load() == static_cast<CCA::CUDAAllocator*>(g_alloc);
}

// Make tcuda torch's CUDA allocator. Refused (RuntimeError) when torch's
// current allocator holds device memory or is not torch's own.
void install() {
  if (installed()) return;
  CCA::CUDAAllocator* cur = CCA::allocator.load();
  if (cur && cur->initialized()) {
    std::string nm;
    try {
      nm = cur->name();
    } catch (const std::exception&) {
      nm = "?";
    }
    if (nm != "native" && nm != "cudaMallocAsync")
      throw std::runtime_error("tcuda.torch: torch's CUDA allocator was already replaced by another one (\"" + nm +
                               "\"); tcuda cannot take its place");
    int n = c10::cuda::device_count();
    for (int d = 0; d < n; d++) {
      int64_t reserved = 0;
      try {
        reserved = cur->getDeviceStats(static_cast<DeviceIndex>(d)).reserved_bytes[0].current;
      } catch (const std::exception&) {
        reserved = -1;
      }
      if (reserved != 0)
        throw std::runtime_error(
            "tcuda.torch: torch's CUDA allocator is already in use (device " + std::to_string(d) + ": " +
            (reserved < 0 ? std::string("unknown") : std::to_string(reserved)) +
            " bytes reserved); call tcuda.torch.install() (or set TCUDA_TORCH_ALLOCATOR=1) before the first CUDA "
            "tensor");
    }
  }
  std::unique_ptr<TcudaAllocator> a(new TcudaAllocator);
  int id = -1;
  if (tcuda_oom_observer_add(&TcudaAllocator::on_oom, a.get(), &id) != TCUDA_SUCCESS)
    throw std::runtime_error("tcuda.torch: " + last_error());
  if (tcuda_history_set_context_hooks(&ctx_retain, &ctx_release, nullptr) != TCUDA_SUCCESS) {
    (void)tcuda_oom_observer_remove(id);
    throw std::runtime_error("tcuda.torch: " + last_error());
  }
  g_alloc = a.release();
  CCA::allocator.store(g_alloc);
  // torch.accelerator's memory functions find the allocator through c10's registry
  c10::SetAllocator(c10::kCUDA, g_alloc, UINT8_MAX);
}

} // namespace tcuda_glue

// The glue's own entry points, called from tcuda/torch.py through ctypes
// (a plain library: building it needs no Python headers). Exceptions stop
// here; a refusal's message goes to err.
extern "C" {

__attribute__((visibility("default"))) int tcuda_glue_install(char* err, size_t errlen) {
  try {
    tcuda_glue::install();
    return 0;
  } catch (const std::exception& e) {
    if (err && errlen) std::snprintf(err, errlen, "%s", e.what());
  } catch (...) {
    if (err && errlen) std::snprintf(err, errlen, "tcuda.torch: install failed");
  }
  return 1;
}

__attribute__((visibility("default"))) int tcuda_glue_installed(void) { return tcuda_glue::installed() ? 1 : 0; }

// torch's current CUDA allocator: its name() into buf, and whether it is initialized.
__attribute__((visibility("default"))) int tcuda_glue_current_allocator(char* buf, size_t len) {
  auto* a = c10::cuda::CUDACachingAllocator::allocator.load();
  if (!a) return -1;
  try {
    if (buf && len) std::snprintf(buf, len, "%s", a->name().c_str());
    return a->initialized() ? 1 : 0;
  } catch (...) {
    return -1;
  }
}

} // extern "C"
