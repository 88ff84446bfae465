/* NCCL initialisation failing: tcuda_comm_init_rank on a one-GPU
 * communicator (ncclCommInitRank), and, with two GPUs, a broadcast through
 * NCCL whose communicator cache cannot be filled (ncclCommInitAll). The
 * caller gets TCUDA_ERROR_NCCL naming the call, nothing is returned, sent
 * or cached, and the next attempt works. SKIPPED without NCCL; the InitAll
 * part needs two GPUs. */
#include "comm/comm_impl.h" /* DLTensor before tcuda.h; tc_nccl_broadcast_bytes */
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

/* ncclCommInitAll, through the NCCL glue's broadcast (comm/comm_impl.h):
 * the public collectives choose NCCL only where PyTorch would, which two
 * GPUs with peer access are not, so the test calls the NCCL path itself. */
static void test_init_all_fails(void) {
  clean_start();
  if (tcuda_device_count() < 2) {
    TC_SKIP_PART("ncclCommInitAll: a communicator of two GPUs needs 2 GPUs, found %d", tcuda_device_count());
    return;
  }
  enum { BYTES = 1 << 20 };
  int devs[2] = {0, 1};
  void *bufs[2] = {NULL, NULL};
  tcuda_stream_t streams[2];
  tcuda_device_guard_t g;
  for (int i = 0; i < 2; i++) {
    CHECK_OK(tcuda_current_stream(i, &streams[i]));
    CHECK_OK(tcuda_malloc_on(&bufs[i], BYTES, i, streams[i]));
  }
  CHECK(fill_and_check(bufs[0], BYTES, 0x4b));
  CHECK_OK(tcuda_device_guard_begin(&g, 1));
  CHECK(fill_and_check(bufs[1], BYTES, 0));
  CHECK_OK(tcuda_device_guard_end(&g));
  tc_fault_arm(TC_FAULT_NCCL_INIT, 1, 1);
  tcuda_status s = tc_nccl_broadcast_bytes("fault test", 2, devs, bufs, BYTES, streams);
  if (tc_fault_hits(TC_FAULT_NCCL_INIT) == 0) {
    TC_SKIP_PART("ncclCommInitAll: the communicators of devices 0 and 1 existed already");
    CHECK_OK(s);
  } else {
    CHECK_EQ_INT(s, TCUDA_ERROR_NCCL);
    CHECK(strstr(tcuda_last_error(), "fault test: ncclCommInitAll: NCCL Error 1: ") != NULL);
    CHECK_EQ_INT(tc_fault_fired(TC_FAULT_NCCL_INIT), 1);
    CHECK_OK(tcuda_synchronize(1));
    CHECK_OK(tcuda_device_guard_begin(&g, 1));
    CHECK(still(bufs[1], BYTES, 0)); /* nothing was sent */
    CHECK_OK(tcuda_device_guard_end(&g));
    /* nothing was cached: the next call initialises NCCL and broadcasts */
    CHECK_OK(tc_nccl_broadcast_bytes("fault test", 2, devs, bufs, BYTES, streams));
    CHECK_EQ_INT(tc_fault_hits(TC_FAULT_NCCL_INIT), 2);
  }
  CHECK_OK(tcuda_synchronize(0));
  CHECK_OK(tcuda_synchronize(1));
  CHECK_OK(tcuda_device_guard_begin(&g, 1));
  CHECK(still(bufs[1], BYTES, 0x4b));
  CHECK_OK(tcuda_device_guard_end(&g));
  CHECK_ALLOC(0, 1);
  CHECK_ALLOC(1, 1);
  CHECK_OK(tcuda_free(bufs[0]));
  CHECK_OK(tcuda_free(bufs[1]));
  CHECK_ALLOC(1, 0);
  CHECK_OK(tcuda_empty_cache()); /* every device */
  CHECK_EQ_INT(reserved_of(1), 0);
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
