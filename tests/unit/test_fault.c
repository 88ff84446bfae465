/* The fault-injection module (src/core/fault.h) on the CPU. In a build with
 * TCUDA_FAULT_INJECTION: which hits fail for an arm, thread arms apart from
 * process arms, exact counts under 8 threads, the text form and its errors,
 * and TCUDA_FAULT read from the environment. In a build without it: the
 * hooks are the constant 0 and no fault code is linked in. */
#include "harness.h"
#include "core/fault.h"

#ifndef TCUDA_FAULT_INJECTION
_Static_assert(TC_FAULT(TC_FAULT_SEGMENT_ALLOC) == 0, "a hook is the constant 0 without the option");
/* weak: resolves to NULL when nothing defines it */
extern int tc_fault_hit(int point) __attribute__((weak));

static void test_compiled_out(void) {
  CHECK(tc_fault_hit == NULL); /* fault.c compiled to nothing */
  setenv("TCUDA_FAULT", "segment_alloc:1:-1", 1);
  CHECK_EQ_INT(TC_FAULT(TC_FAULT_SEGMENT_ALLOC), 0);
  unsetenv("TCUDA_FAULT");
}

TC_MAIN(T(test_compiled_out))
#else
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

/* The hits of `p` that fail among the next n, as a bit mask (n <= 64). */
static uint64_t pattern(tc_fault_point p, int n) {
  uint64_t m = 0;
  for (int i = 0; i < n; i++)
    if (tc_fault_hit(p)) m |= (uint64_t)1 << i;
  return m;
}

static void test_window(void) {
  tc_fault_reset();
  CHECK_EQ_INT(pattern(TC_FAULT_SEGMENT_ALLOC, 10), 0); /* nothing armed */
  tc_fault_arm(TC_FAULT_SEGMENT_ALLOC, 3, 2);           /* the 3rd and 4th */
  CHECK_EQ_INT(pattern(TC_FAULT_SEGMENT_ALLOC, 8), 0x0c);
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_SEGMENT_ALLOC), 8);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_SEGMENT_ALLOC), 2);
  CHECK_EQ_INT(pattern(TC_FAULT_SEGMENT_ALLOC, 8), 0); /* spent */

  tc_fault_arm(TC_FAULT_MEM_MAP, 2, TC_FAULT_FOREVER);
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_MEM_MAP), 0); /* arming resets the count */
  CHECK_EQ_INT(pattern(TC_FAULT_MEM_MAP, 64), ~(uint64_t)1);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_MEM_MAP), 63);
  CHECK_EQ_INT(pattern(TC_FAULT_MEM_CREATE, 4), 0); /* other points untouched */
  CHECK_EQ_INT(pattern(TC_FAULT_SEGMENT_ALLOC, 4), 0);

  tc_fault_arm(TC_FAULT_MEM_MAP, 1, 1); /* re-arming replaces */
  CHECK_EQ_INT(pattern(TC_FAULT_MEM_MAP, 3), 1);
  tc_fault_arm(TC_FAULT_MEM_MAP, 0, 5); /* nth < 1 disarms */
  CHECK_EQ_INT(pattern(TC_FAULT_MEM_MAP, 3), 0);
  tc_fault_arm(TC_FAULT_MEM_MAP, 1, 0); /* count 0 disarms */
  CHECK_EQ_INT(pattern(TC_FAULT_MEM_MAP, 3), 0);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_MEM_MAP), 0);

  tc_fault_arm(TC_FAULT_NCCL_INIT, 1, TC_FAULT_FOREVER);
  tc_fault_reset();
  CHECK_EQ_INT(pattern(TC_FAULT_NCCL_INIT, 5), 0);
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_NCCL_INIT), 5);

  /* a point out of range is never hit and has no name */
  CHECK_EQ_INT(tc_fault_hit(TC_FAULT_NPOINTS), 0);
  CHECK_EQ_INT(tc_fault_hit((tc_fault_point)-1), 0);
  CHECK(tc_fault_point_name(TC_FAULT_NPOINTS) == NULL);
  CHECK(!strcmp(tc_fault_point_name(TC_FAULT_SEGMENT_ALLOC), "segment_alloc"));
  CHECK(!strcmp(tc_fault_point_name(TC_FAULT_NCCL_INIT), "nccl_init"));
  for (int k = 0; k < TC_FAULT_NPOINTS; k++) CHECK(tc_fault_point_name((tc_fault_point)k) != NULL);
}

