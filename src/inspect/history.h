/* Allocation history (a ring buffer fed by tc_alloc_set_trace) and the
 * snapshot document writer (pickle for memory_viz, or JSON).
 *
 * history.c: recorders, the public record/dump API, snapshot on OOM.
 * snapwrite.c:  the document writer (only the pickle opcodes that the
 *            unpickler of torch's MemoryViz viewer understands).
 */
#ifndef TC_HISTORY_H
#define TC_HISTORY_H
#include "alloc/alloc.h"
#include <stddef.h>
#include <stdint.h>

#define TC_HISTORY_DEPTH 24 /* stack frames kept per entry */

typedef struct tc_history_entry {
  uint64_t addr, size, stream;
  int64_t time_us;
  uint64_t ctx;    /* the recording thread's context id (0: none); see tc_history_ctx_* */
  uint8_t action;  /* tc_trace_action */
  uint8_t nframes; /* 0 without stacks */
  uint8_t held;    /* ctx was retained through the hooks: release it when the entry goes */
  uint8_t framed;  /* carries a context, as torch's entry does: the snapshot writes its "frames" */
} tc_history_entry;

/* One recorder. Its tc_history_trace is a tc_trace_fn: pass the recorder
 * as ctx to tc_alloc_set_trace. */
typedef struct tc_history tc_history;
/* max_entries 0: unbounded. stacks: 0 none, or torch's context as in
 * tcuda_memory_record_history: 1 all, 2 alloc, 3 state. */
tcuda_status tc_history_create(size_t max_entries, int stacks, tc_history **out);
void tc_history_destroy(tc_history *h);
void tc_history_trace(void *ctx, tc_trace_action action, uint64_t addr, uint64_t size, uint64_t stream);
/* Change the limit (keeps the newest entries) and stacks. */
tcuda_status tc_history_configure(tc_history *h, size_t max_entries, int stacks);

/* A copy of the entries, oldest first; pcs holds TC_HISTORY_DEPTH slots per
 * entry (NULL without stacks). After the n entries of the trace, e and pcs
 * hold nlive more: one "alloc" per live block whose allocation stack was
 * kept, in no order (not part of the trace). live_kept: stacks were on, so
 * those are every live block's that has one. */
typedef struct tc_history_copy {
  tc_history_entry *e;
  void **pcs;
  size_t n;
  size_t nlive;
  int live_kept;
} tc_history_copy;
tcuda_status tc_history_copy_take(tc_history *h, tc_history_copy *out);
void tc_history_copy_free(tc_history_copy *c);

/* The document torch's _snapshot() returns. */
typedef struct tc_snapshot_doc {
  const tcuda_snapshot_t *snap;       /* segments, sorted by device then address */
  int num_devices;                    /* length of device_traces */
  const tc_history_copy *traces;      /* [num_devices]; NULL or n == 0 for none */
  const tc_alloc_config *cfg;         /* allocator_settings */
  const char *conf_text;              /* PYTORCH_CUDA_ALLOC_CONF value ("" if none) */
  /* Stream keys -> the numbers shown; NULL leaves them as they are. */
  int64_t (*seg_stream)(void *ctx, int64_t key);
  int64_t (*trace_stream)(void *ctx, int64_t key);
  void *stream_ctx;
} tc_snapshot_doc;

/* Write the document to `path` (through a temporary file, renamed when
 * complete). json 0: pickle protocol 4; 1: JSON. Errors name func. */
tcuda_status tc_snapshot_doc_write(const char *func, const tc_snapshot_doc *doc, const char *path, int json);
/* The same into memory (caller frees *out). */
tcuda_status tc_snapshot_doc_encode(const char *func, const tc_snapshot_doc *doc, int json, char **out,
                                    size_t *len);

/* Context ids in entries (tcuda_history_set_thread_context): each id kept
 * in a ring holds one retain, given back when the entry leaves the ring. */
void tc_history_ctx_release(uint64_t ctx);

/* ---- hooks for api.c ---- */
/* Call when the public allocator of `device` is created (under api.c's
 * lock is fine). stream_id maps a raw stream key to tcuda_stream_t.id (NULL:
 * keys as they are). If history is on for the device, tracing starts. */
void tc_history_attach(tc_alloc *a, int device, int64_t (*stream_id)(uint64_t key));
/* Call after an allocation on `device` failed with OOM, outside the
 * allocator's lock. With TCUDA_OOM_SNAPSHOT set, writes the snapshot there
 * and returns "; memory snapshot written to PATH" (or "; memory snapshot
 * to PATH failed: ..."); otherwise "". The string is thread-local, valid
 * until the thread's next call. The thread's last error is left as it was. */
const char *tc_history_on_oom(int device, size_t requested);

/* ---- internals behind the public functions (tests call them directly,
 * as they need no device) ---- */
/* record_history for a resolved device. */
tcuda_status tc_history_record(const char *func, int device, int enabled, size_t max_entries, int stacks);
/* tcuda_memory_history for a resolved device. */
tcuda_status tc_history_entries(const char *func, int device, tcuda_history_entry_t **entries, size_t *count);
/* Write every attached device's segments and history to path. */
tcuda_status tc_history_dump(const char *func, const char *path, int json);
/* Forget an attached allocator (tests destroy theirs). */
void tc_history_detach(tc_alloc *a);

#endif
