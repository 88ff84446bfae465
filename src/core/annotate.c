#include "annotate.h"
#include <nvtx3/nvToolsExt.h>
#include <stdlib.h>
#include <string.h>

int tc_annotate_enabled = -1;

int tc_annotate_check(void) {
  const char *v = getenv("TCUDA_NVTX");
  int on = v && (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "True"));
  __atomic_store_n(&tc_annotate_enabled, on, __ATOMIC_RELAXED);
  return on;
}

void tc_annotate_push(const char *name) { nvtxRangePushA(name); }
void tc_annotate_pop(void) { nvtxRangePop(); }
