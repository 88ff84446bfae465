/* bench_whatif: the what-if engine (tcuda whatif) on a PyTorch memory
 * snapshot, on the CPU alone (no GPU needed).
 *
 *   load_s          read the file, parse the pickle (parse_s of it) and
 *                   turn the history into ops (tc_tsnap_load)       seconds
 *   replay_*        ONE replay of the whole history, one thread, under
 *                   one config: entries of the trace per second
 *                   (best of BENCH_WHATIF_REPS). This is tc_tsnap_run, the
 *                   unit the sweep is made of; setup (a fresh simulated
 *                   device and allocator) is included, loading is not.
 *                   replay_first: the sweep's first replay (the recorded
 *                   config on torch's addresses, inferring empty_cache
 *                   calls; run once, it writes the ops' flags).
 *                   replay_recorded: the recorded row (torch's addresses).
 *                   replay_default, replay_expandable, replay_msplit128:
 *                   a row of that config with no limit, as the sweep
 *                   runs it; a min_limit probe is the same with a limit,
 *                   ending at its first OOM.
 *   sweep_s         tcuda_whatif_buffer with the default sweep and the
 *                   min_limit search, BENCH_WHATIF_THREADS threads (0, the
 *                   default: one per CPU), wall seconds, parse included
 *   sweep_replays   the replays that sweep made: the first one, one per
 *                   row, and each row's min_limit_replays
 *   sweep_cpu_s     the CPU seconds of all its threads (info)
 * A shared machine's wall clock counts other programs too: each replay's
 * comment line gives its thread's CPU seconds, sweep_cpu_s the sweep's.
 *
 * Usage: bench_whatif [SNAPSHOT]. Without one: $BENCH_WHATIF_SNAPSHOT, else
 * the committed tests/data/whatif/kv_decoder.pickle. bench/whatif_gen.py
 * writes a long history (1M entries) for the targets, which are set for
 * such a history; for a shorter one the rows are info. BENCH_WHATIF_SWEEP=0
 * skips the sweep. RESULT lines: see bench/run-gpu. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "tcuda.h"
#include "replay/pyval.h"
#include "replay/torchsnap.h"

#ifndef BENCH_WHATIF_DEFAULT
#define BENCH_WHATIF_DEFAULT "tests/data/whatif/kv_decoder.pickle"
#endif
#define TARGET_ENTRIES 900000 /* the targets are for a history of about 1M entries */

static const char *F = "bench_whatif";

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU seconds of this thread or process: on a shared machine, what a replay
 * cost when the wall clock also counts other programs' time */
