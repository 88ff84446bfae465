/* Host fills (tcuda_rand_fill_host) without a GPU: every uniform and integer
 * fill against the independent host reference (tests/rng_ref.h), for
 * several launch geometries, with the offset advance torch computes; the
 * same through `tcuda rand --cpu`; and the argument checks. */
#include "harness.h"
#include "rng_ref.h"
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static const struct { int sms, tpsm; } geo[] = {{132, 2048}, {108, 2048}, {80, 1536}};

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) { fprintf(stderr, "out of memory\n"); exit(1); }
  return p;
}

static uint64_t load(const void *h, size_t es, uint64_t i) {
  uint64_t v = 0;
  memcpy(&v, (const char *)h + i * es, es);
  return v;
}

/* Mismatches of h against the reference (at most 3 printed). */
static long compare(const rr_fill *f, const void *h, const char *what) {
  size_t es = rr_size(f->dtype);
  long bad = 0;
  for (uint64_t e = 0; e < f->n; e++) {
    uint64_t want = rr_value(f, e), got = load(h, es, e);
    if (want != got && bad++ < 3)
      fprintf(stderr, "  %s %s n=%llu element %llu: got %#llx, want %#llx\n", what, tcuda_dtype_name(f->dtype),
              (unsigned long long)f->n, (unsigned long long)e, (unsigned long long)got, (unsigned long long)want);
  }
  return bad;
}

static tcuda_rand_request_t request_of(const rr_fill *f) {
  tcuda_rand_request_t r = TCUDA_RAND_REQUEST_INIT;
  r.dtype = f->dtype;
  if (f->kind == RR_UNIFORM) { r.kind = TCUDA_RAND_UNIFORM; r.from = f->from; r.to = f->to; }
  else if (f->kind == RR_RANDOM) r.kind = TCUDA_RAND_RANDOM;
  else { r.kind = TCUDA_RAND_RANDINT; r.low = f->low; r.high = f->high; }
  return r;
}

/* The library's host fill against the reference, and the offset after it. */
static void run_case(rr_fill f, const char *what) {
  size_t es = rr_size(f.dtype);
  void *h = xmalloc(f.n * es);
  tcuda_rand_request_t r = request_of(&f);
  uint64_t off = f.offset;
  CHECK_OK(tcuda_rand_fill_host(&r, f.seed, &off, f.sms, f.tpsm, h, f.n));
  long bad = compare(&f, h, what);
  if (bad) fprintf(stderr, "  %s: %ld mismatches (%d SMs x %d)\n", what, bad, f.sms, f.tpsm);
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(off, f.offset + rr_fill_increment(&f));
  free(h);
}

static const uint64_t sizes[] = {1, 3, 4, 255, 256, 257, 1000, 4099, 65537, 202753, 270335, 270337, 1081345};

static void test_uniform_vs_reference(void) {
  static const tcuda_dtype dts[] = {TCUDA_FLOAT32, TCUDA_FLOAT64, TCUDA_FLOAT16, TCUDA_BFLOAT16};
  static const double bounds[][2] = {{0, 1}, {-2, 3}, {0.1, 0.7}, {5, 5}};
  for (size_t d = 0; d < 4; d++)
    for (size_t b = 0; b < 4; b++)
      for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i += (b ? 2 : 1)) {
        rr_fill f = {.kind = RR_UNIFORM, .dtype = dts[d], .from = bounds[b][0], .to = bounds[b][1],
                     .seed = 1000 + i * 7 + b, .offset = 4 * (i % 3) * 1000, .n = sizes[i],
                     .sms = geo[i % 3].sms, .tpsm = geo[i % 3].tpsm};
        run_case(f, "uniform");
      }
}

static void test_integers_vs_reference(void) {
  static const tcuda_dtype rnd[] = {TCUDA_INT8, TCUDA_INT16, TCUDA_INT32, TCUDA_INT64, TCUDA_UINT8,
                                    TCUDA_BOOL, TCUDA_FLOAT16, TCUDA_BFLOAT16, TCUDA_FLOAT32, TCUDA_FLOAT64};
  for (size_t d = 0; d < sizeof rnd / sizeof *rnd; d++)
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i += 2) {
      rr_fill f = {.kind = RR_RANDOM, .dtype = rnd[d], .seed = 77 + i, .offset = 8 * i, .n = sizes[i],
                   .sms = geo[(i + d) % 3].sms, .tpsm = geo[(i + d) % 3].tpsm};
      run_case(f, "random_");
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
                   .offset = 4 * r, .n = sizes[i], .sms = geo[r % 3].sms, .tpsm = geo[r % 3].tpsm};
      run_case(f, "randint");
    }
}

