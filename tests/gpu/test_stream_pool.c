/* Stream pools, dedicated, external and default streams on a real GPU:
 * lazy creation racing across threads, round-robin, priority levels and
 * clamping, PyTorch's stream ids, and device range errors. */
#include "harness.h"
#include "stream_kernels.h"
#include <limits.h>
#include <pthread.h>

#define CU(call) CHECK((call) == cudaSuccess)

static int cuda_levels(int *greatest) {
  int l = 0, g = 0;
  CU(cudaDeviceGetStreamPriorityRange(&l, &g));
  if (greatest) *greatest = g;
  int n = l - g + 1;
  return n > 4 ? 4 : n;
}

static int id_type(int64_t id) { return (int)((id >> 1) & 0xF); }
static int id_slot(int64_t id) { return (int)((id >> 5) & 31); }
static int id_device(int64_t id) { return (int)((id >> 10) & 1023); }

/* ---- must be first: the pool of device 0 is created by racing threads ---- */
enum { NT = 8, PER = 8 };
static pthread_barrier_t g_bar;
static tcuda_stream_t g_got[NT][PER];
static tcuda_status g_st[NT];

static void *grab(void *arg) {
  int t = (int)(intptr_t)arg;
  pthread_barrier_wait(&g_bar);
  for (int k = 0; k < PER; k++)
    if ((g_st[t] = tcuda_stream_from_pool(0, 0, &g_got[t][k]))) break;
  return NULL;
}

static void pool_init_races_safely(void) {
  pthread_t th[NT];
  pthread_barrier_init(&g_bar, NULL, NT);
  for (int t = 0; t < NT; t++) pthread_create(&th[t], NULL, grab, (void *)(intptr_t)t);
  for (int t = 0; t < NT; t++) pthread_join(th[t], NULL);
  pthread_barrier_destroy(&g_bar);
  for (int t = 0; t < NT; t++) CHECK_EQ_INT(g_st[t], TCUDA_SUCCESS);
  /* 64 requests over 32 slots: every slot handed out exactly twice, and the
   * same slot always names the same stream (one pool, created once). */
  int uses[32] = {0};
  struct CUstream_st *by_slot[32] = {0};
  for (int t = 0; t < NT; t++)
    for (int k = 0; k < PER; k++) {
      tcuda_stream_t s = g_got[t][k];
      int slot = id_slot(s.id);
      uses[slot]++;
      if (!by_slot[slot]) by_slot[slot] = s.handle;
      CHECK(by_slot[slot] == s.handle);
      CHECK(s.handle != NULL);
    }
  for (int i = 0; i < 32; i++) CHECK_EQ_INT(uses[i], 2);
  for (int i = 0; i < 32; i++)
    for (int j = i + 1; j < 32; j++) CHECK(by_slot[i] != by_slot[j]);
}

static void priority_range_matches_pytorch(void) {
  CHECK_OK(tcuda_set_device(0));
  int least = 99, greatest = 99, g;
  CHECK_OK(tcuda_stream_priority_range(&least, &greatest));
  int cl = 0, cg = 0;
  CU(cudaDeviceGetStreamPriorityRange(&cl, &cg));
  (void)g;
  CHECK_EQ_INT(least, cl);
  CHECK_EQ_INT(greatest, cg > -3 ? cg : -3); /* (0, max(-3, greatest)) */
  printf("  CUDA range [%d, %d], tcuda/PyTorch range (%d, %d)\n", cl, cg, least, greatest);
}

static void round_robin(void) {
  tcuda_stream_t first, s;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &first));
  CHECK_EQ_INT(first.id & 1, 1);
  CHECK_EQ_INT(id_type(first.id), 1);
  CHECK_EQ_INT(id_device(first.id), 0);
  CHECK_EQ_INT(first.device, 0);
  CHECK_EQ_INT(first.priority, 0);
  /* device 0 pool ids are PyTorch's: slot<<5 | (level+1)<<1 | 1 */
  CHECK_EQ_INT(first.id, (id_slot(first.id) << 5) | (1 << 1) | 1);
  struct CUstream_st *seen[32];
  seen[0] = first.handle;
  for (int k = 1; k < 32; k++) {
    CHECK_OK(tcuda_stream_from_pool(0, 0, &s));
    CHECK_EQ_INT(id_slot(s.id), (id_slot(first.id) + k) % 32);
    for (int j = 0; j < k; j++) CHECK(seen[j] != s.handle);
    seen[k] = s.handle;
    unsigned flags = 0;
    CU(cudaStreamGetFlags(s.handle, &flags));
    CHECK_EQ_INT(flags, cudaStreamNonBlocking);
  }
  CHECK_OK(tcuda_stream_from_pool(0, 0, &s)); /* the 33rd is the 1st again */
  CHECK(s.handle == first.handle);
  CHECK_EQ_INT(s.id, first.id);

  /* device -1 is the current device */
  int n = tcuda_device_count(), d;
  CHECK_OK(tcuda_set_device(n - 1));
  CHECK_OK(tcuda_stream_from_pool(-1, 0, &s));
  CHECK_EQ_INT(s.device, n - 1);
  CHECK_EQ_INT(id_device(s.id), n - 1);
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, n - 1);
  CHECK_OK(tcuda_set_device(0));
  if (n > 1) CHECK(s.id != first.id); /* ids are unique across devices */
}

