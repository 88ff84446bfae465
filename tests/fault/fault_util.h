/* Helpers of the fault-injection tests (GPU): a clean start, and the checks
 * made after every fault:
 *  - the allocator's self-check (the free-block index matches the segments);
 *  - every stat's current value equals a recount from tcuda_memory_snapshot,
 *    per pool, and current == allocated - freed, peak >= current,
 *    allocated <= active <= reserved;
 *  - the number of live allocations is the one the test expects;
 *  - at the end, nothing stays reserved once all is freed and the cache
 *    emptied. */
#ifndef TC_FAULT_UTIL_H
#define TC_FAULT_UTIL_H
#include "harness.h"
#include "alloc/alloc.h"
#include "core/fault.h"
#include <cuda_runtime_api.h>
#include <inttypes.h>
#include <stdarg.h>

#define MiB ((uint64_t)1 << 20)
#define CUR(x) ((x).current)

static inline tcuda_memory_stats_t stats_of(int dev) {
  tcuda_memory_stats_t s;
  memset(&s, 0, sizeof s);
  CHECK_OK(tcuda_memory_stats(dev, &s));
  return s;
}

static inline int64_t reserved_of(int dev) { return CUR(stats_of(dev).reserved_bytes[TCUDA_STAT_ALL]); }

/* Device memory CUDA reports free: catches device memory the allocator's
 * books do not show (a segment or a mapping lost on an error path). */
static inline size_t device_free(void) {
  size_t fr = 0, tot = 0;
  CHECK(cudaMemGetInfo(&fr, &tot) == cudaSuccess);
  return fr;
}

static int fault_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fault_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s:%d: allocator check: ", file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  tc_failures++;
  return 0;
}

static void check_stat_at(const char *file, int line, const char *name, int pool, const tcuda_stat_t *s,
                          int64_t recount) {
  if (s->current != recount)
    fault_fail(file, line, "%s[%d].current %" PRId64 ", the snapshot's blocks say %" PRId64, name, pool, s->current,
               recount);
  if (s->current != s->allocated - s->freed)
    fault_fail(file, line, "%s[%d]: current %" PRId64 " != allocated %" PRId64 " - freed %" PRId64, name, pool,
               s->current, s->allocated, s->freed);
  if (s->peak < s->current)
    fault_fail(file, line, "%s[%d]: peak %" PRId64 " < current %" PRId64, name, pool, s->peak, s->current);
}