/* ---- thread arms ---- */
typedef struct {
  tc_fault_point p;
  int n;
  uint64_t got;
} hitter;

static void *hit_n(void *arg) {
  hitter *h = (hitter *)arg;
  h->got = pattern(h->p, h->n);
  return NULL;
}

static void test_thread_arm(void) {
  tc_fault_reset();
  tc_fault_arm_thread(TC_FAULT_EVENT_RECORD, 2, 2);
  /* another thread passes the point first: it does not fail, and does not
   * advance this thread's count */
  hitter h = {TC_FAULT_EVENT_RECORD, 10, 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, hit_n, &h) == 0);
  pthread_join(t, NULL);
  CHECK_EQ_INT(h.got, 0);
  CHECK_EQ_INT(pattern(TC_FAULT_EVENT_RECORD, 6), 0x06);
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_EVENT_RECORD), 16); /* every thread's hits */
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_EVENT_RECORD), 2);

  /* both kinds armed: a hit fails when either says so */
  tc_fault_arm_thread(TC_FAULT_STREAM_CREATE, 1, 1);
  tc_fault_arm(TC_FAULT_STREAM_CREATE, 3, 1);
  CHECK_EQ_INT(pattern(TC_FAULT_STREAM_CREATE, 4), 0x05);
  /* the process arm counts the other thread's hits too */
  tc_fault_arm(TC_FAULT_STREAM_CREATE, 2, 1);
  h = (hitter){TC_FAULT_STREAM_CREATE, 2, 0};
  CHECK(pthread_create(&t, NULL, hit_n, &h) == 0);
  pthread_join(t, NULL);
  CHECK_EQ_INT(h.got, 0x02);
  CHECK_EQ_INT(pattern(TC_FAULT_STREAM_CREATE, 2), 0);
  tc_fault_reset(); /* the thread arms too */
  tc_fault_arm_thread(TC_FAULT_STREAM_CREATE, 0, 1);
  CHECK_EQ_INT(pattern(TC_FAULT_STREAM_CREATE, 3), 0);
}

/* ---- exact counts under contention ---- */
enum { NTHREADS = 8, PER_THREAD = 20000 };
typedef struct {
  int id;
  long failed;       /* process arm, shared point */
  uint64_t own;      /* thread arm, own point, first 64 hits */
} racer;

static pthread_barrier_t g_bar;

static void *race(void *arg) {
  racer *r = (racer *)arg;
  tc_fault_arm_thread(TC_FAULT_MEM_CREATE, r->id + 1, 3);
  pthread_barrier_wait(&g_bar);
  for (int i = 0; i < PER_THREAD; i++) {
    r->failed += tc_fault_hit(TC_FAULT_ALLOC_EVENT);
    if (i < 64 && tc_fault_hit(TC_FAULT_MEM_CREATE)) r->own |= (uint64_t)1 << i;
  }
  return NULL;
}

static void test_threads_exact(void) {
  tc_fault_reset();
  tc_fault_arm(TC_FAULT_ALLOC_EVENT, 1000, 5000);
  racer r[NTHREADS];
  pthread_t t[NTHREADS];
  CHECK(pthread_barrier_init(&g_bar, NULL, NTHREADS) == 0);
  for (int i = 0; i < NTHREADS; i++) {
    r[i] = (racer){i, 0, 0};
    CHECK(pthread_create(&t[i], NULL, race, &r[i]) == 0);
  }
  long sum = 0;
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(t[i], NULL);
    sum += r[i].failed;
    CHECK_EQ_INT(r[i].own, (uint64_t)7 << i); /* hits id+1 .. id+3 of its own */
  }
  pthread_barrier_destroy(&g_bar);
  CHECK_EQ_INT(sum, 5000);
  CHECK_EQ_INT(tc_fault_hits(TC_FAULT_ALLOC_EVENT), NTHREADS * PER_THREAD);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_ALLOC_EVENT), 5000);
  CHECK_EQ_INT(tc_fault_fired(TC_FAULT_MEM_CREATE), NTHREADS * 3);
  CHECK_EQ_INT(pattern(TC_FAULT_MEM_CREATE, 8), 0); /* the threads' arms died with them */
  tc_fault_reset();
}

