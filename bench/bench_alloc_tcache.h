/* bench_alloc's (j): thread_cache:N against the default mode. Included by
 * bench_alloc.c just before main (it uses that file's patterns, children
 * and row printers, which are static there).
 *
 * The mode is a process-wide setting, so each variant runs in a fresh
 * child (this binary --tcache N, N = 0 for the default mode) that prints
 *   TCACHE pairs NS_1THR NS_8THR_ONE_STREAM NS_8THR_8STREAMS
 *   TCACHE peaks MIXED_PEAK_RESERVED CHURN_PEAK_RESERVED
 * or TCACHE NA REASON. Rounds alternate which variant goes first.
 * --tcache-sim N prints the policy-alone pairs on the simulated device
 * (no GPU) for the default mode and for thread_cache:N. */
#define TCACHE_N 16

static int tcache_child(const char *variant) {
  unsetenv("PYTORCH_CUDA_ALLOC_CONF");
  unsetenv("PYTORCH_ALLOC_CONF");
  char conf[64];
  snprintf(conf, sizeof conf, "thread_cache:%d", atoi(variant));
  setenv("TCUDA_ALLOC_CONF", conf, 1);
  alarm(60);
  if (tcuda_init() != TCUDA_SUCCESS) {
    printf("TCACHE NA tcuda_init: %s\n", tcuda_last_error());
    return 0;
  }
  cudaStream_t streams[NTHREADS];
  for (int i = 0; i < NTHREADS; i++)
    if (cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking) != cudaSuccess) {
      printf("TCACHE NA cudaStreamCreate failed\n");
      return 0;
    }
  if (mix_seq_make(&g_mix, g_iters_mix_warm + 5 * g_iters_mix)) {
    printf("TCACHE NA host out of memory\n");
    return 0;
  }
  bench_alloc *A = &g_allocs[A_TCUDA];
  A->available = 1;
  { /* the clocks up first, as in policy_child */
    volatile uint64_t sink = 0;
    for (uint64_t t0 = now_ns(); now_ns() - t0 < 100000000ull;) sink += t0;
  }
  double one = pattern_pairs(A, NULL, g_iters_pair);
  double shared = pattern_threads(A, NULL, g_iters_thr);
  double own = pattern_threads(A, (void *const *)streams, g_iters_thr);
  printf("TCACHE pairs %.6g %.6g %.6g\n", one, shared, own);
  g_failed = 0;
  tcuda_empty_cache();
  tcuda_reset_peak_memory_stats(0);
  tcuda_memory_stats_t s0, s1;
  double ns = mixed_timed(A, &s0, &s1);
  long long mixed_peak = isnan(ns) ? -1 : (long long)s1.reserved_bytes[TCUDA_STAT_ALL].peak;
  tcuda_empty_cache();
  tcuda_reset_peak_memory_stats(0);
  churn_allocator ca = {churn_tc_alloc, churn_tc_free, tc_stats0};
  ns = churn_timed(&ca, g_ch_warm, 5, g_ch_steps, &s0, &s1);
  long long churn_peak = isnan(ns) ? -1 : (long long)s1.reserved_bytes[TCUDA_STAT_ALL].peak;
  printf("TCACHE peaks %lld %lld\n", mixed_peak, churn_peak);
  return 0;
}

/* figures of one child: 0 ok, -1 with why set */
static int tcache_variant(const char *self, const char *variant, double out[5], char *why, size_t n) {
  char buf[4096];
  int st, got = 0;
  long long mp = -1, cp = -1;
  if (run_child(self, "--tcache", variant, buf, sizeof buf, &st, why, n)) return -1;
  for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
    if (!strncmp(line, "TCACHE NA ", 10)) {
      snprintf(why, n, "%s", line + 10);
      return -1;
    }
    got |= (sscanf(line, "TCACHE pairs %lf %lf %lf", &out[0], &out[1], &out[2]) == 3);
    got |= (sscanf(line, "TCACHE peaks %lld %lld", &mp, &cp) == 2) << 1;
  }
  if (got != 3) {
    child_died(why, n, st);
    return -1;
  }
  out[3] = mp < 0 ? NAN : (double)mp / MIB;
  out[4] = cp < 0 ? NAN : (double)cp / MIB;
  return 0;
}

