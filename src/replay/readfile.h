/* Reading a whole input file (a snapshot, a trace) that may be hostile:
 * never more than a cap, and a clean error when memory runs out. */
#ifndef TC_READFILE_H
#define TC_READFILE_H
#include "tcuda.h"
#include <stddef.h>
#include <stdint.h>

/* The default cap: far above a real snapshot (docs/performance.md gives
 * the size of a 1M-entry history), and a bound on what a device file such
 * as /dev/zero would feed forever. */
#define TC_READ_MAX_DEFAULT ((uint64_t)1 << 30)

/* "func: PATH" into buf (the path made printable), for messages that name
 * the file: every error about its content then reads "func: PATH: ...". */
const char *tc_read_where(const char *func, const char *path, char *buf, size_t n);

/* The file at path, whole, into *data (malloc'd, NUL-terminated; free it)
 * and *len. At most cap bytes (0: TC_READ_MAX_DEFAULT). "-" reads standard
 * input. A gzip file (by its magic bytes, so .pickle.gz and .json.gz alike)
 * comes back decompressed, and the cap holds for both the file and its
 * decompressed bytes, so the work budgets that scale with *len stay those of
 * the same data uncompressed. Errors, each "WHERE: ...": TCUDA_ERROR_IO
 * (cannot open or read it, or it is larger than the cap, which the message
 * names), TCUDA_ERROR_PARSE (bad gzip data), TCUDA_ERROR_HOST_OUT_OF_MEMORY.
 * *data is then NULL. */
tcuda_status tc_read_file(const char *where, const char *path, uint64_t cap, char **data, size_t *len);

/* gzip's magic bytes at the start of data. */
int tc_is_gzip(const void *data, size_t len);
/* Decompresses gzip data (one or more members) into *out (malloc'd,
 * NUL-terminated) and *out_len, never more than cap bytes (0:
 * TC_READ_MAX_DEFAULT); errors as tc_read_file's. */
tcuda_status tc_gunzip(const char *where, const void *data, size_t len, uint64_t cap, char **out, size_t *out_len);

#endif
