/* RNG on a GPU: every uniform and integer fill against the host reference
 * (tests/rng_ref.h), element by element; normals against torch's own kernel
 * shape (curand_init + curand_normal4 per thread) and the fma rule; the
 * offset after every call; state save/restore; streams, threads, bad
 * pointers, graph capture, and the 32-bit split of a 2 GiB buffer. Every
 * uniform and integer fill is also made by tcuda_rand_fill_host for this
 * device's geometry, which must give the same bytes and offset. */
#include "harness.h"
#include "rng_ref.h"
#include "rng/rng.h"
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdlib.h>

static int g_sms, g_tpsm;

static void *dmalloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) { fprintf(stderr, "cudaMalloc(%zu) failed\n", bytes); exit(1); }
  return p;
}
static void *to_host(const void *d, size_t bytes) {
  void *h = malloc(bytes ? bytes : 1);
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "copy back failed\n");
    exit(1);
  }
  return h;
}
static uint64_t load(const void *h, size_t es, uint64_t i) {
  uint64_t v = 0;
  memcpy(&v, (const char *)h + i * es, es);
  return v;
}

/* Elements of h (n of f) equal the reference; step > 1 samples (always
 * including the first and last S*U block boundaries). Returns mismatches. */
static long compare(const rr_fill *f, const void *h, uint64_t first, uint64_t step, const char *what) {
  size_t es = rr_size(f->dtype);
  long bad = 0;
  for (uint64_t e = first; e < f->n; e += step) {
    uint64_t want = rr_value(f, e), got = load(h, es, e);
    if (want != got) {
      if (bad < 5)
        fprintf(stderr, "  %s: n=%llu element %llu: got %#llx, want %#llx\n", what, (unsigned long long)f->n,
                (unsigned long long)e, (unsigned long long)got, (unsigned long long)want);
      bad++;
    }
  }
  if (f->n && (f->n - 1 - first) % step) { /* the last element too */
    uint64_t e = f->n - 1;
    if (rr_value(f, e) != load(h, es, e)) bad++;
  }
  return bad;
}

static tcuda_generator_t *g_gen;

/* tcuda_rand_fill_host for this device's geometry gives the GPU's bytes h
 * and its offset after (off). */
static void host_matches(const rr_fill *f, const void *h, uint64_t off, const char *what) {
  size_t es = rr_size(f->dtype);
  tcuda_rand_request_t r = TCUDA_RAND_REQUEST_INIT;
  r.dtype = f->dtype;
  if (f->kind == RR_UNIFORM) { r.kind = TCUDA_RAND_UNIFORM; r.from = f->from; r.to = f->to; }
  else if (f->kind == RR_RANDOM) r.kind = TCUDA_RAND_RANDOM;
  else { r.kind = TCUDA_RAND_RANDINT; r.low = f->low; r.high = f->high; }
  void *c = malloc(f->n * es + 1);
  uint64_t o = f->offset;
  CHECK_OK(tcuda_rand_fill_host(&r, f->seed, &o, g_sms, g_tpsm, c, f->n));
  int same = !memcmp(c, h, f->n * es);
  if (!same) fprintf(stderr, "  %s %s n=%llu: the host fill differs from the GPU's\n", what,
                     tcuda_dtype_name(f->dtype), (unsigned long long)f->n);
  CHECK(same);
  CHECK_EQ_INT(o, off);
  free(c);
}

