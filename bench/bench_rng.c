/* RNG fill throughput, GB/s of output, on 2^28 elements per dtype (RNG_N
 * overrides): tcuda's schedule, torch's kernel shape run by tcuda (same
 * bits, torch's launch), and a device-to-device copy of the float32 buffer
 * (read + write bytes) as the memory roofline. torch's own numbers come from
 * bench/rng_torch.py with the same metric names. Prints RESULT lines
 * (format: bench/run-gpu); SKIPPED without a GPU. */
#include "tcuda.h"
#include "rng/rng.h"
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define REPS 20

static float time_ms(tcuda_status (*fn)(void *), void *arg) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; i++) fn(arg);
  float best = 1e30f;
  for (int r = 0; r < 5; r++) {
    cudaEventRecord(a, 0);
    for (int i = 0; i < REPS; i++)
      if (fn(arg)) { fprintf(stderr, "bench_rng: %s\n", tcuda_last_error()); exit(1); }
    cudaEventRecord(b, 0);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (ms / REPS < best) best = ms / REPS;
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

typedef struct { void *buf; size_t n; tcuda_dtype dt; tc_rand_req req; int reference; void *src; } job;

static tcuda_status run_fill(void *p) {
  job *j = p;
  return tc_rand_fill("bench_rng", NULL, j->buf, j->n, j->dt, &j->req, NULL, j->reference);
}
static tcuda_status run_copy(void *p) {
  job *j = p;
  return cudaMemcpyAsync(j->buf, j->src, j->n * 4, cudaMemcpyDeviceToDevice, 0) == cudaSuccess
             ? TCUDA_SUCCESS : TCUDA_ERROR_CUDA;
}

int main(void) {
  if (!tcuda_is_available()) { printf("SKIPPED bench_rng: no GPU\n"); return 0; }
  size_t n = (size_t)1 << 28;
  if (getenv("RNG_N")) n = strtoull(getenv("RNG_N"), NULL, 0);
  void *buf, *src;
  if (cudaMalloc(&buf, n * 8) != cudaSuccess || cudaMalloc(&src, n * 4) != cudaSuccess) {
    printf("SKIPPED bench_rng: cannot allocate %zu bytes\n", n * 12);
    return 0;
  }
  cudaMemset(src, 0, n * 4);
  if (tcuda_manual_seed(0)) { fprintf(stderr, "bench_rng: %s\n", tcuda_last_error()); return 1; }

  job copy = {buf, n, TCUDA_FLOAT32, {0}, 0, src};
  double copy_gbps = 2.0 * n * 4 / (time_ms(run_copy, &copy) * 1e6);

  static const struct { const char *metric; tcuda_dtype dt; tc_rand_req req; } cases[] = {
    {"uniform_f32", TCUDA_FLOAT32, {.kind = TC_RAND_UNIFORM, .a = 0, .b = 1}},
    {"uniform_f64", TCUDA_FLOAT64, {.kind = TC_RAND_UNIFORM, .a = 0, .b = 1}},
    {"uniform_f16", TCUDA_FLOAT16, {.kind = TC_RAND_UNIFORM, .a = 0, .b = 1}},
    {"uniform_bf16", TCUDA_BFLOAT16, {.kind = TC_RAND_UNIFORM, .a = 0, .b = 1}},
    {"normal_f32", TCUDA_FLOAT32, {.kind = TC_RAND_NORMAL, .a = 0, .b = 1}},
    {"normal_f64", TCUDA_FLOAT64, {.kind = TC_RAND_NORMAL, .a = 0, .b = 1}},
    {"normal_f16", TCUDA_FLOAT16, {.kind = TC_RAND_NORMAL, .a = 0, .b = 1}},
    {"normal_bf16", TCUDA_BFLOAT16, {.kind = TC_RAND_NORMAL, .a = 0, .b = 1}},
    {"randint_i64", TCUDA_INT64, {.kind = TC_RAND_RANDINT, .lo = 0, .hi = 1000}},
    {"randint_i64_2p40", TCUDA_INT64, {.kind = TC_RAND_RANDINT, .lo = 0, .hi = 1ll << 40}},
    {"randint_i64_1e12", TCUDA_INT64, {.kind = TC_RAND_RANDINT, .lo = 0, .hi = 1000000000000ll}},
    {"randint_i32", TCUDA_INT32, {.kind = TC_RAND_RANDINT, .lo = 0, .hi = 1000}},
    {"random_i64", TCUDA_INT64, {.kind = TC_RAND_RANDOM}},
    {"random_i32", TCUDA_INT32, {.kind = TC_RAND_RANDOM}},
    {"random_f32", TCUDA_FLOAT32, {.kind = TC_RAND_RANDOM}},
    {"random_f64", TCUDA_FLOAT64, {.kind = TC_RAND_RANDOM}},
    {"random_u8", TCUDA_UINT8, {.kind = TC_RAND_RANDOM}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    job j = {buf, n, cases[i].dt, cases[i].req, 0, NULL};
    double bytes = (double)n * tcuda_dtype_size(cases[i].dt);
    double fast = bytes / (time_ms(run_fill, &j) * 1e6);
    j.reference = 1;
    double shape = bytes / (time_ms(run_fill, &j) * 1e6);
    if (i == 0) {
      printf("RESULT name=rng metric=%s_GBps tcuda=%.0f ref_name=d2d_copy ref=%.0f unit=GB/s target=>=3000\n",
             cases[i].metric, fast, copy_gbps);
      printf("RESULT name=rng metric=%s_GBps tcuda=%.0f ref_name=torch_kernel_shape ref=%.0f unit=GB/s "
             "target=>=3000\n", cases[i].metric, fast, shape);
    } else {
      printf("RESULT name=rng metric=%s_GBps tcuda=%.0f ref_name=torch_kernel_shape ref=%.0f unit=GB/s "
             "target=at least torch, bit-identical\n", cases[i].metric, fast, shape);
    }
    fflush(stdout);
  }
  cudaFree(buf);
  cudaFree(src);
  return 0;
}