static void priority_levels_and_clamping(void) {
  int greatest;
  int levels = cuda_levels(&greatest);
  struct CUstream_st *per_level[4] = {0};
  for (int level = 0; level < levels; level++) {
    tcuda_stream_t s;
    CHECK_OK(tcuda_stream_from_pool(0, -level, &s));
    CHECK_EQ_INT(s.priority, -level);
    CHECK_EQ_INT(id_type(s.id), level + 1);
    int p = 99, cp = 99;
    CHECK_OK(tcuda_stream_get_priority(s, &p));
    CU(cudaStreamGetPriority(s.handle, &cp));
    CHECK_EQ_INT(p, -level);
    CHECK_EQ_INT(cp, -level);
    per_level[level] = s.handle;
    for (int j = 0; j < level; j++) CHECK(per_level[j] != s.handle);
  }
  /* positive priorities fall back to level 0; very negative clamp to the top */
  int tests[][2] = {{1, 0}, {7, 0}, {INT_MAX, 0}, {-levels, -(levels - 1)}, {-100, -(levels - 1)},
                    {INT_MIN, -(levels - 1)}};
  for (size_t i = 0; i < sizeof tests / sizeof *tests; i++) {
    tcuda_stream_t s;
    CHECK_OK(tcuda_stream_from_pool(0, tests[i][0], &s));
    CHECK_EQ_INT(s.priority, tests[i][1]);
    int p = 99;
    CHECK_OK(tcuda_stream_get_priority(s, &p));
    CHECK_EQ_INT(p, tests[i][1]);
  }
  printf("  %d priority levels (CUDA greatest %d)\n", levels, greatest);
}

static void default_and_external(void) {
  int n = tcuda_device_count();
  for (int d = 0; d < n; d++) {
    tcuda_stream_t s;
    CHECK_OK(tcuda_default_stream(d, &s));
    CHECK(s.handle == NULL);
    CHECK_EQ_INT(s.id, 0);
    CHECK_EQ_INT(s.device, d);
    int done = -1, p = 9;
    CHECK_OK(tcuda_stream_synchronize(s));
    CHECK_OK(tcuda_stream_query(s, &done));
    CHECK_EQ_INT(done, 1);
    CHECK_OK(tcuda_stream_get_priority(s, &p));
    CHECK_EQ_INT(p, 0);
  }
  CHECK_OK(tcuda_set_device(0));
  cudaStream_t raw;
  CU(cudaStreamCreateWithPriority(&raw, cudaStreamNonBlocking, -1));
  tcuda_stream_t e;
  CHECK_OK(tcuda_stream_external(raw, 0, &e));
  CHECK(e.handle == raw);
  CHECK_EQ_INT(e.id, (int64_t)(intptr_t)raw);
  CHECK_EQ_INT(e.device, 0);
  int p = 9, done = -1;
  CHECK_OK(tcuda_stream_get_priority(e, &p));
  CHECK_EQ_INT(p, -1);
  CU(tct_spin_us(50000, raw));
  CHECK_OK(tcuda_stream_query(e, &done));
  CHECK_EQ_INT(done, 0);
  CHECK_OK(tcuda_stream_synchronize(e));
  CHECK_OK(tcuda_stream_query(e, &done));
  CHECK_EQ_INT(done, 1);
  CHECK_ERR(tcuda_stream_destroy(e), TCUDA_ERROR_INVALID_ARGUMENT, "cannot destroy external stream");
  CU(cudaStreamDestroy(raw)); /* still ours to destroy */
  CHECK_OK(tcuda_stream_external(NULL, -1, &e));
  CHECK(e.handle == NULL && e.id == 0 && e.device == 0);
}

