#include "error.h"
#include <stdio.h>
#include <stdlib.h>

static _Thread_local char tl_msg[TC_ERRMSG_MAX];
static _Thread_local tcuda_status tl_status;

tcuda_status tc_verror(tcuda_status s, const char *fmt, va_list ap) {
  vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
  tl_status = s;
  return s;
}

tcuda_status tc_error(tcuda_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  tc_verror(s, fmt, ap);
  va_end(ap);
  return s;
}

const char *tcuda_last_error(void) { return tl_msg; }
tcuda_status tcuda_last_status(void) { return tl_status; }
void tcuda_clear_error(void) { tl_msg[0] = 0; tl_status = TCUDA_SUCCESS; }

const char *tcuda_status_name(tcuda_status s) {
  switch (s) {
#define TC_X_NAME(name, value, desc) case name: return #name;
    TCUDA_STATUS_LIST(TC_X_NAME)
#undef TC_X_NAME
  }
  return "TCUDA_STATUS_UNKNOWN";
}

const char *tcuda_status_string(tcuda_status s) {
  switch (s) {
#define TC_X_DESC(name, value, desc) case name: return desc;
    TCUDA_STATUS_LIST(TC_X_DESC)
#undef TC_X_DESC
  }
  return "unknown status";
}

void tcuda_string_free(char *s) { free(s); }