/* Fill through the public API at (seed, offset), compare, check the offset. */
static void run_case(rr_fill f, int misalign, const char *what) {
  size_t es = rr_size(f.dtype);
  char *d = dmalloc((f.n + 1) * es);
  void *buf = d + (misalign ? es : 0);
  CHECK_OK(tcuda_generator_manual_seed(g_gen, f.seed));
  CHECK_OK(tcuda_generator_set_offset(g_gen, f.offset));
  f.sms = g_sms;
  f.tpsm = g_tpsm;
  tcuda_status s;
  if (f.kind == RR_UNIFORM) s = tcuda_rand_uniform(g_gen, buf, f.n, f.dtype, f.from, f.to, NULL);
  else if (f.kind == RR_RANDOM) s = tcuda_rand_random(g_gen, buf, f.n, f.dtype, NULL);
  else s = tcuda_rand_randint(g_gen, buf, f.n, f.dtype, f.low, f.high, NULL);
  CHECK_OK(s);
  void *h = to_host(buf, f.n * es);
  uint64_t step = f.n > (1u << 21) ? 7 : 1;
  long bad = compare(&f, h, 0, step, what);
  if (bad) fprintf(stderr, "  %s %s n=%llu: %ld mismatches\n", what, tcuda_dtype_name(f.dtype), (unsigned long long)f.n, bad);
  CHECK_EQ_INT(bad, 0);
  uint64_t off;
  CHECK_OK(tcuda_generator_get_offset(g_gen, &off));
  CHECK_EQ_INT(off, f.offset + (f.n ? rr_fill_increment(&f) : 0));
  host_matches(&f, h, off, what);
  free(h);
  cudaFree(d);
}

static const uint64_t sizes[] = {1, 3, 4, 255, 256, 257, 1000, 4099, 65537, 270335, 270336, 270337, 1081345, 3000001};

static void test_uniform_vs_reference(void) {
  static const tcuda_dtype dts[] = {TCUDA_FLOAT32, TCUDA_FLOAT64, TCUDA_FLOAT16, TCUDA_BFLOAT16};
  static const double bounds[][2] = {{0, 1}, {-2, 3}, {0.1, 0.7}, {5, 5}};
  for (size_t d = 0; d < 4; d++)
    for (size_t b = 0; b < 4; b++)
      for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        rr_fill f = {.kind = RR_UNIFORM, .dtype = dts[d], .from = bounds[b][0], .to = bounds[b][1],
                     .seed = 1000 + i * 7 + b, .offset = 4 * (i % 3) * 1000, .n = sizes[i]};
        run_case(f, (int)(i % 2), "uniform");
      }
  rr_fill big = {.kind = RR_UNIFORM, .dtype = TCUDA_FLOAT32, .from = 0, .to = 1, .seed = 42, .n = (1u << 24) + 3};
  run_case(big, 0, "uniform 2^24+3");
  big.dtype = TCUDA_BFLOAT16;
  run_case(big, 1, "uniform 2^24+3 bf16");
}

static void test_integers_vs_reference(void) {
  static const tcuda_dtype rnd[] = {TCUDA_INT8, TCUDA_INT16, TCUDA_INT32, TCUDA_INT64, TCUDA_UINT8,
                                    TCUDA_BOOL, TCUDA_FLOAT16, TCUDA_BFLOAT16, TCUDA_FLOAT32, TCUDA_FLOAT64};
  for (size_t d = 0; d < sizeof rnd / sizeof *rnd; d++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i += 2) {
      rr_fill f = {.kind = RR_RANDOM, .dtype = rnd[d], .seed = 77 + i, .offset = 8 * i, .n = sizes[i]};
      run_case(f, (int)(d % 2), "random_");
    }
  static const struct { tcuda_dtype dt; int64_t lo, hi; } ri[] = {
    {TCUDA_INT64, 0, 1000}, {TCUDA_INT64, -5, 5}, {TCUDA_INT64, 0, 1 << 30}, {TCUDA_INT64, 0, 1ll << 40},
    {TCUDA_INT32, 0, 1000}, {TCUDA_INT32, 0, 1 << 30}, {TCUDA_INT32, -(1 << 27), 1 << 27},
    {TCUDA_INT64, 0, (1 << 28) - 1}, {TCUDA_INT64, 0, 1 << 28}, {TCUDA_INT64, INT64_MIN / 2, INT64_MAX / 2},
    {TCUDA_INT8, -100, 100}, {TCUDA_UINT8, 0, 256}, {TCUDA_INT16, -300, 7}, {TCUDA_BOOL, 0, 2},
    {TCUDA_UINT16, 1, 60000}, {TCUDA_UINT32, 0, 1ll << 32}, {TCUDA_UINT64, 3, 1ll << 50},
    {TCUDA_FLOAT32, -1000, 1000}, {TCUDA_FLOAT64, 0, 1ll << 40}, {TCUDA_FLOAT16, -2048, 2048},
    {TCUDA_BFLOAT16, 0, 256},
  };
  for (size_t r = 0; r < sizeof ri / sizeof *ri; r++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i += 3) {
      rr_fill f = {.kind = RR_RANDINT, .dtype = ri[r].dt, .low = ri[r].lo, .high = ri[r].hi, .seed = r * 31 + i,
                   .offset = 4 * r, .n = sizes[i]};
      run_case(f, (int)((r + i) % 2), "randint");
    }
}

