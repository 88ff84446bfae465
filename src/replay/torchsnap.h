/* A PyTorch memory snapshot as a replayable history (torchsnap.c), its
 * replay on the simulated device (snapreplay.c), and the what-if sweep
 * over configs and limits (whatif.c). docs/whatif.md describes what each
 * part reproduces exactly and what it infers.
 *
 * One device's trace becomes an array of ops. Addresses become dense
 * handle slots, so a replay under another config, which places blocks
 * elsewhere, still frees the right block. Segment entries stay in the
 * array: the replay under the snapshot's own settings places segments where
 * torch's were and tells empty_cache calls (which torch does not record)
 * from the policy's own frees. */
#ifndef TC_TORCHSNAP_H
#define TC_TORCHSNAP_H
#include "alloc/alloc.h"
#include "inspect/jsonwrite.h"
#include "pyval.h"
#include "tcuda.h"
#include <stddef.h>
#include <stdint.h>

typedef enum tc_tsop_kind {
  HOP_ALLOC,      /* slot, size (the request), stream; addr = torch's block */
  HOP_FREE,       /* slot: free_requested with its free_completed right after */
  HOP_FREE_REQ,   /* slot: free_requested whose free_completed comes later (record_stream) */
  HOP_FREE_DONE,  /* slot: that free_completed */
  HOP_OOM,        /* size, stream: a request torch refused; addr = device free bytes */
  HOP_SEG_ALLOC,  /* addr, size: segment_alloc */
  HOP_SEG_FREE,   /* addr, size: segment_free */
  HOP_SEG_MAP,    /* addr, size: segment_map */
  HOP_SEG_UNMAP,  /* addr, size: segment_unmap */
  HOP_SNAPSHOT    /* a memory_snapshot() call */
} tc_tsop_kind;

#define HOP_F_EMPTY_BEFORE 1u /* inferred: empty_cache() ran just before this op */
#define HOP_F_ADAPTIVE 2u     /* HOP_OOM: a library's workspace try that it survived */
#define HOP_F_CAPTURE 4u      /* HOP_ALLOC: the first into a graph's private pool; torch.cuda.graph
                                 calls empty_cache() before it captures */
#define HOP_NO_SLOT UINT32_MAX

typedef struct tc_tsop {
  uint8_t kind, flags;
  uint16_t pool;   /* HOP_ALLOC: 0 = the default pool, k = tc_tsnap.pool_ids[k - 1] */
  uint32_t slot;
  uint64_t stream; /* torch's raw cudaStream_t value */
  uint64_t addr, size;
} tc_tsop;

/* A block live when the (truncated) history begins, in address order. */
typedef struct tc_tsblock {
  uint64_t addr, size, requested;
  uint32_t slot;   /* the handle its later free uses; HOP_NO_SLOT: never freed in the window */
  int pending;     /* freed before the window, its free_completed inside it */
} tc_tsblock;

/* A segment that exists when the history begins (truncated histories). */
typedef struct tc_tsseg {
  uint64_t addr, size, stream;
  int small, expandable;
  size_t first_block, num_blocks; /* into tc_tsnap.blocks */
} tc_tsseg;

typedef struct tc_tsnap {
  tc_tsop *ops;
  size_t num_ops, num_slots, num_requests, num_entries;
  uint32_t *req_op;        /* request index -> op index (alloc and oom entries, in order) */
  uint64_t t0_us, t1_us;   /* first and last entry's time_us (0 when absent) */
  uint64_t *op_time_us;    /* per op, relative to t0 */
  /* frames of requests that have them: an index into frame_lists, which
   * holds each distinct list once (a pickle can share one list among all
   * requests); rendered only where shown (tc_tsnap_frames_json) */
  size_t num_frames;
  uint32_t *frames_req;            /* the requests, ascending */
  uint32_t *frames_list;           /* per such request: its list */
  const struct tc_pv **frame_lists;
  size_t num_frame_lists;
  unsigned char *frame_lib;        /* per list: 0 not known yet, 1 no library's, 2 a library's */
  struct tc_arena *arena;          /* the parsed file, kept while frame_lists point into it */
  int device;
  int truncated;           /* the window does not start from an empty allocator */
  tc_tsseg *segs;           /* truncated: segments at the start */
  size_t num_segs;
  tc_tsblock *blocks;
  size_t num_blocks;
  int has_private_pools;   /* some segment has a segment_pool_id other than (0, 0) */
  uint64_t (*pool_ids)[2]; /* the private pools allocations were routed to */
  size_t num_pools;
  size_t adaptive_ooms;    /* HOP_OOM ops flagged HOP_F_ADAPTIVE */
  size_t recorded_ooms;
  tc_alloc_config cfg;     /* the snapshot's allocator_settings */
  char conf_text[512];     /* the same as a config string ("" = torch's defaults) */
  int num_devices;         /* device_traces' length */
  char where[320];         /* what messages about it start with: "FUNC: PATH" (FUNC for a buffer) */
  tc_pv_budget budget;     /* the work it may cost (pyval.h): spent by the reader and the
                              conversion, then by what is rendered from it (frames, output) */
} tc_tsnap;