/* random_(from) is randint(from, max + 1); complex uniform is the float
 * fill of 2n values; the offset wraps as the generator's does. */
static void test_equivalent_requests(void) {
  enum { N = 5000 };
  int8_t a[N], b[N];
  tcuda_rand_request_t rf = {.kind = TCUDA_RAND_RANDOM_FROM, .dtype = TCUDA_INT8, .low = -100};
  tcuda_rand_request_t ri = {.kind = TCUDA_RAND_RANDINT, .dtype = TCUDA_INT8, .low = -100, .high = 128};
  uint64_t o1 = 40, o2 = 40;
  CHECK_OK(tcuda_rand_fill_host(&rf, 9, &o1, 132, 2048, a, N));
  CHECK_OK(tcuda_rand_fill_host(&ri, 9, &o2, 132, 2048, b, N));
  CHECK(!memcmp(a, b, N));
  CHECK_EQ_INT(o1, o2);

  float c[2 * N], f[2 * N];
  tcuda_rand_request_t rc = {.kind = TCUDA_RAND_UNIFORM, .dtype = TCUDA_COMPLEX64, .from = -1, .to = 1};
  tcuda_rand_request_t rr = rc;
  rr.dtype = TCUDA_FLOAT32;
  o1 = o2 = 0;
  CHECK_OK(tcuda_rand_fill_host(&rc, 5, &o1, 132, 2048, c, N));
  CHECK_OK(tcuda_rand_fill_host(&rr, 5, &o2, 132, 2048, f, 2 * N));
  CHECK(!memcmp(c, f, sizeof c));
  CHECK_EQ_INT(o1, o2);

  /* offset near 2^64: counters carry into the thread words, the offset wraps */
  rr_fill w = {.kind = RR_UNIFORM, .dtype = TCUDA_FLOAT32, .from = 0, .to = 1, .seed = 3,
               .offset = 0xfffffffffffffff8ull, .n = 1081345, .sms = 132, .tpsm = 2048};
  run_case(w, "uniform near 2^64");
}

/* torch's arithmetic, by hand: H200 (132 SMs x 2048 threads): grid 1056
 * blocks, 270336 threads; float32 uniform_ draws 4 values per thread per
 * round, float64 2. */
static void test_offset_arithmetic(void) {
  static const struct { tcuda_rand_kind kind; tcuda_dtype dt; uint64_t n, inc; } cs[] = {
    {TCUDA_RAND_UNIFORM, TCUDA_FLOAT32, 1, 4},          {TCUDA_RAND_UNIFORM, TCUDA_FLOAT32, 1081344, 4},
    {TCUDA_RAND_UNIFORM, TCUDA_FLOAT32, 1081345, 8},    {TCUDA_RAND_UNIFORM, TCUDA_FLOAT64, 540672, 4},
    {TCUDA_RAND_UNIFORM, TCUDA_FLOAT64, 540673, 8},     {TCUDA_RAND_RANDOM, TCUDA_INT64, 540673, 8},
    {TCUDA_RAND_RANDOM, TCUDA_INT32, 540673, 4},        {TCUDA_RAND_UNIFORM, TCUDA_COMPLEX128, 270337, 8},
  };
  for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
    tcuda_rand_request_t r = {.kind = cs[i].kind, .dtype = cs[i].dt, .to = 1};
    void *h = xmalloc(cs[i].n * tcuda_dtype_size(cs[i].dt));
    uint64_t off = 100;
    CHECK_OK(tcuda_rand_fill_host(&r, 1, &off, 132, 2048, h, cs[i].n));
    CHECK_EQ_INT(off, 100 + cs[i].inc);
    free(h);
  }
  /* n = 0 draws nothing */
  tcuda_rand_request_t r = TCUDA_RAND_REQUEST_INIT;
  uint64_t off = 12;
  CHECK_OK(tcuda_rand_fill_host(&r, 1, &off, 132, 2048, NULL, 0));
  CHECK_EQ_INT(off, 12);
}

