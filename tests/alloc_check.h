/* Allocator invariants, checked from a snapshot and the stats. Shared by the
 * property test and the policy fuzzer:
 *  - segments do not overlap; blocks tile their segment exactly;
 *  - each segment's allocated/active/requested sizes are its blocks' sums;
 *  - every stat's current equals a recount from the blocks, per pool;
 *  - current == allocated - freed (until a reset of the totals) and
 *    peak >= current for every stat;
 *  - allocated <= active <= reserved, and reserved is what the device holds;
 *  - each live handle is an allocated block at exactly its address;
 *  - the free-block index holds exactly the free blocks, ordered and
 *    findable (tc_alloc_self_check). */
#ifndef TC_ALLOC_CHECK_H
#define TC_ALLOC_CHECK_H
#include "alloc/alloc.h"
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

typedef struct {
  uint64_t addr, size;
} tc_check_handle;

typedef struct {
  char why[512];
  int failed;
} tc_check_result;

static void tc_check_fail(tc_check_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tc_check_fail(tc_check_result *r, const char *fmt, ...) {
  if (r->failed) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why, sizeof r->why, fmt, ap);
  va_end(ap);
  r->failed = 1;
}

#define TC_INV(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) tc_check_fail(r, __VA_ARGS__);                                                    \
  } while (0)

static void tc_check_stat(tc_check_result *r, const char *name, int pool, const tcuda_stat_t *s, int64_t recount,
                          int totals_reset) {
  TC_INV(s->current == recount, "%s[%d].current %" PRId64 ", recount from blocks %" PRId64, name, pool, s->current,
         recount);
  TC_INV(totals_reset || s->current == s->allocated - s->freed,
         "%s[%d]: current %" PRId64 " != allocated %" PRId64 " - freed %" PRId64, name, pool, s->current,
         s->allocated, s->freed);
  TC_INV(s->peak >= s->current, "%s[%d]: peak %" PRId64 " < current %" PRId64, name, pool, s->peak, s->current);
  TC_INV(s->allocated >= 0 && s->freed >= 0, "%s[%d]: negative totals", name, pool);
}

