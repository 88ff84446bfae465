/* tc_pv_parse: tells a pickle from JSON by the first bytes and hands the
 * input to the reader for it. Apart from pyval.c, which the readers use,
 * so that no two of these files call each other. */
#include "core/error.h"
#include "pyval.h"

tcuda_status tc_pv_parse(const char *func, const void *data, size_t len, tc_pv_budget *budget, tc_arena *ar,
                         tc_pv **out) {
  const char *F = func ? func : "tc_pv_parse";
  TC_CHECK_ARG(F, out, "out");
  *out = NULL;
  TC_CHECK_ARG(F, ar, "ar");
  TC_CHECK_ARG(F, data || !len, "data");
  if (!len) return tc_error(TCUDA_ERROR_PARSE, "%s: the file is empty", F);
  const unsigned char *d = data;
  if (d[0] == 0x80) return tc_pv_unpickle(F, data, len, budget, ar, out);
  size_t i = 0;
  if (len >= 3 && d[0] == 0xef && d[1] == 0xbb && d[2] == 0xbf) i = 3; /* UTF-8 BOM */
  while (i < len && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r')) i++;
  if (i < len && (d[i] == '{' || d[i] == '[')) return tc_pv_json(F, data, len, budget, ar, out);
  return tc_error(TCUDA_ERROR_PARSE, "%s: the file is neither a pickle (protocol 2 to 5) nor JSON", F);
}
