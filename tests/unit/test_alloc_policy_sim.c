/* The simulated backend: the driver's address model (measured on an H200
 * and refitted, as backend_sim.c describes), the ascending model, replay of
 * recorded addresses, capacity, the VMM calls and events that complete only
 * when told. */
#include "test_alloc_policy_util.h"
#include <unistd.h>

#define B 0x7f0000000000ull /* the ascending model's base */
#define D 0x7f0004000000ull /* the driver model's first chunk */

static tc_backend *mk(tc_sim_va va, uint64_t cap, const char *path, int streams_first) {
  tc_sim_options o = {cap, va, path, streams_first};
  tc_backend *be = NULL;
  CHECK_OK(tc_backend_sim_create(&o, &be));
  return be;
}

static uint64_t seg(tc_backend *be, uint64_t size) {
  uint64_t a = 0;
  CHECK_OK(be->segment_alloc(be->ctx, 0, size, &a));
  return a;
}

static void test_driver_model(void) {
  /* The initial layout; an allocation goes into the newest chunk with room,
   * right after that chunk's latest allocation. */
  tc_backend *be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  CHECK(!strcmp(be->name, "sim"));
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 66 * MiB);      /* the free slot below the driver's chunk */
  CHECK_EQ_INT(seg(be, 2 * MiB), D + 8 * MiB);       /* after the driver's 8 MiB */
  CHECK_EQ_INT(seg(be, 20 * MiB), D + 10 * MiB);
  CHECK_EQ_INT(seg(be, 20 * MiB), D - 512 * MiB);    /* nothing fits: a new chunk ends 480 MiB below D */
  CHECK_EQ_INT(seg(be, 20 * MiB), D - 544 * MiB);    /* directly below the lowest chunk */
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 524 * MiB);     /* the newest chunk's tail */
  CHECK_EQ_INT(seg(be, 8 * MiB), D - 522 * MiB);
  CHECK_EQ_INT(tc_backend_sim_used(be), (2 + 2 + 20 + 20 + 20 + 2 + 8) * MiB);
  tc_backend_sim_destroy(be);

  /* In a chunk, after its latest allocation even when lower space is free;
   * the lowest free run only when that does not fit. */
  be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  uint64_t big = seg(be, 196 * MiB);                 /* a 224 MiB chunk */
  CHECK_EQ_INT(big, D - 704 * MiB);
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 508 * MiB);
  CHECK_OK(be->segment_free(be->ctx, 0, big, 196 * MiB)); /* the chunk stays for the 2 MiB */
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 506 * MiB);
  CHECK_EQ_INT(seg(be, 24 * MiB), D - 504 * MiB);    /* the chunk's end */
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 704 * MiB);
  tc_backend_sim_destroy(be);

  /* Gaps between chunks: the highest one larger than the new chunk, from its
   * top; an exact fit is not taken. */
  be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  uint64_t g1 = seg(be, 64 * MiB), g2 = seg(be, 96 * MiB), g3 = seg(be, 128 * MiB), g4 = seg(be, 32 * MiB);
  CHECK_EQ_INT(g1, D - 544 * MiB);
  CHECK_EQ_INT(g2, D - 640 * MiB);
  CHECK_EQ_INT(g3, D - 768 * MiB);
  CHECK_EQ_INT(g4, D - 800 * MiB);
  CHECK_OK(be->segment_free(be->ctx, 0, g1, 64 * MiB)); /* gap of 64 MiB under the ceiling */
  CHECK_OK(be->segment_free(be->ctx, 0, g3, 128 * MiB)); /* gap of 128 MiB */
  CHECK_EQ_INT(seg(be, 64 * MiB), D - 704 * MiB);    /* the 128 MiB gap: 64 is an exact fit */
  CHECK_EQ_INT(seg(be, 40 * MiB), D - 864 * MiB);    /* two exact 64 MiB gaps: below the lowest */
  CHECK_EQ_INT(seg(be, 30 * MiB), D - 512 * MiB);    /* a 32 MiB chunk: the highest gap */
  tc_backend_sim_destroy(be);

  /* When the lowest chunk goes, the next one goes right below the lowest
   * left, reusing the range. */
  be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  CHECK_EQ_INT(seg(be, 64 * MiB), D - 544 * MiB);
  uint64_t low = seg(be, 32 * MiB);
  CHECK_EQ_INT(low, D - 576 * MiB);
  CHECK_OK(be->segment_free(be->ctx, 0, low, 32 * MiB));
  CHECK_EQ_INT(seg(be, 32 * MiB), D - 576 * MiB);
  tc_backend_sim_destroy(be);

  /* A request that is a multiple of 512 MiB is 512 MiB-aligned; the space
   * left above it is a gap like any other. */
  be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  uint64_t h1 = seg(be, 512 * MiB);
  CHECK_EQ_INT(h1, (D - 480 * MiB - 512 * MiB) / (512 * MiB) * (512 * MiB));
  CHECK_EQ_INT(seg(be, 40 * MiB), D - 544 * MiB);    /* into the gap above it */
  uint64_t h2 = seg(be, 600 * MiB);                  /* not a multiple: right below */
  CHECK_EQ_INT(h2, h1 - 608 * MiB);
  uint64_t h3 = seg(be, 1024 * MiB);
  CHECK_EQ_INT(h3, (h2 - 1024 * MiB) / (512 * MiB) * (512 * MiB));
  CHECK(h3 != h2 - 1024 * MiB);
  tc_backend_sim_destroy(be);

  be = mk(TC_SIM_VA_DRIVER, 0, NULL, 1); /* streams before the first cudaMalloc */
  CHECK_EQ_INT(seg(be, 2 * MiB), D + 6 * MiB); /* no free slot; 6 MiB in use */
  CHECK_EQ_INT(seg(be, 14 * MiB), D + 8 * MiB);
  CHECK_EQ_INT(seg(be, 20 * MiB), D - 32 * MiB); /* the first new chunk sits right below */
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 12 * MiB);
  tc_backend_sim_destroy(be);

  /* A 2 MiB segment that needs a new chunk gets a 64 MiB one. */
  be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 66 * MiB);
  CHECK_EQ_INT(seg(be, 24 * MiB), D + 8 * MiB); /* chunk 0 is full now */
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 544 * MiB);
  for (int i = 1; i < 32; i++) CHECK_EQ_INT(seg(be, 2 * MiB), D - 544 * MiB + (uint64_t)i * 2 * MiB);
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 608 * MiB);
  tc_backend_sim_destroy(be);
}

