/* cuBLAS handle pool parts that need no GPU: CUBLAS_WORKSPACE_CONFIG parsing
 * (PyTorch's defaults and syntax) and the no-CUDA path. */
#include "harness.h"
#include "blas/blas.h"

static void workspace_sizes(void) {
  size_t b = 0;
  CHECK_OK(tc_blas_workspace_size(NULL, 9, 0, &b));
  CHECK_EQ_INT(b, 32u << 20); /* sm_90: 4096 KiB x 8 */
  CHECK_OK(tc_blas_workspace_size("", 8, 0, &b));
  CHECK_EQ_INT(b, (4096u << 10) * 2 + (16u << 10) * 8); /* 8 MiB + 128 KiB */
  CHECK_OK(tc_blas_workspace_size(":4096:8", 8, 0, &b));
  CHECK_EQ_INT(b, 32u << 20);
  CHECK_OK(tc_blas_workspace_size(":4096:2:16:8", 9, 0, &b));
  CHECK_EQ_INT(b, (4096u << 10) * 2 + (16u << 10) * 8);
  CHECK_OK(tc_blas_workspace_size(":0:0", 9, 0, &b));
  CHECK_EQ_INT(b, 0);
  const char *bad[] = {"4096:8", ":4096", ":4096:", ":x:8", ":4096:8:", ":4096:8:16", "::", ":-1:2",
                       ":99999999999999999999:1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    b = 12345;
    CHECK_ERR(tc_blas_workspace_size(bad[i], 9, 0, &b), TCUDA_ERROR_CONFIG, "CUBLAS_WORKSPACE_CONFIG");
    CHECK(strstr(tcuda_last_error(), bad[i]) != NULL);
    CHECK_EQ_INT(b, 12345); /* untouched */
  }
  /* each pair fits in 64 bits (2^64 - 1 KiB), their sum does not */
  const char *big = ":18014398509481983:1:18014398509481983:1";
  b = 12345;
  CHECK_OK(tc_blas_workspace_size(big + 20, 9, 0, &b));
  CHECK_EQ_INT(b, (size_t)18014398509481983ull * 1024);
  b = 12345;
  CHECK_ERR(tc_blas_workspace_size(big, 9, 0, &b), TCUDA_ERROR_CONFIG, "add up to more than 2^64 bytes");
  CHECK(strstr(tcuda_last_error(), big) != NULL);
  CHECK_EQ_INT(b, 12345);
}

static void handle_without_cuda(void) {
  CHECK_ERR(tcuda_current_blas_handle(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_current_blas_handle: handle is NULL");
  if (tcuda_is_available()) return;
  struct cublasContext *h;
  CHECK_ERR(tcuda_current_blas_handle(&h), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_current_blas_handle");
  CHECK_OK(tcuda_blas_clear_workspaces()); /* nothing to clear */
}

TC_MAIN(T(workspace_sizes), T(handle_without_cuda))
