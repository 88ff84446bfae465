/* Sharing caching-allocator memory with another process: the consumer reads
 * what the producer wrote and writes a result back; a producer free is
 * deferred until the consumer closes, and ipc_collect then returns the
 * memory (the stats show it); a consumer killed mid-use does not leak the
 * block; a handle imports once; forged handles are refused; expandable
 * segments are refused. The
 * consumer is this binary exec'ed with --consumer (a fork after CUDA init
 * cannot use CUDA). */
#include "harness.h"
#include "stream_kernels.h"
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#define N (1u << 20) /* words per buffer: 4 MiB */
#define SEED 1234u
#define SEED2 98765u

typedef struct msg { char cmd; tcuda_ipc_handle_t h; } msg;

static int rd(int fd, void *p, size_t n) {
  for (char *c = p; n;) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return 0;
    c += r;
    n -= (size_t)r;
  }
  return 1;
}
static int wr(int fd, const void *p, size_t n) {
  for (const char *c = p; n;) {
    ssize_t r = write(fd, c, n);
    if (r <= 0) return 0;
    c += r;
    n -= (size_t)r;
  }
  return 1;
}

/* ---- consumer ---- */
static unsigned mismatches(unsigned *p, size_t n, unsigned seed) {
  unsigned *d = NULL, h = ~0u;
  if (tcuda_malloc((void **)&d, sizeof *d)) return ~0u;
  tcuda_stream_t s;
  tcuda_current_stream(-1, &s);
  cudaMemsetAsync(d, 0, sizeof *d, s.handle);
  tct_check(p, n, seed, d, s.handle);
  cudaMemcpyAsync(&h, d, sizeof h, cudaMemcpyDeviceToHost, s.handle);
  cudaStreamSynchronize(s.handle);
  tcuda_free(d);
  return h;
}

static int consumer(int rfd, int wfd) {
  msg m;
  void *held = NULL;
  while (rd(rfd, &m, sizeof m)) {
    char rc = 0;
    void *p = NULL;
    switch (m.cmd) {
    case 'R': /* read the first half, write SEED2 into the second, close */
      if (tcuda_ipc_import(&m.h, &p)) { rc = 1; break; }
      if (m.h.size < N * sizeof(unsigned)) { rc = 2; break; }
      if (mismatches(p, N / 2, SEED) != 0) { rc = 3; break; }
      {
        tcuda_stream_t s;
        tcuda_current_stream(-1, &s);
        if (tct_fill((unsigned *)p + N / 2, N / 2, SEED2, s.handle) != cudaSuccess) { rc = 4; break; }
      }
      if (tcuda_ipc_close(p)) rc = 5; /* close synchronises the stream */
      break;
    case 'H': /* import and hold */
      rc = tcuda_ipc_import(&m.h, &held) ? 1 : 0;
      break;
    case 'C':
      rc = tcuda_ipc_close(held) ? 1 : 0;
      held = NULL;
      break;
    case 'T': /* a second import of the same handle fails */
      if (tcuda_ipc_import(&m.h, &p)) { rc = 1; break; }
      {
        void *q = NULL;
        tcuda_status s = tcuda_ipc_import(&m.h, &q);
        if (s != TCUDA_ERROR_INVALID_STATE || !strstr(tcuda_last_error(), "already imported")) rc = 2;
        if (q) rc = 3;
      }
      if (tcuda_ipc_close(p)) rc = 4;
      break;
    case 'X': /* a forged handle is refused with INVALID_ARGUMENT, nothing opened */
      if (tcuda_ipc_import(&m.h, &p) != TCUDA_ERROR_INVALID_ARGUMENT) rc = 1;
      else if (p) rc = 2;
      else if (!strstr(tcuda_last_error(), "past the shared allocation") && !strstr(tcuda_last_error(), "token"))
        rc = 3;
      break;
    case 'S': /* import, answer, then hang until killed */
      rc = tcuda_ipc_import(&m.h, &held) ? 1 : 0;
      wr(wfd, &rc, 1);
      for (;;) pause();
    case 'Q':
      return 0;
    default:
      rc = 99;
    }
    if (!wr(wfd, &rc, 1)) return 1;
  }
  return 0;
}

/* ---- producer ---- */
static pid_t spawn(int *to, int *from) {
  int down[2], up[2];
  if (pipe(down) || pipe(up)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    char a[16], b[16];
    snprintf(a, sizeof a, "%d", down[0]);
    snprintf(b, sizeof b, "%d", up[1]);
    execl("/proc/self/exe", "test_ipc", "--consumer", a, b, (char *)NULL);
    _exit(127);
  }
  close(down[0]);
  close(up[1]);
  *to = down[1];
  *from = up[0];
  return pid;
}

static char ask(int to, int from, char cmd, const tcuda_ipc_handle_t *h) {
  msg m;
  memset(&m, 0, sizeof m);
  m.cmd = cmd;
  if (h) m.h = *h;
  char rc = 100;
  if (!wr(to, &m, sizeof m) || !rd(from, &rc, 1)) return 101;
  return rc;
}

static int64_t allocated(void) {
  int64_t b = -1;
  tcuda_memory_allocated(0, &b);
  return b;
}

static int shm_files_of(pid_t pid) {
  char prefix[48];
  snprintf(prefix, sizeof prefix, "tcuda-ipc-%d-", (int)pid);
  DIR *d = opendir("/dev/shm");
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
  if (d) closedir(d);
  return n;
}

