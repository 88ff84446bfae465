/* The caching allocator's configuration: TCUDA_ALLOC_CONF (else
 * PYTORCH_CUDA_ALLOC_CONF), in PyTorch's "key:value,key:value" syntax.
 * Everything here is in config.c. */
#ifndef TC_ALLOC_CONFIG_H
#define TC_ALLOC_CONFIG_H
#include "tcuda.h"
#include "core/error.h"
#include <stddef.h>
#include <stdint.h>

/* ---- PyTorch's allocator sizes (docs/allocator.md); the config's
 * defaults and bounds are given in them ---- */
#define TC_MIN_BLOCK_SIZE ((uint64_t)512)
#define TC_SMALL_SIZE ((uint64_t)1 << 20)
#define TC_SMALL_BUFFER ((uint64_t)2 << 20)
#define TC_LARGE_BUFFER ((uint64_t)20 << 20)
#define TC_MIN_LARGE_ALLOC ((uint64_t)10 << 20)
#define TC_ROUND_LARGE ((uint64_t)2 << 20)
#define TC_ROUNDUP_SLOTS 16

/* floor(log2(v)), v > 0: the power-of-two interval of a size */
static inline unsigned tc_log2_floor(uint64_t v) { return 63u - (unsigned)__builtin_clzll(v); }

typedef struct tc_alloc_config {
  uint64_t large_segment_size;           /* the segment of a 1-10 MiB request; default TC_LARGE_BUFFER */
  uint64_t max_split_size;               /* UINT64_MAX when unset; >= large_segment_size */
  uint64_t max_non_split_rounding_size;  /* default large_segment_size, and at least it */
  unsigned roundup_power2_divisions[TC_ROUNDUP_SLOTS]; /* 0 = plain 512 rounding */
  double garbage_collection_threshold;   /* 0 = off */
  double per_process_memory_fraction;    /* [0, 1]; 1 (the default): no limit */
  int expandable_segments;
  int release_lock_on_cudamalloc;
  int policy;                            /* TC_POLICY_TORCH or TC_POLICY_COMPACT */
  int thread_cache;                      /* thread_cache:N, 0 = off (src/alloc/tcache.h) */
  char text[512];                        /* the string it was parsed from */
} tc_alloc_config;

/* ---- the keys (config.c parses and formats through this table; the
 * snapshot writer reports torch's allocator_settings from it) ----
 *
 * X(key, alias, kind, field, snapshot, snapshot_key, example, doc)
 *   key           as written in the config string
 *   alias         torch's ROCm spelling of the same key, or NULL
 *   kind          how the value parses and prints (TC_KEY_<kind> below)
 *   field         the tc_alloc_config member it sets; TC_KEY_IGNORED for
 *                 keys torch accepts for parts tcuda does not have
 *                 (validated, then ignored)
 *   snapshot      position in the snapshot's allocator_settings, which
 *                 follows torch's order; 0: torch does not report it
 *   snapshot_key  its name there
 *   example       a valid value off the default
 *   doc           one line for the documentation
 * Rows are in the order tcuda_allocator_get_config writes them. */
#define TC_ALLOC_CONFIG_KEYS(X)                                                                                      \
  X("backend", NULL, BACKEND, TC_KEY_IGNORED, 0, NULL, "native",                                                     \
    "the allocator implementation; only torch's 'native' is accepted")                                               \
  X("large_segment_size_mb", NULL, SEGMENT_MB, TC_KEY_FIELD(large_segment_size), 0, NULL, "64",                      \
    "the segment a 1-10 MB request gets, and the large pool's expandable page (MB, > 10); default 20")              \
  X("max_split_size_mb", NULL, MB, TC_KEY_FIELD(max_split_size), 1, "max_split_size", "100",                         \
    "cached blocks this large (MB, >= large_segment_size_mb) are never split nor given to smaller requests")        \
  X("max_non_split_rounding_mb", NULL, MB, TC_KEY_FIELD(max_non_split_rounding_size), 0, NULL, "40",                 \
    "a request of max_split_size or more takes a cached block at most this much (MB, >= large_segment_size_mb) larger") \
  X("roundup_power2_divisions", NULL, DIVISIONS, TC_KEY_FIELD(roundup_power2_divisions), 8,                          \
    "roundup_power2_divisions", "[256:4,>:1]",                                                                       \
    "round requests up to one of N steps of their power-of-2 interval: N, or [MB:N,...,>:N]")                        \
  X("garbage_collection_threshold", NULL, FRACTION, TC_KEY_FIELD(garbage_collection_threshold), 2,                   \
    "garbage_collection_threshold", "0.6",                                                                           \
    "above this fraction (0, 1) of the allowed memory, free the oldest unused cached blocks")                        \
  X("expandable_segments", NULL, BOOL, TC_KEY_FIELD(expandable_segments), 3, "expandable_segments", "True",          \
    "True: per-stream segments that grow page by page (cuMem*), not fixed cudaMalloc segments")                      \
  X("release_lock_on_cudamalloc", "release_lock_on_hipmalloc", BOOL, TC_KEY_FIELD(release_lock_on_cudamalloc), 5,    \
    "release_lock_on_cudamalloc", "True", "True: other threads may use the allocator during cudaMalloc")             \
  X("pinned_use_cuda_host_register", "pinned_use_hip_host_register", BOOL, TC_KEY_IGNORED, 6,                        \
    "pinned_use_cuda_host_register", "True", "torch's pinned host allocator: cudaHostRegister; ignored")             \
  X("pinned_num_register_threads", NULL, THREADS, TC_KEY_IGNORED, 4, "pinned_num_register_threads", "8",             \
    "torch's pinned host allocator: threads (a power of 2, <= 128); ignored")                                        \
  X("pinned_reserve_segment_size_mb", NULL, WHOLE, TC_KEY_IGNORED, 0, NULL, "64",                                    \
    "torch's pinned host allocator: a reserved segment (MB); ignored")                                               \
  X("pinned_use_background_threads", NULL, BOOL, TC_KEY_IGNORED, 0, NULL, "True",                                    \
    "torch's pinned host allocator: background threads; ignored")                                                    \
  X("graph_capture_record_stream_reuse", NULL, BOOL, TC_KEY_IGNORED, 7,                                              \
    "graph_capture_record_stream_reuse", "True",                                                                     \
    "torch's graph capture: reuse of record_stream blocks; ignored")                                                 \
  X("per_process_memory_fraction", NULL, UNIT, TC_KEY_FIELD(per_process_memory_fraction), 0, NULL, "0.5",            \
    "the memory fraction each device's allocator starts with, as set_per_process_memory_fraction; [0, 1]")           \
  X("policy", NULL, POLICY, TC_KEY_FIELD(policy), 0, NULL, "compact",                                                \
    "tcuda's placement policy: torch (identical to PyTorch) or compact (pages given back inside segments)")   \
  X("thread_cache", NULL, COUNT, TC_KEY_FIELD(thread_cache), 0, NULL, "16",                                       \
    "tcuda: each thread keeps up to N (<= 256) freed blocks of <= 1 MiB per device, reused without the lock; 0: off")

