/* Device functions on a real GPU: current device, guards, properties,
 * device_of, fork before/after init, and no context created by restoring. */
#include "harness.h"
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static int primary_ctx_active(int dev) {
  /* Same driver entry point the library uses; no libcuda link. */
  CUresult (*fn)(CUdevice, unsigned *, int *) = NULL;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", (void **)&fn, 12000, cudaEnableDefault, &q) !=
          cudaSuccess || !fn)
    return -1;
  unsigned flags;
  int active = 0;
  fn(dev, &flags, &active);
  return active;
}

static void init_and_count(void) {
  CHECK_OK(tcuda_init());
  CHECK_OK(tcuda_init()); /* idempotent */
  CHECK(tcuda_is_initialized());
  int n = 0;
  CHECK(cudaGetDeviceCount(&n) == cudaSuccess);
  CHECK_EQ_INT(tcuda_device_count(), n);
  CHECK(tcuda_is_available());
  CHECK(!strcmp(tcuda_unavailable_reason(), ""));
  CHECK(tcuda_driver_version() >= 12000);
}

static void current_device_and_range(void) {
  int n = tcuda_device_count(), d = -5;
  CHECK_OK(tcuda_current_device(&d));
  CHECK(d >= 0 && d < n);
  CHECK_OK(tcuda_set_device(n - 1));
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, n - 1);
  char want[96];
  snprintf(want, sizeof want, "tcuda_set_device: device %d out of range (%d device%s)", n, n, n == 1 ? "" : "s");
  CHECK_ERR(tcuda_set_device(n), TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, n - 1); /* a failed set changes nothing */
  CHECK_OK(tcuda_set_device(-1));
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, n - 1);
  CHECK_ERR(tcuda_get_device_capability(n, &d, &d), TCUDA_ERROR_INVALID_DEVICE, "out of range");
  CHECK_ERR(tcuda_synchronize(n + 3), TCUDA_ERROR_INVALID_DEVICE, "device");
  CHECK_OK(tcuda_set_device(0));
}

static void guard_restores_and_nests(void) {
  int n = tcuda_device_count(), d;
  CHECK_OK(tcuda_set_device(0));
  tcuda_device_guard_t outer, inner;
  CHECK_OK(tcuda_device_guard_begin(&outer, n - 1));
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, n - 1);
  CHECK_OK(tcuda_device_guard_begin(&inner, 0));
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, 0);
  CHECK_OK(tcuda_device_guard_end(&inner));
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, n - 1);
  CHECK_OK(tcuda_device_guard_end(&outer));
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, 0);
  CHECK_OK(tcuda_device_guard_end(&outer)); /* second end is a no-op */
  CHECK_ERR(tcuda_device_guard_begin(&inner, n), TCUDA_ERROR_INVALID_DEVICE, "tcuda_device_guard_begin: device");
  int prev;
  CHECK_OK(tcuda_device_exchange(n - 1, &prev));
  CHECK_EQ_INT(prev, 0);
  CHECK_OK(tcuda_device_exchange(prev, &prev));
  CHECK_EQ_INT(prev, n - 1);
}

static void properties_match_cuda(void) {
  int n = tcuda_device_count();
  for (int d = 0; d < n; d++) {
    struct cudaDeviceProp c;
    CHECK(cudaGetDeviceProperties(&c, d) == cudaSuccess);
    tcuda_device_properties_t p = TCUDA_DEVICE_PROPERTIES_INIT;
    CHECK_OK(tcuda_get_device_properties(d, &p));
    CHECK(!strcmp(p.name, c.name));
    CHECK_EQ_INT(p.major, c.major);
    CHECK_EQ_INT(p.minor, c.minor);
    CHECK_EQ_INT(p.total_memory, c.totalGlobalMem);
    CHECK_EQ_INT(p.multi_processor_count, c.multiProcessorCount);
    CHECK_EQ_INT(p.max_threads_per_multi_processor, c.maxThreadsPerMultiProcessor);
    CHECK_EQ_INT(p.l2_cache_size, c.l2CacheSize);
    CHECK(!memcmp(p.uuid, c.uuid.bytes, 16));
    CHECK(!strncmp(p.uuid_string, "GPU-", 4) && strlen(p.uuid_string) == 40);
    CHECK_EQ_INT(p.pci_bus_id, c.pciBusID);
    char name[256];
    CHECK_OK(tcuda_get_device_name(d, name, sizeof name));
    CHECK(!strcmp(name, c.name));
    char small[5];
    CHECK_OK(tcuda_get_device_name(d, small, sizeof small)); /* truncated, terminated */
    CHECK_EQ_INT(strlen(small), strlen(c.name) < 4 ? strlen(c.name) : 4);
    int ma, mi;
    CHECK_OK(tcuda_get_device_capability(d, &ma, &mi));
    CHECK_EQ_INT(ma, c.major);
    CHECK_EQ_INT(mi, c.minor);
    size_t fr = 0, to = 0;
    CHECK_OK(tcuda_mem_get_info(d, &fr, &to));
    CHECK(fr > 0 && fr <= to && to == c.totalGlobalMem);
    CHECK_OK(tcuda_device_selftest(d));
    printf("  device %d: %s sm_%d%d, %d SMs, %.1f GiB\n", d, p.name, p.major, p.minor, p.multi_processor_count,
           p.total_memory / 1073741824.0);
  }
  /* -1 means the current device */
  tcuda_device_properties_t p = TCUDA_DEVICE_PROPERTIES_INIT;
  CHECK_OK(tcuda_get_device_properties(-1, &p));
}

