/* Property tests of the caching allocator on the simulated backend: random
 * traces under several configs, and after EVERY operation the snapshot and
 * the stats must agree:
 *  - segments do not overlap; blocks tile their segment exactly;
 *  - each segment's allocated/active/requested sizes are its blocks' sums;
 *  - every stat's current equals a recount from the blocks, per pool;
 *  - current == allocated - freed and peak >= current for every stat;
 *  - allocated <= active <= reserved;
 *  - each live handle is an allocated block at exactly its address.
 * (alloc_check.h lists the invariants.) Failures print the seed, config and
 * operation index to replay them. */
#include "harness.h"
#include "alloc_check.h"

static uint64_t rng_state;
static uint64_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}
static double rnd01(void) { return (double)(rnd() >> 11) / 9007199254740992.0; }

typedef struct {
  const char *conf;
  double fraction;   /* 0 = unset */
  uint64_t capacity; /* 0 = H200 */
  tc_sim_va va;
  int grown_first; /* compact: first earn next fit with caches grown by copy */
} scenario;

static const scenario SCENARIOS[] = {
    {"", 0, 0, TC_SIM_VA_ASCENDING, 0},
    {"", 0, 0, TC_SIM_VA_DRIVER, 0},
    {"max_split_size_mb:64", 0, 0, TC_SIM_VA_ASCENDING, 0},
    {"max_split_size_mb:20,max_non_split_rounding_mb:40", 0, 0, TC_SIM_VA_DRIVER, 0},
    {"roundup_power2_divisions:4", 0, 0, TC_SIM_VA_ASCENDING, 0},
    {"roundup_power2_divisions:[1:2,64:8,>:1]", 0, 0, TC_SIM_VA_ASCENDING, 0},
    {"expandable_segments:True", 0, 0, TC_SIM_VA_ASCENDING, 0},
    {"expandable_segments:True,max_split_size_mb:64", 0, 0, TC_SIM_VA_DRIVER, 0},
    {"garbage_collection_threshold:0.6", 0.5, (uint64_t)4 << 30, TC_SIM_VA_ASCENDING, 0},
    {"garbage_collection_threshold:0.8,max_split_size_mb:32", 0.7, (uint64_t)4 << 30, TC_SIM_VA_DRIVER, 0},
    /* a small device: OOMs, flushes and retries */
    {"", 0, (uint64_t)1 << 30, TC_SIM_VA_ASCENDING, 0},
    {"max_split_size_mb:32", 0, (uint64_t)1 << 30, TC_SIM_VA_ASCENDING, 0},
    {"expandable_segments:True", 0, (uint64_t)1 << 30, TC_SIM_VA_ASCENDING, 0},
    /* tcuda's compact policy: the same invariants, with its budget's trims */
    {"policy:compact", 0, 0, TC_SIM_VA_ASCENDING, 0},
    {"policy:compact,roundup_power2_divisions:4", 0, 0, TC_SIM_VA_DRIVER, 0},
    {"policy:compact", 0.5, (uint64_t)4 << 30, TC_SIM_VA_ASCENDING, 0},
    {"policy:compact", 0, (uint64_t)1 << 30, TC_SIM_VA_ASCENDING, 0},
    /* ...and with next fit on (its rover across merges, unmaps, releases) */
    {"policy:compact", 0, 0, TC_SIM_VA_ASCENDING, 1},
    {"policy:compact", 0, (uint64_t)1 << 30, TC_SIM_VA_DRIVER, 1},
};

#define MAX_LIVE 300
#define NSTREAMS 3
static const uint64_t STREAMS[NSTREAMS] = {0, 0x7f0000001000ULL, 0x7f0000002000ULL};

/* Context of the current run, for failure messages. */
static unsigned cur_seed;
static const scenario *cur_sc;
static int cur_op;
static int run_failed;
static int accum_reset; /* reset_accumulated ran: allocated - freed no longer equals current */

