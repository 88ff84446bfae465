/* Fixture for the allocator engine tests: a tc_alloc on the simulated
 * backend, with the backend's device calls counted through a wrapper. */
#ifndef TEST_ALLOC_POLICY_UTIL_H
#define TEST_ALLOC_POLICY_UTIL_H
#include "harness.h"
#include "alloc/alloc.h"

#define KiB ((uint64_t)1024)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

typedef struct fx_t {
  tc_backend *sim;
  tc_backend wrap;
  tc_alloc *a;
  int seg_allocs, seg_frees, maps, unmaps, reserves, releases;
  uint64_t last_map_size, last_unmap_size;
} fx_t;
static fx_t FX;

static tcuda_status fx_segment_alloc(void *ctx, int dev, uint64_t size, uint64_t *addr) {
  FX.seg_allocs++;
  return FX.sim->segment_alloc(ctx, dev, size, addr);
}
static tcuda_status fx_segment_free(void *ctx, int dev, uint64_t addr, uint64_t size) {
  FX.seg_frees++;
  return FX.sim->segment_free(ctx, dev, addr, size);
}
static tcuda_status fx_map(void *ctx, int dev, uint64_t addr, uint64_t size) {
  FX.maps++;
  FX.last_map_size = size;
  return FX.sim->map(ctx, dev, addr, size);
}
static tcuda_status fx_unmap(void *ctx, int dev, uint64_t addr, uint64_t size) {
  FX.unmaps++;
  FX.last_unmap_size = size;
  return FX.sim->unmap(ctx, dev, addr, size);
}
static tcuda_status fx_va_reserve(void *ctx, int dev, uint64_t size, uint64_t *addr) {
  FX.reserves++;
  return FX.sim->va_reserve(ctx, dev, size, addr);
}
static tcuda_status fx_va_release(void *ctx, int dev, uint64_t addr, uint64_t size) {
  FX.releases++;
  return FX.sim->va_release(ctx, dev, addr, size);
}

/* capacity 0 = the H200's; total = the device's totalGlobalMem. */
static __attribute__((unused)) void fx_setup(const char *conf, tc_sim_va va, uint64_t capacity, uint64_t total) {
  memset(&FX, 0, sizeof FX);
  tc_sim_options o = {capacity, va, NULL, 0};
  CHECK_OK(tc_backend_sim_create(&o, &FX.sim));
  FX.wrap = *FX.sim;
  FX.wrap.segment_alloc = fx_segment_alloc;
  FX.wrap.segment_free = fx_segment_free;
  FX.wrap.map = fx_map;
  FX.wrap.unmap = fx_unmap;
  FX.wrap.va_reserve = fx_va_reserve;
  FX.wrap.va_release = fx_va_release;
  tc_alloc_config cfg;
  CHECK_OK(tc_alloc_config_parse(conf, &cfg));
  CHECK_OK(tc_alloc_create(0, &FX.wrap, &cfg, total ? total : TC_H200_CAPACITY, &FX.a));
}

static __attribute__((unused)) void fx_teardown(void) {
  tc_alloc_destroy(FX.a);
  tc_backend_sim_destroy(FX.sim);
  memset(&FX, 0, sizeof FX);
}

static __attribute__((unused)) tcuda_memory_stats_t fx_stats(void) {
  tcuda_memory_stats_t s;
  tc_alloc_get_stats(FX.a, &s);
  return s;
}

static __attribute__((unused)) uint64_t M(uint64_t size, uint64_t stream) {
  uint64_t a = 0;
  CHECK_OK(tc_alloc_malloc(FX.a, size, stream, &a));
  return a;
}
static __attribute__((unused)) void F(uint64_t addr) { CHECK_OK(tc_alloc_free(FX.a, addr)); }

#define CHECK_STAT(expr, cur, pk, al, fr)            \
  do {                                               \
    tcuda_stat_t st_ = (expr);                       \
    CHECK_EQ_INT(st_.current, (cur));                \
    CHECK_EQ_INT(st_.peak, (pk));                    \
    CHECK_EQ_INT(st_.allocated, (al));               \
    CHECK_EQ_INT(st_.freed, (fr));                   \
  } while (0)
#define CUR(expr) ((expr).current)

#endif
