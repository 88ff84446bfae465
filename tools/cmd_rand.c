/* tcuda rand: the values torch would write after manual_seed(S) (and an
 * offset), as raw little-endian bytes, for byte-for-byte comparison with
 * torch.rand/randn/randint/random_. On a GPU they are made there; without
 * one (or with --cpu) the host fill computes them for a stated launch
 * geometry, since the values depend on the device's SM count. */
#include "cli.h"
#include "inspect/outfile.h"
#include <cuda_runtime_api.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define H200_SMS 132
#define H200_THREADS_PER_SM 2048

static const cli_cmd CMD = {
    "rand",
    "usage: tcuda rand --dist uniform|normal|random|randint --dtype D -n N [--seed S] [--offset O]\n"
    "                  [--from A --to B | --mean M --std S | --low L --high H]\n"
    "                  [--device D] [--sm-count N] [--threads-per-sm T] [--cpu] [--out FILE] [--state]\n",
    "  Writes the N values' bytes, as torch's tensor memory holds them, to FILE or stdout:\n"
    "    uniform = uniform_(A=0, B=1) (torch.rand)     normal = normal_(M=0, S=1) (torch.randn)\n"
    "    randint = random_(L=0, H) (torch.randint; --high is required)\n"
    "    random  = random_(), or random_(L) with --low\n"
    "  An option of another distribution is refused (exit 2), not ignored.\n"
    "  --seed: torch.cuda.manual_seed(S) (negative seeds wrap to uint64 as torch's do);\n"
    "          default: a nondeterministic seed, as torch's default generator.\n"
    "  --offset: then the Philox offset O (0 or more, a multiple of 4), as set_rng_state would.\n"
    "  --state: print 'seed=S offset=O' (the state after the call) to stderr, after a line\n"
    "           'device=gpu:D|cpu sm_count=N threads_per_sm=T' saying where and for what geometry.\n"
    "  D: float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 uint16 uint32 uint64\n"
    "     bool complex32 complex64 complex128 (torch's names and aliases work too)\n"
    "\n"
    "  Where the numbers are made:\n"
    "  - With a GPU: on device D (--device, default the current one), by torch's kernels' rules.\n"
    "    --sm-count/--threads-per-sm, if given, must be that device's (else exit 2).\n"
    "  - Without a GPU, or with --cpu: on the CPU, exactly as torch's CUDA kernels make them for a\n"
    "    launch geometry, which the values depend on: --sm-count N SMs (1..2^20) with\n"
    "    --threads-per-sm T threads each (256..2^20). Default: the device's when there is one,\n"
    "    else an H200's (132 SMs x 2048 threads). uniform, random and randint only: normal needs\n"
    "    the GPU's own sincosf and logf, so without a GPU it exits 1 (2 with --cpu).\n"
    "    --device without a GPU exits 1.\n"};

enum {
  O_SEED = 256, O_OFFSET, O_DIST, O_DTYPE, O_FROM, O_TO, O_MEAN, O_STD, O_LOW, O_HIGH, O_DEVICE, O_OUT,
  O_STATE, O_SMS, O_TPSM, O_CPU
};

typedef struct {
  tcuda_rand_request_t req;
  uint64_t seed, offset, n;
  int have_seed, have_offset, print_state, cpu;
  int device;      /* -1: not given */
  int sms, tpsm;   /* 0: not given */
  const char *out_path;
} rand_args;

/* Options that belong to one distribution: which were given. */
enum { G_FROM = 1, G_TO = 2, G_MEAN = 4, G_STD = 8, G_LOW = 16, G_HIGH = 32 };

static int check_dist_options(tcuda_rand_kind kind, const char *dist, int given) {
  static const struct { int bit; const char *name; } names[] = {
      {G_FROM, "--from"}, {G_TO, "--to"}, {G_MEAN, "--mean"}, {G_STD, "--std"}, {G_LOW, "--low"}, {G_HIGH, "--high"}};
  int ok = kind == TCUDA_RAND_UNIFORM  ? G_FROM | G_TO
           : kind == TCUDA_RAND_NORMAL ? G_MEAN | G_STD
           : kind == TCUDA_RAND_RANDOM ? G_LOW
                                       : G_LOW | G_HIGH;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (given & names[i].bit & ~ok) {
      const char *hint = kind == TCUDA_RAND_RANDOM && names[i].bit == G_HIGH ? " (random_(L, H) is --dist randint)" : "";
      return cli_usage_error(&CMD, "%s does not apply to --dist %s%s", names[i].name, dist, hint);
    }
  if (kind == TCUDA_RAND_RANDINT && !(given & G_HIGH)) return cli_usage_error(&CMD, "--dist randint needs --high");
  return 0;
}