#define PCHECK(cond, ...)                                                                           \
  do {                                                                                              \
    if (!(cond) && !run_failed) {                                                                   \
      fprintf(stderr, "seed %u config '%s' fraction %g op %d: %s: ", cur_seed, cur_sc->conf,        \
              cur_sc->fraction, cur_op, #cond);                                                     \
      fprintf(stderr, __VA_ARGS__);                                                                 \
      fputc('\n', stderr);                                                                          \
      tc_failures++;                                                                                \
      run_failed = 1;                                                                               \
    }                                                                                               \
  } while (0)

static void check_invariants(tc_alloc *a, const tc_backend *be, const tc_alloc_config *cfg,
                             const tc_check_handle *live, int nlive) {
  tc_check_result r = {{0}, 0};
  tc_check_alloc(&r, a, be, cfg, live, nlive, accum_reset);
  PCHECK(!r.failed, "%s", r.why);
}

static uint64_t random_size(void) {
  uint64_t r = rnd() % 100;
  if (r < 8) { /* boundaries */
    static const uint64_t edge[] = {1, 511, 512, 513, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 2 << 20,
                                    (10 << 20) - 1, 10 << 20, 20 << 20, (20 << 20) + 1, 64 << 20};
    return edge[rnd() % (sizeof edge / sizeof *edge)];
  }
  unsigned bits = (unsigned)(rnd() % 26); /* log-uniform 1 B .. 64 MiB */
  uint64_t base = (uint64_t)1 << bits;
  return base + rnd() % base;
}

/* Rollouts of 16 K/V caches grown by copy near the budget, until the pages
 * stop moving: the sign that compact's next fit is on. Frees everything. */
static void earn_next_fit(tc_alloc *a) {
  uint64_t param = 0, kv[16];
  tcuda_status s = tc_alloc_malloc(a, (30 << 20) + 4096, 0, &param);
  PCHECK(s == TCUDA_SUCCESS, "warm-up malloc: %s", tcuda_last_error());
  int64_t frees_before = 0;
  tcuda_memory_stats_t st;
  for (int roll = 0; roll < 12 && !run_failed; roll++) {
    if (roll == 10) {
      tc_alloc_get_stats(a, &st);
      frees_before = st.num_device_free;
    }
    uint64_t size = (5 << 20) + (100 << 10) + (uint64_t)roll * (64 << 10);
    for (int l = 0; l < 16; l++) s |= tc_alloc_malloc(a, size, 0, &kv[l]);
    for (int t = 0; t < 24 && !s; t++) {
      size += 768 << 10;
      for (int l = 0; l < 16 && !s; l++) {
        uint64_t grown = 0;
        s = tc_alloc_malloc(a, size, 0, &grown);
        if (!s) s = tc_alloc_free(a, kv[l]);
        kv[l] = grown;
      }
    }
    PCHECK(s == TCUDA_SUCCESS, "warm-up rollout %d: %s", roll, tcuda_last_error());
    for (int l = 0; l < 16 && !s; l++) s = tc_alloc_free(a, kv[l]);
  }
  tc_alloc_get_stats(a, &st);
  PCHECK(st.num_device_free == frees_before, "next fit did not settle the warm-up (%" PRId64 " unmaps)",
         st.num_device_free - frees_before);
  if (!run_failed) PCHECK(tc_alloc_free(a, param) == TCUDA_SUCCESS, "warm-up free: %s", tcuda_last_error());
}

static void run(unsigned seed, const scenario *sc, int nops) {
  cur_seed = seed;
  cur_sc = sc;
  cur_op = -1;
  run_failed = 0;
  accum_reset = 0;
  rng_state = 0x9E3779B97F4A7C15ULL * (seed + 1);
  tc_alloc_config cfg;
  tc_alloc_config_default(&cfg);
  tcuda_status s = tc_alloc_config_parse(sc->conf, &cfg);
  PCHECK(s == TCUDA_SUCCESS, "config: %s", tcuda_last_error());
  if (s) return;
  tc_sim_options so = {0};
  so.capacity = sc->capacity;
  so.va = sc->va;
  tc_backend *be = NULL;
  s = tc_backend_sim_create(&so, &be);
  PCHECK(s == TCUDA_SUCCESS, "sim: %s", tcuda_last_error());
  if (s) return;
  uint64_t total = sc->capacity ? sc->capacity : TC_H200_CAPACITY;
  tc_alloc *a = NULL;
  s = tc_alloc_create(0, be, &cfg, total, &a);
  PCHECK(s == TCUDA_SUCCESS, "create: %s", tcuda_last_error());
  if (s) { tc_backend_sim_destroy(be); return; }
  if (sc->fraction > 0) {
    s = tc_alloc_set_memory_fraction(a, sc->fraction);
    PCHECK(s == TCUDA_SUCCESS, "fraction: %s", tcuda_last_error());
  }
  if (sc->grown_first) earn_next_fit(a);
  tc_check_handle live[MAX_LIVE];
  int nlive = 0;
  int ooms = 0;
  for (cur_op = 0; cur_op < nops && !run_failed; cur_op++) {
    double x = rnd01();
    if ((x < 0.52 && nlive < MAX_LIVE) || nlive == 0) {
      uint64_t size = random_size(), addr = 0;
      uint64_t stream = STREAMS[rnd() % 4 == 0 ? 1 + rnd() % 2 : 0];
      s = tc_alloc_malloc(a, size, stream, &addr);
      if (s == TCUDA_ERROR_OUT_OF_MEMORY) {
        ooms++;
      } else {
        PCHECK(s == TCUDA_SUCCESS && addr != 0, "malloc(%" PRIu64 "): %s", size, tcuda_last_error());
        if (!s) live[nlive++] = (tc_check_handle){addr, size};
      }
    } else if (x < 0.90) {
      int h = (int)(rnd() % (uint64_t)nlive);
      if (rnd() % 8 == 0) { /* used on another stream: the free stays pending */
        s = tc_alloc_record_stream(a, live[h].addr, STREAMS[1 + rnd() % 2]);
        PCHECK(s == TCUDA_SUCCESS, "record_stream: %s", tcuda_last_error());
      }
      s = tc_alloc_free(a, live[h].addr);
      PCHECK(s == TCUDA_SUCCESS, "free(%#" PRIx64 "): %s", live[h].addr, tcuda_last_error());
      live[h] = live[--nlive];
    } else if (x < 0.95) {
      tc_backend_sim_complete_events(be);
    } else if (x < 0.975) {
      s = tc_alloc_empty_cache(a);
      PCHECK(s == TCUDA_SUCCESS, "empty_cache: %s", tcuda_last_error());
    } else {
      tc_alloc_reset_peak(a);
    }
    if (cur_op == nops * 3 / 4) { /* once: the totals identity is checked up to here */
      tc_alloc_reset_accumulated(a);
      tcuda_memory_stats_t st;
      tc_alloc_get_stats(a, &st);
      PCHECK(st.allocation[0].allocated == 0 && st.reserved_bytes[2].freed == 0 && st.num_device_alloc == 0 &&
                 st.num_sync_all_streams == 0 && st.num_ooms == 0,
             "reset_accumulated left totals");
      accum_reset = 1;
    }
    check_invariants(a, be, &cfg, live, nlive);
    if (run_failed) break;
  }
  {
    tcuda_memory_stats_t st;
    tc_alloc_get_stats(a, &st);
    printf("  seed %u '%s'%s (%" PRIu64 " GiB device): %d ops, %d OOMs, reserved peak %" PRId64 " MiB, %" PRId64 " cudaMallocs, %" PRId64
           " syncs, oversize %" PRId64 "\n",
           seed, sc->conf, sc->grown_first ? " after next fit was earned" : "", (uint64_t)((sc->capacity ? sc->capacity : TC_H200_CAPACITY) >> 30), cur_op, ooms, st.reserved_bytes[0].peak >> 20,
           st.num_device_alloc, st.num_sync_all_streams, st.oversize_allocations.allocated);
  }
  /* freeing everything and emptying the cache returns every byte */
  while (nlive > 0 && !run_failed) {
    s = tc_alloc_free(a, live[--nlive].addr);
    PCHECK(s == TCUDA_SUCCESS, "final free: %s", tcuda_last_error());
  }
  tc_backend_sim_complete_events(be);
  s = tc_alloc_empty_cache(a);
  PCHECK(s == TCUDA_SUCCESS, "final empty_cache: %s", tcuda_last_error());
  tcuda_memory_stats_t st;
  tc_alloc_get_stats(a, &st);
  PCHECK(st.reserved_bytes[0].current == 0 && st.allocation[0].current == 0 && st.active[0].current == 0,
         "after freeing everything: reserved %" PRId64 ", allocations %" PRId64 ", active %" PRId64,
         st.reserved_bytes[0].current, st.allocation[0].current, st.active[0].current);
  PCHECK(tc_backend_sim_used(be) == 0, "device still has %" PRIu64 " bytes in use", tc_backend_sim_used(be));
  if (sc->capacity && sc->capacity <= ((uint64_t)1 << 30) && !sc->fraction)
    PCHECK(ooms > 0 || st.num_ooms > 0, "a 1 GiB device never ran out of memory (%d)", ooms);
  tc_alloc_destroy(a);
  tc_backend_sim_destroy(be);
}

static int nops_for_env(void) {
  const char *e = getenv("TCUDA_PROPERTY_OPS");
  int n = e ? atoi(e) : 0;
  return n > 0 ? n : 3000;
}

static void test_random_traces(void) {
  int nops = nops_for_env();
  for (size_t i = 0; i < sizeof SCENARIOS / sizeof *SCENARIOS; i++)
    for (unsigned seed = 1; seed <= 3; seed++) run(seed, &SCENARIOS[i], nops);
}

TC_MAIN(T(test_random_traces))
