/* Fault injection for tests (fault.h). Built only with TCUDA_FAULT_INJECTION:
 * a release build compiles this file to nothing. */
#include "core/fault.h"

#ifdef TCUDA_FAULT_INJECTION
#include "core/error.h"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const g_names[] = {
    "segment_alloc", "mem_create", "mem_map", "alloc_event_record", "event_record", "stream_create", "nccl_init"};
_Static_assert(sizeof g_names / sizeof *g_names == TC_FAULT_NPOINTS, "a name for every fault point");

/* Each hit takes a unique number from `seen`, so the window decides every
 * hit exactly once however many threads pass. */
typedef struct {
  atomic_int armed;
  atomic_long nth, count, seen, fired;
} gpoint;
static gpoint g_pt[TC_FAULT_NPOINTS];

typedef struct {
  int armed;
  long nth, count, seen;
} tpoint;
static _Thread_local tpoint tl_pt[TC_FAULT_NPOINTS];
static _Thread_local int tl_any; /* some point is armed for this thread */

static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static char g_env_err[256];
static atomic_int g_env_bad;

static int in_window(long n, long nth, long count) { return n >= nth && (count < 0 || n - nth < count); }

static void arm_global(tc_fault_point p, long nth, long count) {
  gpoint *g = &g_pt[p];
  atomic_store(&g->armed, 0);
  atomic_store(&g->nth, nth);
  atomic_store(&g->count, count);
  atomic_store(&g->seen, 0);
  atomic_store(&g->fired, 0);
  atomic_store_explicit(&g->armed, nth >= 1 && count != 0, memory_order_release);
}

/* Parse one "name:nth[:count]" item of n bytes. */
static int parse_item(const char *s, size_t n, tc_fault_point *p, long *nth, long *count, char *why, size_t nwhy) {
  char item[128];
  if (n == 0 || n >= sizeof item) {
    if (n) snprintf(why, nwhy, "an item is over %zu bytes", sizeof item - 1);
    else snprintf(why, nwhy, "an item is empty (expected point:nth[:count])");
    return 0;
  }
  memcpy(item, s, n);
  item[n] = 0;
  char *colon = strchr(item, ':');
  if (!colon) {
    snprintf(why, nwhy, "'%s' has no ':nth' (expected point:nth[:count])", item);
    return 0;
  }
  *colon = 0;
  int found = -1;
  for (int k = 0; k < TC_FAULT_NPOINTS; k++)
    if (!strcmp(item, g_names[k])) found = k;
  if (found < 0) {
    char list[256] = "";
    for (int k = 0; k < TC_FAULT_NPOINTS; k++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "", g_names[k]);
    snprintf(why, nwhy, "'%s' is not a fault point (%s)", item, list);
    return 0;
  }
  char *rest = colon + 1, *end;
  errno = 0;
  long a = strtol(rest, &end, 10), b = 1;
  if (end == rest || errno || a < 1 || (*end && *end != ':')) {
    snprintf(why, nwhy, "%s: nth '%s' is not an integer >= 1", item, rest);
    return 0;
  }
  if (*end == ':') {
    rest = end + 1;
    errno = 0;
    b = strtol(rest, &end, 10);
    if (end == rest || errno || *end || (b < 1 && b != -1)) {
      snprintf(why, nwhy, "%s: count '%s' is not an integer >= 1 or -1 (every hit)", item, rest);
      return 0;
    }
  }
  *p = (tc_fault_point)found;
  *nth = a;
  *count = b;
  return 1;
}

/* All items checked before any is armed. */
static int arm_spec(const char *spec, char *why, size_t nwhy) {
  for (int pass = 0; pass < 2; pass++) {
    const char *s = spec;
    for (;;) {
      const char *e = strchr(s, ',');
      size_t n = e ? (size_t)(e - s) : strlen(s);
      tc_fault_point p;
      long nth, count;
      if (!parse_item(s, n, &p, &nth, &count, why, nwhy)) return 0;
      if (pass) arm_global(p, nth, count);
      if (!e) break;
      s = e + 1;
    }
  }
  return 1;
}

static void env_load(void) {
  const char *v = getenv("TCUDA_FAULT");
  if (!v || !*v) return;
  char why[200];
  if (!arm_spec(v, why, sizeof why)) {
    snprintf(g_env_err, sizeof g_env_err, "TCUDA_FAULT: %s", why);
    atomic_store(&g_env_bad, 1);
  }
}

static inline void env_once(void) { pthread_once(&g_env_once, env_load); }

static int valid(tc_fault_point p) { return (unsigned)p < (unsigned)TC_FAULT_NPOINTS; }

void tc_fault_arm(tc_fault_point p, long nth, long count) {
  env_once();
  if (valid(p)) arm_global(p, nth, count);
}

void tc_fault_arm_thread(tc_fault_point p, long nth, long count) {
  env_once();
  if (!valid(p)) return;
  tl_pt[p] = (tpoint){nth >= 1 && count != 0, nth, count, 0};
  tl_any = 0;
  for (int k = 0; k < TC_FAULT_NPOINTS; k++) tl_any |= tl_pt[k].armed;
}

void tc_fault_reset(void) {
  env_once();
  for (int k = 0; k < TC_FAULT_NPOINTS; k++) {
    arm_global((tc_fault_point)k, 0, 0);
    tl_pt[k] = (tpoint){0, 0, 0, 0};
  }
  tl_any = 0;
}

int tc_fault_hit(tc_fault_point p) {
  if (!valid(p)) return 0;
  env_once();
  int fail = 0;
  if (tl_any && tl_pt[p].armed) {
    tpoint *t = &tl_pt[p];
    fail = in_window(++t->seen, t->nth, t->count);
  }
  gpoint *g = &g_pt[p];
  long n = atomic_fetch_add(&g->seen, 1) + 1;
  if (atomic_load_explicit(&g->armed, memory_order_acquire) &&
      in_window(n, atomic_load_explicit(&g->nth, memory_order_relaxed),
                atomic_load_explicit(&g->count, memory_order_relaxed)))
    fail = 1;
  if (fail) atomic_fetch_add(&g->fired, 1);
  return fail;
}

long tc_fault_hits(tc_fault_point p) { return valid(p) ? atomic_load(&g_pt[p].seen) : 0; }
long tc_fault_fired(tc_fault_point p) { return valid(p) ? atomic_load(&g_pt[p].fired) : 0; }
const char *tc_fault_point_name(tc_fault_point p) { return valid(p) ? g_names[p] : NULL; }

tcuda_status tc_fault_arm_spec(const char *source, const char *spec) {
  env_once();
  const char *src = source ? source : "tc_fault_arm_spec";
  if (!spec) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: spec is NULL", src);
  char why[200];
  if (!arm_spec(spec, why, sizeof why)) return tc_error(TCUDA_ERROR_INVALID_ARGUMENT, "%s: %s", src, why);
  return TCUDA_SUCCESS;
}

const char *tc_fault_env_error(void) {
  env_once();
  return atomic_load(&g_env_bad) ? g_env_err : NULL;
}

#else
typedef int tc_fault_compiled_out; /* ISO C wants a declaration in every file */
#endif
