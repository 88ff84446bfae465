/* Reports (report.c): pure functions of a stats struct or a snapshot, for
 * memory_summary(), memory_stats() as JSON and replay's checkpoints. Each
 * returns a string the caller frees; NULL for a NULL argument, or on host
 * OOM with the thread's error set. */
#ifndef TC_REPORT_H
#define TC_REPORT_H
#include "tcuda.h"
#include <stdint.h>

/* PyTorch's memory_summary() text with the tcuda title. */
char *tc_report_summary(const tcuda_memory_stats_t *st, int device, int abbreviated);
/* The same; thread_cache > 0 (the allocator's thread_cache:N) adds a header
 * line saying that peaks may exceed the true ones by the bytes cached. */
char *tc_report_summary_tc(const tcuda_memory_stats_t *st, int device, int abbreviated, int thread_cache);
/* memory_stats() as JSON with PyTorch's dotted keys, sorted as torch's dict. */
char *tc_report_stats_json(const tcuda_memory_stats_t *st);
/* The same with window 1: the counters that add up from the start
 * (*.allocated, *.freed, num_*) are null, for a replay of a history whose
 * start was lost. */
char *tc_report_stats_json_window(const tcuda_memory_stats_t *st, int window);
/* The snapshot's segments as a JSON array; stream ids mapped through
 * stream_map(ctx, id) when given (replay prints trace stream numbers). */
char *tc_report_snapshot_json(const tcuda_snapshot_t *s, int64_t (*stream_map)(void *, int64_t), void *ctx);

#endif
