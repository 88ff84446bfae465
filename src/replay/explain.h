/* Why the memory went where it went (explain.c): in the replay of a torch
 * history under its own config, the live blocks at the instant of peak
 * reserved bytes, of peak allocated bytes and of the first OOM, grouped by
 * the user frames of their allocation stacks, with the cached-but-free
 * bytes split into inactive split blocks and wholly free segments; and the
 * comparison of two snapshots. docs/whatif.md ("What holds the memory")
 * describes the document. */
#ifndef TC_EXPLAIN_H
#define TC_EXPLAIN_H
#include "inspect/jsonwrite.h"
#include "torchsnap.h"

/* At most this many user frames make a group's key, and at most this many
 * are shown for the first OOM's stack; a frame list is read no further
 * than TC_EXPLAIN_SCAN frames. */
#define TC_EXPLAIN_KEY_FRAMES 3
#define TC_EXPLAIN_OOM_FRAMES 16
#define TC_EXPLAIN_SCAN 256

/* Appends the "explain" object for h, replayed under its own config on a
 * device of `capacity` bytes (0: an H200's) under `fraction` (0: none) or,
 * when not 0, a limit of `limit` bytes (as tc_tsrun_opts): two replays. The frames read and the blocks grouped are spent from
 * h->budget. Runs the exact replay itself, so it writes h's inferred
 * empty_cache flags as tc_tsnap_run with exact 1 does. */
tcuda_status tc_explain_json(const char *func, tc_tsnap *h, uint64_t capacity, double fraction, uint64_t limit,
                             tc_sbuf *b);

#endif
