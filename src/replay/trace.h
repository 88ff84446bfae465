/* Allocation traces for replay: parsing and validation.
 *
 * One op per line; '#' starts a comment; blank lines are fine.
 *   a ID SIZE [STREAM]   allocate SIZE bytes as handle ID on stream STREAM
 *                        (0 = default stream, k > 0 = the k-th side stream)
 *   f ID                 free handle ID
 *   c                    checkpoint: record stats and segments
 *   e                    empty_cache
 *   r                    reset peak stats
 * The parser checks the whole trace before anything runs (unknown or
 * duplicate live ids included), so a replay never stops half-way on bad
 * input: a trace that parses replays to the end, a request the device
 * cannot hold being an OOM, not an error. Handles become dense slots: the
 * replay needs no hash map. */
#ifndef TC_TRACE_H
#define TC_TRACE_H
#include "inspect/history.h"
#include "tcuda.h"
#include <stddef.h>
#include <stdint.h>

#define TC_TRACE_MAX_STREAM 1024
/* The largest SIZE: 2^64 - 2 MiB - 1. The allocator rounds a request up to
 * at most a 2 MiB multiple (TC_ROUND_LARGE) before looking at the device,
 * and refuses a size whose rounding would wrap around (an overflow error,
 * not an OOM); every size up to this one is an OOM at worst. */
#define TC_TRACE_MAX_SIZE (UINT64_MAX - ((uint64_t)2 << 20))

typedef struct tc_trace_op {
  char kind;        /* 'a', 'f', 'c', 'e', 'r' */
  uint32_t stream;  /* 'a' only */
  uint32_t line;    /* 1-based source line, for error messages */
  uint64_t id;      /* 'a' and 'f': the trace's handle id */
  uint64_t size;    /* 'a' only */
  size_t slot;      /* 'a' and 'f': dense handle index */
} tc_trace_op;

typedef struct tc_trace {
  tc_trace_op *ops;
  size_t num_ops;
  size_t num_slots;       /* number of 'a' ops */
  size_t num_checkpoints;
  uint32_t max_stream;    /* highest stream number used */
  int first_alloc_stream; /* stream of the first nonzero-size 'a'; -1 if none */
} tc_trace;

/* Parse len bytes of text (need not be NUL-terminated). Errors are
 * TCUDA_ERROR_PARSE with "trace line N: ...", or host OOM; *out is then
 * zeroed and nothing is leaked. */
tcuda_status tc_trace_parse(const char *text, size_t len, tc_trace *out);
void tc_trace_free(tc_trace *t);

/* ---- tracereplay.c ---- */
/* The snapshot at the end of a replay on `a`, with the history `hist`
 * recorded on it, written to path (JSON if it ends in ".json", else a
 * memory_viz pickle); streams through map (NULL: as they are). */
tcuda_status tc_replay_write_history(const char *func, tc_alloc *a, tc_history *hist, int device,
                                     const tc_alloc_config *cfg, const char *conf_text, const char *path,
                                     int64_t (*map)(void *, int64_t), void *ctx);

#endif
