/* Host reference for tcuda's RNG, shared by unit and GPU tests. Written from
 * the algorithms, independently of src/rng: Philox4x32-10 (Random123),
 * cuRAND's Philox state (curand_init / curand4), torch's launch shape and
 * element mapping, and the uniform and integer transforms
 * (docs/rng.md). Normals have no host reference:
 * they need the GPU's __sincosf and logf. */
#ifndef TC_RNG_REF_H
#define TC_RNG_REF_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "tcuda.h"

/* ---- Philox4x32 (any round count, for the Random123 vectors) ---- */
static inline void rr_philox(const uint32_t ctr_in[4], const uint32_t key_in[2], int rounds, uint32_t out[4]) {
  uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
  uint32_t k0 = key_in[0], k1 = key_in[1];
  for (int r = 0; r < rounds; r++) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n1 = (uint32_t)p1;
    uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1, n3 = (uint32_t)p0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
  }
  out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* ---- cuRAND's Philox state, step by step (curand_init, curand4) ---- */
typedef struct rr_curand { uint32_t ctr[4], key[2], out[4]; } rr_curand;

static inline void rr_curand_incr(rr_curand *s, uint64_t n) { /* Philox_State_Incr(s, n) */
  uint32_t nlo = (uint32_t)n, nhi = (uint32_t)(n >> 32);
  s->ctr[0] += nlo;
  if (s->ctr[0] < nlo) nhi++;
  s->ctr[1] += nhi;
  if (nhi <= s->ctr[1]) return;
  if (++s->ctr[2]) return;
  ++s->ctr[3];
}
static inline void rr_curand_init(rr_curand *s, uint64_t seed, uint64_t subsequence, uint64_t offset) {
  memset(s, 0, sizeof *s);
  s->key[0] = (uint32_t)seed;
  s->key[1] = (uint32_t)(seed >> 32);
  /* skipahead_sequence: add to the high 64 bits of the counter */
  uint32_t nlo = (uint32_t)subsequence, nhi = (uint32_t)(subsequence >> 32);
  s->ctr[2] += nlo;
  if (s->ctr[2] < nlo) nhi++;
  s->ctr[3] += nhi;
  /* skipahead(offset) with offset % 4 == 0 */
  rr_curand_incr(s, offset / 4);
  rr_philox(s->ctr, s->key, 10, s->out);
}
static inline void rr_curand4(rr_curand *s, uint32_t w[4]) {
  memcpy(w, s->out, 16);
  if (!++s->ctr[0] && !++s->ctr[1] && !++s->ctr[2]) ++s->ctr[3];
  rr_philox(s->ctr, s->key, 10, s->out);
}

/* The k-th curand4 of thread t, directly: counter = (offset/4 + k) + t*2^64. */
static inline void rr_words(uint64_t seed, uint64_t offset, uint64_t t, uint64_t k, uint32_t w[4]) {
  uint64_t lo = offset / 4 + k, hi = t + (lo < offset / 4 ? 1 : 0);
  uint32_t ctr[4] = {(uint32_t)lo, (uint32_t)(lo >> 32), (uint32_t)hi, (uint32_t)(hi >> 32)};
  uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
  rr_philox(ctr, key, 10, w);
}

/* ---- torch's launch shape (calc_execution_policy) ---- */
static inline uint32_t rr_grid(uint64_t n, int sms, int tpsm) {
  uint64_t g = (n + 255) / 256, cap = (uint64_t)sms * (uint64_t)(tpsm / 256);
  return (uint32_t)(g < cap ? g : cap);
}
static inline uint64_t rr_increment(uint64_t n, uint32_t grid, int unroll) {
  uint64_t per_call = (uint64_t)256 * grid * (uint64_t)unroll;
  return (n + per_call - 1) / per_call * 4;
}