static void tcache_compare(const char *self) {
  enum { ROUNDS = 3 };
  char on[16], why[256] = "";
  snprintf(on, sizeof on, "%d", TCACHE_N);
  const char *names[2] = {on, "0"};
  double r[2][ROUNDS][5], med[2][5];
  for (int k = 0; k < ROUNDS; k++)
    for (int j = 0; j < 2; j++) {
      int v = k % 2 ? 1 - j : j;
      if (tcache_variant(self, names[v], r[v][k], why, sizeof why)) {
        printf("bench_alloc: thread_cache comparison: NA (thread_cache:%s: %s)\n", names[v], why);
        return;
      }
    }
  for (int v = 0; v < 2; v++)
    for (int p = 0; p < 5; p++) {
      double x[ROUNDS];
      for (int k = 0; k < ROUNDS; k++) x[k] = r[v][k][p];
      med[v][p] = median(x, ROUNDS);
    }
  char target[160];
  static const char *metric[3] = {"tcache_pair_4KiB_1thr", "tcache_pair_4KiB_8thr_default_stream",
                                  "tcache_pair_4KiB_8thr_8streams"};
  for (int p = 0; p < 3; p++) {
    if (p == 0) snprintf(target, sizeof target, "<=ref*1.05 (ref: the default mode)");
    else snprintf(target, sizeof target, "<=%.4g (thread_cache 1-thread pair)", med[0][0]);
    char tv[32], rv[32];
    fmt(tv, sizeof tv, med[0][p]);
    fmt(rv, sizeof rv, med[1][p]);
    printf("RESULT name=alloc metric=%s tcuda=%s ref_name=tcuda-default-mode ref=%s unit=ns target=%s\n", metric[p],
           tv, rv, target);
  }
  /* one thread runs mixed and churn: at most N blocks of 1 MiB more */
  snprintf(target, sizeof target, "<=%d (N x 1 thread x 1 MiB)", TCACHE_N);
  static const char *peak[2] = {"tcache_mixed_extra_peak_reserved", "tcache_churn_extra_peak_reserved"};
  for (int p = 0; p < 2; p++) {
    double worst = NAN;
    for (int k = 0; k < ROUNDS; k++) {
      double d = r[0][k][3 + p] - r[1][k][3 + p];
      if (isnan(worst) || d > worst) worst = d;
    }
    printf("RESULT name=alloc metric=%s tcuda=%.4g ref_name=- ref=NA unit=MiB target=%s\n", peak[p], worst, target);
  }
  fflush(stdout);
}

/* CPU only: the policy alone on the simulated device, default and mode. */
static int tcache_sim(const char *n) {
  char conf[64];
  snprintf(conf, sizeof conf, "thread_cache:%d", atoi(n));
  const char *confs[2] = {"", conf};
  for (int v = 0; v < 2; v++) {
    tc_sim_options so = {0, TC_SIM_VA_DRIVER, NULL, 0};
    tc_backend *be = NULL;
    tc_alloc_config cfg;
    if (tc_alloc_config_parse(confs[v], &cfg) || tc_backend_sim_create(&so, &be) ||
        tc_alloc_create(0, be, &cfg, TC_H200_CAPACITY, &g_sim)) {
      fprintf(stderr, "bench_alloc: --tcache-sim: %s\n", tcuda_last_error());
      return 1;
    }
    printf("%-16s sim pair 1 thread %.4g ns, 8 threads one stream %.4g ns, 8 threads 8 streams %.4g ns (wall)\n",
           v ? conf : "default", sim_threads(1, 0, scaled(2000000)), sim_threads(NTHREADS, 0, scaled(1000000)),
           sim_threads(NTHREADS, 1, scaled(1000000)));
    tc_alloc_destroy(g_sim);
    tc_backend_sim_destroy(be);
  }
  return 0;
}
