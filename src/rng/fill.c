/* Fill functions: torch's argument checks and host arithmetic for
 * uniform_, normal_, random_ and randint, its launch shape and offset
 * advance (docs/rng.md), and the launches. */
#include "rng/generator.h"
#include "stream/stream.h"
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ---- launch arithmetic (calc_execution_policy) ---- */

uint32_t tc_rng_grid(uint64_t n, int sms, int tpsm) {
  uint64_t blocks = (n + 255) / 256;
  uint64_t cap = (uint64_t)(sms > 0 ? sms : 1) * (uint64_t)(tpsm / 256 > 0 ? tpsm / 256 : 1);
  return (uint32_t)(blocks < cap ? blocks : cap);
}

uint64_t tc_rng_increment(uint64_t n, uint32_t grid, int unroll) {
  return ((n - 1) / ((uint64_t)256 * grid * (uint64_t)unroll) + 1) * 4;
}

int tc_rng_fits_32bit(uint64_t n, size_t es) {
  return n <= INT32_MAX && 1 + (n - 1) * (uint64_t)es <= INT32_MAX;
}

typedef int (*piece_fn)(void *ctx, uint64_t start, uint64_t count);

/* SplitUntil32Bit on one dimension: the first floor(n/2) elements, then the
 * rest, each split again while too big. Stops when fn returns nonzero. */
static int visit_pieces(uint64_t start, uint64_t n, size_t es, piece_fn fn, void *ctx) {
  if (tc_rng_fits_32bit(n, es)) return fn(ctx, start, n);
  uint64_t first = n / 2;
  int r = visit_pieces(start, first, es, fn, ctx);
  return r ? r : visit_pieces(start + first, n - first, es, fn, ctx);
}

typedef struct { tc_rng_piece *out; size_t cap, n; } collect_ctx;
static int collect(void *p, uint64_t start, uint64_t count) {
  collect_ctx *c = p;
  if (c->n < c->cap) c->out[c->n] = (tc_rng_piece){start, count};
  c->n++;
  return 0;
}

size_t tc_rng_split(uint64_t n, size_t es, tc_rng_piece *out, size_t cap) {
  collect_ctx c = {out, cap, 0};
  visit_pieces(0, n, es, collect, &c);
  return c.n;
}

/* ---- torch's host-side checks and arithmetic ---- */

static int digits_of(tcuda_dtype dt) {
  switch (dt) {
  case TCUDA_FLOAT32: return 24;
  case TCUDA_FLOAT64: return 53;
  case TCUDA_FLOAT16: return 11;
  case TCUDA_BFLOAT16: return 8;
  default: return 0;
  }
}

static int is_floating(tcuda_dtype dt) { return digits_of(dt) != 0; }

static double float_max(tcuda_dtype dt) {
  switch (dt) {
  case TCUDA_FLOAT32: return FLT_MAX;
  case TCUDA_FLOAT64: return DBL_MAX;
  case TCUDA_FLOAT16: return 65504.0;
  default: return 3.3895313892515355e38; /* bfloat16 */
  }
}

/* static_cast<scalar_t>(v) for a floating dtype, as a double: int64 goes
 * to float (or double) first, and float16/bfloat16 round from that float. */
static double cast_int_to(tcuda_dtype dt, int64_t v) {
  switch (dt) {
  case TCUDA_FLOAT64: return (double)v;
  case TCUDA_FLOAT32: return (float)v;
  case TCUDA_FLOAT16: return tc_half_to_float(tc_float_to_half((float)v));
  default: return tc_bf16_to_float(tc_float_to_bf16((float)v));
  }
}

/* static_cast<int64_t>(floating), with x86-64's answer for values out of
 * range (INT64_MIN), where C++ leaves it undefined. */
static int64_t to_i64(double d) {
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return INT64_MIN;
  return (int64_t)d;
}

static int floor_log2(uint64_t v) {
  int n = 0;
  while (v >>= 1) ++n;
  return n;
}