/* The checks above on device `dev`, which must have `live` allocations. */
#define CHECK_ALLOC(dev, live) check_alloc_at(__FILE__, __LINE__, (dev), (live))
static void check_alloc_at(const char *file, int line, int dev, int64_t live) {
  tc_alloc *a = NULL;
  int d = dev;
  if (tc_alloc_of_device("check_alloc", &d, &a) != TCUDA_SUCCESS) {
    fault_fail(file, line, "no allocator on device %d: %s", dev, tcuda_last_error());
    return;
  }
  char why[512];
  if (tc_alloc_self_check(a, why, sizeof why)) fault_fail(file, line, "self-check: %s", why);
  tcuda_memory_stats_t st = stats_of(dev);
  tcuda_snapshot_t *snap = NULL;
  if (tcuda_memory_snapshot(&snap) != TCUDA_SUCCESS) {
    fault_fail(file, line, "snapshot: %s", tcuda_last_error());
    return;
  }
  /* recounts indexed like the stats: 1 small, 2 large, 0 both */
  int64_t alloc_n[3] = {0}, alloc_b[3] = {0}, active_n[3] = {0}, active_b[3] = {0}, req_b[3] = {0};
  int64_t seg_n[3] = {0}, res_b[3] = {0}, split_n[3] = {0}, split_b[3] = {0};
  for (size_t i = 0; i < snap->num_segments; i++) {
    const tcuda_segment_info_t *g = &snap->segments[i];
    if (g->device != dev) continue;
    int p = g->is_large ? TCUDA_STAT_LARGE_POOL : TCUDA_STAT_SMALL_POOL;
    if (!g->is_expandable) seg_n[p]++;
    res_b[p] += (int64_t)g->total_size;
    uint64_t at = g->address;
    for (size_t j = 0; j < g->num_blocks; j++) {
      const tcuda_block_info_t *b = &g->blocks[j];
      if (b->address != at)
        fault_fail(file, line, "segment %#" PRIx64 ": a gap or overlap at block %zu", g->address, j);
      at = b->address + b->size;
      if (b->state == TCUDA_BLOCK_ACTIVE_ALLOCATED) {
        alloc_n[p]++;
        alloc_b[p] += (int64_t)b->size;
      }
      if (b->state != TCUDA_BLOCK_INACTIVE) {
        active_n[p]++;
        active_b[p] += (int64_t)b->size;
        req_b[p] += (int64_t)b->requested_size;
      } else if (!g->is_expandable && g->num_blocks > 1) {
        split_n[p]++;
        split_b[p] += (int64_t)b->size;
      }
    }
    if (at != g->address + g->total_size)
      fault_fail(file, line, "segment %#" PRIx64 ": blocks cover %" PRIu64 " of %" PRIu64 " bytes", g->address,
                 at - g->address, g->total_size);
  }
  tcuda_snapshot_free(snap);
  int64_t *rc[] = {alloc_n, alloc_b, active_n, active_b, req_b, seg_n, res_b, split_n, split_b};
  for (size_t k = 0; k < sizeof rc / sizeof *rc; k++) rc[k][0] = rc[k][1] + rc[k][2];
  static const char *const names[] = {"allocation", "allocated_bytes", "active", "active_bytes", "requested_bytes",
                                      "segment", "reserved_bytes", "inactive_split", "inactive_split_bytes"};
  const tcuda_stat_t *arrs[] = {st.allocation, st.allocated_bytes, st.active, st.active_bytes, st.requested_bytes,
                                st.segment, st.reserved_bytes, st.inactive_split, st.inactive_split_bytes};
  for (size_t k = 0; k < sizeof arrs / sizeof *arrs; k++)
    for (int p = 0; p < TCUDA_STAT_TYPES; p++) check_stat_at(file, line, names[k], p, &arrs[k][p], rc[k][p]);
  for (int p = 0; p < TCUDA_STAT_TYPES; p++) {
    int64_t al = CUR(st.allocated_bytes[p]), ac = CUR(st.active_bytes[p]), re = CUR(st.reserved_bytes[p]);
    if (!(al <= ac && ac <= re))
      fault_fail(file, line, "pool %d: allocated %" PRId64 " <= active %" PRId64 " <= reserved %" PRId64 " fails", p,
                 al, ac, re);
  }
  if (CUR(st.allocation[TCUDA_STAT_ALL]) != live)
    fault_fail(file, line, "%" PRId64 " live allocations, the test holds %" PRId64, CUR(st.allocation[TCUDA_STAT_ALL]),
               live);
}

/* No fault armed, device 0 current, its cache empty and nothing allocated. */
static inline void clean_start(void) {
  tc_require_gpu();
  tc_fault_reset();
  CHECK_OK(tcuda_set_device(0));
  CHECK_OK(tcuda_synchronize(0));
  CHECK_OK(tcuda_empty_cache());
  CHECK_ALLOC(0, 0);
  CHECK_EQ_INT(reserved_of(0), 0);
}

/* Disarm, empty the cache: everything the test took went back. */
static inline void clean_end(void) {
  tc_fault_reset();
  CHECK_OK(tcuda_synchronize(0));
  CHECK_OK(tcuda_empty_cache());
  CHECK_ALLOC(0, 0);
  CHECK_EQ_INT(reserved_of(0), 0);
  CHECK(cudaGetLastError() == cudaSuccess); /* no error left behind in CUDA's state */
}

/* Write `byte` over [p, p+n) and read back its first and last 4 KiB. */
static inline int fill_and_check(void *p, size_t n, unsigned char byte) {
  unsigned char h[4096];
  size_t k = n < sizeof h ? n : sizeof h;
  if (cudaMemset(p, byte, n) != cudaSuccess) return 0;
  for (int end = 0; end < 2; end++) {
    memset(h, (unsigned char)~byte, k);
    if (cudaMemcpy(h, (char *)p + (end ? n - k : 0), k, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
    for (size_t i = 0; i < k; i++)
      if (h[i] != byte) return 0;
  }
  return 1;
}

/* The bytes of [p, p+n) still all `byte` at both ends (see fill_and_check). */
static inline int still(void *p, size_t n, unsigned char byte) {
  unsigned char h[4096];
  size_t k = n < sizeof h ? n : sizeof h;
  for (int end = 0; end < 2; end++) {
    if (cudaMemcpy(h, (char *)p + (end ? n - k : 0), k, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
    for (size_t i = 0; i < k; i++)
      if (h[i] != byte) return 0;
  }
  return 1;
}
#endif