static void test_ascending_and_capacity(void) {
  tc_backend *be = mk(TC_SIM_VA_ASCENDING, 30 * MiB, NULL, 0);
  uint64_t a = seg(be, 2 * MiB), b = seg(be, 20 * MiB), x = 0;
  CHECK_EQ_INT(a, B);
  CHECK_EQ_INT(b, B + 2 * MiB);
  CHECK_EQ_INT(be->segment_alloc(be->ctx, 0, 10 * MiB, &x), TCUDA_ERROR_OUT_OF_MEMORY); /* 32 > 30 */
  uint64_t fr = 0, tot = 0;
  CHECK_OK(be->mem_info(be->ctx, 0, &fr, &tot));
  CHECK_EQ_INT(fr, 8 * MiB);
  CHECK_EQ_INT(tot, 30 * MiB);
  CHECK_ERR(be->segment_free(be->ctx, 0, a + 4096, 2 * MiB), TCUDA_ERROR_INVALID_POINTER, "unknown segment");
  CHECK_ERR(be->segment_free(be->ctx, 0, a, 4 * MiB), TCUDA_ERROR_INVALID_POINTER, "unknown segment");
  CHECK_OK(be->segment_free(be->ctx, 0, a, 2 * MiB));
  CHECK_EQ_INT(tc_backend_sim_used(be), 20 * MiB);
  CHECK_EQ_INT(seg(be, 2 * MiB), B + 22 * MiB); /* ascending never reuses */
  tc_backend_sim_destroy(be);

  tc_sim_options bad = {0, (tc_sim_va)9, NULL, 0};
  tc_backend *nb = NULL;
  CHECK_ERR(tc_backend_sim_create(&bad, &nb), TCUDA_ERROR_INVALID_ARGUMENT, "address model");
  CHECK(nb == NULL);
}

static char tmp_path[64];
static const char *write_tmp(const char *text) {
  strcpy(tmp_path, "/tmp/tcuda_sim_addrs_XXXXXX");
  int fd = mkstemp(tmp_path);
  CHECK(fd >= 0);
  CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
  close(fd);
  return tmp_path;
}