static uint64_t uabs(int64_t v) { return v < 0 ? 0 - (uint64_t)v : (uint64_t)v; }

/* update_from / update_to: move bounds inwards to values the dtype holds.
 * At the ends of int64 there is no neighbour to look at (from + 1 would
 * overflow): the bound stays, and the range checks after refuse it. */
static int64_t update_from(tcuda_dtype dt, int64_t from) {
  if (from == INT64_MAX) return from;
  int64_t p1 = to_i64(cast_int_to(dt, from + 1));
  if (p1 < from) from = (int64_t)((uint64_t)p1 + (1ull << (floor_log2(uabs(from + 1)) - digits_of(dt) + 1)));
  return from;
}
static int64_t update_to(tcuda_dtype dt, int64_t to) {
  if (to == INT64_MIN) return to;
  int64_t m1 = to_i64(cast_int_to(dt, to - 1));
  if (m1 >= to) to = (int64_t)((uint64_t)m1 - (1ull << (floor_log2(uabs(to - 1)) - digits_of(dt) + 1)));
  return to;
}

/* check_from_to_in_range: from and to_inc must fit the dtype. */
static tcuda_status check_in_range(const char *F, tcuda_dtype dt, int64_t from, int64_t to_inc,
                                   const char *to_name) {
  const char *dn = tcuda_dtype_name(dt);
  if (is_floating(dt)) {
    double mx = float_max(dt);
    if (!((double)from >= -mx && (double)from <= mx))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: from=%lld is out of bounds for %s", F, (long long)from, dn);
    if (!((double)to_inc >= -mx && (double)to_inc <= mx))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s=%lld is out of bounds for %s", F, to_name,
                      (long long)to_inc, dn);
    return TCUDA_SUCCESS;
  }
  int64_t lo, hi;
  switch (dt) {
  case TCUDA_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
  case TCUDA_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
  case TCUDA_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
  case TCUDA_INT64: lo = INT64_MIN; hi = INT64_MAX; break;
  case TCUDA_UINT8: lo = 0; hi = UINT8_MAX; break;
  case TCUDA_UINT16: lo = 0; hi = UINT16_MAX; break;
  case TCUDA_UINT32: lo = 0; hi = UINT32_MAX; break;
  case TCUDA_UINT64: lo = 0; hi = INT64_MAX; break; /* torch's int64 view of uint64 */
  default: lo = 0; hi = 1; break;                   /* bool */
  }
  if (from < lo || from > hi)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: from=%lld is out of bounds for %s", F, (long long)from, dn);
  if (to_inc < lo || to_inc > hi)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s=%lld is out of bounds for %s", F, to_name,
                    (long long)to_inc, dn);
  return TCUDA_SUCCESS;
}

static tc_rng_out out_of(tcuda_dtype dt) {
  switch (dt) {
  case TCUDA_FLOAT32: return TC_OUT_F32;
  case TCUDA_FLOAT64: return TC_OUT_F64;
  case TCUDA_FLOAT16: return TC_OUT_F16;
  case TCUDA_BFLOAT16: return TC_OUT_BF16;
  case TCUDA_INT8: case TCUDA_UINT8: case TCUDA_BOOL: return TC_OUT_I8;
  case TCUDA_INT16: case TCUDA_UINT16: return TC_OUT_I16;
  case TCUDA_INT32: case TCUDA_UINT32: return TC_OUT_I32;
  default: return TC_OUT_I64;
  }
}

static int is_integral(tcuda_dtype dt) {
  return dt == TCUDA_INT8 || dt == TCUDA_INT16 || dt == TCUDA_INT32 || dt == TCUDA_INT64 || dt == TCUDA_UINT8 ||
         dt == TCUDA_UINT16 || dt == TCUDA_UINT32 || dt == TCUDA_UINT64 || dt == TCUDA_BOOL;
}

static tcuda_status unsupported(const char *F, const char *what, tcuda_dtype dt) {
  return tc_error(TCUDA_ERROR_NOT_SUPPORTED, "%s: %s is not implemented for dtype %s (as in torch)", F, what,
                  tcuda_dtype_name(dt));
}

