/* Engine variants of bench_comm's sweep: other ways a bulk peer copy and
 * reduce_add's sum of a peer's input could run. The library keeps one of
 * each (a copy engine; one fused sum kernel on the destination reading the
 * peer: src/comm/copy.c and kernel.c); these are the alternatives it was
 * chosen from, with their launch-shape knobs, so that another GPU or link
 * can be measured again. The kernels are the library's
 * (src/comm/kernels.cuh), launched in other shapes by comm_sweep.cu. */
#ifndef BENCH_COMM_SWEEP_H
#define BENCH_COMM_SWEEP_H
#include "tcuda.h"
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif

/* How one contiguous GPU-to-GPU copy moves its bytes: push/pull are SM
 * kernels on the source/destination; ce* are copy engines, split over
 * streams of the source (ceN) or of both ends (cexN); the mixed ones split
 * the bytes between two engines at once. ce is the library's. */
enum { SW_P2P_KERNEL, SW_P2P_PULL, SW_P2P_PUSHPULL, SW_P2P_CE, SW_P2P_CE2, SW_P2P_CE4, SW_P2P_CEX2, SW_P2P_CEX4,
       SW_P2P_CEKERNEL, SW_P2P_CEPULL };
/* How reduce_add brings a peer's input to the destination: fused (the
 * library's): one kernel on the destination reads the peer over NVLink and
 * adds; push: the kernel runs on the peer instead, reading the
 * destination's partial sum and writing the result over NVLink; mix: both,
 * split; copy: peer copy (as p2p says) into a buffer, then a local add;
 * pipe: the same in chunks, the copy of one overlapping the add of another. */
enum { SW_RED_FUSED, SW_RED_PUSH, SW_RED_MIX, SW_RED_COPY, SW_RED_PIPE };

typedef struct {
  int p2p; /* SW_P2P_* */
  int red; /* SW_RED_* */
  int bpsm, threads, unroll; /* kernel launch shape; 0: the library's */
  int split;                 /* percent of bytes on the first engine of a mixed mode */
  int chunks;                /* pipe */
} sw_opts;

/* Settings "KEY=VALUE ..." with the keys P2P, REDUCE, BLOCKS_PER_SM (1-32),
 * THREADS (64-1024, a power of two), UNROLL (1, 2, 4, 8 or 12; at most 512
 * threads above 4), SPLIT (1-99) and CHUNKS (2-64); the rest as the
 * library. 0, or -1 with a message in sw_error(). */
int sw_parse(const char *settings, sw_opts *o);
const char *sw_error(void);

/* dst (on ddev) = src (on sdev), contiguous bytes, as one copy on stream s
 * (of either device): the lanes fork from s and join back into it. */
tcuda_status sw_p2p_copy(const sw_opts *o, void *dst, int ddev, const void *src, int sdev, size_t bytes,
                         tcuda_stream_t s);
/* result = a + b, n floats: result and a on dest, b on od (a peer), on the
 * two devices' current streams as the library's reduce_add. */
tcuda_status sw_reduce_f32(const sw_opts *o, float *result, const float *a, int dest, const float *b, int od,
                           size_t n);

/* comm_sweep.cu: the library's bulk kernels in any launch shape (threads
 * and unroll 0: the library's). blocks caps the grid. cudaError_t values. */
int sw_k_copy(struct CUstream_st *s, void *dst, const void *src, size_t bytes, int blocks, int threads, int unroll);
int sw_k_add_f32(struct CUstream_st *s, float *out, const float *a, const float *b, size_t n, int blocks,
                 int threads, int unroll);
#ifdef __cplusplus
}
#endif
#endif
