#include "error.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int tc_utf8_len(const unsigned char *p) {
  unsigned c = p[0];
  int n = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (!n || !c) return c ? 0 : 1;
  unsigned v = n == 1 ? c : c & (0x7fu >> n);
  for (int i = 1; i < n; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    v = v << 6 | (p[i] & 0x3f);
  }
  static const unsigned least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < least[n] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0; /* overlong, too big, surrogate */
  return n;
}

const char *tc_printable(const char *in, char *out, size_t n) {
  if (!n) return out;
  size_t o = 0;
  const unsigned char *p = (const unsigned char *)(in ? in : "");
  while (*p) {
    char esc[8];
    int len = tc_utf8_len(p);
    size_t k;
    /* C0 and C1 controls and bytes outside valid UTF-8 are shown, not sent */
    if (len == 0 || *p < 0x20 || *p == 0x7f || (len == 2 && p[0] == 0xc2 && p[1] < 0xa0)) {
      k = (size_t)snprintf(esc, sizeof esc, "\\x%02x", *p);
      len = 1;
    } else {
      memcpy(esc, p, (size_t)len);
      k = (size_t)len;
    }
    if (o + k >= n) break;
    memcpy(out + o, esc, k);
    o += k;
    p += len;
  }
  if (*p && n >= 4) {
    if (o > n - 4) o = n - 4;
    while (o && ((unsigned char)out[o] & 0xc0) == 0x80) o--; /* not inside a character */
    memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o] = 0;
  return out;
}
