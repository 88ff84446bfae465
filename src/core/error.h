/* Thread-local error state. Pure C: the allocator policy uses it too. */
#ifndef TC_ERROR_H
#define TC_ERROR_H
#include "tcuda.h"
#include <stdarg.h>

#define TC_ERRMSG_MAX 4096

/* Record status and message for this thread; returns s so callers can write
 * `return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "f: size is 0");` */
tcuda_status tc_error(tcuda_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
tcuda_status tc_verror(tcuda_status s, const char *fmt, va_list ap);

/* Guard for a NULL out-pointer argument. */
#define TC_CHECK_ARG(func, cond, name)                                                   \
  do {                                                                                   \
    if (!(cond)) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s is NULL", func, name); \
  } while (0)

#endif
