/* current_blas_handle on a real GPU: cuBLAS loads only on first use, the
 * handle is bound to the current (non-default) stream and the gemm runs
 * there, workspaces come from the caching allocator with the configured
 * size, and handles are per thread and go back to the pool at thread exit. */
#include "harness.h"
#include "stream_kernels.h"
#include <cublas_v2.h>
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

static int cublas_loaded(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  int found = 0;
  while (f && fgets(line, sizeof line, f))
    if (strstr(line, "libcublas.so")) found = 1;
  if (f) fclose(f);
  return found;
}

/* cuBLAS entry points from the copy libtcuda loaded: the test must not link
 * cuBLAS itself, or it would be loaded at start and prove nothing. */
static cublasStatus_t (*p_sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                 const float *, const float *, int, const float *, int, const float *, float *,
                                 int);
static cublasStatus_t (*p_get_stream)(cublasHandle_t, cudaStream_t *);

static int bind_cublas(void) {
  void *lib = dlopen("libcublas.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return 0;
  p_sgemm = (__typeof__(p_sgemm))dlsym(lib, "cublasSgemm_v2");
  p_get_stream = (__typeof__(p_get_stream))dlsym(lib, "cublasGetStream_v2");
  return p_sgemm && p_get_stream;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

#define M 256
#define N 192
#define K 128

static void gemm_on_current_stream(void) {
  CHECK_OK(tcuda_set_device(0));
  CHECK(!cublas_loaded()); /* nothing so far needed cuBLAS */
  tcuda_stream_t s;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &s));
  CHECK_OK(tcuda_set_stream(s));
  tcuda_memory_stats_t before, after;
  CHECK_OK(tcuda_memory_stats(0, &before));
  double t0 = now_ms();
  struct cublasContext *h = NULL;
  CHECK_OK(tcuda_current_blas_handle(&h));
  printf("  first tcuda_current_blas_handle (load cuBLAS + create handle): %.1f ms\n", now_ms() - t0);
  CHECK(cublas_loaded());
  if (!bind_cublas()) {
    CHECK(!"cuBLAS symbols not found in the loaded library");
    return;
  }
  t0 = now_ms();
  struct cublasContext *h2 = NULL;
  CHECK_OK(tcuda_current_blas_handle(&h2));
  printf("  next call: %.3f ms\n", now_ms() - t0);
  CHECK(h == h2);
  cudaStream_t bound = NULL;
  CHECK(p_get_stream(h, &bound) == CUBLAS_STATUS_SUCCESS);
  CHECK(bound == (cudaStream_t)s.handle);
  CHECK_OK(tcuda_memory_stats(0, &after));
  /* CUBLAS_WORKSPACE_CONFIG=:1024:2 (set in main): one 2 MiB workspace */
  CHECK_EQ_INT(after.allocated_bytes[TCUDA_STAT_ALL].current - before.allocated_bytes[TCUDA_STAT_ALL].current,
               2 << 20);

  static float A[M * K], B[K * N], C[M * N], ref[M * N], early[M * N];
  for (int i = 0; i < M * K; i++) A[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  for (int i = 0; i < K * N; i++) B[i] = (float)((i * 53) % 97) / 48.0f - 1.0f;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0; /* column-major, as cuBLAS */
      for (int k = 0; k < K; k++) acc += (double)A[i + k * M] * B[k + j * K];
      ref[i + j * M] = (float)acc;
    }
  float *dA, *dB, *dC;
  CHECK_OK(tcuda_malloc((void **)&dA, sizeof A));
  CHECK_OK(tcuda_malloc((void **)&dB, sizeof B));
  CHECK_OK(tcuda_malloc((void **)&dC, sizeof C));
  cudaStream_t cs = (cudaStream_t)s.handle;
  CHECK(cudaMemcpyAsync(dA, A, sizeof A, cudaMemcpyHostToDevice, cs) == cudaSuccess);
  CHECK(cudaMemcpyAsync(dB, B, sizeof B, cudaMemcpyHostToDevice, cs) == cudaSuccess);
  CHECK(cudaMemsetAsync(dC, 0xFF, sizeof C, cs) == cudaSuccess); /* NaN poison */
  float one = 1.0f, zero = 0.0f;
  /* warm-up: the first gemm loads cuBLAS's kernels, which may synchronise */
  CHECK(p_sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, dA, M, dB, K, &zero, dC, M) == CUBLAS_STATUS_SUCCESS);
  CHECK(cudaMemsetAsync(dC, 0xFF, sizeof C, cs) == cudaSuccess); /* NaN poison again */
  CHECK(cudaStreamSynchronize(cs) == cudaSuccess);
  CHECK(tct_spin_us(300000, cs) == cudaSuccess);
  CHECK(p_sgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, dA, M, dB, K, &zero, dC, M) == CUBLAS_STATUS_SUCCESS);
  /* a copy on another stream sees the poison: the gemm waits behind the spin on s */
  cudaStream_t other;
  CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking) == cudaSuccess);
  CHECK(cudaMemcpyAsync(early, dC, sizeof early, cudaMemcpyDeviceToHost, other) == cudaSuccess);
  CHECK(cudaStreamSynchronize(other) == cudaSuccess);
  CHECK(isnan(early[0]) && isnan(early[M * N - 1]));
  int done = 1;
  CHECK_OK(tcuda_stream_query(s, &done));
  CHECK_EQ_INT(done, 0);
  CHECK(cudaStreamSynchronize(cs) == cudaSuccess);
  CHECK(cudaMemcpy(C, dC, sizeof C, cudaMemcpyDeviceToHost) == cudaSuccess);
  double maxerr = 0;
  for (int i = 0; i < M * N; i++) maxerr = fmax(maxerr, fabs(C[i] - ref[i]));
  printf("  sgemm %dx%dx%d on a pool stream: max abs error %.2e\n", M, N, K, maxerr);
  CHECK(maxerr < 1e-3);
  cudaStreamDestroy(other);
  tcuda_free(dA);
  tcuda_free(dB);
  tcuda_free(dC);

  /* another stream: same handle, rebound, a second workspace */
  tcuda_stream_t s2;
  CHECK_OK(tcuda_stream_from_pool(0, 0, &s2));
  CHECK_OK(tcuda_set_stream(s2));
  CHECK_OK(tcuda_current_blas_handle(&h2));
  CHECK(h2 == h);
  CHECK(p_get_stream(h, &bound) == CUBLAS_STATUS_SUCCESS);
  CHECK(bound == (cudaStream_t)s2.handle);
  tcuda_memory_stats_t third;
  CHECK_OK(tcuda_memory_stats(0, &third));
  CHECK_EQ_INT(third.allocated_bytes[TCUDA_STAT_ALL].current - after.allocated_bytes[TCUDA_STAT_ALL].current,
               2 << 20);
  tcuda_stream_t def;
  CHECK_OK(tcuda_default_stream(0, &def));
  CHECK_OK(tcuda_set_stream(def));
}

static void *thread_handle(void *out) {
  tcuda_set_device(0);
  if (tcuda_current_blas_handle((struct cublasContext **)out)) *(void **)out = NULL;
  return NULL;
}

static void handles_per_thread_and_pooled(void) {
  struct cublasContext *mine = NULL, *t1 = NULL, *t2 = NULL;
  CHECK_OK(tcuda_current_blas_handle(&mine));
  pthread_t t;
  pthread_create(&t, NULL, thread_handle, &t1);
  pthread_join(t, NULL);
  CHECK(t1 != NULL && t1 != mine);
  /* t1's thread exited: its handle went back to the pool for the next thread */
  pthread_create(&t, NULL, thread_handle, &t2);
  pthread_join(t, NULL);
  CHECK(t2 == t1);
  int64_t before;
  CHECK_OK(tcuda_memory_allocated(0, &before));
  CHECK_OK(tcuda_blas_clear_workspaces());
  int64_t after;
  CHECK_OK(tcuda_memory_allocated(0, &after));
  CHECK(after < before);
}

int main(int argc, char **argv) {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":1024:2", 1);
  tc_require_gpu();
  static const tc_test tests[] = {T(gemm_on_current_stream), T(handles_per_thread_and_pooled)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
