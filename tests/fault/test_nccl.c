/* NCCL initialisation failing: tcuda_comm_init_rank on a one-GPU
 * communicator (ncclCommInitRank), and, with two GPUs, a broadcast through
 * NCCL whose communicator cache cannot be filled (ncclCommInitAll). The
 * caller gets TCUDA_ERROR_NCCL naming the call, nothing is returned or
 * cached, the outputs allocated before the failure are given back, and
 * the next attempt works. SKIPPED without NCCL; the InitAll part needs two
 * GPUs. */
#include "comm/dlpack_compat.h" /* DLTensor before tcuda.h */
#include "fault_util.h"

static void test_init_rank_fails(void) {
  clean_start();
  tcuda_comm_unique_id_t id;
  CHECK_OK(tcuda_comm_unique_id(&id));
  tc_fault_arm(TC_FAULT_NCCL_INIT, 1, 1);
  tcuda_comm_t *c = NULL;
  CHECK_ERR(tcuda_comm_init_rank(1, &id, 0, 0, &c), TCUDA_ERROR_NCCL,
            "tcuda_comm_init_rank: ncclCommInitRank: NCCL Error 1: ");
  CHECK(c == NULL);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_NCCL_INIT), 1);
  /* a fresh id: the failed call never reached NCCL, but a real failure may
   * have used the old one */
  CHECK_OK(tcuda_comm_unique_id(&id));
  CHECK_OK(tcuda_comm_init_rank(1, &id, 0, 0, &c));
  CHECK(c != NULL);
  int rank = -1, nranks = -1, dev = -1;
  CHECK_OK(tcuda_comm_info(c, &rank, &nranks, &dev));
  CHECK(rank == 0 && nranks == 1 && dev == 0);
  /* a one-rank all-reduce copies the input */
  int64_t shape[1] = {256 << 10}; /* bytes, as uint8 */
  size_t n = (size_t)shape[0];
  void *in = NULL, *out = NULL;
  CHECK_OK(tcuda_malloc(&in, n));
  CHECK_OK(tcuda_malloc(&out, n));
  CHECK(fill_and_check(in, n, 0x21));
  CHECK(cudaMemset(out, 0, n) == cudaSuccess);
  DLTensor ti;
  memset(&ti, 0, sizeof ti);
  ti.data = in;
  ti.device.device_type = (int)TC_DL_CUDA;
  ti.device.device_id = 0;
  ti.ndim = 1;
  ti.dtype.code = TC_DL_UINT;
  ti.dtype.bits = 8;
  ti.dtype.lanes = 1;
  ti.shape = shape;
  DLTensor to = ti;
  to.data = out;
  CHECK_OK(tcuda_comm_all_reduce_rank(c, (const tcuda_dltensor_t *)&ti, (const tcuda_dltensor_t *)&to, NULL));
  CHECK_OK(tcuda_synchronize(0));
  CHECK(still(out, n, 0x21));
  CHECK_OK(tcuda_comm_destroy(c));
  CHECK_OK(tcuda_free(in));
  CHECK_OK(tcuda_free(out));
  CHECK_ALLOC(0, 0);
  clean_end();
}

static void drop(DLManagedTensor *m) {
  if (m) m->deleter(m);
}

static void test_init_all_fails(void) {
  clean_start();
  if (tcuda_device_count() < 2) {
    TC_SKIP_PART("ncclCommInitAll: a broadcast through NCCL needs 2 GPUs, found %d", tcuda_device_count());
    return;
  }
  setenv("TCUDA_COMM_ENGINE", "nccl", 1);
  int64_t shape[1] = {1 << 20};
  void *src = NULL;
  CHECK_OK(tcuda_malloc(&src, (size_t)shape[0]));
  CHECK(fill_and_check(src, (size_t)shape[0], 0x4b));
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = src;
  t.device.device_type = (int)TC_DL_CUDA;
  t.device.device_id = 0;
  t.ndim = 1;
  t.dtype.code = TC_DL_UINT;
  t.dtype.bits = 8;
  t.dtype.lanes = 1;
  t.shape = shape;
  int devs[2] = {0, 1};
  DLManagedTensor *out[2] = {NULL, NULL};
  tc_fault_arm(TC_FAULT_NCCL_INIT, 1, 1);
  CHECK_ERR(tcuda_comm_broadcast((const tcuda_dltensor_t *)&t, devs, 2, out), TCUDA_ERROR_NCCL,
            "ncclCommInitAll: NCCL Error 1: ");
  CHECK(out[0] == NULL && out[1] == NULL);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_NCCL_INIT), 1);
  CHECK_ALLOC(1, 0); /* the output made on device 1 went back */
  CHECK_ALLOC(0, 1);
  /* nothing was cached: the next broadcast initialises NCCL and works */
  CHECK_OK(tcuda_comm_broadcast((const tcuda_dltensor_t *)&t, devs, 2, out));
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_NCCL_INIT), 2);
  CHECK_OK(tcuda_synchronize(1));
  if (out[1]) {
    tcuda_device_guard_t g;
    CHECK_OK(tcuda_device_guard_begin(&g, 1));
    CHECK(still(out[1]->dl_tensor.data, (size_t)shape[0], 0x4b));
    CHECK_OK(tcuda_device_guard_end(&g));
  }
  drop(out[0]);
  drop(out[1]);
  CHECK_ALLOC(1, 0);
  unsetenv("TCUDA_COMM_ENGINE");
  CHECK_OK(tcuda_free(src));
  CHECK_OK(tcuda_set_device(1));
  CHECK_OK(tcuda_empty_cache()); /* every device */
  CHECK_EQ_INT(reserved_of(1), 0);
  CHECK_OK(tcuda_set_device(0));
  clean_end();
}

int main(int argc, char **argv) {
  tc_require_gpu();
  if (!tcuda_nccl_version()) {
    printf("SKIPPED: NCCL (libnccl.so.2) is not available\n");
    return TC_SKIP_CODE;
  }
  static const tc_test tests[] = {T(test_init_rank_fails), T(test_init_all_fails)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
