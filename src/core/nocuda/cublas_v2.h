/* cuBLAS types for a build without the CUDA toolkit (reached only through
 * dlsym, tc_cublas_sym, which finds nothing in such a build). */
#ifndef TC_NOCUDA_CUBLAS_H
#define TC_NOCUDA_CUBLAS_H
#include "cuda_runtime_api.h"
typedef struct cublasContext *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;
#endif
