/* The public report calls: the allocator's stats and snapshot, rendered by
 * report.c. They live here, above the allocator, so that src/alloc/ never
 * calls up into the layer that looks at it. */
#include "alloc/alloc.h"
#include "report.h"
#include <stdlib.h>

tcuda_status tcuda_memory_stats_json(int device, char **json) {
  static const char *F = "tcuda_memory_stats_json";
  TC_CHECK_ARG(F, json != NULL, "json");
  tc_alloc *a;
  tcuda_status s = tc_alloc_of_device(F, &device, &a);
  if (s) return s;
  tcuda_memory_stats_t st;
  tc_alloc_get_stats(a, &st);
  if (!(*json = tc_report_stats_json(&st))) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_memory_summary(int device, int abbreviated, char **out) {
  static const char *F = "tcuda_memory_summary";
  TC_CHECK_ARG(F, out != NULL, "out");
  tc_alloc *a;
  tcuda_status s = tc_alloc_of_device(F, &device, &a);
  if (s) return s;
  tcuda_memory_stats_t st;
  tc_alloc_get_stats(a, &st);
  tc_alloc_config cfg;
  tc_alloc_get_config(a, &cfg);
  if (!(*out = tc_report_summary_tc(&st, device, abbreviated, cfg.thread_cache)))
    return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_memory_snapshot_json(char **out) {
  static const char *F = "tcuda_memory_snapshot_json";
  TC_CHECK_ARG(F, out != NULL, "out");
  tcuda_snapshot_t *snap = NULL;
  tcuda_status s = tcuda_memory_snapshot(&snap);
  if (s) return s;
  *out = tc_report_snapshot_json(snap, NULL, NULL);
  tc_snapshot_free(snap);
  if (!*out) return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
  return TCUDA_SUCCESS;
}
