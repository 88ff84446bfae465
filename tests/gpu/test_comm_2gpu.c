/* comm on two GPUs: the whole suite with devices 0 and 1 on every engine
 * (auto: NVLink kernels for pairs; nccl; copy; copy without peer access).
 * Skips (77) with fewer than two GPUs. */
#include "test_comm_util.h"

static void with_engine(tcuda_comm_engine engine) {
  CHECK_OK(tcuda_comm_set_engine(engine));
  run_suite(0, 1);
  run_suite(1, 0);
  CHECK_OK(tcuda_comm_set_engine(TCUDA_COMM_ENGINE_AUTO));
}
static void test_auto(void) { with_engine(TCUDA_COMM_ENGINE_AUTO); }
static void test_nccl(void) { with_engine(TCUDA_COMM_ENGINE_NCCL); }
static void test_copy(void) { with_engine(TCUDA_COMM_ENGINE_COPY); }

/* Large and odd: the vector body and the tails of the copies and of the
 * sum, in every dtype, both directions. */
static void suite_big(int a, int b) {
  size_t nt;
  const DLDataType *types = all_types(&nt);
  for (size_t k = 0; k < nt; k++) {
    DLDataType dt = types[k];
    int64_t n = 300007;
    ten x, y;
    void *rx, *ry;
    make_filled(&x, a, dt, n, 1, 0, 4, &rx);
    make_filled(&y, b, dt, n, 1, 0, 5, &ry);
    DLManagedTensor *out[2] = {0};
    CHECK_OK(tcuda_comm_broadcast((const tcuda_dltensor_t *)&x.t, (int[]){a, b}, 2, out));
    if (out[1]) check_equal(&out[1]->dl_tensor, rx, "broadcast (big)");
    drop(out[0]);
    drop(out[1]);
    void *exp = calloc((size_t)n, esz(dt));
    for (int64_t i = 0; i < n; i++) put_sum(dt, exp, i, (int[]){4, 5}, 2);
    const DLTensor *in[2] = {&x.t, &y.t};
    for (int di = 0; di < 2; di++) {
      DLManagedTensor *o = NULL;
      CHECK_OK(tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)in, 2, di ? b : a, &o));
      if (o) check_equal(&o->dl_tensor, exp, tc_dtype_name(dt));
      drop(o);
    }
    ten_free(&x);
    ten_free(&y);
    free(rx);
    free(ry);
    free(exp);
  }
}

/* As on GPUs without peer access: copies by the copy engines, strided ones
 * staged through contiguous buffers, sums after a copy to the destination,
 * coalesced broadcasts packed and copied. */
static void test_copy_engines(void) {
  tc_comm_test_peer_off(1);
  with_engine(TCUDA_COMM_ENGINE_COPY);
  suite_big(0, 1);
  suite_big(1, 0);
  tc_comm_test_peer_off(0);
}
static void test_big_default(void) {
  suite_big(0, 1);
  suite_big(1, 0);
}

/* the same communicator cache entry serves repeated calls; another order is
 * another communicator */
static void test_nccl_orders(void) {
  CHECK_OK(tcuda_comm_set_engine(TCUDA_COMM_ENGINE_NCCL));
  for (int rep = 0; rep < 3; rep++) {
    suite_reduce(0, 1);
    suite_reduce(1, 0);
  }
  CHECK_OK(tcuda_comm_set_engine(TCUDA_COMM_ENGINE_AUTO));
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
                                  T(test_big_default),
                                  T(test_nccl_orders), T(test_stream_wrong_device)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