static void test_errors(void) {
  float buf[4] = {1, 2, 3, 4}, orig[4];
  memcpy(orig, buf, sizeof buf);
  uint64_t off = 8;
  tcuda_rand_request_t r = TCUDA_RAND_REQUEST_INIT;
  CHECK_ERR(tcuda_rand_fill_host(NULL, 1, &off, 132, 2048, buf, 4), TCUDA_ERROR_INVALID_ARGUMENT, "req");
  CHECK_ERR(tcuda_rand_fill_host(&r, 1, NULL, 132, 2048, buf, 4), TCUDA_ERROR_INVALID_ARGUMENT, "offset");
  CHECK_ERR(tcuda_rand_fill_host(&r, 1, &off, 0, 2048, buf, 4), TCUDA_ERROR_INVALID_ARGUMENT, "sm_count 0");
  CHECK_ERR(tcuda_rand_fill_host(&r, 1, &off, 132, 128, buf, 4), TCUDA_ERROR_INVALID_ARGUMENT,
            "max_threads_per_sm 128");
  CHECK_ERR(tcuda_rand_fill_host(&r, 1, &off, 132, 2048, NULL, 4), TCUDA_ERROR_INVALID_ARGUMENT, "buf");
  uint64_t odd = 6;
  CHECK_ERR(tcuda_rand_fill_host(&r, 1, &odd, 132, 2048, buf, 4), TCUDA_ERROR_INVALID_ARGUMENT,
            "offset 6 is not a multiple of 4");
  r.from = 2;
  r.to = 1;
  CHECK_ERR(tcuda_rand_fill_host(&r, 1, &off, 132, 2048, buf, 4), TCUDA_ERROR_INVALID_ARGUMENT, "from=2 > to=1");
  tcuda_rand_request_t nr = {.kind = TCUDA_RAND_NORMAL, .dtype = TCUDA_FLOAT32, .std = 1};
  CHECK_OK(tcuda_rand_fill_host(&nr, 1, &off, 132, 2048, NULL, 0)); /* arguments only */
  CHECK_ERR(tcuda_rand_fill_host(&nr, 1, &off, 132, 2048, buf, 4), TCUDA_ERROR_NOT_SUPPORTED, "sincosf");
  nr.std = -1;
  CHECK_ERR(tcuda_rand_fill_host(&nr, 1, &off, 132, 2048, NULL, 0), TCUDA_ERROR_INVALID_ARGUMENT, "std=-1");
  tcuda_rand_request_t bad = {.kind = (tcuda_rand_kind)9, .dtype = TCUDA_FLOAT32};
  CHECK_ERR(tcuda_rand_fill_host(&bad, 1, &off, 132, 2048, buf, 4), TCUDA_ERROR_INVALID_ARGUMENT, "kind 9");
  tcuda_rand_request_t u32 = {.kind = TCUDA_RAND_RANDOM, .dtype = TCUDA_UINT32};
  CHECK_ERR(tcuda_rand_fill_host(&u32, 1, &off, 132, 2048, buf, 4), TCUDA_ERROR_NOT_SUPPORTED, "uint32");
  CHECK_EQ_INT(off, 8);
  CHECK(!memcmp(buf, orig, sizeof buf));
}

/* ---- the same through `tcuda rand --cpu` ---- */

/* Runs the CLI; its stdout into *out (malloc'd), its stderr into err.
 * Returns the exit status, or -1. */