/* random_(from, to) and random_(from) once the range is known. */
static void set_bits(tc_rng_op *op, uint64_t range, int64_t base) {
  op->dist = range >= (1ull << 28) || range == 0 ? TC_DIST_BITS64 : TC_DIST_BITS32;
  op->range = range;
  op->base = base;
}

tcuda_status tc_rand_build_op(const char *F, tcuda_dtype dt, const tc_rand_req *req, tc_rng_op *op,
                              size_t *elem_size, unsigned *per_element) {
  TC_CHECK_ARG(F, req, "request");
  if (!tcuda_dtype_size(dt))
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: dtype %d is not a tcuda_dtype", F, (int)dt);
  memset(op, 0, sizeof *op);
  *per_element = 1;
  tcuda_dtype real = dt;
  if (req->kind == TC_RAND_UNIFORM || req->kind == TC_RAND_NORMAL) {
    /* complex: the real view with twice the elements (view_as_real) */
    if (dt == TCUDA_COMPLEX32) real = TCUDA_FLOAT16;
    else if (dt == TCUDA_COMPLEX64) real = TCUDA_FLOAT32;
    else if (dt == TCUDA_COMPLEX128) real = TCUDA_FLOAT64;
    if (real != dt) *per_element = 2;
    if (!is_floating(real))
      return unsupported(F, req->kind == TC_RAND_UNIFORM ? "uniform_" : "normal_", dt);
  }
  *elem_size = tcuda_dtype_size(real);
  op->out = out_of(real);
  const char *dn = tcuda_dtype_name(real);

  switch (req->kind) {
  case TC_RAND_UNIFORM: {
    double from = req->a, to = req->b, mx = float_max(real);
    if (!(from >= -mx && from <= mx))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: from=%g is out of bounds for %s", F, from, dn);
    if (!(to >= -mx && to <= mx))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: to=%g is out of bounds for %s", F, to, dn);
    if (!(from <= to))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: from=%g > to=%g; uniform_ needs from <= to", F, from, to);
    if (!(to - from <= mx))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                      "%s: to - from exceeds the largest %s (to=%g, from=%g)", F, dn, to, from);
    /* bounds cast to the dtype; range = to - from in the dtype, widened */
    if (real == TCUDA_FLOAT64) {
      op->dist = TC_DIST_UNIFORM_D;
      op->a = from; op->b = to - from; op->c = to;
    } else {
      op->dist = TC_DIST_UNIFORM_F;
      float f = (float)from, t = (float)to;
      if (real == TCUDA_FLOAT16) {
        f = tc_half_to_float(tc_float_to_half(f));
        t = tc_half_to_float(tc_float_to_half(t));
      } else if (real == TCUDA_BFLOAT16) {
        f = tc_bf16_to_float(tc_float_to_bf16(f));
        t = tc_bf16_to_float(tc_float_to_bf16(t));
      }
      volatile float r = t - f; /* one float subtraction, never widened */
      float range = r;
      if (real == TCUDA_FLOAT16) range = tc_half_to_float(tc_float_to_half(range));
      else if (real == TCUDA_BFLOAT16) range = tc_bf16_to_float(tc_float_to_bf16(range));
      op->a = f; op->b = range; op->c = t;
    }
    return TCUDA_SUCCESS;
  }
  case TC_RAND_NORMAL: {
    double mean = req->a, sd = req->b;
    if (!(sd >= 0.0))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: std=%g; normal_ needs std >= 0", F, sd);
    if (*per_element == 2) sd = sd / sqrt(2.0); /* each part gets half the variance */
    op->dist = real == TCUDA_FLOAT64 ? TC_DIST_NORMAL_D : TC_DIST_NORMAL_F;
    op->a = mean;
    op->b = sd;
    return TCUDA_SUCCESS;
  }
  case TC_RAND_RANDOM: {
    /* uniform_int: max+1 for integers, 2^digits+1 for floating, w&1 for bool */
    uint64_t m;
    switch (dt) {
    case TCUDA_INT8: m = 1ull << 7; break;
    case TCUDA_INT16: m = 1ull << 15; break;
    case TCUDA_INT32: m = 1ull << 31; break;
    case TCUDA_INT64: m = 1ull << 63; break;
    case TCUDA_UINT8: m = 1ull << 8; break;
    case TCUDA_BOOL: m = 2; break;
    case TCUDA_FLOAT32: case TCUDA_FLOAT64: case TCUDA_FLOAT16: case TCUDA_BFLOAT16:
      m = (1ull << digits_of(dt)) + 1;
      break;
    default: return unsupported(F, "random_", dt);
    }
    /* the word size follows the dtype here, not the range */
    op->dist = dt == TCUDA_INT64 || dt == TCUDA_FLOAT64 ? TC_DIST_BITS64 : TC_DIST_BITS32;
    op->range = m;
    op->base = 0;
    return TCUDA_SUCCESS;
  }
  case TC_RAND_RANDINT: {
    int64_t from = req->lo, to = req->hi;
    if (!is_floating(dt) && !is_integral(dt)) return unsupported(F, "random_(from, to)", dt);
    if (!(from < to))
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: low=%lld >= high=%lld; randint needs low < high", F,
                      (long long)from, (long long)to);
    if (is_floating(dt)) {
      from = update_from(dt, from);
      to = update_to(dt, to);
      if (!(from < to))
        return tc_error(TCUDA_ERROR_INVALID_ARGUMENT,
                        "%s: low cast to %s (%lld) is not below high cast to %s (%lld)", F, dn, (long long)from,
                        dn, (long long)to);
    }
    tcuda_status s = check_in_range(F, dt, from, to - 1, "high - 1");
    if (s) return s;
    set_bits(op, (uint64_t)to - (uint64_t)from, from);
    return TCUDA_SUCCESS;
  }
  case TC_RAND_RANDOM_FROM: {
    int64_t from = req->lo, to_inc;
    if (from == INT64_MIN) { /* the full 64-bit range */
      if (dt != TCUDA_INT64 && dt != TCUDA_FLOAT64 && dt != TCUDA_FLOAT32 && dt != TCUDA_BFLOAT16)
        return unsupported(F, "random_(INT64_MIN) (all 64 bits)", dt);
      op->dist = TC_DIST_BITS64;
      op->range = 0;
      op->base = 0;
      return TCUDA_SUCCESS;
    }
    if (is_floating(dt)) {
      to_inc = (int64_t)1 << digits_of(dt);
      from = update_from(dt, from);
      if (!(from < to_inc))
        return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: from cast to %s (%lld) is not below %lld", F, dn,
                        (long long)from, (long long)to_inc);
    } else if (is_integral(dt)) {
      switch (dt) {
      case TCUDA_INT8: to_inc = INT8_MAX; break;
      case TCUDA_INT16: to_inc = INT16_MAX; break;
      case TCUDA_INT32: to_inc = INT32_MAX; break;
      case TCUDA_INT64: to_inc = INT64_MAX; break;
      case TCUDA_UINT8: to_inc = UINT8_MAX; break;
      case TCUDA_UINT16: to_inc = UINT16_MAX; break;
      case TCUDA_UINT32: to_inc = UINT32_MAX; break;
      case TCUDA_UINT64: to_inc = -1; break; /* torch's int64 cast of UINT64_MAX: rejected below */
      default: to_inc = 1; break;            /* bool */
      }
    } else {
      return unsupported(F, "random_(from)", dt);
    }
    tcuda_status s = check_in_range(F, dt, from, to_inc, "to_inc");
    if (s) return s;
    set_bits(op, (uint64_t)to_inc - (uint64_t)from + 1, from);
    return TCUDA_SUCCESS;
  }
  }
  return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: unknown request kind %d", F, (int)req->kind);
}