/* ---- transforms ---- */
static inline float rr_u32_to_float(uint32_t x) { return (float)x; } /* round to nearest even */
static inline float rr_uniform_f(uint32_t x) {
  return rr_u32_to_float(x) * 0x1p-32f + 0x1p-33f; /* the product is exact: fma or not, same */
}
static inline double rr_uniform_d(uint32_t x, uint32_t y) {
  uint64_t z = (uint64_t)x ^ ((uint64_t)y << 21);
  return (double)z * 0x1p-53 + 0x1p-54;
}

/* Round a finite float to float16 / bfloat16 (nearest even), through an exact
 * double quantum: a different algorithm from the library's bit twiddling. */
static inline uint16_t rr_f2h(float f) {
  if (f != f) return 0x7e00;
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f);
  if (a == 0) return sign;
  int E;
  frexp(a, &E);
  E -= 1; /* a in [2^E, 2^(E+1)) */
  if (E < -14) E = -14;
  double q = ldexp(1.0, E - 10);
  double r = nearbyint(a / q) * q;
  if (r >= 65520.0 || isinf(r)) return sign | 0x7c00;
  if (r == 0) return sign;
  frexp(r, &E);
  E -= 1;
  if (E < -14) return sign | (uint16_t)(r / 0x1p-24);
  return sign | (uint16_t)(((E + 15) << 10) | (uint16_t)(r / ldexp(1.0, E - 10) - 1024));
}
static inline float rr_h2f(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (float)(h & 0x8000 ? -v : v);
}
static inline uint16_t rr_f2bf(float f) {
  if (f != f) return 0x7fc0;
  double a = fabs((double)f);
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  if (a == 0 || isinf(a)) { uint32_t x; float g = (float)a; memcpy(&x, &g, 4); return sign | (uint16_t)(x >> 16); }
  int E;
  frexp(a, &E);
  E -= 1;
  if (E < -126) E = -126;
  double q = ldexp(1.0, E - 7);
  double r = nearbyint(a / q) * q;
  float g = r > 3.4028234663852886e38 ? INFINITY : (float)r; /* exact when finite */
  uint32_t x;
  memcpy(&x, &g, 4);
  return sign | (uint16_t)(x >> 16);
}
static inline float rr_bf2f(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* ---- one fill, element by element ---- */
enum { RR_UNIFORM = 0, RR_RANDOM = 1, RR_RANDINT = 2 };
typedef struct rr_fill {
  int kind;
  tcuda_dtype dtype;
  double from, to;   /* RR_UNIFORM */
  int64_t low, high; /* RR_RANDINT: [low, high), bounds the dtype holds exactly */
  uint64_t seed, offset;
  int sms, tpsm;     /* the GPU's SM count and max threads per SM */
  uint64_t n;
} rr_fill;

static inline size_t rr_size(tcuda_dtype dt) {
  switch (dt) {
  case TCUDA_FLOAT64: case TCUDA_INT64: case TCUDA_UINT64: return 8;
  case TCUDA_FLOAT32: case TCUDA_INT32: case TCUDA_UINT32: return 4;
  case TCUDA_FLOAT16: case TCUDA_BFLOAT16: case TCUDA_INT16: case TCUDA_UINT16: return 2;
  default: return 1;
  }
}
static inline int rr_is_float(tcuda_dtype dt) {
  return dt == TCUDA_FLOAT32 || dt == TCUDA_FLOAT64 || dt == TCUDA_FLOAT16 || dt == TCUDA_BFLOAT16;
}
/* 64-bit words (unroll 2) or 32-bit (unroll 4). */
static inline int rr_wide(const rr_fill *f) {
  if (f->kind == RR_UNIFORM) return f->dtype == TCUDA_FLOAT64;
  if (f->kind == RR_RANDOM) return f->dtype == TCUDA_INT64 || f->dtype == TCUDA_FLOAT64;
  return (uint64_t)f->high - (uint64_t)f->low >= (1ull << 28);
}
static inline uint64_t rr_fill_increment(const rr_fill *f) {
  return rr_increment(f->n, rr_grid(f->n, f->sms, f->tpsm), rr_wide(f) ? 2 : 4);
}

/* int64 value -> stored bits of the dtype (torch's static_cast). */
static inline uint64_t rr_store_int(tcuda_dtype dt, int64_t v) {
  switch (dt) {
  case TCUDA_FLOAT32: { float x = (float)v; uint32_t b; memcpy(&b, &x, 4); return b; }
  case TCUDA_FLOAT64: { double x = (double)v; uint64_t b; memcpy(&b, &x, 8); return b; }
  case TCUDA_FLOAT16: return rr_f2h((float)v);
  case TCUDA_BFLOAT16: return rr_f2bf((float)v);
  case TCUDA_BOOL: return v != 0;
  default: {
    size_t s = rr_size(dt);
    return s == 8 ? (uint64_t)v : (uint64_t)v & ((1ull << (8 * s)) - 1);
  }
  }
}

/* Stored bits (little-endian value) of element e. */
static inline uint64_t rr_value(const rr_fill *f, uint64_t e) {
  int wide = rr_wide(f), U = wide ? 2 : 4;
  uint64_t S = (uint64_t)256 * rr_grid(f->n, f->sms, f->tpsm);
  uint64_t t = e % S, q = e / S, k = q / U;
  int lane = (int)(q % U);
  uint32_t w[4];
  rr_words(f->seed, f->offset, t, k, w);
  if (f->kind == RR_UNIFORM) {
    tcuda_dtype dt = f->dtype;
    if (dt == TCUDA_FLOAT64) {
      double u = rr_uniform_d(w[2 * lane], w[2 * lane + 1]);
      double v = fma(u, f->to - f->from, f->from);
      if (v == f->to) v = f->from;
      uint64_t b; memcpy(&b, &v, 8); return b;
    }
    float u = rr_uniform_f(w[lane]);
    float from = (float)f->from, to = (float)f->to;
    if (dt == TCUDA_FLOAT16) { from = rr_h2f(rr_f2h(from)); to = rr_h2f(rr_f2h(to)); }
    if (dt == TCUDA_BFLOAT16) { from = rr_bf2f(rr_f2bf(from)); to = rr_bf2f(rr_f2bf(to)); }
    volatile float rv = to - from;
    float range = rv;
    if (dt == TCUDA_FLOAT16) range = rr_h2f(rr_f2h(range));
    if (dt == TCUDA_BFLOAT16) range = rr_bf2f(rr_f2bf(range));
    float v = fmaf(u, range, from);
    if (dt == TCUDA_FLOAT32) {
      if (v == to) v = from;
      uint32_t b; memcpy(&b, &v, 4); return b;
    }
    uint16_t h = dt == TCUDA_FLOAT16 ? rr_f2h(v) : rr_f2bf(v);
    float back = dt == TCUDA_FLOAT16 ? rr_h2f(h) : rr_bf2f(h);
    if (back == to) h = dt == TCUDA_FLOAT16 ? rr_f2h(from) : rr_f2bf(from);
    return h;
  }
  uint64_t word = wide ? ((uint64_t)w[2 * lane] << 32) | w[2 * lane + 1] : w[lane];
  if (f->kind == RR_RANDOM) {
    uint64_t m;
    switch (f->dtype) {
    case TCUDA_INT64: m = 1ull << 63; break;
    case TCUDA_INT32: m = 1ull << 31; break;
    case TCUDA_INT16: m = 1ull << 15; break;
    case TCUDA_INT8: m = 1ull << 7; break;
    case TCUDA_UINT8: m = 1ull << 8; break;
    case TCUDA_BOOL: return word & 1;
    case TCUDA_FLOAT32: m = (1ull << 24) + 1; break;
    case TCUDA_FLOAT64: m = (1ull << 53) + 1; break;
    case TCUDA_FLOAT16: m = (1ull << 11) + 1; break;
    default: m = (1ull << 8) + 1; break; /* bfloat16 */
    }
    return rr_store_int(f->dtype, (int64_t)(word % m));
  }
  uint64_t range = (uint64_t)f->high - (uint64_t)f->low;
  return rr_store_int(f->dtype, (int64_t)(word % range + (uint64_t)f->low));
}
#endif