static void test_replay_addresses(void) {
  const char *p = write_tmp("# recorded on an H200\n0x7f1000000000 2097152\n\n140737488355328 0x1400000  # 20 MiB\n");
  tc_backend *be = mk(TC_SIM_VA_DRIVER, 0, p, 0);
  CHECK_EQ_INT(seg(be, 2 * MiB), 0x7f1000000000ull);
  CHECK_EQ_INT(seg(be, 20 * MiB), 140737488355328ull);
  CHECK_EQ_INT(seg(be, 2 * MiB), D - 66 * MiB); /* list done: the model */
  tc_backend_sim_destroy(be);

  /* Through the allocator: its cudaMallocs get the recorded addresses. */
  be = mk(TC_SIM_VA_ASCENDING, 0, p, 0);
  tc_alloc *a = NULL;
  CHECK_OK(tc_alloc_create(0, be, NULL, TC_H200_CAPACITY, &a));
  uint64_t x = 0, y = 0;
  CHECK_OK(tc_alloc_malloc(a, 100, 0, &x));
  CHECK_OK(tc_alloc_malloc(a, 5 * MiB, 0, &y));
  CHECK_EQ_INT(x, 0x7f1000000000ull);
  CHECK_EQ_INT(y, 140737488355328ull);
  tc_alloc_destroy(a);
  tc_backend_sim_destroy(be);
  unlink(p);

  p = write_tmp("0x100000000 4194304\n0x100200000 2097152\n0x100200000 2097152\n");
  be = mk(TC_SIM_VA_DRIVER, 0, p, 0);
  uint64_t first = seg(be, 4 * MiB), z = 0;
  CHECK_ERR(be->segment_alloc(be->ctx, 0, 2 * MiB, &z), TCUDA_ERROR_INVALID_STATE,
            "replay diverged at segment 2: recorded address 0x100200000 overlaps live segment 0x100000000");
  CHECK_EQ_INT(tc_backend_sim_used(be), 4 * MiB);
  CHECK_OK(be->segment_free(be->ctx, 0, first, 4 * MiB));
  CHECK_EQ_INT(seg(be, 2 * MiB), 0x100200000ull); /* no longer overlapping */
  CHECK_ERR(be->segment_alloc(be->ctx, 0, 4 * MiB, &z), TCUDA_ERROR_INVALID_STATE,
            "replay diverged at segment 3: recorded size 2097152, the allocator asked for 4194304");
  tc_backend_sim_destroy(be);
  unlink(p);

  tc_sim_options o = {0, TC_SIM_VA_DRIVER, NULL, 0};
  tc_backend *nb = NULL;
  p = write_tmp("0x1000 2097152\n0xZZ 5\n");
  o.addresses_path = p;
  CHECK_ERR(tc_backend_sim_create(&o, &nb), TCUDA_ERROR_PARSE, ":2: expected 'ADDR SIZE', got '0xZZ 5'");
  unlink(p);
  p = write_tmp("12345\n");
  CHECK_ERR(tc_backend_sim_create(&o, &nb), TCUDA_ERROR_PARSE, ":1:");
  unlink(p);
  p = write_tmp("0x1000 2097152 7\n");
  CHECK_ERR(tc_backend_sim_create(&o, &nb), TCUDA_ERROR_PARSE, ":1:");
  unlink(p);
  o.addresses_path = "/nonexistent/tcuda/addrs.txt";
  CHECK_ERR(tc_backend_sim_create(&o, &nb), TCUDA_ERROR_IO, "/nonexistent/tcuda/addrs.txt");
  CHECK(nb == NULL);
}

