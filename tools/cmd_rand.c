/* tcuda rand: fill a device buffer as torch would after manual_seed(S) (and
 * an offset), and write the raw little-endian bytes, for byte-for-byte
 * comparison with torch.rand/randn/randint/random_. */
#include "cli.h"
#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void rand_usage(FILE *f) {
  fprintf(f,
          "usage: tcuda rand [--seed S] [--offset O] --dist uniform|normal|random|randint --dtype D -n N\n"
          "                  [--from A --to B | --mean M --std S | --low L --high H] [--device D]\n"
          "                  [--out FILE] [--state]\n"
          "  Writes the N values' bytes, as torch's tensor memory holds them, to FILE or stdout:\n"
          "  uniform = uniform_(A=0, B=1) (torch.rand), normal = normal_(M=0, S=1) (torch.randn),\n"
          "  randint = random_(L=0, H) (torch.randint), random = random_() or random_(L) with --low.\n"
          "  --seed: torch.cuda.manual_seed(S) (default: the nondeterministic default seed).\n"
          "  --offset: then the Philox offset O (a multiple of 4), as set_rng_state would.\n"
          "  --state: print 'seed=S offset=O' (the state after the call) to stderr.\n"
          "  D: float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 uint16 uint32 uint64\n"
          "     bool complex32 complex64 complex128 (torch's names and aliases work too)\n");
}

static int parse_i64(const char *opt, const char *s, int64_t *v) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 0);
  if (errno || end == s || *end) { fprintf(stderr, "tcuda rand: %s: '%s' is not an integer\n", opt, s); return 0; }
  *v = x;
  return 1;
}

static int parse_u64(const char *opt, const char *s, uint64_t *v) {
  char *end;
  errno = 0;
  if (*s == '-') { /* torch wraps negative seeds to uint64 too */
    int64_t x;
    if (!parse_i64(opt, s, &x)) return 0;
    *v = (uint64_t)x;
    return 1;
  }
  unsigned long long x = strtoull(s, &end, 0);
  if (errno || end == s || *end) { fprintf(stderr, "tcuda rand: %s: '%s' is not an integer\n", opt, s); return 0; }
  *v = x;
  return 1;
}

static int parse_f64(const char *opt, const char *s, double *v) {
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (errno == ERANGE || end == s || *end) { fprintf(stderr, "tcuda rand: %s: '%s' is not a number\n", opt, s); return 0; }
  *v = x;
  return 1;
}

enum kind { UNIFORM, NORMAL, RANDOM, RANDINT };

static tcuda_status fill(enum kind kind, void *d, size_t n, tcuda_dtype dt, double from, double to, double mean,
                         double std, int have_low, int64_t low, int64_t high) {
  switch (kind) {
  case UNIFORM: return tcuda_rand_uniform(NULL, d, n, dt, from, to, NULL);
  case NORMAL: return tcuda_rand_normal(NULL, d, n, dt, mean, std, NULL);
  case RANDOM:
    return have_low ? tcuda_rand_random_from(NULL, d, n, dt, low, NULL) : tcuda_rand_random(NULL, d, n, dt, NULL);
  default: return tcuda_rand_randint(NULL, d, n, dt, low, high, NULL);
  }
}

