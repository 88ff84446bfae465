/* Byte counts as people write them ("80GiB", "1.5GB", "0x1000"): one parser
 * for the CLI's options and the Python package's arguments. */
#include "error.h"
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Decimal or 0x hex, no sign, the whole string. */
static int scan_u64(const char *s, uint64_t *v) {
  if (!*s || !isdigit((unsigned char)*s)) return 0;
  int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  if (hex && !isxdigit((unsigned char)s[2])) return 0;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(s, &end, hex ? 16 : 10);
  if (errno || *end) return 0;
  *v = x;
  return 1;
}

static const char *parse(const char *s, uint64_t *v) {
  static const struct { const char *name; uint64_t mult; } units[] = {
      {"B", 1}, {"kB", 1000}, {"KB", 1000}, {"MB", 1000000}, {"GB", 1000000000}, {"TB", 1000000000000},
      {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
  };
  const char *why = "expected a positive byte count, e.g. 150109880320, 80GB or 80GiB";
  uint64_t x;
  if (scan_u64(s, &x)) { /* plain bytes */
    *v = x;
    return x ? NULL : "must be more than 0 bytes";
  }
  /* DIGITS[.DIGITS][ ]UNIT */
  const char *p = s;
  uint64_t whole = 0, frac = 0, scale = 1;
  int digits = 0;
  for (; isdigit((unsigned char)*p); p++, digits++) {
    if (whole > (UINT64_MAX - 9) / 10) return "too large";
    whole = whole * 10 + (uint64_t)(*p - '0');
  }
  if (*p == '.') {
    for (p++; isdigit((unsigned char)*p); p++, digits++) {
      if (scale > UINT64_MAX / 100) return "too many decimals";
      frac = frac * 10 + (uint64_t)(*p - '0');
      scale *= 10;
    }
  }
  if (!digits) return why;
  while (*p == ' ') p++;
  for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
    if (strcmp(p, units[i].name)) continue;
    uint64_t m = units[i].mult;
    if (whole > UINT64_MAX / m) return "too large (more than 2^64-1 bytes)";
    /* frac/scale of m bytes must be whole */
    unsigned __int128 fm = (unsigned __int128)frac * m;
    if (fm % scale) return "not a whole number of bytes";
    uint64_t part = (uint64_t)(fm / scale);
    if (whole * m > UINT64_MAX - part) return "too large (more than 2^64-1 bytes)";
    x = whole * m + part;
    if (!x) return "must be more than 0 bytes";
    *v = x;
    return NULL;
  }
  return *p ? "unknown unit (kB MB GB TB are powers of 1000, KiB MiB GiB TiB powers of 1024)" : why;
}

tcuda_status tcuda_size_parse(const char *text, uint64_t *bytes) {
  static const char *F = "tcuda_size_parse";
  TC_CHECK_ARG(F, text, "text");
  TC_CHECK_ARG(F, bytes, "bytes");
  uint64_t v = 0;
  const char *why = parse(text, &v);
  if (why) {
    char shown[128];
    return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: size '%s': %s", F, tc_printable(text, shown, sizeof shown),
                    why);
  }
  *bytes = v;
  return TCUDA_SUCCESS;
}
