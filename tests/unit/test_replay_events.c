/* A snapshot replay completes record_stream frees where torch's trace has
 * their free_completed entries, and in that order: the order decides the
 * merges, so the inactive_split figures. Histories built here; every
 * expected figure is worked out below from torch's free_block and
 * alloc_found_block (docs/allocator.md):
 *   - a 3 MiB request gets a 20 MiB segment, split: the 17 MiB rest is a
 *     new inactive split block (inactive_split_bytes +17 MiB);
 *   - a 17 MiB request takes that rest whole (-17 MiB);
 *   - a block with pending events is never merged; a completed free adds
 *     its size when its block is still split after merging, and takes off
 *     each free neighbour it merged. */
#include "harness.h"
#include "replay/torchsnap.h"

#define MIB ((uint64_t)1 << 20)
#define S 7 /* the stream every block is on */

static tc_tsop OPS[16];

static void build(tc_tsnap *h, const tc_tsop *ops, size_t n, uint32_t slots) {
  memset(h, 0, sizeof *h);
  memcpy(OPS, ops, n * sizeof *ops);
  h->ops = OPS;
  h->num_ops = n;
  h->num_slots = slots;
  for (size_t i = 0; i < n; i++) h->num_requests += ops[i].kind == HOP_ALLOC;
  tc_alloc_config_default(&h->cfg);
}

static tcuda_status at_end(void *user, tc_alloc *a, int last) {
  if (last) tc_alloc_get_stats(a, (tcuda_memory_stats_t *)user);
  return TCUDA_SUCCESS;
}

static void run(const tc_tsop *ops, size_t n, uint32_t slots, tcuda_memory_stats_t *st) {
  tc_tsnap h;
  build(&h, ops, n, slots);
  memset(st, 0, sizeof *st);
  tc_tsrun_opts o = {.checkpoint = at_end, .user = st};
  tc_tsrun_result r;
  CHECK_OK(tc_tsnap_run("test", &h, &o, &r));
  tc_tsrun_result_free(&r);
}

#define ALLOC(k, sz) {.kind = HOP_ALLOC, .slot = (k), .stream = S, .size = (sz)}
#define REQ(k) {.kind = HOP_FREE_REQ, .slot = (k), .stream = S}
#define DONE(k) {.kind = HOP_FREE_DONE, .slot = (k), .stream = S}
/* a small request: its malloc processes the events, apart from the large pool */
#define POKE(k) ALLOC(k, 512)

/* A (3 MiB) and B (17 MiB) fill one segment; both frees wait; torch
 * completes B, then A. B: A pending, no merge, still split: +17 MiB. A:
 * merges B (-17 MiB), the segment is whole again. So 17 + 17 MiB in, 17 +
 * 17 MiB out. Completed in request order instead (A first: +3, then B
 * merges A: -3) it would be 20 in and 20 out. */
static void completion_order(void) {
  const tc_tsop ops[] = {ALLOC(0, 3 * MIB), ALLOC(1, 17 * MIB), REQ(0), REQ(1), DONE(1), DONE(0), POKE(2)};
  tcuda_memory_stats_t st;
  run(ops, sizeof ops / sizeof *ops, 3, &st);
  const tcuda_stat_t *isb = &st.inactive_split_bytes[TCUDA_STAT_LARGE_POOL];
  CHECK_EQ_INT(isb->allocated, 34 * MIB);
  CHECK_EQ_INT(isb->freed, 34 * MIB);
  CHECK_EQ_INT(isb->current, 0);
  CHECK_EQ_INT(isb->peak, 17 * MIB);
  CHECK_EQ_INT(st.inactive_split[TCUDA_STAT_LARGE_POOL].allocated, 2);
  CHECK_EQ_INT(st.active_bytes[TCUDA_STAT_LARGE_POOL].current, 0);

  /* the same in request order: 20 in, 20 out */
  const tc_tsop fifo[] = {ALLOC(0, 3 * MIB), ALLOC(1, 17 * MIB), REQ(0), REQ(1), DONE(0), DONE(1), POKE(2)};
  run(fifo, sizeof fifo / sizeof *fifo, 3, &st);
  CHECK_EQ_INT(st.inactive_split_bytes[TCUDA_STAT_LARGE_POOL].allocated, 20 * MIB);
  CHECK_EQ_INT(st.inactive_split_bytes[TCUDA_STAT_LARGE_POOL].freed, 20 * MIB);
}

/* A free torch never completed does not hold back one requested after it
 * that torch did complete: B returns (active 3 MiB left, A's; B's 17 MiB
 * inactive and split), A stays pending. */
static void no_head_of_line(void) {
  const tc_tsop ops[] = {ALLOC(0, 3 * MIB), ALLOC(1, 17 * MIB), REQ(0), REQ(1), DONE(1), POKE(2)};
  tcuda_memory_stats_t st;
  run(ops, sizeof ops / sizeof *ops, 3, &st);
  CHECK_EQ_INT(st.active_bytes[TCUDA_STAT_LARGE_POOL].current, 3 * MIB);
  CHECK_EQ_INT(st.allocated_bytes[TCUDA_STAT_LARGE_POOL].current, 0);
  CHECK_EQ_INT(st.inactive_split_bytes[TCUDA_STAT_LARGE_POOL].current, 17 * MIB);
  CHECK_EQ_INT(st.inactive_split_bytes[TCUDA_STAT_LARGE_POOL].allocated, 34 * MIB);
}

/* Three frees, completed C, A, B: A's comes right after C's but A was
 * requested before C, so they cannot share a FIFO. Segment of 20 MiB:
 * A 3, B 5, C 12 MiB (B's alloc -5, C's -12). C: B pending, no merge:
 * +12. A: the same, +3. B: merges A (-3) and C (-12), whole again. So 17
 * + 12 + 3 in, 5 + 12 + 3 + 12 out. In request order it would be A +3, B
 * merges A (-3 +8), C merges B (-8): 25 in. */
static void three_frees(void) {
  const tc_tsop ops[] = {ALLOC(0, 3 * MIB), ALLOC(1, 5 * MIB), ALLOC(2, 12 * MIB), REQ(0), REQ(1), REQ(2),
                         DONE(2), DONE(0), DONE(1), POKE(3)};
  tcuda_memory_stats_t st;
  run(ops, sizeof ops / sizeof *ops, 4, &st);
  const tcuda_stat_t *isb = &st.inactive_split_bytes[TCUDA_STAT_LARGE_POOL];
  CHECK_EQ_INT(isb->allocated, (17 + 12 + 3) * MIB);
  CHECK_EQ_INT(isb->freed, (5 + 12 + 3 + 12) * MIB);
  CHECK_EQ_INT(isb->current, 0);
  CHECK_EQ_INT(isb->peak, 17 * MIB);
}

TC_MAIN(T(completion_order), T(no_head_of_line), T(three_frees))
