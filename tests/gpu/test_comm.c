/* comm on one GPU: devices [0] and [0, 0] where PyTorch accepts them
 * (views, copy paths, host sources and host gathers), every dtype, strided
 * inputs, and the errors that need CUDA. Compared element by element with
 * host references. */
#include "test_comm_util.h"

static void test_suite_one_gpu(void) { run_suite(0, 0); }

static void test_suite_engine_copy(void) {
  CHECK_OK(tcuda_comm_set_engine(TCUDA_COMM_ENGINE_COPY));
  suite_reduce(0, 0);
  suite_coalesced(0, 0);
  CHECK_OK(tcuda_comm_set_engine(TCUDA_COMM_ENGINE_AUTO));
}

static void test_gpu_errors(void) {
  int n = tcuda_device_count();
  ten x, y;
  void *rx, *ry;
  make_filled(&x, 0, F32, 4, 2, 0, 1, &rx);
  make_filled(&y, 0, F32, 4, 2, 0, 2, &ry);
  DLManagedTensor *out[4] = {0};
  size_t nout = 0;
  int bad = n; /* first index past the last device */
  char want[64];
  snprintf(want, sizeof want, "device %d out of range", bad);
  CHECK_ERR(tcuda_comm_broadcast((const tcuda_dltensor_t *)&x.t, (int[]){0, bad}, 2, out), TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK(!out[0] && !out[1]); /* the view made for slot 0 is not leaked or returned */
  const DLTensor *l[2] = {&x.t, &y.t};
  CHECK_ERR(tcuda_comm_broadcast_coalesced((const tcuda_dltensor_t *const *)l, 2, (int[]){0, bad}, 2, 100, out),
            TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK_ERR(tcuda_comm_scatter((const tcuda_dltensor_t *)&x.t, (int[]){0, bad}, 2, NULL, 0, 0, NULL, out, &nout),
            TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK_ERR(tcuda_comm_gather((const tcuda_dltensor_t *const *)l, 2, 0, bad, out), TCUDA_ERROR_INVALID_DEVICE, "destination");
  /* a tensor claiming a device that does not exist */
  x.t.device.device_id = bad;
  CHECK_ERR(tcuda_comm_gather((const tcuda_dltensor_t *const *)l, 2, 0, 0, out), TCUDA_ERROR_INVALID_DEVICE, want);
  CHECK_ERR(tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)l, 2, 0, out), TCUDA_ERROR_INVALID_DEVICE, want);
  x.t.device.device_id = 0;
  /* a stream on the wrong device for its chunk (needs a second device to
   * differ from; on one GPU use a stream of device 0 for a chunk on 0 of a
   * host source) */
  ten hs;
  void *hr;
  make_filled(&hs, -1, F32, 4, 2, 0, 3, &hr);
  tcuda_stream_t s0;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &s0));
  tcuda_stream_t wrong = s0;
  wrong.device = 1;
  const tcuda_stream_t *st[2] = {&s0, &wrong};
  CHECK_ERR(tcuda_comm_scatter((const tcuda_dltensor_t *)&hs.t, (int[]){0, 0}, 2, NULL, 0, 0, st, out, &nout),
            TCUDA_ERROR_INVALID_ARGUMENT, "stream at index 1 (was 1) to match the device supplied at that index (expected 0)");
  /* the same scatter with a right stream works and fills the chunks */
  st[1] = &s0;
  CHECK_OK(tcuda_comm_scatter((const tcuda_dltensor_t *)&hs.t, (int[]){0, 0}, 2, NULL, 0, 0, st, out, &nout));
  CHECK_OK(tcuda_stream_synchronize(s0));
  void *e = sub(hr, F32, 2, 2, 2, 0, 2);
  check_equal(&out[1]->dl_tensor, e, "scatter on a given stream");
  free(e);
  drop(out[0]); drop(out[1]);
  /* host gather of a transposed input (pinned staging) */
  ten tr;
  void *trr;
  make_filled(&tr, 0, F64, 6, 5, 1, 4, &trr);
  const DLTensor *one[1] = {&tr.t};
  DLManagedTensor *o = NULL;
  CHECK_OK(tcuda_comm_gather((const tcuda_dltensor_t *const *)one, 1, 0, TCUDA_COMM_HOST, &o));
  if (o) { CHECK(same_elems(o->dl_tensor.data, trr, 30, 8, "host gather of a transposed input")); drop(o); }
  ten_free(&x); ten_free(&y); ten_free(&hs); ten_free(&tr);
  free(rx); free(ry); free(hr); free(trr);
}

static void test_empty_tensors(void) {
  ten z;
  ten_make(&z, 0, F32, 2, (int64_t[]){0, 3}, NULL, 0);
  DLManagedTensor *out[2] = {0};
  CHECK_OK(tcuda_comm_broadcast((const tcuda_dltensor_t *)&z.t, (int[]){0, 0}, 2, out));
  drop(out[0]); drop(out[1]);
  const DLTensor *l[2] = {&z.t, &z.t};
  DLManagedTensor *o = NULL;
  CHECK_OK(tcuda_comm_gather((const tcuda_dltensor_t *const *)l, 2, 1, 0, &o));
  CHECK(o && o->dl_tensor.shape[0] == 0 && o->dl_tensor.shape[1] == 6);
  drop(o);
  CHECK_OK(tcuda_comm_reduce_add((const tcuda_dltensor_t *const *)l, 2, 0, &o));
  drop(o);
  ten_free(&z);
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(test_suite_one_gpu), T(test_suite_engine_copy), T(test_gpu_errors),
                                  T(test_empty_tensors)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
