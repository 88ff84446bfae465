/* Thread-local error state. Pure C: the allocator policy uses it too. */
#ifndef TC_ERROR_H
#define TC_ERROR_H
#include "tcuda.h"
#include <stdarg.h>
#include <stddef.h>

#define TC_ERRMSG_MAX 4096

/* Record status and message for this thread; returns s so callers can write
 * `return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "f: size is 0");` */
tcuda_status tc_error(tcuda_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tcuda_status tc_verror(tcuda_status s, const char *fmt, va_list ap);

/* Text from a file or another process, made safe to quote in a message:
 * control bytes (terminal escapes among them) become \xNN, and the copy is
 * cut to fit out[n] with "..." at the end. Returns out. */
const char *tc_printable(const char *in, char *out, size_t n);
/* The length of the valid UTF-8 character at p (1-4; 1 for the NUL), or 0
 * when the bytes there are not one (overlong, surrogate, cut short...). */
int tc_utf8_len(const unsigned char *p);

/* Guard for a NULL out-pointer argument. */
#define TC_CHECK_ARG(func, cond, name)                                                   \
  do {                                                                                   \
    if (!(cond)) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", func, name); \
  } while (0)

#endif
