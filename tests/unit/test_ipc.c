/* IPC argument and handle validation without a GPU. */
#include "harness.h"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static tcuda_ipc_handle_t good_looking(void) {
  tcuda_ipc_handle_t h;
  memset(&h, 0, sizeof h);
  h.magic = 0x50494354u;
  h.version = TCUDA_IPC_HANDLE_VERSION;
  h.producer_pid = (int32_t)getpid() + 1;
  snprintf(h.ref_name, sizeof h.ref_name, "/tcuda-ipc-%d-0", (int)h.producer_pid);
  h.size = 4096;
  h.token = 77;
  return h;
}

static void arguments(void) {
  tcuda_ipc_handle_t h;
  int x;
  void *p;
  CHECK_ERR(tcuda_ipc_export(NULL, &h), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_ipc_export: ptr is NULL");
  CHECK_ERR(tcuda_ipc_export(&x, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "handle is NULL");
  CHECK_ERR(tcuda_ipc_import(NULL, &p), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_ipc_import: handle is NULL");
  CHECK_ERR(tcuda_ipc_import(&h, NULL), TCUDA_ERROR_INVALID_ARGUMENT, "ptr is NULL");
  CHECK_ERR(tcuda_ipc_close(NULL), TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_ipc_close: ptr is NULL");
  CHECK_ERR(tcuda_ipc_close(&x), TCUDA_ERROR_INVALID_POINTER, "was not returned by tcuda_ipc_import");
  CHECK_OK(tcuda_ipc_collect()); /* nothing exported: nothing to do */
}

static void handle_validation(void) {
  void *p = (void *)1;
  tcuda_ipc_handle_t h = good_looking();
  h.magic = 0x12345678;
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "not a tcuda IPC handle (magic 0x12345678)");
  CHECK(p == NULL);
  h = good_looking();
  h.version = 99;
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_NOT_SUPPORTED, "handle version 99");
  h = good_looking();
  h.ref_slot = 10000;
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "bad reference slot");
  h = good_looking();
  memset(h.ref_name, 'a', sizeof h.ref_name); /* not terminated */
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "bad reference slot");
  h = good_looking();
  snprintf(h.ref_name, sizeof h.ref_name, "/etc/passwd");
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "bad reference slot");
  h = good_looking();
  h.producer_pid = (int32_t)getpid();
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "exported by this process");
  h = good_looking();
  h.producer_pid += 1; /* the file is another process's */
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "is not producer");
  h = good_looking();
  h.size = 0;
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "do not make a range");
  h = good_looking();
  h.offset = UINT64_MAX - 10;
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "do not make a range");
  h = good_looking();
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_STATE, "cannot open reference file"); /* none */
}

/* A reference file made here stands in for a producer's: the checks on it
 * come before CUDA, so they run on any machine. */
typedef struct { char name[48]; int fd; } fake_file;

static fake_file fake(const tcuda_ipc_handle_t *h, off_t size, mode_t mode) {
  fake_file f;
  snprintf(f.name, sizeof f.name, "%s", h->ref_name);
  shm_unlink(f.name);
  f.fd = shm_open(f.name, O_RDWR | O_CREAT | O_EXCL, 0600);
  CHECK(f.fd >= 0);
  if (f.fd >= 0) {
    CHECK(ftruncate(f.fd, size) == 0);
    CHECK(fchmod(f.fd, mode) == 0);
  }
  return f;
}
static void fake_slot(fake_file *f, uint64_t slot, int64_t state, uint64_t token) {
  int64_t v[2] = {state, (int64_t)token};
  CHECK(pwrite(f->fd, v, sizeof v, (off_t)(slot * sizeof v)) == (ssize_t)sizeof v);
}
static void fake_drop(fake_file *f) {
  close(f->fd);
  shm_unlink(f->name);
}

#define REF_BYTES ((off_t)10000 * 16) /* SLOTS_PER_FILE ipc_slots */

static void forged_reference_files(void) {
  void *p = (void *)1;
  tcuda_ipc_handle_t h = good_looking();
  h.ref_slot = 1000; /* past the first page of the file */
  /* truncated: mapping it whole would fault (SIGBUS) */
  fake_file f = fake(&h, 100, 0600);
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "does not have a reference file's size");
  CHECK(p == NULL);
  fake_drop(&f);
  /* writable by others */
  f = fake(&h, REF_BYTES, 0666);
  fake_slot(&f, 1000, -1, h.token);
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "writable by group or others");
  fake_drop(&f);
  /* another user's file (root can give it away; others cannot test this) */
  f = fake(&h, REF_BYTES, 0600);
  fake_slot(&f, 1000, -1, h.token);
  if (geteuid() == 0) {
    CHECK(fchown(f.fd, 4242, 4242) == 0);
    CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "belongs to another user");
    CHECK(fchown(f.fd, 0, 0) == 0);
  } else {
    TC_SKIP_PART("a file of another user needs root to make");
  }
  /* another export's slot: its token is not the handle's */
  fake_slot(&f, 1000, -1, h.token + 1);
  CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_INVALID_ARGUMENT, "token does not match slot 1000");
  int64_t st[2];
  CHECK(pread(f.fd, st, sizeof st, 1000 * 16) == (ssize_t)sizeof st);
  CHECK_EQ_INT(st[0], -1); /* not claimed */
  /* random bytes in a well-formed envelope never get past the checks */
  unsigned seed = 12345;
  for (int i = 0; i < 2000; i++) {
    tcuda_ipc_handle_t r;
    unsigned char *b = (unsigned char *)&r;
    for (size_t k = 0; k < sizeof r; k++) b[k] = (unsigned char)((seed = seed * 1103515245u + 12345u) >> 16);
    if (i & 1) { /* half keep a valid magic, version and file name */
      r.magic = h.magic;
      r.version = h.version;
      r.producer_pid = h.producer_pid;
      memcpy(r.ref_name, h.ref_name, sizeof r.ref_name);
      r.ref_slot %= 10000;
    }
    p = (void *)1;
    tcuda_status s = tcuda_ipc_import(&r, &p);
    CHECK(s != TCUDA_SUCCESS && p == NULL);
  }
  CHECK(pread(f.fd, st, sizeof st, 1000 * 16) == (ssize_t)sizeof st);
  CHECK_EQ_INT(st[0], -1);
  /* the genuine handle passes every check on the file; then CUDA decides */
  fake_slot(&f, 1000, -1, h.token);
  if (!tcuda_is_available()) {
    CHECK_ERR(tcuda_ipc_import(&h, &p), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_ipc_import");
    int x;
    CHECK_ERR(tcuda_ipc_export(&x, &h), TCUDA_ERROR_NOT_AVAILABLE, "tcuda_ipc_export");
  } else {
    TC_SKIP_PART("the no-CUDA outcome of a well-formed handle: a GPU is present");
  }
  fake_drop(&f);
}

TC_MAIN(T(arguments), T(handle_validation), T(forged_reference_files))