static void device_of_pointers(void) {
  int n = tcuda_device_count(), d = -1;
  for (int dev = 0; dev < n; dev++) {
    void *p = NULL;
    CHECK(cudaSetDevice(dev) == cudaSuccess);
    CHECK(cudaMalloc(&p, 1 << 20) == cudaSuccess);
    CHECK_OK(tcuda_device_of((char *)p + 12345, &d));
    CHECK_EQ_INT(d, dev);
    cudaFree(p);
  }
  int host = 0;
  CHECK_ERR(tcuda_device_of(&host, &d), TCUDA_ERROR_INVALID_POINTER, "not a device pointer");
  CHECK_OK(tcuda_set_device(0));
}

/* The current device is cached per CUDA context; switches made with the
 * runtime (or driver) behind tcuda's back must still be seen at once. */
static void outside_switches_seen(void) {
  int n = tcuda_device_count(), d = -1;
  for (int round = 0; round < 3; round++)
    for (int dev = n - 1; dev >= 0; dev--) {
      CHECK(cudaSetDevice(dev) == cudaSuccess);
      CHECK_OK(tcuda_current_device(&d));
      CHECK_EQ_INT(d, dev);
      void *p = NULL;
      CHECK_OK(tcuda_malloc(&p, 4096)); /* lands on the runtime's device */
      int owner = -1;
      CHECK_OK(tcuda_device_of(p, &owner));
      CHECK_EQ_INT(owner, dev);
      CHECK_OK(tcuda_free(p));
    }
  CHECK_OK(tcuda_set_device(n - 1));
  CHECK(cudaGetDevice(&d) == cudaSuccess);
  CHECK_EQ_INT(d, n - 1);
  CHECK_OK(tcuda_set_device(0));
  CHECK_OK(tcuda_current_device(&d));
  CHECK_EQ_INT(d, 0);
}

static CUcontext ctx_current(void) {
  CUresult (*fn)(CUcontext *) = NULL;
  enum cudaDriverEntryPointQueryResult q;
  CUcontext c = NULL;
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", (void **)&fn, 12000, cudaEnableDefault, &q) ==
          cudaSuccess && fn)
    fn(&c);
  return c;
}

typedef struct {
  CUcontext before, after;
  int device, owner, ok;
} fresh_result;

static void *fresh_thread_main(void *v) {
  fresh_result *r = v;
  r->before = ctx_current();
  r->ok = tcuda_current_device(&r->device) == TCUDA_SUCCESS;
  r->after = ctx_current();
  for (int i = 0; i < 1000 && r->ok; i++) { /* cached pairs, which make no CUDA call */
    void *p = NULL;
    r->ok = tcuda_malloc(&p, 4096) == TCUDA_SUCCESS && tcuda_device_of(p, &r->owner) == TCUDA_SUCCESS &&
            tcuda_free(p) == TCUDA_SUCCESS;
  }
  return NULL;
}

/* A thread that never called CUDA has no context: the first lookup binds it
 * to the existing primary context of the runtime's device (0 for a new
 * thread), so later lookups hit the per-context cache. */
static void fresh_thread_binds_primary(void) {
  CHECK_OK(tcuda_set_device(0));
  void *warm = NULL;
  CHECK_OK(tcuda_malloc(&warm, 4096)); /* device 0's context exists, and a cached block */
  CHECK_OK(tcuda_free(warm));
  CUcontext main_ctx = ctx_current();
  CHECK(main_ctx != NULL);
  fresh_result r;
  memset(&r, 0, sizeof r);
  r.device = r.owner = -1;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, fresh_thread_main, &r) == 0);
  pthread_join(t, NULL);
  CHECK(r.before == NULL);
  CHECK(r.ok);
  CHECK_EQ_INT(r.device, 0);
  CHECK_EQ_INT(r.owner, 0);
  CHECK(r.after == main_ctx); /* device 0's primary context, no new one */
}

