/* Two processes, one GPU each: rank 0 makes the NCCL id and hands it to
 * rank 1 through a pipe; then broadcast, reduce and all-reduce across the
 * processes, checked element by element. The parent never touches CUDA
 * (a forked child could not use it afterwards); a probe child counts GPUs.
 * Skips (77) with fewer than two GPUs. */
#include "comm/comm.h"
#include "harness.h"
#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

enum { N = (1 << 20) + 3 };

static void *dev_buf(int dev, size_t bytes) {
  tcuda_device_guard_t g;
  void *p = NULL;
  CHECK_OK(tcuda_device_guard_begin(&g, dev));
  CHECK(cudaMalloc(&p, bytes) == cudaSuccess);
  CHECK_OK(tcuda_device_guard_end(&g));
  return p;
}

static DLTensor tensor(void *p, int dev, DLDataType dt, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = p;
  t.device.device_type = (int)TC_DL_CUDA;
  t.device.device_id = dev;
  t.ndim = 1;
  t.dtype = dt;
  t.shape = shape;
  return t;
}

static int run_rank(int rank, int fd_r, int fd_w) {
  alarm(300); /* never hang CTest */
  tcuda_comm_unique_id_t id;
  if (rank == 0) {
    CHECK_OK(tcuda_comm_unique_id(&id));
    CHECK(write(fd_w, &id, sizeof id) == (ssize_t)sizeof id);
  } else {
    size_t got = 0;
    while (got < sizeof id) {
      ssize_t r = read(fd_r, (char *)&id + got, sizeof id - got);
      if (r <= 0) { fprintf(stderr, "rank 1: no id from rank 0\n"); return 1; }
      got += (size_t)r;
    }
  }
  tcuda_comm_t *c = NULL;
  CHECK_OK(tcuda_comm_init_rank(2, &id, rank, rank, &c));
  if (!c) return 1;
  int r, n, d;
  CHECK_OK(tcuda_comm_info(c, &r, &n, &d));
  CHECK(r == rank && n == 2 && d == rank);

  int64_t shape[1] = {N};
  DLDataType f32 = {TC_DL_FLOAT, 32, 1}, i32 = {TC_DL_INT, 32, 1}, b8 = {TC_DL_BOOL, 8, 1};
  float *h = malloc(N * sizeof *h), *g = malloc(N * sizeof *g);
  for (int i = 0; i < N; i++) h[i] = (float)(i % 1000) + 1000.0f * (float)rank;
  float *buf = dev_buf(rank, N * sizeof *h), *recv = dev_buf(rank, N * sizeof *h);
  DLTensor tb = tensor(buf, rank, f32, shape), tr = tensor(recv, rank, f32, shape);

  /* broadcast from rank 0 */
  CHECK(cudaMemcpy(buf, h, N * sizeof *h, cudaMemcpyDefault) == cudaSuccess);
  CHECK_OK(tcuda_comm_broadcast_rank(c, (const tcuda_dltensor_t *)&tb, 0, NULL));
  CHECK_OK(tcuda_synchronize(rank));
  CHECK(cudaMemcpy(g, buf, N * sizeof *g, cudaMemcpyDefault) == cudaSuccess);
  int bad = 0;
  for (int i = 0; i < N && !bad; i++) bad = g[i] != (float)(i % 1000);
  CHECK(!bad);

  /* reduce into rank 1 */
  CHECK(cudaMemcpy(buf, h, N * sizeof *h, cudaMemcpyDefault) == cudaSuccess);
  CHECK_OK(tcuda_comm_reduce_rank(c, (const tcuda_dltensor_t *)&tb, rank == 1 ? (const tcuda_dltensor_t *)&tr : NULL,
                                  1, NULL));
  CHECK_OK(tcuda_synchronize(rank));
  if (rank == 1) {
    CHECK(cudaMemcpy(g, recv, N * sizeof *g, cudaMemcpyDefault) == cudaSuccess);
    for (int i = 0; i < N && !bad; i++) bad = g[i] != 2.0f * (float)(i % 1000) + 1000.0f;
    CHECK(!bad);
  }

  /* all-reduce of int32 in place, on a pool stream */
  int32_t *hi = (int32_t *)h, *gi = (int32_t *)g;
  for (int i = 0; i < N; i++) hi[i] = i * (rank + 1) - 7;
  DLTensor ti = tensor(buf, rank, i32, shape);
  tcuda_stream_t s;
  CHECK_OK(tcuda_stream_from_pool(rank, 0, &s));
  CHECK(cudaMemcpy(buf, hi, N * sizeof *hi, cudaMemcpyDefault) == cudaSuccess);
  CHECK_OK(tcuda_comm_all_reduce_rank(c, (const tcuda_dltensor_t *)&ti, (const tcuda_dltensor_t *)&ti, &s));
  CHECK_OK(tcuda_stream_synchronize(s));
  CHECK(cudaMemcpy(gi, buf, N * sizeof *gi, cudaMemcpyDefault) == cudaSuccess);
  for (int i = 0; i < N && !bad; i++) bad = gi[i] != 3 * i - 14;
  CHECK(!bad);

  /* bool all-reduce is logical or (ncclMax), never 2 in a bool byte */
  int64_t bshape[1] = {64};
  uint8_t hb[64], gb[64];
  for (int i = 0; i < 64; i++) hb[i] = (uint8_t)((i % 3 == 0) || (rank == 1 && i % 2 == 0));
  DLTensor tbool = tensor(buf, rank, b8, bshape);
  CHECK(cudaMemcpy(buf, hb, 64, cudaMemcpyDefault) == cudaSuccess);
  CHECK_OK(tcuda_comm_all_reduce_rank(c, (const tcuda_dltensor_t *)&tbool, (const tcuda_dltensor_t *)&tbool, NULL));
  CHECK_OK(tcuda_synchronize(rank));
  CHECK(cudaMemcpy(gb, buf, 64, cudaMemcpyDefault) == cudaSuccess);
  for (int i = 0; i < 64; i++) CHECK(gb[i] == (uint8_t)((i % 3 == 0) || (i % 2 == 0)));

  /* errors: wrong device, strided, bad root, wrong stream device */
  DLTensor wrong = tensor(buf, 1 - rank, f32, shape);
  CHECK_ERR(tcuda_comm_broadcast_rank(c, (const tcuda_dltensor_t *)&wrong, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "communicator's device");
  int64_t sshape[2] = {4, 4}, sstr[2] = {1, 4};
  DLTensor strided = tensor(buf, rank, f32, sshape);
  strided.ndim = 2;
  strided.strides = sstr;
  CHECK_ERR(tcuda_comm_broadcast_rank(c, (const tcuda_dltensor_t *)&strided, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "contiguous");
  CHECK_ERR(tcuda_comm_broadcast_rank(c, (const tcuda_dltensor_t *)&tb, 2, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "invalid root 2");
  tcuda_stream_t other = s;
  other.device = 1 - rank;
  CHECK_ERR(tcuda_comm_broadcast_rank(c, (const tcuda_dltensor_t *)&tb, 0, &other), TCUDA_ERROR_INVALID_ARGUMENT,
            "stream is on device");

  CHECK_OK(tcuda_comm_destroy(c));
  cudaFree(buf);
  cudaFree(recv);
  free(h);
  free(g);
  printf("rank %d: %s\n", rank, tc_failures ? "FAIL" : "ok");
  return tc_failures ? 1 : 0;
}

int main(void) {
  pid_t probe = fork();
  if (probe == 0) _exit(tcuda_device_count() > 100 ? 100 : tcuda_device_count());
  int st;
  waitpid(probe, &st, 0);
  int ngpu = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
  if (ngpu < 2) {
    printf("SKIPPED: needs 2 GPUs (one per process), found %d\n", ngpu);
    return TC_SKIP_CODE;
  }
  int fds[2];
  if (pipe(fds)) { perror("pipe"); return 1; }
  pid_t kids[2];
  for (int r = 0; r < 2; r++) {
    kids[r] = fork();
    if (kids[r] == 0) _exit(run_rank(r, fds[0], fds[1]));
  }
  close(fds[0]);
  close(fds[1]);
  int fail = 0;
  for (int r = 0; r < 2; r++) {
    waitpid(kids[r], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
      fprintf(stderr, "rank %d failed (status %d)\n", r, st);
      fail = 1;
    }
  }
  printf("%s test_comm_rank\n", fail ? "FAIL" : "ok  ");
  return fail;
}