/* ---- device shape cache ---- */

static _Atomic int g_sms[TC_MAX_DEVICES], g_tpsm[TC_MAX_DEVICES];

tcuda_status tc_rng_device_shape(const char *F, int device, int *sms, int *tpsm) {
  int cached = device >= 0 && device < TC_MAX_DEVICES;
  int a = cached ? atomic_load_explicit(&g_sms[device], memory_order_relaxed) : 0;
  int b = cached ? atomic_load_explicit(&g_tpsm[device], memory_order_relaxed) : 0;
  if (!a || !b) {
    TC_CUDA_TRY(F, cudaDeviceGetAttribute(&a, cudaDevAttrMultiProcessorCount, device));
    TC_CUDA_TRY(F, cudaDeviceGetAttribute(&b, cudaDevAttrMaxThreadsPerMultiProcessor, device));
    if (cached) {
      atomic_store(&g_sms[device], a);
      atomic_store(&g_tpsm[device], b);
    }
  }
  *sms = a;
  *tpsm = b;
  return TCUDA_SUCCESS;
}

/* ---- the fill ---- */

typedef struct {
  const char *F;
  tcuda_generator_t *g;
  const tc_rng_op *op;
  char *buf;
  size_t es;
  int sms, tpsm, capturing, reference;
  cudaStream_t stream;
  cudaError_t err;
  tcuda_status status;
} launch_ctx;

