/* Writing an output file so that a failure part-way never leaves a
 * truncated file under the requested name: the bytes go to a temporary
 * beside it, renamed over the target only once all of them are written.
 * Header-only: the library (snapwrite.c) and the CLI (whatif --html,
 * viz -o, snapshot, rand), which uses the public API only, share it. */
#ifndef TC_OUTFILE_H
#define TC_OUTFILE_H
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

typedef struct tc_outfile {
  FILE *f;   /* write here */
  char *tmp; /* the temporary's name */
  char *path;
} tc_outfile;

/* A new file beside path, created exclusively (O_EXCL, O_NOFOLLOW) under an
 * unguessable name, so nothing planted in the directory can redirect the
 * write. Mode 0666 lets the kernel apply the umask (and a default ACL) as
 * for any fopen()ed file; mkstemp's 0600 would need the umask, which a
 * library can only read by changing it under other threads. 0, or -1 with
 * errno set. */
static inline int tc_outfile_open(tc_outfile *o, const char *path) {
  static atomic_uint serial;
  memset(o, 0, sizeof *o);
  size_t cap = strlen(path) + 32;
  o->tmp = (char *)malloc(cap);
  o->path = strdup(path);
  if (!o->tmp || !o->path) {
    free(o->tmp);
    free(o->path);
    errno = ENOMEM;
    return -1;
  }
  int fd = -1;
  errno = EEXIST;
  for (int attempt = 0; attempt < 64 && fd < 0 && errno == EEXIST; attempt++) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
    }
    r ^= (uint64_t)atomic_fetch_add(&serial, 1) * 0x9e3779b97f4a7c15ULL;
    snprintf(o->tmp, cap, "%s.tmp%012llx", path, (unsigned long long)(r & 0xffffffffffffULL));
    fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  }
  if (fd >= 0 && !(o->f = fdopen(fd, "wb"))) {
    int e = errno;
    close(fd);
    unlink(o->tmp);
    errno = e;
    fd = -1;
  }
  if (fd < 0) {
    int e = errno;
    free(o->tmp);
    free(o->path);
    memset(o, 0, sizeof *o);
    errno = e;
    return -1;
  }
  return 0;
}

/* Drop the temporary; the target is untouched. */
static inline void tc_outfile_abort(tc_outfile *o) {
  if (o->f) fclose(o->f);
  if (o->tmp) unlink(o->tmp);
  free(o->tmp);
  free(o->path);
  memset(o, 0, sizeof *o);
}

/* Every byte written: the temporary becomes the target. 0, or -1 with
 * errno set (a write, the close or the rename failed: the temporary is
 * removed and the target untouched). */
static inline int tc_outfile_commit(tc_outfile *o) {
  int bad = fflush(o->f) != 0 || ferror(o->f);
  int err = bad ? (errno ? errno : EIO) : 0;
  if (fclose(o->f) != 0 && !bad) bad = 1, err = errno;
  o->f = NULL;
  if (!bad && rename(o->tmp, o->path) != 0) bad = 1, err = errno;
  if (bad) unlink(o->tmp);
  free(o->tmp);
  free(o->path);
  memset(o, 0, sizeof *o);
  errno = err;
  return bad ? -1 : 0;
}

#endif
