/* Memory history on the real device, through the public API: entries for
 * tcuda_malloc/free with torch's meanings, C stacks, the pickle dump, and
 * the snapshot written on OOM (TCUDA_OOM_SNAPSHOT). Needs api.c to call
 * tc_history_attach / tc_history_on_oom (src/inspect/history.h). */
#define _GNU_SOURCE
#include "harness.h"
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_record_and_entries(void) {
  CHECK_OK(tcuda_memory_record_history(-1, 1, 0, 1));
  void *p = NULL;
  CHECK_OK(tcuda_malloc(&p, 1000));
  CHECK_OK(tcuda_free(p));
  tcuda_history_entry_t *e = NULL;
  size_t n = 0;
  CHECK_OK(tcuda_memory_history(-1, &e, &n));
  size_t ia = n, ir = n, ic = n;
  for (size_t i = 0; i < n; i++) {
    if (e[i].action == TCUDA_HISTORY_ALLOC && e[i].addr == (uint64_t)(uintptr_t)p) ia = i;
    if (e[i].action == TCUDA_HISTORY_FREE_REQUESTED && e[i].addr == (uint64_t)(uintptr_t)p) ir = i;
    if (e[i].action == TCUDA_HISTORY_FREE_COMPLETED && e[i].addr == (uint64_t)(uintptr_t)p) ic = i;
  }
  CHECK(ia < ir && ir < ic && ic < n);
  if (ic < n) {
    CHECK_EQ_INT(e[ia].size, 1000);
    CHECK_EQ_INT(e[ic].size, 1000);
    CHECK(e[ia].num_frames > 0);
  }
  tcuda_memory_history_free(e);
  CHECK_OK(tcuda_memory_record_history(-1, 0, 0, 0));
  CHECK_OK(tcuda_memory_history(-1, &e, &n));
  CHECK(n == 0 && e == NULL);
}

/* Used by memviz_torch.sh: a live allocation with stacks, dumped. */
static void test_dump_for_torch(void) {
  const char *path = getenv("TCUDA_HISTORY_DUMP");
  char def[] = "/tmp/tc_gpu_hist_XXXXXX";
  if (!path) {
    int fd = mkstemp(def);
    close(fd);
    path = def;
  }
  CHECK_OK(tcuda_memory_record_history(-1, 1, 100000, 1));
  void *a = NULL, *b = NULL;
  CHECK_OK(tcuda_malloc(&a, 3 << 20));
  CHECK_OK(tcuda_malloc(&b, 4096));
  CHECK_OK(tcuda_free(b));
  CHECK_OK(tcuda_memory_snapshot_dump(path));
  struct stat st;
  CHECK(stat(path, &st) == 0 && st.st_size > 100);
  CHECK_OK(tcuda_free(a));
  CHECK_OK(tcuda_memory_record_history(-1, 0, 0, 0));
  if (path == def) unlink(def);
}

static void test_oom_snapshot(void) {
  char path[] = "/tmp/tc_gpu_oom_XXXXXX";
  int fd = mkstemp(path);
  close(fd);
  unlink(path);
  setenv("TCUDA_OOM_SNAPSHOT", path, 1);
  void *p = NULL;
  CHECK_ERR(tcuda_malloc(&p, (size_t)1 << 48), TCUDA_ERROR_OUT_OF_MEMORY, "memory snapshot written to");
  CHECK(strstr(tcuda_last_error(), path) != NULL);
  CHECK(strstr(tcuda_last_error(), "CUDA out of memory") != NULL);
  struct stat st;
  CHECK(stat(path, &st) == 0 && st.st_size > 0);
  unlink(path);
  unsetenv("TCUDA_OOM_SNAPSHOT");
}

int main(int argc, char **argv) {
  tc_require_gpu();
  static const tc_test tests[] = {T(test_record_and_entries), T(test_dump_for_torch), T(test_oom_snapshot)};
  return tc_run(tests, sizeof tests / sizeof *tests, argc, argv);
}
