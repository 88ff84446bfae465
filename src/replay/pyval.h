/* Python values read from untrusted files: a PyTorch memory snapshot as a
 * pickle (unpickle.c) or as JSON (jsonread.c), into one tree.
 *
 * Nothing here executes anything. The pickle reader knows only the opcodes
 * that plain data needs (protocols 2 to 5: dicts, lists, tuples, str,
 * bytes, ints, floats, bool, None and the memo) and refuses every other
 * opcode (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT*, ...)
 * with an error naming it and its offset.
 *
 * Every node lives in one arena, freed at once: a pickle's memo can make
 * one node the child of several, or even of itself (a list appended to
 * itself), so the tree is a graph. Walk it along known keys, never by
 * blind recursion. */
#ifndef TC_PYVAL_H
#define TC_PYVAL_H
#include "tcuda.h"
#include <stddef.h>
#include <stdint.h>

typedef enum tc_pv_kind {
  TC_PV_NONE, TC_PV_BOOL, TC_PV_INT, TC_PV_FLOAT, TC_PV_STR, TC_PV_BYTES, TC_PV_LIST, TC_PV_TUPLE, TC_PV_DICT
} tc_pv_kind;

typedef struct tc_pv tc_pv;
struct tc_pv {
  tc_pv_kind kind;
  uint32_t n; /* STR, BYTES: length in bytes; LIST, TUPLE: items; DICT: pairs */
  union {
    int64_t i;      /* BOOL (0 or 1), INT */
    double f;       /* FLOAT */
    const char *s;  /* STR (valid UTF-8, NUL-terminated, may hold NULs), BYTES */
    tc_pv **items;  /* LIST, TUPLE: n items; DICT: 2n, key then value, in insertion order */
  } u;
};

typedef struct tc_arena tc_arena;
tc_arena *tc_arena_create(void);
void tc_arena_destroy(tc_arena *ar);
/* 16-byte aligned, zeroed; NULL on host OOM. */
void *tc_arena_alloc(tc_arena *ar, size_t n);

/* Limits on hostile input; exceeding one is TCUDA_ERROR_PARSE. */
#define TC_PV_MAX_DEPTH 512 /* nesting of containers (stack marks, JSON brackets) */

/* Work the readers, and what consumes their tree, may do on one input: a
 * unit per value created or visited (a memo reference each time something
 * expands it), per dict key indexed, per block created, per byte rendered.
 * The pickle memo lets a file of a few KB name one value millions of times,
 * so the work, not the size, is what must stay proportional to the input. */
typedef struct tc_pv_budget {
  uint64_t limit; /* units */
  uint64_t used;  /* spent so far */
} tc_pv_budget;
#define TC_PV_WORK_PER_BYTE 32u            /* the default limit: units per input byte ... */
#define TC_PV_WORK_MIN ((uint64_t)1 << 24) /* ... plus this, so that a small input is never short */
/* limit = user when > 0, else TC_PV_WORK_PER_BYTE * len + TC_PV_WORK_MIN. */
void tc_pv_budget_init(tc_pv_budget *b, uint64_t user, size_t len);
/* The error for a spent budget: TCUDA_ERROR_PARSE, naming func and the limit. */
tcuda_status tc_pv_over_budget(const char *func, const tc_pv_budget *b);
/* Spend n units: TCUDA_SUCCESS, or tc_pv_over_budget once more than the
 * limit would be spent. */
static inline tcuda_status tc_pv_spend(const char *func, tc_pv_budget *b, uint64_t n) {
  if (n > b->limit - b->used) return tc_pv_over_budget(func, b);
  b->used += n;
  return TCUDA_SUCCESS;
}

/* Parse len bytes: a pickle when the first byte is PROTO (0x80), else
 * JSON. budget: where the work is counted (NULL: a private
 * one with the default limit for len). On success *out is the top value, allocated in ar. Errors are
 * TCUDA_ERROR_PARSE with a message that starts with func and names what and
 * where (pickle: the opcode by name and its byte offset; JSON: line and
 * column), or TCUDA_ERROR_HOST_OUT_OF_MEMORY. *out is then NULL; what was
 * allocated stays in ar until it is destroyed. */
tcuda_status tc_pv_parse(const char *func, const void *data, size_t len, tc_pv_budget *budget, tc_arena *ar,
                         tc_pv **out);
tcuda_status tc_pv_unpickle(const char *func, const void *data, size_t len, tc_pv_budget *budget, tc_arena *ar,
                            tc_pv **out);
tcuda_status tc_pv_json(const char *func, const void *data, size_t len, tc_pv_budget *budget, tc_arena *ar,
                        tc_pv **out);

/* dict[key] for a STR key; NULL when v is no dict or the key is absent (the
 * last pair wins for duplicate keys, as in Python). A dict of more than
 * TC_PV_INDEX_MIN pairs is searched through an index the reader built once
 * (one dict can be shared through the memo by every entry of a history). */
