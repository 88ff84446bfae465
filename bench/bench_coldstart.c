/* bench_coldstart: time from process start to a ready device.
 *
 * The parent takes CLOCK_MONOTONIC just before it spawns a fresh copy of this
 * binary with a role; the child reaches its ready point and prints its own
 * CLOCK_MONOTONIC reading; the parent subtracts (the clock is system-wide).
 * So exec, dynamic loading, driver and context start-up are all counted,
 * and the child's exit is not.
 *
 * Roles:
 *   tcuda     tcuda_init(), then a 1-byte tcuda_malloc (the first allocation)
 *             (without tcuda_malloc in tcuda.h: tcuda_set_device(0) and
 *             tcuda_device_selftest(0))
 *   cudafree  a bare cudaFree(0): the CUDA runtime's own floor
 * Roles alternate, so drift hits both alike. COLDSTART_REPS sets the count
 * (default 15). Target: tcuda within 5 ms of cudaFree(0). The torch column
 * comes from coldstart_torch.py. Prints RESULT lines (format: bench/run-gpu). */
#define _GNU_SOURCE
#include <errno.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "tcuda.h"

extern char **environ;

#define SKIP_CODE 77

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void ready(void) {
  uint64_t t = now_ns();
  printf("READY %llu\n", (unsigned long long)t);
  fflush(stdout);
  /* Skip exit-time teardown: nothing after the ready point is measured. */
  _exit(0);
}

static int child(const char *role) {
  if (!strcmp(role, "tcuda")) {
    tcuda_status s = tcuda_init();
    if (s == TCUDA_ERROR_NOT_AVAILABLE) {
      fprintf(stderr, "tcuda_init: %s\n", tcuda_last_error());
      return SKIP_CODE;
    }
    if (s != TCUDA_SUCCESS) {
      fprintf(stderr, "tcuda_init: %s\n", tcuda_last_error());
      return 1;
    }
#ifdef BENCH_HAVE_TCUDA_MALLOC
    void *p = NULL;
    if (tcuda_malloc(&p, 1) != TCUDA_SUCCESS || !p) {
      fprintf(stderr, "tcuda_malloc: %s\n", tcuda_last_error());
      return 1;
    }
#else
    if (tcuda_set_device(0) != TCUDA_SUCCESS || tcuda_device_selftest(0) != TCUDA_SUCCESS) {
      fprintf(stderr, "tcuda_device_selftest: %s\n", tcuda_last_error());
      return 1;
    }
#endif
    ready();
  } else if (!strcmp(role, "cudafree")) {
    cudaError_t e = cudaFree(0);
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
      fprintf(stderr, "cudaFree(0): %s\n", cudaGetErrorString(e));
      return SKIP_CODE;
    }
    if (e != cudaSuccess) {
      fprintf(stderr, "cudaFree(0): %s\n", cudaGetErrorString(e));
      return 1;
    }
    ready();
  }
  fprintf(stderr, "bench_coldstart: unknown role %s\n", role);
  return 2;
}

/* One spawn; returns milliseconds to READY, or a negative value: -SKIP_CODE
 * when the child says there is no GPU, -1 on other failures. */
static double spawn_once(const char *self, const char *role) {
  int fds[2];
  if (pipe(fds)) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  char *argv[] = {(char *)self, "--child", (char *)role, NULL};
  pid_t pid;
  uint64_t t0 = now_ns();
  int rc = posix_spawn(&pid, self, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc) {
    close(fds[0]);
    fprintf(stderr, "posix_spawn %s: %s\n", self, strerror(rc));
    return -1;
  }
  char buf[512];
  size_t len = 0;
  ssize_t r;
  while (len < sizeof buf - 1 && (r = read(fds[0], buf + len, sizeof buf - 1 - len)) != 0) {
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    len += (size_t)r;
  }
  buf[len] = 0;
  close(fds[0]);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == SKIP_CODE) return -SKIP_CODE;
  unsigned long long t1;
  char *p = strstr(buf, "READY ");
  if (!p || sscanf(p, "READY %llu", &t1) != 1 || t1 < t0) {
    fprintf(stderr, "bench_coldstart: %s child gave no ready time (status %d)\n", role,
            WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    return -1;
  }
  return (double)(t1 - t0) / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc >= 3 && !strcmp(argv[1], "--child")) return child(argv[2]);

  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return fprintf(stderr, "readlink /proc/self/exe failed\n"), 1;
  self[n] = 0;
  int reps = 15;
  const char *e = getenv("COLDSTART_REPS");
  if (e && atoi(e) > 0) reps = atoi(e);
  if (reps > 200) reps = 200;

  /* Warm-up of each role: page cache and driver files, and the GPU check. */
  const char *roles[2] = {"tcuda", "cudafree"};
  for (int k = 0; k < 2; k++) {
    double w = spawn_once(self, roles[k]);
    if (w == -SKIP_CODE) {
      printf("SKIPPED bench_coldstart: no CUDA device\n");
      return 0;
    }
    if (w < 0) {
      printf("bench_coldstart: warm-up of %s failed\n", roles[k]);
    }
  }

  double t[2][200];
  int got[2] = {0, 0};
  for (int i = 0; i < reps; i++) {
    for (int k = 0; k < 2; k++) {
      /* alternate which role goes first */
      int kk = (i & 1) ? 1 - k : k;
      double v = spawn_once(self, roles[kk]);
      if (v >= 0) t[kk][got[kk]++] = v;
    }
  }
  double med[2], lo[2];
  for (int k = 0; k < 2; k++) {
    if (!got[k]) {
      med[k] = lo[k] = -1;
      continue;
    }
    qsort(t[k], (size_t)got[k], sizeof(double), cmp_double);
    med[k] = got[k] % 2 ? t[k][got[k] / 2] : 0.5 * (t[k][got[k] / 2 - 1] + t[k][got[k] / 2]);
    lo[k] = t[k][0];
    printf("bench_coldstart: %-8s n=%d median %.2f ms, min %.2f ms, max %.2f ms\n", roles[k], got[k], med[k],
           lo[k], t[k][got[k] - 1]);
  }
#ifdef BENCH_HAVE_TCUDA_MALLOC
  printf("bench_coldstart: tcuda ready point = tcuda_init + tcuda_malloc(1 byte)\n");
#else
  printf("bench_coldstart: tcuda ready point = tcuda_init + tcuda_set_device(0) + tcuda_device_selftest(0) "
         "(tcuda_malloc not in tcuda.h at build time)\n");
#endif
  char tv[32], rv[32];
  if (med[0] >= 0) snprintf(tv, sizeof tv, "%.2f", med[0]); else snprintf(tv, sizeof tv, "NA");
  if (med[1] >= 0) snprintf(rv, sizeof rv, "%.2f", med[1]); else snprintf(rv, sizeof rv, "NA");
  printf("RESULT name=coldstart metric=start_to_first_alloc_median tcuda=%s ref_name=cudaFree0 ref=%s unit=ms "
         "target=<=ref+5\n", tv, rv);
  if (med[0] >= 0) snprintf(tv, sizeof tv, "%.2f", lo[0]);
  if (med[1] >= 0) snprintf(rv, sizeof rv, "%.2f", lo[1]);
  printf("RESULT name=coldstart metric=start_to_first_alloc_min tcuda=%s ref_name=cudaFree0 ref=%s unit=ms "
         "target=<=ref+5\n", tv, rv);
  return (got[0] && got[1]) ? 0 : 1;
}