/* ---- the text form ---- */
static void test_spec(void) {
  tc_fault_reset();
  CHECK_OK(tc_fault_arm_spec("spec", "segment_alloc:3"));
  CHECK_EQ_INT(pattern(TC_FAULT_SEGMENT_ALLOC, 6), 0x04);
  CHECK_OK(tc_fault_arm_spec("spec", "event_record:1:-1,stream_create:2:2"));
  CHECK_EQ_INT(pattern(TC_FAULT_EVENT_RECORD, 5), 0x1f);
  CHECK_EQ_INT(pattern(TC_FAULT_STREAM_CREATE, 5), 0x06);
  tc_fault_reset();

  CHECK_ERR(tc_fault_arm_spec("TCUDA_FAULT", "bogus:1"), TCUDA_ERROR_INVALID_ARGUMENT,
            "TCUDA_FAULT: 'bogus' is not a fault point (segment_alloc, mem_create, mem_map, alloc_event_record, "
            "event_record, stream_create, nccl_init)");
  CHECK_ERR(tc_fault_arm_spec("s", "segment_alloc"), TCUDA_ERROR_INVALID_ARGUMENT, "has no ':nth'");
  CHECK_ERR(tc_fault_arm_spec("s", "segment_alloc:0"), TCUDA_ERROR_INVALID_ARGUMENT,
            "segment_alloc: nth '0' is not an integer >= 1");
  CHECK_ERR(tc_fault_arm_spec("s", "segment_alloc:x"), TCUDA_ERROR_INVALID_ARGUMENT, "nth 'x'");
  CHECK_ERR(tc_fault_arm_spec("s", "segment_alloc:1:0"), TCUDA_ERROR_INVALID_ARGUMENT, "count '0'");
  CHECK_ERR(tc_fault_arm_spec("s", "segment_alloc:1:-2"), TCUDA_ERROR_INVALID_ARGUMENT, "count '-2'");
  CHECK_ERR(tc_fault_arm_spec("s", "segment_alloc:1:2:3"), TCUDA_ERROR_INVALID_ARGUMENT, "count '2:3'");
  CHECK_ERR(tc_fault_arm_spec("s", "segment_alloc:1,,mem_map:1"), TCUDA_ERROR_INVALID_ARGUMENT, "an item is empty");
  CHECK_ERR(tc_fault_arm_spec("s", ""), TCUDA_ERROR_INVALID_ARGUMENT, "an item is empty");
  CHECK_ERR(tc_fault_arm_spec("s", NULL), TCUDA_ERROR_INVALID_ARGUMENT, "s: spec is NULL");
  char longer[300];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = 0;
  CHECK_ERR(tc_fault_arm_spec("s", longer), TCUDA_ERROR_INVALID_ARGUMENT, "an item is over 127 bytes");
  /* all or nothing: the good item before the bad one is not armed */
  CHECK_ERR(tc_fault_arm_spec("s", "mem_map:1:-1,nope:1"), TCUDA_ERROR_INVALID_ARGUMENT, "'nope'");
  CHECK_EQ_INT(pattern(TC_FAULT_MEM_MAP, 4), 0);
}

/* ---- TCUDA_FAULT, read once in a fresh process ---- */
static int env_child(const char *mode) {
  if (!strcmp(mode, "good")) {
    if (tc_fault_env_error()) return 1;
    if (pattern(TC_FAULT_MEM_CREATE, 4) != 0x02) return 2;
    if (pattern(TC_FAULT_NCCL_INIT, 3) != 0x07) return 3;
    if (pattern(TC_FAULT_SEGMENT_ALLOC, 3) != 0) return 4;
    tc_fault_arm(TC_FAULT_NCCL_INIT, 0, 0); /* a call overrides the environment */
    if (pattern(TC_FAULT_NCCL_INIT, 3) != 0) return 5;
    return 0;
  }
  const char *e = tc_fault_env_error();
  if (!e || !strstr(e, "TCUDA_FAULT: 'nope' is not a fault point")) return 11;
  if (pattern(TC_FAULT_MEM_CREATE, 4) != 0) return 12; /* the good item was not armed */
  return 0;
}

static int run_env_child(const char *mode, const char *spec) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setenv("TCUDA_FAULT", spec, 1);
    execl("/proc/self/exe", "test_fault", "--env-child", mode, (char *)NULL);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static void test_environment(void) {
  CHECK_EQ_INT(run_env_child("good", "mem_create:2,nccl_init:1:-1"), 0);
  CHECK_EQ_INT(run_env_child("bad", "mem_create:1:-1,nope:1"), 0);
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--env-child")) return env_child(argv[2]);
  static const tc_test tests[] = {T(test_window), T(test_thread_arm), T(test_threads_exact), T(test_spec),
                                  T(test_environment)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
#endif