static void dedicated_streams(void) {
  int l, g;
  CU(cudaDeviceGetStreamPriorityRange(&l, &g));
  tcuda_stream_t a, b, c;
  CHECK_OK(tcuda_stream_create(0, -1, TCUDA_STREAM_NON_BLOCKING, &a));
  CHECK_OK(tcuda_stream_create(0, 1000, TCUDA_STREAM_DEFAULT, &b));
  CHECK_OK(tcuda_stream_create(-1, -1000, TCUDA_STREAM_NON_BLOCKING, &c));
  CHECK(a.handle && b.handle && c.handle && a.handle != b.handle && b.handle != c.handle);
  CHECK(a.id != b.id && b.id != c.id && a.id != c.id);
  CHECK_EQ_INT(id_type(a.id), 0xE);
  CHECK_EQ_INT(a.id & 1, 1);
  CHECK_EQ_INT(a.priority, -1);
  CHECK_EQ_INT(b.priority, l); /* clamped into CUDA's range */
  CHECK_EQ_INT(c.priority, g);
  int p;
  unsigned f;
  CHECK_OK(tcuda_stream_get_priority(c, &p));
  CHECK_EQ_INT(p, g);
  CU(cudaStreamGetFlags(a.handle, &f));
  CHECK_EQ_INT(f, cudaStreamNonBlocking);
  CU(cudaStreamGetFlags(b.handle, &f));
  CHECK_EQ_INT(f, cudaStreamDefault);

  int done = -1;
  CU(tct_spin_us(50000, a.handle));
  CHECK_OK(tcuda_stream_query(a, &done));
  CHECK_EQ_INT(done, 0);
  CHECK_OK(tcuda_stream_synchronize(a));
  CHECK_OK(tcuda_stream_query(a, &done));
  CHECK_EQ_INT(done, 1);

  /* destroying the current stream puts this thread back on the default */
  CHECK_OK(tcuda_set_stream(c));
  CHECK_OK(tcuda_stream_destroy(c));
  tcuda_stream_t cur;
  CHECK_OK(tcuda_current_stream(0, &cur));
  CHECK_EQ_INT(cur.id, 0);
  CHECK(cur.handle == NULL);

  CHECK_OK(tcuda_stream_destroy(a));
  CHECK_ERR(tcuda_stream_destroy(a), TCUDA_ERROR_INVALID_ARGUMENT, "is not a live stream from tcuda_stream_create");
  tcuda_stream_t forged = b;
  forged.handle = a.handle;
  CHECK_ERR(tcuda_stream_destroy(forged), TCUDA_ERROR_INVALID_ARGUMENT, "not a live stream");
  CHECK_OK(tcuda_stream_destroy(b));
  tcuda_stream_t pool, def;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &pool));
  CHECK_OK(tcuda_default_stream(0, &def));
  CHECK_ERR(tcuda_stream_destroy(pool), TCUDA_ERROR_INVALID_ARGUMENT, "cannot destroy pool stream");
  CHECK_ERR(tcuda_stream_destroy(def), TCUDA_ERROR_INVALID_ARGUMENT, "cannot destroy the default stream");
  CHECK_OK(tcuda_stream_query(pool, &done)); /* still usable */
}

static void device_out_of_range(void) {
  int n = tcuda_device_count();
  char want[96];
  snprintf(want, sizeof want, "device %d out of range (%d device", n, n);
  tcuda_stream_t s = {.handle = NULL, .id = 42, .device = 5}, ok;
  CHECK_ERR(tcuda_stream_from_pool(n, 0, &s), TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK_ERR(tcuda_stream_create(n, 0, 0, &s), TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK_ERR(tcuda_stream_external((struct CUstream_st *)0x1000, n, &s), TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK_ERR(tcuda_default_stream(n, &s), TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK_ERR(tcuda_current_stream(n, &s), TCUDA_ERROR_INVALID_DEVICE, "tcuda_current_stream: device");
  CHECK_ERR(tcuda_current_stream(-2, &s), TCUDA_ERROR_INVALID_DEVICE, "device -2 out of range");
  CHECK(s.id == 42 && s.device == 5);
  CHECK_OK(tcuda_default_stream(0, &ok));
  tcuda_stream_t bad = ok;
  bad.device = n;
  int x = 7;
  CHECK_ERR(tcuda_set_stream(bad), TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK_ERR(tcuda_stream_query(bad, &x), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_query");
  CHECK_ERR(tcuda_stream_synchronize(bad), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_synchronize");
  CHECK_ERR(tcuda_stream_get_priority(bad, &x), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_get_priority");
  CHECK_ERR(tcuda_stream_wait_stream(ok, bad), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_wait_stream");
  CHECK_EQ_INT(x, 7);
  tcuda_stream_guard_t g;
  CHECK_ERR(tcuda_stream_guard_begin(&g, bad), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_guard_begin");
  CHECK_EQ_INT(g.active, 0);
  tcuda_event_t *e;
  CHECK_OK(tcuda_event_create(0, &e));
  CHECK_ERR(tcuda_event_record(e, &bad), TCUDA_ERROR_INVALID_DEVICE, "tcuda_event_record");
  CHECK(tcuda_event_handle(e) == NULL);
  CHECK_ERR(tcuda_stream_record_event(bad, e, NULL), TCUDA_ERROR_INVALID_DEVICE, "tcuda_stream_record_event");
  unsigned char h[64] = {0};
  tcuda_event_t *out = NULL;
  CHECK_ERR(tcuda_event_from_ipc_handle(n, h, 64, &out), TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK(out == NULL);
  tcuda_event_destroy(e);
  /* a failed call changed nothing */
  tcuda_stream_t cur;
  int d;
  CHECK_OK(tcuda_current_stream(-1, &cur));
  CHECK_EQ_INT(cur.id, 0);
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, 0);
}

int main(int argc, char **argv) {
  tc_require_gpu();
  /* pool_init_races_safely first: it needs device 0's pool not yet made. */
  static const tc_test tests[] = {T(pool_init_races_safely), T(priority_range_matches_pytorch), T(round_robin),
                                  T(priority_levels_and_clamping), T(default_and_external), T(dedicated_streams),
                                  T(device_out_of_range)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