static int parse_args(int argc, char **argv, rand_args *a, int *rc) {
  static const struct option longopts[] = {
      {"seed", required_argument, NULL, O_SEED},    {"offset", required_argument, NULL, O_OFFSET},
      {"dist", required_argument, NULL, O_DIST},    {"dtype", required_argument, NULL, O_DTYPE},
      {"n", required_argument, NULL, 'n'},          {"from", required_argument, NULL, O_FROM},
      {"to", required_argument, NULL, O_TO},        {"mean", required_argument, NULL, O_MEAN},
      {"std", required_argument, NULL, O_STD},      {"low", required_argument, NULL, O_LOW},
      {"high", required_argument, NULL, O_HIGH},    {"device", required_argument, NULL, O_DEVICE},
      {"out", required_argument, NULL, O_OUT},      {"state", no_argument, NULL, O_STATE},
      {"sm-count", required_argument, NULL, O_SMS}, {"threads-per-sm", required_argument, NULL, O_TPSM},
      {"cpu", no_argument, NULL, O_CPU},            {"help", no_argument, NULL, 'h'},
      {0}};
  const char *dist = NULL, *dtype = NULL;
  int have_n = 0, given = 0, ch, ok = 1;
  uint64_t u;
  int64_t i64;
  tcuda_rand_request_t *r = &a->req;
  while (ok && (ch = cli_getopt(&CMD, argc, argv, "hn:", longopts, rc)) != -1) {
    const char *v = optarg;
    switch (ch) {
    case CLI_DONE: return 0;
    case O_SEED: /* torch wraps negative seeds to uint64 */
      if (*v == '-') { ok = cli_parse_i64(&CMD, "--seed", v, &i64); a->seed = (uint64_t)i64; }
      else ok = cli_parse_u64(&CMD, "--seed", v, &a->seed);
      a->have_seed = 1;
      break;
    case O_OFFSET:
      ok = cli_parse_u64(&CMD, "--offset", v, &a->offset);
      if (ok && a->offset % 4) ok = 0, cli_usage_error(&CMD, "--offset %s is not a multiple of 4", v);
      a->have_offset = 1;
      break;
    case O_DIST: dist = v; break;
    case O_DTYPE: dtype = v; break;
    case 'n': ok = have_n = cli_parse_whole(&CMD, "-n", v, "count", 0, SIZE_MAX, &a->n); break;
    case O_FROM: ok = cli_parse_f64(&CMD, "--from", v, &r->from); given |= G_FROM; break;
    case O_TO: ok = cli_parse_f64(&CMD, "--to", v, &r->to); given |= G_TO; break;
    case O_MEAN: ok = cli_parse_f64(&CMD, "--mean", v, &r->mean); given |= G_MEAN; break;
    case O_STD: ok = cli_parse_f64(&CMD, "--std", v, &r->std); given |= G_STD; break;
    case O_LOW: ok = cli_parse_i64(&CMD, "--low", v, &r->low); given |= G_LOW; break;
    case O_HIGH: ok = cli_parse_i64(&CMD, "--high", v, &r->high); given |= G_HIGH; break;
    case O_DEVICE: ok = cli_parse_whole(&CMD, "--device", v, "device index", 0, 1023, &u); a->device = (int)u; break;
    case O_OUT:
      if (!*v) ok = 0, cli_usage_error(&CMD, "--out needs a file name");
      a->out_path = v;
      break;
    case O_STATE: a->print_state = 1; break;
    case O_CPU: a->cpu = 1; break;
    case O_SMS: ok = cli_parse_whole(&CMD, "--sm-count", v, "SM count", 1, 1 << 20, &u); a->sms = (int)u; break;
    case O_TPSM:
      ok = cli_parse_whole(&CMD, "--threads-per-sm", v, "thread count", 256, 1 << 20, &u);
      a->tpsm = (int)u;
      break;
    }
  }
  if (!ok) { *rc = CLI_USAGE; return 0; }
  if (cli_operands(&CMD, argc, argv, 0) < 0) { *rc = CLI_USAGE; return 0; }
  if (!dist || !dtype || !have_n) {
    *rc = cli_usage_error(&CMD, "--dist, --dtype and -n are required");
    return 0;
  }
  static const struct { const char *name; tcuda_rand_kind kind; } dists[] = {
      {"uniform", TCUDA_RAND_UNIFORM}, {"normal", TCUDA_RAND_NORMAL}, {"random", TCUDA_RAND_RANDOM},
      {"randint", TCUDA_RAND_RANDINT}};
  size_t k = 0;
  while (k < 4 && strcmp(dist, dists[k].name)) k++;
  if (k == 4) {
    *rc = cli_usage_error(&CMD, "unknown --dist '%s': expected uniform, normal, random or randint", dist);
    return 0;
  }
  r->kind = dists[k].kind;
  if ((*rc = check_dist_options(r->kind, dist, given))) return 0;
  if (r->kind == TCUDA_RAND_RANDOM && (given & G_LOW)) r->kind = TCUDA_RAND_RANDOM_FROM;
  if (tcuda_dtype_from_name(dtype, &r->dtype)) {
    *rc = cli_usage_error(&CMD, "--dtype: %s", cli_lib_message());
    return 0;
  }
  size_t es = tcuda_dtype_size(r->dtype);
  if (a->n > SIZE_MAX / es) {
    *rc = cli_usage_error(&CMD, "-n %" PRIu64 " is too large for %s (%zu bytes each)", a->n,
                          tcuda_dtype_name(r->dtype), es);
    return 0;
  }
  /* torch's checks of the values (bounds, dtype support), without a GPU:
   * n = 0 checks only */
  uint64_t off = 0;
  if (tcuda_rand_fill_host(r, 0, &off, H200_SMS, H200_THREADS_PER_SM, NULL, 0)) {
    *rc = cli_usage_error(&CMD, "%s", cli_lib_message());
    return 0;
  }
  return 1;
}

