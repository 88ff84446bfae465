/* A consumer process killed (SIGKILL) while it holds an IPC import. The
 * producer's free of the block is parked while the consumer lives; once it
 * is dead, tcuda_ipc_collect returns the block to the producer's cache (the
 * next allocation of that size gets it without cudaMalloc), or, with
 * cudaMalloc failing, the allocator's OOM path collects it and the
 * allocation succeeds. The allocator's books and the shared-memory files
 * are checked after each. The consumer is this binary exec'ed with
 * --consumer (a child forked after CUDA init cannot use CUDA). */
#include "fault_util.h"
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  char cmd;
  tcuda_ipc_handle_t h;
} msg;

static int rd(int fd, void *p, size_t n) {
  for (char *c = (char *)p; n;) {
    ssize_t r = read(fd, c, n);
    if (r <= 0) return 0;
    c += r;
    n -= (size_t)r;
  }
  return 1;
}

static int wr(int fd, const void *p, size_t n) {
  for (const char *c = (const char *)p; n;) {
    ssize_t r = write(fd, c, n);
    if (r <= 0) return 0;
    c += r;
    n -= (size_t)r;
  }
  return 1;
}

/* ---- consumer: 'S' imports, checks the first bytes, answers, then waits
 * to be killed ---- */
static int consumer(int rfd, int wfd) {
  alarm(120); /* never outlive a producer that failed to kill it */
  msg m;
  while (rd(rfd, &m, sizeof m)) {
    char rc = 0;
    void *p = NULL;
    if (m.cmd != 'S') return 2;
    if (tcuda_ipc_import(&m.h, &p)) {
      rc = 1;
    } else {
      unsigned char h[64];
      if (cudaMemcpy(h, p, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess) rc = 2;
      for (size_t i = 0; !rc && i < sizeof h; i++)
        if (h[i] != 0xC5) rc = 3;
    }
    if (!wr(wfd, &rc, 1)) return 1;
    if (rc) return 1;
    for (;;) pause();
  }
  return 0;
}

/* ---- producer ---- */
typedef struct {
  pid_t pid;
  int to, from;
} child;

static child spawn(void) {
  child c = {-1, -1, -1};
  int down[2], up[2];
  if (pipe(down) || pipe(up)) return c;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    char a[16], b[16];
    snprintf(a, sizeof a, "%d", down[0]);
    snprintf(b, sizeof b, "%d", up[1]);
    execl("/proc/self/exe", "fault_test_ipc", "--consumer", a, b, (char *)NULL);
    _exit(127);
  }
  close(down[0]);
  close(up[1]);
  c.pid = pid;
  c.to = down[1];
  c.from = up[0];
  return c;
}

/* Hand h to the consumer, which imports it and holds it; 0 when it did. */
static int hand_over(const child *c, const tcuda_ipc_handle_t *h) {
  msg m;
  memset(&m, 0, sizeof m);
  m.cmd = 'S';
  m.h = *h;
  char rc = 100;
  if (!wr(c->to, &m, sizeof m) || !rd(c->from, &rc, 1)) return 101;
  return rc;
}

static void kill_child(child *c) {
  kill(c->pid, SIGKILL);
  int st = 0;
  CHECK(waitpid(c->pid, &st, 0) == c->pid);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  close(c->to);
  close(c->from);
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

/* An exported block of `size` bytes filled with 0xC5 and held by a
 * consumer that is then killed; the producer freed it first (parked). */
static void *exported_then_orphaned(size_t size) {
  void *b = NULL;
  CHECK_OK(tcuda_malloc(&b, size));
  CHECK(fill_and_check(b, size, 0xC5));
  tcuda_ipc_handle_t h;
  CHECK_OK(tcuda_ipc_export(b, &h));
  child c = spawn();
  CHECK(c.pid > 0);
  CHECK_EQ_INT(hand_over(&c, &h), 0);
  int64_t before = CUR(stats_of(0).allocation[TCUDA_STAT_ALL]);
  CHECK_OK(tcuda_free(b)); /* the consumer holds it: parked, still allocated */
  CHECK_EQ_INT(CUR(stats_of(0).allocation[TCUDA_STAT_ALL]), before);
  CHECK_OK(tcuda_ipc_collect()); /* a live consumer: nothing to collect */
  CHECK_EQ_INT(CUR(stats_of(0).allocation[TCUDA_STAT_ALL]), before);
  CHECK_ALLOC(0, before);
  kill_child(&c);
  CHECK_ALLOC(0, before); /* its death alone changes nothing here */
  return b;
}

static void test_killed_consumer_collect(void) {
  clean_start();
  void *b = exported_then_orphaned(4 * MiB);
  tcuda_memory_stats_t s0 = stats_of(0);
  CHECK_OK(tcuda_ipc_collect());
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(CUR(s.allocation[TCUDA_STAT_ALL]), 0);
  CHECK_EQ_INT(CUR(s.reserved_bytes[TCUDA_STAT_ALL]), 20 * MiB); /* back in the cache, not given to CUDA */
  CHECK_ALLOC(0, 0);
  CHECK_EQ_INT(shm_files_of(getpid()), 0); /* nothing exported: the reference file is gone */
  void *again = NULL;
  CHECK_OK(tcuda_malloc(&again, 4 * MiB));
  CHECK(again == b); /* the cached block itself */
  CHECK_EQ_INT(stats_of(0).num_device_alloc - s0.num_device_alloc, 0);
  CHECK_OK(tcuda_free(again));
  clean_end();
}

/* The consumer is dead and cudaMalloc fails: the OOM path collects the
 * parked block and the retry is served from it. */
static void test_killed_consumer_oom_collect(void) {
  clean_start();
  void *b = exported_then_orphaned(20 * MiB); /* a whole segment: no remainder to serve from */
  tcuda_memory_stats_t s0 = stats_of(0);
  tc_fault_arm(TC_FAULT_SEGMENT_ALLOC, 1, TC_FAULT_FOREVER);
  void *p = NULL;
  CHECK_OK(tcuda_malloc(&p, 20 * MiB));
  CHECK(p == b);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_SEGMENT_ALLOC), 2); /* the call and its retry, before the collect */
  tcuda_memory_stats_t s = stats_of(0);
  CHECK_EQ_INT(s.num_ooms - s0.num_ooms, 1);
  CHECK_EQ_INT(s.num_device_alloc - s0.num_device_alloc, 0);
  CHECK_ALLOC(0, 1);
  CHECK(still(p, 20 * MiB, 0xC5)); /* the same memory, untouched by the dead consumer */
  CHECK_EQ_INT(shm_files_of(getpid()), 0);
  /* with nothing parked, the OOM is reported */
  void *q = (void *)1;
  CHECK_ERR(tcuda_malloc(&q, 20 * MiB), TCUDA_ERROR_OUT_OF_MEMORY, "tcuda_malloc: CUDA out of memory");
  CHECK(q == NULL);
  tc_fault_reset();
  CHECK_OK(tcuda_free(p));
  CHECK_ALLOC(0, 0);
  clean_end();
}

int main(int argc, char **argv) {
  if (argc == 4 && !strcmp(argv[1], "--consumer")) return consumer(atoi(argv[2]), atoi(argv[3]));
  tc_require_gpu();
  static const tc_test tests[] = {T(test_killed_consumer_collect), T(test_killed_consumer_oom_collect)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