/* 64-bit draws into 8-byte outputs (the resident-block loop schedule)
 * against the host reference. */
static void test_i64_fills(void) {
  static const struct { int kind; tcuda_dtype dt; int64_t lo, hi; } cs[] = {
    {RR_RANDOM, TCUDA_INT64, 0, 0},           {RR_RANDOM, TCUDA_FLOAT64, 0, 0},
    {RR_RANDINT, TCUDA_INT64, 0, 1000},       {RR_RANDINT, TCUDA_INT64, 0, 1ll << 40},
    {RR_RANDINT, TCUDA_INT64, -3, 1000000000007ll}, {RR_RANDINT, TCUDA_INT64, INT64_MIN / 2, INT64_MAX / 2},
    {RR_RANDINT, TCUDA_UINT64, 3, 1ll << 50},  {RR_RANDINT, TCUDA_FLOAT64, 0, 1ll << 40},
  };
  static const uint64_t ns[] = {1, 3, 257, 65537, 1081345};
  for (size_t c = 0; c < sizeof cs / sizeof *cs; c++)
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
      rr_fill f = {.kind = cs[c].kind, .dtype = cs[c].dt, .low = cs[c].lo, .high = cs[c].hi,
                   .seed = 500 + 13 * c + i, .offset = 8, .n = ns[i]};
      char what[48];
      snprintf(what, sizeof what, "i64 schedule case %zu", c);
      run_case(f, (int)((c + i) % 2), what);
    }
}

/* Normals need the device's own sincos and log, so no host reference is
 * bit-exact: their values are compared with torch's byte for byte by
 * rng_torch.sh (required on the GPU machine). Here, what holds whoever
 * computed them: the moments, and the offset advanced as torch's launch
 * arithmetic says. */
static void test_normal_moments_and_offsets(void) {
  const size_t n = 1000003;
  float *d = dmalloc(n * 4);
  CHECK_OK(tcuda_generator_manual_seed(g_gen, 9));
  CHECK_OK(tcuda_rand_normal(g_gen, d, n, TCUDA_FLOAT32, 0.3, 1.7, NULL));
  float *v = to_host(d, n * 4);
  double sum = 0, sq = 0;
  for (size_t i = 0; i < n; i++) {
    sum += v[i];
    sq += (double)v[i] * v[i];
  }
  double mean = sum / n, var = sq / n - mean * mean;
  CHECK(fabs(mean - 0.3) < 0.01);
  CHECK(fabs(sqrt(var) - 1.7) < 0.01);
  /* offset: unroll 4 for float normals, 2 for double */
  uint64_t off;
  CHECK_OK(tcuda_generator_get_offset(g_gen, &off));
  CHECK_EQ_INT(off, rr_increment(n, rr_grid(n, g_sms, g_tpsm), 4));
  CHECK_OK(tcuda_generator_manual_seed(g_gen, 9));
  CHECK_OK(tcuda_rand_normal(g_gen, d, n / 2, TCUDA_FLOAT64, 0, 1, NULL));
  CHECK_OK(tcuda_generator_get_offset(g_gen, &off));
  CHECK_EQ_INT(off, rr_increment(n / 2, rr_grid(n / 2, g_sms, g_tpsm), 2));
  free(v);
  cudaFree(d);
}

