/* bench_frag: fragmentation on every workload of the compact policy's test
 * set (docs/performance.md, "The compact policy"):
 * peak reserved and peak allocated bytes for
 *   torch default      PyTorch's caching allocator (libc10_cuda, through
 *                      bench/c10_alloc_shim.cpp), no settings;
 *   torch best         the same under each of a few configs, the lowest
 *                      peak reserved (default included) and which won;
 *   cudaMallocAsync    a private pool that keeps everything (release
 *                      threshold UINT64_MAX): ReservedMemHigh / UsedMemHigh;
 *   tcuda              tcuda_malloc_on / tcuda_free, no config;
 *   tcuda compact      the same under policy:compact;
 * and whether compact stays within max(1.10 P, P + 4 MiB), P = the peak
 * allocated under torch default.
 *
 * Workloads: every tests/data/torch/NAME.trace and tests/data/whatif/NAME.pickle
 * (turned into traces by scripts/snapshot_to_trace.py in a temporary folder), the
 * loop of bench_alloc's fragmentation figure (bench_alloc --frag-trace), or
 * the files named on the command line. A trace replays in order: 'a'
 * allocates on its stream, 'f' frees, 'e' empties the cache; 'c' and 'r'
 * are ignored, so peaks cover the whole run. A request that fails for lack
 * of memory is counted (OOM) and its later free skipped.
 *
 * Each (workload, allocator) pair runs in a fresh child process (this
 * binary, --child), several at once: peaks are per process. Without a GPU
 * (or with --sim) the tcuda columns come from the simulated device
 * (tcuda_replay_string), the others are NA, and the RESULT lines are
 * named frag_sim.
 *
 * usage: bench_frag [--sim] [--jobs N] [FILE.trace|FILE.pickle ...]
 * Environment: BENCH_FRAG_JOBS (children at once, default 8),
 * BENCH_FRAG_TORCH_CONFIGS (torch-best candidates, ';'-separated),
 * BENCH_FRAG_CHILD_TIMEOUT (seconds, default 150), BENCH_PYTHON (python3).
 * Prints a markdown table and RESULT lines (format: bench/run-gpu). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tcuda.h"
#include "frag.h"

#ifndef BENCH_FRAG_SOURCE_DIR
#define BENCH_FRAG_SOURCE_DIR "."
#endif

extern char **environ;

#define MIB (1024.0 * 1024.0)

/* ------------------------------------------------------------------ */
/* Parent: run a command, keep the tail of its stdout+stderr. */
static int run_capture(char *const argv[], int search_path, char *out, size_t outlen, int *status) {
  int fds[2];
  out[0] = 0;
  if (pipe(fds)) {
    snprintf(out, outlen, "pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = search_path ? posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ)
                       : posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc) {
    close(fds[0]);
    snprintf(out, outlen, "cannot run %s: %s", argv[0], strerror(rc));
    return -1;
  }
  size_t len = 0;
  for (;;) {
    if (len == outlen - 1) { /* keep the newer half */
      size_t keep = (outlen - 1) / 2;
      memmove(out, out + len - keep, keep);
      len = keep;
    }
    ssize_t r = read(fds[0], out + len, outlen - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  out[len] = 0;
  close(fds[0]);
  while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  return 0;
}

static void last_line(const char *text, char *dst, size_t n) {
  const char *end = text + strlen(text);
  while (end > text && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ')) end--;
  const char *start = end;
  while (start > text && start[-1] != '\n') start--;
  snprintf(dst, n, "%.*s", (int)(end - start), start);
}

/* ------------------------------------------------------------------ */
/* The table's allocators. */
enum { K_TORCH, K_ASYNC, K_TCUDA };
typedef struct variant {
  const char *label;
  int kind;
  const char *config;
} variant;

#define MAX_VARIANTS 24
static variant g_var[MAX_VARIANTS];
static int g_nvar;
static int V_TORCH = -1, V_ASYNC = -1, V_TCUDA = -1, V_COMPACT = -1, V_TORCH_FIRST = -1, V_TORCH_END = -1;

static const char *const DEFAULT_TORCH_CONFIGS[] = {
    "expandable_segments:True", "max_split_size_mb:64", "max_split_size_mb:128", "roundup_power2_divisions:4",
    "expandable_segments:True,roundup_power2_divisions:4",
};

static void add_variant(const char *label, int kind, const char *config) {
  if (g_nvar < MAX_VARIANTS) g_var[g_nvar++] = (variant){label, kind, config};
}

static void variants_init(void) {
  V_TORCH = g_nvar;
  add_variant("torch default", K_TORCH, "");
  V_TORCH_FIRST = g_nvar;
  const char *env = getenv("BENCH_FRAG_TORCH_CONFIGS");
  if (env && *env) {
    char *copy = strdup(env), *save = NULL;
    for (char *tok = copy ? strtok_r(copy, ";", &save) : NULL; tok; tok = strtok_r(NULL, ";", &save))
      add_variant(tok, K_TORCH, tok); /* copy lives for the run */
  } else {
    for (size_t i = 0; i < sizeof DEFAULT_TORCH_CONFIGS / sizeof *DEFAULT_TORCH_CONFIGS; i++)
      add_variant(DEFAULT_TORCH_CONFIGS[i], K_TORCH, DEFAULT_TORCH_CONFIGS[i]);
  }
  V_TORCH_END = g_nvar;
  V_ASYNC = g_nvar;
  add_variant("cudaMallocAsync", K_ASYNC, "");
  V_TCUDA = g_nvar;
  add_variant("tcuda", K_TCUDA, "");
  V_COMPACT = g_nvar;
  add_variant("tcuda compact", K_TCUDA, "policy:compact");
}

/* One figure: a replay's peaks, or why there is none. */
typedef struct figure {
  int ok;
  long long reserved, allocated, ooms;
  char why[256];
} figure;

typedef struct workload {
  char name[160];
  char path[4096];
  char err[512];   /* the workload could not be read: every cell NA */
  ftrace t;
  figure gpu[MAX_VARIANTS];
  figure sim_tcuda, sim_compact;
} workload;

static workload *g_wl;
static int g_nwl, g_capwl;
static char g_self[4096];

static workload *add_workload(const char *name, const char *path) {
  if (g_nwl == g_capwl) {
    int nc = g_capwl ? 2 * g_capwl : 64;
    workload *n = realloc(g_wl, (size_t)nc * sizeof *n);
    if (!n) return NULL;
    g_wl = n;
    g_capwl = nc;
  }
  workload *w = &g_wl[g_nwl++];
  memset(w, 0, sizeof *w);
  snprintf(w->name, sizeof w->name, "%s", name);
  snprintf(w->path, sizeof w->path, "%s", path);
  return w;
}

/* ------------------------------------------------------------------ */
/* tcuda on the simulated device: the trace as parsed, 'c' at the end. */
static int json_int(const char *json, const char *key, long long *out) {
  char pat[128];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  if (!p) return -1;
  p = frag_skip_blank(p + strlen(pat));
  char *end;
  errno = 0;
  long long v = strtoll(p, &end, 10);
  if (end == p || errno) return -1;
  *out = v;
  return 0;
}

static void run_sim(const ftrace *t, const char *config, figure *f) {
  memset(f, 0, sizeof *f);
  size_t cap = t->n * 48 + 16;
  char *text = malloc(cap), *p = text;
  if (!text) {
    snprintf(f->why, sizeof f->why, "out of host memory");
    return;
  }
  for (size_t i = 0; i < t->n; i++) {
    const fop *o = &t->ops[i];
    if (o->kind == OP_ALLOC)
      p += sprintf(p, "a %u %llu %u\n", o->slot, (unsigned long long)o->size, (unsigned)o->stream);
    else if (o->kind == OP_FREE)
      p += sprintf(p, "f %u\n", o->slot);
    else
      p += sprintf(p, "e\n");
  }
  strcpy(p, "c\n");
  tcuda_replay_options_t opt = TCUDA_REPLAY_OPTIONS_INIT;
  opt.simulate = 1;
  opt.config = config;
  char *json = NULL;
  tcuda_status s = tcuda_replay_string(text, &opt, &json);
  free(text);
  if (s != TCUDA_SUCCESS) {
    snprintf(f->why, sizeof f->why, "%s", tcuda_last_error());
    return;
  }
  if (json_int(json, "reserved_bytes.all.peak", &f->reserved) ||
      json_int(json, "allocated_bytes.all.peak", &f->allocated) || json_int(json, "num_ooms", &f->ooms))
    snprintf(f->why, sizeof f->why, "replay output without reserved/allocated peaks");
  else
    f->ok = 1;
  tcuda_string_free(json);
}

/* ------------------------------------------------------------------ */
/* Children, several at once. Each job's device memory is estimated from
 * the simulated replay; a job starts only while the running ones' estimates
 * leave room for it (or when nothing runs), so that no child meets an OOM
 * that it would not meet alone. Big jobs go first. */
typedef struct job {
  int w, v;
  double est; /* bytes */
  int state;  /* 0 waiting, 1 running, 2 done */
} job;
static job *g_jobs;
static int g_njobs, g_running;
static double g_budget, g_in_use;
static pthread_mutex_t g_job_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_job_cond = PTHREAD_COND_INITIALIZER;

static void run_job(const job *j) {
  workload *w = &g_wl[j->w];
  const variant *v = &g_var[j->v];
  figure *f = &w->gpu[j->v];
  char *argv[] = {g_self, "--child",
                  v->kind == K_TORCH ? "torch" : v->kind == K_ASYNC ? "async" : "tcuda",
                  (char *)v->config, w->path, NULL};
  char out[8192];
  int st = 0;
  if (run_capture(argv, 0, out, sizeof out, &st)) {
    snprintf(f->why, sizeof f->why, "%.250s", out);
    return;
  }
  const char *line = NULL;
  for (const char *p = out; (p = strstr(p, "FRAG ")); p += 5)
    if (p == out || p[-1] == '\n') line = p;
  if (line && sscanf(line, "FRAG %lld %lld %lld", &f->reserved, &f->allocated, &f->ooms) == 3) {
    f->ok = 1;
    return;
  }
  if (line && !strncmp(line, "FRAG NA ", 8)) {
    const char *nl = strchr(line + 8, '\n');
    snprintf(f->why, sizeof f->why, "%.*s", (int)(nl ? nl - (line + 8) : (long)strlen(line + 8)), line + 8);
    return;
  }
  char tail[200];
  last_line(out, tail, sizeof tail);
  if (WIFSIGNALED(st))
    snprintf(f->why, sizeof f->why, "child killed by signal %d%s%s%s", WTERMSIG(st),
             WTERMSIG(st) == SIGALRM ? " (timeout)" : "", *tail ? ": " : "", tail);
  else
    snprintf(f->why, sizeof f->why, "child exited %d without a result%s%s", WIFEXITED(st) ? WEXITSTATUS(st) : -1,
             *tail ? ": " : "", tail);
}

static void *worker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_job_lock);
  for (;;) {
    int pick = -1, waiting = 0;
    for (int i = 0; i < g_njobs; i++) {
      if (g_jobs[i].state) continue;
      waiting = 1;
      if (g_running == 0 || g_in_use + g_jobs[i].est <= g_budget) {
        pick = i;
        break;
      }
    }
    if (!waiting) break;
    if (pick < 0) {
      pthread_cond_wait(&g_job_cond, &g_job_lock);
      continue;
    }
    job *j = &g_jobs[pick];
    j->state = 1;
    g_running++;
    g_in_use += j->est;
    pthread_mutex_unlock(&g_job_lock);
    run_job(j);
    pthread_mutex_lock(&g_job_lock);
    j->state = 2;
    g_running--;
    g_in_use -= j->est;
    pthread_cond_broadcast(&g_job_cond);
  }
  pthread_mutex_unlock(&g_job_lock);
  return NULL;
}

static int cmp_job(const void *a, const void *b) {
  const job *x = a, *y = b;
  if (x->est != y->est) return x->est < y->est ? 1 : -1;
  return x->w != y->w ? x->w - y->w : x->v - y->v;
}

static void run_jobs(int nthreads, double budget) {
  pthread_t th[64];
  if (nthreads > 64) nthreads = 64;
  if (nthreads < 1) nthreads = 1;
  g_budget = budget;
  qsort(g_jobs, (size_t)g_njobs, sizeof *g_jobs, cmp_job);
  int started = 0;
  for (int i = 0; i < nthreads; i++)
    if (!pthread_create(&th[started], NULL, worker, NULL)) started++;
  if (!started) worker(NULL);
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
}

/* ------------------------------------------------------------------ */
/* Workloads */
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* sorted names in dir ending in ext (caller frees); NULL if dir cannot be read */
static char **list_dir(const char *dir, const char *ext, int *n) {
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) return NULL;
  int cap = 32;
  char **v = malloc((size_t)cap * sizeof *v);
  if (!v) {
    closedir(d);
    return NULL;
  }
  struct dirent *e;
  size_t el = strlen(ext);
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l <= el || strcmp(e->d_name + l - el, ext)) continue;
    if (*n == cap) {
      cap *= 2;
      char **nv = realloc(v, (size_t)cap * sizeof *v);
      if (!nv) break;
      v = nv;
    }
    v[(*n)++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(v, (size_t)*n, sizeof *v, cmp_str);
  return v;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

static char g_tmpdir[1024];

static void make_tmpdir(void) {
  if (g_tmpdir[0]) return;
  const char *t = getenv("TMPDIR");
  snprintf(g_tmpdir, sizeof g_tmpdir, "%.900s/bench_frag.XXXXXX", t && *t ? t : "/tmp");
  if (!mkdtemp(g_tmpdir)) g_tmpdir[0] = 0;
}

static void remove_tmpdir(void) {
  if (!g_tmpdir[0]) return;
  DIR *d = opendir(g_tmpdir);
  if (d) {
    struct dirent *e;
    char p[8192];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", g_tmpdir, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(g_tmpdir);
}

/* A snapshot becomes a trace in the temporary folder (scripts/snapshot_to_trace.py). */
static void add_snapshot(const char *path) {
  char name[160], stem[128];
  snprintf(stem, sizeof stem, "%s", base_name(path));
  char *dot = strrchr(stem, '.');
  if (dot) *dot = 0;
  snprintf(name, sizeof name, "snap/%s", stem);
  workload *w = add_workload(name, path);
  if (!w) return;
  make_tmpdir();
  if (!g_tmpdir[0]) {
    snprintf(w->err, sizeof w->err, "%s: no temporary folder for its trace: %s", path, strerror(errno));
    return;
  }
  char script[4096], out[4096];
  snprintf(script, sizeof script, "%s/scripts/snapshot_to_trace.py", BENCH_FRAG_SOURCE_DIR);
  snprintf(w->path, sizeof w->path, "%s/%d_%s.trace", g_tmpdir, g_nwl, stem);
  const char *py = getenv("BENCH_PYTHON");
  char *argv[] = {(char *)(py && *py ? py : "python3"), script, (char *)path, "-o", w->path, NULL};
  int st = 0;
  if (run_capture(argv, 1, out, sizeof out, &st) || !WIFEXITED(st) || WEXITSTATUS(st)) {
    char tail[400];
    last_line(out, tail, sizeof tail);
    snprintf(w->err, sizeof w->err, "%s", *tail ? tail : "snapshot_to_trace.py failed");
    if (!strstr(w->err, path)) snprintf(w->err, sizeof w->err, "%s: %s", path, *tail ? tail : "snapshot_to_trace.py failed");
  }
}

static void add_file(const char *path) {
  size_t l = strlen(path);
  if (l > 6 && !strcmp(path + l - 6, ".trace")) {
    char name[160];
    snprintf(name, sizeof name, "trace/%.*s", (int)(strlen(base_name(path)) - 6), base_name(path));
    add_workload(name, path);
  } else {
    add_snapshot(path); /* .pickle or .json snapshot; anything else fails with the script's message */
  }
}

/* bench_alloc's fragmentation loop, as bench_alloc --frag-trace writes it. */
static void add_bench_loop(void) {
  char dir[4096], alloc_bin[4096], out[8192];
  snprintf(dir, sizeof dir, "%s", g_self);
  char *slash = strrchr(dir, '/');
  if (!slash) return;
  *slash = 0;
  snprintf(alloc_bin, sizeof alloc_bin, "%.4000s/bench_alloc", dir);
  if (access(alloc_bin, X_OK)) return; /* not built: the row is left out */
  workload *w = add_workload("bench_frag_loop", "");
  if (!w) return;
  make_tmpdir();
  snprintf(w->path, sizeof w->path, "%s/bench_frag_loop.trace", g_tmpdir);
  char *argv[] = {alloc_bin, "--frag-trace", w->path, NULL};
  int st = 0;
  if (!g_tmpdir[0] || run_capture(argv, 0, out, sizeof out, &st) || !WIFEXITED(st) || WEXITSTATUS(st)) {
    char tail[300];
    last_line(out, tail, sizeof tail);
    snprintf(w->err, sizeof w->err, "bench_alloc --frag-trace: %s", *tail ? tail : "failed");
  }
}

static void add_test_set(void) {
  const char *sub[] = {"tests/data/torch", ".trace", "tests/data/whatif", ".pickle"};
  for (int k = 0; k < 4; k += 2) {
    char dir[4096], p[8192];
    snprintf(dir, sizeof dir, "%s/%s", BENCH_FRAG_SOURCE_DIR, sub[k]);
    int n = 0;
    char **names = list_dir(dir, sub[k + 1], &n);
    if (!names) {
      workload *w = add_workload(sub[k], dir);
      if (w) snprintf(w->err, sizeof w->err, "%.400s: %s", dir, strerror(errno));
      continue;
    }
    for (int i = 0; i < n; i++) {
      snprintf(p, sizeof p, "%s/%s", dir, names[i]);
      add_file(p);
      free(names[i]);
    }
    free(names);
  }
  add_bench_loop();
}

/* ------------------------------------------------------------------ */
/* Output */
#define MAX_NOTES 64
static char g_notes[MAX_NOTES][256];
static int g_nnotes;

static int note(const char *who, const char *why) {
  char text[256];
  snprintf(text, sizeof text, "%s: %s", who, why);
  for (int i = 0; i < g_nnotes; i++)
    if (!strcmp(g_notes[i], text)) return i + 1;
  if (g_nnotes == MAX_NOTES) return MAX_NOTES;
  snprintf(g_notes[g_nnotes++], sizeof g_notes[0], "%s", text);
  return g_nnotes;
}

static void cell_na(char *buf, size_t n, const char *who, const char *why) {
  snprintf(buf, n, "NA [%d]", note(who, why));
}

static void add_ooms(char *buf, size_t n, const figure *f) {
  if (f->ooms > 0) {
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, " (%lld OOM)", f->ooms);
  }
}

/* The figure a column shows: the GPU's, or the simulator's for tcuda without one. */
static const figure *shown(const workload *w, int v, int gpu) {
  if (gpu) return &w->gpu[v];
  if (v == V_TCUDA) return &w->sim_tcuda;
  if (v == V_COMPACT) return &w->sim_compact;
  return &w->gpu[v];
}

static double bound_of(long long p) {
  double a = 1.10 * (double)p, b = (double)p + 4.0 * MIB;
  return a > b ? a : b;
}

static void print_mib(const char *tag, double v) { printf(" %s=%.6f", tag, v / MIB); }

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "--child")) return frag_child_main(argv[2], argv[3], argv[4]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int force_sim = 0, jobs = ncpu > 0 && ncpu < 8 ? (int)ncpu : 8, nfiles = 0;
  const char *je = getenv("BENCH_FRAG_JOBS");
  if (je && atoi(je) > 0) jobs = atoi(je);
  char **files = calloc((size_t)argc, sizeof *files);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--sim")) {
      force_sim = 1;
    } else if (!strcmp(argv[i], "--jobs") && i + 1 < argc) {
      jobs = atoi(argv[++i]);
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: bench_frag [--sim] [--jobs N] [FILE.trace|FILE.pickle ...]\n");
      return 2;
    } else if (files) {
      files[nfiles++] = argv[i];
    }
  }
  ssize_t sl = readlink("/proc/self/exe", g_self, sizeof g_self - 1);
  if (sl > 0)
    g_self[sl] = 0;
  else
    snprintf(g_self, sizeof g_self, "%s", argv[0]);
  variants_init();

  if (nfiles)
    for (int i = 0; i < nfiles; i++) add_file(files[i]);
  else
    add_test_set();
  free(files);
  if (!g_nwl) {
    printf("bench_frag: no workloads\n");
    return 1;
  }

  int gpu = !force_sim && tcuda_device_count() > 0;
  char devname[256] = "";
  if (gpu) {
    tcuda_get_device_name(0, devname, sizeof devname);
    printf("bench_frag: %d workloads on %s, %d allocator variants each\n", g_nwl, devname, g_nvar);
  } else {
    printf("SKIPPED bench_frag: %s; the tcuda columns below come from the simulated device\n",
           force_sim ? "--sim" : tcuda_unavailable_reason());
  }

  /* parse, simulate, and queue the children */
  g_jobs = calloc((size_t)g_nwl * (size_t)g_nvar, sizeof *g_jobs);
  if (!g_jobs) {
    printf("bench_frag: out of host memory\n");
    return 1;
  }
  for (int i = 0; i < g_nwl; i++) {
    workload *w = &g_wl[i];
    if (!w->err[0]) frag_trace_parse(w->path, &w->t, w->err, sizeof w->err);
    if (w->err[0]) {
      printf("bench_frag: %s: %s\n", w->name, w->err);
      continue;
    }
    run_sim(&w->t, "", &w->sim_tcuda);
    run_sim(&w->t, g_var[V_COMPACT].config, &w->sim_compact);
    for (int v = 0; v < g_nvar; v++) {
      figure *f = &w->gpu[v];
      if (!gpu) {
        snprintf(f->why, sizeof f->why, "no GPU");
        continue;
      }
#ifndef BENCH_HAVE_C10
      if (g_var[v].kind == K_TORCH) {
        snprintf(f->why, sizeof f->why, "not built with PyTorch's c10 (torch not found at configure time)");
        continue;
      }
#endif
      /* the simulated torch-identical peak, with room for other configs and the context;
         unknown: -1, the whole budget (it runs alone) */
      const figure *e = &w->sim_tcuda;
      double est = e->ok ? 1.25 * (double)(e->reserved > e->allocated ? e->reserved : e->allocated) + 768.0 * MIB : -1;
      g_jobs[g_njobs++] = (job){i, v, est, 0};
    }
  }
  if (g_njobs) {
    size_t free_b = 0, total_b = 0;
    double budget = 64.0 * 1024 * MIB; /* if the device will not say */
    if (tcuda_mem_get_info(0, &free_b, &total_b) == TCUDA_SUCCESS && free_b > 4096 * MIB)
      budget = (double)free_b - 2048 * MIB;
    printf("bench_frag: %d children, up to %d at once within %.0f MiB of device memory\n", g_njobs, jobs,
           budget / MIB);
    for (int i = 0; i < g_njobs; i++)
      if (g_jobs[i].est < 0) g_jobs[i].est = budget;
    run_jobs(jobs, budget);
  }

  /* the table */
  printf("\n## Fragmentation per workload: peak reserved / peak allocated, MiB%s\n\n",
         gpu ? "" : " (tcuda: simulated device; no GPU)");
  printf("| workload | torch default: reserved / allocated = ratio | torch best: config, reserved | "
         "cudaMallocAsync: reserved / used | tcuda torch-identical | tcuda compact | bound max(1.10 P, P + 4 MiB) | "
         "compact |\n|---|---|---|---|---|---|---|---|\n");
  int within = 0, identical = 0, compared = 0, sim_differs = 0;
  for (int i = 0; i < g_nwl; i++) {
    workload *w = &g_wl[i];
    char c[8][320];
    for (int k = 0; k < 8; k++) c[k][0] = 0;
    if (w->err[0]) {
      int id = note(w->name, w->err);
      printf("| %s | NA [%d] | NA | NA | NA | NA | NA | FAIL |\n", w->name, id);
      continue;
    }
    const figure *td = shown(w, V_TORCH, gpu), *ma = shown(w, V_ASYNC, gpu);
    const figure *tc = shown(w, V_TCUDA, gpu), *cp = shown(w, V_COMPACT, gpu);
    if (td->ok && td->allocated > 0)
      snprintf(c[0], sizeof c[0], "%.1f / %.1f = %.3f", td->reserved / MIB, td->allocated / MIB,
               (double)td->reserved / (double)td->allocated);
    else if (td->ok)
      snprintf(c[0], sizeof c[0], "%.1f / %.1f", td->reserved / MIB, td->allocated / MIB);
    else
      cell_na(c[0], sizeof c[0], "torch default", td->why);
    add_ooms(c[0], sizeof c[0], td);
    int best = -1;
    const char *why_best = NULL;
    for (int v = V_TORCH; v < V_TORCH_END; v++) {
      const figure *f = shown(w, v, gpu);
      if (f->ok && (best < 0 || f->reserved < w->gpu[best].reserved)) best = v;
      if (!f->ok && !why_best) why_best = f->why;
    }
    if (best >= 0) {
      snprintf(c[1], sizeof c[1], "%s, %.1f", best == V_TORCH ? "default" : g_var[best].label,
               w->gpu[best].reserved / MIB);
      add_ooms(c[1], sizeof c[1], &w->gpu[best]);
      int failed = 0, first = 0;
      for (int v = V_TORCH_FIRST; v < V_TORCH_END; v++) /* candidates that failed where others ran */
        if (!w->gpu[v].ok) {
          int id = note(g_var[v].label, w->gpu[v].why);
          if (!failed++) first = id;
        }
      if (failed) {
        size_t l = strlen(c[1]);
        snprintf(c[1] + l, sizeof c[1] - l, " (%d config(s) failed [%d])", failed, first);
      }
    } else {
      cell_na(c[1], sizeof c[1], "torch best", why_best ? why_best : "no candidates");
    }
    if (ma->ok) {
      snprintf(c[2], sizeof c[2], "%.1f / %.1f", ma->reserved / MIB, ma->allocated / MIB);
      add_ooms(c[2], sizeof c[2], ma);
    } else {
      cell_na(c[2], sizeof c[2], "cudaMallocAsync", ma->why);
    }
    if (tc->ok) {
      snprintf(c[3], sizeof c[3], "%.1f", tc->reserved / MIB);
      add_ooms(c[3], sizeof c[3], tc);
    } else {
      cell_na(c[3], sizeof c[3], "tcuda", tc->why);
    }
    if (cp->ok) {
      snprintf(c[4], sizeof c[4], "%.1f", cp->reserved / MIB);
      add_ooms(c[4], sizeof c[4], cp);
    } else {
      cell_na(c[4], sizeof c[4], "tcuda compact", cp->why);
    }
    /* P: torch default's peak allocated; without it, tcuda's (same rounding, same requests) */
    long long P = -1;
    const char *psrc = "";
    if (td->ok) {
      P = td->allocated;
      psrc = "torch";
    } else if (tc->ok) {
      P = tc->allocated;
      psrc = gpu ? "tcuda" : "tcuda sim";
    }
    double B = P >= 0 ? bound_of(P) : NAN;
    const char *verdict = "NA";
    if (P >= 0) {
      snprintf(c[5], sizeof c[5], "%.1f (P %.1f from %s)", B / MIB, P / MIB, psrc);
      if (cp->ok) {
        int pass = (double)cp->reserved <= B;
        within += pass;
        verdict = pass ? "pass" : "FAIL";
      }
    } else {
      snprintf(c[5], sizeof c[5], "NA");
    }
    printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", w->name, c[0], c[1], c[2], c[3], c[4], c[5], verdict);

    if (gpu && w->gpu[V_TORCH].ok && w->gpu[V_TCUDA].ok) {
      compared++;
      identical += w->gpu[V_TORCH].reserved == w->gpu[V_TCUDA].reserved;
    }
    for (int k = 0; k < 2 && gpu; k++) {
      const figure *g = &w->gpu[k ? V_COMPACT : V_TCUDA], *s = k ? &w->sim_compact : &w->sim_tcuda;
      if (g->ok && s->ok && (g->reserved != s->reserved || g->allocated != s->allocated)) sim_differs++;
    }
  }
  printf("\n");
  for (int i = 0; i < g_nnotes; i++) printf("[%d] %s\n", i + 1, g_notes[i]);

  /* checks beside the table */
  if (gpu) {
    printf("\ntorch-identical check (tcuda peak reserved == torch default's), %d of %d workloads equal\n", identical,
           compared);
    for (int i = 0; i < g_nwl; i++) {
      const workload *w = &g_wl[i];
      const figure *a = &w->gpu[V_TORCH], *b = &w->gpu[V_TCUDA];
      if (!w->err[0] && a->ok && b->ok && a->reserved != b->reserved)
        printf("  DIFFERS %s: torch %lld, tcuda %lld bytes\n", w->name, a->reserved, b->reserved);
    }
    printf("simulated device vs GPU (tcuda and compact peaks): %d figure(s) differ\n", sim_differs);
    for (int i = 0; i < g_nwl && sim_differs; i++) {
      const workload *w = &g_wl[i];
      for (int k = 0; k < 2; k++) {
        const figure *g = &w->gpu[k ? V_COMPACT : V_TCUDA], *s = k ? &w->sim_compact : &w->sim_tcuda;
        if (!w->err[0] && g->ok && s->ok && (g->reserved != s->reserved || g->allocated != s->allocated))
          printf("  %s %s: GPU %lld / %lld, simulated %lld / %lld\n", w->name, k ? "compact" : "tcuda", g->reserved,
                 g->allocated, s->reserved, s->allocated);
      }
    }
  }

  /* RESULT lines (bench/run-gpu) */
  const char *rname = gpu ? "frag" : "frag_sim";
  int have_compact = 0;
  for (int i = 0; i < g_nwl; i++) have_compact |= !g_wl[i].err[0] && shown(&g_wl[i], V_COMPACT, gpu)->ok;
  printf("\n");
  if (have_compact)
    printf("RESULT name=%s metric=workloads_within_bound tcuda=%d ref_name=workloads ref=%d unit=count "
           "target=>=ref (tcuda compact peak reserved <= max(1.10 P, P + 4 MiB) on every workload)\n",
           rname, within, g_nwl);
  else
    printf("RESULT name=%s metric=workloads_within_bound tcuda=NA ref_name=workloads ref=%d unit=count "
           "target=>=ref (tcuda compact unavailable: see the notes)\n", rname, g_nwl);
  if (gpu)
    printf("RESULT name=%s metric=torch_identical_peak_reserved_equal tcuda=%d ref_name=workloads ref=%d unit=count "
           "target=>=ref (info: tcuda torch-identical vs torch default, same policy)\n", rname, identical, compared);
  for (int i = 0; i < g_nwl; i++) {
    const workload *w = &g_wl[i];
    if (w->err[0]) {
      printf("RESULT name=%s metric=compact_peak_reserved:%s tcuda=NA ref_name=bound ref=NA unit=MiB target=<=ref\n",
             rname, w->name);
      continue;
    }
    const figure *td = shown(w, V_TORCH, gpu), *tc = shown(w, V_TCUDA, gpu), *cp = shown(w, V_COMPACT, gpu);
    long long P = td->ok ? td->allocated : tc->ok ? tc->allocated : -1;
    printf("RESULT name=%s metric=compact_peak_reserved:%s", rname, w->name);
    if (cp->ok)
      print_mib("tcuda", (double)cp->reserved);
    else
      printf(" tcuda=NA");
    printf(" ref_name=bound");
    if (P >= 0)
      print_mib("ref", bound_of(P));
    else
      printf(" ref=NA");
    printf(" unit=MiB target=<=ref\n");
    if (td->ok) {
      printf("RESULT name=%s metric=compact_peak_reserved:%s ref_name=torch", rname, w->name);
      print_mib("ref", (double)td->reserved);
      printf(" unit=MiB\n");
    }
    if (shown(w, V_ASYNC, gpu)->ok) {
      printf("RESULT name=%s metric=compact_peak_reserved:%s ref_name=cudaMallocAsync", rname, w->name);
      print_mib("ref", (double)shown(w, V_ASYNC, gpu)->reserved);
      printf(" unit=MiB\n");
    }
  }

  for (int i = 0; i < g_nwl; i++) frag_trace_free(&g_wl[i].t);
  remove_tmpdir();
  free(g_jobs);
  free(g_wl);
  return 0;
}
