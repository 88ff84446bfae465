/* Interface between the RNG host code (C) and its kernels (kernels.cu).
 * Plain C structs, readable by both compilers. */
#ifndef TC_RNG_KERNELS_H
#define TC_RNG_KERNELS_H
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a kernel needs to find its Philox stream, as at::PhiloxCudaState:
 * plain values, or (under graph capture) device pointers read when the
 * kernel runs, so a replay sees the offset of its own time. */
typedef struct tc_philox_args {
  uint64_t seed;
  uint64_t offset;               /* multiple of 4 */
  const uint64_t *seed_ptr;      /* captured: *seed_ptr is the seed */
  const uint64_t *offset_ptr;    /* captured: *offset_ptr + offset_intragraph */
  uint64_t offset_intragraph;
  int captured;
} tc_philox_args;

/* Which cuRAND draw a kernel makes per Philox call, with torch's unroll. */
typedef enum tc_rng_dist {
  TC_DIST_UNIFORM_F = 0, /* curand_uniform4: 4 floats */
  TC_DIST_UNIFORM_D,     /* curand_uniform2_double: 2 doubles */
  TC_DIST_NORMAL_F,      /* curand_normal4 */
  TC_DIST_NORMAL_D,      /* curand_normal2_double */
  TC_DIST_BITS32,        /* curand4: 4 words */
  TC_DIST_BITS64         /* curand4 paired hi:lo into 2 uint64 */
} tc_rng_dist;

/* Output storage: the integer kinds store the low bytes of an int64, which
 * is every integer dtype and bool (whose values are 0/1 there). */
typedef enum tc_rng_out {
  TC_OUT_F32 = 0, TC_OUT_F64, TC_OUT_F16, TC_OUT_BF16,
  TC_OUT_I8, TC_OUT_I16, TC_OUT_I32, TC_OUT_I64
} tc_rng_out;

/* One fill: a draw, a transform and an output kind. */
typedef struct tc_rng_op {
  tc_rng_dist dist;
  tc_rng_out out;
  /* uniform: value = fma(u, b, a), then == c -> a (a, c already rounded to
   * the dtype, b to the opmath type). normal: fma(n, b, a) with a = mean,
   * b = std (rounded to the accumulate type by the kernel). */
  double a, b, c;
  /* bits: v = (w mod range) + base, or w & (range - 1) when range is a power
   * of two; range 0 means 2^64 (v = w). */
  uint64_t range;
  int64_t base;
} tc_rng_op;

/* Elements per Philox call for a draw (torch's unroll factor). */
static inline int tc_rng_unroll(tc_rng_dist d) {
  return d == TC_DIST_UNIFORM_D || d == TC_DIST_NORMAL_D || d == TC_DIST_BITS64 ? 2 : 4;
}

/* Fill n (>= 1) elements at out as torch's grid-stride kernel with `threads`
 * = 256*grid threads does. reference = 0: tcuda's own schedule (Philox
 * counters computed directly, vector stores); 1: torch's exact kernel shape
 * (curand_init per thread, grid-stride loop), kept for tests and benches.
 * sm_count sizes the fast kernel's grid. */
cudaError_t tc_rng_launch(const tc_rng_op *op, void *out, uint64_t n, uint32_t threads,
                          const tc_philox_args *philox, int reference, int sm_count, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
