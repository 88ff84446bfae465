/* RNG without a GPU: the host reference against Random123's published
 * Philox4x32 vectors and cuRAND's state machine, torch's launch arithmetic,
 * the library's argument checks and state API, and CUDA-less behaviour. */
#include "harness.h"
#include "rng_ref.h"
#include "rng/generator.h"
#include <float.h>
#include <math.h>

/* Random123 tests/kat_vectors: counter[4] key[2] -> output[4]. */
static void test_philox_known_answers(void) {
  static const struct { int rounds; uint32_t ctr[4], key[2], out[4]; } kat[] = {
    {10, {0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {10, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {10, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    {7, {0, 0, 0, 0}, {0, 0}, {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
    {7, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
     {0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
    {7, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
     {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
  };
  for (size_t i = 0; i < sizeof kat / sizeof *kat; i++) {
    uint32_t out[4];
    rr_philox(kat[i].ctr, kat[i].key, kat[i].rounds, out);
    for (int j = 0; j < 4; j++) CHECK_EQ_INT(out[j], kat[i].out[j]);
  }
}

/* The direct counter formula equals cuRAND's curand_init + k curand4 calls,
 * including the carry from the offset words into the thread words. */
static void test_counter_layout_matches_curand_state(void) {
  static const struct { uint64_t seed, t, offset; int calls; } cases[] = {
    {0, 0, 0, 5},
    {42, 1, 4, 9},
    {0x123456789abcdefull, 270335, 64, 20},
    {7, 0xffffffffull, 1ull << 34, 3},
    {99, 12345, 0xfffffffffffffff0ull, 8},  /* offset/4 + k crosses 2^62 */
    {5, 3, 0xfffffffffffffffcull, 6},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    rr_curand s;
    rr_curand_init(&s, cases[i].seed, cases[i].t, cases[i].offset);
    for (int k = 0; k < cases[i].calls; k++) {
      uint32_t a[4], b[4];
      rr_curand4(&s, a);
      rr_words(cases[i].seed, cases[i].offset, cases[i].t, (uint64_t)k, b);
      for (int j = 0; j < 4; j++) CHECK_EQ_INT(a[j], b[j]);
    }
  }
  /* A counter whose low 64 bits wrap carries into the thread words. */
  rr_curand s;
  rr_curand_init(&s, 1, 2, 0);
  s.ctr[0] = s.ctr[1] = 0xffffffffu;
  rr_philox(s.ctr, s.key, 10, s.out);
  uint32_t w[4];
  rr_curand4(&s, w);
  CHECK_EQ_INT(s.ctr[0], 0);
  CHECK_EQ_INT(s.ctr[1], 0);
  CHECK_EQ_INT(s.ctr[2], 3);
}

static void test_uniform_transforms(void) {
  CHECK(rr_uniform_f(0) == 0x1p-33f);
  CHECK(rr_uniform_f(1u << 31) == 0.5f + 0x1p-33f);
  /* x >= 2^32 - 128 rounds to 2^32 and gives 1.0, which rand turns into 0 */
  CHECK(rr_uniform_f(0xFFFFFF7Fu) < 1.0f);
  CHECK(rr_uniform_f(0xFFFFFF80u) == 1.0f);
  CHECK(rr_uniform_f(0xFFFFFFFFu) == 1.0f);
  /* double: z = x ^ (y << 21); z = 2^53 - 1 gives exactly 1.0 */
  CHECK(rr_uniform_d(0, 0) == 0x1p-54);
  CHECK(rr_uniform_d(0x1FFFFF, 0xFFFFFFFF) == 1.0);
  CHECK(rr_uniform_d(0x1FFFFE, 0xFFFFFFFF) < 1.0);
  CHECK(rr_uniform_d(0xFFFFFFFF, 0) == (double)0xFFFFFFFFu * 0x1p-53 + 0x1p-54);
}

/* float16/bfloat16 rounding: published encodings, and the library's bit
 * version against the reference's quantum version on a sweep of floats. */
static void test_half_bf16_rounding(void) {
  static const struct { float f; uint16_t h; } halfs[] = {
    {1.0f, 0x3c00}, {-2.0f, 0xc000}, {65504.0f, 0x7bff}, {65519.0f, 0x7bff}, {65520.0f, 0x7c00},
    {0x1p-24f, 0x0001}, {0x1p-25f, 0x0000}, {0x1.8p-25f, 0x0001}, {0x1p-14f, 0x0400},
    {0.1f, 0x2e66}, {1.0f / 3.0f, 0x3555}, {2049.0f, 0x6800}, {2051.0f, 0x6802}, {0.0f, 0}, {-0.0f, 0x8000},
  };
  for (size_t i = 0; i < sizeof halfs / sizeof *halfs; i++) {
    CHECK_EQ_INT(rr_f2h(halfs[i].f), halfs[i].h);
    CHECK_EQ_INT(tc_float_to_half(halfs[i].f), halfs[i].h);
  }
  static const struct { uint32_t f; uint16_t b; } bfs[] = {
    {0x3f800000, 0x3f80}, {0x40490fdb, 0x4049}, {0x3f808000, 0x3f80}, {0x3f818000, 0x3f82},
    {0x3f808001, 0x3f81}, {0x7f7fffff, 0x7f80}, {0x00000001, 0x0000}, {0x80008000, 0x8000},
  };
  for (size_t i = 0; i < sizeof bfs / sizeof *bfs; i++) {
    float f;
    memcpy(&f, &bfs[i].f, 4);
    CHECK_EQ_INT(rr_f2bf(f), bfs[i].b);
    CHECK_EQ_INT(tc_float_to_bf16(f), bfs[i].b);
  }
  int bad_h = 0, bad_b = 0;
  for (uint64_t x = 0; x < (1ull << 32); x += 65521) { /* a prime stride hits every exponent */
    uint32_t u = (uint32_t)x;
    float f;
    memcpy(&f, &u, 4);
    if (isnan(f)) continue;
    if (rr_f2h(f) != tc_float_to_half(f)) bad_h++;
    if (rr_f2bf(f) != tc_float_to_bf16(f)) bad_b++;
    uint16_t h = (uint16_t)x;
    float hf = tc_half_to_float(h);
    if (!isnan(hf) && !(hf == rr_h2f(h) && signbit(hf) == signbit(rr_h2f(h)))) bad_h++;
  }
  CHECK_EQ_INT(bad_h, 0);
  CHECK_EQ_INT(bad_b, 0);
}

/* calc_execution_policy on an H200 (132 SMs x 2048 threads: 1056 blocks). */
static void test_launch_shape(void) {
  static const struct { uint64_t n; int unroll; uint32_t grid; uint64_t inc; } cases[] = {
    {1, 4, 1, 4},
    {256, 4, 1, 4},
    {257, 4, 2, 4},
    {270336, 4, 1056, 4},
    {270337, 4, 1056, 4},
    {1081344, 4, 1056, 4},
    {1081345, 4, 1056, 8},
    {1u << 24, 4, 1056, 64},      /* ceil(2^24 / 1081344) = 16 */
    {(1u << 24) + 3, 2, 1056, 128}, /* ceil((2^24+3) / 540672) = 32 */
    {1000, 2, 4, 4},
    {1ull << 28, 4, 1056, 4 * 249},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    CHECK_EQ_INT(tc_rng_grid(cases[i].n, 132, 2048), cases[i].grid);
    CHECK_EQ_INT(rr_grid(cases[i].n, 132, 2048), cases[i].grid);
    CHECK_EQ_INT(tc_rng_increment(cases[i].n, cases[i].grid, cases[i].unroll), cases[i].inc);
    CHECK_EQ_INT(rr_increment(cases[i].n, cases[i].grid, cases[i].unroll), cases[i].inc);
  }
  CHECK_EQ_INT(tc_rng_grid(1u << 20, 108, 2048), 864); /* A100 */
  CHECK_EQ_INT(tc_rng_grid(1u << 20, 80, 1536), 480);
}

/* TensorIterator's 32-bit split: byte offsets must stay below 2^31 - 1. */
static void test_split(void) {
  tc_rng_piece p[16];
  CHECK_EQ_INT(tc_rng_split(1000, 4, p, 16), 1);
  CHECK_EQ_INT(p[0].count, 1000);
  CHECK(tc_rng_fits_32bit(1ull << 29, 4));        /* 1 + (2^29-1)*4 = 2^31 - 3 */
  CHECK(!tc_rng_fits_32bit((1ull << 29) + 1, 4));
  CHECK(tc_rng_fits_32bit((1ull << 31) - 1, 1));
  CHECK(!tc_rng_fits_32bit(1ull << 31, 1));
  size_t k = tc_rng_split((1ull << 29) + 1, 4, p, 8);
  CHECK_EQ_INT(k, 2);
  CHECK_EQ_INT(p[0].start, 0);
  CHECK_EQ_INT(p[0].count, 1ull << 28);
  CHECK_EQ_INT(p[1].start, 1ull << 28);
  CHECK_EQ_INT(p[1].count, (1ull << 28) + 1);
  /* 2^31 + 5 doubles fit from 2^28 down: 2^30+2 | 2^30+3 -> 2^29+1 | 2^29+1 |
   * 2^29+1 | 2^29+2 -> 2^28 | 2^28+1 ... and 2^28+1 -> 2^27 | 2^27+1 */
  k = tc_rng_split((1ull << 31) + 5, 8, p, 16);
  CHECK_EQ_INT(k, 13);
  if (k > 16) return;
  uint64_t at = 0;
  for (size_t i = 0; i < k; i++) {
    CHECK_EQ_INT(p[i].start, at);
    CHECK(tc_rng_fits_32bit(p[i].count, 8));
    at += p[i].count;
  }
  CHECK_EQ_INT(at, (1ull << 31) + 5);
  CHECK_EQ_INT(p[0].count, 1ull << 28);
  CHECK_EQ_INT(p[1].count, 1ull << 27);
  CHECK_EQ_INT(p[2].count, (1ull << 27) + 1);
  CHECK_EQ_INT(p[12].count, (1ull << 27) + 1);
  CHECK_EQ_INT(tc_rng_split((1ull << 31) + 5, 8, p, 2), 13); /* counts past cap */
}

static tcuda_status build(tcuda_dtype dt, tc_rand_req r, tc_rng_op *op) {
  size_t es;
  unsigned per;
  return tc_rand_build_op("t", dt, &r, op, &es, &per);
}

static void test_torch_arithmetic(void) {
  tc_rng_op op;
  /* randint's word size follows the range: 2^28 is the first 64-bit range */
  CHECK_OK(build(TCUDA_INT64, (tc_rand_req){.kind = TC_RAND_RANDINT, .lo = 0, .hi = (1 << 28) - 1}, &op));
  CHECK_EQ_INT(op.dist, TC_DIST_BITS32);
  CHECK_OK(build(TCUDA_INT32, (tc_rand_req){.kind = TC_RAND_RANDINT, .lo = -5, .hi = (1 << 28) - 5}, &op));
  CHECK_EQ_INT(op.dist, TC_DIST_BITS64);
  CHECK_EQ_INT(op.range, 1 << 28);
  CHECK_EQ_INT(op.base, -5);
  /* random_(): the word size follows the dtype */
  CHECK_OK(build(TCUDA_FLOAT32, (tc_rand_req){.kind = TC_RAND_RANDOM}, &op));
  CHECK_EQ_INT(op.dist, TC_DIST_BITS32);
  CHECK_EQ_INT(op.range, (1 << 24) + 1);
  CHECK_OK(build(TCUDA_FLOAT64, (tc_rand_req){.kind = TC_RAND_RANDOM}, &op));
  CHECK_EQ_INT(op.dist, TC_DIST_BITS64);
  CHECK_EQ_INT(op.range, (1ull << 53) + 1);
  CHECK_OK(build(TCUDA_INT64, (tc_rand_req){.kind = TC_RAND_RANDOM}, &op));
  CHECK_EQ_INT(op.range, 1ull << 63);
  CHECK_OK(build(TCUDA_BOOL, (tc_rand_req){.kind = TC_RAND_RANDOM}, &op));
  CHECK_EQ_INT(op.range, 2);
  /* random_(from): to_inc = max of the dtype, and the full 64-bit range */
  CHECK_OK(build(TCUDA_INT8, (tc_rand_req){.kind = TC_RAND_RANDOM_FROM, .lo = -100}, &op));
  CHECK_EQ_INT(op.range, 228);
  CHECK_EQ_INT(op.base, -100);
  CHECK_OK(build(TCUDA_INT64, (tc_rand_req){.kind = TC_RAND_RANDOM_FROM, .lo = INT64_MIN}, &op));
  CHECK_EQ_INT(op.dist, TC_DIST_BITS64);
  CHECK_EQ_INT(op.range, 0);
  CHECK_OK(build(TCUDA_INT64, (tc_rand_req){.kind = TC_RAND_RANDOM_FROM, .lo = 0}, &op));
  CHECK_EQ_INT(op.range, 1ull << 63);
  /* update_from / update_to on float32 (spacing 4 above 2^25) */
  CHECK_OK(build(TCUDA_FLOAT32, (tc_rand_req){.kind = TC_RAND_RANDINT, .lo = (1 << 25) + 1, .hi = 1 << 26}, &op));
  CHECK_EQ_INT(op.base, (1 << 25) + 4);
  CHECK_OK(build(TCUDA_FLOAT32, (tc_rand_req){.kind = TC_RAND_RANDINT, .lo = 0, .hi = (1 << 25) + 4}, &op));
  CHECK_EQ_INT(op.range, 1 << 25);
  /* uniform_: bounds cast to the dtype, range subtracted there */
  CHECK_OK(build(TCUDA_FLOAT32, (tc_rand_req){.kind = TC_RAND_UNIFORM, .a = 0.1, .b = 0.7}, &op));
  CHECK(op.a == (double)0.1f && op.c == (double)0.7f && op.b == (double)(0.7f - 0.1f));
  CHECK(op.b != (double)(float)0.6);
  CHECK_OK(build(TCUDA_FLOAT16, (tc_rand_req){.kind = TC_RAND_UNIFORM, .a = 0.1, .b = 0.7}, &op));
  CHECK(op.a == (double)rr_h2f(rr_f2h(0.1f)) && op.c == (double)rr_h2f(rr_f2h(0.7f)));
  CHECK(op.b == (double)rr_h2f(rr_f2h(rr_h2f(rr_f2h(0.7f)) - rr_h2f(rr_f2h(0.1f)))));
  CHECK_OK(build(TCUDA_FLOAT64, (tc_rand_req){.kind = TC_RAND_UNIFORM, .a = -2, .b = 3}, &op));
  CHECK_EQ_INT(op.dist, TC_DIST_UNIFORM_D);
  CHECK(op.a == -2 && op.b == 5 && op.c == 3);
  /* complex: the real view, twice the elements, std / sqrt(2) for normal */
  size_t es;
  unsigned per;
  tc_rand_req nr = {.kind = TC_RAND_NORMAL, .a = 1, .b = 2};
  CHECK_OK(tc_rand_build_op("t", TCUDA_COMPLEX64, &nr, &op, &es, &per));
  CHECK_EQ_INT(per, 2);
  CHECK_EQ_INT(es, 4);
  CHECK(op.dist == TC_DIST_NORMAL_F && op.b == 2 / sqrt(2.0));
}

static void test_argument_errors(void) {
  tc_rng_op op;
#define BAD(dt, ...) build(dt, (tc_rand_req){__VA_ARGS__}, &op)
  CHECK_ERR(BAD(TCUDA_FLOAT32, .kind = TC_RAND_UNIFORM, .a = 2, .b = 1), TCUDA_ERROR_INVALID_ARGUMENT, "from=2 > to=1");
  CHECK_ERR(BAD(TCUDA_FLOAT16, .kind = TC_RAND_UNIFORM, .a = 0, .b = 70000), TCUDA_ERROR_INVALID_ARGUMENT,
            "to=70000 is out of bounds for float16");
  CHECK_ERR(BAD(TCUDA_FLOAT32, .kind = TC_RAND_UNIFORM, .a = NAN, .b = 1), TCUDA_ERROR_INVALID_ARGUMENT, "from=nan");
  CHECK_ERR(BAD(TCUDA_FLOAT32, .kind = TC_RAND_UNIFORM, .a = -3e38, .b = 3e38), TCUDA_ERROR_INVALID_ARGUMENT,
            "to - from exceeds");
  CHECK_ERR(BAD(TCUDA_INT32, .kind = TC_RAND_UNIFORM, .a = 0, .b = 1), TCUDA_ERROR_NOT_SUPPORTED, "int32");
  CHECK_ERR(BAD(TCUDA_FLOAT32, .kind = TC_RAND_NORMAL, .a = 0, .b = -1), TCUDA_ERROR_INVALID_ARGUMENT, "std=-1");
  CHECK_ERR(BAD(TCUDA_FLOAT32, .kind = TC_RAND_NORMAL, .a = 0, .b = NAN), TCUDA_ERROR_INVALID_ARGUMENT, "std=nan");
  CHECK_ERR(BAD(TCUDA_INT64, .kind = TC_RAND_NORMAL, .a = 0, .b = 1), TCUDA_ERROR_NOT_SUPPORTED, "normal_");
  CHECK_ERR(BAD(TCUDA_INT64, .kind = TC_RAND_RANDINT, .lo = 5, .hi = 5), TCUDA_ERROR_INVALID_ARGUMENT,
            "low=5 >= high=5");
  CHECK_ERR(BAD(TCUDA_INT8, .kind = TC_RAND_RANDINT, .lo = 0, .hi = 200), TCUDA_ERROR_INVALID_ARGUMENT,
            "high - 1=199 is out of bounds for int8");
  CHECK_ERR(BAD(TCUDA_UINT8, .kind = TC_RAND_RANDINT, .lo = -1, .hi = 2), TCUDA_ERROR_INVALID_ARGUMENT,
            "from=-1 is out of bounds for uint8");
  CHECK_ERR(BAD(TCUDA_BOOL, .kind = TC_RAND_RANDINT, .lo = 0, .hi = 3), TCUDA_ERROR_INVALID_ARGUMENT, "bool");
  CHECK_ERR(BAD(TCUDA_FLOAT16, .kind = TC_RAND_RANDINT, .lo = 0, .hi = 100000), TCUDA_ERROR_INVALID_ARGUMENT,
            "float16");
  CHECK_ERR(BAD(TCUDA_UINT32, .kind = TC_RAND_RANDOM), TCUDA_ERROR_NOT_SUPPORTED, "random_");
  CHECK_ERR(BAD(TCUDA_COMPLEX64, .kind = TC_RAND_RANDOM), TCUDA_ERROR_NOT_SUPPORTED, "complex64");
  CHECK_ERR(BAD(TCUDA_INT32, .kind = TC_RAND_RANDOM_FROM, .lo = INT64_MIN), TCUDA_ERROR_NOT_SUPPORTED, "64 bits");
  CHECK_ERR(BAD(TCUDA_UINT64, .kind = TC_RAND_RANDOM_FROM, .lo = 0), TCUDA_ERROR_INVALID_ARGUMENT,
            "out of bounds for uint64");
  CHECK_ERR(BAD(TCUDA_FLOAT16, .kind = TC_RAND_RANDOM_FROM, .lo = 5000), TCUDA_ERROR_INVALID_ARGUMENT, "2048");
  CHECK_ERR(BAD((tcuda_dtype)99, .kind = TC_RAND_RANDOM), TCUDA_ERROR_INVALID_ARGUMENT, "dtype 99");
  CHECK_ERR(BAD((tcuda_dtype)-1, .kind = TC_RAND_RANDOM), TCUDA_ERROR_INVALID_ARGUMENT, "dtype -1");
#undef BAD
  /* The public functions check before touching CUDA (so this runs anywhere). */
  float dummy;
  CHECK_ERR(tcuda_rand_uniform(NULL, NULL, 4, TCUDA_FLOAT32, 0, 1, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_rand_uniform: buf is NULL");
  CHECK_ERR(tcuda_rand_uniform(NULL, &dummy, 4, TCUDA_FLOAT32, 1, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_rand_uniform: from=1 > to=0");
  CHECK_ERR(tcuda_rand_normal(NULL, &dummy, 4, (tcuda_dtype)42, 0, 1, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_rand_normal: dtype 42");
  CHECK_ERR(tcuda_rand_randint(NULL, &dummy, 4, TCUDA_INT32, 3, 1, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "tcuda_rand_randint: low=3 >= high=1");
  CHECK_ERR(tcuda_rand_random(NULL, (char *)&dummy + 1, 1, TCUDA_INT32, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "not aligned");
  CHECK_ERR(tcuda_rand_random(NULL, &dummy, SIZE_MAX / 2, TCUDA_INT64, NULL), TCUDA_ERROR_OVERFLOW, "overflow");
  CHECK_ERR(tcuda_rand_random_from(NULL, &dummy, 1, TCUDA_INT32, INT64_MIN, NULL), TCUDA_ERROR_NOT_SUPPORTED,
            "tcuda_rand_random_from");
  /* bounds at the ends of int64: from + 1 once overflowed (UBSan) */
  for (int k = 0; k < 4; k++) {
    tcuda_dtype fdt[] = {TCUDA_FLOAT32, TCUDA_FLOAT64, TCUDA_FLOAT16, TCUDA_BFLOAT16};
    CHECK_ERR(tcuda_rand_random_from(NULL, NULL, 0, fdt[k], INT64_MAX, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
              "is not below");
  }
  /* n = 0 after valid arguments: nothing to do, buf may be NULL */
  CHECK_OK(tcuda_rand_uniform(NULL, NULL, 0, TCUDA_FLOAT32, 0, 1, NULL));
  CHECK_ERR(tcuda_rand_uniform(NULL, NULL, 0, TCUDA_FLOAT32, 1, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "from=1");
}

static void test_dtype_names(void) {
  CHECK_EQ_INT(tcuda_dtype_size(TCUDA_FLOAT32), 4);
  CHECK_EQ_INT(tcuda_dtype_size(TCUDA_BFLOAT16), 2);
  CHECK_EQ_INT(tcuda_dtype_size(TCUDA_COMPLEX128), 16);
  CHECK_EQ_INT(tcuda_dtype_size(TCUDA_BOOL), 1);
  CHECK_EQ_INT(tcuda_dtype_size(TCUDA_DTYPE_COUNT), 0);
  CHECK(!strcmp(tcuda_dtype_name(TCUDA_FLOAT8_E4M3FN), "float8_e4m3fn"));
  CHECK(!strcmp(tcuda_dtype_name((tcuda_dtype)77), "unknown"));
  for (int i = 0; i < TCUDA_DTYPE_COUNT; i++) {
    tcuda_dtype d;
    CHECK_OK(tcuda_dtype_from_name(tcuda_dtype_name((tcuda_dtype)i), &d));
    CHECK_EQ_INT(d, i);
    CHECK(tcuda_dtype_size((tcuda_dtype)i) > 0);
  }
  tcuda_dtype d;
  CHECK_OK(tcuda_dtype_from_name("torch.half", &d));
  CHECK_EQ_INT(d, TCUDA_FLOAT16);
  CHECK_OK(tcuda_dtype_from_name("long", &d));
  CHECK_EQ_INT(d, TCUDA_INT64);
  CHECK_ERR(tcuda_dtype_from_name("float128", &d), TCUDA_ERROR_INVALID_ARGUMENT, "'float128'");
  CHECK_ERR(tcuda_dtype_from_name(NULL, &d), TCUDA_ERROR_INVALID_ARGUMENT, "name is NULL");
  CHECK_ERR(tcuda_dtype_from_name("int8", NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
}

/* The generator state machine, on a generator made without CUDA. */
static void test_generator_state(void) {
  tcuda_generator_t g;
  tc_generator_init(&g, 0, 0x0102030405060708ull, 0);
  uint8_t st[16];
  CHECK_OK(tcuda_generator_get_state(&g, st));
  static const uint8_t want[16] = {8, 7, 6, 5, 4, 3, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK(!memcmp(st, want, 16));
  /* philox_cuda_state: hands out the old offset, advances by inc rounded to 4 */
  tc_philox_args pa;
  CHECK_OK(tc_generator_philox("t", &g, 5, 0, &pa));
  CHECK_EQ_INT(pa.offset, 0);
  CHECK_EQ_INT(pa.seed, 0x0102030405060708ull);
  CHECK(!pa.captured);
  CHECK_OK(tc_generator_philox("t", &g, 64, 0, &pa));
  CHECK_EQ_INT(pa.offset, 8);
  uint64_t off;
  CHECK_OK(tcuda_generator_get_offset(&g, &off));
  CHECK_EQ_INT(off, 72);
  CHECK_OK(tcuda_generator_get_state(&g, st));
  CHECK_EQ_INT(st[8], 72);
  /* set_state: 16 bytes, 8 bytes (offset 0), and errors that change nothing */
  uint8_t s16[16] = {42, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0x80};
  CHECK_OK(tcuda_generator_set_state(&g, s16, 16));
  uint64_t seed;
  CHECK_OK(tcuda_generator_initial_seed(&g, &seed));
  CHECK_EQ_INT(seed, 42);
  CHECK_OK(tcuda_generator_get_offset(&g, &off));
  CHECK(off == 0x8000000000000010ull); /* a negative int64 offset round-trips */
  CHECK_OK(tcuda_generator_get_state(&g, st));
  CHECK(!memcmp(st, s16, 16));
  uint8_t bad[16] = {1, 0, 0, 0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0};
  CHECK_ERR(tcuda_generator_set_state(&g, bad, 16), TCUDA_ERROR_INVALID_ARGUMENT, "offset 6 is not a multiple of 4");
  CHECK_ERR(tcuda_generator_set_state(&g, bad, 15), TCUDA_ERROR_INVALID_ARGUMENT, "15 bytes");
  CHECK_ERR(tcuda_generator_set_state(&g, NULL, 16), TCUDA_ERROR_INVALID_ARGUMENT, "state is NULL");
  CHECK_OK(tcuda_generator_get_state(&g, st));
  CHECK(!memcmp(st, s16, 16));
  CHECK_OK(tcuda_generator_set_state(&g, bad, 8)); /* seed only: offset 6 is not read */
  CHECK_OK(tcuda_generator_get_offset(&g, &off));
  CHECK_EQ_INT(off, 0);
  CHECK_OK(tcuda_generator_initial_seed(&g, &seed));
  CHECK_EQ_INT(seed, 1);
  CHECK_ERR(tcuda_generator_set_offset(&g, 6), TCUDA_ERROR_INVALID_ARGUMENT, "offset 6");
  CHECK_OK(tcuda_generator_set_offset(&g, 1000));
  CHECK_OK(tcuda_generator_manual_seed(&g, 7));
  CHECK_OK(tcuda_generator_get_offset(&g, &off));
  CHECK_EQ_INT(off, 0);
  /* seed(): nondeterministic, 53 bits, offset 0 */
  uint64_t a = 0, b = 0;
  CHECK_OK(tcuda_generator_set_offset(&g, 8));
  CHECK_OK(tcuda_generator_seed(&g, &a));
  CHECK_OK(tcuda_generator_seed(&g, &b));
  CHECK(a != b);
  CHECK(a < (1ull << 53) && b < (1ull << 53));
  CHECK_OK(tcuda_generator_initial_seed(&g, &seed));
  CHECK_EQ_INT(seed, b);
  CHECK_OK(tcuda_generator_get_offset(&g, &off));
  CHECK_EQ_INT(off, 0);
  /* capture mode: only capturing streams may draw, setters refuse */
  uint64_t dev_seed = 0, dev_off = 0;
  g.capturing = 1;
  g.seed_extragraph = &dev_seed;
  g.offset_extragraph = &dev_off;
  CHECK_ERR(tc_generator_philox("t", &g, 4, 0, &pa), TCUDA_ERROR_INVALID_STATE, "not capturing");
  CHECK_OK(tc_generator_philox("t", &g, 6, 1, &pa));
  CHECK(pa.captured && pa.seed_ptr == &dev_seed && pa.offset_ptr == &dev_off && pa.offset_intragraph == 0);
  CHECK_OK(tc_generator_philox("t", &g, 4, 1, &pa));
  CHECK_EQ_INT(pa.offset_intragraph, 8);
  CHECK_ERR(tcuda_generator_manual_seed(&g, 1), TCUDA_ERROR_INVALID_STATE, "capturing");
  g.capturing = 0;
  CHECK_ERR(tc_generator_philox("t", &g, 4, 1, &pa), TCUDA_ERROR_INVALID_STATE, "not in capture mode");
  /* argument errors */
  CHECK_ERR(tcuda_generator_get_state(NULL, st), TCUDA_ERROR_INVALID_ARGUMENT, "generator is NULL");
  CHECK_ERR(tcuda_generator_get_state(&g, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "state is NULL");
  CHECK_ERR(tcuda_generator_initial_seed(&g, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "seed is NULL");
  CHECK_ERR(tcuda_generator_get_offset(&g, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "offset is NULL");
  CHECK_OK(tcuda_generator_seed(&g, NULL));
  CHECK_EQ_INT(tcuda_generator_device(&g), 0);
  CHECK_EQ_INT(tcuda_generator_device(NULL), -1);
  CHECK_OK(tcuda_generator_destroy(NULL));
  g.is_default = 1;
  CHECK_ERR(tcuda_generator_destroy(&g), TCUDA_ERROR_INVALID_ARGUMENT, "default generator of device 0");
  tcuda_generator_t junk;
  memset(&junk, 0, sizeof junk);
  CHECK_ERR(tcuda_generator_manual_seed(&junk, 1), TCUDA_ERROR_INVALID_ARGUMENT, "not a live tcuda generator");
  CHECK_ERR(tcuda_rand_uniform(&junk, &a, 1, TCUDA_FLOAT32, 0, 1, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
            "not a live tcuda generator");
}

/* The state API's own argument checks come before CUDA. */
static void test_state_api_arguments(void) {
  uint8_t st[32] = {0};
  CHECK_ERR(tcuda_get_rng_state(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_get_rng_state: state is NULL");
  CHECK_ERR(tcuda_set_rng_state(0, NULL, 16), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_set_rng_state: state is NULL");
  CHECK_ERR(tcuda_set_rng_state(0, st, 12), TCUDA_ERROR_INVALID_ARGUMENT, "12 bytes");
  st[8] = 2;
  CHECK_ERR(tcuda_set_rng_state(0, st, 16), TCUDA_ERROR_INVALID_ARGUMENT, "offset 2 is not a multiple of 4");
  CHECK_ERR(tcuda_set_rng_state_all(st, 24), TCUDA_ERROR_INVALID_ARGUMENT, "size 24");
  CHECK_ERR(tcuda_set_rng_state_all(st, 0), TCUDA_ERROR_INVALID_ARGUMENT, "size 0");
  CHECK_ERR(tcuda_set_rng_state_all(NULL, 16), TCUDA_ERROR_INVALID_ARGUMENT, "states is NULL");
  st[8] = 0;
  st[24] = 1;
  CHECK_ERR(tcuda_set_rng_state_all(st, 32), TCUDA_ERROR_INVALID_ARGUMENT, "state 1 offset 1");
  CHECK_ERR(tcuda_get_rng_state_all(NULL, 16), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_ERR(tcuda_initial_seed(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "seed is NULL");
  CHECK_ERR(tcuda_default_generator(0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
  CHECK_ERR(tcuda_generator_create(0, 1, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "out is NULL");
}

/* Without CUDA: seeding is silently ignored (as torch), everything else that
 * needs a device says CUDA is not available. */
static void test_without_cuda(void) {
  if (tcuda_is_available()) { TC_SKIP_PART("no-CUDA behaviour: CUDA is present"); return; }
  CHECK_OK(tcuda_manual_seed(1));
  CHECK_OK(tcuda_manual_seed_all(2));
  CHECK_OK(tcuda_seed());
  CHECK_OK(tcuda_seed_all());
  uint8_t st[16] = {0};
  uint64_t seed;
  tcuda_generator_t *g;
  CHECK_ERR(tcuda_get_rng_state(-1, st), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_get_rng_state");
  CHECK_ERR(tcuda_set_rng_state(-1, st, 16), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_set_rng_state");
  CHECK_ERR(tcuda_get_rng_state_all(st, 16), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_get_rng_state_all");
  CHECK_ERR(tcuda_set_rng_state_all(st, 16), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_set_rng_state_all");
  CHECK_ERR(tcuda_initial_seed(-1, &seed), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_initial_seed");
  CHECK_ERR(tcuda_default_generator(0, &g), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_default_generator");
  CHECK_ERR(tcuda_generator_create(0, 5, &g), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_generator_create");
  float x;
  CHECK_ERR(tcuda_rand_uniform(NULL, &x, 1, TCUDA_FLOAT32, 0, 1, NULL), TCUDA_ERROR_NOT_AVAILABLE,
            "tcuda_rand_uniform");
}

/* The 64-bit draws' x mod d by multiplication must equal `%` for every
 * divisor the kernels give it (d >= 3, not a power of two) and every word:
 * divisors near powers of two and near 2^64, words at the edges of each
 * quotient, and pseudo-random pairs. */
static uint64_t splitmix(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static void test_fastdiv_matches_mod(void) {
  uint64_t ds[200];
  size_t nd = 0;
  static const uint64_t fixed[] = {3, 5, 6, 7, 10, 11, 1000000000000ull, 12345678901ull, ((uint64_t)1 << 40) + 1,
                                   ((uint64_t)1 << 53) + 1, ((uint64_t)1 << 63) - 1, ((uint64_t)1 << 63) + 1,
                                   UINT64_MAX, UINT64_MAX - 2};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) ds[nd++] = fixed[i];
  for (int k = 2; k < 64 && nd < 150; k++) { /* either side of each power of two */
    ds[nd++] = ((uint64_t)1 << k) + 1;
    if (k > 2) ds[nd++] = ((uint64_t)1 << k) - 1;
  }
  uint64_t seed = 7;
  while (nd < 200) {
    uint64_t d = splitmix(&seed) >> (splitmix(&seed) % 62);
    if (d >= 3 && (d & (d - 1))) ds[nd++] = d;
  }
  long bad = 0, checked = 0;
  for (size_t i = 0; i < nd; i++) {
    uint64_t d = ds[i];
    tc_fastdiv f = tc_fastdiv_make(d);
    uint64_t xs[] = {0, 1, d - 1, d, d + 1, 2 * d - 1, 2 * d, UINT64_MAX, UINT64_MAX - 1, UINT64_MAX - d,
                     UINT64_MAX / d * d, UINT64_MAX / d * d - 1};
    for (size_t j = 0; j < sizeof xs / sizeof *xs; j++, checked++)
      if (tc_fastdiv_mod(xs[j], f) != xs[j] % d) bad++;
    for (int r = 0; r < 2000; r++, checked++) {
      uint64_t x = splitmix(&seed);
      if (tc_fastdiv_mod(x, f) != x % d) bad++;
    }
  }
  CHECK(checked > 400000);
  CHECK_EQ_INT(bad, 0);
}

TC_MAIN(T(test_philox_known_answers), T(test_fastdiv_matches_mod), T(test_counter_layout_matches_curand_state), T(test_uniform_transforms),
        T(test_half_bf16_rounding), T(test_launch_shape), T(test_split), T(test_torch_arithmetic),
        T(test_argument_errors), T(test_dtype_names), T(test_generator_state), T(test_state_api_arguments),
        T(test_without_cuda))