static void test_vmm(void) {
  tc_backend *be = mk(TC_SIM_VA_DRIVER, 30 * MiB, NULL, 0);
  uint64_t r = 0;
  CHECK_OK(be->va_reserve(be->ctx, 0, 200 * MiB, &r));
  CHECK_OK(be->map(be->ctx, 0, r, 20 * MiB));
  CHECK_EQ_INT(tc_backend_sim_used(be), 20 * MiB);
  CHECK_EQ_INT(be->map(be->ctx, 0, r + 20 * MiB, 20 * MiB), TCUDA_ERROR_OUT_OF_MEMORY); /* capacity */
  CHECK_ERR(be->map(be->ctx, 0, r, 2 * MiB), TCUDA_ERROR_INVALID_STATE, "already mapped");
  CHECK_ERR(be->map(be->ctx, 0, r + 199 * MiB, 4 * MiB), TCUDA_ERROR_INVALID_ARGUMENT, "outside a reservation");
  CHECK_ERR(be->unmap(be->ctx, 0, r + 20 * MiB, 2 * MiB), TCUDA_ERROR_INVALID_ARGUMENT, "not mapped");
  CHECK_ERR(be->va_release(be->ctx, 0, r, 200 * MiB), TCUDA_ERROR_INVALID_STATE, "still mapped");
  CHECK_OK(be->unmap(be->ctx, 0, r, 20 * MiB));
  CHECK_EQ_INT(tc_backend_sim_used(be), 0);
  CHECK_OK(be->va_release(be->ctx, 0, r, 200 * MiB));
  CHECK_ERR(be->va_release(be->ctx, 0, r, 200 * MiB), TCUDA_ERROR_INVALID_POINTER, "unknown reservation");

  /* The sim's own bases (measured): from 16 GiB + 32 MiB up, each at the
   * first 32 MiB boundary after the one before; a released range is reused. */
  const uint64_t RB = 0x402000000ull;
  uint64_t v1 = 0, v2 = 0, v3 = 0, v4 = 0;
  CHECK_OK(be->va_reserve(be->ctx, 0, 100 * MiB + 4096, &v1));
  CHECK_EQ_INT(v1, RB);
  CHECK_OK(be->va_reserve(be->ctx, 0, 40 * MiB, &v2));
  CHECK_EQ_INT(v2, RB + 128 * MiB);
  CHECK_OK(be->va_release(be->ctx, 0, v1, 100 * MiB + 4096));
  CHECK_OK(be->va_reserve(be->ctx, 0, 200 * MiB, &v3)); /* does not fit below v2 */
  CHECK_EQ_INT(v3, RB + 192 * MiB);
  CHECK_OK(be->va_reserve(be->ctx, 0, 64 * MiB, &v4)); /* fits in v1's old range */
  CHECK_EQ_INT(v4, RB);
  CHECK_OK(be->va_release(be->ctx, 0, v2, 40 * MiB));
  CHECK_OK(be->va_release(be->ctx, 0, v3, 200 * MiB));
  CHECK_OK(be->va_release(be->ctx, 0, v4, 64 * MiB));

  /* Recorded reservation bases come back in order, then the sim's own. */
  const uint64_t bases[] = {0x7f5000000000ull, 0x7f5000400000ull};
  CHECK_OK(tc_backend_sim_reserve_at(be, bases, 2));
  uint64_t r1 = 0, r2 = 0, r3 = 0;
  CHECK_OK(be->va_reserve(be->ctx, 0, 8 * MiB, &r1));
  CHECK_EQ_INT(r1, bases[0]);
  CHECK_ERR(be->va_reserve(be->ctx, 0, 8 * MiB, &r2), TCUDA_ERROR_INVALID_STATE,
            "replay diverged at reservation 2: recorded base 0x7f5000400000 overlaps");
  CHECK_OK(be->va_release(be->ctx, 0, r1, 8 * MiB));
  CHECK_OK(be->va_reserve(be->ctx, 0, 8 * MiB, &r2));
  CHECK_EQ_INT(r2, bases[1]);
  CHECK_OK(be->va_reserve(be->ctx, 0, 2 * MiB, &r3));
  CHECK(r3 != r1 && r3 != r2);
  CHECK_ERR(tc_backend_sim_reserve_at(be, NULL, 3), TCUDA_ERROR_INVALID_ARGUMENT, "bases");
  tc_backend_sim_destroy(be);
}

static void test_events(void) {
  tc_backend *be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  void *e1 = NULL, *e2 = NULL, *e3 = NULL;
  CHECK_OK(be->event_record(be->ctx, 0, 5, &e1));
  CHECK_OK(be->event_record(be->ctx, 0, 6, &e2));
  CHECK_EQ_INT(be->event_query(be->ctx, e1), 0);
  CHECK_OK(be->stream_synchronize(be->ctx, 0, 6)); /* only stream 6's events */
  CHECK_EQ_INT(be->event_query(be->ctx, e1), 0);
  CHECK_EQ_INT(be->event_query(be->ctx, e2), 1);
  CHECK_OK(be->event_synchronize(be->ctx, e1));
  CHECK_EQ_INT(be->event_query(be->ctx, e1), 1);
  CHECK_OK(be->event_record(be->ctx, 0, 6, &e3)); /* recorded after the sync */
  CHECK_EQ_INT(be->event_query(be->ctx, e3), 0);
  tc_backend_sim_complete_events(be);
  CHECK_EQ_INT(be->event_query(be->ctx, e3), 1);
  be->event_release(be->ctx, e1);
  be->event_release(be->ctx, e2);
  be->event_release(be->ctx, e3);
  tc_backend_sim_destroy(be);
}

TC_MAIN(T(test_driver_model), T(test_ascending_and_capacity), T(test_replay_addresses), T(test_vmm), T(test_events))