/* Check everything; on failure r->why says what. */
static void tc_check_alloc(tc_check_result *r, tc_alloc *a, const tc_backend *be, const tc_alloc_config *cfg,
                           const tc_check_handle *live, int nlive, int totals_reset) {
  char why[256];
  if (tc_alloc_self_check(a, why, sizeof why)) {
    tc_check_fail(r, "free-block index: %s", why);
    return;
  }
  tcuda_memory_stats_t st;
  tc_alloc_get_stats(a, &st);
  tcuda_snapshot_t *snap = NULL;
  if (tc_alloc_snapshot(a, &snap)) {
    tc_check_fail(r, "snapshot failed: %s", tcuda_last_error());
    return;
  }
  /* recounts, indexed like StatType: 1 = small, 2 = large, 0 = their sum */
  int64_t alloc_n[3] = {0}, alloc_b[3] = {0}, active_n[3] = {0}, active_b[3] = {0}, req_b[3] = {0};
  int64_t seg_n[3] = {0}, res_b[3] = {0}, split_n[3] = {0}, split_b[3] = {0};
  int64_t over_alloc = 0, over_seg = 0;
  uint64_t prev_end = 0;
  for (size_t i = 0; i < snap->num_segments; i++) {
    const tcuda_segment_info_t *g = &snap->segments[i];
    int pool = g->is_large ? TCUDA_STAT_LARGE_POOL : TCUDA_STAT_SMALL_POOL;
    TC_INV(i == 0 || g->address >= prev_end,
           "segment %zu at %#" PRIx64 " overlaps the previous one (ends %#" PRIx64 ")", i, g->address, prev_end);
    TC_INV(g->num_blocks > 0 && g->total_size > 0, "segment %zu is empty", i);
    prev_end = g->address + g->total_size;
    if (!g->is_expandable) {
      TC_INV(g->is_large || g->total_size == TC_SMALL_BUFFER, "small segment %zu of %" PRIu64 " bytes", i,
             g->total_size);
      seg_n[pool]++;
      if (g->total_size >= cfg->max_split_size) over_seg++;
    }
    res_b[pool] += (int64_t)g->total_size;
    uint64_t at = g->address, seg_alloc = 0, seg_active = 0, seg_req = 0;
    for (size_t j = 0; j < g->num_blocks; j++) {
      const tcuda_block_info_t *b = &g->blocks[j];
      TC_INV(b->address == at, "segment %zu block %zu at %#" PRIx64 ", expected %#" PRIx64 " (gap or overlap)", i,
             j, b->address, at);
      TC_INV(b->size > 0 && b->size % TC_MIN_BLOCK_SIZE == 0, "segment %zu block %zu size %" PRIu64, i, j, b->size);
      at += b->size;
      /* the compact policy counts a live block by its request's size, as
       * the torch policy does by pool (the same slot there) */
      int bp = pool;
      if (cfg->policy == TC_POLICY_COMPACT && b->state != TCUDA_BLOCK_INACTIVE)
        bp = tc_alloc_round_size(cfg, b->requested_size) <= TC_SMALL_SIZE ? TCUDA_STAT_SMALL_POOL
                                                                          : TCUDA_STAT_LARGE_POOL;
      if (b->state == TCUDA_BLOCK_ACTIVE_ALLOCATED) {
        alloc_n[bp]++;
        alloc_b[bp] += (int64_t)b->size;
        seg_alloc += b->size;
        TC_INV(b->requested_size <= b->size, "block %#" PRIx64 ": requested %" PRIu64 " > size %" PRIu64,
               b->address, b->requested_size, b->size);
        if (b->size >= cfg->max_split_size) over_alloc++;
      }
      if (b->state != TCUDA_BLOCK_INACTIVE) {
        active_n[bp]++;
        active_b[bp] += (int64_t)b->size;
        req_b[bp] += (int64_t)b->requested_size;
        seg_active += b->size;
        seg_req += b->requested_size;
      } else if (!g->is_expandable && g->num_blocks > 1) {
        split_n[pool]++;
        split_b[pool] += (int64_t)b->size;
      }
    }
    TC_INV(at == g->address + g->total_size, "segment %zu: blocks cover %" PRIu64 " of %" PRIu64 " bytes", i,
           at - g->address, g->total_size);
    TC_INV(g->allocated_size == seg_alloc, "segment %zu allocated_size %" PRIu64 ", blocks say %" PRIu64, i,
           g->allocated_size, seg_alloc);
    TC_INV(g->active_size == seg_active, "segment %zu active_size %" PRIu64 ", blocks say %" PRIu64, i,
           g->active_size, seg_active);
    TC_INV(g->requested_size == seg_req, "segment %zu requested_size %" PRIu64 ", blocks say %" PRIu64, i,
           g->requested_size, seg_req);
  }
  int64_t *rc[] = {alloc_n, alloc_b, active_n, active_b, req_b, seg_n, res_b, split_n, split_b};
  for (size_t k = 0; k < sizeof rc / sizeof *rc; k++) rc[k][0] = rc[k][1] + rc[k][2];
  static const char *const names[] = {"allocation", "allocated_bytes", "active", "active_bytes", "requested_bytes",
                                      "segment", "reserved_bytes", "inactive_split", "inactive_split_bytes"};
  const tcuda_stat_t *arrs[] = {st.allocation, st.allocated_bytes, st.active, st.active_bytes, st.requested_bytes,
                                st.segment, st.reserved_bytes, st.inactive_split, st.inactive_split_bytes};
  for (size_t k = 0; k < 9; k++)
    for (int p = 0; p < 3; p++) tc_check_stat(r, names[k], p, &arrs[k][p], rc[k][p], totals_reset);
  tc_check_stat(r, "oversize_allocations", 0, &st.oversize_allocations, over_alloc, totals_reset);
  tc_check_stat(r, "oversize_segments", 0, &st.oversize_segments, over_seg, totals_reset);
  /* per pool too, except under compact, whose pages all belong to the large
   * pool while small requests count in the small one */
  for (int p = 0; p < (cfg->policy == TC_POLICY_COMPACT ? 1 : 3); p++)
    TC_INV(st.allocated_bytes[p].current <= st.active_bytes[p].current &&
               st.active_bytes[p].current <= st.reserved_bytes[p].current,
           "pool %d: allocated %" PRId64 " <= active %" PRId64 " <= reserved %" PRId64 " fails", p,
           st.allocated_bytes[p].current, st.active_bytes[p].current, st.reserved_bytes[p].current);
  TC_INV((uint64_t)st.reserved_bytes[0].current == tc_backend_sim_used(be),
         "reserved %" PRId64 " but the device has %" PRIu64 " in use", st.reserved_bytes[0].current,
         tc_backend_sim_used(be));
  /* every live handle is an allocated block at exactly its address */
  TC_INV(alloc_n[0] == nlive, "%" PRId64 " allocated blocks, %d live handles", alloc_n[0], nlive);
  for (int h = 0; h < nlive && !r->failed; h++) {
    int found = 0;
    for (size_t i = 0; i < snap->num_segments && !found; i++) {
      const tcuda_segment_info_t *g = &snap->segments[i];
      if (live[h].addr < g->address || live[h].addr >= g->address + g->total_size) continue;
      for (size_t j = 0; j < g->num_blocks; j++)
        if (g->blocks[j].address == live[h].addr) {
          found = g->blocks[j].state == TCUDA_BLOCK_ACTIVE_ALLOCATED && g->blocks[j].size >= live[h].size;
          break;
        }
    }
    TC_INV(found, "live handle %#" PRIx64 " (%" PRIu64 " B) is not an allocated block", live[h].addr, live[h].size);
  }
  tc_snapshot_free(snap);
}
#undef TC_INV
#endif
