/* comm on two GPUs: the whole suite with devices 0 and 1 on every engine
 * (auto: NVLink kernels for pairs; nccl; copy; copy engines for peers).
 * Skips (77) with fewer than two GPUs. */
#include "test_comm_util.h"

static void with_env(const char *engine, const char *p2p) {
  if (engine) setenv("TCUDA_COMM_ENGINE", engine, 1);
  if (p2p) setenv("TCUDA_COMM_P2P", p2p, 1);
  run_suite(0, 1);
  run_suite(1, 0);
  unsetenv("TCUDA_COMM_ENGINE");
  unsetenv("TCUDA_COMM_P2P");
}
static void test_auto(void) { with_env(NULL, NULL); }
static void test_nccl(void) { with_env("nccl", NULL); }
static void test_copy(void) { with_env("copy", NULL); }
static void test_copy_engines(void) { with_env("copy", "ce"); }

/* the same communicator cache entry serves repeated calls; another order is
 * another communicator */
static void test_nccl_orders(void) {
  setenv("TCUDA_COMM_ENGINE", "nccl", 1);
  for (int rep = 0; rep < 3; rep++) {
    suite_reduce(0, 1);
    suite_reduce(1, 0);
  }
  unsetenv("TCUDA_COMM_ENGINE");
}

/* a stream of device 0 given for a chunk going to device 1 */
static void test_stream_wrong_device(void) {
  ten x;
  void *r;
  make_filled(&x, 0, F32, 4, 2, 0, 1, &r);
  tcuda_stream_t s0;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &s0));
  const tcuda_stream_t *st[2] = {NULL, &s0};
  DLManagedTensor *out[2] = {0};
  size_t n = 0;
  CHECK_ERR(tcuda_comm_scatter((const tcuda_dltensor_t *)&x.t, (int[]){0, 1}, 2, NULL, 0, 0, st, out, &n),
            TCUDA_ERROR_INVALID_ARGUMENT,
            "Expected the device associated with the stream at index 1 (was 0) to match the device supplied at that "
            "index (expected 1)");
  CHECK(!out[0] && !out[1] && n == 0);
  /* broadcast_coalesced: tensors must be on devices[0] */
  const DLTensor *l[1] = {&x.t};
  CHECK_ERR(tcuda_comm_broadcast_coalesced((const tcuda_dltensor_t *const *)l, 1, (int[]){1, 0}, 2, 100, out),
            TCUDA_ERROR_INVALID_ARGUMENT, "All tensors must be on devices[0]: 1");
  ten_free(&x);
  free(r);
}

int main(int argc, char **argv) {
  tc_require_gpu();
  if (tcuda_device_count() < 2) {
    printf("SKIPPED: needs 2 GPUs, found %d (the one-GPU cases are in gpu.test_comm)\n", tcuda_device_count());
    return TC_SKIP_CODE;
  }
  static const tc_test tests[] = {T(test_auto), T(test_nccl), T(test_copy), T(test_copy_engines),
                                  T(test_nccl_orders), T(test_stream_wrong_device)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