static tcuda_status gpu_fill(const tcuda_rand_request_t *r, void *d, size_t n) {
  switch (r->kind) {
  case TCUDA_RAND_UNIFORM: return tcuda_rand_uniform(NULL, d, n, r->dtype, r->from, r->to, NULL);
  case TCUDA_RAND_NORMAL: return tcuda_rand_normal(NULL, d, n, r->dtype, r->mean, r->std, NULL);
  case TCUDA_RAND_RANDOM: return tcuda_rand_random(NULL, d, n, r->dtype, NULL);
  case TCUDA_RAND_RANDOM_FROM: return tcuda_rand_random_from(NULL, d, n, r->dtype, r->low, NULL);
  default: return tcuda_rand_randint(NULL, d, n, r->dtype, r->low, r->high, NULL);
  }
}

/* The fill on the current device into h (bytes long); seed and offset get the
 * state after. */
static int run_gpu(const rand_args *a, unsigned char *h, size_t bytes, uint64_t *seed, uint64_t *offset) {
  if (a->have_seed || a->have_offset) {
    uint8_t st[TCUDA_RNG_STATE_SIZE];
    if (!a->have_seed && tcuda_get_rng_state(-1, st)) return cli_fail("rand");
    if (a->have_seed)
      for (int i = 0; i < 8; i++) st[i] = (uint8_t)(a->seed >> (8 * i));
    for (int i = 0; i < 8; i++) st[8 + i] = (uint8_t)(a->offset >> (8 * i));
    if (tcuda_set_rng_state(-1, st, sizeof st)) return cli_fail("rand");
  }
  void *d = NULL;
  if (bytes) {
    cudaError_t e = cudaMalloc(&d, bytes);
    if (e != cudaSuccess) return cli_error(&CMD, "cudaMalloc(%zu) failed: %s", bytes, cudaGetErrorString(e));
  }
  if (gpu_fill(&a->req, d, a->n)) {
    if (d) cudaFree(d);
    return cli_fail("rand");
  }
  if (bytes) {
    cudaError_t e = cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost);
    cudaFree(d);
    if (e != cudaSuccess) return cli_error(&CMD, "copy to host failed: %s", cudaGetErrorString(e));
  }
  uint8_t st[TCUDA_RNG_STATE_SIZE];
  if (tcuda_get_rng_state(-1, st)) return cli_fail("rand");
  *seed = *offset = 0;
  for (int i = 0; i < 8; i++) {
    *seed |= (uint64_t)st[i] << (8 * i);
    *offset |= (uint64_t)st[8 + i] << (8 * i);
  }
  return 0;
}

/* torch's default seed: 64 OS random bits limited to 53. */
static int nondeterministic_seed(uint64_t *seed) {
  uint64_t r;
  if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
    return cli_error(&CMD, "no OS random bits for a default seed (%s): give --seed", strerror(errno));
  *seed = r & 0x1FFFFFFFFFFFFFull;
  return 0;
}