/* One sub-iterator of torch's split: its own draw, then its kernel. */
static int launch_piece(void *p, uint64_t start, uint64_t count) {
  launch_ctx *c = p;
  int unroll = tc_rng_unroll(c->op->dist);
  uint32_t grid = tc_rng_grid(count, c->sms, c->tpsm);
  tc_philox_args pa;
  c->status = tc_generator_philox(c->F, c->g, tc_rng_increment(count, grid, unroll), c->capturing, &pa);
  if (c->status) return 1;
  c->err = tc_rng_launch(c->op, c->buf + start * c->es, count, grid * 256u, &pa, c->reference, c->sms, c->stream);
  return c->err != cudaSuccess;
}

tcuda_status tc_rand_fill(const char *F, tcuda_generator_t *g, void *buf, size_t n, tcuda_dtype dt,
                          const tc_rand_req *req, const tcuda_stream_t *stream, int reference) {
  tc_rng_op op;
  size_t es;
  unsigned per;
  tcuda_status s = tc_rand_build_op(F, dt, req, &op, &es, &per);
  if (s) return s;
  if (g && (s = tc_generator_check(F, g))) return s;
  if (n == 0) return TCUDA_SUCCESS; /* torch returns before drawing */
  TC_CHECK_ARG(F, buf, "buf");
  if (n > (SIZE_MAX / es) / per)
    return tc_error(TCUDA_ERROR_OVERFLOW, "%s: n=%zu elements of %s overflow the address space", F, n,
                    tcuda_dtype_name(dt));
  if ((uintptr_t)buf % es)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: buf %p is not aligned to its %s elements", F, buf,
                    tcuda_dtype_name(dt));
  uint64_t total = (uint64_t)n * per;

  if ((s = tc_lazy_init(F))) return s;
  struct cudaPointerAttributes attr;
  cudaError_t e = cudaPointerGetAttributes(&attr, buf);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: buf %p is not a device pointer (%s)", F, buf,
                    cudaGetErrorName(e));
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return tc_error(TCUDA_ERROR_INVALID_POINTER, "%s: buf %p is %s memory, not device memory", F, buf,
                    attr.type == cudaMemoryTypeHost ? "pinned host" : "host");
  int dev = attr.device;
  if (g && g->device != dev)
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: generator is on device %d but buf %p is on device %d", F,
                    g->device, buf, dev);
  tcuda_stream_t st;
  if (stream) {
    if ((s = tc_stream_check(F, "stream", *stream))) return s;
    if (stream->device != dev)
      return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: stream is on device %d but buf %p is on device %d", F,
                      stream->device, buf, dev);
    st = *stream;
  } else if ((s = tc_stream_current(F, dev, &st))) {
    return s;
  }
  if (!g && (s = tc_default_generator(F, dev, &g))) return s;
  int sms, tpsm;
  if ((s = tc_rng_device_shape(F, dev, &sms, &tpsm))) return s;

  int saved;
  if ((s = tc_on_device_begin(F, dev, &saved))) return s;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  e = cudaStreamIsCapturing(st.handle, &cs);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    tc_on_device_end(saved);
    return tc_cuda_error(e, F, "cudaStreamIsCapturing");
  }
  launch_ctx c = {F, g, &op, buf, es, sms, tpsm, cs != cudaStreamCaptureStatusNone, reference, st.handle,
                  cudaSuccess, TCUDA_SUCCESS};

  pthread_mutex_lock(&g->mu);
  uint64_t off0 = g->offset, intra0 = g->offset_intragraph;
  /* The whole buffer draws first, whether or not it is then split. */
  uint32_t grid = tc_rng_grid(total, sms, tpsm);
  uint64_t inc = tc_rng_increment(total, grid, tc_rng_unroll(op.dist));
  if (tc_rng_fits_32bit(total, es)) {
    launch_piece(&c, 0, total);
  } else {
    tc_philox_args unused;
    c.status = tc_generator_philox(F, g, inc, c.capturing, &unused);
    if (!c.status) visit_pieces(0, total, es, launch_piece, &c);
  }
  if (c.status || c.err != cudaSuccess) { /* nothing was queued that counts: undo the draws */
    g->offset = off0;
    g->offset_intragraph = intra0;
  }
  pthread_mutex_unlock(&g->mu);
  tc_on_device_end(saved);
  if (c.status) return c.status;
  if (c.err != cudaSuccess) {
    (void)cudaGetLastError();
    return tc_cuda_error(c.err, F, "RNG kernel launch");
  }
  return TCUDA_SUCCESS;
}