/* What one snapshot may cost (a hostile file must cost no more than its
 * size); zeros are the defaults. */
typedef struct tc_tsnap_limits {
  uint64_t max_input;   /* files: the most bytes read; 0: TC_READ_MAX_DEFAULT (readfile.h) */
  uint64_t work_budget; /* the tc_pv_budget limit (pyval.h); 0: the default for the input's size */
} tc_tsnap_limits;

/* The history of `device` (-1: 0) from a snapshot file's bytes (pickle or
 * JSON). lim NULL: the defaults. Errors name func and what is wrong; *h is
 * then zeroed. A snapshot that contradicts itself (segments or blocks listed
 * twice or overlapping, a block outside its segment) is refused. */
tcuda_status tc_tsnap_load(const char *func, const void *data, size_t len, int device, const tc_tsnap_limits *lim,
                           tc_tsnap *h);
/* The same from a file; every message then starts "func: PATH: ". */
tcuda_status tc_tsnap_load_file(const char *func, const char *path, int device, const tc_tsnap_limits *lim,
                                tc_tsnap *h);
void tc_tsnap_free(tc_tsnap *h);
/* At most this many frames of a list are shown, each string cut to this
 * many bytes (at a character's start, "..." added). */
#define TC_TSNAP_MAX_FRAMES 64
#define TC_TSNAP_FRAME_TEXT 256
/* Appends request req's frames to b as a JSON array ("[]" without any),
 * the bytes spent from h->budget (its error when spent). */
tcuda_status tc_tsnap_frames_json(tc_tsnap *h, size_t req, tc_sbuf *b);
/* *lib = 1 when request req's frames point into a library that retries
 * smaller on an OOM: cuDNN, cuBLAS, workspace selection, a convolution.
 * The bytes read are spent from h->budget, once per list (the answer is
 * kept): not thread safe. */
tcuda_status tc_tsnap_request_library(tc_tsnap *h, size_t req, int *lib);
/* Spends n units from h->budget for `what`: its error names the file. */
tcuda_status tc_tsnap_spend(tc_tsnap *h, const char *what, uint64_t n);
/* The stream each slot's record_stream free waits on in a replay (*out:
 * num_slots values, the caller frees it): values h never names, ascending
 * in torch's free_completed order (torchsnap.c says why). */
tcuda_status tc_tsnap_event_streams(const char *func, const tc_tsnap *h, uint64_t **out);

/* ---- snapreplay.c ---- */

#define TC_TSRUN_FOLLOW 2 /* tc_tsrun_opts.exact: follow torch's placements, infer nothing */

typedef struct tc_tsrun_opts {
  const tc_alloc_config *cfg; /* NULL: the snapshot's own (h->cfg) */
  int exact;          /* 1: place segments where torch did and infer empty_cache into the ops'
                         flags; 2 (TC_TSRUN_FOLLOW): place them only; 0: the driver model places them */
  uint64_t capacity;  /* device bytes (0: an H200's) */
  double fraction;    /* set_per_process_memory_fraction; 0: none */
  uint64_t limit;     /* a per-process limit in bytes (fraction = limit / capacity); 0: none */
  int stop_at_oom;    /* end at the first request that fails (min_limit probes) */
  /* checkpoints: called at each HOP_SNAPSHOT and once at the end (last = 1) */
  tcuda_status (*checkpoint)(void *user, tc_alloc *a, int last);
  tcuda_status (*on_create)(void *user, tc_alloc *a); /* before the first op */
  void *user;
  /* each request that fails: its position among the requests, and torch's message */
  void (*on_oom)(void *user, unsigned request, const char *message);
  void *oom_user;
  /* after each op: its index, the requests before it (alloc and oom ops),
   * and the block an alloc op got (0: none); explain.c reads the state */
  tcuda_status (*on_op)(void *user, tc_alloc *a, size_t op, size_t request, uint64_t addr);
  void *op_user;
  /* series: up to series_points maxima and minima of reserved and allocated bytes */
  int series_points;
} tc_tsrun_opts;

typedef struct tc_tsrun_result {
  uint64_t peak_reserved, peak_allocated, peak_segments;
  uint64_t segment_calls, retries, ooms;
  int start_oom;            /* stop_at_oom: the state when the history begins did not fit (without
                               stop_at_oom that is an error) */
  int64_t first_oom;        /* request index, -1: none */
  uint64_t first_oom_size;
  size_t diverged;          /* exact: places where torch's recorded segments could not be followed */
  size_t inferred_empty;    /* exact: empty_cache calls inferred */
  int series_n;
  double *series_t;         /* ms since the first entry */
  uint64_t *series_reserved, *series_allocated;         /* maxima since the previous point */
  uint64_t *series_reserved_min, *series_allocated_min; /* minima over the same ops */
} tc_tsrun_result;

/* One replay. With opts->exact 1 the ops' HOP_F_EMPTY_BEFORE flags are
 * written (h is not const then); later replays, which may run in parallel,
 * read them. */
tcuda_status tc_tsnap_run(const char *func, tc_tsnap *h, const tc_tsrun_opts *opts, tc_tsrun_result *r);
void tc_tsrun_result_free(tc_tsrun_result *r);

#endif