/* The default generator and torch.cuda's state functions. */
static void test_state_api(void) {
  const size_t n = 5000;
  float *d = dmalloc(n * 4);
  uint8_t st[16], st2[16];
  uint64_t seed;
  CHECK_OK(tcuda_initial_seed(-1, &seed));
  CHECK(seed < (1ull << 53)); /* nondeterministic default, 53 bits */
  CHECK_OK(tcuda_manual_seed(123));
  CHECK_OK(tcuda_get_rng_state(-1, st));
  CHECK_EQ_INT(st[0], 123);
  CHECK_EQ_INT(st[8], 0);
  CHECK_OK(tcuda_rand_uniform(NULL, d, n, TCUDA_FLOAT32, 0, 1, NULL));
  float *a = to_host(d, n * 4);
  CHECK_OK(tcuda_get_rng_state(-1, st));
  CHECK_EQ_INT(st[8], 4); /* 5000 < S: one curand4 per thread */
  CHECK_OK(tcuda_rand_uniform(NULL, d, n, TCUDA_FLOAT32, 0, 1, NULL));
  float *b = to_host(d, n * 4);
  CHECK(memcmp(a, b, n * 4) != 0);
  CHECK_OK(tcuda_set_rng_state(-1, st, 16)); /* back to after the first call */
  CHECK_OK(tcuda_rand_uniform(NULL, d, n, TCUDA_FLOAT32, 0, 1, NULL));
  float *c = to_host(d, n * 4);
  CHECK(!memcmp(b, c, n * 4));
  uint8_t s8[8] = {123};
  CHECK_OK(tcuda_set_rng_state(-1, s8, 8)); /* seed only = manual_seed */
  CHECK_OK(tcuda_rand_uniform(NULL, d, n, TCUDA_FLOAT32, 0, 1, NULL));
  free(c);
  c = to_host(d, n * 4);
  CHECK(!memcmp(a, c, n * 4));
  rr_fill f = {.kind = RR_UNIFORM, .dtype = TCUDA_FLOAT32, .from = 0, .to = 1, .seed = 123, .n = n,
               .sms = g_sms, .tpsm = g_tpsm};
  CHECK_EQ_INT(compare(&f, a, 0, 1, "default generator"), 0);
  /* seed(): a new nondeterministic seed each time */
  uint64_t s1, s2;
  CHECK_OK(tcuda_seed());
  CHECK_OK(tcuda_initial_seed(-1, &s1));
  CHECK_OK(tcuda_seed());
  CHECK_OK(tcuda_initial_seed(-1, &s2));
  CHECK(s1 != s2 && s1 < (1ull << 53));
  CHECK_OK(tcuda_get_rng_state(-1, st));
  CHECK_EQ_INT(st[8], 0);
  /* all devices */
  int nd = tcuda_device_count();
  uint8_t *all = malloc(16 * nd), *all2 = malloc(16 * nd);
  CHECK_OK(tcuda_manual_seed_all(55));
  CHECK_OK(tcuda_get_rng_state_all(all, 16 * nd));
  for (int i = 0; i < nd; i++) CHECK_EQ_INT(all[16 * i], 55);
  CHECK_ERR(tcuda_get_rng_state_all(all, 16 * nd - 1), TCUDA_ERROR_INVALID_ARGUMENT, "too small");
  CHECK_OK(tcuda_seed_all());
  CHECK_OK(tcuda_get_rng_state_all(all2, 16 * nd));
  for (int i = 1; i < nd; i++) CHECK(!memcmp(all2, all2 + 16 * i, 16)); /* one seed for all */
  CHECK(memcmp(all, all2, 16) != 0);
  CHECK_OK(tcuda_set_rng_state_all(all, 16 * nd));
  CHECK_OK(tcuda_get_rng_state(0, st2));
  CHECK(!memcmp(st2, all, 16));
  uint8_t *toomany = calloc(16, nd + 1);
  CHECK_ERR(tcuda_set_rng_state_all(toomany, 16 * (nd + 1)), TCUDA_ERROR_INVALID_ARGUMENT, "states for");
  CHECK_OK(tcuda_get_rng_state(0, st2));
  CHECK(!memcmp(st2, all, 16)); /* unchanged */
  CHECK_ERR(tcuda_get_rng_state(nd, st), TCUDA_ERROR_INVALID_DEVICE, "out of range");
  tcuda_generator_t *dg = NULL;
  CHECK_ERR(tcuda_generator_create(nd, 1, &dg), TCUDA_ERROR_INVALID_DEVICE, "out of range");
  CHECK_OK(tcuda_default_generator(0, &dg));
  CHECK_ERR(tcuda_generator_destroy(dg), TCUDA_ERROR_INVALID_ARGUMENT, "default generator");
  free(a); free(b); free(c); free(all); free(all2); free(toomany);
  cudaFree(d);
}