#define TC_KEY_FIELD(member) offsetof(tc_alloc_config, member)
#define TC_KEY_IGNORED ((size_t)-1)

typedef enum tc_config_kind {
  TC_KEY_BACKEND,   /* "native" */
  TC_KEY_MB,        /* uint64_t bytes, written in MB (>= large_segment_size); UINT64_MAX: unset */
  TC_KEY_SEGMENT_MB, /* uint64_t bytes, written in MB (> 10) when not the default 20 */
  TC_KEY_DIVISIONS, /* unsigned[TC_ROUNDUP_SLOTS]; all 0: off */
  TC_KEY_FRACTION,  /* double in (0, 1); 0: off */
  TC_KEY_UNIT,      /* double in [0, 1]; default 1 */
  TC_KEY_WHOLE,     /* a whole number (only ignored keys have it) */
  TC_KEY_BOOL,      /* int, written True or False */
  TC_KEY_THREADS,   /* a power of 2, <= 128 */
  TC_KEY_POLICY,    /* int, TC_POLICY_*, written by name */
  TC_KEY_COUNT      /* int in [0, 256]; 0: off */
} tc_config_kind;

/* The policy key's values (docs/compact.md). */
enum { TC_POLICY_TORCH = 0, TC_POLICY_COMPACT = 1 };

typedef struct tc_config_key {
  const char *key, *alias;
  tc_config_kind kind;
  size_t field;
  int snapshot;
  const char *snapshot_key, *example, *doc;
} tc_config_key;

/* TC_ALLOC_CONFIG_KEYS as data, in its order. */
extern const tc_config_key tc_alloc_config_keys[];
extern const size_t tc_alloc_config_nkeys;

void tc_alloc_config_default(tc_alloc_config *cfg);
/* Parse `conf` over the defaults. NULL or "" gives the defaults. A malformed
 * value or unknown key fails with TCUDA_ERROR_CONFIG and a message naming
 * the key; *cfg is then unchanged. */
tcuda_status tc_alloc_config_parse(const char *conf, tc_alloc_config *cfg);
/* Like tc_alloc_config_parse, with `source` naming where the string came
 * from in error messages ("PYTORCH_CUDA_ALLOC_CONF: max_split_size_mb: ..."). */
tcuda_status tc_alloc_config_parse_named(const char *source, const char *conf, tc_alloc_config *cfg);
/* The environment's config: TCUDA_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF,
 * else PYTORCH_ALLOC_CONF. */
tcuda_status tc_alloc_config_from_env(tc_alloc_config *cfg);
/* torch's runtime route (_set_allocator_settings): max_split_size,
 * roundup_power2_divisions and garbage_collection_threshold go back to their
 * defaults, the other keys keep *cfg's values, then `conf` is applied. On
 * error *cfg is unchanged. */
tcuda_status tc_alloc_config_update(const char *source, const char *conf, tc_alloc_config *cfg);

/* The settings as a config string that parses back to them ("backend:native,...").
 * Writes at most n bytes, NUL included; returns the length it needed. */
size_t tc_alloc_config_format(const tc_alloc_config *cfg, char *buf, size_t n);

/* For the snapshot's allocator_settings: the key at position pos (1, 2, ...)
 * there, NULL past the last; and a key's value as torch reports it: MB keys
 * in bytes (-1 when unset), booleans 0 or 1, slot `slot` of the divisions,
 * fractions through _real; a key tcuda ignores gives torch's default
 * (False, 1 thread). */
const tc_config_key *tc_alloc_config_snapshot_key(int pos);
int64_t tc_alloc_config_int(const tc_alloc_config *cfg, const tc_config_key *d, int slot);
double tc_alloc_config_real(const tc_alloc_config *cfg, const tc_config_key *d);

#endif
