/* tc_read_file: one read loop for every input file of the replays. */
#include "readfile.h"
#include "core/error.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *tc_read_where(const char *func, const char *path, char *buf, size_t n) {
  char shown[256];
  snprintf(buf, n, "%s: %s", func, tc_printable(path ? path : "(null)", shown, sizeof shown));
  return buf;
}

static tcuda_status read_raw(const char *where, const char *path, uint64_t cap, char **data, size_t *len);

tcuda_status tc_read_file(const char *where, const char *path, uint64_t cap, char **data, size_t *len) {
  tcuda_status s = read_raw(where, path, cap, data, len);
  if (s || !tc_is_gzip(*data, *len)) return s;
  char *z = *data;
  s = tc_gunzip(where, z, *len, cap, data, len);
  free(z);
  return s;
}

/* Standard input stays open: the caller's, not ours. */
static void close_in(FILE *f) {
  if (f != stdin) fclose(f);
}

static tcuda_status read_raw(const char *where, const char *path, uint64_t cap, char **data, size_t *len) {
  *data = NULL;
  *len = 0;
  if (!cap) cap = TC_READ_MAX_DEFAULT;
  if (cap > SIZE_MAX - 1) cap = SIZE_MAX - 1;
  int is_stdin = !strcmp(path, "-");
  FILE *f = is_stdin ? stdin : fopen(path, "rb");
  if (!f) {
    int e = errno; /* kept for callers that report errno (the CLI) */
    tc_error(TCUDA_ERROR_IO, "%s: cannot open: %s", where, strerror(e));
    errno = e;
    return TCUDA_ERROR_IO;
  }
  tcuda_status s = TCUDA_SUCCESS;
  struct stat st;
  size_t n = 0, room = 1 << 16;
  if (!fstat(fileno(f), &st) && S_ISREG(st.st_mode) && st.st_size > 0) {
    if ((uint64_t)st.st_size > cap) goto too_big;
    room = (size_t)st.st_size + 1; /* one read to the end, and one to see it */
  }
  char *p = malloc(room);
  if (!p) goto oom;
  for (;;) {
    if (n == room) {
      /* a failed allocation ends the read: going on would read forever
       * from a device that never ends */
      size_t grow = room > SIZE_MAX / 2 ? SIZE_MAX : room * 2;
      char *q = realloc(p, grow);
      if (!q) goto oom_p;
      p = q;
      room = grow;
    }
    size_t want = room - n;
    if (want > cap + 1 - n) want = cap + 1 - n; /* one byte past the cap tells it is exceeded */
    size_t got = fread(p + n, 1, want, f);
    n += got;
    if (n > cap) {
      free(p);
      goto too_big;
    }
    if (got < want) break;
  }
  if (ferror(f)) {
    s = tc_error(TCUDA_ERROR_IO, "%s: cannot read: %s", where, strerror(errno ? errno : EIO));
    free(p);
    close_in(f);
    return s;
  }
  close_in(f);
  if (n == room) {
    char *q = realloc(p, n + 1);
    if (!q) {
      free(p);
      goto oom_closed;
    }
    p = q;
  }
  p[n] = 0;
  *data = p;
  *len = n;
  return TCUDA_SUCCESS;
too_big:
  close_in(f);
  return tc_error(TCUDA_ERROR_IO, "%s: larger than the input cap of %llu bytes (max_input_bytes, --max-input raises it)",
                  where, (unsigned long long)cap);
oom_p:
  free(p);
oom:
  close_in(f);
oom_closed:
  return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: host out of memory reading the file (%zu bytes read)", where, n);
}

tcuda_status tcuda_input_read(const char *path, uint64_t max_bytes, char **data, size_t *len) {
  static const char *F = "tcuda_input_read";
  TC_CHECK_ARG(F, data, "data");
  *data = NULL;
  TC_CHECK_ARG(F, len, "len");
  *len = 0;
  TC_CHECK_ARG(F, path, "path");
  char where[320];
  return tc_read_file(tc_read_where(F, path, where, sizeof where), path, max_bytes, data, len);
}