/* A user generator is independent of the default one. */
static void test_generators_independent(void) {
  const size_t n = 777;
  int32_t *d = dmalloc(n * 4);
  tcuda_generator_t *g;
  CHECK_OK(tcuda_generator_create(0, 2024, &g));
  uint8_t before[16], after[16];
  CHECK_OK(tcuda_get_rng_state(0, before));
  CHECK_OK(tcuda_rand_randint(g, d, n, TCUDA_INT32, -5, 5, NULL));
  CHECK_OK(tcuda_get_rng_state(0, after));
  CHECK(!memcmp(before, after, 16));
  int32_t *h = to_host(d, n * 4);
  rr_fill f = {.kind = RR_RANDINT, .dtype = TCUDA_INT32, .low = -5, .high = 5, .seed = 2024, .n = n,
               .sms = g_sms, .tpsm = g_tpsm};
  CHECK_EQ_INT(compare(&f, h, 0, 1, "own generator"), 0);
  for (size_t i = 0; i < n; i++) CHECK(h[i] >= -5 && h[i] < 5);
  CHECK_OK(tcuda_generator_destroy(g));
  CHECK_ERR(tcuda_generator_destroy(g), TCUDA_ERROR_INVALID_ARGUMENT, "not a live");
  free(h);
  cudaFree(d);
}