static double cpu_s(clockid_t which) {
  struct timespec ts;
  clock_gettime(which, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_int(const char *name, int def) {
  const char *v = getenv(name);
  return v && *v ? atoi(v) : def;
}

static void die(const char *what) {
  fprintf(stderr, "bench_whatif: %s: %s\n", what, tcuda_last_error());
  exit(1);
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 20, n = 0, got;
  char *p = malloc(cap);
  while (p && (got = fread(p + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *q = realloc(p, cap *= 2);
      if (!q) { free(p); p = NULL; }
      else p = q;
    }
  }
  fclose(f);
  *len = n;
  return p;
}

static void result(const char *metric, double v, const char *unit, const char *target) {
  printf("RESULT name=whatif metric=%s tcuda=%.6g ref_name=- ref=NA unit=%s target=%s\n", metric, v, unit, target);
  fflush(stdout);
}

/* best-of-reps wall seconds of one replay; *cpu: the thread's CPU seconds
 * in that replay */
static double time_replay(tc_tsnap *h, const tc_tsrun_opts *o, int reps, tc_tsrun_result *keep, double *cpu) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    tc_tsrun_result res;
    double c0 = cpu_s(CLOCK_THREAD_CPUTIME_ID), t0 = now_s();
    if (tc_tsnap_run(F, h, o, &res)) die("tc_tsnap_run");
    double t = now_s() - t0;
    if (t < best) {
      best = t;
      *cpu = cpu_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    if (keep && r == 0) *keep = res;
    else tc_tsrun_result_free(&res);
  }
  return best;
}

/* the sum of an integer key's values over the document, and its count */
static long long sum_key(const char *json, const char *key, int *count) {
  long long sum = 0;
  size_t kl = strlen(key);
  *count = 0;
  for (const char *p = json; (p = strstr(p, key)); p += kl) {
    sum += atoll(p + kl);
    ++*count;
  }
  return sum;
}

static double max_rss_mib(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : getenv("BENCH_WHATIF_SNAPSHOT");
  if (!path || !*path) path = BENCH_WHATIF_DEFAULT;
  int reps = env_int("BENCH_WHATIF_REPS", 3);
  if (reps < 1) reps = 1;
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;

  /* ---- load ---- */
  double t0 = now_s();
  size_t len = 0;
  char *data = read_all(path, &len);
  if (!data) {
    fprintf(stderr, "bench_whatif: cannot read %s\n", path);
    return 1;
  }
  double t_read = now_s() - t0;
  double t_parse = 1e30, t_load = 1e30;
  for (int r = 0; r < reps; r++) {
    tc_arena *ar = tc_arena_create();
    tc_pv *root = NULL;
    t0 = now_s();
    if (!ar || tc_pv_parse(F, data, len, NULL, ar, &root)) die("tc_pv_parse");
    double t = now_s() - t0;
    if (t < t_parse) t_parse = t;
    tc_arena_destroy(ar);
  }
  tc_tsnap h;
  for (int r = 0; r < reps; r++) {
    t0 = now_s();
    if (tc_tsnap_load(F, data, len, -1, NULL, &h)) die("tc_tsnap_load");
    double t = now_s() - t0;
    if (t < t_load) t_load = t;
    if (r + 1 < reps) tc_tsnap_free(&h);
  }
  size_t entries = h.num_entries;
  int big = entries >= TARGET_ENTRIES;
  char info[256];
  snprintf(info, sizeof info, "info (%s: %zu entries, %zu ops, %zu requests, %zu MiB)", base, entries, h.num_ops,
           h.num_requests, len >> 20);
  result("entries", (double)entries, "entries", info);
  result("read_s", t_read, "s", "info (the file into memory)");
  result("parse_s", t_parse, "s", "info (the pickle into a value tree, best of reps)");
  result("load_s", t_load, "s", "info (parse + the history into ops, best of reps; read_s not included)");
  result("load_entries_per_s", (double)entries / t_load, "entries/s", "info");

  /* ---- one replay per config, one thread ---- */
  tc_tsrun_result first;
  tc_tsrun_opts eo = {.exact = 1};
  double cpu;
  double t_first = time_replay(&h, &eo, 1, &first, &cpu);
  const char *tgt = big ? ">=5000000" : "info (the target is for a 1M-entry history)";
  result("replay_first", (double)entries / t_first, "entries/s", tgt);
  printf("# recorded config, inferring: %.3f s per replay (%.3f s CPU)\n", t_first, cpu);
  if (first.diverged)
    printf("# note: the recorded replay diverged from torch's segments at %zu places\n", first.diverged);
  tc_tsrun_result_free(&first);
  tc_tsrun_opts ro = {.exact = 2};
  double t_rec = time_replay(&h, &ro, reps, NULL, &cpu);
  result("replay_recorded", (double)entries / t_rec, "entries/s", tgt);
  printf("# recorded config: %.3f s per replay (%.3f s CPU)\n", t_rec, cpu);
  static const struct {
    const char *metric, *conf;
  } rows[] = {{"replay_default", ""},
              {"replay_expandable", "expandable_segments:True"},
              {"replay_msplit128", "max_split_size_mb:128"}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    tc_alloc_config cfg;
    tc_alloc_config_default(&cfg);
    if (tc_alloc_config_parse_named(F, rows[i].conf, &cfg)) die(rows[i].conf);
    tc_tsrun_opts o = {.cfg = &cfg};
    tc_tsrun_result res;
    double t = time_replay(&h, &o, reps, &res, &cpu);
    result(rows[i].metric, (double)entries / t, "entries/s", tgt);
    printf("# %s: %.3f s per replay (%.3f s CPU), peak reserved %.3f GiB, peak allocated %.3f GiB, %llu segment calls\n",
           rows[i].conf[0] ? rows[i].conf : "(torch default)", t, cpu, (double)res.peak_reserved / (1 << 30),
           (double)res.peak_allocated / (1 << 30), (unsigned long long)res.segment_calls);
    tc_tsrun_result_free(&res);
  }
  tc_tsnap_free(&h);
  result("max_rss_MiB", max_rss_mib(), "MiB", "info (the file, one parse tree at a time, the ops)");

  /* ---- the default sweep with min_limit ---- */
  if (env_int("BENCH_WHATIF_SWEEP", 1)) {
    tcuda_whatif_options_t wo = TCUDA_WHATIF_OPTIONS_INIT;
    wo.threads = env_int("BENCH_WHATIF_THREADS", 0);
    char *json = NULL;
    double c0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
    t0 = now_s();
    if (tcuda_whatif_buffer(data, len, &wo, &json)) die("tcuda_whatif_buffer");
    double t_sweep = now_s() - t0, c_sweep = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    int nrows = 0;
    long long probes = sum_key(json, "\"min_limit_replays\": ", &nrows);
    long long replays = 1 + nrows + probes;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = wo.threads ? wo.threads : (int)(cpus > 0 ? cpus : 1);
    char t2[160];
    snprintf(t2, sizeof t2, "%s", big ? "<=30" : "info (the target is for a 1M-entry history)");
    result("sweep_s", t_sweep, "s", t2);
    snprintf(t2, sizeof t2, "info (%d rows, %d threads on %ld CPUs)", nrows, threads, cpus);
    result("sweep_replays", (double)replays, "replays", t2);
    result("sweep_cpu_s", c_sweep, "s", "info (CPU seconds of all threads; on an idle machine sweep_s is about this / threads)");
    result("sweep_cpu_s_per_replay", c_sweep / (double)replays, "s",
           "info (min_limit probes end at their first OOM)");
    const char *rec = strstr(json, "\"recommended\": ");
    if (rec) {
      const char *end = strchr(rec, '\n');
      printf("# %.*s\n", end ? (int)(end - rec) : 200, rec);
    }
    if (getenv("BENCH_WHATIF_JSON")) {
      FILE *f = fopen(getenv("BENCH_WHATIF_JSON"), "w");
      if (f) {
        fputs(json, f);
        fclose(f);
      }
    }
    tcuda_string_free(json);
  }
  free(data);
  return 0;
}