static int run_cli(const char *args, unsigned char **out, size_t *len, char *err, size_t errcap) {
  const char *cli = getenv("TCUDA_CLI");
  char errf[] = "/tmp/tcuda-rng-host-XXXXXX";
  int fd = mkstemp(errf);
  if (!cli || fd < 0) return -1;
  close(fd);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' rand %s 2>'%s'", cli, args, errf);
  FILE *p = popen(cmd, "r");
  if (!p) { unlink(errf); return -1; }
  size_t cap = 1 << 16, n = 0, r;
  unsigned char *b = xmalloc(cap);
  while ((r = fread(b + n, 1, cap - n, p)) > 0)
    if ((n += r) == cap) {
      unsigned char *nb = realloc(b, cap *= 2);
      if (!nb) exit(1);
      b = nb;
    }
  int st = pclose(p);
  FILE *e = fopen(errf, "r");
  size_t en = e ? fread(err, 1, errcap - 1, e) : 0;
  err[en] = 0;
  if (e) fclose(e);
  unlink(errf);
  *out = b;
  *len = n;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli_cpu_vs_reference(void) {
  if (!getenv("TCUDA_CLI")) { TC_SKIP_PART("TCUDA_CLI is not set"); return; }
  static const struct { rr_fill f; const char *dist, *extra; } cs[] = {
    {{.kind = RR_UNIFORM, .dtype = TCUDA_FLOAT32, .from = 0, .to = 1, .seed = 3, .offset = 0, .n = 1001}, "uniform", ""},
    {{.kind = RR_UNIFORM, .dtype = TCUDA_FLOAT64, .from = -2, .to = 3, .seed = 42, .offset = 64, .n = 540673},
     "uniform", "--from -2 --to 3"},
    {{.kind = RR_UNIFORM, .dtype = TCUDA_BFLOAT16, .from = 0.1, .to = 0.7, .seed = 7, .offset = 8, .n = 4099},
     "uniform", "--from 0.1 --to 0.7"},
    {{.kind = RR_UNIFORM, .dtype = TCUDA_FLOAT16, .from = 0, .to = 1, .seed = 1, .offset = 4, .n = 1081345},
     "uniform", ""},
    {{.kind = RR_RANDOM, .dtype = TCUDA_INT64, .seed = 11, .offset = 12, .n = 270337}, "random", ""},
    {{.kind = RR_RANDOM, .dtype = TCUDA_UINT8, .seed = 12, .offset = 0, .n = 65537}, "random", ""},
    {{.kind = RR_RANDOM, .dtype = TCUDA_FLOAT32, .seed = 13, .offset = 400, .n = 257}, "random", ""},
    {{.kind = RR_RANDINT, .dtype = TCUDA_INT64, .low = -5, .high = 5, .seed = 21, .offset = 0, .n = 1000},
     "randint", "--low -5 --high 5"},
    {{.kind = RR_RANDINT, .dtype = TCUDA_INT32, .low = 0, .high = 1 << 30, .seed = 22, .offset = 4, .n = 270335},
     "randint", "--high 1073741824"},
    {{.kind = RR_RANDINT, .dtype = TCUDA_BOOL, .low = 0, .high = 2, .seed = 23, .offset = 0, .n = 3},
     "randint", "--high 2"},
  };
  for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
    rr_fill f = cs[i].f;
    f.sms = geo[i % 3].sms;
    f.tpsm = geo[i % 3].tpsm;
    char args[512], err[4096];
    snprintf(args, sizeof args,
             "--cpu --sm-count %d --threads-per-sm %d --seed %llu --offset %llu --dist %s --dtype %s -n %llu %s --state",
             f.sms, f.tpsm, (unsigned long long)f.seed, (unsigned long long)f.offset, cs[i].dist,
             tcuda_dtype_name(f.dtype), (unsigned long long)f.n, cs[i].extra);
    unsigned char *out = NULL;
    size_t len = 0;
    int rc = run_cli(args, &out, &len, err, sizeof err);
    if (rc != 0) fprintf(stderr, "  tcuda rand %s -> %d: %s\n", args, rc, err);
    CHECK_EQ_INT(rc, 0);
    CHECK_EQ_INT(len, f.n * rr_size(f.dtype));
    if (rc == 0 && len == f.n * rr_size(f.dtype)) CHECK_EQ_INT(compare(&f, out, cs[i].dist), 0);
    char want[128];
    snprintf(want, sizeof want, "seed=%llu offset=%llu\n", (unsigned long long)f.seed,
             (unsigned long long)(f.offset + rr_fill_increment(&f)));
    if (!strstr(err, want)) fprintf(stderr, "  tcuda rand %s: stderr '%s' lacks '%s'\n", args, err, want);
    CHECK(strstr(err, want) != NULL);
    free(out);
  }
}

int main(int argc, char **argv) {
  static const tc_test tests[] = {
    T(test_uniform_vs_reference), T(test_integers_vs_reference), T(test_equivalent_requests),
    T(test_offset_arithmetic), T(test_errors), T(test_cli_cpu_vs_reference),
  };
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