const tc_pv *tc_pv_get(const tc_pv *v, const char *key);
#define TC_PV_INDEX_MIN 8
/* An INT or BOOL into *out: 1, else 0. */
int tc_pv_as_int(const tc_pv *v, int64_t *out);
/* An INT, BOOL or FLOAT as a double: 1, else 0. */
int tc_pv_as_double(const tc_pv *v, double *out);
/* A STR's text, else NULL. The text may hold NULs: compare it with its
 * length (tc_pv_as_strn, tc_pv_is_str), never as a C string. */
const char *tc_pv_as_str(const tc_pv *v);
/* A STR's text and its length in bytes into *n, else NULL. */
const char *tc_pv_as_strn(const tc_pv *v, size_t *n);
/* 1 when v is a STR equal to lit, NULs and length included; else 0. */
int tc_pv_is_str(const tc_pv *v, const char *lit);
/* LIST or TUPLE: its n and items, 1; else 0. */
int tc_pv_as_seq(const tc_pv *v, tc_pv *const **items, size_t *n);

/* ---- shared by the readers (pyval.c, unpickle.c, jsonread.c) ---- */
/* The length of the longest valid UTF-8 prefix of p[0..n) (RFC 3629: no
 * overlong forms, surrogates or code points past U+10FFFF); n when all of
 * it is valid. */
size_t tc_pv_utf8_valid(const unsigned char *p, size_t n);
/* Item slots (pairs for a DICT) that a LIST or DICT of n items has room
 * for: a power of two from 4, so appends reallocate O(log n) times. */
static inline size_t tc_pv_cap(size_t n) {
  if (n <= 4) return n ? 4 : 0;
  return (size_t)1 << (64 - __builtin_clzll((unsigned long long)(n - 1)));
}

/* The readers' common state: nodes handed out from the arena in blocks
 * (fewer arena calls), the value stack their containers are built on, the
 * work budget, and every dict made (indexed once the input is read). */
#define TC_PV_POOL_NODES 256
typedef struct tc_pv_build {
  tc_arena *ar;
  tc_pv **stack;
  size_t sn, scap;
  tc_pv *pool;
  size_t pool_left;
  tc_pv_budget *budget;
  tc_pv **dicts;
  size_t nd, dcap;
} tc_pv_build;

/* A DICT's item array: room for `slots` pointers after one hidden slot
 * that holds the dict's index (tc_pv_index_dicts); NULL on host OOM. */
tc_pv **tc_pv_dict_items(tc_arena *ar, size_t slots);
/* Remember a new DICT for tc_pv_index_dicts: 1, or 0 on host OOM. */
int tc_pv_track_dict(tc_pv_build *b, tc_pv *d);
/* Index every tracked dict of more than TC_PV_INDEX_MIN pairs (their keys
 * cost a unit each); then frees the list. TCUDA_ERROR_HOST_OUT_OF_MEMORY or
 * the budget's error. */
tcuda_status tc_pv_index_dicts(const char *func, tc_pv_build *b);
/* The readers' entry checks, for tc_pv_parse, tc_pv_json and
 * tc_pv_unpickle alike: *out = NULL, then ar, then data (NULL only when
 * len is 0), each failure an error naming F. */
tcuda_status tc_pv_entry_check(const char *F, const void *data, size_t len, tc_arena *ar, tc_pv **out);
/* Start a reader's state on ar: budget, or *own set up for len when it
 * is NULL, and a first stack block (never NULL, even for an empty MARK).
 * 1, or 0 on host OOM (the caller names its own input in the error). */
int tc_pv_build_start(tc_pv_build *b, tc_arena *ar, tc_pv_budget *budget, tc_pv_budget *own, size_t len);
/* Free what a reader's state holds outside the arena. */
void tc_pv_build_free(tc_pv_build *b);

/* A fresh node of `kind` (other fields zero); NULL on host OOM. */
static inline tc_pv *tc_pv_node(tc_pv_build *b, tc_pv_kind kind) {
  if (!b->pool_left) {
    b->pool = (tc_pv *)tc_arena_alloc(b->ar, TC_PV_POOL_NODES * sizeof(tc_pv));
    if (!b->pool) return NULL;
    b->pool_left = TC_PV_POOL_NODES;
  }
  b->pool_left--;
  tc_pv *v = b->pool++;
  v->kind = kind;
  return v;
}
/* Room for one more value on the stack: 1, or 0 on host OOM. */
int tc_pv_stack_grow(tc_pv_build *b);
/* Push v (NULL: a failed tc_pv_node): 1, or 0 on host OOM. */
static inline int tc_pv_push(tc_pv_build *b, tc_pv *v) {
  if (!v || (b->sn == b->scap && !tc_pv_stack_grow(b))) return 0;
  b->stack[b->sn++] = v;
  return 1;
}

#endif
