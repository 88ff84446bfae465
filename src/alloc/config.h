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

typedef struct tc_alloc_config {
  uint64_t max_split_size;               /* UINT64_MAX when unset */
  uint64_t max_non_split_rounding_size;  /* default TC_LARGE_BUFFER */
  unsigned roundup_power2_divisions[TC_ROUNDUP_SLOTS]; /* 0 = plain 512 rounding */
  double garbage_collection_threshold;   /* 0 = off */
  int expandable_segments;
  int release_lock_on_cudamalloc;
  char text[512];                        /* the string it was parsed from */
} tc_alloc_config;

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

#endif
