/* NVTX for a build without the CUDA toolkit: no tool can attach, so every
 * call does nothing, as NVTX itself does when no tool is injected. */
#ifndef TC_NOCUDA_NVTX_H
#define TC_NOCUDA_NVTX_H
#include <stdint.h>
typedef uint64_t nvtxRangeId_t;
static inline int nvtxRangePushA(const char *m) { (void)m; return 0; }
static inline int nvtxRangePop(void) { return 0; }
static inline void nvtxMarkA(const char *m) { (void)m; }
static inline nvtxRangeId_t nvtxRangeStartA(const char *m) { (void)m; return 0; }
static inline void nvtxRangeEnd(nvtxRangeId_t id) { (void)id; }
#endif