int cmd_rand(int argc, char **argv) {
  const char *dist = NULL, *dtype_name = NULL, *out_path = NULL;
  uint64_t seed = 0, offset = 0, n = 0;
  int have_seed = 0, have_offset = 0, have_n = 0, have_low = 0, have_high = 0, print_state = 0;
  int64_t device = -1, low = 0, high = 0;
  double from = 0, to = 1, mean = 0, std = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { rand_usage(stdout); return 0; }
    if (!strcmp(a, "--state")) { print_state = 1; continue; }
    if (i + 1 >= argc) { fprintf(stderr, "tcuda rand: %s needs a value\n", a); rand_usage(stderr); return 2; }
    const char *v = argv[++i];
    int ok = 1;
    if (!strcmp(a, "--seed")) ok = have_seed = parse_u64(a, v, &seed);
    else if (!strcmp(a, "--offset")) ok = have_offset = parse_u64(a, v, &offset);
    else if (!strcmp(a, "--dist")) dist = v;
    else if (!strcmp(a, "--dtype")) dtype_name = v;
    else if (!strcmp(a, "-n") || !strcmp(a, "--n")) ok = have_n = parse_u64(a, v, &n);
    else if (!strcmp(a, "--from")) ok = parse_f64(a, v, &from);
    else if (!strcmp(a, "--to")) ok = parse_f64(a, v, &to);
    else if (!strcmp(a, "--mean")) ok = parse_f64(a, v, &mean);
    else if (!strcmp(a, "--std")) ok = parse_f64(a, v, &std);
    else if (!strcmp(a, "--low")) ok = have_low = parse_i64(a, v, &low);
    else if (!strcmp(a, "--high")) ok = have_high = parse_i64(a, v, &high);
    else if (!strcmp(a, "--device")) ok = parse_i64(a, v, &device);
    else if (!strcmp(a, "--out")) out_path = v;
    else { fprintf(stderr, "tcuda rand: unknown option '%s'\n", a); rand_usage(stderr); return 2; }
    if (!ok) return 2;
  }
  if (!dist || !dtype_name || !have_n) {
    fprintf(stderr, "tcuda rand: --dist, --dtype and -n are required\n");
    rand_usage(stderr);
    return 2;
  }
  enum kind kind;
  if (!strcmp(dist, "uniform")) kind = UNIFORM;
  else if (!strcmp(dist, "normal")) kind = NORMAL;
  else if (!strcmp(dist, "random")) kind = RANDOM;
  else if (!strcmp(dist, "randint")) kind = RANDINT;
  else { fprintf(stderr, "tcuda rand: unknown --dist '%s'\n", dist); return 2; }
  if (kind == RANDINT && !have_high) { fprintf(stderr, "tcuda rand: randint needs --high\n"); return 2; }
  tcuda_dtype dt;
  if (tcuda_dtype_from_name(dtype_name, &dt)) return cli_fail("rand");
  size_t es = tcuda_dtype_size(dt);
  if (n > SIZE_MAX / es) { fprintf(stderr, "tcuda rand: -n %" PRIu64 " is too large\n", n); return 2; }
  size_t bytes = (size_t)n * es;

  /* n = 0 checks the arguments without a GPU: report them before CUDA errors */
  if (fill(kind, NULL, 0, dt, from, to, mean, std, have_low, low, high)) return cli_fail("rand");
  if (device >= 0 && tcuda_set_device((int)device)) return cli_fail("rand");
  if (have_seed || have_offset) {
    uint8_t st[TCUDA_RNG_STATE_SIZE];
    if (!have_seed && tcuda_get_rng_state(-1, st)) return cli_fail("rand");
    if (have_seed)
      for (int i = 0; i < 8; i++) st[i] = (uint8_t)(seed >> (8 * i));
    for (int i = 0; i < 8; i++) st[8 + i] = (uint8_t)(offset >> (8 * i));
    if (tcuda_set_rng_state(-1, st, sizeof st)) return cli_fail("rand");
  }

  void *d = NULL;
  if (bytes) {
    if (tcuda_init()) return cli_fail("rand");
    cudaError_t e = cudaMalloc(&d, bytes);
    if (e != cudaSuccess) {
      fprintf(stderr, "tcuda rand: cudaMalloc(%zu) failed: %s\n", bytes, cudaGetErrorString(e));
      return 1;
    }
  }
  tcuda_status s = fill(kind, d, n, dt, from, to, mean, std, have_low, low, high);
  if (s) { if (d) cudaFree(d); return cli_fail("rand"); }
  unsigned char *h = NULL;
  if (bytes) {
    h = malloc(bytes);
    cudaError_t e = h ? cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) : cudaErrorMemoryAllocation;
    cudaFree(d);
    if (e != cudaSuccess) {
      free(h);
      fprintf(stderr, "tcuda rand: copy to host failed: %s\n", cudaGetErrorString(e));
      return 1;
    }
  }
  if (print_state) {
    uint8_t st[TCUDA_RNG_STATE_SIZE];
    if (tcuda_get_rng_state(-1, st)) { free(h); return cli_fail("rand"); }
    uint64_t sd = 0, off = 0;
    for (int i = 0; i < 8; i++) { sd |= (uint64_t)st[i] << (8 * i); off |= (uint64_t)st[8 + i] << (8 * i); }
    fprintf(stderr, "seed=%" PRIu64 " offset=%" PRIu64 "\n", sd, off);
  }
  FILE *f = out_path ? fopen(out_path, "wb") : stdout;
  if (!f) { free(h); fprintf(stderr, "tcuda rand: cannot open %s: %s\n", out_path, strerror(errno)); return 1; }
  int rc = 0;
  if (bytes && fwrite(h, 1, bytes, f) != bytes) rc = 1;
  if (out_path ? fclose(f) != 0 : fflush(f) != 0) rc = 1;
  if (rc) fprintf(stderr, "tcuda rand: write failed: %s\n", strerror(errno));
  free(h);
  return rc;
}
