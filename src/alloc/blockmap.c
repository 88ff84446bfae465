/* The block map's rebuild; the rest of it is static inline in blockmap.h. */
#include "alloc/blockmap.h"
#include <stdlib.h>

/* Rebuild without tombstones, at twice the size when the live entries
 * alone pass 35%. */
tcuda_status tc_ht_rebuild(tc_alloc *a) {
  tc_slot *old = a->ht;
  size_t oldcap = a->ht_cap;
  size_t cap = (a->ht_len + 1) * 20 > oldcap * 7 ? oldcap * 2 : oldcap;
  tc_slot *nt = (tc_slot *)calloc(cap, sizeof *nt);
  if (!nt) return host_oom();
  a->ht = nt;
  if (cap != oldcap) a->ht_bits++;
  a->ht_cap = cap;
  a->ht_len = 0;
  a->ht_tombs = 0;
  for (size_t i = 0; i < oldcap; i++)
    if (old[i].key > HT_TOMB) ht_put(a, old[i].key, old[i].b);
  free(old);
  return TCUDA_SUCCESS;
}
