/* Stand-in for the CUDA runtime in a build without the CUDA toolkit
 * (TCUDA_CUDA=OFF). It declares only what tcuda uses, and every call fails
 * the way the real runtime fails on a machine without a driver, so the
 * layers above keep their no-GPU paths and need no #ifdef. Only the simulated
 * allocator backend, inspect and replay then do real work. */
#ifndef TC_NOCUDA_RUNTIME_API_H
#define TC_NOCUDA_RUNTIME_API_H
#include <stddef.h>
#include <stdint.h>

#define CUDART_VERSION 0

typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorPeerAccessAlreadyEnabled = 704,
  cudaErrorUnknown = 999
} cudaError_t;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
typedef struct CUgraphNode_st *cudaGraphNode_t;
#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)

enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1,
                               cudaStreamCaptureStatusInvalidated = 2 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
                             cudaStreamCaptureModeRelaxed = 2 };
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2,
                      cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2,
                      cudaMemoryTypeManaged = 3 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrComputeCapabilityMajor = 75,
                      cudaDevAttrComputeCapabilityMinor = 76, cudaDevAttrMaxThreadsPerMultiProcessor = 39 };
enum cudaDriverEntryPointQueryResult { cudaDriverEntryPointSuccess = 0, cudaDriverEntryPointSymbolNotFound = 1 };
enum cudaGraphDebugDotFlags { cudaGraphDebugDotFlagsVerbose = 1 };
#define cudaEnableDefault 0
#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02
#define cudaEventBlockingSync 0x01
#define cudaEventInterprocess 0x04
#define cudaHostAllocDefault 0x00
#define cudaIpcMemLazyEnablePeerAccess 0x01
#define cudaGraphInstantiateFlagAutoFreeOnLaunch 1
#define cudaGraphInstantiateFlagUseNodePriority 8

typedef struct cudaUUID_st { char bytes[16]; } cudaUUID_t;
struct cudaDeviceProp {
  char name[256];
  cudaUUID_t uuid;
  size_t totalGlobalMem;
  int major, minor, multiProcessorCount, maxThreadsPerMultiProcessor, l2CacheSize, warpSize;
  int integrated, isMultiGpuBoard, pciDomainID, pciBusID, pciDeviceID;
};
struct cudaPointerAttributes {
  enum cudaMemoryType type;
  int device;
  void *devicePointer;
  void *hostPointer;
};
typedef struct cudaIpcMemHandle_st { char reserved[64]; } cudaIpcMemHandle_t;
typedef struct cudaIpcEventHandle_st { char reserved[64]; } cudaIpcEventHandle_t;

/* The error every call returns: what a runtime without a driver says. */
#define TC_NOCUDA_FAIL return cudaErrorNoDevice
static inline const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "cudaSuccess";
  case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
  case cudaErrorNotReady: return "cudaErrorNotReady";
  case cudaErrorNoDevice: return "cudaErrorNoDevice";
  default: return "cudaErrorUnknown";
  }
}
static inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "tcuda was built without CUDA";
}
static inline cudaError_t cudaGetLastError(void) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int *n) { *n = 0; TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGetDevice(int *d) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaSetDevice(int d) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaDriverGetVersion(int *v) { *v = 0; TC_NOCUDA_FAIL; }
static inline cudaError_t cudaDeviceSynchronize(void) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaDeviceGetStreamPriorityRange(int *lo, int *hi) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaDeviceCanAccessPeer(int *can, int d, int peer) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGetDriverEntryPoint(const char *s, void **fn, unsigned long long f,
                                                  enum cudaDriverEntryPointQueryResult *q) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGetDriverEntryPointByVersion(const char *s, void **fn, unsigned v,
                                                           unsigned long long f,
                                                           enum cudaDriverEntryPointQueryResult *q) {
  TC_NOCUDA_FAIL;
}
static inline cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaMalloc(void **p, size_t n) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaFree(void *p) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaHostAlloc(void **p, size_t n, unsigned f) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaFreeHost(void *p) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaHostRegister(void *p, size_t n, unsigned f) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
  TC_NOCUDA_FAIL;
}
static inline cudaError_t cudaMemcpy(void *d, const void *s, size_t n, enum cudaMemcpyKind k) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, enum cudaMemcpyKind k,
                                          cudaStream_t st) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaMemcpy2DAsync(void *d, size_t dp, const void *s, size_t sp, size_t w, size_t h,
                                            enum cudaMemcpyKind k, cudaStream_t st) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaMemcpyPeerAsync(void *d, int dd, const void *s, int sd, size_t n,
                                              cudaStream_t st) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned f) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned f, int p) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaStreamQuery(cudaStream_t s) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaStreamGetPriority(cudaStream_t s, int *p) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned f) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *c) {
  *c = cudaStreamCaptureStatusNone;
  TC_NOCUDA_FAIL;
}
static inline cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *c,
                                                   unsigned long long *id, cudaGraph_t *g,
                                                   const cudaGraphNode_t **deps, size_t *n) {
  if (c) *c = cudaStreamCaptureStatusNone;
  TC_NOCUDA_FAIL;
}
static inline cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode m) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *m) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaEventCreate(cudaEvent_t *e) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned f) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaEventQuery(cudaEvent_t e) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *h, void *p) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaIpcOpenMemHandle(void **p, cudaIpcMemHandle_t h, unsigned f) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaIpcCloseMemHandle(void *p) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaIpcGetEventHandle(cudaIpcEventHandle_t *h, cudaEvent_t e) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaIpcOpenEventHandle(cudaEvent_t *e, cudaIpcEventHandle_t h) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGraphDestroy(cudaGraph_t g) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *x, cudaGraph_t g,
                                                        unsigned long long f) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) { TC_NOCUDA_FAIL; }
static inline cudaError_t cudaGraphDebugDotPrint(cudaGraph_t g, const char *path, unsigned f) { TC_NOCUDA_FAIL; }
#undef TC_NOCUDA_FAIL
#endif