static void sync_and_peer(void) {
  int n = tcuda_device_count(), can = -1;
  CHECK_OK(tcuda_synchronize(-1));
  CHECK_OK(tcuda_synchronize(0));
  CHECK_OK(tcuda_can_device_access_peer(0, 0, &can));
  CHECK_EQ_INT(can, 0); /* CUDA: a device is not its own peer */
  CHECK_ERR(tcuda_can_device_access_peer(0, n, &can), TCUDA_ERROR_INVALID_DEVICE, "peer_device");
  CHECK_ERR(tcuda_can_device_access_peer(n, 0, &can), TCUDA_ERROR_INVALID_DEVICE, "device");
  if (n > 1) {
    int want = 0;
    cudaDeviceCanAccessPeer(&want, 0, 1);
    CHECK_OK(tcuda_can_device_access_peer(0, 1, &can));
    CHECK_EQ_INT(can, want);
  }
}

/* Run fn in a forked child and return its exit code. */
static int in_child(int (*fn)(void)) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static int child_uses_cuda(void) {
  if (!tcuda_is_available()) return TC_SKIP_CODE;
  int d;
  if (tcuda_current_device(&d) != TCUDA_SUCCESS) return 1;
  return tcuda_device_selftest(0) == TCUDA_SUCCESS ? 0 : 2;
}

static int child_after_init(void) {
  int d;
  tcuda_status s = tcuda_current_device(&d);
  if (s != TCUDA_ERROR_FORKED) return 1;
  if (!strstr(tcuda_last_error(), "cannot re-initialise CUDA in a forked child")) return 2;
  if (tcuda_init() != TCUDA_ERROR_FORKED) return 3;
  if (tcuda_is_initialized()) return 4;
  return 0;
}

/* A fresh process that has not initialised: context creation is lazy and
 * restoring a device never creates one. */
static int child_lazy_context(void) {
  if (!tcuda_is_available()) return TC_SKIP_CODE;
  if (tcuda_init() != TCUDA_SUCCESS) return 1;
  if (primary_ctx_active(0) != 0) return 2; /* init alone made no context */
  int d = -1;
  if (tcuda_current_device(&d) || d != 0) return 3;
  if (primary_ctx_active(0) != 0) return 4;
  int prev = -1;
  if (tcuda_device_maybe_exchange(0, &prev) || prev != 0) return 5;
  if (primary_ctx_active(0) != 0) return 6;
  /* guard begin does create it: work will follow */
  tcuda_device_guard_t g;
  if (tcuda_device_guard_begin(&g, 0)) return 7;
  if (cudaFree(0) != cudaSuccess) return 8;
  if (primary_ctx_active(0) != 1) return 9;
  if (tcuda_device_guard_end(&g)) return 10;
  if (tcuda_device_count() > 1) {
    /* restore onto device 1 that has no context: only recorded */
    if (primary_ctx_active(1) != 0) return 11;
    if (tcuda_device_maybe_exchange(1, &prev)) return 12;
    if (primary_ctx_active(1) != 0) return 13;
    if (tcuda_current_device(&d) || d != 1) return 14;
  }
  return 0;
}

static int child_after_query(void) {
  /* the parent only asked is_available: the child must get the clear error */
  int d;
  if (tcuda_current_device(&d) != TCUDA_ERROR_FORKED) return 1;
  if (tcuda_is_available()) return 2;
  if (!strstr(tcuda_unavailable_reason(), "forked child")) return 3;
  return 0;
}

static void fork_rules(void) {
  /* runs first: the parent has made no CUDA call yet */
  CHECK_EQ_INT(in_child(child_lazy_context), 0);
  CHECK_EQ_INT(in_child(child_uses_cuda), 0); /* fork before any CUDA call works */
  CHECK(tcuda_is_available());
  CHECK_EQ_INT(in_child(child_after_query), 0);
  CHECK_OK(tcuda_init());
  CHECK_EQ_INT(in_child(child_after_init), 0);
}

int main(int argc, char **argv) {
  /* Decide SKIP in a child so that the parent makes no CUDA call before
   * fork_rules, which needs a parent that has not touched the driver. */
  if (in_child(child_uses_cuda) == TC_SKIP_CODE) {
    printf("SKIPPED: no CUDA device\n");
    return TC_SKIP_CODE;
  }
  static const tc_test tests[] = {T(fork_rules), T(init_and_count), T(current_device_and_range),
                                  T(guard_restores_and_nests), T(properties_match_cuda), T(device_of_pointers),
                                  T(outside_switches_seen), T(fresh_thread_binds_primary),
                                  T(sync_and_peer)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
