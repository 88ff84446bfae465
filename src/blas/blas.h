/* Internal: the parts of the cuBLAS handle pool that are testable on a CPU. */
#ifndef TC_BLAS_H
#define TC_BLAS_H
#include "tcuda.h"
/* CUBLAS_WORKSPACE_CONFIG (":SIZE_KiB:COUNT" repeated) -> bytes. NULL or ""
 * gives PyTorch's default for the capability (32 MiB on sm_90, else
 * 4096 KiB x 2 + 16 KiB x 8). Malformed -> TCUDA_ERROR_CONFIG naming it. */
tcuda_status tc_blas_workspace_size(const char *config, int major, int minor, size_t *bytes);
#endif