static void two_processes(void) {
  int to = -1, from = -1;
  pid_t pid = spawn(&to, &from);
  CHECK(pid > 0);
  CHECK_OK(tcuda_set_device(0));
  tcuda_stream_t s;
  CHECK_OK(tcuda_current_stream(0, &s));

  /* 1. data both ways */
  unsigned *buf = NULL;
  CHECK_OK(tcuda_malloc((void **)&buf, N * sizeof *buf));
  CHECK(tct_spin_us(200000, s.handle) == cudaSuccess); /* the consumer must wait for this fill */
  CHECK(tct_fill(buf, N, SEED, s.handle) == cudaSuccess);
  tcuda_ipc_handle_t h;
  CHECK_OK(tcuda_ipc_export(buf, &h));
  CHECK_EQ_INT(h.size, N * sizeof *buf);
  CHECK_EQ_INT(ask(to, from, 'R', &h), 0);
  CHECK_EQ_INT(mismatches(buf + N / 2, N / 2, SEED2), 0);
  CHECK_EQ_INT(mismatches(buf, N / 2, SEED), 0);
  int64_t before = allocated();
  CHECK_OK(tcuda_free(buf)); /* consumer closed already: freed at once */
  CHECK_EQ_INT(allocated(), before - (int64_t)(N * sizeof *buf));

  /* 2. a free while the consumer holds the block is deferred */
  unsigned *b2 = NULL, *other = NULL;
  CHECK_OK(tcuda_malloc((void **)&b2, N * sizeof *b2));
  CHECK(tct_fill(b2, N, SEED, s.handle) == cudaSuccess);
  CHECK_OK(tcuda_ipc_export(b2, &h));
  CHECK_EQ_INT(ask(to, from, 'H', &h), 0);
  before = allocated();
  CHECK_OK(tcuda_free(b2));
  CHECK_EQ_INT(allocated(), before); /* parked, still allocated */
  CHECK_OK(tcuda_malloc((void **)&other, N * sizeof *other));
  CHECK(other != b2); /* never handed out while parked */
  CHECK_OK(tcuda_ipc_collect());
  CHECK_EQ_INT(allocated(), before + (int64_t)(N * sizeof *b2)); /* still held */
  CHECK_EQ_INT(ask(to, from, 'C', NULL), 0);
  CHECK_OK(tcuda_ipc_collect());
  CHECK_EQ_INT(allocated(), before); /* b2 freed, `other` still live */
  CHECK_OK(tcuda_free(other));
  CHECK_EQ_INT(shm_files_of(getpid()), 0); /* nothing exported: file dropped */

  /* 3. a handle imports once */
  unsigned *b3 = NULL;
  CHECK_OK(tcuda_malloc((void **)&b3, 4096));
  CHECK_OK(tcuda_ipc_export(b3, &h));
  CHECK_EQ_INT(ask(to, from, 'T', &h), 0);
  CHECK_EQ_INT(ask(to, from, 'T', &h), 1); /* already imported and released */
  CHECK_OK(tcuda_free(b3));

  /* 4. forged handles: an offset or a size past the shared allocation, or
   * another export's slot, are refused; the genuine handle still imports */
  unsigned *b5 = NULL, *b6 = NULL;
  tcuda_ipc_handle_t h6, f;
  CHECK_OK(tcuda_malloc((void **)&b5, N * sizeof *b5));
  CHECK_OK(tcuda_malloc((void **)&b6, 4096));
  CHECK_OK(tcuda_ipc_export(b5, &h));
  CHECK_OK(tcuda_ipc_export(b6, &h6));
  f = h;
  f.offset += (uint64_t)1 << 40;
  CHECK_EQ_INT(ask(to, from, 'X', &f), 0);
  f = h;
  f.size = (uint64_t)1 << 40;
  CHECK_EQ_INT(ask(to, from, 'X', &f), 0);
  f = h;
  f.ref_slot = h6.ref_slot;
  CHECK_EQ_INT(ask(to, from, 'X', &f), 0);
  CHECK_EQ_INT(ask(to, from, 'T', &h), 0);
  CHECK_EQ_INT(ask(to, from, 'T', &h6), 0);
  CHECK_OK(tcuda_free(b5));
  CHECK_OK(tcuda_free(b6));

  /* 5. the consumer dies holding the block */
  unsigned *b4 = NULL;
  CHECK_OK(tcuda_malloc((void **)&b4, N * sizeof *b4));
  CHECK_OK(tcuda_ipc_export(b4, &h));
  CHECK_EQ_INT(ask(to, from, 'S', &h), 0);
  before = allocated();
  CHECK_OK(tcuda_free(b4));
  CHECK_EQ_INT(allocated(), before); /* parked */
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  CHECK_OK(tcuda_ipc_collect());
  CHECK_EQ_INT(allocated(), before - (int64_t)(N * sizeof *b4));
  CHECK_EQ_INT(shm_files_of(getpid()), 0);
  close(to);
  close(from);
}

static void expandable_refused(void) {
  char *old = NULL;
  CHECK_OK(tcuda_allocator_get_config(&old));
  CHECK_OK(tcuda_allocator_set_config("expandable_segments:True"));
  void *p = NULL;
  CHECK_OK(tcuda_malloc(&p, 64 << 20));
  tcuda_ipc_handle_t h;
  CHECK_ERR(tcuda_ipc_export(p, &h), TCUDA_ERROR_NOT_SUPPORTED, "expandable segment");
  CHECK_OK(tcuda_free(p)); /* not exported: a plain free */
  CHECK_OK(tcuda_empty_cache());
  CHECK_OK(tcuda_allocator_set_config(old));
  tcuda_string_free(old);
  int x;
  CHECK_ERR(tcuda_ipc_export(&x, &h), TCUDA_ERROR_INVALID_POINTER, "not a live allocation");
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--consumer")) return consumer(atoi(argv[2]), atoi(argv[3]));
  tc_require_gpu();
  static const tc_test tests[] = {T(two_processes), T(expandable_refused)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
