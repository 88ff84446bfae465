/* torch.cuda.nvtx: marks, push/pop ranges and id ranges that may cross
 * threads. NVTX3 is header-only, so ranges reach Nsight Systems with no
 * extra library. The depth is tracked here, per thread: NVTX itself returns
 * -2 ("no tracking") when no tool is attached, which would make the depth
 * useless to callers. */
#include "core/error.h"
#include <nvtx3/nvToolsExt.h>
#include <pthread.h>
#include <stdlib.h>

static _Thread_local int tl_depth;

int tcuda_nvtx_range_push(const char *msg) {
  if (!msg) {
    tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_nvtx_range_push: msg is NULL");
    return -1;
  }
  nvtxRangePushA(msg);
  return tl_depth++;
}

int tcuda_nvtx_range_pop(void) {
  if (tl_depth == 0) {
    tc_error(TCUDA_ERROR_INVALID_STATE, "tcuda_nvtx_range_pop: no range is open on this thread");
    return -1;
  }
  nvtxRangePop();
  return --tl_depth;
}

tcuda_status tcuda_nvtx_mark(const char *msg) {
  TC_CHECK_ARG("tcuda_nvtx_mark", msg, "msg");
  nvtxMarkA(msg);
  return TCUDA_SUCCESS;
}

/* Open start/end ranges, so that ending an unknown or ended id is an error
 * instead of undefined behaviour in the tool. */
typedef struct open_range { uint64_t id; nvtxRangeId_t nvtx; } open_range;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static open_range *g_open;
static size_t g_n, g_cap;
static uint64_t g_next_id = 1;

tcuda_status tcuda_nvtx_range_start(const char *msg, uint64_t *id) {
  static const char *F = "tcuda_nvtx_range_start";
  TC_CHECK_ARG(F, msg, "msg");
  TC_CHECK_ARG(F, id, "id");
  pthread_mutex_lock(&g_mu);
  if (g_n == g_cap) {
    size_t cap = g_cap ? g_cap * 2 : 16;
    open_range *p = realloc(g_open, cap * sizeof *p);
    if (!p) {
      pthread_mutex_unlock(&g_mu);
      return tc_error(TCUDA_ERROR_HOST_OUT_OF_MEMORY, "%s: out of host memory", F);
    }
    g_open = p;
    g_cap = cap;
  }
  g_open[g_n].id = g_next_id++;
  g_open[g_n].nvtx = nvtxRangeStartA(msg);
  *id = g_open[g_n++].id;
  pthread_mutex_unlock(&g_mu);
  return TCUDA_SUCCESS;
}

tcuda_status tcuda_nvtx_range_end(uint64_t id) {
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n; i++) {
    if (g_open[i].id != id) continue;
    nvtxRangeEnd(g_open[i].nvtx);
    g_open[i] = g_open[--g_n];
    pthread_mutex_unlock(&g_mu);
    return TCUDA_SUCCESS;
  }
  pthread_mutex_unlock(&g_mu);
  return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "tcuda_nvtx_range_end: id %llu is not an open range",
                  (unsigned long long)id);
}