/* ---- public fills ---- */

tcuda_status tcuda_rand_uniform(tcuda_generator_t *g, void *buf, size_t n, tcuda_dtype dt, double from, double to,
                                const tcuda_stream_t *stream) {
  tc_rand_req r = {.kind = TC_RAND_UNIFORM, .a = from, .b = to};
  return tc_rand_fill("tcuda_rand_uniform", g, buf, n, dt, &r, stream, 0);
}

tcuda_status tcuda_rand_normal(tcuda_generator_t *g, void *buf, size_t n, tcuda_dtype dt, double mean, double std,
                               const tcuda_stream_t *stream) {
  tc_rand_req r = {.kind = TC_RAND_NORMAL, .a = mean, .b = std};
  return tc_rand_fill("tcuda_rand_normal", g, buf, n, dt, &r, stream, 0);
}

tcuda_status tcuda_rand_random(tcuda_generator_t *g, void *buf, size_t n, tcuda_dtype dt,
                               const tcuda_stream_t *stream) {
  tc_rand_req r = {.kind = TC_RAND_RANDOM};
  return tc_rand_fill("tcuda_rand_random", g, buf, n, dt, &r, stream, 0);
}

tcuda_status tcuda_rand_randint(tcuda_generator_t *g, void *buf, size_t n, tcuda_dtype dt, int64_t low,
                                int64_t high, const tcuda_stream_t *stream) {
  tc_rand_req r = {.kind = TC_RAND_RANDINT, .lo = low, .hi = high};
  return tc_rand_fill("tcuda_rand_randint", g, buf, n, dt, &r, stream, 0);
}

tcuda_status tcuda_rand_random_from(tcuda_generator_t *g, void *buf, size_t n, tcuda_dtype dt, int64_t from,
                                    const tcuda_stream_t *stream) {
  tc_rand_req r = {.kind = TC_RAND_RANDOM_FROM, .lo = from};
  return tc_rand_fill("tcuda_rand_random_from", g, buf, n, dt, &r, stream, 0);
}
