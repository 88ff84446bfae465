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

/* x mod d by multiplication (Granlund and Montgomery 1994, fig. 4.1, N=64):
 * with l = ceil(log2 d) and m = floor(2^64 (2^l - d) / d) + 1,
 * q = (t + ((x - t) >> 1)) >> (l - 1), t = mulhi(m, x), is x / d exactly for
 * every 64-bit x. For d >= 3 not a power of two (those take the mask);
 * torch's `%` by a run-time range compiles to a slow division loop. */
typedef struct tc_fastdiv { uint64_t d, m; unsigned shift; /* l - 1 */ } tc_fastdiv;

static inline tc_fastdiv tc_fastdiv_make(uint64_t d) {
  tc_fastdiv f = {d, 0, 0};
  unsigned l = 0;
  while (l < 64 && ((uint64_t)1 << l) < d) l++;
  /* floor(2^64 * r / d), r = 2^l - d < d, by long division one bit at a time */
  uint64_t r = l == 64 ? (uint64_t)0 - d : ((uint64_t)1 << l) - d, q = 0;
  for (int i = 0; i < 64; i++) {
    int top = (int)(r >> 63);
    r <<= 1;
    q <<= 1;
    if (top || r >= d) { r -= d; q |= 1; }
  }
  f.m = q + 1;
  f.shift = l - 1;
  return f;
}

#ifdef __CUDACC__
#define TC_HD __host__ __device__
#else
#define TC_HD
#endif

TC_HD static inline uint64_t tc_mulhi64(uint64_t a, uint64_t b) {
#ifdef __CUDA_ARCH__
  return __umul64hi(a, b);
#else
  uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
  uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
  return p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
#endif
}

TC_HD static inline uint64_t tc_fastdiv_mod(uint64_t x, tc_fastdiv f) {
  uint64_t t = tc_mulhi64(f.m, x);
  uint64_t q = (t + ((x - t) >> 1)) >> f.shift;
  return x - q * f.d;
}

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