int cmd_rand(int argc, char **argv) {
  rand_args a = {.req = TCUDA_RAND_REQUEST_INIT, .device = -1};
  int rc = 0;
  if (!parse_args(argc, argv, &a, &rc)) return rc;

  int avail = tcuda_is_available();
  int on_gpu = avail && !a.cpu;
  if (!avail && a.device >= 0)
    return cli_error(&CMD, "--device %d needs a GPU: CUDA is not available (%s); without --device the CPU makes "
                     "the numbers", a.device, tcuda_unavailable_reason());
  int sms = a.sms, tpsm = a.tpsm, dev = a.device;
  if (avail) { /* the device's geometry: the GPU path's, and the CPU path's default */
    if (tcuda_init()) return cli_fail("rand");
    if (dev >= tcuda_device_count())
      return cli_usage_error(&CMD, "--device %d: there %s %d device%s", dev, tcuda_device_count() == 1 ? "is" : "are",
                             tcuda_device_count(), tcuda_device_count() == 1 ? "" : "s");
    if (dev >= 0 ? tcuda_set_device(dev) : tcuda_current_device(&dev)) return cli_fail("rand");
    tcuda_device_properties_t p = TCUDA_DEVICE_PROPERTIES_INIT;
    if (tcuda_get_device_properties(dev, &p)) return cli_fail("rand");
    if (on_gpu && ((sms && sms != p.multi_processor_count) || (tpsm && tpsm != p.max_threads_per_multi_processor)))
      return cli_usage_error(&CMD,
                             "--sm-count/--threads-per-sm %d x %d do not match device %d (%s: %d SMs x %d threads): "
                             "drop them to use the device's, or add --cpu to compute on the CPU for them",
                             sms ? sms : p.multi_processor_count, tpsm ? tpsm : p.max_threads_per_multi_processor,
                             dev, p.name, p.multi_processor_count, p.max_threads_per_multi_processor);
    if (!sms) sms = p.multi_processor_count;
    if (!tpsm) tpsm = p.max_threads_per_multi_processor;
  } else {
    if (!sms) sms = H200_SMS;
    if (!tpsm) tpsm = H200_THREADS_PER_SM;
  }
  if (!on_gpu && a.req.kind == TCUDA_RAND_NORMAL && a.n) {
    const char *why = "normal needs the GPU's own sincosf and logf, which the CPU does not reproduce bit for bit";
    if (a.cpu) return cli_usage_error(&CMD, "--cpu: %s", why);
    return cli_error(&CMD, "%s, and CUDA is not available (%s)", why, tcuda_unavailable_reason());
  }

  size_t bytes = (size_t)a.n * tcuda_dtype_size(a.req.dtype);
  unsigned char *h = bytes ? malloc(bytes) : NULL;
  if (bytes && !h) return cli_error(&CMD, "cannot allocate %zu bytes for %" PRIu64 " values", bytes, a.n);
  uint64_t seed = a.seed, offset = a.offset;
  if (on_gpu) {
    rc = run_gpu(&a, h, bytes, &seed, &offset);
  } else {
    if (!a.have_seed) rc = nondeterministic_seed(&seed);
    if (!rc && tcuda_rand_fill_host(&a.req, seed, &offset, sms, tpsm, h, a.n)) rc = cli_fail("rand");
  }
  if (rc) { free(h); return rc; }
  if (a.print_state) {
    if (on_gpu) fprintf(stderr, "device=gpu:%d sm_count=%d threads_per_sm=%d\n", dev, sms, tpsm);
    else fprintf(stderr, "device=cpu sm_count=%d threads_per_sm=%d\n", sms, tpsm);
    fprintf(stderr, "seed=%" PRIu64 " offset=%" PRIu64 "\n", seed, offset);
  }
  tc_outfile of = {0}; /* a temporary, renamed once complete: a failed write leaves no truncated file */
  if (a.out_path && tc_outfile_open(&of, a.out_path)) {
    free(h);
    return cli_error(&CMD, "cannot open %s: %s", a.out_path, strerror(errno));
  }
  FILE *f = a.out_path ? of.f : stdout;
  if (bytes && fwrite(h, 1, bytes, f) != bytes) rc = CLI_FAIL;
  if (a.out_path ? tc_outfile_commit(&of) != 0 : fflush(f) != 0) rc = CLI_FAIL;
  if (rc) cli_error(&CMD, "write failed: %s", strerror(errno));
  free(h);
  return rc;
}
