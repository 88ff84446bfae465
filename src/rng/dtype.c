/* tcuda_dtype: sizes, torch's names, and host float16/bfloat16 rounding. */
#include "rng/rng.h"
#include <string.h>

static const struct { const char *name; size_t size; } g_dtypes[TCUDA_DTYPE_COUNT] = {
  [TCUDA_FLOAT32] = {"float32", 4},   [TCUDA_FLOAT64] = {"float64", 8},
  [TCUDA_FLOAT16] = {"float16", 2},   [TCUDA_BFLOAT16] = {"bfloat16", 2},
  [TCUDA_INT8] = {"int8", 1},         [TCUDA_INT16] = {"int16", 2},
  [TCUDA_INT32] = {"int32", 4},       [TCUDA_INT64] = {"int64", 8},
  [TCUDA_UINT8] = {"uint8", 1},       [TCUDA_BOOL] = {"bool", 1},
  [TCUDA_UINT16] = {"uint16", 2},     [TCUDA_UINT32] = {"uint32", 4},
  [TCUDA_UINT64] = {"uint64", 8},     [TCUDA_COMPLEX32] = {"complex32", 4},
  [TCUDA_COMPLEX64] = {"complex64", 8}, [TCUDA_COMPLEX128] = {"complex128", 16},
  [TCUDA_FLOAT8_E4M3FN] = {"float8_e4m3fn", 1}, [TCUDA_FLOAT8_E5M2] = {"float8_e5m2", 1},
};

size_t tcuda_dtype_size(tcuda_dtype dt) {
  return (unsigned)dt < TCUDA_DTYPE_COUNT ? g_dtypes[dt].size : 0;
}

const char *tcuda_dtype_name(tcuda_dtype dt) {
  return (unsigned)dt < TCUDA_DTYPE_COUNT ? g_dtypes[dt].name : "unknown";
}

tcuda_status tcuda_dtype_from_name(const char *name, tcuda_dtype *out) {
  static const char *F = "tcuda_dtype_from_name";
  TC_CHECK_ARG(F, name, "name");
  TC_CHECK_ARG(F, out, "out");
  static const struct { const char *alias; tcuda_dtype dt; } aliases[] = {
    {"float", TCUDA_FLOAT32}, {"double", TCUDA_FLOAT64}, {"half", TCUDA_FLOAT16},
    {"short", TCUDA_INT16}, {"int", TCUDA_INT32}, {"long", TCUDA_INT64},
    {"chalf", TCUDA_COMPLEX32}, {"cfloat", TCUDA_COMPLEX64}, {"cdouble", TCUDA_COMPLEX128},
  };
  const char *n = strncmp(name, "torch.", 6) ? name : name + 6;
  for (int i = 0; i < TCUDA_DTYPE_COUNT; i++)
    if (!strcmp(n, g_dtypes[i].name)) { *out = (tcuda_dtype)i; return TCUDA_SUCCESS; }
  for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
    if (!strcmp(n, aliases[i].alias)) { *out = aliases[i].dt; return TCUDA_SUCCESS; }
  return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: unknown dtype name '%s'", F, name);
}

/* ---- float16 / bfloat16, round to nearest even (c10's host conversions) ---- */

uint16_t tc_float_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00; /* NaN */
  if (ax < 0x00800000u) return sign;         /* float subnormals are far below half's */
  int e = (int)(ax >> 23) - 127;
  uint32_t m = (ax & 0x7fffffu) | 0x800000u;
  if (e > 15) return sign | 0x7c00;
  uint32_t r, rem, halfway;
  if (e >= -14) { /* normal half: keep 10 of 23 mantissa bits */
    r = ((uint32_t)(e + 15) << 10) | ((ax & 0x7fffffu) >> 13);
    rem = ax & 0x1fffu;
    halfway = 0x1000u;
  } else { /* subnormal half: units of 2^-24 */
    int shift = -(e + 1);
    if (shift > 24) return sign;
    r = m >> shift;
    rem = m & ((1u << shift) - 1);
    halfway = 1u << (shift - 1);
  }
  if (rem > halfway || (rem == halfway && (r & 1))) r++; /* may carry into the exponent: right */
  return sign | (uint16_t)r;
}

float tc_half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff, x;
  if (e == 0x1f) x = sign | 0x7f800000u | (m << 13);
  else if (e) x = sign | ((e + 112) << 23) | (m << 13);
  else if (!m) x = sign;
  else { /* subnormal: normalise */
    e = 113;
    while (!(m & 0x400)) { m <<= 1; e--; }
    x = sign | (e << 23) | ((m & 0x3ff) << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

uint16_t tc_float_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

float tc_bf16_to_float(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
