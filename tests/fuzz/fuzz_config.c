/* libFuzzer: the allocator config parser (PYTORCH_CUDA_ALLOC_CONF syntax).
 * A rejected string leaves the config untouched and says why; an accepted
 * one gives a sane config whose rounding is monotonic and idempotent. */
#include "alloc/alloc.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n > 4096) return 0;
  char *s = malloc(n + 1);
  memcpy(s, data, n);
  s[n] = 0;
  tc_alloc_config cfg, before;
  tc_alloc_config_default(&cfg);
  before = cfg;
  tcuda_status st = tc_alloc_config_parse(s, &cfg);
  if (st != TCUDA_SUCCESS) {
    if (st != TCUDA_ERROR_CONFIG && st != TCUDA_ERROR_HOST_OUT_OF_MEMORY)
      FAIL("unexpected status %s for '%s'", tcuda_status_name(st), s);
    if (memcmp(&cfg, &before, sizeof cfg)) FAIL("rejected config '%s' changed *cfg", s);
    if (!tcuda_last_error()[0]) FAIL("rejected config '%s' without a message", s);
    free(s);
    return 0;
  }
  /* parsing is deterministic */
  tc_alloc_config again;
  tc_alloc_config_default(&again);
  if (tc_alloc_config_parse(s, &again) || memcmp(&cfg, &again, sizeof cfg)) FAIL("parse of '%s' not repeatable", s);
  for (int i = 0; i < TC_ROUNDUP_SLOTS; i++) {
    unsigned d = cfg.roundup_power2_divisions[i];
    if (d & (d - 1)) FAIL("'%s': division %u in slot %d is not a power of 2", s, d, i);
  }
  if (cfg.max_split_size != UINT64_MAX && cfg.max_split_size < ((uint64_t)20 << 20))
    FAIL("'%s': max_split_size %llu below 20 MiB", s, (unsigned long long)cfg.max_split_size);
  if (!(cfg.garbage_collection_threshold >= 0.0 && cfg.garbage_collection_threshold < 1.0))
    FAIL("'%s': garbage_collection_threshold %g", s, cfg.garbage_collection_threshold);
  /* round_size: >= n, idempotent, monotonic, on sizes derived from the input */
  uint64_t prev_n = 0, prev_r = 0;
  for (size_t i = 0; i < 24; i++) {
    uint64_t x = 1;
    for (size_t k = 0; k < 8 && n; k++) x = x * 131 + data[(i * 8 + k) % n];
    uint64_t sz = (x % ((uint64_t)1 << (1 + i * 36 / 24))) + 1;
    uint64_t r = tc_alloc_round_size(&cfg, sz);
    if (r < sz) FAIL("'%s': round_size(%llu) = %llu", s, (unsigned long long)sz, (unsigned long long)r);
    if (tc_alloc_round_size(&cfg, r) != r)
      FAIL("'%s': round_size not idempotent at %llu -> %llu", s, (unsigned long long)sz, (unsigned long long)r);
    if (i && ((sz >= prev_n && r < prev_r) || (sz <= prev_n && r > prev_r)))
      FAIL("'%s': round_size not monotonic: %llu -> %llu, %llu -> %llu", s, (unsigned long long)prev_n,
           (unsigned long long)prev_r, (unsigned long long)sz, (unsigned long long)r);
    prev_n = sz;
    prev_r = r;
  }
  free(s);
  return 0;
}
