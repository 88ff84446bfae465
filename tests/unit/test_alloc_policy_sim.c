/* The simulated backend: the driver's address model (section 12.1), the
 * ascending model, replay of recorded addresses, capacity, the VMM calls
 * and events that complete only when told. */
#include "test_alloc_policy_util.h"
#include <unistd.h>

#define B 0x7f0000000000ull

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
  tc_backend *be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  CHECK(!strcmp(be->name, "sim"));
  CHECK_EQ_INT(seg(be, 2 * MiB), B - 66 * MiB);     /* the free slot below the driver's chunk */
  CHECK_EQ_INT(seg(be, 2 * MiB), B + 8 * MiB);      /* after the driver's 8 MiB */
  CHECK_EQ_INT(seg(be, 20 * MiB), B + 10 * MiB);    /* lowest range that fits */
  uint64_t s4 = seg(be, 20 * MiB);                  /* nothing fits: the first new chunk */
  CHECK_EQ_INT(s4, B - 512 * MiB);                  /* ends 480 MiB below the driver's */
  CHECK_EQ_INT(seg(be, 20 * MiB), B - 544 * MiB);   /* directly below the lowest chunk */
  CHECK_EQ_INT(seg(be, 2 * MiB), B - 524 * MiB);    /* small segments fill chunk tails, lowest first */
  uint64_t s7 = seg(be, 64 * MiB);
  CHECK_EQ_INT(s7, B - 608 * MiB);
  CHECK_OK(be->segment_free(be->ctx, 0, s7, 64 * MiB)); /* a released > 32 MiB chunk: reusable */
  CHECK_EQ_INT(seg(be, 32 * MiB), B - 576 * MiB);   /* top of the gap */
  CHECK_OK(be->segment_free(be->ctx, 0, s4, 20 * MiB)); /* a 32 MiB chunk: never reused */
  CHECK_EQ_INT(seg(be, 20 * MiB), B - 608 * MiB);   /* the rest of the gap */
  CHECK_EQ_INT(seg(be, 20 * MiB), B - 640 * MiB);   /* then below the lowest again, not at B-512 */
  CHECK_EQ_INT(tc_backend_sim_used(be), (2 + 2 + 20 + 20 + 2 + 32 + 20 + 20) * MiB); /* all but s4, s7 */
  tc_backend_sim_destroy(be);

  /* Two released ranges: the highest one that fits wins, not the largest. */
  be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  uint64_t g1 = seg(be, 64 * MiB), g2 = seg(be, 96 * MiB), g4 = seg(be, 128 * MiB);
  CHECK_EQ_INT(g1, B - 544 * MiB);
  CHECK_EQ_INT(g2, B - 640 * MiB);
  CHECK_EQ_INT(g4, B - 768 * MiB);
  CHECK_OK(be->segment_free(be->ctx, 0, g1, 64 * MiB));
  CHECK_OK(be->segment_free(be->ctx, 0, g4, 128 * MiB));
  CHECK_EQ_INT(seg(be, 40 * MiB), B - 544 * MiB);
  CHECK_EQ_INT(seg(be, 40 * MiB), B - 704 * MiB); /* then the lower one, from its top */
  tc_backend_sim_destroy(be);

  be = mk(TC_SIM_VA_DRIVER, 0, NULL, 1); /* streams before the first cudaMalloc */
  CHECK_EQ_INT(seg(be, 2 * MiB), B + 6 * MiB); /* no free slot; 6 MiB in use */
  CHECK_EQ_INT(seg(be, 14 * MiB), B + 8 * MiB);
  CHECK_EQ_INT(seg(be, 20 * MiB), B - 32 * MiB); /* the first new chunk sits right below */
  CHECK_EQ_INT(seg(be, 2 * MiB), B - 12 * MiB);
  tc_backend_sim_destroy(be);

  /* A 2 MiB segment that needs a new chunk gets a 64 MiB one. */
  be = mk(TC_SIM_VA_DRIVER, 0, NULL, 0);
  CHECK_EQ_INT(seg(be, 2 * MiB), B - 66 * MiB);
  CHECK_EQ_INT(seg(be, 24 * MiB), B + 8 * MiB); /* chunk 0 is full now */
  CHECK_EQ_INT(seg(be, 2 * MiB), B - 544 * MiB);
  for (int i = 1; i < 32; i++) CHECK_EQ_INT(seg(be, 2 * MiB), B - 544 * MiB + (uint64_t)i * 2 * MiB);
  CHECK_EQ_INT(seg(be, 2 * MiB), B - 608 * MiB);
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
  CHECK_EQ_INT(seg(be, 2 * MiB), B - 66 * MiB); /* list done: the model */
  tc_backend_sim_destroy(be);

  /* Through the allocator: its cudaMallocs get the recorded addresses. */
  be = mk(TC_SIM_VA_ASCENDING, 0, p, 0);
  tc_alloc *a = NULL;
  CHECK_OK(tc_alloc_create(0, be, NULL, 150109880320ull, &a));
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
