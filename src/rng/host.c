/* Host fills: the bytes the GPU fills write, computed on the CPU for a
 * stated launch geometry (docs/rng.md). The request goes through the same
 * checks and host arithmetic as the GPU fills (tc_rand_build_op), then each
 * element is made as torch's kernel makes it: Philox4x32-10 at counter
 * (offset/4 + k, thread t), lane `ii` of that call, and the transform of
 * kernels.cu. Normals need the GPU's own sincosf and logf, so they have no
 * host fill. */
#include "rng/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Philox4x32 with 10 rounds (Random123), as curand_Philox4x32_10. */
static void philox10(uint32_t c[4], uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; r++) {
    uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
    uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = (uint32_t)p1;
    c[2] = n2;
    c[3] = (uint32_t)p0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

/* The k-th draw of thread t: curand_init(seed, t, offset) then k+1 curand4
 * calls, i.e. one 128-bit counter (offset/4 + k) + t * 2^64. */
static void draw(uint64_t seed, uint64_t o4, uint64_t t, uint64_t k, uint32_t w[4]) {
  uint64_t lo = o4 + k, hi = t + (lo < o4);
  w[0] = (uint32_t)lo;
  w[1] = (uint32_t)(lo >> 32);
  w[2] = (uint32_t)hi;
  w[3] = (uint32_t)(hi >> 32);
  philox10(w, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* static_cast of an int64 into the stored type (Out<O>::i in kernels.cu). */
static uint64_t store_int(tc_rng_out out, int64_t v) {
  switch (out) {
  case TC_OUT_F32: { float f = (float)v; uint32_t b; memcpy(&b, &f, 4); return b; }
  case TC_OUT_F64: { double d = (double)v; uint64_t b; memcpy(&b, &d, 8); return b; }
  case TC_OUT_F16: return tc_float_to_half((float)v);
  case TC_OUT_BF16: return tc_float_to_bf16((float)v);
  default: return (uint64_t)v; /* the low bytes are stored */
  }
}

/* A float (the opmath value) into a float32/16/bfloat16 slot. */
static uint64_t store_float(tc_rng_out out, float f) {
  if (out == TC_OUT_F16) return tc_float_to_half(f);
  if (out == TC_OUT_BF16) return tc_float_to_bf16(f);
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}
static float stored_as_float(tc_rng_out out, uint64_t bits) {
  if (out == TC_OUT_F16) return tc_half_to_float((uint16_t)bits);
  if (out == TC_OUT_BF16) return tc_bf16_to_float((uint16_t)bits);
  float f;
  uint32_t b = (uint32_t)bits;
  memcpy(&f, &b, 4);
  return f;
}

/* Lane ii's stored bits from one draw w, for op (the transforms of
 * kernels.cu, with cuRAND's uniform conversions). */
static uint64_t value(const tc_rng_op *op, const uint32_t w[4], int ii) {
  switch (op->dist) {
  case TC_DIST_UNIFORM_F: {
    float u = (float)w[ii] * 0x1p-32f + 0x1p-33f; /* the product is exact: no fma question */
    float from = (float)op->a, range = (float)op->b, to = (float)op->c;
    uint64_t v = store_float(op->out, fmaf(u, range, from));
    return stored_as_float(op->out, v) == to ? store_float(op->out, from) : v;
  }
  case TC_DIST_UNIFORM_D: {
    uint64_t z = (uint64_t)w[2 * ii] ^ ((uint64_t)w[2 * ii + 1] << 21);
    double u = (double)z * 0x1p-53 + 0x1p-54;
    double v = fma(u, op->b, op->a);
    if (v == op->c) v = op->a;
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
  }
  case TC_DIST_BITS32: {
    uint64_t x = w[ii];
    if (op->range) x %= op->range;
    return store_int(op->out, (int64_t)(x + (uint64_t)op->base));
  }
  case TC_DIST_BITS64: {
    uint64_t x = ((uint64_t)w[2 * ii] << 32) | w[2 * ii + 1]; /* the first word is the high half */
    if (op->range) x %= op->range;
    return store_int(op->out, (int64_t)(x + (uint64_t)op->base));
  }
  default: return 0; /* normals never get here */
  }
}

/* One kernel launch over count elements at out, from Philox offset o. */
static void fill_launch(const tc_rng_op *op, unsigned char *out, size_t es, uint64_t count, uint64_t seed,
                        uint64_t o, int sms, int tpsm) {
  const int U = tc_rng_unroll(op->dist);
  const uint64_t S = (uint64_t)256 * tc_rng_grid(count, sms, tpsm), SU = S * (uint64_t)U;
  for (uint64_t k = 0; k * SU < count; k++) {
    const uint64_t e0 = k * SU, tmax = count - e0 < S ? count - e0 : S;
    for (uint64_t t = 0; t < tmax; t++) {
      uint32_t w[4];
      draw(seed, o / 4, t, k, w);
      for (int ii = 0; ii < U; ii++) {
        uint64_t e = e0 + S * (uint64_t)ii + t;
        if (e >= count) break;
        uint64_t v = value(op, w, ii);
        memcpy(out + e * es, &v, es); /* little-endian: the low es bytes */
      }
    }
  }
}

static tc_rand_req request_of(const tcuda_rand_request_t *r) {
  tc_rand_req q = {.a = 0, .b = 0, .lo = r->low, .hi = r->high};
  switch (r->kind) {
  case TCUDA_RAND_UNIFORM: q.kind = TC_RAND_UNIFORM; q.a = r->from; q.b = r->to; break;
  case TCUDA_RAND_NORMAL: q.kind = TC_RAND_NORMAL; q.a = r->mean; q.b = r->std; break;
  case TCUDA_RAND_RANDOM: q.kind = TC_RAND_RANDOM; break;
  case TCUDA_RAND_RANDINT: q.kind = TC_RAND_RANDINT; break;
  default: q.kind = TC_RAND_RANDOM_FROM; break;
  }
  return q;
}

tcuda_status tcuda_rand_fill_host(const tcuda_rand_request_t *req, uint64_t seed, uint64_t *offset, int sm_count,
                                  int max_threads_per_sm, void *buf, size_t n) {
  static const char *F = "tcuda_rand_fill_host";
  TC_CHECK_ARG(F, req, "req");
  TC_CHECK_ARG(F, offset, "offset");
  if ((unsigned)req->kind > TCUDA_RAND_RANDOM_FROM)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: req->kind %d is not a tcuda_rand_kind", F, (int)req->kind);
  if (sm_count < 1 || sm_count > (1 << 20))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: sm_count %d is not in 1..%d", F, sm_count, 1 << 20);
  if (max_threads_per_sm < 256 || max_threads_per_sm > (1 << 20))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: max_threads_per_sm %d is not in 256..%d", F,
                    max_threads_per_sm, 1 << 20);
  if (*offset % 4)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: offset %llu is not a multiple of 4", F,
                    (unsigned long long)*offset);
  tc_rand_req q = request_of(req);
  tc_rng_op op;
  size_t es;
  unsigned per;
  tcuda_status s = tc_rand_build_op(F, req->dtype, &q, &op, &es, &per);
  if (s) return s;
  if (n == 0) return TCUDA_SUCCESS; /* torch returns before drawing: a check of the arguments */
  if (req->kind == TCUDA_RAND_NORMAL)
    return tc_error(TCUDA_ERROR_NOT_SUPPORTED,
                    "%s: normal_ has no host fill: its values come from the GPU's own sincosf and logf, which "
                    "the host does not reproduce bit for bit", F);
  TC_CHECK_ARG(F, buf, "buf");
  if (n > (SIZE_MAX / es) / per)
    return tc_error(TCUDA_ERROR_OVERFLOW, "%s: n=%zu elements of %s overflow the address space", F, n,
                    tcuda_dtype_name(req->dtype));
  uint64_t total = (uint64_t)n * per, o = *offset;
  unsigned char *out = buf;
  if (tc_rng_fits_32bit(total, es)) {
    fill_launch(&op, out, es, total, seed, o, sm_count, max_threads_per_sm);
    o += tc_rng_increment(total, tc_rng_grid(total, sm_count, max_threads_per_sm), tc_rng_unroll(op.dist));
  } else {
    /* as tc_rand_fill: one draw for the whole buffer, then each 32-bit
     * piece launches with its own draw */
    size_t np = tc_rng_split(total, es, NULL, 0);
    tc_rng_piece *pc = malloc(np * sizeof *pc);
    if (!pc) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
    tc_rng_split(total, es, pc, np);
    o += tc_rng_increment(total, tc_rng_grid(total, sm_count, max_threads_per_sm), tc_rng_unroll(op.dist));
    for (size_t i = 0; i < np; i++) {
      fill_launch(&op, out + pc[i].start * es, es, pc[i].count, seed, o, sm_count, max_threads_per_sm);
      o += tc_rng_increment(pc[i].count, tc_rng_grid(pc[i].count, sm_count, max_threads_per_sm),
                            tc_rng_unroll(op.dist));
    }
    free(pc);
  }
  *offset = o;
  return TCUDA_SUCCESS;
}
