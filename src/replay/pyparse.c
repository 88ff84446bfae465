/* tc_pv_parse: tells a pickle from JSON by the first bytes (sniff.h) and
 * hands the input to the reader for it. Apart from pyval.c, which the
 * readers use, so that no two of these files call each other. */
#include "core/error.h"
#include "pyval.h"
#include "sniff.h"

tcuda_status tc_pv_parse(const char *func, const void *data, size_t len, tc_pv_budget *budget, tc_arena *ar,
                         tc_pv **out) {
  const char *F = func ? func : "tc_pv_parse";
  tcuda_status s = tc_pv_entry_check(F, data, len, ar, out);
  if (s) return s;
  if (!len) return tc_error(TCUDA_ERROR_PARSE, "%s: the file is empty", F);
  switch (tc_sniff(data, len)) {
  case TC_SNIFF_PICKLE: return tc_pv_unpickle(F, data, len, budget, ar, out);
  case TC_SNIFF_JSON: return tc_pv_json(F, data, len, budget, ar, out);
  default: return tc_error(TCUDA_ERROR_PARSE, "%s: the file is neither a pickle (protocol 2 to 5) nor JSON", F);
  }
}
