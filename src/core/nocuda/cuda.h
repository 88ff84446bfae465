/* Driver API types for a build without the CUDA toolkit: tcuda reaches the
 * driver only through pointers from cudaGetDriverEntryPointByVersion, which
 * the stand-in runtime never hands out, so only the types are needed. */
#ifndef TC_NOCUDA_CUDA_H
#define TC_NOCUDA_CUDA_H
#include "cuda_runtime_api.h"
typedef enum cudaError_enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2,
                              CUDA_ERROR_UNKNOWN = 999 } CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef uint64_t CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1 } CUmemAllocationType;
typedef enum { CU_MEM_HANDLE_TYPE_NONE = 0 } CUmemAllocationHandleType;
typedef enum { CU_MEM_LOCATION_TYPE_DEVICE = 1 } CUmemLocationType;
typedef enum { CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3 } CUmemAccess_flags;
typedef enum { CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0 } CUmemAllocationGranularity_flags;
typedef struct { CUmemLocationType type; int id; } CUmemLocation;
typedef struct {
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void *win32HandleMetaData;
  struct { unsigned char compressionType, gpuDirectRDMACapable; unsigned short usage; unsigned char reserved[4]; }
      allocFlags;
} CUmemAllocationProp;
typedef struct { CUmemLocation location; CUmemAccess_flags flags; } CUmemAccessDesc;
#endif