static void test_streams_and_errors(void) {
  const size_t n = 4096;
  float *d = dmalloc(n * 4);
  tcuda_stream_t s;
  CHECK_OK(tcuda_stream_create(0, 0, TCUDA_STREAM_NON_BLOCKING, &s));
  CHECK_OK(tcuda_generator_manual_seed(g_gen, 5));
  CHECK_OK(tcuda_rand_uniform(g_gen, d, n, TCUDA_FLOAT32, -1, 1, &s));
  CHECK_OK(tcuda_stream_synchronize(s));
  float *h = to_host(d, n * 4);
  rr_fill f = {.kind = RR_UNIFORM, .dtype = TCUDA_FLOAT32, .from = -1, .to = 1, .seed = 5, .n = n,
               .sms = g_sms, .tpsm = g_tpsm};
  CHECK_EQ_INT(compare(&f, h, 0, 1, "named stream"), 0);
  /* current stream: set_stream routes the fill there */
  CHECK_OK(tcuda_set_stream(s));
  CHECK_OK(tcuda_rand_uniform(g_gen, d, n, TCUDA_FLOAT32, -1, 1, NULL));
  CHECK_OK(tcuda_stream_synchronize(s));
  tcuda_stream_t def;
  CHECK_OK(tcuda_default_stream(0, &def));
  CHECK_OK(tcuda_set_stream(def));
  /* bad inputs change nothing */
  uint64_t off0, off1;
  CHECK_OK(tcuda_generator_get_offset(g_gen, &off0));
  float host[4];
  CHECK_ERR(tcuda_rand_uniform(g_gen, host, 4, TCUDA_FLOAT32, 0, 1, NULL), TCUDA_ERROR_INVALID_POINTER, "host");
  float *pinned;
  CHECK(cudaMallocHost((void **)&pinned, 64) == cudaSuccess);
  CHECK_ERR(tcuda_rand_uniform(g_gen, pinned, 4, TCUDA_FLOAT32, 0, 1, NULL), TCUDA_ERROR_INVALID_POINTER, "pinned");
  cudaFreeHost(pinned);
  tcuda_stream_t bad = s;
  bad.device = 99;
  CHECK_ERR(tcuda_rand_uniform(g_gen, d, n, TCUDA_FLOAT32, 0, 1, &bad), TCUDA_ERROR_INVALID_DEVICE, "99");
  CHECK_ERR(tcuda_rand_uniform(g_gen, d, n, TCUDA_FLOAT32, 1, 0, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "from=1");
  CHECK_OK(tcuda_generator_get_offset(g_gen, &off1));
  CHECK_EQ_INT(off0, off1);
  CHECK_OK(tcuda_rand_uniform(g_gen, d, 0, TCUDA_FLOAT32, 0, 1, NULL)); /* n = 0: no draw */
  CHECK_OK(tcuda_generator_get_offset(g_gen, &off1));
  CHECK_EQ_INT(off0, off1);
  if (tcuda_device_count() > 1) {
    tcuda_generator_t *g1;
    CHECK_OK(tcuda_generator_create(1, 1, &g1));
    CHECK_ERR(tcuda_rand_uniform(g1, d, n, TCUDA_FLOAT32, 0, 1, NULL), TCUDA_ERROR_INVALID_ARGUMENT,
              "generator is on device 1");
    tcuda_stream_t s1;
    CHECK_OK(tcuda_stream_from_pool(1, 0, &s1));
    CHECK_ERR(tcuda_rand_uniform(NULL, d, n, TCUDA_FLOAT32, 0, 1, &s1), TCUDA_ERROR_INVALID_ARGUMENT,
              "stream is on device 1");
    tcuda_generator_destroy(g1);
  }
  /* graph capture needs a generator registered with the graph */
  cudaStream_t cs = (cudaStream_t)s.handle;
  CHECK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  CHECK_ERR(tcuda_rand_uniform(g_gen, d, n, TCUDA_FLOAT32, 0, 1, &s), TCUDA_ERROR_INVALID_STATE, "capture");
  cudaGraph_t graph;
  CHECK(cudaStreamEndCapture(cs, &graph) == cudaSuccess);
  if (graph) cudaGraphDestroy(graph);
  CHECK_OK(tcuda_generator_get_offset(g_gen, &off1));
  CHECK_EQ_INT(off0, off1);
  CHECK_OK(tcuda_stream_destroy(s));
  free(h);
  cudaFree(d);
}

/* Concurrent fills with one generator: disjoint offsets, none lost. */
typedef struct { int iters; void *buf; } thr_arg;
static void *thr(void *p) {
  thr_arg *a = p;
  for (int i = 0; i < a->iters; i++)
    if (tcuda_rand_uniform(g_gen, a->buf, 300000 + i, TCUDA_FLOAT32, 0, 1, NULL)) return (void *)1;
  return NULL;
}
static void test_threads(void) {
  enum { T = 8, ITERS = 40 };
  pthread_t th[T];
  thr_arg args[T];
  CHECK_OK(tcuda_generator_manual_seed(g_gen, 1));
  for (int i = 0; i < T; i++) {
    args[i] = (thr_arg){ITERS, dmalloc(4 * (300000 + ITERS))};
    pthread_create(&th[i], NULL, thr, &args[i]);
  }
  for (int i = 0; i < T; i++) {
    void *r;
    pthread_join(th[i], &r);
    CHECK(r == NULL);
  }
  uint64_t want = 0, off;
  for (int i = 0; i < ITERS; i++) {
    uint64_t n = 300000 + i;
    want += T * rr_increment(n, rr_grid(n, g_sms, g_tpsm), 4);
  }
  CHECK_OK(tcuda_generator_get_offset(g_gen, &off));
  CHECK_EQ_INT(off, want);
  cudaDeviceSynchronize();
  for (int i = 0; i < T; i++) cudaFree(args[i].buf);
}

/* Over 2^31 - 1 bytes torch splits in halves, each with its own draw after
 * one for the whole buffer: 2^29 + 3 floats -> 2^28 + 1 and 2^28 + 2. */
static void test_split_2gib(void) {
  size_t free_b, total_b;
  cudaMemGetInfo(&free_b, &total_b);
  const uint64_t n = (1ull << 29) + 3;
  if (free_b < n * 4 + (1ull << 30)) { TC_SKIP_PART("needs %llu bytes of device memory free", (unsigned long long)(n * 4)); return; }
  float *d = dmalloc(n * 4);
  CHECK_OK(tcuda_generator_manual_seed(g_gen, 31337));
  CHECK_OK(tcuda_generator_set_offset(g_gen, 40));
  CHECK_OK(tcuda_rand_uniform(g_gen, d, n, TCUDA_FLOAT32, 0, 1, NULL));
  float *h = to_host(d, n * 4);
  uint64_t pieces[2][2] = {{0, (1ull << 28) + 1}, {(1ull << 28) + 1, (1ull << 28) + 2}};
  uint64_t off = 40 + rr_increment(n, rr_grid(n, g_sms, g_tpsm), 4);
  for (int p = 0; p < 2; p++) {
    rr_fill f = {.kind = RR_UNIFORM, .dtype = TCUDA_FLOAT32, .from = 0, .to = 1, .seed = 31337, .offset = off,
                 .n = pieces[p][1], .sms = g_sms, .tpsm = g_tpsm};
    CHECK_EQ_INT(compare(&f, h + pieces[p][0], 0, 9973, "split piece"), 0);
    CHECK_EQ_INT(compare(&f, h + pieces[p][0], f.n - 300000, 1, "split piece tail"), 0);
    off += rr_fill_increment(&f);
  }
  uint64_t got;
  CHECK_OK(tcuda_generator_get_offset(g_gen, &got));
  CHECK_EQ_INT(got, off);
  /* the host fill splits the same way: every byte, and the offset */
  rr_fill whole = {.kind = RR_UNIFORM, .dtype = TCUDA_FLOAT32, .from = 0, .to = 1, .seed = 31337, .offset = 40,
                   .n = n};
  host_matches(&whole, h, got, "split");
  free(h);
  cudaFree(d);
}

int main(int argc, char **argv) {
  tc_require_gpu();
  CHECK_OK(tcuda_set_device(0));
  tcuda_device_properties_t p = TCUDA_DEVICE_PROPERTIES_INIT;
  CHECK_OK(tcuda_get_device_properties(0, &p));
  g_sms = p.multi_processor_count;
  g_tpsm = p.max_threads_per_multi_processor;
  printf("device 0: %s, %d SMs x %d threads: S = %u\n", p.name, g_sms, g_tpsm, 256 * rr_grid(1ull << 40, g_sms, g_tpsm));
  CHECK_OK(tcuda_generator_create(0, 1, &g_gen));
  static const tc_test tests[] = {
    T(test_uniform_vs_reference), T(test_integers_vs_reference), T(test_i64_fills),
    T(test_normal_moments_and_offsets), T(test_state_api), T(test_generators_independent), T(test_streams_and_errors),
    T(test_threads), T(test_split_2gib),
  };
  int rc = tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
  tcuda_generator_destroy(g_gen);
  return rc;
}
